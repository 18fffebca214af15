"""sparsecoll.Comm: a communicator and its collectives on numpy arrays and
torch tensors (see docs/PYTHON.md for the conventions)."""
import ctypes

from . import _consts
from ._buf import buf, dtype_of, empty_index, empty_like, index_buf, same_kind
from ._lib import ArgumentError, Error, UniqueId, check, lib

OPS = {
    "sum": _consts.SC_SUM,
    "prod": _consts.SC_PROD,
    "product": _consts.SC_PROD,
    "min": _consts.SC_MIN,
    "max": _consts.SC_MAX,
    "avg": _consts.SC_AVG,
    "mean": _consts.SC_AVG,
}
SELECT = {"exact": _consts.SC_SELECT_EXACT, "gaussian": _consts.SC_SELECT_GAUSSIAN}
SPARSE_ALGOS = {
    "gtopk": _consts.SC_SPARSE_GTOPK,
    "gtopk_tree": _consts.SC_SPARSE_GTOPK_TREE,
    "allgather": _consts.SC_SPARSE_ALLGATHER,
}


def _enum(table, value, what):
    if isinstance(value, int) and value in table.values():
        return value
    try:
        return table[str(value).lower()]
    except KeyError:
        raise ArgumentError("unknown %s %r (one of: %s)" % (what, value, ", ".join(table))) from None


def get_unique_id():
    """sc_get_unique_id as bytes (SC_UNIQUE_ID_BYTES of them): starts the
    bootstrap root service in this process; ship the bytes to every rank."""
    uid = UniqueId()
    check(lib.sc_get_unique_id(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid))


def _uid(unique_id):
    if isinstance(unique_id, UniqueId):
        return unique_id
    b = bytes(unique_id)
    if len(b) != _consts.SC_UNIQUE_ID_BYTES:
        raise ArgumentError("unique_id must be %d bytes, got %d" % (_consts.SC_UNIQUE_ID_BYTES, len(b)))
    uid = UniqueId()
    ctypes.memmove(ctypes.addressof(uid), b, len(b))
    return uid


class Request:
    """An operation in flight (the async forms). It keeps the buffers alive
    until the operation finished; wait() returns the result array."""

    def __init__(self, req, result, keep):
        self._req = req
        self._result = result
        self._keep = keep
        self._done = False

    def wait(self):
        if not self._done:
            self._done = True
            try:
                check(lib.sc_wait(ctypes.byref(self._req)))
            finally:
                self._keep = None
        return self._result

    def test(self):
        """True once finished (then wait() returns at once); raises on failure."""
        if self._done:
            return True
        done = ctypes.c_int(0)
        try:
            check(lib.sc_test(ctypes.byref(self._req), ctypes.byref(done)))
        except Error:
            self._done = True
            self._keep = None
            raise
        if done.value:
            self._done = True
            self._keep = None
        return bool(done.value)

    is_completed = test

    def __del__(self):
        # The library writes into the buffers until the operation ends: a
        # dropped request must not let them be freed under it.
        if not getattr(self, "_done", True) and self._req:
            try:
                lib.sc_wait(ctypes.byref(self._req))
            except Exception:
                pass


class ErrorFeedback:
    """sc_ef_t: the residual of error-feedback gTop-k for one gradient of n
    elements of dtype (a numpy/torch dtype, or an array/tensor to take both from)."""

    def __init__(self, n_or_like, dtype=None):
        if dtype is None:
            like = n_or_like
            n = buf(like, "ErrorFeedback(like)")[1]
            dt = dtype_of(like)
        else:
            n = int(n_or_like)
            dt = _dtype_enum(dtype)
        self.n = n
        self.dtype = dt
        self._ef = ctypes.c_void_p()
        check(lib.sc_ef_create(n, dt, ctypes.byref(self._ef)))

    def close(self):
        if self._ef:
            ef, self._ef = self._ef, ctypes.c_void_p()
            check(lib.sc_ef_destroy(ef))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


EF = ErrorFeedback


def _dtype_enum(dtype):
    if isinstance(dtype, int):
        return dtype
    name = str(getattr(dtype, "name", None) or dtype).replace("torch.", "")
    key = "SC_" + name.upper()
    if key in _consts.SC_DTYPE_T:
        return _consts.SC_DTYPE_T[key]
    try:  # numpy dtype objects and type classes (np.float32)
        import numpy as np

        return _consts.SC_DTYPE_T["SC_" + np.dtype(dtype).name.upper()]
    except Exception:
        raise ArgumentError("dtype %r has no sc_dtype_t" % (dtype,)) from None


