/* SPDX-License-Identifier: BSD-3-Clause */
/* The library's monotonic clock (see lib/base/clock.h). */
#include "lib/base/clock.h"

#include <limits.h>

int64_t sc_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sc_now_us(void) {
  return sc_clock_ns() / 1000;
}

int64_t sc_now_ms(void) {
  return sc_clock_ns() / 1000000;
}

int sc_ms_until(int64_t deadline_ms) {
  int64_t left = deadline_ms - sc_now_ms();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : (int)left;
}

void sc_clock_deadline_ts(int64_t ms, struct timespec *ts) {
  int64_t ns = sc_clock_ns() + (ms > 0 ? ms : 0) * 1000000;
  ts->tv_sec = (time_t)(ns / 1000000000);
  ts->tv_nsec = (long)(ns % 1000000000);
}
