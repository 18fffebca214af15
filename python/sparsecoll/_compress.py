# SPDX-License-Identifier: BSD-3-Clause
"""Comm's calls with a compression state (mixed into Comm): the low-rank and
1-bit all-reduces as methods of the communicator, beside the states'
own .allreduce (see docs/PYTHON.md)."""
from ._lib import ArgumentError
from ._lowrank import LowRank
from ._onebit import OneBit


class Compressed:
    def _own_state(self, state, kind, what):
        if not isinstance(state, kind):
            raise ArgumentError("%s: state must be a sparsecoll.%s, got %s"
                                % (what, kind.__name__, type(state).__name__))
        if state.comm is not self:
            raise ArgumentError("%s: the %s was made for another communicator" % (what, kind.__name__))
        return state

    def lowrank_allreduce(self, grad, state):
        """grad := in place, the rank-r estimate of the average over ranks
        (sc_lowrank_allreduce) under state, a sparsecoll.LowRank made on this
        communicator. Collective; returns grad."""
        return self._own_state(state, LowRank, "lowrank_allreduce").allreduce(grad)

    def onebit_allreduce(self, x, state):
        """x := in place, its 1-bit all-reduce (sc_onebit_allreduce) under
        state, a sparsecoll.OneBit made on this communicator. Collective;
        returns x."""
        return self._own_state(state, OneBit, "onebit_allreduce").allreduce(x)
