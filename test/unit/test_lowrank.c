/* SPDX-License-Identifier: BSD-3-Clause */
/* Low-rank compression's kernels (kernels/cpu/lowrank.h) against plain
 * reference loops in double, float and double, shapes 1 x 1 up to a sampled
 * 4096 x 1024, r up to 64, zero and rank-deficient matrices: each kernel
 * result within the rounding bound of its summation order, the projection's
 * AVX2 build bit for bit the portable one's; the
 * orthonormalization's output orthonormal within float32 (float64) rounding
 * and spanning what its input spans, zero and dependent vectors zero (never
 * NaN); the seeded normal deviates reproducible and of unit variance. Then
 * sc_lowrank_* on a one-rank communicator: the argument errors, and every
 * dtype's result against the double reference of PowerSGD's P P^T M. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/lowrank.h"
#include "kernels/cpu/reduce.h"
#include "sparsecoll.h"

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* xorshift64, in [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1p-52 - 1.0;
}

typedef struct {
  size_t rows, cols;
} shape_t;

static const shape_t shapes[] = {{1, 1},   {1, 7},    {7, 1},    {3, 5},      {17, 33},
                                 {64, 64}, {129, 70}, {33, 300}, {4096, 1024}};
static const size_t ranks[] = {1, 2, 3, 4, 5, 8, 13, 64};

/* kind 0: random; 1: zero; 2: rank 2 (outer products). */
static void fill_m(double *m, size_t rows, size_t cols, int kind) {
  if (kind == 1) {
    memset(m, 0, rows * cols * sizeof(double));
    return;
  }
  if (kind == 0) {
    for (size_t x = 0; x < rows * cols; x++) m[x] = urand();
    return;
  }
  double a[2][4096], b[2][4096];
  for (int t = 0; t < 2; t++) {
    for (size_t i = 0; i < rows; i++) a[t][i] = urand();
    for (size_t j = 0; j < cols; j++) b[t][j] = urand();
  }
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) m[i * cols + j] = a[0][i] * b[0][j] + a[1][i] * b[1][j];
}

/* Sampled indices of [0, n): all when small, else 48 spread ones + the ends. */
static size_t sample(size_t n, size_t s) {
  if (n <= 64) return s;
  return s == 0 ? 0 : s == 1 ? n - 1 : (s * 2654435761u) % n;
}
static size_t nsample(size_t n) {
  return n <= 64 ? n : 48;
}

