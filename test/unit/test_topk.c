/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_topk against references written here: the exact selector against a
 * sort of (|v| descending, index ascending) over independently decoded values;
 * the Gaussian selector against the properties it promises (a threshold rule,
 * at most 2k entries, sorted unique indices, and on normal data a count within
 * [2k/3, 4k/3] for at least 95 of 100 seeds). */
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
#include "sparsecoll.h"

/* ---- data ---- */

static uint64_t rng_state;

static void rng_seed(uint64_t s) {
  rng_state = s * 0x9e3779b97f4a7c15ull + 1;
}

static uint64_t rng_next(void) {
  /* splitmix64: fixed seeds, so a failure reproduces. */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1]. */
static double rng_unit(void) {
  return ((double)(rng_next() >> 11) + 1.0) * 0x1p-53;
}

/* Marsaglia's polar method: two N(0,1) draws per call. */
static void rng_normal2(double *a, double *b) {
  double u, v, s;
  do {
    u = 2.0 * rng_unit() - 1.0;
    v = 2.0 * rng_unit() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0);
  double f = sqrt(-2.0 * log(s) / s);
  *a = u * f;
  *b = v * f;
}

static const sc_dtype_t float_dtypes[] = {SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
static const char *const float_names[] = {"float16", "bfloat16", "float32", "float64"};

static size_t esize(sc_dtype_t t) {
  return t == SC_FLOAT64 ? 8 : t == SC_FLOAT32 ? 4 : 2;
}

/* Independent decoding of fp16 / bf16 patterns (exponent and mantissa by
 * hand, exact in double). */
static double ref_decode16(uint16_t h, int exp_bits) {
  int man_bits = 15 - exp_bits;
  uint32_t e = (h >> man_bits) & ((1u << exp_bits) - 1), m = h & ((1u << man_bits) - 1);
  int bias = (1 << (exp_bits - 1)) - 1;
  double v;
  if (e == (1u << exp_bits) - 1)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp((double)m, 1 - bias - man_bits);
  else
    v = ldexp((double)((1u << man_bits) + m), (int)e - bias - man_bits);
  return (h & 0x8000u) ? -v : v;
}

static double ref_value(sc_dtype_t t, const void *buf, size_t i) {
  const char *p = (const char *)buf + i * esize(t);
  switch (t) {
  case SC_FLOAT16:
  case SC_BFLOAT16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return ref_decode16(h, t == SC_FLOAT16 ? 5 : 8);
  }
  case SC_FLOAT32: {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  default: {
    double d;
    memcpy(&d, p, 8);
    return d;
  }
  }
}

static void store_value(sc_dtype_t t, void *buf, size_t i, double v) {
  char *p = (char *)buf + i * esize(t);
  uint16_t h;
  float f = (float)v;
  switch (t) {
  case SC_FLOAT16:
    h = sc_float_to_half(f);
    memcpy(p, &h, 2);
    break;
  case SC_BFLOAT16:
    h = sc_float_to_bfloat16(f);
    memcpy(p, &h, 2);
    break;
  case SC_FLOAT32:
    memcpy(p, &f, 4);
    break;
  default:
    memcpy(p, &v, 8);
    break;
  }
}

typedef enum kind {
  K_NORMAL,    /* N(0,1) */
  K_BITS,      /* random bit patterns: NaNs, infinities, subnormals, all exponents */
  K_TIES,      /* a handful of values, +-0 among them: long runs of ties */
  K_SPECIAL,   /* normal with NaN, +-inf, -0.0 and subnormals mixed in */
  K_CONST,     /* one value everywhere */
  K_MOSTLYNAN, /* 90% NaN */
  K_NARROW     /* +-[1, 1 + 2^-10): one first-level bucket, found by the later digits */
} kind_t;
static const char *const kind_names[] = {"normal", "bits",      "ties",  "special",
                                         "const",  "mostlynan", "narrow"};

static void fill(sc_dtype_t t, void *buf, size_t n, kind_t kind, uint64_t seed) {
  static const double ties[] = {0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5};
  rng_seed(seed);
  for (size_t i = 0; i < n; i++) {
    double a, b;
    rng_normal2(&a, &b);
    uint64_t r = rng_next();
    switch (kind) {
    case K_NORMAL:
      store_value(t, buf, i, a);
      break;
    case K_BITS:
      memcpy((char *)buf + i * esize(t), &r, esize(t));
      break;
    case K_TIES:
      store_value(t, buf, i, ties[r % 7]);
      break;
    case K_SPECIAL: {
      static const double sp[] = {NAN, INFINITY, -INFINITY, -0.0, 1e-310, 0.0};
      store_value(t, buf, i, r % 10 == 0 ? sp[(r >> 8) % 6] : a);
      /* The subnormal entry of sp is one only for float64; make one per type. */
      if (r % 10 == 0 && (r >> 8) % 6 == 4) {
        uint64_t one = 1;
        memset((char *)buf + i * esize(t), 0, esize(t));
        memcpy((char *)buf + i * esize(t), &one, 1);
      }
      break;
    }
    case K_CONST:
      store_value(t, buf, i, -1.5);
      break;
    case K_MOSTLYNAN:
      store_value(t, buf, i, r % 10 ? NAN : a);
      break;
    case K_NARROW:
      store_value(t, buf, i, (r & 1 ? -1 : 1) * (1 + ldexp(rng_unit(), -10)));
      break;
    }
  }
}

/* ---- the exact reference ---- */

typedef struct ent {
  double mag;
  uint32_t idx;
} ent_t;

static int by_mag_desc_idx_asc(const void *pa, const void *pb) {
  const ent_t *a = pa, *b = pb;
  if (a->mag != b->mag) return a->mag > b->mag ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int by_u32(const void *pa, const void *pb) {
  uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  return a < b ? -1 : a > b;
}

/* The non-NaN entries by |v| descending, ties by index ascending: the
 * reference order, computed once per input. */
typedef struct ref {
  ent_t *e;
  size_t c;
} ref_t;

static ref_t ref_prepare(sc_dtype_t t, const void *buf, size_t n) {
  ref_t r = {malloc((n ? n : 1) * sizeof(ent_t)), 0};
  assert_non_null(r.e);
  for (size_t i = 0; i < n; i++) {
    double v = ref_value(t, buf, i);
    if (isnan(v)) continue;
    r.e[r.c].mag = fabs(v);
    r.e[r.c].idx = (uint32_t)i;
    r.c++;
  }
  qsort(r.e, r.c, sizeof *r.e, by_mag_desc_idx_asc);
  return r;
}

/* The k largest |v| (ties: lower index), NaN never, sorted by index. */
static size_t ref_take(const ref_t *r, size_t k, uint32_t *out) {
  size_t m = k < r->c ? k : r->c;
  for (size_t j = 0; j < m; j++) out[j] = r->e[j].idx;
  qsort(out, m, sizeof *out, by_u32);
  return m;
}

static size_t ref_topk(sc_dtype_t t, const void *buf, size_t n, size_t k, uint32_t *out) {
  ref_t r = ref_prepare(t, buf, n);
  size_t m = ref_take(&r, k, out);
  free(r.e);
  return m;
}

/* Values must be the selected elements' bits, unchanged (-0.0, NaN payloads). */
static void check_values(sc_dtype_t t, const void *buf, const uint32_t *idx, const void *vals,
                         size_t nnz) {
  size_t es = esize(t);
  for (size_t j = 0; j < nnz; j++)
    assert_memory_equal((const char *)vals + j * es, (const char *)buf + idx[j] * es, es);
}

static void run_exact_case(sc_dtype_t t, const void *buf, size_t n, const ref_t *rf, size_t k,
                           const char *what) {
  size_t cap = 2 * (k < n ? k : n) + 1;
  uint32_t *idx = malloc(cap * sizeof *idx), *ref = malloc(cap * sizeof *ref);
  void *vals = malloc(cap * 8);
  assert_true(idx && ref && vals);
  size_t nnz = 12345;
  sc_result_t r = sc_topk(buf, n, t, k, SC_SELECT_EXACT, idx, vals, &nnz);
  if (r != SC_SUCCESS) fail_msg("%s: sc_topk failed: %s", what, sc_last_error());
  size_t m = ref_take(rf, k, ref);
  if (nnz != m) fail_msg("%s n=%zu k=%zu: nnz %zu, reference %zu", what, n, k, nnz, m);
  for (size_t j = 0; j < m; j++)
    if (idx[j] != ref[j])
      fail_msg("%s n=%zu k=%zu: entry %zu index %u, reference %u", what, n, k, j, idx[j], ref[j]);
  check_values(t, buf, idx, vals, nnz);
  free(idx);
  free(ref);
  free(vals);
}

/* ---- exact ---- */

static void test_exact_hand_cases(void **state) {
  (void)state;
  const float x[] = {1.0f, -3.0f, 2.0f, NAN, -3.0f, INFINITY, 0.0f};
  uint32_t idx[14];
  float val[14];
  size_t nnz;
  assert_int_equal(sc_topk(x, 7, SC_FLOAT32, 3, SC_SELECT_EXACT, idx, val, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, 3);
  assert_int_equal(idx[0], 1);
  assert_int_equal(idx[1], 4);
  assert_int_equal(idx[2], 5);
  assert_true(val[0] == -3.0f && val[1] == -3.0f && isinf(val[2]));
  /* One of the two -3 ties: the lower index. */
  assert_int_equal(sc_topk(x, 7, SC_FLOAT32, 2, SC_SELECT_EXACT, idx, val, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, 2);
  assert_int_equal(idx[0], 1);
  assert_int_equal(idx[1], 5);
  /* k = n and k > n: everything but the NaN. */
  for (size_t k = 7; k <= 8; k++) {
    assert_int_equal(sc_topk(x, 7, SC_FLOAT32, k, SC_SELECT_EXACT, idx, val, &nnz), SC_SUCCESS);
    assert_int_equal(nnz, 6);
    const uint32_t want[] = {0, 1, 2, 4, 5, 6};
    for (size_t j = 0; j < 6; j++) assert_int_equal(idx[j], want[j]);
  }
  /* k = 0: nothing, and no output buffers needed. */
  nnz = 99;
  assert_int_equal(sc_topk(x, 7, SC_FLOAT32, 0, SC_SELECT_EXACT, NULL, NULL, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, 0);
  /* -0.0 ties with +0.0 and keeps its sign bit. */
  const float z[] = {NAN, -0.0f, 0.0f, NAN};
  assert_int_equal(sc_topk(z, 4, SC_FLOAT32, 1, SC_SELECT_EXACT, idx, val, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, 1);
  assert_int_equal(idx[0], 1);
  assert_true(val[0] == 0.0f && signbit(val[0]));
  /* Only NaN: nothing, whatever k. */
  assert_int_equal(sc_topk(z, 1, SC_FLOAT32, 1, SC_SELECT_EXACT, idx, val, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, 0);
}

static void test_exact_against_sort(void **state) {
  (void)state;
  static const size_t ns[] = {1, 2, 3, 7, 64, 257, 1000, 2049, 5000};
  char what[128];
  for (size_t d = 0; d < 4; d++) {
    sc_dtype_t t = float_dtypes[d];
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
      size_t n = ns[ni];
      void *buf = malloc(n * 8);
      assert_non_null(buf);
      for (int kind = K_NORMAL; kind <= K_NARROW; kind++) {
        fill(t, buf, n, (kind_t)kind, 1000 * ni + (uint64_t)kind);
        size_t ks[] = {0, 1, 2, n / 3, n / 2, n - 1, n, n + 1, 1 + rng_next() % n};
        snprintf(what, sizeof what, "%s %s", float_names[d], kind_names[kind]);
        ref_t rf = ref_prepare(t, buf, n);
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
          run_exact_case(t, buf, n, &rf, ks[ki], what);
        free(rf.e);
      }
      free(buf);
    }
  }
}

/* Long vectors take the wide-digit path; ties and NaN make some of them
 * resolve the threshold without ever fitting the candidates in the workspace. */
static void test_exact_large(void **state) {
  (void)state;
  const size_t n = 150000;
  void *buf = malloc(n * 8);
  assert_non_null(buf);
  char what[128];
  for (size_t d = 0; d < 4; d++) {
    sc_dtype_t t = float_dtypes[d];
    for (int kind = K_NORMAL; kind <= K_NARROW; kind++) {
      fill(t, buf, n, (kind_t)kind, 77 + (uint64_t)kind);
      snprintf(what, sizeof what, "%s %s (large)", float_names[d], kind_names[kind]);
      const size_t ks[] = {1, 150, 1000, 40000, n - 3};
      ref_t rf = ref_prepare(t, buf, n);
      for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        run_exact_case(t, buf, n, &rf, ks[ki], what);
      free(rf.e);
    }
  }
  free(buf);
}

/* ---- Gaussian ---- */

/* What Gaussian-k promises on any input: at most 2*min(k,n) entries, indices
 * increasing, values unchanged, no NaN, and a threshold rule: every selected
 * magnitude >= every unselected one. Returns nnz. */
static size_t check_gaussian(sc_dtype_t t, const void *buf, size_t n, size_t k, uint32_t *idx,
                             void *vals, unsigned char *mark) {
  size_t nnz = 0;
  sc_result_t r = sc_topk(buf, n, t, k, SC_SELECT_GAUSSIAN, idx, vals, &nnz);
  if (r != SC_SUCCESS) fail_msg("gaussian: %s", sc_last_error());
  size_t kk = k < n ? k : n;
  assert_true(nnz <= 2 * kk);
  check_values(t, buf, idx, vals, nnz);
  memset(mark, 0, n);
  double min_sel = INFINITY, max_unsel = -1;
  for (size_t j = 0; j < nnz; j++) {
    assert_true(idx[j] < n);
    if (j > 0) assert_true(idx[j] > idx[j - 1]);
    mark[idx[j]] = 1;
    double v = ref_value(t, buf, idx[j]);
    assert_false(isnan(v));
    if (fabs(v) < min_sel) min_sel = fabs(v);
  }
  for (size_t i = 0; i < n; i++) {
    if (mark[i]) continue;
    double v = ref_value(t, buf, i);
    if (!isnan(v) && fabs(v) > max_unsel) max_unsel = fabs(v);
  }
  if (nnz > 0 && max_unsel > min_sel)
    fail_msg("gaussian %zu of n=%zu k=%zu: unselected |v| %g above selected %g", nnz, n, k,
             max_unsel, min_sel);
  return nnz;
}

static int count_in_band(size_t c, size_t k) {
  return 3 * c >= 2 * k && 3 * c <= 4 * k;
}

static void test_gaussian_normal_100_seeds(void **state) {
  (void)state;
  const size_t n = 1000000;
  float *buf = malloc(n * sizeof *buf);
  uint32_t *idx = malloc(2 * n / 100 * sizeof *idx);
  float *vals = malloc(2 * n / 100 * sizeof *vals);
  unsigned char *mark = malloc(n);
  assert_true(buf && idx && vals && mark);
  const double densities[] = {0.001, 0.01};
  for (size_t d = 0; d < 2; d++) {
    size_t k = (size_t)(densities[d] * (double)n);
    int in_band = 0;
    double lo = INFINITY, hi = 0;
    for (uint64_t seed = 0; seed < 100; seed++) {
      rng_seed(seed + 1000 * d);
      for (size_t i = 0; i < n; i += 2) {
        double a, b;
        rng_normal2(&a, &b);
        buf[i] = (float)a;
        buf[i + 1] = (float)b;
      }
      size_t c = check_gaussian(SC_FLOAT32, buf, n, k, idx, vals, mark);
      in_band += count_in_band(c, k);
      lo = fmin(lo, (double)c / (double)k);
      hi = fmax(hi, (double)c / (double)k);
    }
    print_message("density %g: count/k in [%.3f, %.3f], %d of 100 seeds in [2/3, 4/3]\n",
                  densities[d], lo, hi, in_band);
    assert_true(in_band >= 95);
  }
  free(buf);
  free(idx);
  free(vals);
  free(mark);
}

static void test_gaussian_every_dtype(void **state) {
  (void)state;
  const size_t n = 100000;
  void *buf = malloc(n * 8);
  uint32_t *idx = malloc(2 * n * sizeof *idx + 8);
  void *vals = malloc(2 * n * 8 + 8);
  unsigned char *mark = malloc(n);
  assert_true(buf && idx && vals && mark);
  for (size_t d = 0; d < 4; d++) {
    sc_dtype_t t = float_dtypes[d];
    /* On normal data the count lands in the band for this fixed seed. */
    fill(t, buf, n, K_NORMAL, 5 + d);
    size_t c = check_gaussian(t, buf, n, 1000, idx, vals, mark);
    if (!count_in_band(c, 1000)) fail_msg("%s: count %zu for k = 1000", float_names[d], c);
    /* Everything else: the promised properties, whatever the count. */
    for (int kind = K_NORMAL; kind <= K_NARROW; kind++) {
      fill(t, buf, n, (kind_t)kind, 99 + (uint64_t)kind);
      const size_t ks[] = {0, 1, 100, 5000, n - 1};
      for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        check_gaussian(t, buf, n, ks[ki], idx, vals, mark);
      /* k >= n: every non-NaN entry, as the exact selector does. */
      for (size_t k = n; k <= n + 1; k++) {
        size_t all = check_gaussian(t, buf, n, k, idx, vals, mark);
        size_t nonnan = 0;
        for (size_t i = 0; i < n; i++) nonnan += !isnan(ref_value(t, buf, i));
        assert_int_equal(all, nonnan);
      }
    }
    /* Short vectors, down to n = 1. */
    for (size_t m = 1; m < 40; m += 3) {
      fill(t, buf, m, K_SPECIAL, m);
      for (size_t k = 0; k <= m + 1; k++) check_gaussian(t, buf, m, k, idx, vals, mark);
    }
  }
  free(buf);
  free(idx);
  free(vals);
  free(mark);
}

/* The contract on data without an exponential tail: uniform on [-1, 1],
 * and error feedback's residual (entries grow until picked, so the top ends
 * at a front). Every count in [k/2, 2k] and every selected magnitude >= every
 * unselected one. The exact fallback meets this too, so this test holds the
 * contract, not the speed: the decision that avoids the fallback on a front
 * is test_sample_threshold's (test_topk_gaussian.c). */
static void test_gaussian_without_a_tail(void **state) {
  (void)state;
  const size_t n = 200000, k = 200;
  float *buf = malloc(n * sizeof *buf), *g = malloc(n * sizeof *g);
  uint32_t *idx = malloc(2 * k * sizeof *idx);
  float *vals = malloc(2 * k * sizeof *vals);
  unsigned char *mark = malloc(n);
  assert_true(buf && g && idx && vals && mark);
  rng_seed(42);
  for (size_t i = 0; i < n; i++) buf[i] = (float)(2.0 * rng_unit() - 1.0);
  size_t c = check_gaussian(SC_FLOAT32, buf, n, k, idx, vals, mark);
  if (!sc_topk_count_in_range(c, k)) fail_msg("uniform: count %zu for k = %zu", c, k);
  /* Error feedback with a constant Laplace gradient: acc += g, then the
   * selected entries are zeroed; from step 10 on the front has formed. */
  for (size_t i = 0; i < n; i++) {
    double u = rng_unit();
    u = u > 0 ? u : 0.5;
    g[i] = (float)(rng_unit() < 0.5 ? 0.1 * log(u) : -0.1 * log(u));
    buf[i] = 0;
  }
  for (int step = 0; step < 40; step++) {
    for (size_t i = 0; i < n; i++) buf[i] += g[i];
    c = check_gaussian(SC_FLOAT32, buf, n, k, idx, vals, mark);
    if (step >= 10 && !sc_topk_count_in_range(c, k))
      fail_msg("error feedback step %d: count %zu for k = %zu", step, c, k);
    for (size_t j = 0; j < c; j++) buf[idx[j]] = 0;
  }
  free(buf);
  free(g);
  free(idx);
  free(vals);
  free(mark);
}

/* A tie group across the boundary: 1000 entries of magnitude 1 above
 * 19,000 below 0.5, k = 200. Every threshold passes 0 or at least 1000
 * (> 2k), so no count can land in range: the result must be the exact top k
 * (the lowest-index 200 of the tie, checked index by index). */
static void test_gaussian_falls_back_to_exact(void **state) {
  (void)state;
  const size_t n = 20000, k = 200;
  float *buf = malloc(n * sizeof *buf);
  uint32_t idx[400], ref[400];
  float vals[400];
  assert_non_null(buf);
  rng_seed(43);
  for (size_t i = 0; i < n; i++)
    buf[i] = i % 20 == 7 ? (i % 40 == 7 ? 1.0f : -1.0f) : (float)(rng_unit() - 0.5) * 0.99f;
  size_t nnz;
  assert_int_equal(sc_topk(buf, n, SC_FLOAT32, k, SC_SELECT_GAUSSIAN, idx, vals, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, k);
  assert_int_equal(ref_topk(SC_FLOAT32, buf, n, k, ref), k);
  for (size_t j = 0; j < k; j++) assert_int_equal(idx[j], ref[j]);
  free(buf);
}

/* Degenerate inputs still meet the contract: no finite value at all (the
 * infinite one is the top), and magnitudes near the top of double's range,
 * where a tail estimate's arithmetic could overflow. */
static void test_gaussian_degenerate(void **state) {
  (void)state;
  const float nf[] = {NAN, INFINITY, -INFINITY, NAN};
  uint32_t idx[40];
  double val[40];
  size_t nnz;
  assert_int_equal(sc_topk(nf, 4, SC_FLOAT32, 1, SC_SELECT_GAUSSIAN, idx, val, &nnz), SC_SUCCESS);
  assert_int_equal(nnz, 1);
  assert_int_equal(idx[0], 1);
  double *big = malloc(1000 * sizeof *big);
  assert_non_null(big);
  for (size_t i = 0; i < 1000; i++) big[i] = (i % 2 ? -1e300 : 1e300) * (double)(i + 1) / 1000;
  assert_int_equal(sc_topk(big, 1000, SC_FLOAT64, 10, SC_SELECT_GAUSSIAN, idx, val, &nnz),
                   SC_SUCCESS);
  assert_int_equal(nnz, 10);
  for (size_t j = 0; j < 10; j++) assert_int_equal(idx[j], 990 + j);
  free(big);
}

/* ---- the API boundary ---- */

static void test_invalid_arguments(void **state) {
  (void)state;
  float x[4] = {1, 2, 3, 4};
  uint32_t idx[8];
  float val[8];
  size_t nnz = 7;
  assert_int_equal(sc_topk(x, 4, SC_FLOAT32, 2, SC_SELECT_EXACT, idx, val, NULL),
                   SC_ERR_INVALID_ARG);
  const sc_dtype_t ints[] = {SC_INT8, SC_UINT8, SC_INT32, SC_UINT32, SC_INT64, SC_UINT64, 42};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    nnz = 7;
    assert_int_equal(sc_topk(x, 4, ints[i], 2, SC_SELECT_EXACT, idx, val, &nnz),
                     SC_ERR_INVALID_ARG);
    assert_int_equal(nnz, 0);
    assert_non_null(strstr(sc_last_error(), "dtype"));
  }
  assert_int_equal(sc_topk(x, 4, SC_FLOAT32, 2, (sc_select_t)7, idx, val, &nnz),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_topk(NULL, 4, SC_FLOAT32, 2, SC_SELECT_EXACT, idx, val, &nnz),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_topk(x, 4, SC_FLOAT32, 2, SC_SELECT_EXACT, NULL, val, &nnz),
                   SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "indices"));
  assert_int_equal(sc_topk(x, 4, SC_FLOAT32, 2, SC_SELECT_GAUSSIAN, idx, NULL, &nnz),
                   SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "values"));
#if SIZE_MAX > UINT32_MAX
  /* Indices are 32-bit; the vector is not read before the check. */
  assert_int_equal(
      sc_topk(x, (size_t)UINT32_MAX + 1, SC_FLOAT32, 2, SC_SELECT_EXACT, idx, val, &nnz),
      SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "32-bit"));
#endif
  /* n = 0 is fine and empty. */
  nnz = 7;
  assert_int_equal(sc_topk(NULL, 0, SC_FLOAT64, 5, SC_SELECT_GAUSSIAN, NULL, NULL, &nnz),
                   SC_SUCCESS);
  assert_int_equal(nnz, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact_hand_cases),
      cmocka_unit_test(test_exact_against_sort),
      cmocka_unit_test(test_exact_large),
      cmocka_unit_test(test_gaussian_normal_100_seeds),
      cmocka_unit_test(test_gaussian_every_dtype),
      cmocka_unit_test(test_gaussian_without_a_tail),
      cmocka_unit_test(test_gaussian_falls_back_to_exact),
      cmocka_unit_test(test_gaussian_degenerate),
      cmocka_unit_test(test_invalid_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
