/* SPDX-License-Identifier: BSD-3-Clause */
/* TopK-SGD's sparse all-reduce: every rank's set travels the ring (P - 1
 * hops, each message its count first, so the receiver bounds it by k before
 * the payload), then every rank sums all P sets by index in rank order: the
 * exact sum, the same bits everywhere. Set 2 + j holds rank j's set. */
#include "algorithms/sparse.h"

#include "lib/base/error.h"

sc_result_t sc_sparse_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t k = a->count;
  if (p == 1) {
    sc_sched_sparse_sum(s, 1, 0, 1);
    return s->status;
  }
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  sc_sched_sparse_sets(s, (size_t)p, k);
  sc_sched_sparse_send(s, right, 0, 0);
  sc_sched_sparse_sum(s, 2 + (size_t)r, 0, 1);
  for (int h = 0; h < p - 1; h++) {
    const size_t j = 2 + (size_t)((r - h - 1 + p) % p);
    sc_sched_sparse_recv(s, left, j, k, 0);
    if (h + 1 < p - 1) sc_sched_sparse_send(s, right, j, 0);
  }
  sc_sched_sparse_sum(s, 1, 2, (size_t)p);
  return s->status;
}
