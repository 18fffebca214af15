# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.LowRank over several calls against an independent numpy
reference of PowerSGD and ACP-SGD (the ACP-SGD paper's algorithm, Zhang et
al., ICDCS'23), on the ranks sc-run started. Every rank derives every rank's
gradient of every call from a seed, and the reference runs all ranks' state:

    M_i = G_i + E_i                                  (E_i = 0 without feedback)
    PowerSGD: P = orth(sum_i M_i Q); Q_i = M_i^T P; E_i = M_i - P Q_i^T;
              Q = sum_i Q_i
    ACP-SGD, calls 0, 2, 4, ...: Q = orth(Q); P_i = M_i Q; E_i = M_i - P_i Q^T;
              P = sum_i P_i
    ACP-SGD, calls 1, 3, 5, ...: P = orth(P); Q_i = M_i^T P; E_i = M_i - P Q_i^T;
              Q = sum_i Q_i
    result = P Q^T / N

orth() here is numpy's Householder QR (columns signed so that R's diagonal
is positive), the library's modified Gram-Schmidt is another algorithm; the
first Q is the library's documented generator (splitmix64, Box-Muller)
rewritten here. Shapes include odd sizes, a single row or column, a rank
capped by a side and an empty matrix; float64 (tight) and float32 (loose),
with and without error feedback, 7 calls each. Exits 1 on the first
mismatch."""
import sys

import numpy as np

import sparsecoll
from lowrank_ref import orth, seed_normals

comm = sparsecoll.Comm.from_env()
R, N = comm.rank, comm.size
CALLS = 7
checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d of %d: FAIL %s" % (R, N, what), file=sys.stderr)
        sys.exit(1)


def grad(step, rank, rows, cols, dt):
    g = np.random.default_rng(1000 * step + 17 * rank + rows * 31 + cols).standard_normal((rows, cols))
    # A common part that persists over calls, as in training, plus each
    # rank's own noise.
    base = np.random.default_rng(rows * 7 + cols).standard_normal((rows, cols))
    return (2 * base + g).astype(dt)


def reference(mode, rows, cols, rank, ef, seed, dt):
    r = min(rank, rows, cols)
    q = seed_normals(r * cols, seed, dt).reshape(r, cols).T.copy()
    if mode == "powersgd":
        q = orth(q)
    p = None
    err = [np.zeros((rows, cols)) for _ in range(N)]
    results = []
    for c in range(CALLS):
        m = [grad(c, i, rows, cols, dt).astype(np.float64) + err[i] for i in range(N)]
        if mode == "powersgd":
            p = orth(sum(mi @ q for mi in m))
            qi = [mi.T @ p for mi in m]
            local = [p @ x.T for x in qi]
            q = sum(qi)
        elif c % 2 == 0:
            q = orth(q)
            pi = [mi @ q for mi in m]
            local = [x @ q.T for x in pi]
            p = sum(pi)
        else:
            p = orth(p)
            qi = [mi.T @ p for mi in m]
            local = [p @ x.T for x in qi]
            q = sum(qi)
        if ef:
            err = [m[i] - local[i] for i in range(N)]
        results.append(p @ q.T / N)
    return results


SHAPES = ((7, 5, 2), (30, 20, 4), (10, 64, 4), (13, 1, 3), (1, 9, 2), (3, 2, 4), (17, 11, 5), (0, 5, 2))
for dt, tol in ((np.float64, 1e-9), (np.float32, 2e-4)):
    for mode in ("powersgd", "acpsgd"):
        for ef in (True, False):
            for rows, cols, rank in SHAPES:
                name = "%s %s ef=%d %dx%d rank %d" % (mode, np.dtype(dt).name, ef, rows, cols, rank)
                seed = 11 + rows + cols
                want = reference(mode, rows, cols, rank, ef, seed, dt)
                lr = sparsecoll.LowRank(comm, rows, cols, rank, mode=mode, error_feedback=ef, seed=seed,
                                        dtype=dt)
                for c in range(CALLS):
                    g = grad(c, R, rows, cols, dt)
                    lr.allreduce(g)
                    if rows * cols == 0:
                        continue
                    scale = max(np.abs(want[c]).max(), 1e-30)
                    err = np.abs(g.astype(np.float64) - want[c]).max() / scale
                    ok(err < tol, "%s, call %d: %.3g from the reference" % (name, c, err))
                lr.close()
comm.barrier()
print("rank %d of %d: %d checks passed" % (R, N, checks))
