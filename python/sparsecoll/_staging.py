# SPDX-License-Identifier: BSD-3-Clause
"""How CUDA tensors reach the library: directly, or through pinned host memory.

Direct (the default when the library reports a device runtime:
sc_cuda_available() is 1; SPARSECOLL_CUDA_DIRECT=0 turns it off): the
library gets the tensors' device pointers. The binding first synchronizes
torch's current stream of each tensor's device (the library reads the inputs
when called, on streams of its own, so the work that produced them must have
finished), and makes the tensor's device current for the call. A blocking
call returns once the result is in the tensor, so any later work on any
stream sees it; an async request's wait() likewise. Objects with a
__cuda_array_interface__ always go this way (the binding has no means to copy
them); their interface's stream, if any, is synchronized the same way. The
stream forms (stream=, sparsecoll._stream) take this path without the
synchronization: the stream orders the producers.

Staged (the fallback, for a library without a device runtime: built without
CUDA, or no device visible to it while torch sees one):
a collective on CUDA tensors runs on pinned host copies: the inputs
are copied device-to-host (non_blocking), the tensors' current streams are
synchronized once, the library runs on the host copies, and the outputs are
copied back host-to-device (non_blocking) and their streams synchronized
before the call (or Request.wait) returns, so the result is in place for any
stream that uses it next.

The host buffers come from a per-process pool of pinned blocks in size
classes, reused across calls: a training loop that reduces the same buckets
every step allocates pinned memory in its first step only. Blocks in use by an
operation in flight are not handed out again, so concurrent async operations
each get their own.

The decisions (which path, which size class, what the pool keeps) are plain
functions and classes that take their device facts as arguments, so they can
be tested on CPU tensors.
"""
import contextlib
import os
import threading

from . import _stream
from ._lib import ArgumentError, UnsupportedError

# Tests set this to route CPU tensors through the staging path as well (the
# copies are then plain CPU copies); users have no reason to.
STAGE_CPU = False

_MIN_CLASS = 4096


def plan(device_types, lib_takes_device, stage_cpu=False):
    """'direct' (the library gets the tensors' own memory) or 'stage' (pinned
    host copies) for an operation on tensors on these device types
    ('cpu', 'cuda', ...). Raises UnsupportedError for other devices."""
    types = set(device_types)
    other = types - {"cpu", "cuda"}
    if other:
        raise UnsupportedError("tensors on %s: libsparsecoll takes CPU tensors, and CUDA tensors through "
                               "pinned host copies" % ", ".join(sorted(other)))
    if "cuda" in types and not lib_takes_device:
        return "stage"
    if stage_cpu and types:
        return "stage"
    return "direct"


def size_class(nbytes):
    """Bytes of the pooled block that holds nbytes: at least 4 KiB; powers of
    two up to 1 MiB, above that the next of 2^k x (1, 1.25, 1.5, 1.75), so a
    block wastes at most a quarter of itself on large gradients."""
    n = max(int(nbytes), _MIN_CLASS)
    p = 1 << (n - 1).bit_length()  # smallest power of two >= n
    if p <= (1 << 20):
        return p
    q = p // 2  # n is in (q, p]
    step = q // 4
    return q + -(-(n - q) // step) * step


def _pinned_alloc(nbytes):
    import torch

    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=torch.cuda.is_available())


def _cache_bytes_from_env():
    v = os.environ.get("SPARSECOLL_STAGING_CACHE_BYTES", "")
    try:
        return int(v) if v else 256 << 20
    except ValueError:
        raise ArgumentError("SPARSECOLL_STAGING_CACHE_BYTES=%r is not a byte count" % v) from None


class PinnedPool:
    """Blocks of host memory by size class. acquire() hands out a free block
    of the class (allocating one only when none is free); release() returns
    it. Free blocks beyond keep_bytes in total are dropped (largest first),
    so a one-off huge tensor does not pin memory for the rest of the run.
    Thread-safe: the torch backend releases from its waiter thread."""

    def __init__(self, alloc=_pinned_alloc, keep_bytes=None):
        self._alloc = alloc
        self.keep_bytes = _cache_bytes_from_env() if keep_bytes is None else int(keep_bytes)
        self._free = {}  # size class -> [block]
        self._free_bytes = 0
        self._lock = threading.Lock()
        self.allocations = 0
        self.reuses = 0

    def acquire(self, nbytes):
        c = size_class(nbytes)
        with self._lock:
            blocks = self._free.get(c)
            if blocks:
                self._free_bytes -= c
                self.reuses += 1
                return blocks.pop()
            self.allocations += 1
        return self._alloc(c)

    def release(self, block):
        c = block.numel()
        with self._lock:
            self._free.setdefault(c, []).append(block)
            self._free_bytes += c
            while self._free_bytes > self.keep_bytes:
                big = max(k for k, v in self._free.items() if v)
                self._free[big].pop()
                self._free_bytes -= big

    def cached_bytes(self):
        with self._lock:
            return self._free_bytes


_pool = None
_pool_lock = threading.Lock()


def pool():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = PinnedPool()
        return _pool


def sync_current(device):
    """Waits from the host for torch's current stream of device, counted
    (sparsecoll.torch.stats()'s host_syncs)."""
    import torch

    _stream.count("host_syncs")
    torch.cuda.current_stream(device).synchronize()


