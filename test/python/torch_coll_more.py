# SPDX-License-Identifier: BSD-3-Clause
"""all_to_all_single, all_to_all, gather, scatter, the object collectives,
all_gather_coalesced, all_reduce_coalesced and the uneven all_gather on the
"sparsecoll" backend against the same calls on gloo, on the same inputs,
for groups of 1, 2, ... world size ranks: the default group is sparsecoll
(the whole world), the smaller sparsecoll groups and a gloo group of each
size are made with new_group over the first ranks, and every call runs on
both groups of a size and must give equal results. Bad arguments must raise
on both (each such call fails on every rank before anything is sent, so the
groups stay in step). One launch for every size: importing torch is most of
the time. Run under torchrun's variables."""
import os
import sys
import warnings

import torch
import torch.distributed as dist

import sparsecoll
import sparsecoll.torch  # noqa: F401  (registers the backend)

warnings.filterwarnings("ignore", message=".*will be deprecated.*")  # the coalesced calls' notice
dist.init_process_group("sparsecoll")
R, W = dist.get_rank(), dist.get_world_size()
assert R == int(os.environ["RANK"]) and W == int(os.environ["WORLD_SIZE"])
# Per size k: (sparsecoll group, gloo group) over ranks 0..k-1 (None: the
# default group). Every rank makes every group, in the same order.
GROUPS = [(None if k == W else dist.new_group(list(range(k)), backend="sparsecoll"),
           dist.new_group(list(range(k)), backend="gloo")) for k in range(1, W + 1)]
P, OURS, GLOO = W, None, None  # the size and groups the suite runs on (set below)
checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def data(seed, shape, dtype=torch.float32, salt=0):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = 1
    for s in shape:
        n *= s
    g = torch.Generator().manual_seed(1000 * seed + 7 * n + salt)
    return torch.randint(-50, 51, shape, generator=g).to(dtype)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def both(fn, what):
    """fn(group) on the sparsecoll group and on the gloo group: equal results."""
    ours, theirs = fn(OURS), fn(GLOO)
    ok(same(ours, theirs), "%s: sparsecoll %r, gloo %r" % (what, ours, theirs))
    return ours


def raises_on(fn, group):
    try:
        fn(group)
    except Exception as e:  # gloo raises RuntimeError; sparsecoll ArgumentError / UnsupportedError
        return e
    return None


messages = {}


def both_raise(fn, what):
    ours, theirs = raises_on(fn, OURS), raises_on(fn, GLOO)
    ok(ours is not None, "%s: sparsecoll did not raise" % what)
    ok(theirs is not None, "%s: gloo did not raise" % what)
    messages[what] = (ours, theirs)
    return ours


def cnt(i, j, salt=0):
    """Rows rank i sends rank j in the uneven all-to-alls (zeros included)."""
    return (3 * i + 5 * j + salt) % 4


