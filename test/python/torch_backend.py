# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed on backend "sparsecoll" under torchrun's variables (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; torch's TCPStore listens on MASTER_PORT):
every collective against a reference computed locally from every rank's
seeded input, synchronous and async (Work.wait / is_completed / get_future)."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import sparsecoll
import sparsecoll.torch  # noqa: F401  (registers the backend)

dist.init_process_group("sparsecoll")
R, P = dist.get_rank(), dist.get_world_size()
assert R == int(os.environ["RANK"]) and P == int(os.environ["WORLD_SIZE"])
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


def raises(code, fn, what):
    try:
        fn()
    except sparsecoll.Error as e:
        ok(e.code == code, "%s: got %s" % (what, e.code))
        return
    ok(False, "%s: no error" % what)


ok(dist.get_backend() == "sparsecoll", "backend name")
ops = [(dist.ReduceOp.SUM, lambda s: s.sum(0)), (dist.ReduceOp.PRODUCT, lambda s: s.prod(0)),
       (dist.ReduceOp.MIN, lambda s: s.min(0).values), (dist.ReduceOp.MAX, lambda s: s.max(0).values)]
if hasattr(dist.ReduceOp, "AVG"):
    ops.append((dist.ReduceOp.AVG, lambda s: s.sum(0) / P))
for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16):
    for op, f in ops:
        if op == getattr(dist.ReduceOp, "AVG", None) and not dtype.is_floating_point:
            continue
        n = 37
        want = f(torch.stack([data(r, n, dtype) for r in range(P)]).double()).to(dtype)
        x = data(R, n, dtype)
        dist.all_reduce(x, op=op)
        ok(torch.equal(x, want), "all_reduce %s %s" % (dtype, op))
        x = data(R, n, dtype)
        w = dist.all_reduce(x, op=op, async_op=True)
        ok(w.wait() and w.is_completed() and torch.equal(x, want), "all_reduce async %s" % dtype)
        fut = dist.all_reduce(data(R, n, dtype), op=op, async_op=True).get_future()
        ok(torch.equal(fut.wait()[0], want), "get_future value %s" % dtype)

n = 11
parts = [torch.empty(n) for _ in range(P)]
dist.all_gather(parts, data(R, n))
ok(all(torch.equal(parts[r], data(r, n)) for r in range(P)), "all_gather list")
out = torch.empty(P * n)
gather_into = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
gather_into(out, data(R, n))
ok(torch.equal(out, torch.cat([data(r, n) for r in range(P)])), "all_gather_into_tensor")

full = torch.stack([data(r, P * n, salt=1) for r in range(P)]).sum(0)
out = torch.empty(n)
dist.reduce_scatter(out, list(data(R, P * n, salt=1).split(n)))
ok(torch.equal(out, full[R * n:(R + 1) * n]), "reduce_scatter list")
out = torch.empty(n)
rs_tensor = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
w = rs_tensor(out, data(R, P * n, salt=1), async_op=True)
w.wait()
ok(torch.equal(out, full[R * n:(R + 1) * n]), "reduce_scatter_tensor async")

for root in range(P):
    x = data(R, n, salt=2)
    dist.broadcast(x, src=root)
    ok(torch.equal(x, data(root, n, salt=2)), "broadcast src=%d" % root)
    x = data(R, n, salt=3)
    dist.reduce(x, dst=root, op=dist.ReduceOp.MAX)
    if R == root:
        ok(torch.equal(x, torch.stack([data(r, n, salt=3) for r in range(P)]).max(0).values), "reduce dst=%d" % root)
dist.barrier()
ok(dist.barrier(async_op=True).wait(), "barrier async")

# Several operations in flight at once complete in order, each correct.
xs = [data(R, 1000 + i, salt=4) for i in range(8)]
ws = [dist.all_reduce(x, async_op=True) for x in xs]
for i, (x, w) in enumerate(zip(xs, ws)):
    w.wait()
    ok(torch.equal(x, torch.stack([data(r, 1000 + i, salt=4) for r in range(P)]).sum(0)), "in flight %d" % i)

# Errors: an op without counterpart, a non-contiguous tensor.
raises("SC_ERR_INVALID_ARG", lambda: dist.all_reduce(torch.zeros(4, dtype=torch.int32), op=dist.ReduceOp.BAND), "BAND")
raises("SC_ERR_INVALID_ARG", lambda: dist.all_reduce(torch.zeros(4, 4).t()), "non-contiguous")

# Work.wait(timeout): rank 0 waits 0.2 s on a collective rank P-1 joins 1.5 s
# late: SC_ERR_TIMEOUT (a RuntimeError, as gloo's), the collective goes on and
# a second wait takes its result; the same for a receive.
if P > 1:
    x = torch.full((5,), float(R + 1))
    if R == P - 1:
        time.sleep(1.5)
    w = dist.all_reduce(x, async_op=True)
    if R == 0:
        t0 = time.monotonic()
        try:
            w.wait(timeout=datetime.timedelta(seconds=0.2))
            ok(False, "wait(timeout) on a late collective returned")
        except RuntimeError as e:
            dt = time.monotonic() - t0
            ok(isinstance(e, sparsecoll.Error) and e.code == "SC_ERR_TIMEOUT" and 0.15 < dt < 1.2,
               "wait(timeout): %r after %.2f s" % (e, dt))
    ok(w.wait(timeout=datetime.timedelta(0)) and torch.equal(x, torch.full((5,), P * (P + 1) / 2)),
       "the collective after a timed-out wait")
    y = torch.zeros(3)
    if R == 0:
        w = dist.irecv(y, src=1)
        try:
            w.wait(timeout=datetime.timedelta(seconds=0.2))
            ok(False, "wait(timeout) on a late receive returned")
        except RuntimeError as e:
            ok(isinstance(e, sparsecoll.Error) and e.code == "SC_ERR_TIMEOUT", "recv wait(timeout): %r" % e)
        w.wait()
        ok(torch.equal(y, torch.arange(3.0)), "the receive after a timed-out wait")
    elif R == 1:
        time.sleep(1.0)
        dist.send(torch.arange(3.0), dst=0)
    dist.barrier()

# A new group: its own communicator, bootstrapped through the same store.
if P > 1:
    sub = dist.new_group([0, P - 1])
    if R in (0, P - 1):
        x = torch.tensor([float(R + 1)])
        dist.all_reduce(x, group=sub)
        ok(x.item() == 1 + P, "new_group all_reduce")

# Groups made one after another on one store through store objects that are
# the same on one rank and new on the others (torch passes a new PrefixStore
# per group, and a freed one's id() can come back on some ranks only): each
# group must still find its own unique id on every rank.
base = dist.distributed_c10d._get_default_store()
same = dist.PrefixStore("sparsecoll-test/", base)
kept = []
for i in range(3):
    kept.append(same if R == 0 else dist.PrefixStore("sparsecoll-test/", base))
    pg = sparsecoll.torch.ProcessGroupSparsecoll(kept[-1], R, P)
    x = torch.tensor([float(R + i)])
    pg.allreduce([x]).wait()
    ok(x.item() == sum(range(P)) + P * i, "group %d made on a reused store" % i)
    pg.shutdown()
dist.barrier()
dist.destroy_process_group()
print("rank %d: %d checks passed" % (R, checks))
