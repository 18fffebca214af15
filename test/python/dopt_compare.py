# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.torch.DistributedOptimizer under each fusion policy against DDP
on gloo: the same model (with a head unused on odd steps), seed and data on
every rank, SGD with momentum, 12 steps (the first 2 are the optimizer's
warm-up on plain all-reduces; the other 10 go through the fusion plan).
Checks per policy: every rank bit-identical; within TOL of DDP/gloo; training
moved the parameters by far more than TOL. TOL as in ddp_compare.py: the
reduction order differs (a few ulp per all-reduce), carried over 12 steps."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import sparsecoll
import sparsecoll.torch  # noqa: F401
from sparsecoll.torch import DistributedOptimizer

torch.set_num_threads(1)
dist.init_process_group("gloo")
R, P = dist.get_rank(), dist.get_world_size()
sc = dist.new_group(backend="sparsecoll")
STEPS = 12
TOL = 2e-5


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.fc1 = nn.Linear(8, 32)
        self.head = nn.Linear(32, 10)
        self.aux = nn.Linear(32, 10)  # unused on odd steps

    def forward(self, x, use_aux):
        h = torch.relu(self.conv2(torch.relu(self.conv1(x)))).mean((2, 3))
        h = torch.relu(self.fc1(h))
        y = self.head(h)
        return y + self.aux(h) if use_aux else y


def batches():
    g = torch.Generator().manual_seed(100 + R)
    return [(torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)) for _ in range(STEPS)]


def flat(net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def reference():
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Net(), find_unused_parameters=True)  # gloo
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step, (x, t) in enumerate(batches()):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x, step % 2 == 0), t).backward()
        opt.step()
    return flat(model.module)


def with_policy(policy, **kw):
    torch.manual_seed(0)
    net = Net()
    opt = DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9), net,
                               policy=policy, process_group=sc, **kw)
    for step, (x, t) in enumerate(batches()):
        opt.zero_grad()
        nn.functional.cross_entropy(net(x, step % 2 == 0), t).backward()
        opt.step()
    opt.synchronize()
    nb = opt.fusion.num_buckets
    opt.close()
    return flat(net), nb


def fail(msg):
    print("rank %d: FAIL %s" % (R, msg), file=sys.stderr)
    sys.exit(1)


torch.manual_seed(0)
init = flat(Net())
ref = reference()
moved = (ref - init).abs().max().item()
if moved < 100 * TOL:
    fail("training barely moved the parameters (%g)" % moved)
policies = [("wfbp", {}), ("size", {"bucket_bytes": 2048}), ("mgwfbp", {}), ("single", {}),
            ("dear", {"bucket_bytes": 2048})]
if "p3" in sparsecoll._fusion.POLICIES:
    policies.append(("p3", {"slice_bytes": 1024}))
for policy, kw in policies:
    try:
        got, nb = with_policy(policy, **kw)
    except sparsecoll.Error as e:
        if policy == "p3" and e.code == "SC_ERR_UNSUPPORTED":
            print("rank %d: policy p3 not built in this library: %s" % (R, e))
            continue
        raise
    everyone = [torch.empty_like(got) for _ in range(P)]
    dist.all_gather(everyone, got)  # gloo
    for r in range(P):
        if not torch.equal(everyone[r].view(torch.int32), got.view(torch.int32)):
            fail("%s: rank %d's parameters differ from rank %d's" % (policy, r, R))
    diff = (got - ref).abs().max().item()
    if R == 0:
        print("policy %-7s %2d buckets: max |DistributedOptimizer - DDP/gloo| = %.3g (moved %.3g)"
              % (policy, nb, diff, moved))
    if diff > TOL:
        fail("%s: differs from DDP/gloo by %g > %g" % (policy, diff, TOL))
# gTop-k buckets (density > 0, LAGS with wfbp, OMGS with mgwfbp): no dense
# reference to compare with, but every rank must hold the same parameters.
for policy in ("wfbp", "mgwfbp"):
    got, nb = with_policy(policy, density=0.05)
    everyone = [torch.empty_like(got) for _ in range(P)]
    dist.all_gather(everyone, got)
    if not all(torch.equal(e.view(torch.int32), got.view(torch.int32)) for e in everyone):
        fail("%s density 0.05: ranks differ" % policy)
    if not torch.isfinite(got).all() or (got - init).abs().max().item() < 100 * TOL:
        fail("%s density 0.05: parameters did not train" % policy)
    if R == 0:
        print("policy %-7s density 0.05, %d buckets: ranks bit-identical" % (policy, nb))
dist.barrier()
dist.destroy_process_group()
