/* SPDX-License-Identifier: BSD-3-Clause */
/* Hierarchical reduce-scatter for hosts that hold several ranks each.
 *
 * Rank d's block goes to the rail of d's local rank (algorithms/hier_map.h):
 * rail s serves the blocks of the ranks with local rank s, one per host that
 * has one. Two phases:
 *   1. inside each host every rank sends each block to the host's member of
 *      that block's rail (its "owner" there), which reduces the host's
 *      contributions in order of local rank into a scratch slot (a direct
 *      reduce-scatter: one step over shared memory, whatever L);
 *   2. each rail runs a ring reduce-scatter across the hosts, over the
 *      partial sums of the blocks it serves: at hop h the member of host x
 *      sends block x-h-1 and reduces block x-h-2 into its slot, forwarding
 *      each chunk as soon as it is reduced, so the last hop completes block x,
 *      the block of the member itself, straight into RECV. A host with no
 *      rank of that local rank has an empty block there: its member relays
 *      and adds its host's partial sums, and receives nothing for itself.
 * There is no third phase: the rail member of a block's own host is the rank
 * that wants it.
 *
 * Uneven hosts: a rank of a smaller host is the owner for every rail s with
 * s mod L = its local rank, so it carries several rails and its host's
 * contribution to all of them. Each host x sends exactly (P - L_x) blocks out
 * of the host (rail s's member sends every block of the rail but its own,
 * and summed over the rails that is every block not destined to host x): the
 * least any algorithm can, since host x's share of every other host's block
 * must leave it once. A flat ring sends (P - 1) blocks from each host whose
 * right neighbour is elsewhere, so hier is never above it and equal only with
 * one rank per host (test/sim/sim_hier.c counts both).
 *
 * The rails always run a ring: their blocks are not contiguous in SEND and
 * some are empty, which the flat generators' uniform layout cannot express,
 * and with few hosts the ring's H-1 latencies are few.
 *
 * Determinism: each element of block d is summed along one chain, the same on
 * every run: inside each host in order of local rank, then along the rail's
 * ring ending at d. Integer results equal the flat algorithms' bits; floating
 * point ones may differ from them in rounding (another order of the sum), as
 * the flat algorithms differ from each other.
 *
 * Pipelining: large blocks are cut into up to SC_RS_HIER_SLICES slices (the
 * same element range of every block); slice t's phase 1 is emitted before
 * slice t-1's phase 2, so a rank's shared-memory sends of the next slice are
 * in flight while its rail waits on the network.
 *
 * Deadlock freedom (the rounds of docs/ALGORITHMS.md): every rank emits the
 * tasks (slice, phase) in the same global order. Phase 1 posts all its sends
 * before any receive. Phase 2 runs the rails in ascending order on every
 * member, so by induction on s each rail's members have finished the rails
 * before it, and each ring is deadlock-free on its own (reduce_scatter.c's
 * argument). Writes wait only on sends of earlier tasks or earlier hops of
 * the same ring. On each ordered pair both ends list their messages in task
 * order and, inside a task, in the one block order "rail ascending, then host
 * ascending", which is the FIFO matching of the transports.
 *
 * In place: RECV == SEND + r*count is block r, read last, by the reduction
 * that writes it (or earlier, in phase 1); RECV == SEND overlaps block 0,
 * whose slice t is read only by slice t's phase 1 and rail ring before the
 * last hop writes it. */
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/hier_map.h"
#include "lib/base/error.h"

#define SC_RS_HIER_SLICES 8

typedef struct rs_hier {
  const sc_coll_args_t *a;
  sc_hier_map_t m;
  int *slot; /* [nhosts]: the scratch slot of host y's block on the rail at hand, -1: none */
} rs_hier_t;

/* Numbers the blocks of this rank's rails before rail s (slots) and fills
 * h->slot for rail s; returns the slots of rails < s plus those of s. */
static size_t rs_rail_slots(rs_hier_t *h, int s, size_t first) {
  for (int y = 0; y < h->m.nhosts; y++)
    h->slot[y] = sc_hier_rail_rank(&h->m, s, y) >= 0 ? (int)first++ : -1;
  return first;
}

