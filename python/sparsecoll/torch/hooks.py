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

    from sparsecoll.torch.hooks import fp16_hook, bf16_hook
    model.register_comm_hook(group, fp16_hook)   # group: a "sparsecoll" group or None

fp16_hook and bf16_hook are torch's fp16_compress_hook and bf16_compress_hook
done inside the collective (sc_allreduce_compressed): the bucket's gradients
travel as float16 (bfloat16), are summed in float32 at their owner and come
back averaged over ranks, the same bits on every rank.

PowerSGDState/powersgd_hook (torch's names and defaults), ACPSGDState/
acpsgd_hook, OneBitState with onebit_hook and majority_vote_hook: see
sparsecoll.torch.compress_hooks.
"""
import torch

from .._comm import SELECT, ErrorFeedback, _dtype_enum
from .._lib import ArgumentError
from . import _ordered
from ._worker import HookWorker, bucket_tensor, group_comm, sync_device
from .compress_hooks import (ACPSGDState, OneBitState, PowerSGDState, acpsgd_hook, majority_vote_hook,
                             onebit_hook, powersgd_hook)

__all__ = ["GTopkState", "gtopk_hook", "fp16_hook", "bf16_hook", "PowerSGDState", "powersgd_hook",
           "ACPSGDState", "acpsgd_hook", "OneBitState", "onebit_hook", "majority_vote_hook"]


class GTopkState(HookWorker):
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
    CUDA buckets instead go stream-ordered (the stream form on a stream of
    the state's that waits for torch's current stream; no host
    synchronisation), unless SPARSECOLL_CUDA_SYNC=1 (see the backend).
    """

    def __init__(self, process_group=None, density=0.01, select="exact", error_feedback=True):
        comm = group_comm(process_group, "GTopkState")
        if not 0.0 < float(density) <= 1.0:
            raise ArgumentError("GTopkState: density must be in (0, 1], got %r" % (density,))
        if select not in SELECT:
            raise ArgumentError("GTopkState: select must be one of %s" % ", ".join(SELECT))
        self.density = float(density)
        self.select = select
        self.error_feedback = bool(error_feedback)
        self.residuals = {}  # bucket index -> ErrorFeedback
        self._streams = _ordered.Streams()
        self._start_worker(comm, "sparsecoll-gtopk")

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

    def _reduce(self, work):
        t, index = work
        ef = self._residual(index, t) if self.error_feedback else None
        self.comm.gtopk_allreduce(t, self.k_of(t.numel()), ef=ef, method=self.select)
        return t

    def _on_stream(self, t, index):
        """The bucket's gTop-k enqueued on the state's stream for its device,
        from the calling thread; a CUDA future of the bucket."""
        ef = self._residual(index, t) if self.error_feedback else None
        issuer = _ordered.Issuer(self.comm, self._streams, t.device)
        issuer.igtopk_allreduce(t, self.k_of(t.numel()), ef, self.select)
        return issuer.work(t).get_future()


def gtopk_hook(state, bucket):
    """DDP comm hook: gTop-k with error feedback of the bucket (see GTopkState)."""
    t = bucket_tensor(bucket)
    if _ordered.wanted([t]):
        return state._on_stream(t, bucket.index())
    sync_device(t)
    return state.submit((t, bucket.index()))


def _half_wire_hook(wire, what, process_group, bucket):
    comm = group_comm(process_group, what)
    t = bucket_tensor(bucket)
    if t.dtype == torch.float32:
        comm.allreduce_compressed(t, op="avg", wire=wire)
    else:
        # Only float32 has a narrower wire here; other buckets go as they are.
        comm.allreduce(t, op="avg")
    fut = torch.futures.Future()
    fut.set_result(t)
    return fut


def fp16_hook(process_group, bucket):
    """DDP comm hook (the signature of torch's fp16_compress_hook: state is the
    process group, a "sparsecoll" one, or None for the default group): the
    bucket's average over ranks with float16 messages and float32 sums
    (Comm.allreduce_compressed, wire "fp16"). Runs on the calling thread and
    returns a completed future. Buckets that are not float32 are averaged by
    a plain all-reduce."""
    return _half_wire_hook("fp16", "fp16_hook", process_group, bucket)


def bf16_hook(process_group, bucket):
    """fp16_hook with bfloat16 messages (torch's bf16_compress_hook): float32's
    range, 8 bits of precision."""
    return _half_wire_hook("bf16", "bf16_hook", process_group, bucket)
