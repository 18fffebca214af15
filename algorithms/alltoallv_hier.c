/* SPDX-License-Identifier: BSD-3-Clause */
/* Hierarchical all-to-all with a count per pair: the uneven form of
 * alltoall_hier.c's two-dimensional exchange (DeepSpeed-MoE, Tutel), for
 * hosts of equal rank counts. H hosts of L ranks; rank (x, a) is local rank
 * a of host x (hier_map.h). Each rank sends one message to each other host
 * instead of one to each rank there: H - 1 messages across hosts, not
 * P - L.
 *
 *   1. Inside host x, rank (x, a) sends every host-mate q its own block for
 *      q (straight to its place in RECV) and one message of its blocks for
 *      the ranks (y, q), y != x, in host order (packed into SCRATCH unless
 *      it is one block). q receives that message whole into O[a].
 *   2. Rank (x, q) packs, for each other host y, the blocks for (y, q) of
 *      its host-mates a = 0 .. L-1 (its own from SEND, the others' from
 *      O[a]) into Q[y] and sends it to (y, q), which receives, from each
 *      other host y, the blocks of (y, a), a = 0 .. L-1, in that order: in
 *      place when they lie back to back in RECV, else into SCRATCH and
 *      copied out.
 *
 * A receiver knows every length of phase 2 from its own recvcounts, but
 * phase 1's messages carry the host-mates' blocks for other hosts, which
 * only their senders' sendcounts tell: a->a2av_mates holds them, exchanged
 * inside the host before the schedule is made (lib/core/a2av_mates.c):
 * mates[t * H + y] = the elements local rank t of this host sends rank
 * (y, this rank's local rank).
 *
 * Counts the two ends disagree on: a message's length then differs at its
 * receiver (SC_ERR_MISMATCH) unless the disagreements of one aggregated
 * message cancel out; SC_CHECK_MISMATCH checks every pair before anything
 * moves.
 *
 * Every phase posts its sends before its receives, and a receive waits only
 * for sends of the same or an earlier phase, so the schedule cannot
 * deadlock. SCRATCH: phase 1's packs (this rank's blocks for other hosts)
 * and O (its host-mates' blocks for its peers on other hosts), then Q (the
 * same blocks and its own) and phase 2's staging (its blocks from other
 * hosts): about four times the data this rank moves across hosts.
 *
 * Without a->a2av_mates (no exchange was made: the one host, uneven hosts,
 * the stream forms' reservation), with one host or one rank per host, or
 * hosts of unequal sizes, this is the pairwise exchange. */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/hier_map.h"
#include "lib/base/error.h"

/* Several hosts of the same number of ranks, several each. */
static int v_applies(const sc_hier_map_t *m) {
  if (m->nhosts == 1 || m->lsz == 1) return 0;
  for (int y = 0; y < m->nhosts; y++)
    if (sc_hier_size(m, y) != m->lsz) return 0;
  return 1;
}

int sc_hier_alltoallv_applies(const sc_coll_args_t *a) {
  if (!a->host_of) return 0;
  sc_hier_map_t m;
  const int yes = sc_hier_map_init(a, &m) == SC_SUCCESS && v_applies(&m);
  sc_hier_map_free(&m);
  return yes;
}

sc_result_t sc_hier_alltoallv_counts_schedule(const sc_coll_args_t *a, uint64_t *rows,
                                              sc_sched_t *s) {
  sc_hier_map_t m;
  sc_result_t res = sc_hier_map_init(a, &m);
  if (res == SC_SUCCESS && !v_applies(&m))
    res = SC_ERR(SC_ERR_INTERNAL, "hier all-to-allv: a count exchange where it does not apply");
  if (res != SC_SUCCESS) {
    sc_hier_map_free(&m);
    return res;
  }
  const int x = m.host, me = m.me, lsz = m.lsz;
  const size_t nh = (size_t)m.nhosts;
  for (int q = 0; q < lsz; q++)
    for (size_t y = 0; y < nh; y++)
      rows[(size_t)q * nh + y] = a->sendcounts[sc_hier_member(&m, (int)y, q)];
  for (int i = 1; i < lsz; i++) {
    const int q = (me + i) % lsz;
    sc_sched_send(s, sc_hier_member(&m, x, q), SC_BUF_SEND, (size_t)q * nh, nh);
  }
  sc_sched_copy(s, SC_BUF_RECV, (size_t)me * nh, SC_BUF_SEND, (size_t)me * nh, nh);
  for (int i = 1; i < lsz; i++) {
    const int t = (me - i + lsz) % lsz;
    sc_sched_recv(s, sc_hier_member(&m, x, t), SC_BUF_RECV, (size_t)t * nh, nh);
  }
  sc_hier_map_free(&m);
  return s->status;
}

