/* SPDX-License-Identifier: BSD-3-Clause */
/* MSTopK selection (SC_SELECT_MSTOPK, docs/API.md): exactly min(k, m)
 * entries (m non-NaN), indices sorted and unique, NaN never selected, every
 * entry at or above the final upper threshold selected, the band between the
 * thresholds filled lowest index first, so every selected magnitude >= every
 * unselected one outside the band. Checked against magnitudes decoded here
 * and an exact top-k written here (sorting), on normal, Laplace, spiky,
 * tied and error-feedback-residual-like data in every float dtype; the
 * sampled-list path against counting the vector every round; the bisection
 * decisions of kernels/topk_mstopk.h directly; SC_MSTOPK_ITERS. */
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
#include "kernels/devrt_mstopk.h"
#include "kernels/topk_mstopk.h"
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

static double rng_normal(void) {
  return sqrt(-2.0 * log(rng_unit())) * cos(2.0 * M_PI * rng_unit());
}

static double rng_laplace(void) {
  double z = -log(rng_unit());
  return rng_unit() < 0.5 ? -z : z;
}

static const sc_dtype_t dtypes[4] = {SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};

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

static double mag(sc_dtype_t t, const void *buf, size_t i) {
  uint16_t h;
  float f;
  double v;
  switch (t) {
  case SC_FLOAT16:
    memcpy(&h, (const char *)buf + 2 * i, 2);
    return fabs((double)sc_half_to_float(h));
  case SC_BFLOAT16:
    memcpy(&h, (const char *)buf + 2 * i, 2);
    return fabs((double)sc_bfloat16_to_float(h));
  case SC_FLOAT32:
    memcpy(&f, (const char *)buf + 4 * i, 4);
    return fabs((double)f);
  default:
    memcpy(&v, (const char *)buf + 8 * i, 8);
    return fabs(v);
  }
}

/* A band end as a magnitude: hi_key above infinity's key selects nothing. */
static double band_end(sc_dtype_t t, uint64_t key) {
  return key > sc_mstopk_inf_key(t) ? NAN : sc_mstopk_key_value(t, key);
}

/* Runs MSTopK (iters, list mode) and checks the contract against the
 * magnitudes. Returns nnz; *band: entries in the final band. */
static size_t check_ex(sc_dtype_t t, const void *buf, size_t n, size_t k, int iters, int list,
                       uint32_t *out, size_t *band, const char *what) {
  size_t nnz = 12345, m = 0;
  sc_mstopk_t s;
  uint32_t *idx = malloc((2 * (k < n ? k : n) + 1) * sizeof *idx);
  assert_non_null(idx);
  if (sc_topk_mstopk_run(buf, n, t, k, iters, list, idx, &nnz, &s) != SC_SUCCESS)
    fail_msg("%s: %s", what, sc_last_error());
  for (size_t i = 0; i < n; i++) m += !isnan(mag(t, buf, i));
  size_t want = k < m ? k : m;
  if (nnz != want) fail_msg("%s: n=%zu k=%zu m=%zu: nnz %zu, want %zu", what, n, k, m, nnz, want);
  double lo = band_end(t, s.lo_key), hi = band_end(t, s.hi_key);
  char *sel = calloc(n + 1, 1);
  assert_non_null(sel);
  for (size_t j = 0; j < nnz; j++) {
    if (idx[j] >= n || (j > 0 && idx[j] <= idx[j - 1]))
      fail_msg("%s: index %u at %zu not ascending below n=%zu", what, idx[j], j, n);
    sel[idx[j]] = 1;
    if (isnan(mag(t, buf, idx[j]))) fail_msg("%s: NaN at %u selected", what, idx[j]);
  }
  size_t above = 0, inband = 0, last_sel_band = 0, first_unsel_band = SIZE_MAX;
  double min_sel = INFINITY, max_unsel_out = -1;
  for (size_t i = 0; i < n; i++) {
    double v = mag(t, buf, i);
    if (isnan(v)) continue;
    int is_above = !isnan(hi) && v >= hi, is_band = !is_above && v >= lo;
    above += is_above;
    inband += is_band;
    if (is_above && !sel[i]) fail_msg("%s: %zu (|v| %g >= hi %g) not selected", what, i, v, hi);
    if (sel[i] && !is_above && !is_band)
      fail_msg("%s: %zu (|v| %g < lo %g) selected", what, i, v, lo);
    if (is_band && sel[i]) last_sel_band = i;
    if (is_band && !sel[i] && first_unsel_band == SIZE_MAX) first_unsel_band = i;
    if (sel[i] && v < min_sel) min_sel = v;
    if (!sel[i] && !is_band && v > max_unsel_out) max_unsel_out = v;
  }
  if (first_unsel_band < last_sel_band)
    fail_msg("%s: band entry %zu unselected below selected %zu", what, first_unsel_band,
             last_sel_band);
  if (nnz && max_unsel_out > min_sel)
    fail_msg("%s: unselected |v| %g outside the band above selected %g", what, max_unsel_out,
             min_sel);
  if (k < m && !(above <= k && above + inband > k))
    fail_msg("%s: k=%zu, %zu above hi and %zu in the band", what, k, above, inband);
  if (out) memcpy(out, idx, nnz * sizeof *idx);
  if (band) *band = inband;
  free(sel);
  free(idx);
  return nnz;
}

