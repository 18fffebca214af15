/* SPDX-License-Identifier: BSD-3-Clause */
/* Reduce to a root: the broadcasts of broadcast.c run backwards. Ranks are
 * renumbered relative to the root (v = 0 is the root). RECV is written only
 * on the root (it may be NULL elsewhere); non-roots keep partial results in
 * SCRATCH. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

/* Chunk slots a chain rank rotates its partials through: reducing chunk c
 * waits until the send of chunk c - SLOTS has left, so a few slots keep that
 * wait off the critical path without holding a whole message of scratch. */
#define SC_CHAIN_REDUCE_SLOTS 4

/* Chain root+P-1 -> ... -> root+1 -> root, chunk by chunk. */
sc_result_t sc_chain_reduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, v = sc_root_rel_rank(a);
  const size_t n = a->count, chunk = a->chunk_elems;
  if (n == 0) return s->status;
  if (v == 0 && a->avg) sc_sched_set_avg(s, SC_BUF_RECV, 0, n);
  if (p == 1) {
    sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, 0, n);
    return s->status;
  }
  if (v == p - 1) {
    sc_send_chunks(s, sc_root_abs_rank(a, v - 1), SC_BUF_SEND, 0, n, chunk);
    return s->status;
  }
  const int next = sc_root_abs_rank(a, v + 1);
  if (v == 0) {
    for (size_t c = 0; c < n; c += chunk)
      sc_sched_recv_reduce(s, next, SC_BUF_RECV, c, SC_BUF_SEND, c, n - c < chunk ? n - c : chunk);
    return s->status;
  }
  const int prev = sc_root_abs_rank(a, v - 1);
  const size_t slot_elems = chunk < n ? chunk : n;
  const size_t slots =
      (n - 1) / chunk + 1 < SC_CHAIN_REDUCE_SLOTS ? (n - 1) / chunk + 1 : SC_CHAIN_REDUCE_SLOTS;
  sc_sched_need_scratch(s, slots * slot_elems);
  size_t i = 0;
  for (size_t c = 0; c < n; c += chunk, i++) {
    size_t m = n - c < chunk ? n - c : chunk;
    size_t slot = (i % slots) * slot_elems;
    sc_sched_recv_reduce(s, next, SC_BUF_SCRATCH, slot, SC_BUF_SEND, c, m);
    sc_sched_send(s, prev, SC_BUF_SCRATCH, slot, m);
  }
  return s->status;
}

/* Binomial tree: v receives from v + 2^k for each 2^k below its lowest set
 * bit (smallest subtree first: it is ready first), then sends its partial to
 * v minus that bit. The first reduction takes its local operand from SEND,
 * later ones accumulate in place; a leaf forwards SEND untouched. */
sc_result_t sc_binomial_reduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, v = sc_root_rel_rank(a);
  const size_t n = a->count;
  if (n == 0) return s->status;
  const sc_buf_t acc = v == 0 ? SC_BUF_RECV : SC_BUF_SCRATCH;
  sc_buf_t cur = SC_BUF_SEND;
  if (v == 0 && a->avg) sc_sched_set_avg(s, SC_BUF_RECV, 0, n);
  for (int mask = 1; mask < p; mask <<= 1) {
    if (v & mask) {
      sc_sched_send(s, sc_root_abs_rank(a, v - mask), cur, 0, n);
      return s->status;
    }
    if (v + mask < p) {
      if (acc == SC_BUF_SCRATCH) sc_sched_need_scratch(s, n);
      sc_sched_recv_reduce(s, sc_root_abs_rank(a, v + mask), acc, 0, cur, 0, n);
      cur = acc;
    }
  }
  /* Only the root gets here; with no children it still owes RECV a copy. */
  if (cur == SC_BUF_SEND) sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, 0, n);
  return s->status;
}
