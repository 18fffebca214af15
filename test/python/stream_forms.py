# SPDX-License-Identifier: BSD-3-Clause
"""Comm's stream forms (stream=, sc_*_on_stream) on the device stand-in
(test/devfake, named by SC_DEVRT_STANDIN), under sc-run (stream_forms.sh).

Each check runs twice. The first time warms the communicator up (a stream
call that needs more memory than any before allocates it first, and an
allocation may wait for the stream's earlier work). The second time the
stream is held at a gate (stream_wait_value on a pinned flag) before the
producer, an upload that writes the input late over garbage; the collective
is enqueued after it, then the consumer, a download of the output into host
memory. Only then does the host raise the flag and wait for the stream: the
call returned while its input did not exist yet, and the result must be
the input's (independent numpy reference of every rank's data). No host
synchronisation happens between producer, collective and consumer, and the
binding's counter of host synchronisations stays 0. Exits 1 on the first
mismatch."""
import ctypes
import os
import sys
import time

import numpy as np

import sparsecoll
from sparsecoll import _stream

_F = ctypes.c_void_p  # table members this test does not call
_R = ctypes.c_int
_VP = ctypes.c_void_p


class DevRT(ctypes.Structure):
    """kernels/devrt.h's sc_devrt_t, up to host_view."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("device_count", _F),
        ("current_device", _F),
        ("set_device", _F),
        ("pointer_device", _F),
        ("mem_range", _F),
        ("malloc_device", ctypes.CFUNCTYPE(_R, ctypes.POINTER(_VP), ctypes.c_size_t)),
        ("free_device", ctypes.CFUNCTYPE(_R, _VP)),
        ("malloc_pinned", ctypes.CFUNCTYPE(_R, ctypes.POINTER(_VP), ctypes.c_size_t)),
        ("free_pinned", ctypes.CFUNCTYPE(_R, _VP)),
        ("stream_create", ctypes.CFUNCTYPE(_R, ctypes.POINTER(_VP))),
        ("stream_destroy", ctypes.CFUNCTYPE(_R, _VP)),
        ("memcpy_async", ctypes.CFUNCTYPE(_R, _VP, _VP, ctypes.c_size_t, _VP)),
        ("memset_async", _F),
        ("event_create", ctypes.CFUNCTYPE(_R, ctypes.POINTER(_VP))),
        ("event_destroy", ctypes.CFUNCTYPE(_R, _VP)),
        ("event_record", ctypes.CFUNCTYPE(_R, _VP, _VP)),
        ("event_query", ctypes.CFUNCTYPE(_R, _VP, ctypes.POINTER(ctypes.c_int))),
        ("stream_wait_event", _F),
        ("stream_wait_value", ctypes.CFUNCTYPE(_R, _VP, _VP, ctypes.c_uint32)),
        ("launch_host", _F),
        ("ipc_get", _F),
        ("ipc_open", _F),
        ("ipc_close", _F),
        ("dmabuf_fd", _F),
        ("pci_bus_id", _F),
        ("host_view", ctypes.CFUNCTYPE(_VP, _VP)),
    ]


# The same module the library loaded (dlopen hands back the same instance).
RT = DevRT.in_dll(ctypes.CDLL(os.environ["SC_DEVRT_STANDIN"]), "sc_devrt_standin")
TYPESTR = {np.float32: "<f4", np.float64: "<f8", np.float16: "<f2", np.int32: "<i4", np.int64: "<i8"}


def rt(r, what):
    if r != 0:
        print("rank %d: FAIL stand-in %s returned %d" % (R, what, r), file=sys.stderr)
        sys.exit(1)


class DevArray:
    """n elements of dtype in stand-in device memory (never freed: a caching
    allocator keeps its blocks too, and a freed peer buffer made again at the
    same address could not be mapped while a stream call waits)."""

    def __init__(self, n, dtype=np.float32):
        self.n, self.dtype = n, np.dtype(dtype)
        p = _VP()
        rt(RT.malloc_device(ctypes.byref(p), max(1, n * self.dtype.itemsize)), "malloc_device")
        self.ptr = p.value

    @property
    def nbytes(self):
        return self.n * self.dtype.itemsize

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.n,), "typestr": TYPESTR[self.dtype.type], "data": (self.ptr, False),
                "version": 3, "stream": None}

    def view(self):
        # The stand-in's shadow of the bytes: host memory, unlike self.ptr.
        h = RT.host_view(_VP(self.ptr))
        raw = (ctypes.c_char * max(self.dtype.itemsize, self.nbytes)).from_address(h)
        return np.frombuffer(raw, dtype=self.dtype)[: self.n]


comm = sparsecoll.Comm.from_env()
R, P = comm.rank, comm.size
checks = 0
calls = 0  # stream-form calls made, against the binding's counter


def ok(cond, what):
    global checks
    checks += 1
    if not cond:
        print("rank %d: FAIL %s" % (R, what), file=sys.stderr)
        sys.exit(1)


def data(rank, n, dtype=np.float32, salt=0):
    rng = np.random.default_rng(1000 * rank + 7 * n + salt)
    return rng.integers(-3, 4, n).astype(dtype)


def every(n, dtype=np.float32, salt=0):
    return [data(r, n, dtype, salt) for r in range(P)]


STREAM = _VP()
rt(RT.stream_create(ctypes.byref(STREAM)), "stream_create")
S = STREAM.value  # the raw handle, as torch.cuda.Stream.cuda_stream is
EVENT = _VP()
rt(RT.event_create(ctypes.byref(EVENT)), "event_create")
FLAG = _VP()
rt(RT.malloc_pinned(ctypes.byref(FLAG), 64), "malloc_pinned")
GATE = ctypes.c_uint32.from_address(FLAG.value)
GATE.value = 0


def drain():
    """The one host wait of a check: an event recorded behind the consumer."""
    rt(RT.event_record(EVENT, STREAM), "event_record")
    done = ctypes.c_int(0)
    end = time.time() + 60
    while True:
        rt(RT.event_query(EVENT, ctypes.byref(done)), "event_query")
        if done.value:
            return
        if time.time() > end:
            print("rank %d: FAIL the stream did not drain within 60 s" % R, file=sys.stderr)
            sys.exit(1)
        time.sleep(0.001)


# ---- the checks: (name, [(device input, its data)], [(device output, want or None)], issue) ----


def c_allreduce(dtype, n, salt):
    ins = every(n, dtype, salt)
    x = DevArray(n, dtype)
    return ("allreduce sum in place %s n=%d" % (np.dtype(dtype).name, n), [(x, ins[R])],
            [(x, np.sum(ins, axis=0, dtype=dtype))], lambda s: comm.allreduce(x, stream=s))


def c_allreduce_max_out(n):
    ins = every(n, np.float32, 1)
    x, out = DevArray(n), DevArray(n)
    return ("allreduce max out= n=%d" % n, [(x, ins[R])], [(out, np.max(ins, axis=0)), (x, ins[R])],
            lambda s: comm.allreduce(x, op="max", out=out, stream=s))


def c_reduce_scatter(m):
    ins = every(m * P, salt=2)
    x, blk = DevArray(m * P), DevArray(m)
    return ("reduce_scatter m=%d" % m, [(x, ins[R])], [(blk, np.sum(ins, axis=0)[R * m:(R + 1) * m])],
            lambda s: comm.reduce_scatter(x, out=blk, stream=s))


def c_allgather(m):
    ins = every(m, salt=3)
    x, full = DevArray(m), DevArray(m * P)
    return ("allgather m=%d" % m, [(x, ins[R])], [(full, np.concatenate(ins))],
            lambda s: comm.allgather(x, out=full, stream=s))


def c_broadcast(root, n):
    ins = every(n, np.float64, 10 + root)
    x = DevArray(n, np.float64)
    return ("broadcast root %d" % root, [(x, ins[R])], [(x, ins[root])], lambda s: comm.broadcast(x, root, stream=s))


def c_reduce(root, n):
    ins = every(n, np.int32, 20 + root)
    x, out = DevArray(n, np.int32), DevArray(n, np.int32)
    want = np.sum(ins, axis=0, dtype=np.int32) if R == root else None
    return ("reduce root %d" % root, [(x, ins[R])], [(out, want)],
            lambda s: comm.reduce(x, op="sum", root=root, out=out, stream=s))


def c_alltoall(m):
    ins = every(m * P, salt=30)
    x, out = DevArray(m * P), DevArray(m * P)
    want = np.concatenate([a[R * m:(R + 1) * m] for a in ins])
    return ("alltoall m=%d" % m, [(x, ins[R])], [(out, want)], lambda s: comm.alltoall(x, out, stream=s))


def c_alltoallv():
    sc = [(R + j) % 3 + 1 for j in range(P)]  # rank i sends rank j (i + j) % 3 + 1 elements
    rc = [(i + R) % 3 + 1 for i in range(P)]
    mine = np.concatenate([data(100 * R + j, sc[j], salt=31) for j in range(P)])
    want = np.concatenate([data(100 * i + R, rc[i], salt=31) for i in range(P)])
    send, recv = DevArray(sum(sc)), DevArray(sum(rc))
    return ("alltoallv", [(send, mine)], [(recv, want)], lambda s: comm.alltoallv(send, sc, recv, rc, stream=s))


def c_gather(root, m):
    ins = every(m, salt=32 + root)
    x, full = DevArray(m), DevArray(m * P)
    want = np.concatenate(ins) if R == root else None
    return ("gather root %d" % root, [(x, ins[R])], [(full, want)],
            lambda s: comm.gather(x, full if R == root else None, root=root, stream=s))


def c_scatter(root, m):
    src = data(root, m * P, salt=40 + root)
    x, blk = DevArray(m * P), DevArray(m)
    return ("scatter root %d" % root, [(x, src if R == root else data(R, m * P, salt=41))],
            [(blk, src[R * m:(R + 1) * m])],
            lambda s: comm.scatter(x if R == root else None, blk, root=root, stream=s))


def c_allgatherv():
    counts = [i + 1 for i in range(P)]
    x, full = DevArray(R + 1), DevArray(sum(counts))
    want = np.concatenate([np.full(i + 1, i + 0.5, np.float32) for i in range(P)])
    return ("allgatherv", [(x, np.full(R + 1, R + 0.5, np.float32))], [(full, want)],
            lambda s: comm.allgatherv(x, full, counts, stream=s))


def c_chain(n):
    """Three in-place sums back to back on the stream, no host wait between:
    each reads the one before's result (P^2 times the sum at the end)."""
    ins = every(n, np.float64, 50)
    x = DevArray(n, np.float64)

    def issue(s):
        for _ in range(3):
            comm.allreduce(x, stream=s)
    return ("three all-reduces back to back n=%d" % n, [(x, ins[R])],
            [(x, np.sum(ins, axis=0) * P * P)], issue)


