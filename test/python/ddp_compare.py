# SPDX-License-Identifier: BSD-3-Clause
"""DDP on backend "sparsecoll" against DDP on gloo: the same model, seed and
data on every rank, 20 SGD steps each, with find_unused_parameters=True and a
head that is used on even steps only. gloo is the default group (and checks
the results: it is independent of libsparsecoll); the sparsecoll group is
made with new_group(backend="sparsecoll") over the same torch store.

Checks: every rank's sparsecoll-trained parameters are bit-identical; they
equal gloo's within TOL; and training moved them by far more than TOL, so
the comparison cannot pass vacuously."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import sparsecoll.torch  # noqa: F401

torch.set_num_threads(1)
dist.init_process_group("gloo")
R, P = dist.get_rank(), dist.get_world_size()
sc_group = dist.new_group(backend="sparsecoll")
STEPS = 20
# Tolerance. The two backends add the 4 ranks' float32 gradients in different
# orders: each all-reduce result may differ by a few ulp (3 roundings, relative
# 2^-24 each, of partial sums whose magnitude is at most the sum of the
# absolute values), then DDP's divide by 4 is exact. 20 steps of lr 0.05 carry
# such differences forward through the nonlinear model, growing them by a
# modest factor. Parameters are O(0.1..1): an absolute 2e-5 (about 100 ulp
# of 1.0, far above the ~1e-7 differences seen, far below the ~1e-2 training
# moves checked below) allows that, and catches any wrong reduction.
TOL = 2e-5


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.head = nn.Linear(8, 10)
        self.aux = nn.Linear(8, 10)  # unused on odd steps

    def forward(self, x, use_aux):
        h = torch.relu(self.conv2(torch.relu(self.conv1(x)))).mean((2, 3))
        y = self.head(h)
        return y + self.aux(h) if use_aux else y


def train(group):
    torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = nn.parallel.DistributedDataParallel(Net(), process_group=group, find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(100 + R)  # each rank its own data shard
    loss = None
    for step in range(STEPS):
        x = torch.randn(8, 1, 8, 8, generator=g)
        t = torch.randint(0, 10, (8,), generator=g)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x, step % 2 == 0), t)
        loss.backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.module.parameters()]), loss.item()


def fail(msg):
    print("rank %d: FAIL %s" % (R, msg), file=sys.stderr)
    sys.exit(1)


torch.manual_seed(0)
init = torch.cat([p.detach().reshape(-1) for p in Net().parameters()])
ref, ref_loss = train(None)  # gloo
got, got_loss = train(sc_group)
everyone = [torch.empty_like(got) for _ in range(P)]
dist.all_gather(everyone, got)  # through gloo
for r in range(P):
    if not torch.equal(everyone[r].view(torch.int32), got.view(torch.int32)):
        fail("rank %d's parameters differ from rank %d's (sparsecoll)" % (r, R))
diff = (got - ref).abs().max().item()
moved = (ref - init).abs().max().item()
print("rank %d: max |sparsecoll - gloo| = %.3g, max move from init = %.3g, loss %.4f / %.4f"
      % (R, diff, moved, got_loss, ref_loss))
if diff > TOL:
    fail("sparsecoll differs from gloo by %g > %g" % (diff, TOL))
if moved < 100 * TOL:
    fail("training barely moved the parameters (%g): the comparison would be vacuous" % moved)
dist.barrier()
dist.destroy_process_group()
print("rank %d: DDP sparsecoll == gloo (within %g), ranks bit-identical" % (R, TOL))
