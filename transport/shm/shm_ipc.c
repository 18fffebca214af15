/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport, device memory: ranks of one host move device
 * buffers device to device through the device runtime's IPC (kernels/devrt.h),
 * never through host memory.
 *
 * The sender writes a DEV record: the offset of buf in its allocation, the
 * allocation's IPC handle and size. It asks the runtime for the handle on
 * every message: a handle cached by address would outlive a buffer that was
 * freed and reallocated at the same address (with the same size, too),
 * and the receiver would then read the old allocation, which its open
 * mapping keeps alive. The runtime's answer differs per allocation, so the
 * receiver's cache, keyed by (peer, handle bytes), opens each allocation
 * once: opening is the expensive step (milliseconds with CUDA).
 *
 * The receiver bounds everything it read against what it opened (the span
 * lies in the mapping as mem_range reports it), copies on the transport's
 * one stream and records an event from a pool; copies end in stream order,
 * so the oldest is the only one to look at. When it has ended the receive
 * completes and the channel's dev_done counter tells the sender its send
 * did. Nothing here assumes a device per process: several processes may
 * share one device (each maps the others' allocations on it), and the
 * sender's buffer must hold its bytes when isend is called (the copy runs
 * in another process, ordered with nothing of the sender's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/shm/shm_internal.h"

/* ---- pure parts ---- */

uint64_t sc_shm_ipc_key(const sc_dev_ipc_handle_t *h) {
  return sc_shm_fnv1a(h->bytes, sizeof(h->bytes), 0xcbf29ce484222325ull);
}

int sc_shm_ipc_find(const sc_shm_ipc_entry_t *c, int n, int peer, const sc_dev_ipc_handle_t *h,
                    uint64_t key) {
  for (int i = 0; i < n; i++)
    if (c[i].peer == peer && c[i].key == key &&
        memcmp(c[i].h.bytes, h->bytes, sizeof(h->bytes)) == 0)
      return i;
  return -1;
}

int sc_shm_ipc_victim(const sc_shm_ipc_entry_t *c, int n) {
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (c[i].peer < 0) return i;
    if (c[i].refs == 0 && (best < 0 || c[i].last_use < c[best].last_use)) best = i;
  }
  return best;
}

