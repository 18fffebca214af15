/* SPDX-License-Identifier: BSD-3-Clause */
/* The Gaussian-k contract of sc_topk (docs/API.md): for any input with at
 * least k finite values, k/2 <= nnz <= 2k, every selected magnitude >= every
 * unselected non-NaN one, NaN never selected, indices sorted and unique.
 * Checked against an independent reference (magnitudes decoded here, sorted)
 * on normal, Laplace, Student-t(3), skewed, constant, mostly-zero and spiky
 * data in every float dtype; and the search's decision functions directly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/topk.h"
#include "kernels/cpu/topk_gaussian.h"
#include "kernels/topk_top.h"
#include "sparsecoll.h"

static uint64_t rng_state;

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_unit(void) { /* (0, 1] */
  return ((double)(rng_next() >> 11) + 1.0) * 0x1p-53;
}

static double rng_normal(void) { /* Box-Muller, one draw */
  return sqrt(-2.0 * log(rng_unit())) * cos(2.0 * M_PI * rng_unit());
}

typedef enum { D_NORMAL, D_LAPLACE, D_T3, D_SKEWED, D_EQUAL, D_ZEROS90, D_SPIKES, D_COUNT } dist_t;
static const char *const dist_names[] = {"normal", "laplace", "t3",    "skewed",
                                         "equal",  "zeros90", "spikes"};

static double draw(dist_t d, size_t i) {
  double z;
  switch (d) {
  case D_NORMAL:
    return rng_normal();
  case D_LAPLACE:
    z = -log(rng_unit());
    return rng_unit() < 0.5 ? -z : z;
  case D_T3: /* normal / sqrt(chi2_3 / 3) */
    z = rng_normal();
    {
      double a = rng_normal(), b = rng_normal(), c = rng_normal();
      return z / sqrt((a * a + b * b + c * c) / 3.0);
    }
  case D_SKEWED: /* the issue's case: half normal, half folded non-negative */
    z = rng_normal();
    return i % 2 ? fabs(z) : z;
  case D_EQUAL:
    return 0.75;
  case D_ZEROS90:
    return rng_unit() < 0.9 ? 0.0 : rng_normal();
  default: /* spikes: tiny noise, every 997th entry huge */
    return i % 997 == 3 ? 1000.0 + (double)(i % 7) : 1e-3 * rng_normal();
  }
}

static size_t esize(sc_dtype_t t) {
  return t == SC_FLOAT64 ? 8 : t == SC_FLOAT32 ? 4 : 2;
}

static void store(sc_dtype_t t, void *buf, size_t i, double v) {
  float f = (float)v;
  uint16_t h;
  switch (t) {
  case SC_FLOAT16:
    h = sc_float_to_half(f);
    memcpy((char *)buf + 2 * i, &h, 2);
    break;
  case SC_BFLOAT16:
    h = sc_float_to_bfloat16(f);
    memcpy((char *)buf + 2 * i, &h, 2);
    break;
  case SC_FLOAT32:
    memcpy((char *)buf + 4 * i, &f, 4);
    break;
  default:
    memcpy((char *)buf + 8 * i, &v, 8);
    break;
  }
}

static double load(sc_dtype_t t, const void *buf, size_t i) {
  uint16_t h;
  float f;
  double v;
  switch (t) {
  case SC_FLOAT16:
    memcpy(&h, (const char *)buf + 2 * i, 2);
    return sc_half_to_float(h);
  case SC_BFLOAT16:
    memcpy(&h, (const char *)buf + 2 * i, 2);
    return sc_bfloat16_to_float(h);
  case SC_FLOAT32:
    memcpy(&f, (const char *)buf + 4 * i, 4);
    return f;
  default:
    memcpy(&v, (const char *)buf + 8 * i, 8);
    return v;
  }
}

static void fill(sc_dtype_t t, void *buf, size_t n, dist_t d, uint64_t seed) {
  rng_state = seed * 0x9e3779b97f4a7c15ull + 7;
  for (size_t i = 0; i < n; i++) store(t, buf, i, draw(d, i));
}

static int cmp_desc(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x > y ? -1 : x < y;
}

