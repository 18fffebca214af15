/* SPDX-License-Identifier: BSD-3-Clause */
/* HiTopKComm's planning (algorithms/hitopk_plan.h). */
#include "algorithms/hitopk_plan.h"

void sc_hitopk_plan(size_t n, size_t k, int local_size, int local_rank, sc_hitopk_plan_t *p) {
  const size_t L = local_size > 0 ? (size_t)local_size : 1, l = (size_t)local_rank;
  p->shard = (n + L - 1) / L;
  p->off = l * p->shard < n ? l * p->shard : n;
  p->len = n - p->off < p->shard ? n - p->off : p->shard;
  if (k > n) k = n;
  p->kl_max = (k + L - 1) / L; /* ceil: at least 1 when k > 0 */
  if (p->kl_max > p->shard) p->kl_max = p->shard;
  p->kl = p->kl_max < p->len ? p->kl_max : p->len;
}

int sc_hitopk_layout_ok(const int *host_of, int nranks, int nhosts, int *local_size) {
  *local_size = 0;
  if (!host_of || nhosts < 1 || nranks % nhosts) return 0;
  const int L = nranks / nhosts;
  for (int h = 0; h < nhosts; h++) {
    int c = 0;
    for (int r = 0; r < nranks; r++) c += host_of[r] == h;
    if (c != L) return 0;
  }
  *local_size = L;
  return 1;
}
