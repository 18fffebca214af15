# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.torch.OneBitAdam: 1-bit Adam (Tang et al., DeepSpeed's
OnebitAdam) for data parallelism without DDP, on the library's dense
all-reduce and its 1-bit compressed all-reduce (sc_onebit_*).

    opt = OneBitAdam(model.parameters(), lr=1e-3, freeze_step=100)
    for x, y in data:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()                       # averages across ranks itself

Two stages:
- Warm-up (the first freeze_step steps): Adam on gradients averaged by a
  dense all-reduce (op "avg") of one flat buffer per dtype.
- Compressed (from then on): the variance exp_avg_sq stays as it was at the
  freeze. Each rank folds its LOCAL gradient into the momentum
  (m = beta1 m + (1 - beta1) g), and the momenta are averaged by the 1-bit
  all-reduce ("scaled" mode: signs and one scale per chunk), one
  sparsecoll.OneBit state per flat buffer, made at the freeze; its worker and
  server residuals are the error feedback. The update uses the averaged
  momentum and the frozen variance.

The update is p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)
(weight decay added to the update, as DeepSpeed's OnebitAdam does, not to
the gradient). bias_correction=True (the default) divides m by
1 - beta1^t and v by 1 - beta2^t (t frozen with v), as torch.optim.Adam
does: with weight_decay 0 the warm-up is torch.optim.Adam on averaged
gradients. bias_correction=False is DeepSpeed's update (no correction).

exp_avg_mask: a param group may carry "exp_avg_mask", a tensor broadcastable
to each of the group's parameters; the averaged momentum is multiplied by it
after every compressed all-reduce, so entries whose gradient is always zero
(padding rows of an embedding) keep a zero momentum instead of the 1-bit
all-reduce's nonzero reconstruction.

Checkpoints: state_dict() holds step, exp_avg and exp_avg_sq of each
parameter; load_state_dict() restores them and RESETS the 1-bit states (the
residuals are not saved; new zero residuals are made at the next compressed
step), which DeepSpeed also does and warns can hurt convergence when done
often.

