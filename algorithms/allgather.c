/* SPDX-License-Identifier: BSD-3-Clause */
/* Ring all-gather: at hop h (0..P-2) rank r sends block (r - h) mod P to its
 * right neighbour and receives block (r - h - 1) mod P from its left one,
 * forwarding each chunk as soon as it arrives (pipelining and FIFO order as
 * in allreduce_ring.c).
 *
 * Hop 0 sends straight from SEND, so the transfer starts before the local
 * copy into RECV block r. In place with SEND == RECV + r*count that copy is
 * skipped (same address); with SEND == RECV, rank r != 0 moves its input out
 * of block 0 into block r, and block 0 is received only later, after the
 * executor has finished the hop-0 send that reads it. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

sc_result_t sc_ring_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count, chunk = a->chunk_elems;
  if (n == 0) return s->status;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const int hops = p - 1;

  if (p > 1) sc_send_chunks(s, right, SC_BUF_SEND, 0, n, chunk);
  sc_sched_copy(s, SC_BUF_RECV, (size_t)r * n, SC_BUF_SEND, 0, n);

  for (int h = 0; h < hops; h++) {
    const size_t in = (size_t)sc_ring_block(r, h + 1, p) * n;
    for (size_t c = 0; c < n; c += chunk) {
      size_t m = n - c < chunk ? n - c : chunk;
      sc_sched_recv(s, left, SC_BUF_RECV, in + c, m);
      if (h + 1 < hops) sc_sched_send(s, right, SC_BUF_RECV, in + c, m);
    }
  }
  return s->status;
}
