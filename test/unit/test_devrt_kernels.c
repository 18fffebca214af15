/* SPDX-License-Identifier: BSD-3-Clause */
/* The device kernels of kernels/devrt.h on the stand-in: every dtype and op
 * and a spread of counts, each chain enqueued without waiting in between
 * (ops run later, with a delay, on the stream's thread), compared with the
 * CPU kernels (reduce, top-k) or with loops written here (gather, scatter,
 * error feedback). The Gaussian selection is also checked against its
 * contract directly. */
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
#include "kernels/devrt.h"
#include "sparsecoll.h"
#include "test/unit/devrt_standin.h"

static const sc_devrt_t *rt;
/* 0: built as test_devrt_kernels_cuda, on the CUDA runtime (the range
 * checks only the stand-in makes are left out). */
static int standin = 1;
static void *stream, *event;

static uint64_t rng_state = 0x13198a2e03707344ull;
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static const sc_dtype_t all_dtypes[] = {SC_INT8,   SC_UINT8,   SC_INT32,    SC_UINT32,  SC_INT64,
                                        SC_UINT64, SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
static const sc_dtype_t float_dtypes[] = {SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
static const size_t counts[] = {1, 3, 17, 1000, 4099};

/* A NaN's payload is not part of the contract: x86 keeps an operand's
 * payload, the GPU gives its canonical NaN (0x7fffffff, 0x7fff in half).
 * Elements equal bit for bit, or NaN on both sides, pass. */
static int is_nan_elem(sc_dtype_t dt, const unsigned char *p) {
  uint16_t h;
  float f;
  double d;
  switch (dt) {
  case SC_FLOAT16:
    memcpy(&h, p, 2);
    return (h & 0x7fffu) > 0x7c00u;
  case SC_BFLOAT16:
    memcpy(&h, p, 2);
    return (h & 0x7fffu) > 0x7f80u;
  case SC_FLOAT32:
    memcpy(&f, p, 4);
    return isnan(f);
  case SC_FLOAT64:
    memcpy(&d, p, 8);
    return isnan(d);
  default:
    return 0;
  }
}

static void expect_elements(sc_dtype_t dt, const void *got, const void *want, size_t n) {
  size_t es = sc_dtype_size(dt);
  const unsigned char *g = got, *w = want;
  for (size_t i = 0; i < n; i++, g += es, w += es)
    if (memcmp(g, w, es) && !(is_nan_elem(dt, g) && is_nan_elem(dt, w)))
      fail_msg("dtype %d element %zu of %zu differs from the reference", (int)dt, i, n);
}

/* Random values of a dtype: integers any bits; floats mostly moderate with
 * some ties, zeros of both signs, and (when nan) a few NaN. */
static void fill(sc_dtype_t dt, void *p, size_t n, int nan) {
  size_t es = sc_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng_next();
    double v = ((double)(r % 20001) - 10000.0) / 97.0;
    if (r % 31 == 0) v = 1.5; /* ties */
    if (r % 37 == 0) v = (r & 1) ? -0.0 : 0.0;
    if (nan && r % 53 == 0) v = NAN;
    switch (dt) {
    case SC_FLOAT16:
      ((uint16_t *)p)[i] = sc_float_to_half((float)v);
      break;
    case SC_BFLOAT16:
      ((uint16_t *)p)[i] = sc_float_to_bfloat16((float)v);
      break;
    case SC_FLOAT32:
      ((float *)p)[i] = (float)v;
      break;
    case SC_FLOAT64:
      ((double *)p)[i] = v;
      break;
    default:
      memcpy((char *)p + i * es, &r, es);
    }
  }
}

static void *dev_alloc(size_t bytes) {
  void *d;
  assert_int_equal(rt->malloc_device(&d, bytes), SC_SUCCESS);
  return d;
}

static void put(void *d, const void *h, size_t bytes) {
  assert_int_equal(rt->memcpy_async(d, h, bytes, stream), SC_SUCCESS);
}

static void get(void *h, const void *d, size_t bytes) {
  assert_int_equal(rt->memcpy_async(h, d, bytes, stream), SC_SUCCESS);
}

static void finish(void) {
  assert_int_equal(rt->event_record(event, stream), SC_SUCCESS);
  assert_int_equal(sc_dev_event_wait(rt, event, 20000, "kernels"), SC_SUCCESS);
}

static void test_reduce_all(void **state) {
  (void)state;
  for (size_t t = 0; t < sizeof all_dtypes / sizeof *all_dtypes; t++) {
    sc_dtype_t dt = all_dtypes[t];
    size_t es = sc_dtype_size(dt);
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
      size_t n = counts[c], bytes = n * es;
      char *a = malloc(bytes), *b = malloc(bytes), *ref = malloc(bytes);
      char *out = malloc(bytes), *out2 = malloc(bytes);
      void *da = dev_alloc(bytes), *db = dev_alloc(bytes), *dd = dev_alloc(bytes);
      for (int op = SC_SUM; op <= SC_AVG; op++) {
        fill(dt, a, n, 1);
        fill(dt, b, n, 1);
        put(da, a, bytes);
        put(db, b, bytes);
        assert_int_equal(sc_dev_reduce(rt, dd, da, db, n, dt, (sc_redop_t)op, stream), SC_SUCCESS);
        /* dst aliasing a */
        assert_int_equal(sc_dev_reduce(rt, da, da, db, n, dt, (sc_redop_t)op, stream), SC_SUCCESS);
        if (op == SC_AVG)
          assert_int_equal(sc_dev_avg_finalize(rt, dd, n, dt, 3, stream), SC_SUCCESS);
        get(out, dd, bytes);
        get(out2, da, bytes);
        finish();
        sc_reduce_kernel(dt, (sc_redop_t)op, ref, a, b, n);
        expect_elements(dt, out2, ref, n);
        if (op == SC_AVG) sc_avg_finalize(dt, ref, n, 3);
        expect_elements(dt, out, ref, n);
      }
      if (standin) {
        /* A range past the allocation is refused, nothing is enqueued. */
        assert_int_equal(sc_dev_reduce(rt, dd, da, db, n + 1, dt, SC_SUM, stream),
                         SC_ERR_INVALID_ARG);
        /* Host (pageable) memory is not device memory. */
        assert_int_equal(sc_dev_reduce(rt, dd, a, db, n, dt, SC_SUM, stream), SC_ERR_INVALID_ARG);
      }
      assert_int_equal(rt->free_device(da), SC_SUCCESS);
      assert_int_equal(rt->free_device(db), SC_SUCCESS);
      assert_int_equal(rt->free_device(dd), SC_SUCCESS);
      free(a);
      free(b);
      free(ref);
      free(out);
      free(out2);
    }
  }
  assert_int_not_equal(sc_dev_reduce(rt, NULL, NULL, NULL, 4, (sc_dtype_t)99, SC_SUM, stream),
                       SC_SUCCESS);
  assert_int_equal(sc_dev_reduce(rt, NULL, NULL, NULL, 0, SC_FLOAT32, SC_SUM, stream), SC_SUCCESS);
}

