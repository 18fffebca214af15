/* SPDX-License-Identifier: BSD-3-Clause */
/* The stream-ordered forms' machinery (lib/core/stream.c): a stream form records
 * an event on the caller's stream, queues its operation with a ticket and
 * makes the stream wait, on the device, until a pinned flag reaches that
 * ticket. The progress thread waits for the event, runs the operation and
 * writes the ticket into the flag (docs/CUDA.md, "Stream-ordered calls"). */
#ifndef SC_CORE_STREAM_H
#define SC_CORE_STREAM_H

#include <stdint.h>

#include "kernels/devrt.h"
#include "lib/core/comm.h"

/* Stream calls of one communicator in flight at once (queued, or not yet
 * passed by their stream): the pool grows to this, then a call waits for
 * the oldest, bounded by SC_TIMEOUT_MS. Far below 2^31, so the wrap-around
 * compare of tickets is always right. */
#define SC_STREAM_SLOTS_MAX   1024
#define SC_STREAM_SLOTS_FIRST 8

/* The rule of kernels/devrt.h's stream_wait_value: flag value `flag` lets a
 * stream waiting for `ticket` pass (tickets wrap around 2^32). */
static inline int sc_stream_ticket_passed(uint32_t flag, uint32_t ticket) {
  return (int32_t)(flag - ticket) >= 0;
}

/* The flag value after releasing `ticket` when it holds `flag`: the later of
 * the two, so that a late or repeated release never takes one back. */
static inline uint32_t sc_stream_flag_after(uint32_t flag, uint32_t ticket) {
  return sc_stream_ticket_passed(flag, ticket) ? flag : ticket;
}

/* Progress thread, for a request with req->stream set (it owns comm->busy,
 * or the communicator was aborted): wait for the stream's event, run the
 * operation, release the stream whatever the result, recycle the request.
 * A failure makes the communicator fail (sc_comm_get_async_error). */
void sc_stream_run(sc_comm_t *comm, sc_request_t *req);

/* Queues op (its arguments checked: device buffers, a device runtime) behind
 * an event of stream and makes stream wait for it (the flag); returns at
 * once. op->job set: the progress thread runs the job. */
sc_result_t sc_stream_submit(const char *fn, sc_comm_t *comm, const sc_op_t *op,
                             sc_stream_t stream);

/* sc_comm_abort: let every stream waiting on this communicator go on. */
void sc_stream_release_all(sc_comm_t *comm);

/* At destroy, once the progress thread has stopped: release every stream,
 * wait (bounded) until the streams have passed their waits, free the flag
 * and the pools. */
void sc_stream_state_free(sc_comm_t *comm);

#endif
