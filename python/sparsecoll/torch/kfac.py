# SPDX-License-Identifier: BSD-3-Clause
"""Distributed K-FAC's communication on a sparsecoll.Comm (SPD-KFAC, DP-KFAC).

Every step K-FAC reduces each layer's two symmetric Kronecker factors and,
after the owners invert them, sends the inverses (or, DP-KFAC, the
preconditioned gradients) back. KFACCommunicator does both with half the
bytes of a full-matrix exchange and one collective per owner:

    kc = KFACCommunicator(comm)
    owners = sparsecoll.place_factors([f.shape[0] for f in factors], comm.size)
    kc.reduce_factors_async(factors, owners).wait()      # averaged, on the owners
    ...                                                  # owners invert theirs
    kc.broadcast_inverses_async(inverses, owners).wait() # every rank has them all

Only the upper triangle of a factor travels (d(d+1)/2 of d^2 elements), the
triangles of all factors with one owner fused into one buffer and one
reduce (or broadcast) rooted at that owner. A factor owned by -1 (see
sparsecoll.place_factors' local_below) is all-reduced instead, fused with
the others owned by -1, so every rank has it. The shape is that of a KAISA
(kfac-pytorch) communicator: calls that return a handle whose wait() finishes
the work in place, so that a preconditioner can overlap them with compute.
Tensors are float CPU tensors or tensors the Comm takes (docs/PYTHON.md).
"""
import torch

__all__ = ["KFACCommunicator", "prefer_preconditioned"]


_TRIU = {}


def _triu(d, device):
    """The upper triangle's (rows, cols) of a d x d matrix, made once per size
    and device: every step packs and unpacks the same shapes."""
    key = (d, str(device))
    if key not in _TRIU:
        _TRIU[key] = torch.triu_indices(d, d, device=device)
    return _TRIU[key]


def prefer_preconditioned(d_in, d_out):
    """DP-KFAC's choice for a layer of d_out x d_in weights: broadcasting its
    preconditioned gradient (d_in * d_out elements) moves fewer bytes than its
    two packed inverses (d(d+1)/2 each) when this is True."""
    return d_in * d_out < (d_in * (d_in + 1) + d_out * (d_out + 1)) // 2


class _Handle:
    """wait() completes the calls and writes the results in place."""

    def __init__(self, parts):
        self._parts = parts  # (request or None, finish callable)

    def wait(self):
        parts, self._parts = self._parts, []
        for req, finish in parts:
            if req is not None:
                req.wait()
            finish()


class KFACCommunicator:
    """K-FAC's collectives on comm (a sparsecoll.Comm, or anything with its
    reduce/broadcast/allreduce signatures)."""

    def __init__(self, comm):
        self.comm = comm

    def _groups(self, tensors, owners):
        if len(tensors) != len(owners):
            raise ValueError("%d tensors but %d owners" % (len(tensors), len(owners)))
        groups = {}
        for i, o in enumerate(owners):
            o = int(o)
            if o < -1 or o >= self.comm.size:
                raise ValueError("owner %d of tensor %d is not a rank of %d (or -1)" % (o, i, self.comm.size))
            groups.setdefault(o, []).append(i)
        return groups

    @staticmethod
    def _pack(mats):
        parts = []
        for m in mats:
            if m.dim() != 2 or m.shape[0] != m.shape[1]:
                raise ValueError("a factor must be square, not of shape %s" % (tuple(m.shape),))
            i, j = _triu(m.shape[0], m.device)
            parts.append(m[i, j])
        return torch.cat(parts) if parts else torch.empty(0)

    @staticmethod
    def _unpack(buf, mats):
        off = 0
        for m in mats:
            d = m.shape[0]
            i, j = _triu(d, m.device)
            n = i.numel()
            vals = buf[off:off + n].to(m.dtype)
            m[i, j] = vals
            m[j, i] = vals
            off += n

    def reduce_factors_async(self, factors, owners, op="avg"):
        """Factors (symmetric d x d tensors, the same list on every rank) reduced
        by op: factor i lands on rank owners[i] (in place there; elsewhere left
        as it was), or on every rank where owners[i] is -1. One reduce per
        owner, of the packed triangles of its factors."""
        parts = []
        for o, idx in sorted(self._groups(factors, owners).items()):
            mats = [factors[i] for i in idx]
            buf = self._pack(mats).contiguous()
            if o < 0:
                req = self.comm.allreduce(buf, op=op, async_op=True)
                mine = True
            else:
                req = self.comm.reduce(buf, op=op, root=o, async_op=True)
                mine = self.comm.rank == o
            parts.append((req, (lambda b=buf, m=mats, k=mine: self._unpack(b, m) if k else None)))
        return _Handle(parts)

    def broadcast_inverses_async(self, inverses, owners):
        """inverses[i] (symmetric) from rank owners[i] to every rank, in place;
        the ones owned by -1 are left alone (every rank computed them). One
        broadcast per owner, of the packed triangles of its inverses."""
        parts = []
        for o, idx in sorted(self._groups(inverses, owners).items()):
            if o < 0:
                continue
            mats = [inverses[i] for i in idx]
            buf = self._pack(mats).contiguous()
            req = self.comm.broadcast(buf, root=o, async_op=True)
            parts.append((req, (lambda b=buf, m=mats: self._unpack(b, m))))
        return _Handle(parts)

    def broadcast_preconditioned(self, grads, owners):
        """DP-KFAC: grads[i] (any shape), preconditioned on rank owners[i], to
        every rank, in place; one broadcast per owner of its gradients
        flattened together. Returns a handle."""
        parts = []
        for o, idx in sorted(self._groups(grads, owners).items()):
            if o < 0:
                continue
            ts = [grads[i] for i in idx]
            buf = torch.cat([t.reshape(-1) for t in ts]).contiguous()
            req = self.comm.broadcast(buf, root=o, async_op=True)

            def finish(b=buf, ts=ts):
                off = 0
                for t in ts:
                    t.copy_(b[off:off + t.numel()].view_as(t))
                    off += t.numel()

            parts.append((req, finish))
        return _Handle(parts)
