/* SPDX-License-Identifier: BSD-3-Clause */
/* The communicator's side of the liveness watch (lib/control/watch.h): the watch
 * sits in a layer below the communicator and reaches it only through these
 * hooks. */
#include <stdio.h>

#include "lib/control/watch.h"
#include "lib/core/comm.h"

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
  const sc_peer_info_t *p = &((sc_comm_t *)ctx)->peers[r];
  out->host = p->hostname;
  out->pid = (int)p->pid;
  out->watch_addr = p->watch_addr;
}

void sc_comm_watch_hooks(sc_comm_t *comm, sc_watch_hooks_t *h) {
  *h = (sc_watch_hooks_t){.ctx = comm,
                          .rank = comm->rank,
                          .nranks = comm->nranks,
                          .timeout_ms = comm->cfg.timeout_ms,
                          .lock = sc_comm_hook_lock,
                          .unlock = sc_comm_hook_unlock,
                          .aborted = sc_comm_hook_aborted,
                          .error = sc_comm_hook_error,
                          .set_error = sc_comm_hook_set_error,
                          .wake = sc_comm_hook_wake,
                          .peer = sc_comm_hook_peer};
}
