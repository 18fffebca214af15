# SPDX-License-Identifier: BSD-3-Clause
"""send, recv, isend, irecv and batch_isend_irecv on the "sparsecoll" backend
against the same calls on gloo, on the same inputs, for groups of 1, 2, ...
world size ranks (the default group is sparsecoll, the whole world; smaller
sparsecoll groups and a gloo group of each size are made with new_group over
the first ranks). Every pattern runs on both groups of a size, must give
equal results, and those must equal a reference computed from the senders'
seeds. Bad arguments must raise on both where gloo raises (gloo crashes the
process on a send to itself and on a receive of the wrong size: those are
asked of sparsecoll only, as is receive from any source, which it does not
offer). One launch for every size: importing torch is most of the time. Run
under torchrun's variables."""
import itertools
import os
import sys

import torch
import torch.distributed as dist

import sparsecoll
import sparsecoll.torch  # noqa: F401  (registers the backend)

dist.init_process_group("sparsecoll")
R, W = dist.get_rank(), dist.get_world_size()
assert R == int(os.environ["RANK"]) and W == int(os.environ["WORLD_SIZE"])
GROUPS = [(None if k == W else dist.new_group(list(range(k)), backend="sparsecoll"),
           dist.new_group(list(range(k)), backend="gloo")) for k in range(1, W + 1)]
P, OURS, GLOO = W, None, None  # the size and groups the suite runs on (set below)
checks = 0
MIB = 1 << 20


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def data(src, dst, n, dtype=torch.float32, tag=0):
    """What rank src sends rank dst with tag: n elements of dtype."""
    g = torch.Generator().manual_seed(100000 * tag + 1000 * src + 10 * dst + n % 9973)
    x = torch.randint(-50, 51, (n,), generator=g)
    if dtype == torch.bool:
        return x > 0
    if dtype.is_complex:
        return torch.complex(x.float(), -x.float()).to(dtype)
    if dtype == torch.uint8:
        return (x + 50).to(dtype)
    return x.to(dtype)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def both(fn, what, want=None):
    """fn(group) on the sparsecoll group and on the gloo group: equal results
    (and equal to want when given)."""
    ours, theirs = fn(OURS), fn(GLOO)
    ok(same(ours, theirs), "%s: sparsecoll and gloo differ" % what)
    if want is not None:
        ok(same(ours, want), "%s: not the reference" % what)
    return ours


def raises_on(fn, group):
    try:
        fn(group)
    except Exception as e:  # gloo: RuntimeError / IndexError; sparsecoll: ArgumentError / UnsupportedError
        return e
    return None


messages = {}


def both_raise(fn, what):
    ours, theirs = raises_on(fn, OURS), raises_on(fn, GLOO)
    ok(ours is not None, "%s: sparsecoll did not raise" % what)
    ok(theirs is not None, "%s: gloo did not raise" % what)
    messages[what] = (ours, theirs)
    return ours


def ours_raise(fn, what, kind=sparsecoll.ArgumentError, words=()):
    e = raises_on(fn, OURS)
    ok(isinstance(e, kind), "%s: %r, not a %s" % (what, e, kind.__name__))
    ok(all(w in str(e) for w in words), "%s: %s does not say %s" % (what, e, words))
    messages[what] = (e, None)
    return e


DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.float64,
          torch.int8)
# No sc_dtype_t: they move as bytes.
BYTE_DTYPES = (torch.bool, torch.complex64, torch.int16)


