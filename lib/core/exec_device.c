/* SPDX-License-Identifier: BSD-3-Clause */
/* See exec_device.h. The rules that keep the device path correct without a
 * host thread ever touching device memory:
 * - Local steps go on the one stream, so they run in step order among
 *   themselves and with the staging copies.
 * - A staged send reads its source only through copies on the stream, so a
 *   later step may overwrite the source once all of the send's copies are
 *   enqueued (they run first). A direct send's transport reads the device
 *   memory on its own: the stream must be idle before it is posted, and
 *   nothing may overwrite the source until it completes.
 * - A direct receive's transport writes device memory on its own: the stream
 *   must be idle before it is posted (no enqueued step still reads or writes
 *   the destination).
 * - Every wait keeps the transport and the staging rings moving (a rank must
 *   not stop serving its peers while it waits for its own copies), and is
 *   bounded by the no-progress deadline and interrupted by abort. */
#include "lib/core/exec_device.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/clock.h"
#include "lib/base/config.h"
#include "lib/base/log.h"
#include "lib/core/device.h"

#define SC_DSEND_MIN 256
#define SC_NONE      ((size_t)-1)

/* ---- state ---- */

static sc_result_t dev_read_settings(struct sc_exec_dev *d) {
  /* lib/base/config.c's table holds the defaults (SC_STAGE_CHUNK_DEFAULT and
   * SC_STAGE_SLOTS_DEFAULT repeat them for the unit tests). */
  SC_CHECK(sc_parse_size("SC_STAGE_CHUNK_BYTES", sc_config_get("SC_STAGE_CHUNK_BYTES"), 1,
                         (size_t)1 << 30, &d->chunk));
  long slots = SC_STAGE_SLOTS_DEFAULT;
  SC_CHECK(sc_parse_long("SC_STAGE_SLOTS", sc_config_get("SC_STAGE_SLOTS"), 1, SC_STAGE_SLOTS_MAX,
                         &slots));
  d->nslots = (uint32_t)slots;
  return SC_SUCCESS;
}

/* Between operations: every slot free, no queue. */
static void ring_reset(struct sc_exec_dev *d, sc_stage_xring_t *x) {
  sc_stage_ring_init(&x->r, d->nslots);
  memset(x->done, 0, sizeof(x->done));
  for (uint32_t s = 0; s < SC_STAGE_SLOTS_MAX; s++) x->slots[s].state = SC_SLOT_FREE;
  x->qhead = x->qtail = SC_NONE;
}

static sc_result_t dev_create(sc_comm_t *comm, const sc_devrt_t *rt, int device,
                              struct sc_exec_dev **out) {
  struct sc_exec_dev *d = calloc(1, sizeof(*d));
  if (!d) return SC_ERR(SC_ERR_NOMEM, "device executor state");
  d->rt = rt;
  d->device = device;
  d->timeout_ms = comm->cfg.timeout_ms;
  d->nranks = comm->nranks;
  sc_result_t r = dev_read_settings(d);
  if (r == SC_SUCCESS && !(d->direct = calloc((size_t)comm->nranks, 1)))
    r = SC_ERR(SC_ERR_NOMEM, "device executor peers");
  if (r == SC_SUCCESS && !(d->send_rings = calloc((size_t)comm->nranks, sizeof(*d->send_rings))))
    r = SC_ERR(SC_ERR_NOMEM, "device executor rings");
  if (r == SC_SUCCESS && !(d->send_ring_reserved = calloc((size_t)comm->nranks, 1)))
    r = SC_ERR(SC_ERR_NOMEM, "device executor rings");
  pthread_mutex_init(&d->spare_lock, NULL);
  if (r == SC_SUCCESS) r = rt->stream_create(&d->stream);
  if (r == SC_SUCCESS) r = rt->event_create(&d->sync_event);
  if (r != SC_SUCCESS) {
    sc_exec_dev_free(d);
    return r;
  }
  /* Ask the pair in one order, so that both ends get the same answer. */
  int ndirect = 0;
  for (int p = 0; p < comm->nranks; p++) {
    if (p == comm->rank) continue;
    sc_tp_props_t pr;
    memset(&pr, 0, sizeof(pr));
    int lo = p < comm->rank ? p : comm->rank, hi = p < comm->rank ? comm->rank : p;
    if (comm->tpops->props(comm->tp, lo, hi, &pr) == SC_SUCCESS && pr.device_mem) {
      d->direct[p] = 1;
      ndirect++;
    }
  }
  ring_reset(d, &d->recv_ring);
  SC_INFO(SC_SUBSYS_COLL,
          "device path on %s device %d: %d of %d peers direct (device memory through the "
          "transport), the others staged in %zu-byte chunks through %u pinned slots",
          rt->name, device, ndirect, comm->nranks - 1, d->chunk, d->nslots);
  *out = d;
  return SC_SUCCESS;
}