typedef struct v_ctx {
  const sc_coll_args_t *a;
  const sc_hier_map_t *m;
  sc_sched_t *s;
  const uint64_t *mates;
  size_t at; /* SCRATCH in use */
} v_ctx_t;

/* Phase 1: its own blocks for the host-mates, its blocks for each host-mate's
 * peers on other hosts, and the host-mates' into O (ooff[t]: where O[t]
 * starts; olen[t]: its length). */
static void v_phase1(v_ctx_t *c, size_t *ooff, size_t *olen) {
  const sc_coll_args_t *a = c->a;
  const sc_hier_map_t *m = c->m;
  const int x = m->host, me = m->me, lsz = m->lsz, nh = m->nhosts;
  const size_t *sc = a->sendcounts, *sd = a->sdispls, *rc = a->recvcounts, *rd = a->rdispls;
  for (int i = 1; i < lsz; i++) {
    const int q = (me + i) % lsz, peer = sc_hier_member(m, x, q);
    sc_sched_send(c->s, peer, SC_BUF_SEND, sc_v_at(sd, sc, peer), sc[peer]);
    /* The blocks for (y, q), y != x: one message, from SEND when at most one is not empty. */
    size_t len = 0;
    int nonempty = 0, only = -1;
    for (int y = 0; y < nh; y++) {
      const int to = sc_hier_member(m, y, q);
      if (y == x || !sc[to]) continue;
      len += sc[to];
      nonempty++;
      only = to;
    }
    if (nonempty <= 1) {
      sc_sched_send(c->s, peer, SC_BUF_SEND, nonempty ? sd[only] : 0, len);
      continue;
    }
    size_t pos = c->at;
    for (int y = 0; y < nh; y++) {
      const int to = sc_hier_member(m, y, q);
      if (y == x || !sc[to]) continue;
      sc_sched_copy(c->s, SC_BUF_SCRATCH, pos, SC_BUF_SEND, sd[to], sc[to]);
      pos += sc[to];
    }
    sc_sched_send(c->s, peer, SC_BUF_SCRATCH, c->at, len);
    c->at = pos;
  }
  const int self = a->rank;
  if (rc[self]) sc_sched_copy(c->s, SC_BUF_RECV, rd[self], SC_BUF_SEND, sd[self], rc[self]);
  for (int t = 0; t < lsz; t++) {
    olen[t] = 0;
    for (int y = 0; y < nh && t != me; y++)
      if (y != x) olen[t] += (size_t)c->mates[(size_t)t * (size_t)nh + (size_t)y];
    ooff[t] = c->at;
    c->at += olen[t];
  }
  for (int i = 1; i < lsz; i++) {
    const int t = (me - i + lsz) % lsz, peer = sc_hier_member(m, x, t);
    sc_sched_recv(c->s, peer, SC_BUF_RECV, sc_v_at(rd, rc, peer), rc[peer]);
    sc_sched_recv(c->s, peer, SC_BUF_SCRATCH, olen[t] ? ooff[t] : 0, olen[t]);
  }
}

