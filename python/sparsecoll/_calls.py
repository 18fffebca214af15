# SPDX-License-Identifier: BSD-3-Clause
"""What every collective wrapper does with its arguments before the call:
element counts without a pointer, and the host stand-ins of staged CUDA
tensors (returned to the pool when the arguments turn out wrong)."""
import contextlib

from . import _staging
from ._buf import buf, same_kind


def count(x, what):
    """Element count without taking a pointer (CUDA tensors are staged later)."""
    if hasattr(x, "numel") and callable(x.numel):
        return x.numel()
    return buf(x, what)[1]


@contextlib.contextmanager
def aborting(st):
    """Returns st's blocks to the pool when the arguments turn out wrong."""
    try:
        yield
    except BaseException:
        if st is not None:
            st.abort()
        raise


def stage_pair(x, out):
    """Host stand-ins for an in-place (out None) or out-of-place call."""
    st = _staging.for_tensors(x, out)
    if st is None:
        return None, x, out
    try:
        if out is None:
            return st, st.inout(x), None
        same_kind(x, out, "out")
        return st, st.input(x), st.output(out, "out")
    except BaseException:
        st.abort()
        raise


def stage_in_out(x, out):
    """Host stand-ins for a call that reads x and writes out (either None
    where this rank's part of the call has no such buffer: off the root)."""
    st = _staging.for_tensors(x, out)
    if st is None:
        return None, x, out
    try:
        if x is not None and out is not None:
            same_kind(x, out, "out")
        return (st, None if x is None else st.input(x),
                None if out is None else st.output(out, "out"))
    except BaseException:
        st.abort()
        raise
