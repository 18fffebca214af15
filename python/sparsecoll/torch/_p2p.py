# SPDX-License-Identifier: BSD-3-Clause
"""Point-to-point of the "sparsecoll" process group: send, recv, isend, irecv
and batch_isend_irecv on the library's sc_isend/sc_irecv.

Each send or receive is posted at once on the calling thread (so its place
among this rank's messages to or from the peer with that tag is fixed by
program order) and returns a Work of its own: unlike the collectives' Works
it is not completed through the group's waiter thread, so a receive never
waits behind a collective posted before it, nor the other way round.
batch_isend_irecv (torch 1.13 brackets it with _start_coalescing and
_end_coalescing) posts its operations between sc_group_start and
sc_group_end: the non-blocking forms start at once inside a group, and the
batch's posting order cannot deadlock whatever it is.
"""
import threading

import torch

from .._lib import ArgumentError, UnsupportedError
from .._p2p import group_end, group_start
from ._timeout import poll_until, seconds

try:
    from torch._C._distributed_c10d import Work
except ImportError:  # pragma: no cover - very old torch
    import torch.distributed as dist

    Work = dist.Work if hasattr(dist, "Work") else object

_INT_MAX = (1 << 31) - 1
# dtypes the library names; any other goes as its bytes (nothing is reduced).
_DTYPES = {torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
           torch.float32, torch.float64}


class _P2PWork(Work):
    """One send or receive in flight. wait() blocks until it finished (on
    the calling thread) and raises its error; is_completed() polls."""

    def __init__(self, req, tensor, peer):
        super().__init__()
        self._req = req
        self._tensor = tensor
        self._peer = peer
        self._lock = threading.RLock()  # a future's callback may call wait()
        self._done = False
        self._error = None
        self._fut = None

    def _settle(self, error):
        # Under self._lock, once.
        self._error = error
        self._req = None
        fut = self._fut
        self._done = True
        if fut is not None:
            if error is None:
                fut.set_result([self._tensor])
            else:
                fut.set_exception(error)

    def _complete(self):
        with self._lock:
            if self._done:
                return
            err = None
            try:
                self._req.wait()
            except BaseException as e:  # raised by wait(), set on the future
                err = e
            self._settle(err)

    def wait(self, timeout=None):
        poll_until(self.is_completed, seconds(timeout), "the send or receive with rank %d" % self._peer)
        self._complete()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        if self._done:
            return True
        if not self._lock.acquire(blocking=False):
            return False  # another thread is waiting on it
        try:
            if not self._done:
                try:
                    if self._req.test():
                        self._req.wait()  # finished: returns at once
                        self._settle(None)
                except BaseException as e:
                    self._settle(e)
            return self._done
        finally:
            self._lock.release()

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return [self._tensor]

    def source_rank(self):
        return self._peer

    _source_rank = source_rank

    def synchronize(self):
        pass

    def get_future(self):
        """Completed with [tensor] once the operation finished (a thread of
        its own waits for it, started here)."""
        with self._lock:
            if self._fut is None:
                self._fut = torch.futures.Future()
                if self._done:
                    if self._error is None:
                        self._fut.set_result([self._tensor])
                    else:
                        self._fut.set_exception(self._error)
                else:
                    threading.Thread(target=self._complete, name="sparsecoll-p2p-future", daemon=True).start()
            return self._fut


class _BatchWork(Work):
    """The Works of one batch as one (what torch 2.x's coalescing manager
    takes from _end_coalescing for CUDA tensors; 1.13 waits on each)."""

    def __init__(self, works):
        super().__init__()
        self._works = works

    def wait(self, timeout=None):
        s = seconds(timeout)
        poll_until(self.is_completed, s, "the batch of %d sends and receives" % len(self._works))
        err = None
        for w in self._works:
            try:
                w.wait()
            except BaseException as e:
                err = err or e
        if err is not None:
            raise err
        return True

    def is_completed(self):
        return all(w.is_completed() for w in self._works)

    def is_success(self):
        return all(w.is_success() for w in self._works)

    def exception(self):
        return next((w.exception() for w in self._works if w.exception() is not None), None)

    def result(self):
        self.wait()
        return [t for w in self._works for t in w.result()]

    def synchronize(self):
        pass


def _int(v, what, lo, hi):
    if not isinstance(v, int) or isinstance(v, bool):
        raise ArgumentError("sparsecoll backend: %s must be an int, got %r" % (what, v))
    if not lo <= v <= hi:
        raise ArgumentError("sparsecoll backend: %s %d is outside [%d, %d]" % (what, v, lo, hi))
    return v


class PointToPoint:
    """send/recv/isend/irecv and batch_isend_irecv's coalescing hooks, mixed
    into ProcessGroupSparsecoll (uses its _comm and _check)."""

    _coalescing = None  # the thread that opened batch_isend_irecv's group

    def _p2p_tensor(self, tensors, peer, tag, what):
        if len(tensors) != 1:
            raise ArgumentError("sparsecoll backend: %s takes one tensor, got %d" % (what, len(tensors)))
        t = tensors[0]
        if t.layout != torch.strided:
            raise ArgumentError("sparsecoll backend: %s: the tensor must be dense (layout %s)" % (what, t.layout))
        self._check([t])
        size, rank = self.size(), self.rank()
        peer = _int(peer, "%s: peer" % what, 0, size - 1)
        if peer == rank:
            raise ArgumentError("sparsecoll backend: %s: peer %d is this rank; the backend sends to and receives "
                                "from other ranks only (a blocking send or receive with itself could not complete)"
                                % (what, peer))
        tag = _int(tag, "%s: tag" % what, 0, _INT_MAX)
        # A dtype the library does not name moves as its bytes.
        wire = t if t.dtype in _DTYPES else t.reshape(-1).view(torch.uint8)
        return t, wire, peer, tag

    def _posted(self, work):
        if self._coalescing == threading.get_ident():
            self._batch.append(work)
        return work

    def send(self, tensors, dstRank, tag=0):
        t, wire, peer, tag = self._p2p_tensor(tensors, dstRank, tag, "send")
        return self._posted(_P2PWork(self._comm.isend(wire, peer, tag), t, peer))

    def recv(self, tensors, srcRank, tag=0):
        t, wire, peer, tag = self._p2p_tensor(tensors, srcRank, tag, "recv")
        return self._posted(_P2PWork(self._comm.irecv(wire, peer, tag), t, peer))

    def recv_anysource(self, *args, **kwargs):
        raise UnsupportedError("sparsecoll backend: receive from any source (recv/irecv without src) is not "
                               "offered; name the source rank")

    recvAnysource = recv_anysource

    def _start_coalescing(self, *args):
        if self._coalescing is not None:
            raise ArgumentError("sparsecoll backend: batch_isend_irecv inside another batch on this group")
        group_start()
        self._coalescing = threading.get_ident()
        self._batch = []

    def _end_coalescing(self, *args):
        """Ends the batch's group: its sends and receives started when they
        were posted (1.13 has their Works already); returns them as one Work."""
        if self._coalescing is None:
            raise ArgumentError("sparsecoll backend: _end_coalescing without _start_coalescing")
        self._coalescing, batch, self._batch = None, self._batch, []
        group_end()
        return _BatchWork(batch)
