/* SPDX-License-Identifier: BSD-3-Clause */
/* Fusion with device tensors (docs/CUDA.md, "Fusion with device tensors"):
 * the fused buffers live on the device, the copies into and out of them are
 * asynchronous copies on one stream of the fusion object, and buckets launch
 * exactly as with host tensors (in plan order; the collective itself takes
 * the device buffers, but for the compressed modes other than gTop-k, whose
 * buckets the worker stages through one host image). A ready call returns
 * once its copy is done, as the host path's memcpy does, so a launch never
 * waits on the device. */
#include <stdlib.h>

#include "lib/base/log.h"
#include "lib/core/device.h"
#include "lib/fusion/fusion.h"

sc_result_t sc_fusion_dev_kind(sc_fusion_t *f, void *buf, const char *fn) {
  const void *bufs[1] = {buf};
  static const char *const names[1] = {"buf"};
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_buffers_kind(fn, 1, bufs, names, &kind));
  int dev = kind == SC_MEM_DEVICE;
  if (f->nt == 0) {
    f->device = dev;
  } else if (dev != f->device) {
    /* One collective carries a bucket; it cannot take host and device memory. */
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: tensor %zu is %s memory, but the tensors before it are %s memory: all "
                  "tensors of a fusion object must be one memory kind",
                  fn, f->nt, dev ? "device" : "host", f->device ? "device" : "host");
  }
  return SC_SUCCESS;
}

sc_result_t sc_fusion_dev_start(sc_fusion_t *f) {
  f->rt = sc_devrt();
  if (!f->rt)
    return SC_ERR(SC_ERR_INTERNAL, "sc_fusion_plan: device tensors but no device runtime");
  pthread_mutex_init(&f->dlock, NULL);
  f->dlock_init = 1;
  sc_result_t r = f->rt->stream_create(&f->dstream);
  if (r == SC_SUCCESS) r = f->rt->event_create(&f->dev_in);
  if (r == SC_SUCCESS) r = f->rt->event_create(&f->dev_done);
  return r;
}

void sc_fusion_dev_stop(sc_fusion_t *f) {
  if (!f->device || !f->rt) return;
  if (f->dev_in) f->rt->event_destroy(f->dev_in);
  if (f->dev_done) f->rt->event_destroy(f->dev_done);
  if (f->dstream) f->rt->stream_destroy(f->dstream);
  if (f->dlock_init) pthread_mutex_destroy(&f->dlock);
  free(f->hstage);
  f->hstage = NULL;
}

sc_result_t sc_fusion_dev_alloc(sc_fusion_t *f, size_t bytes, char **buf) {
  void *p = NULL;
  *buf = NULL;
  if (f->rt->malloc_device(&p, bytes ? bytes : 1) != SC_SUCCESS)
    return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: fused device buffer of %zu bytes: %s", bytes,
                  sc_last_error());
  *buf = p;
  return sc_fusion_dev_fill(f, p, NULL, bytes);
}

void sc_fusion_dev_free(sc_fusion_t *f, void *buf) {
  if (buf) f->rt->free_device(buf);
}

/* Lock dlock held. */
static sc_result_t dev_sync(sc_fusion_t *f, const char *what) {
  SC_CHECK(f->rt->event_record(f->dev_done, f->dstream));
  return sc_dev_event_wait(f->rt, f->dev_done, f->timeout_ms, what);
}

/* bytes from src (NULL: zeros) to dst on the fusion's stream, waited for;
 * after_caller: behind the work the caller queued on the default stream. */
static sc_result_t dev_copy(sc_fusion_t *f, void *dst, const void *src, size_t bytes,
                            int after_caller, const char *what) {
  const sc_devrt_t *rt = f->rt;
  pthread_mutex_lock(&f->dlock);
  sc_result_t r = SC_SUCCESS;
  if (after_caller) r = rt->event_record(f->dev_in, NULL);
  if (after_caller && r == SC_SUCCESS) r = rt->stream_wait_event(f->dstream, f->dev_in);
  if (r == SC_SUCCESS && bytes)
    r = src ? rt->memcpy_async(dst, src, bytes, f->dstream)
            : rt->memset_async(dst, 0, bytes, f->dstream);
  if (r == SC_SUCCESS) r = dev_sync(f, what);
  pthread_mutex_unlock(&f->dlock);
  return r;
}

sc_result_t sc_fusion_dev_fill(sc_fusion_t *f, void *dst, const void *src, size_t bytes) {
  return dev_copy(f, dst, src, bytes, 1, "fusion: a tensor's copy into its fused buffer");
}

sc_result_t sc_fusion_dev_out(sc_fusion_t *f, const sc_fbucket_t *b) {
  if (b->zero_copy) return SC_SUCCESS;
  pthread_mutex_lock(&f->dlock);
  sc_result_t r = SC_SUCCESS;
  for (size_t l = b->first; l < b->last && r == SC_SUCCESS; l++)
    r = f->rt->memcpy_async(f->t[l].buf, b->buf + f->t[l].offset, f->t[l].bytes, f->dstream);
  if (r == SC_SUCCESS) r = dev_sync(f, "fusion: a bucket's results into its tensors");
  pthread_mutex_unlock(&f->dlock);
  return r;
}

sc_result_t sc_fusion_dev_stage(sc_fusion_t *f, size_t bytes) {
  if (bytes <= f->hstage_bytes && f->hstage) return SC_SUCCESS;
  char *p = realloc(f->hstage, bytes ? bytes : 1);
  if (!p) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: a host image of %zu bytes", bytes);
  f->hstage = p;
  f->hstage_bytes = bytes;
  return SC_SUCCESS;
}

sc_result_t sc_fusion_dev_copy(sc_fusion_t *f, void *dst, const void *src, size_t bytes,
                               const char *what) {
  return bytes ? dev_copy(f, dst, src, bytes, 0, what) : SC_SUCCESS;
}
