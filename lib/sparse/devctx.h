/* SPDX-License-Identifier: BSD-3-Clause */
/* Device contexts of the sparse layer: what sc_topk, sc_sparse_allreduce
 * and sc_gtopk_allreduce need to work on device buffers (kernels/devrt.h):
 * a stream, an event, the top-k workspace and device and pinned host
 * scratch. As for the dense collectives (docs/CUDA.md), the stream does not
 * wait for the caller's streams: a blocking call's input is complete before
 * the call (sc_gtopk_allreduce_on_stream runs it from the progress thread
 * while the caller's stream is held, so waiting for the legacy default
 * stream here could wait for itself). sc_topk has no communicator, and a fusion object's worker
 * runs gTop-k next to the application's own calls, so the contexts are a process-wide free list: a
 * call takes one for its whole duration (the exchange included: its staging buffers must stay put)
 * and gives it back, and concurrent calls simply hold different ones. A warm call allocates
 * nothing: a context grows its buffers only when a call needs more. */
#ifndef SC_SPARSE_DEVCTX_H
#define SC_SPARSE_DEVCTX_H

#include <stddef.h>

#include "kernels/devrt.h"

typedef struct sc_spdev {
  const sc_devrt_t *rt;
  int device;
  void *stream;
  void *ev_done; /* recorded on stream: everything this call enqueued */
  void *ws;      /* device: sc_dev_topk's workspace */
  size_t ws_bytes;
  void *dbuf; /* device scratch */
  size_t dbuf_bytes;
  void *hbuf; /* pinned host staging */
  size_t hbuf_bytes;
  int timeout_ms;        /* SC_TIMEOUT_MS, for calls without a communicator */
  struct sc_spdev *next; /* the free list */
} sc_spdev_t;

/* A context of the current device (the runtime in use: sc_devrt()). */
sc_result_t sc_spdev_acquire(const char *fn, sc_spdev_t **out);
/* Gives d back when its stream is idle (ok: the last sc_spdev_sync
 * succeeded); otherwise d is dropped, buffers and all, since work may still
 * be queued on them (logged once at WARN). */
void sc_spdev_release(sc_spdev_t *d, int ok);
/* At least ws bytes of workspace, dbytes of device and hbytes of pinned
 * scratch; the stream must be idle (it is between calls). */
sc_result_t sc_spdev_reserve(sc_spdev_t *d, const char *fn, size_t ws, size_t dbytes,
                             size_t hbytes);
/* Waits, for at most timeout_ms, until everything enqueued on d's stream
 * has run. */
sc_result_t sc_spdev_sync(sc_spdev_t *d, int timeout_ms, const char *what);

/* Carves consecutive regions out of a scratch buffer, each aligned to 256
 * bytes (any dtype, and what the device's vector loads like). Pure. */
static inline void *sc_spdev_carve(void *base, size_t *off, size_t bytes) {
  char *p = base ? (char *)base + *off : NULL; /* NULL: only sum the sizes */
  *off += (bytes + 255) / 256 * 256;
  return p;
}
/* The bytes sc_spdev_carve uses for regions of these sizes. */
static inline size_t sc_spdev_span(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

#endif
