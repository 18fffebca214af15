/* Every dense schedule generator run through the simulator for nranks
 * 1..64, awkward counts, chunk sizes, roots, in-place conventions, dtypes and
 * ops, against a reference computed here from the inputs (never by the
 * simulator). Inputs are chosen so that every summation order gives exact
 * results: random integers (wraparound sums) and small integers in floats.
 * Prints one line per failure and ends with "N passed, N failed". */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/algorithms.h"
#include "kernels/cpu/reduce.h"
#include "lib/error.h"
#include "test/sim/simulator.h"

typedef sc_result_t (*gen_fn)(const sc_coll_args_t *, sc_sched_t *);

typedef struct gen {
  const char *name;
  sc_coll_t coll;
  gen_fn fn;
} gen_t;

static const gen_t gens[] = {
    {"ring_allreduce", SC_COLL_ALLREDUCE, sc_ring_allreduce_schedule},
    {"ring_reduce_scatter", SC_COLL_REDUCE_SCATTER, sc_ring_reduce_scatter_schedule},
    {"ring_allgather", SC_COLL_ALLGATHER, sc_ring_allgather_schedule},
    {"chain_broadcast", SC_COLL_BROADCAST, sc_chain_broadcast_schedule},
    {"binomial_broadcast", SC_COLL_BROADCAST, sc_binomial_broadcast_schedule},
    {"chain_reduce", SC_COLL_REDUCE, sc_chain_reduce_schedule},
    {"binomial_reduce", SC_COLL_REDUCE, sc_binomial_reduce_schedule},
};
enum { NGENS = sizeof(gens) / sizeof(gens[0]) };

/* OUT: separate buffers. IN_SAME: SEND and RECV start at the same address.
 * IN_RANK (RS, AG only): NCCL's convention, the rank's slice of the big
 * buffer is the small one (RS: RECV == SEND + r*count; AG: SEND == RECV +
 * r*count). */
typedef enum place { OUT, IN_SAME, IN_RANK } place_t;
static const char *const place_names[] = {"out", "in_same", "in_rank"};

typedef struct tcase {
  const gen_t *gen;
  int nranks, root;
  size_t count, chunk;
  sc_dtype_t dtype;
  sc_redop_t op;
  place_t place;
  sc_sim_model_t model;
  uint64_t seed;
} tcase_t;

static int passed, failed;

static const char *dtype_name(sc_dtype_t t) {
  switch (t) {
  case SC_INT32: return "int32";
  case SC_INT64: return "int64";
  case SC_FLOAT16: return "fp16";
  case SC_BFLOAT16: return "bf16";
  case SC_FLOAT32: return "fp32";
  case SC_FLOAT64: return "fp64";
  default: return "?";
  }
}

static size_t dtype_bytes(sc_dtype_t t) {
  switch (t) {
  case SC_FLOAT16:
  case SC_BFLOAT16: return 2;
  case SC_INT32:
  case SC_FLOAT32: return 4;
  default: return 8;
  }
}

static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

static int is_float(sc_dtype_t t) {
  return t == SC_FLOAT16 || t == SC_BFLOAT16 || t == SC_FLOAT32 || t == SC_FLOAT64;
}

