/* SPDX-License-Identifier: BSD-3-Clause */
/* The quick conformance suite of sc_scale_probe (perf/scale_suite.c). */
#ifndef SC_PERF_SCALE_SUITE_H
#define SC_PERF_SCALE_SUITE_H

#include <stddef.h>

#include "sparsecoll.h"

/* Runs every collective and a ring shift once on comm, each checked on this
 * rank. 0: all right; 1: a wrong result; 2: a call failed. what (what_len
 * bytes) names the first failure and its error. Collective: every rank calls
 * it. */
int scale_suite_run(sc_comm_t *comm, int rank, int nranks, char *what, size_t what_len);

#endif