/* Runs Gaussian-k and checks the contract against a sorted copy of the
 * magnitudes. Returns nnz. */
static size_t check(sc_dtype_t t, const void *buf, size_t n, size_t k, const char *what) {
  uint32_t *idx = malloc(2 * k * sizeof *idx + 4);
  void *vals = malloc(2 * k * 8 + 8);
  double *mags = malloc(n * sizeof *mags);
  unsigned char *sel = calloc(n, 1);
  assert_true(idx && vals && mags && sel);
  size_t nnz = 99, finite = 0, nonnan = 0;
  assert_int_equal(sc_topk(buf, n, t, k, SC_SELECT_GAUSSIAN, idx, vals, &nnz), SC_SUCCESS);
  for (size_t i = 0; i < n; i++) {
    double v = load(t, buf, i);
    finite += isfinite(v) != 0;
    if (!isnan(v)) mags[nonnan++] = fabs(v);
  }
  if (finite >= k && (2 * nnz < k || nnz > 2 * k))
    fail_msg("%s: nnz %zu outside [k/2, 2k] for k = %zu (n %zu)", what, nnz, k, n);
  assert_true(nnz <= 2 * k);
  double min_sel = INFINITY;
  for (size_t j = 0; j < nnz; j++) {
    if (j > 0) assert_true(idx[j - 1] < idx[j]);
    assert_true(idx[j] < n);
    double v = load(t, buf, idx[j]);
    assert_false(isnan(v));
    assert_memory_equal((char *)vals + j * esize(t), (const char *)buf + idx[j] * esize(t),
                        esize(t));
    sel[idx[j]] = 1;
    if (fabs(v) < min_sel) min_sel = fabs(v);
  }
  /* Independent check: after sorting, the nnz-th largest magnitude is the
   * smallest selected one, and nothing unselected exceeds it. */
  qsort(mags, nonnan, sizeof *mags, cmp_desc);
  if (nnz > 0) {
    assert_true(min_sel == mags[nnz - 1]);
    for (size_t i = 0; i < n; i++) {
      double v = load(t, buf, i);
      if (!sel[i] && !isnan(v) && fabs(v) > min_sel)
        fail_msg("%s: unselected |x[%zu]| = %g > selected %g", what, i, fabs(v), min_sel);
    }
  }
  free(idx);
  free(vals);
  free(mags);
  free(sel);
  return nnz;
}

static const sc_dtype_t dtypes[] = {SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
static const char *const dtype_names[] = {"fp16", "bf16", "fp32", "fp64"};

/* Every distribution x every dtype x several n and k, k = 1 and k > n/2
 * included. */
static void test_contract_all_inputs(void **state) {
  (void)state;
  const size_t ns[] = {37, 5000, 100000};
  void *buf = malloc(100000 * 8);
  assert_non_null(buf);
  char what[128];
  for (size_t d = 0; d < 4; d++)
    for (int dist = 0; dist < D_COUNT; dist++)
      for (size_t ni = 0; ni < 3; ni++) {
        size_t n = ns[ni];
        fill(dtypes[d], buf, n, (dist_t)dist, 11 + ni + 100 * (uint64_t)dist);
        const size_t ks[] = {1, 2, n / 1000 + 1, n / 100 + 1, n / 10, n / 2 + 1, n - 1};
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
          if (ks[ki] == 0) continue;
          snprintf(what, sizeof what, "%s %s n=%zu k=%zu", dtype_names[d], dist_names[dist], n,
                   ks[ki]);
          check(dtypes[d], buf, n, ks[ki], what);
        }
      }
  free(buf);
}

/* The issue's reproduction: 100,000 skewed values, k = 1000 (was 13). */
static void test_skewed_issue_case(void **state) {
  (void)state;
  const size_t n = 100000, k = 1000;
  float *buf = malloc(n * sizeof *buf);
  assert_non_null(buf);
  for (uint64_t seed = 0; seed < 20; seed++) {
    fill(SC_FLOAT32, buf, n, D_SKEWED, seed);
    check(SC_FLOAT32, buf, n, k, "skewed");
  }
  free(buf);
}

