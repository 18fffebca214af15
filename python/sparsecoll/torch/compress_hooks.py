# SPDX-License-Identifier: BSD-3-Clause
"""DDP communication hooks for low-rank and 1-bit compression on libsparsecoll
(re-exported by sparsecoll.torch.hooks).

    from sparsecoll.torch.hooks import PowerSGDState, powersgd_hook
    state = PowerSGDState(process_group=None, matrix_approximation_rank=2,
                          start_powerSGD_iter=10)
    model.register_comm_hook(state, powersgd_hook)

PowerSGDState takes torch's keyword names and defaults
(torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook.PowerSGDState):
switching is a change of import. Each gradient of two or more dimensions
that compresses by at least min_compression_rate is reduced by
sc_lowrank_allreduce (a state per gradient, its first factor from
random_seed on every rank); the others, and every gradient before
start_powerSGD_iter, by a dense average. acpsgd_hook is the same with ACP-SGD
(one all-reduce per step, the factors alternating). onebit_hook reduces each
bucket with sc_onebit_allreduce in the scaled mode (EF-SignSGD with worker and
server residuals), majority_vote_hook in the majority mode (signSGD with
majority vote: the bucket becomes the sign of the sum of signs).
"""
from .._comm import _dtype_enum
from .._lib import ArgumentError
from .._lowrank import LowRank
from .._onebit import OneBit
from ._worker import HookWorker, bucket_tensor, group_comm, sync_device


def _compressible(g, r, min_rate):
    """(rows, cols) of g viewed as a matrix when low rank pays, else None."""
    if g.dim() <= 1 or g.numel() == 0:
        return None
    rows = g.shape[0]
    cols = g.numel() // rows
    r = min(r, rows, cols)
    return (rows, cols) if (rows + cols) * r * min_rate < rows * cols else None


class PowerSGDState(HookWorker):
    """State of powersgd_hook, with torch's PowerSGDState's parameters.

    matrix_approximation_rank: the rank r (capped at each matrix's smaller
    side). start_powerSGD_iter: steps averaged densely first (torch's warm-up
    against an early loss of accuracy). min_compression_rate: a matrix is
    compressed only when rows*cols exceeds (rows + cols)*r by this factor.
    use_error_feedback: keep what the estimate missed for the next step.
    warm_start: reuse the previous step's factor (the library's PowerSGD
    always does; False is refused). random_seed: the first factor's seed,
    the same on every rank. orthogonalization_epsilon,
    compression_stats_logging_frequency and batch_tensors_with_same_shape are
    accepted for compatibility and change nothing (the orthogonalisation
    handles zero columns itself; each matrix is its own call).
    """

    _mode = "powersgd"

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True,
                 orthogonalization_epsilon=0, random_seed=0, compression_stats_logging_frequency=10_000,
                 batch_tensors_with_same_shape=False):
        name = type(self).__name__
        comm = group_comm(process_group, name)
        if int(matrix_approximation_rank) < 1:
            raise ArgumentError("%s: matrix_approximation_rank must be >= 1, got %r"
                                % (name, matrix_approximation_rank))
        if not warm_start:
            raise ArgumentError("%s: warm_start=False is not offered: the library's PowerSGD keeps the "
                                "previous step's factor" % name)
        self.matrix_approximation_rank = int(matrix_approximation_rank)
        self.start_powerSGD_iter = int(start_powerSGD_iter)
        self.min_compression_rate = float(min_compression_rate)
        self.use_error_feedback = bool(use_error_feedback)
        self.warm_start = True
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.random_seed = int(random_seed)
        self.compression_stats_logging_frequency = compression_stats_logging_frequency
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape
        self.iter = 0
        self._states = {}  # (bucket index, position in the bucket) -> LowRank
        self._start_worker(comm, "sparsecoll-" + self._mode)

    def _state(self, key, rows, cols, dtype):
        lr = self._states.get(key)
        if lr is None or (lr.rows, lr.cols, lr.dtype) != (rows, cols, dtype):
            lr = LowRank(self.comm, rows, cols, self.matrix_approximation_rank, self._mode,
                         self.use_error_feedback, self.random_seed, dtype)
            self._states[key] = lr
        return lr

    def _reduce(self, work):
        t, grads, index, it = work
        if it < self.start_powerSGD_iter or grads is None:
            return self.comm.allreduce(t, op="avg")
        dense = []
        for i, g in enumerate(grads):
            shape = _compressible(g, self.matrix_approximation_rank, self.min_compression_rate)
            if shape is None:
                dense.append(g)
                continue
            lr = self._state((index, i), shape[0], shape[1], _dtype_enum(g.dtype))
            self.comm.lowrank_allreduce(g, lr)
        if dense:
            import torch

            flat = torch.cat([g.reshape(-1) for g in dense])
            self.comm.allreduce(flat, op="avg")
            at = 0
            for g in dense:
                g.copy_(flat[at:at + g.numel()].view_as(g))
                at += g.numel()
        return t

    def _close_states(self):
        for lr in self._states.values():
            lr.close()
        self._states.clear()


