/* SPDX-License-Identifier: BSD-3-Clause */
/* The fusion planners (lib/fusion/plan.c) against timelines worked out by
 * hand in the comments: the MG-WFBP merge rule on a small example, its edge
 * cases (one tensor, zero-time layers, huge and zero alpha, dtype groups,
 * the size cap), the size-threshold planners in both directions, DeAR's
 * growing buckets, the timeline, the calibration's line, and SC_COMPRESS_AUTO's
 * correction of a modelled cost from its trial. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/fusion/plan.h"

static void expect_first(const size_t *got, size_t nb_got, const size_t *want, size_t nb_want) {
  assert_int_equal(nb_got, nb_want);
  for (size_t i = 0; i <= nb_want; i++) assert_int_equal(got[i], want[i]);
}

static const size_t b100[4] = {100, 100, 100, 100};
static const double bw10[4] = {10, 10, 10, 10}; /* ready at 10, 20, 30, 40 us */

/* alpha 5, beta 0.1: T(100 B) = 15.
 * l=0: bucket {0} starts max(0, 10) = 10; ready[1] - 10 = 10 >= 5: close, ends 25.
 * l=1: {1} starts max(25, 20) = 25; 30 - 25 = 5, not < 5: close, ends 40.
 * l=2: {2} starts max(40, 30) = 40; 40 - 40 = 0 < 5: 3 joins -> {2, 3}.
 * The merged bucket ends 40 + 5 + 20 = 65, WFBP would end 70. */
static void test_mgwfbp_small_example(void **state) {
  (void)state;
  sc_fplan_in_t in = {.n = 4, .bytes = b100, .bw_us = bw10};
  size_t first[5], want[4] = {0, 1, 2, 4};
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 5, 0.1, SIZE_MAX, first), want, 3);
  double s[3], e[3];
  double end = sc_fplan_timeline(&in, first, 3, 5, 0.1, s, e);
  assert_true(fabs(s[0] - 10) < 1e-9 && fabs(e[0] - 25) < 1e-9);
  assert_true(fabs(s[1] - 25) < 1e-9 && fabs(e[1] - 40) < 1e-9);
  assert_true(fabs(s[2] - 40) < 1e-9 && fabs(e[2] - 65) < 1e-9);
  assert_true(fabs(end - 65) < 1e-9);
  size_t wf[5];
  size_t nb = sc_fplan_none(&in, wf);
  assert_int_equal(nb, 4);
  assert_true(fabs(sc_fplan_timeline(&in, wf, nb, 5, 0.1, NULL, NULL) - 70) < 1e-9);
}

/* alpha 12 (beta 0.03): every gap ready[l+1] - start = 10 < 12: one bucket. */
static void test_mgwfbp_large_alpha_merges_all(void **state) {
  (void)state;
  sc_fplan_in_t in = {.n = 4, .bytes = b100, .bw_us = bw10};
  size_t first[5], want[2] = {0, 4};
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 12, 0.03, SIZE_MAX, first), want, 1);
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 1e12, 0.03, SIZE_MAX, first), want, 1);
}

/* The same with a 200-byte cap. l=0: 20 - 10 < 12 and 200 fits: merge. l=1:
 * 30 - 20 < 12 but 300 > 200: close {0, 1}, it ends 20 + 12 + 6 = 38. l=2:
 * starts max(38, 30) = 38, 40 - 38 < 12 and 200 fits: {2, 3}. A cap below
 * one tensor leaves every tensor alone. */
static void test_mgwfbp_cap(void **state) {
  (void)state;
  sc_fplan_in_t in = {.n = 4, .bytes = b100, .bw_us = bw10};
  size_t first[5], want[3] = {0, 2, 4}, want1[2] = {0, 4}, want_alone[5] = {0, 1, 2, 3, 4};
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 12, 0.03, 200, first), want, 2);
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 12, 0.03, 400, first), want1, 1);
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 12, 0.03, 50, first), want_alone, 4);
}

/* alpha 0, beta 0.01 (T = 1, never backlogged): no gap is < 0: WFBP. */
static void test_mgwfbp_zero_alpha_no_backlog(void **state) {
  (void)state;
  sc_fplan_in_t in = {.n = 4, .bytes = b100, .bw_us = bw10};
  size_t first[5], want[5] = {0, 1, 2, 3, 4};
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 0, 0.01, SIZE_MAX, first), want, 4);
}

/* alpha 0, beta 0.5 (T = 50): {0} runs 10-60; then 1 starts at 60 > ready[2]
 * = 30 (gap -30 < 0): merge, and likewise 3: {0}, {1, 2, 3} ending at 60 +
 * 150 = 210, the same as WFBP's 10-60-110-160-210 (no startup to save). */
