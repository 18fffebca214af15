/* SPDX-License-Identifier: BSD-3-Clause */
/* The communicator's side of the liveness watch (lib/control/watch.h): the watch
 * sits in a layer below the communicator and reaches it only through these
 * hooks. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "lib/control/watch.h"
#include "lib/core/comm.h"
#include "lib/core/fingerprint.h"

_Static_assert(SC_WATCH_FP_LEN == SC_TP_FP_LEN, "a heartbeat carries a message's print");

static void sc_comm_hook_lock(void *ctx) {
  pthread_mutex_lock(&((sc_comm_t *)ctx)->lock);
}

static void sc_comm_hook_unlock(void *ctx) {
  pthread_mutex_unlock(&((sc_comm_t *)ctx)->lock);
}

static int sc_comm_hook_aborted(void *ctx) {
  return atomic_load(&((sc_comm_t *)ctx)->aborted);
}

static sc_result_t sc_comm_hook_error(void *ctx, char *msg, size_t len) {
  sc_comm_t *comm = ctx;
  if (msg && len) snprintf(msg, len, "%s", comm->errmsg);
  return (sc_result_t)atomic_load(&comm->error);
}

static void sc_comm_hook_set_error(void *ctx, sc_result_t code, const char *msg) {
  sc_comm_t *comm = ctx;
  snprintf(comm->errmsg, sizeof(comm->errmsg), "%s", msg);
  atomic_store(&comm->error, code);
}

static void sc_comm_hook_wake(void *ctx) {
  sc_comm_t *comm = ctx;
  comm->tpops->wake(comm->tp);
}

static void sc_comm_hook_peer(void *ctx, int r, sc_watch_peer_t *out) {
  const sc_comm_t *comm = ctx;
  static const sc_peer_t none; /* before the records are kept */
  const sc_peer_t *p = comm->peers && r >= 0 && r < comm->nranks ? &comm->peers[r] : &none;
  out->host = sc_comm_host(comm, r);
  out->pid = (int)p->pid;
  out->watch_addr = p->watch_addr;
}

static int sc_comm_hook_shared_verdict(void *ctx) {
  return ((sc_comm_t *)ctx)->error_shared;
}

/* Reads comm->now, the sequence lock lib/core/progress.c writes. */
static void sc_comm_hook_op_now(void *ctx, sc_watch_op_t *out) {
  sc_op_now_t *n = &((sc_comm_t *)ctx)->now;
  uint64_t w[SC_TP_FP_LEN / 8], seq;
  for (;;) {
    uint64_t g = atomic_load_explicit(&n->gen, memory_order_acquire);
    if (g & 1) {
      sched_yield(); /* the writer is between its two stores */
      continue;
    }
    seq = atomic_load_explicit(&n->seq, memory_order_relaxed);
    for (size_t i = 0; i < SC_TP_FP_LEN / 8; i++)
      w[i] = atomic_load_explicit(&n->fp[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&n->gen, memory_order_relaxed) == g) break;
  }
  memset(out, 0, sizeof(*out));
  memcpy(out->fp, w, SC_TP_FP_LEN);
  for (size_t i = 0; i < SC_TP_FP_LEN && !out->busy; i++) out->busy = out->fp[i] != 0;
  if (out->busy) out->seq = seq;
}

static void sc_comm_hook_describe(void *ctx, const sc_watch_op_t *op, char *out, size_t len) {
  (void)ctx;
  sc_fp_msg_describe(op->fp, op->seq, out, len);
}

void sc_comm_watch_hooks(sc_comm_t *comm, sc_watch_hooks_t *h) {
  *h = (sc_watch_hooks_t){.ctx = comm,
                          .rank = comm->rank,
                          .nranks = comm->nranks,
                          .timeout_ms = comm->cfg.timeout_ms,
                          .fanout = comm->cfg.watch_fanout,
                          .lock = sc_comm_hook_lock,
                          .unlock = sc_comm_hook_unlock,
                          .aborted = sc_comm_hook_aborted,
                          .error = sc_comm_hook_error,
                          .set_error = sc_comm_hook_set_error,
                          .wake = sc_comm_hook_wake,
                          .peer = sc_comm_hook_peer,
                          .shared_verdict = sc_comm_hook_shared_verdict,
                          .op_now = sc_comm_hook_op_now,
                          .describe = sc_comm_hook_describe};
}
