/* SPDX-License-Identifier: BSD-3-Clause */
/* The board (lib/core/board.c): the smallest collectives where every rank of
 * the communicator is on one host, through memory every rank reads
 * (transport.h's board ops) instead of a schedule's messages. */
#ifndef SC_CORE_BOARD_H
#define SC_CORE_BOARD_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/comm.h"

/* What a post says the call is: collective, dtype, op, root and count, each
 * in its own bits (count's low 24), so that a reader tells which call a
 * peer made, not only that it differs. */
static inline uint64_t sc_board_fp(int coll, int dtype, int op, int root, size_t count) {
  return (uint64_t)(coll & 0xff) | (uint64_t)(dtype & 0xff) << 8 | (uint64_t)(op & 0xff) << 16 |
         (uint64_t)(root & 0xffff) << 24 | (uint64_t)(count & 0xffffff) << 40;
}
/* fp as "allreduce (count 3, float32, sum, root 0)". */
const char *sc_board_describe(uint64_t fp, char *out, size_t len);

/* The bytes this rank posts for op, or (size_t)-1 when op does not take the
 * board: device buffers, a sparse or generated schedule, an algorithm forced
 * for its collective (SC_ALGO and the like), more than max bytes. */
size_t sc_board_payload(const sc_op_t *op, int rank, int nranks, int forced, size_t max);

/* After connect_all: whether this communicator has a board, and how large
 * its posts may be (SC_BOARD_BYTES, at most the transport's). */
sc_result_t sc_board_init(sc_comm_t *comm);
/* The bytes this rank posts when op runs on the board, else (size_t)-1;
 * sc_board_run takes them. */
size_t sc_board_takes(const sc_comm_t *comm, const sc_op_t *op);
sc_result_t sc_board_run(sc_comm_t *comm, const sc_op_t *op, size_t len);

/* The bytes the transport's board holds per post, whatever SC_BOARD_BYTES
 * says (0: no board: a rank elsewhere, or a transport without one), as
 * sc_board_init found it (read without the transport: safe from any thread). */
size_t sc_board_room(const sc_comm_t *comm);
/* A setup all-gather through the board: every rank's len bytes (at most
 * sc_board_room) into all[rank * len]. Collective: every rank calls it at
 * the same point of its sequence of calls (it takes a board call number). */
sc_result_t sc_board_exchange(sc_comm_t *comm, const void *mine, size_t len, void *all);

#endif
