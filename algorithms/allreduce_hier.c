/* SPDX-License-Identifier: BSD-3-Clause */
/* Hierarchical all-reduce for hosts that hold several ranks each.
 *
 * The vector is cut into S "shares", S the largest number of ranks on one
 * host. On host h (L ranks) local rank l owns the shares s with s mod L == l:
 * on an even job every rank owns one share, on an uneven one a rank of a
 * smaller host carries several. Three phases:
 *   1. inside each host, every rank sends each share it does not own to the
 *      share's owner, which reduces them (a direct reduce-scatter: one step
 *      over shared memory, whatever L);
 *   2. share s is all-reduced across hosts by its owners (the "rail" of s,
 *      one rank per host) with the flat all-reduce a->rail_algo names (ring
 *      unless the caller says otherwise), in place in RECV;
 *   3. inside each host the owner sends the finished share to the others.
 * Every rank ends with the same bits: each element is reduced once, by one
 * owner chain, and then copied.
 *
 * Pipelining: large vectors are cut into up to SC_HIER_SLICES slices, and
 * slice t's phase 1 is emitted before slice t-1's phase 2 and slice t-3's
 * phase 3, so that the fast intra-host phases of neighbouring slices run
 * while a rail is waiting on the network (the executor runs a rank's steps in
 * order; its sends are in flight while it waits).
 *
 * Deadlock freedom: every rank emits the tasks (slice, phase) in the same
 * global order, and inside a task its sends before the receives that depend
 * on them (phases 1 and 3), or a flat all-reduce that is deadlock-free on its
 * own (phase 2; a rank carrying several shares runs their rails in ascending
 * share order, as every member of those rails does). So the earliest
 * unfinished task always has every message it waits for posted. Per ordered
 * pair of ranks both ends list their messages in the same order (tasks in
 * order, shares ascending), which is the FIFO matching the transports give. */
#include "algorithms/algorithms.h"
#include "algorithms/hier_map.h"
#include "algorithms/registry.h"
#include "lib/base/error.h"

#define SC_HIER_SLICES 32
/* Phase 3 of slice t - SC_HIER_LAG3 goes with phase 1 of slice t: its receives then wait
 * for a host-mate's rail of two slices back, not of the previous one, so one slow rail
 * does not hold every rank of its host at each slice. */
#define SC_HIER_LAG3 3

typedef struct hier {
  const sc_coll_args_t *a;
  sc_hier_map_t m; /* hosts, shares (m.smax) and this rank's place */
  sc_sched_gen_t rail;
  sc_sched_t sub; /* one rail's schedule, translated into s */
} hier_t;

/* Share s of the slice [z0, z0 + zl): its offset and length in the vector. */
static void hier_share(const hier_t *h, size_t z0, size_t zl, int s, size_t *off, size_t *len) {
  sc_block_range(zl, h->m.smax, s, off, len);
  *off += z0;
}

static void hier_reduce_scatter(hier_t *h, sc_sched_t *s, size_t z0, size_t zl) {
  const size_t chunk = h->a->chunk_elems;
  size_t off, len;
  for (int sh = 0; sh < h->m.smax; sh++) {
    hier_share(h, z0, zl, sh, &off, &len);
    int o = sh % h->m.lsz;
    if (o != h->m.me && len)
      sc_send_chunks(s, sc_hier_member(&h->m, h->m.host, o), SC_BUF_SEND, off, len, chunk);
  }
  for (int sh = h->m.me; sh < h->m.smax; sh += h->m.lsz) {
    hier_share(h, z0, zl, sh, &off, &len);
    if (!len) continue;
    if (h->m.lsz == 1) {
      sc_sched_copy(s, SC_BUF_RECV, off, SC_BUF_SEND, off, len);
      continue;
    }
    sc_buf_t operand = SC_BUF_SEND;
    for (int q = 0; q < h->m.lsz; q++) {
      if (q == h->m.me) continue;
      for (size_t c = 0; c < len; c += chunk) {
        size_t n = len - c < chunk ? len - c : chunk;
        sc_sched_recv_reduce(s, sc_hier_member(&h->m, h->m.host, q), SC_BUF_RECV, off + c, operand,
                             off + c, n);
      }
      operand = SC_BUF_RECV;
    }
  }
}

/* The rail schedules of this rank's shares, translated: the rail's ranks
 * are host indices, its SEND and RECV are this share of RECV (in place), its
 * scratch a region of its own. */