sc_result_t sc_exec_dev_get(sc_comm_t *comm, const sc_devrt_t *rt, int device,
                            struct sc_exec_dev **out) {
  pthread_mutex_lock(&comm->lock);
  sc_result_t r = SC_SUCCESS;
  if (!comm->ex.dev) r = dev_create(comm, rt, device, &comm->ex.dev);
  *out = comm->ex.dev;
  pthread_mutex_unlock(&comm->lock);
  return r;
}

void sc_exec_dev_free(struct sc_exec_dev *d) {
  if (!d) return;
  const sc_devrt_t *rt = d->rt;
  if (d->stream && d->sync_event && rt->event_record(d->sync_event, d->stream) == SC_SUCCESS &&
      sc_dev_event_wait(rt, d->sync_event, d->timeout_ms, "device executor teardown") !=
          SC_SUCCESS) {
    /* Freeing memory the device may still write is worse than a leak. */
    SC_WARN(SC_SUBSYS_COLL, "device work still running at teardown: its buffers are leaked");
    free(d->retired);
    free(d->direct);
    free(d->send_rings);
    free(d->send_ring_reserved);
    free(d->spares);
    free(d->dsends);
    pthread_mutex_destroy(&d->spare_lock);
    free(d);
    return;
  }
  sc_exec_dev_free_spares(d);
  if (d->send_rings) {
    for (int p = 0; p < d->nranks; p++)
      if (d->send_rings[p]) {
        sc_exec_ring_release_all(rt, d->send_rings[p]);
        free(d->send_rings[p]);
      }
  }
  sc_exec_ring_release_all(rt, &d->recv_ring);
  if (d->scratch) rt->free_device(d->scratch);
  if (d->rstage) rt->free_device(d->rstage);
  if (d->sync_event) rt->event_destroy(d->sync_event);
  if (d->stream) rt->stream_destroy(d->stream);
  for (size_t i = 0; i < d->nretired; i++)
    (d->retired[i].pinned ? rt->free_pinned : rt->free_device)(d->retired[i].p);
  free(d->retired);
  free(d->direct);
  free(d->send_rings);
  free(d->send_ring_reserved);
  free(d->spares);
  free(d->dsends);
  pthread_mutex_destroy(&d->spare_lock);
  free(d);
}

/* ---- the staging rings ---- */

static sc_result_t req_status(const sc_comm_t *comm, const sc_tp_req_t *req, int peer) {
  return req->state == SC_TP_REQ_ERROR ? sc_exec_req_failed(comm, req, peer) : SC_SUCCESS;
}

static int is_mismatch(const sc_tp_req_t *req) {
  return req->state == SC_TP_REQ_ERROR && req->status == SC_ERR_MISMATCH;
}

static const sc_tp_req_t *ring_mismatched(const sc_stage_xring_t *x) {
  for (uint64_t q = x->r.released; q < x->r.issued; q++) {
    const sc_stage_slot_t *sl = &x->slots[sc_stage_ring_slot(&x->r, q)];
    if (sl->state == SC_SLOT_XFER && is_mismatch(&sl->req)) return &sl->req;
  }
  return NULL;
}

