/* SPDX-License-Identifier: BSD-3-Clause */
/* The hierarchical all-reduce, reduce-scatter and all-gather run through the
 * simulator (both send models) on every host map of 1..8 ranks on 1..4 hosts
 * that can be told apart by shape: hosts of consecutive ranks (even and
 * uneven), ranks dealt round robin, and random maps; every rail algorithm
 * (all-reduce); awkward counts and chunks; every dtype and op dense_check
 * knows, in place (both conventions for RS and AG) and out of place; against
 * dense_check's reference. Plus properties read off the schedules: the bytes
 * that leave each host (the point of the hierarchy: all-reduce 2(H-1)/H of
 * the vector per host, where a flat ring sends 2(P-1)/P; reduce-scatter P-L
 * blocks from a host of L ranks, all-gather P-L of the next host's, where a
 * flat ring sends P-1), host maps the generator must refuse, and the cost
 * model's view (hier priced below the flat algorithms on a network with fast
 * intra-host links, and not a candidate without a hierarchy).
 * Prints one line per failure and ends with "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "lib/tune/tune.h"
#include "test/sim/dense_check.h"
#include "test/sim/simulator.h"

#define MAXP 8

/* The generator under test reads the map and the rail from here: dense_check
 * builds every rank's arguments itself. */
static int g_map[MAXP];
static int g_rail;

static sc_result_t hier_gen_fn(const sc_coll_args_t *a, sc_sched_t *s) {
  sc_coll_args_t b = *a;
  b.host_of = g_map;
  b.rail_algo = g_rail;
  return sc_hier_allreduce_schedule(&b, s);
}

static sc_result_t hier_rs_fn(const sc_coll_args_t *a, sc_sched_t *s) {
  sc_coll_args_t b = *a;
  b.host_of = g_map;
  return sc_hier_reduce_scatter_schedule(&b, s);
}

static sc_result_t hier_ag_fn(const sc_coll_args_t *a, sc_sched_t *s) {
  sc_coll_args_t b = *a;
  b.host_of = g_map;
  return sc_hier_allgather_schedule(&b, s);
}

static const dense_gen_t hier_gen = {"hier_allreduce", SC_COLL_ALLREDUCE, hier_gen_fn};
static const dense_gen_t hier_rs_gen = {"hier_reduce_scatter", SC_COLL_REDUCE_SCATTER, hier_rs_fn};
static const dense_gen_t hier_ag_gen = {"hier_allgather", SC_COLL_ALLGATHER, hier_ag_fn};
static uint64_t case_seed;

static void run_gen(const dense_gen_t *gen, int p, size_t count, size_t chunk, sc_dtype_t dtype,
                    sc_redop_t op, dense_place_t place, sc_sim_model_t model) {
  dense_case_t tc = {.gen = gen,
                     .nranks = p,
                     .count = count,
                     .chunk = chunk,
                     .dtype = dtype,
                     .op = op,
                     .place = place,
                     .model = model,
                     .seed = dense_mix(++case_seed)};
  dense_run_case(&tc);
}

static void run(int p, size_t count, size_t chunk, sc_dtype_t dtype, sc_redop_t op,
                dense_place_t place, sc_sim_model_t model) {
  run_gen(&hier_gen, p, count, chunk, dtype, op, place, model);
}

/* Renumbers hosts in the order of their lowest rank (the generator's contract). */
static int normalize(int p, const int *raw, int *map) {
  int seen[MAXP], n = 0;
  for (int r = 0; r < p; r++) {
    int h = -1;
    for (int i = 0; i < n; i++)
      if (seen[i] == raw[r]) h = i;
    if (h < 0) {
      seen[n] = raw[r];
      h = n++;
    }
    map[r] = h;
  }
  return n;
}

/* Maps of p ranks on h hosts: kind 0 consecutive even-ish blocks, 1 the
 * same with the big host last (uneven the other way), 2 round robin, 3..
 * random (seeded by kind). */
static int make_map(int p, int h, int kind, int *map) {
  int raw[MAXP];
  for (int r = 0; r < p; r++) {
    if (kind == 0)
      raw[r] = r * h / p;
    else if (kind == 1)
      raw[r] = h - 1 - (p - 1 - r) * h / p;
    else if (kind == 2)
      raw[r] = r % h;
    else
      raw[r] = (int)(dense_mix((uint64_t)(kind * 131 + p * 17 + h * 3 + r)) % (uint64_t)h);
  }
  return normalize(p, raw, map);
}

