/* SPDX-License-Identifier: BSD-3-Clause */
/* Every dense schedule generator run through the simulator for nranks
 * 1..64, awkward counts, chunk sizes, roots, in-place conventions, dtypes and
 * ops (dense_check.c holds the reference), plus properties checked on the
 * schedules alone: block ranges, argument checks, ring cost, barrier
 * knowledge, and that the simulator itself catches broken schedules.
 * Prints one line per failure and ends with "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "algorithms/algorithms.h"
#include "test/sim/dense_check.h"
#include "test/sim/sched_cost.h"
#include "test/sim/simulator.h"

static const dense_gen_t gens[] = {
    {"ring_allreduce", SC_COLL_ALLREDUCE, sc_ring_allreduce_schedule},
    {"ring_reduce_scatter", SC_COLL_REDUCE_SCATTER, sc_ring_reduce_scatter_schedule},
    {"ring_allgather", SC_COLL_ALLGATHER, sc_ring_allgather_schedule},
    {"chain_broadcast", SC_COLL_BROADCAST, sc_chain_broadcast_schedule},
    {"binomial_broadcast", SC_COLL_BROADCAST, sc_binomial_broadcast_schedule},
    {"chain_reduce", SC_COLL_REDUCE, sc_chain_reduce_schedule},
    {"binomial_reduce", SC_COLL_REDUCE, sc_binomial_reduce_schedule},
};
enum { NGENS = sizeof(gens) / sizeof(gens[0]) };

/* ---- sweeps ------------------------------------------------------------ */

#define ONE_CHUNK ((size_t)1 << 40)

static uint64_t case_seed;

static void run(const dense_gen_t *g, int p, size_t count, size_t chunk, int root, sc_dtype_t dtype,
                sc_redop_t op, dense_place_t place, sc_sim_model_t model) {
  dense_case_t tc = {.gen = g,
                     .nranks = p,
                     .root = root,
                     .count = count,
                     .chunk = chunk,
                     .dtype = dtype,
                     .op = op,
                     .place = place,
                     .model = model,
                     .seed = dense_mix(++case_seed)};
  dense_run_case(&tc);
}

static int has_rank_place(const dense_gen_t *g) {
  return g->coll == SC_COLL_REDUCE_SCATTER || g->coll == SC_COLL_ALLGATHER;
}

static int rooted(const dense_gen_t *g) {
  return g->coll == SC_COLL_BROADCAST || g->coll == SC_COLL_REDUCE;
}

/* Roots to try: all of them on small P, the edges and the middle on large P. */
static int roots_for(const dense_gen_t *g, int p, int *roots) {
  if (!rooted(g)) {
    roots[0] = 0;
    return 1;
  }
  if (p <= 8) {
    for (int i = 0; i < p; i++) roots[i] = i;
    return p;
  }
  roots[0] = 0, roots[1] = 1, roots[2] = p / 2, roots[3] = p - 1;
  return 4;
}

/* Total elements moved by one case, to keep the sweep inside its time budget. */
static size_t case_volume(const dense_gen_t *g, int p, size_t count) {
  return has_rank_place(g) ? (size_t)p * (size_t)p * count : (size_t)p * count;
}

/* Placement and protocol: every generator, every P, awkward counts and chunk
 * sizes, every in-place convention, both send models; int32 random sums make
 * any misplaced or double-counted element visible. Placement and send model
 * rotate over the chunk/root combinations so each (generator, P, count)
 * still sees all of them. */
