# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.LowRank on the ranks sc-run started: every rank derives every
rank's gradient from a seed; gradients whose average has rank <= r come back
as the average (PowerSGD on the first call, ACP-SGD on the second), in
float32 and float64, every rank with the same bits; with error feedback the
mean of 40 results for a constant full-rank gradient is closer to the average
than any single result without it; (--torch) a torch tensor; the errors.
Exits 1 on the first mismatch."""
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


def lowrank_grad(r, rows, cols, k):
    """Rank r's gradient: A_r B^T with B shared, so the average has rank <= k."""
    b = np.random.default_rng(7).integers(-3, 4, (cols, k)).astype(np.float64)
    a = np.random.default_rng(100 + r).integers(-3, 4, (rows, k)).astype(np.float64)
    return a @ b.T


def same_on_every_rank(x, what):
    allx = np.zeros((P,) + x.shape, x.dtype)
    comm.allgather(x.copy(), out=allx.reshape(-1))
    ok(all(np.array_equal(allx[0], allx[q]) for q in range(P)), what + ": ranks differ")


for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-10)):
    for mode in ("powersgd", "acpsgd"):
        rows, cols, k = 30, 20, 3
        name = "%s %s" % (mode, np.dtype(dt).name)
        mbar = sum(lowrank_grad(r, rows, cols, k) for r in range(P)) / P
        lr = sparsecoll.LowRank(comm, rows, cols, 4, mode=mode, error_feedback=False, seed=11, dtype=dt)
        for call in range(2):
            g = lowrank_grad(R, rows, cols, k).astype(dt)
            # The state's own call and Comm.lowrank_allreduce, alternately.
            if call == 0:
                lr.allreduce(g)
            else:
                comm.lowrank_allreduce(g, lr)
            same_on_every_rank(g, name)
        err = np.abs(g - mbar).max() / np.abs(mbar).max()
        ok(err < tol, "%s: the average of rank %d comes back (error %.3g)" % (name, k, err))
        lr.close()

# Error feedback: the running mean approaches the average of full-rank gradients.
rows, cols = 16, 12
full = [np.random.default_rng(500 + r).standard_normal((rows, cols)) for r in range(P)]
mbar = sum(full) / P
errs = {}
for ef in (True, False):
    lr = sparsecoll.LowRank(comm, rows, cols, 2, mode="powersgd", error_feedback=ef, seed=3)
    acc = np.zeros((rows, cols))
    for t in range(40):
        g = full[R].astype(np.float32)
        lr.allreduce(g)
        acc += g
    errs[ef] = np.linalg.norm(acc / 40 - mbar) / np.linalg.norm(mbar)
    lr.close()
ok(errs[True] < 0.5 * errs[False], "feedback's mean %.3g not below no feedback's %.3g" % (errs[True], errs[False]))

if "--torch" in sys.argv:
    import torch

    rows, cols, k = 9, 14, 2
    mbar = sum(lowrank_grad(r, rows, cols, k) for r in range(P)) / P
    lr = sparsecoll.LowRank(comm, rows, cols, 2, error_feedback=False, seed=5, dtype=torch.float32)
    t = torch.from_numpy(lowrank_grad(R, rows, cols, k).astype(np.float32))
    lr.allreduce(t)
    ok(np.abs(t.numpy() - mbar).max() < 1e-4 * np.abs(mbar).max(), "torch tensor")

lr = sparsecoll.LowRank(comm, 4, 5, 2)
for bad, what in ((np.zeros(21, np.float32), "size"), (np.zeros(20, np.float64), "dtype")):
    try:
        lr.allreduce(bad)
        ok(False, "a gradient of the wrong %s was accepted" % what)
    except sparsecoll.ArgumentError:
        ok(True, what)
for kwargs in ({"mode": "topk"}, {"dtype": np.int32}, {"rank": 0}):
    args = dict({"rank": 2}, **kwargs)
    try:
        sparsecoll.LowRank(comm, 4, 5, **args)
        ok(False, "LowRank(%s) was accepted" % kwargs)
    except sparsecoll.Error as e:
        ok(e.code == "SC_ERR_INVALID_ARG", "%s refused: %s" % (kwargs, e))
lr.close()
comm.barrier()
print("rank %d of %d: %d checks passed" % (R, P, checks))
