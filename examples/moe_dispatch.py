#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Mixture-of-experts token dispatch with all-to-alls: one expert (a small
MLP) per rank, top-1 routing, uneven token counts per expert.

Each rank routes its tokens (a linear router shared by every rank, top-1 of
its softmax), sorts them by expert, and then:
  1. all_to_all_single of the counts: each rank learns how many tokens every
     other rank sends its expert;
  2. all_to_all_single of the tokens, with those counts as split sizes;
  3. its expert's MLP on the tokens it received;
  4. all_to_all_single back, the split sizes swapped;
  5. the outputs put back in token order and scaled by the router's gate.
The result is checked against a single-process computation of the same
thing (same seeds, so the same tokens, router and expert weights, every token
through its expert directly); the script prints the largest absolute
difference over all ranks and exits 1 when it is more than rounding (--tol).

  sc-run -n 4 python3 examples/moe_dispatch.py                 # sparsecoll backend
  sc-run -n 4 python3 examples/moe_dispatch.py --backend gloo
  torchrun --nproc_per_node=4 examples/moe_dispatch.py --tokens 4096

Under sc-run (SC_RANK/SC_WORLD_SIZE/SC_ROOT_ADDR, no MASTER_*) the script
derives torch's variables from sc-run's, as examples/train_ddp.py does.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn


def torch_env_from_sc_run():
    if "RANK" in os.environ or "SC_RANK" not in os.environ:
        return
    host, port = os.environ["SC_ROOT_ADDR"].rsplit(":", 1)
    os.environ.update(RANK=os.environ["SC_RANK"], WORLD_SIZE=os.environ["SC_WORLD_SIZE"],
                      MASTER_ADDR=host.strip("[]"), MASTER_PORT=port)


def expert(e, dim, hidden, seed):
    """Expert e's MLP: its weights depend on (seed, e) only."""
    torch.manual_seed(seed * 1000 + 100 + e)
    return nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))


def router(dim, experts, seed):
    torch.manual_seed(seed * 1000)
    return nn.Linear(dim, experts, bias=False)


def tokens(rank, n, dim, seed):
    g = torch.Generator().manual_seed(seed * 1000 + 500 + rank)
    # Shifted per rank, so that ranks prefer different experts and the
    # counts are uneven (some rank/expert pairs may have none).
    return torch.randn(n, dim, generator=g) + 0.5 * torch.randn(1, dim, generator=g)


def route(gate_layer, x):
    """(expert of each token, its gate): top-1 of the router's softmax."""
    probs = torch.softmax(gate_layer(x), dim=-1)
    gate, which = probs.max(dim=-1)
    return which, gate


def moe_distributed(x, gate_layer, my_expert, size):
    which, gate = route(gate_layer, x)
    order = torch.sort(which, stable=True).indices
    send_counts = torch.bincount(which, minlength=size)
    # 1. counts: send_counts[j] tokens go to expert j; recv_counts[i] come from rank i.
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    send_splits, recv_splits = send_counts.tolist(), recv_counts.tolist()
    # 2. tokens out, grouped by expert.
    received = x.new_empty(sum(recv_splits), x.shape[1])
    dist.all_to_all_single(received, x[order].contiguous(), recv_splits, send_splits)
    # 3. this rank's expert.
    y = my_expert(received)
    # 4. back to the ranks the tokens came from.
    back = x.new_empty(x.shape)
    dist.all_to_all_single(back, y.contiguous(), send_splits, recv_splits)
    # 5. token order, times the gate.
    out = torch.empty_like(back)
    out[order] = back
    return out * gate.unsqueeze(1), send_counts, recv_counts


def moe_reference(x, gate_layer, experts):
    """Every token through its expert directly, in one process."""
    which, gate = route(gate_layer, x)
    out = torch.empty_like(x)
    for e, mlp in enumerate(experts):
        mask = which == e
        if mask.any():
            out[mask] = mlp(x[mask])
    return out * gate.unsqueeze(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["gloo", "sparsecoll"], default="sparsecoll")
    ap.add_argument("--tokens", type=int, default=256, help="tokens per rank")
    ap.add_argument("--dim", type=int, default=32, help="model dimension")
    ap.add_argument("--hidden", type=int, default=64, help="the experts' hidden dimension")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-5, help="largest absolute difference accepted")
    a = ap.parse_args()

    torch_env_from_sc_run()
    if a.backend == "sparsecoll":
        import sparsecoll.torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, size = dist.get_rank(), dist.get_world_size()

    with torch.no_grad():
        gate_layer = router(a.dim, size, a.seed)
        experts = [expert(e, a.dim, a.hidden, a.seed) for e in range(size)]
        x = tokens(rank, a.tokens, a.dim, a.seed)
        out, send_counts, recv_counts = moe_distributed(x, gate_layer, experts[rank], size)
        # The single-process computation: every rank's tokens, from the seeds.
        want = moe_reference(torch.cat([tokens(r, a.tokens, a.dim, a.seed) for r in range(size)]),
                             gate_layer, experts)
        diff = (out - want[rank * a.tokens:(rank + 1) * a.tokens]).abs().max() if a.tokens else torch.zeros(())
        worst = diff.reshape(1).clone()
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        received = recv_counts.sum().reshape(1).clone()
        dist.all_reduce(received)

    print("rank %d: sends %s to the experts, its expert received %d tokens"
          % (rank, send_counts.tolist(), int(recv_counts.sum())))
    bad = not worst.item() <= a.tol or int(received.item()) != size * a.tokens
    if rank == 0:
        print("backend %s, %d ranks, %d tokens per rank: max abs difference %.3g (tolerance %.3g)"
              % (a.backend, size, a.tokens, worst.item(), a.tol))
    dist.barrier()
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
