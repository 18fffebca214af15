/* SPDX-License-Identifier: BSD-3-Clause */
/* P3's pure decisions (lib/fusion/plan.c): the slice plan against a reference
 * that peels slices off one by one; the default slice size against the
 * model's bounds; and the scheduler's choices, replayed step by step on
 * ranks that make tensors ready in different orders at different times,
 * against a reference scheduler that keeps an explicit list of slices
 * ready everywhere sorted by priority. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/fusion/plan.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static size_t urand(size_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (size_t)(rng % n);
}

static void test_slice_plan(void **state) {
  (void)state;
  const size_t es[] = {1, 2, 4, 8};
  for (int trial = 0; trial < 20000; trial++) {
    size_t e = es[urand(4)], count = 1 + urand(5000), sb = urand(3000);
    size_t se = sc_fplan_p3_slice_elems(sb, e);
    /* the largest whole number of elements in sb bytes, at least one */
    size_t want_se = 1;
    while ((want_se + 1) * e <= sb) want_se++;
    assert_int_equal(se, want_se);
    size_t left = count, slices = 0;
    while (left) {
      left -= left < se ? left : se;
      slices++;
    }
    assert_int_equal(sc_fplan_p3_nslices(count, se), slices);
  }
}

static void test_default_slice(void **state) {
  (void)state;
  /* 1 Gbit/s ring on 4 ranks: about 12 ns/B; a 2 ms step -> 16 * 2000 / 0.012 B. */
  size_t s = sc_fplan_p3_default_slice(2000, 0.012);
  double want = SC_FPLAN_P3_SLICE_ALPHAS * 2000 / 0.012;
  assert_true(want > (double)SC_FPLAN_P3_SLICE_MIN && want < (double)SC_FPLAN_P3_SLICE_MAX);
  assert_true(s % 4096 == 0);
  assert_true((double)s <= want && want < (double)s + 4096);
  assert_int_equal(sc_fplan_p3_default_slice(1, 1), SC_FPLAN_P3_SLICE_MIN);
  assert_int_equal(sc_fplan_p3_default_slice(1e6, 1e-9), SC_FPLAN_P3_SLICE_MAX);
  assert_int_equal(sc_fplan_p3_default_slice(5, 0), SC_FPLAN_P3_SLICE_MAX);
  size_t prev = 0;
  for (double a = 1; a < 1e5; a *= 1.7) { /* monotone in alpha */
    size_t x = sc_fplan_p3_default_slice(a, 0.01);
    assert_true(x >= prev && x >= SC_FPLAN_P3_SLICE_MIN && x <= SC_FPLAN_P3_SLICE_MAX);
    prev = x;
  }
}

enum { NT = 9, NR = 4, ROUNDS = 3, MAXSTEP = 4000 };

/* ready_at[r][round][t]: the step at which rank r makes tensor t ready in a
 * round; a round's readies on a rank start only once its previous round of
 * that tensor was delivered there (the wait-before-ready rule). */
typedef struct world {
  size_t ns[NT];
  size_t delay[NR][ROUNDS][NT];
} world_t;

/* The library's rule, driven as the scheduler drives it: at each step the
 * agreement is the MIN over ranks of each tensor's readies, and one slice of
 * sc_fplan_p3_next's choice goes. Records the tensor of every slice. */
static size_t run_lib(const world_t *w, size_t *seq) {
  uint64_t gen[NR][NT] = {{0}}, agreed[NT], launched[NT] = {0}, done[NT] = {0};
  size_t next[NT] = {0}, since[NR][NT] = {{0}}, len = 0;
  for (size_t step = 0; step < MAXSTEP; step++) {
    for (int r = 0; r < NR; r++)
      for (int t = 0; t < NT; t++)
        if (gen[r][t] == done[t] && gen[r][t] < ROUNDS &&
            step >= since[r][t] + w->delay[r][gen[r][t]][t])
          gen[r][t]++;
    for (int t = 0; t < NT; t++) {
      agreed[t] = gen[0][t];
      for (int r = 1; r < NR; r++)
        if (gen[r][t] < agreed[t]) agreed[t] = gen[r][t];
    }
    long c = sc_fplan_p3_next(NT, agreed, launched);
    if (c < 0) {
      int all = 1;
      for (int t = 0; t < NT; t++) all &= done[t] == ROUNDS;
      if (all) return len;
      continue;
    }
    seq[len++] = (size_t)c;
    if (++next[c] == w->ns[c]) { /* its round is launched, and (one step later) done */
      next[c] = 0;
      launched[c]++;
      done[c]++;
      for (int r = 0; r < NR; r++) since[r][c] = step + 1;
    }
  }
  fail_msg("schedule did not finish");
  return 0;
}