def _sync_streams(devices):
    for d in devices:
        if d.type == "cuda":
            sync_current(d)


class Staging:
    """The host side of one operation. input(t), inout(t), output(t) give
    the host tensor to pass to the library for device tensor t; ready() is
    called once before the library call, finish() after it succeeded (copies
    back, releases), abort() after it failed (releases only)."""

    staged = True

    def __init__(self, pool_, sync=_sync_streams):
        self._pool = pool_
        self._sync = sync
        self._blocks = []
        self._back = []  # (device tensor, host view)
        self._devices = []

    def _host(self, t, what):
        if t.is_sparse or not t.is_contiguous():
            raise ArgumentError("%s is not contiguous (call .contiguous() and use the result)" % what)
        nbytes = t.numel() * t.element_size()
        block = self._pool.acquire(nbytes)
        self._blocks.append(block)
        if t.device not in self._devices:
            self._devices.append(t.device)
        return block[:nbytes].view(t.dtype).view(t.shape)

    def input(self, t, what="input"):
        h = self._host(t, what)
        h.copy_(t, non_blocking=True)
        return h

    def inout(self, t, what="buffer"):
        h = self.input(t, what)
        self._back.append((t, h))
        return h

    def output(self, t, what="output"):
        h = self._host(t, what)
        self._back.append((t, h))
        return h

    def ready(self):
        # The device-to-host copies, and the work that produced the inputs,
        # must be done before the library reads the host copies.
        self._sync(self._devices)

    def guard(self):
        return contextlib.nullcontext()  # host copies: no device to make current

    def finish(self):
        try:
            for t, h in self._back:
                t.copy_(h, non_blocking=True)
            # Before the blocks go back to the pool (and before the caller
            # sees the result on another stream).
            self._sync(self._devices)
        finally:
            self._release()

    def abort(self):
        self._release()

    def _release(self):
        blocks, self._blocks, self._back = self._blocks, [], []
        for b in blocks:
            self._pool.release(b)


def _device_type(x):
    d = getattr(x, "device", None)
    return "cpu" if d is None else d.type


def device_path(env=None, lib_cuda=None):
    """True when CUDA tensors are handed to the library as device pointers:
    whenever the library reports a device runtime (sc_cuda_available()),
    unless SPARSECOLL_CUDA_DIRECT=0 asks for the staged path."""
    env = os.environ if env is None else env
    if env.get("SPARSECOLL_CUDA_DIRECT", "") == "0":
        return False
    if lib_cuda is None:
        from ._buf import cuda_available

        lib_cuda = cuda_available()
    return bool(lib_cuda)


def _sync_stream_handle(stream):
    """Waits for a __cuda_array_interface__ stream (None: nothing to wait
    for), through torch or CuPy, whichever is there."""
    if stream is None:
        return
    _stream.count("host_syncs")
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.ExternalStream(int(stream)).synchronize()
            return
    except ImportError:
        pass
    try:
        import cupy

        cupy.cuda.ExternalStream(int(stream)).synchronize()
        return
    except ImportError:
        pass
    raise UnsupportedError("a __cuda_array_interface__ names stream %r, and neither torch (with CUDA) "
                           "nor CuPy is here to wait for it" % (stream,))


class Direct:
    """The library gets the tensors themselves (device pointers); the same
    interface as Staging, so that Comm drives both alike. ready()
    synchronizes the producers' streams; guard() makes the tensors' device
    current around the library call."""

    staged = False

    def __init__(self, xs, sync=_sync_streams, sync_handle=_sync_stream_handle):
        from ._buf import cai_stream, is_cai

        self._devices = []
        self._handles = []
        for x in xs:
            if is_cai(x):
                h = cai_stream(x)
                if h is not None and h not in self._handles:
                    self._handles.append(h)
            elif getattr(x, "device", None) is not None and x.device.type == "cuda":
                if x.device not in self._devices:
                    self._devices.append(x.device)
        self._sync = sync
        self._sync_handle = sync_handle

    def input(self, t, what="input"):
        return t

    inout = input
    output = input

    def ready(self):
        if self._devices:  # (torch is not needed for __cuda_array_interface__ objects)
            self._sync(self._devices)
        for h in self._handles:
            self._sync_handle(h)

    def guard(self):
        if not self._devices:
            return contextlib.nullcontext()
        import torch

        return torch.cuda.device(self._devices[0])

    def finish(self):
        pass

    def abort(self):
        pass


def for_tensors(*xs):
    """What an operation on these arrays/tensors (None entries are skipped)
    needs: None for host memory (the library takes it as it is), a Direct
    for device memory the library takes, a Staging for CUDA tensors it does
    not."""
    from ._buf import is_cai

    xs = [x for x in xs if x is not None]
    if any(is_cai(x) for x in xs):
        return Direct(xs)
    types = [_device_type(x) for x in xs]
    needs_cuda = "cuda" in types
    direct = needs_cuda and device_path()
    stage_cpu = STAGE_CPU and all(hasattr(x, "device") for x in xs)
    if plan(types, direct, stage_cpu) == "stage":
        return Staging(pool())
    return Direct(xs) if direct else None
