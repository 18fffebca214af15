/* SPDX-License-Identifier: BSD-3-Clause */
/* The device executor's memory (lib/core/exec_device.h): scratch, the receive
 * stage and the pinned staging rings, grown geometrically and never freed
 * before the communicator goes; and the reservation a stream form's caller
 * makes before its stream starts to wait.
 *
 * Why the reservation: a device or page-locked allocation is one of CUDA's
 * implicit synchronizations (the programming guide lists both): it may wait
 * for the work of every stream. A stream form's stream waits on a flag that
 * the progress thread raises only after the operation (lib/core/stream.c), so an
 * allocation made by the progress thread during that operation would never
 * return on a GPU (seen on an H100: the progress thread stuck in the driver,
 * the stream waiting on its flag). The caller therefore builds the
 * operation's schedule, allocates what the executor would lack, and parks it
 * here as spares before it enqueues the wait; the progress thread takes a
 * spare instead of allocating. The caller's own allocation may wait for its
 * stream's earlier work: that is the one place a stream call can wait, and
 * only when the operation needs more memory than any before it. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/core/dev_allreduce.h"
#include "lib/core/device.h"
#include "lib/core/exec_device.h"

sc_result_t sc_exec_dev_retire(struct sc_exec_dev *d, void *p, int pinned) {
  if (d->nretired == d->retired_cap) {
    size_t cap = d->retired_cap ? 2 * d->retired_cap : 16;
    void *n = realloc(d->retired, cap * sizeof(*d->retired));
    if (!n) return SC_ERR(SC_ERR_NOMEM, "list of %zu outgrown device buffers", cap);
    d->retired = n;
    d->retired_cap = cap;
  }
  d->retired[d->nretired].p = p;
  d->retired[d->nretired].pinned = pinned;
  d->nretired++;
  return SC_SUCCESS;
}

/* At least need, at least twice have: outgrown buffers are kept until the
 * communicator goes, so growth must be geometric to bound them. */
static size_t dev_grown(size_t have, size_t need) {
  return have && need < 2 * have && 2 * have > have ? 2 * have : need;
}

/* The smallest parked spare of the kind with at least bytes, taken out of
 * the list; NULL if none. Caller holds spare_lock. */
static void *spare_take(struct sc_exec_dev *d, int pinned, size_t bytes, size_t *got) {
  int best = -1;
  for (int i = 0; i < d->nspares; i++)
    if (d->spares[i].pinned == pinned && d->spares[i].bytes >= bytes &&
        (best < 0 || d->spares[i].bytes < d->spares[best].bytes))
      best = i;
  if (best < 0) return NULL;
  void *p = d->spares[best].p;
  *got = d->spares[best].bytes;
  d->spares[best] = d->spares[--d->nspares];
  return p;
}

void sc_exec_dev_free_spares(struct sc_exec_dev *d) {
  for (int i = 0; i < d->nspares; i++)
    (d->spares[i].pinned ? d->rt->free_pinned : d->rt->free_device)(d->spares[i].p);
  d->nspares = 0;
}

void sc_exec_ring_release_all(const sc_devrt_t *rt, sc_stage_xring_t *x) {
  for (uint32_t s = 0; s < SC_STAGE_SLOTS_MAX; s++)
    if (x->slots[s].event) rt->event_destroy(x->slots[s].event);
  if (x->pinned) rt->free_pinned(x->pinned);
  memset(x, 0, sizeof(*x));
}

sc_result_t sc_exec_ring_ensure(struct sc_exec_dev *d, sc_stage_xring_t *x, size_t slot_bytes) {
  const sc_devrt_t *rt = d->rt;
  if (x->pinned && x->slot_bytes >= slot_bytes) return SC_SUCCESS;
  if (x->pinned) SC_CHECK(sc_exec_dev_retire(d, x->pinned, 1));
  size_t got = 0, grown = dev_grown(x->slot_bytes, slot_bytes);
  pthread_mutex_lock(&d->spare_lock);
  x->pinned = NULL;
  x->slot_bytes = 0;
  void *p = spare_take(d, 1, (size_t)d->nslots * slot_bytes, &got);
  pthread_mutex_unlock(&d->spare_lock);
  if (p) {
    slot_bytes = got / d->nslots;
  } else {
    slot_bytes = grown;
    SC_CHECK(rt->malloc_pinned(&p, (size_t)d->nslots * slot_bytes));
  }
  pthread_mutex_lock(&d->spare_lock);
  x->pinned = p;
  x->slot_bytes = slot_bytes;
  pthread_mutex_unlock(&d->spare_lock);
  for (uint32_t s = 0; s < d->nslots; s++) {
    x->slots[s].host = x->pinned + (size_t)s * slot_bytes;
    if (!x->slots[s].event) SC_CHECK(rt->event_create(&x->slots[s].event));
  }
  return SC_SUCCESS;
}

