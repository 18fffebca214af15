/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the failure-table tests (test/failure/fail_*.c): clocks, the
 * data sockets of this process, resource counts, and one result line per
 * rank that the driver scripts grep. */
#ifndef SC_FAIL_COMMON_H
#define SC_FAIL_COMMON_H

#include <stddef.h>

#include "sparsecoll.h"

double fail_now(void);

/* File descriptors of this process's connected TCP sockets that belong to
 * the transport: not bootstrap connections (an end on the port of
 * SC_ROOT_ADDR), not the liveness watch's (one connection per rank pair; run
 * with SC_NSOCKS >= 2 and on a rank other than 0). Returns how many (at most
 * max). */
int fail_data_sockets(int *fds, int max);

/* What a communicator may leave behind: open descriptors, threads, and
 * memfd or /dev/shm mappings. */
typedef struct fail_res {
  int fds, threads, shm_maps;
} fail_res_t;
void fail_res_count(fail_res_t *r);

/* Checks one failed call: code, elapsed time below bound_s, and that every
 * NULL-terminated keyword occurs in msg. Prints a RESULT line (and FAIL
 * lines); returns 1 when all holds. */
int fail_expect(int rank, const char *what, sc_result_t got, sc_result_t want, double elapsed,
                double bound_s, const char *msg, const char *const *keywords);

#endif