static void check_kernels(size_t rows, size_t cols, size_t r, int kind, int f64) {
  const double eps = f64 ? DBL_EPSILON : FLT_EPSILON;
  const size_t es = f64 ? sizeof(double) : sizeof(float);
  double *m = malloc(rows * cols * sizeof(double)), *p = malloc(r * rows * sizeof(double)),
         *q = malloc(r * cols * sizeof(double));
  void *mt = malloc(rows * cols * es), *pt = malloc(r * rows * es), *qt = malloc(r * cols * es),
       *pt2 = malloc(r * rows * es), *qt2 = malloc(r * cols * es), *out = malloc(rows * cols * es);
  assert_true(m && p && q && mt && pt && qt && pt2 && qt2 && out);
  fill_m(m, rows, cols, kind);
  for (size_t x = 0; x < r * rows; x++) p[x] = urand();
  for (size_t x = 0; x < r * cols; x++) q[x] = urand();
#define STORE(dst, src, n)                                                                         \
  for (size_t x_ = 0; x_ < (n); x_++) {                                                            \
    if (f64)                                                                                       \
      ((double *)(dst))[x_] = (src)[x_];                                                           \
    else                                                                                           \
      ((float *)(dst))[x_] = (float)(src)[x_];                                                     \
    (src)[x_] = f64 ? ((double *)(dst))[x_] : ((float *)(dst))[x_];                                \
  }
  STORE(mt, m, rows * cols);
  STORE(pt, p, r * rows);
  STORE(qt, q, r * cols);
#define GET(buf, x) (f64 ? ((const double *)(buf))[x] : (double)((const float *)(buf))[x])
  /* P = M Q: lanes of cols / 8 terms each, then a fold of 4 levels. */
  if (f64)
    sc_lr_project_f64(pt2, mt, rows, cols, qt, r);
  else
    sc_lr_project_f32(pt2, mt, rows, cols, qt, r);
  /* The portable build gives the same bits as the one the CPU runs. */
  void *pt3 = malloc(r * rows * es);
  assert_non_null(pt3);
  if (f64)
    sc_lr_project_portable_f64(pt3, mt, rows, cols, qt, r);
  else
    sc_lr_project_portable_f32(pt3, mt, rows, cols, qt, r);
  assert_memory_equal(pt3, pt2, r * rows * es);
  free(pt3);
  for (size_t si = 0; si < nsample(rows); si++) {
    const size_t i = sample(rows, si);
    for (size_t k = 0; k < r; k++) {
      double ref = 0, mag = 0;
      for (size_t j = 0; j < cols; j++) {
        ref += m[i * cols + j] * q[k * cols + j];
        mag += fabs(m[i * cols + j] * q[k * cols + j]);
      }
      const double got = GET(pt2, k * rows + i);
      assert_false(isnan(got));
      if (fabs(got - ref) > (double)(cols / 8 + 8) * eps * mag) {
        fprintf(stderr, "project %zux%zu r=%zu kind %d f64 %d (%zu,%zu): %g vs %g\n", rows, cols, r,
                kind, f64, i, k, got, ref);
        fail();
      }
    }
  }
  /* Q = M^T P: rows terms in order. */
  if (f64)
    sc_lr_project_t_f64(qt2, mt, rows, cols, pt, r);
  else
    sc_lr_project_t_f32(qt2, mt, rows, cols, pt, r);
  for (size_t sj = 0; sj < nsample(cols); sj++) {
    const size_t j = sample(cols, sj);
    for (size_t k = 0; k < r; k++) {
      double ref = 0, mag = 0;
      for (size_t i = 0; i < rows; i++) {
        ref += m[i * cols + j] * p[k * rows + i];
        mag += fabs(m[i * cols + j] * p[k * rows + i]);
      }
      const double got = GET(qt2, k * cols + j);
      if (fabs(got - ref) > (double)(rows + 2) * eps * mag) {
        fprintf(stderr, "project_t %zux%zu r=%zu kind %d f64 %d (%zu,%zu): %g vs %g\n", rows, cols,
                r, kind, f64, j, k, got, ref);
        fail();
      }
    }
  }
  /* out = beta M + alpha P Q^T, and with beta 0 out never read (NaN there). */
  for (int accumulate = 0; accumulate < 2; accumulate++) {
    const double alpha = accumulate ? -1.0 : 0.25, beta = accumulate ? 1.0 : 0.0;
    if (accumulate)
      memcpy(out, mt, rows * cols * es);
    else
      for (size_t x = 0; x < rows * cols; x++)
        if (f64)
          ((double *)out)[x] = NAN;
        else
          ((float *)out)[x] = NAN;
    if (f64)
      sc_lr_expand_f64(out, rows, cols, pt, rows, qt, r, alpha, beta);
    else
      sc_lr_expand_f32(out, rows, cols, pt, rows, qt, r, (float)alpha, (float)beta);
    for (size_t si = 0; si < nsample(rows); si++) {
      const size_t i = sample(rows, si);
      for (size_t sj = 0; sj < nsample(cols); sj++) {
        const size_t j = sample(cols, sj);
        double s = 0, mag = 0;
        for (size_t k = 0; k < r; k++) {
          s += p[k * rows + i] * q[k * cols + j];
          mag += fabs(p[k * rows + i] * q[k * cols + j]);
        }
        const double ref = beta * m[i * cols + j] + alpha * s;
        const double got = GET(out, i * cols + j);
        if (!(fabs(got - ref) <= (double)(r + 3) * eps * (fabs(m[i * cols + j]) + mag))) {
          fprintf(stderr, "expand %zux%zu r=%zu f64 %d (%zu,%zu): %g vs %g\n", rows, cols, r, f64,
                  i, j, got, ref);
          fail();
        }
      }
    }
  }
  free(m);
  free(p);
  free(q);
  free(mt);
  free(pt);
  free(qt);
  free(pt2);
  free(qt2);
  free(out);
}