GTOPK_N, GTOPK_K = 20000, 64


def c_gtopk(step):
    """The gTop-k stream form against the blocking form on host memory,
    with error feedback: each pass's second call sees the first's residual."""
    g_host = (data(R, GTOPK_N, salt=60 + step) / 3).astype(np.float32)
    g = DevArray(GTOPK_N)
    want = g_host.copy()
    comm.gtopk_allreduce(want, GTOPK_K, ef=HOST_EF)  # the reference, blocking, on host memory
    return ("gtopk_allreduce step %d" % step, [(g, g_host)], [(g, want)],
            lambda s: comm.gtopk_allreduce(g, GTOPK_K, ef=DEV_EF, stream=s))


HOST_EF = sparsecoll.ErrorFeedback(GTOPK_N, np.float32)
DEV_EF = sparsecoll.ErrorFeedback(GTOPK_N, np.float32)
CALLS_PER = {"three all-reduces": 3}
MAKERS = ([lambda dt=dt: c_allreduce(dt, 1000, 0) for dt in (np.float32, np.float64, np.int32, np.int64,
                                                              np.float16)]
          + [lambda n=n: c_allreduce(np.float32, n, 5) for n in (0, 1, 7, 65537)]
          + [lambda: c_allreduce_max_out(999), lambda: c_reduce_scatter(1), lambda: c_reduce_scatter(777),
             lambda: c_allgather(777)]
          + [lambda r=r: c_broadcast(r, 1000) for r in range(P)]
          + [lambda r=r: c_reduce(r, 1000) for r in range(P)]
          + [lambda: c_alltoall(5), c_alltoallv, lambda: c_gather(0, 333), lambda: c_gather(P - 1, 333),
             lambda: c_scatter(0, 333), lambda: c_scatter(P - 1, 333), c_allgatherv, lambda: c_chain(4099)])