/* Default knobs, and the same answer from the sampled list and from counting
 * the vector every round. */
static size_t check(sc_dtype_t t, const void *buf, size_t n, size_t k, uint32_t *out,
                    const char *what) {
  uint32_t *a = malloc((k < n ? k : n) * sizeof *a + 4),
           *b = malloc((k < n ? k : n) * sizeof *b + 4);
  assert_true(a && b);
  size_t na = check_ex(t, buf, n, k, SC_MSTOPK_DEFAULT_ITERS, 1, a, NULL, what);
  size_t nb = check_ex(t, buf, n, k, SC_MSTOPK_DEFAULT_ITERS, 0, b, NULL, what);
  if (na != nb || memcmp(a, b, na * sizeof *a))
    fail_msg("%s: n=%zu k=%zu: the list path and the vector path differ", what, n, k);
  /* Through the public entry, with values. */
  size_t nnz;
  void *vals = malloc(esize(t) * (k < n ? k : n) + 8);
  assert_non_null(vals);
  assert_int_equal(sc_topk(buf, n, t, k, SC_SELECT_MSTOPK, b, vals, &nnz), SC_SUCCESS);
  if (nnz != na || memcmp(a, b, na * sizeof *a)) fail_msg("%s: sc_topk differs", what);
  for (size_t j = 0; j < nnz; j++)
    if (memcmp((char *)vals + j * esize(t), (const char *)buf + b[j] * esize(t), esize(t)))
      fail_msg("%s: value %zu is not dense[%u]", what, j, b[j]);
  if (out) memcpy(out, a, na * sizeof *a);
  free(vals);
  free(a);
  free(b);
  return na;
}

static void test_counts_every_n_k(void **state) {
  (void)state;
  static const size_t ns[] = {0, 1, 2, 3, 5, 7, 13, 31, 32, 33, 97, 1009, 65537, 100003};
  for (int d = 0; d < 4; d++) {
    sc_dtype_t t = dtypes[d];
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
      size_t n = ns[a];
      void *buf = malloc(n * esize(t) + 8);
      assert_non_null(buf);
      rng_state = 17 + n + (uint64_t)d;
      for (size_t i = 0; i < n; i++) store(t, buf, i, rng_normal());
      size_t ks[] = {0, 1, 2, 3, n / 1000, n / 100 + 1, n / 7, n / 2, n ? n - 1 : 0, n, n + 5};
      for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
        char what[64];
        snprintf(what, sizeof what, "dtype %d n %zu k %zu", (int)t, n, ks[b]);
        check(t, buf, n, ks[b], NULL, what);
      }
      free(buf);
    }
  }
}

static int cmp_desc(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x > y ? -1 : x < y;
}

/* Fraction of MSTopK's entries among the exact top k (ties at the k-th
 * magnitude count as exact). */
static double overlap(sc_dtype_t t, const void *buf, size_t n, size_t k) {
  uint32_t *idx = malloc(k * sizeof *idx);
  double *v = malloc(n * sizeof *v);
  assert_true(idx && v);
  size_t nnz = check(t, buf, n, k, idx, "overlap");
  for (size_t i = 0; i < n; i++) v[i] = mag(t, buf, i);
  qsort(v, n, sizeof *v, cmp_desc);
  double kth = v[k - 1];
  size_t hit = 0;
  for (size_t j = 0; j < nnz; j++) hit += mag(t, buf, idx[j]) >= kth;
  free(idx);
  free(v);
  return (double)hit / (double)k;
}