static void sweep_structure(void) {
  for (int p = 1; p <= 64; p++) {
    const size_t counts[] = {0, 1, (size_t)p - 1, (size_t)p + 1, 13, 1009, 65537};
    const int big_p = p <= 4 || p == 8 || p == 13 || p == 16 || p == 31 || p == 64;
    for (const dense_gen_t *g = gens; g < gens + NGENS; g++) {
      int roots[64];
      int nroots = roots_for(g, p, roots);
      const int nplaces = has_rank_place(g) ? 3 : 2;
      for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t n = counts[ci];
        if (ci == 2 && p <= 1) continue; /* p-1 == 0 already covered */
        if (ci > 3 && (n == (size_t)p - 1 || n == (size_t)p + 1)) continue;
        size_t vol = case_volume(g, p, n);
        if (n == 65537 && (!big_p || vol > ((size_t)1 << 22))) continue;
        const size_t chunks[] = {1, 3, 64, ONE_CHUNK};
        int combo = 0;
        for (size_t k = 0; k < 4; k++) {
          size_t chunk = chunks[k];
          /* Tiny chunks only where the message count stays sane. */
          if (chunk == 1 && vol > 20000) continue;
          if (chunk == 3 && vol > 100000) continue;
          for (int ri = 0; ri < nroots; ri++, combo++) {
            dense_place_t pl = (dense_place_t)(combo % nplaces);
            sc_sim_model_t model = (combo / nplaces) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER;
            run(g, p, n, chunk, roots[ri], SC_INT32, SC_SUM, pl, model);
          }
        }
      }
    }
  }
}

/* Arithmetic: every dtype and op through every reducing generator, and the
 * element sizes through the data movers, on a spread of P. */