static void test_products(void **state) {
  (void)state;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t t = 0; t < sizeof ranks / sizeof ranks[0]; t++) {
      const size_t rows = shapes[s].rows, cols = shapes[s].cols, r = ranks[t];
      if (rows * cols > 100000 && r != 4 && r != 64) continue; /* the big one sampled */
      for (int f64 = 0; f64 < 2; f64++)
        for (int kind = 0; kind < 3; kind++) {
          if (rows * cols > 100000 && (kind != 0 || (f64 && r == 64))) continue;
          check_kernels(rows, cols, r, kind, f64);
        }
    }
}

/* Orthonormalizes r random vectors of length n (some zero or dependent),
 * checks V V^T = I on the nonzero ones, zero ones exactly zero, and that each
 * independent input lies in the span of the outputs up to it. */
static void check_orth(size_t n, size_t r, int f64, int deficient) {
  const double eps = f64 ? DBL_EPSILON : FLT_EPSILON;
  const size_t es = f64 ? sizeof(double) : sizeof(float);
  double *v = malloc(r * n * sizeof(double));
  void *vt = malloc(r * n * es);
  assert_true(v && vt);
  int *dependent = calloc(r, sizeof(int));
  for (size_t x = 0; x < r * n; x++) v[x] = urand();
  if (deficient)
    for (size_t k = 1; k < r; k++) {
      if (k % 3 == 1) { /* zero */
        memset(v + k * n, 0, n * sizeof(double));
        dependent[k] = 1;
      } else if (k % 3 == 2) { /* an exact multiple of vector 0 */
        for (size_t x = 0; x < n; x++) v[k * n + x] = 2 * v[x];
        dependent[k] = 1;
      }
    }
  if (deficient && r == 1) {
    memset(v, 0, n * sizeof(double));
    dependent[0] = 1;
  }
  STORE(vt, v, r * n);
  const size_t kept = f64 ? sc_lr_orth_f64(vt, n, r) : sc_lr_orth_f32(vt, n, r);
  size_t want = 0;
  for (size_t k = 0; k < r; k++) want += !dependent[k];
  if (n < r) want = kept; /* more vectors than dimensions: at most n survive */
  assert_int_equal(kept, want);
  assert_true(kept <= n);
  const double tol = 2.0 * (double)(n / 8 + 8) * eps;
  for (size_t a = 0; a < r; a++) {
    double za = 0;
    for (size_t x = 0; x < n; x++) {
      assert_false(isnan(GET(vt, a * n + x)));
      za += fabs(GET(vt, a * n + x));
    }
    if (dependent[a]) assert_true(za == 0);
    if (za == 0) continue;
    for (size_t b = 0; b <= a; b++) {
      double d = 0, zb = 0;
      for (size_t x = 0; x < n; x++) {
        d += GET(vt, a * n + x) * GET(vt, b * n + x);
        zb += fabs(GET(vt, b * n + x));
      }
      if (zb == 0) continue;
      if (fabs(d - (a == b)) > tol) {
        fprintf(stderr, "orth n=%zu r=%zu f64 %d: <v%zu, v%zu> = %.3g\n", n, r, f64, a, b, d);
        fail();
      }
    }
    if (n >= r && !dependent[a]) { /* the input a in the span of outputs 0..a */
      double *w = malloc(n * sizeof(double)), nw = 0, n0 = 0;
      memcpy(w, v + a * n, n * sizeof(double));
      for (size_t x = 0; x < n; x++) n0 += w[x] * w[x];
      for (size_t b = 0; b <= a; b++) {
        double d = 0;
        for (size_t x = 0; x < n; x++) d += w[x] * GET(vt, b * n + x);
        for (size_t x = 0; x < n; x++) w[x] -= d * GET(vt, b * n + x);
      }
      for (size_t x = 0; x < n; x++) nw += w[x] * w[x];
      assert_true(sqrt(nw) <= 16 * tol * sqrt(n0));
      free(w);
    }
  }
  free(v);
  free(vt);
  free(dependent);
}