/* Error feedback's accumulator: a Laplace gradient with a per-coordinate
 * bias, accumulated over steps, the top k taken out (by this selector) each
 * step, as sc_gtopk_allreduce's residual evolves. */
static void ef_residual(float *acc, size_t n, size_t k, int steps) {
  float *bias = malloc(n * sizeof *bias), *r = calloc(n, sizeof *r);
  uint32_t *idx = malloc(k * sizeof *idx);
  float *vals = malloc(k * sizeof *vals);
  assert_true(bias && r && idx && vals);
  for (size_t i = 0; i < n; i++) bias[i] = (float)(0.05 * rng_normal());
  for (int s = 0; s < steps; s++) {
    for (size_t i = 0; i < n; i++) acc[i] = r[i] + bias[i] + (float)(0.1 * rng_laplace());
    size_t nnz;
    assert_int_equal(sc_topk(acc, n, SC_FLOAT32, k, SC_SELECT_MSTOPK, idx, vals, &nnz), SC_SUCCESS);
    memcpy(r, acc, n * sizeof *r);
    for (size_t j = 0; j < nnz; j++) r[idx[j]] = 0;
  }
  free(bias);
  free(r);
  free(idx);
  free(vals);
}

static void test_overlap_with_exact(void **state) {
  (void)state;
  const size_t n = 200003, ks[] = {n / 1000, n / 100};
  float *buf = malloc(n * sizeof *buf);
  assert_non_null(buf);
  for (int dist = 0; dist < 3; dist++)
    for (size_t b = 0; b < 2; b++) {
      rng_state = 99 + (uint64_t)dist;
      if (dist == 0)
        for (size_t i = 0; i < n; i++) buf[i] = (float)rng_normal();
      else if (dist == 1)
        for (size_t i = 0; i < n; i++) buf[i] = (float)rng_laplace();
      else
        ef_residual(buf, n, ks[b], 30);
      double o = overlap(SC_FLOAT32, buf, n, ks[b]);
      print_message("overlap %s k=%zu: %.4f\n",
                    dist == 0   ? "normal"
                    : dist == 1 ? "laplace"
                                : "ef-residual",
                    ks[b], o);
      if (o < 0.9) fail_msg("overlap %.3f < 0.9 (distribution %d, k %zu)", o, dist, ks[b]);
    }
  free(buf);
}

/* The final band of the default rounds is narrow on smooth data; one round
 * leaves a wide one, still exactly k. */
static void test_band_and_iters(void **state) {
  (void)state;
  const size_t n = 100000, k = 100;
  float *buf = malloc(n * sizeof *buf);
  assert_non_null(buf);
  rng_state = 5;
  for (size_t i = 0; i < n; i++) buf[i] = (float)rng_normal();
  size_t band20, band1;
  check_ex(SC_FLOAT32, buf, n, k, 20, -1, NULL, &band20, "20 rounds");
  check_ex(SC_FLOAT32, buf, n, k, 1, -1, NULL, &band1, "1 round");
  if (band20 > 10) fail_msg("20 rounds leave %zu entries in the band", band20);
  if (band1 < 3 * k) fail_msg("1 round leaves only %zu entries in the band", band1);
  /* SC_MSTOPK_ITERS through the config table. */
  assert_int_equal(setenv("SC_MSTOPK_ITERS", "2", 1), 0);
  size_t band2;
  check_ex(SC_FLOAT32, buf, n, k, -1, -1, NULL, &band2, "SC_MSTOPK_ITERS=2");
  if (band2 <= band20 || band2 >= band1)
    fail_msg("SC_MSTOPK_ITERS=2: band %zu not between %zu and %zu", band2, band20, band1);
  assert_int_equal(setenv("SC_MSTOPK_ITERS", "0", 1), 0);
  uint32_t idx[200];
  float vals[200];
  size_t nnz;
  assert_int_equal(sc_topk(buf, n, SC_FLOAT32, k, SC_SELECT_MSTOPK, idx, vals, &nnz),
                   SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "SC_MSTOPK_ITERS"));
  unsetenv("SC_MSTOPK_ITERS");
  free(buf);
}

