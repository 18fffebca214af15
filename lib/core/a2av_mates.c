/* SPDX-License-Identifier: BSD-3-Clause */
/* The hierarchical uneven all-to-all's count exchange
 * (algorithms/alltoallv_hier.c, sc_hier_alltoallv_counts_schedule): before
 * its schedule is made, every rank sends each host-mate q the counts of its
 * blocks for the ranks (y, q) of every host y, H counts, and receives theirs
 * for itself. Only the ranks of one host talk; the messages go in the
 * collective's own sequence, ahead of its data. */
#include "lib/core/a2av_mates.h"

#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "lib/core/comm.h"

sc_result_t sc_a2av_mates_exchange(sc_comm_t *comm, const sc_op_t *op, uint64_t **out) {
  *out = NULL;
  const size_t cells = (size_t)comm->tune.local_size * (size_t)comm->tune.nhosts;
  /* The received matrix first (what *out hands over), this rank's rows after it. */
  uint64_t *mem = malloc(2 * cells * sizeof(*mem));
  if (!mem)
    return SC_ERR(SC_ERR_NOMEM, "hier all-to-allv: counts of %d host-mates", comm->tune.local_size);
  sc_coll_args_t a;
  sc_tune_fill_args(comm, SC_COLL_ALLTOALLV, op->count, 8, 0, 0, &a);
  sc_tune_args_v(op, &a);
  sc_sched_t s;
  sc_sched_init(&s);
  sc_result_t r = sc_hier_alltoallv_counts_schedule(&a, mem + cells, &s);
  if (r == SC_SUCCESS) {
    sc_op_t xop = {.coll = SC_COLL_ALLTOALL,
                   .sendbuf = mem + cells,
                   .recvbuf = mem,
                   .count = (size_t)comm->tune.nhosts,
                   .dtype = SC_UINT64,
                   .op = SC_SUM,
                   .seq = op->seq};
    sc_exec_args_t x = {.op = &xop, .sched = &s, .elem_size = sizeof(uint64_t)};
    r = sc_sched_execute(comm, &x);
  }
  sc_sched_free(&s);
  if (r == SC_SUCCESS)
    *out = mem;
  else
    free(mem);
  return r;
}
