# SPDX-License-Identifier: BSD-3-Clause
"""libsparsecoll from Python: collectives, gTop-k sparse all-reduce and error
feedback on numpy arrays and torch tensors, without copies.

    import sparsecoll
    comm = sparsecoll.Comm.from_env()          # under sc-run / torchrun / srun
    comm.allreduce(x)                          # in place, like torch.distributed

`import sparsecoll.torch` registers the torch.distributed backend "sparsecoll".
See docs/PYTHON.md.
"""
from . import _consts as consts
from ._buf import cuda_available
from ._comm import Comm, ErrorFeedback, Request, get_unique_id, place_factors
from ._fusion import Fusion
from ._lib import ArgumentError, Error, UnsupportedError, last_error, lib
from ._lowrank import LowRank
from ._onebit import OneBit
from ._p2p import group, group_end, group_start

version = lib.sc_get_version()
__version__ = "%d.%d.%d" % (version // 10000, version // 100 % 100, version % 100)

__all__ = [
    "Comm",
    "Error",
    "ArgumentError",
    "UnsupportedError",
    "ErrorFeedback",
    "Request",
    "Fusion",
    "LowRank",
    "OneBit",
    "get_unique_id",
    "place_factors",
    "group",
    "group_start",
    "group_end",
    "cuda_available",
    "consts",
    "last_error",
]
