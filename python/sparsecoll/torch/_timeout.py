# SPDX-License-Identifier: BSD-3-Clause
"""Work.wait(timeout): torch passes a datetime.timedelta (timedelta(0), its
kNoTimeout, means none); the library's own SC_TIMEOUT_MS still bounds every
operation. A wait that runs out raises WaitTimeout and leaves the operation
in flight: a later wait() takes its result, as on gloo."""
import datetime
import time

from .._lib import ArgumentError, Error


class WaitTimeout(Error, RuntimeError):
    """Work.wait(timeout) ran out before the operation finished: code
    SC_ERR_TIMEOUT. Also a RuntimeError, what gloo's Work raises."""

    def __init__(self, message):
        super().__init__("SC_ERR_TIMEOUT", message)


def seconds(timeout):
    """timeout (None, a timedelta or a number of seconds) -> seconds, or None
    for no limit."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        s = float(timeout)
    else:
        raise ArgumentError("Work.wait: timeout must be a datetime.timedelta or seconds, got %r" % (timeout,))
    if s < 0:
        raise ArgumentError("Work.wait: timeout %r is negative" % (timeout,))
    return s if s > 0 else None


def expired(what, s):
    return WaitTimeout("%s did not finish within Work.wait's timeout of %.3f s; it is still in flight "
                       "(wait() again for its result)" % (what, s))


def poll_until(done, s, what):
    """Polls done() until it is true or s seconds passed (then raises
    WaitTimeout); s None: returns at once, the caller's own wait blocks."""
    if s is None:
        return
    end = time.monotonic() + s
    pause = 0.0005
    while not done():
        left = end - time.monotonic()
        if left <= 0:
            raise expired(what, s)
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.01)
