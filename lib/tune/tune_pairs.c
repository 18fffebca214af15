/* SPDX-License-Identifier: BSD-3-Clause */
/* The message queues of a timing simulation, one per ordered pair of ranks
 * that the schedules connect: a receiver's senders, sorted, read off its
 * receive steps. A table of every ordered pair took P^2 queues (32 MiB and
 * most of a prediction's time at 1,024 ranks, 8 GiB at 16,384); this one
 * grows with the steps the schedules hold.
 *
 * A window of w ranks (w < p) replays only ranks 0..w-1 of a schedule in
 * which shifting every rank by w maps the job onto itself (a ring on hosts of
 * w ranks each): the messages rank j sends to rank i are then those rank
 * j mod w sends to rank i - (j - j mod w), whose queue a rank of the window
 * fills. Where the schedules map onto each other by XOR instead (recursive
 * doubling on a power of two, w a power of two), the messages rank j sends
 * to rank i are those j mod w sends to i XOR (j - j mod w). */
#include <stdlib.h>

#include "lib/base/error.h"
#include "lib/tune/tune.h"

int sc_tune_step_is_recv(const sc_tune_step_t *st) {
  return st->kind == SC_STEP_RECV || st->kind == SC_STEP_RECV_REDUCE ||
         st->kind == SC_STEP_SPARSE_RECV || st->kind == SC_STEP_SPARSE_RECV_MERGE;
}

static int sc_int_cmp(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

void sc_tune_pair_map(int p, int w, int by_xor, int *from, int *to) {
  const int d = *from - *from % w;
  *from -= d;
  *to = by_xor ? *to ^ d : (*to - d + p) % p;
}

/* The receives' senders bucketed by receiver (a counting sort into `from`),
 * sorted and made unique in place, then one queue per pair: no table of
 * (receiver, sender) records beside them, and no queue per receive step (a
 * pair's steps share one), which was most of a replay's memory at 1,024
 * ranks. */
sc_result_t sc_tune_pairs_build(sc_tune_pairs_t *t, int p, int by_xor, const sc_tune_replay_t *rp) {
  const int w = rp->w;
  *t = (sc_tune_pairs_t){.p = p, .w = w, .by_xor = by_xor};
  t->first = calloc((size_t)p + 1, sizeof(*t->first));
  if (!t->first) return SC_ERR(SC_ERR_NOMEM, "cost model queues for %d ranks", p);
  size_t n = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int j = 0; j < w; j++)
      for (size_t s = rp->first[j]; s < rp->first[j + 1]; s++) {
        const sc_tune_step_t *st = &rp->steps[s];
        if (!sc_tune_step_is_recv(st) || st->peer < 0 || st->peer >= p) continue;
        int from = st->peer, to = j;
        sc_tune_pair_map(p, w, by_xor, &from, &to);
        if (pass == 0)
          t->first[to + 1]++;
        else
          t->from[t->first[to]++] = from; /* first[to]: its next free slot */
      }
    if (pass == 0) {
      for (int j = 0; j < p; j++) t->first[j + 1] += t->first[j];
      n = t->first[p];
      t->from = malloc((n ? n : 1) * sizeof(*t->from));
      t->pool = malloc((n ? n : 1) * sizeof(double));
      if (!t->from || !t->pool) {
        sc_tune_pairs_free(t);
        return SC_ERR(SC_ERR_NOMEM, "cost model queues for %d ranks", p);
      }
    }
  }
  /* first[j] is now where receiver j's senders end: back to their starts. */
  for (int j = p; j > 0; j--) t->first[j] = t->first[j - 1];
  t->first[0] = 0;
  /* Each receiver's senders sorted; the pairs counted, then made unique
   * (moved down over the gaps), a queue each: its times a slice of the pool
   * as long as its receive steps (a malloc per queue was most of a replay's
   * time at 1,024 ranks). */
  size_t u = 0;
  for (int j = 0; j < p; j++) {
    const size_t lo = t->first[j], hi = t->first[j + 1];
    qsort(t->from + lo, hi - lo, sizeof(*t->from), sc_int_cmp);
    for (size_t k = lo; k < hi; k++) u += k == lo || t->from[k] != t->from[k - 1];
  }
  t->q = calloc(u ? u : 1, sizeof(*t->q));
  if (!t->q) {
    sc_tune_pairs_free(t);
    return SC_ERR(SC_ERR_NOMEM, "cost model queues for %d ranks", p);
  }
  u = 0;
  size_t lo = 0;
  for (int j = 0; j < p; j++) {
    const size_t hi = t->first[j + 1];
    t->first[j] = u;
    for (size_t k = lo; k < hi; k++) {
      if (k == lo || t->from[k] != t->from[k - 1]) {
        t->q[u] = (sc_arrivals_t){.t = t->pool + k, .pooled = 1};
        t->from[u++] = t->from[k];
      }
      t->q[u - 1].cap++;
    }
    lo = hi;
  }
  t->first[p] = u;
  return SC_SUCCESS;
}

sc_arrivals_t *sc_tune_pairs_q(sc_tune_pairs_t *t, int from, int to) {
  sc_tune_pair_map(t->p, t->w, t->by_xor, &from, &to);
  size_t lo = t->first[to], hi = t->first[to + 1];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->from[mid] < from)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < t->first[to + 1] && t->from[lo] == from ? &t->q[lo] : &t->unread;
}

void sc_tune_pairs_free(sc_tune_pairs_t *t) {
  if (t->q && t->first)
    for (size_t k = 0; k < t->first[t->p]; k++)
      if (!t->q[k].pooled) free(t->q[k].t);
  free(t->q);
  free(t->pool);
  free(t->first);
  free(t->from);
  free(t->unread.t);
  *t = (sc_tune_pairs_t){0};
}
