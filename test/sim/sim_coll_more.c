/* SPDX-License-Identifier: BSD-3-Clause */
/* The all-to-all (pairwise, Bruck, hierarchical), uneven all-to-all,
 * gather, scatter (binomial, linear) and uneven all-gather (ring, direct)
 * generators run through the simulator, both send models, against results
 * computed here by definition: every element a rank sends encodes (source,
 * destination, index), so a block in the wrong place, a stale or a missing
 * one shows. Rank counts 1..9, 12, 16; counts 0, 1, 3, 7 and a larger one;
 * elements of 1, 4 and 8 bytes; in place and out of place; every root; host
 * maps even, uneven, interleaved, random, one host, one rank per host;
 * uneven counts with zeros, gaps and shuffled displacements. Plus properties
 * read off the schedules: messages per rank (pairwise P-1, Bruck
 * ceil(log2 P), hier H-1 across hosts), scratch bounds, argument checks, and
 * that a count the two ends of an uneven pair disagree on fails the run.
 * Prints one line per failure and ends with "N passed, N failed". */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "test/sim/simulator.h"

#define ONE_CHUNK ((size_t)1 << 40)
#define SENTINEL  0xA5

static int passed, failed;

static void expect(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(int cond, const char *fmt, ...) {
  if (cond) {
    passed++;
    return;
  }
  failed++;
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t rng_state = 12345;
static size_t rnd(size_t bound) {
  rng_state = mix(rng_state);
  return bound ? (size_t)(rng_state % bound) : 0;
}

/* Byte b of element idx of the block src sends dst. */
static uint8_t pat(int src, int dst, size_t idx, size_t b) {
  return (uint8_t)mix(((uint64_t)(src + 1) << 48) ^ ((uint64_t)(dst + 1) << 36) ^ (idx * 8 + b));
}

static void fill(uint8_t *p, int src, int dst, size_t n, size_t es) {
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < es; b++) p[i * es + b] = pat(src, dst, i, b);
}

/* 1 when p holds the block src sent dst. */
static int holds(const uint8_t *p, int src, int dst, size_t n, size_t es) {
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < es; b++)
      if (p[i * es + b] != pat(src, dst, i, b)) return 0;
  return 1;
}

static int untouched(const uint8_t *p, size_t bytes) {
  for (size_t i = 0; i < bytes; i++)
    if (p[i] != SENTINEL) return 0;
  return 1;
}

static const char *model_name(sc_sim_model_t m) {
  return m == SC_SIM_EAGER ? "eager" : "rendezvous";
}

static sc_dtype_t dtype_of(size_t es) {
  return es == 1 ? SC_UINT8 : es == 4 ? SC_INT32 : SC_FLOAT64;
}

/* One simulated collective: every rank's schedule and buffers. */
typedef struct world {
  int p;
  size_t es;
  sc_sched_t *sched;
  sc_sim_rank_t *sr;
  uint8_t **mem; /* per rank: the allocations to free (two each) */
  sc_sim_stats_t stats;
  char err[1024];
} world_t;

static void world_init(world_t *w, int p, size_t es) {
  w->p = p;
  w->es = es;
  w->sched = calloc((size_t)p, sizeof(*w->sched));
  w->sr = calloc((size_t)p, sizeof(*w->sr));
  w->mem = calloc(2 * (size_t)p, sizeof(*w->mem));
  if (!w->sched || !w->sr || !w->mem) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  for (int r = 0; r < p; r++) {
    sc_sched_init(&w->sched[r]);
    w->sr[r].sched = &w->sched[r];
  }
  memset(&w->stats, 0, sizeof(w->stats));
  w->err[0] = '\0';
}

static void world_free(world_t *w) {
  for (int r = 0; r < w->p; r++) {
    sc_sched_free(&w->sched[r]);
    free(w->mem[2 * r]);
    free(w->mem[2 * r + 1]);
  }
  free(w->sched);
  free(w->sr);
  free(w->mem);
}

static uint8_t *world_alloc(world_t *w, int r, int which, size_t elems) {
  uint8_t *p = malloc(elems * w->es + 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  memset(p, SENTINEL, elems * w->es + 1);
  w->mem[2 * r + which] = p;
  return p;
}

static int world_run(world_t *w, sc_sim_model_t model) {
  sc_sim_config_t cfg = {
      .nranks = w->p, .dtype = dtype_of(w->es), .elem_size = w->es, .op = SC_SUM, .model = model};
  return sc_sim_run(&cfg, w->sr, &w->stats, w->err, sizeof(w->err));
}

static size_t sends_of(const sc_sched_t *s) {
  size_t c = 0;
  for (size_t i = 0; i < s->nsteps; i++) c += s->steps[i].kind == SC_STEP_SEND;
  return c;
}

static int log2_ceil(int p) {
  int k = 0;
  while ((1 << k) < p) k++;
  return k;
}

/* ---- all-to-all ---------------------------------------------------------- */

typedef enum a2a_kind { A2A_PAIRWISE, A2A_BRUCK, A2A_HIER } a2a_kind_t;
static const char *const a2a_names[] = {"pairwise", "bruck", "hier"};
static sc_result_t (*const a2a_fns[])(const sc_coll_args_t *, sc_sched_t *) = {
    sc_pairwise_alltoall_schedule, sc_bruck_alltoall_schedule, sc_hier_alltoall_schedule};

static void map_str(const int *map, int p, char *out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int r = 0; map && r < p && used + 4 < len; r++)
    used += (size_t)snprintf(out + used, len - used, "%s%d", r ? "," : "", map[r]);
  if (!map) snprintf(out, len, "none");
}