sc_result_t sc_exec_dev_reserve(struct sc_exec_dev *d, void **buf, size_t *have, size_t need) {
  if (need <= *have) return SC_SUCCESS;
  if (*buf) SC_CHECK(sc_exec_dev_retire(d, *buf, 0));
  size_t got = 0, grown = dev_grown(*have, need);
  pthread_mutex_lock(&d->spare_lock);
  *buf = NULL;
  *have = 0;
  void *p = spare_take(d, 0, need, &got);
  pthread_mutex_unlock(&d->spare_lock);
  if (!p) {
    got = grown;
    SC_CHECK(d->rt->malloc_device(&p, got));
  }
  pthread_mutex_lock(&d->spare_lock);
  *buf = p;
  *have = got;
  pthread_mutex_unlock(&d->spare_lock);
  return SC_SUCCESS;
}

void sc_exec_sched_needs(const sc_sched_t *s, size_t es, const uint8_t *direct,
                         const sc_step_mem_t *m, size_t chunk, sc_exec_needs_t *n) {
  memset(n, 0, sizeof(*n));
  n->scratch = s->scratch_count * es;
  size_t max_msg = 0;
  for (size_t i = 0; i < s->nsteps; i++) {
    const sc_step_t *st = &s->steps[i];
    size_t bytes = st->count * es;
    if (st->kind == SC_STEP_SEND || st->kind == SC_STEP_RECV || st->kind == SC_STEP_RECV_REDUCE)
      max_msg = bytes > max_msg ? bytes : max_msg;
    if (st->kind == SC_STEP_RECV_REDUCE && bytes > n->rstage) n->rstage = bytes;
    if ((st->kind == SC_STEP_RECV || st->kind == SC_STEP_RECV_REDUCE) && !direct[st->peer])
      n->staged_recv = 1;
    /* A COPY between partially overlapping ranges goes through rstage;
     * without the buffers (m NULL) every COPY counts. */
    if (st->kind == SC_STEP_COPY && bytes > n->rstage) {
      if (!m) {
        n->rstage = bytes;
      } else {
        const uint8_t *to = sc_step_ptr(m, st->buf, st->off),
                      *from = sc_step_ptr(m, st->src_buf, st->src_off);
        if (to && from && sc_exec_partial_overlap(to, from, bytes)) n->rstage = bytes;
      }
    }
  }
  n->slot_bytes = sc_stage_slot_bytes(chunk, max_msg);
}

/* One allocation the reservation makes: what, and for which need. */
typedef struct want {
  int pinned;
  size_t bytes;
  void *p;
} want_t;

/* Whether a need is met by what the executor has or by an unclaimed spare
 * (claimed[] marks the spares counted already). Caller holds spare_lock. */
static int covered(struct sc_exec_dev *d, int pinned, size_t have, size_t need, uint8_t *claimed) {
  if (need <= have) return 1;
  for (int i = 0; i < d->nspares; i++)
    if (!claimed[i] && d->spares[i].pinned == pinned && d->spares[i].bytes >= need) {
      claimed[i] = 1;
      return 1;
    }
  return 0;
}