static void map_name(int p, char *buf, size_t n) {
  size_t u = 0;
  for (int r = 0; r < p && u < n; r++) u += (size_t)snprintf(buf + u, n - u, "%d", g_map[r]);
}

/* Every map shape, every rail, awkward counts and chunk sizes, both
 * placements and send models. */
static void sweep_maps(void) {
  for (int p = 1; p <= MAXP; p++)
    for (int h = 1; h <= 4 && h <= p; h++)
      for (int kind = 0; kind < 6; kind++) {
        make_map(p, h, kind, g_map);
        const size_t counts[] = {0, 1, (size_t)p + 1, 13, 1009, 40000};
        const size_t chunks[] = {1, 3, 64, (size_t)1 << 40};
        for (int rail = 0; rail < 4; rail++) {
          g_rail = rail;
          for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
              if (chunks[k] <= 3 && counts[ci] > 2000) continue;
              if ((rail + (int)k + (int)ci) % 2 && counts[ci] > 2000) continue;
              sc_sim_model_t m = (k + ci + (size_t)rail) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER;
              run(p, counts[ci], chunks[k], SC_INT32, SC_SUM, PLACE_OUT, m);
              run(p, counts[ci], chunks[k], SC_INT32, SC_SUM, PLACE_IN_SAME,
                  m == SC_SIM_EAGER ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
            }
        }
      }
}

/* Large vectors: many slices of many chunks. */
static void sweep_large(void) {
  static const int maps[][MAXP + 1] = {{8, 0, 0, 1, 1, 2, 2, 3, 3}, {6, 0, 0, 0, 1, 1, 2}};
  for (size_t mi = 0; mi < 2; mi++) {
    const int p = maps[mi][0];
    memcpy(g_map, maps[mi] + 1, (size_t)p * sizeof(int));
    g_rail = (int)mi;
    run(p, ((size_t)1 << 20) + 7, 4093, SC_INT32, SC_SUM, PLACE_OUT, SC_SIM_RENDEZVOUS);
    run(p, ((size_t)1 << 20) + 7, 65536, SC_FLOAT32, SC_AVG, PLACE_IN_SAME, SC_SIM_EAGER);
  }
}

/* Bytes each host sends to other hosts, summed over its ranks' schedules. */
static void host_out_bytes_of(sc_coll_t coll, sc_sched_gen_t gen, const int *map, int p, int rail,
                              size_t n, size_t *out) {
  memset(out, 0, MAXP * sizeof(size_t));
  for (int r = 0; r < p; r++) {
    sc_coll_args_t a = {.coll = coll,
                        .nranks = p,
                        .rank = r,
                        .count = n,
                        .elem_size = 4,
                        .chunk_elems = 4096,
                        .host_of = map,
                        .rail_algo = rail};
    sc_sched_t s;
    sc_sched_init(&s);
    dense_expect(gen(&a, &s) == SC_SUCCESS, "schedule of rank %d", r);
    for (size_t i = 0; i < s.nsteps; i++)
      if (s.steps[i].kind == SC_STEP_SEND && map[s.steps[i].peer] != map[r])
        out[map[r]] += s.steps[i].count * 4;
    sc_sched_free(&s);
  }
}

static void host_out_bytes(sc_sched_gen_t gen, const int *map, int p, int rail, size_t n,
                           size_t *out) {
  host_out_bytes_of(SC_COLL_ALLREDUCE, gen, map, p, rail, n, out);
}

/* The traffic bound of the issue: with ring rails each host sends
 * 2(H-1)/H of the vector to other hosts (up to rounding of shares and
 * blocks), where the flat ring over consecutive hosts sends
 * 2(P-1)/P * (ranks of the host at a boundary)... measured, not assumed:
 * the flat ring's own count from its schedules. */
