# SPDX-License-Identifier: BSD-3-Clause
"""The backend's stream-ordered path on CUDA tensors (sparsecoll.torch
._ordered), on a GPU: 2 ranks sharing it, started with torchrun's variables
(cuda_stream_order.sh, run by test/gpu/gpu_checks.sh). Skips (exit 77)
without CUDA.

Each collective's input is written late by a producer on the current stream
(torch.cuda._sleep, then the write), the collective is called right after,
and a consumer reads its result right after that, with no host
synchronisation between: the result must be the input's (references from
every rank's seed on the CPU), and the call must have returned while the
producer was still running (its event not yet reached). Work.wait() must not
block the host; the future's then() sees the result. DDP on CUDA (the plain
all-reduce, and the gTop-k hook) must count no host synchronisation per
bucket (sparsecoll.torch.stats()), and DDP on CUDA must match DDP on CPU.
With SPARSECOLL_CUDA_SYNC=1 the same results come through the synchronizing
path, whose host synchronisations are counted. Exits 1 on the first
mismatch."""
import copy
import datetime
import os
import sys
import time

import torch

if not torch.cuda.is_available():
    print("skipped: no CUDA device (torch.cuda.is_available() is False)")
    sys.exit(77)

import torch.distributed as dist  # noqa: E402

import sparsecoll.torch as sct  # noqa: E402
from sparsecoll.torch import _ordered  # noqa: E402
from sparsecoll.torch.hooks import GTopkState, gtopk_hook  # noqa: E402

SYNC = os.environ.get("SPARSECOLL_CUDA_SYNC") == "1"
dist.init_process_group("sparsecoll", timeout=datetime.timedelta(seconds=120))
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


# About 50 ms of GPU time (cycles at ~2 GHz): the producer is still running
# when the host has issued the collective and the consumer behind it.
CYCLES = int(os.environ.get("SC_TEST_SLEEP_CYCLES", "100000000"))


def late(dst, src):
    """The producer: the stream sleeps, then src's values land in dst (a
    device tensor); returns an event reached once they did."""
    s = src.to(dev, non_blocking=False)  # uploaded before the sleep: the write itself is late
    torch.cuda._sleep(CYCLES)
    dst.copy_(s)
    e = torch.cuda.Event()
    e.record()
    return e


ok(_ordered.wanted([torch.empty(1, device=dev)]) == (not SYNC),
   "CUDA tensors go stream-ordered unless SPARSECOLL_CUDA_SYNC=1 (wanted: %s)"
   % _ordered.wanted([torch.empty(1, device=dev)]))

# ---- every collective behind a late producer, the consumer right after ----


def collective(name, issue, results, wants):
    """issue() calls the collective (its input produced late just before);
    results() the consumer's reads, compared with wants after one host wait
    at the end. On the warm-up pass the call may wait: a call that needs
    more memory than any before it allocates it first, and an allocation
    may wait for the stream's earlier work (docs/CUDA.md)."""
    t0 = time.perf_counter()
    issue()
    dt = time.perf_counter() - t0
    produced = PRODUCED[-1]
    running = not produced.query()
    got = [r.clone() for r in results()]  # the consumer, on the current stream
    torch.cuda.synchronize()
    for i, (g, w) in enumerate(zip(got, wants)):
        if w is not None:
            ok(torch.equal(g.cpu(), w), "%s: result %d" % (name, i))
    if not SYNC and not WARMUP[0]:
        ok(running, "%s: the call returned (%.3f s) while its producer was still running" % (name, dt))


PRODUCED = []
WARMUP = [True]


def every_collective():
    n = 4099
    for dtype in (torch.float32, torch.float64, torch.int32, torch.float16):
        ins = every(n, dtype, 1)
        x = torch.full((n,), 99, dtype=dtype, device=dev)

        def issue(x=x, v=ins[R]):
            PRODUCED.append(late(x, v))
            dist.all_reduce(x)
        collective("all_reduce sum %s" % dtype, issue, lambda x=x: [x * 1], [torch.stack(ins).sum(0)])
    for opname, ref in (("MAX", lambda t: t.max(0).values), ("MIN", lambda t: t.min(0).values)):
        ins = every(n, salt=2)
        x = torch.zeros(n, device=dev)

        def issue(x=x, v=ins[R], op=getattr(dist.ReduceOp, opname)):
            PRODUCED.append(late(x, v))
            dist.all_reduce(x, op=op)
        collective("all_reduce " + opname, issue, lambda x=x: [x], [ref(torch.stack(ins))])
    m = 1001
    for root in range(P):
        ins = every(m, salt=3 + root)
        x = torch.zeros(m, device=dev)

        def issue(x=x, v=ins[R], root=root):
            PRODUCED.append(late(x, v))
            dist.broadcast(x, root)
        collective("broadcast root %d" % root, issue, lambda x=x: [x], [ins[root]])
        y = torch.zeros(m, device=dev)

        def issue(y=y, v=ins[R], root=root):
            PRODUCED.append(late(y, v))
            dist.reduce(y, root)
        collective("reduce root %d" % root, issue, lambda y=y: [y], [torch.stack(ins).sum(0) if R == root else None])
    ins = every(m, salt=10)
    x = torch.zeros(m, device=dev)
    outs = [torch.empty(m, device=dev) for _ in range(P)]
    out = torch.empty(m * P, device=dev)
    gather_into = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base

    def issue():
        PRODUCED.append(late(x, ins[R]))
        dist.all_gather(outs, x)
        gather_into(out, x)
    collective("all_gather, list and into a tensor", issue, lambda: outs + [out], ins + [torch.cat(ins)])
    ins = every(m * P, salt=11)
    x = torch.zeros(m * P, device=dev)
    blk, blk2 = torch.empty(m, device=dev), torch.empty(m, device=dev)
    scatter_from = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base

    def issue():
        PRODUCED.append(late(x, ins[R]))
        dist.reduce_scatter(blk, list(x.split(m)))
        scatter_from(blk2, x)
    want = torch.stack(ins).sum(0)[R * m:(R + 1) * m]
    collective("reduce_scatter, list and tensor", issue, lambda: [blk, blk2], [want, want])
    ins = every(6 * P, salt=12)
    x = torch.zeros(6 * P, device=dev)
    y = torch.empty(6 * P, device=dev)

    def issue():
        PRODUCED.append(late(x, ins[R]))
        dist.all_to_all_single(y, x)
    collective("all_to_all_single", issue, lambda: [y], [torch.cat([a[R * 6:(R + 1) * 6] for a in ins])])
    for root in range(P):
        ins = every(m, salt=20 + root)
        x = torch.zeros(m, device=dev)
        gl = [torch.empty(m, device=dev) for _ in range(P)] if R == root else None

        def issue(x=x, v=ins[R], gl=gl, root=root):
            PRODUCED.append(late(x, v))
            dist.gather(x, gl, dst=root)
        collective("gather root %d" % root, issue, lambda gl=gl: gl or [], ins if R == root else [])
        src = data(root, m * P, salt=30)
        full = torch.zeros(m * P, device=dev)
        o = torch.empty(m, device=dev)

        def issue(full=full, o=o, root=root, src=src):
            PRODUCED.append(late(full, src))
            dist.scatter(o, list(full.split(m)) if R == root else None, src=root)
        collective("scatter root %d" % root, issue, lambda o=o: [o], [src[R * m:(R + 1) * m]])


