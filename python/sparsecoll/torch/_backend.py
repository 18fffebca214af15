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
"""
import collections
import inspect
import threading

import torch
import torch.distributed as dist

from .._comm import Comm, get_unique_id
from .._lib import ArgumentError, UnsupportedError

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
        self._done.wait()
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


class ProcessGroupSparsecoll(ProcessGroup):
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
            # CUDA tensors: Comm synchronizes their current streams before the
            # library reads them, on either path (sparsecoll._staging).
            if t.device.type not in ("cpu", "cuda"):
                raise UnsupportedError(
                    "sparsecoll backend: tensor on %s; it takes CPU and CUDA tensors" % t.device
                )
            if not t.is_contiguous():
                raise ArgumentError("sparsecoll backend: tensors must be contiguous")

    def _launch(self, outputs, req, after=None):
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
        reqs = [self._comm.iallreduce(t, op) for t in tensors]
        return self._launch(list(tensors), _Many(reqs))

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        self._check(tensors)
        reqs = [self._comm.ibroadcast(t, root) for t in tensors]
        return self._launch(list(tensors), _Many(reqs))

    def reduce(self, tensors, opts=None):
        op = _redop(opts.reduceOp) if opts is not None else "sum"
        root = opts.rootRank if opts is not None else 0
        t = self._one(tensors, "reduce")
        self._check([t])
        return self._launch([t], self._comm.ireduce(t, op, root))

    def allgather(self, output_tensors, input_tensors, opts=None):
        """output_tensors[0]: one tensor per rank; input_tensors[0]: this rank's."""
        inp = self._one(input_tensors, "allgather")
        outs = self._one(output_tensors, "allgather")
        if len(outs) != self.size():
            raise ArgumentError("allgather: %d output tensors for %d ranks" % (len(outs), self.size()))
        self._check([inp] + list(outs))
        for o in outs:
            if o.numel() != inp.numel() or o.dtype != inp.dtype:
                raise ArgumentError("allgather: every output tensor must match the input's size and dtype")
        flat = torch.empty(inp.numel() * self.size(), dtype=inp.dtype, device=inp.device)
        req = self._comm.iallgather(inp, flat)

        def scatter_out():
            for o, part in zip(outs, flat.split(inp.numel())):
                o.copy_(part.view_as(o))
            if flat.is_cuda:  # done before the Work completes, as the staged copies are
                torch.cuda.current_stream(flat.device).synchronize()

        return self._launch(output_tensors, req, scatter_out)

    def _allgather_base(self, output, input, opts=None):
        """all_gather_into_tensor: output is size times input, ranks in order."""
        self._check([output, input])
        if output.numel() != input.numel() * self.size():
            raise ArgumentError("all_gather_into_tensor: output must have world_size times the input's elements")
        return self._launch([output], self._comm.iallgather(input, output))


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
        return self._launch([out], self._comm.ireduce_scatter(flat, op, out))

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _redop(opts.reduceOp) if opts is not None else "sum"
        self._check([output, input])
        if input.numel() != output.numel() * self.size():
            raise ArgumentError("reduce_scatter_tensor: input must have world_size times the output's elements")
        return self._launch([output], self._comm.ireduce_scatter(input, op, output))

    def barrier(self, opts=None):
        return self._launch([], self._comm.ibarrier())

    def _unsupported(self, *args, **kwargs):
        raise UnsupportedError("sparsecoll backend: this collective is not offered (use gloo for it)")

    send = recv = recvAnysource = gather = scatter = alltoall = alltoall_base = _unsupported

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
