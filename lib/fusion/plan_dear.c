/* SPDX-License-Identifier: BSD-3-Clause */
/* DeAR's bucket plan under the cost model (plan.h, sc_fplan_dear_model;
 * docs/ALGORITHMS.md, "Bucket fusion"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/fusion/plan.h"

/* Prefix sums of the tensors' ready times and bytes, so that one plan is
 * priced in O(buckets), which the local search below relies on. */
typedef struct sc_dear_model {
  size_t n;
  const double *ready; /* ready[l]: when tensors [0, l) are all ready */
  const double *bytes; /* bytes[l]: bytes of tensors [0, l) */
  const size_t *run;   /* run[l]: the first tensor of l's run of one group */
  size_t max_bytes;
  double alpha_us, half_beta;
} sc_dear_model_t;

static double sc_dear_price(const sc_dear_model_t *m, const size_t *first, size_t nb) {
  double link = 0.0;
  for (size_t b = 0; b < nb; b++) {
    double r = m->ready[first[b + 1]];
    link = (link > r ? link : r) + m->alpha_us +
           m->half_beta * (m->bytes[first[b + 1]] - m->bytes[first[b]]);
  }
  /* The all-gathers follow in forward order; each bucket's layers run
   * forward once it is in and the layers before it are done. */
  double fwd = m->ready[m->n];
  for (size_t b = nb; b-- > 0;) {
    link += m->alpha_us + m->half_beta * (m->bytes[first[b + 1]] - m->bytes[first[b]]);
    fwd = (fwd > link ? fwd : link) +
          SC_FPLAN_DEAR_FWD_PER_BWD * (m->ready[first[b + 1]] - m->ready[first[b]]);
  }
  return fwd;
}

/* May tensors [a, b) share a bucket? */
static int sc_dear_fits(const sc_dear_model_t *m, size_t a, size_t b) {
  if (b - a <= 1) return 1;
  if (m->run[b - 1] > a) return 0;
  return m->bytes[b] - m->bytes[a] <= (double)m->max_bytes;
}

/* Steepest descent over three moves: drop a boundary (merge two buckets),
 * add one (split a bucket), or move one between its neighbours. cand has
 * room for n + 1 entries. Ends when no move lowers the price or the
 * evaluation budget (shared by every descent of one plan) is spent;
 * returns the bucket count, first updated. */
static size_t sc_dear_descend(const sc_dear_model_t *m, size_t *first, size_t nb, size_t *cand,
                              size_t *budget_left) {
  double cur = sc_dear_price(m, first, nb);
  size_t budget = *budget_left;
  for (;;) {
    double best = cur;
    size_t best_kind = 0, best_at = 0, best_pos = 0; /* 1 drop, 2 add, 3 move */
    for (size_t i = 1; i < nb && budget; i++) {      /* drop boundary i */
      if (!sc_dear_fits(m, first[i - 1], first[i + 1])) continue;
      memcpy(cand, first, i * sizeof(*cand));
      memcpy(cand + i, first + i + 1, (nb - i) * sizeof(*cand));
      double p = sc_dear_price(m, cand, nb - 1);
      budget--;
      if (p < best) best = p, best_kind = 1, best_at = i;
    }
    for (size_t b = 0; b < nb && budget; b++) /* add a boundary inside bucket b */
      for (size_t p = first[b] + 1; p < first[b + 1] && budget; p++) {
        memcpy(cand, first, (b + 1) * sizeof(*cand));
        cand[b + 1] = p;
        memcpy(cand + b + 2, first + b + 1, (nb - b) * sizeof(*cand));
        double c = sc_dear_price(m, cand, nb + 1);
        budget--;
        if (c < best) best = c, best_kind = 2, best_at = b, best_pos = p;
      }
    for (size_t i = 1; i < nb && budget; i++) /* move boundary i */
      for (size_t p = first[i - 1] + 1; p < first[i + 1] && budget; p++) {
        if (p == first[i] || !sc_dear_fits(m, first[i - 1], p) || !sc_dear_fits(m, p, first[i + 1]))
          continue;
        memcpy(cand, first, (nb + 1) * sizeof(*cand));
        cand[i] = p;
        double c = sc_dear_price(m, cand, nb);
        budget--;
        if (c < best) best = c, best_kind = 3, best_at = i, best_pos = p;
      }
    if (best_kind == 0 || !(best < cur * (1.0 - 1e-12))) {
      *budget_left = budget;
      return nb;
    }
    if (best_kind == 1) {
      memmove(first + best_at, first + best_at + 1, (nb - best_at) * sizeof(*first));
      nb--;
    } else if (best_kind == 2) {
      memmove(first + best_at + 2, first + best_at + 1, (nb - best_at) * sizeof(*first));
      first[best_at + 1] = best_pos;
      nb++;
    } else {
      first[best_at] = best_pos;
    }
    cur = best;
  }
}