def run_pass(gated, gtopk_step):
    global calls
    # Every buffer first: an allocation waits for every stream (CUDA's
    # implicit synchronization, and the stand-in's), so none may be made
    # while the stream waits at the gate.
    cases = [make() for make in MAKERS] + [c_gtopk(gtopk_step)]
    for name, ins, outs, issue in cases:
        for d, v in ins:
            d.view()[:] = (v + 7).astype(d.dtype)  # garbage the producer overwrites late
        got = [np.full(d.n, -123, d.dtype) for d, _ in outs]  # -123: exact in every dtype here
        before = [h.copy() for h in got]
        if gated:
            rt(RT.stream_wait_value(STREAM, FLAG, GATE.value + 1), "stream_wait_value")
        for d, v in ins:  # the producer
            v = np.ascontiguousarray(v, dtype=d.dtype)
            rt(RT.memcpy_async(_VP(d.ptr), _VP(v.ctypes.data), d.nbytes, STREAM), "memcpy_async in")
            d._keep = v  # until the stream ran the copy
        issue(S)  # the collective: enqueued, returns at once
        calls += next((c for k, c in CALLS_PER.items() if name.startswith(k)), 1)
        for (d, _), h in zip(outs, got):  # the consumer
            rt(RT.memcpy_async(_VP(h.ctypes.data), _VP(d.ptr), d.nbytes, STREAM), "memcpy_async out")
        if gated:
            time.sleep(0.02)
            ok(all(np.array_equal(h, h0) for h, h0 in zip(got, before)),
               "%s: the consumer ran while the stream waited at the gate" % name)
            GATE.value += 1  # the stream may go on
        drain()
        for (d, want), h in zip(outs, got):
            if want is not None:
                ok(np.array_equal(h, want), "%s (%s): got %s..., want %s..."
                   % (name, "gated" if gated else "warm-up", h[:6], np.asarray(want)[:6]))


