/* SPDX-License-Identifier: BSD-3-Clause */
/* Recursive doubling and Rabenseifner (all-reduce, and the reduce-scatter and
 * all-gather halves) through the schedule simulator for nranks 1..64,
 * awkward counts, chunk sizes, every in-place convention and both send
 * models (dense_check.c holds the reference); then that both all-reduces
 * leave byte-identical results on every rank, run after run, with random
 * floats; then their cost per rank from sc_sched_cost.
 * Prints one line per failure and ends with "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/algorithms.h"
#include "test/sim/dense_check.h"
#include "test/sim/sched_cost.h"
#include "test/sim/simulator.h"

static const dense_gen_t gens[] = {
    {"rd_allreduce", SC_COLL_ALLREDUCE, sc_rd_allreduce_schedule},
    {"rabenseifner_allreduce", SC_COLL_ALLREDUCE, sc_rabenseifner_allreduce_schedule},
    {"rh_reduce_scatter", SC_COLL_REDUCE_SCATTER, sc_rh_reduce_scatter_schedule},
    {"rd_allgather", SC_COLL_ALLGATHER, sc_rd_allgather_schedule},
};
enum { NGENS = sizeof(gens) / sizeof(gens[0]) };
static const dense_gen_t *const rd_gen = &gens[0], *const rab_gen = &gens[1];
static const dense_gen_t *const rs_gen = &gens[2], *const ag_gen = &gens[3];

#define ONE_CHUNK ((size_t)1 << 40)

static uint64_t case_seed;

static void run(const dense_gen_t *g, int p, size_t count, size_t chunk, sc_dtype_t dtype,
                sc_redop_t op, dense_place_t place, sc_sim_model_t model) {
  dense_case_t tc = {.gen = g,
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

static int has_rank_place(const dense_gen_t *g) {
  return g->coll == SC_COLL_REDUCE_SCATTER || g->coll == SC_COLL_ALLGATHER;
}

static int pow2_floor(int p) {
  int q = 1;
  while (q <= p / 2) q *= 2;
  return q;
}

static int log2_exact(int q) {
  int l = 0;
  while ((1 << l) < q) l++;
  return l;
}

/* ---- sweeps ------------------------------------------------------------ */

/* Placement and protocol: every generator, every P, awkward counts and chunk
 * sizes (tiny ones force many chunks), int32 random sums. Placement and send
 * model rotate over the (count, chunk) combinations, so every (generator, P)
 * sees every in-place convention under both models. */
static void sweep_structure(void) {
  for (int p = 1; p <= 64; p++) {
    const size_t counts[] = {0, 1, (size_t)p - 1, (size_t)p + 1, 13, 1009, 65537};
    const int big_p = p <= 3 || p == 6 || p == 8 || p == 13 || p == 31 || p == 64;
    for (const dense_gen_t *g = gens; g < gens + NGENS; g++) {
      const int nplaces = has_rank_place(g) ? 3 : 2;
      int combo = p;
      for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        const size_t n = counts[ci];
        if (ci == 2 && p <= 1) continue; /* p-1 == 0 already covered */
        if (ci > 3 && (n == (size_t)p - 1 || n == (size_t)p + 1)) continue;
        const size_t vol = has_rank_place(g) ? (size_t)p * (size_t)p * n : (size_t)p * n;
        if (n == 65537 && (!big_p || vol > ((size_t)1 << 22))) continue;
        /* RS/AG references cost P*P*count: large P only on a few. */
        if (vol > ((size_t)1 << 21) && p != 33 && p != 64) continue;
        const size_t chunks[] = {1, 3, 64, ONE_CHUNK};
        for (size_t k = 0; k < 4; k++, combo++) {
          /* Tiny chunks only where the message count stays sane; past a
           * million elements one chunk size per count. */
          if (chunks[k] == 1 && vol > 20000) continue;
          if (chunks[k] == 3 && vol > 100000) continue;
          if (vol > ((size_t)1 << 20) && k != 2 + (size_t)p % 2) continue;
          dense_place_t pl = (dense_place_t)(combo % nplaces);
          sc_sim_model_t model = (combo / nplaces) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER;
          run(g, p, n, chunks[k], SC_INT32, SC_SUM, pl, model);
        }
      }
      /* Every convention under both models, whatever the rotation skipped. */
      for (int c = 0; c < 2 * nplaces; c++)
        run(g, p, (size_t)p + 3, 2, SC_INT32, SC_SUM, (dense_place_t)(c % nplaces),
            c / nplaces ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
    }
  }
}

