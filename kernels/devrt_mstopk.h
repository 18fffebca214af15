/* SPDX-License-Identifier: BSD-3-Clause */
/* MSTopK's device-side loop (kernels/devrt_mstopk.c) over a table of
 * primitives: CUDA's in the library, plain host functions in the unit test
 * (test/unit/test_mstopk.c), which so runs the loop a GPU runs. */
#ifndef SC_KERNELS_DEVRT_MSTOPK_H
#define SC_KERNELS_DEVRT_MSTOPK_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

typedef struct sc_mstopk_prims {
  /* Sum of the finite magnitudes, their number, the infinities', the
   * largest finite key. */
  sc_result_t (*stats)(const void *x, size_t n, sc_dtype_t dtype, double *sum, uint64_t *nfinite,
                       uint64_t *ninf, uint64_t *max_key, void *ctx);
  /* *count = non-NaN entries with key > t; their indices, in index order,
   * to idx when *count <= cap (cap 0: a count only). */
  sc_result_t (*above)(const void *x, size_t n, sc_dtype_t dtype, uint64_t t, uint32_t *idx,
                       size_t cap, size_t *count, void *ctx);
  /* values[j] = x[idx[j]], j < nnz (device memory). */
  sc_result_t (*gather)(void *values, const void *x, const uint32_t *idx, size_t nnz,
                        sc_dtype_t dtype, void *ctx);
  /* bytes between host and device memory, then every queued step done
   * (bytes 0: a wait only). */
  sc_result_t (*copy)(void *dst, const void *src, size_t bytes, void *ctx);
  /* The exact selection (k >= the non-NaN entries: all of them). */
  sc_result_t (*exact)(const void *x, size_t n, sc_dtype_t dtype, size_t k, uint32_t *idx,
                       void *values, size_t *nnz, void *ctx);
  void *ctx;
} sc_mstopk_prims_t;

/* sc_dev_topk's MSTopK (0 < k, 0 < n) with iters rounds: indices (room for
 * 2 min(k, n)) and values (may be NULL) in device memory, *nnz on the host. */
sc_result_t sc_mstopk_drive(const sc_mstopk_prims_t *p, const void *x, size_t n, sc_dtype_t dtype,
                            size_t k, int iters, uint32_t *indices, void *values, size_t *nnz);

#endif