static void test_traffic(void) {
  static const int maps[][MAXP + 1] = {
      {8, 0, 0, 1, 1, 2, 2, 3, 3}, {8, 0, 0, 0, 0, 1, 1, 1, 1}, {7, 0, 0, 0, 1, 1, 2, 2}};
  const size_t n = 1 << 20;
  for (size_t mi = 0; mi < sizeof(maps) / sizeof(maps[0]); mi++) {
    const int p = maps[mi][0];
    const int *map = maps[mi] + 1;
    int h = map[p - 1] + 1;
    size_t hier[MAXP], ring[MAXP];
    host_out_bytes(sc_hier_allreduce_schedule, map, p, 0, n, hier);
    host_out_bytes(sc_ring_allreduce_schedule, map, p, 0, n, ring);
    const double bound = 2.0 * (h - 1) / h * (double)n * 4;
    for (int x = 0; x < h; x++) {
      dense_expect(fabs((double)hier[x] - bound) <= 64.0 * p * h,
                   "map %zu host %d: hier sends %zu B to other hosts, want %.0f", mi, x, hier[x],
                   bound);
      dense_expect(hier[x] < ring[x], "map %zu host %d: hier %zu B not below the ring's %zu B", mi,
                   x, hier[x], ring[x]);
    }
  }
}

/* Host maps that break the numbering rule are refused, not mis-scheduled. */
static void test_args(void) {
  static const int bad[][4] = {{1, 0, 0, 1}, {0, 2, 1, 1}, {0, -1, 0, 0}, {0, 0, 1, 3}};
  for (size_t i = 0; i < 4; i++) {
    sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                        .nranks = 4,
                        .rank = 0,
                        .count = 100,
                        .elem_size = 4,
                        .chunk_elems = 16,
                        .host_of = bad[i]};
    sc_sched_t s;
    sc_sched_init(&s);
    dense_expect(sc_hier_allreduce_schedule(&a, &s) == SC_ERR_INVALID_ARG,
                 "bad host map %zu accepted", i);
    sc_sched_free(&s);
  }
  /* sc_hier_useful: several hosts and one with several ranks. */
  static const struct {
    int p, map[MAXP], useful;
  } u[] = {{4, {0, 0, 0, 0}, 0}, {4, {0, 1, 2, 3}, 0}, {4, {0, 0, 1, 1}, 1},
           {3, {0, 1, 0}, 1},    {2, {0, 1}, 0},       {5, {0, 1, 2, 3, 0}, 1}};
  for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
    sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE, .nranks = u[i].p, .host_of = u[i].map};
    dense_expect(sc_hier_useful(&a) == u[i].useful, "sc_hier_useful case %zu", i);
  }
  sc_coll_args_t none = {.coll = SC_COLL_ALLREDUCE, .nranks = 4};
  dense_expect(!sc_hier_useful(&none), "sc_hier_useful without a map");
}

/* The network model at 1 Gbit/s, with shared memory's links inside hosts. */
static void gbit_model(sc_link_model_t *m) {
  sc_tune_default_model(SC_TUNE_NET, 0, 0, m);
  m->beta_s_per_b = m->host_s_per_b = 1.0 / 125e6;
  sc_link_model_t mem;
  sc_tune_default_model(SC_TUNE_HOST_MEM, 2, 0, &mem);
  m->local_alpha_s = mem.alpha_s;
  m->local_beta_s_per_b = mem.beta_s_per_b;
}

/* The cost model: 4 hosts x 2 ranks, 64 MiB, a 1 Gbit/s network and memory
 * links inside hosts: hier is cheaper than every flat algorithm (its
 * network bytes per host are 1.5 vectors, the ring's 1.75) and is picked;
 * without a map, or on one host, it is no candidate. */
static void test_cost(void) {
  sc_link_model_t m;
  gbit_model(&m);
  static const int map[MAXP] = {0, 0, 1, 1, 2, 2, 3, 3};
  sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                      .nranks = 8,
                      .count = (size_t)16 << 20,
                      .elem_size = 4,
                      .chunk_elems = 131072,
                      .host_of = map};
  int best, n;
  double est[SC_TUNE_MAX_CANDIDATES];
  const sc_algo_entry_t *c = sc_algo_candidates(SC_COLL_ALLREDUCE, &n);
  int hier = sc_algo_find(SC_COLL_ALLREDUCE, "hier");
  dense_expect(hier >= 0 && c[hier].gen == sc_hier_allreduce_schedule, "hier is registered");
  dense_expect(sc_tune_best(&m, &a, &best, est) == SC_SUCCESS, "sc_tune_best on 4x2");
  dense_expect(best == hier, "4x2 64 MiB: model picks %s, not hier", c[best].name);
  for (int i = 0; i < n; i++)
    if (i != hier)
      dense_expect(est[hier] < est[i], "4x2 64 MiB: hier %.4f s not below %s %.4f s", est[hier],
                   c[i].name, est[i]);
  /* The ring's network bytes per host bound it from below: 1.75 vectors. */
  dense_expect(est[0] >= 1.75 * 64e6 / 125e6 * 0.99, "ring priced %.4f s, below its bytes", est[0]);
  a.host_of = NULL;
  dense_expect(sc_tune_best(&m, &a, &best, est) == SC_SUCCESS && isinf(est[hier]),
               "without a host map hier is no candidate");
  static const int one[MAXP] = {0};
  a.host_of = one;
  dense_expect(sc_tune_best(&m, &a, &best, est) == SC_SUCCESS && isinf(est[hier]),
               "on one host hier is no candidate");
}