const sc_tp_req_t *sc_exec_dev_mismatched(const struct sc_exec_dev *d) {
  for (size_t i = d->dsend_head; i < d->ndsends; i++)
    if (d->dsends[i].direct && is_mismatch(&d->dsends[i].req)) return &d->dsends[i].req;
  const sc_tp_req_t *r = ring_mismatched(&d->recv_ring);
  for (int p = 0; !r && p < d->nranks; p++)
    if (d->send_rings[p]) r = ring_mismatched(d->send_rings[p]);
  return r;
}

/* A send ring: post the chunks whose copy ran, retire the sent ones, start
 * copies into the slots that came back. */
static sc_result_t pump_send_ring(sc_comm_t *comm, struct sc_exec_dev *d, int peer,
                                  sc_stage_xring_t *x, int *progressed, int *busy) {
  const sc_devrt_t *rt = d->rt;
  for (uint64_t q = x->r.released; q < x->r.issued; q++) {
    uint32_t s = sc_stage_ring_slot(&x->r, q);
    sc_stage_slot_t *sl = &x->slots[s];
    if (sl->state == SC_SLOT_COPY) {
      int done = 0;
      SC_CHECK(rt->event_query(sl->event, &done));
      /* Copies end in stream order: the later ones are not done either. */
      if (!done) {
        *busy = 1;
        break;
      }
      memset(&sl->req, 0, sizeof(sl->req));
      sl->state = SC_SLOT_XFER;
      *progressed = 1;
      SC_CHECK(sc_exec_isend(comm, peer, sl->host, sl->len, &sl->req));
    }
    if (sl->state == SC_SLOT_XFER && sl->req.state != SC_TP_REQ_PENDING) {
      SC_CHECK(req_status(comm, &sl->req, peer));
      d->dsends[sl->ds].sent++;
      sl->state = SC_SLOT_FREE;
      x->done[s] = 1;
      *progressed = 1;
    }
  }
  sc_stage_ring_release(&x->r, x->done);
  uint32_t s;
  while (x->qhead != SC_NONE && sc_stage_ring_acquire(&x->r, &s)) {
    sc_dsend_t *ds = &d->dsends[x->qhead];
    sc_stage_slot_t *sl = &x->slots[s];
    size_t k = ds->copied;
    sl->len = sc_stage_chunk_len(&ds->plan, k);
    sl->ds = x->qhead;
    if (sl->len)
      SC_CHECK(rt->memcpy_async(sl->host, ds->lo + sc_stage_chunk_off(&ds->plan, k), sl->len,
                                d->stream));
    SC_CHECK(rt->event_record(sl->event, d->stream));
    sl->state = SC_SLOT_COPY;
    d->dirty = 1;
    *progressed = *busy = 1;
    if (++ds->copied == ds->plan.nchunks) {
      x->qhead = ds->qnext;
      if (x->qhead == SC_NONE) x->qtail = SC_NONE;
    }
  }
  return SC_SUCCESS;
}

/* The receive ring: copy arrived chunks to the device, free the slots whose
 * copy ran, post receives for the current message's next chunks. */
static sc_result_t pump_recv_ring(sc_comm_t *comm, struct sc_exec_dev *d, int *progressed,
                                  int *busy) {
  const sc_devrt_t *rt = d->rt;
  sc_stage_xring_t *x = &d->recv_ring;
  sc_drecv_t *rc = &d->rcur;
  for (uint64_t q = x->r.released; q < x->r.issued; q++) {
    uint32_t s = sc_stage_ring_slot(&x->r, q);
    sc_stage_slot_t *sl = &x->slots[s];
    if (sl->state == SC_SLOT_XFER && sl->req.state != SC_TP_REQ_PENDING) {
      SC_CHECK(req_status(comm, &sl->req, rc->peer));
      if (sl->len) SC_CHECK(rt->memcpy_async(sl->dev, sl->host, sl->len, d->stream));
      SC_CHECK(rt->event_record(sl->event, d->stream));
      sl->state = SC_SLOT_COPY;
      d->dirty = 1;
      rc->landed++;
      *progressed = 1;
    }
    if (sl->state == SC_SLOT_COPY) {
      int done = 0;
      SC_CHECK(rt->event_query(sl->event, &done));
      if (!done) {
        *busy = 1;
        continue;
      }
      sl->state = SC_SLOT_FREE;
      x->done[s] = 1;
      *progressed = 1;
    }
  }
  sc_stage_ring_release(&x->r, x->done);
  uint32_t s;
  while (rc->active && rc->posted < rc->plan.nchunks && sc_stage_ring_acquire(&x->r, &s)) {
    sc_stage_slot_t *sl = &x->slots[s];
    size_t k = rc->posted++;
    sl->len = sc_stage_chunk_len(&rc->plan, k);
    sl->dev = rc->dst + sc_stage_chunk_off(&rc->plan, k);
    memset(&sl->req, 0, sizeof(sl->req));
    sl->state = SC_SLOT_XFER;
    *progressed = 1;
    SC_CHECK(sc_exec_irecv(comm, rc->peer, sl->host, sl->len, &sl->req));
  }
  return SC_SUCCESS;
}

