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

int sc_tune_step_is_recv(const sc_step_t *st) {
  return st->kind == SC_STEP_RECV || st->kind == SC_STEP_RECV_REDUCE ||
         st->kind == SC_STEP_SPARSE_RECV || st->kind == SC_STEP_SPARSE_RECV_MERGE;
}

typedef struct sc_pair {
  int to, from;
} sc_pair_t;

static int sc_pair_cmp(const void *a, const void *b) {
  const sc_pair_t *x = a, *y = b;
  if (x->to != y->to) return (x->to > y->to) - (x->to < y->to);
  return (x->from > y->from) - (x->from < y->from);
}

void sc_tune_pair_map(int p, int w, int by_xor, int *from, int *to) {
  const int d = *from - *from % w;
  *from -= d;
  *to = by_xor ? *to ^ d : (*to - d + p) % p;
}

sc_result_t sc_tune_pairs_build(sc_tune_pairs_t *t, int p, int w, int by_xor,
                                const sc_sched_t *scheds) {
  *t = (sc_tune_pairs_t){.p = p, .w = w, .by_xor = by_xor};
  size_t total = 0;
  for (int j = 0; j < w; j++)
    for (size_t s = 0; s < scheds[j].nsteps; s++)
      total += sc_tune_step_is_recv(&scheds[j].steps[s]);
  sc_pair_t *pairs = malloc((total ? total : 1) * sizeof(*pairs));
  t->first = calloc((size_t)p + 1, sizeof(*t->first));
  t->from = malloc((total ? total : 1) * sizeof(*t->from));
  if (!pairs || !t->first || !t->from) {
    free(pairs);
    sc_tune_pairs_free(t);
    return SC_ERR(SC_ERR_NOMEM, "cost model queues for %d ranks", p);
  }
  size_t n = 0;
  for (int j = 0; j < w; j++)
    for (size_t s = 0; s < scheds[j].nsteps; s++) {
      const sc_step_t *st = &scheds[j].steps[s];
      if (!sc_tune_step_is_recv(st) || st->peer < 0 || st->peer >= p) continue;
      sc_pair_t e = {.to = j, .from = st->peer};
      sc_tune_pair_map(p, w, by_xor, &e.from, &e.to);
      pairs[n++] = e;
    }
  qsort(pairs, n, sizeof(*pairs), sc_pair_cmp);
  /* One queue per pair, its times a slice of one pool as long as the pair's
   * receive steps: a malloc per queue was most of a replay's time at 1,024
   * ranks. */
  t->q = calloc(n ? n : 1, sizeof(*t->q));
  t->pool = malloc((n ? n : 1) * sizeof(double));
  if (!t->q || !t->pool) {
    free(pairs);
    sc_tune_pairs_free(t);
    return SC_ERR(SC_ERR_NOMEM, "cost model queues for %d ranks", p);
  }
  size_t u = 0;
  for (size_t k = 0; k < n; k++) {
    if (u == 0 || pairs[k].to != pairs[u - 1].to || pairs[k].from != pairs[u - 1].from) {
      pairs[u++] = pairs[k];
      t->q[u - 1] = (sc_arrivals_t){.t = t->pool + k, .pooled = 1};
    }
    t->q[u - 1].cap++;
  }
  for (size_t k = 0; k < u; k++) {
    t->from[k] = pairs[k].from;
    t->first[pairs[k].to + 1]++;
  }
  for (int j = 0; j < p; j++) t->first[j + 1] += t->first[j];
  free(pairs);
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
