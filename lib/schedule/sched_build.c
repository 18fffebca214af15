/* SPDX-License-Identifier: BSD-3-Clause */
/* Building schedules (used by the pure algorithms; no I/O here). */
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/schedule/sched.h"

void sc_sched_init(sc_sched_t *s) {
  memset(s, 0, sizeof(*s));
}

void sc_sched_reset(sc_sched_t *s) {
  s->nsteps = 0;
  s->scratch_count = 0;
  s->avg_buf = 0;
  s->avg_off = s->avg_count = 0;
  s->status = SC_SUCCESS;
  s->sp_sets = s->sp_cap = 0;
}

void sc_sched_free(sc_sched_t *s) {
  free(s->steps);
  sc_sched_init(s);
}

static sc_result_t sc_sched_push(sc_sched_t *s, const sc_step_t *st) {
  if (s->status != SC_SUCCESS) return s->status;
  if (s->nsteps == s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 64;
    sc_step_t *n = realloc(s->steps, ncap * sizeof(*n));
    if (!n) {
      s->status = SC_ERR(SC_ERR_NOMEM, "schedule of %zu steps", ncap);
      return s->status;
    }
    s->steps = n;
    s->cap = ncap;
  }
  s->steps[s->nsteps++] = *st;
  return SC_SUCCESS;
}

sc_result_t sc_sched_send(sc_sched_t *s, int peer, sc_buf_t buf, size_t off, size_t count) {
  sc_step_t st = {
      .kind = SC_STEP_SEND, .buf = (uint8_t)buf, .peer = peer, .off = off, .count = count};
  return sc_sched_push(s, &st);
}

sc_result_t sc_sched_recv(sc_sched_t *s, int peer, sc_buf_t buf, size_t off, size_t count) {
  sc_step_t st = {
      .kind = SC_STEP_RECV, .buf = (uint8_t)buf, .peer = peer, .off = off, .count = count};
  return sc_sched_push(s, &st);
}

sc_result_t sc_sched_recv_reduce(sc_sched_t *s, int peer, sc_buf_t dst, size_t off, sc_buf_t src,
                                 size_t src_off, size_t count) {
  sc_step_t st = {.kind = SC_STEP_RECV_REDUCE,
                  .buf = (uint8_t)dst,
                  .src_buf = (uint8_t)src,
                  .peer = peer,
                  .off = off,
                  .src_off = src_off,
                  .count = count};
  return sc_sched_push(s, &st);
}

sc_result_t sc_sched_copy(sc_sched_t *s, sc_buf_t dst, size_t off, sc_buf_t src, size_t src_off,
                          size_t count) {
  sc_step_t st = {.kind = SC_STEP_COPY,
                  .buf = (uint8_t)dst,
                  .src_buf = (uint8_t)src,
                  .peer = -1,
                  .off = off,
                  .src_off = src_off,
                  .count = count};
  return sc_sched_push(s, &st);
}

void sc_sched_need_scratch(sc_sched_t *s, size_t count) {
  if (count > s->scratch_count) s->scratch_count = count;
}

/* Every sparse step: off and src_off name sets (or src_off a survival slot),
 * count bounds what a peer may send (lib/schedule/sched.h). */
static sc_result_t sparse_step(sc_sched_t *s, sc_step_kind_t kind, int flags, int peer, size_t off,
                               size_t src_off, size_t count) {
  sc_step_t st = {.kind = (uint8_t)kind,
                  .flags = (uint8_t)flags,
                  .peer = peer,
                  .off = off,
                  .src_off = src_off,
                  .count = count};
  return sc_sched_push(s, &st);
}

sc_result_t sc_sched_sparse_send(sc_sched_t *s, int peer, size_t set, int flags) {
  return sparse_step(s, SC_STEP_SPARSE_SEND, flags, peer, set, 0, 0);
}

sc_result_t sc_sched_sparse_recv(sc_sched_t *s, int peer, size_t set, size_t bound, int flags) {
  return sparse_step(s, SC_STEP_SPARSE_RECV, flags, peer, set, 0, bound);
}

sc_result_t sc_sched_sparse_send_mask(sc_sched_t *s, int peer, size_t set, size_t slot) {
  return sparse_step(s, SC_STEP_SPARSE_SEND, SC_SPF_MASK, peer, set, slot, 0);
}

sc_result_t sc_sched_sparse_recv_mask(sc_sched_t *s, int peer, size_t set, size_t bound,
                                      size_t up_set) {
  return sparse_step(s, SC_STEP_SPARSE_RECV, SC_SPF_MASK, peer, set, up_set, bound);
}

sc_result_t sc_sched_sparse_recv_merge(sc_sched_t *s, int peer, size_t dst, size_t local,
                                       size_t bound, int flags) {
  return sparse_step(s, SC_STEP_SPARSE_RECV_MERGE, flags, peer, dst, local, bound);
}

sc_result_t sc_sched_sparse_sum(sc_sched_t *s, size_t dst, size_t first, size_t nsets) {
  return sparse_step(s, SC_STEP_SPARSE_SUM, 0, -1, dst, first, nsets);
}

void sc_sched_sparse_sets(sc_sched_t *s, size_t nsets, size_t cap) {
  if (nsets > s->sp_sets) s->sp_sets = nsets;
  if (cap > s->sp_cap) s->sp_cap = cap;
}

void sc_sched_set_avg(sc_sched_t *s, sc_buf_t buf, size_t off, size_t count) {
  s->avg_buf = (uint8_t)buf;
  s->avg_off = off;
  s->avg_count = count;
}
