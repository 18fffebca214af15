# SPDX-License-Identifier: BSD-3-Clause
"""The worker thread behind the DDP hooks' states: a communicator of its own
(split from the process group's at construction, a collective) and a queue of
buckets that one thread reduces in order, so that backward keeps running while
a bucket is reduced and nothing the hook issues can interleave differently on
different ranks with the group's other work."""
import atexit
import collections
import threading
import weakref

import torch
import torch.distributed as dist

from .._lib import ArgumentError
from .._staging import sync_current


def group_comm(process_group, what):
    """The sparsecoll communicator of a process group (None: the default)."""
    pg = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
    comm = getattr(pg, "comm", None)
    if comm is None:
        raise ArgumentError("%s: the process group must be a 'sparsecoll' one (got %s)" % (what, type(pg).__name__))
    return comm


class HookWorker:
    """Subclasses implement _reduce(item) for what submit() queued; the
    future of each item gets _reduce's result or its exception."""

    def _start_worker(self, comm, name):
        self.comm = comm.split(0, comm.rank)
        self._q = collections.deque()
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        # A state nobody closed (the usual case: it lives as long as the
        # model) is closed before the interpreter tears down: a worker thread
        # still parked in the queue and an open communicator at finalization
        # made processes abort at exit ("terminate called without an active
        # exception") after a successful run.
        atexit.register(_close_ref, weakref.ref(self))

    def _run(self):
        while True:
            with self._cv:
                while not self._q:
                    self._cv.wait()
                item = self._q.popleft()
            if item is None:
                return
            fut, work = item
            try:
                fut.set_result(self._reduce(work))
            except BaseException as e:  # reaches backward() through the future
                fut.set_exception(e)

    def submit(self, work):
        fut = torch.futures.Future()
        with self._cv:
            self._q.append((fut, work))
            self._cv.notify()
        return fut

    def close(self):
        """Stops the worker thread and frees the communicator (idempotent)."""
        if getattr(self, "_thread", None) is None:
            return
        with self._cv:
            self._q.append(None)
            self._cv.notify()
        self._thread.join()
        self._thread = None
        self._close_states()
        self.comm.close()

    def _close_states(self):
        pass


def _close_ref(ref):
    state = ref()
    if state is not None:
        state.close()


def bucket_tensor(bucket):
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def sync_device(t):
    if t.device.type != "cpu":
        # The worker thread reads device memory outside the stream order.
        sync_current(t.device)