/* pre: 2(n + 1) doubles; run: n entries, or NULL where only prices are
 * needed (sc_dear_fits reads it, sc_dear_price does not). */
static sc_dear_model_t sc_dear_model(const sc_fplan_in_t *in, double alpha_us,
                                     double beta_us_per_byte, size_t max_bytes, double *pre,
                                     size_t *run) {
  size_t n = in->n;
  pre[0] = pre[n + 1] = 0.0;
  for (size_t l = 0; l < n; l++) {
    pre[l + 1] = pre[l] + (in->bw_us ? in->bw_us[l] : 0.0);
    pre[n + 1 + l + 1] = pre[n + 1 + l] + (double)in->bytes[l];
    if (run) run[l] = l > 0 && (!in->group || in->group[l] == in->group[l - 1]) ? run[l - 1] : l;
  }
  sc_dear_model_t m = {.n = n,
                       .ready = pre,
                       .bytes = pre + n + 1,
                       .run = run,
                       .max_bytes = max_bytes,
                       .alpha_us = alpha_us,
                       .half_beta = beta_us_per_byte / 2};
  return m;
}

double sc_fplan_dear_time(const sc_fplan_in_t *in, const size_t *first, size_t nb, double alpha_us,
                          double beta_us_per_byte) {
  double *pre = (double *)malloc(2 * (in->n + 1) * sizeof(double));
  if (!pre) return NAN;
  sc_dear_model_t m = sc_dear_model(in, alpha_us, beta_us_per_byte, SIZE_MAX, pre, NULL);
  double t = sc_dear_price(&m, first, nb);
  free(pre);
  return t;
}

size_t sc_fplan_dear_model(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                           size_t max_bytes, size_t *first) {
  size_t n = in->n;
  int timed = 0;
  for (size_t l = 0; in->bw_us && l < n; l++) timed |= in->bw_us[l] > 0.0;
  /* Without backward times, or without a cost, the model sees no overlap to
   * plan for: keep the size rule. */
  if (n == 0 || !timed || !(alpha_us >= 0.0) || !(beta_us_per_byte > 0.0))
    return sc_fplan_dear(in, max_bytes, first);
  double *pre = (double *)malloc(2 * (n + 1) * sizeof(double));
  size_t *best = (size_t *)malloc(4 * (n + 1) * sizeof(size_t));
  if (!pre || !best) {
    free(pre);
    free(best);
    return sc_fplan_dear(in, max_bytes, first); /* out of memory: still a valid plan */
  }
  size_t *cand = best + n + 1, *scratch = cand + n + 1, *run = scratch + n + 1;
  sc_dear_model_t m = sc_dear_model(in, alpha_us, beta_us_per_byte, max_bytes, pre, run);
  /* Seeds: the size rule's family (the first bucket in forward order capped
   * at max_bytes / 2^k, doubling after), one bucket per tensor, the fewest
   * buckets the cap allows, and the backward half alone planned by OMGS.
   * The descent runs from each: the price has local minima. */
  size_t best_nb = 0, budget = SC_FPLAN_DEAR_SEARCH_EVALS;
  double best_t = INFINITY;
  for (int seed = 0; seed < 3 + 8 * (int)sizeof(size_t); seed++) {
    size_t nb;
    if (seed == 0)
      nb = sc_fplan_none(in, cand);
    else if (seed == 1)
      nb = sc_fplan_size(in, max_bytes, cand);
    else if (seed == 2)
      nb = sc_fplan_omgs(in, alpha_us, beta_us_per_byte / 2, max_bytes, cand);
    else if ((max_bytes >> (seed - 3)) > 0)
      nb = sc_fplan_dear_capped(in, max_bytes, max_bytes >> (seed - 3), cand);
    else
      break;
    nb = sc_dear_descend(&m, cand, nb, scratch, &budget);
    double t = sc_dear_price(&m, cand, nb);
    if (t < best_t) {
      best_t = t;
      best_nb = nb;
      memcpy(best, cand, (nb + 1) * sizeof(*best));
    }
  }
  if (best_nb > 0) memcpy(first, best, (best_nb + 1) * sizeof(*first));
  free(pre);
  free(best);
  /* No finite price (times or costs past double's range): the size rule. */
  return best_nb > 0 ? best_nb : sc_fplan_dear(in, max_bytes, first);
}
