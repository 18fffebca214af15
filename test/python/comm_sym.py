# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.Comm's symmetric collectives (allreduce_sym, reduce_sym,
broadcast_sym) and sparsecoll.place_factors against numpy references, on the
ranks sc-run started: every rank derives every rank's upper triangle from a
seed (the lower triangle is garbage the calls must not read), in place and
with out=, numpy arrays and (--torch) torch tensors; the errors. Exits 1 on
the first mismatch."""
import sys

import numpy as np

import sparsecoll

comm = sparsecoll.Comm.from_env()
R, P = comm.rank, comm.size
checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def upper(seed, d, dt):
    rng = np.random.default_rng(seed * 101 + d)
    m = rng.integers(0, 20, (d, d)).astype(dt)
    return np.triu(m)


def with_garbage(u):
    g = u.copy()
    low = np.tril_indices(u.shape[0], -1)
    g[low] = 99
    return g


def sym(u):
    return u + np.triu(u, 1).T


for dt in (np.int32, np.float32, np.float64, np.uint8):
    for d in (0, 1, 5, 40):
        name = "%s d=%d" % (np.dtype(dt).name, d)
        ups = [upper(r, d, dt) for r in range(P)]
        want = sym(sum(ups).astype(dt))
        x = with_garbage(ups[R])
        comm.allreduce_sym(x)
        ok(np.array_equal(x, want), "allreduce_sym in place " + name)
        out = np.zeros((d, d), dt)
        comm.allreduce_sym(with_garbage(ups[R]), op="max", out=out)
        ok(np.array_equal(out, sym(np.maximum.reduce(ups) if d else ups[0])), "allreduce_sym max " + name)
        root = d % P
        x = with_garbage(ups[R])
        comm.reduce_sym(x, root=root)
        if R == root:
            ok(np.array_equal(x, want), "reduce_sym " + name)
        x = with_garbage(ups[R])
        comm.broadcast_sym(x, root=(d + 1) % P)
        ok(np.array_equal(x, sym(ups[(d + 1) % P])), "broadcast_sym " + name)

if "--torch" in sys.argv:
    import torch

    d = 17
    ups = [torch.from_numpy(upper(r, d, np.float32)) for r in range(P)]
    t = ups[R].clone()
    comm.allreduce_sym(t)
    ok(torch.equal(t, torch.from_numpy(sym(sum(u.numpy() for u in ups)))), "allreduce_sym torch")

try:
    comm.allreduce_sym(np.zeros((3, 4), np.float32))
    ok(False, "a 3 x 4 matrix was accepted")
except sparsecoll.ArgumentError as e:
    ok("square" in str(e), "non-square refused: %s" % e)

ok(sparsecoll.place_factors([2, 10, 3, 10, 1], 2) == [1, 0, 0, 1, 1], "place_factors lpt")
ok(sparsecoll.place_factors([2, 10, 3, 10, 1], 2, how="block", local_below=3) == [-1, 0, 0, 1, -1],
   "place_factors block")
ok(sparsecoll.place_factors([], 4) == [], "place_factors of nothing")
try:
    sparsecoll.place_factors([1], 0)
    ok(False, "nranks 0 was accepted")
except sparsecoll.Error as e:
    ok(e.code == "SC_ERR_INVALID_ARG", "nranks 0 refused: %s" % e)

comm.close()
print("rank %d of %d: %d checks passed" % (R, P, checks))
