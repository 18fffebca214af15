/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel-driven all-reduce's plan and flag protocol
 * (kernels/ipc_allreduce_plan.h), on the CPU:
 * - the plan's arithmetic: layout, chunks that tile the vectors, rounds that
 *   fit a half for every rank count, the block of an offset, the wrap-around
 *   compare, the blocks per rank;
 * - the protocol replayed: P ranks, each a stream (the copy of a launch's
 *   input into its half, then the kernel's G blocks of T threads), stepped one
 *   action at a time in a random interleaving: a flag store, a wait that
 *   passes only when the flags say so, one vector read from one rank's half,
 *   one store. Sequences of calls of many counts and both modes, on regions
 *   laid out by sc_ipcar_layout, with the plan's chunks, blocks, halves and
 *   barrier values; every rank's result is compared with the sum of the
 *   inputs computed here. Three broken protocols (no barrier between the
 *   reduce-scatter and the all-gather, one half instead of two, an
 *   all-gather whose blocks are not the writers') must each be caught in
 *   some interleaving: the replay can fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/ipc_allreduce_plan.h"

/* ---- the plan ---- */

static void test_layout(void **state) {
  (void)state;
  for (uint64_t h = 0; h < 5000; h += 97) {
    sc_ipcar_layout_t l = sc_ipcar_layout(h);
    assert_true(l.half_bytes >= h);
    assert_int_equal(l.half_bytes % 256, 0);
    assert_true(l.status_off >= (uint64_t)SC_IPCAR_MAX_BLOCKS * SC_IPCAR_MAX_RANKS * 4);
    assert_true(l.half_off[0] >= l.status_off + 4);
    assert_int_equal(l.half_off[0] % 256, 0);
    assert_int_equal(l.half_off[1], l.half_off[0] + l.half_bytes);
    assert_int_equal(l.total, l.half_off[1] + l.half_bytes);
  }
  /* Flags are distinct words inside the flags area. */
  uint32_t seen_max = 0;
  for (uint32_t b = 0; b < SC_IPCAR_MAX_BLOCKS; b++)
    for (uint32_t f = 0; f < SC_IPCAR_MAX_RANKS; f++) {
      uint32_t i = sc_ipcar_flag_index(b, f);
      assert_true(i < SC_IPCAR_MAX_BLOCKS * SC_IPCAR_MAX_RANKS);
      if (b || f) assert_true(i > seen_max || (b == 0 && f == 0));
      seen_max = i;
    }
}

static void test_chunks_and_rounds(void **state) {
  (void)state;
  const uint64_t nvecs[] = {0, 1, 2, 3, 7, 16, 17, 31, 1000, 1009};
  for (uint32_t P = 1; P <= SC_IPCAR_MAX_RANKS; P++)
    for (size_t k = 0; k < sizeof nvecs / sizeof nvecs[0]; k++) {
      uint64_t next = 0, lo = UINT64_MAX, hi = 0;
      for (uint32_t j = 0; j < P; j++) {
        uint64_t b, e;
        sc_ipcar_chunk(nvecs[k], P, j, &b, &e);
        assert_int_equal(b, next); /* the chunks tile [0, nvec) in order */
        assert_true(e >= b);
        next = e;
        if (e - b < lo) lo = e - b;
        if (e - b > hi) hi = e - b;
      }
      assert_int_equal(next, nvecs[k]);
      assert_true(hi - lo <= 1);
    }
  const uint32_t sizes[] = {1, 2, 4, 8};
  for (uint32_t P = 1; P <= SC_IPCAR_MAX_RANKS; P++)
    for (size_t s = 0; s < 4; s++)
      for (uint64_t half = 256; half < 8192; half += 256) {
        uint32_t es = sizes[s];
        uint64_t r = sc_ipcar_round_elems(half, es, P);
        uint64_t vecs = sc_ipcar_vecs(r, es);
        assert_true(vecs * SC_IPCAR_VEC <= half);    /* a round fits its half */
        assert_int_equal(vecs % P, 0);               /* and splits evenly */
        assert_true(half / SC_IPCAR_VEC - vecs < P); /* using all but < P vectors */
        assert_int_equal(r % (SC_IPCAR_VEC / es), 0);
      }
  assert_int_equal(sc_ipcar_round_elems(4096, 3, 2), 0);
  assert_int_equal(sc_ipcar_round_elems(4096, 32, 2), 0);
  assert_int_equal(sc_ipcar_round_elems(16, 4, 2), 0);
  assert_int_equal(sc_ipcar_vecs(0, 4), 0);
  assert_int_equal(sc_ipcar_vecs(1, 1), 1);
  assert_int_equal(sc_ipcar_vecs(5, 4), 2);
  assert_int_equal(sc_ipcar_vecs(4, 4), 1);
}

static void test_blocks_and_flags(void **state) {
  (void)state;
  for (uint32_t G = 1; G <= 5; G++)
    for (uint32_t T = 1; T <= 4; T++)
      for (uint32_t b = 0; b < G; b++)
        for (uint32_t t = 0; t < T; t++)
          for (uint64_t k = 0; k < 5; k++)
            assert_int_equal(sc_ipcar_block_of(b * T + t + k * G * T, G, T), b);
  assert_true(sc_ipcar_reached(5, 5));
  assert_true(sc_ipcar_reached(6, 5));
  assert_false(sc_ipcar_reached(4, 5));
  assert_false(sc_ipcar_reached(0, 1));
  assert_true(sc_ipcar_reached(2, 0xffffffffu)); /* across the wrap */
  assert_false(sc_ipcar_reached(0xffffffffu, 2));
  assert_int_equal(sc_ipcar_barriers(SC_IPCAR_ONESHOT), 1);
  assert_int_equal(sc_ipcar_barriers(SC_IPCAR_TWOSHOT), 2);
  assert_int_equal(sc_ipcar_mode_for(100, 100), SC_IPCAR_ONESHOT);
  assert_int_equal(sc_ipcar_mode_for(101, 100), SC_IPCAR_TWOSHOT);
  assert_int_equal(sc_ipcar_mode_for(1, 0), SC_IPCAR_TWOSHOT);
  /* Blocks: shared devices divide the SMs, within [1, MAX]. */
  assert_int_equal(sc_ipcar_blocks(132, 4, 4), SC_IPCAR_MAX_BLOCKS);
  assert_int_equal(sc_ipcar_blocks(132, 2, 4), 33);
  assert_int_equal(sc_ipcar_blocks(132, 4, 1), SC_IPCAR_MAX_BLOCKS);
  assert_int_equal(sc_ipcar_blocks(132, 1, 8), 8);
  assert_int_equal(sc_ipcar_blocks(1, 1, 8), 1);
  assert_int_equal(sc_ipcar_blocks(0, 0, 2), 1);
}

/* ---- the protocol, replayed ---- */

enum { BROKEN_NONE = 0, BROKEN_NO_MID_BARRIER, BROKEN_ONE_HALF, BROKEN_GATHER_BLOCKS };

#define SIM_MAX_P     6
#define SIM_MAX_G     3
#define SIM_MAX_CALLS 8
#define SIM_MAX_COUNT 200
#define SIM_MAX_ITEMS 256

typedef struct launch {
  int call;
  uint64_t off, n; /* elements of the call */
  int mode;
  uint32_t epoch;
  unsigned half;
} launch_t;

typedef struct item {
  int src;     /* rank whose half is read; -1: the item is a reduction over all */
  uint64_t v;  /* vector */
  int chunk_j; /* the all-gather's chunk owner */
} item_t;

typedef enum bstage { B_SIG, B_WAIT, B_WORK, B_DONE } bstage_t;

typedef struct block {
  bstage_t stage;
  int barrier;        /* 0: the first, 1: the second */
  uint32_t signalled; /* bit t: flag written to rank t */
  item_t items[SIM_MAX_ITEMS];
  int nitems, next; /* the phase's items, the one in progress */
  int reads;        /* reads done of the item in progress */
  uint32_t acc[4];  /* its vector */
} block_t;

typedef struct rank {
  uint8_t *region;
  int launch;      /* index into the launches */
  int copying;     /* 1: the copy of the launch's input, 0: the kernel */
  uint64_t copied; /* vectors copied */
  block_t blocks[SIM_MAX_G];
  uint32_t out[SIM_MAX_CALLS][SIM_MAX_COUNT];
} rank_t;

typedef struct sim {
  int P, G, T, broken;
  sc_ipcar_layout_t lay;
  uint64_t round;
  int ncalls;
  uint64_t count[SIM_MAX_CALLS];
  uint32_t in[SIM_MAX_CALLS][SIM_MAX_P][SIM_MAX_COUNT];
  launch_t launches[256];
  int nlaunches;
  rank_t ranks[SIM_MAX_P];
  uint64_t rng;
} sim_t;

static uint64_t rnd(sim_t *s) {
  s->rng ^= s->rng << 13;
  s->rng ^= s->rng >> 7;
  s->rng ^= s->rng << 17;
  return s->rng;
}

#define VE (SC_IPCAR_VEC / 4) /* uint32 elements of a vector */

static uint32_t *half_of(sim_t *s, int r, unsigned h) {
  return (uint32_t *)(s->ranks[r].region + s->lay.half_off[h]);
}

/* The block's items of its first phase (the reduction) or of the all-gather
 * (gather), in a random order (its
 * threads run concurrently). */
static void block_items(sim_t *s, int r, int b, int gather) {
  rank_t *k = &s->ranks[r];
  const launch_t *L = &s->launches[k->launch];
  block_t *B = &k->blocks[b];
  B->nitems = B->next = B->reads = 0;
  uint64_t nvec = sc_ipcar_vecs(L->n, 4);
  for (int j = 0; j < s->P; j++) {
    uint64_t cb = 0, ce = nvec;
    if (L->mode == SC_IPCAR_TWOSHOT)
      sc_ipcar_chunk(nvec, (uint32_t)s->P, (uint32_t)(gather ? j : r), &cb, &ce);
    for (uint64_t u = 0; cb + u < ce; u++) {
      uint32_t owner = sc_ipcar_block_of(u, (uint32_t)s->G, (uint32_t)s->T);
      if (gather && s->broken == BROKEN_GATHER_BLOCKS) owner = (owner + 1) % (uint32_t)s->G;
      if (owner != (uint32_t)b) continue;
      assert_true(B->nitems < SIM_MAX_ITEMS);
      B->items[B->nitems++] = (item_t){gather ? j : -1, cb + u, j};
    }
    if (!gather) break; /* one range: the whole (one-shot) or the own chunk */
  }
  for (int i = B->nitems - 1; i > 0; i--) {
    int j = (int)(rnd(s) % (uint64_t)(i + 1));
    item_t t = B->items[i];
    B->items[i] = B->items[j];
    B->items[j] = t;
  }
}

static void kernel_start(sim_t *s, int r) {
  rank_t *k = &s->ranks[r];
  for (int b = 0; b < s->G; b++) {
    k->blocks[b] = (block_t){.stage = B_SIG};
    block_items(s, r, b, 0);
  }
}

static uint32_t barrier_value(const launch_t *L, int barrier) {
  return L->epoch + (uint32_t)barrier;
}

static int flags_reached(sim_t *s, int r, int b, uint32_t e) {
  for (int t = 0; t < s->P; t++)
    if (!sc_ipcar_reached(*sc_ipcar_flag(s->ranks[r].region, (uint32_t)b, (uint32_t)t), e))
      return 0;
  return 1;
}

/* Whether the rank can act now; *nacts: its runnable actions. */
static int runnable(sim_t *s, int r, int *acts) {
  rank_t *k = &s->ranks[r];
  int n = 0;
  if (k->launch >= s->nlaunches) return 0;
  if (k->copying) {
    acts[n++] = -1;
    return n;
  }
  const launch_t *L = &s->launches[k->launch];
  for (int b = 0; b < s->G; b++) {
    block_t *B = &k->blocks[b];
    if (B->stage == B_DONE) continue;
    if (B->stage == B_WAIT && !flags_reached(s, r, b, barrier_value(L, B->barrier))) continue;
    acts[n++] = b;
  }
  return n;
}

static void store_out(sim_t *s, int r, const launch_t *L, uint64_t v, const uint32_t *x) {
  for (unsigned e = 0; e < VE; e++) {
    uint64_t i = v * VE + e;
    if (i < L->n) s->ranks[r].out[L->call][L->off + i] = x[e];
  }
}

static void block_step(sim_t *s, int r, int b) {
  rank_t *k = &s->ranks[r];
  const launch_t *L = &s->launches[k->launch];
  block_t *B = &k->blocks[b];
  unsigned h = s->broken == BROKEN_ONE_HALF ? 0 : L->half;
  switch (B->stage) {
  case B_SIG: { /* one thread's flag store */
    int t;
    do t = (int)(rnd(s) % (uint64_t)s->P);
    while (B->signalled & (1u << t));
    *sc_ipcar_flag(s->ranks[t].region, (uint32_t)b, (uint32_t)r) = barrier_value(L, B->barrier);
    B->signalled |= 1u << t;
    if (B->signalled == (1u << s->P) - 1) B->stage = B_WAIT;
    return;
  }
  case B_WAIT:
    B->stage = B_WORK;
    return;
  case B_WORK:
    break;
  default:
    return;
  }
  if (B->next < B->nitems) {
    item_t *it = &B->items[B->next];
    if (it->src >= 0) { /* all-gather: one read, one store */
      store_out(s, r, L, it->v, half_of(s, it->src, h) + it->v * VE);
      B->next++;
      return;
    }
    /* A reduction: the ranks' vectors one read at a time, in rank order. */
    const uint32_t *x = half_of(s, B->reads, h) + it->v * VE;
    for (unsigned e = 0; e < VE; e++) B->acc[e] = B->reads ? B->acc[e] + x[e] : x[e];
    if (++B->reads < s->P) return;
    B->reads = 0;
    B->next++;
    if (L->mode == SC_IPCAR_ONESHOT)
      store_out(s, r, L, it->v, B->acc);
    else
      memcpy(half_of(s, r, h) + it->v * VE, B->acc, sizeof(B->acc));
    return;
  }
  /* The phase's items are done. */
  if (L->mode == SC_IPCAR_TWOSHOT && B->barrier == 0) {
    /* This block's second barrier, then its all-gather items. */
    block_items(s, r, b, 1);
    B->barrier = 1;
    B->signalled = 0;
    B->stage = s->broken == BROKEN_NO_MID_BARRIER ? B_WORK : B_SIG;
    return;
  }
  B->stage = B_DONE;
  for (int g = 0; g < s->G; g++)
    if (k->blocks[g].stage != B_DONE) return;
  k->launch++; /* the kernel ended: the stream goes on */
  k->copying = 1;
  k->copied = 0;
}

static void copy_step(sim_t *s, int r) {
  rank_t *k = &s->ranks[r];
  const launch_t *L = &s->launches[k->launch];
  unsigned h = s->broken == BROKEN_ONE_HALF ? 0 : L->half;
  uint64_t nvec = sc_ipcar_vecs(L->n, 4), v = k->copied;
  if (v < nvec) {
    uint32_t *dst = half_of(s, r, h) + v * VE;
    for (unsigned e = 0; e < VE; e++) {
      uint64_t i = v * VE + e;
      if (i < L->n) dst[e] = s->in[L->call][r][L->off + i];
    }
    k->copied++;
  }
  if (k->copied >= nvec) {
    k->copying = 0;
    kernel_start(s, r);
  }
}

/* One replay; 1 when every rank's every result is right. */
static int replay(int P, int G, int T, int broken, uint64_t seed, uint64_t half_bytes,
                  uint64_t oneshot_max) {
  sim_t *s = calloc(1, sizeof(*s));
  assert_non_null(s);
  s->P = P, s->G = G, s->T = T, s->broken = broken;
  s->rng = seed * 0x9e3779b97f4a7c15ull + 1;
  s->lay = sc_ipcar_layout(half_bytes);
  s->round = sc_ipcar_round_elems(s->lay.half_bytes, 4, (uint32_t)P);
  assert_true(s->round > 0);
  s->ncalls = 3 + (int)(rnd(s) % (SIM_MAX_CALLS - 3));
  uint32_t epoch = 0;
  unsigned half = 0;
  for (int c = 0; c < s->ncalls; c++) {
    s->count[c] = 1 + rnd(s) % SIM_MAX_COUNT;
    int mode = (int)sc_ipcar_mode_for(s->count[c] * 4, oneshot_max);
    for (int r = 0; r < P; r++)
      for (uint64_t i = 0; i < s->count[c]; i++) s->in[c][r][i] = (uint32_t)rnd(s);
    for (uint64_t off = 0; off < s->count[c]; off += s->round) {
      uint64_t n = s->count[c] - off < s->round ? s->count[c] - off : s->round;
      assert_true(s->nlaunches < 256);
      s->launches[s->nlaunches++] = (launch_t){c, off, n, mode, epoch + 1, half};
      epoch += sc_ipcar_barriers((sc_ipcar_mode_t)mode);
      half ^= 1u;
    }
  }
  for (int r = 0; r < P; r++) {
    s->ranks[r].region = calloc(1, s->lay.total);
    assert_non_null(s->ranks[r].region);
    s->ranks[r].copying = 1;
    memset(s->ranks[r].out, 0xee, sizeof(s->ranks[r].out));
  }
  int acts[SIM_MAX_P][SIM_MAX_G + 1], nacts[SIM_MAX_P];
  for (;;) {
    int total = 0;
    for (int r = 0; r < P; r++) total += nacts[r] = runnable(s, r, acts[r]);
    if (total == 0) break;
    int pick = (int)(rnd(s) % (uint64_t)total);
    for (int r = 0; r < P; r++) {
      if (pick >= nacts[r]) {
        pick -= nacts[r];
        continue;
      }
      if (acts[r][pick] < 0)
        copy_step(s, r);
      else
        block_step(s, r, acts[r][pick]);
      break;
    }
  }
  int ok = 1;
  for (int r = 0; r < P; r++) {
    if (s->ranks[r].launch != s->nlaunches) ok = 0; /* stuck: a wait that never passes */
    for (int c = 0; c < s->ncalls && ok; c++)
      for (uint64_t i = 0; i < s->count[c]; i++) {
        uint32_t want = 0;
        for (int j = 0; j < P; j++) want += s->in[c][j][i];
        if (s->ranks[r].out[c][i] != want) {
          ok = 0;
          break;
        }
      }
  }
  for (int r = 0; r < P; r++) free(s->ranks[r].region);
  free(s);
  return ok;
}

static void test_protocol_replays(void **state) {
  (void)state;
  int runs = 0;
  for (int P = 1; P <= SIM_MAX_P; P++)
    for (int G = 1; G <= SIM_MAX_G; G++)
      for (int T = 1; T <= 2; T++)
        for (uint64_t seed = 0; seed < 12; seed++) {
          /* Small halves (several rounds per call); both modes, and a mix. */
          uint64_t oneshot = seed % 3 == 0 ? 0 : (seed % 3 == 1 ? 1u << 20 : 200);
          if (!replay(P, G, T, BROKEN_NONE, seed, 256, oneshot))
            fail_msg("P=%d G=%d T=%d seed %llu: a wrong result or a stuck wait", P, G, T,
                     (unsigned long long)seed);
          runs++;
        }
  assert_true(runs > 400);
}

/* The replay catches each broken protocol in some interleaving. */
static void test_protocol_broken_caught(void **state) {
  (void)state;
  const struct {
    int broken;
    uint64_t oneshot;
    const char *what;
  } cases[] = {{BROKEN_NO_MID_BARRIER, 0, "no barrier between reduce-scatter and all-gather"},
               {BROKEN_ONE_HALF, 0, "one half (two-shot)"},
               {BROKEN_ONE_HALF, 1u << 20, "one half (one-shot)"},
               {BROKEN_GATHER_BLOCKS, 0, "all-gather blocks that are not the writers"}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int caught = 0;
    for (uint64_t seed = 0; seed < 200 && !caught; seed++)
      caught = !replay(3, cases[c].broken == BROKEN_GATHER_BLOCKS ? 2 : 1 + (int)(seed % 2), 1,
                       cases[c].broken, seed, 256, cases[c].oneshot);
    if (!caught) fail_msg("the replay never caught: %s", cases[c].what);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_chunks_and_rounds),
      cmocka_unit_test(test_blocks_and_flags),
      cmocka_unit_test(test_protocol_replays),
      cmocka_unit_test(test_protocol_broken_caught),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