static void test_mgwfbp_zero_alpha_backlog(void **state) {
  (void)state;
  sc_fplan_in_t in = {.n = 4, .bytes = b100, .bw_us = bw10};
  size_t first[5], want[3] = {0, 1, 4};
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 0, 0.5, SIZE_MAX, first), want, 2);
  assert_true(fabs(sc_fplan_timeline(&in, first, 2, 0, 0.5, NULL, NULL) - 210) < 1e-9);
}

/* All ready at once (zero-time layers): each gap is 0 < alpha: one bucket,
 * ending at alpha + 300 beta = 1 + 3 = 4. */
static void test_mgwfbp_zero_time_layers(void **state) {
  (void)state;
  static const double zero[3] = {0, 0, 0};
  sc_fplan_in_t in = {.n = 3, .bytes = b100, .bw_us = zero};
  size_t first[4], want[2] = {0, 3};
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 1, 0.01, SIZE_MAX, first), want, 1);
  assert_true(fabs(sc_fplan_timeline(&in, first, 1, 1, 0.01, NULL, NULL) - 4) < 1e-9);
  in.bw_us = NULL; /* unknown times are zeros */
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 1, 0.01, SIZE_MAX, first), want, 1);
}

static void test_one_tensor(void **state) {
  (void)state;
  sc_fplan_in_t in = {.n = 1, .bytes = b100, .bw_us = bw10};
  size_t first[2], want[2] = {0, 1};
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 5, 0.1, SIZE_MAX, first), want, 1);
  expect_first(first, sc_fplan_none(&in, first), want, 1);
  expect_first(first, sc_fplan_single(&in, first), want, 1);
  expect_first(first, sc_fplan_size(&in, 10, first), want, 1);
  expect_first(first, sc_fplan_dear_capped(&in, 10, 10, first), want, 1);
  assert_true(fabs(sc_fplan_timeline(&in, first, 1, 5, 0.1, NULL, NULL) - 25) < 1e-9);
}

/* Different dtypes never share a bucket, whatever the policy says. */
static void test_groups_split(void **state) {
  (void)state;
  static const int g[4] = {0, 0, 1, 1};
  sc_fplan_in_t in = {.n = 4, .bytes = b100, .group = g, .bw_us = bw10};
  size_t first[5], want[3] = {0, 2, 4};
  expect_first(first, sc_fplan_mgwfbp_cap(&in, 1e12, 0.1, SIZE_MAX, first), want, 2);
  expect_first(first, sc_fplan_single(&in, first), want, 2);
  expect_first(first, sc_fplan_size(&in, 1000, first), want, 2);
  expect_first(first, sc_fplan_dear_capped(&in, 1000, 1000, first), want, 2);
}

/* bytes 10 20 30 5 40, limit 50. Ready order: 10+20 = 30, +30 > 50 -> cut
 * before 2; 30+5 = 35, +40 > 50 -> cut before 4. Forward order (from 4
 * down): 40+5 = 45, +30 > 50 -> cut before 3; 30+20 = 50 fits, +10 > 50 ->
 * cut before 1. */
static void test_size(void **state) {
  (void)state;
  static const size_t bytes[5] = {10, 20, 30, 5, 40};
  sc_fplan_in_t in = {.n = 5, .bytes = bytes};
  size_t first[6], want_r[4] = {0, 2, 4, 5}, want_f[4] = {0, 1, 3, 5};
  expect_first(first, sc_fplan_size(&in, 50, first), want_r, 3);
  expect_first(first, sc_fplan_dear_capped(&in, 50, 50, first), want_f, 3);
  /* A tensor past the limit is alone; a limit of 0 gives WFBP. */
  static const size_t big[3] = {100, 10, 10};
  sc_fplan_in_t in2 = {.n = 3, .bytes = big};
  size_t want2[3] = {0, 1, 3}, want0[4] = {0, 1, 2, 3};
  expect_first(first, sc_fplan_size(&in2, 50, first), want2, 2);
  expect_first(first, sc_fplan_dear_capped(&in2, 50, 50, first), want2, 2);
  expect_first(first, sc_fplan_size(&in2, 0, first), want0, 3);
  expect_first(first, sc_fplan_dear_capped(&in2, 0, 0, first), want0, 3);
}

/* DeAR, limit 160 (first cap 160/16 = 10, then 20, 40, 80, 160, ...).
 * Ready order bytes 100 100 100 60 30 15 8 8; forward order walks from
 * tensor 7: 8, +8 > 10 cut before 7; 8, +15 > 20 cut before 6; 15, +30 > 40
 * cut before 5; 30, +60 > 80 cut before 4; 60 + 100 = 160 fits, +100 > 160
 * cut before 2; 100, +100 > 160 cut before 1. SIZE forward order with the
 * same limit gives 4 buckets and makes the first forward one 121 bytes. */
