/* SPDX-License-Identifier: BSD-3-Clause */
/* Broadcast: pipelined chain for large messages, binomial tree for small.
 * Ranks are renumbered relative to the root (v = (rank - root) mod P) so the
 * root is always v = 0. Non-roots never touch SEND (it may be NULL there). */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

/* Chain root -> root+1 -> ... : each rank forwards a chunk as soon as it has
 * arrived, so after the fill every link carries a chunk at the same time.
 * The root's own copy comes after its sends so it does not delay them. */
sc_result_t sc_chain_broadcast_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, v = sc_root_rel_rank(a);
  const size_t n = a->count, chunk = a->chunk_elems;
  if (n == 0) return s->status;
  const int next = v + 1 < p ? sc_root_abs_rank(a, v + 1) : -1;
  if (v == 0) {
    if (next >= 0) sc_send_chunks(s, next, SC_BUF_SEND, 0, n, chunk);
    sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, 0, n);
    return s->status;
  }
  const int prev = sc_root_abs_rank(a, v - 1);
  for (size_t c = 0; c < n; c += chunk) {
    size_t m = n - c < chunk ? n - c : chunk;
    sc_sched_recv(s, prev, SC_BUF_RECV, c, m);
    if (next >= 0) sc_sched_send(s, next, SC_BUF_RECV, c, m);
  }
  return s->status;
}

/* Binomial tree: v receives from v minus its lowest set bit, then sends to
 * v + 2^k for every 2^k below that bit, largest subtree first so the deepest
 * branch starts earliest. */
sc_result_t sc_binomial_broadcast_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, v = sc_root_rel_rank(a);
  const size_t n = a->count;
  if (n == 0) return s->status;
  sc_buf_t from = SC_BUF_RECV;
  int mask = 1;
  while (mask < p) {
    if (v & mask) {
      sc_sched_recv(s, sc_root_abs_rank(a, v - mask), SC_BUF_RECV, 0, n);
      break;
    }
    mask <<= 1;
  }
  if (v == 0) from = SC_BUF_SEND;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p) sc_sched_send(s, sc_root_abs_rank(a, v + mask), from, 0, n);
  if (v == 0) sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, 0, n);
  return s->status;
}