/* Arithmetic: every dtype and op (all-gather: no op) on a spread of P. */
static void sweep_dtypes_ops(void) {
  static const int ps[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16, 33, 64};
  static const sc_dtype_t dtypes[] = {SC_INT32,    SC_INT64,   SC_FLOAT16,
                                      SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
  for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
    const int p = ps[pi];
    const size_t counts[] = {(size_t)p + 1, 1009};
    for (const dense_gen_t *g = gens; g < gens + NGENS; g++)
      for (size_t di = 0; di < 6; di++)
        for (sc_redop_t op = SC_SUM; op <= SC_AVG; op++) {
          if (g->coll == SC_COLL_ALLGATHER && op != SC_SUM) continue;
          for (size_t ci = 0; ci < 2; ci++) {
            if (ci == 1 && has_rank_place(g) && p > 16) continue; /* P*P*count: too big */
            const int nplaces = has_rank_place(g) ? 3 : 2;
            const size_t v = di + (size_t)op + ci;
            run(g, p, counts[ci], 7, dtypes[di], op, (dense_place_t)(v % (size_t)nplaces),
                (v / 2) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
          }
        }
  }
}

/* Large messages cut into many chunks, on each generator once per P with
 * placement, send model and chunk size alternating (the reference dominates
 * the run time). RS and AG take a per-rank count, so they get the large
 * total split across ranks. */
static void sweep_large(void) {
  static const int ps[] = {2, 3, 5, 8, 13};
  const size_t big = ((size_t)1 << 20) + 7;
  for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
    const int p = ps[pi];
    for (const dense_gen_t *g = gens; g < gens + NGENS; g++) {
      const size_t n = has_rank_place(g) ? big / (size_t)p + 3 : big;
      const size_t v = pi + (size_t)(g - gens);
      const dense_place_t in_place =
          has_rank_place(g) && v % 4 == 1 ? PLACE_IN_RANK : PLACE_IN_SAME;
      run(g, p, n, v % 2 ? 65536 : 4093, SC_INT32, SC_SUM, v % 2 ? in_place : PLACE_OUT,
          v % 2 ? SC_SIM_EAGER : SC_SIM_RENDEZVOUS);
    }
    if (p == 3 || p == 8) {
      run(rd_gen, p, big, 8191, SC_FLOAT32, SC_AVG, PLACE_IN_SAME, SC_SIM_EAGER);
      run(rab_gen, p, big, 8191, SC_FLOAT32, SC_AVG, PLACE_IN_SAME, SC_SIM_RENDEZVOUS);
      run(rab_gen, p, big, 8191, SC_BFLOAT16, SC_SUM, PLACE_OUT, SC_SIM_EAGER);
    }
  }
}