static void run_alltoall(a2a_kind_t kind, int p, size_t n, size_t chunk, size_t es, int in_place,
                         sc_sim_model_t model, const int *host_of) {
  char label[256], ms[64];
  map_str(host_of, p, ms, sizeof(ms));
  snprintf(label, sizeof(label), "alltoall %s P=%d count=%zu chunk=%zu es=%zu %s %s map=%s",
           a2a_names[kind], p, n, chunk, es, in_place ? "in_place" : "out", model_name(model), ms);
  world_t w;
  world_init(&w, p, es);
  const size_t total = (size_t)p * n;
  int ok = 1;
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {.coll = SC_COLL_ALLTOALL,
                        .nranks = p,
                        .rank = r,
                        .count = n,
                        .elem_size = es,
                        .chunk_elems = chunk,
                        .host_of = host_of,
                        .in_place = in_place};
    ok = a2a_fns[kind](&a, &w.sched[r]) == SC_SUCCESS;
    uint8_t *send = world_alloc(&w, r, 0, total);
    for (int j = 0; j < p; j++) fill(send + (size_t)j * n * es, r, j, n, es);
    w.sr[r] = (sc_sim_rank_t){.sched = &w.sched[r],
                              .send = send,
                              .send_count = total,
                              .recv = in_place ? send : world_alloc(&w, r, 1, total),
                              .recv_count = total};
  }
  if (!ok) {
    expect(0, "%s: generator failed", label);
    world_free(&w);
    return;
  }
  if (world_run(&w, model) != 0) {
    expect(0, "%s: %s", label, w.err);
    world_free(&w);
    return;
  }
  for (int r = 0; r < p && ok; r++) {
    const uint8_t *recv = w.sr[r].recv, *send = w.sr[r].send;
    for (int i = 0; i < p && ok; i++) {
      ok = holds(recv + (size_t)i * n * es, i, r, n, es);
      if (!ok) expect(0, "%s: rank %d's block %d is not rank %d's", label, r, i, i);
    }
    for (int j = 0; j < p && ok && !in_place; j++) {
      ok = holds(send + (size_t)j * n * es, r, j, n, es);
      if (!ok) expect(0, "%s: rank %d's send block %d changed", label, r, j);
    }
  }
  if (ok) expect(1, "%s", label);

  /* Properties: messages with one chunk per block, scratch. */
  int nh = 1;
  for (int r = 0; host_of && r < p; r++)
    if (host_of[r] + 1 > nh) nh = host_of[r] + 1;
  for (int r = 0; r < p && n > 0; r++) {
    const sc_sched_t *s = &w.sched[r];
    const size_t sends = sends_of(s), scratch = s->scratch_count;
    if (chunk >= n) {
      if (kind == A2A_PAIRWISE)
        expect(sends == (size_t)p - 1, "%s: rank %d sends %zu messages, want P-1", label, r, sends);
      if (kind == A2A_BRUCK)
        expect(sends == (size_t)log2_ceil(p), "%s: rank %d sends %zu messages, want %d", label, r,
               sends, log2_ceil(p));
      if (kind == A2A_HIER && host_of) {
        size_t cross = 0;
        for (size_t i = 0; i < s->nsteps; i++)
          cross += s->steps[i].kind == SC_STEP_SEND && host_of[s->steps[i].peer] != host_of[r];
        expect(cross == (size_t)nh - 1,
               "%s: rank %d sends %zu messages to other hosts, want H-1 = %d", label, r, cross,
               nh - 1);
      }
    }
    if (kind == A2A_PAIRWISE)
      expect(scratch == (in_place && p > 1 ? n : 0),
             "%s: rank %d's scratch %zu, want one block in place, none out of place", label, r,
             scratch);
    if (kind == A2A_BRUCK)
      expect(scratch <= (size_t)(2 * p + 1) * n, "%s: rank %d's scratch %zu exceeds 2P+1 blocks",
             label, r, scratch);
    if (kind == A2A_HIER)
      expect(scratch < (size_t)(4 * p) * n, "%s: rank %d's scratch %zu reaches 4P blocks", label, r,
             scratch);
  }
  world_free(&w);
}

static const int sweep_ps[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16};
enum { NPS = sizeof(sweep_ps) / sizeof(sweep_ps[0]) };
static const size_t sweep_es[] = {1, 4, 8};

