# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.OneBit against numpy references on the ranks sc-run started:
every rank derives every rank's input from a seed. "majority": exactly the
sign of the vote count (x >= 0 votes +1); "scaled", first call (residuals
zero): rank r's scale a_r = ||x_r|| / sqrt(n), server chunk j's
s = mean over r of a_r sign(x_r), result ||s_j|| / sqrt(m_j) sign(s); the
results equal on every rank (through OneBit.allreduce and
Comm.onebit_allreduce); the errors. Exits 1 on the first mismatch."""
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


def inputs(n, dt, seed):
    return [np.random.default_rng(seed * 1000 + r).integers(-8, 9, n).astype(dt) for r in range(P)]


def sgn(v):
    return np.where(v >= 0, 1.0, -1.0)


for n in (1, 7, 8 * P + 3, 1000):
    for dt in (np.float32, np.float64, np.float16):
        xs = inputs(n, dt, n)
        x = xs[R].copy()
        ob = sparsecoll.OneBit(comm, n, "majority", dt)
        # Comm.onebit_allreduce on even sizes, the state's own call on odd ones.
        if n % 2 == 0:
            ok(comm.onebit_allreduce(x, ob) is x, "Comm.onebit_allreduce returns its buffer")
        else:
            ok(ob.allreduce(x) is x, "OneBit.allreduce returns its buffer")
        votes = sum(sgn(v.astype(np.float64)) for v in xs)
        ok(np.array_equal(x.astype(np.float64), np.sign(votes)), "majority n=%d %s" % (n, dt.__name__))
        ob.close()

        x = xs[R].copy()
        ob = sparsecoll.OneBit(comm, n, "scaled", dt)
        ob.allreduce(x)
        a = [np.sqrt(np.sum(v.astype(np.float64) ** 2)) / np.sqrt(n) for v in xs]
        s = sum(a[r] * sgn(xs[r].astype(np.float64)) for r in range(P)) / P
        unit = 8 * P
        chunk = (n + unit - 1) // unit * unit // P
        want = np.empty(n)
        for j in range(P):
            part = s[j * chunk:(j + 1) * chunk]
            if part.size:
                want[j * chunk:j * chunk + part.size] = np.sqrt(np.sum(part**2)) / np.sqrt(part.size) * sgn(part)
        tol = 1e-3 if dt == np.float16 else 1e-6
        ok(np.allclose(x.astype(np.float64), want, rtol=tol, atol=0), "scaled n=%d %s" % (n, dt.__name__))
        everyone = np.zeros((P, n), dtype=dt)
        comm.allgather(x, out=everyone.reshape(-1))
        ok(all(np.array_equal(everyone[r], x) for r in range(P)), "the same result on every rank")
        ob.close()

ob = sparsecoll.OneBit(comm, 10, "scaled")
try:
    ob.allreduce(np.zeros(11, np.float32))
    ok(False, "a buffer of another size was refused")
except sparsecoll.ArgumentError:
    ok(True, "")
try:
    sparsecoll.OneBit(comm, 10, "scaled", np.int32)
    ok(False, "int32 was refused")
except sparsecoll.Error as e:
    ok(e.code == "SC_ERR_INVALID_ARG", "int32: SC_ERR_INVALID_ARG")
try:
    sparsecoll.OneBit(comm, 10, "halfbit")
    ok(False, "an unknown mode was refused")
except sparsecoll.ArgumentError:
    ok(True, "")
other = comm.split(0, R)
st = sparsecoll.OneBit(other, 10)
try:
    comm.onebit_allreduce(np.zeros(10, np.float32), st)
    ok(False, "a state of another communicator was refused")
except sparsecoll.ArgumentError:
    ok(True, "")
st.close()
other.close()
ob.close()
comm.barrier()
print("rank %d of %d: %d checks passed" % (R, P, checks))
