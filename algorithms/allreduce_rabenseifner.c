/* SPDX-License-Identifier: BSD-3-Clause */
/* Rabenseifner all-reduce: recursive-halving reduce-scatter, then
 * recursive-doubling all-gather, over a power-of-two group; and the
 * reduce-scatter half on its own with the API's block layout.
 *
 * Group: P' = largest power of two <= P, rem = P - P'. Ranks 2i and 2i+1
 * (i < rem) fold: 2i hands its input to 2i+1 and gets its result back at the
 * end; 2i+1 takes group rank i, and ranks >= 2 rem take group rank
 * rank - rem.
 *
 * The vector is cut into P' group blocks. Halving step with mask m (P'/2
 * down to 1): a group rank holds the 2m blocks around it, sends the half its
 * partner g ^ m keeps and reduces the half it keeps, so group rank g ends
 * owning block g. Doubling step with mask m (1 up to P'/2): it swaps its m
 * blocks for its partner's. Blocks follow sc_block_range, so counts not
 * divisible by P' work and empty halves send nothing on either side.
 *
 * Bit identity: every element is reduced along one fixed tree ending at its
 * block's owner; everyone else receives copies of the owner's bits.
 *
 * Pipelining: each exchange is cut into chunks of chunk_elems, and a chunk
 * the next exchange sends goes out as soon as the part of it this exchange
 * receives has arrived (the ring's forwarding rule).
 *
 * Memory: the all-reduce works in RECV at the vector's own offsets. A step
 * reduces only the half it keeps while the half it sends goes out, and the
 * doubling steps receive exactly what the halving steps sent to the same
 * partner, so no write waits on a send the partner has not yet received and
 * no scratch is needed. The first step reduces SEND into RECV, which in place
 * is the same memory exactly (allowed). */
#include "algorithms/algorithms.h"
#include "algorithms/exchange.h"
#include "lib/base/error.h"

/* At most 2 * 30 exchanges (P <= 2^30) plus the two folds. */
enum { MAX_EXCHANGES = 64 };

/* Where the group blocks lie: in the all-reduce, P' near-even blocks of
 * count; in the reduce-scatter, the API blocks (count each) of the group
 * rank's ranks, [2g, 2g+2) for a folding pair, {g + rem} otherwise. */
typedef struct group_layout {
  size_t count;
  int pp, rem;
  int api_blocks;
} group_layout_t;

static size_t block_start(const group_layout_t *l, int b) {
  if (l->api_blocks) return (size_t)(b < l->rem ? 2 * b : b + l->rem) * l->count;
  if (b == l->pp) return l->count;
  size_t off, len;
  sc_block_range(l->count, l->pp, b, &off, &len);
  return off;
}

/* Halving step with mask m: the range group rank g keeps and the one it sends. */
static void halving_ranges(const group_layout_t *l, int g, int m, size_t *keep_off,
                           size_t *keep_len, size_t *send_off, size_t *send_len) {
  const int lo = g & ~(2 * m - 1), mid = lo + m, hi = lo + 2 * m;
  const size_t a = block_start(l, lo), b = block_start(l, mid), c = block_start(l, hi);
  const int upper = (g & m) != 0;
  *keep_off = upper ? b : a;
  *keep_len = upper ? c - b : b - a;
  *send_off = upper ? a : b;
  *send_len = upper ? b - a : c - b;
}

/* The m blocks group rank g holds before doubling step m. */
static void doubling_range(const group_layout_t *l, int g, int m, size_t *off, size_t *len) {
  const int lo = g & ~(m - 1);
  *off = block_start(l, lo);
  *len = block_start(l, lo + m) - *off;
}

