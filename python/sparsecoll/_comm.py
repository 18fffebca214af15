# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.Comm: a communicator and its collectives on numpy arrays and
torch tensors (see docs/PYTHON.md for the conventions)."""
import contextlib
import ctypes

from . import _coll_more, _compress, _consts, _p2p, _staging, _stream
from ._calls import aborting as _aborting
from ._calls import count as _count
from ._calls import stage_in_out as _stage_in_out
from ._calls import stage_pair as _stage_pair
from ._buf import address, buf, dtype_of, empty_index, empty_like, index_buf, same_kind
from ._lib import ArgumentError, Error, UniqueId, check, enum_names, lib

OPS = {
    "sum": _consts.SC_SUM,
    "prod": _consts.SC_PROD,
    "product": _consts.SC_PROD,
    "min": _consts.SC_MIN,
    "max": _consts.SC_MAX,
    "avg": _consts.SC_AVG,
    "mean": _consts.SC_AVG,
}
SELECT = {"exact": _consts.SC_SELECT_EXACT, "gaussian": _consts.SC_SELECT_GAUSSIAN,
          "mstopk": _consts.SC_SELECT_MSTOPK}
# "gtopk", "tree", "allgather", "hier", "hitopk" (sc_gtopk_allreduce only): the
# names sc_sparse_algo_name gives.
SPARSE_ALGOS = enum_names(lib.sc_sparse_algo_name, _consts.SC_SPARSE_ALGO_T)


def _enum(table, value, what):
    if isinstance(value, int) and value in table.values():
        return value
    try:
        return table[str(value).lower()]
    except KeyError:
        raise ArgumentError("unknown %s %r (one of: %s)" % (what, value, ", ".join(table))) from None


PLACEMENTS = {"lpt": 0, "block": 1}
# allreduce_compressed's wire formats.
WIRES = {
    "fp16": _consts.SC_FLOAT16,
    "float16": _consts.SC_FLOAT16,
    "bf16": _consts.SC_BFLOAT16,
    "bfloat16": _consts.SC_BFLOAT16,
}


def place_factors(dims, nranks, how="lpt", local_below=0):
    """sc_place_factors: the owner rank of each factor of dims[i] x dims[i]
    (-1: below local_below, computed by every rank), as a list."""
    how_ = _enum(PLACEMENTS, how, "how")
    n = len(dims)
    arr = (ctypes.c_size_t * max(n, 1))(*[int(d) for d in dims])
    owner = (ctypes.c_int * max(n, 1))()
    check(lib.sc_place_factors(arr, n, int(nranks), how_, int(local_below), owner))
    return [owner[i] for i in range(n)]


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

    def __init__(self, req, result, keep, staging=None):
        self._req = req
        self._result = result
        self._keep = keep
        self._staging = staging
        self._done = False

    def _end(self, ok):
        # Staged CUDA tensors: the result reaches the device tensors here.
        st, self._staging, self._keep = self._staging, None, None
        if st is not None:
            st.finish() if ok else st.abort()

    def wait(self):
        if not self._done:
            self._done = True
            ok = False
            try:
                check(lib.sc_wait(ctypes.byref(self._req)))
                ok = True
            finally:
                self._end(ok)
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
            self._end(False)
            raise
        if done.value:
            self._done = True
            self._end(True)
        return bool(done.value)

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
            n = like.numel() if hasattr(like, "numel") else buf(like, "ErrorFeedback(like)")[1]
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


def _topk(x, k, method="exact"):
    """Top-k by magnitude of a dense float vector: (indices, values), sorted by
    index; indices are uint32 (numpy) or int32 holding those bits (torch).
    CUDA input gives CUDA results: selected on the device when the library
    takes device memory, else on a host copy (see _staging)."""
    st = _staging.for_tensors(x)
    if st is not None and st.staged:
        ix, vals = _topk_direct(x.cpu(), k, method)
        return ix.to(x.device), vals.to(x.device)
    return _direct(st, _topk_direct, x, k, method)


def _direct(st, fn, *args):
    """fn(*args) on memory the library takes as it is; st (a Direct, or None
    for host memory) synchronizes the producers first."""
    if st is None:
        return fn(*args)
    st.ready()
    with st.guard():
        return fn(*args)


def _topk_direct(x, k, method):
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


class Comm(_p2p.PointToPoint, _coll_more.RootedAndUneven, _compress.Compressed):
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

    def _algo(self, fn, count, dtype):
        name = ctypes.c_char_p()
        check(fn(self.handle, int(count), _dtype_enum(dtype), ctypes.byref(name)))
        return name.value.decode()

    def allreduce_algo(self, count, dtype="float32"):
        """The all-reduce algorithm this communicator runs for count elements."""
        return self._algo(lib.sc_allreduce_algo, count, dtype)

    def reduce_scatter_algo(self, count, dtype="float32"):
        """The reduce-scatter algorithm for count elements per rank's block."""
        return self._algo(lib.sc_reduce_scatter_algo, count, dtype)

    def allgather_algo(self, count, dtype="float32"):
        """The all-gather algorithm for count elements per rank's block."""
        return self._algo(lib.sc_allgather_algo, count, dtype)

    def alltoall_algo(self, count, dtype="float32"):
        """The all-to-all algorithm for count elements per block."""
        return self._algo(lib.sc_alltoall_algo, count, dtype)

    # ---- dense collectives ----
    # x is both input and (when out is None) output: in place like
    # torch.distributed. out= gives an out-of-place call. async_op=True
    # returns a Request whose wait() gives the result. stream= (a raw stream
    # handle, 0 for the legacy default stream, or a torch.cuda.Stream) runs
    # the stream form (sc_*_on_stream) on device memory: enqueued on that
    # stream, it returns at once, after no host synchronisation (_stream).

    def _run(self, fn, ifn, args, result, keep, async_op, st=None, stream=None):
        if stream is not None:
            return _stream.run(fn, args, result, st, stream, async_op)
        if st is not None:
            st.ready()
        guard = st.guard() if st is not None else contextlib.nullcontext()
        try:
            if async_op:
                req = ctypes.c_void_p()
                with guard:
                    check(ifn(*args, ctypes.byref(req)))
                return Request(req, result, keep, st)
            with guard:
                check(fn(*args))
        except BaseException:
            if st is not None:
                st.abort()
            raise
        if ifn is not None and _p2p.defer(keep, st):
            return result  # queued by an open group: in flight until the group ends
        if st is not None:
            st.finish()
        return result

    def _out(self, x, out, n_out, what):
        if out is None:
            return None
        same_kind(x, out, what)
        p, n, _ = buf(out, what + " out", writable=True)
        if n != n_out:
            raise ArgumentError("%s: out has %d elements, needs %d" % (what, n, n_out))
        return p

    def allreduce(self, x, op="sum", out=None, async_op=False, stream=None):
        op = _enum(OPS, op, "op")
        res = x if out is None else out
        st, hx, hout = _stage_pair(x, out)
        with _aborting(st):
            xp, n, dt = buf(hx, "allreduce input", writable=out is None)
            op_ = self._out(hx, hout, n, "allreduce")
        return self._run(lib.sc_allreduce, lib.sc_iallreduce,
                         (xp, op_ or xp, n, dt, op, self.handle), res, (hx, hout), async_op, st, stream)

    def reduce_scatter(self, x, op="sum", out=None, async_op=False, stream=None):
        """x: size*m elements (flattened); returns this rank's m-element block
        of the reduction (a new 1-D array unless out is given)."""
        n = _count(x, "reduce_scatter input")
        if n % self.size:
            raise ArgumentError("reduce_scatter: %d elements do not split over %d ranks" % (n, self.size))
        m = n // self.size
        op = _enum(OPS, op, "op")
        if out is None:
            out = empty_like(x, m)
        st, hx, hout = _stage_in_out(x, out)
        with _aborting(st):
            xp, n, dt = buf(hx, "reduce_scatter input")
            op_ = self._out(hx, hout, m, "reduce_scatter")
        return self._run(lib.sc_reduce_scatter, lib.sc_ireduce_scatter,
                         (xp, op_, m, dt, op, self.handle), out, (hx, hout), async_op, st, stream)

    def allgather(self, x, out=None, async_op=False, stream=None):
        """Concatenation of every rank's x (in rank order) along the first
        axis: a new array of shape (size*x.shape[0], ...) unless out is given."""
        n = _count(x, "allgather input")
        if out is None:
            out = empty_like(x, n * self.size)
            shape = tuple(x.shape)
            if len(shape) > 0:
                out = out.reshape((shape[0] * self.size,) + shape[1:])
        st, hx, hout = _stage_in_out(x, out)
        with _aborting(st):
            xp, n, dt = buf(hx, "allgather input")
            op_ = self._out(hx, hout, n * self.size, "allgather")
        return self._run(lib.sc_allgather, lib.sc_iallgather,
                         (xp, op_, n, dt, self.handle), out, (hx, hout), async_op, st, stream)

    def broadcast(self, x, root=0, out=None, async_op=False, stream=None):
        res = x if out is None else out
        st, hx, hout = _stage_pair(x, out)
        with _aborting(st):
            xp, n, dt = buf(hx, "broadcast buffer", writable=out is None)
            op_ = self._out(hx, hout, n, "broadcast")
        return self._run(lib.sc_broadcast, lib.sc_ibroadcast,
                         (xp, op_ or xp, n, dt, int(root), self.handle), res, (hx, hout), async_op,
                         st, stream)

    def reduce(self, x, op="sum", root=0, out=None, async_op=False, stream=None):
        """The reduction lands on root, in x (or out); on the other ranks the
        output buffer is not meaningful (sc_reduce's rule)."""
        op = _enum(OPS, op, "op")
        res = x if out is None else out
        st, hx, hout = _stage_pair(x, out)
        with _aborting(st):
            xp, n, dt = buf(hx, "reduce input", writable=out is None)
            op_ = self._out(hx, hout, n, "reduce")
        return self._run(lib.sc_reduce, lib.sc_ireduce,
                         (xp, op_ or xp, n, dt, op, int(root), self.handle), res, (hx, hout), async_op,
                         st, stream)

    # ---- compressed all-reduce ----

    def allreduce_compressed(self, x, op="sum", wire="fp16", out=None):
        """sc_allreduce_compressed: the all-reduce of a float32 array or tensor
        with float16 ("fp16") or bfloat16 ("bf16") messages, every reduction
        in float32, the same bits on every rank. In place unless out is given;
        returns the result. Other dtypes: Error SC_ERR_INVALID_ARG (the
        library's); an unknown wire: ArgumentError."""
        op = _enum(OPS, op, "op")
        w = _enum(WIRES, wire, "wire")
        res = x if out is None else out
        st, hx, hout = _stage_pair(x, out)
        with _aborting(st):
            xp, n, dt = buf(hx, "allreduce_compressed input", writable=out is None)
            op_ = self._out(hx, hout, n, "allreduce_compressed")
        return self._run(lib.sc_allreduce_compressed, None,
                         (xp, op_ or xp, n, dt, op, w, self.handle), res, (hx, hout), False, st)

    # ---- symmetric matrices (K-FAC's factors) ----
    # x: a d x d matrix; only its upper triangle travels (sc_allreduce_sym and
    # kin), and the result is the full symmetric matrix, in x or out.

    def _sym(self, fn, x, out, what, extra):
        shape = tuple(x.shape)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ArgumentError("%s: a square matrix is needed, not shape %s" % (what, shape))
        res = x if out is None else out
        st, hx, hout = _stage_pair(x, out)
        with _aborting(st):
            xp, n, dt = buf(hx, what + " input", writable=out is None)
            op_ = self._out(hx, hout, n, what)
        args = (xp, op_ or xp, shape[0], dt) + extra + (self.handle,)
        return self._run(fn, None, args, res, (hx, hout), False, st)

    def allreduce_sym(self, x, op="sum", out=None):
        return self._sym(lib.sc_allreduce_sym, x, out, "allreduce_sym", (_enum(OPS, op, "op"),))

    def reduce_sym(self, x, op="sum", root=0, out=None):
        """The result on root only (sc_reduce_sym); elsewhere x (or out) is left as it was."""
        return self._sym(lib.sc_reduce_sym, x, out, "reduce_sym", (_enum(OPS, op, "op"), int(root)))

    def broadcast_sym(self, x, root=0, out=None):
        return self._sym(lib.sc_broadcast_sym, x, out, "broadcast_sym", (int(root),))

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
        """Local top-k by magnitude (sc_topk; nothing is communicated):
        (indices, values) of the k largest |x|, sorted by index; method
        "exact", "gaussian" or "mstopk"."""
        return _topk(x, k, method)

    def sparse_allreduce(self, indices, values, dense_len, k, algo="gtopk"):
        """Sum of every rank's sparse vector (indices sorted, unique, <
        dense_len; at most k of them). gtopk/tree/hier: the global
        top-k of the sum (at most k entries); allgather: the exact sum. Returns
        (indices, values) sorted by index. CUDA tensors: on the device when
        the library takes device memory, else on host copies; results on the
        values' device (see _staging)."""
        st = _staging.for_tensors(indices, values)
        if st is not None and st.staged:
            oi, ov = self._sparse_allreduce(indices.cpu(), values.cpu(), dense_len, k, algo)
            return oi.to(values.device), ov.to(values.device)
        return _direct(st, self._sparse_allreduce, indices, values, dense_len, k, algo)

    def _sparse_allreduce(self, indices, values, dense_len, k, algo):
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

    def gtopk_allreduce(self, grad, k, ef=None, method="exact", stream=None):
        """Error-feedback gTop-k all-reduce of a dense gradient, in place:
        grad becomes the dense average of the global top-k (zeros elsewhere).
        ef: an ErrorFeedback of the same size and dtype; True: one this
        communicator keeps per gradient buffer (address, size, dtype); None or
        False: no residual. A CUDA gradient is reduced on the device when the
        library takes device memory, else through a pinned host copy (see
        _staging). stream=: the stream form (sc_gtopk_allreduce_on_stream) on
        a device gradient, enqueued on that stream; ef then keeps its residual
        on the device."""
        n, dt = _count(grad, "gtopk_allreduce gradient"), dtype_of(grad)
        efp = None
        if ef is True:
            # Keyed on the caller's buffer, not on a staged copy's (a pooled
            # block is reused by other gradients of its size class).
            addr = address(grad)
            cache = self.__dict__.setdefault("_efs", {})
            ef = cache.get((addr, n, dt))
            if ef is None:
                ef = cache[(addr, n, dt)] = ErrorFeedback(n, dt)
        if ef is not None and ef is not False:
            if not isinstance(ef, ErrorFeedback):
                raise ArgumentError("ef must be a sparsecoll.ErrorFeedback, got %s" % type(ef).__name__)
            efp = ef._ef
        sel = _enum(SELECT, method, "method")
        st = _staging.for_tensors(grad)
        hg = st.inout(grad, "gtopk_allreduce gradient") if st is not None else grad
        with _aborting(st):
            gp, n, dt = buf(hg, "gtopk_allreduce gradient", writable=True)
        self._run(lib.sc_gtopk_allreduce, None, (gp, n, dt, int(k), sel, efp, self.handle),
                  grad, None, False, st, stream)
        return grad
