/* SPDX-License-Identifier: BSD-3-Clause */
/* Top-k selection by magnitude on the CPU (docs/ALGORITHMS.md, "Top-k
 * selection"). The kernels work on the magnitude bits of the floats: with the
 * sign bit cleared, the bit pattern of an IEEE value orders like |v| (NaN
 * patterns lie above infinity and are mapped to key 0, then never selected).
 * Callers (lib/sparse/topk.c) validate the arguments; see sc_topk in sparsecoll.h for
 * the contract. */
#ifndef SC_KERNELS_CPU_TOPK_H
#define SC_KERNELS_CPU_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/topk_mstopk.h"
#include "sparsecoll.h"

/* dtype is FLOAT16, BFLOAT16, FLOAT32 or FLOAT64; n <= UINT32_MAX;
 * indices and values hold 2*min(k, n) entries (they double as workspace).
 * Fails only with SC_ERR_NOMEM (a fixed 256 KiB histogram for large n). */
sc_result_t sc_topk_kernel(const void *x, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                           uint32_t *indices, void *values, size_t *nnz);

/* The same selections writing indices only (sorted, at most 2*min(k, n)). */
sc_result_t sc_topk_exact_indices(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                  uint32_t *indices, size_t *nnz);
sc_result_t sc_topk_gaussian_indices(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                     uint32_t *indices, size_t *nnz);
sc_result_t sc_topk_mstopk_indices(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                   uint32_t *indices, size_t *nnz);
/* MSTopK with its knobs: iters rounds (< 0: SC_MSTOPK_ITERS); list 1: always
 * sample and list, 0: count the vector every round, -1: by size. Writes
 * exactly min(k, m) indices (m: non-NaN entries), and the final bisection
 * state to *state when not NULL (the band is lo_key <= key < hi_key; every
 * entry with key >= hi_key is selected). The answer does not depend on
 * `list`. */
sc_result_t sc_topk_mstopk_run(const void *x, size_t n, sc_dtype_t dtype, size_t k, int iters,
                               int list, uint32_t *indices, size_t *nnz, sc_mstopk_t *state);
/* SC_MSTOPK_ITERS, validated (1..SC_MSTOPK_MAX_ITERS). */
sc_result_t sc_mstopk_iters(int *iters);

/* |x[i]| as a double, decoded from the dtype (a NaN stays NaN). */
double sc_topk_magnitude(const void *x, sc_dtype_t dtype, size_t i);

/* values[j] = x[indices[j]] for j < nnz. */
void sc_topk_gather_values(const void *x, sc_dtype_t dtype, const uint32_t *indices, size_t nnz,
                           void *values);

#endif