static void test_dear_growing_buckets(void **state) {
  (void)state;
  static const size_t bytes[8] = {100, 100, 100, 60, 30, 15, 8, 8};
  sc_fplan_in_t in = {.n = 8, .bytes = bytes};
  size_t first[9], want[8] = {0, 1, 2, 4, 5, 6, 7, 8}, want_sf[5] = {0, 1, 2, 3, 8};
  expect_first(first, sc_fplan_dear(&in, 160, first), want, 7);
  expect_first(first, sc_fplan_dear_capped(&in, 160, 160, first), want_sf, 4);
  /* A first tensor above the first cap is alone; a limit of 0 gives WFBP. */
  static const size_t big[3] = {5, 5, 50};
  sc_fplan_in_t in2 = {.n = 3, .bytes = big};
  size_t want2[3] = {0, 2, 3}, want0[4] = {0, 1, 2, 3};
  expect_first(first, sc_fplan_dear(&in2, 160, first), want2, 2);
  expect_first(first, sc_fplan_dear(&in2, 0, first), want0, 3);
}

/* Every planner covers every tensor once, in order, on a longer random list. */
static void test_partitions(void **state) {
  (void)state;
  enum { N = 200 };
  size_t bytes[N], first[N + 1];
  double bw[N];
  int g[N];
  uint32_t x = 12345;
  for (int i = 0; i < N; i++) {
    x = x * 1664525u + 1013904223u;
    bytes[i] = 4 + (x >> 8) % 100000;
    bw[i] = (double)((x >> 4) % 50);
    g[i] = i < 150 ? 0 : 1;
  }
  sc_fplan_in_t in = {.n = N, .bytes = bytes, .group = g, .bw_us = bw};
  for (int p = 0; p < 7; p++) {
    size_t nb = p == 0   ? sc_fplan_none(&in, first)
                : p == 1 ? sc_fplan_single(&in, first)
                : p == 2 ? sc_fplan_size(&in, 300000, first)
                : p == 3 ? sc_fplan_dear_capped(&in, 300000, 300000, first)
                : p == 4 ? sc_fplan_dear(&in, 300000, first)
                : p == 5 ? sc_fplan_mgwfbp_cap(&in, 30, 0.001, SIZE_MAX, first)
                         : sc_fplan_mgwfbp_cap(&in, 30, 0.001, 300000, first);
    assert_true(nb >= 2 && nb <= N);
    assert_int_equal(first[0], 0);
    assert_int_equal(first[nb], N);
    for (size_t b = 0; b < nb; b++) {
      assert_true(first[b] < first[b + 1]);
      assert_int_equal(g[first[b]], g[first[b + 1] - 1]);
      if ((p >= 2 && p <= 4) || p == 6) {
        size_t sum = 0;
        for (size_t l = first[b]; l < first[b + 1]; l++) sum += bytes[l];
        assert_true(sum <= 300000 || first[b + 1] - first[b] == 1);
      }
    }
  }
}

/* The calibration's line, against the least squares worked in centred form
 * (an independent formula): exact points give alpha and beta back; a stall at
 * one large point pulls the free intercept above the smallest measured time
 * (here 2 ms against 140 us, as one calibration on the bed read 2.6 ms), so
 * alpha is held at y[0] and beta is the slope through (0, y[0]); an intercept
 * below 0 also takes y[0]. */
static void plain_ls(const double *x, const double *y, int n, double *a, double *b) {
  double mx = 0, my = 0, sxy = 0, sxx = 0;
  for (int i = 0; i < n; i++) mx += x[i] / n, my += y[i] / n;
  for (int i = 0; i < n; i++) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  *b = sxy / sxx;
  *a = my - *b * mx;
}

static double slope_through(const double *x, const double *y, int n, double a) {
  double num = 0, den = 0;
  for (int i = 0; i < n; i++) num += x[i] * (y[i] - a), den += x[i] * x[i];
  return num / den;
}