static void sweep_dtypes_ops(void) {
  static const int ps[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 33, 64};
  static const sc_dtype_t dtypes[] = {SC_INT32,    SC_INT64,   SC_FLOAT16,
                                      SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
  for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
    int p = ps[pi];
    const size_t counts[] = {(size_t)p + 1, 1009};
    for (const dense_gen_t *g = gens; g < gens + NGENS; g++)
      for (size_t di = 0; di < 6; di++)
        for (sc_redop_t op = SC_SUM; op <= SC_AVG; op++) {
          int reducing = g->coll != SC_COLL_ALLGATHER && g->coll != SC_COLL_BROADCAST;
          if (!reducing && op != SC_SUM) continue;
          for (size_t ci = 0; ci < 2; ci++)
            for (dense_place_t pl = PLACE_OUT; pl <= PLACE_IN_SAME; pl++) {
              if (ci == 1 && has_rank_place(g) && p > 16) continue; /* P*P*count: too big */
              run(g, p, counts[ci], 7, p / 2, dtypes[di], op, pl,
                  (di + (size_t)op + ci) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
            }
        }
  }
}

/* Large messages cut into many chunks. RS and AG take a per-rank count, so
 * they get the large total split across ranks. */
static void sweep_large(void) {
  static const int ps[] = {2, 3, 8, 13};
  const size_t big = ((size_t)1 << 20) + 7;
  for (size_t pi = 0; pi < 4; pi++) {
    int p = ps[pi];
    for (const dense_gen_t *g = gens; g < gens + NGENS; g++) {
      size_t n = has_rank_place(g) ? big / (size_t)p + 3 : big;
      run(g, p, n, 4093, p - 1, SC_INT32, SC_SUM, PLACE_OUT, SC_SIM_RENDEZVOUS);
      run(g, p, n, 65536, p / 2, SC_INT32, SC_SUM, PLACE_IN_SAME, SC_SIM_EAGER);
      if (has_rank_place(g)) run(g, p, n, 10007, 0, SC_INT32, SC_SUM, PLACE_IN_RANK, SC_SIM_EAGER);
    }
    run(&gens[0], p, big, 8191, 0, SC_FLOAT32, SC_AVG, PLACE_IN_SAME, SC_SIM_EAGER);
    run(&gens[0], p, big, 8191, 0, SC_BFLOAT16, SC_SUM, PLACE_OUT, SC_SIM_EAGER);
  }
}

/* ---- properties checked without data ----------------------------------- */

static void test_block_range(void) {
  for (int p = 1; p <= 64; p++)
    for (size_t n = 0; n <= 3 * (size_t)p + 2; n++) {
      size_t next = 0, lo = n / (size_t)p, hi = lo + (n % (size_t)p != 0);
      int ok = 1;
      for (int b = 0; b < p; b++) {
        size_t off, len;
        sc_block_range(n, p, b, &off, &len);
        if (off != next || len < lo || len > hi) ok = 0;
        next = off + len;
      }
      dense_expect(ok && next == n, "sc_block_range P=%d count=%zu: blocks not a near-even tiling",
                   p, n);
    }
}

static void test_bad_args(void) {
  sc_sched_t s;
  sc_sched_init(&s);
  const sc_coll_args_t good = {.nranks = 4, .rank = 1, .root = 2, .count = 10, .chunk_elems = 3};
  for (const dense_gen_t *g = gens; g < gens + NGENS; g++) {
    sc_coll_args_t bad[4] = {good, good, good, good};
    for (int i = 0; i < 4; i++) bad[i].coll = g->coll;
    bad[0].nranks = 0;
    bad[1].rank = 4;
    bad[2].chunk_elems = 0;
    bad[3].root = rooted(g) ? -1 : 0;
    for (int i = 0; i < (rooted(g) ? 4 : 3); i++) {
      sc_sched_reset(&s);
      dense_expect(g->fn(&bad[i], &s) == SC_ERR_INVALID_ARG, "%s accepts bad argument set %d",
                   g->name, i);
    }
  }
  sc_sched_free(&s);
}

/* Ring all-reduce moves 2(P-1)/P of the data per rank: 2(P-1) hops of one
 * block each, one message per chunk of the block. */
static void test_ring_cost(void) {
  const size_t es = 4;
  for (int p = 1; p <= 64; p++) {
    const size_t counts[] = {1, (size_t)p + 1, 1009, 65537, ((size_t)1 << 20) + 7};
    for (size_t ci = 0; ci < 5; ci++)
      for (size_t chunk = 1000; chunk <= 1000000; chunk *= 1000) {
        size_t n = counts[ci], total = 0;
        int ok = 1;
        for (int r = 0; r < p && ok; r++) {
          sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                              .nranks = p,
                              .rank = r,
                              .count = n,
                              .elem_size = es,
                              .chunk_elems = chunk};
          sc_sched_t s;
          sc_sched_cost_t c;
          sc_sched_init(&s);
          ok = sc_ring_allreduce_schedule(&a, &s) == SC_SUCCESS;
          sc_sched_cost(&s, es, &c);
          size_t sends = 0, want_sends = 0;
          for (size_t i = 0; i < s.nsteps; i++) sends += s.steps[i].kind == SC_STEP_SEND;
          for (int h = 0; h < 2 * (p - 1); h++) {
            size_t off, len;
            sc_block_range(n, p, ((r - h) % p + p) % p, &off, &len);
            want_sends += (len + chunk - 1) / chunk;
          }
          size_t lo = 2 * (size_t)(p - 1) * (n / (size_t)p) * es;
          size_t hi = 2 * (size_t)(p - 1) * ((n + (size_t)p - 1) / (size_t)p) * es;
          if (c.bytes_sent < lo || c.bytes_sent > hi || c.bytes_recv < lo || c.bytes_recv > hi ||
              sends != want_sends)
            ok = 0;
          total += c.bytes_sent;
          sc_sched_free(&s);
        }
        dense_expect(
            ok && total == 2 * (size_t)(p - 1) * n * es,
            "ring_allreduce cost P=%d count=%zu chunk=%zu: not 2(P-1)/P of the data per rank "
            "in one message per chunk",
            p, n, chunk);
      }
  }
}

/* A barrier must not let any rank finish before every rank has started. Run
 * it as a knowledge exchange: each message carries the set of ranks known to
 * have arrived (a 0/1 vector merged with MAX); at the end every rank must
 * know all of them. Also runs the real zero-count schedule. */
