/* SPDX-License-Identifier: BSD-3-Clause */
/* The library's one clock. It is CLOCK_MONOTONIC, never the wall clock, so
 * that a deadline or a timeout does not jump when NTP or an operator sets the
 * time. Every deadline in the library (sockets, transports, the watch, the
 * bootstrap, the executor's stall check) is on it, so they can be compared
 * and passed between layers. */
#ifndef SC_CLOCK_H
#define SC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary fixed point. */
int64_t sc_clock_ns(void);
/* The same clock in microseconds and in milliseconds. */
int64_t sc_now_us(void);
int64_t sc_now_ms(void);
/* Milliseconds left until deadline_ms for poll(): 0 when past, capped at INT_MAX. */
int sc_ms_until(int64_t deadline_ms);
/* The absolute time ms milliseconds from now, for pthread_cond_timedwait on
 * a condition variable created with pthread_condattr_setclock(CLOCK_MONOTONIC). */
void sc_clock_deadline_ts(int64_t ms, struct timespec *ts);

#endif
