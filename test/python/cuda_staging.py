# SPDX-License-Identifier: BSD-3-Clause
"""CUDA tensors through the "sparsecoll" backend and its Comm while the
library has no device data path: they are staged through pinned host memory
(sparsecoll._staging). Started with torchrun's variables (cuda_staging.sh);
needs a CUDA device. References are computed locally on the CPU from every
rank's seed; gTop-k is compared with the same call on CPU copies; DDP on
CUDA with DDP on CPU. Exits 1 on the first mismatch."""
import copy
import datetime
import os
import sys

import torch
import torch.distributed as dist

import sparsecoll
import sparsecoll.torch  # noqa: F401  (registers the backend)
from sparsecoll import _staging

dist.init_process_group("sparsecoll", timeout=datetime.timedelta(seconds=60))
R, P = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", R % torch.cuda.device_count())
torch.cuda.set_device(dev)
checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def data(rank, n, dtype=torch.float32, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + 7 * n + salt)
    return torch.randint(-3, 4, (n,), generator=g).to(dtype)


def every(n, dtype=torch.float32, salt=0):
    return [data(r, n, dtype, salt) for r in range(P)]


# cuda_staging.sh runs this with SPARSECOLL_CUDA_DIRECT=0 (the staged path)
# and again unset (direct whenever the library has a device runtime).
if os.environ.get("SPARSECOLL_CUDA_DIRECT") == "0":
    ok(not _staging.device_path(), "CUDA tensors are staged (SPARSECOLL_CUDA_DIRECT=0)")
else:
    ok(_staging.device_path() == sparsecoll.cuda_available(), "direct exactly when the library has a device runtime")
STAGED = not _staging.device_path()

for dtype in (torch.float32, torch.float16, torch.int64):
    for n in (1, 4096, 1 << 20):
        ins = every(n, dtype)
        x = ins[R].to(dev)
        dist.all_reduce(x)
        ok(x.device == dev and torch.equal(x.cpu(), torch.stack(ins).sum(0)), "all_reduce %s n=%d" % (dtype, n))

# Produced on a side stream right before the call: the staged copy must see it.
s = torch.cuda.Stream(dev)
with torch.cuda.stream(s):
    big = torch.ones(1 << 22, device=dev)
    for _ in range(20):
        big = big * 1.0001 + 0.0
    dist.all_reduce(big)
s.synchronize()
ref = torch.ones(1 << 22)
for _ in range(20):
    ref = ref * 1.0001 + 0.0
ok(torch.allclose(big.cpu(), ref * P), "all_reduce of a tensor produced on a side stream")

works, xs = [], []
for i in range(6):
    xs.append(data(R, 5000, salt=i).to(dev))
    works.append(dist.all_reduce(xs[-1], async_op=True))
for i, w in enumerate(works):
    w.wait()
    ok(torch.equal(xs[i].cpu(), torch.stack(every(5000, salt=i)).sum(0)), "async all_reduce #%d of 6 in flight" % i)

m = 1000
ins = every(m, salt=20)
out = torch.empty(m * P, device=dev)
gather_into = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
gather_into(out, ins[R].to(dev))
ok(torch.equal(out.cpu(), torch.cat(ins)), "all_gather into a CUDA tensor")
outs = [torch.empty(m, device=dev) for _ in range(P)]
dist.all_gather(outs, ins[R].to(dev))
ok(all(torch.equal(o.cpu(), ins[r]) for r, o in enumerate(outs)), "all_gather list")
ins = every(m * P, salt=21)
blk = torch.empty(m, device=dev)
dist.reduce_scatter(blk, list(ins[R].to(dev).split(m)))
ok(torch.equal(blk.cpu(), torch.stack(ins).sum(0)[R * m:(R + 1) * m]), "reduce_scatter")
for root in range(P):
    ins = every(m, salt=30 + root)
    x = ins[R].to(dev)
    dist.broadcast(x, root)
    ok(torch.equal(x.cpu(), ins[root]), "broadcast root %d" % root)

comm = dist.distributed_c10d._get_default_group().comm
n, k = 100000, 500
g = (data(R, n, salt=40) / 3).to(dev)
h = g.cpu()
comm.gtopk_allreduce(g, k, ef=True)
comm.gtopk_allreduce(h, k, ef=True)
ok(torch.equal(g.cpu(), h), "gtopk_allreduce CUDA == CPU")
ix, vals = comm.topk(g, 50)
ix2, vals2 = comm.topk(h, 50)
ok(ix.device == dev and torch.equal(ix.cpu(), ix2) and torch.equal(vals.cpu(), vals2), "topk CUDA == CPU")

if STAGED:
    pool = _staging.pool()
    a0 = pool.allocations
    for _ in range(5):
        x = torch.ones(1 << 20, device=dev)
        dist.all_reduce(x)
    ok(pool.allocations == a0, "steady all_reduce: no new pinned blocks")
    ok(pool.acquire(4096).is_pinned(), "pool blocks are pinned")

# DDP on CUDA against DDP on CPU, same backend, 3 steps.
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
models = {"cuda": torch.nn.parallel.DistributedDataParallel(copy.deepcopy(net).to(dev), device_ids=[dev.index]),
          "cpu": torch.nn.parallel.DistributedDataParallel(copy.deepcopy(net))}
for name, model in models.items():
    d = dev if name == "cuda" else torch.device("cpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(R)
    for step in range(3):
        x = torch.randn(16, 32, generator=gen).to(d)
        y = torch.randn(16, 4, generator=gen).to(d)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
diff = max((a.detach().cpu() - b.detach()).abs().max().item()
           for a, b in zip(models["cuda"].parameters(), models["cpu"].parameters()))
ok(diff < 1e-5, "DDP on CUDA vs CPU: max |difference| %.3g" % diff)

dist.destroy_process_group()
print("rank %d: CUDA tensors (%s): %d checks passed" % (R, "staged" if STAGED else "direct", checks))
