/* SPDX-License-Identifier: BSD-3-Clause */
/* The stream forms' ticket rule (lib/core/stream.h): a stream waiting for ticket
 * t passes once the pinned flag holds t or a later ticket, with tickets
 * wrapping around 2^32, and a release never moves the flag back. Checked
 * against 64-bit tickets that never wrap, around 0, 2^31 and 2^32 - 1, for
 * every distance the pool allows (SC_STREAM_SLOTS_MAX tickets in flight) and
 * beyond, and in a simulated run that wraps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lib/core/stream.h"

static const uint64_t bases[] = {0,
                                 1,
                                 1000,
                                 (1ull << 31) - 3,
                                 (1ull << 31),
                                 (1ull << 32) - 1,
                                 (1ull << 32) - 700,
                                 (1ull << 32),
                                 (5ull << 32) + 12345};

/* Unwrapped reference: the flag at f has released ticket t when f >= t. */
static void test_passed_matches_unwrapped(void **state) {
  (void)state;
  const int64_t d[] = {0,
                       1,
                       2,
                       3,
                       100,
                       SC_STREAM_SLOTS_MAX - 1,
                       SC_STREAM_SLOTS_MAX,
                       65536,
                       (1ll << 30),
                       (1ll << 31) - 1};
  for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
    for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
      for (int sign = -1; sign <= 1; sign += 2) {
        uint64_t t = bases[b] + (1ull << 33); /* room below for negative distances */
        uint64_t f = (uint64_t)((int64_t)t + sign * d[i]);
        int want = f >= t;
        assert_int_equal(sc_stream_ticket_passed((uint32_t)f, (uint32_t)t), want);
      }
}

/* Releases arrive in ticket order from the progress thread, with repeats and
 * late ones from abort and destroy: the flag is the largest released so far. */
static void test_flag_after_keeps_the_latest(void **state) {
  (void)state;
  for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
    uint64_t base = bases[b];
    uint64_t max64 = base;
    uint32_t flag = (uint32_t)base;
    uint32_t rng = 12345u + (uint32_t)b;
    for (int step = 0; step < 5000; step++) {
      rng = rng * 1103515245u + 12345u;
      /* A ticket within the window before or after the latest release. */
      int64_t delta = (int64_t)((rng >> 8) % (2 * SC_STREAM_SLOTS_MAX)) - SC_STREAM_SLOTS_MAX;
      uint64_t t = (uint64_t)((int64_t)max64 + delta);
      if ((int64_t)t < (int64_t)base) t = base;
      flag = sc_stream_flag_after(flag, (uint32_t)t);
      if (t > max64) max64 = t;
      assert_int_equal(flag, (uint32_t)max64);
    }
  }
}

/* A run across the wrap: tickets issued one after another from just below
 * 2^32, at most SC_STREAM_SLOTS_MAX outstanding, released in order; every
 * waiting stream passes exactly when its own ticket is released. */
static void test_simulated_run_across_the_wrap(void **state) {
  (void)state;
  const uint64_t start = (1ull << 32) - 3 * SC_STREAM_SLOTS_MAX / 2;
  uint64_t issued = start, released = start;
  uint32_t flag = (uint32_t)start;
  uint32_t rng = 777;
  while (released < start + 4 * SC_STREAM_SLOTS_MAX) {
    rng = rng * 1664525u + 1013904223u;
    if ((rng >> 16) & 1 && issued - released < SC_STREAM_SLOTS_MAX) {
      issued++;
    } else if (released < issued) {
      released++;
      flag = sc_stream_flag_after(flag, (uint32_t)released);
    }
    for (uint64_t t = released + 1; t <= issued; t++)
      assert_false(sc_stream_ticket_passed(flag, (uint32_t)t));
    for (uint64_t t = released > start + 8 ? released - 8 : start; t <= released; t++)
      assert_true(sc_stream_ticket_passed(flag, (uint32_t)t));
  }
  assert_true(issued > (1ull << 32)); /* the run did wrap */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_passed_matches_unwrapped),
      cmocka_unit_test(test_flag_after_keeps_the_latest),
      cmocka_unit_test(test_simulated_run_across_the_wrap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
