# SPDX-License-Identifier: BSD-3-Clause
"""sparsecoll.Fusion: the bucket-fusion API (sc_fusion_*) for frameworks.

The config struct is built from the layout the compiler printed at build time
(_consts.LAYOUT_SC_FUSION_CONFIG), filled by sc_fusion_config_init, then the
fields the caller names are set: a field added to the C struct later keeps its
library default."""
import ctypes

from . import _consts, _staging
from ._buf import buf
from ._comm import SELECT, _enum
from ._lib import ArgumentError, check, enum_names, lib

_SCALARS = {"double": ctypes.c_double, "float": ctypes.c_float, "size_t": ctypes.c_size_t}
_INTS = {1: ctypes.c_int8, 2: ctypes.c_int16, 4: ctypes.c_int32, 8: ctypes.c_int64}


def _struct(name, layout):
    size, fields = layout
    out, pos = [], 0
    for fname, ctype, off, fsize in sorted(fields, key=lambda f: f[2]):
        if off > pos:
            out.append(("_pad%d" % pos, ctypes.c_char * (off - pos)))
        ct = _SCALARS.get(ctype) or _INTS[fsize]  # enums and ints: by their size
        if ctypes.sizeof(ct) != fsize:
            raise ImportError("sparsecoll: field %s.%s is %d bytes in C" % (name, fname, fsize))
        out.append((fname, ct))
        pos = off + fsize
    if size > pos:
        out.append(("_pad_end", ctypes.c_char * (size - pos)))
    cls = type(name, (ctypes.Structure,), {"_fields_": out})
    if ctypes.sizeof(cls) != size:
        raise ImportError("sparsecoll: %s is %d bytes in C, %d in ctypes" % (name, size, ctypes.sizeof(cls)))
    return cls


FusionConfig = _struct("FusionConfig", _consts.LAYOUT_SC_FUSION_CONFIG)
# "wfbp", "size", "mgwfbp", "dear", "single", "p3": the names sc_fusion_policy_name gives.
POLICIES = enum_names(lib.sc_fusion_policy_name, _consts.SC_FUSION_POLICY_T)
# "none", "topk", "powersgd", "acpsgd", "fp16", "bf16", "onebit", "auto".
COMPRESS = {k[len("SC_COMPRESS_"):].lower(): v for k, v in _consts.SC_COMPRESS_T.items()}

_P, _I, _PI = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)
for _name, _res, _args in [
    ("sc_fusion_config_init", None, [ctypes.POINTER(FusionConfig)]),
    ("sc_fusion_create", _I, [_P, ctypes.POINTER(FusionConfig), ctypes.POINTER(_P)]),
    ("sc_fusion_add_tensor", _I, [_P, _P, ctypes.c_size_t, _I, ctypes.c_double, _PI]),
    ("sc_fusion_add_matrix", _I, [_P, _P, ctypes.c_size_t, ctypes.c_size_t, _I, ctypes.c_double, _PI]),
    ("sc_fusion_bucket_compress", _I, [_P, _I, _PI]),
    ("sc_fusion_plan", _I, [_P]),
    ("sc_fusion_num_buckets", _I, [_P, _PI]),
    ("sc_fusion_bucket_of", _I, [_P, _I, _PI]),
    ("sc_fusion_ready", _I, [_P, _I]),
    ("sc_fusion_skip", _I, [_P, _I]),
    ("sc_fusion_wait", _I, [_P, _I]),
    ("sc_fusion_wait_all", _I, [_P]),
    ("sc_fusion_destroy", _I, [_P]),
]:
    _f = getattr(lib, _name, None)
    if _f is not None:
        _f.restype, _f.argtypes = _res, _args


class Fusion:
    """Gradients of many tensors reduced (averaged) in buckets.

    Fusion(comm, policy="size", bucket_bytes=None, density=0.0, select="exact",
    alpha_us=None, beta_us_per_byte=None, slice_bytes=None, compress="none",
    lowrank=4, seed=0); then add() each tensor (add(x, shape=(rows, cols)) for a
    matrix that "powersgd" and "acpsgd" reduce in low rank) in the order its
    gradient becomes ready, plan() (collective), and
    each round ready()/skip() every tensor and wait()/wait_all(). The tensors
    stay registered by pointer: keep them alive and do not reallocate them."""

    def __init__(self, comm, policy="size", **fields):
        cfg = FusionConfig()
        lib.sc_fusion_config_init(ctypes.byref(cfg))
        cfg.policy = _enum(POLICIES, policy, "fusion policy")
        for k, v in fields.items():
            if v is None:
                continue
            if k == "select":
                v = _enum(SELECT, v, "select")
            if k == "compress":
                v = _enum(COMPRESS, v, "compress")
            if k.startswith("_") or k not in dict(FusionConfig._fields_):
                raise ArgumentError("Fusion: unknown config field %r" % k)
            setattr(cfg, k, v)
        self.config = cfg
        self._comm = comm  # keeps the communicator alive
        self._f = ctypes.c_void_p()
        self._tensors = []
        self._cuda = {}  # tensor id -> device of CUDA tensors
        check(lib.sc_fusion_create(comm.handle, ctypes.byref(cfg), ctypes.byref(self._f)))

    def add(self, x, backward_us=0.0, shape=None):
        p, n, dt = buf(x, "fusion tensor", writable=True)
        tid = ctypes.c_int()
        if shape is None:
            check(lib.sc_fusion_add_tensor(self._f, p, n, dt, float(backward_us), ctypes.byref(tid)))
        else:
            rows, cols = (int(v) for v in shape)
            if rows * cols != n:
                raise ArgumentError("Fusion.add: shape %r is not %d elements" % (shape, n))
            check(lib.sc_fusion_add_matrix(self._f, p, rows, cols, dt, float(backward_us), ctypes.byref(tid)))
        self._tensors.append(x)
        dev = getattr(x, "device", None)
        if dev is not None and dev.type == "cuda":
            self._cuda[tid.value] = dev
        return tid.value

    def plan(self):
        check(lib.sc_fusion_plan(self._f))

    @property
    def num_buckets(self):
        n = ctypes.c_int()
        check(lib.sc_fusion_num_buckets(self._f, ctypes.byref(n)))
        return n.value

    def bucket_of(self, tid):
        b = ctypes.c_int()
        check(lib.sc_fusion_bucket_of(self._f, int(tid), ctypes.byref(b)))
        return b.value

    def bucket_compress(self, bucket):
        """What the plan has bucket travel as ("none", "topk", "powersgd", ...)."""
        w = ctypes.c_int()
        check(lib.sc_fusion_bucket_compress(self._f, int(bucket), ctypes.byref(w)))
        return {v: k for k, v in COMPRESS.items()}[w.value]

    def ready(self, tid):
        dev = self._cuda.get(int(tid))
        if dev is not None:
            # The library reads the gradient once it is ready, off torch's
            # stream order: the kernels producing it must have finished.
            _staging.sync_current(dev)
        check(lib.sc_fusion_ready(self._f, int(tid)))

    def skip(self, tid):
        check(lib.sc_fusion_skip(self._f, int(tid)))

    def wait(self, tid):
        check(lib.sc_fusion_wait(self._f, int(tid)))

    def wait_all(self):
        check(lib.sc_fusion_wait_all(self._f))

    def close(self):
        if self._f:
            f, self._f = self._f, ctypes.c_void_p()
            check(lib.sc_fusion_destroy(f))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
