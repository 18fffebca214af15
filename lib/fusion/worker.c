/* SPDX-License-Identifier: BSD-3-Clause */
/* gTop-k and compressed buckets: their calls block, so a worker thread per
 * fusion runs the launched buckets one after another, in launch order (the
 * order every rank shares). */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/fusion/fusion.h"

static void *sc_fusion_worker_main(void *arg) {
  sc_fusion_t *f = arg;
  pthread_mutex_lock(&f->lock);
  for (;;) {
    while (f->wq_len == 0 && !f->worker_stop) {
      /* Idle, not an operation: wake now and then only to stay responsive. */
      struct timespec ts;
      sc_clock_deadline_ts(1000, &ts);
      pthread_cond_timedwait(&f->wcv, &f->lock, &ts);
    }
    if (f->wq_len == 0) break; /* stopping with nothing queued */
    size_t i = f->wq[f->wq_head];
    f->wq_head = (f->wq_head + 1) % f->nb;
    f->wq_len--;
    sc_fbucket_t *b = &f->b[i];
    sc_result_t r;
    if (f->failed != SC_SUCCESS) {
      r = SC_ERR(f->failed, "bucket %zu not run: an earlier one failed", i);
    } else {
      pthread_mutex_unlock(&f->lock);
      r = sc_fusion_bucket_reduce(f, b);
      pthread_mutex_lock(&f->lock);
    }
    if (r != SC_SUCCESS) sc_error_get_detail(b->errmsg, SC_ERRMSG_MAX);
    b->sparse_res = r;
    b->sparse_done = 1;
    pthread_cond_broadcast(&f->cv);
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