def suite():
    nxt, prv = (R + 1) % P, (R - 1) % P

    # ---- send/recv: a ring shift, blocking (even ranks send first).
    sizes = [(dt, n) for dt in DTYPES for n in (0, 1, 1000)] + [(dt, 5) for dt in BYTE_DTYPES]
    sizes += [(torch.float32, 3 * MIB // 4 + 1), (torch.int64, 5 * MIB // 8), (torch.bfloat16, MIB + 3)]
    for dt, n in sizes:
        def ring(g, dt=dt, n=n):
            out = torch.full((n,), 7).to(dt)
            if R % 2 == 0:
                dist.send(data(R, nxt, n, dt), nxt, group=g)
                ok(dist.recv(out, prv, group=g) == prv, "recv returns its source")
            else:
                dist.recv(out, prv, group=g)
                dist.send(data(R, nxt, n, dt), nxt, group=g)
            return out
        both(ring, "send/recv ring %s n=%d" % (dt, n), data(prv, R, n, dt))

    # 2-D tensors, a tag.
    both(lambda g: ring2d(g), "send/recv 2-D, tag 3", data(prv, R, 12, torch.float64, 3).view(3, 4))

    # ---- isend/irecv: receive posted first or send posted first, waited in
    # either order; small and large (past the eager limit).
    for n in (10, MIB // 2):
        for recv_first in (True, False):
            for wait_send_first in (True, False):
                def iring(g, n=n, recv_first=recv_first, wait_send_first=wait_send_first):
                    out = torch.empty(n, dtype=torch.int32)
                    if recv_first:
                        rw = dist.irecv(out, prv, group=g, tag=2)
                        sw = dist.isend(data(R, nxt, n, torch.int32, 2), nxt, group=g, tag=2)
                    else:
                        sw = dist.isend(data(R, nxt, n, torch.int32, 2), nxt, group=g, tag=2)
                        rw = dist.irecv(out, prv, group=g, tag=2)
                    for w in ((sw, rw) if wait_send_first else (rw, sw)):
                        w.wait()
                    return out
                both(iring, "isend/irecv n=%d recv first %s, send waited first %s" % (n, recv_first, wait_send_first),
                     data(prv, R, n, torch.int32, 2))

    # ---- tags: two messages to the next rank, tags 5 then 6, received 6
    # first, then 5 (small, and large enough to wait for its receive).
    for n in (3, MIB // 4):
        def tags(g, n=n):
            a, b = torch.empty(n), torch.empty(n)
            ws = [dist.isend(data(R, nxt, n, tag=5), nxt, group=g, tag=5),
                  dist.isend(data(R, nxt, n, tag=6), nxt, group=g, tag=6)]
            dist.recv(b, prv, group=g, tag=6)
            dist.recv(a, prv, group=g, tag=5)
            for w in ws:
                w.wait()
            return [a, b]
        both(tags, "tags interleaved n=%d" % n, [data(prv, R, n, tag=5), data(prv, R, n, tag=6)])

    # Two messages with one tag arrive in the order they were sent.
    def fifo(g):
        a, b = torch.empty(4, dtype=torch.int64), torch.empty(4, dtype=torch.int64)
        ws = [dist.isend(data(R, nxt, 4, torch.int64, s), nxt, group=g, tag=9) for s in (1, 2)]
        ra = dist.irecv(a, prv, group=g, tag=9)
        dist.recv(b, prv, group=g, tag=9)
        ra.wait()
        for w in ws:
            w.wait()
        return [a, b]
    both(fifo, "one tag: in sending order", [data(prv, R, 4, torch.int64, s) for s in (1, 2)])

    # ---- batch_isend_irecv: both neighbours in every order of the four
    # operations (tag 1 towards the next rank, tag 2 towards the previous, so
    # that a two-rank ring, where both are the same rank, is not ambiguous).
    for k, perm in enumerate(itertools.permutations(range(4))):
        n = 5 if k % 2 else 70000  # small, and past the eager limit
        def neighbours(g, perm=perm, n=n):
            from_prv, from_nxt = torch.empty(n), torch.empty(n)
            ops = [dist.P2POp(dist.isend, data(R, nxt, n, tag=1), nxt, g, 1),
                   dist.P2POp(dist.isend, data(R, prv, n, tag=2), prv, g, 2),
                   dist.P2POp(dist.irecv, from_prv, prv, g, 1),
                   dist.P2POp(dist.irecv, from_nxt, nxt, g, 2)]
            works = dist.batch_isend_irecv([ops[i] for i in perm])
            ok(len(works) == 4, "batch_isend_irecv: one Work per operation")
            for w in reversed(works):
                w.wait()
            return [from_prv, from_nxt]
        both(neighbours, "batch both neighbours order %s" % (perm,),
             [data(prv, R, n, tag=1), data(nxt, R, n, tag=2)])

    # All pairs in one batch (an all-to-all written as sends and receives):
    # sends first, receives first, interleaved, reversed, receives in
    # descending rank order; several dtypes.
    others = [j for j in range(P) if j != R]
    orders = {
        "sends first": lambda s, r: s + r,
        "receives first": lambda s, r: r + s,
        "interleaved": lambda s, r: [x for pair in zip(s, r) for x in pair],
        "reversed": lambda s, r: (s + r)[::-1],
        "receives descending": lambda s, r: s + r[::-1],
    }
    for (name, order), dt in zip(orders.items(), (torch.float32, torch.float16, torch.int64, torch.bfloat16,
                                                  torch.complex64)):
        def all_pairs(g, order=order, dt=dt):
            outs = {j: torch.empty(3 * j + 1, dtype=dt) for j in others}
            sends = [dist.P2POp(dist.isend, data(R, j, 3 * R + 1, dt, 4), j, g, 4) for j in others]
            recvs = [dist.P2POp(dist.irecv, outs[j], j, g, 4) for j in others]
            if sends:
                for w in dist.batch_isend_irecv(order(sends, recvs)):
                    w.wait()
            return [outs[j] for j in others]
        both(all_pairs, "batch all pairs, %s, %s" % (name, dt), [data(j, R, 3 * j + 1, dt, 4) for j in others])

    # ---- point-to-point between collectives: a receive posted before an
    # all_reduce completes independently of it.
    def around_collective(g):
        out = torch.empty(6)
        rw = dist.irecv(out, prv, group=g, tag=11)
        x = torch.full((2,), float(R))
        dist.all_reduce(x, group=g)
        dist.send(data(R, nxt, 6, tag=11), nxt, group=g, tag=11)
        rw.wait()
        return [out, x]
    both(around_collective, "irecv, all_reduce, send",
         [data(prv, R, 6, tag=11), torch.full((2,), float(sum(range(P))))])

    # ---- the Work: is_completed, get_future, result.
    for g in (OURS, GLOO):
        out = torch.empty(8)
        rw = dist.irecv(out, prv, group=g, tag=12)
        sw = dist.isend(data(R, nxt, 8, tag=12), nxt, group=g, tag=12)
        if g is OURS:
            fut = rw.get_future()
            got = fut.wait()
            ok(len(got) == 1 and got[0] is out, "get_future gives [tensor]")
            ok(rw.is_completed() and rw.is_success(), "is_completed once the future is done")
            ok(rw.result()[0] is out, "result() is [tensor]")
        sw.wait()
        rw.wait()
        ok(same(out, data(prv, R, 8, tag=12)), "Work API round: data")

    # _end_coalescing's Work covers the batch (what torch 2.x waits on for
    # CUDA tensors): sparsecoll only, called as torch's coalescing manager does.
    out = torch.empty(5, dtype=torch.float64)
    pg(OURS)._start_coalescing()
    try:
        dist.irecv(out, prv, group=OURS, tag=14)
        dist.isend(data(R, nxt, 5, torch.float64, 14), nxt, group=OURS, tag=14)
    finally:
        bw = pg(OURS)._end_coalescing([])
    ok(bw.wait() and bw.is_completed() and len(bw.result()) == 2, "_end_coalescing's Work")
    ok(same(out, data(prv, R, 5, torch.float64, 14)), "_end_coalescing's Work: data")

    # ---- bad arguments: raise on both, on every rank, before anything is sent.
    T = torch.ones
    both_raise(lambda g: dist.send(T(2), P, group=g), "send: peer past the group")
    both_raise(lambda g: dist.recv(T(2), P, group=g), "recv: peer past the group")
    both_raise(lambda g: dist.isend(T(2), -1, group=g), "isend: negative peer")
    both_raise(lambda g: dist.irecv(T(2), P + 3, group=g), "irecv: peer past the group")
    both_raise(lambda g: dist.isend(T(4, 4).t(), nxt, group=g), "isend: non-contiguous tensor")
    both_raise(lambda g: dist.irecv(T(4, 4)[:, 1], prv, group=g), "irecv: non-contiguous tensor")
    both_raise(lambda g: dist.isend(T(2), nxt, group=g, tag=-1), "isend: negative tag")
    both_raise(lambda g: dist.isend(T(2).to_sparse(), nxt, group=g), "isend: sparse tensor")
    both_raise(lambda g: dist.isend([T(2)], nxt, group=g), "isend: a list, not a tensor")
    both_raise(lambda g: dist.batch_isend_irecv([dist.P2POp(dist.isend, T(2), P, g)]),
               "batch_isend_irecv: peer past the group")
    both_raise(lambda g: dist.batch_isend_irecv([dist.P2POp(dist.irecv, T(4, 4).t(), prv, g)]),
               "batch_isend_irecv: non-contiguous tensor")
    both_raise(lambda g: dist.batch_isend_irecv([dist.P2POp(dist.send, T(2), nxt, g)]),
               "batch_isend_irecv: an op other than isend/irecv")
    both_raise(lambda g: dist.batch_isend_irecv([]), "batch_isend_irecv: no operations")
    pg_raise(P, nxt, prv)
    # gloo crashes on these: sparsecoll alone is asked.
    ours_raise(lambda g: dist.send(T(2), R, group=g), "send: peer is this rank", words=("this rank",))
    ours_raise(lambda g: dist.irecv(T(2), R, group=g), "irecv: peer is this rank", words=("this rank",))
    ours_raise(lambda g: dist.isend(T(2), nxt, group=g, tag=1 << 31), "isend: tag past INT_MAX")
    ours_raise(lambda g: dist.batch_isend_irecv([dist.P2POp(dist.isend, T(2), R, g)]),
               "batch_isend_irecv: peer is this rank", words=("this rank",))
    if OURS is None:  # the default group: irecv/recv's src=None
        ours_raise(lambda g: dist.recv(T(2)), "recv from any source", sparsecoll.UnsupportedError, ("any source",))
        ours_raise(lambda g: dist.irecv(T(2)), "irecv from any source", sparsecoll.UnsupportedError,
                   ("any source",))

    if P > 1:
        # A receive of another size fails with SC_ERR_MISMATCH naming both
        # sides; the message is dropped and the pair stays usable.
        sw = dist.isend(data(R, nxt, 3, tag=13), nxt, group=OURS, tag=13)
        e = raises_on(lambda g: dist.recv(torch.empty(2), prv, group=g, tag=13), OURS)
        ok(isinstance(e, sparsecoll.Error) and e.code == "SC_ERR_MISMATCH", "recv of another size: %r" % e)
        messages["recv of another size"] = (e, None)
        sw.wait()
        sw = dist.isend(data(R, nxt, 3, torch.int64, 13), nxt, group=OURS, tag=13)
        e = raises_on(lambda g: dist.recv(torch.empty(3), prv, group=g, tag=13), OURS)
        ok(isinstance(e, sparsecoll.Error) and e.code == "SC_ERR_MISMATCH", "recv of another dtype: %r" % e)
        sw.wait()

    # Still in step on both after the errors.
    both(lambda g: ring2d(g), "send/recv after the errors", data(prv, R, 12, torch.float64, 3).view(3, 4))


def ring2d(g):
    nxt, prv = (R + 1) % P, (R - 1) % P
    if P == 1:
        return data(prv, R, 12, torch.float64, 3).view(3, 4)
    out = torch.empty(3, 4, dtype=torch.float64)
    w = dist.irecv(out, prv, group=g, tag=3)
    dist.send(data(R, nxt, 12, torch.float64, 3).view(3, 4), nxt, group=g, tag=3)
    w.wait()
    return out


def pg(g):
    return g if g is not None else dist.distributed_c10d._get_default_group()


def pg_raise(size, nxt, prv):
    """Bad group ranks and tags handed to the process groups' own send and
    recv (torch's wrappers check group membership before them)."""
    T = torch.ones
    both_raise(lambda g: pg(g).send([T(2)], size, 0), "ProcessGroup.send: peer past the group")
    both_raise(lambda g: pg(g).recv([T(2)], size + 2, 0), "ProcessGroup.recv: peer past the group")
    both_raise(lambda g: pg(g).send([T(2)], -1, 0), "ProcessGroup.send: negative peer")
    both_raise(lambda g: pg(g).send([T(2)], nxt, -3), "ProcessGroup.send: negative tag")
    both_raise(lambda g: pg(g).recv([T(2, 3).t()], prv, 0), "ProcessGroup.recv: non-contiguous tensor")


def suite_one():
    """A group of one rank: nothing to send to but itself; the bad arguments."""
    T = torch.ones
    both_raise(lambda g: dist.send(T(2), 1, group=g), "one rank: send past the group")
    both_raise(lambda g: dist.irecv(T(2), 1, group=g), "one rank: irecv past the group")
    pg_raise(1, 0, 0)
    ours_raise(lambda g: dist.isend(T(2), 0, group=g), "one rank: isend to itself", words=("this rank",))


for k, (OURS, GLOO) in enumerate(GROUPS, 1):
    P = k
    if R < k:
        suite_one() if k == 1 else suite()
if R == 0 and os.environ.get("SHOW_MESSAGES"):
    for what, (ours, theirs) in messages.items():
        print("%s\n  sparsecoll: %s: %s\n  gloo:       %s" % (
            what, type(ours).__name__, ours, "" if theirs is None else "%s: %s" % (
                type(theirs).__name__, str(theirs).splitlines()[0])))
dist.barrier()
dist.destroy_process_group()
print("rank %d: %d checks passed" % (R, checks))