int sc_shm_dev_span_ok(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

int sc_shm_blob_pair_device(const sc_shm_blob_t *a, const sc_shm_blob_t *b) {
  return (a->caps & SC_SHM_CAP_DEVICE) && (b->caps & SC_SHM_CAP_DEVICE) && a->pid != b->pid;
}

/* ---- setup and teardown ---- */

sc_result_t sc_shm_dev_init(sc_shm_transport_t *tp, const char *what) {
  if (tp->dev) return SC_SUCCESS;
  const sc_devrt_t *rt = sc_devrt();
  if (!rt)
    return SC_ERR(SC_ERR_UNSUPPORTED, "shm %s: a device buffer, but rank %d has no device runtime",
                  what, tp->base.rank);
  sc_shm_dev_t *d = calloc(1, sizeof(*d));
  if (!d) return SC_ERR(SC_ERR_NOMEM, "shm %s: device copy state", what);
  d->rt = rt;
  for (int i = 0; i < SC_SHM_IPC_CACHE; i++) d->cache[i].peer = -1;
  sc_result_t r = rt->stream_create(&d->stream);
  for (int i = 0; i < SC_SHM_DEV_COPIES && r == SC_SUCCESS; i++)
    r = rt->event_create(&d->copies[i].event);
  tp->dev = d; /* destroy releases what was made, even after a failure */
  if (r != SC_SUCCESS) {
    char detail[SC_ERRMSG_MAX];
    sc_error_get_detail(detail, sizeof(detail));
    sc_shm_dev_destroy(tp);
    return SC_ERR(r, "shm %s: rank %d: device stream and %d events for IPC copies: %s", what,
                  tp->base.rank, SC_SHM_DEV_COPIES, detail);
  }
  SC_INFO(SC_SUBSYS_SHM,
          "shm: rank %d: device IPC path ready (%s, %d copies in flight, %d "
          "open peer allocations at most)",
          tp->base.rank, rt->name, SC_SHM_DEV_COPIES, SC_SHM_IPC_CACHE);
  return SC_SUCCESS;
}

static void close_entry(sc_shm_dev_t *d, sc_shm_ipc_entry_t *e) {
  if (e->peer < 0) return;
  if (sc_dev_ipc_close(d->rt, &e->h, e->base) != SC_SUCCESS) {
    char detail[SC_ERRMSG_MAX];
    sc_error_get_detail(detail, sizeof(detail));
    SC_WARN(SC_SUBSYS_SHM, "shm: closing rank %d's device allocation at %p: %s", e->peer, e->base,
            detail);
  }
  e->peer = -1;
  e->refs = 0;
  e->base = NULL;
}

int sc_shm_dev_inflight(const sc_shm_transport_t *tp) {
  return tp->dev ? (int)tp->dev->count : 0;
}

int sc_shm_dev_copy_free(const sc_shm_transport_t *tp) {
  return tp->dev && tp->dev->count < SC_SHM_DEV_COPIES;
}

/* The oldest copy leaves the ring (its request is the caller's business). */
static sc_shm_dev_copy_t *pop_copy(sc_shm_transport_t *tp) {
  sc_shm_dev_t *d = tp->dev;
  sc_shm_dev_copy_t *c = &d->copies[d->head];
  d->head = (d->head + 1) % SC_SHM_DEV_COPIES;
  d->count--;
  if (c->entry >= 0) d->cache[c->entry].refs--;
  tp->peers[c->peer].ncopy--;
  tp->npending--;
  return c;
}

/* Wait for the oldest copies to end (at most timeout_ms), then let every
 * copy go; finish: fail their requests with why (destroy does not touch
 * requests). */
static void drain(sc_shm_transport_t *tp, sc_result_t why, int timeout_ms, int finish) {
  sc_shm_dev_t *d = tp->dev;
  if (!d) return;
  int64_t deadline = sc_now_ms() + timeout_ms;
  while (d->count > 0) {
    sc_shm_dev_copy_t *c = &d->copies[d->head];
    int done = 0;
    if (d->rt->event_query(c->event, &done) != SC_SUCCESS) done = 1; /* the copy is over */
    if (!done && sc_now_ms() <= deadline) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
      continue;
    }
    if (!done)
      SC_WARN(SC_SUBSYS_SHM,
              "shm: rank %d: a device copy from rank %d still runs after %d ms; its receive is "
              "failed anyway",
              tp->base.rank, c->peer, timeout_ms);
    sc_tp_req_t *r = c->req;
    pop_copy(tp);
    if (finish) sc_shm_req_finish(r, SC_TP_REQ_ERROR, why);
  }
}

void sc_shm_dev_cancel(sc_shm_transport_t *tp, sc_result_t why, int timeout_ms) {
  drain(tp, why, timeout_ms, 1);
}

void sc_shm_dev_destroy(sc_shm_transport_t *tp) {
  sc_shm_dev_t *d = tp->dev;
  if (!d) return;
  drain(tp, SC_ERR_ABORTED, tp->timeout_ms, 0);
  for (int i = 0; i < SC_SHM_IPC_CACHE; i++) close_entry(d, &d->cache[i]);
  for (int i = 0; i < SC_SHM_DEV_COPIES; i++)
    if (d->copies[i].event) d->rt->event_destroy(d->copies[i].event);
  if (d->stream) d->rt->stream_destroy(d->stream);
  SC_INFO(SC_SUBSYS_SHM, "shm: rank %d: %llu peer allocations opened, %llu closed early",
          tp->base.rank, (unsigned long long)d->opens, (unsigned long long)d->evictions);
  free(d);
  tp->dev = NULL;
}

