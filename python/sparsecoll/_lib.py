# SPDX-License-Identifier: BSD-3-Clause
"""Loading libsparsecoll with ctypes, the C prototypes, and sparsecoll.Error.

ctypes releases the GIL around every foreign call, so a blocking collective in
one Python thread does not stop the others (the torch backend relies on it).
"""
import ctypes
import os

from . import _consts

try:  # written by make / setup.py next to this file: where the library was installed
    from . import _build_config
except ImportError:  # pragma: no cover - a source tree without a build
    _build_config = None

RESULT_NAMES = {v: k for k, v in _consts.SC_RESULT_T.items()}


class Error(Exception):
    """A libsparsecoll call failed. `.code` is the sc_result_t name (for
    example "SC_ERR_INVALID_ARG"), `.result` its value, and the message is the
    library's sc_last_error() detail (what, where, which peer)."""

    def __init__(self, code, message):
        if isinstance(code, int):
            self.result = code
            code = RESULT_NAMES.get(code, "SC_ERR_UNKNOWN(%d)" % code)
        else:
            self.result = _consts.SC_RESULT_T.get(code, -1)
        self.code = code
        self.message = message
        super().__init__("%s: %s" % (code, message))


class ArgumentError(Error, ValueError):
    """A bad argument found on the Python side, before the library was called
    (a non-contiguous tensor, an unknown dtype...): code SC_ERR_INVALID_ARG.
    Also a ValueError, so both `except ValueError` and `except Error` see it."""

    def __init__(self, message):
        super().__init__("SC_ERR_INVALID_ARG", message)


class UnsupportedError(Error, TypeError):
    def __init__(self, message):
        super().__init__("SC_ERR_UNSUPPORTED", message)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * _consts.SC_UNIQUE_ID_BYTES)]


def _candidates():
    env = os.environ.get("SPARSECOLL_LIBRARY")
    if env:
        return [env]  # explicit: no fallback that could load another build
    here = os.path.dirname(os.path.abspath(__file__))
    c = [os.path.join(here, n) for n in ("libsparsecoll.so", "libsparsecoll.so.0", "libsparsecoll.dylib")]
    if _build_config is not None and getattr(_build_config, "LIBDIR", None):
        c += [os.path.join(_build_config.LIBDIR, n)
              for n in ("libsparsecoll.so.0", "libsparsecoll.so", "libsparsecoll.dylib")]
    import ctypes.util

    found = ctypes.util.find_library("sparsecoll")
    if found:
        c.append(found)
    c.append("libsparsecoll.so.0")
    return c


def _load():
    errors = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
    raise ImportError(
        "sparsecoll: cannot load libsparsecoll (set SPARSECOLL_LIBRARY=/path/to/libsparsecoll.so): "
        + "; ".join(errors)
    )


lib = _load()

_P = ctypes.c_void_p
_S = ctypes.c_size_t
_I = ctypes.c_int
_R = ctypes.c_int  # sc_result_t and every other enum: int-sized in C
_PP = ctypes.POINTER(ctypes.c_void_p)
_PS = ctypes.POINTER(ctypes.c_size_t)
_PI = ctypes.POINTER(ctypes.c_int)