Every rank must call step() the same number of times with the same
parameters (the all-reduces are collective); a parameter without a gradient
counts as a zero gradient. The initial weights of rank 0 are broadcast in the
constructor. Parameters on the CPU (the 1-bit all-reduce takes host memory),
fixed at construction (add_param_group afterwards raises).
"""
import math

import torch
import torch.distributed as dist

from .._comm import Comm
from .._lib import ArgumentError
from .._onebit import OneBit

_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
           torch.bfloat16: "bfloat16"}


def _comm_of(process_group):
    """(comm, owned): a sparsecoll Comm given as is, a "sparsecoll" process
    group's communicator split (own issue order), or one from the
    environment."""
    if isinstance(process_group, Comm):
        return process_group, False
    pg = process_group
    if pg is None and dist.is_available() and dist.is_initialized():
        pg = dist.distributed_c10d._get_default_group()
    comm = getattr(pg, "comm", None)
    if comm is not None:
        return comm.split(0, comm.rank), True
    if pg is None:
        return Comm.from_env(), True
    raise ArgumentError("OneBitAdam: process_group must be a sparsecoll Comm or a 'sparsecoll' process group "
                        "(or none initialized: then the communicator comes from the environment)")


class OneBitAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, freeze_step=100,
                 process_group=None, bias_correction=True):
        if not lr >= 0.0:
            raise ArgumentError("OneBitAdam: lr %r must be >= 0" % (lr,))
        if not eps >= 0.0:
            raise ArgumentError("OneBitAdam: eps %r must be >= 0" % (eps,))
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ArgumentError("OneBitAdam: betas %r must be in [0, 1)" % (betas,))
        if not weight_decay >= 0.0:
            raise ArgumentError("OneBitAdam: weight_decay %r must be >= 0" % (weight_decay,))
        if int(freeze_step) < 1:
            raise ArgumentError("OneBitAdam: freeze_step %r must be >= 1 (Adam's variance needs a warm-up)"
                                % (freeze_step,))
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        bias_correction=bool(bias_correction))
        super().__init__(params, defaults)
        self.freeze_step = int(freeze_step)
        self._params = [p for g in self.param_groups for p in g["params"]]
        for p in self._params:
            if p.dtype not in _DTYPES:
                raise ArgumentError("OneBitAdam: parameter dtype %s (float32, float64, float16, bfloat16)" % p.dtype)
            if p.device.type != "cpu":
                raise ArgumentError("OneBitAdam: parameters on the CPU only, not %s" % p.device)
        for g in self.param_groups:
            mask = g.get("exp_avg_mask")
            for p in g["params"]:
                try:
                    ok = mask is None or torch.broadcast_shapes(mask.shape, p.shape) == p.shape
                except RuntimeError:
                    ok = False
                if not ok:
                    raise ArgumentError("OneBitAdam: exp_avg_mask of shape %s does not broadcast to a parameter "
                                        "of shape %s" % (tuple(mask.shape), tuple(p.shape)))
        self.comm, self._own_comm = _comm_of(process_group)
        with torch.no_grad():
            for p in self._params:
                self.comm.broadcast(p.data, root=0)
        self._step = 0
        self._make_buffers()

    def add_param_group(self, param_group):
        if hasattr(self, "_groups"):
            raise ArgumentError("OneBitAdam.add_param_group: the parameters are fixed at construction "
                                "(the flat buffers and the 1-bit states are made for them)")
        super().add_param_group(param_group)

    # ---- flat buffers: one per dtype, the moments' state tensors are views ----

    def _make_buffers(self):
        """(Re)builds the flat gradient and moment buffers, copying whatever
        state the parameters have into them, and drops the 1-bit states."""
        by_dtype = {}
        for p in self._params:
            by_dtype.setdefault(p.dtype, []).append(p)
        self._groups = []  # (dtype, params, flat grad, flat exp_avg, flat exp_avg_sq)
        for dtype, ps in by_dtype.items():
            n = sum(p.numel() for p in ps)
            g, m, v = (torch.zeros(n, dtype=dtype) for _ in range(3))
            off = 0
            for p in ps:
                k = p.numel()
                st = self.state[p]
                for name, flat in (("exp_avg", m), ("exp_avg_sq", v)):
                    view = flat[off:off + k].view_as(p)
                    if name in st:
                        view.copy_(st[name])
                    st[name] = view
                st.setdefault("step", self._step)
                off += k
            self._groups.append((dtype, ps, g, m, v))
        self._onebit = [None] * len(self._groups)

    def _close_onebit(self):
        for ob in getattr(self, "_onebit", []):
            if ob is not None:
                ob.close()
        self._onebit = [None] * len(getattr(self, "_groups", []))

    def _gather_grads(self, ps, flat):
        off = 0
        for p in ps:
            k = p.numel()
            if p.grad is None:
                flat[off:off + k].zero_()
            else:
                flat[off:off + k].copy_(p.grad.reshape(-1))
            off += k

    # ---- the step ----

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        frozen = self._step >= self.freeze_step
        self._step += 1
        # Looked up every step: load_state_dict replaces the group dicts.
        self._pgroup = {id(q): g for g in self.param_groups for q in g["params"]}
        for j, (dtype, ps, g, m, v) in enumerate(self._groups):
            self._gather_grads(ps, g)
            if not frozen:
                self.comm.allreduce(g, op="avg")
                self._moments(ps, g, update_v=True)
            else:
                self._moments(ps, g, update_v=False)
                if self._onebit[j] is None:
                    self._onebit[j] = OneBit(self.comm, m.numel(), "scaled", _DTYPES[dtype])
                self._onebit[j].allreduce(m)
        for group in self.param_groups:
            mask = group.get("exp_avg_mask")
            for p in group["params"]:
                st = self.state[p]
                if frozen and mask is not None:
                    st["exp_avg"].mul_(mask.to(dtype=p.dtype))
                self._update(p, st, group, frozen)
        return loss

    def _moments(self, ps, flat_g, update_v):
        """m = beta1 m + (1 - beta1) g (and v likewise, in warm-up), per
        parameter with its own group's betas."""
        off = 0
        for p in ps:
            k = p.numel()
            grad = flat_g[off:off + k].view_as(p)
            off += k
            b1, b2 = self._pgroup[id(p)]["betas"]
            st = self.state[p]
            st["exp_avg"].mul_(b1).add_(grad, alpha=1 - b1)
            if update_v:
                st["exp_avg_sq"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
            st["step"] = self._step

    def _update(self, p, st, group, frozen):
        b1, b2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        m, v = st["exp_avg"], st["exp_avg_sq"]
        if group["bias_correction"]:
            # The variance's correction is frozen with the variance.
            tv = min(self._step, self.freeze_step)
            denom = (v.sqrt() / math.sqrt(1 - b2 ** tv)).add_(eps)
            step_size = lr / (1 - b1 ** self._step)
        else:
            denom = v.sqrt().add_(eps)
            step_size = lr
        if wd != 0:
            p.add_(p, alpha=-lr * wd)
        p.addcdiv_(m, denom, value=-step_size)

    # ---- checkpoints ----

    def state_dict(self):
        sd = super().state_dict()
        sd["onebit_step"] = self._step
        return sd

    def load_state_dict(self, state_dict):
        """Restores step and moments; the 1-bit residuals are not part of the
        checkpoint and are reset (new zero residuals at the next compressed
        step)."""
        sd = dict(state_dict)
        step = sd.pop("onebit_step", None)
        super().load_state_dict(sd)
        if step is None:
            step = max((int(self.state[p].get("step", 0)) for p in self._params), default=0)
        self._step = int(step)
        self._close_onebit()
        self._make_buffers()

    def close(self):
        self._close_onebit()
        if self._own_comm and self.comm is not None:
            self.comm.close()
        self.comm = None