ok(RT.name == b"devfake", "the stand-in is loaded (%r)" % RT.name)
_stream.reset_counters()
run_pass(False, 0)
run_pass(True, 1)
got = _stream.counters()
ok(got["host_syncs"] == 0, "no host synchronisation in the stream forms (counted %d)" % got["host_syncs"])
ok(got["stream_calls"] == calls, "stream_calls counts every call (%d, made %d)" % (got["stream_calls"], calls))

# Refusals at the call, nothing enqueued: the communicator stays in order.
h = np.arange(4, dtype=np.float32)
try:
    comm.allreduce(h, stream=S)
    ok(False, "host memory on a stream form raises")
except sparsecoll.Error as e:
    ok(e.code == "SC_ERR_INVALID_ARG", "host memory on a stream form: %s" % e.code)
x = DevArray(4)
for bad, what in (({"async_op": True, "stream": S}, "async_op with stream"),
                  ({"stream": "s"}, "a stream that is no handle"), ({"stream": -1}, "a negative handle")):
    try:
        comm.allreduce(x, **bad)
        ok(False, "%s raises" % what)
    except sparsecoll.ArgumentError:
        ok(True, what)
ok(_stream.counters()["stream_calls"] == calls, "refused calls are not counted")
# Still in step: a blocking call agrees on every rank.
y = np.full(3, R + 1.0, np.float32)
comm.allreduce(y)
ok(np.array_equal(y, np.full(3, P * (P + 1) / 2, np.float32)), "a blocking all-reduce after the stream forms")
print("rank %d: stream forms on the stand-in: %d checks passed, %d stream calls, %d host syncs"
      % (R, checks, calls, got["host_syncs"]))
comm.close()
