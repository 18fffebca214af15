# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.Comm's send, recv, isend, irecv and sparsecoll.group against
numpy references, on the ranks sc-run started. Every rank derives what any
rank sends any other from a seed, so the reference is computed locally.
Ring shifts (blocking, non-blocking, in a group in any order), messages to
itself, all pairs in one group, tags received out of order and one tag in
order, collectives and sends in one group, the arrays of a group's queued
calls kept alive by the group, the same on torch tensors directly and
through the staging path (with --torch), and the errors. Exits 1 on the
first mismatch."""
import gc
import sys
import time

import numpy as np

import sparsecoll

comm = sparsecoll.Comm.from_env()
R, P = comm.rank, comm.size
NXT, PRV = (R + 1) % P, (R - 1) % P
checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def data(src, dst, n, dtype=np.float32, tag=0):
    """What rank src sends rank dst with tag."""
    rng = np.random.default_rng(100000 * tag + 1000 * src + 10 * dst + n % 9973)
    if np.dtype(dtype).kind == "u":
        return rng.integers(0, 100, n).astype(dtype)
    return rng.integers(-50, 51, n).astype(dtype)


def raises(code, fn, what):
    try:
        fn()
    except sparsecoll.Error as e:
        ok(e.code == code and str(e), "%s: code %s (got %s: %s)" % (what, code, e.code, e))
        return e
    ok(False, "%s: no error" % what)


dtypes = (np.float32, np.float16, np.int64, np.uint8, np.float64, np.int8, np.uint32)
sizes = (0, 1, 1000)

# ---- blocking ring shift (even ranks send first; one rank: nothing to shift)
if P > 1:
    for dt in dtypes:
        for n in sizes + ((3 << 20) // np.dtype(dt).itemsize + 1,) * (dt in (np.float32, np.uint8)):
            out = np.full(n, 7, dt)
            if R % 2 == 0:
                ok(comm.send(data(R, NXT, n, dt), NXT) is not None, "send returns its array")
                ok(comm.recv(out, PRV) is out, "recv returns its array")
            else:
                comm.recv(out, PRV)
                comm.send(data(R, NXT, n, dt), NXT)
            ok(np.array_equal(out, data(PRV, R, n, dt)), "ring %s n=%d" % (np.dtype(dt).name, n))

# ---- isend/irecv: either posted first, either waited first, small and
# large; test() polls. Also to itself (a local copy once both are posted).
for peer_send, peer_recv in ((NXT, PRV), (R, R)):
    for n in (10, 1 << 18):
        for recv_first in (True, False):
            out = np.empty(n, np.int32)
            x = data(R, peer_send, n, np.int32, 2)
            if recv_first:
                rr = comm.irecv(out, peer_recv, tag=2)
                sr = comm.isend(x, peer_send, tag=2)
            else:
                sr = comm.isend(x, peer_send, tag=2)
                rr = comm.irecv(out, peer_recv, tag=2)
            ok(isinstance(rr, sparsecoll.Request), "irecv returns a Request")
            while not rr.test():
                time.sleep(0.001)
            ok(rr.wait() is out and sr.wait() is x, "wait() returns the arrays")
            ok(np.array_equal(out, data(peer_recv, R, n, np.int32, 2)),
               "isend/irecv n=%d recv first %s peer %d" % (n, recv_first, peer_send))

# ---- groups: a ring written as blocking receive-then-send (would deadlock
# for large messages outside a group), to itself, and all pairs.
for n in (5, 1 << 19):
    out = np.empty(n, np.float64)
    with sparsecoll.group():
        comm.recv(out, PRV, tag=3)
        comm.send(data(R, NXT, n, np.float64, 3), NXT, tag=3)  # a temporary: the group keeps it
        gc.collect()
    ok(np.array_equal(out, data(PRV, R, n, np.float64, 3)), "group ring n=%d" % n)
    out = np.empty(n, np.float64)
    with comm.group():
        comm.recv(out, R, tag=4)
        comm.send(data(R, R, n, np.float64, 4), R, tag=4)
    ok(np.array_equal(out, data(R, R, n, np.float64, 4)), "group to itself n=%d" % n)

for order in ("sends first", "receives first", "descending"):
    outs = {j: np.full(2 * j + 3, 9, np.int64) for j in range(P)}
    sparsecoll.group_start()
    peers = range(P) if order != "descending" else range(P - 1, -1, -1)
    if order == "receives first":
        for j in peers:
            comm.recv(outs[j], j, tag=5)
    for j in peers:
        comm.send(data(R, j, 2 * R + 3, np.int64, 5), j, tag=5)
    if order != "receives first":
        for j in peers:
            comm.recv(outs[j], j, tag=5)
    gc.collect()
    sparsecoll.group_end()
    ok(all(np.array_equal(outs[j], data(j, R, 2 * j + 3, np.int64, 5)) for j in range(P)),
       "group all pairs, %s" % order)

# Nested groups: only the outermost end starts the queued calls; a
# collective queued in the same group.
out = np.empty(6, np.float32)
x = np.full(4, float(R + 1), np.float32)
with sparsecoll.group():
    with sparsecoll.group():
        comm.recv(out, PRV, tag=6)
    comm.allreduce(x)
    comm.send(data(R, NXT, 6, tag=6), NXT, tag=6)
ok(np.array_equal(out, data(PRV, R, 6, tag=6)), "nested group")
ok(np.array_equal(x, np.full(4, P * (P + 1) / 2, np.float32)), "all-reduce in the group")

# ---- tags: tags 7 then 8 sent, 8 received first; two messages of one tag
# arrive in the order they were sent.
for n in (3, 1 << 17):
    reqs = [comm.isend(data(R, NXT, n, tag=t), NXT, tag=t) for t in (7, 8)]
    b = comm.recv(np.empty(n, np.float32), PRV, tag=8)
    a = comm.recv(np.empty(n, np.float32), PRV, tag=7)
    for q in reqs:
        q.wait()
    ok(np.array_equal(a, data(PRV, R, n, tag=7)) and np.array_equal(b, data(PRV, R, n, tag=8)),
       "tags received in the other order n=%d" % n)
reqs = [comm.isend(data(R, NXT, 4, np.int64, s), NXT, tag=9) for s in (1, 2)]
got = [comm.irecv(np.empty(4, np.int64), PRV, tag=9) for _ in range(2)]
got = [q.wait() for q in reversed(got)][::-1]
for q in reqs:
    q.wait()
ok(all(np.array_equal(got[i], data(PRV, R, 4, np.int64, s)) for i, s in enumerate((1, 2))), "one tag in order")

# ---- torch tensors, directly and through the staging path (forced onto
# CPU tensors: the path of CUDA tensors without a device runtime).
if "--torch" in sys.argv[1:]:
    import torch

    from sparsecoll import _staging

    for staged in (False, True):
        _staging.STAGE_CPU = staged
        how = "staged" if staged else "direct"
        for dt in (torch.float32, torch.bfloat16, torch.int64, torch.float16):
            out = torch.full((5, 3), -1).to(dt)
            want = torch.from_numpy(data(PRV, R, 15, np.int64, 10)).to(dt).view(5, 3)
            rr = comm.irecv(out, PRV, tag=10)
            comm.send(torch.from_numpy(data(R, NXT, 15, np.int64, 10)).to(dt).view(5, 3), NXT, tag=10)
            ok(rr.wait() is out and torch.equal(out, want), "torch %s %s isend/irecv" % (dt, how))
            out = torch.full((5, 3), -1).to(dt)
            with sparsecoll.group():
                comm.recv(out, PRV, tag=11)
                comm.send(torch.from_numpy(data(R, NXT, 15, np.int64, 11)).to(dt).view(5, 3), NXT, tag=11)
                if staged:
                    ok(bool((out == -1).all()), "a staged receive lands at the group's end, not before")
            ok(torch.equal(out, torch.from_numpy(data(PRV, R, 15, np.int64, 11)).to(dt).view(5, 3)),
               "torch %s %s in a group" % (dt, how))
    _staging.STAGE_CPU = False

# ---- errors found in Python, then the library's.
z = np.zeros(4, np.float32)
raises("SC_ERR_INVALID_ARG", lambda: comm.send(z, P), "send: peer past the communicator")
raises("SC_ERR_INVALID_ARG", lambda: comm.irecv(z, -1), "irecv: negative peer")
raises("SC_ERR_INVALID_ARG", lambda: comm.send(z, "one"), "send: peer not a number")
raises("SC_ERR_INVALID_ARG", lambda: comm.send(z, 0.5), "send: peer not an integer")
raises("SC_ERR_INVALID_ARG", lambda: comm.isend(z, NXT, tag=-1), "isend: negative tag")
raises("SC_ERR_INVALID_ARG", lambda: comm.isend(z, NXT, tag=1 << 31), "isend: tag past INT_MAX")
raises("SC_ERR_INVALID_ARG", lambda: comm.send(np.zeros((4, 4), np.float32)[:, 1], NXT),
       "send: non-contiguous array")
ro = np.zeros(4, np.float32)
ro.flags.writeable = False
raises("SC_ERR_INVALID_ARG", lambda: comm.recv(ro, PRV), "recv into a read-only array")
raises("SC_ERR_INVALID_ARG", lambda: comm.send(np.zeros(4, np.complex64), NXT), "send: a dtype without sc_dtype_t")
raises("SC_ERR_INVALID_ARG", sparsecoll.group_end, "group_end without group_start")

# A receive of another size or dtype fails with SC_ERR_MISMATCH naming both
# sides; the message is dropped, the sender completes, the pair stays usable.
sr = comm.isend(data(R, NXT, 3, tag=12), NXT, tag=12)
e = raises("SC_ERR_MISMATCH", lambda: comm.recv(np.empty(2, np.float32), PRV, tag=12), "recv of another size")
ok("rank %d" % PRV in e.message, "the mismatch names the sender: %s" % e.message)
sr.wait()
sr = comm.isend(data(R, NXT, 3, np.int32, 12), NXT, tag=12)
raises("SC_ERR_MISMATCH", lambda: comm.recv(np.empty(3, np.float32), PRV, tag=12), "recv of another dtype")
sr.wait()
# In a group: group_end raises it, naming the call; the other calls ran.
out = np.empty(3, np.float32)
sparsecoll.group_start()
comm.send(data(R, NXT, 3, tag=13), NXT, tag=13)
comm.send(data(R, NXT, 5, tag=14), NXT, tag=14)
comm.recv(out, PRV, tag=13)
comm.recv(np.empty(4, np.float32), PRV, tag=14)
e = raises("SC_ERR_MISMATCH", sparsecoll.group_end, "group with a receive of another size")
ok("call 4 of 4" in e.message, "the group's failure names the call: %s" % e.message)
ok(np.array_equal(out, data(PRV, R, 3, tag=13)), "the group's other calls ran")
ok(not sparsecoll._p2p.in_group(), "no group open after the failed end")

# Still usable after the errors.
out = np.empty(2, np.float32)
with sparsecoll.group():
    comm.send(np.full(2, float(R), np.float32), NXT, tag=15)
    comm.recv(out, PRV, tag=15)
ok(np.array_equal(out, np.full(2, float(PRV), np.float32)), "ring after the errors")

comm.barrier()
comm.close()
print("rank %d: %d checks passed" % (R, checks))