static sc_result_t dev_pump(sc_exec_ctx_t *c, struct sc_exec_dev *d, int *progressed, int *busy) {
  sc_comm_t *comm = c->comm;
  for (int p = 0; p < comm->nranks; p++) {
    sc_stage_xring_t *x = d->send_rings[p];
    if (x && (x->r.issued != x->r.released || x->qhead != SC_NONE))
      SC_CHECK(pump_send_ring(comm, d, p, x, progressed, busy));
  }
  if (d->rcur.active || d->recv_ring.r.issued != d->recv_ring.r.released)
    SC_CHECK(pump_recv_ring(comm, d, progressed, busy));
  return SC_SUCCESS;
}

/* One round of every wait: the rings, then the transport (without sleeping
 * while device copies are pending, which nothing would wake us for). */
static sc_result_t dev_wait_round(sc_exec_ctx_t *c, struct sc_exec_dev *d, int peer, size_t bytes,
                                  const char *dir, int device_wait) {
  int progressed = 0, busy = device_wait;
  SC_CHECK(dev_pump(c, d, &progressed, &busy));
  if (progressed) c->progress_unstamped = 1;
  SC_CHECK(sc_exec_progress(c, peer, bytes, dir, progressed || busy ? 0 : SC_EXEC_POLL_SLICE_MS));
  if (busy && !progressed) sched_yield();
  return SC_SUCCESS;
}

/* Everything enqueued on the stream so far has run. */
static sc_result_t dev_sync(sc_exec_ctx_t *c, struct sc_exec_dev *d) {
  if (!d->dirty) return SC_SUCCESS;
  SC_CHECK(d->rt->event_record(d->sync_event, d->stream));
  d->dirty = 0;
  for (;;) {
    int done = 0;
    SC_CHECK(d->rt->event_query(d->sync_event, &done));
    if (done) return SC_SUCCESS;
    SC_CHECK(dev_wait_round(c, d, -1, 0, "run device work", 1));
  }
}

/* ---- sends and receives ---- */

/* SC_SUCCESS and *done once the send no longer needs its source or slots. */
static sc_result_t dsend_done(const sc_comm_t *comm, const sc_dsend_t *ds, int *done) {
  if (ds->direct) {
    *done = ds->req.state != SC_TP_REQ_PENDING;
    return *done ? req_status(comm, &ds->req, ds->peer) : SC_SUCCESS;
  }
  *done = ds->sent == ds->plan.nchunks;
  return SC_SUCCESS;
}

static sc_result_t dsends_reap(const sc_comm_t *comm, struct sc_exec_dev *d) {
  while (d->dsend_head < d->ndsends) {
    int done = 0;
    SC_CHECK(dsend_done(comm, &d->dsends[d->dsend_head], &done));
    if (!done) break;
    d->dsend_head++;
  }
  return SC_SUCCESS;
}

/* Until no send in flight can still read [lo, lo+len) after this point: a
 * direct one has completed, a staged one has all its copies enqueued. */
