/* SPDX-License-Identifier: BSD-3-Clause */
/* OMGS (sc_fplan_omgs) against brute force: for small layer counts every
 * contiguous partition is enumerated (2^(n-1) bitmasks of cut points), each
 * priced with a timeline written here (a bucket starts when the link is free
 * and its last gradient is ready, and costs alpha + beta * bytes); the
 * planner's partition must reach the minimum end, respect the size cap and
 * the dtype groups, and never end later than WFBP, one bucket, or MG-WFBP's
 * greedy merge under the same model. */
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

/* End of the timeline of the partition whose cut points are mask's bits (bit
 * l set: a bucket ends after tensor l); INFINITY if it breaks a rule. */
static double price_mask(const model_t *m, unsigned mask) {
  double t_ready = 0, link = 0;
  size_t bytes = 0;
  for (size_t l = 0; l < m->n; l++) {
    t_ready += m->bw[l];
    bytes += m->bytes[l];
    int last = l + 1 == m->n || (mask >> l & 1u);
    if (!last && m->group[l] != m->group[l + 1]) return INFINITY;
    if (last) {
      int alone = 1;
      for (size_t k = l; k > 0 && !(mask >> (k - 1) & 1u); k--) alone = 0;
      if (bytes > m->cap && !alone) return INFINITY;
      double start = link > t_ready ? link : t_ready;
      link = start + m->alpha + m->beta * (double)bytes;
      bytes = 0;
    }
  }
  return link;
}

static double price_first(const model_t *m, const size_t *first, size_t nb) {
  return price_mask(m, fplan_mask_of(m, first, nb));
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
  return fplan_urand(&rng);
}

static void random_model(model_t *m, size_t n, int groups, int capped) {
  fplan_random_model(m, n, groups, capped, &rng);
}

static void check_against_brute(const model_t *m) {
  sc_fplan_in_t in = {.n = m->n, .bytes = m->bytes, .bw_us = m->bw, .group = m->group};
  double best = INFINITY;
  for (unsigned mask = 0; mask < 1u << (m->n - 1); mask++) {
    double e = price_mask(m, mask);
    if (e < best) best = e;
  }
  size_t first[MAXN + 1];
  size_t nb = sc_fplan_omgs(&in, m->alpha, m->beta, m->cap, first);
  double got = price_first(m, first, nb);
  assert_true(isfinite(got)); /* the plan keeps the cap and the groups */
  assert_true(fabs(got - best) <= 1e-9 * (1 + best));
  /* ... and agrees with the library's own timeline of that plan. */
  assert_true(fabs(sc_fplan_timeline(&in, first, nb, m->alpha, m->beta, NULL, NULL) - got) <=
              1e-9 * (1 + got));
  /* Never worse than the other planners under the same model. */
  size_t other[MAXN + 1];
  double e;
  e = price_first(m, other, sc_fplan_none(&in, other));
  assert_true(got <= e + 1e-9 * (1 + e));
  e = price_first(m, other, sc_fplan_mgwfbp_cap(&in, m->alpha, m->beta, m->cap, other));
  assert_true(got <= e + 1e-9 * (1 + e));
  if (m->cap == SIZE_MAX) {
    e = price_first(m, other, sc_fplan_single(&in, other));
    assert_true(got <= e + 1e-9 * (1 + e));
  }
}

static void test_omgs_brute_force_random(void **state) {
  (void)state;
  for (int trial = 0; trial < 3000; trial++) {
    model_t m;
    random_model(&m, 1 + (size_t)(urand() * MAXN), trial % 3 == 1, trial % 4 == 2);
    check_against_brute(&m);
  }
}

/* Two tensors ready together: one merged bucket saves a startup exactly. A
 * layer whose backward outlasts the startup it would save stays alone. */
static void test_omgs_edge_cases(void **state) {
  (void)state;
  size_t bytes[3] = {100, 100, 100}, first[4];
  double bw0[3] = {0, 0, 0}, bwlong[3] = {0, 1000, 0};
  sc_fplan_in_t in = {.n = 3, .bytes = bytes, .bw_us = bw0};
  assert_int_equal(sc_fplan_omgs(&in, 50, 0.01, SIZE_MAX, first), 1);
  assert_int_equal(first[1], 3);
  /* Tensor 0 alone ends at 51 long before tensor 1 is ready at 1000: the
   * merge {0,1,2} would end 1000 + 53 = 1053, the split ends 1000 + 52. */
  in.bw_us = bwlong;
  size_t nb = sc_fplan_omgs(&in, 50, 0.01, SIZE_MAX, first);
  assert_int_equal(nb, 2);
  assert_int_equal(first[1], 1);
  /* A cap below every tensor: every tensor alone. */
  in.bw_us = bw0;
  assert_int_equal(sc_fplan_omgs(&in, 50, 0.01, 10, first), 3);
  in.n = 0;
  assert_int_equal(sc_fplan_omgs(&in, 50, 0.01, SIZE_MAX, first), 0);
  assert_int_equal(first[0], 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_omgs_brute_force_random),
      cmocka_unit_test(test_omgs_edge_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