/* The reference: per step, collect the (tensor, slice) pairs whose round
 * has been made ready by every rank and not sent, sort them by tensor
 * descending then slice ascending, send the first. */
typedef struct cand {
  size_t t, s;
} cand_t;

static int cand_cmp(const void *a, const void *b) {
  const cand_t *x = a, *y = b;
  if (x->t != y->t) return x->t > y->t ? -1 : 1;
  return x->s < y->s ? -1 : x->s > y->s;
}

static size_t run_ref(const world_t *w, size_t *seq) {
  int round_of[NT] = {0};            /* the round being sent */
  size_t sent[NT] = {0};             /* slices of it sent */
  size_t readied_at[NR][NT] = {{0}}; /* step of this rank's ready of that round, or SIZE_MAX */
  size_t free_at[NT] = {0};          /* when the previous round was delivered */
  size_t len = 0;
  cand_t cands[NT * 64];
  for (size_t step = 0; step < MAXSTEP; step++) {
    size_t nc = 0;
    int finished = 1;
    for (size_t t = 0; t < NT; t++) {
      if (round_of[t] == ROUNDS) continue;
      finished = 0;
      int everywhere = 1;
      for (int r = 0; r < NR; r++) {
        readied_at[r][t] = free_at[t] + w->delay[r][round_of[t]][t];
        if (readied_at[r][t] > step) everywhere = 0;
      }
      if (!everywhere) continue;
      for (size_t s = sent[t]; s < w->ns[t]; s++) cands[nc++] = (cand_t){t, s};
    }
    if (finished) return len;
    if (!nc) continue;
    qsort(cands, nc, sizeof(*cands), cand_cmp);
    size_t t = cands[0].t;
    assert_int_equal(cands[0].s, sent[t]);
    seq[len++] = t;
    if (++sent[t] == w->ns[t]) {
      sent[t] = 0;
      round_of[t]++;
      free_at[t] = step + 1;
    }
  }
  fail_msg("reference schedule did not finish");
  return 0;
}

static void test_next_slice_matches_reference(void **state) {
  (void)state;
  static size_t a[MAXSTEP], b[MAXSTEP];
  for (int trial = 0; trial < 300; trial++) {
    world_t w;
    for (int t = 0; t < NT; t++) w.ns[t] = 1 + urand(trial % 2 ? 6 : 2);
    for (int r = 0; r < NR; r++)
      for (int g = 0; g < ROUNDS; g++)
        for (int t = 0; t < NT; t++)
          /* Ranks ready in backward order with jitter, so their orders differ. */
          w.delay[r][g][t] = (size_t)t * (trial % 3) + urand(trial % 5 == 0 ? 2 : 12);
    size_t na = run_lib(&w, a), nb = run_ref(&w, b);
    assert_int_equal(na, nb);
    size_t total = 0;
    for (int t = 0; t < NT; t++) total += w.ns[t] * ROUNDS;
    assert_int_equal(na, total); /* every slice of every round, once */
    for (size_t i = 0; i < na; i++) assert_int_equal(a[i], b[i]);
  }
}

/* Preemption at slice granularity: tensor 0 (lowest priority, 5 slices) is
 * ready everywhere first; tensor 2 becomes ready everywhere after two of its
 * slices went: it goes next, then tensor 0 resumes. */