/* NaN, infinities, all-equal values, zeros, spikes in every dtype. */
static void test_special_values(void **state) {
  (void)state;
  const size_t n = 70001;
  for (int d = 0; d < 4; d++) {
    sc_dtype_t t = dtypes[d];
    void *buf = malloc(n * esize(t));
    uint32_t *idx = malloc(2 * n * sizeof *idx);
    assert_true(buf && idx);
    /* NaN every 3rd entry: never selected, even with k >= n. */
    rng_state = 3;
    for (size_t i = 0; i < n; i++) store(t, buf, i, i % 3 ? rng_normal() : NAN);
    size_t ks[] = {1, 70, 7000, n / 3 * 2 - 1, n / 3 * 2, n / 3 * 2 + 1, n};
    for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) check(t, buf, n, ks[b], NULL, "nan");
    /* Infinities among normals: selected first. */
    for (size_t i = 0; i < n; i++) store(t, buf, i, i % 1000 == 7 ? -INFINITY : rng_normal());
    size_t ninf = (n - 7 + 999) / 1000;
    size_t ki[] = {1, ninf - 1, ninf, ninf + 1, 700, n};
    for (size_t b = 0; b < sizeof ki / sizeof ki[0]; b++) {
      size_t nnz = check(t, buf, n, ki[b], idx, "inf");
      size_t got = 0;
      for (size_t j = 0; j < nnz; j++) got += isinf(mag(t, buf, idx[j]));
      size_t want = ki[b] < ninf ? ki[b] : ninf;
      if (got != want)
        fail_msg("dtype %d k %zu: %zu infinities, want %zu", (int)t, ki[b], got, want);
    }
    /* All equal: the lowest indices. */
    for (size_t i = 0; i < n; i++) store(t, buf, i, i % 2 ? 0.375 : -0.375);
    size_t nnz = check(t, buf, n, 500, idx, "equal");
    for (size_t j = 0; j < nnz; j++) assert_int_equal(idx[j], j);
    for (size_t i = 0; i < n; i++) store(t, buf, i, 0.0);
    nnz = check(t, buf, n, 33, idx, "zeros");
    for (size_t j = 0; j < nnz; j++) assert_int_equal(idx[j], j);
    /* Spikes on tiny noise; 90% zeros. */
    rng_state = 4;
    for (size_t i = 0; i < n; i++)
      store(t, buf, i, i % 997 == 3 ? 1000.0 + (double)(i % 7) : 1e-3 * rng_normal());
    check(t, buf, n, 50, NULL, "spikes");
    check(t, buf, n, 71, NULL, "spikes");
    check(t, buf, n, 200, NULL, "spikes");
    for (size_t i = 0; i < n; i++) store(t, buf, i, rng_unit() < 0.9 ? 0.0 : rng_normal());
    check(t, buf, n, 70, NULL, "zeros90");
    check(t, buf, n, 10000, NULL, "zeros90");
    free(buf);
    free(idx);
  }
}

/* Data that fools the sample (kernels/cpu/topk_mstopk.c samples every 8th
 * position from 4 at this n): large values off the sample overflow the
 * list; large values only on it leave the list with k or fewer entries and
 * the band below it. Both must give the answer of counting the vector. */
static void test_sample_misjudged(void **state) {
  (void)state;
  const size_t n = 131072;
  float *buf = malloc(n * sizeof *buf);
  assert_non_null(buf);
  rng_state = 8;
  for (size_t i = 0; i < n; i++) buf[i] = (float)((i % 8 == 0 ? 10 : 1) + 0.1 * rng_normal());
  check(SC_FLOAT32, buf, n, 100, NULL, "off-sample spikes");
  check(SC_FLOAT32, buf, n, 5000, NULL, "off-sample spikes");
  for (size_t i = 0; i < n; i++) buf[i] = (float)((i % 8 == 4 ? 10 : 1) + 0.1 * rng_normal());
  check(SC_FLOAT32, buf, n, 5000, NULL, "on-sample spikes");
  check(SC_FLOAT32, buf, n, 20000, NULL, "on-sample spikes");
  free(buf);
}

/* The device loop (kernels/devrt_mstopk.c) over host primitives written
 * here: statistics summed in another order than the CPU kernel's, counts by
 * a plain loop. */
static int h_staged; /* copies of a whole vector seen (the staging path) */
static size_t h_n;

static sc_result_t h_stats(const void *x, size_t n, sc_dtype_t t, double *sum, uint64_t *nfin,
                           uint64_t *ninf, uint64_t *max_key, void *ctx) {
  (void)ctx;
  *sum = 0;
  *nfin = *ninf = *max_key = 0;
  for (size_t i = n; i-- > 0;) {
    double v = mag(t, x, i);
    if (isinf(v)) {
      (*ninf)++;
    } else if (!isnan(v)) {
      (*nfin)++;
      *sum += v;
      uint64_t key = sc_mstopk_key_ceil(t, v);
      if (key > *max_key) *max_key = key;
    }
  }
  return SC_SUCCESS;
}