static void test_fit_line(void **state) {
  (void)state;
  const double x[5] = {1024, 16384, 131072, 524288, 2097152};
  double y[5], a, b, la, lb;
  for (int i = 0; i < 5; i++) y[i] = 50 + 0.0125 * x[i];
  sc_fplan_fit_line(x, y, 5, &a, &b);
  assert_true(fabs(a - 50) < 1e-6 && fabs(b - 0.0125) < 1e-12);

  const double stalled[5] = {140, 260, 1700, 20500, 26300}; /* 512 KiB stalled ~14 ms */
  plain_ls(x, stalled, 5, &la, &lb);
  assert_true(la > stalled[0]); /* the free fit's startup is above the smallest time */
  sc_fplan_fit_line(x, stalled, 5, &a, &b);
  assert_true(a == stalled[0]);
  assert_true(fabs(b - slope_through(x, stalled, 5, stalled[0])) < 1e-12);

  const double steep[5] = {5, 30, 900, 7000, 30000}; /* free intercept below 0 */
  plain_ls(x, steep, 5, &la, &lb);
  assert_true(la < 0);
  sc_fplan_fit_line(x, steep, 5, &a, &b);
  assert_true(a == steep[0]);
  assert_true(fabs(b - slope_through(x, steep, 5, steep[0])) < 1e-12);

  const double mid[5] = {140, 250, 1700, 6700, 26300}; /* inside (0, y[0]]: the free fit */
  plain_ls(x, mid, 5, &la, &lb);
  assert_true(la > 0 && la <= mid[0]);
  sc_fplan_fit_line(x, mid, 5, &a, &b);
  assert_true(fabs(a - la) < 1e-6 && fabs(b - lb) < 1e-12);
}

/* The trial's correction: exact at every point, the line between two, the
 * ratio at the nearer end outside; points in any order; a measured time
 * below that of a cheaper modelled point raised to it; unusable points
 * skipped; no trial: as modelled. */
static void test_trial_cost(void **state) {
  (void)state;
  /* (10 -> 100), (110 -> 300). */
  const double two[4] = {10, 100, 110, 300};
  assert_true(fabs(sc_fplan_trial_cost(two, 2, 10) - 100) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(two, 2, 110) - 300) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(two, 2, 60) - 200) < 1e-9);  /* halfway */
  assert_true(fabs(sc_fplan_trial_cost(two, 2, 5) - 50) < 1e-9);    /* 100 / 10 per unit */
  assert_true(fabs(sc_fplan_trial_cost(two, 2, 220) - 600) < 1e-9); /* 300 / 110 per unit */
  assert_true(sc_fplan_trial_cost(two, 2, 0) == 0);
  /* Three points, steeper past the middle: each segment its own line. */
  const double three[6] = {300, 600, 1300, 3000, 20000, 120000};
  assert_true(fabs(sc_fplan_trial_cost(three, 3, 800) - 1800) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(three, 3, 1300) - 3000) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(three, 3, 10650) - 61500) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(three, 3, 40000) - 240000) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(three, 3, 150) - 300) < 1e-9);
  /* The same points in another order (buckets' sizes need not order their
   * modelled costs): the same costs. */
  const double shuffled[6] = {20000, 120000, 300, 600, 1300, 3000};
  assert_true(fabs(sc_fplan_trial_cost(shuffled, 3, 800) - 1800) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(shuffled, 3, 10650) - 61500) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(shuffled, 3, 150) - 300) < 1e-9);
  /* Falling at the middle point: raised to the first's 600, so flat between
   * them, then the line up to the last. */
  const double fall[6] = {300, 600, 1300, 400, 2300, 1600};
  assert_true(fabs(sc_fplan_trial_cost(fall, 3, 800) - 600) < 1e-9);
  assert_true(fabs(sc_fplan_trial_cost(fall, 3, 1800) - 1100) < 1e-9);
  /* A missing middle point is skipped: the line from the first to the last. */
  const double gap[6] = {10, 100, 0, 0, 110, 300};
  assert_true(fabs(sc_fplan_trial_cost(gap, 3, 60) - 200) < 1e-9);
  /* Only one point: 50 / 25 per unit. */
  const double one[4] = {0, 0, 25, 50};
  assert_true(fabs(sc_fplan_trial_cost(one, 2, 7) - 14) < 1e-9);
  /* No trial. */
  const double none[6] = {0};
  assert_true(sc_fplan_trial_cost(none, 3, 123) == 123);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mgwfbp_small_example),
      cmocka_unit_test(test_mgwfbp_large_alpha_merges_all),
      cmocka_unit_test(test_mgwfbp_cap),
      cmocka_unit_test(test_mgwfbp_zero_alpha_no_backlog),
      cmocka_unit_test(test_mgwfbp_zero_alpha_backlog),
      cmocka_unit_test(test_mgwfbp_zero_time_layers),
      cmocka_unit_test(test_one_tensor),
      cmocka_unit_test(test_groups_split),
      cmocka_unit_test(test_size),
      cmocka_unit_test(test_dear_growing_buckets),
      cmocka_unit_test(test_partitions),
      cmocka_unit_test(test_fit_line),
      cmocka_unit_test(test_trial_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