static sc_result_t dev_wait_sends_over(sc_exec_ctx_t *c, struct sc_exec_dev *d, const uint8_t *lo,
                                       size_t len) {
  if (len == 0) return SC_SUCCESS;
  const uint8_t *hi = lo + len;
  for (size_t i = d->dsend_head; i < d->ndsends; i++) {
    sc_dsend_t *ds = &d->dsends[i];
    if (!(ds->lo < hi && lo < ds->hi)) continue;
    for (;;) {
      int done = 0;
      SC_CHECK(dsend_done(c->comm, ds, &done));
      if (done || (!ds->direct && ds->copied == ds->plan.nchunks)) break;
      SC_CHECK(dev_wait_round(c, d, ds->peer, (size_t)(ds->hi - ds->lo), "send", 0));
    }
  }
  return dsends_reap(c->comm, d);
}

static sc_result_t dev_send(sc_exec_ctx_t *c, struct sc_exec_dev *d, int peer, const uint8_t *p,
                            size_t len) {
  sc_comm_t *comm = c->comm;
  SC_CHECK(dsends_reap(comm, d));
  if (d->ndsends == d->dsend_cap)
    return SC_ERR(SC_ERR_INTERNAL, "step %zu posts more sends than its schedule declared (%zu)",
                  c->step + 1, d->dsend_cap);
  size_t i = d->ndsends;
  sc_dsend_t *ds = &d->dsends[i];
  memset(ds, 0, sizeof(*ds));
  ds->peer = peer;
  ds->lo = p;
  ds->hi = p + len;
  ds->qnext = SC_NONE;
  comm->ex.bytes_sent += len;
  if (d->direct[peer]) {
    ds->direct = 1;
    SC_CHECK(dev_sync(c, d)); /* the transport reads what earlier steps wrote */
    d->ndsends++;
    ds->req.device = 1;
    return sc_exec_isend(comm, peer, p, len, &ds->req);
  }
  ds->plan = sc_stage_plan(len, d->chunk);
  sc_stage_xring_t *x = d->send_rings[peer];
  if (!x) return SC_ERR(SC_ERR_INTERNAL, "no staging ring for rank %d", peer);
  if (x->qtail == SC_NONE)
    x->qhead = i;
  else
    d->dsends[x->qtail].qnext = i;
  x->qtail = i;
  d->ndsends++;
  int progressed = 0, busy = 0;
  return pump_send_ring(comm, d, peer, x, &progressed, &busy);
}

/* Returns once the message is in place (direct) or its last chunk's copy to
 * the device is enqueued (staged). */
static sc_result_t dev_recv(sc_exec_ctx_t *c, struct sc_exec_dev *d, int peer, uint8_t *p,
                            size_t len) {
  sc_comm_t *comm = c->comm;
  if (d->direct[peer]) {
    SC_CHECK(dev_sync(c, d)); /* nothing enqueued still reads or writes p */
    sc_tp_req_t *req = &comm->ex.recv_req;
    memset(req, 0, sizeof(*req));
    req->device = 1;
    SC_CHECK(sc_exec_irecv(comm, peer, p, len, req));
    while (req->state == SC_TP_REQ_PENDING) SC_CHECK(dev_wait_round(c, d, peer, len, "receive", 0));
    return req_status(comm, req, peer);
  }
  sc_drecv_t *rc = &d->rcur;
  *rc = (sc_drecv_t){.active = 1, .peer = peer, .dst = p, .plan = sc_stage_plan(len, d->chunk)};
  int progressed = 0, busy = 0;
  SC_CHECK(pump_recv_ring(comm, d, &progressed, &busy));
  while (rc->landed < rc->plan.nchunks) SC_CHECK(dev_wait_round(c, d, peer, len, "receive", 0));
  rc->active = 0;
  return SC_SUCCESS;
}

/* ---- steps ---- */

