/* SPDX-License-Identifier: BSD-3-Clause */
/* MSTopK selection (Shi et al., MLSys 2021): bisection of a magnitude
 * threshold between the mean and the largest finite magnitude, each round
 * counting the entries at or above it, no sort. The decisions are
 * kernels/topk_mstopk.h's; this file decides where the counts come from.
 *
 * Counting the whole vector in every round would read it SC_MSTOPK_ITERS
 * times. Instead a strided sample, bisected the same way, estimates a
 * threshold g with a few times k entries above it; the one pass over the
 * vector that sums the magnitudes for the mean also lists, in index order,
 * every entry at or above g (index and key). Every round whose threshold is
 * at or above g counts that list; a round below g has at least the list's
 * count above it, so when that exceeds k its decision needs no count at all.
 * The final selection scans the list when the band's lower end is at or
 * above g. Only when the sample misjudged (the list overflowed its capacity,
 * or holds k or fewer entries) do rounds count the vector. Either way the
 * counts, hence the answer, are those of counting the vector every round. */
#include <stdlib.h>

#include "kernels/cpu/topk.h"
#include "kernels/cpu/topk_mstopk_passes.h"
#include "lib/base/config.h"
#include "lib/base/error.h"

/* Sampled positions, at most. */
#define SC_MSTOPK_SAMPLE 16384
/* The sample's threshold aims at this many times k entries above it. */
#define SC_MSTOPK_MARGIN 2
/* Shorter vectors skip the sample and count the vector each round. */
#define SC_MSTOPK_LIST_MIN_N 65536

sc_result_t sc_mstopk_iters(int *iters) {
  long v;
  SC_CHECK(sc_config_long("SC_MSTOPK_ITERS", 1, SC_MSTOPK_MAX_ITERS, &v));
  *iters = (int)v;
  return SC_SUCCESS;
}

/* The bisection on the sample's keys: g, the sample's lower band end for
 * MARGIN * k scaled to the sample, or 0 (no list) when that target is not
 * well below the sample's size. */
static uint64_t sample_threshold(const sc_mstopk_ops_t *ops, sc_dtype_t dt, const void *x, size_t n,
                                 size_t k, int iters) {
  size_t cnt = n < SC_MSTOPK_SAMPLE ? n : SC_MSTOPK_SAMPLE;
  uint64_t *keys = malloc(cnt * sizeof(uint64_t));
  if (!keys) return 0; /* no list: every round counts the vector */
  size_t stride = n / cnt, m = 0, ninf = 0, nfin = 0;
  uint64_t inf = sc_mstopk_inf_key(dt), mx = 0;
  double sum = 0;
  for (size_t j = 0, i = stride / 2; j < cnt; j++, i += stride) {
    uint64_t key = ops->key_at(x, i);
    if (key > inf) continue;
    keys[m++] = key;
    if (key == inf) {
      ninf++;
    } else {
      nfin++;
      sum += sc_mstopk_key_value(dt, key);
      if (key > mx) mx = key;
    }
  }
  double want = (double)SC_MSTOPK_MARGIN * (double)k * (double)cnt / (double)n;
  if (nfin == 0 || want >= (double)m / 4) {
    free(keys);
    return 0;
  }
  size_t ks = want < 1 ? 1 : (size_t)want;
  sc_mstopk_t s;
  sc_mstopk_init(&s, dt, ks, m, ninf, sum / (double)nfin, sc_mstopk_key_value(dt, mx));
  for (int it = 0; it < iters && !sc_mstopk_done(&s); it++) {
    uint64_t key = sc_mstopk_key_ceil(dt, sc_mstopk_next(&s)), c;
    if (!sc_mstopk_implied(&s, key, &c)) {
      c = 0;
      for (size_t j = 0; j < m; j++) c += keys[j] >= key;
    }
    sc_mstopk_record(&s, key, c);
  }
  free(keys);
  return s.lo_key;
}

sc_result_t sc_topk_mstopk_run(const void *x, size_t n, sc_dtype_t dtype, size_t k, int iters,
                               int list, uint32_t *indices, size_t *nnz, sc_mstopk_t *out) {
  const sc_mstopk_ops_t *ops = sc_mstopk_ops(dtype);
  *nnz = 0;
  if (!ops) return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: dtype %d is not floating point", dtype);
  if (iters < 0) SC_CHECK(sc_mstopk_iters(&iters));
  sc_mstopk_t s;
  /* The state of k = 0 (nothing selected, the band holding everything). */
  sc_mstopk_init(&s, dtype, 0, 1, 0, 0, 0);
  if (out) *out = s;
  if (n == 0 || k == 0) return SC_SUCCESS;

  uint64_t g = 0;
  if (list > 0 || (list < 0 && n >= SC_MSTOPK_LIST_MIN_N))
    g = sample_threshold(ops, dtype, x, n, k, iters > 0 ? iters : 1);
  uint32_t *lidx = NULL;
  void *lkeys = NULL;
  size_t cap = 0;
  if (g > 0) {
    /* About MARGIN * k entries are expected; room for four times that, and
     * for a sample that saw only the largest of n / SC_MSTOPK_SAMPLE. */
    size_t want = 4 * SC_MSTOPK_MARGIN * (k < n ? k : n) + 4 * (n / SC_MSTOPK_SAMPLE) + 1024;
    cap = want < n ? want : n;
    lidx = malloc((cap + 1) * sizeof(uint32_t));
    lkeys = malloc((cap + 1) * ops->key_size);
    if (!lidx || !lkeys) {
      free(lidx);
      free(lkeys);
      return SC_ERR(SC_ERR_NOMEM, "sc_topk: cannot allocate MSTopK's list of %zu entries", cap);
    }
  }
  sc_mstopk_stats_t st;
  uint32_t scratch_idx[1];
  uint64_t scratch_key[1];
  ops->scan(x, n, g, g ? lidx : scratch_idx, g ? lkeys : (void *)scratch_key, cap, &st);
  uint64_t m = st.nfinite + st.ninf;
  double mean = st.nfinite ? st.sum / (double)st.nfinite : 0;
  sc_mstopk_init(&s, dtype, k, m, st.ninf, mean, sc_mstopk_key_value(dtype, st.max_key));
  /* The list is usable when complete; a round below g is then decided by
   * its count alone when that exceeds k. */
  int have = g > 0 && st.listed <= cap;
  for (int it = 0; it < iters && !sc_mstopk_done(&s); it++) {
    uint64_t key = sc_mstopk_key_ceil(dtype, sc_mstopk_next(&s)), c;
    if (!sc_mstopk_implied(&s, key, &c)) {
      if (have && key >= g)
        c = ops->count_list(lkeys, st.listed, key);
      else if (have && st.listed > s.k)
        c = st.listed;
      else
        c = ops->count(x, n, key);
    }
    sc_mstopk_record(&s, key, c);
  }
  if (have && s.lo_key >= g)
    *nnz = ops->select_list(lidx, lkeys, st.listed, &s, indices);
  else
    *nnz = ops->select(x, n, &s, indices);
  free(lidx);
  free(lkeys);
  if (out) *out = s;
  if (*nnz != s.k)
    return SC_ERR(SC_ERR_INTERNAL, "sc_topk: MSTopK selected %zu entries, want %llu", *nnz,
                  (unsigned long long)s.k);
  return SC_SUCCESS;
}

sc_result_t sc_topk_mstopk_indices(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                   uint32_t *indices, size_t *nnz) {
  return sc_topk_mstopk_run(x, n, dtype, k, -1, -1, indices, nnz, NULL);
}
