# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.torch.OneBitAdam on the ranks torchrun_like started: a small
MLP regressing a fixed teacher, STEPS steps, against torch.optim.Adam on
gradients averaged by a dense all-reduce (the reference). Checks: through the
warm-up (freeze_step steps) the parameters equal the reference's within 1e-6;
after STEPS steps the held-out loss is within 1.5x of the reference's and every
rank's parameters are bit-identical; exp_avg_mask keeps the masked momentum
entries at zero; load_state_dict restores step and moments and resets the
1-bit states; weight decay and bias_correction=False against the update
written out here; the constructor's refusals."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import sparsecoll.torch  # noqa: F401
from sparsecoll import ArgumentError
from sparsecoll.torch import OneBitAdam

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
FREEZE = 100
LR = 0.01
torch.set_num_threads(1)
dist.init_process_group("gloo")
R, P = dist.get_rank(), dist.get_world_size()
sc = dist.new_group(backend="sparsecoll")

teacher = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
torch.manual_seed(1234)
for p in teacher.parameters():
    nn.init.normal_(p, std=0.5)
x_test = torch.randn(256, 16, generator=torch.Generator().manual_seed(999))
with torch.no_grad():
    y_test = teacher(x_test)


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4))


def held_out(model):
    with torch.no_grad():
        return (model(x_test) - y_test).square().mean().item()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def fail(msg):
    print("rank %d: FAIL %s" % (R, msg), file=sys.stderr)
    sys.exit(1)


def dense_average(model):
    """The reference's averaging: one flat buffer, the library's dense all-reduce."""
    g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    sc.comm.allreduce(g, op="avg")
    off = 0
    for p in model.parameters():
        p.grad.copy_(g[off:off + p.numel()].view_as(p))
        off += p.numel()


def train(model, opt, steps, average, at_freeze=None):
    g = torch.Generator().manual_seed(10 + R)
    for step in range(steps):
        x = torch.randn(32, 16, generator=g)
        with torch.no_grad():
            y = teacher(x)
        opt.zero_grad()
        (model(x) - y).square().mean().backward()
        if average:
            dense_average(model)
        opt.step()
        if at_freeze is not None and step + 1 == FREEZE:
            at_freeze.append(flat(model).clone())
    return model


def same_everywhere(model, name):
    params = flat(model)
    everyone = [torch.empty_like(params) for _ in range(P)]
    dist.all_gather(everyone, params)
    for r in range(P):
        if not torch.equal(everyone[r].view(torch.int32), params.view(torch.int32)):
            fail("%s: rank %d's parameters differ from rank %d's" % (name, r, R))


before = held_out(net())
ref_freeze, ob_freeze = [], []
m_ref = net()
train(m_ref, torch.optim.Adam(m_ref.parameters(), lr=LR), STEPS, True, ref_freeze)
m_ob = net()
opt = OneBitAdam(m_ob.parameters(), lr=LR, freeze_step=FREEZE, process_group=sc)
train(m_ob, opt, STEPS, False, ob_freeze)
same_everywhere(m_ob, "OneBitAdam")
warm_diff = (ref_freeze[0] - ob_freeze[0]).abs().max().item()
loss_ref, loss_ob = held_out(m_ref), held_out(m_ob)
if R == 0:
    print("held-out loss after %d steps on %d ranks (before training %.4g, freeze_step %d): "
          "Adam dense %.4g, OneBitAdam %.4g (ratio %.3f); warm-up max |OneBitAdam - Adam| %.3g"
          % (STEPS, P, before, FREEZE, loss_ref, loss_ob, loss_ob / loss_ref, warm_diff))
if not warm_diff <= 1e-6:
    fail("warm-up: parameters differ from Adam's with dense averaging by %.3g" % warm_diff)
if not loss_ob <= 1.5 * loss_ref:
    fail("OneBitAdam's loss %.4g is over 1.5x dense Adam's %.4g" % (loss_ob, loss_ref))
if not loss_ob < 0.5 * before:
    fail("OneBitAdam's loss %.4g is not below half the untrained %.4g" % (loss_ob, before))