/* Phase 1 for the slice [z0, z0 + zl) of every block. */
static void rs_local(rs_hier_t *h, sc_sched_t *s, size_t z0, size_t zl) {
  const sc_hier_map_t *m = &h->m;
  const size_t n = h->a->count, chunk = h->a->chunk_elems;
  for (int sh = 0; sh < m->smax; sh++) {
    int o = sc_hier_owner(m, m->host, sh);
    if (o == h->a->rank) continue;
    for (int y = 0; y < m->nhosts; y++) {
      int d = sc_hier_rail_rank(m, sh, y);
      if (d >= 0) sc_send_chunks(s, o, SC_BUF_SEND, (size_t)d * n + z0, zl, chunk);
    }
  }
  if (m->lsz == 1) return; /* the rails read SEND directly */
  size_t first = 0;
  for (int sh = m->me; sh < m->smax; sh += m->lsz) {
    first = rs_rail_slots(h, sh, first);
    for (int y = 0; y < m->nhosts; y++) {
      if (h->slot[y] < 0) continue;
      const size_t dst = (size_t)h->slot[y] * n + z0;
      sc_buf_t operand = SC_BUF_SEND;
      size_t op_off = (size_t)sc_hier_rail_rank(m, sh, y) * n + z0;
      for (int q = 0; q < m->lsz; q++) {
        if (q == m->me) continue;
        for (size_t c = 0; c < zl; c += chunk) {
          size_t k = zl - c < chunk ? zl - c : chunk;
          sc_sched_recv_reduce(s, sc_hier_member(m, m->host, q), SC_BUF_SCRATCH, dst + c, operand,
                               op_off + c, k);
        }
        operand = SC_BUF_SCRATCH;
        op_off = dst;
      }
    }
  }
}

/* Where host y's partial sum of its block on rail sh (slice from z0) is:
 * the owner's scratch slot after phase 1, or with no host-mates SEND itself. */
static sc_buf_t rs_partial(const rs_hier_t *h, int sh, int y, size_t z0, size_t *off) {
  const size_t n = h->a->count;
  if (h->m.lsz == 1) {
    *off = (size_t)sc_hier_rail_rank(&h->m, sh, y) * n + z0;
    return SC_BUF_SEND;
  }
  *off = (size_t)h->slot[y] * n + z0;
  return SC_BUF_SCRATCH;
}

/* Phase 2 for the slice: this rank's rails, ascending. */
static void rs_rails(rs_hier_t *h, sc_sched_t *s, size_t z0, size_t zl) {
  const sc_hier_map_t *m = &h->m;
  const size_t n = h->a->count, chunk = h->a->chunk_elems;
  const int nh = m->nhosts, x = m->host;
  size_t first = 0, po;
  for (int sh = m->me; sh < m->smax; sh += m->lsz) {
    first = rs_rail_slots(h, sh, first);
    if (nh == 1) { /* no rail: the host's sum is the result */
      sc_buf_t pb = rs_partial(h, sh, x, z0, &po);
      sc_sched_copy(s, SC_BUF_RECV, z0, pb, po, zl);
      continue;
    }
    const int right = sc_hier_owner(m, (x + 1) % nh, sh);
    const int left = sc_hier_owner(m, (x + nh - 1) % nh, sh);
    const int y0 = (x + nh - 1) % nh;
    if (h->slot[y0] >= 0) {
      sc_buf_t pb = rs_partial(h, sh, y0, z0, &po);
      sc_send_chunks(s, right, pb, po, zl, chunk);
    }
    for (int hop = 0; hop < nh - 1; hop++) {
      const int y = ((x - hop - 2) % nh + nh) % nh;
      if (h->slot[y] < 0) continue;
      const int last = hop == nh - 2; /* then y == x: this rank's own block */
      const sc_buf_t dst = last ? SC_BUF_RECV : SC_BUF_SCRATCH;
      const size_t dst_off = last ? z0 : (size_t)h->slot[y] * n + z0;
      const sc_buf_t pb = rs_partial(h, sh, y, z0, &po);
      for (size_t c = 0; c < zl; c += chunk) {
        size_t k = zl - c < chunk ? zl - c : chunk;
        sc_sched_recv_reduce(s, left, dst, dst_off + c, pb, po + c, k);
        if (!last) sc_sched_send(s, right, SC_BUF_SCRATCH, dst_off + c, k);
      }
    }
  }
}

sc_result_t sc_hier_reduce_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  if (sc_coll_trivial(a, s)) return s->status;
  rs_hier_t h = {.a = a};
  sc_result_t r = sc_hier_map_init(a, &h.m);
  if (r != SC_SUCCESS) goto done;
  h.slot = malloc((size_t)h.m.nhosts * sizeof(int));
  if (!h.slot) {
    r = SC_ERR(SC_ERR_NOMEM, "hier reduce-scatter: %d hosts", h.m.nhosts);
    goto done;
  }
  /* One scratch slot per block of this rank's rails, as long as a block. */
  size_t nslots = 0;
  for (int sh = h.m.me; sh < h.m.smax; sh += h.m.lsz) nslots = rs_rail_slots(&h, sh, nslots);
  sc_sched_need_scratch(s, nslots * a->count);
  const int nk = sc_hier_slices(a->count, a->chunk_elems, 2, SC_RS_HIER_SLICES);
  size_t z0, zl;
  for (int t = 0; t <= nk; t++) {
    if (t < nk) {
      sc_block_range(a->count, nk, t, &z0, &zl);
      rs_local(&h, s, z0, zl);
    }
    if (t >= 1) {
      sc_block_range(a->count, nk, t - 1, &z0, &zl);
      rs_rails(&h, s, z0, zl);
    }
  }
  r = s->status;
done:
  free(h.slot);
  sc_hier_map_free(&h.m);
  return r;
}
