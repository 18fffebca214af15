/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messaging (lib/core/p2p.c): the communicator's p2p lane,
 * a second transport instance of the collectives' kind driven by its own
 * thread, and the per-thread groups of sc_group_start / sc_group_end. */
#ifndef SC_P2P_H
#define SC_P2P_H

#include "lib/core/comm.h"

/* Messages of at most this many bytes travel eagerly (header and payload at
 * once, buffered by the receiver when no receive is posted yet); larger ones
 * wait for the receiver's clear-to-send and move straight between the two
 * users' buffers. Fixed, not a setting: the receiver bounds an eager payload
 * it must buffer by it, so every rank must agree on it. */
#define SC_P2P_EAGER_BYTES ((size_t)64 << 10)

typedef struct sc_p2p sc_p2p_t;

/* Creates the lane and connects it to every peer (an all-gather of the
 * lanes' addresses over the collectives' transport, on the calling thread,
 * before the progress thread starts). comm->p2p stays NULL when SC_P2P=0. */
sc_result_t sc_p2p_create(sc_comm_t *comm, const sc_tp_config_t *tpc);
/* Stops the lane's thread, failing what is pending with SC_ERR_ABORTED, and
 * closes the lane; later calls are refused. Idempotent. */
void sc_p2p_stop(sc_comm_t *comm);
/* Runs the lane's engine from the calling thread until the n requests
 * (point-to-point calls on comm; NULL entries skipped) are done, where the
 * transport lets the lane thread wait without it (its wait op) and the lane
 * thread gave it up; else, or once the lane closes, returns at once and the
 * caller waits for the lane thread as for any request. */
void sc_p2p_drive(sc_comm_t *comm, sc_request_t *const *reqs, int n);
/* One round of the lane's engine (no waiting in the transport) from the
 * calling thread if nobody holds it: sc_test's progress. */
void sc_p2p_poll(sc_comm_t *comm);
/* Frees what sc_p2p_stop left (the struct itself). */
void sc_p2p_free(sc_comm_t *comm);

/* Frees a point-to-point call's request (its operation; lib/core/p2p_pool.c)
 * once its waiter is done with it. */
void sc_p2p_request_free(sc_request_t *req);

/* A blocking collective called inside a group: the request of its
 * non-blocking form, which sc_group_end waits for. 1 when a group is open on
 * this thread (then *out is what to return), 0 otherwise. */
int sc_group_take_coll(const char *fn, sc_comm_t *comm, const sc_op_t *op, sc_result_t *out);

#endif