/* Distinct random indices below n, sorted. */
static size_t pick_indices(uint32_t *idx, size_t n, size_t want) {
  size_t m = 0;
  for (size_t i = 0; i < n && m < want; i++)
    if (rng_next() % n < want * 2) idx[m++] = (uint32_t)i;
  return m;
}

/* value / d as sc_gtopk_allreduce averages (the reference, element-wise). */
static void divide_ref(sc_dtype_t dt, void *dst, size_t i, const void *src, size_t j, int d) {
  if (dt == SC_FLOAT16)
    ((uint16_t *)dst)[i] = sc_float_to_half(sc_half_to_float(((const uint16_t *)src)[j]) / d);
  else if (dt == SC_BFLOAT16)
    ((uint16_t *)dst)[i] =
        sc_float_to_bfloat16(sc_bfloat16_to_float(((const uint16_t *)src)[j]) / d);
  else if (dt == SC_FLOAT32)
    ((float *)dst)[i] = ((const float *)src)[j] / (float)d;
  else
    ((double *)dst)[i] = ((const double *)src)[j] / (double)d;
}

static void test_sparse_and_ef(void **state) {
  (void)state;
  for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
    sc_dtype_t dt = float_dtypes[t];
    size_t es = sc_dtype_size(dt);
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
      size_t n = counts[c], bytes = n * es;
      char *x = malloc(bytes), *g = malloc(bytes), *ref = malloc(bytes), *out = malloc(bytes);
      uint32_t *idx = malloc(n * sizeof *idx);
      uint8_t *surv = malloc(n);
      char *vals = malloc(bytes), *vout = malloc(bytes);
      size_t nnz = pick_indices(idx, n, n / 4 + 1);
      for (size_t j = 0; j < nnz; j++) surv[j] = (uint8_t)(rng_next() & 1);
      fill(dt, x, n, 1);
      fill(dt, g, n, 0);
      fill(dt, vals, nnz, 1);
      void *dx = dev_alloc(bytes), *dg = dev_alloc(bytes), *di = dev_alloc(n * sizeof *idx);
      void *dv = dev_alloc(bytes), *ds = dev_alloc(n), *dr = dev_alloc(bytes);
      put(dx, x, bytes);
      put(dg, g, bytes);
      put(di, idx, nnz * sizeof *idx);
      put(dv, vals, nnz * es);
      put(ds, surv, nnz);

      /* gather */
      assert_int_equal(sc_dev_sparse_gather(rt, dr, dx, di, nnz, dt, stream), SC_SUCCESS);
      get(vout, dr, nnz * es);
      finish();
      for (size_t j = 0; j < nnz; j++)
        assert_memory_equal(vout + j * es, x + (size_t)idx[j] * es, es);

      /* scatter: into x's copy, then zero-first, each with divisors 1 and 3 */
      for (int zero = 0; zero <= 1; zero++)
        for (int d = 1; d <= 3; d += 2) {
          put(dr, x, bytes);
          assert_int_equal(sc_dev_sparse_scatter(rt, dr, n, di, dv, nnz, dt, zero, d, stream),
                           SC_SUCCESS);
          get(out, dr, bytes);
          finish();
          if (zero)
            memset(ref, 0, bytes);
          else
            memcpy(ref, x, bytes);
          for (size_t j = 0; j < nnz; j++) {
            if (d == 1)
              memcpy(ref + (size_t)idx[j] * es, vals + j * es, es);
            else
              divide_ref(dt, ref, idx[j], vals, j, d);
          }
          expect_elements(dt, out, ref, n);
        }

      /* error feedback: accumulate, clear, restore (with and without survived) */
      put(dr, x, bytes);
      assert_int_equal(sc_dev_ef_accumulate(rt, dr, dg, n, dt, stream), SC_SUCCESS);
      assert_int_equal(sc_dev_ef_clear(rt, dr, di, nnz, dt, stream), SC_SUCCESS);
      get(out, dr, bytes);
      finish();
      sc_reduce_kernel(dt, SC_SUM, ref, x, g, n);
      for (size_t j = 0; j < nnz; j++) memset(ref + (size_t)idx[j] * es, 0, es);
      expect_elements(dt, out, ref, n);
      assert_int_equal(sc_dev_ef_restore(rt, dr, di, dv, ds, nnz, dt, stream), SC_SUCCESS);
      get(out, dr, bytes);
      finish();
      for (size_t j = 0; j < nnz; j++)
        if (!surv[j]) memcpy(ref + (size_t)idx[j] * es, vals + j * es, es);
      expect_elements(dt, out, ref, n);
      assert_int_equal(sc_dev_ef_restore(rt, dr, di, dv, NULL, nnz, dt, stream), SC_SUCCESS);
      get(out, dr, bytes);
      finish();
      for (size_t j = 0; j < nnz; j++) memcpy(ref + (size_t)idx[j] * es, vals + j * es, es);
      expect_elements(dt, out, ref, n);

      /* argument errors */
      assert_int_equal(sc_dev_sparse_scatter(rt, dr, n, di, dv, nnz, dt, 0, 0, stream),
                       SC_ERR_INVALID_ARG);
      assert_int_equal(sc_dev_sparse_gather(rt, dr, dx, di, nnz, SC_INT32, stream),
                       SC_ERR_INVALID_ARG);
      if (standin)
        assert_int_equal(sc_dev_ef_accumulate(rt, dr, dg, n + 1, dt, stream), SC_ERR_INVALID_ARG);

      void *all[] = {dx, dg, di, dv, ds, dr};
      for (size_t i = 0; i < 6; i++) assert_int_equal(rt->free_device(all[i]), SC_SUCCESS);
      free(x);
      free(g);
      free(ref);
      free(out);
      free(idx);
      free(surv);
      free(vals);
      free(vout);
    }
  }
}

