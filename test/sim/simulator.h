/* SPDX-License-Identifier: BSD-3-Clause */
/* Schedule simulator: runs every rank's schedule in one process against an
 * in-memory mailbox per ordered (src, dst) pair, on real per-rank buffers.
 *
 * Ranks advance round-robin, each until it blocks. A run fails, with a
 * message naming rank, step and reason, on: a step outside the buffer sizes
 * given (or the schedule's declared scratch), a NULL buffer with a non-empty
 * step, an invalid or own peer, a receive whose count differs from the
 * matching send, a RECV_REDUCE whose destination partly overlaps an operand,
 * deadlock, and messages left undelivered at the end.
 *
 * Two send models:
 *  - eager: SEND copies the data into the mailbox at the step, which is what
 *    the executor's wait-before-overwrite rule guarantees;
 *  - rendezvous: a SEND completes only when the receiver takes it, the data
 *    is read from the sender's memory at that moment, and a later step that
 *    writes memory an incomplete SEND reads blocks until it completes. This
 *    models zero-copy transports and exposes deadlocks that the wait can
 *    cause, which the eager model cannot see.
 *
 * Sparse steps (SC_STEP_SPARSE_*) run on the rank's sc_sparse_state_t,
 * prepared by the test with sc_sparse_state_prepare: a sparse message carries
 * the set's count, indices, values (and mask); the receiver checks the count
 * against its bound and hands the data to sc_sparse_apply, as the executor
 * does, so malformed peer data fails the run with that function's
 * SC_ERR_REMOTE text. In the rendezvous model a step that writes a set an
 * undelivered sparse send reads blocks.
 *
 * Extending: a new step kind gets a case in step() (simulator.c).
 * SC_SIM_TRACE=1 in the environment prints every step as it is attempted. */
#ifndef SC_TEST_SIM_SIMULATOR_H
#define SC_TEST_SIM_SIMULATOR_H

#include <stddef.h>

#include "lib/schedule/sched.h"
#include "lib/schedule/sparse_state.h"
#include "sparsecoll.h"

typedef struct sc_sim_rank {
  const sc_sched_t *sched;
  /* Buffers and their sizes in elements. SEND and RECV may overlap (in
   * place). scratch NULL: the simulator allocates sched->scratch_count
   * elements filled with a poison pattern. */
  void *send;
  size_t send_count;
  void *recv;
  size_t recv_count;
  void *scratch;
  size_t scratch_count;
  sc_sparse_state_t *sparse; /* sparse schedules only */
} sc_sim_rank_t;

typedef enum sc_sim_model { SC_SIM_EAGER, SC_SIM_RENDEZVOUS } sc_sim_model_t;

typedef struct sc_sim_config {
  int nranks;
  sc_dtype_t dtype;
  size_t elem_size;
  sc_redop_t op;
  sc_sim_model_t model;
} sc_sim_config_t;

typedef struct sc_sim_stats {
  size_t messages; /* delivered, all ranks */
  size_t bytes;    /* delivered, all ranks */
  size_t rounds;   /* round-robin passes until done */
} sc_sim_stats_t;

/* 0 on success; -1 with a description in err (errlen bytes) on failure.
 * stats may be NULL. Applies the schedules' avg regions at the end (op
 * SC_AVG), through sc_sched_finish as the executor does. */
int sc_sim_run(const sc_sim_config_t *cfg, const sc_sim_rank_t *ranks, sc_sim_stats_t *stats,
               char *err, size_t errlen);

#endif
