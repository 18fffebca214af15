/* SPDX-License-Identifier: BSD-3-Clause */
/* Per-dtype streaming passes over magnitude keys, shared by the exact and the
 * Gaussian selectors. key(v) = bits(v) with the sign cleared, except NaN whose
 * key is 0 (so that it counts as the smallest magnitude and a filter that also
 * compares the raw magnitude bits can leave it out). */
#ifndef SC_KERNELS_CPU_TOPK_KEYS_H
#define SC_KERNELS_CPU_TOPK_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

typedef struct sc_topk_ops {
  unsigned key_bits; /* 15, 31 or 63: keys are below 2^key_bits */
  uint64_t inf_key;  /* key of infinity, the largest non-NaN key */
  /* hist[(key >> s) & (2^w - 1)]++ for every element whose key >> (s + w)
   * equals prefix (every element when s + w == key_bits). */
  void (*hist)(const void *x, size_t n, unsigned s, unsigned w, uint64_t prefix, uint32_t *hist);
  /* The same over the elements x[list[j]], j < m. */
  void (*hist_list)(const void *x, const uint32_t *list, size_t m, unsigned s, unsigned w,
                    uint64_t prefix, uint32_t *hist);
  /* Writes, in index order, every i with key >> s >= min_prefix; returns the count. */
  size_t (*gather)(const void *x, size_t n, unsigned s, uint64_t min_prefix, uint32_t *out);
  /* Writes, in index order, every i with key > t and the first `ties` i whose
   * magnitude bits equal t (NaN never: its magnitude bits exceed inf_key). */
  size_t (*select)(const void *x, size_t n, uint64_t t, size_t ties, uint32_t *out);
  /* The same over x[list[j]] (list in index order); out may alias list. */
  size_t (*filter)(const void *x, const uint32_t *list, size_t m, uint64_t t, size_t ties,
                   uint32_t *out);
  /* Number of elements with key > t; their indices (in index order) are
   * written to out only if that number is <= cap (cap 0: just count). */
  size_t (*collect)(const void *x, size_t n, uint64_t t, uint32_t *out, size_t cap);
  /* |v| of the non-negative pattern key <= inf_key. */
  double (*key_value)(uint64_t key);
} sc_topk_ops_t;

/* NULL for a dtype that is not floating point. */
const sc_topk_ops_t *sc_topk_ops(sc_dtype_t dtype);

#endif
