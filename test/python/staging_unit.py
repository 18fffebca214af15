# SPDX-License-Identifier: BSD-3-Clause
"""The decisions of the CUDA staging path (sparsecoll._staging) on CPU
tensors, one process: which path an operation takes, the pool's size
classes, reuse and trimming, and a Staging round trip with a fake stream
synchronizer that records when it is called; then the torch backend's choice
of its stream-ordered path (sparsecoll.torch._ordered.wanted) and the stream
handles Comm's stream= takes. The references are computed here from the
rules in the modules' docstrings, not taken from them."""
import sys

import torch

from sparsecoll import UnsupportedError, _staging
from sparsecoll._staging import PinnedPool, Staging, plan, size_class

checks = 0


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("FAIL %s" % what, file=sys.stderr)
        sys.exit(1)


def raises(exc, fn, what):
    try:
        fn()
    except exc:
        ok(True, what)
        return
    ok(False, what + ": no %s" % exc.__name__)


# ---- plan: the path for a set of device types and the library's CUDA ----
ok(plan(["cpu"], False) == "direct", "cpu, no lib CUDA: direct")
ok(plan(["cpu", "cpu"], True) == "direct", "cpu, lib CUDA: direct")
ok(plan(["cuda"], False) == "stage", "cuda, no lib CUDA: stage")
ok(plan(["cuda", "cpu"], False) == "stage", "cuda + cpu out, no lib CUDA: stage")
ok(plan(["cuda"], True) == "direct", "cuda, lib CUDA: direct")
ok(plan(["cpu"], False, stage_cpu=True) == "stage", "forced: stage")
ok(plan([], False, stage_cpu=True) == "direct", "no tensors: direct")
raises(UnsupportedError, lambda: plan(["mps"], False), "mps refused")
raises(UnsupportedError, lambda: plan(["cuda", "xla"], True), "xla refused")

# ---- device_path: whenever the library has a device runtime, unless turned off ----
ok(_staging.device_path({}, True), "CUDA library, no setting: direct")
ok(not _staging.device_path({}, False), "no CUDA library: staged")
ok(not _staging.device_path({"SPARSECOLL_CUDA_DIRECT": "1"}, False), "request, no CUDA library: staged")
ok(_staging.device_path({"SPARSECOLL_CUDA_DIRECT": "1"}, True), "request and CUDA library: direct")
ok(not _staging.device_path({"SPARSECOLL_CUDA_DIRECT": "0"}, True), "SPARSECOLL_CUDA_DIRECT=0: staged")

# ---- size classes, against a brute-force search of the documented set ----