sc_result_t sc_rabenseifner_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count, chunk = a->chunk_elems;
  if (sc_coll_trivial(a, s)) return s->status;
  const int pp = sc_fold_pow2_floor(p), rem = p - pp;
  const int g = sc_fold_group_rank(r, rem);
  const group_layout_t l = {.count = n, .pp = pp, .rem = rem};
  if (g < 0) {
    sc_fold_leaf_allreduce(s, r, n, chunk);
    return s->status;
  }

  sc_exchange_t x[MAX_EXCHANGES];
  int nx = 0;
  const int folds = r < 2 * rem;
  sc_buf_t src = SC_BUF_SEND;
  if (folds) {
    x[nx++] = (sc_exchange_t){.peer = r - 1,
                              .recv_buf = SC_BUF_RECV,
                              .recv_len = n,
                              .operand_buf = SC_BUF_SEND,
                              .reduce = 1};
    src = SC_BUF_RECV;
  }
  for (int m = pp / 2; m >= 1; m /= 2) {
    sc_exchange_t *e = &x[nx++];
    *e = (sc_exchange_t){.peer = sc_fold_group_to_rank(g ^ m, rem),
                         .send_buf = src,
                         .recv_buf = SC_BUF_RECV,
                         .operand_buf = src,
                         .reduce = 1};
    halving_ranges(&l, g, m, &e->recv_off, &e->recv_len, &e->send_off, &e->send_len);
    src = SC_BUF_RECV;
  }
  for (int m = 1; m < pp; m *= 2) {
    sc_exchange_t *e = &x[nx++];
    *e = (sc_exchange_t){.peer = sc_fold_group_to_rank(g ^ m, rem),
                         .send_buf = SC_BUF_RECV,
                         .recv_buf = SC_BUF_RECV};
    doubling_range(&l, g, m, &e->send_off, &e->send_len);
    doubling_range(&l, g ^ m, m, &e->recv_off, &e->recv_len);
  }
  if (folds) x[nx++] = (sc_exchange_t){.peer = r - 1, .send_buf = SC_BUF_RECV, .send_len = n};
  sc_exchange_run(s, x, nx, chunk);
  return s->status;
}

/* Reduce-scatter: SEND holds P blocks of count, rank q ends with block q of
 * the reduction in RECV. RECV is too small to work in (and in place it is
 * block 0 or block r of SEND), so partial sums live in scratch at their
 * vector offsets minus the start of the first half kept: the first step
 * reduces SEND into scratch, the last one scratch into RECV.
 *
 * A folding pair's receiver reduces its partner's whole input with its own
 * into scratch (P count elements) first, then owns both their blocks: it
 * copies its own to RECV and sends its partner's back.
 *
 * In place RECV is written only by the last step, after every read of SEND
 * except the first step's sends, which the executor finishes first. */
sc_result_t sc_rh_reduce_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count, chunk = a->chunk_elems, mine = (size_t)r * n;
  if (sc_coll_trivial(a, s)) return s->status;
  const int pp = sc_fold_pow2_floor(p), rem = p - pp;
  const int g = sc_fold_group_rank(r, rem);
  const group_layout_t l = {.count = n, .pp = pp, .rem = rem, .api_blocks = 1};
  sc_exchange_t x[MAX_EXCHANGES];
  int nx = 0;

  if (g < 0) {
    x[nx++] = (sc_exchange_t){.peer = r + 1,
                              .send_buf = SC_BUF_SEND,
                              .send_len = (size_t)p * n,
                              .recv_buf = SC_BUF_RECV,
                              .recv_off = mine,
                              .recv_len = n,
                              .recv_base = mine};
    sc_exchange_run(s, x, nx, chunk);
    return s->status;
  }

  const int folds = r < 2 * rem;
  sc_buf_t src = SC_BUF_SEND;
  size_t src_base = 0, work_base = 0;
  if (folds) {
    sc_sched_need_scratch(s, (size_t)p * n);
    x[nx++] = (sc_exchange_t){.peer = r - 1,
                              .recv_buf = SC_BUF_SCRATCH,
                              .recv_len = (size_t)p * n,
                              .operand_buf = SC_BUF_SEND,
                              .reduce = 1};
    src = SC_BUF_SCRATCH;
  } else {
    size_t keep_off, keep_len, send_off, send_len;
    halving_ranges(&l, g, pp / 2, &keep_off, &keep_len, &send_off, &send_len);
    work_base = keep_off;
    if (pp > 2) sc_sched_need_scratch(s, keep_len);
  }
  for (int m = pp / 2; m >= 1; m /= 2) {
    /* A non-folding rank's last half is its own block: reduce it into RECV. */
    const int into_recv = m == 1 && !folds;
    sc_exchange_t *e = &x[nx++];
    *e = (sc_exchange_t){.peer = sc_fold_group_to_rank(g ^ m, rem),
                         .send_buf = src,
                         .send_base = src_base,
                         .recv_buf = into_recv ? SC_BUF_RECV : SC_BUF_SCRATCH,
                         .recv_base = into_recv ? mine : work_base,
                         .operand_buf = src,
                         .operand_base = src_base,
                         .reduce = 1};
    halving_ranges(&l, g, m, &e->recv_off, &e->recv_len, &e->send_off, &e->send_len);
    src = SC_BUF_SCRATCH;
    src_base = work_base;
  }
  if (folds)
    x[nx++] = (sc_exchange_t){
        .peer = r - 1, .send_buf = SC_BUF_SCRATCH, .send_off = mine - n, .send_len = n};
  sc_exchange_run(s, x, nx, chunk);
  if (folds) sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SCRATCH, mine, n);
  return s->status;
}