static void test_bad_args(void) {
  sc_sched_t s;
  sc_sched_init(&s);
  const sc_coll_args_t good = {.nranks = 4, .rank = 1, .count = 10, .chunk_elems = 3};
  for (const dense_gen_t *g = gens; g < gens + NGENS; g++) {
    sc_coll_args_t bad[3] = {good, good, good};
    for (int i = 0; i < 3; i++) bad[i].coll = g->coll;
    bad[0].nranks = 0;
    bad[1].rank = 4;
    bad[2].chunk_elems = 0;
    for (int i = 0; i < 3; i++) {
      sc_sched_reset(&s);
      dense_expect(g->fn(&bad[i], &s) == SC_ERR_INVALID_ARG, "%s accepts bad argument set %d",
                   g->name, i);
    }
  }
  /* The largest P the arguments allow: rank arithmetic must not overflow. */
  static const int big_ps[] = {1 << 30, (1 << 30) - 1};
  for (const dense_gen_t *g = gens; g < gens + NGENS; g++)
    for (int i = 0; i < 2; i++) {
      const int ranks[] = {0, 1, big_ps[i] / 2, big_ps[i] - 1};
      for (int k = 0; k < 4; k++) {
        const sc_coll_args_t a = {.coll = g->coll,
                                  .nranks = big_ps[i],
                                  .rank = ranks[k],
                                  .count = 3,
                                  .elem_size = 4,
                                  .chunk_elems = ONE_CHUNK};
        sc_sched_reset(&s);
        int ok = g->fn(&a, &s) == SC_SUCCESS && s.nsteps > 0 && s.nsteps <= 2 * 64;
        for (size_t j = 0; ok && j < s.nsteps; j++)
          ok = s.steps[j].kind == SC_STEP_COPY ||
               (s.steps[j].peer >= 0 && s.steps[j].peer < big_ps[i] && s.steps[j].peer != ranks[k]);
        dense_expect(ok, "%s P=%d rank %d: bad schedule at the largest P", g->name, big_ps[i],
                     ranks[k]);
      }
    }
  sc_sched_free(&s);
}

/* ---- bit identity with random floats ----------------------------------- */

/* Runs an all-reduce of p ranks' random float32 inputs (seeded) and returns
 * every rank's RECV, p * n floats (NULL after printing a failure). */
static float *run_random_floats(const dense_gen_t *g, int p, size_t n, size_t chunk, sc_redop_t op,
                                int in_place, sc_sim_model_t model, uint64_t seed) {
  sc_sched_t *sched = calloc((size_t)p, sizeof(*sched));
  sc_sim_rank_t *sr = calloc((size_t)p, sizeof(*sr));
  float *in = malloc((size_t)p * n * sizeof(float) + 1);
  float *out = malloc((size_t)p * n * sizeof(float) + 1);
  int ok = sched && sr && in && out;
  for (size_t i = 0; ok && i < (size_t)p * n; i++) {
    /* Mantissa noise over a few binades: every addition rounds. */
    uint64_t h = dense_mix(seed ^ i);
    double m = (double)(h >> 11) / 9007199254740992.0 * 2 - 1;
    in[i] = (float)ldexp(m, (int)(h % 9) - 4);
  }
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                        .nranks = p,
                        .rank = r,
                        .count = n,
                        .elem_size = 4,
                        .chunk_elems = chunk,
                        .avg = op == SC_AVG};
    sc_sched_init(&sched[r]);
    ok = g->fn(&a, &sched[r]) == SC_SUCCESS;
    float *mine = in + (size_t)r * n, *res = out + (size_t)r * n;
    if (in_place) {
      memcpy(res, mine, n * sizeof(float));
      mine = res;
    }
    sr[r] = (sc_sim_rank_t){
        .sched = &sched[r], .send = mine, .send_count = n, .recv = res, .recv_count = n};
  }
  char err[1024];
  sc_sim_config_t cfg = {
      .nranks = p, .dtype = SC_FLOAT32, .elem_size = 4, .op = op, .model = model};
  if (ok && sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) != 0) {
    printf("FAIL %s bit identity P=%d count=%zu chunk=%zu: %s\n", g->name, p, n, chunk, err);
    ok = 0;
  }
  /* Sanity: each result is the sum (or mean) up to rounding. */
  for (size_t j = 0; ok && j < n; j++) {
    double sum = 0, mag = 0;
    for (int q = 0; q < p; q++) {
      sum += in[(size_t)q * n + j];
      mag += fabs(in[(size_t)q * n + j]);
    }
    if (op == SC_AVG) sum /= p, mag /= p;
    if (fabs(out[j] - sum) > (double)p * 1.2e-7 * mag + 1e-30) {
      printf("FAIL %s P=%d count=%zu: element %zu is %.9g, the sum is %.9g\n", g->name, p, n, j,
             out[j], sum);
      ok = 0;
    }
  }
  for (int r = 0; sched && r < p; r++) sc_sched_free(&sched[r]);
  free(sched);
  free(sr);
  free(in);
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