def classes_up_to(limit):
    out = set()
    p = 4096
    while p <= (1 << 20):
        out.add(p)
        p *= 2
    q = 1 << 20
    while q <= limit:
        for num in (4, 5, 6, 7):
            out.add(q * num // 4)
        q *= 2
    return sorted(out)


allowed = classes_up_to(1 << 32)
for n in [0, 1, 4095, 4096, 4097, 65536, 100000, (1 << 20) - 1, 1 << 20, (1 << 20) + 1,
          1310720, 1310721, 3 << 20, (7 << 20) + 5, 123456789, (1 << 31) + 1]:
    want = next(c for c in allowed if c >= n)
    got = size_class(n)
    ok(got == want, "size_class(%d) = %d, want %d" % (n, got, want))
    ok(got < 4096 or got <= max(2 * n, 4096), "size_class(%d) at most doubles" % n)
    if n > (1 << 20):
        ok(got <= n * 1.25 + 1, "size_class(%d) wastes at most a quarter" % n)

# ---- the pool: reuse per class, distinct blocks in use, trimming ----
allocs = []


def alloc(nbytes):
    b = torch.empty(nbytes, dtype=torch.uint8)
    allocs.append(nbytes)
    return b


pool = PinnedPool(alloc=alloc, keep_bytes=3 * 8192)
a = pool.acquire(5000)
b = pool.acquire(6000)  # same class, a still in use: a second block
ok(a.numel() == 8192 and b.numel() == 8192, "5000 and 6000 B: 8 KiB blocks")
ok(a.data_ptr() != b.data_ptr(), "blocks in use are distinct")
pool.release(a)
c = pool.acquire(8000)
ok(c.data_ptr() == a.data_ptr(), "a released block of the class is reused")
ok(pool.allocations == 2 and pool.reuses == 1, "2 allocations, 1 reuse")
d = pool.acquire(100)  # 4 KiB class: not served by an 8 KiB block
ok(d.numel() == 4096 and pool.allocations == 3, "a smaller class allocates its own")
for blk in (b, c, d):
    pool.release(blk)
ok(pool.cached_bytes() == 8192 + 8192 + 4096, "all three cached (20 KiB <= 24 KiB)")
e = pool.acquire(40000)  # 64 KiB: over the cap once released
pool.release(e)
ok(pool.cached_bytes() <= 3 * 8192, "cache trimmed to keep_bytes")
ok(pool.acquire(40000).data_ptr() != e.data_ptr(), "the largest block was dropped first")
n_before = pool.allocations
for _ in range(10):  # a training loop: same sizes every step
    blks = [pool.acquire(s) for s in (5000, 6000, 100)]
    for blk in blks:
        pool.release(blk)
ok(pool.allocations == n_before, "steady state: no new allocations")

# ---- a Staging round trip (CPU tensors stand in for device ones) ----
syncs = []
pool = PinnedPool(alloc=alloc, keep_bytes=1 << 20)
st = Staging(pool, sync=lambda devs: syncs.append(list(devs)))
x = torch.arange(10, dtype=torch.float32).reshape(2, 5)
y = torch.zeros(3, dtype=torch.float64)
z = torch.full((4,), 7, dtype=torch.int32)
hx = st.inout(x)
hy = st.output(y)
hz = st.input(z)
ok(hx.shape == x.shape and hx.dtype == x.dtype and torch.equal(hx, x), "inout: a copy of x")
ok(hz.dtype == torch.int32 and torch.equal(hz, z), "input: a copy of z")
ok(hx.data_ptr() != x.data_ptr(), "inout: not x's own memory")
ok(hy.shape == y.shape and hy.dtype == y.dtype, "output: y's shape and dtype")
st.ready()
ok(len(syncs) == 1 and syncs[0] == [torch.device("cpu")], "ready: one sync of the device")
hx.mul_(-1)
hy.fill_(2.5)
hz.fill_(0)  # an input: must not be copied back
st.finish()
ok(torch.equal(x, -torch.arange(10, dtype=torch.float32).reshape(2, 5)), "finish: x has the result")
ok(torch.equal(y, torch.full((3,), 2.5, dtype=torch.float64)), "finish: y has the result")
ok(torch.equal(z, torch.full((4,), 7, dtype=torch.int32)), "finish: the input is left alone")
ok(len(syncs) == 2, "finish: synced after the copies back")
ok(pool.cached_bytes() == 3 * 4096, "finish: the 3 blocks are back in the pool")

st = Staging(pool, sync=lambda devs: None)
h = st.inout(x)
h.zero_()
st.abort()
ok(not torch.equal(x, torch.zeros_like(x)), "abort: nothing copied back")
ok(pool.cached_bytes() == 3 * 4096, "abort: the block is back in the pool")
raises(Exception, lambda: Staging(pool).inout(x.t()), "a non-contiguous tensor is refused")
ok(pool.cached_bytes() == 3 * 4096, "the refused tensor took no block")

# ---- for_tensors: numpy and CPU tensors go direct unless forced ----
ok(_staging.for_tensors(torch.zeros(3)) is None, "CPU tensor: direct")
ok(_staging.for_tensors(torch.zeros(3), None) is None, "CPU tensor, no out: direct")
_staging.STAGE_CPU = True
ok(isinstance(_staging.for_tensors(torch.zeros(3)), Staging), "forced: staged")
try:
    import numpy as np

    ok(_staging.for_tensors(np.zeros(3)) is None, "numpy is never staged")
except ImportError:
    pass
_staging.STAGE_CPU = False


# ---- Direct: device memory the library takes as it is ----
class FakeCAI:
    """A device buffer as CuPy/Numba describe one (never dereferenced here)."""

    def __init__(self, n, typestr="<f4", stream=None, strides=None, readonly=False):
        self.d = {"shape": (n,), "typestr": typestr, "data": (0x1000, readonly), "version": 3,
                  "stream": stream, "strides": strides}

    @property
    def __cuda_array_interface__(self):
        return self.d


from sparsecoll import ArgumentError, _buf, _consts  # noqa: E402

a, b = FakeCAI(6, stream=7), FakeCAI(6, stream=9)
st = _staging.for_tensors(a, None, b)
ok(isinstance(st, _staging.Direct) and not st.staged, "__cuda_array_interface__: Direct")
_staging.STAGE_CPU = True
ok(isinstance(_staging.for_tensors(a), _staging.Direct), "__cuda_array_interface__: Direct even when staging is forced")
_staging.STAGE_CPU = False
ok(st.input(a) is a and st.output(b, "out") is b and st.inout(a) is a, "Direct hands the objects themselves")
seen_devs, seen_handles = [], []
st = _staging.Direct([a, b, FakeCAI(2, stream=7), FakeCAI(2)], sync=seen_devs.append,
                     sync_handle=seen_handles.append)
st.ready()
ok(seen_devs == [] and seen_handles == [7, 9], "ready: each named stream waited for once, None skipped")
ok(_buf.buf(FakeCAI(6), "x") == (0x1000, 6, _consts.SC_FLOAT32), "pointer, count, dtype from the interface")
ok(_buf.buf(FakeCAI(3, "<f8"), "x")[2] == _consts.SC_FLOAT64, "float64 typestr")
ok(_buf.index_buf(FakeCAI(3, "<u4"), "ix") == (0x1000, 3), "uint32 indices from the interface")
raises(ArgumentError, lambda: _buf.buf(FakeCAI(6, strides=(8,)), "x"), "strided: refused")
ok(_buf.buf(FakeCAI(6, strides=(4,)), "x")[1] == 6, "contiguous strides: taken")
raises(ArgumentError, lambda: _buf.buf(FakeCAI(6, readonly=True), "x", writable=True), "read-only output: refused")
raises(ArgumentError, lambda: _buf.buf(FakeCAI(6, "<c8"), "x"), "complex typestr: refused")
raises(ArgumentError, lambda: _buf.empty_like(FakeCAI(6), 6), "no allocation like an interface object")
raises(ArgumentError, lambda: _buf.same_kind(FakeCAI(6), torch.zeros(6), "out"), "mixing with a tensor: refused")

# ---- the torch backend's choice of the stream-ordered path (sparsecoll.torch._ordered) ----
from sparsecoll import _stream  # noqa: E402
from sparsecoll.torch import _ordered  # noqa: E402


class Dev:
    """A stand-in for a tensor: only its device is asked."""

    def __init__(self, kind, index=None):
        self.device = torch.device(kind, index) if index is not None else torch.device(kind)


cuda0, cuda1, cpu = Dev("cuda", 0), Dev("cuda", 1), Dev("cpu")
ok(_ordered.wanted([cuda0, cuda0], {}, lib_cuda=True, lib_streams=True), "CUDA tensors, device runtime: ordered")
ok(not _ordered.wanted([cuda0], {"SPARSECOLL_CUDA_SYNC": "1"}, lib_cuda=True, lib_streams=True),
   "SPARSECOLL_CUDA_SYNC=1: the synchronizing path")
ok(_ordered.wanted([cuda0], {"SPARSECOLL_CUDA_SYNC": "0"}, lib_cuda=True, lib_streams=True),
   "SPARSECOLL_CUDA_SYNC=0: ordered")
ok(not _ordered.wanted([cuda0], {}, lib_cuda=False, lib_streams=True), "no device runtime (staged): synchronizing")
ok(not _ordered.wanted([cuda0], {"SPARSECOLL_CUDA_DIRECT": "0"}, lib_cuda=True, lib_streams=True),
   "SPARSECOLL_CUDA_DIRECT=0 (staged): synchronizing")
ok(not _ordered.wanted([cuda0], {}, lib_cuda=True, lib_streams=False), "no stream forms: synchronizing")
ok(not _ordered.wanted([cpu], {}, lib_cuda=True, lib_streams=True), "CPU tensors: never ordered")
ok(not _ordered.wanted([cuda0, cpu], {}, lib_cuda=True, lib_streams=True), "CUDA and CPU mixed: synchronizing")
ok(not _ordered.wanted([cuda0, cuda1], {}, lib_cuda=True, lib_streams=True), "two devices: synchronizing")
ok(not _ordered.wanted([], {}, lib_cuda=True, lib_streams=True), "no tensors: synchronizing")
ok(_stream.handle(0).value is None and _stream.handle(1234).value == 1234, "stream handles: 0 is NULL")


class FakeStream:
    cuda_stream = 77


ok(_stream.handle(FakeStream()).value == 77, "stream handle from .cuda_stream")
raises(ArgumentError, lambda: _stream.handle("s"), "a string is no stream handle")
raises(ArgumentError, lambda: _stream.handle(-5), "a negative handle is refused")
print("staging unit: %d checks passed" % checks)