/* The replay of a host's shared link, and the rails' algorithm (lib/tune/):
 * - bytes negligible: hier with ring rails on H hosts x 2 is the rails'
 *   2 (H - 1) network hops, one after another; booking one rank's later
 *   message on its host's link before its host-mate's earlier one (the replay
 *   order, not the time order) priced it 3 (H - 1);
 * - two rails sharing a link keep it busy while each waits for its message
 *   (alpha below one message's time): their bytes plus the first and last
 *   latency;
 * - the rails run the candidate with which the whole schedule replays
 *   fastest: every flat candidate priced by hand, each with its factor. */
static void test_rail_cost(void) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(SC_COLL_ALLREDUCE, &n);
  const int hier = sc_algo_find(SC_COLL_ALLREDUCE, "hier");
  const int ring = sc_algo_find(SC_COLL_ALLREDUCE, "ring");
  dense_expect(hier >= 0 && ring >= 0, "hier and ring are registered");
  if (hier < 0 || ring < 0) return;
  sc_link_model_t m;
  gbit_model(&m);
  const double alpha = m.alpha_s;
  sc_link_model_t lat = m;
  lat.beta_s_per_b = lat.host_s_per_b = 1e-15;
  lat.local_alpha_s = 1e-9;
  lat.local_beta_s_per_b = 1e-15;
  lat.gamma_s_per_b = 1e-15;
  int map[MAXP];
  for (int h = 2; h <= 4; h++) {
    for (int r = 0; r < 2 * h; r++) map[r] = r / 2;
    sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                        .nranks = 2 * h,
                        .count = 4096,
                        .elem_size = 4,
                        .chunk_elems = 131072,
                        .host_of = map,
                        .rail_algo = ring};
    double t = -1;
    const double hops = 2.0 * (h - 1) * alpha;
    const int ok = sc_tune_predict(&lat, sc_hier_allreduce_schedule, &a, &t) == SC_SUCCESS;
    dense_expect(ok && t >= hops && t <= hops + 1e-6,
                 "%dx2 latency only: hier/ring %.1f us, its hops %.1f us", h, t * 1e6, hops * 1e6);
  }
  for (int r = 0; r < 8; r++) map[r] = r / 2;
  sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                      .nranks = 8,
                      .count = 16384, /* 64 KiB: one slice, 8 KiB ring steps on the rails */
                      .elem_size = 4,
                      .chunk_elems = 131072,
                      .host_of = map,
                      .rail_algo = ring};
  double t = -1;
  const double bytes = 2 * 1.5 * 32768 * m.beta_s_per_b; /* two rails through a host's link */
  dense_expect(8192 * m.beta_s_per_b > alpha, "a rail's message outlasts alpha");
  const int ok = sc_tune_predict(&m, sc_hier_allreduce_schedule, &a, &t) == SC_SUCCESS;
  dense_expect(ok && t >= bytes && t <= bytes + 2 * alpha + 20e-6,
               "4x2 64 KiB hier/ring %.1f us, its link %.1f us + 2 alpha %.1f us", t * 1e6,
               bytes * 1e6, 2 * alpha * 1e6);
  const size_t counts[] = {1024, 16384, 262144, (size_t)1 << 20};
  for (int f = 0; f < 2; f++) {
    /* f = 1: measured factors that make the butterflies dearer, as on the bed. */
    for (int i = 0; f && i < n && i < SC_TUNE_MAX_CANDIDATES; i++)
      m.allreduce_beta_scale[i] = i == ring ? 1.0 : 1.0 + 0.1 * i;
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
      a.count = counts[k];
      double best_s = INFINITY, est[SC_TUNE_MAX_CANDIDATES], got;
      int want = -1, best;
      for (int j = 0; j < n; j++) {
        if (c[j].hier) continue;
        sc_link_model_t mj = m;
        if (j < SC_TUNE_MAX_CANDIDATES && m.allreduce_beta_scale[j] > 0)
          mj.beta_s_per_b *= m.allreduce_beta_scale[j];
        a.rail_algo = j;
        double s;
        if (sc_tune_predict(&mj, sc_hier_allreduce_schedule, &a, &s) == SC_SUCCESS && s < best_s)
          best_s = s, want = j;
      }
      a.rail_algo = 0;
      const int rail = sc_tune_hier_rail(&m, &a, &got);
      const int ok_best = sc_tune_best(&m, &a, &best, est) == SC_SUCCESS;
      dense_expect(rail == want && got == best_s,
                   "%zu B, factors %d: rails %s at %.1f us, the cheapest is %s at %.1f us",
                   counts[k] * 4, f, c[rail].name, got * 1e6, want >= 0 ? c[want].name : "none",
                   best_s * 1e6);
      dense_expect(ok_best && est[hier] == best_s,
                   "%zu B: sc_tune_best prices hier at %.1f us, its best rails %.1f us",
                   counts[k] * 4, est[hier] * 1e6, best_s * 1e6);
    }
  }
  double got = 0;
  a.host_of = NULL;
  const int rail = sc_tune_hier_rail(&m, &a, &got);
  dense_expect(rail == 0 && isinf(got), "no host map: ring rails");
}

