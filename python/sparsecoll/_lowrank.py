# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.LowRank: sc_lowrank_t, the state of low-rank compressed
all-reduce (PowerSGD or ACP-SGD) for one rows x cols gradient."""
import ctypes

from . import _consts, _staging
from ._buf import buf, dtype_of
from ._calls import aborting as _aborting
from ._calls import count as _count
from ._lib import ArgumentError, check, lib

MODES = {"powersgd": _consts.SC_LOWRANK_POWERSGD, "acpsgd": _consts.SC_LOWRANK_ACPSGD}


class LowRank:
    """The compressed all-reduce of one gradient matrix on comm: rank r =
    min(rank, rows, cols) factors, the first drawn from seed (the same on every
    rank: create it with the same arguments everywhere). mode: "powersgd" or
    "acpsgd"; error_feedback keeps the residual; dtype: float32 (default),
    float64, float16 or bfloat16 (numpy/torch dtype or its name)."""

    def __init__(self, comm, rows, cols, rank, mode="powersgd", error_feedback=True, seed=0,
                 dtype="float32"):
        from ._comm import _dtype_enum

        if mode not in MODES:
            raise ArgumentError("LowRank: mode %r is not one of %s" % (mode, ", ".join(sorted(MODES))))
        self.comm = comm
        self.rows, self.cols = int(rows), int(cols)
        self.dtype = _dtype_enum(dtype)
        self._lr = ctypes.c_void_p()
        check(lib.sc_lowrank_create(self.rows, self.cols, self.dtype, int(rank), MODES[mode],
                                    1 if error_feedback else 0, int(seed) & (2**64 - 1),
                                    ctypes.byref(self._lr)))

    def allreduce(self, grad):
        """grad (rows x cols elements of the state's dtype, contiguous; numpy
        or torch, CPU or CUDA) := the rank-r estimate of the ranks' average,
        in place; returns grad. Collective over the state's communicator."""
        if not self._lr:
            raise ArgumentError("LowRank.allreduce: the state is closed")
        n = _count(grad, "LowRank gradient")
        if n != self.rows * self.cols:
            raise ArgumentError("LowRank.allreduce: the gradient has %d elements, the state %d x %d"
                                % (n, self.rows, self.cols))
        if dtype_of(grad) != self.dtype:
            raise ArgumentError("LowRank.allreduce: the gradient's dtype is not the state's")
        st = _staging.for_tensors(grad)
        hg = st.inout(grad, "LowRank gradient") if st is not None else grad
        with _aborting(st):
            gp, _, _ = buf(hg, "LowRank gradient", writable=True)
        self.comm._run(lib.sc_lowrank_allreduce, None, (gp, self._lr, self.comm.handle), grad,
                       None, False, st)
        return grad

    def close(self):
        if self._lr:
            lr, self._lr = self._lr, ctypes.c_void_p()
            check(lib.sc_lowrank_destroy(lr))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
