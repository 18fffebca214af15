# SPDX-License-Identifier: BSD-3-Clause
"""Numpy arrays and torch tensors as (pointer, element count, sc_dtype_t).

No copies: the library reads and writes the array's own memory, so it must be
one contiguous block. A non-contiguous array is an error (ArgumentError, a
ValueError), not silently copied: for an in-place call a copy would take the
result and leave the caller's array unchanged.

Besides numpy arrays and torch tensors, any object with a
`__cuda_array_interface__` (CuPy, Numba, or a raw device allocation wrapped
in a small class) is taken as device memory: its pointer goes to the library
as it is (sparsecoll._staging.Direct synchronizes its stream first). The
binding never reads such memory itself.
"""
import sys

from . import _consts
from ._lib import ArgumentError, UnsupportedError, has, lib

_NUMPY = {
    "int8": _consts.SC_INT8,
    "uint8": _consts.SC_UINT8,
    "int32": _consts.SC_INT32,
    "uint32": _consts.SC_UINT32,
    "int64": _consts.SC_INT64,
    "uint64": _consts.SC_UINT64,
    "float16": _consts.SC_FLOAT16,
    "float32": _consts.SC_FLOAT32,
    "float64": _consts.SC_FLOAT64,
}
# torch dtypes by name (torch.float32 -> "float32"); bfloat16 only exists in torch.
_TORCH = dict(_NUMPY, bfloat16=_consts.SC_BFLOAT16)


def _is_torch(x):
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _is_numpy(x):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def is_cai(x):
    """An object that describes device memory by __cuda_array_interface__
    (and is not a torch tensor, which has its own path)."""
    return not _is_torch(x) and hasattr(type(x), "__cuda_array_interface__")


# __cuda_array_interface__ typestr -> sc_dtype_t (bfloat16 has no typestr).
_TYPESTR = {
    "|i1": _consts.SC_INT8,
    "|u1": _consts.SC_UINT8,
    "<i4": _consts.SC_INT32,
    "<u4": _consts.SC_UINT32,
    "<i8": _consts.SC_INT64,
    "<u8": _consts.SC_UINT64,
    "<f2": _consts.SC_FLOAT16,
    "<f4": _consts.SC_FLOAT32,
    "<f8": _consts.SC_FLOAT64,
}


def _cai(x, what):
    """(pointer, count, sc_dtype_t, read-only) from x.__cuda_array_interface__."""
    try:
        d = x.__cuda_array_interface__
        ptr, readonly = d["data"]
        shape = tuple(d["shape"])
        typestr = d["typestr"]
    except (AttributeError, KeyError, TypeError, ValueError):
        raise ArgumentError("%s: its __cuda_array_interface__ lacks data, shape or typestr" % what) from None
    typestr = typestr.replace("=", "<") if sys.byteorder == "little" else typestr
    if typestr not in _TYPESTR:
        raise ArgumentError("%s: typestr %r has no sc_dtype_t (supported: %s)"
                            % (what, typestr, ", ".join(sorted(_TYPESTR))))
    n = 1
    for s in shape:
        n *= int(s)
    size = int(typestr[2:])
    strides = d.get("strides")
    if strides is not None:
        want = size
        for dim, st in zip(reversed(shape), reversed(tuple(strides))):
            if dim > 1 and st != want:
                raise ArgumentError("%s is not C-contiguous" % what)
            want *= dim
    if d.get("mask") is not None:
        raise ArgumentError("%s: masked arrays are not supported" % what)
    return int(ptr or 0), n, _TYPESTR[typestr], bool(readonly)


def cai_stream(x):
    """The stream x's producer named (None: nothing to wait for)."""
    return x.__cuda_array_interface__.get("stream")


def dtype_of(x):
    if _is_torch(x):
        name = str(x.dtype).replace("torch.", "")
        if name not in _TORCH:
            raise ArgumentError("dtype %s has no sc_dtype_t (supported: %s)" % (x.dtype, ", ".join(sorted(_TORCH))))
        return _TORCH[name]
    if _is_numpy(x):
        name = x.dtype.name
        if name not in _NUMPY or not x.dtype.isnative:
            raise ArgumentError("dtype %s has no sc_dtype_t (supported: %s, native byte order)"
                                % (x.dtype, ", ".join(sorted(_NUMPY))))
        return _NUMPY[name]
    if is_cai(x):
        return _cai(x, "array")[2]
    raise ArgumentError("expected a numpy array or a torch tensor, got %s" % type(x).__name__)