/* Phase 2: Q[y] to (y, me) for every other host, and theirs into RECV. */
static void v_phase2(v_ctx_t *c, const size_t *ooff) {
  const sc_coll_args_t *a = c->a;
  const sc_hier_map_t *m = c->m;
  const int x = m->host, me = m->me, lsz = m->lsz, nh = m->nhosts;
  const size_t *sd = a->sdispls, *rc = a->recvcounts, *rd = a->rdispls;
  const uint64_t *mt = c->mates;
  for (int i = 1; i < nh; i++) {
    const int y = (x + i) % nh, to = sc_hier_member(m, y, me);
    const size_t start = c->at;
    for (int t = 0; t < lsz; t++) {
      const size_t n = (size_t)mt[(size_t)t * (size_t)nh + (size_t)y];
      if (!n) continue;
      if (t == me) {
        sc_sched_copy(c->s, SC_BUF_SCRATCH, c->at, SC_BUF_SEND, sd[to], n);
      } else {
        /* O[t] holds t's blocks for (y', me), y' != x, in host order. */
        size_t off = ooff[t];
        for (int w = 0; w < y; w++)
          if (w != x) off += (size_t)mt[(size_t)t * (size_t)nh + (size_t)w];
        sc_sched_copy(c->s, SC_BUF_SCRATCH, c->at, SC_BUF_SCRATCH, off, n);
      }
      c->at += n;
    }
    sc_sched_send(c->s, to, SC_BUF_SCRATCH, c->at > start ? start : 0, c->at - start);
  }
  for (int i = 1; i < nh; i++) {
    const int y = (x - i + nh) % nh, from = sc_hier_member(m, y, me);
    /* The blocks of (y, 0 .. L-1): one run in RECV, or staged. */
    size_t len = 0, first = 0, end = 0;
    int run = 1, any = 0;
    for (int t = 0; t < lsz; t++) {
      const int src = sc_hier_member(m, y, t);
      if (!rc[src]) continue;
      if (!any)
        first = rd[src];
      else if (rd[src] != end)
        run = 0;
      any = 1;
      end = rd[src] + rc[src];
      len += rc[src];
    }
    if (run) {
      sc_sched_recv(c->s, from, SC_BUF_RECV, first, len);
      continue;
    }
    sc_sched_recv(c->s, from, SC_BUF_SCRATCH, c->at, len);
    for (int t = 0; t < lsz; t++) {
      const int src = sc_hier_member(m, y, t);
      if (!rc[src]) continue;
      sc_sched_copy(c->s, SC_BUF_RECV, rd[src], SC_BUF_SCRATCH, c->at, rc[src]);
      c->at += rc[src];
    }
  }
}

sc_result_t sc_hier_alltoallv_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  if (!a->a2av_mates || !a->host_of) return sc_pairwise_alltoallv_schedule(a, s);
  sc_hier_map_t m;
  sc_result_t res = sc_hier_map_init(a, &m);
  if (res != SC_SUCCESS || !v_applies(&m)) {
    sc_hier_map_free(&m);
    return res != SC_SUCCESS ? res : sc_pairwise_alltoallv_schedule(a, s);
  }
  res = sc_alltoallv_self_check(a);
  if (res != SC_SUCCESS) {
    sc_hier_map_free(&m);
    return res;
  }
  const int r = a->rank;
  /* The host-mates' counts came over the network: their sum must not wrap
   * SCRATCH's offsets (four times it bounds what SCRATCH holds). */
  size_t moved = 0;
  int wraps = 0;
  for (int i = 0; i < a->nranks; i++) {
    wraps |= a->sendcounts[i] > SIZE_MAX / 8 - moved;
    moved += wraps ? 0 : a->sendcounts[i];
    wraps |= a->recvcounts[i] > SIZE_MAX / 8 - moved;
    moved += wraps ? 0 : a->recvcounts[i];
  }
  for (size_t i = 0; i < (size_t)m.lsz * (size_t)m.nhosts; i++) {
    wraps |= a->a2av_mates[i] > SIZE_MAX / 8 - moved;
    moved += wraps ? 0 : (size_t)a->a2av_mates[i];
  }
  if (wraps) {
    sc_hier_map_free(&m);
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "hier all-to-allv: the counts of rank %d and its host-mates overflow its "
                  "scratch offsets",
                  r);
  }
  size_t *ooff = malloc(2 * (size_t)m.lsz * sizeof(*ooff));
  if (!ooff) {
    sc_hier_map_free(&m);
    return SC_ERR(SC_ERR_NOMEM, "hier all-to-allv: %d host-mates", m.lsz);
  }
  v_ctx_t c = {.a = a, .m = &m, .s = s, .mates = a->a2av_mates};
  v_phase1(&c, ooff, ooff + m.lsz);
  v_phase2(&c, ooff);
  sc_sched_need_scratch(s, c.at);
  free(ooff);
  sc_hier_map_free(&m);
  return s->status;
}
