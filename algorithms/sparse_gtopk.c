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
    sc_sched_sparse_recv(s, r - pp, SET_OUT, k, SC_SPF_MASK);
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
  if (r < rem) sc_sched_sparse_send(s, r + pp, SET_OUT, SC_SPF_MASK);
  return s->status;
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
  /* Reduce: in round i a rank whose lowest set bit is 2^i sends to r - 2^i
   * and is done; the others merge r + 2^i's set when it exists. */
  size_t cur = SET_IN, next = SET_A;
  int top = 1;
  while (top < p) top <<= 1;
  for (int bit = 1; bit < p; bit <<= 1) {
    if (r & bit) {
      sc_sched_sparse_send(s, r - bit, cur, 0);
      break;
    }
    if (r + bit < p) {
      sc_sched_sparse_recv_merge(s, r + bit, next, cur, k, SC_SPF_LOCAL_IS_A);
      cur = next;
      next = other(cur);
    }
  }
  /* Broadcast down the same binomial tree, the largest subtree first. */
  int below;
  if (r == 0) {
    sc_sched_sparse_sum(s, SET_OUT, cur, 1);
    below = top / 2;
  } else {
    const int low = r & -r;
    sc_sched_sparse_recv(s, r - low, SET_OUT, k, 0);
    below = low / 2;
  }
  for (int bit = below; bit >= 1; bit >>= 1)
    if (r + bit < p) sc_sched_sparse_send(s, r + bit, SET_OUT, 0);
  return s->status;
}

/* Binomial reduce-with-merge of the host's sets to its local rank 0; *cur
 * and *next as above. Returns with *cur the merged set (local rank 0) or
 * after this rank sent its set up the tree. */
static void host_reduce(const sc_hier_map_t *m, sc_sched_t *s, size_t k, size_t *cur,
                        size_t *next) {
  const int l = m->me, n = m->lsz;
  for (int bit = 1; bit < n; bit <<= 1) {
    if (l & bit) {
      sc_sched_sparse_send(s, sc_hier_member(m, m->host, l - bit), *cur, 0);
      return;
    }
    if (l + bit < n) {
      sc_sched_sparse_recv_merge(s, sc_hier_member(m, m->host, l + bit), *next, *cur, k,
                                 SC_SPF_LOCAL_IS_A);
      *cur = *next;
      *next = other(*cur);
    }
  }
}

/* The butterfly among the hosts' leaders (local rank 0, the lowest rank of
 * each host, so lower host = lower rank = Merge's A); ends with SET_OUT. */
static void leaders_butterfly(const sc_hier_map_t *m, sc_sched_t *s, size_t k, size_t cur,
                              size_t next) {
  const int h = m->host, pp = sc_fold_pow2_floor(m->nhosts), rem = m->nhosts - pp;
  if (h >= pp) {
    sc_sched_sparse_send(s, sc_hier_member(m, h - pp, 0), cur, 0);
    sc_sched_sparse_recv(s, sc_hier_member(m, h - pp, 0), SET_OUT, k, 0);
    return;
  }
  if (h < rem) {
    sc_sched_sparse_recv_merge(s, sc_hier_member(m, h + pp, 0), next, cur, k, SC_SPF_LOCAL_IS_A);
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
  if (h < rem) sc_sched_sparse_send(s, sc_hier_member(m, h + pp, 0), SET_OUT, 0);
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
  size_t cur = SET_IN, next = SET_A;
  host_reduce(&m, s, k, &cur, &next);
  const int l = m.me, n = m.lsz;
  int below;
  if (l == 0) {
    leaders_butterfly(&m, s, k, cur, next);
    int top = 1;
    while (top < n) top <<= 1;
    below = top / 2;
  } else {
    const int low = l & -l;
    sc_sched_sparse_recv(s, sc_hier_member(&m, m.host, l - low), SET_OUT, k, 0);
    below = low / 2;
  }
  /* Broadcast down the host's binomial tree, the largest subtree first. */
  for (int bit = below; bit >= 1; bit >>= 1)
    if (l + bit < n) sc_sched_sparse_send(s, sc_hier_member(&m, m.host, l + bit), SET_OUT, 0);
  sc_hier_map_free(&m);
  return s->status;
}
