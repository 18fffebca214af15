# SPDX-License-Identifier: BSD-3-Clause
"""Compression beyond top-k: low-rank states (sc_lowrank_t), 1-bit states
(sc_onebit_t), and Comm's calls that use them (mixed into Comm: uses its
handle, size and _run; see docs/PYTHON.md)."""
import ctypes

from . import _consts, _staging
from ._buf import buf
from ._calls import aborting as _aborting
from ._lib import ArgumentError, check, lib

LOWRANK_MODES = {"powersgd": _consts.SC_LOWRANK_POWERSGD, "acpsgd": _consts.SC_LOWRANK_ACPSGD}
ONEBIT_MODES = {"scaled": _consts.SC_ONEBIT_SCALED, "majority": _consts.SC_ONEBIT_MAJORITY}


def _mode(table, value, what):
    if value not in table:
        raise ArgumentError("%s must be one of %s, got %r" % (what, ", ".join(sorted(table)), value))
    return table[value]


def _dtype(dtype):
    from ._comm import _dtype_enum  # _comm imports this module

    return _dtype_enum(dtype)


class _Handle:
    """A C state freed by close() (idempotent) or when collected."""

    _destroy = None

    def close(self):
        if self._h:
            h, self._h = self._h, ctypes.c_void_p()
            check(type(self)._destroy(h))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class LowRank(_Handle):
    """sc_lowrank_t: the state of one gradient matrix of rows x cols (row
    major) under PowerSGD ("powersgd": warm start, two all-reduces per call)
    or ACP-SGD ("acpsgd": one all-reduce per call, the factors alternating).
    rank is capped at min(rows, cols); the first factor is drawn from seed,
    the same on every rank; error_feedback keeps what the estimate missed for
    the next call. dtype: float32, float64, float16 or bfloat16 (the halves
    computed in float32)."""

    _destroy = staticmethod(lambda h: lib.sc_lowrank_destroy(h))

    def __init__(self, rows, cols, dtype="float32", rank=1, mode="powersgd", error_feedback=True, seed=0):
        self._h = ctypes.c_void_p()
        self.rows, self.cols, self.rank = int(rows), int(cols), int(rank)
        self.dtype = _dtype(dtype)
        self.mode = mode
        check(lib.sc_lowrank_create(self.rows, self.cols, self.dtype, self.rank,
                                    _mode(LOWRANK_MODES, mode, "mode"), 1 if error_feedback else 0,
                                    int(seed) & 0xFFFFFFFFFFFFFFFF, ctypes.byref(self._h)))


class OneBit(_Handle):
    """sc_onebit_t: the state of 1-bit all-reduces of n elements on comm
    ("scaled": signs and a scale per chunk in a two-phase exchange, with the
    worker and server residuals of 1-bit Adam; "majority": signSGD with
    majority vote, no residual). A state belongs to the communicator it was
    made for."""

    _destroy = staticmethod(lambda h: lib.sc_onebit_destroy(h))

    def __init__(self, comm, n, dtype="float32", mode="scaled"):
        self._h = ctypes.c_void_p()
        self.n = int(n)
        self.dtype = _dtype(dtype)
        self.mode = mode
        self.comm = comm
        check(lib.sc_onebit_create(self.n, self.dtype, _mode(ONEBIT_MODES, mode, "mode"), comm.handle,
                                   ctypes.byref(self._h)))


class Compressed:
    def _state_call(self, fn, x, state, kind, n_want, what):
        if not isinstance(state, kind):
            raise ArgumentError("%s: state must be a sparsecoll.%s, got %s" % (what, kind.__name__,
                                                                               type(state).__name__))
        if not state._h:
            raise ArgumentError("%s: the %s was closed" % (what, kind.__name__))
        st = _staging.for_tensors(x)
        hx = st.inout(x, what) if st is not None else x
        with _aborting(st):
            xp, n, dt = buf(hx, what, writable=True)
            if n != n_want or dt != state.dtype:
                raise ArgumentError("%s: %d elements of dtype %d, the state is for %d of dtype %d"
                                    % (what, n, dt, n_want, state.dtype))
        return self._run(fn, None, (xp, state._h, self.handle), x, None, False, st)

    def lowrank_allreduce(self, grad, state):
        """grad (rows x cols elements, any shape with that many) becomes, in
        place, the rank-r estimate of the average over ranks of grad (plus
        the residual under error feedback): sc_lowrank_allreduce. Collective."""
        return self._state_call(lib.sc_lowrank_allreduce, grad, state, LowRank, state.rows * state.cols,
                                "lowrank_allreduce")

    def onebit_allreduce(self, x, state):
        """x becomes, in place, its 1-bit all-reduce (sc_onebit_allreduce):
        "scaled": the server-side scaled signs of the average; "majority": the
        sign of the sum of signs, in {-1, 0, +1}. Collective."""
        return self._state_call(lib.sc_onebit_allreduce, x, state, OneBit, state.n, "onebit_allreduce")