static void test_barrier(void) {
  for (int p = 1; p <= 64; p++) {
    sc_sched_t *orig = calloc((size_t)p, sizeof(*orig));
    sc_sched_t *know = calloc((size_t)p, sizeof(*know));
    sc_sim_rank_t *sr = calloc((size_t)p, sizeof(*sr));
    int32_t *seen = calloc((size_t)p * (size_t)p, sizeof(*seen));
    char err[1024];
    int ok = orig && know && sr && seen, rounds = 0;
    for (int d = 1; d < p; d <<= 1) rounds++;
    for (int r = 0; r < p && ok; r++) {
      sc_coll_args_t a = {.coll = SC_COLL_BARRIER, .nranks = p, .rank = r, .chunk_elems = 1};
      sc_sched_init(&orig[r]);
      sc_sched_init(&know[r]);
      ok = sc_dissemination_barrier_schedule(&a, &orig[r]) == SC_SUCCESS;
      for (size_t i = 0; i < orig[r].nsteps && ok; i++) {
        const sc_step_t *st = &orig[r].steps[i];
        ok = st->count == 0;
        if (st->kind == SC_STEP_SEND)
          sc_sched_send(&know[r], st->peer, SC_BUF_RECV, 0, (size_t)p);
        else
          sc_sched_recv_reduce(&know[r], st->peer, SC_BUF_RECV, 0, SC_BUF_RECV, 0, (size_t)p);
      }
      sr[r] = (sc_sim_rank_t){.sched = &orig[r]};
    }
    sc_sim_stats_t st = {0};
    sc_sim_config_t cfg = {.nranks = p, .dtype = SC_INT32, .elem_size = 4, .op = SC_MAX};
    if (ok && sc_sim_run(&cfg, sr, &st, err, sizeof(err)) != 0) {
      printf("FAIL barrier P=%d: %s\n", p, err);
      ok = 0;
    }
    dense_expect(ok && st.messages == (size_t)p * (size_t)rounds,
                 "barrier P=%d: %zu messages, want P*ceil(log2 P) zero-count ones", p, st.messages);
    for (int r = 0; r < p && ok; r++) {
      seen[(size_t)r * (size_t)p + (size_t)r] = 1;
      sr[r] = (sc_sim_rank_t){
          .sched = &know[r], .recv = seen + (size_t)r * (size_t)p, .recv_count = (size_t)p};
    }
    /* Eager: the transform writes the vector it just sent, which under the
     * rendezvous model would wait on every neighbour at once. */
    if (ok && sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) != 0) {
      printf("FAIL barrier knowledge P=%d: %s\n", p, err);
      ok = 0;
    }
    size_t known = 0;
    for (size_t i = 0; ok && i < (size_t)p * (size_t)p; i++) known += seen[i] == 1;
    dense_expect(ok && known == (size_t)p * (size_t)p,
                 "barrier P=%d: some rank can leave before all arrive", p);
    for (int r = 0; r < p && orig && know; r++) {
      sc_sched_free(&orig[r]);
      sc_sched_free(&know[r]);
    }
    free(orig);
    free(know);
    free(sr);
    free(seen);
  }
}

/* ---- the simulator catches broken schedules ---------------------------- */

typedef void (*build_fn)(int rank, sc_sched_t *s);

static void bad_deadlock(int r, sc_sched_t *s) {
  sc_sched_recv(s, 1 - r, SC_BUF_RECV, 0, 1);
  sc_sched_send(s, 1 - r, SC_BUF_SEND, 0, 1);
}
static void bad_count(int r, sc_sched_t *s) {
  if (r == 0) sc_sched_send(s, 1, SC_BUF_SEND, 0, 2);
  if (r == 1) sc_sched_recv(s, 0, SC_BUF_RECV, 0, 1);
}
static void bad_bounds(int r, sc_sched_t *s) {
  sc_sched_copy(s, SC_BUF_RECV, 3, SC_BUF_SEND, 0, 2);
}
static void bad_leftover(int r, sc_sched_t *s) {
  if (r == 0) sc_sched_send(s, 1, SC_BUF_SEND, 0, 1);
}
static void bad_peer(int r, sc_sched_t *s) {
  sc_sched_send(s, r, SC_BUF_SEND, 0, 1);
}
static void bad_overlap(int r, sc_sched_t *s) {
  if (r == 0) sc_sched_send(s, 1, SC_BUF_SEND, 0, 2);
  if (r == 1) sc_sched_recv_reduce(s, 0, SC_BUF_RECV, 1, SC_BUF_RECV, 0, 2);
}
static void bad_undeclared_scratch(int r, sc_sched_t *s) {
  sc_sched_copy(s, SC_BUF_SCRATCH, 0, SC_BUF_SEND, 0, 1);
}
/* Writes memory its own unfinished send reads while the peer does the same:
 * fine when sends are buffered, a deadlock when they wait for the receiver. */