every_collective()  # the warm-up: every shape once
WARMUP[0] = False
sct.reset_stats()
every_collective()
stats = sct.stats()
ok((stats["host_syncs"] == 0) != SYNC, "host synchronisations over the collectives: %d" % stats["host_syncs"])

# ---- Work: wait() does not block the host; the future sees the result ----
ins = every(1 << 16, salt=40)
x = torch.zeros(1 << 16, device=dev)
dist.all_reduce(x)  # this shape's memory, before the timed call
produced = late(x, ins[R])
w = dist.all_reduce(x, async_op=True)
t0 = time.perf_counter()
w.wait()
waited = time.perf_counter() - t0
if not SYNC:
    ok(not produced.query(), "Work.wait() returned (%.3f s) while the producer still ran" % waited)
fut = w.get_future().then(lambda f: f.value()[0] * 2)
got = fut.wait()
torch.cuda.synchronize()
ok(w.is_completed(), "is_completed() once the stream passed the collective")
ok(torch.equal(got.cpu(), torch.stack(ins).sum(0) * 2), "get_future().then() sees the result")
ok(torch.equal(x.cpu(), torch.stack(ins).sum(0)), "the async all_reduce's result")

# ---- DDP on CUDA: no host synchronisation per bucket; the CPU model agrees ----
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                          torch.nn.Linear(256, 8))


def train(model, d, steps, seed):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(seed)
    per_step = []
    for _ in range(steps):
        x = torch.randn(32, 64, generator=gen).to(d)
        y = torch.randn(32, 8, generator=gen).to(d)
        before = sct.stats()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        after = sct.stats()
        opt.step()
        per_step.append({k: after[k] - before[k] for k in after})
    return per_step


models = {"cuda": torch.nn.parallel.DistributedDataParallel(copy.deepcopy(net).to(dev), device_ids=[dev.index],
                                                            bucket_cap_mb=0.1),
          "cpu": torch.nn.parallel.DistributedDataParallel(copy.deepcopy(net), bucket_cap_mb=0.1)}
counted = {name: train(model, dev if name == "cuda" else torch.device("cpu"), 4, R) for name, model in models.items()}
diff = max((a.detach().cpu() - b.detach()).abs().max().item()
           for a, b in zip(models["cuda"].parameters(), models["cpu"].parameters()))
ok(diff < 1e-4, "DDP on CUDA vs CPU: max |difference| %.3g" % diff)
cuda_steps = counted["cuda"]
print("rank %d: DDP on CUDA (%s path), per step: %s" % (R, "synchronizing" if SYNC else "stream-ordered", cuda_steps))
if SYNC:
    ok(all(c["host_syncs"] > 0 for c in cuda_steps), "SPARSECOLL_CUDA_SYNC=1: host synchronisations are counted")
else:
    ok(all(c["host_syncs"] == 0 for c in cuda_steps), "DDP on CUDA: no host synchronisation in any step")
    ok(all(c["stream_calls"] >= 1 for c in cuda_steps), "DDP on CUDA: the buckets went stream-ordered")

# ---- the gTop-k hook on CUDA ----
model = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(net).to(dev), device_ids=[dev.index],
                                                  bucket_cap_mb=0.1)
state = GTopkState(density=0.05)
model.register_comm_hook(state, gtopk_hook)
hook_steps = train(model, dev, 3, R)
print("rank %d: gTop-k hook on CUDA, per step: %s" % (R, hook_steps))
if not SYNC:
    ok(all(c["host_syncs"] == 0 for c in hook_steps), "gTop-k hook on CUDA: no host synchronisation")
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
every_rank = [torch.empty_like(flat) for _ in range(P)]
dist.all_gather(every_rank, flat)
torch.cuda.synchronize()
ok(all(torch.equal(t, flat) for t in every_rank), "gTop-k hook on CUDA: the same parameters on every rank")
state.close()

dist.destroy_process_group()
print("rank %d: stream order on CUDA (%s): %d checks passed" % (R, "synchronizing" if SYNC else "stream-ordered",
                                                                 checks))