/* ---- send side ---- */

sc_result_t sc_shm_dev_encode(sc_shm_transport_t *tp, const sc_tp_req_t *r,
                              uint8_t rec[SC_SHM_REC_LEN + SC_SHM_DEV_EXT_LEN]) {
  const sc_devrt_t *rt = tp->dev->rt;
  sc_dev_ipc_handle_t h;
  memset(&h, 0, sizeof(h));
  uint64_t off = 0, size = 0, obase = 0;
  if (r->len > 0) {
    void *base = NULL;
    size_t bytes = 0;
    char detail[SC_ERRMSG_MAX];
    if (rt->mem_range(r->buf, &base, &bytes) != SC_SUCCESS) {
      sc_error_get_detail(detail, sizeof(detail));
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "shm isend to %s: %p (%zu bytes) is not device memory of rank %d: %s",
                    tp->peers[r->peer].name, (void *)r->buf, r->len, tp->base.rank, detail);
    }
    off = (uint64_t)(r->buf - (uint8_t *)base);
    size = bytes;
    obase = (uint64_t)(uintptr_t)base;
    if (!sc_shm_dev_span_ok(off, r->len, size))
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "shm isend to %s: %zu bytes at offset %llu run past their %zu-byte device "
                    "allocation",
                    tp->peers[r->peer].name, r->len, (unsigned long long)off, bytes);
    if (rt->ipc_get(base, &h) != SC_SUCCESS) {
      sc_error_get_detail(detail, sizeof(detail));
      return SC_ERR(SC_ERR_SYSTEM, "shm isend to %s: IPC handle of device allocation %p: %s",
                    tp->peers[r->peer].name, base, detail);
    }
  }
  sc_shm_rec_encode(rec, SC_SHM_REC_DEV, r->len, off, r->fp);
  memcpy(rec + SC_SHM_REC_LEN, h.bytes, SC_DEV_IPC_HANDLE_BYTES);
  memcpy(rec + SC_SHM_REC_LEN + SC_DEV_IPC_HANDLE_BYTES, &size, 8);
  memcpy(rec + SC_SHM_REC_LEN + SC_DEV_IPC_HANDLE_BYTES + 8, &obase, 8);
  return SC_SUCCESS;
}

/* A device send leaves only its record (and handle) in the ring, then waits
 * for the receiver's copy; a buffer that has no handle fails the send. */
sc_result_t sc_shm_dev_send(sc_shm_transport_t *tp, sc_shm_peer_t *p, sc_tp_req_t *r, int *moved) {
  sc_shm_ring_rewind(&p->tx);
  uint64_t room = sc_shm_ring_space(&p->tx, SC_SHM_REC_LEN + SC_SHM_DEV_EXT_LEN);
  if (room == (uint64_t)-1) return sc_shm_peer_fail(tp, p, "corrupted its ring's head counter");
  if (room < SC_SHM_REC_LEN + SC_SHM_DEV_EXT_LEN) return SC_SUCCESS;
  uint8_t rec[SC_SHM_REC_LEN + SC_SHM_DEV_EXT_LEN];
  sc_result_t res = sc_shm_dev_encode(tp, r, rec);
  sc_shm_q_pop(&p->sq_head, &p->sq_tail);
  p->nsend--;
  if (res != SC_SUCCESS) {
    tp->npending--;
    sc_shm_req_finish(r, SC_TP_REQ_ERROR, res);
    return res;
  }
  sc_shm_ring_put(&p->tx, rec, sizeof(rec));
  r->u.shm.rec_done = 1;
  r->u.shm.ticket = ++p->dev_sent;
  sc_shm_q_push(&p->dq_head, &p->dq_tail, r);
  p->ndev++;
  *moved = 1;
  return SC_SUCCESS;
}

