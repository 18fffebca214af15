/* SPDX-License-Identifier: BSD-3-Clause */
/* Gaussian-k, the approximate selector of "Understanding Top-k
 * Sparsification", made to hold on any input: estimate from a strided sample
 * the threshold whose tail holds k entries, count (and compact) the entries
 * above it in one pass, and accept when the count is in [k/2, 2k]. The common
 * case is that single pass. Otherwise the search keeps the best thresholds
 * found on either side of the range and interpolates ln(count) between them;
 * when a few rounds cannot land in range (ties at the boundary, spikes,
 * constant data) the exact selector answers. Every selection takes all
 * entries whose magnitude key exceeds a threshold key, so every selected
 * magnitude is >= every unselected one. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/topk.h"
#include "kernels/cpu/topk_gaussian.h"
#include "kernels/cpu/topk_keys.h"
#include "kernels/topk_top.h"
#include "lib/base/error.h"

/* Fewest sample values the tail fit uses. */
#define SC_TOPK_ANCHOR 64

int sc_topk_count_in_range(size_t count, size_t k) {
  /* count >= ceil(k/2): k/2 rounded down would let an odd k accept one entry
   * too few. */
  return count >= k - k / 2 && (k > SIZE_MAX / 2 || count <= 2 * k);
}

double sc_topk_sample_threshold(const double *top, size_t h, size_t taken, size_t n, size_t k,
                                double *slope) {
  *slope = 0;
  if (h == 0 || taken == 0 || n == 0) return 0;
  /* Expected number of sampled positions among the top k. */
  double r = (double)k * (double)taken / (double)n;
  /* Anchor rank: several times r, so that the anchor itself is well
   * determined (a rank-j order statistic misses its tail fraction by about
   * 1/sqrt(j)). */
  double want = 8 * r < SC_TOPK_ANCHOR ? SC_TOPK_ANCHOR : 8 * r;
  size_t rb = want < (double)h ? (size_t)want : h;
  if (rb < 1) rb = 1;
  double tb = top[rb - 1];
  /* An exponential tail, ln P(|v| > t) linear in t, its rate estimated by
   * maximum likelihood from the excesses over tb of the rb - 1 larger sample
   * values. Exact for Laplace, slightly conservative for normal tails and
   * slightly eager for power-law ones, each well within the factor of 2 the
   * count may miss by. */
  double excess = 0;
  for (size_t i = 0; i < rb; i++) excess += top[i] - tb;
  if (excess > 0 && rb > 1) *slope = -(double)(rb - 1) / excess;
  double fit = *slope == 0 ? tb : tb + (log(r) - log((double)rb)) / *slope;
  /* Error feedback's residual has no exponential tail: an entry grows until
   * it is picked, so the top of the distribution ends at a front, and there
   * the fit passed 2-50x too few entries (a constant Laplace gradient
   * accumulated over 30-60 steps, n = 590K-2.4M, k = n/1000). When r is
   * large enough to tell, check the fit against the sample itself: about r
   * sampled values should lie above it. If fewer than half or more than
   * twice as many do, the sample's own order statistic is the estimate: the
   * (r+1)-th largest has about r sampled positions above it, and the count
   * misses k by about 1/sqrt(r) (25% at the default sample and density
   * 0.001) whatever the shape. */
  size_t rr = (size_t)(r + 0.5);
  if (r >= SC_TOPK_EMPIRICAL_RANK && rr < h) {
    size_t above = 0;
    while (above < h && top[above] > fit) above++;
    if (2 * above < rr || above > 2 * rr) return top[rr];
  }
  return fit;
}

void sc_topk_search_init(sc_topk_search_t *s, size_t k, double slope) {
  memset(s, 0, sizeof *s);
  s->k = k;
  s->slope = slope < 0 && isfinite(slope) ? slope : 0;
}

int sc_topk_search_record(sc_topk_search_t *s, uint64_t key, double t, size_t count) {
  if (sc_topk_count_in_range(count, s->k)) return 1;
  if (count > s->k) {
    /* Too many: a higher threshold than any too-many one seen is tighter. */
    if (!s->has_lo || key > s->lo_key) {
      s->has_lo = 1;
      s->lo_key = key;
      s->lo_t = t;
      s->lo_count = count;
    }
  } else if (!s->has_hi || key < s->hi_key) {
    s->has_hi = 1;
    s->hi_key = key;
    s->hi_t = t;
    s->hi_count = count;
  }
  return 0;
}

/* ln(count), with an empty count read as half an entry so that the log stays
 * finite and still ranks below one. */
static double log_count(size_t c) {
  return log(c > 0 ? (double)c : 0.5);
}

double sc_topk_search_next(const sc_topk_search_t *s) {
  double target = log((double)s->k);
  if (s->has_lo && s->has_hi) {
    double ylo = log_count(s->lo_count), yhi = log_count(s->hi_count);
    double f = (ylo - target) / (ylo - yhi);
    /* Keep away from the ends: on a curved ln(count) plain false position can
     * creep along one side for many rounds. */
    if (!(f >= 0.1)) f = 0.1;
    if (f > 0.9) f = 0.9;
    return s->lo_t + f * (s->hi_t - s->lo_t);
  }
  if (s->has_lo) {
    if (s->slope < 0) return s->lo_t + (target - log_count(s->lo_count)) / s->slope;
    return s->lo_t > 0 ? 2 * s->lo_t : INFINITY;
  }
  if (s->has_hi) {
    double t = s->slope < 0 ? s->hi_t + (target - log_count(s->hi_count)) / s->slope : 0;
    return t > 0 ? t : s->hi_t / 2;
  }
  return NAN;
}

