# SPDX-License-Identifier: BSD-3-Clause
"""The torch backend's stream-ordered path (sparsecoll.torch._ordered) driven
on CPU tensors, one process: torch.cuda's streams, events and CUDA futures
are replaced by fakes that log what is done to them, and the communicator
by a one-rank fake whose calls record their stream= and copy as a one-rank
collective does. Every collective of the backend must go through the stream
form on the group's stream, after that stream waited for the current one,
with its copies out on that stream, every tensor recorded on it, an event
recorded behind it, no host synchronisation, a future completed at the
call; Work.wait() must make the current stream wait for that event and raise
the communicator's async error. The CUDA run of the same path is
cuda_stream_order.sh (GPU only)."""
import contextlib
import datetime
import sys
import time
import types

import torch
import torch.distributed as dist

import sparsecoll
import sparsecoll.torch as sct
from sparsecoll.torch import _backend, _ordered

checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("FAIL %s" % what, file=sys.stderr)
        sys.exit(1)


log = []


class FakeStream:
    def __init__(self, name):
        self.name = name
        self.cuda_stream = {"current": 11, "group": 22}[name]

    def wait_stream(self, other):
        log.append(("wait_stream", self.name, other.name))

    def wait_event(self, ev):
        log.append(("wait_event", self.name, ev))


CURRENT = FakeStream("current")
QUERY = [False]
ON = []  # the stream contexts entered


class FakeEvent:
    def record(self, stream=None):
        log.append(("record", stream.name))

    def query(self):
        return QUERY[0]


@contextlib.contextmanager
def in_stream(s):
    ON.append(s.name)
    try:
        yield
    finally:
        ON.pop()


fake_cuda = types.SimpleNamespace(Stream=lambda device: FakeStream("group"), current_stream=lambda device: CURRENT,
                                  Event=FakeEvent, stream=in_stream, device=lambda d: contextlib.nullcontext())
fake_futures = types.SimpleNamespace(Future=lambda devices: torch.futures.Future())
_ordered.torch = types.SimpleNamespace(cuda=fake_cuda, futures=fake_futures, Tensor=torch.Tensor)
recorded = []
_ordered._record = lambda t, s: recorded.append((t, s.name))
_ordered.wanted = lambda tensors, **kw: True


class FakeComm:
    """One rank: every collective's output is its input."""

    rank, size = 0, 1

    def __init__(self):
        self.calls = []
        self.error = None

    def async_error(self):
        return self.error

    def _call(self, name, kwargs, src=None, dst=None):
        self.calls.append((name, kwargs.get("stream"), list(ON)))
        log.append(("call", name))
        if src is not None and dst is not None:
            dst.reshape(-1).copy_(src.reshape(-1))

    def allreduce(self, x, op="sum", out=None, **kw):
        self._call("allreduce", kw, x, out)

    def broadcast(self, x, root=0, out=None, **kw):
        self._call("broadcast", kw, x, out)

    def reduce(self, x, op="sum", root=0, out=None, **kw):
        self._call("reduce", kw, x, out)

    def allgather(self, x, out=None, **kw):
        self._call("allgather", kw, x, out)

    def allgatherv(self, send, recv, counts, displs=None, **kw):
        self._call("allgatherv", kw, send, recv)

    def reduce_scatter(self, x, op="sum", out=None, **kw):
        self._call("reduce_scatter", kw, x, out)

    def alltoall(self, send, recv=None, **kw):
        self._call("alltoall", kw, send, recv)

    def alltoallv(self, send, sc, recv, rc, **kw):
        self._call("alltoallv", kw, send, recv)

    def gather(self, send, recv=None, root=0, **kw):
        self._call("gather", kw, send, recv)

    def scatter(self, send, recv, root=0, **kw):
        self._call("scatter", kw, send, recv)

    def gtopk_allreduce(self, grad, k, ef=None, method="exact", **kw):
        self._call("gtopk_allreduce", kw)


pg = _backend.ProcessGroupSparsecoll.__new__(_backend.ProcessGroupSparsecoll)
_backend.ProcessGroup.__init__(pg, 0, 1)
comm = pg._comm = FakeComm()
pg._waiter = None
pg._streams = _ordered.Streams()
opts = types.SimpleNamespace(reduceOp=dist.ReduceOp.SUM, rootRank=0)
sct.reset_stats()


def run(name, fn, outputs, want):
    """fn() issues one backend collective; outputs() its results after."""
    del log[:], recorded[:], comm.calls[:]
    w = fn()
    ok(isinstance(w, _ordered.StreamWork), "%s: a StreamWork" % name)
    ok(log and log[0] == ("wait_stream", "group", "current"), "%s: the group's stream waits first (%s)" % (name, log))
    ok(comm.calls and all(s == 22 for _, s, _ in comm.calls), "%s: stream form on the group's stream" % name)
    ok(log[-1] == ("record", "group"), "%s: an event recorded behind it on the group's stream" % name)
    ok(recorded and all(s == "group" for _, s in recorded), "%s: tensors recorded on the group's stream" % name)
    got = outputs()
    ok(all(torch.equal(g, w_) for g, w_ in zip(got, want)), "%s: results %s, want %s" % (name, got, want))
    fut = w.get_future()
    ok(fut.done(), "%s: the future is complete at the call" % name)
    return w