/* All NaN but k entries: between k/2 and k of them, never a NaN. */
static void test_all_nan_but_k(void **state) {
  (void)state;
  const size_t n = 20000, k = 50;
  for (size_t d = 0; d < 4; d++) {
    void *buf = malloc(n * 8);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) store(dtypes[d], buf, i, NAN);
    for (size_t j = 0; j < k; j++) store(dtypes[d], buf, j * 397 + 5, 1.0 + (double)j);
    size_t nnz = check(dtypes[d], buf, n, k, dtype_names[d]);
    assert_true(2 * nnz >= k && nnz <= k);
    free(buf);
  }
}

/* Constant data: no threshold lands in range, so the exact fallback answers
 * with exactly k entries (ties toward the lower index). */
static void test_fallback_on_ties(void **state) {
  (void)state;
  const size_t n = 10000, k = 100;
  float *buf = malloc(n * sizeof *buf);
  uint32_t idx[200];
  float vals[200];
  assert_non_null(buf);
  for (size_t i = 0; i < n; i++) buf[i] = -2.5f;
  size_t nnz;
  assert_int_equal(sc_topk(buf, n, SC_FLOAT32, k, SC_SELECT_GAUSSIAN, idx, vals, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, k);
  for (size_t j = 0; j < k; j++) assert_int_equal(idx[j], j);
  free(buf);
}

/* ---- the decision functions ---- */

static void test_count_in_range(void **state) {
  (void)state;
  assert_false(sc_topk_count_in_range(2, 5)); /* 2 < 5/2 */
  assert_true(sc_topk_count_in_range(3, 5));
  assert_true(sc_topk_count_in_range(10, 5));
  assert_false(sc_topk_count_in_range(11, 5));
  assert_true(sc_topk_count_in_range(1, 1));
  assert_true(sc_topk_count_in_range(2, 1));
  assert_false(sc_topk_count_in_range(0, 1));
  assert_false(sc_topk_count_in_range(3, 1));
}

/* An exponential sample tail gives back its own quantile and rate. */
static void test_sample_threshold(void **state) {
  (void)state;
  /* top[i] = the (i+1)-th largest of 16384 Exp(1) draws ~ ln(16384/(i+1)). */
  double top[256];
  for (size_t i = 0; i < 256; i++) top[i] = log(16384.0 / (double)(i + 1));
  double slope;
  double t = sc_topk_sample_threshold(top, 256, 16384, 1u << 24, 1u << 14, &slope);
  /* k/n = 1/1024: the quantile is ln(1024) = 6.93. */
  assert_true(fabs(t - log(1024.0)) < 0.15);
  assert_true(fabs(slope + 1.0) < 0.1);
  /* Ties: no slope, the anchor value itself. */
  for (size_t i = 0; i < 256; i++) top[i] = 3.0;
  t = sc_topk_sample_threshold(top, 256, 16384, 1u << 24, 1u << 14, &slope);
  assert_true(slope == 0.0 && t == 3.0);
  /* A front, as error feedback's residual has: the top 256 of the sample
   * evenly spaced just below 1. r = 16 sampled positions belong in the top
   * k; the exponential fit over the 128 largest (excesses 0..0.0127, rate
   * 127 / 0.8128 = 156) extrapolates to 1.0006, above every sampled value,
   * so the sample overrules it: its 17th largest, with 16 above. */
  for (size_t i = 0; i < 256; i++) top[i] = 1.0 - 1e-4 * (double)i;
  t = sc_topk_sample_threshold(top, 256, 16384, 1u << 24, 1u << 14, &slope);
  assert_true(t == top[16]);
  assert_true(slope < -150 && slope > -160);
  /* The same front, but r = 4: too few sampled positions to overrule the
   * fit, which stands (rate and anchor as before, extrapolated to r = 4). */
  t = sc_topk_sample_threshold(top, 256, 16384, 1u << 24, 1u << 12, &slope);
  double tb = top[63], ex = 0;
  for (size_t i = 0; i < 64; i++) ex += top[i] - tb;
  assert_true(fabs(t - (tb + (log(4.0) - log(64.0)) / (-63.0 / ex))) < 1e-12);
}

static int desc_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? 1 : (x > y ? -1 : 0);
}

