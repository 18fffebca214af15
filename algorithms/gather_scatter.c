/* SPDX-License-Identifier: BSD-3-Clause */
/* Gather and scatter: binomial tree or linear. Ranks are renumbered relative
 * to the root (v = (rank - root) mod P), so that in the binomial tree rank v
 * heads the subtree of relative ranks [v, v + lowbit(v)) (the root: all of
 * them) and its children are v + 2^k for every 2^k below lowbit(v): the
 * child's subtree is [v + 2^k, v + 2^(k+1)), cut at P. A subtree's blocks in
 * relative order are one contiguous range, so each tree edge carries one
 * message.
 *
 * Relative block i is absolute block (i + root) mod P: at the root a
 * subtree's range is contiguous in RECV (gather) or SEND (scatter) unless it
 * wraps past P, which at most one child's range does. That child's blocks go
 * through SCRATCH (two COPYs); the others land in or leave from the user's
 * buffer directly. An interior non-root rank keeps its subtree in SCRATCH
 * (lowbit(v) blocks at most): it never touches the buffer the collective
 * leaves NULL there (gather: RECV, scatter: SEND).
 *
 * In place on the root (gather: SEND == RECV + root*count; scatter: RECV ==
 * SEND + root*count) the root's own COPY is onto itself, and is skipped; no
 * other step touches the root's own block. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

/* The subtree size of relative rank v (v > 0): lowbit(v), cut at P. */
static int subtree(int v, int p) {
  const int low = v & -v;
  return low < p - v ? low : p - v;
}

/* Children are 2^k below lowbit(v) (below P for the root) with v + 2^k < P;
 * the first mask past them. */
static int child_limit(int v, int p) {
  int mask = 1;
  while (mask < p && !(v & mask)) mask <<= 1;
  return mask;
}

/* The root's range of relative blocks [first, first + cnt): the absolute
 * start when it is contiguous in the user's buffer, else -1. */
static int root_contiguous(const sc_coll_args_t *a, int first, int cnt) {
  const int b = sc_root_abs_rank(a, first);
  return b + cnt <= a->nranks ? b : -1;
}

/* The two COPYs between the root's wrapping range in SCRATCH[0..) and the
 * user's buffer: to_user gathers into it, otherwise scatter packs from it. */
static void root_wrap_copy(const sc_coll_args_t *a, sc_sched_t *s, int first, int cnt,
                           int to_user) {
  const size_t n = a->count;
  const int b = sc_root_abs_rank(a, first), head = a->nranks - b;
  if (to_user) {
    sc_sched_copy(s, SC_BUF_RECV, (size_t)b * n, SC_BUF_SCRATCH, 0, (size_t)head * n);
    sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SCRATCH, (size_t)head * n, (size_t)(cnt - head) * n);
  } else {
    sc_sched_copy(s, SC_BUF_SCRATCH, 0, SC_BUF_SEND, (size_t)b * n, (size_t)head * n);
    sc_sched_copy(s, SC_BUF_SCRATCH, (size_t)head * n, SC_BUF_SEND, 0, (size_t)(cnt - head) * n);
  }
}

/* Children in ascending order: the smallest subtree is ready first. */
sc_result_t sc_binomial_gather_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, v = sc_root_rel_rank(a);
  const size_t n = a->count, own = (size_t)a->rank * n;
  if (n == 0) return s->status;
  const int limit = child_limit(v, p);
  if (v == 0) {
    /* First: a SEND that overlaps some other block is read before that block lands. */
    sc_sched_copy(s, SC_BUF_RECV, own, SC_BUF_SEND, 0, n);
    for (int mask = 1; mask < limit; mask <<= 1) {
      const int c = v + mask, cnt = subtree(c, p);
      const int b = root_contiguous(a, c, cnt);
      if (b >= 0) {
        sc_sched_recv(s, sc_root_abs_rank(a, c), SC_BUF_RECV, (size_t)b * n, (size_t)cnt * n);
      } else {
        sc_sched_need_scratch(s, (size_t)cnt * n);
        sc_sched_recv(s, sc_root_abs_rank(a, c), SC_BUF_SCRATCH, 0, (size_t)cnt * n);
        root_wrap_copy(a, s, c, cnt, 1);
      }
    }
    return s->status;
  }
  const int parent = sc_root_abs_rank(a, v - (v & -v));
  if (limit == 1 || v + 1 >= p) { /* a leaf */
    sc_sched_send(s, parent, SC_BUF_SEND, 0, n);
    return s->status;
  }
  const int sub = subtree(v, p);
  sc_sched_need_scratch(s, (size_t)sub * n);
  sc_sched_copy(s, SC_BUF_SCRATCH, 0, SC_BUF_SEND, 0, n);
  for (int mask = 1; mask < limit && v + mask < p; mask <<= 1)
    sc_sched_recv(s, sc_root_abs_rank(a, v + mask), SC_BUF_SCRATCH, (size_t)mask * n,
                  (size_t)subtree(v + mask, p) * n);
  sc_sched_send(s, parent, SC_BUF_SCRATCH, 0, (size_t)sub * n);
  return s->status;
}