def topk(x, k, method="exact"):
    """Top-k by magnitude of a dense float vector: (indices, values), sorted by
    index; indices are uint32 (numpy) or int32 holding those bits (torch)."""
    p, n, dt = buf(x, "topk input")
    k = int(k)
    if k < 0:
        raise ArgumentError("k must be >= 0, got %d" % k)
    cap = 2 * min(k, n)
    ix = empty_index(x, cap)
    vals = empty_like(x, cap)
    nnz = ctypes.c_size_t(0)
    check(lib.sc_topk(p, n, dt, k, _enum(SELECT, method, "method"), index_buf(ix, "indices")[0],
                      buf(vals, "values")[0], ctypes.byref(nnz)))
    return ix[: nnz.value], vals[: nnz.value]


class Comm:
    """A communicator. Comm(nranks, unique_id, rank) with the bytes of
    get_unique_id() from one process, or Comm.from_env() under sc-run,
    torchrun, Slurm or mpirun. Use as a context manager or call close()."""

    def __init__(self, nranks, unique_id, rank):
        self._comm = ctypes.c_void_p()
        check(lib.sc_comm_init_rank(ctypes.byref(self._comm), int(nranks), _uid(unique_id), int(rank)))
        self._init()

    @classmethod
    def from_env(cls):
        self = cls.__new__(cls)
        self._comm = ctypes.c_void_p()
        check(lib.sc_comm_init_env(ctypes.byref(self._comm)))
        self._init()
        return self

    def _init(self):
        r, s = ctypes.c_int(), ctypes.c_int()
        check(lib.sc_comm_rank(self._comm, ctypes.byref(r)))
        check(lib.sc_comm_size(self._comm, ctypes.byref(s)))
        self.rank, self.size = r.value, s.value

    @property
    def handle(self):
        if not self._comm:
            raise Error("SC_ERR_INVALID_ARG", "the communicator is closed")
        return self._comm

    def close(self):
        """sc_comm_destroy: finishes outstanding work, frees."""
        if getattr(self, "_comm", None):
            c, self._comm = self._comm, ctypes.c_void_p()
            check(lib.sc_comm_destroy(c))

    destroy = close

    def abort(self):
        if self._comm:
            c, self._comm = self._comm, ctypes.c_void_p()
            check(lib.sc_comm_abort(c))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def async_error(self):
        """None while healthy, else the first failure's code name."""
        e = ctypes.c_int(0)
        check(lib.sc_comm_get_async_error(self.handle, ctypes.byref(e)))
        return None if e.value == _consts.SC_SUCCESS else Error(e.value, "").code

    def split(self, color, key=0):
        """sc_comm_split; None for a negative color."""
        out = ctypes.c_void_p()
        check(lib.sc_comm_split(self.handle, int(color), int(key), ctypes.byref(out)))
        if not out:
            return None
        c = Comm.__new__(Comm)
        c._comm = out
        c._init()
        return c

    def allreduce_algo(self, count, dtype="float32"):
        name = ctypes.c_char_p()
        check(lib.sc_allreduce_algo(self.handle, int(count), _dtype_enum(dtype), ctypes.byref(name)))
        return name.value.decode()

    # ---- dense collectives ----
    # x is both input and (when out is None) output: in place like
    # torch.distributed. out= gives an out-of-place call. async_op=True
    # returns a Request whose wait() gives the result.

    def _run(self, fn, ifn, args, result, keep, async_op):
        if async_op:
            req = ctypes.c_void_p()
            check(ifn(*args, ctypes.byref(req)))
            return Request(req, result, keep)
        check(fn(*args))
        return result

    def _out(self, x, out, n_out, what):
        if out is None:
            return None
        same_kind(x, out, what)
        p, n, _ = buf(out, what + " out", writable=True)
        if n != n_out:
            raise ArgumentError("%s: out has %d elements, needs %d" % (what, n, n_out))
        return p

    def allreduce(self, x, op="sum", out=None, async_op=False):
        xp, n, dt = buf(x, "allreduce input", writable=out is None)
        op = _enum(OPS, op, "op")
        op_ = self._out(x, out, n, "allreduce")
        res = x if out is None else out
        return self._run(lib.sc_allreduce, lib.sc_iallreduce,
                         (xp, op_ or xp, n, dt, op, self.handle), res, (x, out), async_op)

    def reduce_scatter(self, x, op="sum", out=None, async_op=False):
        """x: size*m elements (flattened); returns this rank's m-element block
        of the reduction (a new 1-D array unless out is given)."""
        xp, n, dt = buf(x, "reduce_scatter input")
        if n % self.size:
            raise ArgumentError("reduce_scatter: %d elements do not split over %d ranks" % (n, self.size))
        m = n // self.size
        op = _enum(OPS, op, "op")
        if out is None:
            out = empty_like(x, m)
        op_ = self._out(x, out, m, "reduce_scatter")
        return self._run(lib.sc_reduce_scatter, lib.sc_ireduce_scatter,
                         (xp, op_, m, dt, op, self.handle), out, (x, out), async_op)

    def allgather(self, x, out=None, async_op=False):
        """Concatenation of every rank's x (in rank order) along the first
        axis: a new array of shape (size*x.shape[0], ...) unless out is given."""
        xp, n, dt = buf(x, "allgather input")
        if out is None:
            out = empty_like(x, n * self.size)
            shape = tuple(x.shape)
            if len(shape) > 0:
                out = out.reshape((shape[0] * self.size,) + shape[1:])
        op_ = self._out(x, out, n * self.size, "allgather")
        return self._run(lib.sc_allgather, lib.sc_iallgather,
                         (xp, op_, n, dt, self.handle), out, (x, out), async_op)

    def broadcast(self, x, root=0, out=None, async_op=False):
        xp, n, dt = buf(x, "broadcast buffer", writable=out is None)
        op_ = self._out(x, out, n, "broadcast")
        res = x if out is None else out
        return self._run(lib.sc_broadcast, lib.sc_ibroadcast,
                         (xp, op_ or xp, n, dt, int(root), self.handle), res, (x, out), async_op)

    def reduce(self, x, op="sum", root=0, out=None, async_op=False):
        """The reduction lands on root, in x (or out); on the other ranks the
        output buffer is not meaningful (sc_reduce's rule)."""
        xp, n, dt = buf(x, "reduce input", writable=out is None)
        op = _enum(OPS, op, "op")
        op_ = self._out(x, out, n, "reduce")
        res = x if out is None else out
        return self._run(lib.sc_reduce, lib.sc_ireduce,
                         (xp, op_ or xp, n, dt, op, int(root), self.handle), res, (x, out), async_op)

    def barrier(self, async_op=False):
        if async_op:
            req = ctypes.c_void_p()
            check(lib.sc_ibarrier(self.handle, ctypes.byref(req)))
            return Request(req, None, None)
        check(lib.sc_barrier(self.handle))

    def iallreduce(self, x, op="sum", out=None):
        return self.allreduce(x, op, out, async_op=True)

    def ireduce_scatter(self, x, op="sum", out=None):
        return self.reduce_scatter(x, op, out, async_op=True)

    def iallgather(self, x, out=None):
        return self.allgather(x, out, async_op=True)

    def ibroadcast(self, x, root=0, out=None):
        return self.broadcast(x, root, out, async_op=True)

    def ireduce(self, x, op="sum", root=0, out=None):
        return self.reduce(x, op, root, out, async_op=True)

    def ibarrier(self):
        return self.barrier(async_op=True)

    # ---- sparse ----

    def topk(self, x, k, method="exact"):
        """Local top-k (no communication); see sparsecoll.topk."""
        return topk(x, k, method)

    def sparse_allreduce(self, indices, values, dense_len, k, algo="gtopk"):
        """Sum of every rank's sparse vector (indices sorted, unique, <
        dense_len; at most k of them). gtopk/gtopk_tree: the global top-k of
        the sum (at most k entries); allgather: the exact sum. Returns
        (indices, values) sorted by index."""
        ip, nnz = index_buf(indices, "indices")
        vp, nv, dt = buf(values, "values")
        if nv != nnz:
            raise ArgumentError("sparse_allreduce: %d indices but %d values" % (nnz, nv))
        a = _enum(SPARSE_ALGOS, algo, "algo")
        k = int(k)
        cap = k * self.size if a == _consts.SC_SPARSE_ALLGATHER else k
        oi = empty_index(values, cap)
        ov = empty_like(values, cap)
        on = ctypes.c_size_t(0)
        check(lib.sc_sparse_allreduce(ip, vp, nnz, int(dense_len), k, dt, a, index_buf(oi, "out")[0],
                                      buf(ov, "out")[0], ctypes.byref(on), self.handle))
        return oi[: on.value], ov[: on.value]

    def gtopk_allreduce(self, grad, k, ef=None, method="exact"):
        """Error-feedback gTop-k all-reduce of a dense gradient, in place:
        grad becomes the dense average of the global top-k (zeros elsewhere).
        ef: an ErrorFeedback of the same size and dtype; True: one this
        communicator keeps per gradient buffer (address, size, dtype); None or
        False: no residual."""
        gp, n, dt = buf(grad, "gtopk_allreduce gradient", writable=True)
        efp = None
        if ef is True:
            cache = self.__dict__.setdefault("_efs", {})
            ef = cache.get((gp, n, dt))
            if ef is None:
                ef = cache[(gp, n, dt)] = ErrorFeedback(n, dt)
        if ef is not None and ef is not False:
            if not isinstance(ef, ErrorFeedback):
                raise ArgumentError("ef must be a sparsecoll.ErrorFeedback, got %s" % type(ef).__name__)
            efp = ef._ef
        check(lib.sc_gtopk_allreduce(gp, n, dt, int(k), _enum(SELECT, method, "method"), efp, self.handle))
        return grad