/* ---- reduce-scatter and all-gather -------------------------------------- */

/* Every map shape, awkward counts (per block: 0, 1, primes, and one that
 * cuts into many slices) and chunks, all three placements, both send models. */
static void sweep_maps_rs_ag(void) {
  for (int p = 1; p <= MAXP; p++)
    for (int h = 1; h <= 4 && h <= p; h++)
      for (int kind = 0; kind < 6; kind++) {
        make_map(p, h, kind, g_map);
        const size_t counts[] = {0, 1, 2, (size_t)p + 1, 13, 1009, 20011};
        const size_t chunks[] = {1, 3, 64, (size_t)1 << 40};
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
          for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
            if (chunks[k] <= 3 && counts[ci] > 200) continue;
            if (counts[ci] > 2000 && (k + (size_t)kind) % 2) continue;
            for (dense_place_t pl = PLACE_OUT; pl <= PLACE_IN_RANK; pl++) {
              sc_sim_model_t m = (k + ci + (size_t)pl) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER;
              run_gen(&hier_rs_gen, p, counts[ci], chunks[k], SC_INT32, SC_SUM, pl, m);
              run_gen(&hier_ag_gen, p, counts[ci], chunks[k], SC_INT32, SC_SUM, pl,
                      m == SC_SIM_EAGER ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
            }
          }
      }
}

/* Arithmetic: every dtype and op (all-reduce, reduce-scatter), every dtype
 * (all-gather), every placement, on even, uneven and interleaved maps and
 * ones with single-rank hosts (whose reduce-scatter rails read SEND). */
