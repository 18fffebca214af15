/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-dtype streaming passes of the MSTopK selector
 * (kernels/cpu/topk_mstopk.c). Keys are the magnitude bits (sign cleared);
 * a key above inf_key is NaN and never counted or selected. */
#ifndef SC_KERNELS_CPU_TOPK_MSTOPK_PASSES_H
#define SC_KERNELS_CPU_TOPK_MSTOPK_PASSES_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/topk_mstopk.h"
#include "sparsecoll.h"

/* What the first pass learns about the whole vector. */
typedef struct sc_mstopk_stats {
  double sum;       /* of the finite magnitudes */
  uint64_t nfinite; /* finite entries */
  uint64_t ninf;    /* infinite entries */
  uint64_t max_key; /* largest finite key */
  size_t listed;    /* entries with g <= key <= inf_key (written while <= cap) */
} sc_mstopk_stats_t;

typedef struct sc_mstopk_ops {
  size_t key_size; /* bytes of one key in a list: 2, 4 or 8 */
  /* The statistics, and (g > 0) the indices and keys of every non-NaN entry
   * with key >= g, in index order, while they fit cap (idx and keys hold
   * cap + 1 entries, slot cap as scratch, also with g == 0). */
  void (*scan)(const void *x, size_t n, uint64_t g, uint32_t *idx, void *keys, size_t cap,
               sc_mstopk_stats_t *st);
  /* Non-NaN entries with key >= t, over the vector or over a list's keys
   * (a list holds no NaN). */
  size_t (*count)(const void *x, size_t n, uint64_t t);
  size_t (*count_list)(const void *keys, size_t m, uint64_t t);
  /* The selection (sc_mstopk_take, index order) over the vector or a list. */
  size_t (*select)(const void *x, size_t n, const sc_mstopk_t *s, uint32_t *out);
  size_t (*select_list)(const uint32_t *idx, const void *keys, size_t m, const sc_mstopk_t *s,
                        uint32_t *out);
  /* The key of x[i] (above inf_key for NaN). */
  uint64_t (*key_at)(const void *x, size_t i);
} sc_mstopk_ops_t;

/* NULL for a dtype that is not floating point. */
const sc_mstopk_ops_t *sc_mstopk_ops(sc_dtype_t dtype);

#endif