class ACPSGDState(PowerSGDState):
    """State of acpsgd_hook: PowerSGDState's parameters, ACP-SGD's method
    (one all-reduce per step; the factors alternate and reuse the previous
    step's reduced one). Its estimate projects each gradient on the previous
    step's factor, so more of it waits in the residual than under PowerSGD:
    it wants a lower learning rate (docs/ALGORITHMS.md, low-rank
    compression)."""

    _mode = "acpsgd"


def _lowrank_hook(state, bucket):
    t = bucket_tensor(bucket)
    sync_device(t)
    grads = bucket.gradients() if hasattr(bucket, "gradients") else None
    fut = state.submit((t, grads, bucket.index(), state.iter))
    if bucket.is_last():
        state.iter += 1
    return fut


def powersgd_hook(state, bucket):
    """DDP comm hook: PowerSGD of the bucket's matrices (see PowerSGDState)."""
    if not isinstance(state, PowerSGDState) or isinstance(state, ACPSGDState):
        raise ArgumentError("powersgd_hook: the state must be a sparsecoll PowerSGDState")
    return _lowrank_hook(state, bucket)


def acpsgd_hook(state, bucket):
    """DDP comm hook: ACP-SGD of the bucket's matrices (see ACPSGDState)."""
    if not isinstance(state, ACPSGDState):
        raise ArgumentError("acpsgd_hook: the state must be a sparsecoll ACPSGDState")
    return _lowrank_hook(state, bucket)


class OneBitState(HookWorker):
    """State of onebit_hook and majority_vote_hook: one sc_onebit_t per DDP
    bucket (its residuals, in the scaled mode), on a communicator of its own.
    process_group: a "sparsecoll" group (None: the default group)."""

    def __init__(self, process_group=None):
        comm = group_comm(process_group, "OneBitState")
        self._states = {}  # (bucket index, mode) -> OneBit
        self._start_worker(comm, "sparsecoll-onebit")

    def _reduce(self, work):
        t, index, mode = work
        n, dt = t.numel(), _dtype_enum(t.dtype)
        ob = self._states.get((index, mode))
        if ob is None or (ob.n, ob.dtype) != (n, dt):
            # DDP rebuilds its buckets after the first step: a new size starts
            # fresh residuals.
            if ob is not None:
                ob.close()
            ob = self._states[(index, mode)] = OneBit(self.comm, n, mode, dt)
        return self.comm.onebit_allreduce(t, ob)

    def _close_states(self):
        for ob in self._states.values():
            ob.close()
        self._states.clear()


def _onebit(state, bucket, mode, what):
    if not isinstance(state, OneBitState):
        raise ArgumentError("%s: the state must be a sparsecoll OneBitState" % what)
    t = bucket_tensor(bucket)
    sync_device(t)
    return state.submit((t, bucket.index(), mode))


def onebit_hook(state, bucket):
    """DDP comm hook: EF-SignSGD, the bucket becomes the scaled signs of the
    average through sc_onebit_allreduce's two-phase exchange (see OneBitState)."""
    return _onebit(state, bucket, "scaled", "onebit_hook")


def majority_vote_hook(state, bucket):
    """DDP comm hook: signSGD with majority vote, the bucket becomes the sign
    of the sum of every rank's signs, in {-1, 0, +1} (no residual)."""
    return _onebit(state, bucket, "majority", "majority_vote_hook")
