# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.torch.DistributedOptimizer: Horovod-style data parallelism on
the library's bucket-fusion API (sc_fusion_*), without DDP.

    opt = DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model,
                               policy="mgwfbp")
    for x, y in data:
        opt.zero_grad()
        loss_fn(model(x), y).backward()   # gradients are averaged as they become ready
        opt.step()
    opt.synchronize()                     # "dear": apply the last deferred updates

How it works:
- Every parameter's .grad is a view into one flat buffer per dtype, and each
  view is registered with the fusion API: gradients are accumulated by
  autograd straight into memory the library reduces (no copy).
- The first `warmup` steps reduce the flat buffers with plain all-reduces and
  record the order in which gradients became ready and the backward time
  between them (hooks on each parameter's gradient accumulator). Rank 0's
  order and times are then broadcast (the fusion plan is collective and must
  be identical everywhere), the tensors are added in that order and planned.
- From then on the accumulator hook calls sc_fusion_ready as each gradient is
  complete, so communication overlaps the rest of backward. step() marks the
  parameters that got no gradient this step with sc_fusion_skip (they count as
  zeros, as under DDP's find_unused_parameters), waits, then steps the wrapped
  optimizer.
- Policy "dear": step() does not wait; each module's forward pre-hook waits for
  its own parameters (the library's all-gather) and applies their update just
  before the next forward uses them. zero_grad() defers the zeroing of those
  gradients until their update ran.
- density > 0: gTop-k buckets with error feedback (LAGS with "wfbp", OMGS with
  "mgwfbp"); "dear" and "p3" refuse it (the library does).
- compression= (None: as density says) names what the buckets travel as, the
  fusion API's compress: "topk" (gTop-k at density), "powersgd", "acpsgd"
  (each parameter of dim >= 2 registered as a shape[0] x rest matrix, reduced
  in low rank `lowrank` from factors of `seed`), "fp16", "bf16", "onebit",
  "auto" (per bucket the cheapest of dense, fp16, topk with density, acpsgd)
  or "none". The compressed modes under "dear" and "p3" are refused by the
  library (SC_ERR_UNSUPPORTED): the constructor builds the fusion
  configuration once (a local call) so that such refusals are raised there,
  not after the warm-up.

Limits: one backward per step (no gradient accumulation over several
backward calls); use this object's zero_grad() (a set_to_none zero_grad would
detach .grad from the registered buffers: the hook then copies the gradient
back, one copy); parameters on the CPU, or CUDA when the library has it.
"""
import time

import torch
import torch.distributed as dist

from .._comm import Comm
from .._fusion import COMPRESS, POLICIES, Fusion
from .._lib import ArgumentError


def _comm_of(process_group):
    pg = process_group
    if pg is None and dist.is_initialized():
        pg = dist.distributed_c10d._get_default_group()
    comm = getattr(pg, "comm", None)
    if comm is not None:
        return comm.split(0, comm.rank)  # own communicator: own issue order
    if pg is None:
        return Comm.from_env()
    raise ArgumentError("DistributedOptimizer: process group must be a 'sparsecoll' one (or none "
                        "initialized: then the communicator comes from the environment)")


class DistributedOptimizer:
    def __init__(self, optimizer, model, policy="dear", density=0.0, bucket_bytes=None,
                 process_group=None, select="exact", warmup=2, slice_bytes=None, compression=None,
                 lowrank=None, seed=None):
        if policy not in POLICIES:
            raise ArgumentError("DistributedOptimizer: policy %r (one of: %s)" % (policy, ", ".join(sorted(POLICIES))))
        if compression is not None and compression not in COMPRESS:
            raise ArgumentError("DistributedOptimizer: compression %r (one of: %s)"
                                % (compression, ", ".join(sorted(COMPRESS))))
        self.compression = compression
        self.lowrank = lowrank
        self.seed = seed
        self.optimizer = optimizer
        self.model = model
        self.policy = policy
        self.density = float(density)
        self.bucket_bytes = bucket_bytes
        self.select = select
        self.slice_bytes = slice_bytes
        self.warmup = max(1, int(warmup))
        self.comm = _comm_of(process_group)
        if compression is not None:
            # sc_fusion_create is local: its refusals (a compressed mode
            # under "dear" or "p3", topk without density) come now.
            try:
                self._new_fusion().close()
            except Exception:
                self.comm.close()
                raise
        in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
        self.params = [p for p in model.parameters() if p.requires_grad and id(p) in in_opt]
        if not self.params:
            raise ArgumentError("DistributedOptimizer: no trainable parameter of the model is in the optimizer")
        self._index = {id(p): i for i, p in enumerate(self.params)}
        # The initial weights of rank 0 everywhere (as DDP does).
        with torch.no_grad():
            for p in self.params:
                self.comm.broadcast(p.data, root=0)
        self._make_grad_buffers()
        self._steps = 0
        self._fired = [False] * len(self.params)
        self._t_ready = [0.0] * len(self.params)
        self._order_log = []
        self._bw_us = [0.0] * len(self.params)
        self.fusion = None
        self._ids = None
        self._pending = set()  # dear: parameter indices whose update waits for their forward
        self._zero_after = set()
        self._hooks = []
        for i, p in enumerate(self.params):
            acc = p.expand_as(p).grad_fn.next_functions[0][0]  # p's AccumulateGrad node
            self._hooks.append((acc, acc.register_hook(self._make_hook(i))))
        if policy == "dear":
            for m in model.modules():
                own = [self._index[id(p)] for p in m.parameters(recurse=False) if id(p) in self._index]
                if own:
                    self._hooks.append((m, m.register_forward_pre_hook(self._make_pre_forward(own))))

    # ---- gradient buffers ----

    def _make_grad_buffers(self):
        by_key = {}
        for i, p in enumerate(self.params):
            by_key.setdefault((p.dtype, p.device), []).append(i)
        self.flat = []
        self.views = [None] * len(self.params)
        for (dtype, device), idx in by_key.items():
            flat = torch.zeros(sum(self.params[i].numel() for i in idx), dtype=dtype, device=device)
            off = 0
            for i in idx:
                n = self.params[i].numel()
                self.views[i] = flat[off:off + n].view_as(self.params[i])
                off += n
            self.flat.append(flat)
        for p, v in zip(self.params, self.views):
            if p.grad is not None:
                v.copy_(p.grad)
            p.grad = v

    def _own_grad(self, i):
        """Puts the gradient back into the registered view if something
        replaced .grad (a set_to_none zero_grad, a user's assignment)."""
        p, v = self.params[i], self.views[i]
        g = p.grad
        if g is None:
            v.zero_()
        elif g.data_ptr() != v.data_ptr():
            v.copy_(g)
        if g is None or g.data_ptr() != v.data_ptr():
            p.grad = v

    # ---- hooks ----

    def _make_hook(self, i):
        def hook(*unused):
            self._own_grad(i)
            if self._fired[i]:
                raise RuntimeError("sparsecoll DistributedOptimizer: a second gradient for parameter %d "
                                   "before step() (one backward per step)" % i)
            self._fired[i] = True
            if i in self._pending:  # used without its module's forward (shared weights)
                self._apply([i])
            if self.fusion is None:
                self._t_ready[i] = time.perf_counter()
                self._order_log.append(i)
            else:
                self.fusion.ready(self._ids[i])
        return hook

    def _make_pre_forward(self, own):
        def pre_forward(module, inputs):
            todo = [i for i in own if i in self._pending]
            if todo:
                self._apply(todo)
        return pre_forward

    # ---- plan ----

    def _plan(self):
        n = len(self.params)
        first = list(dict.fromkeys(self._order_log))
        order = first + [i for i in range(n) if i not in set(first)]
        t = [self._t_ready[i] for i in first]
        bw = [0.0] * n
        for j in range(1, len(first)):
            bw[first[j]] = max(0.0, (t[j] - t[j - 1]) * 1e6)
        plan = torch.tensor(order + bw, dtype=torch.float64)
        self.comm.broadcast(plan, root=0)  # every rank plans what rank 0 saw
        order = [int(v) for v in plan[:n].tolist()]
        bw = plan[n:].tolist()
        self.fusion = self._new_fusion()
        self._ids = [None] * n
        for i in order:
            p = self.params[i]
            shape = (p.shape[0], p.numel() // p.shape[0]) if p.dim() >= 2 and p.shape[0] > 0 else None
            if self.compression not in ("powersgd", "acpsgd"):
                shape = None
            self._ids[i] = self.fusion.add(self.views[i], bw[i], shape=shape)
        self.fusion.plan()

    def _new_fusion(self):
        return Fusion(self.comm, self.policy, bucket_bytes=self.bucket_bytes, density=self.density,
                      select=self.select if self.density > 0 else None, slice_bytes=self.slice_bytes,
                      compress=self.compression, lowrank=self.lowrank, seed=self.seed)

    # ---- the optimizer's interface ----

    def _apply(self, idx):
        """Wait for these parameters' results and step the optimizer on them only."""
        for i in idx:
            self.fusion.wait(self._ids[i])
        subset = {id(self.params[i]) for i in idx}
        saved = [g["params"] for g in self.optimizer.param_groups]
        try:
            for g in self.optimizer.param_groups:
                g["params"] = [p for p in g["params"] if id(p) in subset]
            self.optimizer.step()
        finally:
            for g, ps in zip(self.optimizer.param_groups, saved):
                g["params"] = ps
        for i in idx:
            self._pending.discard(i)
            if i in self._zero_after:
                self._zero_after.discard(i)
                self.views[i].zero_()

    def step(self, closure=None):
        if closure is not None:
            raise ArgumentError("DistributedOptimizer.step: closures are not supported")
        if self.fusion is None:
            # Warm-up: plain averaged all-reduces while the order is recorded.
            for i in range(len(self.params)):
                self._own_grad(i)
            for flat in self.flat:
                self.comm.allreduce(flat, op="avg")
            self.optimizer.step()
            self._steps += 1
            if self._steps >= self.warmup:
                self._plan()
            else:
                self._order_log = []
        else:
            # "dear": a parameter whose forward did not run this step (an
            # unused layer) still has last step's update pending: apply it
            # before its next round starts.
            late = sorted(i for i in self._pending if not self._fired[i])
            if late:
                self._apply(late)
            for i, fired in enumerate(self._fired):
                if not fired:
                    self.fusion.skip(self._ids[i])
            if self.policy == "dear":
                self._pending = set(range(len(self.params)))
            else:
                self.fusion.wait_all()
                self.optimizer.step()
            self._steps += 1
        self._fired = [False] * len(self.params)

    def synchronize(self):
        """Apply every deferred update now ("dear"; a no-op otherwise)."""
        if self._pending:
            self._apply(sorted(self._pending))

    def zero_grad(self, set_to_none=False):
        """Zeroes the gradients in place (they must stay in the registered
        buffers); under "dear" a gradient whose update is still deferred is
        zeroed right after that update."""
        for i, v in enumerate(self.views):
            if i in self._pending:
                self._zero_after.add(i)
            else:
                v.zero_()
            if self.params[i].grad is None or self.params[i].grad.data_ptr() != v.data_ptr():
                self.params[i].grad = v

    def close(self):
        self.synchronize()
        if self.fusion is not None:
            self.fusion.wait_all()
            self.fusion.close()
            self.fusion = None
        for _, h in self._hooks:
            h.remove()
        self._hooks = []
        self.comm.close()

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def state_dict(self):
        self.synchronize()
        return self.optimizer.state_dict()

    def load_state_dict(self, sd):
        self.optimizer.load_state_dict(sd)
