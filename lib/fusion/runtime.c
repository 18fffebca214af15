/* SPDX-License-Identifier: BSD-3-Clause */
/* ready / wait: the per-iteration side of the fusion engine. Buckets launch
 * strictly in plan order (a bucket goes when it and every earlier bucket of
 * the round are complete), so every rank issues the same collectives in the
 * same order whatever the local order of ready calls. One mutex guards the
 * state; nobody holds it while blocked on a request. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/fusion/fusion.h"

sc_result_t sc_fusion_fail(sc_fusion_t *f, sc_result_t r) {
  if (f->failed == SC_SUCCESS) {
    f->failed = r;
    sc_error_get_detail(f->failmsg, sizeof(f->failmsg));
  }
  pthread_cond_broadcast(&f->cv);
  return r;
}

static sc_result_t sc_fusion_failed(sc_fusion_t *f, const char *fn) {
  return SC_ERR(f->failed, "%s: an earlier collective of this fusion failed: %s", fn, f->failmsg);
}

static sc_result_t sc_launch_one(sc_fusion_t *f, size_t i) {
  sc_fbucket_t *b = &f->b[i];
  sc_result_t r = SC_SUCCESS;
  if (f->worker_mode) {
    b->sparse_done = 0;
    sc_fusion_worker_push(f, i);
  } else if (f->cfg.policy == SC_FUSE_DEAR) {
    size_t shard = b->padded / (size_t)f->nranks;
    char *mine = b->buf + shard * (size_t)f->rank * sc_dtype_size(b->dtype);
    /* SC_AVG on the reduce-scatter applies 1/P to the shard only. */
    r = sc_ireduce_scatter(b->buf, mine, shard, b->dtype, SC_AVG, f->comm, &b->req);
    if (r == SC_SUCCESS && i + 1 == f->nb) {
      /* Every reduce-scatter is queued: the all-gathers follow in forward
       * order (the first layers' bucket, the last in ready order, first). */
      for (size_t j = f->nb; j-- > 0 && r == SC_SUCCESS;) {
        sc_fbucket_t *c = &f->b[j];
        size_t sh = c->padded / (size_t)f->nranks;
        char *m = c->buf + sh * (size_t)f->rank * sc_dtype_size(c->dtype);
        r = sc_iallgather(m, c->buf, sh, c->dtype, f->comm, &c->req2);
      }
    }
  } else {
    r = sc_iallreduce(b->buf, b->buf, b->count, b->dtype, SC_AVG, f->comm, &b->req);
  }
  b->state = SC_FB_INFLIGHT;
  return r;
}

sc_result_t sc_fusion_launch_ready(sc_fusion_t *f) {
  while (f->b[f->next_launch].state == SC_FB_READY) {
    size_t i = f->next_launch;
    f->next_launch = (i + 1) % f->nb;
    sc_result_t r = sc_launch_one(f, i);
    pthread_cond_broadcast(&f->cv);
    if (r != SC_SUCCESS) return sc_fusion_fail(f, r);
  }
  return SC_SUCCESS;
}

/* Can a thread finish bucket b's round now (its requests all exist)? */
static int sc_completable(const sc_fusion_t *f, const sc_fbucket_t *b) {
  if (b->state != SC_FB_INFLIGHT || b->waiting) return 0;
  if (f->worker_mode) return b->sparse_done;
  if (f->cfg.policy == SC_FUSE_DEAR) return b->req2 != NULL;
  return 1;
}

static size_t sc_first_unready(const sc_fusion_t *f, const sc_fbucket_t *b) {
  for (size_t l = b->first; l < b->last; l++)
    if (!f->t[l].ready) return l;
  return b->first;
}

/* The tensor that this rank must still make ready before bucket i's round
 * can finish, or -1 when only other ranks or the network decide. Nothing
 * another rank does can launch a bucket here: launches are local and in
 * plan order, so a bucket that is not ready, or that waits behind a bucket
 * that is not, is blocked by this rank alone (*prev: that tensor's bucket
 * still holds its previous, undelivered round). */
static long sc_self_blocker(const sc_fusion_t *f, size_t i, int *prev) {
  const sc_fbucket_t *b = &f->b[i];
  *prev = 0;
  if (b->state == SC_FB_IDLE || b->waiting) return -1;
  if (b->state == SC_FB_FILLING) return (long)sc_first_unready(f, b);
  if (b->state == SC_FB_INFLIGHT && (f->worker_mode || f->cfg.policy != SC_FUSE_DEAR || b->req2))
    return -1;
  /* READY behind an earlier bucket, or DeAR's all-gathers, which are queued
   * only after the round's last reduce-scatter. */
  const sc_fbucket_t *j = &f->b[f->next_launch];
  if (j == b) return -1; /* it would have launched; a failed launch is sticky */
  if (j->state == SC_FB_INFLIGHT) {
    *prev = 1;
    return (long)j->first;
  }
  return (long)sc_first_unready(f, j);
}

