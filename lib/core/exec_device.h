/* SPDX-License-Identifier: BSD-3-Clause */
/* The executor on device buffers (lib/core/exec_device.c), and what it shares
 * with the host executor (lib/core/executor.c): one run's context and the
 * bounded, abort-aware transport progress round.
 *
 * A device operation runs the same schedule as a host one. Local steps
 * (COPY, the reduction of RECV_REDUCE, the AVG division) are enqueued on the
 * communicator's own stream. A message to a peer whose link moves device
 * memory itself (the transport's props say device_mem: CUDA IPC on one
 * host) carries the device pointer; any other is staged through pinned host
 * slots in chunks (lib/core/stage_plan.h), the copies of one chunk overlapping
 * the transfer of the previous. The operation returns once all of its device
 * work has run: the result is in the output buffer. */
#ifndef SC_CORE_EXEC_DEVICE_H
#define SC_CORE_EXEC_DEVICE_H

#include <pthread.h>
#include <stdint.h>

#include "kernels/devrt.h"
#include "lib/core/comm.h"
#include "lib/core/stage_plan.h"
#include "lib/schedule/step.h"

/* Longest single poll, so that abort and deadlines are checked regularly even
 * when a transport cannot be woken. */
#define SC_EXEC_POLL_SLICE_MS 200

/* One schedule's run. */
typedef struct sc_exec_ctx {
  sc_comm_t *comm;
  const sc_exec_args_t *a;
  sc_step_mem_t mem; /* the operation's buffers, scratch as prepared */
  size_t step;       /* index of the step being executed, for messages */
  int64_t last_progress_ms;
  /* Bytes moved since last_progress_ms was read: the next round stamps it
   * from the clock it reads anyway. A small all-reduce on one host read
   * the clock four to five times, 10-14% of its time (perf/README.md). */
  int progress_unstamped;
} sc_exec_ctx_t;

/* One round of transport progress, sleeping at most max_slice_ms; checks
 * abort, a failure the liveness watch reported and the no-progress deadline
 * (SC_TIMEOUT_MS). peer < 0: the wait is for the device, not for a peer. */
sc_result_t sc_exec_progress(sc_exec_ctx_t *c, int peer, size_t bytes, const char *dir,
                             int max_slice_ms);
/* The error of a request the transport failed (req->state ==
 * SC_TP_REQ_ERROR). SC_ERR_MISMATCH, a peer's print that differs, becomes
 * the text naming both calls (from req's peer_fp; req NULL: from the request
 * of the running schedule that holds the mismatch, as progress reports it). */
sc_result_t sc_exec_req_failed(const sc_comm_t *comm, const sc_tp_req_t *req, int peer);
/* Post a send or a receive of the running operation: req (cleared by the
 * caller) gets the operation's print; SC_ERR_MISMATCH (a transport refusing
 * a request to a peer whose channel a mismatch put out of step) is worded as
 * above. */
sc_result_t sc_exec_isend(sc_comm_t *comm, int peer, const void *buf, size_t len, sc_tp_req_t *req);
sc_result_t sc_exec_irecv(sc_comm_t *comm, int peer, void *buf, size_t len, sc_tp_req_t *req);

/* A pinned host slot of a staging ring and the chunk it carries. */
typedef enum sc_stage_slot_state {
  SC_SLOT_FREE = 0,
  SC_SLOT_COPY, /* a copy between the device and the slot is enqueued; its event follows it */
  SC_SLOT_XFER  /* the transport moves the slot's bytes (req) */
} sc_stage_slot_state_t;

typedef struct sc_stage_slot {
  uint8_t *host; /* slot_bytes of pinned memory */
  void *event;
  sc_tp_req_t req;
  int state;    /* sc_stage_slot_state_t */
  size_t len;   /* bytes of the chunk */
  size_t ds;    /* send rings: the sc_dsend_t the chunk belongs to */
  uint8_t *dev; /* the receive ring: where the chunk goes on the device */
} sc_stage_slot_t;

/* The slots of one direction of one link: a send ring per peer that needs
 * staging (so that a send waiting for a slow peer never holds the slots of
 * another), one receive ring (receives run one at a time). */
typedef struct sc_stage_xring {
  sc_stage_ring_t r;
  uint8_t done[SC_STAGE_SLOTS_MAX]; /* per slot: its chunk finished */
  sc_stage_slot_t slots[SC_STAGE_SLOTS_MAX];
  uint8_t *pinned; /* nslots * slot_bytes */
  size_t slot_bytes;
  size_t qhead, qtail; /* send rings: sends whose chunks are not all copied yet (FIFO) */
} sc_stage_xring_t;

/* A SEND step in flight. */
typedef struct sc_dsend {
  int peer;
  int direct;             /* the transport reads the device memory itself (req) */
  const uint8_t *lo, *hi; /* the device bytes it reads */
  sc_stage_plan_t plan;   /* staged: its chunks */
  size_t copied, sent;    /* staged: chunks copied to a slot (enqueued), chunks sent */
  size_t qnext;           /* the next send of the same ring's queue */
  sc_tp_req_t req;        /* direct */
} sc_dsend_t;

/* The receive being staged now. */
typedef struct sc_drecv {
  int active;
  int peer;
  uint8_t *dst;
  sc_stage_plan_t plan;
  size_t posted, landed; /* chunks posted to the transport; chunks enqueued to the device */
} sc_drecv_t;

/* Per communicator, created by its first device operation, freed by
 * sc_exec_state_free. Everything is pooled: nothing is allocated per call
 * once the largest operation has run. */
