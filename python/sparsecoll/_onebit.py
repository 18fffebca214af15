# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.OneBit: the 1-bit compressed all-reduce (sc_onebit_*)."""
import ctypes

from . import _consts
from ._buf import buf
from ._lib import ArgumentError, check, lib

MODES = {"scaled": _consts.SC_ONEBIT_SCALED, "majority": _consts.SC_ONEBIT_MAJORITY}


class OneBit:
    """sc_onebit_t: the state (residuals, message buffers) of the 1-bit
    all-reduce of one buffer of n elements of dtype (float32, float64, float16,
    bfloat16) on comm. mode "scaled" (1-bit Adam: signs and scales, worker and
    server error feedback) or "majority" (signSGD: sign of the sum of signs).
    `allreduce(x)` replaces x in place and returns it; collective: every rank
    calls it on a state of the same n, dtype and mode."""

    def __init__(self, comm, n, mode="scaled", dtype="float32"):
        from ._comm import _dtype_enum  # _comm imports this module

        if mode not in MODES:
            raise ArgumentError("OneBit: mode must be one of %s, not %r" % (sorted(MODES), mode))
        self.comm = comm
        self.n = int(n)
        self.mode = mode
        self.dtype = _dtype_enum(dtype)
        self._ob = ctypes.c_void_p()
        check(lib.sc_onebit_create(self.n, self.dtype, MODES[mode], comm.handle, ctypes.byref(self._ob)))

    def allreduce(self, x):
        if not self._ob:
            raise ArgumentError("OneBit.allreduce: the state is closed")
        p, n, dt = buf(x, "OneBit.allreduce buffer", writable=True)
        if n != self.n or dt != self.dtype:
            raise ArgumentError("OneBit.allreduce: the state is for %d elements of dtype %d, not %d of %d"
                                % (self.n, self.dtype, n, dt))
        check(lib.sc_onebit_allreduce(p, self._ob, self.comm.handle))
        return x

    def close(self):
        if self._ob:
            ob, self._ob = self._ob, ctypes.c_void_p()
            check(lib.sc_onebit_destroy(ob))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