static void sweep_dtypes_ops(void) {
  static const int maps[][MAXP + 1] = {
      {8, 0, 0, 1, 1, 2, 2, 3, 3}, /* 4 hosts x 2 */
      {7, 0, 0, 0, 1, 1, 2, 2},    /* 3 + 2 + 2 */
      {5, 0, 1, 0, 1, 1},          /* interleaved, 2 + 3 */
      {6, 0, 1, 1, 1, 1, 2},       /* 1 + 4 + 1 */
      {8, 0, 1, 2, 0, 2, 2, 1, 0}, /* random-looking, 3 + 2 + 3 */
  };
  static const sc_dtype_t dtypes[] = {SC_INT32,    SC_INT64,   SC_FLOAT16,
                                      SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
  g_rail = 0;
  for (size_t mi = 0; mi < sizeof(maps) / sizeof(maps[0]); mi++) {
    const int p = maps[mi][0];
    memcpy(g_map, maps[mi] + 1, (size_t)p * sizeof(int));
    for (size_t di = 0; di < 6; di++)
      for (dense_place_t pl = PLACE_OUT; pl <= PLACE_IN_RANK; pl++) {
        for (sc_redop_t op = SC_SUM; op <= SC_AVG; op++) {
          sc_sim_model_t m = (di + (size_t)op + (size_t)pl) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER;
          if (pl != PLACE_IN_RANK) run(p, 1009, 7, dtypes[di], op, pl, m);
          run_gen(&hier_rs_gen, p, 1009, 7, dtypes[di], op, pl, m);
        }
        run_gen(&hier_ag_gen, p, 1009, 7, dtypes[di], SC_SUM, pl,
                (di + (size_t)pl) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
      }
  }
}

/* Large blocks: many slices of many chunks. */
static void sweep_large_rs_ag(void) {
  static const int maps[][MAXP + 1] = {{8, 0, 0, 1, 1, 2, 2, 3, 3}, {6, 0, 0, 0, 1, 1, 2}};
  for (size_t mi = 0; mi < 2; mi++) {
    const int p = maps[mi][0];
    memcpy(g_map, maps[mi] + 1, (size_t)p * sizeof(int));
    const size_t n = ((size_t)1 << 17) + 7;
    run_gen(&hier_rs_gen, p, n, 4093, SC_INT32, SC_SUM, PLACE_IN_RANK, SC_SIM_RENDEZVOUS);
    run_gen(&hier_rs_gen, p, n, 8192, SC_FLOAT32, SC_AVG, PLACE_IN_SAME, SC_SIM_EAGER);
    run_gen(&hier_ag_gen, p, n, 4093, SC_INT32, SC_SUM, PLACE_IN_SAME, SC_SIM_RENDEZVOUS);
    run_gen(&hier_ag_gen, p, n, 8192, SC_FLOAT64, SC_SUM, PLACE_IN_RANK, SC_SIM_EAGER);
  }
}

/* Bytes out of each host, n elements a block: reduce-scatter exactly P - L_x
 * blocks from host x (every block but its own ranks', the least possible),
 * all-gather exactly P - L_(x+1) (every block but those of the next host on
 * the rails' ring); never above the flat ring's, and below it wherever that
 * host (RS) or the next (AG) holds several ranks. */
static void test_traffic_rs_ag(void) {
  static const int maps[][MAXP + 1] = {{8, 0, 0, 1, 1, 2, 2, 3, 3},
                                       {8, 0, 0, 0, 0, 1, 1, 1, 1},
                                       {7, 0, 0, 0, 1, 1, 2, 2},
                                       {6, 0, 1, 1, 1, 1, 2},
                                       {5, 0, 1, 0, 1, 1},
                                       {8, 0, 1, 2, 3, 0, 1, 2, 3},
                                       {4, 0, 1, 2, 3}};
  const size_t n = 100003, es = 4;
  for (size_t mi = 0; mi < sizeof(maps) / sizeof(maps[0]); mi++) {
    const int p = maps[mi][0];
    const int *map = maps[mi] + 1;
    int h = 0, l[MAXP] = {0};
    for (int r = 0; r < p; r++) {
      if (map[r] >= h) h = map[r] + 1;
      l[map[r]]++;
    }
    size_t hier[MAXP], ring[MAXP];
    host_out_bytes_of(SC_COLL_REDUCE_SCATTER, sc_hier_reduce_scatter_schedule, map, p, 0, n, hier);
    host_out_bytes_of(SC_COLL_REDUCE_SCATTER, sc_ring_reduce_scatter_schedule, map, p, 0, n, ring);
    for (int x = 0; x < h && h > 1; x++) {
      dense_expect(hier[x] == (size_t)(p - l[x]) * n * es,
                   "RS map %zu host %d: hier sends %zu B to other hosts, want %zu", mi, x, hier[x],
                   (size_t)(p - l[x]) * n * es);
      dense_expect(l[x] > 1 ? hier[x] < ring[x] : hier[x] <= ring[x],
                   "RS map %zu host %d: hier %zu B, the ring %zu B", mi, x, hier[x], ring[x]);
    }
    host_out_bytes_of(SC_COLL_ALLGATHER, sc_hier_allgather_schedule, map, p, 0, n, hier);
    host_out_bytes_of(SC_COLL_ALLGATHER, sc_ring_allgather_schedule, map, p, 0, n, ring);
    for (int x = 0; x < h && h > 1; x++) {
      const int next = l[(x + 1) % h];
      dense_expect(hier[x] == (size_t)(p - next) * n * es,
                   "AG map %zu host %d: hier sends %zu B to other hosts, want %zu", mi, x, hier[x],
                   (size_t)(p - next) * n * es);
      dense_expect(next > 1 ? hier[x] < ring[x] : hier[x] <= ring[x],
                   "AG map %zu host %d: hier %zu B, the ring %zu B", mi, x, hier[x], ring[x]);
    }
  }
}

/* The cost model prices reduce-scatter and all-gather hier like the
 * all-reduce's: picked on 4 x 2 for 64 MiB (of the whole P-block array), no
 * candidate without a map or on one host; and both are registered. */
static void test_cost_rs_ag(void) {
  sc_link_model_t m;
  gbit_model(&m);
  static const int map[MAXP] = {0, 0, 1, 1, 2, 2, 3, 3};
  static const int one[MAXP] = {0};
  const sc_coll_t colls[] = {SC_COLL_REDUCE_SCATTER, SC_COLL_ALLGATHER};
  const sc_sched_gen_t gens[] = {sc_hier_reduce_scatter_schedule, sc_hier_allgather_schedule};
  for (int ci = 0; ci < 2; ci++) {
    const char *name = sc_coll_name(colls[ci]);
    sc_coll_args_t a = {.coll = colls[ci],
                        .nranks = 8,
                        .count = (size_t)2 << 20, /* 8 MiB a block */
                        .elem_size = 4,
                        .chunk_elems = 131072,
                        .host_of = map};
    int best, n;
    double est[SC_TUNE_MAX_CANDIDATES];
    const sc_algo_entry_t *c = sc_algo_candidates(colls[ci], &n);
    int hier = sc_algo_find(colls[ci], "hier");
    dense_expect(hier >= 0 && c[hier].gen == gens[ci] && c[hier].hier &&
                     sc_algo_hier_index(colls[ci]) == hier,
                 "%s hier is registered", name);
    if (hier < 0) continue;
    dense_expect(sc_tune_best(&m, &a, &best, est) == SC_SUCCESS, "%s sc_tune_best on 4x2", name);
    dense_expect(best == hier, "%s 4x2 64 MiB: model picks %s, not hier", name, c[best].name);
    for (int i = 0; i < n; i++)
      if (i != hier)
        dense_expect(est[hier] < est[i], "%s 4x2 64 MiB: hier %.4f s not below %s %.4f s", name,
                     est[hier], c[i].name, est[i]);
    a.host_of = NULL;
    dense_expect(sc_tune_best(&m, &a, &best, est) == SC_SUCCESS && isinf(est[hier]),
                 "%s: without a host map hier is no candidate", name);
    a.host_of = one;
    dense_expect(sc_tune_best(&m, &a, &best, est) == SC_SUCCESS && isinf(est[hier]),
                 "%s: on one host hier is no candidate", name);
  }
}

int main(void) {
  static const struct {
    const char *name;
    void (*fn)(void);
  } parts[] = {{"args", test_args},
               {"traffic", test_traffic},
               {"cost", test_cost},
               {"rail_cost", test_rail_cost},
               {"maps", sweep_maps},
               {"dtypes_ops", sweep_dtypes_ops},
               {"large", sweep_large},
               {"rs_ag_traffic", test_traffic_rs_ag},
               {"rs_ag_cost", test_cost_rs_ag},
               {"rs_ag_maps", sweep_maps_rs_ag},
               {"rs_ag_large", sweep_large_rs_ag}};
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    int before = dense_passed + dense_failed, fbefore = dense_failed;
    parts[i].fn();
    fprintf(stderr, "%-12s %6d cases%s\n", parts[i].name, dense_passed + dense_failed - before,
            dense_failed > fbefore ? " (failures)" : "");
    if (dense_failed > fbefore && dense_failed - fbefore > 0) {
      char m[MAXP * 2 + 1] = "";
      map_name(MAXP, m, sizeof(m));
      fprintf(stderr, "  last map %s rail %d\n", m, g_rail);
    }
  }
  printf("%d passed, %d failed\n", dense_passed, dense_failed);
  return dense_failed ? 1 : 0;
}
