/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_place_factors: which rank does the per-factor work (K-FAC's inversions)
 * of each of n factors, by the cost d^3 of a d x d factor. LPT sorts the
 * factors largest first (equal costs by index) and gives each to the least
 * loaded rank (equal loads: the lowest rank), within 4/3 of the best
 * assignment (Graham). BLOCK gives each rank a contiguous run of the factors
 * in index order, the runs chosen so that the largest load is the least
 * possible: a binary search on that load, each candidate tested by filling
 * ranks greedily, which is exact for contiguous runs. Costs saturate at
 * UINT64_MAX rather than wrap. Pure: every rank computes the same owners. */
#include <stdint.h>
#include <stdlib.h>

#include "lib/base/error.h"
#include "sparsecoll.h"

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t cube(size_t d) {
  uint64_t x = (uint64_t)d;
  if (x != 0 && x > UINT64_MAX / x) return UINT64_MAX;
  uint64_t sq = x * x;
  if (x != 0 && sq > UINT64_MAX / x) return UINT64_MAX;
  return sq * x;
}

typedef struct factor {
  uint64_t cost;
  int index;
} factor_t;

static int by_cost_desc(const void *a, const void *b) {
  const factor_t *x = a, *y = b;
  if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
  return x->index - y->index;
}

static void place_lpt(factor_t *f, int m, int nranks, uint64_t *load, int *owner) {
  qsort(f, (size_t)m, sizeof(*f), by_cost_desc);
  for (int i = 0; i < m; i++) {
    int best = 0;
    for (int r = 1; r < nranks; r++)
      if (load[r] < load[best]) best = r;
    load[best] = sat_add(load[best], f[i].cost);
    owner[f[i].index] = best;
  }
}

/* Fills ranks in index order with runs of at most `limit` each (a factor
 * over it alone in its run); owner[] set when not NULL. Returns the runs. */
static int fill_runs(const factor_t *f, int m, uint64_t limit, int *owner) {
  int runs = m ? 1 : 0;
  uint64_t cur = 0;
  for (int i = 0; i < m; i++) {
    if (cur && sat_add(cur, f[i].cost) > limit) {
      runs++;
      cur = 0;
    }
    cur = sat_add(cur, f[i].cost);
    if (owner) owner[f[i].index] = runs - 1;
  }
  return runs;
}

static void place_block(const factor_t *f, int m, int nranks, int *owner) {
  uint64_t lo = 0, hi = 0;
  for (int i = 0; i < m; i++) {
    if (f[i].cost > lo) lo = f[i].cost;
    hi = sat_add(hi, f[i].cost);
  }
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (fill_runs(f, m, mid, NULL) <= nranks)
      hi = mid;
    else
      lo = mid + 1;
  }
  fill_runs(f, m, lo, owner);
}

sc_result_t sc_place_factors(const size_t *dims, int n, int nranks, sc_place_t how,
                             size_t local_below, int *owner) {
  const char *fn = "sc_place_factors";
  if (n < 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: n is %d", fn, n);
  if (nranks < 1) return SC_ERR(SC_ERR_INVALID_ARG, "%s: nranks is %d", fn, nranks);
  if (how != SC_PLACE_LPT && how != SC_PLACE_BLOCK)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid placement %d", fn, (int)how);
  if (n == 0) return SC_SUCCESS;
  if (!dims || !owner)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with n = %d", fn, !dims ? "dims" : "owner",
                  n);
  factor_t *f = malloc((size_t)n * sizeof(*f));
  uint64_t *load = calloc((size_t)nranks, sizeof(*load));
  if (!f || !load) {
    free(f);
    free(load);
    return SC_ERR(SC_ERR_NOMEM, "%s: %d factors on %d ranks", fn, n, nranks);
  }
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (dims[i] < local_below) {
      owner[i] = -1; /* every rank computes it: nothing travels */
      continue;
    }
    f[m++] = (factor_t){cube(dims[i]), i};
  }
  if (how == SC_PLACE_LPT)
    place_lpt(f, m, nranks, load, owner);
  else
    place_block(f, m, nranks, owner);
  free(f);
  free(load);
  return SC_SUCCESS;
}
