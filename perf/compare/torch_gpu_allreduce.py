#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""All-reduce of CUDA tensors on one GPU shared by P ranks (torch.multiprocessing):
torch.distributed's gloo backend with CUDA tensors, libsparsecoll with device
buffers (sparsecoll.Comm on the CUDA tensor), and libsparsecoll on host buffers
with the device-host copies done by the caller (pinned memory, as a program
must do with a library that takes host memory only).

Usage: torch_gpu_allreduce.py [-n P] [--size BYTES] [--rounds R] [--iters I]
                              [--warmup W] [--nccl] [--build DIR]
  -n P         ranks, all on the current GPU (default 4)
  --size BYTES float32 sum of this many bytes (default 64 MiB; K/M/G suffixes)
  --rounds R   rounds (default 5); each round runs every variant's I timed
               iterations, starting with a different variant each round
  --iters I    timed iterations per variant and round (default 5)
  --warmup W   untimed iterations per variant before the first round (default 2)
  --nccl       also torch's NCCL backend on the same tensors; NCCL may refuse
               ranks that share a GPU, and the table then says so with its
               reason
  --build DIR  a configured, built tree: its python/ package and
               .libs/libsparsecoll.so are used (default $SC_BUILD, else .)

Time: the slowest rank's average per operation within a round (a barrier
starts each variant's share; the GPU is synchronized before and after), the
median over rounds. algbw = size / time (GB = 1e9 B), busbw = algbw x
2(P-1)/P as nccl-tests (perf/README.md, "Bus bandwidth"). Every variant is
checked once on values that depend on the rank. The "ours, device buffers"
row hands device pointers to the library when it reports a device runtime
(sc_cuda_available()); otherwise sparsecoll stages them itself, and the
"path" line says so.

Without a CUDA device this prints "skipped: no CUDA device" and exits 0.
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time

VARIANTS = ["gloo, CUDA tensors", "ours, device buffers", "ours, host buffers + copies"]


def parse_size(s):
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = s.strip().lower().rstrip("b")
    if s and s[-1] in mult:
        return int(s[:-1]) * mult[s[-1]]
    return int(s)


def use_build(build):
    build = os.path.abspath(build)
    pkg = os.path.join(build, "python")
    if os.path.isdir(os.path.join(pkg, "sparsecoll")):
        sys.path.insert(0, pkg)
    lib = os.path.join(build, ".libs", "libsparsecoll.so")
    if "SPARSECOLL_LIBRARY" not in os.environ and os.path.exists(lib):
        os.environ["SPARSECOLL_LIBRARY"] = lib


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port, dev_index):
    import torch
    import torch.distributed as dist

    use_build(a.build)
    import sparsecoll
    from sparsecoll import _staging

    P = a.n
    dev = torch.device("cuda", dev_index)
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=P,
                            timeout=datetime.timedelta(seconds=120))
    uid = [sparsecoll.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    comm = sparsecoll.Comm(P, uid[0], rank)

    count = a.size // 4
    x = torch.zeros(count, device=dev)
    host = torch.empty(count, pin_memory=True)

    def gloo_op():
        dist.all_reduce(x)

    def ours_device():
        comm.allreduce(x)

    def ours_host():
        host.copy_(x, non_blocking=True)
        torch.cuda.current_stream(dev).synchronize()
        comm.allreduce(host)
        x.copy_(host, non_blocking=True)
        torch.cuda.current_stream(dev).synchronize()

    ops = [gloo_op, ours_device, ours_host]
    names = list(VARIANTS)
    refused = None
    if a.nccl:
        def nccl_op():
            dist.all_reduce(x, group=ng)

        try:
            ng = dist.new_group(backend="nccl")
            nccl_op()
            torch.cuda.synchronize(dev)
            err = ""
        except Exception as e:  # NCCL refuses ranks that share a device, among others
            err = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
        flag = torch.tensor([1 if err else 0], dtype=torch.int32)
        dist.all_reduce(flag)
        if flag.item() == 0:
            ops.append(nccl_op)
            names.append("nccl, CUDA tensors")
        else:
            refused = err or "refused on another rank"

    # One checked operation each: rank r contributes r + 1 + (i mod 7).
    i = torch.arange(count, device=dev, dtype=torch.float32)
    want = (P * (P + 1) / 2) + P * torch.remainder(i, 7)
    ok = []
    for op in ops:
        x.copy_(rank + 1 + torch.remainder(i, 7))
        op()
        torch.cuda.synchronize(dev)
        ok.append(bool(torch.equal(x, want)))
    del i, want
    x.zero_()  # sums of zeros stay zero through the timed iterations

    for op in ops:
        for _ in range(a.warmup):
            op()
    torch.cuda.synchronize(dev)
    per_round = [[None] * a.rounds for _ in ops]
    for r in range(a.rounds):
        for j in range(len(ops)):
            v = (r + j) % len(ops)
            dist.barrier()
            torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            for _ in range(a.iters):
                ops[v]()
            torch.cuda.synchronize(dev)
            per_round[v][r] = (time.perf_counter() - t0) / a.iters
    t = torch.tensor(per_round, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # each round: the slowest rank
    okt = torch.tensor([0 if o else 1 for o in ok], dtype=torch.int32)
    dist.all_reduce(okt)
    if rank == 0:
        report(a, torch.cuda.get_device_name(dev), t.tolist(), okt.tolist(), _staging.device_path(), names,
               refused)
    comm.close()
    dist.destroy_process_group()
    if any(okt.tolist()):
        sys.exit(1)


def report(a, gpu, times, wrong, direct, names, refused):
    P = a.n
    factor = 2.0 * (P - 1) / P
    print("# all-reduce of %d B float32 sum, %d ranks on one GPU (%s); time: median over %d rounds of "
          "the slowest rank's average of %d iterations" % (a.size, P, gpu, a.rounds, a.iters))
    print("# busbw = algbw x 2(P-1)/P (nccl-tests); /gloo: time ratio to gloo (< 1: faster)")
    print("# path of 'ours, device buffers': %s" % (
        "device pointers (the library has a device runtime)" if direct
        else "staged by sparsecoll (the library reports no device runtime)"))
    print("# %-28s %10s %11s %11s %7s %6s" % ("variant", "time_ms", "algbw_GB/s", "busbw_GB/s", "/gloo", "check"))
    base = statistics.median(times[0])
    for v, name in enumerate(names):
        med = statistics.median(times[v])
        algbw = a.size / med / 1e9
        print("  %-28s %10.3f %11.3f %11.3f %7.2f %6s" % (name, med * 1e3, algbw, algbw * factor, med / base,
                                                         "ok" if wrong[v] == 0 else "WRONG"))
    if refused is not None:
        print("  %-28s refused: %s" % ("nccl, CUDA tensors", refused))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--size", type=parse_size, default=64 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--nccl", action="store_true")
    ap.add_argument("--build", default=os.environ.get("SC_BUILD", "."))
    a = ap.parse_args()
    if a.n < 2 or a.size < 4 or a.rounds < 1 or a.iters < 1 or a.warmup < 0:
        ap.error("need -n >= 2, --size >= 4, --rounds >= 1, --iters >= 1, --warmup >= 0")
    a.size -= a.size % 4
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("skipped: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA device (torch.cuda.is_available() is False)")
        return 0
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    try:
        mp.spawn(worker, args=(a, free_port(), torch.cuda.current_device()), nprocs=a.n, join=True)
    except Exception as e:  # a worker failed or a check went wrong; its own output says which
        print("torch_gpu_allreduce: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