static void sweep_alltoall_flat(void) {
  int combo = 0;
  for (int pi = 0; pi < NPS; pi++) {
    const int p = sweep_ps[pi];
    const size_t counts[] = {0, 1, 3, 7, p <= 9 ? 257 : 64};
    for (int kind = A2A_PAIRWISE; kind <= A2A_HIER; kind++)
      for (size_t ci = 0; ci < 5; ci++)
        for (int in_place = 0; in_place < 2; in_place++)
          for (int m = 0; m < 2; m++)
            for (int cut = 0; cut < 2; cut++, combo++) {
              const size_t n = counts[ci], es = sweep_es[combo % 3];
              /* Chunks smaller than a block, or one per block. */
              const size_t chunk = cut && n > 2 ? n / 3 + 1 : ONE_CHUNK;
              /* hier without a map: the flat fallback. */
              run_alltoall((a2a_kind_t)kind, p, n, chunk, es, in_place, (sc_sim_model_t)m, NULL);
            }
  }
}

/* Renumbers hosts in the order of their lowest rank (the generators' rule). */
static void normalize(int p, const int *raw, int *map) {
  int seen[64], nh = 0;
  for (int r = 0; r < p; r++) {
    int h = -1;
    for (int k = 0; k < nh; k++)
      if (seen[k] == raw[r]) h = k;
    if (h < 0) {
      seen[nh] = raw[r];
      h = nh++;
    }
    map[r] = h;
  }
}

typedef struct host_map {
  int p;
  int map[32];
} host_map_t;

static const host_map_t fixed_maps[] = {
    {4, {0, 0, 1, 1}},                                      /* 2x2 */
    {8, {0, 0, 1, 1, 2, 2, 3, 3}},                          /* 4 hosts x 2 */
    {8, {0, 0, 0, 0, 1, 1, 1, 1}},                          /* 2 hosts x 4 */
    {8, {0, 0, 0, 1, 1, 2, 2, 2}},                          /* 3+2+3 */
    {6, {0, 0, 0, 0, 0, 1}},                                /* 5+1 */
    {5, {0, 1, 1, 1, 1}},                                   /* 1+4 */
    {8, {0, 0, 1, 1, 1, 1, 1, 2}},                          /* 2+5+1 */
    {9, {0, 0, 0, 0, 1, 1, 2, 2, 2}},                       /* 4+2+3 */
    {4, {0, 1, 0, 1}},                                      /* interleaved */
    {7, {0, 1, 2, 0, 1, 2, 0}},                             /* round robin, uneven */
    {9, {0, 1, 1, 0, 2, 2, 2, 0, 1}},                       /* scattered */
    {5, {0, 0, 0, 0, 0}},                                   /* one host */
    {5, {0, 1, 2, 3, 4}},                                   /* one rank per host */
    {2, {0, 1}},                                            /* two single hosts */
    {12, {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}},             /* 4x3 */
    {16, {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}}, /* 4x4 */
    {16, {0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2}}, /* 2+6+8 */
    {16, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}}, /* 4x4 interleaved */
    {12, {0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 3, 3}},             /* 7+1+2+2 */
};

static void sweep_alltoall_hier(void) {
  int combo = 0;
  host_map_t maps[64];
  int nmaps = 0;
  for (size_t i = 0; i < sizeof(fixed_maps) / sizeof(fixed_maps[0]); i++)
    maps[nmaps++] = fixed_maps[i];
  static const int random_ps[] = {2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 24, 32};
  for (size_t pi = 0; pi < sizeof(random_ps) / sizeof(random_ps[0]); pi++)
    for (int k = 0; k < 3; k++) {
      const int p = random_ps[pi], nh = 1 + (int)rnd((size_t)p);
      int raw[32];
      for (int r = 0; r < p; r++) raw[r] = (int)rnd((size_t)nh);
      maps[nmaps].p = p;
      normalize(p, raw, maps[nmaps].map);
      nmaps++;
    }
  for (int mi = 0; mi < nmaps; mi++) {
    const int p = maps[mi].p;
    const size_t counts[] = {0, 1, 3, 7, 100};
    for (size_t ci = 0; ci < 5; ci++)
      for (int in_place = 0; in_place < 2; in_place++)
        for (int m = 0; m < 2; m++)
          for (int cut = 0; cut < 2; cut++, combo++) {
            const size_t n = counts[ci], es = sweep_es[combo % 3];
            const size_t chunk = cut && n > 2 ? n / 2 : ONE_CHUNK;
            run_alltoall(A2A_HIER, p, n, chunk, es, in_place, (sc_sim_model_t)m, maps[mi].map);
          }
  }
}

/* ---- uneven all-to-all ----------------------------------------------------- */

/* Displacements for blocks of the given counts: in a shuffled order, with
 * gaps of 0..2 elements; returns the buffer's size. */
