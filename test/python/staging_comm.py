# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.Comm's staged path (the one CUDA tensors take while the library
has no device data path), forced onto CPU tensors, on the ranks sc-run
started. Dense collectives are checked against references every rank
computes locally from the other ranks' seeds; gTop-k and top-k, staged,
against the same calls on the direct path (checked against numpy in
comm_numpy.py). Also: the staged path really ran (the pool was used) and a
steady loop allocates no new blocks. Exits 1 on the first mismatch."""
import sys

import torch

import sparsecoll
from sparsecoll import _staging

comm = sparsecoll.Comm.from_env()
R, P = comm.rank, comm.size
checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def data(rank, n, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + 7 * n + salt)
    return torch.randint(-3, 4, (n,), generator=g).to(dtype)


def every(n, dtype, salt=0):
    return [data(r, n, dtype, salt) for r in range(P)]


_staging.STAGE_CPU = True
pool = _staging.pool()
a0, r0 = pool.allocations, pool.reuses

for dtype in (torch.float32, torch.float64, torch.int32, torch.bfloat16):
    for n in (0, 1, 1000, 300001):
        ins = every(n, dtype)
        want = torch.stack(ins).sum(0).to(dtype) if n else torch.zeros(0, dtype=dtype)
        x = ins[R].clone()
        comm.allreduce(x)
        ok(torch.equal(x, want), "allreduce in place %s n=%d" % (dtype, n))
        x = ins[R].clone()
        out = torch.empty_like(x)
        comm.allreduce(x, "max", out=out)
        ok(torch.equal(out, torch.stack(ins).max(0).values if n else out), "allreduce max out= %s n=%d" % (dtype, n))
        ok(torch.equal(x, ins[R]), "allreduce out=: input unchanged %s n=%d" % (dtype, n))

# Several operations of one size class in flight at once: each its own block.
n = 5000
reqs, xs = [], []
for i in range(6):
    x = data(R, n, torch.float32, salt=i)
    xs.append(x)
    reqs.append(comm.iallreduce(x))
for i, q in enumerate(reqs):
    got = q.wait()
    ok(got is xs[i], "iallreduce returns the caller's tensor")
    ok(torch.equal(xs[i], torch.stack(every(n, torch.float32, salt=i)).sum(0)), "iallreduce #%d of 6 in flight" % i)
q = comm.iallreduce(torch.ones(10))
while not q.test():
    pass
ok(torch.equal(q.wait(), torch.full((10,), float(P))), "iallreduce completed through test()")

m = 777
ins = every(m * P, torch.float32, salt=1)
got = comm.reduce_scatter(ins[R].clone())
ok(torch.equal(got, torch.stack(ins).sum(0)[R * m:(R + 1) * m]), "reduce_scatter")
ins = every(m, torch.int32, salt=2)
got = comm.allgather(ins[R].clone().reshape(7, 111))
ok(got.shape == (7 * P, 111) and torch.equal(got.reshape(-1), torch.cat(ins)), "allgather (shape and values)")
out = torch.empty(m * P, dtype=torch.int32)
ok(comm.iallgather(ins[R], out=out).wait() is out and torch.equal(out, torch.cat(ins)), "iallgather out=")
for root in range(P):
    ins = every(m, torch.float64, salt=3 + root)
    x = ins[R].clone()
    comm.broadcast(x, root)
    ok(torch.equal(x, ins[root]), "broadcast root %d" % root)
    x = ins[R].clone()
    comm.reduce(x, "sum", root)
    if R == root:
        ok(torch.equal(x, torch.stack(ins).sum(0)), "reduce root %d" % root)

# gTop-k with ef=True, two gradients of one size class over 4 steps, staged vs
# direct: the residual must follow the caller's tensor, not the staged copy.
n, k = 20000, 150
comm_direct = comm.split(0, R)
grads = {"staged": [data(R, n, torch.float32, salt=50 + i).float() / 3 for i in range(2)]}
grads["direct"] = [g.clone() for g in grads["staged"]]
for step in range(4):
    for i in range(2):
        fresh = data(R, n, torch.float32, salt=100 + 10 * step + i) / 7
        _staging.STAGE_CPU = True
        g = grads["staged"][i]
        g.copy_(fresh)
        comm.gtopk_allreduce(g, k, ef=True)
        _staging.STAGE_CPU = False
        g = grads["direct"][i]
        g.copy_(fresh)
        comm_direct.gtopk_allreduce(g, k, ef=True)
        ok(torch.equal(grads["staged"][i], grads["direct"][i]),
           "gtopk ef=True staged == direct, step %d grad %d" % (step, i))
        ok(int((grads["staged"][i] != 0).sum()) <= k, "gtopk keeps <= k, step %d grad %d" % (step, i))
_staging.STAGE_CPU = True
ef = sparsecoll.ErrorFeedback(n, torch.float32)
x = data(R, n, torch.float32, salt=9) / 5
y = x.clone()
comm.gtopk_allreduce(x, k, ef=ef)
_staging.STAGE_CPU = False
ef2 = sparsecoll.ErrorFeedback(n, torch.float32)
comm_direct.gtopk_allreduce(y, k, ef=ef2)
ok(torch.equal(x, y), "gtopk explicit ErrorFeedback staged == direct")
_staging.STAGE_CPU = True

v = data(R, 4000, torch.float32, salt=11) + torch.linspace(0, 1, 4000)
ix, vals = comm.topk(v, 40)
_staging.STAGE_CPU = False
ix2, vals2 = comm.topk(v, 40)
ok(torch.equal(ix, ix2) and torch.equal(vals, vals2), "topk staged == direct")
oi, ov = comm.sparse_allreduce(ix2, vals2, 4000, 40, "allgather")
_staging.STAGE_CPU = True
oi2, ov2 = comm.sparse_allreduce(ix2, vals2, 4000, 40, "allgather")
ok(torch.equal(oi, oi2) and torch.equal(ov, ov2), "sparse_allreduce staged == direct")

ok(pool.allocations > a0, "the staged path ran (the pool allocated)")
# A steady loop: same sizes as above, nothing new to allocate.
a1 = pool.allocations
for step in range(5):
    for n in (1000, 300001, 5000):
        x = torch.ones(n)
        comm.allreduce(x)
        ok(torch.equal(x, torch.full((n,), float(P))), "steady allreduce n=%d" % n)
ok(pool.allocations == a1,
   "steady loop: no new pinned blocks (%d allocations before, %d after)" % (a1, pool.allocations))
ok(pool.reuses > r0, "blocks were reused")

# Errors on the staged path leave the pool consistent.
cached = pool.cached_bytes()
try:
    comm.allreduce(torch.ones(3, dtype=torch.bool))
    ok(False, "bool allreduce refused")
except sparsecoll.ArgumentError:
    ok(True, "bool allreduce refused")
try:
    comm.allreduce(torch.ones(4, 4).t())
    ok(False, "non-contiguous refused")
except sparsecoll.ArgumentError:
    ok(True, "non-contiguous refused")
ok(pool.cached_bytes() >= cached, "no block lost to the refused calls")

comm_direct.close()
comm.close()
print("rank %d: staging comm: %d checks passed (pool: %d allocations, %d reuses)"
      % (R, checks, pool.allocations, pool.reuses))
