/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point layer's memory per message: each call needs one
 * sc_p2p_op_t (its request, two frames and the transport requests: over
 * 2 KiB, past the allocator's per-thread cache), so a small exchange would
 * pay malloc's slow path and free's twice per message. Host-buffer
 * operations come from a process-wide stack of spare blocks instead
 * (lib/base/spares.h): the calling thread takes one, the thread that waits
 * for it gives it back. At most 64 are kept (about 160 KiB). An operation
 * that stages a device buffer carries its staging bytes after it and is
 * allocated and freed as before. The records of unexpected messages and
 * the control frames are made by the lane's thread and freed by whichever
 * thread settles them, which the allocator's per-thread cache serves badly
 * too: they have stacks of their own (64 each, about 30 KiB). */
#include <stdlib.h>
#include <string.h>

#include "lib/base/spares.h"
#include "lib/core/p2p_internal.h"

/* Enough for a group of sends and receives to every peer of a small job,
 * or a window of outstanding isend/irecv, without the allocator. */
static sc_spares_t op_spares = SC_SPARES_INIT(sizeof(sc_p2p_op_t), 64);
static sc_spares_t unexp_spares = SC_SPARES_INIT(sizeof(sc_p2p_unexp_t), 64);
static sc_spares_t ctl_spares = SC_SPARES_INIT(sizeof(sc_p2p_ctl_t), 64);

sc_p2p_op_t *sc_p2p_op_alloc(size_t stage) {
  sc_p2p_op_t *op = stage == 0 ? sc_spares_get(&op_spares) : malloc(sizeof(*op) + stage);
  if (!op) return NULL;
  memset(op, 0, sizeof(*op));
  op->req.spare = stage == 0;
  return op;
}

void sc_p2p_op_free(sc_p2p_op_t *op) {
  if (op && op->req.spare)
    sc_spares_put(&op_spares, op);
  else
    free(op);
}

void sc_p2p_request_free(sc_request_t *req) {
  sc_p2p_op_free((sc_p2p_op_t *)req);
}

sc_p2p_unexp_t *sc_p2p_unexp_get(void) {
  return sc_spares_get_zeroed(&unexp_spares);
}

void sc_p2p_unexp_put(sc_p2p_unexp_t *u) {
  sc_spares_put(&unexp_spares, u);
}

sc_p2p_ctl_t *sc_p2p_ctl_get(void) {
  return sc_spares_get_zeroed(&ctl_spares);
}

void sc_p2p_ctl_put(sc_p2p_ctl_t *c) {
  sc_spares_put(&ctl_spares, c);
}
