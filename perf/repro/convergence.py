#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Convergence of dense S-SGD, PowerSGD and ACP-SGD: a small CNN trained on
synthetic data with DistributedDataParallel on the "sparsecoll" backend, the
same seed and the same batches under each method.

    sc-run -n 4 /usr/bin/python3 perf/repro/convergence.py -o conv.json [--steps 300]
    perf/repro/convergence.py --plot conv.json -o conv.png [--dpi 80]

Each rank reads SC_RANK and SC_WORLD_SIZE (sc-run's variables); the process
group meets on a file store next to the output. The data: 1 x 16 x 16 images,
each one of ten fixed random class patterns under unit Gaussian noise, a
fresh batch per rank and step. The student (two convolutions, two fully
connected layers, 38k parameters) starts from one seed under every method and
trains with SGD (momentum 0.9). PowerSGD and ACP-SGD run as
sparsecoll.torch.hooks' powersgd_hook and acpsgd_hook (rank --rank, error
feedback, dense for the first --start steps, as torch's start_powerSGD_iter).
Writes, per method, the training loss of every step (the mean over ranks)
and the held-out loss and accuracy every --every steps (512 fixed samples).
"""
import argparse
import json
import os
import sys

from cnn_task import cnn, data


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True, help="the JSON (or with --plot, the PNG)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--rank", type=int, default=4, help="the low-rank methods' rank")
    ap.add_argument("--start", type=int, default=10, help="dense steps before compression")
    ap.add_argument("--every", type=int, default=10, help="held-out loss every this many steps")
    ap.add_argument("--methods", default="dense,powersgd,acpsgd")
    ap.add_argument("--plot", metavar="JSON", help="draw the curves of JSON instead of training")
    ap.add_argument("--dpi", type=int, default=80)
    return ap.parse_args(argv)


def plot(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = json.load(open(args.plot))
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for name, m in d["methods"].items():
        line, = ax[0].plot(range(len(m["train_loss"])), m["train_loss"], lw=0.6, alpha=0.5)
        ax[0].plot(m["eval_step"], m["eval_loss"], color=line.get_color(), lw=1.8,
                   label="%s (held-out, acc %.3f)" % (name, m["eval_acc"][-1]))
        ax[1].plot(m["eval_step"], m["eval_acc"], color=line.get_color(), lw=1.8, label=name)
    ax[0].set_xlabel("step")
    ax[0].set_ylabel("cross-entropy (thin: training, thick: held-out)")
    ax[0].set_yscale("log")
    ax[0].legend(fontsize=8)
    ax[1].set_xlabel("step")
    ax[1].set_ylabel("held-out accuracy")
    ax[1].legend(fontsize=8)
    fig.suptitle("small CNN, synthetic data, %d ranks, learning rate %g, PowerSGD/ACP-SGD rank %d"
                 % (d["ranks"], d["lr"], d["rank"]))
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)
    return 0


def train(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import sparsecoll.torch  # noqa: F401  (registers the backend)
    from sparsecoll.torch.hooks import ACPSGDState, PowerSGDState, acpsgd_hook, powersgd_hook

    torch.set_num_threads(1)
    rank, size = int(os.environ["SC_RANK"]), int(os.environ["SC_WORLD_SIZE"])
    port = os.environ.get("SC_ROOT_ADDR", "0:0").rsplit(":", 1)[1]
    store = os.path.abspath(args.output) + ".store-" + port
    dist.init_process_group("sparsecoll", init_method="file://" + store, rank=rank, world_size=size)

    batch, x_eval, y_eval = data()
    loss_fn = nn.CrossEntropyLoss()
    out = {"ranks": size, "steps": args.steps, "batch_per_rank": args.batch, "lr": args.lr,
           "rank": args.rank, "start": args.start, "methods": {}}
    for method in args.methods.split(","):
        student = cnn(0)
        model = nn.parallel.DistributedDataParallel(student)
        state = None
        if method in ("powersgd", "acpsgd"):
            cls, hook = (PowerSGDState, powersgd_hook) if method == "powersgd" else (ACPSGDState, acpsgd_hook)
            state = cls(process_group=None, matrix_approximation_rank=args.rank,
                        start_powerSGD_iter=args.start, random_seed=7)
            model.register_comm_hook(state, hook)
        elif method != "dense":
            sys.exit("convergence.py: unknown method %s" % method)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        gen = torch.Generator().manual_seed(10 + rank)
        train_loss, ev_step, ev_loss, ev_acc = [], [], [], []
        for step in range(args.steps + 1):
            if step % args.every == 0 or step == args.steps:
                with torch.no_grad():
                    logits = student(x_eval)
                    ev_step.append(step)
                    ev_loss.append(loss_fn(logits, y_eval).item())
                    ev_acc.append((logits.argmax(1) == y_eval).float().mean().item())
            if step == args.steps:
                break
            x, y = batch(gen, args.batch)
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            train_loss.append(mean.item() / size)
        if state is not None:
            state.close()
        out["methods"][method] = {"train_loss": train_loss, "eval_step": ev_step, "eval_loss": ev_loss,
                                  "eval_acc": ev_acc}
        if rank == 0:
            print("%-9s held-out loss %.4f -> %.4f, accuracy %.3f -> %.3f after %d steps"
                  % (method, ev_loss[0], ev_loss[-1], ev_acc[0], ev_acc[-1], args.steps), flush=True)
    if rank == 0:
        with open(args.output, "w") as f:
            json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0 and os.path.exists(store):
        os.unlink(store)
    return 0


def main(argv):
    args = parse(argv)
    return plot(args) if args.plot else train(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
