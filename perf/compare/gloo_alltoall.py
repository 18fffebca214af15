#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Gloo's all-to-all (torch.distributed.all_to_all_single, backend gloo) timed
the way perf/compare/alltoall_compare.sh times every library: uint8 elements
(every size splits into P blocks down to P bytes), SIZE the bytes of one
rank's send buffer, out of place, one checked operation per size, then
warm-up, a barrier and the timed iterations; the figure is the slowest rank's
average. With -v the splits are unequal: the count matrix of
sc_alltoall_perf -v (perf/a2a_matrix.h), computed here by the same integer
arithmetic from --seed and --skew. With --sendrecv each rank sends its whole
buffer to rank + 1 and receives rank - 1's instead, as sc_sendrecv_perf
(torch.distributed isend and irecv, then wait on both).

  gloo_alltoall.py -n P [-v [--seed N] [--skew S] | --sendrecv] [--addr HOST]
                   [--port PORT] SIZE:ITERS:WARMUP ...
      starts P processes on this host; rendezvous at HOST:PORT (default
      127.0.0.1 and a free port), Gloo on interface lo unless
      GLOO_SOCKET_IFNAME is set.
  sc-run [--netbed] -n P gloo_alltoall.py --sc-run [-v ...] SIZE:ITERS:WARMUP ...
      one worker per rank placed by sc-run (e.g. on the hosts of an
      sc-netbed bed): rank, world size and the rendezvous HOST:PORT from
      SC_RANK, SC_WORLD_SIZE and SC_ROOT_ADDR (our bootstrap's address, unused
      by anything else here), the interface from SC_SOCKET_IFNAME unless
      GLOO_SOCKET_IFNAME is set.
  gloo_alltoall.py --counts P [--seed N] [--skew S] ELEMS ...
      prints the -v matrix for P ranks as sc_alltoall_perf --counts does
      (the tests compare the two).

