/* SPDX-License-Identifier: BSD-3-Clause */
/* DeAR's planner under the cost model (sc_fplan_dear_model, sc_fplan_dear_time)
 * against an event simulation written here, layer by layer: the
 * reduce-scatters go on one link in ready order once a bucket's last
 * gradient is in, the all-gathers follow in forward order, and each layer
 * runs forward (half its backward time) after the layer before it, after
 * backward, and after its bucket's all-gather. For small layer counts every
 * contiguous partition is priced; the planner (a local search) must come
 * within 0.1% of the minimum every time and reach it in all but a handful of
 * 3000 models, keep the cap and the dtype groups, and never lose to the size
 * rule. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/fusion/plan.h"
#include "test/unit/fplan_random.h"

/* The iteration of the partition whose cut points are mask's bits (bit l:
 * a bucket ends after tensor l); INFINITY if it breaks the cap or a group. */
static double simulate(const model_t *m, unsigned mask) {
  size_t bucket_of[MAXN], nb = 0, lo[MAXN], hi[MAXN], bytes[MAXN];
  for (size_t l = 0; l < m->n; l++) {
    if (l == 0 || (mask >> (l - 1) & 1u)) {
      lo[nb] = l;
      bytes[nb] = 0;
      nb++;
    } else if (m->group[l] != m->group[l - 1]) {
      return INFINITY;
    }
    bucket_of[l] = nb - 1;
    hi[nb - 1] = l + 1;
    bytes[nb - 1] += m->bytes[l];
  }
  for (size_t b = 0; b < nb; b++)
    if (hi[b] - lo[b] > 1 && bytes[b] > m->cap) return INFINITY;
  double link = 0, bwd_end = 0, ag_done[MAXN];
  for (size_t l = 0; l < m->n; l++) bwd_end += m->bw[l];
  for (size_t b = 0; b < nb; b++) {
    double ready = 0;
    for (size_t l = 0; l < hi[b]; l++) ready += m->bw[l];
    link = fmax(link, ready) + m->alpha + m->beta / 2 * (double)bytes[b];
  }
  for (size_t b = nb; b-- > 0;) {
    link += m->alpha + m->beta / 2 * (double)bytes[b];
    ag_done[b] = link;
  }
  double t = bwd_end;
  for (size_t l = m->n; l-- > 0;) t = fmax(t, ag_done[bucket_of[l]]) + m->bw[l] / 2;
  return t;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) {
  return fplan_urand(&rng);
}

/* At least one timed layer: without backward times the planner is the
 * size rule by design (test_untimed_is_size_rule). */
static void random_model(model_t *m, size_t n, int groups, int capped) {
  fplan_random_model(m, n, groups, capped, &rng);
  m->bw[(size_t)(urand() * n)] += 1;
}

static int near(double a, double b) {
  return fabs(a - b) <= 1e-9 * (1 + fabs(b));
}

/* The library's price of any partition is the simulation's. */
static void test_price_matches_simulation(void **state) {
  (void)state;
  for (int trial = 0; trial < 2000; trial++) {
    model_t m;
    random_model(&m, 1 + (size_t)(urand() * MAXN), 0, 0);
    unsigned mask = (unsigned)(urand() * (double)(1u << (m.n - 1)));
    size_t first[MAXN + 1], nb = 0;
    first[nb++] = 0;
    for (size_t l = 0; l + 1 < m.n; l++)
      if (mask >> l & 1u) first[nb++] = l + 1;
    first[nb] = m.n;
    sc_fplan_in_t in = {.n = m.n, .bytes = m.bytes, .bw_us = m.bw};
    assert_true(near(sc_fplan_dear_time(&in, first, nb, m.alpha, m.beta), simulate(&m, mask)));
  }
}

static void test_optimal_against_brute_force(void **state) {
  (void)state;
  int beat_size_rule = 0, missed = 0;
  for (int trial = 0; trial < 3000; trial++) {
    model_t m;
    random_model(&m, 1 + (size_t)(urand() * MAXN), trial % 3 == 1, trial % 4 == 2);
    double best = INFINITY;
    for (unsigned mask = 0; mask < 1u << (m.n - 1); mask++) best = fmin(best, simulate(&m, mask));
    sc_fplan_in_t in = {.n = m.n, .bytes = m.bytes, .bw_us = m.bw, .group = m.group};
    size_t first[MAXN + 1], other[MAXN + 1];
    size_t nb = sc_fplan_dear_model(&in, m.alpha, m.beta, m.cap, first);
    double got = simulate(&m, fplan_mask_of(&m, first, nb));
    assert_true(isfinite(got)); /* the cap and the groups hold */
    assert_true(got <= best * (1 + 1e-3));
    missed += !near(got, best);
    size_t cap = m.cap == SIZE_MAX ? (size_t)1 << 40 : m.cap;
    double size_rule = simulate(&m, fplan_mask_of(&m, other, sc_fplan_dear(&in, cap, other)));
    assert_true(got <= size_rule + 1e-9 * (1 + size_rule));
    beat_size_rule += got < size_rule * (1 - 1e-9);
  }
  assert_true(missed <= 10);
  /* The search is not the size rule by another name. */
  assert_true(beat_size_rule > 100);
}

