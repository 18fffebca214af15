/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by sim_executor.c (dense, the transport) and sim_executor_sparse.c. */
#ifndef SC_TEST_SIM_SIM_EXECUTOR_H
#define SC_TEST_SIM_SIM_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/comm.h"
#include "test/sim/simulator.h"

#define MAXP 8

/* P communicators built by hand around loopback transports of one fabric:
 * just what sc_sched_execute reads. */
typedef struct fabric {
  int p;
  sc_comm_t *comm[MAXP];
} fabric_t;

typedef struct rank_run {
  sc_comm_t *comm;
  sc_op_t op;
  const sc_sched_t *sched;
  size_t es;
  sc_result_t res;
  char err[256];
} rank_run_t;

extern int passed, failed;
uint64_t rnd(void);
void fail_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs every rank's executor on its own thread (rr[r].comm is set here); 0
 * when all succeeded, else the first failure in err. */
int exec_all(fabric_t *f, rank_run_t *rr, char *err, size_t errlen);
/* sim_executor_sparse.c */
void sweep_sparse(fabric_t *f, int p);

#endif