static void test_bit_identity(void) {
  static const int ps[] = {2, 3, 5, 6, 7, 8, 12, 13, 16, 24, 33, 64};
  for (int gi = 0; gi < 2; gi++) {
    const dense_gen_t *g = gi ? rab_gen : rd_gen;
    for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
      const int p = ps[pi];
      const size_t cases[][2] = {{1009, 64}, {4099, ONE_CHUNK}, {(size_t)p + 1, 1}};
      for (size_t ci = 0; ci < 3; ci++)
        for (int oi = 0; oi < 2; oi++) {
          const sc_redop_t op = oi ? SC_AVG : SC_SUM;
          const size_t n = cases[ci][0], chunk = cases[ci][1];
          const uint64_t seed = dense_mix(((uint64_t)p << 32) ^ (ci << 8) ^ (uint64_t)op);
          float *first = run_random_floats(g, p, n, chunk, op, 0, SC_SIM_EAGER, seed);
          float *again = run_random_floats(g, p, n, chunk, op, 1, SC_SIM_RENDEZVOUS, seed);
          int same_ranks = first && again, same_runs = first && again;
          for (int r = 1; same_ranks && r < p; r++)
            same_ranks = !memcmp(first, first + (size_t)r * n, n * sizeof(float)) &&
                         !memcmp(again, again + (size_t)r * n, n * sizeof(float));
          if (same_runs) same_runs = !memcmp(first, again, n * sizeof(float));
          dense_expect(same_ranks, "%s P=%d count=%zu chunk=%zu op %d: ranks' results differ",
                       g->name, p, n, chunk, (int)op);
          dense_expect(same_runs,
                       "%s P=%d count=%zu chunk=%zu op %d: results differ between runs (in "
                       "place / rendezvous vs out of place / eager)",
                       g->name, p, n, chunk, (int)op);
          free(first);
          free(again);
        }
    }
  }
}

/* ---- cost ------------------------------------------------------------------ */

typedef struct rank_cost {
  sc_sched_cost_t c;
  size_t sends;
} rank_cost_t;

static int costs_of(const dense_gen_t *g, int p, size_t n, size_t chunk, size_t es,
                    rank_cost_t *out) {
  int ok = 1;
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {
        .coll = g->coll, .nranks = p, .rank = r, .count = n, .elem_size = es, .chunk_elems = chunk};
    sc_sched_t s;
    sc_sched_init(&s);
    ok = g->fn(&a, &s) == SC_SUCCESS;
    sc_sched_cost(&s, es, &out[r].c);
    out[r].sends = 0;
    for (size_t i = 0; i < s.nsteps; i++) out[r].sends += s.steps[i].kind == SC_STEP_SEND;
    sc_sched_free(&s);
  }
  return ok;
}

/* Recursive doubling: log2 P' messages of the whole vector per group rank,
 * plus one in and one out for a folding receiver; a folded rank sends its
 * vector once and receives the result once. Rabenseifner: 2(P'-1)/P' of the
 * vector per group rank (blocks follow sc_block_range), plus the vector in and
 * out when folding; all ranks together 2(P'-1) + 2 rem vectors. RS and AG
 * over P blocks of count: all ranks together (P'-1) + rem vectors of P*count
 * plus rem blocks. */