def cuda_available():
    """True when the library reports a device runtime (sc_cuda_available():
    built with CUDA and a device is visible)."""
    return has("sc_cuda_available") and bool(lib.sc_cuda_available())


def buf(x, what, writable=False):
    """(pointer, count, sc_dtype_t) of a contiguous array or tensor."""
    if is_cai(x):
        p, n, dt, readonly = _cai(x, what)
        if writable and readonly:
            raise ArgumentError("%s is read-only" % what)
        return p, n, dt
    dt = dtype_of(x)
    if _is_torch(x):
        if x.device.type != "cpu":
            if x.device.type == "cuda" and cuda_available():
                pass
            else:
                raise UnsupportedError(
                    "%s is on %s: this libsparsecoll has no CUDA (sc_cuda_available() is 0 or "
                    "missing); move it to the CPU" % (what, x.device)
                )
        if x.is_sparse or not x.is_contiguous():
            raise ArgumentError("%s is not contiguous (call .contiguous() and use the result)" % what)
        return x.data_ptr(), x.numel(), dt
    if not x.flags.c_contiguous:
        raise ArgumentError("%s is not C-contiguous (numpy.ascontiguousarray makes a copy to use)" % what)
    if writable and not x.flags.writeable:
        raise ArgumentError("%s is read-only" % what)
    return x.ctypes.data, x.size, dt


def device_of(x):
    if is_cai(x):
        return "cuda"
    return str(x.device) if _is_torch(x) else "cpu"


def address(x):
    """The first byte of x (a key for per-buffer state)."""
    if _is_torch(x):
        return x.data_ptr()
    if is_cai(x):
        return _cai(x, "buffer")[0]
    return x.ctypes.data


def _no_alloc(x):
    if is_cai(x):
        raise ArgumentError(
            "sparsecoll allocates results only as numpy arrays and torch tensors; for a "
            "__cuda_array_interface__ input pass out= (or use torch/numpy)"
        )


def empty_like(x, n, dtype=None):
    """A new 1-D array of n elements, same kind (numpy/torch), dtype and device as x."""
    _no_alloc(x)
    if _is_torch(x):
        import torch

        return torch.empty(n, dtype=dtype or x.dtype, device=x.device)
    import numpy as np

    return np.empty(n, dtype=dtype or x.dtype)


def empty_index(x, n):
    """uint32 indices for sparse results: numpy uint32, or torch int32 holding
    the same bits (torch 1.13 has no uint32; indices are < 2**31 in practice,
    and .view(torch.int32) is documented as such)."""
    _no_alloc(x)
    if _is_torch(x):
        import torch

        return torch.empty(n, dtype=torch.int32, device=x.device)
    import numpy as np

    return np.empty(n, dtype=np.uint32)


def index_buf(ix, what):
    """Pointer and count of an index array (uint32/int32 numpy, int32 torch)."""
    if _is_torch(ix):
        import torch

        if ix.dtype != torch.int32:
            raise ArgumentError("%s must be torch.int32 (the uint32 bits), got %s" % (what, ix.dtype))
        if not ix.is_contiguous():
            raise ArgumentError("%s is not contiguous" % what)
        return ix.data_ptr(), ix.numel()
    if _is_numpy(ix):
        if ix.dtype.name not in ("uint32", "int32") or not ix.flags.c_contiguous:
            raise ArgumentError("%s must be a contiguous uint32 array, got %s" % (what, ix.dtype))
        return ix.ctypes.data, ix.size
    if is_cai(ix):
        p, n, dt, _ = _cai(ix, what)
        if dt not in (_consts.SC_UINT32, _consts.SC_INT32):
            raise ArgumentError("%s must hold uint32 (or int32) indices" % what)
        return p, n
    raise ArgumentError("%s: expected a numpy array or a torch tensor, got %s" % (what, type(ix).__name__))


def same_kind(a, b, what):
    if is_cai(a) != is_cai(b):
        raise ArgumentError("%s: mixes a __cuda_array_interface__ object with a numpy array or tensor" % what)
    if _is_torch(a) != _is_torch(b):
        raise ArgumentError("%s: mixes a numpy array and a torch tensor" % what)
    if dtype_of(a) != dtype_of(b):
        raise ArgumentError("%s: dtypes differ (%s and %s)"
                            % (what, getattr(a, "dtype", dtype_of(a)), getattr(b, "dtype", dtype_of(b))))
