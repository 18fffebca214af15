/* SPDX-License-Identifier: BSD-3-Clause */
/* mr_p2p's shared state and helpers (mr_p2p_common.c): this process's rank
 * and size, the failure and check counters, and payloads every rank computes
 * on its own from (sender, tag, message number, byte index). */
#ifndef SC_TEST_MR_P2P_COMMON_H
#define SC_TEST_MR_P2P_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sparsecoll.h"

extern int rank, nranks;
extern long failures, checks;
#define EAGER ((size_t)64 << 10) /* the library's eager threshold, in bytes */

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failures++;                                                                                    \
    fprintf(stderr, "rank %d FAIL %s:%d: ", rank, __FILE__, __LINE__);                             \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
  } while (0)

#define OK(call)                                                                                   \
  do {                                                                                             \
    sc_result_t r_ = (call);                                                                       \
    checks++;                                                                                      \
    if (r_ != SC_SUCCESS) FAIL("%s -> %s: %s", #call, sc_strerror(r_), sc_last_error());           \
  } while (0)

double now_s(void);
/* Byte j of message `seq` from rank src with tag. */
uint8_t pattern(int src, int tag, int seq, size_t j);
void fill(uint8_t *b, size_t bytes, int src, int tag, int seq);
/* Checks b against pattern; a mismatch is a failure naming what. */
void expect(const uint8_t *b, size_t bytes, int src, int tag, int seq, const char *what);

/* The failure modes (mr_p2p_fail.c); each destroys comm and returns the
 * process's exit code. */
int run_death(sc_comm_t *comm);
int run_abort(sc_comm_t *comm);
int run_timeout(sc_comm_t *comm);
int run_flood(sc_comm_t *comm);
int run_leave(sc_comm_t *comm);
int run_leave_stopped(sc_comm_t *comm);
int run_off(sc_comm_t *comm);

#endif
