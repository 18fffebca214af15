# SPDX-License-Identifier: BSD-3-Clause
"""Every sparsecoll.Comm call against a numpy reference, on the ranks sc-run
started (SC_RANK/SC_WORLD_SIZE/SC_ROOT_ADDR). Every rank derives every other
rank's input from a seed, so the reference is computed locally with numpy,
independently of the library. Exits 1 on the first mismatch."""
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


def data(rank, n, dtype, salt=0):
    """rank's input: small integers, so sums and products are exact in every dtype."""
    rng = np.random.default_rng(1000 * rank + 7 * n + salt)
    if np.dtype(dtype).kind == "u":
        return rng.integers(0, 4, n).astype(dtype)
    return rng.integers(-3, 4, n).astype(dtype)


def ref(op, arrays):
    s = np.stack(arrays)
    if op == "sum":
        return s.sum(0, dtype=s.dtype)
    if op == "prod":
        return s.prod(0, dtype=s.dtype)
    if op == "min":
        return s.min(0)
    if op == "max":
        return s.max(0)
    if op == "avg":  # integers: truncation toward zero (sc_redop_t's rule)
        tot = s.sum(0, dtype=np.float64 if s.dtype.kind == "f" else np.int64)
        if s.dtype.kind == "f":
            return (tot / P).astype(s.dtype)
        return (np.sign(tot) * (np.abs(tot) // P)).astype(s.dtype)


ok(comm.size >= 1 and 0 <= R < P, "rank/size")
dtypes = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]
for dt in dtypes:
    for n in (1, 13, 1000):
        for op in ("sum", "prod", "min", "max", "avg"):
            if op == "prod" and n > 13:
                continue
            if op == "avg" and np.dtype(dt).kind == "u":
                continue  # negative sums not representable: avoid wrapping ambiguity
            want = ref(op, [data(r, n, dt) for r in range(P)])
            x = data(R, n, dt)
            got = comm.allreduce(x, op=op)  # in place
            ok(got is x and np.array_equal(x, want), "allreduce in place %s n=%d %s" % (np.dtype(dt).name, n, op))
            x = data(R, n, dt)
            out = np.empty_like(x)
            comm.allreduce(x, op=op, out=out)
            ok(np.array_equal(out, want) and np.array_equal(x, data(R, n, dt)),
               "allreduce out of place %s %s" % (np.dtype(dt).name, op))

# 2-D arrays keep their shape; async form through a Request.
x = data(R, 24, np.float32).reshape(4, 6)
want = ref("sum", [data(r, 24, np.float32).reshape(4, 6) for r in range(P)])
req = comm.allreduce(x, async_op=True)
ok(req.wait() is x and np.array_equal(x, want), "iallreduce 2-D")
x = data(R, 24, np.float32)
req = comm.iallreduce(x, op="max")
while not req.test():
    pass
ok(np.array_equal(x, ref("max", [data(r, 24, np.float32) for r in range(P)])), "iallreduce test() loop")

for dt in (np.float32, np.int64, np.float64):
    for m in (1, 7, 300):
        # reduce_scatter: x has P*m elements, rank r keeps block r.
        full = ref("sum", [data(r, P * m, dt, 1) for r in range(P)])
        got = comm.reduce_scatter(data(R, P * m, dt, 1))
        ok(np.array_equal(got, full[R * m:(R + 1) * m]), "reduce_scatter %s m=%d" % (np.dtype(dt).name, m))
        out = np.empty(m, dt)
        comm.ireduce_scatter(data(R, P * m, dt, 1), op="max", out=out).wait()
        ok(np.array_equal(out, ref("max", [data(r, P * m, dt, 1) for r in range(P)])[R * m:(R + 1) * m]),
           "ireduce_scatter max")
        # allgather: concatenation in rank order.
        want = np.concatenate([data(r, m, dt, 2) for r in range(P)])
        got = comm.allgather(data(R, m, dt, 2))
        ok(got.shape == (P * m,) and np.array_equal(got, want), "allgather %s m=%d" % (np.dtype(dt).name, m))
        out = np.empty(P * m, dt)
        comm.iallgather(data(R, m, dt, 2), out=out).wait()
        ok(np.array_equal(out, want), "iallgather")
        # broadcast and reduce from every root.
        for root in range(P):
            x = data(R, m, dt, 3)
            comm.broadcast(x, root=root)
            ok(np.array_equal(x, data(root, m, dt, 3)), "broadcast root=%d" % root)
            x = data(R, m, dt, 4)
            comm.reduce(x, op="sum", root=root)
            if R == root:
                ok(np.array_equal(x, ref("sum", [data(r, m, dt, 4) for r in range(P)])), "reduce root=%d" % root)
            out = np.zeros(m, dt)
            comm.ireduce(data(R, m, dt, 4), op="min", root=root, out=out).wait()
            if R == root:
                ok(np.array_equal(out, ref("min", [data(r, m, dt, 4) for r in range(P)])), "ireduce min root=%d" % root)
x = data(R, 5, np.float32, 5)
comm.ibroadcast(x, root=P - 1).wait()
ok(np.array_equal(x, data(P - 1, 5, np.float32, 5)), "ibroadcast")
comm.barrier()
comm.ibarrier().wait()

# Sparse: local top-k against a sort; gTop-k sparse all-reduce against the
# dense sum (allgather algorithm: exact; gtopk: a subset of the union whose
# values equal the dense sum's there, at most k entries).
rng = np.random.default_rng(99)
v = rng.standard_normal(200).astype(np.float32)
ix, vals = comm.topk(v, 10)
want_ix = np.sort(np.argsort(-np.abs(v), kind="stable")[:10])
ok(np.array_equal(ix.astype(np.int64), want_ix) and np.array_equal(vals, v[want_ix]), "topk exact")
ix, vals = comm.topk(v, 10, method="gaussian")
ok(len(ix) <= 20 and np.array_equal(vals, v[ix]), "topk gaussian")
ix, vals = comm.topk(v, 10, method="mstopk")
ok(len(ix) == 10 and np.all(np.diff(ix.astype(np.int64)) > 0) and np.array_equal(vals, v[ix])
   and np.abs(vals).min() >= np.sort(np.abs(v))[-10] * (1 - 1e-6), "topk mstopk")
dense_len, k = 500, 16


def sparse_in(r):
    g = np.random.default_rng(r + 50)
    ix = np.sort(g.choice(dense_len, k, replace=False)).astype(np.uint32)
    return ix, g.integers(-8, 9, k).astype(np.float32)


dense = np.zeros(dense_len, np.float32)
for r in range(P):
    i, vv = sparse_in(r)
    dense[i] += vv
for algo in ("allgather", "gtopk", "tree", "hier"):
    oi, ov = comm.sparse_allreduce(*sparse_in(R), dense_len, k, algo=algo)
    ok(np.all(np.diff(oi.astype(np.int64)) > 0) and np.array_equal(ov, dense[oi]), "sparse_allreduce %s values" % algo)
    if algo == "allgather":
        nz = np.flatnonzero(dense)
        ok(set(nz.tolist()) <= set(oi.tolist()), "sparse_allreduce allgather support")
    else:
        ok(len(oi) <= k, "sparse_allreduce %s size" % algo)
    # Identical on every rank: gather everyone's result and compare.
    sizes = comm.allgather(np.array([len(oi)], np.int64))
    ok(np.all(sizes == sizes[0]), "sparse_allreduce %s same size everywhere" % algo)
    allv = comm.allgather(np.ascontiguousarray(ov))
    ok(np.array_equal(allv.reshape(P, -1), np.tile(ov, (P, 1))), "sparse_allreduce %s identical bits" % algo)

# gTop-k with error feedback: k = n keeps everything: the plain average.
n = 64
g = data(R, n, np.float32, 6)
ef = sparsecoll.ErrorFeedback(n, np.float32)
comm.gtopk_allreduce(g, n, ef=ef)
ok(np.allclose(g, ref("sum", [data(r, n, np.float32, 6) for r in range(P)]) / P, rtol=0, atol=1e-6),
   "gtopk_allreduce k=n average")
g = data(R, n, np.float32, 6)
comm.gtopk_allreduce(g, 4, ef=sparsecoll.ErrorFeedback(g))
ok(np.count_nonzero(g) <= 4, "gtopk_allreduce k=4 at most k nonzeros")
# Error feedback over repeated calls on one constant gradient: what is not
# sent stays in the residual, so over n/k steps every entry gets through and
# the sum of the results equals the sum of the inputs (k = n/8, 8 steps: all
# of the 8 steps' mass, up to float32 rounding); without it only the top
# entries ever arrive.
dense_avg = ref("sum", [data(r, n, np.float32, 7) for r in range(P)]) / P
for ef in (True, None):
    total = np.zeros(n, np.float32)
    g = np.empty(n, np.float32)
    for step in range(8 if ef else 2):
        g[:] = data(R, n, np.float32, 7)
        comm.gtopk_allreduce(g, n // 8, ef=ef)
        total += g
    if ef:
        resid = 8 * dense_avg - total  # what is still in the residuals (averaged)
        ok(np.abs(resid).max() <= np.abs(8 * dense_avg).max() + 1e-4, "gtopk_allreduce ef=True bounded residual")
        ok(np.count_nonzero(total) > n // 8, "gtopk_allreduce ef=True: more than k entries got through over 8 steps")
    else:
        ok(np.count_nonzero(total) <= 2 * (n // 8), "gtopk_allreduce ef=None: only the top entries, twice")

# Errors: the library's code and detail; Python-side argument checks.
def raises(code, fn, what):
    try:
        fn()
    except sparsecoll.Error as e:
        ok(e.code == code and str(e), "%s: code %s (got %s: %s)" % (what, code, e.code, e))
        return e
    ok(False, "%s: no error" % what)


e = raises("SC_ERR_INVALID_ARG", lambda: comm.broadcast(np.zeros(3, np.float32), root=P), "broadcast root out of range")
ok("root" in e.message, "error message is sc_last_error's detail: %s" % e.message)
raises("SC_ERR_INVALID_ARG", lambda: comm.allreduce(np.zeros(10, np.float32)[::2]), "non-contiguous")
ok(isinstance(sparsecoll.ArgumentError("x"), ValueError), "ArgumentError is a ValueError")
raises("SC_ERR_INVALID_ARG", lambda: comm.allreduce(np.zeros(3, np.complex64)), "complex dtype")
raises("SC_ERR_INVALID_ARG", lambda: comm.allreduce(np.zeros(3, np.float32), op="xor"), "unknown op")
raises("SC_ERR_INVALID_ARG", lambda: comm.topk(np.zeros(3, np.int32), 1), "topk int32")
raises("SC_ERR_INVALID_ARG",
       lambda: comm.sparse_allreduce(np.array([1, 2, 3], np.uint32), np.ones(3, np.float32), 10, 2), "nnz > k")
raises("SC_ERR_INVALID_ARG", lambda: sparsecoll.Comm(2, b"short", 0), "short unique id")
raises("SC_ERR_INVALID_ARG", lambda: sparsecoll.ErrorFeedback(4, np.int32), "ef of int32")
# Which algorithm runs: a name of the collective's, the same on every rank (one host here).
for fn, names in ((comm.allreduce_algo, ("ring", "tree", "rd", "rabenseifner")),
                  (comm.reduce_scatter_algo, ("ring", "recursive-halving")),
                  (comm.allgather_algo, ("ring", "recursive-doubling"))):
    for n in (1, 1000, 1 << 20):
        got = fn(n, "float32")
        ok(got in names, "%s(%d) = %s" % (fn.__name__, n, got))
        everyone = comm.allgather(np.frombuffer(got.encode().ljust(24, b" "), np.uint8))
        ok(all(bytes(everyone[24 * r:24 * r + 24]).strip() == got.encode() for r in range(P)),
           "%s(%d) the same on every rank" % (fn.__name__, n))
raises("SC_ERR_INVALID_ARG", lambda: comm.allgather_algo(10, "complex64"), "allgather_algo complex dtype")
comm.barrier()
comm.close()
print("rank %d: %d checks passed" % (R, checks))