static void test_orth(void **state) {
  (void)state;
  const size_t ns[] = {1, 2, 5, 16, 63, 100, 1000, 4096};
  const size_t rs[] = {1, 2, 4, 7, 16, 64};
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (size_t b = 0; b < sizeof rs / sizeof rs[0]; b++)
      for (int f64 = 0; f64 < 2; f64++)
        for (int deficient = 0; deficient < 2; deficient++) {
          if (ns[a] * rs[b] > 70000 && rs[b] > 16) continue;
          check_orth(ns[a], rs[b], f64, deficient);
        }
  /* All zero: nothing kept, zeros (no 0/0). */
  float z[3 * 10] = {0};
  assert_int_equal(sc_lr_orth_f32(z, 10, 3), 0);
  for (int x = 0; x < 30; x++) assert_true(z[x] == 0);
  double zd[2 * 5] = {0};
  assert_int_equal(sc_lr_orth_f64(zd, 5, 2), 0);
  for (int x = 0; x < 10; x++) assert_true(zd[x] == 0);
  /* A vector tiny enough that its square underflows to zero, and one of
   * infinities: both zero, never NaN. */
  float t[2 * 4] = {1e-30f, 0, 0, 0, INFINITY, 1, 1, 1};
  sc_lr_orth_f32(t, 4, 2);
  for (int x = 0; x < 8; x++) assert_false(isnan(t[x]));
}

static void test_normal(void **state) {
  (void)state;
  const size_t n = 100001;
  double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
  float *f = malloc(n * sizeof(float));
  assert_true(a && b && f);
  sc_lr_normal_f64(a, n, 42);
  sc_lr_normal_f64(b, n, 42);
  assert_memory_equal(a, b, n * sizeof(double));
  sc_lr_normal_f32(f, n, 42);
  double mean = 0, var = 0;
  for (size_t x = 0; x < n; x++) {
    assert_true(f[x] == (float)a[x]);
    assert_true(isfinite(a[x]));
    mean += a[x];
  }
  mean /= (double)n;
  for (size_t x = 0; x < n; x++) var += (a[x] - mean) * (a[x] - mean);
  var /= (double)n;
  assert_true(fabs(mean) < 0.02 && fabs(var - 1) < 0.03);
  sc_lr_normal_f64(b, n, 43);
  size_t same = 0;
  for (size_t x = 0; x < n; x++) same += a[x] == b[x];
  assert_true(same < 10);
  free(a);
  free(b);
  free(f);
}

static sc_comm_t *comm;

static void test_api(void **state) {
  (void)state;
  sc_lowrank_t *lr = NULL;
  assert_int_equal(sc_lowrank_create(4, 4, SC_FLOAT32, 2, SC_LOWRANK_POWERSGD, 0, 1, NULL),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_lowrank_create(4, 4, SC_INT32, 2, SC_LOWRANK_POWERSGD, 0, 1, &lr),
                   SC_ERR_INVALID_ARG);
  assert_null(lr);
  assert_int_equal(sc_lowrank_create(4, 4, (sc_dtype_t)99, 2, SC_LOWRANK_POWERSGD, 0, 1, &lr),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_lowrank_create(4, 4, SC_FLOAT32, 0, SC_LOWRANK_POWERSGD, 0, 1, &lr),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_lowrank_create(4, 4, SC_FLOAT32, 2, (sc_lowrank_mode_t)7, 0, 1, &lr),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_lowrank_create(SIZE_MAX / 2, 16, SC_FLOAT32, 2, SC_LOWRANK_ACPSGD, 0, 1, &lr),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_lowrank_destroy(NULL), SC_SUCCESS);
  /* Rows or cols 0: a no-op, grad may be NULL. */
  assert_int_equal(sc_lowrank_create(0, 5, SC_FLOAT32, 3, SC_LOWRANK_POWERSGD, 1, 1, &lr),
                   SC_SUCCESS);
  assert_int_equal(sc_lowrank_allreduce(NULL, lr, comm), SC_SUCCESS);
  assert_int_equal(sc_lowrank_allreduce(NULL, lr, NULL), SC_ERR_INVALID_ARG);
  sc_lowrank_destroy(lr);
  assert_int_equal(sc_lowrank_create(3, 5, SC_FLOAT32, 3, SC_LOWRANK_POWERSGD, 1, 1, &lr),
                   SC_SUCCESS);
  assert_int_equal(sc_lowrank_allreduce(NULL, lr, comm), SC_ERR_INVALID_ARG);
  float g[15] = {0};
  assert_int_equal(sc_lowrank_allreduce(g, NULL, comm), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_lowrank_allreduce(g, lr, NULL), SC_ERR_INVALID_ARG);
  sc_lowrank_destroy(lr);
}

