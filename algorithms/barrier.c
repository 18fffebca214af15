/* SPDX-License-Identifier: BSD-3-Clause */
/* Dissemination barrier: in round i every rank signals rank + 2^i and waits
 * for rank - 2^i. After ceil(log2 P) rounds every rank has transitively heard
 * from every other, so none leaves before all have arrived. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

sc_result_t sc_dissemination_barrier_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  for (int dist = 1; dist < p; dist <<= 1) {
    sc_sched_send(s, (r + dist) % p, SC_BUF_SEND, 0, 0);
    sc_sched_recv(s, (r - dist + p) % p, SC_BUF_RECV, 0, 0);
  }
  return s->status;
}
