# SPDX-License-Identifier: BSD-3-Clause
"""powersgd_hook and acpsgd_hook under DistributedDataParallel, step by step,
against a numpy reference, on the ranks torchrun_like started. A small CNN
(a 6 x 2 x 3 x 3 convolution and a 12 x 96 layer, both compressed at rank 2;
a 3 x 12 layer that does not pay and the biases, averaged densely) takes
STEPS backward passes at fixed weights, the first WARM dense
(start_powerSGD_iter). Every rank computes every rank's gradient of every
step on a plain copy of the model, and the reference runs the algorithm on
their average (given the factor every rank shares, both methods are linear
in the ranks' gradients, so the average determines the result):

    M = mean_i G_i + E
    PowerSGD: P = orth(M Q); Q = M^T P;            result P Q^T
    ACP-SGD, compressed steps 0, 2, ...: Q = orth(Q); P = M Q; result P Q^T
    ACP-SGD, compressed steps 1, 3, ...: P = orth(P); Q = M^T P; result P Q^T
    E = M - result

with the first Q the library's seed generator (splitmix64, Box-Muller, as in
test/python/lowrank_steps.py) and numpy's QR for orth(). Checks each
parameter's gradient after every backward pass, on every rank, and that the
ranks hold the same bits. Exits 1 on the first mismatch."""
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

import sparsecoll.torch  # noqa: F401
from lowrank_ref import orth, seed_normals
from sparsecoll.torch.hooks import ACPSGDState, PowerSGDState, acpsgd_hook, powersgd_hook

STEPS, WARM, RANK, SEED = 9, 2, 2, 5
torch.set_num_threads(1)
dist.init_process_group("gloo")
R, N = dist.get_rank(), dist.get_world_size()
sc = dist.new_group(backend="sparsecoll")
checks = 0


def fail(msg):
    print("rank %d of %d: FAIL %s" % (R, N, msg), file=sys.stderr)
    sys.exit(1)


def net():
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(2, 6, 3), nn.Tanh(), nn.Flatten(), nn.Linear(96, 12), nn.Tanh(),
                         nn.Linear(12, 3))


def data(step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(8, 2, 6, 6, generator=g), torch.randn(8, 3, generator=g)


def local_grads(model, step, rank):
    x, y = data(step, rank)
    model.zero_grad()
    (model(x) - y).square().mean().backward()
    return [p.grad.detach().double().numpy().copy() for p in model.parameters()]


class Ref:
    def __init__(self, mode, rows, cols):
        self.mode, self.calls = mode, 0
        r = min(RANK, rows, cols)
        self.q = seed_normals(r * cols, SEED).reshape(r, cols).T.copy()
        if mode == "powersgd":
            self.q = orth(self.q)
        self.p, self.e = None, np.zeros((rows, cols))

    def __call__(self, g):
        m = g + self.e
        if self.mode == "powersgd":
            self.p = orth(m @ self.q)
            self.q = m.T @ self.p
        elif self.calls % 2 == 0:
            self.q = orth(self.q)
            self.p = m @ self.q
        else:
            self.p = orth(self.p)
            self.q = m.T @ self.p
        self.calls += 1
        out = self.p @ self.q.T
        self.e = m - out
        return out


def run(mode):
    global checks
    plain = net()
    model = nn.parallel.DistributedDataParallel(net())
    cls, hook = (PowerSGDState, powersgd_hook) if mode == "powersgd" else (ACPSGDState, acpsgd_hook)
    state = cls(process_group=sc, matrix_approximation_rank=RANK, start_powerSGD_iter=WARM, random_seed=SEED)
    model.register_comm_hook(state, hook)
    shapes = [tuple(p.shape) for p in plain.parameters()]
    refs = {}
    for i, s in enumerate(shapes):
        rows = s[0]
        cols = int(np.prod(s)) // rows
        r = min(RANK, rows, cols)
        if len(s) > 1 and (rows + cols) * r * 2 < rows * cols:
            refs[i] = Ref(mode, rows, cols)
    if sorted(refs) != [0, 2]:
        fail("%s: compressed parameters %s, the test expects the convolution's and the first layer's"
             % (mode, sorted(refs)))
    for step in range(STEPS):
        x, y = data(step, R)
        model.zero_grad()
        (model(x) - y).square().mean().backward()
        got = [p.grad.detach().double().numpy() for p in model.parameters()]
        every = [local_grads(plain, step, k) for k in range(N)]
        for i, s in enumerate(shapes):
            mean = sum(e[i] for e in every) / N
            want = mean
            if step >= WARM and i in refs:
                want = refs[i](mean.reshape(s[0], -1)).reshape(s)
            err = np.abs(got[i] - want).max() / max(np.abs(want).max(), 1e-30)
            checks += 1
            if not err < 1e-4:
                fail("%s step %d, parameter %d %s: %.3g from the reference" % (mode, step, i, s, err))
        flat = torch.cat([p.grad.detach().reshape(-1) for p in model.parameters()])
        everyone = [torch.empty_like(flat) for _ in range(N)]
        dist.all_gather(everyone, flat)
        if not all(torch.equal(e.view(torch.int32), flat.view(torch.int32)) for e in everyone):
            fail("%s step %d: the ranks' gradients differ" % (mode, step))
    state.close()


for mode in ("powersgd", "acpsgd"):
    run(mode)
dist.barrier()
print("rank %d of %d: %d checks passed" % (R, N, checks))
dist.destroy_process_group()