static sc_result_t h_above(const void *x, size_t n, sc_dtype_t t, uint64_t th, uint32_t *idx,
                           size_t cap, size_t *count, void *ctx) {
  (void)ctx;
  double lim = sc_mstopk_key_value(t, th);
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += !isnan(mag(t, x, i)) && mag(t, x, i) > lim;
  *count = c;
  if (c <= cap)
    for (size_t i = 0, j = 0; i < n; i++)
      if (!isnan(mag(t, x, i)) && mag(t, x, i) > lim) idx[j++] = (uint32_t)i;
  return SC_SUCCESS;
}

static sc_result_t h_gather(void *values, const void *x, const uint32_t *idx, size_t nnz,
                            sc_dtype_t t, void *ctx) {
  (void)ctx;
  for (size_t j = 0; j < nnz; j++)
    memcpy((char *)values + j * esize(t), (const char *)x + idx[j] * esize(t), esize(t));
  return SC_SUCCESS;
}

static sc_result_t h_copy(void *dst, const void *src, size_t bytes, void *ctx) {
  (void)ctx;
  if (bytes && bytes >= h_n) h_staged++;
  if (bytes) memcpy(dst, src, bytes);
  return SC_SUCCESS;
}

static sc_result_t h_exact(const void *x, size_t n, sc_dtype_t t, size_t k, uint32_t *idx,
                           void *values, size_t *nnz, void *ctx) {
  (void)ctx;
  if (!values) return sc_topk_exact_indices(x, n, t, k, idx, nnz);
  return sc_topk(x, n, t, k, SC_SELECT_EXACT, idx, values, nnz);
}

static void test_device_loop(void **state) {
  (void)state;
  const sc_mstopk_prims_t p = {h_stats, h_above, h_gather, h_copy, h_exact, NULL};
  const size_t n = 20011;
  for (int d = 0; d < 4; d++) {
    sc_dtype_t t = dtypes[d];
    void *buf = malloc(n * esize(t));
    uint32_t *idx = malloc(2 * n * sizeof *idx), *ref = malloc(2 * n * sizeof *ref);
    void *vals = malloc(2 * n * esize(t));
    assert_true(buf && idx && ref && vals);
    rng_state = 21 + (uint64_t)d;
    for (size_t i = 0; i < n; i++)
      store(t, buf, i, i % 101 == 5 ? NAN : i % 211 == 7 ? INFINITY : rng_laplace());
    size_t ks[] = {1, 20, 95, 96, 97, 200, 2000, 19000, n};
    int iters[] = {20, 2};
    for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++)
      for (int it = 0; it < 2; it++)
        for (int with_values = 0; with_values < 2; with_values++) {
          size_t nnz = 0, rnnz = 0;
          h_n = n * esize(t);
          h_staged = 0;
          assert_int_equal(sc_mstopk_drive(&p, buf, n, t, ks[b], iters[it], idx,
                                           with_values ? vals : NULL, &nnz),
                           SC_SUCCESS);
          /* The CPU kernel with the same rounds: the same indices, the
           * mean rounding aside (float64 keys may move: count only). */
          assert_int_equal(sc_topk_mstopk_run(buf, n, t, ks[b], iters[it], 0, ref, &rnnz, NULL),
                           SC_SUCCESS);
          if (nnz != rnnz || (t != SC_FLOAT64 && memcmp(idx, ref, nnz * sizeof *idx)))
            fail_msg("dtype %d k %zu rounds %d values %d: %zu entries (%zu on the CPU) or "
                     "other indices",
                     (int)t, ks[b], iters[it], with_values, nnz, rnnz);
          if (with_values)
            for (size_t j = 0; j < nnz; j++)
              assert_memory_equal((char *)vals + j * esize(t),
                                  (const char *)buf + idx[j] * esize(t), esize(t));
          /* 20 rounds leave a band the list holds: no staging with values
           * (unless the infinities alone, about 95, exceed the list's 2k). */
          if (with_values && it == 0 && ks[b] >= 200 && ks[b] < n / 2 && h_staged)
            fail_msg("dtype %d k %zu: staged with 20 rounds", (int)t, ks[b]);
        }
    free(buf);
    free(idx);
    free(ref);
    free(vals);
  }
}

