# SPDX-License-Identifier: BSD-3-Clause
"""The "sparsecoll" process group: torch.distributed collectives on a
sparsecoll.Comm.

Written in Python on torch's pybind trampolines: a Python subclass of
c10d::ProcessGroup (accepted by init_process_group from a registered creator
in 1.13, and as a custom backend in 2.x) whose collectives return a Python
subclass of c10d::Work. Each collective is issued at once, on the calling
thread, as the library's non-blocking form (so every rank queues operations
in program order); one waiter thread per group waits on the requests in that
order and completes each Work's torch Future (its then() callbacks, e.g.
DDP's, run on that thread). No C++ extension is needed.

CUDA tensors go the stream-ordered way by default (._ordered: the library's
stream forms on a stream of the group's that waits for torch's current
stream; no host synchronisation); SPARSECOLL_CUDA_SYNC=1 keeps the
synchronizing path above for them.
"""
import collections
import inspect
import threading

import torch
import torch.distributed as dist

from .._comm import Comm, get_unique_id
from .._lib import ArgumentError, UnsupportedError
from .._staging import sync_current
from . import _ordered
from ._p2p import PointToPoint
from ._timeout import expired, seconds

try:
    from torch._C._distributed_c10d import ProcessGroup, Work
except ImportError:  # pragma: no cover - very old torch
    ProcessGroup = dist.ProcessGroup
    Work = dist.Work if hasattr(dist, "Work") else None

BACKEND_NAME = "sparsecoll"


def _redop(op):
    """torch ReduceOp -> the library's op name; ops with no counterpart fail."""
    R = dist.ReduceOp
    for name, sc in (("SUM", "sum"), ("PRODUCT", "prod"), ("MIN", "min"), ("MAX", "max"), ("AVG", "avg")):
        v = getattr(R, name, None)
        if v is not None and op == v:
            return sc
    raise ArgumentError(
        "sparsecoll backend: reduce op %s is not supported (SUM, PRODUCT, MIN, MAX, AVG are)" % (op,)
    )


class _Work(Work):
    """A collective in flight: wait() blocks until it finished and raises its
    error; get_future() is completed with the output tensors."""

    def __init__(self, outputs):
        super().__init__()
        self._fut = torch.futures.Future()
        self._outputs = outputs
        self._error = None
        self._done = threading.Event()

    def _finish(self, error=None):
        self._error = error
        # The future before the event: once the event is set, the caller may
        # return and the interpreter exit, and a daemon thread still inside
        # torch's C++ (set_result) when Python finalizes ends the process with
        # std::terminate ("terminate called without an active exception").
        try:
            if error is None:
                self._fut.set_result(self._outputs)
            else:
                self._fut.set_exception(error)
        finally:
            self._done.set()

    def wait(self, timeout=None):
        s = seconds(timeout)
        if not self._done.wait(s):
            raise expired("the collective", s)
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        return self._done.is_set() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._outputs

    def source_rank(self):
        return -1

    def synchronize(self):
        pass

    def get_future(self):
        return self._fut


class _Waiter:
    """One daemon thread that waits on the group's requests in issue order."""

    def __init__(self):
        self._q = collections.deque()
        self._cv = threading.Condition()
        self._t = threading.Thread(target=self._run, name="sparsecoll-waiter", daemon=True)
        self._t.start()

    def put(self, req, work, after):
        with self._cv:
            self._q.append((req, work, after))
            self._cv.notify()

    def _run(self):
        while True:
            with self._cv:
                while not self._q:
                    self._cv.wait()
                req, work, after = self._q.popleft()
            if req is None:
                return
            err = None
            try:
                if req is not True:
                    req.wait()
                if after is not None:
                    after()
            except BaseException as e:  # handed to the caller through the Work
                err = e
            work._finish(err)

    def close(self):
        self.put(None, None, None)
        self._t.join()