static void test_preemption(void **state) {
  (void)state;
  uint64_t agreed[3] = {1, 0, 0}, launched[3] = {0, 0, 0};
  assert_int_equal(sc_fplan_p3_next(3, agreed, launched), 0);
  agreed[2] = 1;
  assert_int_equal(sc_fplan_p3_next(3, agreed, launched), 2);
  launched[2] = 1; /* its slices all launched */
  assert_int_equal(sc_fplan_p3_next(3, agreed, launched), 0);
  launched[0] = 1;
  assert_int_equal(sc_fplan_p3_next(3, agreed, launched), -1);
  agreed[1] = 1; /* ready on every rank only now */
  assert_int_equal(sc_fplan_p3_next(3, agreed, launched), 1);
}

/* Several slices per step. The library: sc_fplan_p3_batch per step, with
 * the same world as run_lib; records each slice's (tensor, slice, step). */
typedef struct sent3 {
  size_t t, s, step;
} sent3_t;

static size_t slice_bytes_of(const size_t *full, const size_t *tail, const size_t *ns, size_t t,
                             size_t s) {
  return s + 1 == ns[t] ? tail[t] : full[t];
}

static size_t run_lib_batch(const world_t *w, const size_t *full, const size_t *tail, size_t budget,
                            size_t maxs, sent3_t *seq) {
  uint64_t gen[NR][NT] = {{0}}, agreed[NT], launched[NT] = {0};
  size_t next[NT] = {0}, since[NR][NT] = {{0}}, len = 0, bt[NT * 8], bi[NT * 8];
  for (size_t step = 0; step < MAXSTEP; step++) {
    for (int r = 0; r < NR; r++)
      for (int t = 0; t < NT; t++)
        if (gen[r][t] == launched[t] && gen[r][t] < ROUNDS &&
            step >= since[r][t] + w->delay[r][gen[r][t]][t])
          gen[r][t]++;
    for (int t = 0; t < NT; t++) {
      agreed[t] = gen[0][t];
      for (int r = 1; r < NR; r++)
        if (gen[r][t] < agreed[t]) agreed[t] = gen[r][t];
    }
    uint64_t before[NT];
    memcpy(before, launched, sizeof(before));
    size_t k =
        sc_fplan_p3_batch(NT, agreed, launched, next, w->ns, full, tail, budget, maxs, bt, bi);
    assert_true(k <= maxs);
    for (size_t j = 0; j < k; j++) seq[len++] = (sent3_t){bt[j], bi[j], step};
    for (int t = 0; t < NT; t++)
      if (launched[t] != before[t])
        for (int r = 0; r < NR; r++) since[r][t] = step + 1;
    int all = 1;
    for (int t = 0; t < NT; t++) all &= launched[t] == ROUNDS;
    if (all) return len;
  }
  fail_msg("batched schedule did not finish");
  return 0;
}

/* The reference: per step, every unsent slice of every round ready on every
 * rank, sorted by tensor descending then slice ascending; the step sends the
 * longest prefix within the byte budget and count (at least one slice). */
static size_t run_ref_batch(const world_t *w, const size_t *full, const size_t *tail, size_t budget,
                            size_t maxs, sent3_t *seq) {
  int round_of[NT] = {0};
  size_t sent[NT] = {0}, free_at[NT] = {0}, len = 0;
  cand_t cands[NT * 64];
  for (size_t step = 0; step < MAXSTEP; step++) {
    size_t nc = 0;
    int finished = 1;
    for (size_t t = 0; t < NT; t++) {
      if (round_of[t] == ROUNDS) continue;
      finished = 0;
      int everywhere = 1;
      for (int r = 0; r < NR; r++)
        if (free_at[t] + w->delay[r][round_of[t]][t] > step) everywhere = 0;
      if (!everywhere) continue;
      for (size_t s = sent[t]; s < w->ns[t]; s++) cands[nc++] = (cand_t){t, s};
    }
    if (finished) return len;
    qsort(cands, nc, sizeof(*cands), cand_cmp);
    size_t used = 0;
    for (size_t j = 0; j < nc && j < maxs; j++) {
      size_t b = slice_bytes_of(full, tail, w->ns, cands[j].t, cands[j].s);
      if (j > 0 && used + b > budget) break;
      used += b;
      size_t t = cands[j].t;
      seq[len++] = (sent3_t){t, cands[j].s, step};
      if (++sent[t] == w->ns[t]) {
        sent[t] = 0;
        round_of[t]++;
        free_at[t] = step + 1;
      }
    }
  }
  fail_msg("reference batched schedule did not finish");
  return 0;
}