static void test_cost(void) {
  const size_t es = 4;
  rank_cost_t cost[64];
  for (int p = 1; p <= 64; p++) {
    const int pp = pow2_floor(p), rem = p - pp, steps = log2_exact(pp);
    const size_t counts[] = {1, (size_t)p + 1, 1009, (size_t)1 << 20};
    for (size_t ci = 0; ci < 4; ci++)
      for (size_t chunk = 1000; chunk <= 1000000; chunk *= 1000) {
        const size_t n = counts[ci], chunks = (n + chunk - 1) / chunk;
        const size_t vec = n * es;
        int ok = costs_of(rd_gen, p, n, chunk, es, cost);
        for (int r = 0; r < p && ok && p > 1; r++) {
          const int folded = r < 2 * rem && r % 2 == 0, folds = r < 2 * rem && r % 2 == 1;
          const size_t vectors = folded ? 1 : (size_t)(steps + folds);
          ok = cost[r].sends == vectors * chunks && cost[r].c.bytes_sent == vectors * vec &&
               cost[r].c.bytes_recv == vectors * vec;
        }
        dense_expect(ok, "rd_allreduce cost P=%d count=%zu chunk=%zu: not log2 P' whole vectors", p,
                     n, chunk);

        ok = costs_of(rab_gen, p, n, chunk, es, cost);
        size_t total = 0;
        const size_t lo = 2 * (size_t)(pp - 1) * (n / (size_t)pp) * es;
        const size_t hi = 2 * (size_t)(pp - 1) * ((n + (size_t)pp - 1) / (size_t)pp) * es;
        for (int r = 0; r < p && ok; r++) {
          const int folded = r < 2 * rem && r % 2 == 0, folds = r < 2 * rem && r % 2 == 1;
          const size_t extra = folds ? vec : 0;
          total += cost[r].c.bytes_sent;
          if (folded)
            ok = cost[r].c.bytes_sent == vec && cost[r].c.bytes_recv == vec;
          else
            ok = cost[r].c.bytes_sent >= lo + extra && cost[r].c.bytes_sent <= hi + extra &&
                 cost[r].c.bytes_recv >= lo + extra && cost[r].c.bytes_recv <= hi + extra;
          /* One message per chunk of each half: with one chunk, 2 log2 P'. */
          if (ok && !folded && n >= (size_t)pp && chunk >= n)
            ok = cost[r].sends == 2 * (size_t)steps + (size_t)folds;
        }
        dense_expect(ok && total == (2 * (size_t)(pp - 1) + 2 * (size_t)rem) * vec,
                     "rabenseifner_allreduce cost P=%d count=%zu chunk=%zu: not 2(P'-1)/P' of the "
                     "vector per rank",
                     p, n, chunk);

        if (n > 1009) continue; /* RS/AG move P*count: the smaller counts suffice */
        const size_t all = (size_t)p * vec;
        for (int gi = 0; gi < 2; gi++) {
          const dense_gen_t *g = gi ? ag_gen : rs_gen;
          ok = costs_of(g, p, n, chunk, es, cost);
          size_t sent = 0, recvd = 0;
          for (int r = 0; r < p && ok; r++) {
            sent += cost[r].c.bytes_sent;
            recvd += cost[r].c.bytes_recv;
            /* With P' = P every rank sends and receives (P-1) blocks. */
            if (rem == 0)
              ok = cost[r].c.bytes_sent == (size_t)(p - 1) * vec &&
                   cost[r].c.bytes_recv == (size_t)(p - 1) * vec;
          }
          const size_t want = (size_t)(pp - 1) * all + (size_t)rem * (all + vec);
          dense_expect(ok && sent == want && recvd == want,
                       "%s cost P=%d count=%zu chunk=%zu: %zu bytes sent, want %zu", g->name, p, n,
                       chunk, sent, want);
        }
      }
  }
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
  } parts[] = {{"bad_args", test_bad_args},         {"cost", test_cost},
               {"bit_identity", test_bit_identity}, {"structure", sweep_structure},
               {"dtypes_ops", sweep_dtypes_ops},    {"large", sweep_large}};
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