int sc_topk_search_key(const sc_topk_search_t *s, uint64_t proposed, uint64_t *key) {
  int above_lo = !s->has_lo || proposed > s->lo_key;
  int below_hi = !s->has_hi || proposed < s->hi_key;
  if (above_lo && below_hi) {
    *key = proposed;
    return 1;
  }
  if (s->has_lo && s->has_hi) {
    /* The proposal hit a tried key (rounding, or ties between the ends):
     * bisect the keys in between, if any. */
    if (s->hi_key - s->lo_key < 2) return 0;
    *key = s->lo_key + (s->hi_key - s->lo_key) / 2;
    return 1;
  }
  if (s->has_hi && s->hi_key > 0) {
    *key = s->hi_key / 2;
    return 1;
  }
  return 0;
}

/* The largest key whose magnitude is <= t: |v| > t exactly when key(v) >
 * that key, so the passes compare integers. Binary search over the keys (at
 * most 63 steps): exact for every dtype without per-type rounding code. */
static uint64_t threshold_key(const sc_topk_ops_t *ops, double t) {
  uint64_t lo = 0, hi = ops->inf_key;
  if (!(t >= 0)) return 0;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (ops->key_value(mid) <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* The sample keeps its SC_TOPK_TOP largest magnitudes (kernels/topk_top.h). */
typedef struct sample_top {
  double v[SC_TOPK_TOP];
  size_t h;
} sample_top_t;

double sc_topk_magnitude(const void *x, sc_dtype_t dtype, size_t i) {
  switch (dtype) {
  case SC_FLOAT16:
    return fabs((double)sc_half_to_float(((const uint16_t *)x)[i]));
  case SC_BFLOAT16:
    return fabs((double)sc_bfloat16_to_float(((const uint16_t *)x)[i]));
  case SC_FLOAT32:
    return fabs((double)((const float *)x)[i]);
  default:
    return fabs(((const double *)x)[i]);
  }
}

/* The largest finite magnitudes at evenly strided positions, sorted
 * descending. The sample is sized so that about SC_TOPK_TOP / 8 of its
 * positions fall in the top k (the tail is then read from SC_TOPK_TOP values),
 * at most SC_TOPK_SAMPLE and at most n; *taken: positions read. */
static void sample_top(const void *x, size_t n, sc_dtype_t dtype, size_t k, sample_top_t *t,
                       size_t *taken) {
  double want = (double)(SC_TOPK_TOP / 8) * (double)n / (double)k;
  size_t cnt = want < (double)SC_TOPK_SAMPLE ? (size_t)want : SC_TOPK_SAMPLE;
  if (cnt > n) cnt = n;
  if (cnt == 0) cnt = 1;
  size_t stride = n / cnt, i = stride / 2;
  t->h = 0;
  for (size_t j = 0; j < cnt; j++, i += stride) {
    double v = sc_topk_magnitude(x, dtype, i);
    if (isfinite(v)) sc_topk_heap_push(t->v, &t->h, SC_TOPK_TOP, v);
  }
  sc_topk_heap_sort_desc(t->v, t->h);
  *taken = cnt;
}

sc_result_t sc_topk_gaussian_indices(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                     uint32_t *indices, size_t *nnz) {
  const sc_topk_ops_t *ops = sc_topk_ops(dtype);
  *nnz = 0;
  if (!ops) return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: dtype %d is not floating point", dtype);
  if (k == 0 || n == 0) return SC_SUCCESS;
  if (k >= n) return sc_topk_exact_indices(x, n, dtype, k, indices, nnz);

  sample_top_t top;
  size_t taken;
  double slope;
  sample_top(x, n, dtype, k, &top, &taken);
  double t = sc_topk_sample_threshold(top.v, top.h, taken, n, k, &slope);
  sc_topk_search_t s;
  sc_topk_search_init(&s, k, slope);
  /* The caller's 2k indices receive the selection during each count; a
   * round whose count is in range leaves its answer there. */
  size_t cap = k <= SIZE_MAX / 2 ? 2 * k : SIZE_MAX;
  for (int round = 0; round < SC_TOPK_ROUNDS && top.h > 0; round++) {
    uint64_t key;
    if (isnan(t) || !sc_topk_search_key(&s, threshold_key(ops, t), &key)) break;
    size_t count = ops->collect(x, n, key, indices, cap);
    if (sc_topk_search_record(&s, key, ops->key_value(key), count)) {
      *nnz = count;
      return SC_SUCCESS;
    }
    t = sc_topk_search_next(&s);
  }
  /* The search cannot land in range (ties at the boundary, a sample that saw
   * no finite value, or too few rounds): the exact top k holds the contract. */
  return sc_topk_exact_indices(x, n, dtype, k, indices, nnz);
}