static sc_result_t sc_self_blocked(const sc_fusion_t *f, size_t i, long l, int prev, const char *fn,
                                   const char *who) {
  const sc_ftensor_t *t = &f->t[l];
  if (prev)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: rank %d: %s (bucket %zu) can never finish: tensor %ld (%zu elements of %s, "
                  "bucket %d) still holds its previous round, so it cannot be made ready for this "
                  "one; only this rank can unblock it: wait for tensor %ld, then make it ready",
                  fn, f->rank, who, i, l, t->count, sc_dtype_name(t->dtype), t->bucket, l);
  return SC_ERR(SC_ERR_INVALID_ARG,
                "%s: rank %d: %s (bucket %zu) can never finish: tensor %ld (%zu elements of %s, "
                "bucket %d) is not ready on this rank this round, and only this rank can unblock "
                "it: call sc_fusion_ready or sc_fusion_skip for tensor %ld first",
                fn, f->rank, who, i, l, t->count, sc_dtype_name(t->dtype), t->bucket, l);
}

static sc_result_t sc_copy_out(sc_fusion_t *f, sc_fbucket_t *b) {
  if (f->device) return sc_fusion_dev_out(f, b);
  if (b->zero_copy) return SC_SUCCESS;
  for (size_t l = b->first; l < b->last; l++)
    memcpy(f->t[l].buf, b->buf + f->t[l].offset, f->t[l].bytes);
  return SC_SUCCESS;
}

/* Finishes bucket i's round and delivers it. who names the caller's target
 * in a self-blocked error. Lock held. */
static sc_result_t sc_fusion_complete(sc_fusion_t *f, size_t i, const char *fn, const char *who) {
  sc_fbucket_t *b = &f->b[i];
  struct timespec dl;
  sc_clock_deadline_ts(f->timeout_ms, &dl);
  for (;;) {
    if (f->failed != SC_SUCCESS) return sc_fusion_failed(f, fn);
    if (b->state == SC_FB_IDLE) return SC_SUCCESS;
    if (sc_completable(f, b)) break;
    int prev;
    long l = sc_self_blocker(f, i, &prev);
    if (l >= 0) return sc_self_blocked(f, i, l, prev, fn, who);
    if (pthread_cond_timedwait(&f->cv, &f->lock, &dl) == ETIMEDOUT) {
      return SC_ERR(SC_ERR_TIMEOUT,
                    "%s: rank %d: %s (bucket %zu, tensors %zu-%zu) not finished after %d ms: "
                    "launched on this rank, waiting for the collective",
                    fn, f->rank, who, i, b->first, b->last - 1, f->timeout_ms);
    }
  }
  sc_result_t r = SC_SUCCESS;
  if (f->worker_mode) {
    r = b->sparse_res;
    if (r != SC_SUCCESS) sc_error_set_detail(b->errmsg);
  } else {
    sc_request_t *req = b->req, *req2 = b->req2;
    b->req = b->req2 = NULL;
    b->waiting = 1;
    pthread_mutex_unlock(&f->lock);
    /* Requests are bounded by the communicator's timeout. */
    r = sc_wait(&req);
    if (req2) {
      sc_result_t r2 = r == SC_SUCCESS ? sc_wait(&req2) : (sc_wait(&req2), r);
      r = r2;
    }
    pthread_mutex_lock(&f->lock);
    b->waiting = 0;
  }
  if (r == SC_SUCCESS) r = sc_copy_out(f, b);
  if (r != SC_SUCCESS) {
    b->state = SC_FB_IDLE;
    return sc_fusion_fail(f, r);
  }
  for (size_t l = b->first; l < b->last; l++) f->t[l].ready = 0;
  b->nready = 0;
  b->state = SC_FB_IDLE;
  pthread_cond_broadcast(&f->cv);
  return SC_SUCCESS;
}

static sc_result_t sc_check_tensor(const sc_fusion_t *f, int id, const char *fn) {
  if (!f) return SC_ERR(SC_ERR_INVALID_ARG, "%s: f is NULL", fn);
  if (!f->planned) return SC_ERR(SC_ERR_INVALID_ARG, "%s: call sc_fusion_plan first", fn);
  if (id < 0 || (size_t)id >= f->nt)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: tensor %d outside [0, %zu)", fn, id, f->nt);
  return SC_SUCCESS;
}

