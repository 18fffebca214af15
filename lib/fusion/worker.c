/* SPDX-License-Identifier: BSD-3-Clause */
/* gTop-k and compressed buckets: their calls block, so a worker thread per
 * fusion runs the launched buckets in launch order (the order every rank
 * shares), one after another except that consecutive PowerSGD buckets
 * overlap (sc_fusion_worker_main). */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/fusion/fusion.h"

/* Lock held. Bucket i's round is over, with result r (its detail in errmsg). */
static void sc_fusion_worker_done(sc_fusion_t *f, size_t i, sc_result_t r) {
  sc_fbucket_t *b = &f->b[i];
  b->sparse_res = r;
  b->sparse_done = 1;
  pthread_cond_broadcast(&f->cv);
}

enum { SC_FUSION_NO_PENDING = -1 };

/* Lock held, dropped meanwhile: the pending low-rank bucket's finish, if
 * there is one; none is pending after. */
static void sc_fusion_worker_finish(sc_fusion_t *f, long *pend) {
  if (*pend == SC_FUSION_NO_PENDING) return;
  size_t p = (size_t)*pend;
  *pend = SC_FUSION_NO_PENDING;
  sc_fbucket_t *b = &f->b[p];
  pthread_mutex_unlock(&f->lock);
  sc_result_t r = sc_fusion_lr_finish(f, b, b->buf);
  if (r != SC_SUCCESS) sc_error_get_detail(b->errmsg, SC_ERRMSG_MAX);
  pthread_mutex_lock(&f->lock);
  sc_fusion_worker_done(f, p, r);
}

/* Consecutive PowerSGD buckets overlap: bucket i's round 0 (its products
 * and the all-reduce of its P factors) is issued while the pending bucket's
 * Q round is still on the wire, and
 * the pending bucket's reconstruction runs while i's round 0 travels. Each
 * bucket's collectives are issued in the same order either way (round 0
 * and its vectors, then round 1), so whether i came in time to overlap, a
 * matter of local timing, changes nothing the other ranks see. With the
 * queue empty, the pending bucket finishes at once, so a caller waiting for
 * it before readying the next bucket is never held. */
static void *sc_fusion_worker_main(void *arg) {
  sc_fusion_t *f = arg;
  long pend = SC_FUSION_NO_PENDING;
  pthread_mutex_lock(&f->lock);
  for (;;) {
    while (f->wq_len == 0 && !f->worker_stop && pend == SC_FUSION_NO_PENDING) {
      /* Idle, not an operation: wake now and then only to stay responsive. */
      struct timespec ts;
      sc_clock_deadline_ts(1000, &ts);
      pthread_cond_timedwait(&f->wcv, &f->lock, &ts);
    }
    if (f->wq_len == 0 && pend != SC_FUSION_NO_PENDING) {
      sc_fusion_worker_finish(f, &pend);
      continue;
    }
    if (f->wq_len == 0) break; /* stopping with nothing queued */
    size_t i = f->wq[f->wq_head];
    f->wq_head = (f->wq_head + 1) % f->nb;
    f->wq_len--;
    sc_fbucket_t *b = &f->b[i];
    sc_result_t r;
    if (f->failed != SC_SUCCESS) {
      sc_fusion_worker_finish(f, &pend);
      r = SC_ERR(f->failed, "bucket %zu not run: an earlier one failed", i);
      sc_error_get_detail(b->errmsg, SC_ERRMSG_MAX);
      sc_fusion_worker_done(f, i, r);
      continue;
    }
    if (sc_fusion_bucket_pipelined(f, b)) {
      pthread_mutex_unlock(&f->lock);
      r = sc_fusion_lr_issue(f, b, b->buf);
      if (r != SC_SUCCESS) sc_error_get_detail(b->errmsg, SC_ERRMSG_MAX);
      pthread_mutex_lock(&f->lock);
      sc_fusion_worker_finish(f, &pend);
      if (r == SC_SUCCESS) {
        pthread_mutex_unlock(&f->lock);
        r = sc_fusion_lr_next(f, b, b->buf);
        if (r != SC_SUCCESS) sc_error_get_detail(b->errmsg, SC_ERRMSG_MAX);
        pthread_mutex_lock(&f->lock);
      }
      if (r == SC_SUCCESS)
        pend = (long)i;
      else
        sc_fusion_worker_done(f, i, r);
      continue;
    }
    sc_fusion_worker_finish(f, &pend);
    pthread_mutex_unlock(&f->lock);
    r = sc_fusion_bucket_reduce(f, b);
    if (r != SC_SUCCESS) sc_error_get_detail(b->errmsg, SC_ERRMSG_MAX);
    pthread_mutex_lock(&f->lock);
    sc_fusion_worker_done(f, i, r);
  }
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

sc_result_t sc_fusion_worker_start(sc_fusion_t *f) {
  f->wq = calloc(f->nb, sizeof(*f->wq));
  if (!f->wq) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: worker queue");
  int e = pthread_create(&f->worker, NULL, sc_fusion_worker_main, f);
  if (e) return SC_ERR(SC_ERR_SYSTEM, "sc_fusion_plan: pthread_create: error %d", e);
  f->worker_started = 1;
  return SC_SUCCESS;
}

void sc_fusion_worker_stop(sc_fusion_t *f) {
  if (!f->worker_started) return;
  pthread_mutex_lock(&f->lock);
  f->worker_stop = 1;
  pthread_cond_broadcast(&f->wcv);
  pthread_mutex_unlock(&f->lock);
  pthread_join(f->worker, NULL);
  f->worker_started = 0;
}

void sc_fusion_worker_push(sc_fusion_t *f, size_t i) {
  /* At most one round of each bucket is queued: nb slots suffice. */
  f->wq[(f->wq_head + f->wq_len) % f->nb] = i;
  f->wq_len++;
  pthread_cond_signal(&f->wcv);
}
