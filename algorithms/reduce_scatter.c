/* SPDX-License-Identifier: BSD-3-Clause */
/* Ring reduce-scatter: rank r ends with block r of the reduction in RECV.
 *
 * At hop h (0..P-2) rank r sends block (r - h - 1) mod P to its right
 * neighbour and reduces block (r - h - 2) mod P from its left one; the last
 * hop therefore reduces block r, which lands in RECV. Chunks are forwarded as
 * soon as they are reduced (see allreduce_ring.c for the pipelining and the
 * FIFO order argument).
 *
 * Partial sums cannot live in RECV: in place RECV overlaps block 0 (RECV ==
 * SEND) or block r (RECV == SEND + r*count) of the input, both still needed.
 * They rotate through two scratch slots of one block each: the reduction of
 * hop h+2 overwrites the slot hop h+1 is sending from, and the executor waits
 * for that send first. Two slots leave a whole hop of slack for that wait;
 * the wait chain always points to an earlier hop on the right neighbour, so
 * it cannot close into a cycle.
 *
 * In place, RECV is written only at the last hop, by reducing block r:
 * convention RECV == SEND + r*count reads and writes the same elements;
 * convention RECV == SEND overwrites block 0, whose last reader (as operand
 * or as the hop-0 send) comes earlier, or is this very reduction when r == 0. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

sc_result_t sc_ring_reduce_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count, chunk = a->chunk_elems;
  if (sc_coll_trivial(a, s)) return s->status;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const int hops = p - 1;
  const int slots = hops - 1 < 2 ? hops - 1 : 2;
  sc_sched_need_scratch(s, (size_t)slots * n);

  const size_t first = (size_t)sc_ring_block(r, 1, p) * n;
  sc_send_chunks(s, right, SC_BUF_SEND, first, n, chunk);

  for (int h = 0; h < hops; h++) {
    const size_t in = (size_t)sc_ring_block(r, h + 2, p) * n;
    const int last = h == hops - 1;
    const sc_buf_t dst = last ? SC_BUF_RECV : SC_BUF_SCRATCH;
    const size_t dst_off = last ? 0 : (size_t)(h % 2) * n;
    for (size_t c = 0; c < n; c += chunk) {
      size_t m = n - c < chunk ? n - c : chunk;
      sc_sched_recv_reduce(s, left, dst, dst_off + c, SC_BUF_SEND, in + c, m);
      if (!last) sc_sched_send(s, right, SC_BUF_SCRATCH, dst_off + c, m);
    }
  }
  return s->status;
}