# Checkpoint: moments and step come back, the 1-bit states are reset.
sd = opt.state_dict()
m2 = net()
m2.load_state_dict(m_ob.state_dict())
opt2 = OneBitAdam(m2.parameters(), lr=LR, freeze_step=FREEZE, process_group=sc)
opt2.load_state_dict(sd)
if opt2._step != STEPS or any(ob is not None for ob in opt2._onebit):
    fail("load_state_dict: step %d (want %d), 1-bit states not reset" % (opt2._step, STEPS))
for p, q in zip(m_ob.parameters(), m2.parameters()):
    for k in ("exp_avg", "exp_avg_sq"):
        if not torch.equal(opt.state[p][k], opt2.state[q][k]):
            fail("load_state_dict: %s differs" % k)
opt.close()
train(m2, opt2, 3, False)
if any(ob is None for ob in opt2._onebit):
    fail("no 1-bit state after compressed steps following load_state_dict")
same_everywhere(m2, "OneBitAdam after load_state_dict")
opt2.close()

# exp_avg_mask: the first layer's weight rows 0..7 masked out.
m3 = net()
mask = torch.ones(64, 16)
mask[:8] = 0
w = m3[0].weight
opt3 = OneBitAdam([{"params": [w], "exp_avg_mask": mask},
                   {"params": [p for p in m3.parameters() if p is not w]}], lr=LR, freeze_step=5,
                  process_group=sc)
train(m3, opt3, 12, False)
ea = opt3.state[w]["exp_avg"]
if not (torch.count_nonzero(ea[:8]) == 0 and torch.count_nonzero(ea[8:]) > 0):
    fail("exp_avg_mask: masked momentum entries not zero (or the others all zero)")
same_everywhere(m3, "OneBitAdam with exp_avg_mask")
opt3.close()

# Weight decay (added to the update) and bias_correction=False (DeepSpeed's
# update) through a short warm-up, against the update written out here; the
# communicator passed as a sparsecoll Comm.
def manual(steps, wd, bc, b1=0.9, b2=0.999, eps=1e-8):
    model = net()
    params = list(model.parameters())
    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]
    g = torch.Generator().manual_seed(10 + R)
    for t in range(1, steps + 1):
        x = torch.randn(32, 16, generator=g)
        with torch.no_grad():
            y = teacher(x)
        for p in params:
            p.grad = None
        (model(x) - y).square().mean().backward()
        dense_average(model)
        with torch.no_grad():
            for p, m, v in zip(params, ms, vs):
                m.copy_(b1 * m + (1 - b1) * p.grad)
                v.copy_(b2 * v + (1 - b2) * p.grad * p.grad)
                mh, vh = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if bc else (m, v)
                p.copy_(p - LR * (mh / (vh.sqrt() + eps) + wd * p))
    return flat(model)


for wd, bc in ((0.1, True), (0.0, False), (0.05, False)):
    m4 = net()
    opt4 = OneBitAdam(m4.parameters(), lr=LR, weight_decay=wd, bias_correction=bc, freeze_step=FREEZE,
                      process_group=sc.comm)
    train(m4, opt4, 8, False)
    opt4.close()
    diff = (flat(m4) - manual(8, wd, bc)).abs().max().item()
    if not diff <= 1e-6:
        fail("weight_decay %g, bias_correction %s: %.3g from the written-out update" % (wd, bc, diff))

# Refusals.
for bad in (lambda: opt4.add_param_group({"params": [nn.Parameter(torch.zeros(3))]}),
            lambda: OneBitAdam(net().parameters(), freeze_step=0, process_group=sc),
            lambda: OneBitAdam(net().parameters(), betas=(1.0, 0.999), process_group=sc),
            lambda: OneBitAdam([{"params": [net()[0].weight], "exp_avg_mask": torch.ones(3)}], process_group=sc)):
    try:
        bad()
        fail("a refused OneBitAdam was made")
    except ArgumentError:
        pass
dist.barrier()
dist.destroy_process_group()