static double mag(sc_dtype_t dt, const void *x, size_t i) {
  switch (dt) {
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

/* The Gaussian contract checked directly: sorted distinct indices, at most
 * 2 min(k, n), no NaN, and every selected magnitude >= every unselected
 * non-NaN one (a threshold selection). */
static void check_threshold_selection(sc_dtype_t dt, const void *x, size_t n, size_t k,
                                      const uint32_t *idx, size_t nnz) {
  size_t m = k < n ? k : n;
  assert_true(nnz <= 2 * m);
  double min_sel = INFINITY;
  char *sel = calloc(n, 1);
  for (size_t j = 0; j < nnz; j++) {
    if (j) assert_true(idx[j] > idx[j - 1]);
    assert_true(idx[j] < n);
    assert_false(isnan(mag(dt, x, idx[j])));
    sel[idx[j]] = 1;
    if (mag(dt, x, idx[j]) < min_sel) min_sel = mag(dt, x, idx[j]);
  }
  for (size_t i = 0; i < n; i++)
    if (!sel[i] && !isnan(mag(dt, x, i))) assert_true(mag(dt, x, i) <= min_sel);
  free(sel);
}

static void test_topk(void **state) {
  (void)state;
  static const size_t ns[] = {1, 10, 1000, 20000};
  for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
    sc_dtype_t dt = float_dtypes[t];
    size_t es = sc_dtype_size(dt);
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
      size_t n = ns[c];
      size_t ks[] = {1, 5, n / 10, n / 2, n, n + 3};
      char *x = malloc(n * es);
      fill(dt, x, n, 1);
      void *dx = dev_alloc(n * es);
      size_t wsb = sc_dev_topk_workspace_size(rt, n, dt);
      assert_true(wsb > 0);
      void *ws = dev_alloc(wsb);
      put(dx, x, n * es);
      for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        size_t k = ks[ki], m = k < n ? k : n;
        if (k == 0) continue;
        uint32_t *ridx = malloc(2 * m * sizeof *ridx), *idx = malloc(2 * m * sizeof *idx);
        char *rval = malloc(2 * m * es), *val = malloc(2 * m * es);
        void *di = dev_alloc(2 * m * sizeof *idx), *dv = dev_alloc(2 * m * es);
        for (int method = SC_SELECT_EXACT; method <= SC_SELECT_MSTOPK; method++) {
          size_t rnnz = 0, nnz = 99;
          assert_int_equal(sc_topk(x, n, dt, k, (sc_select_t)method, ridx, rval, &rnnz),
                           SC_SUCCESS);
          assert_int_equal(
              sc_dev_topk(rt, dx, n, dt, k, (sc_select_t)method, di, dv, &nnz, ws, wsb, stream),
              SC_SUCCESS);
          assert_int_equal(nnz, rnnz);
          get(idx, di, nnz * sizeof *idx);
          get(val, dv, nnz * es);
          finish();
          /* A GPU sums MSTopK's mean in another order: a float64 threshold
           * may land on a neighbouring key (docs/CUDA.md), so only the
           * count is the host's there. */
          int same = standin || method != SC_SELECT_MSTOPK || dt != SC_FLOAT64;
          if (same) assert_memory_equal(idx, ridx, nnz * sizeof *idx);
          if (same) assert_memory_equal(val, rval, nnz * es);
          if (method == SC_SELECT_GAUSSIAN) check_threshold_selection(dt, x, n, k, idx, nnz);
          if (method == SC_SELECT_MSTOPK) { /* exactly min(k, non-NaN entries) */
            size_t nonnan = 0;
            for (size_t i = 0; i < n; i++) nonnan += !isnan(mag(dt, x, i));
            assert_int_equal(nnz, k < nonnan ? k : nonnan);
          }
          /* Without values: the same indices. */
          assert_int_equal(
              sc_dev_topk(rt, dx, n, dt, k, (sc_select_t)method, di, NULL, &nnz, ws, wsb, stream),
              SC_SUCCESS);
          assert_int_equal(nnz, rnnz);
          get(idx, di, nnz * sizeof *idx);
          finish();
          if (same) assert_memory_equal(idx, ridx, nnz * sizeof *idx);
        }
        if (standin) {
          /* Output room below 2 min(k, n) is refused. */
          size_t nnz = 0;
          void *small = dev_alloc(m * sizeof *idx);
          assert_int_equal(
              sc_dev_topk(rt, dx, n, dt, k, SC_SELECT_EXACT, small, NULL, &nnz, ws, wsb, stream),
              SC_ERR_INVALID_ARG);
          assert_int_equal(rt->free_device(small), SC_SUCCESS);
        }
        assert_int_equal(rt->free_device(di), SC_SUCCESS);
        assert_int_equal(rt->free_device(dv), SC_SUCCESS);
        free(ridx);
        free(idx);
        free(rval);
        free(val);
      }
      size_t nnz = 7;
      assert_int_equal(
          sc_dev_topk(rt, dx, n, dt, 0, SC_SELECT_EXACT, NULL, NULL, &nnz, ws, wsb, stream),
          SC_SUCCESS);
      assert_int_equal(nnz, 0);
      assert_int_equal(
          sc_dev_topk(rt, dx, n, SC_INT32, 1, SC_SELECT_EXACT, NULL, NULL, &nnz, ws, wsb, stream),
          SC_ERR_INVALID_ARG);
      assert_int_equal(rt->free_device(dx), SC_SUCCESS);
      assert_int_equal(rt->free_device(ws), SC_SUCCESS);
      free(x);
    }
  }
  assert_int_equal(sc_dev_topk_workspace_size(rt, 100, SC_INT32), 0);
}

int main(void) {
#ifdef DEVRT_TEST_CUDA
  standin = 0;
  rt = cuda_runtime_load();
#else
  setenv("SC_DEVFAKE_DELAY_US", "5", 1);
  rt = standin_load();
#endif
  if (rt->stream_create(&stream) != SC_SUCCESS || rt->event_create(&event) != SC_SUCCESS) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_all),
      cmocka_unit_test(test_sparse_and_ef),
      cmocka_unit_test(test_topk),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  rt->event_destroy(event);
  rt->stream_destroy(stream);
  return r;
}