/* One rank, no feedback: PowerSGD's result is U U^T M with U the
 * orthonormal basis of M Q; M Q's columns span M's column space when M has
 * rank <= r, so a rank-2 M comes back whole, in every dtype; a rank-r+ M
 * comes back as a rank-r projection (R = U U^T M: R R^+ M = R). */
static void test_one_rank(void **state) {
  (void)state;
  const sc_dtype_t dts[] = {SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
  const double tols[] = {2e-3, 1.6e-2, 1e-5, 1e-12};
  const size_t rows = 37, cols = 23;
  double *m = malloc(rows * cols * sizeof(double));
  void *g = malloc(rows * cols * 8);
  assert_true(m && g);
  for (int mode = 0; mode < 2; mode++)
    for (size_t t = 0; t < 4; t++) {
      const sc_dtype_t dt = dts[t];
      fill_m(m, rows, cols, 2);
      for (size_t x = 0; x < rows * cols; x++) {
        switch (dt) {
        case SC_FLOAT16:
          ((uint16_t *)g)[x] = sc_float_to_half((float)m[x]);
          m[x] = sc_half_to_float(((uint16_t *)g)[x]);
          break;
        case SC_BFLOAT16:
          ((uint16_t *)g)[x] = sc_float_to_bfloat16((float)m[x]);
          m[x] = sc_bfloat16_to_float(((uint16_t *)g)[x]);
          break;
        case SC_FLOAT32:
          ((float *)g)[x] = (float)m[x];
          m[x] = ((float *)g)[x];
          break;
        default:
          ((double *)g)[x] = m[x];
        }
      }
      sc_lowrank_t *lr = NULL;
      assert_int_equal(sc_lowrank_create(rows, cols, dt, 4, (sc_lowrank_mode_t)mode, 0, 7, &lr),
                       SC_SUCCESS);
      /* ACP-SGD's first call projects onto the seed's Q; the second onto
       * the column space of M Q, which is M's. */
      if (mode == SC_LOWRANK_ACPSGD) {
        void *g0 = malloc(rows * cols * 8);
        assert_non_null(g0);
        memcpy(g0, g, rows * cols * 8);
        assert_int_equal(sc_lowrank_allreduce(g, lr, comm), SC_SUCCESS);
        memcpy(g, g0, rows * cols * 8);
        free(g0);
      }
      assert_int_equal(sc_lowrank_allreduce(g, lr, comm), SC_SUCCESS);
      double err = 0, nrm = 0;
      for (size_t x = 0; x < rows * cols; x++) {
        double y = dt == SC_FLOAT16    ? sc_half_to_float(((uint16_t *)g)[x])
                   : dt == SC_BFLOAT16 ? sc_bfloat16_to_float(((uint16_t *)g)[x])
                   : dt == SC_FLOAT32  ? ((float *)g)[x]
                                       : ((double *)g)[x];
        err = fmax(err, fabs(y - m[x]));
        nrm = fmax(nrm, fabs(m[x]));
      }
      if (err > tols[t] * nrm) {
        fprintf(stderr, "one rank, mode %d dtype %d: error %g of %g\n", mode, (int)dt, err, nrm);
        fail();
      }
      sc_lowrank_destroy(lr);
    }
  free(m);
  free(g);
}

static int setup(void **state) {
  (void)state;
  setenv("SC_TIMEOUT_MS", "60000", 1);
  sc_unique_id_t id;
  if (sc_get_unique_id(&id) != SC_SUCCESS) return -1;
  return sc_comm_init_rank(&comm, 1, id, 0) == SC_SUCCESS ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return sc_comm_destroy(comm) == SC_SUCCESS ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_products), cmocka_unit_test(test_orth),
      cmocka_unit_test(test_normal),   cmocka_unit_test(test_api),
      cmocka_unit_test(test_one_rank),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