Rank 0 prints one line per size: "SIZE TIME_US", or "SIZE fail WHY". Needs
python3-torch (Debian)."""
import datetime
import os
import socket
import subprocess
import sys
import time

import gloo_sc_run

MASK = (1 << 64) - 1
SHARE_ONE = 1 << 20
MAX_RANKS = 32768
MAX_SKEW = 2


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def shares(p, seed, skew):
    """perf/a2a_matrix.h's a2a_shares: rows of P shares in 1/2^20 units."""
    if not (1 <= p <= MAX_RANKS and 0 <= skew <= MAX_SKEW):
        raise ValueError("P %d or skew %d out of range" % (p, skew))
    rng = SplitMix64(seed)
    order = list(range(p))
    for j in range(p - 1, 0, -1):
        k = rng.next() % (j + 1)
        order[j], order[k] = order[k], order[j]
    pop = [0] * p
    for m in range(p):
        pop[order[m]] = m
    rows = []
    for _ in range(p):
        row = []
        for j in range(p):
            base = 1 << 30
            for _ in range(skew):
                base //= pop[j] + 1
            row.append(base * (512 + rng.next() % 1024))
        total = sum(row)
        rows.append([w * SHARE_ONE // total for w in row])
    return rows


def counts(share, elems):
    """perf/a2a_matrix.h's a2a_counts: count[i][j], each row summing to elems."""
    out = []
    for row in share:
        total, cum, prev, line = sum(row), 0, 0, []
        for w in row:
            cum += w
            upto = elems * cum // total
            line.append(upto - prev)
            prev = upto
        out.append(line)
    return out


def values(frm, first, n):
    """What rank frm puts at offsets first..first+n of its send buffer (as
    mpi_alltoall.c): a pattern of period 251, tiled, so that a 64 MiB buffer
    costs no int64 temporaries."""
    import torch

    period = torch.tensor([(frm * 131 + (first + k) * 7 + 1) % 251 for k in range(251)],
                          dtype=torch.uint8)
    return period.repeat(n // 251 + 1)[:n]


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


def worker(rank, world, addr, port, cases, uneven, seed, skew, sendrecv):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (addr, port),
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    share = shares(world, seed, skew) if uneven else None
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    status = 0
    for size, iters, warmup in cases:
        if uneven:
            m = counts(share, size)
            in_splits = m[rank]
            out_splits = [m[i][rank] for i in range(world)]
            sent = size
        elif sendrecv:
            in_splits = out_splits = None
            sent = size
        else:
            block = size // world
            in_splits = out_splits = None
            sent = block * world
        inp = values(rank, 0, sent)
        recvd = sum(out_splits) if uneven else sent
        out = torch.zeros(recvd, dtype=torch.uint8)

        def call():
            dist.all_to_all_single(out, inp, output_split_sizes=out_splits,
                                   input_split_sizes=in_splits)

        def shift():
            reqs = [dist.irecv(out, src=prev), dist.isend(inp, dst=nxt)]
            for r in reqs:
                r.wait()

        if sendrecv:
            call = shift
        call()
        want = []
        for i in ([prev] if sendrecv else range(world)):
            if uneven:
                first = sum(m[i][:rank])
                n = out_splits[i]
            elif sendrecv:
                first, n = 0, size
            else:
                first, n = rank * block, block
            want.append(values(i, first, n))
        want = torch.cat(want)
        wrong = torch.tensor([int((out != want).sum().item())], dtype=torch.int64)
        dist.all_reduce(wrong, op=dist.ReduceOp.SUM)
        for _ in range(warmup):
            call()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
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
    world, port, addr, uneven, seed, skew, rest, counts_p = 0, 0, "127.0.0.1", False, 1, 1, [], 0
    sc_run = False
    sendrecv = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-n", "--port", "--addr", "--seed", "--skew", "--counts"):
            if i + 1 >= len(argv):
                print("gloo_alltoall.py: %s needs a value" % a, file=sys.stderr)
                return 2
            v = argv[i + 1]
            i += 2
            if a == "-n":
                world = int(v)
            elif a == "--port":
                port = int(v)
            elif a == "--addr":
                addr = v
            elif a == "--seed":
                seed = int(v, 0)
            elif a == "--skew":
                skew = int(v)
            else:
                counts_p = int(v)
        elif a == "-v":
            uneven = True
            i += 1
        elif a == "--sc-run":
            sc_run = True
            i += 1
        elif a == "--sendrecv":
            sendrecv = True
            i += 1
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            rest.append(a)
            i += 1
    if counts_p:
        share = shares(counts_p, seed, skew)
        for e in rest:
            m = counts(share, int(e))
            print("%d: %s" % (int(e), " ".join(str(c) for row in m for c in row)))
        return 0
    if sc_run:
        where = gloo_sc_run.placement("gloo_alltoall.py")
        if where is None:
            return 2
        return worker(*where, parse_cases(rest), uneven, seed, skew, sendrecv)
    if "GLOO_ALLTOALL_RANK" in os.environ:
        return worker(int(os.environ["GLOO_ALLTOALL_RANK"]), world, addr, port,
                      parse_cases(rest), uneven, seed, skew, sendrecv)
    if world < 1 or not rest:
        print(__doc__, file=sys.stderr)
        return 2
    if uneven and sendrecv:
        print("gloo_alltoall.py: -v and --sendrecv exclude each other", file=sys.stderr)
        return 2
    parse_cases(rest)
    shares(world, seed, skew)  # the range check, before any process starts
    port = port or free_port(addr)
    procs = []
    for r in range(world):
        env = dict(os.environ, GLOO_ALLTOALL_RANK=str(r),
                   GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME") or "lo",
                   OMP_NUM_THREADS="1")
        args = ["-n", str(world), "--port", str(port), "--addr", addr, "--seed", str(seed),
                "--skew", str(skew)] + (["-v"] if uneven else []) + \
            (["--sendrecv"] if sendrecv else []) + rest
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + args,
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