static sc_result_t dev_step(sc_exec_ctx_t *c, struct sc_exec_dev *d, const sc_step_t *st) {
  const sc_devrt_t *rt = d->rt;
  const sc_step_mem_t *m = &c->mem;
  uint8_t *dst;
  size_t len = sc_step_dst(m, st, &dst);
  switch (st->kind) {
  case SC_STEP_SEND:
    return dev_send(c, d, st->peer, dst, st->count * m->elem_size);
  case SC_STEP_RECV:
    SC_CHECK(dev_wait_sends_over(c, d, dst, len));
    return dev_recv(c, d, st->peer, dst, len);
  case SC_STEP_RECV_REDUCE:
    SC_CHECK(dev_recv(c, d, st->peer, (uint8_t *)d->rstage, len));
    if (len == 0) return SC_SUCCESS;
    SC_CHECK(dev_wait_sends_over(c, d, dst, len));
    d->dirty = 1;
    /* AVG reduces as SUM; the division comes at the end (sc_sched_finish). */
    return sc_dev_reduce(rt, dst, sc_step_ptr(m, st->src_buf, st->src_off), d->rstage, st->count,
                         m->dtype, m->op == SC_AVG ? SC_SUM : m->op, d->stream);
  case SC_STEP_COPY: {
    if (len == 0) return SC_SUCCESS;
    const uint8_t *src = sc_step_ptr(m, st->src_buf, st->src_off);
    SC_CHECK(dev_wait_sends_over(c, d, dst, len));
    d->dirty = 1;
    if (!sc_exec_partial_overlap(dst, src, len)) return rt->memcpy_async(dst, src, len, d->stream);
    /* memmove semantics: device copies of overlapping ranges are undefined. */
    SC_CHECK(rt->memcpy_async(d->rstage, src, len, d->stream));
    return rt->memcpy_async(dst, d->rstage, len, d->stream);
  }
  default:
    return SC_ERR(SC_ERR_INTERNAL, "schedule step %zu: kind %d has no device form", c->step + 1,
                  st->kind);
  }
}

/* ---- one operation ---- */

/* The device the buffers are on (the first one that is device memory). */
static sc_result_t dev_of_op(const sc_op_t *op, int *device) {
  const void *p[2] = {op->recvbuf, op->sendbuf};
  *device = sc_buffers_device(2, p);
  if (*device >= 0) return SC_SUCCESS;
  return SC_ERR(SC_ERR_INTERNAL, "%s on device buffers, but neither buffer is device memory",
                sc_coll_name(op->coll));
}

sc_result_t sc_exec_dev_of_op(sc_comm_t *comm, const sc_op_t *op, struct sc_exec_dev **out) {
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) return SC_ERR(SC_ERR_INTERNAL, "device buffers but no device runtime");
  int device = -1;
  SC_CHECK(dev_of_op(op, &device));
  if (rt->current_device() != device) SC_CHECK(rt->set_device(device));
  SC_CHECK(sc_exec_dev_get(comm, rt, device, out));
  if ((*out)->device != device)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: buffers on device %d, but this communicator works on device %d",
                  sc_coll_name(op->coll), device, (*out)->device);
  return SC_SUCCESS;
}