/* The mirror: largest subtree first, so that the deepest branch starts
 * earliest; the root's own copy after its sends. */
sc_result_t sc_binomial_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, v = sc_root_rel_rank(a);
  const size_t n = a->count, own = (size_t)a->rank * n;
  if (n == 0) return s->status;
  const int limit = child_limit(v, p);
  if (v == 0) {
    for (int mask = limit >> 1; mask > 0; mask >>= 1) {
      const int c = v + mask, cnt = subtree(c, p);
      const int b = root_contiguous(a, c, cnt);
      if (b >= 0) {
        sc_sched_send(s, sc_root_abs_rank(a, c), SC_BUF_SEND, (size_t)b * n, (size_t)cnt * n);
      } else {
        sc_sched_need_scratch(s, (size_t)cnt * n);
        root_wrap_copy(a, s, c, cnt, 0);
        sc_sched_send(s, sc_root_abs_rank(a, c), SC_BUF_SCRATCH, 0, (size_t)cnt * n);
      }
    }
    sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, own, n);
    return s->status;
  }
  const int parent = sc_root_abs_rank(a, v - (v & -v));
  if (limit == 1 || v + 1 >= p) {
    sc_sched_recv(s, parent, SC_BUF_RECV, 0, n);
    return s->status;
  }
  const int sub = subtree(v, p);
  sc_sched_need_scratch(s, (size_t)sub * n);
  sc_sched_recv(s, parent, SC_BUF_SCRATCH, 0, (size_t)sub * n);
  for (int mask = limit >> 1; mask > 0; mask >>= 1)
    if (v + mask < p)
      sc_sched_send(s, sc_root_abs_rank(a, v + mask), SC_BUF_SCRATCH, (size_t)mask * n,
                    (size_t)subtree(v + mask, p) * n);
  sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SCRATCH, 0, n);
  return s->status;
}

/* Linear: the root exchanges with every rank, in the order root+1, root+2,
 * ... (each rank's turn comes at a different place in every root's list). */
sc_result_t sc_linear_gather_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks;
  const size_t n = a->count;
  if (n == 0) return s->status;
  if (a->rank != a->root) {
    sc_sched_send(s, a->root, SC_BUF_SEND, 0, n);
    return s->status;
  }
  sc_sched_copy(s, SC_BUF_RECV, (size_t)a->root * n, SC_BUF_SEND, 0, n);
  for (int v = 1; v < p; v++) {
    const int src = sc_root_abs_rank(a, v);
    sc_sched_recv(s, src, SC_BUF_RECV, (size_t)src * n, n);
  }
  return s->status;
}

sc_result_t sc_linear_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks;
  const size_t n = a->count;
  if (n == 0) return s->status;
  if (a->rank != a->root) {
    sc_sched_recv(s, a->root, SC_BUF_RECV, 0, n);
    return s->status;
  }
  for (int v = 1; v < p; v++) {
    const int dst = sc_root_abs_rank(a, v);
    sc_sched_send(s, dst, SC_BUF_SEND, (size_t)dst * n, n);
  }
  sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, (size_t)a->root * n, n);
  return s->status;
}
