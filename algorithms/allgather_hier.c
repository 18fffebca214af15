/* SPDX-License-Identifier: BSD-3-Clause */
/* Hierarchical all-gather for hosts that hold several ranks each: the mirror
 * of reduce_scatter_hier.c, with the same rails (algorithms/hier_map.h; rank
 * d's block travels on the rail of d's local rank). Two phases:
 *   1. each rail runs a ring all-gather across the hosts of the blocks it
 *      serves, straight into their places in RECV: at hop h the member of
 *      host x sends block x-h and receives block x-h-1, forwarding each chunk
 *      as it arrives; the member's own block starts from SEND. A host with no
 *      rank of that local rank has an empty block there and only relays;
 *   2. inside each host every rank sends the blocks of its rails to each
 *      host-mate and receives the others from their rails' members there
 *      (a direct all-gather: one step over shared memory).
 *
 * Why rails first, under the alpha-beta model (alpha_n, beta_n the network's,
 * alpha_l, beta_l shared memory's; a host of L ranks, P ranks on H hosts, n
 * bytes a block). Rails first: (H-1) alpha_n + (P-L) n beta_n through the
 * host's one link (every block from elsewhere enters once, the least there
 * is), then alpha_l + (P - P/L) n beta_l per rank. The host's blocks first
 * (L-1 of them over shared memory) cannot then cross with fewer bytes: each
 * rank would have to fetch all P-L others over the network (L times the
 * link's bytes), or the rails fetch a share each and a third, shared-memory
 * phase spreads them: the same network term plus alpha_l + (L-1) n beta_l
 * more. So rails first, in two phases, is never dearer.
 *
 * Bytes out of host x: every block of each of its rails but the next host's
 * (a ring member forwards all but the block of its right neighbour): P - L of
 * the next host, never above the flat ring's P - 1 from a host whose right
 * neighbour is elsewhere (test/sim/sim_hier.c counts both).
 *
 * Determinism: a copy; every rank holds the same bits.
 *
 * Pipelining: up to SC_AG_HIER_SLICES slices (the same element range of
 * every block); phase 2 of slice t - SC_AG_HIER_LAG goes with phase 1 of
 * slice t, so a host-mate's slow rail of the previous slice does not stall
 * the sends of this one (as allreduce_hier.c's phase 3).
 *
 * Deadlock freedom: every rank emits the tasks (slice, phase) in the same
 * global order. Phase 1: each rank runs its rails in ascending order, as
 * every member of those rails does, and a ring is deadlock-free on its own
 * (allgather.c); by induction on s rail s's members have all finished the
 * rails before it. Phase 2 posts its sends before its receives. A write waits
 * only for sends of an earlier task or hop. On each ordered pair both ends
 * list their messages in task order and, inside a task, in the one block
 * order "rail ascending, then host ascending" (FIFO matching).
 *
 * In place: SEND == RECV + r*count makes the local copy a no-op. With
 * SEND == RECV, slice t of this rank's input is block 0's slice t: it is sent
 * (hop 0 of this rank's first rail, its own) and copied to block r before
 * anything of slice t is received, and the executor waits for that send
 * before block 0's slice t lands. */
#include "algorithms/algorithms.h"
#include "algorithms/hier_map.h"
#include "lib/base/error.h"

#define SC_AG_HIER_SLICES 8
#define SC_AG_HIER_LAG    2

/* Phase 1 for the slice [z0, z0 + zl) of every block. */
static void ag_rails(const sc_coll_args_t *a, const sc_hier_map_t *m, sc_sched_t *s, size_t z0,
                     size_t zl) {
  const size_t n = a->count, chunk = a->chunk_elems;
  const int nh = m->nhosts, x = m->host;
  for (int sh = m->me; sh < m->smax; sh += m->lsz) {
    const int right = sc_hier_owner(m, (x + 1) % nh, sh);
    const int left = sc_hier_owner(m, (x + nh - 1) % nh, sh);
    if (sh == m->me) { /* this rank's own block, on its first rail */
      if (nh > 1) sc_send_chunks(s, right, SC_BUF_SEND, z0, zl, chunk);
      sc_sched_copy(s, SC_BUF_RECV, (size_t)a->rank * n + z0, SC_BUF_SEND, z0, zl);
    }
    for (int hop = 0; hop < nh - 1; hop++) {
      const int d = sc_hier_rail_rank(m, sh, ((x - hop - 1) % nh + nh) % nh);
      if (d < 0) continue;
      const size_t off = (size_t)d * n + z0;
      for (size_t c = 0; c < zl; c += chunk) {
        size_t k = zl - c < chunk ? zl - c : chunk;
        sc_sched_recv(s, left, SC_BUF_RECV, off + c, k);
        if (hop + 1 < nh - 1) sc_sched_send(s, right, SC_BUF_RECV, off + c, k);
      }
    }
  }
}

/* Phase 2 for the slice. */
static void ag_local(const sc_coll_args_t *a, const sc_hier_map_t *m, sc_sched_t *s, size_t z0,
                     size_t zl) {
  const size_t n = a->count, chunk = a->chunk_elems;
  for (int sh = m->me; sh < m->smax; sh += m->lsz)
    for (int y = 0; y < m->nhosts; y++) {
      const int d = sc_hier_rail_rank(m, sh, y);
      for (int q = 0; q < m->lsz && d >= 0; q++)
        if (q != m->me)
          sc_send_chunks(s, sc_hier_member(m, m->host, q), SC_BUF_RECV, (size_t)d * n + z0, zl,
                         chunk);
    }
  for (int sh = 0; sh < m->smax; sh++) {
    const int o = sc_hier_owner(m, m->host, sh);
    if (o == a->rank) continue;
    for (int y = 0; y < m->nhosts; y++) {
      const int d = sc_hier_rail_rank(m, sh, y);
      for (size_t c = 0; c < zl && d >= 0; c += chunk) {
        size_t k = zl - c < chunk ? zl - c : chunk;
        sc_sched_recv(s, o, SC_BUF_RECV, (size_t)d * n + z0 + c, k);
      }
    }
  }
}

sc_result_t sc_hier_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  if (sc_coll_trivial(a, s)) return s->status;
  sc_hier_map_t m;
  sc_result_t r = sc_hier_map_init(a, &m);
  if (r == SC_SUCCESS) {
    const int nk = sc_hier_slices(a->count, a->chunk_elems, 2, SC_AG_HIER_SLICES);
    size_t z0, zl;
    for (int t = 0; t < nk + SC_AG_HIER_LAG; t++) {
      if (t < nk) {
        sc_block_range(a->count, nk, t, &z0, &zl);
        ag_rails(a, &m, s, z0, zl);
      }
      if (t >= SC_AG_HIER_LAG) {
        sc_block_range(a->count, nk, t - SC_AG_HIER_LAG, &z0, &zl);
        ag_local(a, &m, s, z0, zl);
      }
    }
    r = s->status;
  }
  sc_hier_map_free(&m);
  return r;
}