static void test_batch_matches_reference(void **state) {
  (void)state;
  static sent3_t a[MAXSTEP * 8], b[MAXSTEP * 8];
  static size_t single[MAXSTEP];
  for (int trial = 0; trial < 400; trial++) {
    world_t w;
    size_t full[NT], tail[NT];
    for (int t = 0; t < NT; t++) {
      w.ns[t] = 1 + urand(trial % 2 ? 6 : 2);
      full[t] = 1 + urand(100);
      tail[t] = 1 + urand(full[t]);
    }
    for (int r = 0; r < NR; r++)
      for (int g = 0; g < ROUNDS; g++)
        for (int t = 0; t < NT; t++)
          w.delay[r][g][t] = (size_t)t * (trial % 3) + urand(trial % 5 == 0 ? 2 : 12);
    /* trial % 4 == 0: budget 0 and one slice a step, which must be the
     * one-slice-per-step schedule of run_lib. */
    size_t budget = trial % 4 == 0 ? 0 : urand(400);
    size_t maxs = trial % 4 == 0 ? 1 : 1 + urand(NT * 8 - 1);
    size_t na = run_lib_batch(&w, full, tail, budget, maxs, a);
    size_t nb = run_ref_batch(&w, full, tail, budget, maxs, b);
    assert_int_equal(na, nb);
    size_t total = 0;
    for (int t = 0; t < NT; t++) total += w.ns[t] * ROUNDS;
    assert_int_equal(na, total);
    for (size_t i = 0; i < na; i++) {
      assert_int_equal(a[i].t, b[i].t);
      assert_int_equal(a[i].s, b[i].s);
      assert_int_equal(a[i].step, b[i].step);
    }
    if (trial % 4 == 0) {
      assert_int_equal(run_lib(&w, single), na);
      for (size_t i = 0; i < na; i++) assert_int_equal(single[i], a[i].t);
    }
  }
}

/* A budget of several slices sends fc6-like rounds in fewer steps, and a
 * tensor that is agreed only after a step still overtakes the rest. */
static void test_batch_budget(void **state) {
  (void)state;
  uint64_t agreed[3] = {1, 0, 0}, launched[3] = {0, 0, 0};
  size_t next[3] = {0}, ns[3] = {10, 1, 2}, full[3] = {8, 8, 8}, tail[3] = {3, 5, 8}, bt[8], bi[8];
  size_t k = sc_fplan_p3_batch(3, agreed, launched, next, ns, full, tail, 32, 8, bt, bi);
  assert_int_equal(k, 4); /* 4 x 8 bytes fill the budget */
  for (size_t j = 0; j < k; j++) assert_int_equal(bt[j], 0), assert_int_equal(bi[j], j);
  agreed[2] = 1;
  k = sc_fplan_p3_batch(3, agreed, launched, next, ns, full, tail, 32, 8, bt, bi);
  assert_int_equal(k, 4); /* tensor 2's two slices first, then tensor 0 resumes */
  assert_int_equal(bt[0], 2), assert_int_equal(bt[1], 2), assert_int_equal(bt[2], 0);
  assert_int_equal(bi[2], 4);
  assert_int_equal(launched[2], 1);
  /* A slice larger than the budget still goes, alone. */
  k = sc_fplan_p3_batch(3, agreed, launched, next, ns, full, tail, 1, 8, bt, bi);
  assert_int_equal(k, 1);
  agreed[0] = 0;
  assert_int_equal(sc_fplan_p3_batch(3, agreed, launched, next, ns, full, tail, 32, 8, bt, bi), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slice_plan),
      cmocka_unit_test(test_default_slice),
      cmocka_unit_test(test_next_slice_matches_reference),
      cmocka_unit_test(test_preemption),
      cmocka_unit_test(test_batch_matches_reference),
      cmocka_unit_test(test_batch_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