class ProcessGroupSparsecoll(PointToPoint, ProcessGroup):
    """Collectives here; send, recv, isend, irecv and batch_isend_irecv in
    ._p2p.PointToPoint."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        # Which group this is, from the store itself: every member takes a
        # ticket, and the tickets of one group come before any of the next
        # group made on the same store (a member cannot finish making a group
        # before every member has taken its ticket), so ticket // size names
        # the group on every rank. Not id(store): torch passes a new
        # PrefixStore object per group, and a freed object's id comes back on
        # some ranks and not others, which left ranks waiting on different keys.
        ticket = store.add("sparsecoll/tickets", 1)
        key = "sparsecoll/unique_id/%d" % ((ticket - 1) // size)
        if rank == 0:
            store.set(key, get_unique_id())
            uid = store.get(key)
        else:
            uid = store.get(key)  # blocks until rank 0 has set it (store timeout)
        self._comm = Comm(size, bytes(uid), rank)
        self._waiter = _Waiter()
        self._streams = _ordered.Streams()

    # ---- plumbing ----

    def getBackendName(self):
        return BACKEND_NAME

    def name(self):
        return BACKEND_NAME

    @property
    def comm(self):
        """The underlying sparsecoll.Comm (e.g. for gtopk_allreduce)."""
        return self._comm

    def _check(self, tensors):
        for t in tensors:
            # CUDA tensors: stream-ordered (._ordered), or with
            # SPARSECOLL_CUDA_SYNC=1 Comm synchronizes their current streams
            # before the library reads them (sparsecoll._staging).
            if t.device.type not in ("cpu", "cuda"):
                raise UnsupportedError(
                    "sparsecoll backend: tensor on %s; it takes CPU and CUDA tensors" % t.device
                )
            if not t.is_contiguous():
                raise ArgumentError("sparsecoll backend: tensors must be contiguous")

    def _ops(self, tensors):
        """What issues the collective on these tensors: the Comm (its
        i-forms; the waiter completes the Work), or for CUDA tensors an
        _ordered.Issuer of the stream forms. Called after the last work on
        the current stream that the collective reads."""
        if _ordered.wanted(tensors):
            return _ordered.Issuer(self._comm, self._streams, tensors[0].device)
        return self._comm

    def _launch(self, outputs, req, after=None, ops=None):
        if isinstance(ops, _ordered.Issuer):
            return ops.work(outputs, after)
        w = _Work(outputs)
        self._waiter.put(req, w, after)
        return w

    @staticmethod
    def _one(tensors, what):
        if len(tensors) != 1:
            raise ArgumentError("sparsecoll backend: %s takes one tensor per process, got %d" % (what, len(tensors)))
        return tensors[0]

    # ---- collectives ----

    def allreduce(self, tensors, opts=None):
        op = _redop(opts.reduceOp) if opts is not None else "sum"
        self._check(tensors)
        ops = self._ops(tensors)
        reqs = [ops.iallreduce(t, op) for t in tensors]
        return self._launch(list(tensors), _Many(reqs), ops=ops)

    def allreduce_coalesced(self, tensors, opts=None):
        """all_reduce_coalesced: the tensors concatenated, one all-reduce, the
        results copied back."""
        op = _redop(opts.reduceOp) if opts is not None else "sum"
        if len(tensors) == 0:
            raise ArgumentError("all_reduce_coalesced: no tensors (it takes a non-empty list)")
        self._check(tensors)
        _same_dtype_device(tensors, "all_reduce_coalesced")
        flat = torch.cat([t.reshape(-1) for t in tensors])
        ops = self._ops([flat])
        req = ops.iallreduce(flat, op)
        return self._launch(list(tensors), req, _unpack(flat, tensors), ops)

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        self._check(tensors)
        ops = self._ops(tensors)
        reqs = [ops.ibroadcast(t, root) for t in tensors]
        return self._launch(list(tensors), _Many(reqs), ops=ops)

    def reduce(self, tensors, opts=None):
        op = _redop(opts.reduceOp) if opts is not None else "sum"
        root = opts.rootRank if opts is not None else 0
        t = self._one(tensors, "reduce")
        self._check([t])
        ops = self._ops([t])
        return self._launch([t], ops.ireduce(t, op, root), ops=ops)

    def allgather(self, output_tensors, input_tensors, opts=None):
        """output_tensors[0]: one tensor per rank; input_tensors[0]: this
        rank's. The output tensors may differ in size (rank i's input has
        output i's element count, the same on every rank): the uneven
        all-gather then runs."""
        inp = self._one(input_tensors, "allgather")
        outs = self._one(output_tensors, "allgather")
        if len(outs) != self.size():
            raise ArgumentError("allgather: %d output tensors for %d ranks" % (len(outs), self.size()))
        self._check([inp] + list(outs))
        for i, o in enumerate(outs):
            if o.dtype != inp.dtype:
                raise ArgumentError("allgather: output tensor %d is %s, the input %s" % (i, o.dtype, inp.dtype))
        counts = [o.numel() for o in outs]
        if counts[self.rank()] != inp.numel():
            raise ArgumentError("allgather: output tensor %d (this rank's) has %d elements, the input %d"
                                % (self.rank(), counts[self.rank()], inp.numel()))
        flat = torch.empty(sum(counts), dtype=inp.dtype, device=inp.device)
        ops = self._ops([inp, flat] + list(outs))
        if all(c == inp.numel() for c in counts):
            req = ops.iallgather(inp, flat)
        else:
            req = ops.iallgatherv(inp, flat, counts)
        return self._launch(output_tensors, req, _unpack(flat, outs), ops)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """all_gather_coalesced: output_lists[r] receives rank r's
        input_list (the same shapes on every rank); one all-gather of the
        inputs concatenated."""
        size = self.size()
        if len(input_list) == 0:
            raise ArgumentError("all_gather_coalesced: no input tensors (it takes a non-empty list)")
        if len(output_lists) != size:
            raise ArgumentError("all_gather_coalesced: %d output lists for %d ranks" % (len(output_lists), size))
        _same_dtype_device(input_list, "all_gather_coalesced")
        for r, outs in enumerate(output_lists):
            if len(outs) != len(input_list):
                raise ArgumentError("all_gather_coalesced: output list %d has %d tensors, the input list %d"
                                    % (r, len(outs), len(input_list)))
            for i, (o, t) in enumerate(zip(outs, input_list)):
                if o.shape != t.shape or o.dtype != t.dtype:
                    raise ArgumentError("all_gather_coalesced: output %d of list %d is %s %s, input %d is %s %s"
                                        % (i, r, o.dtype, tuple(o.shape), i, t.dtype, tuple(t.shape)))
            self._check(outs)
        self._check(input_list)
        flat_in = torch.cat([t.reshape(-1) for t in input_list])
        n = flat_in.numel()
        flat = torch.empty(n * size, dtype=flat_in.dtype, device=flat_in.device)
        everything = [o for outs in output_lists for o in outs]
        ops = self._ops([flat_in, flat] + everything)
        req = ops.iallgather(flat_in, flat)
        return self._launch(output_lists, req, _unpack(flat, everything), ops)

    def _allgather_base(self, output, input, opts=None):
        """all_gather_into_tensor: output is size times input, ranks in order."""
        self._check([output, input])
        if output.numel() != input.numel() * self.size():
            raise ArgumentError("all_gather_into_tensor: output must have world_size times the input's elements")
        ops = self._ops([output, input])
        return self._launch([output], ops.iallgather(input, output), ops=ops)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        """output_tensors[0]: this rank's block; input_tensors[0]: one per rank."""
        op = _redop(opts.reduceOp) if opts is not None else "sum"
        out = self._one(output_tensors, "reduce_scatter")
        ins = self._one(input_tensors, "reduce_scatter")
        if len(ins) != self.size():
            raise ArgumentError("reduce_scatter: %d input tensors for %d ranks" % (len(ins), self.size()))
        self._check([out] + list(ins))
        # The library wants the blocks in one buffer: one copy of the input.
        flat = torch.cat([t.reshape(-1) for t in ins])
        ops = self._ops([flat, out])
        return self._launch([out], ops.ireduce_scatter(flat, op, out), ops=ops)

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _redop(opts.reduceOp) if opts is not None else "sum"
        self._check([output, input])
        if input.numel() != output.numel() * self.size():
            raise ArgumentError("reduce_scatter_tensor: input must have world_size times the output's elements")
        ops = self._ops([output, input])
        return self._launch([output], ops.ireduce_scatter(input, op, output), ops=ops)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: input's rows (dim 0) split into one block per
        rank, by input_split_sizes or evenly; block j goes to rank j. output's
        rows, split by output_split_sizes or evenly, receive block i from
        rank i. output may be input (in place) when neither has split sizes."""
        self._check([output, input])
        if output.dtype != input.dtype:
            raise ArgumentError("all_to_all_single: input is %s, output %s" % (input.dtype, output.dtype))
        if not output_split_sizes and not input_split_sizes:
            _rows(input, "input")  # a dimension to split
            if output.numel() != input.numel():
                raise ArgumentError("all_to_all_single: input has %d elements, output %d: without split sizes "
                                    "they must be equal" % (input.numel(), output.numel()))
            for t, what in ((input, "input"), (output, "output")):
                if t.size(0) % self.size():
                    raise ArgumentError("all_to_all_single: dim 0 of the %s (%d) does not split evenly over %d "
                                        "ranks; pass split sizes" % (what, t.size(0), self.size()))
            ops = self._ops([output, input])
            return self._launch([output], ops.ialltoall(input, output), ops=ops)
        send = self._splits(input, input_split_sizes, "input")
        recv = self._splits(output, output_split_sizes, "output")
        ops = self._ops([output, input])
        return self._launch([output], ops.ialltoallv(input, send, output, recv), ops=ops)

    def _splits(self, t, sizes, what):
        """Element counts per rank of t's rows split by sizes (or evenly)."""
        rows = _rows(t, what)
        per_row = t.numel() // rows if rows else 0
        size = self.size()
        if not sizes:
            if rows % size:
                raise ArgumentError("all_to_all_single: dim 0 of the %s (%d) does not split evenly over %d ranks"
                                    % (what, rows, size))
            return [rows // size * per_row] * size
        sizes = [int(s) for s in sizes]
        if len(sizes) != size:
            raise ArgumentError("all_to_all_single: %d %s split sizes for %d ranks" % (len(sizes), what, size))
        if any(s < 0 for s in sizes) or sum(sizes) != rows:
            raise ArgumentError("all_to_all_single: %s split sizes %s do not add up to dim 0 of the %s (%d)"
                                % (what, sizes, what, rows))
        return [s * per_row for s in sizes]

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """all_to_all: input_tensors[j] goes to rank j, output_tensors[i]
        receives rank i's (sizes may differ per pair; input_tensors[j] here
        has the elements of output_tensors[rank] on rank j)."""
        size = self.size()
        if len(input_tensors) != size or len(output_tensors) != size:
            raise ArgumentError("all_to_all: %d input and %d output tensors for %d ranks (one each per rank)"
                                % (len(input_tensors), len(output_tensors), size))
        self._check(list(input_tensors) + list(output_tensors))
        _same_dtype_device(list(input_tensors) + list(output_tensors), "all_to_all")
        send = torch.cat([t.reshape(-1) for t in input_tensors])
        counts = [t.numel() for t in output_tensors]
        flat = torch.empty(sum(counts), dtype=send.dtype, device=send.device)
        ops = self._ops([send, flat])
        req = ops.ialltoallv(send, [t.numel() for t in input_tensors], flat, counts)
        return self._launch(list(output_tensors), req, _unpack(flat, output_tensors), ops)

    def gather(self, output_tensors, input_tensors, opts=None):
        """output_tensors: [gather_list] on the root (one tensor per rank, of
        the input's size), [] elsewhere; input_tensors: [this rank's]."""
        root = opts.rootRank if opts is not None else 0
        inp = self._one(input_tensors, "gather")
        self._check([inp])
        if self.rank() != root:
            if len(output_tensors) and any(len(o) for o in output_tensors):
                raise ArgumentError("gather: rank %d is not the root (%d): it passes no output tensors "
                                    "(gather_list)" % (self.rank(), root))
            ops = self._ops([inp])
            return self._launch([], ops.igather(inp, None, root), ops=ops)
        outs = self._one(output_tensors, "gather")
        if len(outs) != self.size():
            raise ArgumentError("gather: %d output tensors (gather_list) for %d ranks" % (len(outs), self.size()))
        self._check(outs)
        for i, o in enumerate(outs):
            if o.numel() != inp.numel() or o.dtype != inp.dtype:
                raise ArgumentError("gather: output tensor %d is %s %s, the input %s %s: every one must match it"
                                    % (i, o.dtype, tuple(o.shape), inp.dtype, tuple(inp.shape)))
        flat = torch.empty(inp.numel() * self.size(), dtype=inp.dtype, device=inp.device)
        ops = self._ops([inp, flat] + list(outs))
        return self._launch(output_tensors, ops.igather(inp, flat, root), _unpack(flat, outs), ops)

    def scatter(self, output_tensors, input_tensors, opts=None):
        """output_tensors: [this rank's]; input_tensors: [scatter_list] on the
        root (one tensor per rank, of the output's size), [] elsewhere."""
        root = opts.rootRank if opts is not None else 0
        out = self._one(output_tensors, "scatter")
        self._check([out])
        if self.rank() != root:
            if len(input_tensors) and any(len(i) for i in input_tensors):
                raise ArgumentError("scatter: rank %d is not the root (%d): it passes no input tensors "
                                    "(scatter_list)" % (self.rank(), root))
            ops = self._ops([out])
            return self._launch([out], ops.iscatter(None, out, root), ops=ops)
        ins = self._one(input_tensors, "scatter")
        if len(ins) != self.size():
            raise ArgumentError("scatter: %d input tensors (scatter_list) for %d ranks" % (len(ins), self.size()))
        self._check(ins)
        for i, t in enumerate(ins):
            if t.numel() != out.numel() or t.dtype != out.dtype:
                raise ArgumentError("scatter: input tensor %d is %s %s, the output %s %s: every one must match it"
                                    % (i, t.dtype, tuple(t.shape), out.dtype, tuple(out.shape)))
        flat = torch.cat([t.reshape(-1) for t in ins])  # the library takes the blocks in one buffer
        ops = self._ops([flat, out])
        return self._launch([out], ops.iscatter(flat, out, root), ops=ops)

    def barrier(self, opts=None):
        return self._launch([], self._comm.ibarrier())

    def _unsupported(self, *args, **kwargs):
        raise UnsupportedError("sparsecoll backend: this collective is not offered (use gloo for it)")

    def shutdown(self):
        if getattr(self, "_waiter", None) is not None:
            self._waiter.close()
            self._waiter = None
        if getattr(self, "_comm", None) is not None:
            self._comm.close()
            self._comm = None


class _Many:
    """Several requests waited on as one."""

    def __init__(self, reqs):
        self._reqs = reqs

    def wait(self):
        err = None
        for r in self._reqs:
            try:
                r.wait()
            except BaseException as e:
                err = err or e
        if err is not None:
            raise err


def _rows(t, what):
    """Dim 0 of t, for an all-to-all that splits it."""
    if t.dim() == 0:
        raise ArgumentError("all_to_all_single: the %s is a scalar (0-dim): it has no dim 0 to split" % what)
    return t.size(0)


def _same_dtype_device(tensors, what):
    for t in tensors:
        if t.dtype != tensors[0].dtype or t.device != tensors[0].device:
            raise ArgumentError("%s: the tensors must share one dtype and device (%s on %s and %s on %s)"
                                % (what, tensors[0].dtype, tensors[0].device, t.dtype, t.device))


def _unpack(flat, outs):
    """A callable that copies flat's consecutive parts into outs (their
    element counts), run on the waiter thread once the operation finished
    (sync: the copies done before the Work completes), or on the group's
    stream behind a stream-ordered collective (sync=False)."""
    def copy_out(sync=True):
        at = 0
        for o in outs:
            n = o.numel()
            o.copy_(flat[at:at + n].view_as(o))
            at += n
        if flat.is_cuda and sync:  # done before the Work completes, as the staged copies are
            sync_current(flat.device)

    return copy_out


def _create(store, rank, size, timeout):
    return ProcessGroupSparsecoll(store, rank, size, timeout)


def register():
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}) or hasattr(dist.Backend, BACKEND_NAME.upper()):
        return
    kwargs = {}
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:  # torch >= 2.0: say which devices the group takes
        kwargs["devices"] = ["cpu", "cuda"]  # CUDA: direct or staged (sparsecoll._staging)
    dist.Backend.register_backend(BACKEND_NAME, _create, **kwargs)