static sc_result_t dev_prepare(sc_comm_t *comm, const sc_exec_args_t *a, struct sc_exec_dev **out) {
  struct sc_exec_dev *d = NULL;
  SC_CHECK(sc_exec_dev_of_op(comm, a->op, &d));
  const sc_devrt_t *rt = d->rt;
  if (d->failed) {
    /* The previous operation stopped midway; the transport's requests were
     * cancelled since, the stream's copies must end before the slots and
     * buffers are reused. */
    SC_CHECK(rt->event_record(d->sync_event, d->stream));
    SC_CHECK(sc_dev_event_wait(rt, d->sync_event, d->timeout_ms, "the failed operation's copies"));
    d->failed = 0;
  }
  d->dirty = 0;
  const sc_sched_t *s = a->sched;
  const size_t es = a->elem_size;
  SC_CHECK(sc_exec_dev_reserve(d, &d->scratch, &d->scratch_bytes, s->scratch_count * es));
  const sc_step_mem_t m = {.base = {(uint8_t *)(uintptr_t)a->op->sendbuf, (uint8_t *)a->op->recvbuf,
                                    (uint8_t *)d->scratch},
                           .elem_size = es};
  sc_exec_needs_t need;
  sc_exec_sched_needs(s, es, d->direct, &m, d->chunk, &need);
  SC_CHECK(sc_exec_dev_reserve(d, &d->rstage, &d->rstage_bytes, need.rstage));
  size_t nsends = 0;
  for (size_t i = 0; i < s->nsteps; i++) nsends += s->steps[i].kind == SC_STEP_SEND;
  if (nsends < SC_DSEND_MIN) nsends = SC_DSEND_MIN;
  if (nsends > d->dsend_cap) {
    sc_dsend_t *n = calloc(nsends, sizeof(*n));
    if (!n) return SC_ERR(SC_ERR_NOMEM, "device send tracking of %zu entries", nsends);
    free(d->dsends);
    d->dsends = n;
    d->dsend_cap = nsends;
  }
  d->ndsends = d->dsend_head = 0;
  d->rcur.active = 0;
  size_t slot_bytes = need.slot_bytes;
  ring_reset(d, &d->recv_ring);
  if (need.staged_recv) SC_CHECK(sc_exec_ring_ensure(d, &d->recv_ring, slot_bytes));
  for (size_t i = 0; i < s->nsteps; i++) {
    const sc_step_t *st = &s->steps[i];
    if (st->kind != SC_STEP_SEND || d->direct[st->peer]) continue;
    sc_stage_xring_t **x = &d->send_rings[st->peer];
    if (!*x) {
      sc_stage_xring_t *nx = calloc(1, sizeof(**x));
      if (!nx) return SC_ERR(SC_ERR_NOMEM, "staging ring for rank %d", st->peer);
      pthread_mutex_lock(&d->spare_lock);
      *x = nx;
      pthread_mutex_unlock(&d->spare_lock);
    }
    if ((*x)->slot_bytes < slot_bytes) SC_CHECK(sc_exec_ring_ensure(d, *x, slot_bytes));
  }
  for (int p = 0; p < comm->nranks; p++)
    if (d->send_rings[p]) ring_reset(d, d->send_rings[p]);
  *out = d;
  return SC_SUCCESS;
}

sc_result_t sc_exec_device(sc_comm_t *comm, const sc_exec_args_t *a) {
  if (a->op->sparse)
    return SC_ERR(SC_ERR_INTERNAL, "sparse operations have no device executor path");
  struct sc_exec_dev *d = NULL;
  SC_CHECK(dev_prepare(comm, a, &d));
  d->failed = 1;
  sc_exec_ctx_t c = {.comm = comm,
                     .a = a,
                     .mem = {.base = {(uint8_t *)(uintptr_t)a->op->sendbuf,
                                      (uint8_t *)a->op->recvbuf, (uint8_t *)d->scratch},
                             .elem_size = a->elem_size,
                             .dtype = a->op->dtype,
                             .op = a->op->op},
                     .step = 0,
                     .progress_unstamped = 1};
  const sc_sched_t *s = a->sched;
  for (c.step = 0; c.step < s->nsteps; c.step++) SC_CHECK(dev_step(&c, d, &s->steps[c.step]));
  for (size_t i = d->dsend_head; i < d->ndsends; i++) {
    const sc_dsend_t *ds = &d->dsends[i];
    for (;;) {
      int done = 0;
      SC_CHECK(dsend_done(comm, ds, &done));
      if (done) break;
      SC_CHECK(dev_wait_round(&c, d, ds->peer, (size_t)(ds->hi - ds->lo), "send", 0));
    }
  }
  d->dsend_head = d->ndsends;
  /* sc_sched_finish's work, on the stream. */
  if (s->avg_count && a->op->op == SC_AVG) {
    d->dirty = 1;
    SC_CHECK(sc_dev_avg_finalize(d->rt, sc_step_ptr(&c.mem, s->avg_buf, s->avg_off), s->avg_count,
                                 a->op->dtype, comm->nranks, d->stream));
  }
  /* A blocking call returns with the result in the output buffer. */
  SC_CHECK(dev_sync(&c, d));
  while (d->recv_ring.r.issued != d->recv_ring.r.released) {
    int progressed = 0, busy = 0;
    SC_CHECK(pump_recv_ring(comm, d, &progressed, &busy));
    if (!progressed && d->recv_ring.r.issued != d->recv_ring.r.released)
      return SC_ERR(SC_ERR_INTERNAL, "staging slots still busy after the stream ran");
  }
  d->failed = 0;
  return SC_SUCCESS;
}