/* ready and skip: the tensor joins this round, with its gradient or zeros. */
static sc_result_t sc_fusion_mark(sc_fusion_t *f, int id, int skip, const char *fn) {
  SC_CHECK(sc_check_tensor(f, id, fn));
  if (f->p3) return sc_fusion_p3_mark(f, id, skip, fn);
  sc_ftensor_t *t = &f->t[id];
  sc_fbucket_t *b = &f->b[t->bucket];
  sc_result_t r = SC_SUCCESS;
  pthread_mutex_lock(&f->lock);
  if (f->failed != SC_SUCCESS) {
    r = sc_fusion_failed(f, fn);
    goto out;
  }
  if (t->ready) {
    /* Its round is not delivered: the buffer is the library's (a fused
     * copy, or the collective's own memory when zero copy). Finishing that
     * round here would drop its result; waiting would block on this rank. */
    r = SC_ERR(SC_ERR_INVALID_ARG,
               "%s: tensor %d is already ready (or skipped) and its round is still in flight "
               "(bucket %d %s): its buffer belongs to the library until sc_fusion_wait or "
               "sc_fusion_wait_all delivers that round",
               fn, id, t->bucket, b->state == SC_FB_INFLIGHT ? "launched" : "not launched yet");
    goto out;
  }
  t->ready = 1;
  b->state = SC_FB_FILLING;
  if (skip || !b->zero_copy || f->device) {
    /* Other tensors' copies and readies may proceed meanwhile: regions are
     * disjoint, and the bucket cannot launch before this one counts. A
     * skipped tensor's region is zeroed, in the fused buffer or (zero copy)
     * in its own buffer, which the library owns until the wait. A device
     * tensor's gradient may still be in the making on the default stream:
     * the fill waits for it even when there is nothing to copy. */
    pthread_mutex_unlock(&f->lock);
    if (f->device)
      r = sc_fusion_dev_fill(f, b->buf + t->offset, skip ? NULL : t->buf,
                             skip || !b->zero_copy ? t->bytes : 0);
    else if (skip)
      memset(b->buf + t->offset, 0, t->bytes);
    else
      memcpy(b->buf + t->offset, t->buf, t->bytes);
    pthread_mutex_lock(&f->lock);
    if (r != SC_SUCCESS) {
      /* The bucket can never launch on this rank now: fail the fusion, as a
       * failed collective does, so that no rank waits for it in silence. */
      sc_fusion_fail(f, r);
      goto out;
    }
  }
  if (++b->nready == b->last - b->first) {
    b->state = SC_FB_READY;
    r = sc_fusion_launch_ready(f);
  }
out:
  pthread_mutex_unlock(&f->lock);
  return r;
}

sc_result_t sc_fusion_ready(sc_fusion_t *f, int id) {
  return sc_fusion_mark(f, id, 0, "sc_fusion_ready");
}

sc_result_t sc_fusion_skip(sc_fusion_t *f, int id) {
  return sc_fusion_mark(f, id, 1, "sc_fusion_skip");
}

sc_result_t sc_fusion_wait(sc_fusion_t *f, int id) {
  const char *fn = "sc_fusion_wait";
  SC_CHECK(sc_check_tensor(f, id, fn));
  if (f->p3) return sc_fusion_p3_wait(f, id, fn);
  sc_result_t r = SC_SUCCESS;
  pthread_mutex_lock(&f->lock);
  if (f->failed != SC_SUCCESS) {
    r = sc_fusion_failed(f, fn);
  } else if (f->t[id].ready) {
    /* Only a tensor with a round in flight waits; one never made ready, or
     * already delivered (with its bucket, by an earlier wait), holds its last
     * result: the DeAR pattern wait-then-refill relies on that. */
    char who[48];
    snprintf(who, sizeof(who), "tensor %d", id);
    r = sc_fusion_complete(f, (size_t)f->t[id].bucket, fn, who);
  }
  pthread_mutex_unlock(&f->lock);
  return r;
}

sc_result_t sc_fusion_wait_all(sc_fusion_t *f) {
  const char *fn = "sc_fusion_wait_all";
  if (!f) return SC_ERR(SC_ERR_INVALID_ARG, "%s: f is NULL", fn);
  if (!f->planned) return SC_ERR(SC_ERR_INVALID_ARG, "%s: call sc_fusion_plan first", fn);
  if (f->p3) return sc_fusion_p3_wait_all(f);
  sc_result_t r = SC_SUCCESS;
  pthread_mutex_lock(&f->lock);
  /* Refuse up front, before delivering anything, when some bucket can never
   * finish (an unused parameter neither readied nor skipped, typically). */
  for (size_t i = 0; i < f->nb && r == SC_SUCCESS && f->failed == SC_SUCCESS; i++) {
    int prev;
    long l = sc_self_blocker(f, i, &prev);
    if (l >= 0) r = sc_self_blocked(f, i, l, prev, fn, "the round");
  }
  /* In launch order: a request finishes only after the earlier ones. DeAR's
   * all-gathers run in the reverse order, so start from the other end. */
  for (size_t k = 0; k < f->nb && r == SC_SUCCESS; k++) {
    size_t i = f->cfg.policy == SC_FUSE_DEAR ? f->nb - 1 - k : k;
    r = sc_fusion_complete(f, i, fn, "the round");
  }
  pthread_mutex_unlock(&f->lock);
  return r;
}
