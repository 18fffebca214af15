# SPDX-License-Identifier: BSD-3-Clause
"""Comm's all-to-all, gather, scatter and uneven all-gather (mixed into Comm:
uses its handle, size, rank, _run and _out; see docs/PYTHON.md). stream=:
the stream form, as for Comm's dense calls."""
import ctypes

from ._buf import buf, empty_like, same_kind
from ._calls import aborting as _aborting
from ._calls import count as _count
from ._calls import stage_in_out as _stage_in_out
from ._calls import stage_pair as _stage_pair
from ._lib import ArgumentError, lib


class RootedAndUneven:
    # Counts and displacements are in elements of the flattened arrays.

    def _counts(self, values, what):
        """A size_t[size] array from a sequence of non-negative integers (a
        list, a numpy array, a tensor), and the values as a list."""
        try:
            vals = [int(v) for v in values]
        except (TypeError, ValueError):
            raise ArgumentError("%s: expected %d integers, got %r" % (what, self.size, values)) from None
        if len(vals) != self.size:
            raise ArgumentError("%s: %d entries for %d ranks" % (what, len(vals), self.size))
        for i, v in enumerate(vals):
            if v < 0:
                raise ArgumentError("%s[%d] = %d is negative" % (what, i, v))
        return (ctypes.c_size_t * self.size)(*vals), vals

    def _displs(self, displs, counts, what):
        """displs as _counts does, or the prefix sums of counts when None."""
        if displs is not None:
            return self._counts(displs, what)
        vals, at = [], 0
        for c in counts:
            vals.append(at)
            at += c
        return (ctypes.c_size_t * self.size)(*vals), vals

    @staticmethod
    def _fits(counts, displs, n, what, disjoint=False):
        """Every non-empty block inside the n elements of its array (the
        library does not know the arrays' lengths); with disjoint, no two
        overlapping (receive blocks: the library's rule)."""
        for i, (c, d) in enumerate(zip(counts, displs)):
            if c and d + c > n:
                raise ArgumentError("%s: block %d (%d elements at %d) ends past the array's %d elements"
                                    % (what, i, c, d, n))
        if disjoint:
            blocks = sorted((d, c, i) for i, (c, d) in enumerate(zip(counts, displs)) if c)
            for (d0, c0, i0), (d1, _, i1) in zip(blocks, blocks[1:]):
                if d0 + c0 > d1:
                    raise ArgumentError("%s: blocks %d (at %d) and %d (at %d) overlap" % (what, i0, d0, i1, d1))

    def alltoall(self, send, recv=None, async_op=False, stream=None):
        """send holds size blocks of m elements (flattened), block j for rank
        j; recv receives size blocks, block i from rank i: a new array of
        send's shape unless recv is given. recv may be send itself (in place).
        Returns recv."""
        n = _count(send, "alltoall input")
        if n % self.size:
            raise ArgumentError("alltoall: %d elements do not split over %d ranks" % (n, self.size))
        if recv is None:
            recv = empty_like(send, n)
            if len(tuple(send.shape)) > 0:
                recv = recv.reshape(tuple(send.shape))
        in_place = recv is send
        st, hs, hr = _stage_pair(send, None) if in_place else _stage_in_out(send, recv)
        with _aborting(st):
            sp, n, dt = buf(hs, "alltoall input", writable=in_place)
            rp = sp if in_place else self._out(hs, hr, n, "alltoall")
        return self._run(lib.sc_alltoall, lib.sc_ialltoall,
                         (sp, rp, n // self.size, dt, self.handle), recv, (hs, hr), async_op, st,
                         stream)

    def alltoallv(self, send, sendcounts, recv, recvcounts, sdispls=None, rdispls=None, async_op=False,
                  stream=None):
        """All-to-all with a count per pair: sendcounts[j] elements at
        send[sdispls[j]:] go to rank j, recvcounts[i] elements from rank i
        land at recv[rdispls[i]:]. Displacements default to the prefix sums
        of the counts (blocks back to back in rank order). sendcounts[j] here
        must equal recvcounts[rank] on rank j (the library fails with
        SC_ERR_MISMATCH otherwise); send and recv must not overlap. Returns
        recv."""
        sc, scl = self._counts(sendcounts, "alltoallv sendcounts")
        rc, rcl = self._counts(recvcounts, "alltoallv recvcounts")
        sd, sdl = self._displs(sdispls, scl, "alltoallv sdispls")
        rd, rdl = self._displs(rdispls, rcl, "alltoallv rdispls")
        st, hs, hr = _stage_in_out(send, recv)
        with _aborting(st):
            same_kind(hs, hr, "alltoallv recv")
            sp, ns, dt = buf(hs, "alltoallv input")
            rp, nr, _ = buf(hr, "alltoallv output", writable=True)
            self._fits(scl, sdl, ns, "alltoallv send")
            self._fits(rcl, rdl, nr, "alltoallv recv", disjoint=True)
            es = lib.sc_dtype_size(dt)
            if sp and rp and ns and nr and sp < rp + nr * es and rp < sp + ns * es:
                raise ArgumentError("alltoallv: send and recv overlap (the uneven all-to-all has no in-place form)")
        return self._run(lib.sc_alltoallv, lib.sc_ialltoallv, (sp, sc, sd, rp, rc, rd, dt, self.handle),
                         recv, (hs, hr, sc, sd, rc, rd), async_op, st, stream)

    def gather(self, send, recv=None, root=0, async_op=False, stream=None):
        """Every rank's send (m elements each) lands on root in rank order:
        root's recv (size*m elements; a new array of shape
        (size*send.shape[0], ...) unless given) is returned there. The other
        ranks return None: recv is not used off the root."""
        root = int(root)
        n = _count(send, "gather input")
        on_root = self.rank == root
        if on_root and recv is None:
            recv = empty_like(send, n * self.size)
            shape = tuple(send.shape)
            if len(shape) > 0:
                recv = recv.reshape((shape[0] * self.size,) + shape[1:])
        out = recv if on_root else None
        st, hs, hr = _stage_in_out(send, out)
        with _aborting(st):
            sp, n, dt = buf(hs, "gather input")
            rp = self._out(hs, hr, n * self.size, "gather")
        return self._run(lib.sc_gather, lib.sc_igather, (sp, rp, n, dt, root, self.handle),
                         out, (hs, hr), async_op, st, stream)

    def scatter(self, send, recv, root=0, async_op=False, stream=None):
        """root's send holds size blocks of m elements (flattened), block i
        for rank i; every rank's recv (m elements) receives its block. Off
        the root send is not used (None is fine). Returns recv."""
        root = int(root)
        m = _count(recv, "scatter output")
        on_root = self.rank == root
        if on_root and send is None:
            raise ArgumentError("scatter: the root (rank %d) must pass send" % root)
        src = send if on_root else None
        st, hs, hr = _stage_in_out(src, recv)
        with _aborting(st):
            rp, m, dt = buf(hr, "scatter output", writable=True)
            sp = None
            if hs is not None:
                same_kind(hr, hs, "scatter send")
                sp, ns, _ = buf(hs, "scatter input")
                if ns != m * self.size:
                    raise ArgumentError("scatter: send has %d elements, needs %d (%d ranks x %d)"
                                        % (ns, m * self.size, self.size, m))
        return self._run(lib.sc_scatter, lib.sc_iscatter, (sp, rp, m, dt, root, self.handle),
                         recv, (hs, hr), async_op, st, stream)

    def allgatherv(self, send, recv, recvcounts, displs=None, async_op=False, stream=None):
        """All-gather with a count per rank: rank i's send (recvcounts[i]
        elements) lands at recv[displs[i]:] on every rank; displs default to
        the prefix sums of recvcounts. recvcounts and displs must be the same
        on every rank (SC_ERR_MISMATCH otherwise). In place: send is the view
        of recv at displs[rank]. Returns recv."""
        rc, rcl = self._counts(recvcounts, "allgatherv recvcounts")
        rd, rdl = self._displs(displs, rcl, "allgatherv displs")
        st, hs, hr = _stage_in_out(send, recv)
        with _aborting(st):
            same_kind(hs, hr, "allgatherv recv")
            sp, ns, dt = buf(hs, "allgatherv input")
            rp, nr, _ = buf(hr, "allgatherv output", writable=True)
            self._fits(rcl, rdl, nr, "allgatherv recv", disjoint=True)
        return self._run(lib.sc_allgatherv, lib.sc_iallgatherv, (sp, ns, rp, rc, rd, dt, self.handle),
                         recv, (hs, hr, rc, rd), async_op, st, stream)

    def ialltoall(self, send, recv=None):
        return self.alltoall(send, recv, async_op=True)

    def ialltoallv(self, send, sendcounts, recv, recvcounts, sdispls=None, rdispls=None):
        return self.alltoallv(send, sendcounts, recv, recvcounts, sdispls, rdispls, async_op=True)

    def igather(self, send, recv=None, root=0):
        return self.gather(send, recv, root, async_op=True)

    def iscatter(self, send, recv, root=0):
        return self.scatter(send, recv, root, async_op=True)

    def iallgatherv(self, send, recv, recvcounts, displs=None):
        return self.allgatherv(send, recv, recvcounts, displs, async_op=True)
