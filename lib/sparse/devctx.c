/* SPDX-License-Identifier: BSD-3-Clause */
/* The process-wide free list of sparse device contexts (lib/sparse/devctx.h). */
#include "lib/sparse/devctx.h"

#include <pthread.h>
#include <stdlib.h>

#include "lib/base/config.h"
#include "lib/base/log.h"

static pthread_mutex_t sc_spdev_lock = PTHREAD_MUTEX_INITIALIZER;
/* Contexts stay for the life of the process (reachable from here): a
 * training loop calls with the same sizes every step. */
static sc_spdev_t *sc_spdev_free;

static void sc_spdev_destroy(sc_spdev_t *d) {
  const sc_devrt_t *rt = d->rt;
  if (d->ws) rt->free_device(d->ws);
  if (d->dbuf) rt->free_device(d->dbuf);
  if (d->hbuf) rt->free_pinned(d->hbuf);
  if (d->ev_done) rt->event_destroy(d->ev_done);
  if (d->stream) rt->stream_destroy(d->stream);
  free(d);
}

static sc_result_t sc_spdev_create(const sc_devrt_t *rt, int device, const char *fn,
                                   sc_spdev_t **out) {
  sc_spdev_t *d = calloc(1, sizeof(*d));
  if (!d) return SC_ERR(SC_ERR_NOMEM, "%s: device context", fn);
  d->rt = rt;
  d->device = device;
  long t = 300000;
  if (sc_config_long("SC_TIMEOUT_MS", 1, 24L * 3600 * 1000, &t) != SC_SUCCESS) t = 300000;
  d->timeout_ms = (int)t;
  sc_result_t r = rt->stream_create(&d->stream);
  if (r == SC_SUCCESS) r = rt->event_create(&d->ev_done);
  if (r != SC_SUCCESS) {
    sc_spdev_destroy(d);
    return SC_ERR(r, "%s: device %d: stream and event of a device context: %s", fn, device,
                  sc_last_error());
  }
  *out = d;
  return SC_SUCCESS;
}

sc_result_t sc_spdev_acquire(const char *fn, sc_spdev_t **out) {
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) return SC_ERR(SC_ERR_INTERNAL, "%s: device buffers but no device runtime", fn);
  int device = rt->current_device();
  pthread_mutex_lock(&sc_spdev_lock);
  sc_spdev_t **pp = &sc_spdev_free;
  while (*pp && ((*pp)->rt != rt || (*pp)->device != device)) pp = &(*pp)->next;
  sc_spdev_t *d = *pp;
  if (d) *pp = d->next;
  pthread_mutex_unlock(&sc_spdev_lock);
  if (!d) SC_CHECK(sc_spdev_create(rt, device, fn, &d));
  d->next = NULL;
  *out = d;
  return SC_SUCCESS;
}

void sc_spdev_release(sc_spdev_t *d, int ok) {
  if (!d) return;
  if (!ok) {
    /* Freeing buffers a queued copy may still write is worse than losing them. */
    SC_WARN(SC_SUBSYS_COLL,
            "sparse device context dropped: its stream did not finish in time (%zu bytes of "
            "device and %zu of pinned memory stay allocated)",
            d->ws_bytes + d->dbuf_bytes, d->hbuf_bytes);
    return;
  }
  pthread_mutex_lock(&sc_spdev_lock);
  d->next = sc_spdev_free;
  sc_spdev_free = d;
  pthread_mutex_unlock(&sc_spdev_lock);
}

/* Grows one buffer to at least want bytes (by half again, so that slowly
 * growing sizes do not reallocate every call). */
/* Outgrown buffers stay allocated (reachable from here) for the life of the
 * process: a free synchronizes every stream of the device (cudaFree,
 * cudaFreeHost), and the stream form of gTop-k runs on a progress thread
 * while the caller's stream waits for that very thread (lib/core/stream.c):
 * freeing then would deadlock. Growth by half again bounds what is kept. */
static struct {
  void *p;
  const sc_devrt_t *rt;
  int pinned;
} * sc_spdev_retired;
static size_t sc_spdev_nretired, sc_spdev_retired_cap;

static sc_result_t sc_spdev_retire(const sc_devrt_t *rt, int pinned, void *p, const char *fn) {
  pthread_mutex_lock(&sc_spdev_lock);
  if (sc_spdev_nretired == sc_spdev_retired_cap) {
    size_t cap = sc_spdev_retired_cap ? 2 * sc_spdev_retired_cap : 16;
    void *n = realloc(sc_spdev_retired, cap * sizeof(*sc_spdev_retired));
    if (!n) {
      pthread_mutex_unlock(&sc_spdev_lock);
      return SC_ERR(SC_ERR_NOMEM, "%s: list of outgrown device buffers", fn);
    }
    sc_spdev_retired = n;
    sc_spdev_retired_cap = cap;
  }
  sc_spdev_retired[sc_spdev_nretired].p = p;
  sc_spdev_retired[sc_spdev_nretired].rt = rt;
  sc_spdev_retired[sc_spdev_nretired].pinned = pinned;
  sc_spdev_nretired++;
  pthread_mutex_unlock(&sc_spdev_lock);
  return SC_SUCCESS;
}

static sc_result_t sc_spdev_grow(const sc_devrt_t *rt, int pinned, void **p, size_t *have,
                                 size_t want, const char *fn, const char *what) {
  if (*have >= want) return SC_SUCCESS;
  size_t bytes = want + want / 2;
  if (*p) SC_CHECK(sc_spdev_retire(rt, pinned, *p, fn));
  *p = NULL;
  *have = 0;
  sc_result_t r = pinned ? rt->malloc_pinned(p, bytes) : rt->malloc_device(p, bytes);
  if (r != SC_SUCCESS) {
    *p = NULL;
    return SC_ERR(SC_ERR_NOMEM, "%s: %s of %zu bytes: %s", fn, what, bytes, sc_last_error());
  }
  *have = bytes;
  return SC_SUCCESS;
}

sc_result_t sc_spdev_reserve(sc_spdev_t *d, const char *fn, size_t ws, size_t dbytes,
                             size_t hbytes) {
  SC_CHECK(sc_spdev_grow(d->rt, 0, &d->ws, &d->ws_bytes, ws, fn, "top-k workspace"));
  SC_CHECK(sc_spdev_grow(d->rt, 0, &d->dbuf, &d->dbuf_bytes, dbytes, fn, "device scratch"));
  return sc_spdev_grow(d->rt, 1, &d->hbuf, &d->hbuf_bytes, hbytes, fn, "pinned staging");
}

sc_result_t sc_spdev_sync(sc_spdev_t *d, int timeout_ms, const char *what) {
  SC_CHECK(d->rt->event_record(d->ev_done, d->stream));
  return sc_dev_event_wait(d->rt, d->ev_done, timeout_ms, what);
}
