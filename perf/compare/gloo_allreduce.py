#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Gloo's all-reduce (torch.distributed, backend gloo) timed the way
perf/compare/allreduce_compare.sh times every library: float32 sum on one
tensor (in place: torch's API has no other form), one checked operation per
size, then warm-up, a barrier and the timed iterations; the figure is the
slowest rank's average.

  gloo_allreduce.py -n P [--addr HOST] [--port PORT] SIZE:ITERS:WARMUP ...
      starts P processes on this host; rendezvous at HOST:PORT (default
      127.0.0.1 and a free port), Gloo on interface lo unless
      GLOO_SOCKET_IFNAME is set.
  sc-run [--netbed] -n P gloo_allreduce.py --sc-run SIZE:ITERS:WARMUP ...
      one worker per rank placed by sc-run (e.g. on the hosts of an
      sc-netbed bed): rank, world size and the rendezvous HOST:PORT from
      SC_RANK, SC_WORLD_SIZE and SC_ROOT_ADDR (our bootstrap's address, unused
      by anything else here), the interface from SC_SOCKET_IFNAME unless
      GLOO_SOCKET_IFNAME is set.

Rank 0 prints one line per size: "SIZE TIME_US", or "SIZE fail WHY". Needs
python3-torch (Debian)."""
import datetime
import os
import socket
import subprocess
import sys
import time

import gloo_sc_run


def free_port(addr):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def parse_cases(args):
    cases = []
    for a in args:
        size, iters, warmup = (int(x) for x in a.split(":"))
        if size < 0 or iters < 1 or warmup < 0:
            raise ValueError(a)
        cases.append((size, iters, warmup))
    return cases


def worker(rank, world, addr, port, cases):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (addr, port),
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    status = 0
    for size, iters, warmup in cases:
        count = size // 4
        idx = torch.arange(count, dtype=torch.int64) % 7 + 1
        t = (idx * (rank + 1)).to(torch.float32)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        want = (idx * (world * (world + 1) // 2)).to(torch.float32)
        wrong = torch.tensor([int((t != want).sum().item())], dtype=torch.int64)
        dist.all_reduce(wrong, op=dist.ReduceOp.SUM)
        # Zeros from here on: in-place sums of zeros stay finite however often.
        t.zero_()
        for _ in range(warmup):
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        us = torch.tensor([(time.perf_counter() - t0) * 1e6 / iters], dtype=torch.float64)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        if rank == 0:
            if wrong.item():
                print("%d fail %d wrong elements" % (size, wrong.item()), flush=True)
                status = 1
            else:
                print("%d %.3f" % (size, us.item()), flush=True)
    dist.destroy_process_group()
    return status


def main():
    argv = sys.argv[1:]
    if "GLOO_ALLREDUCE_RANK" in os.environ:
        rank = int(os.environ["GLOO_ALLREDUCE_RANK"])
        world = int(os.environ["GLOO_ALLREDUCE_WORLD"])
        port = int(os.environ["GLOO_ALLREDUCE_PORT"])
        addr = os.environ.get("GLOO_ALLREDUCE_ADDR", "127.0.0.1")
        return worker(rank, world, addr, port, parse_cases(argv))
    if argv and argv[0] == "--sc-run":
        where = gloo_sc_run.placement("gloo_allreduce.py")
        if where is None:
            return 2
        return worker(*where, parse_cases(argv[1:]))
    world, port, addr, rest = 0, 0, "127.0.0.1", []
    i = 0
    while i < len(argv):
        if argv[i] == "-n":
            world = int(argv[i + 1])
            i += 2
        elif argv[i] == "--port":
            port = int(argv[i + 1])
            i += 2
        elif argv[i] == "--addr":
            addr = argv[i + 1]
            i += 2
        elif argv[i] in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            rest.append(argv[i])
            i += 1
    if world < 1 or not rest:
        print(__doc__, file=sys.stderr)
        return 2
    parse_cases(rest)
    port = port or free_port(addr)
    procs = []
    for r in range(world):
        env = dict(os.environ, GLOO_ALLREDUCE_RANK=str(r), GLOO_ALLREDUCE_WORLD=str(world),
                   GLOO_ALLREDUCE_PORT=str(port), GLOO_ALLREDUCE_ADDR=addr,
                   GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME") or "lo",
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + rest,
                                      env=env, stdin=subprocess.DEVNULL))
    # One rank failing leaves the others blocked in a collective: stop them.
    status = 0
    while procs:
        time.sleep(0.05)
        for p in list(procs):
            rc = p.poll()
            if rc is None:
                continue
            procs.remove(p)
            if rc and not status:
                status = rc
                for q in procs:
                    q.terminate()
    return status


if __name__ == "__main__":
    sys.exit(main())
