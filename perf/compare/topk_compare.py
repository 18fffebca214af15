#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Top-k selection: libsparsecoll's sc_topk (exact and Gaussian) next to
torch.topk, on the same float32 N(0,1) data, in one process, alternating.

Usage: topk_compare.py [-n N] [--density D] [--reps R] [--lib PATH]
  -n N         elements (default 25*2^20)
  --density D  k = max(1, round(D*n)) (default 0.001)
  --reps R     timed repetitions of each, alternating (default 7); median reported
  --torch-threads T  threads torch may use (default: torch's own)
  --lib PATH   libsparsecoll.so (default: .libs/libsparsecoll.so of the build
               directory this runs from, or SC_BUILD's)
torch.topk is timed on |x| (what a top-k sparsifier does: topk of the
magnitudes, then a gather); its time includes the abs. Both outputs are
checked against each other: the exact selection must pick the same set of
indices as torch.topk up to ties at the k-th magnitude.
Needs python3-torch (Debian)."""
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch

SC_FLOAT32 = 8
SC_SELECT_EXACT, SC_SELECT_GAUSSIAN = 0, 1


def find_lib(arg):
    if arg:
        return arg
    build = os.environ.get("SC_BUILD", ".")
    return os.path.join(build, ".libs", "libsparsecoll.so")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-n", type=int, default=25 * 2**20)
    ap.add_argument("--density", type=float, default=0.001)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--lib", default=None)
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch.set_num_threads (0: torch's default); sc_topk uses one thread")
    a = ap.parse_args()
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    lib = ctypes.CDLL(find_lib(a.lib))
    lib.sc_topk.restype = ctypes.c_int
    lib.sc_topk.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t,
                            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.POINTER(ctypes.c_size_t)]
    lib.sc_last_error.restype = ctypes.c_char_p
    n, k = a.n, max(1, round(a.density * a.n))
    torch.manual_seed(1)
    x = torch.randn(n, dtype=torch.float32)
    idx = torch.empty(2 * k, dtype=torch.int32)
    val = torch.empty(2 * k, dtype=torch.float32)
    nnz = ctypes.c_size_t(0)

    def ours(method):
        r = lib.sc_topk(x.data_ptr(), n, SC_FLOAT32, k, method, idx.data_ptr(), val.data_ptr(),
                        ctypes.byref(nnz))
        if r != 0:
            sys.exit("sc_topk failed: %s" % lib.sc_last_error().decode())
        return nnz.value

    def theirs():
        return torch.topk(x.abs(), k, sorted=False)

    times = {"torch.topk": [], "sc exact": [], "sc gaussian": []}
    counts = {}
    for rep in range(a.reps + 1):  # the first round warms up
        for name in times:
            t0 = time.perf_counter()
            if name == "torch.topk":
                res = theirs()
            else:
                counts[name] = ours(SC_SELECT_EXACT if name == "sc exact" else SC_SELECT_GAUSSIAN)
            dt = time.perf_counter() - t0
            if rep:
                times[name].append(dt)
    # The exact set against torch's, up to ties at the k-th magnitude.
    ours(SC_SELECT_EXACT)
    mine = set(idx[:nnz.value].tolist())
    ref = set(res.indices.tolist())
    kth = float(x.abs()[res.indices].min())
    differ = [i for i in mine ^ ref if abs(float(x[i])) != kth]
    print("# n %d k %d float32 N(0,1), torch %s, %d threads, median of %d" %
          (n, k, torch.__version__, torch.get_num_threads(), a.reps))
    print("%-12s %10s %8s %10s" % ("selector", "time(ms)", "count", "vs torch"))
    base = statistics.median(times["torch.topk"])
    for name, ts in times.items():
        med = statistics.median(ts)
        cnt = k if name == "torch.topk" else counts[name]
        print("%-12s %10.2f %8d %9.2fx" % (name, med * 1e3, cnt, base / med))
    print("# exact vs torch.topk: %s" % ("same set" if not differ else
                                         "%d indices differ" % len(differ)))
    ex, ga = statistics.median(times["sc exact"]), statistics.median(times["sc gaussian"])
    print("# gaussian is %.2fx faster than exact; count/k %.3f" %
          (ex / ga, counts["sc gaussian"] / k))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
