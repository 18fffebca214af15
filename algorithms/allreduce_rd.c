/* SPDX-License-Identifier: BSD-3-Clause */
/* Recursive doubling: all-reduce of the whole vector, and the all-gather half
 * of Rabenseifner with the API's block layout.
 *
 * Group: P' = largest power of two <= P, rem = P - P'. Ranks 2i and 2i+1
 * (i < rem) fold: 2i hands its input to 2i+1 and gets the result back at the
 * end; 2i+1 takes group rank i, and ranks >= 2 rem take group rank
 * rank - rem. Exchange k pairs group rank g with g ^ 2^k.
 *
 * Bit identity: after exchange k both partners hold x (op) y computed as
 * local (op) incoming, i.e. x op y on one side and y op x on the other; the
 * kernels' two-operand ops are commutative, so the whole group of 2^(k+1)
 * holds the same bits and every rank ends with the same result.
 *
 * Pipelining: each exchange is cut into chunks of chunk_elems, and a chunk
 * is forwarded to the next partner as soon as it has been received (the
 * ring's rule), so exchange k+1 starts while exchange k is in flight.
 *
 * Memory: an exchange must not write the memory its own send reads, or under
 * a zero-copy transport both partners wait for each other's receive. So the
 * all-reduce alternates between RECV and one vector of scratch, arranged so
 * that the last write lands in RECV. When that puts the first write in RECV
 * while the first send reads SEND (in place: the same memory), the input is
 * first copied to scratch and sent from there. */
#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "lib/base/error.h"

/* At most 30 exchanges (P <= 2^30) plus the two folds. */
enum { MAX_EXCHANGES = 32 };

static int log2_exact(int q) {
  int l = 0;
  while ((1 << l) < q) l++;
  return l;
}

/* Where the all-reduce's write w of `writes` goes: RECV when an even number
 * of writes follow it, so the last one lands there. */
static sc_buf_t write_buf(int writes, int w) {
  return (writes - 1 - w) % 2 ? SC_BUF_SCRATCH : SC_BUF_RECV;
}

sc_result_t sc_rd_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count, chunk = a->chunk_elems;
  if (sc_coll_trivial(a, s)) return s->status;
  const int pp = sc_fold_pow2_floor(p), rem = p - pp, steps = log2_exact(pp);
  const int g = sc_fold_group_rank(r, rem);
  if (g < 0) {
    sc_fold_leaf_allreduce(s, r, n, chunk);
    return s->status;
  }

  sc_exchange_t x[MAX_EXCHANGES];
  int nx = 0;
  const int folds = r < 2 * rem;
  const int writes = steps + folds;
  sc_sched_need_scratch(s, n);
  sc_buf_t cur = SC_BUF_SEND;
  if (!folds && write_buf(writes, 0) == SC_BUF_RECV) {
    /* Exchange 0 would write RECV while sending SEND, the same memory in
     * place. A folding receiver's first write is free to land in RECV: it
     * receives before it sends anything. */
    sc_sched_copy(s, SC_BUF_SCRATCH, 0, SC_BUF_SEND, 0, n);
    cur = SC_BUF_SCRATCH;
  }
  int w = 0;
  if (folds) {
    x[nx++] = (sc_exchange_t){.peer = r - 1,
                              .recv_buf = write_buf(writes, w),
                              .recv_len = n,
                              .operand_buf = cur,
                              .reduce = 1};
    cur = write_buf(writes, w++);
  }
  for (int mask = 1; mask < pp; mask <<= 1, w++) {
    x[nx++] = (sc_exchange_t){.peer = sc_fold_group_to_rank(g ^ mask, rem),
                              .send_buf = cur,
                              .send_len = n,
                              .recv_buf = write_buf(writes, w),
                              .recv_len = n,
                              .operand_buf = cur,
                              .reduce = 1};
    cur = write_buf(writes, w);
  }
  if (folds) x[nx++] = (sc_exchange_t){.peer = r - 1, .send_buf = SC_BUF_RECV, .send_len = n};
  sc_exchange_run(s, x, nx, chunk);
  return s->status;
}

/* All-gather: RECV holds P blocks of count elements, rank q's input is block
 * q. Group rank g owns the blocks of its ranks: [2g, 2g+2) for a folding
 * pair, {g + rem} otherwise. Exchange k swaps the 2^k group ranks' blocks
 * this rank holds for its partner's, doubling them; the folded rank sends
 * its input to its partner first and receives the whole RECV at the end.
 *
 * The first exchange of a non-folding rank sends straight from SEND, before
 * the copy into RECV (as the ring does). In place with SEND == RECV, a rank
 * moves its input out of block 0 before anything is received there; the
 * executor finishes a send out of block 0 before a receive overwrites it. */
static size_t group_block_start(int b, int rem, size_t n) {
  return (size_t)(b < rem ? 2 * b : b + rem) * n;
}

sc_result_t sc_rd_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count, chunk = a->chunk_elems, mine = (size_t)r * n;
  if (n == 0) return s->status;
  if (p == 1) {
    sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, 0, n);
    return s->status;
  }
  const int pp = sc_fold_pow2_floor(p), rem = p - pp;
  const int g = sc_fold_group_rank(r, rem);
  sc_exchange_t x[MAX_EXCHANGES];
  int nx = 0;

  if (g < 0) {
    x[nx++] = (sc_exchange_t){.peer = r + 1,
                              .send_buf = SC_BUF_SEND,
                              .send_off = mine,
                              .send_len = n,
                              .send_base = mine,
                              .recv_buf = SC_BUF_RECV,
                              .recv_len = (size_t)p * n};
    sc_exchange_run(s, x, nx, chunk);
    return s->status;
  }

  const int folds = r < 2 * rem;
  if (folds)
    x[nx++] = (sc_exchange_t){
        .peer = r - 1, .recv_buf = SC_BUF_RECV, .recv_off = mine - n, .recv_len = n};
  for (int mask = 1; mask < pp; mask <<= 1) {
    const int own = g & ~(mask - 1), other = (g ^ mask) & ~(mask - 1);
    const size_t own_lo = group_block_start(own, rem, n);
    const size_t other_lo = group_block_start(other, rem, n);
    sc_exchange_t *e = &x[nx++];
    *e = (sc_exchange_t){.peer = sc_fold_group_to_rank(g ^ mask, rem),
                         .send_buf = SC_BUF_RECV,
                         .send_off = own_lo,
                         .send_len = group_block_start(own + mask, rem, n) - own_lo,
                         .recv_buf = SC_BUF_RECV,
                         .recv_off = other_lo,
                         .recv_len = group_block_start(other + mask, rem, n) - other_lo};
    if (mask == 1 && !folds) {
      e->send_buf = SC_BUF_SEND;
      e->send_base = mine;
    }
  }
  if (folds)
    x[nx++] = (sc_exchange_t){.peer = r - 1, .send_buf = SC_BUF_RECV, .send_len = (size_t)p * n};
  sc_exchange_start(s, x, chunk);
  sc_sched_copy(s, SC_BUF_RECV, mine, SC_BUF_SEND, 0, n);
  sc_exchange_finish(s, x, nx, chunk);
  return s->status;
}