static void bad_rendezvous(int r, sc_sched_t *s) {
  sc_sched_send(s, 1 - r, SC_BUF_RECV, 0, 1);
  sc_sched_recv(s, 1 - r, SC_BUF_RECV, 0, 1);
}
static void good_exchange(int r, sc_sched_t *s) {
  sc_sched_send(s, 1 - r, SC_BUF_SEND, 0, 4);
  sc_sched_recv_reduce(s, 1 - r, SC_BUF_RECV, 0, SC_BUF_SEND, 0, 4);
}

static void expect_sim(build_fn build, sc_sim_model_t model, int want_ok, const char *what) {
  int32_t send[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}}, recv[2][4] = {{0}};
  sc_sched_t s[2];
  sc_sim_rank_t sr[2];
  char err[512] = "";
  for (int r = 0; r < 2; r++) {
    sc_sched_init(&s[r]);
    build(r, &s[r]);
    sr[r] = (sc_sim_rank_t){
        .sched = &s[r], .send = send[r], .send_count = 4, .recv = recv[r], .recv_count = 4};
  }
  sc_sim_config_t cfg = {
      .nranks = 2, .dtype = SC_INT32, .elem_size = 4, .op = SC_SUM, .model = model};
  int ok = sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) == 0;
  if (ok && build == good_exchange) ok = recv[0][3] == 44 && recv[1][0] == 11;
  dense_expect(ok == want_ok && (ok || err[0]), "simulator self-test '%s': %s", what,
               ok ? "not caught" : err);
  for (int r = 0; r < 2; r++) sc_sched_free(&s[r]);
}

static void test_simulator(void) {
  expect_sim(good_exchange, SC_SIM_EAGER, 1, "exchange, eager");
  expect_sim(good_exchange, SC_SIM_RENDEZVOUS, 1, "exchange, rendezvous");
  expect_sim(bad_deadlock, SC_SIM_EAGER, 0, "deadlock");
  expect_sim(bad_count, SC_SIM_EAGER, 0, "count mismatch");
  expect_sim(bad_bounds, SC_SIM_EAGER, 0, "out of bounds");
  expect_sim(bad_leftover, SC_SIM_EAGER, 0, "undelivered message");
  expect_sim(bad_peer, SC_SIM_EAGER, 0, "send to self");
  expect_sim(bad_overlap, SC_SIM_EAGER, 0, "partial overlap");
  expect_sim(bad_undeclared_scratch, SC_SIM_EAGER, 0, "undeclared scratch");
  expect_sim(bad_rendezvous, SC_SIM_EAGER, 1, "rendezvous-only deadlock, eager");
  expect_sim(bad_rendezvous, SC_SIM_RENDEZVOUS, 0, "rendezvous-only deadlock");
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
  static const struct {
    const char *name;
    void (*fn)(void);
  } parts[] = {{"simulator", test_simulator},    {"block_range", test_block_range},
               {"bad_args", test_bad_args},      {"ring_cost", test_ring_cost},
               {"barrier", test_barrier},        {"structure", sweep_structure},
               {"dtypes_ops", sweep_dtypes_ops}, {"large", sweep_large}};
  setvbuf(stdout, NULL, _IOLBF, 0);
  double t0 = now();
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    int before = dense_passed + dense_failed;
    double t = now();
    parts[i].fn();
    fprintf(stderr, "%-12s %6d cases %6.2f s\n", parts[i].name,
            dense_passed + dense_failed - before, now() - t);
  }
  fprintf(stderr, "total %.2f s\n", now() - t0);
  printf("%d passed, %d failed\n", dense_passed, dense_failed);
  return dense_failed ? 1 : 0;
}
