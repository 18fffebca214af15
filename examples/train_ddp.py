#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A small CNN trained with DistributedDataParallel on synthetic data, on the
gloo backend or on libsparsecoll's "sparsecoll" backend; prints the loss and
the time per step.

  torchrun --nproc_per_node=4 examples/train_ddp.py --backend sparsecoll
  sc-run -n 4 python3 examples/train_ddp.py --backend sparsecoll
  sc-run -n 4 python3 examples/train_ddp.py --hook gtopk --density 0.01
  sc-run -n 4 python3 examples/train_ddp.py --optimizer mgwfbp

--hook gtopk: DDP with the gTop-k communication hook (error feedback).
--optimizer POLICY: no DDP; sparsecoll.torch.DistributedOptimizer on the
fusion API with that policy (wfbp, size, mgwfbp, dear, single, p3), gTop-k
buckets with --density > 0.

Under sc-run (SC_RANK/SC_WORLD_SIZE/SC_ROOT_ADDR, no MASTER_*) the script
derives torch's variables from them: MASTER_ADDR:MASTER_PORT = SC_ROOT_ADDR,
the free port sc-run chose. torch's store listens there; the sparsecoll
backend bootstraps through that store and binds no port of its own.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def torch_env_from_sc_run():
    if "RANK" in os.environ or "SC_RANK" not in os.environ:
        return
    host, port = os.environ["SC_ROOT_ADDR"].rsplit(":", 1)
    os.environ.update(RANK=os.environ["SC_RANK"], WORLD_SIZE=os.environ["SC_WORLD_SIZE"],
                      MASTER_ADDR=host.strip("[]"), MASTER_PORT=port)


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 4 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(4 * width, 10)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["gloo", "sparsecoll"], default="sparsecoll")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    ap.add_argument("--width", type=int, default=16, help="channels of the first convolution")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--hook", choices=["none", "gtopk"], default="none",
                    help="DDP communication hook (sparsecoll backend)")
    ap.add_argument("--optimizer", metavar="POLICY", default=None,
                    help="use sparsecoll.torch.DistributedOptimizer with this fusion policy instead of DDP")
    ap.add_argument("--density", type=float, default=0.0, help="gTop-k density (--hook gtopk: default 0.01)")
    a = ap.parse_args()

    torch_env_from_sc_run()
    if a.hook != "none" or a.optimizer:
        a.backend = "sparsecoll"
    if a.backend == "sparsecoll":
        import sparsecoll.torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(a.threads)
    dist.init_process_group(a.backend)
    rank, size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    if a.optimizer:
        from sparsecoll.torch import DistributedOptimizer

        model = Net(a.width)
        opt = DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9), model,
                                   policy=a.optimizer, density=a.density)
        mode = "DistributedOptimizer policy %s%s" % (a.optimizer, ", density %g" % a.density if a.density else "")
    else:
        model = nn.parallel.DistributedDataParallel(Net(a.width))
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
        mode = "DDP"
        if a.hook == "gtopk":
            from sparsecoll.torch.hooks import GTopkState, gtopk_hook

            density = a.density or 0.01
            model.register_comm_hook(GTopkState(None, density=density), gtopk_hook)
            mode = "DDP + gTop-k hook, density %g" % density
    # Synthetic, learnable data: the class is the brightest of 10 fixed patterns.
    g = torch.Generator().manual_seed(1 + rank)
    patterns = torch.randn(10, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    nparams = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print("%d ranks, backend %s, %s, %d parameters, batch %d per rank" % (size, a.backend, mode, nparams, a.batch))
    times = []
    for step in range(a.steps):
        y = torch.randint(0, 10, (a.batch,), generator=g)
        x = patterns[y] + 0.5 * torch.randn(a.batch, 3, 32, 32, generator=g)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        if rank == 0 and (step % 10 == 0 or step == a.steps - 1):
            print("step %4d  loss %.4f  step time %.1f ms" % (step, loss.item(), 1e3 * times[-1]))
    if rank == 0:
        steady = sorted(times[len(times) // 5:])  # past the warm-up
        print("median step time %.1f ms (backend %s, %s, %d ranks)"
              % (1e3 * steady[len(steady) // 2], a.backend, mode, size))
    if a.optimizer:
        opt.close()  # applies the last deferred update ("dear")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
