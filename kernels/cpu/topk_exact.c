/* SPDX-License-Identifier: BSD-3-Clause */
/* Exact top-k: a most-significant-digit radix select on the magnitude keys,
 * then one compaction pass in index order (which sorts the output and breaks
 * ties toward the lower index for free).
 *
 * Each level histograms the next digit of the keys that share the prefix found
 * so far and picks the bucket holding the r-th largest. As soon as the elements
 * at or above that bucket fit in the workspace (the caller's 2k indices, or a
 * small local array), one pass gathers them in index order and the remaining
 * levels and the final filter run on that short list only. On data like
 * gradients the first 16-bit digit already narrows the candidates to a few
 * thousand, so the whole selection is two streaming passes. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/topk.h"
#include "kernels/cpu/topk_keys.h"
#include "lib/base/error.h"

/* Wide digits for long vectors; short ones use 11-bit digits, whose
 * histogram lives on the stack and costs little to clear. */
#define SC_TOPK_WIDE_DIGIT   16
#define SC_TOPK_NARROW_DIGIT 11
#define SC_TOPK_WIDE_MIN_N   65536
/* Candidate slots used when the caller's 2k are fewer. */
#define SC_TOPK_LOCAL_CAND 2048

static sc_result_t exact_select(const sc_topk_ops_t *ops, const void *x, size_t n, size_t k,
                                uint32_t *indices, size_t *nnz) {
  if (k == 0 || n == 0) {
    *nnz = 0;
    return SC_SUCCESS;
  }
  if (k >= n) {
    /* Everything but NaN: key > 0, or magnitude bits == 0 without limit. */
    *nnz = ops->select(x, n, 0, n, indices);
    return SC_SUCCESS;
  }
  uint32_t hist_local[1u << SC_TOPK_NARROW_DIGIT];
  uint32_t cand_local[SC_TOPK_LOCAL_CAND];
  unsigned digit = SC_TOPK_NARROW_DIGIT;
  uint32_t *hist = hist_local;
  if (n >= SC_TOPK_WIDE_MIN_N) {
    digit = SC_TOPK_WIDE_DIGIT;
    hist = malloc(sizeof(uint32_t) << SC_TOPK_WIDE_DIGIT);
    if (!hist)
      return SC_ERR(SC_ERR_NOMEM, "sc_topk: cannot allocate the %zu-byte selection histogram",
                    sizeof(uint32_t) << SC_TOPK_WIDE_DIGIT);
  }
  uint32_t *ws = indices;
  size_t cap = k <= SIZE_MAX / 2 ? 2 * k : SIZE_MAX;
  if (cap < SC_TOPK_LOCAL_CAND) {
    ws = cand_local;
    cap = SC_TOPK_LOCAL_CAND;
  }

  /* Invariants: `above` elements have a key whose prefix exceeds `prefix`;
   * r more are to be taken among those whose prefix equals it, and at least r
   * such elements exist. */
  uint64_t prefix = 0;
  size_t r = k, above = 0, m = 0;
  int on_list = 0;
  unsigned s = ops->key_bits;
  sc_result_t res = SC_SUCCESS;
  while (s > 0) {
    unsigned w = s < digit ? s : digit;
    s -= w;
    memset(hist, 0, sizeof(uint32_t) << w);
    if (on_list)
      ops->hist_list(x, ws, m, s, w, prefix, hist);
    else
      ops->hist(x, n, s, w, prefix, hist);
    size_t cum = 0;
    int64_t b = ((int64_t)1 << w) - 1;
    while (b >= 0 && cum + hist[b] < r) cum += hist[b--];
    if (b < 0) {
      res = SC_ERR(SC_ERR_INTERNAL, "sc_topk: radix select lost its count (%zu short)", r - cum);
      goto out;
    }
    r -= cum;
    above += cum;
    prefix = (prefix << w) | (uint64_t)b;
    if (!on_list && above + hist[b] <= cap) {
      m = ops->gather(x, n, s, prefix, ws);
      on_list = 1;
    }
  }
  /* prefix is now the k-th largest key; r of its ties are taken. */
  if (on_list)
    *nnz = ops->filter(x, ws, m, prefix, r, indices);
  else
    *nnz = ops->select(x, n, prefix, r, indices);
out:
  if (hist != hist_local) free(hist);
  return res;
}

sc_result_t sc_topk_exact_indices(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                  uint32_t *indices, size_t *nnz) {
  const sc_topk_ops_t *ops = sc_topk_ops(dtype);
  *nnz = 0;
  if (!ops) return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: dtype %d is not floating point", dtype);
  return exact_select(ops, x, n, k, indices, nnz);
}

void sc_topk_gather_values(const void *x, sc_dtype_t dtype, const uint32_t *indices, size_t nnz,
                           void *values) {
  switch (sc_dtype_size(dtype)) {
  case 2:
    for (size_t j = 0; j < nnz; j++)
      memcpy((char *)values + 2 * j, (const char *)x + 2 * (size_t)indices[j], 2);
    break;
  case 4:
    for (size_t j = 0; j < nnz; j++)
      memcpy((char *)values + 4 * j, (const char *)x + 4 * (size_t)indices[j], 4);
    break;
  case 8:
    for (size_t j = 0; j < nnz; j++)
      memcpy((char *)values + 8 * j, (const char *)x + 8 * (size_t)indices[j], 8);
    break;
  default:
    break;
  }
}

sc_result_t sc_topk_kernel(const void *x, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                           uint32_t *indices, void *values, size_t *nnz) {
  sc_result_t res =
      method == SC_SELECT_GAUSSIAN ? sc_topk_gaussian_indices(x, n, dtype, k, indices, nnz)
      : method == SC_SELECT_MSTOPK ? sc_topk_mstopk_indices(x, n, dtype, k, indices, nnz)
                                   : sc_topk_exact_indices(x, n, dtype, k, indices, nnz);
  if (res != SC_SUCCESS) {
    *nnz = 0;
    return res;
  }
  sc_topk_gather_values(x, dtype, indices, *nnz, values);
  return SC_SUCCESS;
}