static size_t shuffled_displs(int p, const size_t *counts, size_t *displs) {
  int order[64];
  for (int i = 0; i < p; i++) order[i] = i;
  for (int i = p - 1; i > 0; i--) {
    int j = (int)rnd((size_t)i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  size_t at = rnd(3);
  for (int i = 0; i < p; i++) {
    displs[order[i]] = at;
    at += counts[order[i]] + rnd(3);
  }
  return at;
}

typedef enum v_shape { V_RANDOM, V_ZEROS, V_ONE_TARGET, V_ALL_ZERO } v_shape_t;
static const char *const v_names[] = {"random", "sparse", "one-target", "all-zero"};

/* C[i*p + j]: elements rank i sends rank j. bad: rank 1 expects one element
 * more, or none instead of some, from rank 0 (the run must fail). sparse:
 * the sparse form, one message per non-empty block of another rank (its
 * counts are checked before it runs: never with bad). */
/* The hier form's host-mates' counts for rank r (mates[t * H + y] = what
 * local rank t of r's host sends (y, r's local rank)), from the matrix C and
 * a normalized host map; NULL on uneven hosts (it runs the pairwise one). */
static uint64_t *hier_mates(int p, const size_t *c, const int *map, int r) {
  int nh = 0, size[32] = {0}, member[32][32];
  for (int q = 0; q < p; q++) {
    member[map[q]][size[map[q]]++] = q;
    nh = map[q] + 1 > nh ? map[q] + 1 : nh;
  }
  const int x = map[r], lsz = size[x];
  int me = 0;
  while (member[x][me] != r) me++;
  uint64_t *m = calloc((size_t)lsz * (size_t)nh, sizeof(*m));
  for (int t = 0; m && t < lsz; t++)
    for (int y = 0; y < nh; y++)
      if (me < size[y]) m[t * nh + y] = c[(size_t)member[x][t] * (size_t)p + (size_t)member[y][me]];
  return m;
}

/* Messages between ranks of different hosts. */
static size_t cross_host_sends(const sc_sched_t *s, const int *map, int r) {
  size_t n = 0;
  for (size_t i = 0; i < s->nsteps; i++)
    n += s->steps[i].kind == SC_STEP_SEND && map[s->steps[i].peer] != map[r];
  return n;
}

static void run_alltoallv_map(int p, v_shape_t shape, size_t es, sc_sim_model_t model, int bad,
                              int sparse, const int *host_of);

/* The hier form's count exchange (sc_hier_alltoallv_counts_schedule) on
 * host_of, run through the simulator: every rank's RECV must be hier_mates. */
static void run_hier_counts(int p, const size_t *c, const size_t *v, const int *host_of, int nh,
                            int lsz, sc_sim_model_t model, const char *label) {
  const size_t cells = (size_t)nh * (size_t)lsz;
  world_t w;
  world_init(&w, p, 8);
  int ok = 1;
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {.coll = SC_COLL_ALLTOALLV,
                        .nranks = p,
                        .rank = r,
                        .elem_size = 8,
                        .chunk_elems = 1,
                        .host_of = host_of,
                        .sendcounts = v + (size_t)r * 4 * (size_t)p};
    uint8_t *send = world_alloc(&w, r, 0, cells), *recv = world_alloc(&w, r, 1, cells);
    ok = sc_hier_alltoallv_counts_schedule(&a, (uint64_t *)(void *)send, &w.sched[r]) == SC_SUCCESS;
    w.sr[r] = (sc_sim_rank_t){
        .sched = &w.sched[r], .send = send, .send_count = cells, .recv = recv, .recv_count = cells};
  }
  if (!ok || world_run(&w, model) != 0) {
    expect(0, "%s: count exchange: %s", label, ok ? w.err : "generator failed");
  } else {
    for (int r = 0; r < p && ok; r++) {
      uint64_t *want = hier_mates(p, c, host_of, r);
      ok = want && !memcmp(w.sr[r].recv, want, cells * 8);
      free(want);
    }
    expect(ok, "%s: the count exchange's matrix differs from the counts' on some rank", label);
  }
  world_free(&w);
}

static void run_alltoallv(int p, v_shape_t shape, size_t es, sc_sim_model_t model, int bad,
                          int sparse) {
  run_alltoallv_map(p, shape, es, model, bad, sparse, NULL);
}

/* host_of: the hier form on that map. */
static void run_alltoallv_map(int p, v_shape_t shape, size_t es, sc_sim_model_t model, int bad,
                              int sparse, const int *host_of) {
  char label[256], ms[64];
  map_str(host_of, p, ms, sizeof(ms));
  snprintf(label, sizeof(label), "alltoallv%s P=%d %s es=%zu %s%s%s%s",
           sparse    ? " sparse"
           : host_of ? " hier"
                     : "",
           p, v_names[shape], es, model_name(model), bad ? " (counts disagree)" : "",
           host_of ? " map=" : "", host_of ? ms : "");
  int nh = 0, lsz = 0, even = host_of != NULL;
  for (int r = 0; host_of && r < p; r++) nh = host_of[r] + 1 > nh ? host_of[r] + 1 : nh;
  for (int y = 0; host_of && y < nh; y++) {
    int n = 0;
    for (int r = 0; r < p; r++) n += host_of[r] == y;
    if (y == 0) lsz = n;
    even &= n == lsz;
  }
  even &= nh > 1 && lsz > 1;
  size_t *c = calloc((size_t)p * (size_t)p, sizeof(size_t));
  size_t *v = calloc(4 * (size_t)p * (size_t)p, sizeof(size_t));
  const int target = (int)rnd((size_t)p);
  for (int i = 0; i < p; i++)
    for (int j = 0; j < p; j++) {
      size_t x = 0;
      if (shape == V_RANDOM) x = rnd(9);
      if (shape == V_ZEROS) x = rnd(3) ? 0 : 1 + rnd(20);
      if (shape == V_ONE_TARGET) x = j == target ? 1 + rnd(50) : 0;
      c[(size_t)i * (size_t)p + (size_t)j] = x;
    }
  world_t w;
  world_init(&w, p, es);
  int ok = 1;
  for (int r = 0; r < p && ok; r++) {
    size_t *sc = v + (size_t)r * 4 * (size_t)p, *sd = sc + p, *rc = sd + p, *rd = rc + p;
    for (int j = 0; j < p; j++) {
      sc[j] = c[(size_t)r * (size_t)p + (size_t)j];
      rc[j] = c[(size_t)j * (size_t)p + (size_t)r];
    }
    if (bad && r == 1) rc[0] = rc[0] ? 0 : 1;
    const size_t ssz = shuffled_displs(p, sc, sd), rsz = shuffled_displs(p, rc, rd);
    size_t total = 0;
    for (int i = 0; i < p; i++) total += rc[i];
    sc_coll_args_t a = {.coll = SC_COLL_ALLTOALLV,
                        .nranks = p,
                        .rank = r,
                        .count = total,
                        .elem_size = es,
                        .chunk_elems = 2,
                        .sendcounts = sc,
                        .sdispls = sd,
                        .recvcounts = rc,
                        .rdispls = rd};
    uint64_t *mates = host_of ? hier_mates(p, c, host_of, r) : NULL;
    if (host_of) {
      a.host_of = host_of;
      a.a2av_mates = mates;
      ok = sc_hier_alltoallv_schedule(&a, &w.sched[r]) == SC_SUCCESS;
    } else {
      ok = (sparse ? sc_sparse_alltoallv_schedule
                   : sc_pairwise_alltoallv_schedule)(&a, &w.sched[r]) == SC_SUCCESS;
    }
    free(mates);
    /* One message per other host; on uneven hosts the pairwise exchange's. */
    if (ok && host_of && even)
      expect(cross_host_sends(&w.sched[r], host_of, r) == (size_t)(nh - 1),
             "%s: rank %d sends %zu messages across hosts, want %d", label, r,
             cross_host_sends(&w.sched[r], host_of, r), nh - 1);
    uint8_t *send = world_alloc(&w, r, 0, ssz), *recv = world_alloc(&w, r, 1, rsz);
    for (int j = 0; j < p; j++) fill(send + sd[j] * es, r, j, sc[j], es);
    w.sr[r] = (sc_sim_rank_t){
        .sched = &w.sched[r], .send = send, .send_count = ssz, .recv = recv, .recv_count = rsz};
  }
  if (ok && host_of && even) run_hier_counts(p, c, v, host_of, nh, lsz, model, label);
  if (!ok) {
    expect(0, "%s: generator failed", label);
  } else if (bad) {
    expect(world_run(&w, model) != 0 && strstr(w.err, "expects"),
           "%s: the run passed or failed for another reason (%s)", label, w.err);
  } else if (world_run(&w, model) != 0) {
    expect(0, "%s: %s", label, w.err);
  } else {
    for (int r = 0; r < p && ok; r++) {
      const size_t *rc = v + (size_t)r * 4 * (size_t)p + 2 * (size_t)p, *rd = rc + p;
      const uint8_t *recv = w.sr[r].recv;
      /* Blocks, and the gaps between them untouched. */
      uint8_t *mark = calloc(w.sr[r].recv_count + 1, 1);
      for (int i = 0; i < p && ok; i++) {
        ok = holds(recv + rd[i] * es, i, r, rc[i], es);
        if (!ok) expect(0, "%s: rank %d's block from %d is wrong", label, r, i);
        memset(mark + rd[i], 1, rc[i]);
      }
      for (size_t e = 0; e < w.sr[r].recv_count && ok; e++)
        if (!mark[e]) ok = untouched(recv + e * es, es);
      if (!ok) expect(0, "%s: rank %d's gaps were written", label, r);
      free(mark);
    }
    if (ok) expect(1, "%s", label);
    /* Every pair exchanges one message, empty or not; the sparse form one per
     * non-empty block between two ranks. */
    size_t want = (size_t)p * (size_t)(p - 1);
    /* hier: per rank, two to each host-mate and one to each other host. */
    if (host_of && even) want = (size_t)p * (2 * (size_t)(lsz - 1) + (size_t)(nh - 1));
    for (int i = 0; sparse && i < p; i++)
      for (int j = 0; j < p; j++)
        if (i != j && !c[(size_t)i * (size_t)p + (size_t)j]) want--;
    expect(w.stats.messages == want, "%s: %zu messages, want %zu", label, w.stats.messages, want);
  }
  world_free(&w);
  free(c);
  free(v);
}

static void sweep_alltoallv(void) {
  int combo = 0;
  for (int pi = 0; pi < NPS; pi++)
    for (int shape = V_RANDOM; shape <= V_ALL_ZERO; shape++)
      for (int m = 0; m < 2; m++, combo++) {
        const int p = sweep_ps[pi];
        run_alltoallv(p, (v_shape_t)shape, sweep_es[combo % 3], (sc_sim_model_t)m, 0, 0);
        run_alltoallv(p, (v_shape_t)shape, sweep_es[(combo + 1) % 3], (sc_sim_model_t)m, 0, 1);
        if (p > 1) run_alltoallv(p, (v_shape_t)shape, 4, (sc_sim_model_t)m, 1, 0);
      }
  /* The hier form on every fixed host map (uneven ones: the pairwise
   * exchange), every shape, both models. */
  for (size_t mi = 0; mi < sizeof(fixed_maps) / sizeof(fixed_maps[0]); mi++)
    for (int shape = V_RANDOM; shape <= V_ALL_ZERO; shape++)
      for (int m = 0; m < 2; m++, combo++) {
        const int p = fixed_maps[mi].p;
        run_alltoallv_map(p, (v_shape_t)shape, sweep_es[combo % 3], (sc_sim_model_t)m, 0, 0,
                          fixed_maps[mi].map);
        if (p > 1 && shape == V_RANDOM)
          run_alltoallv_map(p, (v_shape_t)shape, 4, (sc_sim_model_t)m, 1, 0, fixed_maps[mi].map);
      }
  /* A rank whose own counts disagree is refused before anything moves. */
  size_t one[1] = {1}, two[1] = {2}, zero[1] = {0};
  sc_coll_args_t a = {.coll = SC_COLL_ALLTOALLV,
                      .nranks = 1,
                      .count = 2,
                      .elem_size = 4,
                      .chunk_elems = 1,
                      .sendcounts = one,
                      .sdispls = zero,
                      .recvcounts = two,
                      .rdispls = zero};
  sc_sched_t s;
  sc_sched_init(&s);
  expect(sc_pairwise_alltoallv_schedule(&a, &s) == SC_ERR_MISMATCH,
         "alltoallv: a rank sending itself 1 element but expecting 2 is accepted");
  sc_sched_free(&s);
}

/* ---- gather and scatter ---------------------------------------------------- */

typedef struct rooted_gen {
  const char *name;
  sc_coll_t coll;
  sc_result_t (*fn)(const sc_coll_args_t *, sc_sched_t *);
} rooted_gen_t;

static const rooted_gen_t rooted_gens[] = {
    {"binomial_gather", SC_COLL_GATHER, sc_binomial_gather_schedule},
    {"linear_gather", SC_COLL_GATHER, sc_linear_gather_schedule},
    {"binomial_scatter", SC_COLL_SCATTER, sc_binomial_scatter_schedule},
    {"linear_scatter", SC_COLL_SCATTER, sc_linear_scatter_schedule},
};

static void run_rooted(const rooted_gen_t *g, int p, int root, size_t n, size_t es, int in_place,
                       sc_sim_model_t model) {
  char label[160];
  snprintf(label, sizeof(label), "%s P=%d root=%d count=%zu es=%zu %s %s", g->name, p, root, n, es,
           in_place ? "in_place" : "out", model_name(model));
  const int gather = g->coll == SC_COLL_GATHER;
  const size_t total = (size_t)p * n;
  world_t w;
  world_init(&w, p, es);
  int ok = 1;
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {.coll = g->coll,
                        .nranks = p,
                        .rank = r,
                        .root = root,
                        .count = n,
                        .elem_size = es,
                        .chunk_elems = 1 + n / 2};
    ok = g->fn(&a, &w.sched[r]) == SC_SUCCESS;
    sc_sim_rank_t *sr = &w.sr[r];
    *sr = (sc_sim_rank_t){.sched = &w.sched[r]};
    if (gather) {
      if (r == root) {
        sr->recv = world_alloc(&w, r, 1, total);
        sr->recv_count = total;
      }
      sr->send = r == root && in_place ? (uint8_t *)sr->recv + (size_t)root * n * es
                                       : world_alloc(&w, r, 0, n);
      sr->send_count = n;
      fill(sr->send, r, root, n, es);
    } else {
      if (r == root) {
        sr->send = world_alloc(&w, r, 0, total);
        sr->send_count = total;
        for (int j = 0; j < p; j++) fill((uint8_t *)sr->send + (size_t)j * n * es, root, j, n, es);
      }
      sr->recv = r == root && in_place ? (uint8_t *)sr->send + (size_t)root * n * es
                                       : world_alloc(&w, r, 1, n);
      sr->recv_count = n;
    }
  }
  if (!ok) {
    expect(0, "%s: generator failed", label);
  } else if (world_run(&w, model) != 0) {
    expect(0, "%s: %s", label, w.err);
  } else {
    if (gather) {
      for (int i = 0; i < p && ok; i++) {
        ok = holds((const uint8_t *)w.sr[root].recv + (size_t)i * n * es, i, root, n, es);
        if (!ok) expect(0, "%s: the root's block %d is wrong", label, i);
      }
      for (int r = 0; r < p && ok; r++) {
        ok = holds(w.sr[r].send, r, root, n, es);
        if (!ok) expect(0, "%s: rank %d's input changed", label, r);
      }
    } else {
      for (int r = 0; r < p && ok; r++) {
        ok = holds(w.sr[r].recv, root, r, n, es);
        if (!ok) expect(0, "%s: rank %d's block is wrong", label, r);
      }
      for (int j = 0; j < p && ok; j++) {
        ok = holds((const uint8_t *)w.sr[root].send + (size_t)j * n * es, root, j, n, es);
        if (!ok) expect(0, "%s: the root's input block %d changed", label, j);
      }
    }
    if (ok) expect(1, "%s", label);
    /* A tree or a star: one message per non-root rank. */
    expect(w.stats.messages == (n ? (size_t)p - 1 : 0), "%s: %zu messages, want P-1", label,
           w.stats.messages);
  }
  world_free(&w);
}

