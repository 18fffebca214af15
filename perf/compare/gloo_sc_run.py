# SPDX-License-Identifier: BSD-3-Clause
"""The --sc-run mode of the Gloo comparison programs (gloo_allreduce.py,
gloo_alltoall.py): a worker started by sc-run (e.g. on the hosts of an
sc-netbed bed) takes its rank, world size and rendezvous HOST:PORT from
SC_RANK, SC_WORLD_SIZE and SC_ROOT_ADDR (our bootstrap's address, unused by
anything else there), and Gloo's interface from SC_SOCKET_IFNAME unless
GLOO_SOCKET_IFNAME is set."""
import os
import sys


def placement(prog):
    """(rank, world, addr, port) from sc-run's variables, or None after saying
    on stderr which is missing; sets the worker's environment."""
    try:
        rank = int(os.environ["SC_RANK"])
        world = int(os.environ["SC_WORLD_SIZE"])
        addr, port = os.environ["SC_ROOT_ADDR"].rsplit(":", 1)
        port = int(port)
    except (KeyError, ValueError) as e:
        print("%s --sc-run: SC_RANK, SC_WORLD_SIZE and SC_ROOT_ADDR=HOST:PORT must be set "
              "(run it under sc-run): %s" % (prog, e), file=sys.stderr)
        return None
    if os.environ.get("SC_SOCKET_IFNAME") and not os.environ.get("GLOO_SOCKET_IFNAME"):
        os.environ["GLOO_SOCKET_IFNAME"] = os.environ["SC_SOCKET_IFNAME"]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return rank, world, addr, port
