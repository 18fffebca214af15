#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Top-k on one GPU: torch.topk(x.abs(), k) next to libsparsecoll's exact and
Gaussian-k selection (sparsecoll.Comm.topk) on the same CUDA tensor.

Usage: torch_gpu_topk.py [-n N] [--density D] [--reps R] [--warmup W] [--build DIR]
  -n N         elements (default 25*2^20), float32 N(0, 1)
  --density D  k = max(1, round(D * n)) (default 0.001)
  --reps R     timed runs of each, alternating torch / exact / Gaussian (default 21)
  --warmup W   untimed runs of each first (default 3)
  --build DIR  a configured, built tree: its python/ package and
               .libs/libsparsecoll.so are used (default $SC_BUILD, else .)

Each run is timed with CUDA events on torch's current stream: record, call,
record, wait for the second event. The table gives the median per method and
its ratio to torch.topk. Comm.topk hands the tensor's device pointer to
the library when the library reports a device runtime (sc_cuda_available());
otherwise it selects on a host copy, and the "path" line says so. The outputs
differ in order (torch: by value, ours: by index); the exact selection is
checked to pick the same set of indices as torch.topk (ties at the k-th
magnitude aside, absent from N(0, 1) data in practice).

Without a CUDA device this prints "skipped: no CUDA device" and exits 0.
"""
import argparse
import os
import statistics
import sys


def use_build(build):
    """Imports sparsecoll from a build tree (unless already importable from
    PYTHONPATH with SPARSECOLL_LIBRARY set by the caller)."""
    build = os.path.abspath(build)
    pkg = os.path.join(build, "python")
    if os.path.isdir(os.path.join(pkg, "sparsecoll")):
        sys.path.insert(0, pkg)
    lib = os.path.join(build, ".libs", "libsparsecoll.so")
    if "SPARSECOLL_LIBRARY" not in os.environ and os.path.exists(lib):
        os.environ["SPARSECOLL_LIBRARY"] = lib


def time_ms(torch, fn, reps_out):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    reps_out.append(start.elapsed_time(end))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-n", type=int, default=25 * 2**20)
    ap.add_argument("--density", type=float, default=0.001)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--build", default=os.environ.get("SC_BUILD", "."))
    a = ap.parse_args()
    if a.n < 1 or not (0 < a.density <= 1) or a.reps < 1 or a.warmup < 0:
        ap.error("need n >= 1, 0 < density <= 1, reps >= 1, warmup >= 0")
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA device (torch.cuda.is_available() is False)")
        return 0
    use_build(a.build)
    import sparsecoll
    from sparsecoll import _staging

    n, k = a.n, max(1, round(a.density * a.n))
    dev = torch.device("cuda", torch.cuda.current_device())
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(n, device=dev, generator=g)
    direct = _staging.device_path()
    comm = sparsecoll.Comm(1, sparsecoll.get_unique_id(), 0)  # top-k is local: one rank

    methods = [
        ("torch.topk(|x|)", lambda: torch.topk(x.abs(), k)),
        ("ours exact", lambda: comm.topk(x, k, "exact")),
        ("ours gaussian", lambda: comm.topk(x, k, "gaussian")),
    ]
    times = {name: [] for name, _ in methods}
    outs = {}
    for _ in range(a.warmup):
        for name, fn in methods:
            fn()
    torch.cuda.synchronize()
    for rep in range(a.reps):
        # Alternating, each rep starting with another method: drifts of the
        # clock or of other load touch all three alike.
        for j in range(len(methods)):
            name, fn = methods[(rep + j) % len(methods)]
            outs[name] = time_ms(torch, fn, times[name])

    t_idx = outs["torch.topk(|x|)"].indices.sort().values.to(torch.int64)
    e_idx = outs["ours exact"][0].to(torch.int64)
    same = e_idx.numel() == k and torch.equal(t_idx, e_idx)
    g_count = outs["ours gaussian"][0].numel()

    print("# top-k on %s: n %d float32 N(0,1), k %d (density %g), median of %d runs (CUDA events)"
          % (torch.cuda.get_device_name(dev), n, k, k / n, a.reps))
    print("# path: %s" % ("device pointers (the library has a device runtime)" if direct
                          else "host copies (the library reports no device runtime: sc_cuda_available() is 0)"))
    print("# %-18s %12s %12s %12s" % ("method", "median_ms", "min_ms", "/torch"))
    base = statistics.median(times["torch.topk(|x|)"])
    for name, _ in methods:
        med = statistics.median(times[name])
        print("  %-18s %12.3f %12.3f %12.2f" % (name, med, min(times[name]), med / base))
    print("# exact selection = torch.topk's index set: %s; Gaussian-k returned %d (%.3f k)"
          % ("yes" if same else "NO", g_count, g_count / k))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
