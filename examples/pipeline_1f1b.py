#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Pipeline parallelism with a 1F1B schedule over point-to-point messages:
one stage of a small MLP per rank (a Linear layer and a tanh), activations
sent forward to the next stage and gradients sent back to the previous one.

Each iteration splits a batch into micro-batches. Stage s (of S) runs
  warm-up:   min(S - s - 1, M) forwards,
  steady:    one forward and one backward, in turn, until every micro-batch
             went forward,
  cool-down: the backwards left,
with the activations and gradients moving by isend (waited at the end of the
iteration) and a blocking recv from the neighbouring stage, the micro-batch's
index as tag. The last stage computes the loss (the mean squared error over
the whole batch, so that the micro-batches' gradients add up to the batch's);
then every stage takes an SGD step on its own layer.

After the iterations every stage compares its layer with the same layer of
the whole model trained in one process on the same batches (same seeds), and
the script prints the largest absolute difference over all stages; it exits 1
unless every stage's parameters are within rounding (torch.allclose with
--rtol and --atol).

  sc-run -n 4 python3 examples/pipeline_1f1b.py                  # sparsecoll backend
  sc-run -n 4 python3 examples/pipeline_1f1b.py --backend gloo
  torchrun --nproc_per_node=4 examples/pipeline_1f1b.py --micro-batches 8

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


def widths(stages, dim, hidden):
    """Input and output width of each stage: dim -> hidden ... hidden -> dim."""
    w = [dim] + [hidden] * (stages - 1) + [dim]
    return list(zip(w[:-1], w[1:]))


def stage_block(s, stages, dim, hidden, seed):
    """Stage s's layer: its weights depend on (seed, s) only."""
    torch.manual_seed(seed * 1000 + s)
    d_in, d_out = widths(stages, dim, hidden)[s]
    return nn.Sequential(nn.Linear(d_in, d_out), nn.Tanh())


def batch(it, size, dim, seed):
    """Iteration it's inputs and targets (every rank can make them)."""
    g = torch.Generator().manual_seed(seed * 1000 + 500 + it)
    x = torch.randn(size, dim, generator=g)
    return x, torch.tanh(x.flip(1) + 0.1 * torch.randn(size, dim, generator=g))


def schedule(s, stages, micro):
    """Stage s's 1F1B order: [("F", i) or ("B", i)]."""
    warm = min(stages - s - 1, micro)
    order = [("F", i) for i in range(warm)]
    for i in range(micro - warm):
        order += [("F", warm + i), ("B", i)]
    return order + [("B", micro - warm + i) for i in range(warm)]


def train_pipeline(block, s, stages, a):
    """The iterations on this stage; the pending sends are waited for at the
    end of each."""
    opt = torch.optim.SGD(block.parameters(), lr=a.lr)
    prev, nxt = s - 1, s + 1
    mb = a.micro_batch_size
    d_in, d_out = widths(stages, a.dim, a.hidden)[s]
    for it in range(a.iters):
        x, target = batch(it, mb * a.micro_batches, a.dim, a.seed)
        inputs, outputs, losses, sends = {}, {}, {}, []
        for kind, i in schedule(s, stages, a.micro_batches):
            if kind == "F":
                if s == 0:
                    inp = x[i * mb:(i + 1) * mb]
                else:
                    inp = torch.empty(mb, d_in)
                    dist.recv(inp, prev, tag=i)
                    inp.requires_grad_()
                out = block(inp)
                inputs[i], outputs[i] = inp, out
                if nxt < stages:
                    sends.append(dist.isend(out.detach(), nxt, tag=i))
                else:  # the batch's mean squared error, this micro-batch's part
                    t = target[i * mb:(i + 1) * mb]
                    losses[i] = ((out - t) ** 2).sum() / target.numel()
            else:
                if nxt < stages:
                    grad = torch.empty(mb, d_out)
                    dist.recv(grad, nxt, tag=i)
                    outputs[i].backward(grad)
                else:
                    losses[i].backward()
                if s > 0:
                    sends.append(dist.isend(inputs[i].grad, prev, tag=i))
                del inputs[i], outputs[i]
        for w in sends:
            w.wait()
        opt.step()
        opt.zero_grad()
        if losses and it == a.iters - 1:
            print("stage %d: loss %.6f at iteration %d" % (s, sum(v.item() for v in losses.values()), it))


def train_reference(stages, a):
    """The whole model in one process, the whole batch at once."""
    model = nn.Sequential(*[stage_block(s, stages, a.dim, a.hidden, a.seed) for s in range(stages)])
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    for it in range(a.iters):
        x, target = batch(it, a.micro_batch_size * a.micro_batches, a.dim, a.seed)
        ((model(x) - target) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["gloo", "sparsecoll"], default="sparsecoll")
    ap.add_argument("--micro-batches", type=int, default=6)
    ap.add_argument("--micro-batch-size", type=int, default=16)
    ap.add_argument("--dim", type=int, default=32, help="the model's input and output width")
    ap.add_argument("--hidden", type=int, default=64, help="the width between stages")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-6)
    a = ap.parse_args()

    torch_env_from_sc_run()
    if a.backend == "sparsecoll":
        import sparsecoll.torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    s, stages = dist.get_rank(), dist.get_world_size()

    block = stage_block(s, stages, a.dim, a.hidden, a.seed)
    train_pipeline(block, s, stages, a)
    want = train_reference(stages, a)[s]
    close = all(torch.allclose(p, q, rtol=a.rtol, atol=a.atol) for p, q in zip(block.parameters(), want.parameters()))
    diff = max((p - q).abs().max().item() for p, q in zip(block.parameters(), want.parameters()))
    worst = torch.tensor([diff, 0.0 if close else 1.0])
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    bad = worst[1].item() != 0
    if s == 0:
        print("backend %s, %d stages, %d micro-batches of %d, %d iterations: max abs difference %.3g "
              "from one process (%s)" % (a.backend, stages, a.micro_batches, a.micro_batch_size, a.iters,
                                         worst[0].item(), "NOT within" if bad else "within rounding"))
    dist.barrier()
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