static void sweep_rooted(void) {
  int combo = 0;
  for (int pi = 0; pi < NPS; pi++) {
    const int p = sweep_ps[pi];
    const size_t counts[] = {0, 1, 3, 7, 300};
    for (size_t gi = 0; gi < sizeof(rooted_gens) / sizeof(rooted_gens[0]); gi++)
      for (int root = 0; root < p; root++)
        for (size_t ci = 0; ci < 5; ci++)
          for (int in_place = 0; in_place < 2; in_place++, combo++)
            run_rooted(&rooted_gens[gi], p, root, counts[ci], sweep_es[combo % 3], in_place,
                       (sc_sim_model_t)((combo / 3) % 2));
  }
  /* Scratch: an interior rank keeps its subtree (lowbit(v) blocks), the
   * root at most its wrapping child's. */
  for (int p = 1; p <= 16; p++)
    for (int root = 0; root < p; root++)
      for (int r = 0; r < p; r++) {
        sc_coll_args_t a = {.coll = SC_COLL_GATHER,
                            .nranks = p,
                            .rank = r,
                            .root = root,
                            .count = 5,
                            .elem_size = 4,
                            .chunk_elems = 1};
        const int v = (r - root + p) % p, low = v ? v & -v : p;
        sc_sched_t s;
        sc_sched_init(&s);
        expect(sc_binomial_gather_schedule(&a, &s) == SC_SUCCESS &&
                   s.scratch_count <= (size_t)low * 5,
               "binomial_gather P=%d root=%d rank=%d: scratch %zu over its subtree", p, root, r,
               s.scratch_count);
        sc_sched_reset(&s);
        a.coll = SC_COLL_SCATTER;
        expect(sc_binomial_scatter_schedule(&a, &s) == SC_SUCCESS &&
                   s.scratch_count <= (size_t)low * 5,
               "binomial_scatter P=%d root=%d rank=%d: scratch %zu over its subtree", p, root, r,
               s.scratch_count);
        sc_sched_free(&s);
      }
}

