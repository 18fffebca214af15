# SPDX-License-Identifier: BSD-3-Clause
"""DDP communication hooks on libsparsecoll.

    from sparsecoll.torch.hooks import GTopkState, gtopk_hook
    state = GTopkState(process_group=None, density=0.01, select="exact")
    model.register_comm_hook(state, gtopk_hook)

gtopk_hook replaces DDP's dense all-reduce of each gradient bucket by
sc_gtopk_allreduce: every rank adds its residual to the bucket, keeps its k
largest magnitudes (k = density * bucket size), and the ranks merge these into
the global top-k of the sum (gTop-k); the bucket becomes the dense average of
that global selection, and what this rank did not get through stays in its
residual for the next step (error feedback).
"""
import atexit
import collections
import threading
import weakref

import torch
import torch.distributed as dist

from .._comm import SELECT, ErrorFeedback, _dtype_enum
from .._lib import ArgumentError


class GTopkState:
    """State of gtopk_hook: a communicator of its own and one error-feedback
    residual per DDP bucket.

    process_group: a "sparsecoll" group (None: the default group).
    density: fraction of each bucket's entries that survive, in (0, 1].
    select: "exact", "gaussian" or "mstopk" top-k selection.
    error_feedback: keep the residual (the method); False only to show what
    it is worth.

    The hook runs the bucket's gTop-k on one worker thread of this state, so
    backward keeps running while a bucket is reduced. That thread uses its own
    communicator (split from the group's at construction, a collective: build
    the state on every rank at the same point), so nothing it issues can
    interleave differently on different ranks with the group's other work.
    """

    def __init__(self, process_group=None, density=0.01, select="exact", error_feedback=True):
        pg = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
        comm = getattr(pg, "comm", None)
        if comm is None:
            raise ArgumentError("GTopkState: the process group must be a 'sparsecoll' one (got %s)" % type(pg).__name__)
        if not 0.0 < float(density) <= 1.0:
            raise ArgumentError("GTopkState: density must be in (0, 1], got %r" % (density,))
        if select not in SELECT:
            raise ArgumentError("GTopkState: select must be one of %s" % ", ".join(SELECT))
        self.density = float(density)
        self.select = select
        self.error_feedback = bool(error_feedback)
        self.comm = comm.split(0, comm.rank)
        self.residuals = {}  # bucket index -> ErrorFeedback
        self._q = collections.deque()
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="sparsecoll-gtopk", daemon=True)
        self._thread.start()
        # A state nobody closed (the usual case: it lives as long as the
        # model) is closed before the interpreter tears down: a worker thread
        # still parked in the queue and an open communicator at finalization
        # made processes abort at exit ("terminate called without an active
        # exception") after a successful run.
        atexit.register(_close_ref, weakref.ref(self))

    def k_of(self, n):
        return max(1, min(n, int(round(self.density * n))))

    def _residual(self, index, t):
        """The bucket's residual. DDP rebuilds its buckets after the first
        iteration (in the order gradients became ready): a bucket index whose
        size or dtype changed starts a fresh residual."""
        ef = self.residuals.get(index)
        if ef is None or ef.n != t.numel() or ef.dtype != _dtype_enum(t.dtype):
            ef = ErrorFeedback(t)
            self.residuals[index] = ef
        return ef

    def _run(self):
        while True:
            with self._cv:
                while not self._q:
                    self._cv.wait()
                item = self._q.popleft()
            if item is None:
                return
            t, index, fut = item
            try:
                ef = self._residual(index, t) if self.error_feedback else None
                self.comm.gtopk_allreduce(t, self.k_of(t.numel()), ef=ef, method=self.select)
                fut.set_result(t)
            except BaseException as e:  # reaches backward() through the future
                fut.set_exception(e)

    def submit(self, t, index):
        fut = torch.futures.Future()
        with self._cv:
            self._q.append((t, index, fut))
            self._cv.notify()
        return fut

    def close(self):
        """Stops the worker thread and frees the communicator (idempotent)."""
        if self._thread is None:
            return
        with self._cv:
            self._q.append(None)
            self._cv.notify()
        self._thread.join()
        self._thread = None
        self.comm.close()


def _close_ref(ref):
    state = ref()
    if state is not None:
        state.close()


def _bucket_tensor(bucket):
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def gtopk_hook(state, bucket):
    """DDP comm hook: gTop-k with error feedback of the bucket (see GTopkState)."""
    t = _bucket_tensor(bucket)
    if t.device.type != "cpu":
        # The worker thread reads device memory outside the stream order.
        torch.cuda.current_stream(t.device).synchronize()
    return state.submit(t, bucket.index())
