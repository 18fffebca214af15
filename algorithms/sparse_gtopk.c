/* gTop-k sparse all-reduce: butterfly and tree (see sparse.h).
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
#include "base/error.h"

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

/* Which survival slot (schedule/sparse_state.h) each child's set took in a
 * binomial reduce: the child 2^b below took slot_of_bit[b]; nslots in all. */
typedef struct sc_tree_slots {
  size_t slot_of_bit[32];
  size_t nslots;
} sc_tree_slots_t;

/* Member i of a tree: rank i, or the host's i-th rank when m is given. */
static int member_rank(const sc_hier_map_t *m, int i) {
  return m ? sc_hier_member(m, m->host, i) : i;
}

/* The papers' tree over n members: in round b a member whose lowest set bit
 * is 2^b sends its set to member - 2^b and is done; the others merge member
 * + 2^b's set when it exists, tracking its survival in the next slot.
 * Returns with *cur the merged set (member 0) or the set this member sent. */
static void binomial_reduce(sc_sched_t *s, size_t k, int me, int n, const sc_hier_map_t *m,
                            sc_tree_slots_t *t, size_t *cur, size_t *next) {
  t->nslots = 0;
  for (int bit = 1, b = 0; bit < n; bit <<= 1, b++) {
    if (me & bit) {
      sc_sched_sparse_send(s, member_rank(m, me - bit), *cur, 0);
      return;
    }
    if (me + bit < n) {
      sc_sched_sparse_recv_merge(s, member_rank(m, me + bit), *next, *cur, k,
                                 SC_SPF_LOCAL_IS_A | SC_SPF_FOLD_IN);
      t->slot_of_bit[b] = t->nslots++;
      *cur = *next;
      *next = other(*cur);
    }
  }
}

/* The result (SET_OUT) down the same tree, the largest subtree first, each
 * child with the survival mask of the set it sent up. */
static void binomial_bcast(sc_sched_t *s, int me, int n, const sc_hier_map_t *m,
                           const sc_tree_slots_t *t) {
  int below = 1, b = 0;
  if (me == 0) {
    while (below < n) below <<= 1, b++;
  } else {
    below = me & -me;
    while ((1 << b) < below) b++;
  }
  for (below >>= 1, b--; below >= 1; below >>= 1, b--)
    if (me + below < n)
      sc_sched_sparse_send_mask(s, member_rank(m, me + below), SET_OUT, t->slot_of_bit[b]);
}

sc_result_t sc_sparse_gtopk_tree_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t k = a->count;
  if (p == 1) {
    sc_sched_sparse_sum(s, SET_OUT, SET_IN, 1);
    return s->status;
  }
  sc_sched_sparse_sets(s, 2, k);
  sc_tree_slots_t t = {{0}, 0};
  size_t cur = SET_IN, next = SET_A;
  binomial_reduce(s, k, r, p, NULL, &t, &cur, &next);
  if (r == 0) {
    sc_sched_sparse_sum(s, SET_OUT, cur, 1);
  } else {
    sc_sched_sparse_recv_mask(s, r - (r & -r), SET_OUT, k, cur);
  }
  binomial_bcast(s, r, p, NULL, &t);
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

sc_result_t sc_sparse_gtopk_hier_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
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
  sc_tree_slots_t t = {{0}, 0};
  size_t cur = SET_IN, next = SET_A;
  binomial_reduce(s, k, m.me, m.lsz, &m, &t, &cur, &next);
  if (m.me == 0)
    leaders_butterfly(&m, s, k, cur, next, t.nslots);
  else
    sc_sched_sparse_recv_mask(s, member_rank(&m, m.me - (m.me & -m.me)), SET_OUT, k, cur);
  binomial_bcast(s, m.me, m.lsz, &m, &t);
  sc_hier_map_free(&m);
  return s->status;
}