static void report(const tcase_t *tc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(const tcase_t *tc, const char *fmt, ...) {
  printf("FAIL %s P=%d count=%zu chunk=%zu root=%d %s %s %s %s: ", tc->gen->name, tc->nranks,
         tc->count, tc->chunk, tc->root, dtype_name(tc->dtype), op_names[tc->op],
         place_names[tc->place], tc->model == SC_SIM_EAGER ? "eager" : "rendezvous");
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Logical input of rank q at element j: random integers for integer types
 * (wraparound is exact), small integers for floats (exact in any order:
 * |partial sums| stay below 2^11 for fp16 and 2^8 for bf16 at 64 ranks),
 * and {1, 2, -1} for PROD (products are +-2^k, exact until both the
 * reference and the result overflow to the same infinity). */
static int64_t input_value(const tcase_t *tc, int q, size_t j) {
  uint64_t h = mix(tc->seed ^ ((uint64_t)q << 40) ^ (uint64_t)j);
  if (tc->op == SC_PROD) {
    unsigned k = (unsigned)(h % 8);
    return k == 0 ? 2 : k < 4 ? -1 : 1;
  }
  switch (tc->dtype) {
  case SC_INT32: return (int32_t)(uint32_t)h;
  case SC_INT64: return (int64_t)h;
  case SC_FLOAT16: return (int64_t)(h % 17) - 8;
  case SC_BFLOAT16: return (int64_t)(h % 5) - 2;
  default: return (int64_t)(h % 2001) - 1000;
  }
}

static void encode_int(sc_dtype_t t, int64_t v, void *out) {
  if (t == SC_INT32) {
    int32_t x = (int32_t)(uint32_t)(uint64_t)v;
    memcpy(out, &x, 4);
  } else {
    memcpy(out, &v, 8);
  }
}

static void encode_float(sc_dtype_t t, double v, void *out) {
  float f = (float)v;
  uint16_t h;
  switch (t) {
  case SC_FLOAT16: h = sc_float_to_half(f); memcpy(out, &h, 2); break;
  case SC_BFLOAT16: h = sc_float_to_bfloat16(f); memcpy(out, &h, 2); break;
  case SC_FLOAT32: memcpy(out, &f, 4); break;
  default: memcpy(out, &v, 8); break;
  }
}

static void encode_input(const tcase_t *tc, int q, size_t j, void *out) {
  int64_t v = input_value(tc, q, j);
  if (is_float(tc->dtype))
    encode_float(tc->dtype, (double)v, out);
  else
    encode_int(tc->dtype, v, out);
}

/* The reduction over all ranks of input element j, encoded as dtype. */
static void reduce_ref(const tcase_t *tc, size_t j, void *out) {
  const int p = tc->nranks;
  uint64_t acc = 0; /* SUM/AVG/PROD of integers, wrapping */
  int64_t ext = 0;  /* MIN/MAX, and exact sums of small integers */
  double prod = 1;
  for (int q = 0; q < p; q++) {
    int64_t v = input_value(tc, q, j);
    if (q == 0) {
      acc = (uint64_t)v;
      ext = v;
      prod = (double)v;
      continue;
    }
    switch (tc->op) {
    case SC_PROD: acc *= (uint64_t)v; prod *= (double)v; break;
    case SC_MIN: ext = v < ext ? v : ext; break;
    case SC_MAX: ext = v > ext ? v : ext; break;
    default: acc += (uint64_t)v; ext += v; break;
    }
  }
  if (!is_float(tc->dtype)) {
    int64_t r = tc->op == SC_MIN || tc->op == SC_MAX ? ext : (int64_t)acc;
    if (tc->dtype == SC_INT32) r = (int32_t)(uint32_t)(uint64_t)r;
    if (tc->op == SC_AVG) r /= p;
    encode_int(tc->dtype, r, out);
    return;
  }
  if (tc->op == SC_PROD) {
    encode_float(tc->dtype, prod, out);
  } else if (tc->op == SC_AVG && tc->dtype == SC_FLOAT64) {
    encode_float(tc->dtype, (double)ext / (double)p, out);
  } else if (tc->op == SC_AVG) {
    /* float32, and fp16/bf16 through float32: one IEEE float division. */
    float f = (float)ext / (float)p;
    encode_float(tc->dtype, (double)f, out);
  } else {
    encode_float(tc->dtype, (double)ext, out);
  }
}

/* ---- one case ---------------------------------------------------------- */

typedef struct rank_bufs {
  unsigned char *mem[2]; /* what to free */
  sc_sched_t sched;
} rank_bufs_t;

static unsigned char *alloc_bytes(size_t n, int poison) {
  unsigned char *p = malloc(n ? n : 1);
  if (p && poison) memset(p, 0xa5, n);
  return p;
}

/* Sizes (elements) of the input a rank holds and of the output it expects. */
static void io_counts(const tcase_t *tc, int r, size_t *in, size_t *out) {
  const size_t n = tc->count, p = (size_t)tc->nranks;
  switch (tc->gen->coll) {
  case SC_COLL_REDUCE_SCATTER: *in = p * n; *out = n; break;
  case SC_COLL_ALLGATHER: *in = n; *out = p * n; break;
  case SC_COLL_BROADCAST: *in = r == tc->root ? n : 0; *out = n; break;
  case SC_COLL_REDUCE: *in = n; *out = r == tc->root ? n : 0; break;
  default: *in = n; *out = n; break;
  }
}

/* The output every rank's result is a slice of: the reduction (ALLREDUCE,
 * REDUCE: count; REDUCE_SCATTER: nranks*count, rank r owns block r) or the
 * concatenated inputs (ALLGATHER), or the root's input (BROADCAST). Computed
 * once per case: per rank it would cost nranks times the whole run. */
static unsigned char *expected_output(const tcase_t *tc, size_t *len) {
  const size_t es = dtype_bytes(tc->dtype), n = tc->count, p = (size_t)tc->nranks;
  const sc_coll_t coll = tc->gen->coll;
  *len = coll == SC_COLL_REDUCE_SCATTER || coll == SC_COLL_ALLGATHER ? p * n : n;
  unsigned char *want = malloc(*len * es + 1);
  if (!want) return NULL;
  for (size_t i = 0; i < *len; i++) {
    if (coll == SC_COLL_ALLGATHER)
      encode_input(tc, (int)(i / n), i % n, want + i * es);
    else if (coll == SC_COLL_BROADCAST)
      encode_input(tc, tc->root, i, want + i * es);
    else
      reduce_ref(tc, i, want + i * es);
  }
  return want;
}

static int check_output(const tcase_t *tc, int r, const unsigned char *recv,
                        const unsigned char *want_all) {
  const size_t es = dtype_bytes(tc->dtype);
  size_t in_c, out_c, bad = 0, first = 0;
  io_counts(tc, r, &in_c, &out_c);
  const unsigned char *want =
      want_all + (tc->gen->coll == SC_COLL_REDUCE_SCATTER ? (size_t)r * tc->count * es : 0);
  if (out_c == 0 || memcmp(recv, want, out_c * es) == 0) return 0;
  for (size_t i = 0; i < out_c; i++)
    if (memcmp(recv + i * es, want + i * es, es) != 0) {
      if (!bad) first = i;
      bad++;
    }
  uint64_t got = 0, exp = 0;
  memcpy(&got, recv + first * es, es);
  memcpy(&exp, want + first * es, es);
  report(tc, "rank %d: %zu of %zu output elements wrong, first at %zu: got 0x%" PRIx64
             ", want 0x%" PRIx64,
         r, bad, out_c, first, got, exp);
  return -1;
}

static int check_input_intact(const tcase_t *tc, int r, const unsigned char *send, size_t in_c) {
  const size_t es = dtype_bytes(tc->dtype);
  unsigned char want[8];
  for (size_t i = 0; i < in_c; i++) {
    encode_input(tc, r, i, want);
    if (memcmp(send + i * es, want, es) != 0) {
      report(tc, "rank %d: out-of-place SEND modified at element %zu", r, i);
      return -1;
    }
  }
  return 0;
}

static void run_case(const tcase_t *tc) {
  const int p = tc->nranks;
  const size_t es = dtype_bytes(tc->dtype), n = tc->count;
  const sc_coll_t coll = tc->gen->coll;
  rank_bufs_t *rb = calloc((size_t)p, sizeof(*rb));
  sc_sim_rank_t *sr = calloc((size_t)p, sizeof(*sr));
  int ok = rb && sr;
  char err[1024];
  if (!ok) {
    report(tc, "out of memory");
    goto done;
  }
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {.coll = coll,
                        .nranks = p,
                        .rank = r,
                        .root = tc->root,
                        .count = n,
                        .elem_size = es,
                        .chunk_elems = tc->chunk,
                        .avg = tc->op == SC_AVG};
    sc_sched_init(&rb[r].sched);
    sc_result_t res = tc->gen->fn(&a, &rb[r].sched);
    if (res != SC_SUCCESS) {
      report(tc, "rank %d: generator returned %d", r, res);
      ok = 0;
      break;
    }
    size_t in_c, out_c;
    io_counts(tc, r, &in_c, &out_c);
    sr[r].sched = &rb[r].sched;
    unsigned char *in = NULL, *out = NULL;
    int in_place = tc->place != OUT && in_c && out_c;
    if (in_place) {
      size_t big = in_c > out_c ? in_c : out_c;
      unsigned char *mem = rb[r].mem[0] = alloc_bytes(big * es, 1);
      if (!mem) ok = 0;
      in = out = mem;
      if (tc->place == IN_RANK && coll == SC_COLL_REDUCE_SCATTER) out = mem + (size_t)r * n * es;
      if (tc->place == IN_RANK && coll == SC_COLL_ALLGATHER) in = mem + (size_t)r * n * es;
    } else {
      if (in_c && !(in = rb[r].mem[0] = alloc_bytes(in_c * es, 0))) ok = 0;
      if (out_c && !(out = rb[r].mem[1] = alloc_bytes(out_c * es, 1))) ok = 0;
    }
    if (!ok) {
      report(tc, "out of memory");
      break;
    }
    for (size_t i = 0; i < in_c; i++) encode_input(tc, r, i, in + i * es);
    sr[r] = (sc_sim_rank_t){.sched = &rb[r].sched,
                            .send = in,
                            .send_count = in_c,
                            .recv = out,
                            .recv_count = out_c};
  }
  if (!ok) goto done;
  sc_sim_config_t cfg = {
      .nranks = p, .dtype = tc->dtype, .elem_size = es, .op = tc->op, .model = tc->model};
  if (sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) != 0) {
    report(tc, "%s", err);
    ok = 0;
    goto done;
  }
  size_t want_len;
  unsigned char *want = expected_output(tc, &want_len);
  if (!want) {
    report(tc, "out of memory");
    ok = 0;
  }
  for (int r = 0; r < p && ok; r++) {
    if (check_output(tc, r, sr[r].recv, want) != 0) ok = 0;
    if (ok && tc->place == OUT && check_input_intact(tc, r, sr[r].send, sr[r].send_count) != 0)
      ok = 0;
  }
  free(want);
done:
  if (rb)
    for (int r = 0; r < p; r++) {
      free(rb[r].mem[0]);
      free(rb[r].mem[1]);
      sc_sched_free(&rb[r].sched);
    }
  free(rb);
  free(sr);
  if (ok)
    passed++;
  else
    failed++;
}

