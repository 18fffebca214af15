/* SPDX-License-Identifier: BSD-3-Clause */
/* The host map the hierarchical generators share (allreduce_hier.c,
 * reduce_scatter_hier.c, allgather_hier.c): ranks grouped by host, and the
 * rails that join one rank of each host. Private to algorithms/.
 *
 * S (smax) is the largest number of ranks on one host. Rail s (0 <= s < S)
 * has one member per host: on host x of L_x ranks, local rank s mod L_x. On
 * an even job rail s is "local rank s everywhere"; on an uneven one a rank of
 * a smaller host sits on several rails (s = l, l + L_x, ...), so that every
 * rail still reaches every host. */
#ifndef SC_ALGORITHMS_HIER_MAP_H
#define SC_ALGORITHMS_HIER_MAP_H

#include "algorithms/algorithms.h"

typedef struct sc_hier_map {
  int nhosts, smax;  /* hosts, rails (the largest host's rank count) */
  int host, me, lsz; /* this rank's host, local rank, host size */
  int *start;        /* [nhosts + 1]: host h's ranks are ranks[start[h]..start[h+1]) */
  int *ranks;        /* [nranks] grouped by host, ascending inside a host */
} sc_hier_map_t;

/* Validates a->host_of (hosts numbered 0.. in the order of their lowest
 * rank; NULL: one host) and groups the ranks. SC_ERR_INVALID_ARG on a bad
 * map. Free with sc_hier_map_free, also after a failure. */
sc_result_t sc_hier_map_init(const sc_coll_args_t *a, sc_hier_map_t *h);
void sc_hier_map_free(sc_hier_map_t *h);

static inline int sc_hier_size(const sc_hier_map_t *h, int host) {
  return h->start[host + 1] - h->start[host];
}

static inline int sc_hier_member(const sc_hier_map_t *h, int host, int local) {
  return h->ranks[h->start[host] + local];
}

/* Rail s's member on host `host`. */
static inline int sc_hier_owner(const sc_hier_map_t *h, int host, int s) {
  return sc_hier_member(h, host, s % sc_hier_size(h, host));
}

/* The reduce-scatter and all-gather give each rank's block to one rail: the
 * rail of its local rank, of which it is the member on its own host. Rail s
 * thus serves, for each host y with more than s ranks, the block of y's
 * local rank s: that rank, or -1 when host y has no local rank s. */
static inline int sc_hier_rail_rank(const sc_hier_map_t *h, int s, int y) {
  return s < sc_hier_size(h, y) ? sc_hier_member(h, y, s) : -1;
}

/* How many slices a vector of `units` elements per pipeline stage is cut
 * into: each slice gets at least min_chunks chunks of it (fewer slices for
 * small vectors: latency counts more than overlap there), at most
 * max_slices. */
static inline int sc_hier_slices(size_t units, size_t chunk, int min_chunks, int max_slices) {
  size_t k = units / ((size_t)min_chunks * chunk);
  if (k < 1) k = 1;
  return k > (size_t)max_slices ? max_slices : (int)k;
}

#endif
