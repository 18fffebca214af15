/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA kernels on a GPU against the CPU kernels: every dtype and op of
 * the reduction and AVG over counts 0, 1, primes, 64 MiB and unaligned
 * offsets (in place and out of place); exact top-k against the CPU exact
 * selector (the same indices and values) on normal, tied, NaN, +-0 and
 * random-bit inputs in every float dtype; the Gaussian selector assembled
 * from the device primitives and the CPU decisions against the CPU Gaussian
 * selector; sparse gather/scatter and the error-feedback updates.
 * Without a device (or built without CUDA) it prints "skipped: no CUDA
 * device" and exits 77, which the harness counts as skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "sparsecoll.h"

#ifdef SC_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cpu/topk.h"
#include "kernels/cpu/topk_gaussian.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/devrt_cuda.h"
#include "test/unit/test_cuda_data.h"

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  assert_int_equal(cudaMalloc(&p, bytes ? bytes : 1), cudaSuccess);
  return p;
}

static void to_dev(void *d, const void *h, size_t bytes) {
  if (bytes) assert_int_equal(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
}

static void to_host(void *h, const void *d, size_t bytes) {
  if (bytes) assert_int_equal(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

static void sync_ok(void) {
  assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

static const sc_dtype_t all_dtypes[] = {SC_INT8,   SC_UINT8,   SC_INT32,    SC_UINT32,  SC_INT64,
                                        SC_UINT64, SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
static const sc_dtype_t float_dtypes[] = {SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};

/* One reduction at element offsets (oa, ob, od) into the allocations; od <
 * 0 means in place into a. */
static void one_reduce(sc_dtype_t dt, int op, size_t n, size_t oa, size_t ob, int od) {
  size_t es = sc_dtype_size(dt), slack = 4;
  size_t bytes = (n + slack) * es;
  uint8_t *a = malloc(bytes), *b = malloc(bytes), *ref = malloc(bytes), *got = malloc(bytes);
  fill_bits(a, n + slack, dt);
  fill_bits(b, n + slack, dt);
  uint8_t *da = dev_alloc(bytes), *db = dev_alloc(bytes), *dd = dev_alloc(bytes);
  to_dev(da, a, bytes);
  to_dev(db, b, bytes);
  uint8_t *dst = od < 0 ? da + oa * es : dd + (size_t)od * es;
  assert_int_equal(sc_cuda_reduce(dst, da + oa * es, db + ob * es, n, dt, (sc_redop_t)op, NULL),
                   SC_SUCCESS);
  if (op == SC_AVG) assert_int_equal(sc_cuda_avg_finalize(dst, n, dt, 3, NULL), SC_SUCCESS);
  sync_ok();
  to_host(got, dst, n * es);
  sc_reduce_kernel(dt, (sc_redop_t)op, ref, a + oa * es, b + ob * es, n);
  if (op == SC_AVG) sc_avg_finalize(dt, ref, n, 3);
  expect_same(dt, op, ref, got, n, a + oa * es, b + ob * es);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
  free(a);
  free(b);
  free(ref);
  free(got);
}

/* First in the group: no kernel of ours has run yet. Under lazy loading
 * (CUDA's default) most are not loaded; after the preload none may be left,
 * or a stream form can deadlock (kernels/cuda/preload.c). */
static void test_preload_loads_every_kernel(void **state) {
  (void)state;
  unsigned n = 0, left = 0;
  sc_result_t r = sc_cuda_kernels_unloaded(&n, &left);
  if (r == SC_ERR_UNSUPPORTED) {
    printf("driver before CUDA 12.4: the kernels cannot be listed; preload not checked\n");
    assert_int_equal(sc_cuda_preload_kernels(), SC_SUCCESS);
    return;
  }
  assert_int_equal(r, SC_SUCCESS);
  const char *mode = getenv("CUDA_MODULE_LOADING");
  int eager = mode && strcmp(mode, "EAGER") == 0;
  printf("library kernels: %u, not loaded before the preload: %u (%s loading)\n", n, left,
         eager ? "eager" : "lazy");
  /* reduce.cu alone: 10 dtypes x (4 ops x 2 + 2) */
  assert_true(n >= 100);
  if (!eager) assert_true(left > 0);
  assert_int_equal(sc_cuda_preload_kernels(), SC_SUCCESS);
  assert_int_equal(sc_cuda_kernels_unloaded(&n, &left), SC_SUCCESS);
  assert_int_equal(left, 0);
  /* Once per device: the second call finds it done. */
  assert_int_equal(sc_cuda_preload_kernels(), SC_SUCCESS);
}

static void test_reduce_against_cpu(void **state) {
  (void)state;
  const size_t counts[] = {0, 1, 2, 3, 7, 31, 97, 1021, 65537, (1u << 20) + 3};
  rng_seed(11);
  for (unsigned t = 0; t < sizeof all_dtypes / sizeof all_dtypes[0]; t++)
    for (int op = SC_SUM; op <= SC_AVG; op++)
      for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t n = counts[c];
        one_reduce(all_dtypes[t], op, n, 0, 0, 0);  /* aligned: vector loads */
        one_reduce(all_dtypes[t], op, n, 1, 1, 1);  /* same offset: a scalar head */
        one_reduce(all_dtypes[t], op, n, 1, 3, 2);  /* different offsets: scalar */
        one_reduce(all_dtypes[t], op, n, 3, 3, -1); /* in place */
      }
  /* 64 MiB of float32. */
  one_reduce(SC_FLOAT32, SC_SUM, (size_t)16 << 20, 0, 0, 0);
}

static void test_reduce_bad_arguments(void **state) {
  (void)state;
  assert_int_equal(sc_cuda_reduce(NULL, NULL, NULL, 0, SC_FLOAT32, SC_SUM, NULL), SC_SUCCESS);
  assert_int_equal(sc_cuda_reduce(NULL, NULL, NULL, 4, SC_FLOAT32, SC_SUM, NULL),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_cuda_reduce(NULL, NULL, NULL, 0, (sc_dtype_t)42, SC_SUM, NULL),
                   SC_ERR_INVALID_ARG);
}

typedef struct dev_topk {
  void *x, *ws;
  size_t ws_bytes;
  uint32_t *idx;
  void *val;
} dev_topk_t;

static dev_topk_t dev_topk_new(const void *x, size_t n, sc_dtype_t dt, size_t k) {
  dev_topk_t d;
  size_t es = sc_dtype_size(dt), m = 2 * (k < n ? k : n) + 1;
  d.x = dev_alloc(n * es);
  to_dev(d.x, x, n * es);
  d.ws_bytes = sc_cuda_topk_workspace_size(n, dt);
  d.ws = dev_alloc(d.ws_bytes);
  d.idx = dev_alloc(m * 4);
  d.val = dev_alloc(m * es);
  return d;
}

static void dev_topk_free(dev_topk_t *d) {
  cudaFree(d->x);
  cudaFree(d->ws);
  cudaFree(d->idx);
  cudaFree(d->val);
}

/* The Gaussian selector from the device primitives and the CPU decisions
 * (docs/CUDA.md). */
static size_t gaussian_on_device(const dev_topk_t *d, size_t n, sc_dtype_t dt, size_t k) {
  size_t nnz = 0;
  if (k == 0 || n == 0) return 0; /* as sc_topk: nothing to select (the sample needs 0 < k < n) */
  if (k >= n) {
    assert_int_equal(
        sc_cuda_topk_exact(d->x, n, dt, k, d->idx, NULL, &nnz, d->ws, d->ws_bytes, NULL),
        SC_SUCCESS);
    return nnz;
  }
  double top[SC_CUDA_TOPK_TOP], slope;
  size_t h, taken;
  assert_int_equal(sc_cuda_topk_sample(d->x, n, dt, k, top, &h, &taken, d->ws, d->ws_bytes, NULL),
                   SC_SUCCESS);
  double t = sc_topk_sample_threshold(top, h, taken, n, k, &slope);
  sc_topk_search_t s;
  sc_topk_search_init(&s, k, slope);
  for (int round = 0; round < SC_TOPK_ROUNDS && h > 0; round++) {
    uint64_t key;
    if (isnan(t) || !sc_topk_search_key(&s, sc_cuda_topk_threshold_key(dt, t), &key)) break;
    size_t count;
    assert_int_equal(
        sc_cuda_topk_above(d->x, n, dt, key, d->idx, 2 * k, &count, d->ws, d->ws_bytes, NULL),
        SC_SUCCESS);
    /* The threshold's magnitude as the CPU decodes it. */
    double tv;
    if (dt == SC_FLOAT16)
      tv = sc_half_to_float((uint16_t)key);
    else if (dt == SC_BFLOAT16)
      tv = sc_bfloat16_to_float((uint16_t)key);
    else if (dt == SC_FLOAT32)
      tv = bits_f32((uint32_t)key);
    else
      memcpy(&tv, &key, 8);
    if (sc_topk_search_record(&s, key, tv, count)) return count;
    t = sc_topk_search_next(&s);
  }
  assert_int_equal(sc_cuda_topk_exact(d->x, n, dt, k, d->idx, NULL, &nnz, d->ws, d->ws_bytes, NULL),
                   SC_SUCCESS);
  return nnz;
}

/* sc_cuda_topk_exact on the n elements from element `skip` of the device
 * copy equals the CPU exact selector on the same elements of x: the count,
 * the indices and the values, bit for bit. The buffers hold 2 min(k, n). */
static void exact_matches_cpu(const dev_topk_t *d, const void *x, size_t skip, size_t n,
                              sc_dtype_t dt, size_t k, int kind, uint32_t *cpu, uint32_t *got,
                              void *cval, void *gval) {
  size_t es = sc_dtype_size(dt), cnnz, gnnz;
  assert_int_equal(
      sc_topk_kernel((const char *)x + skip * es, n, dt, k, SC_SELECT_EXACT, cpu, cval, &cnnz),
      SC_SUCCESS);
  assert_int_equal(sc_cuda_topk_exact((char *)d->x + skip * es, n, dt, k, d->idx, d->val, &gnnz,
                                      d->ws, d->ws_bytes, NULL),
                   SC_SUCCESS);
  sync_ok();
  assert_int_equal(gnnz, cnnz);
  to_host(got, d->idx, gnnz * 4);
  to_host(gval, d->val, gnnz * es);
  if (gnnz && (memcmp(cpu, got, gnnz * 4) || memcmp(cval, gval, gnnz * es)))
    fail_msg("exact: dtype %d kind %d n %zu (from element %zu) k %zu differs", (int)dt, kind, n,
             skip, k);
}

static void test_topk_against_cpu(void **state) {
  (void)state;
  const size_t ns[] = {1, 2, 1009, 100003, (size_t)25 << 18};
  rng_seed(12);
  for (unsigned t = 0; t < 4; t++) {
    sc_dtype_t dt = float_dtypes[t];
    size_t es = sc_dtype_size(dt);
    for (unsigned a = 0; a < sizeof ns / sizeof ns[0]; a++) {
      size_t n = ns[a];
      void *x = malloc(n * es);
      for (int kind = 0; kind < 5; kind++) {
        if (n > 100003 && kind > 1) continue;
        fill_case(x, n, dt, kind);
        const size_t ks[] = {1, n / 1000 + 1, n / 2, n, n + 3};
        for (unsigned q = 0; q < sizeof ks / sizeof ks[0]; q++) {
          size_t k = ks[q], m = k < n ? k : n;
          uint32_t *cpu = malloc(2 * m * 4 + 4), *got = malloc(2 * m * 4 + 4);
          void *cval = malloc(2 * m * es + es), *gval = malloc(2 * m * es + es);
          dev_topk_t d = dev_topk_new(x, n, dt, k);
          size_t cnnz, gnnz;
          /* exact: indices and values; then from an address that is not
           * 16-byte aligned, where the passes load element by element
           * instead of by vectors */
          exact_matches_cpu(&d, x, 0, n, dt, k, kind, cpu, got, cval, gval);
          if (n > 1 && q == 1)
            exact_matches_cpu(&d, x, 1, n - 1, dt, k, kind, cpu, got, cval, gval);
          /* Gaussian: the same selection as the CPU's */
          assert_int_equal(sc_topk_gaussian_indices(x, n, dt, k, cpu, &cnnz), SC_SUCCESS);
          gnnz = gaussian_on_device(&d, n, dt, k);
          assert_int_equal(gnnz, cnnz);
          to_host(got, d.idx, gnnz * 4);
          if (gnnz && memcmp(cpu, got, gnnz * 4))
            fail_msg("gaussian: dtype %d kind %d n %zu k %zu differs", (int)dt, kind, n, k);
          dev_topk_free(&d);
          free(cpu);
          free(got);
          free(cval);
          free(gval);
        }
      }
      free(x);
    }
  }
}

/* Distinct random indices into [0, n). */
static void distinct_indices(uint32_t *idx, size_t nnz, size_t n) {
  uint8_t *used = calloc(n, 1);
  for (size_t j = 0; j < nnz;) {
    uint32_t i = (uint32_t)(rng_next() % n);
    if (used[i]) continue;
    used[i] = 1;
    idx[j++] = i;
  }
  free(used);
}

static void test_sparse_and_error_feedback(void **state) {
  (void)state;
  rng_seed(13);
  const size_t n = 10007, nnz = 997;
  for (unsigned t = 0; t < 4; t++) {
    sc_dtype_t dt = float_dtypes[t];
    size_t es = sc_dtype_size(dt);
    uint8_t *x = malloc(n * es), *vals = malloc(nnz * es), *ref = malloc(n * es),
            *got = malloc(n * es), *grad = malloc(n * es);
    uint32_t *idx = malloc(nnz * 4);
    uint8_t *surv = malloc(nnz);
    fill_case(x, n, dt, 0);
    fill_case(grad, n, dt, 0);
    fill_case(vals, nnz, dt, 0);
    distinct_indices(idx, nnz, n);
    for (size_t j = 0; j < nnz; j++) surv[j] = (uint8_t)(rng_next() % 2);
    uint8_t *dx = dev_alloc(n * es), *dv = dev_alloc(nnz * es), *dg = dev_alloc(n * es);
    uint32_t *di = dev_alloc(nnz * 4);
    uint8_t *ds = dev_alloc(nnz);
    to_dev(dx, x, n * es);
    to_dev(di, idx, nnz * 4);
    to_dev(dg, grad, n * es);
    to_dev(ds, surv, nnz);
    /* gather */
    assert_int_equal(sc_cuda_sparse_gather(dv, dx, di, nnz, dt, NULL), SC_SUCCESS);
    sync_ok();
    to_host(got, dv, nnz * es);
    sc_topk_gather_values(x, dt, idx, nnz, ref);
    assert_memory_equal(ref, got, nnz * es);
    /* scatter with the average of 4 ranks into zeros */
    to_dev(dv, vals, nnz * es);
    assert_int_equal(sc_cuda_sparse_scatter(dx, n, di, dv, nnz, dt, 1, 4, NULL), SC_SUCCESS);
    sync_ok();
    to_host(got, dx, n * es);
    memset(ref, 0, n * es);
    for (size_t j = 0; j < nnz; j++) {
      memcpy(ref + idx[j] * es, vals + j * es, es);
      sc_avg_finalize(dt, ref + idx[j] * es, 1, 4);
    }
    expect_same(dt, SC_AVG, ref, got, n, ref, ref);
    /* residual += grad; clear the selected; put back the ones that did not survive */
    to_dev(dx, x, n * es);
    assert_int_equal(sc_cuda_ef_accumulate(dx, dg, n, dt, NULL), SC_SUCCESS);
    assert_int_equal(sc_cuda_ef_clear(dx, di, nnz, dt, NULL), SC_SUCCESS);
    assert_int_equal(sc_cuda_ef_restore(dx, di, dv, ds, nnz, dt, NULL), SC_SUCCESS);
    sync_ok();
    to_host(got, dx, n * es);
    sc_reduce_kernel(dt, SC_SUM, ref, x, grad, n);
    for (size_t j = 0; j < nnz; j++) {
      if (surv[j])
        memset(ref + idx[j] * es, 0, es);
      else
        memcpy(ref + idx[j] * es, vals + j * es, es);
    }
    expect_same(dt, SC_SUM, ref, got, n, x, grad);
    cudaFree(dx);
    cudaFree(dv);
    cudaFree(dg);
    cudaFree(di);
    cudaFree(ds);
    free(x);
    free(vals);
    free(ref);
    free(got);
    free(grad);
    free(idx);
    free(surv);
  }
}

int main(void) {
  if (!sc_cuda_available()) {
    printf("skipped: no CUDA device\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_preload_loads_every_kernel), cmocka_unit_test(test_reduce_against_cpu),
      cmocka_unit_test(test_reduce_bad_arguments),       cmocka_unit_test(test_topk_against_cpu),
      cmocka_unit_test(test_sparse_and_error_feedback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void) {
  printf("skipped: no CUDA device (built without CUDA)\n");
  return 77;
}
#endif