static sc_result_t hier_rails(hier_t *h, sc_sched_t *s, size_t z0, size_t zl) {
  if (h->m.nhosts == 1) return s->status;
  size_t off, len, scratch = 0;
  for (int sh = h->m.me; sh < h->m.smax; sh += h->m.lsz) {
    hier_share(h, z0, zl, sh, &off, &len);
    if (!len) continue;
    sc_coll_args_t ra = {.coll = SC_COLL_ALLREDUCE,
                         .nranks = h->m.nhosts,
                         .rank = h->m.host,
                         .count = len,
                         .elem_size = h->a->elem_size,
                         .chunk_elems = h->a->chunk_elems};
    sc_sched_reset(&h->sub);
    SC_CHECK(h->rail(&ra, &h->sub));
    if (h->sub.sp_sets || h->sub.avg_count)
      return SC_ERR(SC_ERR_INTERNAL, "hier: rail schedule is not a plain dense all-reduce");
    for (size_t i = 0; i < h->sub.nsteps; i++) {
      sc_step_t st = h->sub.steps[i];
      if (st.kind > SC_STEP_COPY)
        return SC_ERR(SC_ERR_INTERNAL, "hier: rail step kind %d", (int)st.kind);
      if (st.peer >= 0) st.peer = sc_hier_owner(&h->m, st.peer, sh);
      if (st.buf == SC_BUF_SCRATCH)
        st.off += scratch;
      else
        st.off += off, st.buf = SC_BUF_RECV;
      if (st.kind == SC_STEP_RECV_REDUCE || st.kind == SC_STEP_COPY) {
        if (st.src_buf == SC_BUF_SCRATCH)
          st.src_off += scratch;
        else
          st.src_off += off, st.src_buf = SC_BUF_RECV;
      }
      if (s->status == SC_SUCCESS) {
        /* Appends through the builder keep its growth and sticky status. */
        if (st.kind == SC_STEP_SEND)
          sc_sched_send(s, st.peer, st.buf, st.off, st.count);
        else if (st.kind == SC_STEP_RECV)
          sc_sched_recv(s, st.peer, st.buf, st.off, st.count);
        else if (st.kind == SC_STEP_RECV_REDUCE)
          sc_sched_recv_reduce(s, st.peer, st.buf, st.off, st.src_buf, st.src_off, st.count);
        else
          sc_sched_copy(s, st.buf, st.off, st.src_buf, st.src_off, st.count);
      }
    }
    scratch += h->sub.scratch_count;
    sc_sched_need_scratch(s, scratch);
  }
  return s->status;
}

static void hier_all_gather(hier_t *h, sc_sched_t *s, size_t z0, size_t zl) {
  const size_t chunk = h->a->chunk_elems;
  size_t off, len;
  for (int sh = h->m.me; sh < h->m.smax; sh += h->m.lsz) {
    hier_share(h, z0, zl, sh, &off, &len);
    for (int q = 0; q < h->m.lsz && len; q++)
      if (q != h->m.me)
        sc_send_chunks(s, sc_hier_member(&h->m, h->m.host, q), SC_BUF_RECV, off, len, chunk);
  }
  for (int sh = 0; sh < h->m.smax; sh++) {
    int o = sh % h->m.lsz;
    if (o == h->m.me) continue;
    hier_share(h, z0, zl, sh, &off, &len);
    for (size_t c = 0; c < len; c += chunk) {
      size_t n = len - c < chunk ? len - c : chunk;
      sc_sched_recv(s, sc_hier_member(&h->m, h->m.host, o), SC_BUF_RECV, off + c, n);
    }
  }
}

sc_result_t sc_hier_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  if (sc_coll_trivial(a, s)) return s->status;
  hier_t h = {.a = a};
  sc_sched_init(&h.sub);
  sc_result_t r = sc_hier_map_init(a, &h.m);
  if (r != SC_SUCCESS) goto done;
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(SC_COLL_ALLREDUCE, &n);
  h.rail = a->rail_algo > 0 && a->rail_algo < n && c[a->rail_algo].gen != sc_hier_allreduce_schedule
               ? c[a->rail_algo].gen
               : sc_ring_allreduce_schedule;
  /* A slice gives every share at least a chunk; small vectors are one slice
   * (latency counts more than overlap there). One chunk, not two: the rails
   * then start sooner and the last all-gather is shorter; on the bed's
   * 4 x 2 at 8 MiB, 106-107 ms against 108-109 (perf/README.md). */
  const int nk = sc_hier_slices(a->count / (size_t)h.m.smax, a->chunk_elems, 1, SC_HIER_SLICES);
  size_t z0, zl;
  for (int t = 0; t < nk + SC_HIER_LAG3 && r == SC_SUCCESS; t++) {
    if (t < nk) {
      sc_block_range(a->count, nk, t, &z0, &zl);
      hier_reduce_scatter(&h, s, z0, zl);
    }
    if (t >= 1 && t - 1 < nk) {
      sc_block_range(a->count, nk, t - 1, &z0, &zl);
      r = hier_rails(&h, s, z0, zl);
    }
    if (t >= SC_HIER_LAG3) {
      sc_block_range(a->count, nk, t - SC_HIER_LAG3, &z0, &zl);
      hier_all_gather(&h, s, z0, zl);
    }
  }
  if (r == SC_SUCCESS) r = s->status;
done:
  sc_sched_free(&h.sub);
  sc_hier_map_free(&h.m);
  return r;
}