/* Two layers of 100 us backward, 1000 B each; alpha 10, beta 0.1 (a half
 * takes 10 + 50 us per 1000 B).
 * One bucket: reduce-scatter 200 -> 310, all-gather -> 420, forward of both
 * layers (50 us each) 420 -> 520.
 * Two: reduce-scatters 100 -> 160 and 200 -> 260; all-gathers of the first
 * layer's bucket 260 -> 320 and of the other 320 -> 380; forward of the
 * first layer 320 -> 370, of the second max(370, 380) -> 430. */
static void test_hand_example(void **state) {
  (void)state;
  size_t bytes[2] = {1000, 1000}, first[3];
  double bw[2] = {100, 100};
  sc_fplan_in_t in = {.n = 2, .bytes = bytes, .bw_us = bw};
  size_t one[2] = {0, 2};
  assert_true(near(sc_fplan_dear_time(&in, one, 1, 10, 0.1), 520));
  assert_int_equal(sc_fplan_dear_model(&in, 10, 0.1, SIZE_MAX, first), 2);
  assert_int_equal(first[1], 1);
  assert_true(near(sc_fplan_dear_time(&in, first, 2, 10, 0.1), 430));
  /* A cap of 1500 B forbids the merge; a huge alpha makes it the better. */
  assert_int_equal(sc_fplan_dear_model(&in, 10, 0.1, 1500, first), 2);
  assert_int_equal(sc_fplan_dear_model(&in, 1e6, 0.1, SIZE_MAX, first), 1);
}

/* No backward times, no cost, or no finite price: nothing to plan against;
 * the size rule. */
static void test_untimed_is_size_rule(void **state) {
  (void)state;
  size_t bytes[5] = {10, 20, 30, 40, 50}, a[6], b[6];
  double zero[5] = {0}, some[5] = {1, 2, 3, 4, 5};
  sc_fplan_in_t in = {.n = 5, .bytes = bytes, .bw_us = NULL};
  size_t na = sc_fplan_dear_model(&in, 10, 0.1, 64, a), nb = sc_fplan_dear(&in, 64, b);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, (na + 1) * sizeof(*a));
  in.bw_us = zero;
  na = sc_fplan_dear_model(&in, 10, 0.1, 64, a);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, (na + 1) * sizeof(*a));
  in.bw_us = some;
  na = sc_fplan_dear_model(&in, 10, 0.0, 64, a);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, (na + 1) * sizeof(*a));
  /* Times past double's range price every plan at infinity. */
  double huge[5] = {1e308, 1e308, 1e308, 1e308, 1e308};
  in.bw_us = huge;
  na = sc_fplan_dear_model(&in, 10, 0.1, 64, a);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, (na + 1) * sizeof(*a));
  in.n = 0;
  assert_int_equal(sc_fplan_dear_model(&in, 10, 0.1, 64, a), 0);
  assert_int_equal(a[0], 0);
}

/* A model the size of ResNet-50's (161 tensors): a valid partition, never
 * worse than any plan of the size rule's family. */
static void test_large_model(void **state) {
  (void)state;
  enum { N = 161 };
  size_t bytes[N], first[N + 1], other[N + 1];
  double bw[N];
  for (size_t l = 0; l < N; l++) {
    bytes[l] = (size_t)(4 * pow(10, 2 + 4 * urand()));
    bw[l] = 50 + 1000 * urand();
  }
  sc_fplan_in_t in = {.n = N, .bytes = bytes, .bw_us = bw};
  size_t cap = (size_t)25 << 20;
  size_t nb = sc_fplan_dear_model(&in, 50, 0.0125, cap, first);
  assert_int_equal(first[0], 0);
  assert_int_equal(first[nb], N);
  for (size_t b = 0; b < nb; b++) assert_true(first[b + 1] > first[b]);
  double got = sc_fplan_dear_time(&in, first, nb, 50, 0.0125);
  for (size_t k = 0; k < 30; k++) {
    size_t no = sc_fplan_dear_capped(&in, cap, cap >> k, other);
    assert_true(got <= sc_fplan_dear_time(&in, other, no, 50, 0.0125) * (1 + 1e-9));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_price_matches_simulation),
      cmocka_unit_test(test_optimal_against_brute_force),
      cmocka_unit_test(test_hand_example),
      cmocka_unit_test(test_untimed_is_size_rule),
      cmocka_unit_test(test_large_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
