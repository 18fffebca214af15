/* SPDX-License-Identifier: BSD-3-Clause */
/* HiTopKComm's planning (algorithms/hitopk_plan.h) and its price
 * (sc_tune_hitopk_seconds): against a brute-force split of n and k. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "algorithms/hitopk_plan.h"
#include "lib/tune/tune.h"

static void test_plan_brute_force(void **state) {
  (void)state;
  for (size_t n = 0; n <= 40; n++)
    for (int L = 1; L <= 7; L++)
      for (size_t k = 0; k <= n + 3; k++) {
        size_t covered = 0, shard = 0, kmax = 0;
        for (int l = 0; l < L; l++) {
          sc_hitopk_plan_t p;
          sc_hitopk_plan(n, k, L, l, &p);
          if (l == 0) shard = p.shard, kmax = p.kl_max;
          /* Every rank agrees on the block and the bound. */
          assert_int_equal(p.shard, shard);
          assert_int_equal(p.kl_max, kmax);
          assert_int_equal(p.shard * (size_t)L >= n, 1);
          assert_int_equal(p.shard == 0 || (p.shard - 1) * (size_t)L < n, 1);
          /* Shards tile [0, n) in local-rank order. */
          assert_int_equal(p.off, covered);
          assert_int_equal(p.len <= p.shard, 1);
          covered += p.len;
          size_t kk = k < n ? k : n, want = (kk + (size_t)L - 1) / (size_t)L;
          if (want > p.shard) want = p.shard;
          assert_int_equal(p.kl_max, want);
          assert_int_equal(p.kl, want < p.len ? want : p.len);
          if (kk > 0 && p.len > 0) assert_true(p.kl >= 1);
        }
        assert_int_equal(covered, n);
      }
}

static void test_layout(void **state) {
  (void)state;
  int L;
  const int h22[] = {0, 0, 1, 1}, h21[] = {0, 0, 1}, hmix[] = {0, 1, 0, 1}, h4[] = {0, 1, 2, 3};
  assert_int_equal(sc_hitopk_layout_ok(h22, 4, 2, &L), 1);
  assert_int_equal(L, 2);
  assert_int_equal(sc_hitopk_layout_ok(hmix, 4, 2, &L), 1);
  assert_int_equal(L, 2);
  assert_int_equal(sc_hitopk_layout_ok(h4, 4, 4, &L), 1);
  assert_int_equal(L, 1);
  assert_int_equal(sc_hitopk_layout_ok(h21, 3, 2, &L), 0);
  assert_int_equal(L, 0);
  assert_int_equal(sc_hitopk_layout_ok(NULL, 3, 1, &L), 0);
}

static void test_price(void **state) {
  (void)state;
  sc_link_model_t m = {0};
  m.alpha_s = 50e-6;
  m.beta_s_per_b = 1e-9;
  m.local_alpha_s = 2e-6;
  m.local_beta_s_per_b = 1e-10;
  /* 2 hosts x 4: 2 * 3 local steps of a 250-element float32 shard, 3 shards
   * reduced, then 1 network step of 4 records of 8 + 25 * 8 bytes. */
  double t = sc_tune_hitopk_seconds(&m, 2, 4, 1000, 100, 4);
  double want = 6 * (2e-6 + 1000 * 1e-10) + (50e-6 + 4 * 208 * 1e-9);
  assert_true(fabs(t - want) < 1e-12);
  /* More hosts cost more network steps; a bigger n more local bytes. */
  assert_true(sc_tune_hitopk_seconds(&m, 4, 4, 1000, 100, 4) > t);
  assert_true(sc_tune_hitopk_seconds(&m, 2, 4, 100000, 100, 4) > t);
  /* One host, one rank: nothing moves. */
  assert_true(sc_tune_hitopk_seconds(&m, 1, 1, 1000, 100, 4) == 0);
  m.host_cores = 2;
  assert_true(isinf(sc_tune_hitopk_seconds(&m, 2, 4, 1000, 100, 4)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_brute_force),
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_price),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