sc_result_t sc_exec_device_reserve(sc_comm_t *comm, const sc_op_t *op) {
  SC_CHECK(sc_devar_reserve(comm, op));
  const sc_devrt_t *rt = sc_devrt();
  if (!rt || !op->device || op->gen || op->sparse || op->job || op->count == 0) return SC_SUCCESS;
  const void *bufs[2] = {op->recvbuf, op->sendbuf};
  const int device = sc_buffers_device(2, bufs);
  if (device < 0) return SC_SUCCESS;
  struct sc_exec_dev *d = NULL;
  SC_CHECK(sc_exec_dev_get(comm, rt, device, &d));
  const sc_sched_key_t key = sc_sched_key_of(op);
  pthread_mutex_lock(&d->spare_lock);
  int same = sc_sched_key_matches(&d->reserved, &key);
  pthread_mutex_unlock(&d->spare_lock);
  if (same) return SC_SUCCESS; /* capacities only grow: what it needed is there */
  sc_sched_t s;
  sc_sched_init(&s);
  sc_result_t r = sc_tune_build_schedule(comm, op, NULL, &s);
  if (r == SC_SUCCESS) r = s.status;
  if (r != SC_SUCCESS) {
    sc_sched_free(&s);
    return r;
  }
  sc_exec_needs_t n;
  sc_exec_sched_needs(&s, sc_dtype_size(op->dtype), d->direct, NULL, d->chunk, &n);
  /* At most scratch, rstage, the receive ring and a send ring per peer. */
  int nw = 0, cap = comm->nranks + 3;
  want_t *w = calloc((size_t)cap, sizeof(*w));
  uint8_t *claimed = NULL;
  if (!w) r = SC_ERR(SC_ERR_NOMEM, "stream reservation");
  pthread_mutex_lock(&d->spare_lock);
  if (r == SC_SUCCESS && !(claimed = calloc((size_t)d->nspares + 1, 1)))
    r = SC_ERR(SC_ERR_NOMEM, "stream reservation");
  if (r == SC_SUCCESS) {
    size_t ring = (size_t)d->nslots * n.slot_bytes;
    if (!covered(d, 0, d->scratch_bytes, n.scratch, claimed)) w[nw++] = (want_t){0, n.scratch, 0};
    if (!covered(d, 0, d->rstage_bytes, n.rstage, claimed)) w[nw++] = (want_t){0, n.rstage, 0};
    if (n.staged_recv &&
        !covered(d, 1, d->recv_ring.pinned ? (size_t)d->nslots * d->recv_ring.slot_bytes : 0, ring,
                 claimed))
      w[nw++] = (want_t){1, ring, 0};
    for (size_t i = 0; i < s.nsteps && nw < cap; i++) {
      const sc_step_t *st = &s.steps[i];
      if (st->kind != SC_STEP_SEND || d->direct[st->peer] || d->send_ring_reserved[st->peer])
        continue;
      const sc_stage_xring_t *x = d->send_rings[st->peer];
      size_t have = x && x->pinned ? (size_t)d->nslots * x->slot_bytes : 0;
      d->send_ring_reserved[st->peer] = 1; /* one ring per peer: counted once */
      if (!covered(d, 1, have, ring, claimed)) w[nw++] = (want_t){1, ring, 0};
    }
    memset(d->send_ring_reserved, 0, (size_t)comm->nranks);
  }
  pthread_mutex_unlock(&d->spare_lock);
  free(claimed);
  sc_sched_free(&s);
  /* Outside the lock: an allocation may wait for the caller's stream, whose
   * earlier operations the progress thread may need the lock to finish. */
  for (int i = 0; i < nw && r == SC_SUCCESS; i++)
    r = w[i].pinned ? rt->malloc_pinned(&w[i].p, w[i].bytes)
                    : rt->malloc_device(&w[i].p, w[i].bytes);
  pthread_mutex_lock(&d->spare_lock);
  for (int i = 0; i < nw && w[i].p; i++) {
    if (d->nspares == d->spare_cap) {
      int c2 = d->spare_cap ? 2 * d->spare_cap : 8;
      void *g = realloc(d->spares, (size_t)c2 * sizeof(*d->spares));
      if (!g) {
        r = SC_ERR(SC_ERR_NOMEM, "stream reservation: %d spares", c2);
        break;
      }
      d->spares = g;
      d->spare_cap = c2;
    }
    d->spares[d->nspares++] = (struct sc_exec_dev_spare){w[i].p, w[i].bytes, w[i].pinned};
    w[i].p = NULL;
  }
  if (r == SC_SUCCESS) d->reserved = key;
  pthread_mutex_unlock(&d->spare_lock);
  for (int i = 0; i < nw; i++)
    if (w[i].p) (w[i].pinned ? rt->free_pinned : rt->free_device)(w[i].p);
  if (nw)
    SC_TRACE(SC_SUBSYS_COLL, "rank %d: %s #%llu on a stream: %d buffers reserved before its wait",
             comm->rank, sc_coll_name(op->coll), (unsigned long long)op->seq, nw);
  free(w);
  return r;
}

void sc_exec_device_model_changed(sc_comm_t *comm) {
  pthread_mutex_lock(&comm->lock);
  struct sc_exec_dev *d = comm->ex.dev;
  pthread_mutex_unlock(&comm->lock);
  if (!d) return;
  pthread_mutex_lock(&d->spare_lock);
  d->reserved.valid = 0;
  pthread_mutex_unlock(&d->spare_lock);
}
