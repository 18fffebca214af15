/* SPDX-License-Identifier: BSD-3-Clause */
/* The hierarchical uneven all-to-all's count exchange
 * (algorithms/alltoallv_hier.c): before its schedule is made, every rank
 * sends each host-mate q the counts of its blocks for the ranks (y, q) of
 * every host y, H counts, and receives theirs for itself. Only the ranks of
 * one host talk; the messages go in the collective's own sequence, ahead of
 * its data. */
#include "lib/core/a2av_mates.h"

#include <stdlib.h>

#include "lib/base/wire.h"
#include "lib/core/comm.h"

sc_result_t sc_a2av_mates_exchange(sc_comm_t *comm, const sc_op_t *op, uint64_t **out) {
  *out = NULL;
  const sc_tune_state_t *t = &comm->tune;
  const int p = comm->nranks, nh = t->nhosts, x = t->host_index, lsz = t->local_size,
            me = t->local_rank;
  const size_t *sendcounts = op->v[0];
  /* member[y * L + l]: local rank l of host y (hosts of L ranks each, ranks
   * ascending inside a host, as algorithms/hier_map.h groups them). */
  int *member = malloc((size_t)p * sizeof(*member) + (size_t)nh * sizeof(int));
  const size_t row = (size_t)nh * 8;
  uint8_t *wire = malloc(2 * (size_t)lsz * row);
  uint64_t *mates = malloc((size_t)lsz * (size_t)nh * sizeof(*mates));
  if (!member || !wire || !mates) {
    free(member);
    free(wire);
    free(mates);
    return SC_ERR(SC_ERR_NOMEM, "hier all-to-allv: counts of %d host-mates", lsz);
  }
  int *fill = member + p;
  for (int y = 0; y < nh; y++) fill[y] = 0;
  for (int r = 0; r < p; r++) {
    const int y = t->host_of[r];
    member[(size_t)y * (size_t)lsz + (size_t)fill[y]++] = r;
  }
  uint8_t *mine = wire, *theirs = wire + (size_t)lsz * row;
  for (int q = 0; q < lsz; q++)
    for (int y = 0; y < nh; y++)
      sc_wire_put_u64(mine + (size_t)q * row + (size_t)y * 8,
                      sendcounts[member[(size_t)y * (size_t)lsz + (size_t)q]]);
  sc_sched_t s;
  sc_sched_init(&s);
  for (int i = 1; i < lsz; i++) {
    const int q = (me + i) % lsz;
    sc_sched_send(&s, member[(size_t)x * (size_t)lsz + (size_t)q], SC_BUF_SEND, (size_t)q * row,
                  row);
  }
  for (int i = 1; i < lsz; i++) {
    const int q = (me - i + lsz) % lsz;
    sc_sched_recv(&s, member[(size_t)x * (size_t)lsz + (size_t)q], SC_BUF_RECV, (size_t)q * row,
                  row);
  }
  sc_result_t r = s.status;
  if (r == SC_SUCCESS) {
    sc_op_t xop = {.coll = SC_COLL_ALLTOALL,
                   .sendbuf = mine,
                   .recvbuf = theirs,
                   .count = row,
                   .dtype = SC_UINT8,
                   .op = SC_SUM,
                   .seq = op->seq};
    sc_exec_args_t a = {.op = &xop, .sched = &s, .elem_size = 1};
    r = sc_sched_execute(comm, &a);
  }
  sc_sched_free(&s);
  if (r == SC_SUCCESS) {
    for (int q = 0; q < lsz; q++)
      for (int y = 0; y < nh; y++)
        mates[(size_t)q * (size_t)nh + (size_t)y] =
            q == me ? sendcounts[member[(size_t)y * (size_t)lsz + (size_t)me]]
                    : sc_wire_get_u64(theirs + (size_t)q * row + (size_t)y * 8);
    *out = mates;
  } else {
    free(mates);
  }
  free(member);
  free(wire);
  return r;
}
