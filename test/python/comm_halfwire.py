# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.Comm.allreduce_compressed on the ranks sc-run started: float32
inputs every rank derives for every rank from a seed, fp16 and bf16 wires,
sum and avg, in place and with out=, numpy arrays and (--torch) torch
tensors. Each result is a value of the wire format, within the documented
rounding bound of the exact float64 reference, and the same bits on every
rank; a float64 input and an unknown wire are SC_ERR_INVALID_ARG. Exits 1 on
the first failure."""
import sys

import numpy as np

import sparsecoll

comm = sparsecoll.Comm.from_env()
R, P = comm.rank, comm.size
TORCH = "--torch" in sys.argv
PREC = {"fp16": (11, -14), "bf16": (8, -126)}  # significand bits, smallest normal exponent


def ok(cond, what):
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def ulp(wire, a):
    p, emin = PREC[wire]
    e = np.maximum(np.frexp(a)[1] - 1, emin)
    return np.ldexp(1.0, e - (p - 1))


def inputs(r, n):
    rng = np.random.default_rng(1000 + r)
    return (rng.standard_normal(n) * 4).astype(np.float32)


def on_wire(wire, v):
    if wire == "fp16":
        return np.array_equal(v.astype(np.float16).astype(np.float32), v)
    return not np.any(v.view(np.uint32) & 0xFFFF)


for wire in ("fp16", "bf16"):
    for op in ("sum", "avg"):
        for n in (0, 1, 7, 1000):
            name = "%s %s n=%d" % (wire, op, n)
            xs = [inputs(r, n) for r in range(P)]
            exact = np.sum([x.astype(np.float64) for x in xs], axis=0) if n else np.zeros(0)
            s = np.sum([np.abs(x.astype(np.float64)) for x in xs], axis=0) if n else np.zeros(0)
            in_err = np.sum([0.5 * ulp(wire, np.abs(x.astype(np.float64))) for x in xs], axis=0)
            k = P if op == "avg" else 1
            bound = (in_err + P * 2.0**-23 * s) / k + 2.0**-23 * s + 0.5 * ulp(wire, 2 * s / k)
            if op == "avg":
                exact = exact / P
            x = xs[R].copy()
            if TORCH and n % 2:
                import torch

                t = torch.from_numpy(x)
                comm.allreduce_compressed(t, op=op, wire=wire)
                got = t.numpy()
            elif n % 2:
                comm.allreduce_compressed(x, op=op, wire=wire)
                got = x
            else:
                got = np.full(n, -1, np.float32)
                comm.allreduce_compressed(x, op=op, wire=wire, out=got)
                ok(np.array_equal(x, xs[R]), name + ": input changed by an out-of-place call")
            ok(on_wire(wire, got), name + ": not values of the wire format")
            ok(np.all(np.abs(got - exact) <= bound), name + ": outside the bound, max error %g"
               % (np.max(np.abs(got - exact) - bound) if n else 0))
            everyone = comm.allgather(got.view(np.uint32))
            ok(all(np.array_equal(everyone[r * n:(r + 1) * n], got.view(np.uint32)) for r in range(P)),
               name + ": ranks differ")

for bad, what in ((np.ones(4), "a float64 input"), (np.ones(4, np.float32), "wire int8")):
    try:
        comm.allreduce_compressed(bad, wire="int8" if bad.dtype == np.float32 else "fp16")
        ok(False, what + " was accepted")
    except sparsecoll.Error as e:
        ok(e.code == "SC_ERR_INVALID_ARG", "%s: %s instead of SC_ERR_INVALID_ARG" % (what, e.code))
comm.barrier()
comm.close()
print("rank %d of %d: allreduce_compressed ok" % (R, P))
