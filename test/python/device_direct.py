# SPDX-License-Identifier: BSD-3-Clause
"""The binding's device-pointer path on the device stand-in (test/devfake,
named by SC_DEVRT_STANDIN): device memory the host cannot touch, wrapped in a
minimal __cuda_array_interface__ object. Every Comm call must hand the
pointer to the library as it is (a read of device memory by the binding, or
by the library's host path, ends the process with SIGSEGV) and produce what
numpy computes from every rank's inputs. Inputs are written and results read
through the stand-in's host_view (its own window on the bytes), after the
blocking call returned. Run under sc-run (device_direct.sh). Exits 1 on the
first mismatch."""
import ctypes
import os
import sys

import numpy as np

import sparsecoll
from sparsecoll import _staging

_F = ctypes.c_void_p  # table members this test does not call


class DevRT(ctypes.Structure):
    """kernels/devrt.h's sc_devrt_t, up to host_view."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("device_count", _F),
        ("current_device", _F),
        ("set_device", _F),
        ("pointer_device", _F),
        ("mem_range", _F),
        ("malloc_device", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t)),
        ("free_device", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)),
        ("malloc_pinned", _F),
        ("free_pinned", _F),
        ("stream_create", _F),
        ("stream_destroy", _F),
        ("memcpy_async", _F),
        ("memset_async", _F),
        ("event_create", _F),
        ("event_destroy", _F),
        ("event_record", _F),
        ("event_query", _F),
        ("stream_wait_event", _F),
        ("stream_wait_value", _F),
        ("launch_host", _F),
        ("ipc_get", _F),
        ("ipc_open", _F),
        ("ipc_close", _F),
        ("dmabuf_fd", _F),
        ("pci_bus_id", _F),
        ("host_view", ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)),
    ]


# The same module the library loaded (dlopen hands back the same instance).
RT = DevRT.in_dll(ctypes.CDLL(os.environ["SC_DEVRT_STANDIN"]), "sc_devrt_standin")
TYPESTR = {np.float32: "<f4", np.float64: "<f8", np.float16: "<f2", np.int32: "<i4", np.int64: "<i8",
           np.uint32: "<u4"}


class DevArray:
    """n elements of dtype in stand-in device memory."""

    def __init__(self, n, dtype=np.float32, stream=None):
        self.n, self.dtype = n, np.dtype(dtype)
        p = ctypes.c_void_p()
        if RT.malloc_device(ctypes.byref(p), max(1, n * self.dtype.itemsize)) != 0:
            raise RuntimeError("stand-in malloc_device failed")
        self.ptr = p.value
        self.stream = stream

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.n,), "typestr": TYPESTR[self.dtype.type], "data": (self.ptr, False),
                "version": 3, "stream": self.stream}

    def _view(self):
        # The stand-in's shadow of the bytes: host memory, unlike self.ptr.
        h = RT.host_view(ctypes.c_void_p(self.ptr))
        buf = (ctypes.c_char * (self.n * self.dtype.itemsize)).from_address(h)
        return np.frombuffer(buf, dtype=self.dtype)

    def set(self, a):
        self._view()[:] = a

    def get(self):
        return self._view().copy()

    def free(self):
        RT.free_device(ctypes.c_void_p(self.ptr))


comm = sparsecoll.Comm.from_env()
R, P = comm.rank, comm.size
checks = 0


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


def dev(a, dtype=None):
    d = DevArray(len(a), dtype or a.dtype.type)
    d.set(a)
    return d


SPARSE = "--sparse" in sys.argv[1:]  # gTop-k; without it: the dense calls


def dense_calls():
    probe = DevArray(4)
    ok(isinstance(_staging.for_tensors(probe), _staging.Direct), "a __cuda_array_interface__ object goes direct")
    ok(not _staging.for_tensors(probe).staged, "direct: nothing staged")

    for dtype in (np.float32, np.float64, np.int32):
        for n in (1, 1000, 1 << 16):
            ins = every(n, dtype)
            x = dev(ins[R])
            comm.allreduce(x)
            ok(np.array_equal(x.get(), np.sum(ins, axis=0, dtype=dtype)),
               "allreduce in place %s n=%d" % (dtype.__name__, n))
            out = DevArray(n, dtype)
            y = dev(ins[R])
            comm.allreduce(y, op="max", out=out)
            ok(np.array_equal(out.get(), np.max(ins, axis=0)), "allreduce max out= %s n=%d" % (dtype.__name__, n))
            ok(np.array_equal(y.get(), ins[R]), "allreduce out=: input unchanged")
            for a in (x, out, y):
                a.free()

    m = 777
    ins = every(m * P, salt=1)
    x, blk = dev(ins[R]), DevArray(m)
    comm.reduce_scatter(x, out=blk)
    ok(np.array_equal(blk.get(), np.sum(ins, axis=0)[R * m:(R + 1) * m]), "reduce_scatter")
    ins = every(m, salt=2)
    x, full = dev(ins[R]), DevArray(m * P)
    comm.allgather(x, out=full)
    ok(np.array_equal(full.get(), np.concatenate(ins)), "allgather")
    try:
        comm.allgather(x)
        ok(False, "allgather without out= on a __cuda_array_interface__ input raises")
    except sparsecoll.ArgumentError:
        ok(True, "allgather without out=: ArgumentError")
    for root in range(P):
        ins = every(m, salt=10 + root)
        x = dev(ins[R])
        comm.broadcast(x, root)
        ok(np.array_equal(x.get(), ins[root]), "broadcast root %d" % root)
        x = dev(ins[R])
        comm.reduce(x, op="sum", root=root)
        if R == root:
            ok(np.array_equal(x.get(), np.sum(ins, axis=0)), "reduce root %d" % root)

    # All-to-all (out of place and in place), uneven all-to-all, gather,
    # scatter and uneven all-gather on device memory.
    ins = every(m * P, salt=30)
    want = np.concatenate([a[R * m:(R + 1) * m] for a in ins])
    x, out = dev(ins[R]), DevArray(m * P)
    comm.alltoall(x, out)
    ok(np.array_equal(out.get(), want), "alltoall")
    comm.ialltoall(x, x).wait()
    ok(np.array_equal(x.get(), want), "alltoall in place")
    sc = [(R + j) % 3 + 1 for j in range(P)]  # rank i sends rank j (i + j) % 3 + 1 elements
    rc = [(i + R) % 3 + 1 for i in range(P)]
    send = dev(np.concatenate([data(100 * R + j, sc[j], salt=31) for j in range(P)]))
    recv = DevArray(sum(rc))
    comm.alltoallv(send, sc, recv, rc)
    ok(np.array_equal(recv.get(), np.concatenate([data(100 * i + R, rc[i], salt=31) for i in range(P)])),
       "alltoallv")
    for root in range(P):
        full = DevArray(m * P) if R == root else None
        comm.gather(dev(data(R, m, salt=32)), full, root=root)
        if R == root:
            ok(np.array_equal(full.get(), np.concatenate(every(m, salt=32))), "gather root %d" % root)
        blk = DevArray(m)
        comm.iscatter(dev(data(root, m * P, salt=33)) if R == root else None, blk, root=root).wait()
        ok(np.array_equal(blk.get(), data(root, m * P, salt=33)[R * m:(R + 1) * m]), "scatter root %d" % root)
    counts = [i + 1 for i in range(P)]
    full = DevArray(sum(counts))
    comm.allgatherv(dev(np.full(R + 1, R, np.float32)), full, counts)
    ok(np.array_equal(full.get(), np.concatenate([np.full(i + 1, i, np.float32) for i in range(P)])), "allgatherv")

    reqs, xs = [], []
    for i in range(4):
        ins = every(5000, salt=20 + i)
        xs.append((dev(ins[R]), np.sum(ins, axis=0)))
        reqs.append(comm.iallreduce(xs[-1][0]))
    for i, (req, (x, want)) in enumerate(zip(reqs, xs)):
        req.wait()
        ok(np.array_equal(x.get(), want), "iallreduce #%d of 4 in flight" % i)


def sparse_calls():
    # gTop-k in place on a device gradient, against the same call on host memory.
    n, k = 20000, 64
    g_host = (data(R, n, np.float32, salt=40) / 3).astype(np.float32)
    g = dev(g_host)
    comm.gtopk_allreduce(g, k)
    comm.gtopk_allreduce(g_host, k)
    ok(np.array_equal(g.get(), g_host), "gtopk_allreduce on the device == on the host")
    # With error feedback kept per buffer (ef=True), two steps: the residual
    # of the device gradient lives with it, and must evolve as the host's.
    g2_host = np.zeros(n, np.float32)
    g2 = dev(g2_host)
    for step in range(2):
        v = (data(R, n, np.float32, salt=50 + step) / 5).astype(np.float32)
        g2.set(v)
        g2_host[:] = v
        comm.gtopk_allreduce(g2, k, ef=True)
        comm.gtopk_allreduce(g2_host, k, ef=True)
        ok(np.array_equal(g2.get(), g2_host), "gtopk_allreduce ef=True step %d: device == host" % step)


ok(RT.name == b"devfake", "the stand-in is loaded (%r)" % RT.name)
sparse_calls() if SPARSE else dense_calls()
print("rank %d: device pointers through the binding on the stand-in (%s): %d checks passed"
      % (R, "gTop-k" if SPARSE else "dense calls", checks))
comm.close()
