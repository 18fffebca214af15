/* SPDX-License-Identifier: BSD-3-Clause */
/* Sparse-set kernels: the gTop-k Merge(A, B) and the exact sum by index of
 * several sets (docs/ALGORITHMS.md, "Sparse all-reduce"). A set is
 * (uint32 indices sorted ascending and unique, values of one float dtype).
 * Pure and deterministic: the same inputs give the same bits everywhere.
 * Callers have validated dtype (float32/float64/float16/bfloat16). */
#ifndef SC_KERNELS_CPU_SPARSE_MERGE_H
#define SC_KERNELS_CPU_SPARSE_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

typedef struct sc_spview {
  const uint32_t *idx;
  const void *val;
  size_t n;
} sc_spview_t;

/* Work space of a merge whose inputs hold at most cap entries together. */
typedef struct sc_merge_work {
  uint32_t *idx;
  void *val;     /* cap values */
  uint64_t *key; /* magnitude keys in union order */
  uint8_t *src;  /* 1: from A, 2: from B, 3: both */
  size_t cap;
} sc_merge_work_t;

/* True for the dtypes the sparse collectives carry. */
int sc_sparse_dtype_ok(sc_dtype_t dtype);

/* Merge(A, B): union of supports, an index in both gets A + B (fp16/bf16
 * summed in float32 and rounded to nearest even), then the k entries of
 * largest |value| (ties toward the lower index; NaN counts as largest), output
 * sorted by index into out_idx/out_val (room for min(k, a.n + b.n)). surv_a /
 * surv_b (may be NULL) get 1 for each entry of A / B whose index is in the
 * output, else 0. work->cap must be >= a.n + b.n. Returns the output count.
 * The output must not alias the inputs. */
size_t sc_sparse_merge(sc_dtype_t dtype, size_t k, sc_spview_t a, sc_spview_t b, uint32_t *out_idx,
                       void *out_val, uint8_t *surv_a, uint8_t *surv_b, sc_merge_work_t *work);

/* The exact sum by index of sets[0..nsets) in that order: for every index
 * the values of the sets holding it are added left to right (float32 and
 * fp16/bf16 in a float32 accumulator, fp16/bf16 rounded once at the end;
 * float64 in double). acc_idx/acc_val: two work areas of total entries each
 * (total = sum of the counts), acc_val of total * 8 bytes. out has room for
 * total entries. Returns the output count. */
size_t sc_sparse_sum(sc_dtype_t dtype, const sc_spview_t *sets, size_t nsets, uint32_t *out_idx,
                     void *out_val, uint32_t *acc_idx[2], void *acc_val[2]);

/* Value i of a set as a double (for checks and references). */
double sc_sparse_value(sc_dtype_t dtype, const void *val, size_t i);

#endif
