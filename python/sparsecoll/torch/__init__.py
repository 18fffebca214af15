# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed backend "sparsecoll" (registered on import).

    import sparsecoll.torch
    torch.distributed.init_process_group("sparsecoll")   # under torchrun

Bootstrap goes through torch's own store (rank 0 puts sc_get_unique_id's bytes
there), so the library never binds MASTER_PORT. See docs/PYTHON.md.

stats() counts the host synchronisations of CUDA streams done by the binding
and the backend, and the stream-ordered calls (reset_stats() zeroes them).
"""
from ._backend import BACKEND_NAME, ProcessGroupSparsecoll, register
from ._ordered import reset_stats, stats

register()

from . import hooks  # noqa: E402  (sparsecoll.torch.hooks.gtopk_hook)
from . import kfac  # noqa: E402  (sparsecoll.torch.kfac.KFACCommunicator)
from .onebit_adam import OneBitAdam  # noqa: E402
from .optimizer import DistributedOptimizer  # noqa: E402

__all__ = ["ProcessGroupSparsecoll", "BACKEND_NAME", "register", "stats", "reset_stats", "hooks", "kfac",
           "DistributedOptimizer", "OneBitAdam"]
