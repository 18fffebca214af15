/* SPDX-License-Identifier: BSD-3-Clause */
/* The host map of the hierarchical generators (algorithms/hier_map.h). */
#include <stdlib.h>

#include "algorithms/hier_map.h"
#include "lib/base/error.h"

sc_result_t sc_hier_map_init(const sc_coll_args_t *a, sc_hier_map_t *h) {
  const int p = a->nranks;
  int nh = 0;
  h->start = h->ranks = NULL;
  for (int r = 0; r < p; r++) {
    int x = a->host_of ? a->host_of[r] : 0;
    if (x < 0 || x > nh)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "hier: rank %d is on host %d, but hosts must be numbered 0.. in the order "
                    "of their lowest rank (next new host: %d)",
                    r, x, nh);
    if (x == nh) nh++;
  }
  h->nhosts = nh;
  h->start = calloc((size_t)nh + 1, sizeof(int));
  h->ranks = malloc((size_t)p * sizeof(int));
  if (!h->start || !h->ranks) return SC_ERR(SC_ERR_NOMEM, "hier: host map of %d ranks", p);
  for (int r = 0; r < p; r++) h->start[(a->host_of ? a->host_of[r] : 0) + 1]++;
  h->smax = 0;
  for (int x = 0; x < nh; x++) {
    if (h->start[x + 1] > h->smax) h->smax = h->start[x + 1];
    h->start[x + 1] += h->start[x];
  }
  int *fill = calloc((size_t)nh, sizeof(int));
  if (!fill) return SC_ERR(SC_ERR_NOMEM, "hier: host map of %d hosts", nh);
  for (int r = 0; r < p; r++) {
    int x = a->host_of ? a->host_of[r] : 0;
    if (r == a->rank) {
      h->host = x;
      h->me = fill[x];
    }
    h->ranks[h->start[x] + fill[x]++] = r;
  }
  free(fill);
  h->lsz = sc_hier_size(h, h->host);
  return SC_SUCCESS;
}

void sc_hier_map_free(sc_hier_map_t *h) {
  free(h->start);
  free(h->ranks);
  h->start = h->ranks = NULL;
}

int sc_hier_useful(const sc_coll_args_t *a) {
  if (!a->host_of || a->nranks < 3) return 0;
  int nh = 0, several = 0;
  for (int r = 0; r < a->nranks; r++) {
    if (a->host_of[r] >= nh) nh = a->host_of[r] + 1;
    if (r > 0 && a->host_of[r] == a->host_of[r - 1]) several = 1;
  }
  if (nh < 2) return 0;
  if (several) return 1;
  /* Ranks of one host need not be consecutive. */
  for (int r = 0; r < a->nranks; r++)
    for (int q = r + 1; q < a->nranks; q++)
      if (a->host_of[q] == a->host_of[r]) return 1;
  return 0;
}
