/* SPDX-License-Identifier: BSD-3-Clause */
/* The hierarchical uneven all-to-all's count exchange inside each host
 * (lib/core/a2av_mates.c). */
#ifndef SC_A2AV_MATES_H
#define SC_A2AV_MATES_H

#include <stdint.h>

#include "lib/core/comm.h"

/* On a communicator whose hosts hold the same number of ranks (tune state:
 * a2av_hier), exchanges op's sendcounts with this rank's host-mates and sets
 * *out to sc_coll_args_t.a2av_mates's matrix (local ranks x hosts; the
 * caller frees it). Every rank of the host calls it for the same op, on the
 * thread that runs the op. */
sc_result_t sc_a2av_mates_exchange(sc_comm_t *comm, const sc_op_t *op, uint64_t **out);

#endif
