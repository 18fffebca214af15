# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.Comm's all-to-all, uneven all-to-all, gather, scatter and uneven
all-gather against numpy references, on the ranks sc-run started. Every rank
derives every other rank's input from a seed, so the reference is computed
locally. Blocking, in place and async forms; custom displacements with gaps
that must stay untouched; the same calls on torch tensors, directly and
through the staging path; and the errors. Exits 1 on the first mismatch."""
import sys

import numpy as np

import sparsecoll

comm = sparsecoll.Comm.from_env()
R, P = comm.rank, comm.size
checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def data(seed, n, dtype, salt=0):
    rng = np.random.default_rng(1000 * seed + 7 * n + salt)
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


def cnt(i, j, salt=0):
    """Elements rank i sends rank j in the uneven all-to-all (zeros included)."""
    return (3 * i + 5 * j + salt) % 4


def block(i, j, dt, salt=0):
    """What rank i sends rank j."""
    return data(100 * i + j, cnt(i, j, salt), dt, salt)


SENTINEL = 77
dtypes = (np.int8, np.uint64, np.float16, np.float32, np.float64)

for dt in dtypes:
    name = np.dtype(dt).name
    for m in (0, 1, 7, 300):
        # alltoall: rank r's block j goes to rank j.
        full = [data(r, P * m, dt) for r in range(P)]
        want = np.concatenate([full[r][R * m:(R + 1) * m] for r in range(P)])
        got = comm.alltoall(full[R])
        ok(got.shape == (P * m,) and np.array_equal(got, want), "alltoall %s m=%d" % (name, m))
        x = full[R].copy()
        ok(comm.alltoall(x, x) is x and np.array_equal(x, want), "alltoall in place %s m=%d" % (name, m))
        out = np.empty(P * m, dt)
        ok(comm.ialltoall(full[R], out).wait() is out and np.array_equal(out, want), "ialltoall %s m=%d" % (name, m))

        # gather and scatter from every root.
        for root in range(P):
            got = comm.gather(data(R, m, dt, 1), root=root)
            if R == root:
                ok(np.array_equal(got, np.concatenate([data(r, m, dt, 1) for r in range(P)])),
                   "gather %s m=%d root=%d" % (name, m, root))
            else:
                ok(got is None, "gather off the root returns None")
            send = data(root, P * m, dt, 2) if R == root else None
            recv = np.empty(m, dt)
            ok(comm.scatter(send, recv, root=root) is recv, "scatter returns recv")
            ok(np.array_equal(recv, data(root, P * m, dt, 2)[R * m:(R + 1) * m]),
               "scatter %s m=%d root=%d" % (name, m, root))

    # alltoallv: prefix-sum displacements, then blocks in reverse rank order
    # with a one-element gap before each (that must stay untouched).
    for salt in (0, 1):
        sendcounts = [cnt(R, j, salt) for j in range(P)]
        recvcounts = [cnt(i, R, salt) for i in range(P)]
        send = np.concatenate([block(R, j, dt, salt) for j in range(P)])
        recv = np.full(sum(recvcounts), SENTINEL, dt)
        ok(comm.alltoallv(send, sendcounts, recv, recvcounts) is recv, "alltoallv returns recv")
        ok(np.array_equal(recv, np.concatenate([block(i, R, dt, salt) for i in range(P)])),
           "alltoallv %s salt=%d" % (name, salt))
        rdispls, at = [0] * P, 0
        for i in reversed(range(P)):
            rdispls[i] = at + 1
            at += 1 + recvcounts[i]
        sdispls, sat = [0] * P, 0  # send blocks in reverse order too, from a larger array
        for j in reversed(range(P)):
            sdispls[j] = sat
            sat += sendcounts[j]
        send2 = np.concatenate([block(R, j, dt, salt) for j in reversed(range(P))] + [np.zeros(3, dt)])
        recv = np.full(at + 2, SENTINEL, dt)
        comm.ialltoallv(send2, np.array(sendcounts), recv, np.array(recvcounts), sdispls, rdispls).wait()
        want = np.full(recv.size, SENTINEL, dt)
        for i in range(P):
            want[rdispls[i]:rdispls[i] + recvcounts[i]] = block(i, R, dt, salt)
        ok(np.array_equal(recv, want), "ialltoallv displacements %s salt=%d" % (name, salt))

    # allgatherv: rank i contributes (2i+1) % 5 elements (rank 2's is empty).
    counts = [(2 * i + 1) % 5 for i in range(P)]
    parts = [data(i, counts[i], dt, 3) for i in range(P)]
    recv = np.full(sum(counts), SENTINEL, dt)
    ok(comm.allgatherv(parts[R], recv, counts) is recv and np.array_equal(recv, np.concatenate(parts)),
       "allgatherv %s" % name)
    displs, at = [0] * P, 2
    for i in reversed(range(P)):
        displs[i] = at
        at += counts[i] + 1
    recv = np.full(at, SENTINEL, dt)
    comm.iallgatherv(parts[R], recv, counts, displs).wait()
    want = np.full(at, SENTINEL, dt)
    for i in range(P):
        want[displs[i]:displs[i] + counts[i]] = parts[i]
    ok(np.array_equal(recv, want), "iallgatherv displacements %s" % name)
    # In place: this rank's block already sits at displs[R] in recv.
    recv = np.full(at, SENTINEL, dt)
    recv[displs[R]:displs[R] + counts[R]] = parts[R]
    comm.allgatherv(recv[displs[R]:displs[R] + counts[R]], recv, counts, displs)
    ok(np.array_equal(recv, want), "allgatherv in place %s" % name)

# Shapes: new results keep the trailing dimensions; gather in place on the
# root (its block already in recv), scatter in place on the root.
x = data(R, P * 6, np.float32, 4).reshape(P * 2, 3)
got = comm.alltoall(x)
ok(got.shape == (P * 2, 3) and np.array_equal(
    got.reshape(-1), np.concatenate([data(r, P * 6, np.float32, 4)[R * 6:(R + 1) * 6] for r in range(P)])),
   "alltoall 2-D keeps its shape")
got = comm.gather(data(R, 6, np.float32, 5).reshape(2, 3), root=P - 1)
if R == P - 1:
    ok(got.shape == (2 * P, 3) and np.array_equal(
        got.reshape(-1), np.concatenate([data(r, 6, np.float32, 5) for r in range(P)])), "gather 2-D shape")
root = P // 2
if R == root:
    recv = np.zeros(P * 5, np.float64)
    recv[root * 5:(root + 1) * 5] = data(R, 5, np.float64, 6)
    comm.gather(recv[root * 5:(root + 1) * 5], recv, root=root)
    ok(np.array_equal(recv, np.concatenate([data(r, 5, np.float64, 6) for r in range(P)])), "gather in place")
    send = data(root, P * 5, np.float64, 7)
    comm.iscatter(send, send[root * 5:(root + 1) * 5], root=root).wait()
    ok(np.array_equal(send, data(root, P * 5, np.float64, 7)), "scatter in place")
else:
    comm.igather(data(R, 5, np.float64, 6), None, root=root).wait()
    recv = np.empty(5, np.float64)
    comm.iscatter(None, recv, root=root).wait()
    ok(np.array_equal(recv, data(root, P * 5, np.float64, 7)[R * 5:(R + 1) * 5]), "iscatter")

# The all-to-all's algorithm: one of its names, the same on every rank.
for n in (1, 1000, 1 << 20):
    got = comm.alltoall_algo(n, "float32")
    ok(got in ("pairwise", "bruck", "hier"), "alltoall_algo(%d) = %s" % (n, got))
    everyone = comm.allgather(np.frombuffer(got.encode().ljust(24, b" "), np.uint8))
    ok(all(bytes(everyone[24 * r:24 * r + 24]).strip() == got.encode() for r in range(P)),
       "alltoall_algo(%d) the same on every rank" % n)

# With --torch: torch tensors, directly and through the staging path (CUDA
# tensors' path without a device runtime) forced onto CPU tensors.
if "--torch" in sys.argv[1:]:
    import torch

    from sparsecoll import _staging

    for staged in (False, True):
        _staging.STAGE_CPU = staged
        how = "staged" if staged else "direct"
        full = [torch.from_numpy(data(r, P * 4, np.float32, 8)) for r in range(P)]
        got = comm.alltoall(full[R])
        ok(isinstance(got, torch.Tensor) and torch.equal(got, torch.cat([f[R * 4:(R + 1) * 4] for f in full])),
           "alltoall torch %s" % how)
        x = full[R].clone()
        comm.ialltoall(x, x).wait()
        ok(torch.equal(x, got), "alltoall torch in place %s" % how)
        send = torch.from_numpy(np.concatenate([block(R, j, np.float64) for j in range(P)]))
        recv = torch.full((sum(cnt(i, R) for i in range(P)),), float(SENTINEL), dtype=torch.float64)
        comm.ialltoallv(send, [cnt(R, j) for j in range(P)], recv, torch.tensor([cnt(i, R) for i in range(P)])).wait()
        ok(torch.equal(recv, torch.from_numpy(np.concatenate([block(i, R, np.float64) for i in range(P)]))),
           "alltoallv torch %s" % how)
        got = comm.gather(torch.from_numpy(data(R, 3, np.int32, 9)), root=0)
        if R == 0:
            ok(torch.equal(got, torch.from_numpy(np.concatenate([data(r, 3, np.int32, 9) for r in range(P)]))),
               "gather torch %s" % how)
        recv = torch.empty(3, dtype=torch.int32)
        comm.scatter(torch.from_numpy(data(0, 3 * P, np.int32, 10)) if R == 0 else None, recv, root=0)
        ok(torch.equal(recv, torch.from_numpy(data(0, 3 * P, np.int32, 10)[3 * R:3 * R + 3])), "scatter torch %s" % how)
        counts = [i + 1 for i in range(P)]
        recv = torch.empty(sum(counts), dtype=torch.bfloat16)
        comm.iallgatherv(torch.full((R + 1,), float(R), dtype=torch.bfloat16), recv, counts).wait()
        ok(torch.equal(recv, torch.cat([torch.full((i + 1,), float(i), dtype=torch.bfloat16) for i in range(P)])),
           "allgatherv torch %s" % how)
    _staging.STAGE_CPU = False

# Errors found in Python (the library cannot see array lengths), then the
# library's own.
z = np.zeros(P * 4, np.float32)
if P > 1:
    raises("SC_ERR_INVALID_ARG", lambda: comm.alltoall(np.zeros(P * 4 + 1, np.float32)), "alltoall uneven split")
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoall(z, np.zeros(P * 4, np.float64)), "alltoall dtypes differ")
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoall(z, np.zeros(P * 4 + 1, np.float32)), "alltoall recv size")
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoallv(z, [1] * (P + 1), np.zeros(P, np.float32), [1] * P),
       "alltoallv sendcounts length")
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoallv(z, [-1] + [1] * (P - 1), np.zeros(P, np.float32), [1] * P),
       "alltoallv negative count")
e = raises("SC_ERR_INVALID_ARG", lambda: comm.alltoallv(z, [5] * P, np.zeros(5 * P, np.float32), [5] * P),
           "alltoallv send block past the end")
ok("past" in e.message, "alltoallv past the end says so: %s" % e.message)
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoallv(z, [1] * P, np.zeros(P, np.float32), [1] * P, rdispls=[P] * P),
       "alltoallv recv block past the end")
if P > 1:
    e = raises("SC_ERR_INVALID_ARG", lambda: comm.alltoallv(z, [1] * P, np.zeros(P, np.float32), [1] * P,
                                                            rdispls=[0] * P), "alltoallv receive blocks overlap")
    ok("overlap" in e.message, "alltoallv overlap says so: %s" % e.message)
    raises("SC_ERR_INVALID_ARG", lambda: comm.allgatherv(np.zeros(2, np.float32), np.zeros(4 * P, np.float32),
                                                         [2] * P, displs=[0] * P), "allgatherv blocks overlap")
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoallv(z, [1] * P, z, [1] * P), "alltoallv in place")
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoallv(z, [1] * P, z[P:], [1] * P), "alltoallv overlapping")
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoallv(z, "abc", z[:P].copy(), [1] * P), "alltoallv counts not numbers")
raises("SC_ERR_INVALID_ARG", lambda: comm.scatter(None, np.zeros(2, np.float32), root=R), "scatter root without send")
raises("SC_ERR_INVALID_ARG", lambda: comm.scatter(np.zeros(2 * P + 1, np.float32), np.zeros(2, np.float32), root=R),
       "scatter send size")
raises("SC_ERR_INVALID_ARG", lambda: comm.gather(np.zeros(2, np.float32), np.zeros(2 * P + 1, np.float32), root=R),
       "gather recv size")
raises("SC_ERR_INVALID_ARG", lambda: comm.allgatherv(np.zeros(2, np.float32), np.zeros(2 * P, np.float32), [2] * P,
                                                     displs=[2 * P - 1] * P), "allgatherv block past the end")
# The library's checks, on every rank alike.
e = raises("SC_ERR_INVALID_ARG", lambda: comm.gather(np.zeros(2, np.float32), root=P), "gather root out of range")
ok("root" in e.message, "gather root message: %s" % e.message)
raises("SC_ERR_INVALID_ARG", lambda: comm.scatter(None, np.zeros(2, np.float32), root=-1), "scatter root -1")
e = raises("SC_ERR_INVALID_ARG", lambda: comm.allgatherv(np.zeros(3, np.float32), np.zeros(2 * P, np.float32),
                                                         [2] * P), "allgatherv sendcount != recvcounts[rank]")
ok("sendcount" in e.message, "allgatherv sendcount message: %s" % e.message)
raises("SC_ERR_INVALID_ARG", lambda: comm.alltoall_algo(10, "complex64"), "alltoall_algo complex dtype")

# Still in step after the errors.
x = np.full(P, float(R), np.float32)
comm.alltoall(x, x)
ok(np.array_equal(x, np.arange(P, dtype=np.float32)), "alltoall after the errors")

# Last (the communicator fails for good): counts two ranks disagree on. Rank
# 0 sends rank 1 two elements where rank 1 expects one: the receiving rank
# fails with SC_ERR_MISMATCH naming both (the others may learn of it too).
comm.barrier()
if P > 1:
    sc = [2 if (R, j) == (0, 1) else 1 for j in range(P)]
    try:
        comm.alltoallv(np.zeros(sum(sc), np.float32), sc, np.zeros(P, np.float32), [1] * P)
        ok(R != 1, "alltoallv with counts that disagree: no error on the receiving rank")
    except sparsecoll.Error as e:
        ok(e.code == "SC_ERR_MISMATCH" and "rank 0" in e.message and "rank 1" in e.message,
           "alltoallv counts that disagree: %s: %s" % (e.code, e.message))
comm.close()
print("rank %d: %d checks passed" % (R, checks))
