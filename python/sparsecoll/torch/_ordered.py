# SPDX-License-Identifier: BSD-3-Clause
"""The backend's stream-ordered path for CUDA tensors (ProcessGroupNCCL's
model): each collective runs as the library's stream form on a stream of the
group's for the tensors' device, which first waits (on the device) for
torch's current stream, so the collective starts after the work that
produced its input. The call returns once the collective is enqueued; no
host thread waits for a stream. The Work's wait() makes the caller's current
stream wait for an event recorded after the collective; its future is a CUDA
future completed at once, whose value() and then() callbacks wait the same
way on the device. A failure while the collective runs is the
communicator's async error: the next call on the group raises it, and so do
wait() and exception().

SPARSECOLL_CUDA_SYNC=1 keeps the synchronizing path (the current stream
synchronized from the host before each collective, Work completed from the
waiter thread); so does a library without a device runtime or without the
stream forms (the staged path).
"""
import os

import torch

from .. import _stream
from .._lib import Error, has
from .._staging import device_path
from ._timeout import poll_until, seconds

try:
    from torch._C._distributed_c10d import Work
except ImportError:  # pragma: no cover - very old torch
    import torch.distributed as dist

    Work = dist.Work


def wanted(tensors, env=None, lib_cuda=None, lib_streams=None):
    """True when a collective on these tensors goes the stream-ordered way:
    every one a CUDA tensor of one device, the library takes device memory
    (sparsecoll._staging.device_path) and has the stream forms, and
    SPARSECOLL_CUDA_SYNC is not 1. Device facts may be passed in (tests)."""
    env = os.environ if env is None else env
    if env.get("SPARSECOLL_CUDA_SYNC", "") == "1":
        return False
    devices = {(t.device.type, t.device.index) for t in tensors}
    if len(devices) != 1 or next(iter(devices))[0] != "cuda":
        return False
    if lib_streams is None:
        lib_streams = has("sc_allreduce_on_stream")
    return bool(lib_streams) and device_path(env, lib_cuda)


class Streams:
    """One stream per device for a group's collectives (or a hook's)."""

    def __init__(self):
        self._by_index = {}

    def get(self, device):
        s = self._by_index.get(device.index)
        if s is None:
            s = self._by_index[device.index] = torch.cuda.Stream(device)
        return s


def _tensors(xs):
    """The tensors of a possibly nested list."""
    for x in xs:
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            yield from _tensors(x)


def _record(t, stream):
    t.record_stream(stream)


class Issuer:
    """Comm's i-forms, as the backend calls them, issued as stream forms on
    the group's stream for device: the issuer is made right before the
    first call, after the work on the current stream that the collective
    reads (torch.cat of the inputs, ...), and that stream waits for it."""

    def __init__(self, comm, streams, device):
        self._comm = comm
        self.device = device
        self.stream = streams.get(device)
        self._touched = []
        self.stream.wait_stream(torch.cuda.current_stream(device))

    def _go(self, call, tensors, *args, **kwargs):
        self._touched.extend(t for t in tensors if t is not None)
        getattr(self._comm, call)(*args, stream=self.stream.cuda_stream, **kwargs)
        return True

    def iallreduce(self, x, op="sum", out=None):
        return self._go("allreduce", (x, out), x, op, out)

    def ibroadcast(self, x, root=0, out=None):
        return self._go("broadcast", (x, out), x, root, out)

    def ireduce(self, x, op="sum", root=0, out=None):
        return self._go("reduce", (x, out), x, op, root, out)

    def iallgather(self, x, out=None):
        return self._go("allgather", (x, out), x, out)

    def iallgatherv(self, send, recv, recvcounts, displs=None):
        return self._go("allgatherv", (send, recv), send, recv, recvcounts, displs)

    def ireduce_scatter(self, x, op="sum", out=None):
        return self._go("reduce_scatter", (x, out), x, op, out)

    def ialltoall(self, send, recv=None):
        return self._go("alltoall", (send, recv), send, recv)

    def ialltoallv(self, send, sendcounts, recv, recvcounts):
        return self._go("alltoallv", (send, recv), send, sendcounts, recv, recvcounts)

    def igather(self, send, recv=None, root=0):
        return self._go("gather", (send, recv), send, recv, root)

    def iscatter(self, send, recv, root=0):
        return self._go("scatter", (send, recv), send, recv, root)

    def igtopk_allreduce(self, grad, k, ef=None, method="exact"):
        return self._go("gtopk_allreduce", (grad,), grad, k, ef=ef, method=method)

    def work(self, outputs, after=None):
        """The Work of what was issued: after (the copies out of a flat
        result) runs on the group's stream behind the collective; every
        tensor the stream uses is recorded on it, so that the caching
        allocator does not hand its memory out again before the stream
        passed it."""
        with torch.cuda.device(self.device), torch.cuda.stream(self.stream):
            if after is not None:
                after(sync=False)
            for t in self._touched + list(_tensors([outputs])):
                _record(t, self.stream)
            done = torch.cuda.Event()
            done.record(self.stream)
            # A CUDA future: set_result records events on the current stream
            # (the group's), and value(), wait() and then() make the
            # caller's stream wait for them, not the host.
            fut = torch.futures.Future(devices=[self.device])
            fut.set_result(outputs)
        return StreamWork(outputs, done, fut, self._comm, self.device)


def async_error(comm):
    """The communicator's async error as an Error, or None."""
    try:
        code = comm.async_error()
    except Error as e:  # closed
        return e
    if code is None:
        return None
    return Error(code, "a stream-ordered collective of this group failed (the communicator's async "
                       "error; every later call on it fails as well)")


class StreamWork(Work):
    """A stream-ordered collective, as ProcessGroupNCCL's work: wait() and
    synchronize() make the caller's current stream wait for it (the host
    does not wait); is_completed() asks the event without waiting."""

    def __init__(self, outputs, done, fut, comm, device):
        super().__init__()
        self._outputs = outputs
        self._done = done
        self._fut = fut
        self._comm = comm
        self._device = device

    def _error(self):
        return async_error(self._comm)

    def synchronize(self):
        torch.cuda.current_stream(self._device).wait_event(self._done)

    def wait(self, timeout=None):
        # As ProcessGroupNCCL's blocking wait: with a timeout the host waits
        # for the collective (or the timeout); without one only the stream.
        poll_until(self.is_completed, seconds(timeout), "the stream-ordered collective")
        self.synchronize()
        err = self._error()
        if err is not None:
            raise err
        return True

    def is_completed(self):
        return self._done.query()

    def is_success(self):
        return self.is_completed() and self._error() is None

    def exception(self):
        return self._error()

    def result(self):
        self.wait()
        return self._outputs

    def source_rank(self):
        return -1

    def get_future(self):
        return self._fut


def stats():
    """{"host_syncs": streams the binding and the backend synchronized from
    the host, "stream_calls": stream forms enqueued}, counted in this process
    since import (or reset_stats())."""
    return _stream.counters()


def reset_stats():
    _stream.reset_counters()