struct sc_exec_dev {
  const sc_devrt_t *rt;
  int device;
  int nranks;
  int timeout_ms;
  /* Created non-blocking with respect to the legacy default stream, so it
   * never waits for (nor delays) the application's work: the input of a
   * call must be complete before the call (docs/CUDA.md). */
  void *stream;
  void *sync_event;
  int dirty;                     /* work enqueued on stream since its last sync */
  int failed;                    /* the last operation stopped midway: drain before reuse */
  size_t chunk;                  /* SC_STAGE_CHUNK_BYTES */
  uint32_t nslots;               /* SC_STAGE_SLOTS */
  uint8_t *direct;               /* [nranks]: the link to that peer moves device memory itself */
  sc_stage_xring_t **send_rings; /* [nranks], made when a staged send to the peer first runs */
  sc_stage_xring_t recv_ring;
  sc_drecv_t rcur;
  void *scratch; /* device */
  size_t scratch_bytes;
  void *rstage; /* device: RECV_REDUCE's incoming data, a partially overlapping COPY */
  size_t rstage_bytes;
  sc_dsend_t *dsends;
  size_t dsend_cap, ndsends, dsend_head;
  /* Buffers outgrown during an operation, freed by sc_exec_dev_free only:
   * a free synchronizes every stream of the device (cudaFree,
   * cudaFreeHost), and a stream form's stream may be waiting for a flag
   * that only this thread will write after the operation (lib/core/stream.c):
   * freeing here would deadlock. Growth doubles, so this holds less than
   * what is in use. */
  struct sc_exec_dev_retired {
    void *p;
    int pinned;
  } * retired;
  size_t nretired, retired_cap;
  /* Memory a stream form's caller allocated before its stream began to wait
   * (sc_exec_device_reserve); the progress thread takes it instead of
   * allocating. spare_lock also guards the capacities the caller reads:
   * scratch_bytes, rstage_bytes, the rings' pinned and slot_bytes, and
   * send_rings[]. */
  pthread_mutex_t spare_lock;
  struct sc_exec_dev_spare {
    void *p;
    size_t bytes;
    int pinned;
  } * spares;
  int nspares, spare_cap;
  uint8_t *send_ring_reserved; /* [nranks], the reservation's scratch */
  /* The shape of the last reservation (spare_lock): a stream call of the
   * same shape needs nothing new, so a training loop's calls skip building
   * the schedule twice. Cleared when the cost model changes. */
  sc_sched_key_t reserved;
};

/* Two ranges of len bytes that overlap without being the same: a copy
 * between them must go through a third buffer. */
static inline int sc_exec_partial_overlap(const uint8_t *a, const uint8_t *b, size_t len) {
  return a != b && a < b + len && b < a + len;
}

/* What one schedule needs of the executor's memory. */
typedef struct sc_exec_needs {
  size_t scratch, rstage; /* device bytes */
  size_t slot_bytes;      /* of every staging ring it uses */
  int staged_recv;        /* it receives from a peer through the receive ring */
} sc_exec_needs_t;

/* The needs of schedule s with elements of es bytes; m: the operation's
 * buffers (a COPY goes through rstage only where its ranges partly
 * overlap), NULL to count every COPY. */
void sc_exec_sched_needs(const sc_sched_t *s, size_t es, const uint8_t *direct,
                         const sc_step_mem_t *m, size_t chunk, sc_exec_needs_t *n);

/* The communicator's device executor state, made on first use (by the
 * progress thread, a blocking caller or a stream form's caller). */
sc_result_t sc_exec_dev_get(sc_comm_t *comm, const sc_devrt_t *rt, int device,
                            struct sc_exec_dev **out);

/* The device op's buffers are on (made current on this thread) and the
 * communicator's executor state for it; SC_ERR_INVALID_ARG when the
 * communicator already works on another device. */
sc_result_t sc_exec_dev_of_op(sc_comm_t *comm, const sc_op_t *op, struct sc_exec_dev **out);

/* lib/core/exec_device_mem.c: buffers that grow (a spare first, else an
 * allocation), outgrown ones kept until sc_exec_dev_free, the rings'
 * memory, and the parked spares. */
sc_result_t sc_exec_dev_retire(struct sc_exec_dev *d, void *p, int pinned);
sc_result_t sc_exec_dev_reserve(struct sc_exec_dev *d, void **buf, size_t *have, size_t need);
/* Makes the ring's slots at least slot_bytes each; called between
 * operations only, when no slot is in use. */
sc_result_t sc_exec_ring_ensure(struct sc_exec_dev *d, sc_stage_xring_t *x, size_t slot_bytes);
void sc_exec_ring_release_all(const sc_devrt_t *rt, sc_stage_xring_t *x);
void sc_exec_dev_free_spares(struct sc_exec_dev *d);

/* For a stream form (lib/core/stream.c), on the caller's thread before its stream
 * waits for op: allocates what the device executor would lack for op and
 * parks it, so that the progress thread allocates nothing while that stream
 * waits (an allocation is an implicit synchronization in CUDA). */
sc_result_t sc_exec_device_reserve(sc_comm_t *comm, const sc_op_t *op);
/* The cost model changed (lib/core/calibrate.c): the next stream call reserves
 * for the schedule the new model picks. */
void sc_exec_device_model_changed(sc_comm_t *comm);

/* The request of the device path the transport failed with
 * SC_ERR_MISMATCH, or NULL. */
const sc_tp_req_t *sc_exec_dev_mismatched(const struct sc_exec_dev *d);
/* sc_sched_execute for an operation on device buffers (op->device). */
sc_result_t sc_exec_device(sc_comm_t *comm, const sc_exec_args_t *a);

/* Waits (bounded) for the stream's work, then releases everything. */
void sc_exec_dev_free(struct sc_exec_dev *d);

#endif