/* sc_topk_largest_desc (kernels/topk_top.h: the sample's top on the CPU,
 * the device path's host step) against sorting the finite values whole: the
 * same values in the same order, for sample sizes below, at and above the
 * cap, with NaN, infinities and ties among them, and caps of 0, 1, a few,
 * SC_TOPK_TOP and more. */
static void test_largest_desc(void **state) {
  (void)state;
  static double v[20000], ref[20000], top[2 * SC_TOPK_TOP];
  const size_t ms[] = {0, 1, 5, 255, 256, 257, 1000, 16384, 20000};
  const size_t caps[] = {0, 1, 7, SC_TOPK_TOP, SC_TOPK_TOP + 50};
  unsigned seed = 12345;
  for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
    size_t m = ms[mi];
    for (size_t j = 0; j < m; j++) {
      seed = seed * 1103515245u + 12345u;
      unsigned r = (seed >> 8) % 1000;
      if (r == 0)
        v[j] = NAN;
      else if (r == 1)
        v[j] = INFINITY;
      else if (r < 100)
        v[j] = 3.5; /* ties */
      else
        v[j] = (double)((seed >> 4) % 100000) / 1000.0;
    }
    size_t nf = 0;
    for (size_t j = 0; j < m; j++)
      if (isfinite(v[j])) ref[nf++] = v[j];
    qsort(ref, nf, sizeof *ref, desc_double);
    for (size_t ci = 0; ci < sizeof caps / sizeof *caps; ci++) {
      size_t cap = caps[ci], want = cap < nf ? cap : nf;
      size_t h = sc_topk_largest_desc(v, m, top, cap);
      assert_int_equal(h, want);
      for (size_t j = 0; j < h; j++) assert_true(top[j] == ref[j]);
    }
  }
}

static void test_search_bracketing(void **state) {
  (void)state;
  sc_topk_search_t s;
  sc_topk_search_init(&s, 1000, -2.0);
  /* In range: accepted at once. */
  assert_true(sc_topk_search_record(&s, 10, 1.0, 1500));
  /* Too many at t = 1 (count 8000): the slope steps up by ln(8)/2. */
  assert_false(sc_topk_search_record(&s, 100, 1.0, 8000));
  assert_true(fabs(sc_topk_search_next(&s) - (1.0 + log(8.0) / 2.0)) < 1e-9);
  /* Too few at t = 3 (count 10): interpolation of ln(count) between the
   * ends; a worse too-many round does not replace the better one. */
  assert_false(sc_topk_search_record(&s, 300, 3.0, 10));
  assert_false(sc_topk_search_record(&s, 50, 0.5, 90000));
  assert_true(s.lo_key == 100 && s.lo_count == 8000);
  double f = (log(8000.0) - log(1000.0)) / (log(8000.0) - log(10.0));
  assert_true(fabs(sc_topk_search_next(&s) - (1.0 + 2.0 * f)) < 1e-9);
  uint64_t key;
  assert_true(sc_topk_search_key(&s, 200, &key) && key == 200);
  /* A proposal on a tried key bisects in key space. */
  assert_true(sc_topk_search_key(&s, 300, &key) && key == 200);
  /* Adjacent keys between too many and too few: nothing can land, fall back. */
  sc_topk_search_init(&s, 1000, 0);
  sc_topk_search_record(&s, 41, 1.0, 5000);
  sc_topk_search_record(&s, 42, 1.1, 0);
  assert_false(sc_topk_search_key(&s, 42, &key));
  /* Too few at key 0 (everything nonzero already taken): fall back. */
  sc_topk_search_init(&s, 1000, 0);
  sc_topk_search_record(&s, 0, 0.0, 3);
  assert_false(sc_topk_search_key(&s, 0, &key));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_count_in_range),    cmocka_unit_test(test_sample_threshold),
      cmocka_unit_test(test_search_bracketing), cmocka_unit_test(test_skewed_issue_case),
      cmocka_unit_test(test_largest_desc),      cmocka_unit_test(test_all_nan_but_k),
      cmocka_unit_test(test_fallback_on_ties),  cmocka_unit_test(test_contract_all_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