/* ---- uneven all-gather ----------------------------------------------------- */

static void run_allgatherv(int ring, int p, v_shape_t shape, size_t chunk, size_t es, int in_place,
                           sc_sim_model_t model) {
  char label[160];
  snprintf(label, sizeof(label), "%s_allgatherv P=%d %s chunk=%zu es=%zu %s %s",
           ring ? "ring" : "direct", p, v_names[shape], chunk, es, in_place ? "in_place" : "out",
           model_name(model));
  size_t *rc = calloc((size_t)p, sizeof(size_t)), *rd = calloc((size_t)p, sizeof(size_t));
  const int target = (int)rnd((size_t)p);
  for (int i = 0; i < p; i++) {
    if (shape == V_RANDOM) rc[i] = rnd(40);
    if (shape == V_ZEROS) rc[i] = rnd(3) ? 0 : 1 + rnd(20);
    if (shape == V_ONE_TARGET) rc[i] = i == target ? 1 + rnd(500) : 0;
  }
  const size_t rsz = shuffled_displs(p, rc, rd);
  size_t total = 0;
  for (int i = 0; i < p; i++) total += rc[i];
  world_t w;
  world_init(&w, p, es);
  int ok = 1;
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {.coll = SC_COLL_ALLGATHERV,
                        .nranks = p,
                        .rank = r,
                        .count = total,
                        .elem_size = es,
                        .chunk_elems = chunk,
                        .recvcounts = rc,
                        .rdispls = rd};
    ok = (ring ? sc_ring_allgatherv_schedule : sc_direct_allgatherv_schedule)(&a, &w.sched[r]) ==
         SC_SUCCESS;
    uint8_t *recv = world_alloc(&w, r, 1, rsz);
    uint8_t *send = in_place ? recv + rd[r] * es : world_alloc(&w, r, 0, rc[r]);
    fill(send, r, p, rc[r], es);
    w.sr[r] = (sc_sim_rank_t){
        .sched = &w.sched[r], .send = send, .send_count = rc[r], .recv = recv, .recv_count = rsz};
  }
  if (!ok) {
    expect(0, "%s: generator failed", label);
  } else if (world_run(&w, model) != 0) {
    expect(0, "%s: %s", label, w.err);
  } else {
    uint8_t *mark = calloc(rsz + 1, 1);
    for (int i = 0; i < p; i++) memset(mark + rd[i], 1, rc[i]);
    for (int r = 0; r < p && ok; r++) {
      const uint8_t *recv = w.sr[r].recv;
      for (int i = 0; i < p && ok; i++) {
        ok = holds(recv + rd[i] * es, i, p, rc[i], es);
        if (!ok) expect(0, "%s: rank %d's block %d is wrong", label, r, i);
      }
      for (size_t e = 0; e < rsz && ok; e++)
        if (!mark[e]) ok = untouched(recv + e * es, es);
      if (!ok) expect(0, "%s: rank %d's gaps were written", label, r);
      if (ok && !in_place) ok = holds(w.sr[r].send, r, p, rc[r], es);
      if (!ok) expect(0, "%s: rank %d's input changed", label, r);
    }
    if (ok) expect(1, "%s", label);
    free(mark);
  }
  world_free(&w);
  free(rc);
  free(rd);
}

