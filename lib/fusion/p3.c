/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_FUSE_P3: priority-based parameter propagation (Jayarajan et al.,
 * SysML'19). Each tensor is cut into slices; a scheduler thread all-reduces
 * one slice at a time, always the highest-priority one (the tensor the next
 * forward pass needs first: the last registered) whose round is ready on
 * every rank, so a newly ready high-priority tensor overtakes the queued
 * slices of lower ones as soon as the slice in flight is through.
 *
 * Ranks see their ready calls at different times, yet must issue the same
 * collectives in the same order. So the choice is made from information
 * every rank shares: the scheduler runs in steps, and each step is one small
 * agreement all-reduce (MIN over ranks of each tensor's count of readies,
 * plus two flags) followed by a batch of slices, the ones sc_fplan_p3_batch
 * picks from the previous step's agreement: in priority order, up to a byte
 * budget (SC_P3_STEP_SLICES slices, the same on every rank). A batch pays
 * one agreement for several slices, at the price of a newly ready tensor
 * waiting for the whole batch in flight before it overtakes; the default is
 * one slice, since the agreement hides behind the slice in flight (see
 * SC_FPLAN_P3_BATCH_SLICES). The agreement of step k is queued ahead of
 * batch k, so the link carries batch k-1, agreement k, batch k, ... with no
 * gap to decide in. When a rank joins a step is local
 * (it waits for a ready of its own, or backs off while nothing can move),
 * but every rank runs the same sequence of steps and decisions.
 *
 * The scheduler has its own communicator (sc_comm_split at plan time): its
 * steps run whenever rounds are in flight on any rank, which no order of the
 * application's own collectives on the parent could match. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base/clock.h"
#include "lib/base/config.h"
#include "lib/base/log.h"
#include "lib/fusion/fusion.h"
#include "lib/fusion/plan.h"

/* Slices in flight: this step's batch plus the previous one (already
 * complete, as the comm runs in order, but not yet collected). */
enum { SC_P3_SLOTS = 2 * SC_FPLAN_P3_BATCH_MAX };
/* While some rank has a round pending but nothing can be launched, a rank
 * with no new ready of its own joins the next step after this back-off
 * (doubling from the first value): it bounds both the idle all-reduces and
 * the delay before the last rank's ready is agreed on. */
#define SC_P3_BACKOFF_MIN_US 100
#define SC_P3_BACKOFF_MAX_US 2000

typedef struct sc_p3_slot {
  sc_request_t *req;
  size_t t;
} sc_p3_slot_t;

struct sc_p3 {
  sc_comm_t *comm;
  size_t n;
  size_t *se, *ns;     /* elements per slice, slices per tensor */
  size_t *full, *tail; /* bytes of a slice, of the last slice */
  size_t budget;       /* bytes per step (sc_fplan_p3_batch) */
  size_t bt[SC_FPLAN_P3_BATCH_MAX], bi[SC_FPLAN_P3_BATCH_MAX]; /* this step's batch */
  size_t blen;
  uint64_t *gen;              /* readies on this rank (lock) */
  uint64_t *done;             /* rounds whose slices all completed here (lock) */
  uint64_t *launched;         /* rounds fully launched (scheduler thread only) */
  size_t *next, *left;        /* scheduler: next slice of the current round, slices not done */
  uint64_t *contrib, *agreed; /* n + 2 words: readies, ~pending, stop */
  sc_p3_slot_t slot[SC_P3_SLOTS];
  size_t shead, slen;
  uint64_t changes, seen; /* local readies and stop requests; the count last contributed */
  uint64_t slices_done;   /* slices completed here (lock): a wait's sign of progress */
  int stop, abandon, exited;
  pthread_t thread;
  int started;
  pthread_cond_t cv; /* wakes the scheduler */
};

/* Slice i of tensor t; sc_fplan_p3_batch has already advanced next/launched. */
static sc_result_t sc_p3_launch(sc_fusion_t *f, size_t t, size_t i) {
  sc_p3_t *p = f->p3;
  const sc_ftensor_t *ft = &f->t[t];
  size_t es = sc_dtype_size(ft->dtype);
  if (i == 0) p->left[t] = p->ns[t];
  size_t off = i * p->se[t], cnt = ft->count - off < p->se[t] ? ft->count - off : p->se[t];
  char *base = (char *)ft->buf + off * es;
  sc_p3_slot_t *s = &p->slot[(p->shead + p->slen) % SC_P3_SLOTS];
  s->t = t;
  s->req = NULL;
  /* In place: the tensor's buffer is the library's from ready until wait. */
  sc_result_t r = sc_iallreduce(base, base, cnt, ft->dtype, SC_AVG, p->comm, &s->req);
  if (s->req) p->slen++;
  return r;
}

/* Collects the oldest slice; the last one of a round completes the round. */
static sc_result_t sc_p3_collect(sc_fusion_t *f) {
  sc_p3_t *p = f->p3;
  sc_p3_slot_t *s = &p->slot[p->shead];
  p->shead = (p->shead + 1) % SC_P3_SLOTS;
  p->slen--;
  sc_result_t r = sc_wait(&s->req);
  if (r == SC_SUCCESS) {
    pthread_mutex_lock(&f->lock);
    p->slices_done++;
    if (--p->left[s->t] == 0) {
      p->done[s->t]++;
      pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->lock);
  }
  return r;
}

static sc_result_t sc_p3_collect_all(sc_fusion_t *f, size_t keep) {
  sc_result_t r = SC_SUCCESS;
  while (f->p3->slen > keep) {
    sc_result_t ri = sc_p3_collect(f);
    if (r == SC_SUCCESS) r = ri;
  }
  return r;
}

/* Lock held. Waits until this rank should join the next step. */
static void sc_p3_idle(sc_fusion_t *f, int active, long *backoff_us) {
  sc_p3_t *p = f->p3;
  for (;;) {
    /* A stopping rank keeps joining (blocking in the agreement) until every
     * rank stops: the others, dormant, join only on their own stop. */
    if (p->changes != p->seen || p->abandon || p->stop) return;
    /* Dormant (no rank has a round pending): only a ready here or a stop
     * can start the next step; the periodic wake-up is not a deadline. */
    long add_us = active ? *backoff_us : 1000000L;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    long ns = dl.tv_nsec + add_us % 1000000L * 1000L;
    dl.tv_sec += (time_t)(add_us / 1000000L + ns / 1000000000L);
    dl.tv_nsec = ns % 1000000000L;
    if (pthread_cond_timedwait(&p->cv, &f->lock, &dl) == ETIMEDOUT && active) {
      *backoff_us = *backoff_us * 2 > SC_P3_BACKOFF_MAX_US ? SC_P3_BACKOFF_MAX_US : *backoff_us * 2;
      return;
    }
  }
}

static void *sc_p3_main(void *arg) {
  sc_fusion_t *f = arg;
  sc_p3_t *p = f->p3;
  size_t n = p->n;
  int active = 0;
  long backoff = SC_P3_BACKOFF_MIN_US;
  sc_result_t r = SC_SUCCESS;
  pthread_mutex_lock(&f->lock);
  for (;;) {
    /* With a batch to send (p->bt/bi, p->blen) the step goes at once. */
    if (!p->blen) sc_p3_idle(f, active, &backoff);
    if (p->abandon) break;
    int pending = 0;
    for (size_t t = 0; t < n; t++) {
      p->contrib[t] = p->gen[t];
      if (p->gen[t] > p->launched[t]) pending = 1;
    }
    p->contrib[n] = ~(uint64_t)pending; /* MIN of ~x is ~(MAX of x) */
    p->contrib[n + 1] = p->stop ? 1 : 0;
    p->seen = p->changes;
    pthread_mutex_unlock(&f->lock);

    sc_request_t *areq = NULL;
    r = sc_iallreduce(p->contrib, p->agreed, n + 2, SC_UINT64, SC_MIN, p->comm, &areq);
    size_t inflight = 0;
    for (size_t b = 0; r == SC_SUCCESS && b < p->blen; b++, inflight++)
      r = sc_p3_launch(f, p->bt[b], p->bi[b]);
    if (areq) {
      sc_result_t ra = sc_wait(&areq);
      if (r == SC_SUCCESS) r = ra;
    }
    /* Everything launched before this step's agreement is through. */
    if (r == SC_SUCCESS) r = sc_p3_collect_all(f, inflight);
    if (r == SC_SUCCESS)
      p->blen = sc_fplan_p3_batch(n, p->agreed, p->launched, p->next, p->ns, p->full, p->tail,
                                  p->budget, SC_FPLAN_P3_BATCH_MAX, p->bt, p->bi);
    /* Nothing to send next: deliver what is in flight now, not a step later. */
    if (r == SC_SUCCESS && !p->blen) r = sc_p3_collect_all(f, 0);
    pthread_mutex_lock(&f->lock);
    if (r != SC_SUCCESS) {
      sc_fusion_fail(f, r);
      break;
    }
    active = ~p->agreed[n] != 0;
    if (p->blen) backoff = SC_P3_BACKOFF_MIN_US;
    if (!p->blen && p->agreed[n + 1] == 1) break; /* every rank is stopping */
  }
  pthread_mutex_unlock(&f->lock);
  sc_p3_collect_all(f, 0); /* after a failure: the requests still exist */
  pthread_mutex_lock(&f->lock);
  p->exited = 1;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

static void sc_p3_free(sc_p3_t *p) {
  free(p->se);
  free(p->gen);
  free(p->contrib);
  free(p);
}

/* The cost of one scheduler step as it runs here: an agreement all-reduce
 * and the thread hand-offs around it. On a loaded host that is far above the
 * link's fitted startup, and it is what a slice has to amortise. The MAX over
 * ranks of each one's median of a few steps, so every rank gets the same. */
static sc_result_t sc_p3_step_us(sc_p3_t *p, double *step_us) {
  enum { REPS = 9 };
  double t[REPS];
  SC_CHECK(sc_barrier(p->comm));
  for (int i = 0; i < REPS; i++) {
    double t0 = sc_fusion_now_us();
    SC_CHECK(sc_allreduce(p->contrib, p->agreed, p->n + 2, SC_UINT64, SC_MIN, p->comm));
    t[i] = sc_fusion_now_us() - t0;
  }
  for (int i = 1; i < REPS; i++) /* insertion sort */
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  double med = t[REPS / 2];
  SC_CHECK(sc_allreduce(&med, &med, 1, SC_FLOAT64, SC_MAX, p->comm));
  *step_us = med;
  return SC_SUCCESS;
}

sc_result_t sc_fusion_p3_start(sc_fusion_t *f, size_t slice_bytes, double alpha_us,
                               double beta_us_per_byte) {
  size_t n = f->nt;
  sc_p3_t *p = calloc(1, sizeof(*p));
  if (!p) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: P3 state");
  /* Three blocks: sizes, per-tensor counters, agreement words. */
  p->se = calloc(6 * n, sizeof(size_t));
  p->gen = calloc(3 * n, sizeof(uint64_t));
  p->contrib = calloc(2 * (n + 2), sizeof(uint64_t));
  if (!p->se || !p->gen || !p->contrib) {
    sc_p3_free(p);
    return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: P3 state of %zu tensors", n);
  }
  p->n = n;
  p->ns = p->se + n;
  p->next = p->se + 2 * n;
  p->left = p->se + 3 * n;
  p->full = p->se + 4 * n;
  p->tail = p->se + 5 * n;
  p->done = p->gen + n;
  p->launched = p->gen + 2 * n;
  p->agreed = p->contrib + n + 2;
  sc_result_t r = sc_comm_split(f->comm, 0, f->rank, &p->comm);
  if (r != SC_SUCCESS) {
    sc_p3_free(p);
    return r;
  }
  double step_us = 0;
  if (slice_bytes == 0) {
    r = sc_p3_step_us(p, &step_us);
    if (r != SC_SUCCESS) {
      sc_comm_destroy(p->comm);
      sc_p3_free(p);
      return r;
    }
    slice_bytes =
        sc_fplan_p3_default_slice(step_us > alpha_us ? step_us : alpha_us, beta_us_per_byte);
  }
  for (size_t t = 0; t < n; t++) {
    p->se[t] = sc_fplan_p3_slice_elems(slice_bytes, sc_dtype_size(f->t[t].dtype));
    p->ns[t] = sc_fplan_p3_nslices(f->t[t].count, p->se[t]);
    size_t es = sc_dtype_size(f->t[t].dtype),
           last = f->t[t].count - (p->ns[t] ? p->ns[t] - 1 : 0) * p->se[t];
    p->full[t] = p->se[t] * es;
    p->tail[t] = last * es;
  }
  /* The MIN over ranks: the budget decides which collectives go, so every
   * rank must hold the same one whatever its environment says. */
  long steps = SC_FPLAN_P3_BATCH_SLICES;
  r = sc_parse_long("SC_P3_STEP_SLICES", sc_config_get("SC_P3_STEP_SLICES"), 1,
                    SC_FPLAN_P3_BATCH_MAX, &steps);
  int64_t st = r == SC_SUCCESS ? steps : 0; /* 0: refused here, so refused everywhere */
  sc_result_t ra = sc_allreduce(&st, &st, 1, SC_INT64, SC_MIN, p->comm);
  if (r == SC_SUCCESS && ra != SC_SUCCESS) r = ra;
  if (r == SC_SUCCESS && st < 1)
    r = SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_plan: SC_P3_STEP_SLICES is invalid on some rank");
  if (r != SC_SUCCESS) {
    sc_comm_destroy(p->comm);
    sc_p3_free(p);
    return r;
  }
  p->budget = slice_bytes > SIZE_MAX / (size_t)st ? SIZE_MAX : slice_bytes * (size_t)st;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  f->p3 = p;
  int e = pthread_create(&p->thread, NULL, sc_p3_main, f);
  if (e) {
    f->p3 = NULL;
    pthread_cond_destroy(&p->cv);
    sc_comm_destroy(p->comm);
    sc_p3_free(p);
    return SC_ERR(SC_ERR_SYSTEM, "sc_fusion_plan: P3 scheduler: pthread_create: error %d", e);
  }
  p->started = 1;
  if (f->rank == 0)
    SC_INFO(SC_SUBSYS_COLL,
            "fusion P3: slices of %zu bytes, up to %zu bytes a step, %zu tensors (model alpha %.1f "
            "us, beta %.3g us/B, "
            "measured step %.1f us)",
            slice_bytes, p->budget, n, alpha_us, beta_us_per_byte, step_us);
  return SC_SUCCESS;
}

sc_result_t sc_fusion_p3_stop(sc_fusion_t *f) {
  sc_p3_t *p = f->p3;
  if (!p) return SC_SUCCESS;
  sc_result_t r = SC_SUCCESS;
  pthread_mutex_lock(&f->lock);
  p->stop = 1;
  p->changes++;
  pthread_cond_signal(&p->cv);
  struct timespec dl;
  sc_clock_deadline_ts(f->timeout_ms, &dl);
  while (!p->exited) {
    if (pthread_cond_timedwait(&f->cv, &f->lock, &dl) == ETIMEDOUT && !p->exited) {
      /* Some rank has not destroyed its fusion object: leave without the
       * agreement (that rank's next step then fails on its own timeout). */
      r = SC_ERR(SC_ERR_TIMEOUT,
                 "sc_fusion_destroy: rank %d: the P3 scheduler did not agree to stop within %d "
                 "ms: every rank must destroy its fusion object",
                 f->rank, f->timeout_ms);
      p->abandon = 1;
      pthread_cond_signal(&p->cv);
      break;
    }
  }
  pthread_mutex_unlock(&f->lock);
  pthread_join(p->thread, NULL);
  pthread_cond_destroy(&p->cv);
  sc_comm_destroy(p->comm);
  sc_p3_free(p);
  f->p3 = NULL;
  return r;
}

sc_result_t sc_fusion_p3_mark(sc_fusion_t *f, int id, int skip, const char *fn) {
  sc_ftensor_t *t = &f->t[id];
  sc_result_t r = SC_SUCCESS;
  pthread_mutex_lock(&f->lock);
  if (f->failed != SC_SUCCESS) {
    r = SC_ERR(f->failed, "%s: an earlier collective of this fusion failed: %s", fn, f->failmsg);
  } else if (t->ready) {
    r = SC_ERR(SC_ERR_INVALID_ARG,
               "%s: tensor %d is already ready (or skipped) and its round is still in flight "
               "(P3 slices): its buffer belongs to the library until sc_fusion_wait or "
               "sc_fusion_wait_all delivers that round",
               fn, id);
  } else {
    t->ready = 1;
    if (skip || f->device) {
      /* The scheduler cannot touch the tensor before gen counts it. A device
       * gradient may still be in the making on the default stream. */
      pthread_mutex_unlock(&f->lock);
      if (f->device)
        r = sc_fusion_dev_fill(f, t->buf, NULL, skip ? t->bytes : 0);
      else
        memset(t->buf, 0, t->bytes);
      pthread_mutex_lock(&f->lock);
    }
    if (r != SC_SUCCESS) {
      t->ready = 0;
      sc_fusion_fail(f, r);
    } else {
      f->p3->gen[id]++;
      f->p3->changes++;
      pthread_cond_signal(&f->p3->cv);
    }
  }
  pthread_mutex_unlock(&f->lock);
  return r;
}

/* Lock held. */
static sc_result_t sc_p3_finish(sc_fusion_t *f, size_t id, const char *fn) {
  sc_p3_t *p = f->p3;
  if (!f->t[id].ready) return SC_SUCCESS; /* no round in flight: its last result is there */
  /* SC_TIMEOUT_MS bounds a stall, not a round: a tensor of many slices may
   * take longer than that while slices keep completing. */
  struct timespec dl;
  sc_clock_deadline_ts(f->timeout_ms, &dl);
  uint64_t progress = p->slices_done;
  while (p->done[id] < p->gen[id]) {
    if (f->failed != SC_SUCCESS)
      return SC_ERR(f->failed, "%s: an earlier collective of this fusion failed: %s", fn,
                    f->failmsg);
    /* Its slices launch once every rank made it ready; nothing on this rank
     * holds them back (no plan order), so only other ranks or the network
     * can make this wait long. */
    if (pthread_cond_timedwait(&f->cv, &f->lock, &dl) != ETIMEDOUT || p->done[id] >= p->gen[id])
      continue;
    if (p->slices_done != progress) {
      progress = p->slices_done;
      sc_clock_deadline_ts(f->timeout_ms, &dl);
      continue;
    }
    return SC_ERR(SC_ERR_TIMEOUT,
                  "%s: rank %d: tensor %zu (P3, %zu slices) not finished, and no slice of this "
                  "fusion completed for %d ms: made ready here; not yet ready on every rank, or "
                  "its slices are stuck in flight",
                  fn, f->rank, id, p->ns[id], f->timeout_ms);
  }
  f->t[id].ready = 0;
  return SC_SUCCESS;
}

sc_result_t sc_fusion_p3_wait(sc_fusion_t *f, int id, const char *fn) {
  pthread_mutex_lock(&f->lock);
  sc_result_t r =
      f->failed != SC_SUCCESS
          ? SC_ERR(f->failed, "%s: an earlier collective of this fusion failed: %s", fn, f->failmsg)
          : sc_p3_finish(f, (size_t)id, fn);
  pthread_mutex_unlock(&f->lock);
  return r;
}

sc_result_t sc_fusion_p3_wait_all(sc_fusion_t *f) {
  const char *fn = "sc_fusion_wait_all";
  sc_result_t r = SC_SUCCESS;
  pthread_mutex_lock(&f->lock);
  if (f->failed != SC_SUCCESS)
    r = SC_ERR(f->failed, "%s: an earlier collective of this fusion failed: %s", fn, f->failmsg);
  /* Highest priority first: the order the slices go. */
  for (size_t t = f->nt; t-- > 0 && r == SC_SUCCESS;) r = sc_p3_finish(f, t, fn);
  pthread_mutex_unlock(&f->lock);
  return r;
}
