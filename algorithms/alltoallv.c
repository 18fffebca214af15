/* SPDX-License-Identifier: BSD-3-Clause */
/* Pairwise all-to-all with a count per pair: step k (1 <= k < P) sends
 * sendcounts[r+k] elements at sdispls[r+k] to rank r+k and receives
 * recvcounts[r-k] elements at rdispls[r-k] from rank r-k (mod P). Every
 * send is posted before the first receive, as in the uniform pairwise
 * exchange (alltoall.c): no step's sends wait for the previous step's
 * receive, and the whole exchange costs one latency, not P - 1.
 *
 * Each block is one message, even an empty one, never cut into chunks: the
 * sender knows only its sendcounts and the receiver only its recvcounts, so
 * a user whose counts disagree must meet a receive whose length differs from
 * the message (which the executor reports as SC_ERR_MISMATCH), not pieces
 * that happen to match and a remainder nobody receives. Always out of place
 * (the API refuses overlapping buffers).
 *
 * The sparse form sends no empty block: with routing as an MoE layer's, most
 * pairs of a large job carry nothing, and an empty message per pair is P - 1
 * messages and connections per rank. Disagreeing counts are then found
 * before any data moves, by a count check of one all-reduce
 * (lib/core/fingerprint.c), not by a receive. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

size_t sc_v_at(const size_t *displs, const size_t *counts, int i) {
  return counts[i] ? displs[i] : 0;
}

sc_result_t sc_alltoallv_self_check(const sc_coll_args_t *a) {
  const int r = a->rank;
  if (a->sendcounts[r] == a->recvcounts[r]) return SC_SUCCESS;
  return SC_ERR(SC_ERR_MISMATCH,
                "alltoallv: rank %d sends itself %zu elements but expects %zu from itself", r,
                a->sendcounts[r], a->recvcounts[r]);
}

/* skip_empty: leave out the empty blocks (sc_sparse_alltoallv_schedule). */
static sc_result_t pairwise_v(const sc_coll_args_t *a, sc_sched_t *s, int skip_empty) {
  SC_CHECK(sc_coll_args_check(a));
  SC_CHECK(sc_alltoallv_self_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t *sc = a->sendcounts, *rc = a->recvcounts;
  for (int k = 1; k < p; k++) {
    const int to = (r + k) % p;
    if (sc[to] || !skip_empty)
      sc_sched_send(s, to, SC_BUF_SEND, sc_v_at(a->sdispls, sc, to), sc[to]);
  }
  /* After the sends, so that the wire starts before the local copy. */
  if (rc[r]) sc_sched_copy(s, SC_BUF_RECV, a->rdispls[r], SC_BUF_SEND, a->sdispls[r], rc[r]);
  for (int k = 1; k < p; k++) {
    const int from = (r - k + p) % p;
    if (rc[from] || !skip_empty)
      sc_sched_recv(s, from, SC_BUF_RECV, sc_v_at(a->rdispls, rc, from), rc[from]);
  }
  return s->status;
}

sc_result_t sc_pairwise_alltoallv_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  return pairwise_v(a, s, 0);
}

sc_result_t sc_sparse_alltoallv_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  return pairwise_v(a, s, 1);
}
