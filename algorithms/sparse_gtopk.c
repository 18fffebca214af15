/* SPDX-License-Identifier: BSD-3-Clause */
/* gTop-k sparse all-reduce: butterfly, tree and hier (see sparse.h).
 *
 * Merge is asymmetric only in the order of its operands; the side holding the
 * lower ranks is always A, so both partners of an exchange compute the same
 * bits, and after round i a group of 2^(i+1) ranks holds one set.
 *
 * Sets 2 and 3 alternate as the current set: a round merges the current set
 * and the partner's into the other one, never in place, so the send of the
 * current set can still be in flight while the merge runs. */
#include "algorithms/sparse.h"

#include "algorithms/exchange.h"
#include "algorithms/hier_map.h"
#include "lib/base/error.h"

enum { SET_IN = 0, SET_OUT = 1, SET_A = 2, SET_B = 3 };

static size_t other(size_t set) {
  return set == SET_A ? SET_B : SET_A;
}

sc_result_t sc_sparse_gtopk_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t k = a->count;
  if (p == 1) {
    sc_sched_sparse_sum(s, SET_OUT, SET_IN, 1);
    return s->status;
  }
  const int pp = sc_fold_pow2_floor(p), rem = p - pp;
  sc_sched_sparse_sets(s, 2, k);
  if (r >= pp) {
    sc_sched_sparse_send(s, r - pp, SET_IN, 0);
    sc_sched_sparse_recv_mask(s, r - pp, SET_OUT, k, SET_IN);
    return s->status;
  }
  size_t cur = SET_IN, next = SET_A;
  if (r < rem) {
    sc_sched_sparse_recv_merge(s, r + pp, next, cur, k, SC_SPF_LOCAL_IS_A | SC_SPF_FOLD_IN);
    cur = next;
    next = other(cur);
  }
  for (int bit = 1; bit < pp; bit <<= 1) {
    const int partner = r ^ bit;
    sc_sched_sparse_send(s, partner, cur, 0);
    sc_sched_sparse_recv_merge(s, partner, next, cur, k, r < partner ? SC_SPF_LOCAL_IS_A : 0);
    cur = next;
    next = other(cur);
  }
  sc_sched_sparse_sum(s, SET_OUT, cur, 1);
  if (r < rem) sc_sched_sparse_send_mask(s, r + pp, SET_OUT, 0);
  return s->status;
}

/* Member i of a tree: rank i, or the host's i-th rank when m is given. */
static int member_rank(const sc_hier_map_t *m, int i) {
  return m ? sc_hier_member(m, m->host, i) : i;
}

/* The papers' tree over n members: in round b a member whose lowest set bit
 * is 2^b sends its set to member - 2^b and is done; the others merge member
 * + 2^b's set when it exists, each child's set into the next survival slot.
 * Leaves *cur the merged set (member 0) or the set this member sent; returns
 * the slots taken. */
static size_t binomial_reduce(sc_sched_t *s, size_t k, int me, int n, const sc_hier_map_t *m,
                              size_t *cur, size_t *next) {
  size_t slots = 0;
  for (int bit = 1; bit < n; bit <<= 1) {
    if (me & bit) {
      sc_sched_sparse_send(s, member_rank(m, me - bit), *cur, 0);
      break;
    }
    if (me + bit < n) {
      sc_sched_sparse_recv_merge(s, member_rank(m, me + bit), *next, *cur, k,
                                 SC_SPF_LOCAL_IS_A | SC_SPF_FOLD_IN);
      slots++;
      *cur = *next;
      *next = other(*cur);
    }
  }
  return slots;
}

/* The result (SET_OUT) down the same tree, the largest subtree first, each
 * child with the survival mask of the set it sent up. These are the children
 * binomial_reduce merged, in reverse, so the last slot goes first. */
static void binomial_bcast(sc_sched_t *s, int me, int n, const sc_hier_map_t *m, size_t slots) {
  int below = me ? me & -me : 1;
  if (!me)
    while (below < n) below <<= 1;
  for (int bit = below / 2; bit >= 1; bit >>= 1)
    if (me + bit < n) sc_sched_sparse_send_mask(s, member_rank(m, me + bit), SET_OUT, --slots);
}

sc_result_t sc_sparse_tree_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t k = a->count;
  if (p == 1) {
    sc_sched_sparse_sum(s, SET_OUT, SET_IN, 1);
    return s->status;
  }
  sc_sched_sparse_sets(s, 2, k);
  size_t cur = SET_IN, next = SET_A;
  const size_t slots = binomial_reduce(s, k, r, p, NULL, &cur, &next);
  if (r == 0)
    sc_sched_sparse_sum(s, SET_OUT, cur, 1);
  else
    sc_sched_sparse_recv_mask(s, r - (r & -r), SET_OUT, k, cur);
  binomial_bcast(s, r, p, NULL, slots);
  return s->status;
}

/* The butterfly among the hosts' leaders (local rank 0, the lowest rank of
 * each host, so lower host = lower rank = Merge's A); ends with SET_OUT. A
 * folded host's set takes survival slot `slot`. */
static void leaders_butterfly(const sc_hier_map_t *m, sc_sched_t *s, size_t k, size_t cur,
                              size_t next, size_t slot) {
  const int h = m->host, pp = sc_fold_pow2_floor(m->nhosts), rem = m->nhosts - pp;
  if (h >= pp) {
    sc_sched_sparse_send(s, sc_hier_member(m, h - pp, 0), cur, 0);
    sc_sched_sparse_recv_mask(s, sc_hier_member(m, h - pp, 0), SET_OUT, k, cur);
    return;
  }
  if (h < rem) {
    sc_sched_sparse_recv_merge(s, sc_hier_member(m, h + pp, 0), next, cur, k,
                               SC_SPF_LOCAL_IS_A | SC_SPF_FOLD_IN);
    cur = next;
    next = other(cur);
  }
  for (int bit = 1; bit < pp; bit <<= 1) {
    const int partner = sc_hier_member(m, h ^ bit, 0);
    sc_sched_sparse_send(s, partner, cur, 0);
    sc_sched_sparse_recv_merge(s, partner, next, cur, k, h < (h ^ bit) ? SC_SPF_LOCAL_IS_A : 0);
    cur = next;
    next = other(cur);
  }
  sc_sched_sparse_sum(s, SET_OUT, cur, 1);
  if (h < rem) sc_sched_sparse_send_mask(s, sc_hier_member(m, h + pp, 0), SET_OUT, slot);
}

sc_result_t sc_sparse_hier_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const size_t k = a->count;
  if (a->nranks == 1) {
    sc_sched_sparse_sum(s, SET_OUT, SET_IN, 1);
    return s->status;
  }
  sc_hier_map_t m;
  sc_result_t r = sc_hier_map_init(a, &m);
  if (r != SC_SUCCESS) {
    sc_hier_map_free(&m);
    return r;
  }
  sc_sched_sparse_sets(s, 2, k);
  size_t cur = SET_IN, next = SET_A;
  const size_t slots = binomial_reduce(s, k, m.me, m.lsz, &m, &cur, &next);
  if (m.me == 0)
    leaders_butterfly(&m, s, k, cur, next, slots);
  else
    sc_sched_sparse_recv_mask(s, member_rank(&m, m.me - (m.me & -m.me)), SET_OUT, k, cur);
  binomial_bcast(s, m.me, m.lsz, &m, slots);
  sc_hier_map_free(&m);
  return s->status;
}
