/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/base/yield.c: when a spinning wait stops yielding the core. A yield that
 * lasted longer than the threshold (1 ms per rank of the job sharing a
 * core) turns yields off for a window that doubles while yields keep
 * losing the core, up to a cap, and shrinks back after one that did not.
 * Checked against the rule written out here with explicit times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lib/base/yield.h"

static void test_threshold_per_core(void **state) {
  (void)state;
  sc_yield_t y;
  sc_yield_init(&y, 2, 2); /* a core per rank */
  assert_int_equal(y.lost_us, 1000);
  sc_yield_init(&y, 3, 2); /* two ranks share a core */
  assert_int_equal(y.lost_us, 2000);
  sc_yield_init(&y, 8, 2);
  assert_int_equal(y.lost_us, 4000);
  sc_yield_init(&y, 4, 0); /* CPUs unknown */
  assert_int_equal(y.lost_us, 1000);
  assert_true(sc_yield_allowed(&y, 0));
}

static void test_short_yields_change_nothing(void **state) {
  (void)state;
  sc_yield_t y;
  sc_yield_init(&y, 2, 2);
  int64_t t = 1000000;
  for (int i = 0; i < 100; i++, t += 1000) {
    assert_int_equal(sc_yield_note(&y, t, t + 1000), 0); /* exactly the threshold: kept */
    assert_true(sc_yield_allowed(&y, t + 1000));
  }
}

static void test_windows_double_and_reset(void **state) {
  (void)state;
  sc_yield_t y;
  sc_yield_init(&y, 2, 2);
  int64_t t = 5000000, want = 4000;
  for (int i = 0; i < 8; i++) {
    assert_int_equal(sc_yield_note(&y, t, t + 3000), 1);
    int64_t end = t + 3000 + want;
    assert_false(sc_yield_allowed(&y, t + 3000));
    assert_false(sc_yield_allowed(&y, end - 1));
    assert_true(sc_yield_allowed(&y, end));
    t = end;
    want = want * 2 < 100000 ? want * 2 : 100000; /* 4, 8, ..., 64, then 100 ms */
  }
  assert_int_equal(want, 100000);
  /* One yield answered in time: the next window is the shortest again. */
  assert_int_equal(sc_yield_note(&y, t, t + 10), 0);
  assert_int_equal(sc_yield_note(&y, t + 10, t + 5010), 1);
  assert_true(sc_yield_allowed(&y, t + 5010 + 4000));
  assert_false(sc_yield_allowed(&y, t + 5010 + 3999));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threshold_per_core),
      cmocka_unit_test(test_short_yields_change_nothing),
      cmocka_unit_test(test_windows_double_and_reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
