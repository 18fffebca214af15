# SPDX-License-Identifier: BSD-3-Clause
"""The stream forms of Comm's collectives (stream=, the library's
sc_*_on_stream) and the counters of host synchronisations.

A stream form is enqueued on the given stream and returns at once: the
operation starts after the work enqueued earlier on that stream, and the work
enqueued later on it sees the result. Nothing here synchronises a stream from
the host, copies through host memory or keeps the buffers alive: the caller
keeps them until the stream has passed the operation (as with NCCL).
"""
import contextlib
import ctypes
import threading

from ._lib import ArgumentError, UnsupportedError, check, has, lib

_lock = threading.Lock()
_counts = {"host_syncs": 0, "stream_calls": 0}


def count(name, n=1):
    """Adds n to counter name (host_syncs: a stream synchronised from the
    host by the binding or the torch backend; stream_calls: stream forms
    enqueued)."""
    with _lock:
        _counts[name] += n


def counters():
    with _lock:
        return dict(_counts)


def reset_counters():
    with _lock:
        for k in _counts:
            _counts[k] = 0


def handle(stream):
    """A raw stream handle (an int such as torch.cuda.Stream.cuda_stream, 0
    for the legacy default stream), or an object with .cuda_stream (a
    torch.cuda.Stream) or .ptr (a CuPy stream)."""
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr) and not isinstance(stream, int):
            stream = getattr(stream, attr)
            break
    try:
        h = int(stream)
    except (TypeError, ValueError):
        raise ArgumentError("stream must be a raw stream handle (int) or a torch.cuda.Stream, got %r"
                            % (stream,)) from None
    if h < 0:
        raise ArgumentError("stream handle %d is negative" % h)
    return ctypes.c_void_p(h or None)


def form(fn):
    """The stream form of one of the library's blocking collectives."""
    name = fn.__name__ + "_on_stream"
    if not has(name):
        raise UnsupportedError("%s: this libsparsecoll has no stream forms" % name)
    return getattr(lib, name)


def run(fn, args, result, st, stream, async_op):
    """fn's stream form with args + (stream,), enqueued; returns result. st:
    what for_tensors gave (None for host memory, which the library refuses);
    its producers are not synchronised: the stream orders them."""
    try:
        if async_op:
            raise ArgumentError("stream= and async_op=True exclude each other (a stream form is "
                                "asynchronous already)")
        if st is not None and st.staged:
            raise UnsupportedError("stream forms take device memory, and this libsparsecoll has no device "
                                   "runtime (sc_cuda_available() is 0) or SPARSECOLL_CUDA_DIRECT=0 is set")
        sfn = form(fn)
        h = handle(stream)
        with st.guard() if st is not None else contextlib.nullcontext():
            check(sfn(*args, h))
    except BaseException:
        if st is not None:
            st.abort()
        raise
    count("stream_calls")
    return result