/* The decisions, on counts written here: a vector 1..100 (keys of float32). */
static void test_decisions(void **state) {
  (void)state;
  float x[100];
  for (int i = 0; i < 100; i++) x[i] = (float)(i + 1);
  sc_mstopk_t s;
  sc_mstopk_init(&s, SC_FLOAT32, 10, 100, 0, 50.5, 100);
  assert_int_equal(s.hi_key, sc_mstopk_inf_key(SC_FLOAT32));
  assert_int_equal(s.lo_key, 0);
  for (int it = 0; it < 20 && !sc_mstopk_done(&s); it++) {
    double th = sc_mstopk_next(&s);
    uint64_t key = sc_mstopk_key_ceil(SC_FLOAT32, th), c = 0;
    assert_true(sc_mstopk_key_value(SC_FLOAT32, key) >= th);
    assert_true(key == 0 || sc_mstopk_key_value(SC_FLOAT32, key - 1) < th);
    for (int i = 0; i < 100; i++) c += x[i] >= sc_mstopk_key_value(SC_FLOAT32, key);
    sc_mstopk_record(&s, key, c);
  }
  /* 91..100 are the ten largest: the bisection lands the upper threshold in
   * (90, 91]. */
  assert_int_equal(s.hi_count, 10);
  assert_true(sc_mstopk_key_value(SC_FLOAT32, s.hi_key) > 90 &&
              sc_mstopk_key_value(SC_FLOAT32, s.hi_key) <= 91);
  assert_int_equal(sc_mstopk_fill(&s), 0);
  /* k >= m and more infinities than k. */
  sc_mstopk_init(&s, SC_FLOAT64, 7, 5, 0, 1, 2);
  assert_true(sc_mstopk_done(&s) && s.k == 5 && s.hi_key == 0);
  sc_mstopk_init(&s, SC_FLOAT16, 2, 50, 3, 1, 2);
  assert_true(sc_mstopk_done(&s) && s.lo_key == 0x7c00 && sc_mstopk_fill(&s) == 2);
  uint64_t fill = 2;
  assert_false(sc_mstopk_take(&s, 0x7bff, &fill));
  assert_true(sc_mstopk_take(&s, 0x7c00, &fill));
  assert_int_equal(fill, 1);
  /* key_ceil in each dtype: the smallest key whose magnitude is >= t. */
  for (int d = 0; d < 4; d++) {
    uint64_t key = sc_mstopk_key_ceil(dtypes[d], 1.0 / 3);
    assert_true(sc_mstopk_key_value(dtypes[d], key) >= 1.0 / 3);
    assert_true(sc_mstopk_key_value(dtypes[d], key - 1) < 1.0 / 3);
    uint64_t big = sc_mstopk_key_ceil(dtypes[d], 1e300);
    if (dtypes[d] == SC_FLOAT64)
      assert_true(big < sc_mstopk_inf_key(SC_FLOAT64));
    else
      assert_int_equal(big, sc_mstopk_inf_key(dtypes[d]));
  }
}

static void test_api(void **state) {
  (void)state;
  float x[4] = {1, -4, 3, NAN};
  uint32_t idx[8];
  float val[8];
  size_t nnz = 9;
  assert_int_equal(sc_topk(x, 4, SC_FLOAT32, 2, SC_SELECT_MSTOPK, idx, val, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, 2);
  assert_int_equal(idx[0], 1);
  assert_int_equal(idx[1], 2);
  assert_true(val[0] == -4 && val[1] == 3);
  assert_int_equal(sc_topk(x, 4, SC_INT32, 2, SC_SELECT_MSTOPK, idx, val, &nnz),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(
      sc_topk(x, 4, SC_FLOAT32, 2, (sc_select_t)(SC_SELECT_MSTOPK + 1), idx, val, &nnz),
      SC_ERR_INVALID_ARG);
  assert_int_equal(sc_topk(NULL, 0, SC_FLOAT64, 5, SC_SELECT_MSTOPK, NULL, NULL, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decisions),        cmocka_unit_test(test_api),
      cmocka_unit_test(test_counts_every_n_k), cmocka_unit_test(test_overlap_with_exact),
      cmocka_unit_test(test_band_and_iters),   cmocka_unit_test(test_special_values),
      cmocka_unit_test(test_sample_misjudged), cmocka_unit_test(test_device_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
