/* SPDX-License-Identifier: BSD-3-Clause */
/* Yields that notice when another program holds the core (see lib/base/yield.h). */
#include "lib/base/yield.h"

#include <sched.h>

#include "lib/base/clock.h"

void sc_yield_init(sc_yield_t *y, int ranks, int cpus) {
  int per_core = ranks > 0 && cpus > 0 ? (ranks + cpus - 1) / cpus : 1;
  y->quiet_until_us = 0;
  y->quiet_us = SC_YIELD_QUIET_MIN_US;
  y->lost_us = (int64_t)SC_YIELD_LOST_US * per_core;
}

int sc_yield_note(sc_yield_t *y, int64_t before_us, int64_t after_us) {
  if (after_us - before_us <= y->lost_us) {
    y->quiet_us = SC_YIELD_QUIET_MIN_US;
    return 0;
  }
  y->quiet_until_us = after_us + y->quiet_us;
  y->quiet_us = y->quiet_us * 2 < SC_YIELD_QUIET_MAX_US ? y->quiet_us * 2 : SC_YIELD_QUIET_MAX_US;
  return 1;
}

int64_t sc_yield_core(sc_yield_t *y, int64_t now_us) {
  sched_yield();
  int64_t after = sc_now_us();
  sc_yield_note(y, now_us, after);
  return after;
}
