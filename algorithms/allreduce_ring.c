/* SPDX-License-Identifier: BSD-3-Clause */
/* Ring all-reduce: a reduce-scatter ring followed by an all-gather ring, over
 * nranks blocks, each block cut into chunks.
 *
 * Both rings are one sequence of 2(P-1) hops: at hop h rank r sends block
 * (r - h) mod P to its right neighbour and receives block (r - h - 1) mod P
 * from its left one. The first P-1 hops reduce what they receive; after them
 * rank r holds block r+1 complete, which is exactly the block hop P-1 sends,
 * so the all-gather continues the same rotation with plain receives.
 *
 * Pipelining: every chunk received at hop h is forwarded at hop h+1 right
 * after it arrives, so forwarding chunk c overlaps receiving chunk c+1, and
 * the right neighbour starts hop h+1 while this rank is still in hop h. Per
 * link the sender emits hop-major, chunk-minor order, the same order in
 * which the receiver consumes, so FIFO matching holds.
 *
 * Out of place without a copy pass: each block is reduced exactly once per
 * rank, so the local operand always comes from SEND and the result goes to
 * RECV; the block a rank never receives (r + 1) is the one it completes
 * itself. In place the first hop reads block r from SEND, which nothing
 * writes before hop P-1 receives block r. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

sc_result_t sc_ring_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t chunk = a->chunk_elems;
  if (a->count == 0) return s->status;
  if (a->avg) sc_sched_set_avg(s, SC_BUF_RECV, 0, a->count);
  if (p == 1) {
    sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, 0, a->count);
    return s->status;
  }
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const int hops = 2 * (p - 1);
  size_t off, len;

  sc_block_range(a->count, p, r, &off, &len);
  sc_send_chunks(s, right, SC_BUF_SEND, off, len, chunk);

  for (int h = 0; h < hops; h++) {
    const int b = sc_ring_block(r, h + 1, p);
    /* Fewer elements than ranks: blocks count.. are empty. The block falls by
     * one per hop, so the next hop with one (block count-1) is b-count+1 on;
     * the schedule is built in O(count) instead of O(P) (the cost model
     * builds every rank's). */
    if ((size_t)b >= a->count) {
      h += b - (int)a->count;
      continue;
    }
    sc_block_range(a->count, p, b, &off, &len);
    for (size_t c = 0; c < len; c += chunk) {
      size_t n = len - c < chunk ? len - c : chunk;
      if (h < p - 1)
        sc_sched_recv_reduce(s, left, SC_BUF_RECV, off + c, SC_BUF_SEND, off + c, n);
      else
        sc_sched_recv(s, left, SC_BUF_RECV, off + c, n);
      if (h + 1 < hops) sc_sched_send(s, right, SC_BUF_RECV, off + c, n);
    }
  }
  return s->status;
}