_PROTOS = {
    "sc_get_version": (_I, []),
    "sc_strerror": (ctypes.c_char_p, [_R]),
    "sc_last_error": (ctypes.c_char_p, []),
    "sc_dtype_size": (_S, [_R]),
    "sc_get_unique_id": (_R, [ctypes.POINTER(UniqueId)]),
    "sc_comm_init_rank": (_R, [_PP, _I, UniqueId, _I]),
    "sc_comm_init_env": (_R, [_PP]),
    "sc_comm_split": (_R, [_P, _I, _I, _PP]),
    "sc_comm_destroy": (_R, [_P]),
    "sc_comm_abort": (_R, [_P]),
    "sc_comm_rank": (_R, [_P, _PI]),
    "sc_comm_size": (_R, [_P, _PI]),
    "sc_comm_get_async_error": (_R, [_P, _PI]),
    "sc_allreduce": (_R, [_P, _P, _S, _R, _R, _P]),
    "sc_reduce_scatter": (_R, [_P, _P, _S, _R, _R, _P]),
    "sc_allgather": (_R, [_P, _P, _S, _R, _P]),
    "sc_broadcast": (_R, [_P, _P, _S, _R, _I, _P]),
    "sc_reduce": (_R, [_P, _P, _S, _R, _R, _I, _P]),
    "sc_barrier": (_R, [_P]),
    "sc_allreduce_sym": (_R, [_P, _P, _S, _R, _R, _P]),
    "sc_allreduce_compressed": (_R, [_P, _P, _S, _R, _R, _R, _P]),
    "sc_reduce_sym": (_R, [_P, _P, _S, _R, _R, _I, _P]),
    "sc_broadcast_sym": (_R, [_P, _P, _S, _R, _I, _P]),
    "sc_onebit_create": (_R, [_S, _R, _R, _P, _PP]),
    "sc_onebit_allreduce": (_R, [_P, _P, _P]),
    "sc_onebit_destroy": (_R, [_P]),
    "sc_place_factors": (_R, [_PS, _I, _I, _R, _S, _PI]),
    "sc_alltoall": (_R, [_P, _P, _S, _R, _P]),
    "sc_alltoallv": (_R, [_P, _PS, _PS, _P, _PS, _PS, _R, _P]),
    "sc_gather": (_R, [_P, _P, _S, _R, _I, _P]),
    "sc_scatter": (_R, [_P, _P, _S, _R, _I, _P]),
    "sc_allgatherv": (_R, [_P, _S, _P, _PS, _PS, _R, _P]),
    "sc_iallreduce": (_R, [_P, _P, _S, _R, _R, _P, _PP]),
    "sc_ireduce_scatter": (_R, [_P, _P, _S, _R, _R, _P, _PP]),
    "sc_iallgather": (_R, [_P, _P, _S, _R, _P, _PP]),
    "sc_ibroadcast": (_R, [_P, _P, _S, _R, _I, _P, _PP]),
    "sc_ireduce": (_R, [_P, _P, _S, _R, _R, _I, _P, _PP]),
    "sc_ibarrier": (_R, [_P, _PP]),
    "sc_ialltoall": (_R, [_P, _P, _S, _R, _P, _PP]),
    "sc_ialltoallv": (_R, [_P, _PS, _PS, _P, _PS, _PS, _R, _P, _PP]),
    "sc_igather": (_R, [_P, _P, _S, _R, _I, _P, _PP]),
    "sc_iscatter": (_R, [_P, _P, _S, _R, _I, _P, _PP]),
    "sc_iallgatherv": (_R, [_P, _S, _P, _PS, _PS, _R, _P, _PP]),
    "sc_send": (_R, [_P, _S, _R, _I, _I, _P]),
    "sc_recv": (_R, [_P, _S, _R, _I, _I, _P]),
    "sc_isend": (_R, [_P, _S, _R, _I, _I, _P, _PP]),
    "sc_irecv": (_R, [_P, _S, _R, _I, _I, _P, _PP]),
    "sc_group_start": (_R, []),
    "sc_group_end": (_R, []),
    "sc_allreduce_algo": (_R, [_P, _S, _R, ctypes.POINTER(ctypes.c_char_p)]),
    "sc_reduce_scatter_algo": (_R, [_P, _S, _R, ctypes.POINTER(ctypes.c_char_p)]),
    "sc_allgather_algo": (_R, [_P, _S, _R, ctypes.POINTER(ctypes.c_char_p)]),
    "sc_alltoall_algo": (_R, [_P, _S, _R, ctypes.POINTER(ctypes.c_char_p)]),
    "sc_test": (_R, [_PP, _PI]),
    "sc_wait": (_R, [_PP]),
    "sc_topk": (_R, [_P, _S, _R, _S, _R, _P, _P, _PS]),
    "sc_sparse_allreduce": (_R, [_P, _P, _S, _S, _S, _R, _R, _P, _P, _PS, _P]),
    "sc_ef_create": (_R, [_S, _R, _PP]),
    "sc_ef_destroy": (_R, [_P]),
    "sc_gtopk_allreduce": (_R, [_P, _S, _R, _S, _R, _P, _P]),
    "sc_lowrank_create": (_R, [_S, _S, _R, _I, _R, _I, ctypes.c_uint64, _PP]),
    "sc_lowrank_destroy": (_R, [_P]),
    "sc_lowrank_allreduce": (_R, [_P, _P, _P]),
    "sc_sparse_algo_name": (_R, [_R, ctypes.POINTER(ctypes.c_char_p)]),
    "sc_fusion_policy_name": (_R, [_R, ctypes.POINTER(ctypes.c_char_p)]),
    # Optional (a newer library or a CUDA build): looked up, not required.
    "sc_cuda_available": (_I, []),
    # The stream forms: the plain form's arguments, then an sc_stream_t.
    "sc_allreduce_on_stream": (_R, [_P, _P, _S, _R, _R, _P, _P]),
    "sc_reduce_scatter_on_stream": (_R, [_P, _P, _S, _R, _R, _P, _P]),
    "sc_allgather_on_stream": (_R, [_P, _P, _S, _R, _P, _P]),
    "sc_broadcast_on_stream": (_R, [_P, _P, _S, _R, _I, _P, _P]),
    "sc_reduce_on_stream": (_R, [_P, _P, _S, _R, _R, _I, _P, _P]),
    "sc_alltoall_on_stream": (_R, [_P, _P, _S, _R, _P, _P]),
    "sc_alltoallv_on_stream": (_R, [_P, _PS, _PS, _P, _PS, _PS, _R, _P, _P]),
    "sc_gather_on_stream": (_R, [_P, _P, _S, _R, _I, _P, _P]),
    "sc_scatter_on_stream": (_R, [_P, _P, _S, _R, _I, _P, _P]),
    "sc_allgatherv_on_stream": (_R, [_P, _S, _P, _PS, _PS, _R, _P, _P]),
    "sc_gtopk_allreduce_on_stream": (_R, [_P, _S, _R, _S, _R, _P, _P, _P]),
}

for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name, None)
    if _f is not None:
        _f.restype = _res
        _f.argtypes = _args


def has(name):
    return getattr(lib, name, None) is not None


def last_error():
    d = lib.sc_last_error()
    return d.decode("utf-8", "replace") if d else ""


def enum_names(fn, enum):
    """{name: value} for every value of a C enum (a dict of _consts), each
    named as the library's fn (sc_sparse_algo_name, sc_fusion_policy_name)
    names it: the package keeps no list of names of its own."""
    out = {}
    for value in sorted(set(enum.values())):
        name = ctypes.c_char_p()
        check(fn(value, ctypes.byref(name)), fn.__name__)
        out[name.value.decode("ascii")] = value
    return out


def check(r, what=None):
    """Raises Error for a failed sc_result_t; returns r otherwise."""
    if r == _consts.SC_SUCCESS or r == _consts.SC_IN_PROGRESS:
        return r
    detail = last_error()
    if not detail:
        detail = lib.sc_strerror(r).decode("utf-8", "replace")
        if what:
            detail = "%s: %s" % (what, detail)
    raise Error(r, detail)