def suite():
    """Every call on groups OURS and GLOO of P ranks (this rank is one of them)."""
    # ---- all_to_all_single: even splits (1-D and 2-D, several dtypes), in place, async
    for dtype in (torch.float32, torch.int64, torch.float16, torch.uint8):
        for m in (0, 1, 5):
            def a2a_even(g, dtype=dtype, m=m):
                out = torch.empty(P * m, dtype=dtype)
                dist.all_to_all_single(out, data(R, P * m, dtype), group=g)
                return out
            both(a2a_even, "all_to_all_single even %s m=%d" % (dtype, m))

    def a2a_2d_async(g):
        out = torch.empty(P * 2, 3)
        dist.all_to_all_single(out, data(R, (P * 2, 3), salt=1), group=g, async_op=True).wait()
        return out

    both(a2a_2d_async, "all_to_all_single 2-D async")

    def in_place_or_not(g, x):
        """all_to_all_single of x in place on sparsecoll, out of place on gloo
        (gloo 1.13 gets the in-place call wrong: blocks come from the wrong
        ranks)."""
        if g is OURS:
            dist.all_to_all_single(x, x, group=g)
            return x
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x, group=g)
        return out

    both(lambda g: in_place_or_not(g, data(R, (P, 2), salt=2)), "all_to_all_single in place")

    # ---- all_to_all_single: uneven splits, rows of 3 elements
    for salt in (0, 1):
        def a2a_uneven(g, salt=salt):
            inp = data(R, (sum(cnt(R, j, salt) for j in range(P)), 3), torch.float64, salt)
            out = torch.full((sum(cnt(i, R, salt) for i in range(P)), 3), -1.0, dtype=torch.float64)
            dist.all_to_all_single(out, inp, [cnt(i, R, salt) for i in range(P)], [cnt(R, j, salt) for j in range(P)],
                                   group=g)
            return out
        got = both(a2a_uneven, "all_to_all_single uneven salt=%d" % salt)
        # And against a reference built from the senders' seeds.
        want = torch.cat([data(i, (sum(cnt(i, j, salt) for j in range(P)), 3), torch.float64, salt)
                          .split([cnt(i, j, salt) for j in range(P)])[R] for i in range(P)])
        ok(torch.equal(got, want), "all_to_all_single uneven salt=%d against the reference" % salt)

    # ---- all_to_all (lists, uneven): gloo 1.13 has no list all_to_all; compare
    # with gloo's all_to_all_single on the concatenation (its documented equivalent).
    out_ours = [torch.full((cnt(i, R), 2), -1) for i in range(P)]
    ins = list(data(R, (sum(cnt(R, j) for j in range(P)), 2), torch.int64, 3).split([cnt(R, j) for j in range(P)]))
    dist.all_to_all(out_ours, [t.clone() for t in ins], group=OURS)
    flat = torch.empty(sum(cnt(i, R) for i in range(P)), 2, dtype=torch.int64)
    dist.all_to_all_single(flat, torch.cat(ins), [cnt(i, R) for i in range(P)], [cnt(R, j) for j in range(P)],
                           group=GLOO)
    ok(same(out_ours, list(flat.split([cnt(i, R) for i in range(P)]))),
       "all_to_all lists against gloo's all_to_all_single")
    w = dist.all_to_all(out_ours, [t + 1 for t in ins], group=OURS, async_op=True)
    w.wait()
    ok(same(out_ours, [t + 1 for t in flat.split([cnt(i, R) for i in range(P)])]), "all_to_all async")
    ok(raises_on(lambda g: dist.all_to_all([torch.empty(1)] * P, [torch.ones(1)] * P, group=g), GLOO) is not None,
       "gloo 1.13 has no all_to_all (if this fails, compare with it directly)")

    # ---- gather and scatter from every root
    for root in range(P):
        def gather(g, root=root):
            lst = [torch.full((2, 3), -1.0) for _ in range(P)] if R == root else None
            dist.gather(data(R, (2, 3), salt=4), lst, dst=root, group=g)
            return lst
        both(gather, "gather dst=%d" % root)

        def scatter(g, root=root):
            out = torch.full((4,), -1, dtype=torch.int32)
            lst = [data(100 * root + i, 4, torch.int32, 5) for i in range(P)] if R == root else None
            dist.scatter(out, lst, src=root, group=g, async_op=True).wait()
            return out
        both(scatter, "scatter src=%d" % root)

    # ---- object collectives (all_gather, gather, scatter, broadcast underneath)
    objs = [R, "rank %d" % R * (R + 1), {"r": R, "l": list(range(R))}, (R, None)]

    def all_gather_object(g):
        out = [None] * P
        dist.all_gather_object(out, objs[R % len(objs)], group=g)
        return out

    both(all_gather_object, "all_gather_object")
    for root in range(P):
        def gather_object(g, root=root):
            out = [None] * P if R == root else None
            dist.gather_object(objs[R % len(objs)], out, dst=root, group=g)
            return out
        both(gather_object, "gather_object dst=%d" % root)

        def scatter_object_list(g, root=root):
            out = [None]
            dist.scatter_object_list(out, [objs[(i + root) % len(objs)] for i in range(P)] if R == root else None,
                                     src=root, group=g)
            return out
        both(scatter_object_list, "scatter_object_list src=%d" % root)

        def broadcast_object_list(g, root=root):
            lst = [{"from": root}, "x" * root, [root] * 3] if R == root else [None] * 3
            dist.broadcast_object_list(lst, src=root, group=g)
            return lst
        both(broadcast_object_list, "broadcast_object_list src=%d" % root)

    # ---- the coalesced calls

    def all_gather_coalesced(g):
        ins = [data(R, 3, salt=6), data(R, (2, 2), salt=7), data(R, 1, salt=8)]
        outs = [[torch.empty_like(t) for t in ins] for _ in range(P)]
        dist.all_gather_coalesced(outs, ins, group=g)
        return outs

    both(all_gather_coalesced, "all_gather_coalesced")
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
        def all_reduce_coalesced(g, op=op):
            ts = [data(R, 5, torch.int64, 9), data(R, (2, 3), torch.int64, 10), data(R, 1, torch.int64, 11)]
            if op == dist.ReduceOp.PRODUCT:
                ts = [t % 3 for t in ts]
            dist.all_reduce_coalesced(ts, op=op, group=g)
            return ts
        both(all_reduce_coalesced, "all_reduce_coalesced %s" % op)

    # ---- all_gather with uneven sizes: gloo refuses it; sparsecoll gathers
    # (rank i's tensor has i + 1 elements) like the even one.
    uneven = [torch.full((i + 1,), -1.0) for i in range(P)]
    dist.all_gather(uneven, torch.full((R + 1,), float(R)), group=OURS)
    ok(same(uneven, [torch.full((i + 1,), float(i)) for i in range(P)]), "all_gather uneven sizes")
    if P > 1:
        ok(raises_on(lambda g: dist.all_gather([torch.empty(i + 1) for i in range(P)], torch.ones(R + 1), group=g),
                     GLOO) is not None, "gloo refuses an uneven all_gather")

    def all_gather_even(g):
        out = [torch.empty(2, 2) for _ in range(P)]
        dist.all_gather(out, data(R, (2, 2), salt=12), group=g)
        return out

    both(all_gather_even, "all_gather even")

    # ---- bad arguments: raise on both, on every rank
    E = torch.empty
    both_raise(lambda g: dist.all_to_all_single(E(4 * P), E(4 * P), [4 * P] + [0] * P, [4 * P] + [0] * P, group=g),
               "all_to_all_single: more split sizes than ranks")
    both_raise(lambda g: dist.all_to_all_single(E(4 * P), E(4 * P), [1] * P, [1] * P, group=g),
               "all_to_all_single: split sizes do not add up to dim 0")
    both_raise(lambda g: dist.all_to_all_single(E(2 * P), E(4 * P), group=g),
               "all_to_all_single: input and output sizes differ")
    both_raise(lambda g: dist.all_to_all([E(1)] * (P + 1), [E(1)] * (P + 1), group=g),
               "all_to_all: more tensors than ranks")
    both_raise(lambda g: dist.gather(E(2), [E(2)] * (P + 1), dst=R, group=g),
               "gather: gather_list longer than the group")
    both_raise(lambda g: dist.gather(E(2), [E(3)] * P, dst=R, group=g), "gather: gather_list tensors of another size")
    both_raise(lambda g: dist.gather(E(2), None, dst=R, group=g), "gather: no gather_list on the destination")
    both_raise(lambda g: dist.gather(E(2), None, dst=P, group=g), "gather: destination outside the group")
    both_raise(lambda g: dist.scatter(E(2), [E(2)] * (P + 1), src=R, group=g),
               "scatter: scatter_list longer than the group")
    both_raise(lambda g: dist.scatter(E(2), [E(3)] * P, src=R, group=g),
               "scatter: scatter_list tensors of another size")
    both_raise(lambda g: dist.scatter(E(2), None, src=R, group=g), "scatter: no scatter_list on the source")
    if P > 1:
        both_raise(lambda g: dist.gather(E(2), [E(2)] * P, dst=(R + 1) % P, group=g),
                   "gather: a gather_list off the destination")
        both_raise(lambda g: dist.scatter(E(2), [E(2)] * P, src=(R + 1) % P, group=g),
                   "scatter: a scatter_list off the source")
    both_raise(lambda g: dist.all_gather([E(1)] * (P + 1), torch.ones(1), group=g),
               "all_gather: more outputs than ranks")
    both_raise(lambda g: dist.all_gather_coalesced([[E(1)]] * (P + 1), [torch.ones(1)], group=g),
               "all_gather_coalesced: more output lists than ranks")
    both_raise(lambda g: dist.all_gather_coalesced([[E(2)]] * P, [torch.ones(1)], group=g),
               "all_gather_coalesced: an output of another shape")
    both_raise(lambda g: dist.all_gather_coalesced([[E(1), E(1)]] * P, [torch.ones(1)], group=g),
               "all_gather_coalesced: an output list of another length")
    both_raise(lambda g: dist.all_reduce_coalesced([], group=g), "all_reduce_coalesced: no tensors")
    # Receive from any source is not offered (gloo has it: only ours is asked
    # to raise), on the default group; test/python/torch_p2p.py has the rest
    # of point-to-point.
    anysource = (("recv", lambda: dist.recv(torch.ones(1))), ("irecv", lambda: dist.irecv(torch.ones(1))))
    for what, fn in anysource if OURS is None else ():
        e = raises_on(lambda g: fn(), None)
        ok(isinstance(e, sparsecoll.UnsupportedError) and "any source" in str(e),
           "%s from any source: %r, not the refusal" % (what, e))
        messages["%s from any source" % what] = (e, None)

    # Still in step on both after the refusals.
    both(lambda g: in_place_or_not(g, torch.arange(P) + 10 * R), "all_to_all_single after the errors")


for k, (OURS, GLOO) in enumerate(GROUPS, 1):
    P = k
    if R < k:
        suite()
if R == 0 and os.environ.get("SHOW_MESSAGES"):
    for what, (ours, theirs) in messages.items():
        print("%s\n  sparsecoll: %s: %s\n  gloo:       %s" % (
            what, type(ours).__name__, ours, "" if theirs is None else "%s: %s" % (
                type(theirs).__name__, str(theirs).splitlines()[0])))
dist.barrier()
dist.destroy_process_group()
print("rank %d: %d checks passed" % (R, checks))
# Not through the interpreter's shutdown: there a worker thread of torch
# 1.13's gloo groups may drop the last reference to a tensor whose Python
# object it keeps, which takes the GIL, and the finalizing interpreter ends
# that thread with a forced unwind through a noexcept destructor:
# std::terminate ("terminate called without an active exception", about one
# run in twenty here, with this library's old and new builds alike; nothing
# of it on the stack). Every check has run and been counted by now.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
