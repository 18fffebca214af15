# SPDX-License-Identifier: BSD-3-Clause
"""The half-precision wire DDP hooks (sparsecoll.torch.hooks.fp16_hook and
bf16_hook) on the ranks torchrun_like started: a small MLP trained 10 steps
from one seed with dense DDP on gloo and with each hook on a "sparsecoll"
group. Checks: every rank's parameters bit-identical under each hook, and
within a rounding-sized distance of the dense run's."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import sparsecoll.torch  # noqa: F401
from sparsecoll.torch.hooks import bf16_hook, fp16_hook

torch.set_num_threads(1)
dist.init_process_group("gloo")
R, P = dist.get_rank(), dist.get_world_size()
sc = dist.new_group(backend="sparsecoll")


def train(hook):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    model = nn.parallel.DistributedDataParallel(net)
    if hook is not None:
        model.register_comm_hook(sc, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(10 + R)
    for _ in range(10):
        x = torch.randn(8, 16, generator=g)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def fail(msg):
    print("rank %d: FAIL %s" % (R, msg), file=sys.stderr)
    sys.exit(1)


dense = train(None)
for name, hook, tol in (("fp16_hook", fp16_hook, 5e-4), ("bf16_hook", bf16_hook, 5e-3)):
    params = train(hook)
    everyone = [torch.empty_like(params) for _ in range(P)]
    dist.all_gather(everyone, params)
    for r in range(P):
        if not torch.equal(everyone[r].view(torch.int32), params.view(torch.int32)):
            fail("%s: rank %d's parameters differ from rank %d's" % (name, r, R))
    err = (params - dense).abs().max().item()
    if R == 0:
        print("%s: max |params - dense DDP| after 10 steps %.3g" % (name, err))
    if not err <= tol:
        fail("%s: parameters %.3g from dense DDP's (bound %g)" % (name, err, tol))
dist.barrier()
dist.destroy_process_group()
