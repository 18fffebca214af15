#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Distributed K-FAC on a small MLP, against SGD from the same start.

Every rank holds its own shard of a regression problem whose inputs are badly
scaled (feature scales from 0.1 to 10, where plain SGD crawls along the small
directions). Both optimizers average the gradients with comm.allreduce. K-FAC
also, every step, reduces each layer's two Kronecker factors (A = E[a a^T] of
the layer's input, G = E[g g^T] of its output gradient) to the factor's owner
(sparsecoll.place_factors), packed to their upper triangles and fused per
owner (sparsecoll.torch.kfac.KFACCommunicator); each owner inverts its
factors (damped) and broadcasts the inverses, packed the same way; every rank
then steps with G^-1 grad A^-1.

  sc-run -n 4 python3 examples/kfac_mlp.py [--steps 60] [--check]

Prints both losses on a held-out set every few steps; --check exits 1 unless
K-FAC's final loss is below SGD's, and unless every rank ends with the same
weights (bit for bit).
"""
import argparse
import sys

import torch

import sparsecoll
from sparsecoll.torch.kfac import KFACCommunicator

DIM, HIDDEN = 16, 32


def data(seed, n):
    g = torch.Generator().manual_seed(seed)
    scales = torch.logspace(-1, 1, DIM, dtype=torch.float64)
    x = torch.randn(n, DIM, generator=g, dtype=torch.float64) * scales
    t = torch.Generator().manual_seed(12345)
    w1 = torch.randn(DIM, 8, generator=t, dtype=torch.float64) / scales[:, None] / 4
    w2 = torch.randn(8, 1, generator=t, dtype=torch.float64)
    y = torch.tanh(x @ w1) @ w2
    return x, y


def init():
    g = torch.Generator().manual_seed(7)
    # Each layer's weight with its bias as the last column (inputs get a 1).
    return [torch.randn(HIDDEN, DIM + 1, generator=g, dtype=torch.float64) * 0.1,
            torch.randn(1, HIDDEN + 1, generator=g, dtype=torch.float64) * 0.1]


def with_one(a):
    return torch.cat([a, torch.ones(a.shape[0], 1, dtype=a.dtype)], 1)


def forward(ws, x):
    """Layer inputs (augmented), pre-activations, the prediction."""
    a0 = with_one(x)
    s1 = a0 @ ws[0].T
    a1 = with_one(torch.tanh(s1))
    s2 = a1 @ ws[1].T
    return [a0, a1], [s1, s2], s2


def grads(ws, x, y):
    ws = [w.clone().requires_grad_(True) for w in ws]
    acts, pre, out = forward(ws, x)
    for s in pre:
        s.retain_grad()
    loss = ((out - y) ** 2).mean()
    loss.backward()
    return [w.grad.detach() for w in ws], [a.detach() for a in acts], [s.grad.detach() for s in pre]


def loss_of(ws, x, y):
    with torch.no_grad():
        return float(((forward(ws, x)[2] - y) ** 2).mean())


def average(comm, ts):
    flat = torch.cat([t.reshape(-1) for t in ts])
    comm.allreduce(flat, op="avg")
    off = 0
    for t in ts:
        t.copy_(flat[off:off + t.numel()].view_as(t))
        off += t.numel()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--sgd-lr", type=float, default=0.01)
    ap.add_argument("--kfac-lr", type=float, default=0.2)
    ap.add_argument("--damping", type=float, default=0.03)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()

    comm = sparsecoll.Comm.from_env()
    kc = KFACCommunicator(comm)
    R, P = comm.rank, comm.size
    xtest, ytest = data(999, 512)
    sgd, kfac = init(), init()
    factors = [torch.zeros(DIM + 1, DIM + 1, dtype=torch.float64), torch.zeros(HIDDEN, HIDDEN, dtype=torch.float64),
               torch.zeros(HIDDEN + 1, HIDDEN + 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64)]
    # A0, G0, A1, G1; the 1 x 1 factor is everyone's (nothing to send).
    owners = sparsecoll.place_factors([f.shape[0] for f in factors], P, how="lpt", local_below=2)
    inverses = [torch.zeros_like(f) for f in factors]
    for step in range(a.steps + 1):
        if step % 10 == 0 and R == 0:
            print("step %3d: loss sgd %.5f  kfac %.5f" % (step, loss_of(sgd, xtest, ytest), loss_of(kfac, xtest, ytest)))
            sys.stdout.flush()
        if step == a.steps:
            break
        x, y = data(1000 * step + R, a.batch)
        g, _, _ = grads(sgd, x, y)
        average(comm, g)
        for w, gw in zip(sgd, g):
            w -= a.sgd_lr * gw
        g, acts, gouts = grads(kfac, x, y)
        average(comm, g)
        B = x.shape[0]
        for li in range(2):
            factors[2 * li].copy_(acts[li].T @ acts[li] / B)
            gs = gouts[li] * B
            factors[2 * li + 1].copy_(gs.T @ gs / B)
        kc.reduce_factors_async(factors, owners).wait()
        for i, f in enumerate(factors):
            if owners[i] in (R, -1):
                eye = torch.eye(f.shape[0], dtype=f.dtype)
                inverses[i].copy_(torch.linalg.inv(f + a.damping ** 0.5 * eye))
        kc.broadcast_inverses_async(inverses, owners).wait()
        for li, w in enumerate(kfac):
            w -= a.kfac_lr * (inverses[2 * li + 1] @ g[li] @ inverses[2 * li])
    ls, lk = loss_of(sgd, xtest, ytest), loss_of(kfac, xtest, ytest)
    # Every rank must hold the same weights.
    mine = torch.cat([w.reshape(-1) for w in kfac + sgd])
    lo, hi = mine.clone(), mine.clone()
    comm.allreduce(lo, op="min")
    comm.allreduce(hi, op="max")
    same = bool(torch.equal(lo, hi))
    comm.close()
    if R == 0:
        print("after %d steps on %d ranks: loss sgd %.5f, kfac %.5f (%.1fx lower); ranks identical: %s"
              % (a.steps, P, ls, lk, ls / lk if lk > 0 else float("inf"), "yes" if same else "NO"))
    if a.check and not (lk < ls and same):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