/* Device sends whose receiver's copy ended (dev_done) complete. */
sc_result_t sc_shm_dev_acks(sc_shm_transport_t *tp, sc_shm_peer_t *p, int *moved) {
  uint64_t done = __atomic_load_n(&p->tx.ctl->dev_done, __ATOMIC_ACQUIRE);
  if (done > p->dev_sent)
    return sc_shm_peer_fail(tp, p, "acknowledged %llu device messages of %llu sent",
                            (unsigned long long)done, (unsigned long long)p->dev_sent);
  while (p->dq_head && p->dq_head->u.shm.ticket <= done) {
    sc_tp_req_t *r = sc_shm_q_pop(&p->dq_head, &p->dq_tail);
    p->ndev--;
    tp->npending--;
    sc_shm_req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
    *moved = 1;
  }
  return SC_SUCCESS;
}

/* ---- receive side ---- */

/* The opened entry of the peer's allocation: from the cache, or opened now
 * in place of the least recently used one. -1 with the peer failed. */
static int open_entry(sc_shm_transport_t *tp, sc_shm_peer_t *p, const sc_dev_ipc_handle_t *h,
                      uint64_t claimed, uint64_t obase, sc_result_t *res) {
  sc_shm_dev_t *d = tp->dev;
  int peer = (int)(p - tp->peers);
  uint64_t key = sc_shm_ipc_key(h);
  int i = sc_shm_ipc_find(d->cache, SC_SHM_IPC_CACHE, peer, h, key);
  if (i >= 0) return i;
  i = sc_shm_ipc_victim(d->cache, SC_SHM_IPC_CACHE);
  if (i < 0) { /* cannot happen: more entries than copies in flight */
    *res = SC_ERR(SC_ERR_INTERNAL, "shm: rank %d: every cached device mapping is in use",
                  tp->base.rank);
    return -1;
  }
  sc_shm_ipc_entry_t *e = &d->cache[i];
  if (e->peer >= 0) {
    d->evictions++;
    close_entry(d, e);
  }
  void *base = NULL, *b2 = NULL;
  size_t size = 0;
  char detail[SC_ERRMSG_MAX];
  if (sc_dev_ipc_open(d->rt, h, (int64_t)p->pid, obase, claimed, &base) != SC_SUCCESS) {
    sc_error_get_detail(detail, sizeof(detail));
    /* Typically the peer's device is not visible in this process. */
    *res = sc_shm_peer_fail(tp, p,
                            "sent a device handle this rank cannot open (is its device visible "
                            "here? CUDA_VISIBLE_DEVICES): %.100s",
                            detail);
    return -1;
  }
  if (d->rt->mem_range(base, &b2, &size) != SC_SUCCESS || b2 != base) {
    /* A runtime that cannot size an imported mapping: the sender's own
     * answer (already checked against the span) is all there is. */
    if (!d->claims_logged++)
      SC_INFO(SC_SUBSYS_SHM,
              "shm: rank %d: the device runtime does not size imported allocations; spans are "
              "checked against the sizes the senders report",
              tp->base.rank);
    size = (size_t)claimed;
  }
  d->opens++;
  e->peer = peer;
  e->refs = 0;
  e->key = key;
  e->h = *h;
  e->base = base;
  e->size = size;
  SC_TRACE(SC_SUBSYS_SHM, "shm: rank %d opened %s's %zu-byte device allocation at %p",
           tp->base.rank, p->name, size, base);
  return i;
}

