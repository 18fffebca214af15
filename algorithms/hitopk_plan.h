/* SPDX-License-Identifier: BSD-3-Clause */
/* HiTopKComm's planning (lib/sparse/hitopk.c runs it; lib/core/select.c
 * prices it): pure arithmetic on n, k and the host layout. */
#ifndef SC_ALGORITHMS_HITOPK_PLAN_H
#define SC_ALGORITHMS_HITOPK_PLAN_H

#include <stddef.h>

/* The split of one step over H hosts of L ranks each, pure arithmetic.
 * shard: ceil(n / L) elements (the last shards may be shorter or empty);
 * kl: entries each rank selects from its shard, ceil(k / L) (at least 1
 * when k > 0), at most its shard's length. */
typedef struct sc_hitopk_plan {
  size_t shard;    /* elements per shard, the padded reduce-scatter block */
  size_t off, len; /* this rank's shard: [off, off + len) of the gradient */
  size_t kl;       /* entries this rank selects (<= len) */
  size_t kl_max;   /* the bound every rank checks a peer's set against */
} sc_hitopk_plan_t;

void sc_hitopk_plan(size_t n, size_t k, int local_size, int local_rank, sc_hitopk_plan_t *p);

/* 1 when every host holds the same number of ranks (host_of: nranks
 * entries, hosts numbered 0..nhosts-1); *local_size gets that number. */
int sc_hitopk_layout_ok(const int *host_of, int nranks, int nhosts, int *local_size);

#endif
