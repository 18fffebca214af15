# SPDX-License-Identifier: BSD-3-Clause
"""Point-to-point on a sparsecoll.Comm (send, recv, isend, irecv) and the
per-thread groups of sc_group_start/sc_group_end (see docs/PYTHON.md).

Inside a group the library only queues the blocking calls: the arrays they
name are in flight until the outermost group ends. This module's group
records what each queued call needs kept alive (the arrays, a staged CUDA
tensor's host copies) and lets go of it once sc_group_end returned.
"""
import contextlib
import threading

from . import _buf, _staging
from ._lib import ArgumentError, check, lib

_INT_MAX = (1 << 31) - 1
_tls = threading.local()


def _group():
    g = getattr(_tls, "group", None)
    if g is None:
        g = _tls.group = {"depth": 0, "pending": []}
    return g


def in_group():
    """True while this thread has a group open (through this module)."""
    return _group()["depth"] > 0


def defer(keep, st):
    """A blocking call that the open group queued: keep its arrays and its
    staging (finished at the group's end). False when no group is open."""
    g = _group()
    if not g["depth"]:
        return False
    g["pending"].append((keep, st))
    return True


def group_start():
    """sc_group_start on the calling thread. Until the matching group_end, the
    blocking send/recv and dense collectives of every Comm only queue (their
    results are there once the outermost group_end returned); the i-forms
    start at once as always. Groups nest."""
    check(lib.sc_group_start())
    _group()["depth"] += 1


def group_end():
    """sc_group_end: the outermost one starts every queued call together and
    returns when all have completed (raising the first failure, which names
    the call); so no order of the calls in a group can deadlock."""
    g = _group()
    if not g["depth"]:
        raise ArgumentError("group_end without group_start on this thread")
    g["depth"] -= 1
    if g["depth"]:
        check(lib.sc_group_end())
        return
    pending, g["pending"] = g["pending"], []
    ok = False
    try:
        check(lib.sc_group_end())
        ok = True
    finally:
        for _keep, st in pending:
            if st is not None:
                st.finish() if ok else st.abort()


@contextlib.contextmanager
def group():
    """with sparsecoll.group(): ... -- group_start, then group_end on leaving
    (also when the body raised: the queued calls still run to their end)."""
    group_start()
    try:
        yield
    except BaseException:
        try:
            group_end()
        except Exception:
            pass  # the body's exception is the one to see
        raise
    group_end()


def _int(v, what, lo, hi):
    try:
        i = int(v)
        if i != v:
            raise ValueError
    except (TypeError, ValueError):
        raise ArgumentError("%s must be an integer, got %r" % (what, v)) from None
    if not lo <= i <= hi:
        raise ArgumentError("%s %d is outside [%d, %d]" % (what, i, lo, hi))
    return i


class PointToPoint:
    """Comm's point-to-point calls (mixed into Comm: uses its handle, size and
    _run). Messages from one rank to one peer with one tag arrive in the order
    they were sent; the receive names its peer (no receive from any source)
    and must have the send's element count and dtype (else it fails with
    SC_ERR_MISMATCH, the message dropped, the pair still usable). peer may be
    this rank (a local copy once both sides are posted: use the i-forms or a
    group for it)."""

    def _p2p(self, fn, ifn, x, peer, tag, async_op, recv):
        what = "recv buffer" if recv else "send buffer"
        peer = _int(peer, "peer", 0, self.size - 1)
        tag = _int(tag, "tag", 0, _INT_MAX)
        st = _staging.for_tensors(x)
        hx = x
        if st is not None:
            try:
                hx = st.output(x, what) if recv else st.input(x, what)
            except BaseException:
                st.abort()
                raise
        try:
            p, n, dt = _buf.buf(hx, what, writable=recv)
        except BaseException:
            if st is not None:
                st.abort()
            raise
        return self._run(fn, ifn, (p, n, dt, peer, tag, self.handle), x, (hx,), async_op, st)

    def send(self, buf, peer, tag=0, async_op=False):
        """Sends buf (all its elements) to rank peer with tag; returns once buf
        may be reused (inside a group: queued, sent at the group's end).
        async_op=True returns a Request instead. Returns buf."""
        return self._p2p(lib.sc_send, lib.sc_isend, buf, peer, tag, async_op, False)

    def recv(self, buf, peer, tag=0, async_op=False):
        """Receives into buf the first message from rank peer with tag not yet
        received; it must hold buf's element count and dtype. Returns buf
        (inside a group: filled at the group's end; async_op=True: a Request
        whose wait() returns buf)."""
        return self._p2p(lib.sc_recv, lib.sc_irecv, buf, peer, tag, async_op, True)

    def isend(self, buf, peer, tag=0):
        """Non-blocking send, started at once (also inside a group): a Request
        that keeps buf alive until it completed."""
        return self.send(buf, peer, tag, async_op=True)

    def irecv(self, buf, peer, tag=0):
        """Non-blocking receive, posted at once (also inside a group): its
        place among this thread's receives from peer with tag is fixed by this call."""
        return self.recv(buf, peer, tag, async_op=True)

    @staticmethod
    def group():
        """The calling thread's group (sparsecoll.group()): it spans every
        communicator, as sc_group_start does."""
        return group()
