/* SPDX-License-Identifier: BSD-3-Clause */
/* Yielding the core while a transport spins. With more ranks than cores, a
 * sched_yield hands the core to the rank we wait for, which answers sooner
 * that way than after a sleep. But when another program holds the core (a
 * build, a busy loop, a data loader), the yield hands it that program's
 * whole scheduler slice, milliseconds, where a sleep would have been woken
 * as soon as the peer rang: with two busy loops beside 3 ranks, the P3 test
 * (thousands of small steps) took 388 s spinning with yields and 26 s with
 * no spin (perf/README.md). So a yield that kept the core away for longer
 * than SC_YIELD_LOST_US marks the core contended, and for a while (below)
 * the spinning transports (shm, tcp, ucx, verbs) sleep instead of yielding; then
 * they try a yield again. */
#ifndef SC_YIELD_H
#define SC_YIELD_H

#include <stdint.h>

/* A yield longer than this, per rank of the job sharing a core, lost the
 * core to another task's slice (CFS grants at least its minimum
 * granularity, 0.75 ms or more, once it runs); a rank of our own that takes
 * the core answers a small message in microseconds. With several of our
 * ranks per core each may take its turn first. */
#define SC_YIELD_LOST_US 1000
/* Yields stay off for a window that starts short and doubles with each
 * yield that lost the core again, up to the maximum; one that did not
 * resets it. A stray long yield (our own ranks all taking their turn, the
 * job starting) costs a few milliseconds of sleeping waits; under a
 * program that keeps the core busy the probes cost a slice every 100 ms. */
#define SC_YIELD_QUIET_MIN_US 4000
#define SC_YIELD_QUIET_MAX_US 100000

typedef struct sc_yield {
  int64_t quiet_until_us; /* no yields before this time */
  int64_t quiet_us;       /* the next window */
  int64_t lost_us;        /* a yield longer than this lost the core */
} sc_yield_t;

/* For `ranks` of the job on a host of `cpus` CPUs (either unknown: <= 0);
 * before the first sc_yield_note (the transports call it when they connect). */
void sc_yield_init(sc_yield_t *y, int ranks, int cpus);

/* Whether a spinning wait may yield at now_us. */
static inline int sc_yield_allowed(const sc_yield_t *y, int64_t now_us) {
  return now_us >= y->quiet_until_us;
}

/* Records a yield that began at before_us and ended at after_us; returns 1
 * when it lost the core (and yields are off for a while). */
int sc_yield_note(sc_yield_t *y, int64_t before_us, int64_t after_us);

/* The pause between two looks of a spinning wait. */
static inline void sc_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* sched_yield, timed from now_us; returns the clock after it. */
int64_t sc_yield_core(sc_yield_t *y, int64_t now_us);

#endif
