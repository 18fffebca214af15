# SPDX-License-Identifier: BSD-3-Clause
"""sc_comm_init_env under torchrun's variables while torch's store holds
MASTER_PORT: the bind failure names the variable that chose the port and the
way out; with SC_ROOT_ADDR set the library uses that address instead and the
ranks connect. Runs test/multi/mr_env (C) and sparsecoll.Comm.from_env.
Usage: env_clash.py MR_ENV PORT1 PORT2"""
import os
import socket
import subprocess
import sys

import sparsecoll

mr_env, p1, p2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    try:  # the real thing when torch is there: its TCPStore on MASTER_PORT
        import torch.distributed as dist
        from datetime import timedelta

        holder = dist.TCPStore("127.0.0.1", p1, 1, True, timedelta(seconds=30))
    except ImportError:
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", p1))
        holder.listen()
except (OSError, RuntimeError) as e:
    # The random port was taken by a test running alongside, before this one
    # could hold it: nothing was tested; the script tries other ports.
    print("HOLDER: cannot hold port %d: %s" % (p1, e))
    sys.exit(3)


def env(rank, **extra):
    e = dict(os.environ, RANK=str(rank), WORLD_SIZE="3", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(p1),
             SC_TIMEOUT_MS="20000")
    e.pop("SC_ROOT_ADDR", None)
    e.update(extra)
    return e


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


# Rank 0 alone: it fails at bind, before waiting for anyone.
r = subprocess.run([mr_env], env=env(0), stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
print("C rank 0 with MASTER_PORT held:", r.stderr.strip())
if r.returncode == 0:
    fail("mr_env succeeded although MASTER_PORT is taken")
for want in ("Address already in use", "the port came from MASTER_PORT", "SC_ROOT_ADDR"):
    if want not in r.stderr:
        fail("the bind error does not say %r" % want)

# The same through Python: sparsecoll.Error with the code and the detail.
os.environ.update(env(0))
try:
    sparsecoll.Comm.from_env()
    fail("Comm.from_env succeeded although MASTER_PORT is taken")
except sparsecoll.Error as e:
    print("Python:", e)
    if e.code != "SC_ERR_SYSTEM" or "MASTER_PORT" not in e.message:
        fail("unexpected error %s" % e)

# With SC_ROOT_ADDR: honoured although RANK/WORLD_SIZE/MASTER_* are set.
procs = [subprocess.Popen([mr_env], env=env(r, SC_ROOT_ADDR="127.0.0.1:%d" % p2)) for r in range(3)]
rcs = [p.wait(timeout=60) for p in procs]
print("torchrun variables + SC_ROOT_ADDR, MASTER_PORT held: exit codes", rcs)
if any(rcs):
    fail("ranks failed with SC_ROOT_ADDR set")
print("PASS")