sc_result_t sc_shm_dev_start(sc_shm_transport_t *tp, sc_shm_peer_t *p, const sc_shm_rec_t *h,
                             const uint8_t ext[SC_SHM_DEV_EXT_LEN]) {
  sc_shm_dev_t *d = tp->dev;
  sc_tp_req_t *r = p->rq_head;
  sc_dev_ipc_handle_t hd;
  uint64_t size, obase;
  memcpy(hd.bytes, ext, SC_DEV_IPC_HANDLE_BYTES);
  memcpy(&size, ext + SC_DEV_IPC_HANDLE_BYTES, 8);
  memcpy(&obase, ext + SC_DEV_IPC_HANDLE_BYTES + 8, 8);
  int entry = -1;
  if (r->len > 0) {
    /* The sender's own claim first: garbage never reaches ipc_open. */
    if (!sc_shm_dev_span_ok(h->addr, r->len, size))
      return sc_shm_peer_fail(tp, p,
                              "sent garbage: a device message of %zu bytes at offset %llu of a "
                              "%llu-byte allocation",
                              r->len, (unsigned long long)h->addr, (unsigned long long)size);
    sc_result_t res = SC_SUCCESS;
    entry = open_entry(tp, p, &hd, size, obase, &res);
    if (entry < 0) return res;
    sc_shm_ipc_entry_t *e = &d->cache[entry];
    if (!sc_shm_dev_span_ok(h->addr, r->len, e->size))
      return sc_shm_peer_fail(tp, p,
                              "sent garbage: a device message of %zu bytes at offset %llu of an "
                              "allocation that has %zu bytes here",
                              r->len, (unsigned long long)h->addr, e->size);
    e->last_use = ++d->clock;
    const uint8_t *src = (const uint8_t *)e->base + h->addr;
    if (d->rt->memcpy_async(r->buf, src, r->len, d->stream) != SC_SUCCESS) {
      char detail[SC_ERRMSG_MAX];
      sc_error_get_detail(detail, sizeof(detail));
      return sc_shm_peer_fail(tp, p, "has a device message this rank cannot copy: %.120s", detail);
    }
  }
  /* An empty message takes a slot too: its acknowledgement must not pass
   * those of the copies before it. */
  sc_shm_dev_copy_t *c = &d->copies[(d->head + d->count) % SC_SHM_DEV_COPIES];
  if (d->rt->event_record(c->event, d->stream) != SC_SUCCESS) {
    char detail[SC_ERRMSG_MAX];
    sc_error_get_detail(detail, sizeof(detail));
    return sc_shm_peer_fail(tp, p, "has a device message whose copy this rank cannot track: %.120s",
                            detail);
  }
  if (entry >= 0) d->cache[entry].refs++;
  c->req = r;
  c->peer = (int)(p - tp->peers);
  c->entry = entry;
  d->count++;
  /* From the peer's receive queue to the copies (still pending). */
  sc_shm_q_pop(&p->rq_head, &p->rq_tail);
  r->u.shm.next = NULL;
  p->nrecv--;
  p->ncopy++;
  return SC_SUCCESS;
}

sc_result_t sc_shm_dev_poll(sc_shm_transport_t *tp, int *moved) {
  sc_shm_dev_t *d = tp->dev;
  sc_result_t res = SC_SUCCESS;
  while (d && d->count > 0) {
    sc_shm_dev_copy_t *c = &d->copies[d->head];
    int done = 0;
    sc_result_t q = d->rt->event_query(c->event, &done);
    if (q == SC_SUCCESS && !done) break;
    sc_shm_peer_t *p = &tp->peers[c->peer];
    sc_tp_req_t *r = c->req;
    pop_copy(tp);
    *moved = 1;
    if (q != SC_SUCCESS) {
      char detail[SC_ERRMSG_MAX];
      sc_error_get_detail(detail, sizeof(detail));
      sc_shm_req_finish(r, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
      sc_result_t f =
          p->dead ? SC_ERR(SC_ERR_REMOTE, "%s", sc_shm_peer_err(p))
                  : sc_shm_peer_fail(tp, p, "had its device message's copy fail: %.120s", detail);
      if (res == SC_SUCCESS) res = f;
      continue;
    }
    if (p->dead) {
      /* The peer failed while its message was copied: no acknowledgement. */
      sc_shm_req_finish(r, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
      continue;
    }
    p->dev_recvd++;
    __atomic_store_n(&p->rx.ctl->dev_done, p->dev_recvd, __ATOMIC_RELEASE);
    sc_shm_wake_peer(tp, p);
    sc_shm_req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
  }
  return res;
}
