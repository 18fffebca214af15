#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A single-process model of convergence.py's training, for looking at
PowerSGD and ACP-SGD without ranks or the library.

    perf/repro/convergence_model.py --method acpsgd [--lr 0.05 --steps 500 --rank 4]
    perf/repro/convergence_model.py --quadratic

Given the factor every rank shares, PowerSGD's and ACP-SGD's estimates are
linear in the ranks' gradients (plus residuals), so the average over ranks is
what matters: the model computes the ranks' gradients one after the other on
one copy of the CNN, averages them, and runs the algorithm on the average
(torch QR for the orthonormalization; the same data, model, seeds, warm-up
and choice of compressed matrices as convergence.py). Prints the held-out
loss and accuracy every --every steps, and per compressed matrix the mean
over steps of ||residual|| / ||gradient|| and ||M - estimate|| / ||M||.

--quadratic: f(W) = ||W - W*||^2 / 2 for a 40 x 60 W, rank 2, plain SGD;
for each method, the largest step of a grid after which 1500 steps bring
||W - W*|| below 1e-3 of ||W*||.
"""
import argparse
import sys

from cnn_task import cnn, data


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--method", default="acpsgd", choices=("dense", "powersgd", "acpsgd"))
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--start", type=int, default=10, help="dense steps before compression")
    ap.add_argument("--no-feedback", action="store_true")
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--quadratic", action="store_true")
    return ap.parse_args(argv)


def lowrank_step(method, call, m, p, q, orth):
    """One call's factors (P, Q) of M (with the residual added), numpy or
    torch alike: PowerSGD P = orth(M Q), Q = M^T P; ACP-SGD alternates
    between P = M orth(Q) (even calls) and Q = M^T orth(P) (odd calls)."""
    if method == "powersgd":
        p = orth(m @ q)
        return p, m.T @ p
    if call % 2 == 0:
        q = orth(q)
        return m @ q, q
    p = orth(p)
    return p, m.T @ p


class LowRank:
    """One matrix's state: the shared factors, the residual of the average."""

    def __init__(self, torch, method, rows, cols, r, feedback):
        self.t, self.method, self.feedback, self.calls = torch, method, feedback, 0
        self.q = torch.randn(cols, r, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
        self.p = None
        self.e = torch.zeros(rows, cols, dtype=torch.float64)
        self.stats = []

    def orth(self, a):
        q, r = self.t.linalg.qr(a)
        return q * self.t.sign(self.t.diagonal(r)).unsqueeze(0)

    def __call__(self, g):
        m = g + self.e
        self.p, self.q = lowrank_step(self.method, self.calls, m, self.p, self.q, self.orth)
        self.calls += 1
        out = self.p @ self.q.T
        if self.feedback:
            self.e = m - out
        self.stats.append(((self.e.norm() / g.norm()).item(), ((m - out).norm() / m.norm()).item()))
        return out


def train(args):
    import torch
    import torch.nn as nn

    torch.set_num_threads(1)
    model = cnn(0)
    batch, x_eval, y_eval = data()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    gens = [torch.Generator().manual_seed(10 + r) for r in range(args.ranks)]
    params = list(model.parameters())
    states = {}
    for step in range(args.steps + 1):
        if step % args.every == 0 or step == args.steps:
            with torch.no_grad():
                logits = model(x_eval)
                print("step %d held-out loss %.4f accuracy %.3f" % (
                    step, loss_fn(logits, y_eval).item(), (logits.argmax(1) == y_eval).float().mean().item()),
                    flush=True)
        if step == args.steps:
            break
        avg = [torch.zeros_like(p) for p in params]
        for gen in gens:
            x, y = batch(gen, args.batch)
            model.zero_grad()
            loss_fn(model(x), y).backward()
            for a, p in zip(avg, params):
                a += p.grad / args.ranks
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(params, avg)):
                rows = g.shape[0] if g.dim() > 1 else 0
                cols = g.numel() // rows if rows else 0
                r = min(args.rank, rows, cols)
                # powersgd_hook's choice: compressed when it pays twice over.
                if args.method != "dense" and step >= args.start and rows and (rows + cols) * r * 2 < rows * cols:
                    if i not in states:
                        states[i] = LowRank(torch, args.method, rows, cols, r, not args.no_feedback)
                    g = states[i](g.reshape(rows, cols).double()).float().reshape(g.shape)
                p.grad.copy_(g)
        opt.step()
    for i, s in sorted(states.items()):
        n = len(s.stats)
        print("matrix %s: mean ||residual||/||gradient|| %.2f, ||M - estimate||/||M|| %.2f"
              % ("x".join(str(d) for d in s.e.shape), sum(a for a, _ in s.stats) / n,
                 sum(b for _, b in s.stats) / n))
    return 0


def quadratic():
    import numpy as np

    def orth(a):
        q, r = np.linalg.qr(a)
        return q * np.sign(np.diag(r))

    rows, cols, r = 40, 60, 2
    target = np.random.default_rng(0).standard_normal((rows, cols))

    def converges(method, lr, steps=1500):
        w = np.zeros((rows, cols))
        e = np.zeros_like(w)
        q = orth(np.random.default_rng(7).standard_normal((cols, r)))
        p = None
        with np.errstate(all="ignore"):
            for t in range(steps):
                g = w - target
                if method == "dense":
                    out = g
                else:
                    m = g + e
                    p, q = lowrank_step(method, t, m, p, q, orth)
                    out = p @ q.T
                    e = m - out
                w = w - lr * out
                if not np.isfinite(w).all():
                    return False
        return np.linalg.norm(w - target) < 1e-3 * np.linalg.norm(target)

    grid = (0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)
    for method in ("dense", "powersgd", "acpsgd"):
        ok = [lr for lr in grid if converges(method, lr)]
        print("%-9s converges at learning rates %s; largest %s" % (method, ", ".join("%g" % x for x in ok),
                                                          "%g" % max(ok) if ok else "none"))
    return 0


def main(argv):
    args = parse(argv)
    return quadratic() if args.quadratic else train(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