x = torch.arange(6.0)
w = run("allreduce", lambda: pg.allreduce([x], opts), lambda: [x], [torch.arange(6.0)])
ok(any(t is x for t, _ in recorded), "allreduce: the tensor itself recorded")
a, b = torch.ones(3), torch.full((2, 2), 2.0)
run("allreduce_coalesced", lambda: pg.allreduce_coalesced([a, b], opts), lambda: [a, b],
    [torch.ones(3), torch.full((2, 2), 2.0)])
run("broadcast", lambda: pg.broadcast([x], opts), lambda: [x], [torch.arange(6.0)])
run("reduce", lambda: pg.reduce([x], opts), lambda: [x], [torch.arange(6.0)])
outs = [torch.zeros(6)]
run("allgather", lambda: pg.allgather([outs], [x]), lambda: outs, [torch.arange(6.0)])
ok(comm.calls[0][2] == [], "allgather: the collective issued outside the copies' stream context")
ok(ON == [], "no stream context left open")
ol = [[torch.zeros(3), torch.zeros(2, 2)]]
run("allgather_coalesced", lambda: pg.allgather_coalesced(ol, [a, b]), lambda: ol[0], [a, b])
o = torch.zeros(6)
run("all_gather_into_tensor", lambda: pg._allgather_base(o, x), lambda: [o], [x])
blk = torch.zeros(6)
run("reduce_scatter", lambda: pg.reduce_scatter([blk], [[x]], opts), lambda: [blk], [x])
blk = torch.zeros(6)
run("reduce_scatter_tensor", lambda: pg._reduce_scatter_base(blk, x, opts), lambda: [blk], [x])
o = torch.zeros(6)
run("all_to_all_single", lambda: pg.alltoall_base(o, x, [], [], opts), lambda: [o], [x])
o = torch.zeros(6)
run("all_to_all_single with splits", lambda: pg.alltoall_base(o, x, [6], [6], opts), lambda: [o], [x])
o = [torch.zeros(6)]
run("all_to_all", lambda: pg.alltoall(o, [x], opts), lambda: o, [x])
g = [[torch.zeros(6)]]
run("gather", lambda: pg.gather(g, [x], opts), lambda: g[0], [x])
o = torch.zeros(6)
run("scatter", lambda: pg.scatter([o], [[x]], opts), lambda: [o], [x])
ok(sct.stats()["host_syncs"] == 0, "no host synchronisation on the stream-ordered path")

# ---- Work: wait() makes the current stream wait for the event; errors ----
del log[:]
QUERY[0] = False
ok(not w.is_completed(), "is_completed: the event not reached")
QUERY[0] = True
ok(w.is_completed() and w.is_success(), "is_completed once the event is reached")
ok(w.wait() is True and log[0][:2] == ("wait_event", "current"), "wait(): the current stream waits (%s)" % log)
ok(isinstance(log[0][2], FakeEvent), "wait(): on the event recorded behind the collective")
comm.error = "SC_ERR_REMOTE"
try:
    w.wait()
    ok(False, "wait() raises the communicator's async error")
except sparsecoll.Error as e:
    ok(e.code == "SC_ERR_REMOTE", "wait() raises the async error (%s)" % e.code)
ok(isinstance(w.exception(), sparsecoll.Error) and not w.is_success(), "exception() and is_success() see it")
comm.error = None
# wait(timeout): the host waits for the event, up to the timeout.
QUERY[0] = False
t0 = time.monotonic()
try:
    w.wait(timeout=datetime.timedelta(seconds=0.1))
    ok(False, "wait(timeout) before the event returned")
except RuntimeError as e:
    dt = time.monotonic() - t0
    ok(isinstance(e, sparsecoll.Error) and e.code == "SC_ERR_TIMEOUT" and 0.08 < dt < 1.0,
       "wait(timeout): %r after %.2f s" % (e, dt))
QUERY[0] = True
del log[:]
ok(w.wait(timeout=datetime.timedelta(seconds=5)) is True and log[0][:2] == ("wait_event", "current"),
   "wait(timeout) once the event is reached: the current stream waits (%s)" % log)

# ---- the gTop-k hook's issue ----
del log[:], recorded[:], comm.calls[:]
grad = torch.ones(8)
iss = _ordered.Issuer(comm, pg._streams, torch.device("cpu"))
iss.igtopk_allreduce(grad, 2, None, "exact")
fut = iss.work(grad).get_future()
ok(comm.calls == [("gtopk_allreduce", 22, [])], "gTop-k: the stream form on the state's stream")
ok(fut.done() and fut.value() is grad, "gTop-k: the hook's future holds the bucket")
ok(len(recorded) == 2 and all(t is grad for t, _ in recorded), "gTop-k: the bucket recorded on the stream")
print("ordered unit: %d checks passed" % checks)