static void sweep_allgatherv(void) {
  int combo = 0;
  for (int pi = 0; pi < NPS; pi++)
    for (int ring = 0; ring < 2; ring++)
      for (int shape = V_RANDOM; shape <= V_ALL_ZERO; shape++)
        for (int in_place = 0; in_place < 2; in_place++)
          for (int m = 0; m < 2; m++)
            for (int cut = 0; cut < 2; cut++, combo++)
              run_allgatherv(ring, sweep_ps[pi], (v_shape_t)shape, cut ? 3 : ONE_CHUNK,
                             sweep_es[combo % 3], in_place, (sc_sim_model_t)m);
}

/* ---- argument checks ------------------------------------------------------- */

static void test_bad_args(void) {
  typedef struct {
    const char *name;
    sc_coll_t coll;
    sc_result_t (*fn)(const sc_coll_args_t *, sc_sched_t *);
  } gen_t;
  static const gen_t gens[] = {
      {"pairwise_alltoall", SC_COLL_ALLTOALL, sc_pairwise_alltoall_schedule},
      {"bruck_alltoall", SC_COLL_ALLTOALL, sc_bruck_alltoall_schedule},
      {"hier_alltoall", SC_COLL_ALLTOALL, sc_hier_alltoall_schedule},
      {"pairwise_alltoallv", SC_COLL_ALLTOALLV, sc_pairwise_alltoallv_schedule},
      {"sparse_alltoallv", SC_COLL_ALLTOALLV, sc_sparse_alltoallv_schedule},
      {"binomial_gather", SC_COLL_GATHER, sc_binomial_gather_schedule},
      {"linear_gather", SC_COLL_GATHER, sc_linear_gather_schedule},
      {"binomial_scatter", SC_COLL_SCATTER, sc_binomial_scatter_schedule},
      {"linear_scatter", SC_COLL_SCATTER, sc_linear_scatter_schedule},
      {"ring_allgatherv", SC_COLL_ALLGATHERV, sc_ring_allgatherv_schedule},
      {"direct_allgatherv", SC_COLL_ALLGATHERV, sc_direct_allgatherv_schedule},
  };
  size_t counts[4] = {1, 1, 1, 1}, displs[4] = {0, 1, 2, 3};
  sc_sched_t s;
  sc_sched_init(&s);
  for (size_t gi = 0; gi < sizeof(gens) / sizeof(gens[0]); gi++) {
    const gen_t *g = &gens[gi];
    const sc_coll_args_t good = {.coll = g->coll,
                                 .nranks = 4,
                                 .rank = 1,
                                 .root = 2,
                                 .count = 4,
                                 .elem_size = 4,
                                 .chunk_elems = 3,
                                 .sendcounts = counts,
                                 .sdispls = displs,
                                 .recvcounts = counts,
                                 .rdispls = displs};
    sc_sched_reset(&s);
    expect(g->fn(&good, &s) == SC_SUCCESS, "%s refuses good arguments", g->name);
    sc_coll_args_t bad[6] = {good, good, good, good, good, good};
    bad[0].nranks = 0;
    bad[1].rank = 4;
    bad[2].chunk_elems = 0;
    bad[3].root = -1;
    bad[4].count = SIZE_MAX / 2;
    bad[5].recvcounts = NULL;
    const int rooted = g->coll == SC_COLL_GATHER || g->coll == SC_COLL_SCATTER;
    const int blocks = g->coll == SC_COLL_ALLTOALL || rooted;
    const int v = g->coll == SC_COLL_ALLTOALLV || g->coll == SC_COLL_ALLGATHERV;
    for (int i = 0; i < 6; i++) {
      if ((i == 3 && !rooted) || (i == 4 && !blocks) || (i == 5 && !v)) continue;
      sc_sched_reset(&s);
      expect(g->fn(&bad[i], &s) == SC_ERR_INVALID_ARG, "%s accepts bad argument set %d", g->name,
             i);
    }
  }
  /* hier: hosts must be numbered in the order of their lowest rank. */
  const int bad_map[4] = {1, 0, 1, 0};
  sc_coll_args_t a = {.coll = SC_COLL_ALLTOALL,
                      .nranks = 4,
                      .rank = 0,
                      .count = 2,
                      .elem_size = 4,
                      .chunk_elems = 1,
                      .host_of = bad_map};
  sc_sched_reset(&s);
  expect(sc_hier_alltoall_schedule(&a, &s) == SC_ERR_INVALID_ARG,
         "hier_alltoall accepts a host map numbered out of order");
  sc_sched_free(&s);
}

int main(void) {
  sweep_alltoall_flat();
  sweep_alltoall_hier();
  sweep_alltoallv();
  sweep_rooted();
  sweep_allgatherv();
  test_bad_args();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
