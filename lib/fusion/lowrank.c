/* SPDX-License-Identifier: BSD-3-Clause */
/* A low-rank bucket's round in three steps, so that the worker can overlap
 * consecutive buckets: issue (round 0's factors of every matrix summed in
 * one non-blocking all-reduce, the vectors averaged in another), next (the
 * later rounds: PowerSGD's Q) and finish (the reconstruction). The
 * collectives of a bucket are issued in the same order whether or not the
 * worker runs the next bucket's issue before this one's finish, and the
 * arithmetic per bucket is the same, so every order gives the same bits. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/dtype.h"
#include "lib/base/error.h"
#include "lib/compress/compress.h"
#include "lib/fusion/fusion.h"

static int lr_rounds(const sc_fbucket_t *b) {
  int rounds = 0;
  for (size_t j = 0; j < b->last - b->first; j++)
    if (b->lr[j] && sc_lowrank_rounds(b->lr[j]) > rounds) rounds = sc_lowrank_rounds(b->lr[j]);
  return rounds;
}

/* Waits for whatever the bucket has in flight, keeping the first failure's
 * detail: its buffers must be quiet before the failure is reported. */
static sc_result_t lr_drain(sc_fbucket_t *b, sc_result_t r) {
  char detail[SC_ERRMSG_MAX];
  if (r != SC_SUCCESS) sc_error_get_detail(detail, sizeof(detail));
  sc_request_t **reqs[2] = {&b->lr_req, &b->lr_dreq};
  for (int i = 0; i < 2; i++) {
    if (!*reqs[i]) continue;
    sc_result_t ri = sc_wait(reqs[i]);
    *reqs[i] = NULL;
    if (r == SC_SUCCESS && ri != SC_SUCCESS) {
      r = ri;
      sc_error_get_detail(detail, sizeof(detail));
    }
  }
  if (r != SC_SUCCESS) sc_error_set_detail(detail);
  return r;
}

/* Round k's factors of every matrix into fbuf, summed in one all-reduce. */
static sc_result_t lr_issue_round(sc_fusion_t *f, sc_fbucket_t *b, char *buf, int k) {
  size_t at = 0, es = 0;
  sc_dtype_t dt = SC_FLOAT32;
  for (size_t j = 0; j < b->last - b->first; j++) {
    if (!b->lr[j] || k >= sc_lowrank_rounds(b->lr[j])) continue;
    void *fac;
    size_t n;
    sc_lowrank_before(b->lr[j], buf + f->t[b->first + j].offset, k, &fac, &n, &dt);
    es = sc_dtype_size(dt);
    memcpy(b->fbuf + at, fac, n * es);
    at += n * es;
  }
  if (!at) return SC_SUCCESS;
  return sc_iallreduce(b->fbuf, b->fbuf, at / es, dt, SC_SUM, f->comm, &b->lr_req);
}

/* Round k's sums back into the matrices' states. */
static sc_result_t lr_take_round(sc_fbucket_t *b, int k) {
  if (b->lr_req) {
    sc_result_t r = sc_wait(&b->lr_req);
    b->lr_req = NULL;
    if (r != SC_SUCCESS) return r;
  }
  size_t at = 0;
  for (size_t j = 0; j < b->last - b->first; j++) {
    if (!b->lr[j] || k >= sc_lowrank_rounds(b->lr[j])) continue;
    void *fac;
    size_t n;
    sc_dtype_t dt;
    sc_lowrank_factor(b->lr[j], k, &fac, &n, &dt);
    memcpy(fac, b->fbuf + at, n * sc_dtype_size(dt));
    at += n * sc_dtype_size(dt);
  }
  return SC_SUCCESS;
}

sc_result_t sc_fusion_lr_issue(sc_fusion_t *f, sc_fbucket_t *b, char *buf) {
  b->lr_round = 0;
  sc_result_t r = lr_issue_round(f, b, buf, 0);
  if (r == SC_SUCCESS && b->dense_count) {
    /* The vectors go right behind round 0, while the next round's product
     * runs: they need nothing from the factors. */
    size_t at = 0;
    for (size_t l = b->first; l < b->last; l++) {
      if (b->lr[l - b->first]) continue;
      memcpy(b->dense + at, buf + f->t[l].offset, f->t[l].bytes);
      at += f->t[l].bytes;
    }
    r = sc_iallreduce(b->dense, b->dense, b->dense_count, b->dtype, SC_AVG, f->comm, &b->lr_dreq);
  }
  return r == SC_SUCCESS ? SC_SUCCESS : lr_drain(b, r);
}

sc_result_t sc_fusion_lr_next(sc_fusion_t *f, sc_fbucket_t *b, char *buf) {
  const int rounds = lr_rounds(b);
  sc_result_t r = SC_SUCCESS;
  while (r == SC_SUCCESS && b->lr_round + 1 < rounds) {
    r = lr_take_round(b, b->lr_round);
    if (r == SC_SUCCESS) r = lr_issue_round(f, b, buf, ++b->lr_round);
  }
  return r == SC_SUCCESS ? SC_SUCCESS : lr_drain(b, r);
}

sc_result_t sc_fusion_lr_finish(sc_fusion_t *f, sc_fbucket_t *b, char *buf) {
  sc_result_t r = lr_take_round(b, b->lr_round);
  if (r == SC_SUCCESS && b->lr_dreq) {
    r = sc_wait(&b->lr_dreq);
    b->lr_dreq = NULL;
  }
  if (r != SC_SUCCESS) return lr_drain(b, r);
  /* Written only now, after every all-reduce of the bucket succeeded. */
  size_t at = 0;
  for (size_t l = b->first; l < b->last; l++) {
    const sc_ftensor_t *t = &f->t[l];
    sc_lowrank_t *lr = b->lr[l - b->first];
    if (lr) {
      if (sc_lowrank_rounds(lr)) sc_lowrank_finish(lr, buf + t->offset, f->nranks);
      continue;
    }
    memcpy(buf + t->offset, b->dense + at, t->bytes);
    at += t->bytes;
  }
  return SC_SUCCESS;
}