/* ---- sweeps ------------------------------------------------------------ */

#define ONE_CHUNK ((size_t)1 << 40)

static uint64_t case_seed;

static void run(const gen_t *g, int p, size_t count, size_t chunk, int root, sc_dtype_t dtype,
                sc_redop_t op, place_t place, sc_sim_model_t model) {
  tcase_t tc = {.gen = g,
                .nranks = p,
                .root = root,
                .count = count,
                .chunk = chunk,
                .dtype = dtype,
                .op = op,
                .place = place,
                .model = model,
                .seed = mix(++case_seed)};
  run_case(&tc);
}

static int has_rank_place(const gen_t *g) {
  return g->coll == SC_COLL_REDUCE_SCATTER || g->coll == SC_COLL_ALLGATHER;
}

static int rooted(const gen_t *g) {
  return g->coll == SC_COLL_BROADCAST || g->coll == SC_COLL_REDUCE;
}

/* Roots to try: all of them on small P, the edges and the middle on large P. */
static int roots_for(const gen_t *g, int p, int *roots) {
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
static size_t case_volume(const gen_t *g, int p, size_t count) {
  return has_rank_place(g) ? (size_t)p * (size_t)p * count : (size_t)p * count;
}

/* Placement and protocol: every generator, every P, awkward counts and chunk
 * sizes, every in-place convention, both send models; int32 random sums make
 * any misplaced or double-counted element visible. */
static void sweep_structure(void) {
  for (int p = 1; p <= 64; p++) {
    const size_t counts[] = {0, 1, (size_t)p - 1, (size_t)p + 1, 13, 1009, 65537};
    for (const gen_t *g = gens; g < gens + NGENS; g++) {
      int roots[64];
      int nroots = roots_for(g, p, roots);
      for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t n = counts[ci];
        if (ci == 2 && p <= 1) continue; /* p-1 == 0 already covered */
        if (ci > 3 && (n == (size_t)p - 1 || n == (size_t)p + 1)) continue;
        size_t vol = case_volume(g, p, n);
        if (n == 65537 && vol > ((size_t)1 << 22)) continue;
        const size_t chunks[] = {1, 3, 64, ONE_CHUNK};
        for (size_t k = 0; k < 4; k++) {
          size_t chunk = chunks[k];
          /* Single-element chunks only where the message count stays sane. */
          if (chunk == 1 && vol > 20000) continue;
          if (chunk == 3 && vol > 200000) continue;
          for (int ri = 0; ri < nroots; ri++)
            for (place_t pl = OUT; pl <= IN_RANK; pl++) {
              if (pl == IN_RANK && !has_rank_place(g)) continue;
              sc_sim_model_t model = (ri + (int)k + (int)pl) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER;
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
  static const sc_dtype_t dtypes[] = {SC_INT32,   SC_INT64,   SC_FLOAT16,
                                      SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
  for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
    int p = ps[pi];
    const size_t counts[] = {(size_t)p + 1, 1009};
    for (const gen_t *g = gens; g < gens + NGENS; g++)
      for (size_t di = 0; di < 6; di++)
        for (sc_redop_t op = SC_SUM; op <= SC_AVG; op++) {
          int reducing = g->coll != SC_COLL_ALLGATHER && g->coll != SC_COLL_BROADCAST;
          if (!reducing && op != SC_SUM) continue;
          for (size_t ci = 0; ci < 2; ci++)
            for (place_t pl = OUT; pl <= IN_SAME; pl++)
              run(g, p, counts[ci], 7, p / 2, dtypes[di], op, pl,
                  (di + (size_t)op + ci) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
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
    for (const gen_t *g = gens; g < gens + NGENS; g++) {
      size_t n = has_rank_place(g) ? big / (size_t)p + 3 : big;
      run(g, p, n, 4093, p - 1, SC_INT32, SC_SUM, OUT, SC_SIM_RENDEZVOUS);
      run(g, p, n, 65536, p / 2, SC_INT32, SC_SUM, IN_SAME, SC_SIM_EAGER);
      if (has_rank_place(g)) run(g, p, n, 10007, 0, SC_INT32, SC_SUM, IN_RANK, SC_SIM_EAGER);
    }
    run(&gens[0], p, big, 8191, 0, SC_FLOAT32, SC_AVG, IN_SAME, SC_SIM_EAGER);
    run(&gens[0], p, big, 8191, 0, SC_BFLOAT16, SC_SUM, OUT, SC_SIM_EAGER);
  }
}

/* ---- properties checked without data ----------------------------------- */

static void expect(int cond, const char *what, ...) __attribute__((format(printf, 2, 3)));
static void expect(int cond, const char *what, ...) {
  if (cond) {
    passed++;
    return;
  }
  va_list ap;
  va_start(ap, what);
  printf("FAIL ");
  vprintf(what, ap);
  printf("\n");
  va_end(ap);
  failed++;
}

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
      expect(ok && next == n, "sc_block_range P=%d count=%zu: blocks not a near-even tiling", p,
             n);
    }
}

static void test_bad_args(void) {
  sc_sched_t s;
  sc_sched_init(&s);
  const sc_coll_args_t good = {.nranks = 4, .rank = 1, .root = 2, .count = 10, .chunk_elems = 3};
  for (const gen_t *g = gens; g < gens + NGENS; g++) {
    sc_coll_args_t bad[4] = {good, good, good, good};
    for (int i = 0; i < 4; i++) bad[i].coll = g->coll;
    bad[0].nranks = 0;
    bad[1].rank = 4;
    bad[2].chunk_elems = 0;
    bad[3].root = rooted(g) ? -1 : 0;
    for (int i = 0; i < (rooted(g) ? 4 : 3); i++) {
      sc_sched_reset(&s);
      expect(g->fn(&bad[i], &s) == SC_ERR_INVALID_ARG, "%s accepts bad argument set %d", g->name,
             i);
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
          sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE, .nranks = p, .rank = r, .count = n,
                              .elem_size = es, .chunk_elems = chunk};
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
        expect(ok && total == 2 * (size_t)(p - 1) * n * es,
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
    expect(ok && st.messages == (size_t)p * (size_t)rounds,
           "barrier P=%d: %zu messages, want P*ceil(log2 P) zero-count ones", p, st.messages);
    for (int r = 0; r < p && ok; r++) {
      seen[(size_t)r * (size_t)p + (size_t)r] = 1;
      sr[r] = (sc_sim_rank_t){.sched = &know[r],
                              .recv = seen + (size_t)r * (size_t)p,
                              .recv_count = (size_t)p};
    }
    /* Eager: the transform writes the vector it just sent, which under the
     * rendezvous model would wait on every neighbour at once. */
    if (ok && sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) != 0) {
      printf("FAIL barrier knowledge P=%d: %s\n", p, err);
      ok = 0;
    }
    size_t known = 0;
    for (size_t i = 0; ok && i < (size_t)p * (size_t)p; i++) known += seen[i] == 1;
    expect(ok && known == (size_t)p * (size_t)p,
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
    sr[r] = (sc_sim_rank_t){.sched = &s[r], .send = send[r], .send_count = 4, .recv = recv[r],
                            .recv_count = 4};
  }
  sc_sim_config_t cfg = {.nranks = 2, .dtype = SC_INT32, .elem_size = 4, .op = SC_SUM,
                         .model = model};
  int ok = sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) == 0;
  if (ok && build == good_exchange) ok = recv[0][3] == 44 && recv[1][0] == 11;
  expect(ok == want_ok && (ok || err[0]), "simulator self-test '%s': %s", what,
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
  } parts[] = {{"simulator", test_simulator},       {"block_range", test_block_range},
               {"bad_args", test_bad_args},         {"ring_cost", test_ring_cost},
               {"barrier", test_barrier},           {"structure", sweep_structure},
               {"dtypes_ops", sweep_dtypes_ops},    {"large", sweep_large}};
  setvbuf(stdout, NULL, _IOLBF, 0);
  double t0 = now();
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    int before = passed + failed;
    double t = now();
    parts[i].fn();
    fprintf(stderr, "%-12s %6d cases %6.2f s\n", parts[i].name, passed + failed - before,
            now() - t);
  }
  fprintf(stderr, "total %.2f s\n", now() - t0);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
