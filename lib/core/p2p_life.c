/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point lane's life cycle: creation connects the lane (an
 * all-gather of its addresses over the collectives' transport), the close
 * says goodbye to the peers it talked to and stops the lane thread, and the
 * free releases what is left. The lane thread and its engine are in
 * p2p_lane.c. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/algorithms.h"
#include "kernels/devrt.h"
#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/core/fingerprint.h"
#include "lib/core/p2p_internal.h"

/* A destroy (not an abort) says goodbye to every peer still there that the
 * lane exchanged messages with, so that their lanes take the close that
 * follows for what it is rather than a failure; bounded by a second. A pair
 * never used has no connection to close (SC_CONNECT=lazy). Called by
 * whoever owns the lane. */
void sc_p2p_say_bye(sc_p2p_t *p) {
  const int n = p->comm->nranks;
  if (!p->tp || atomic_load(&p->comm->aborted)) return;
  sc_p2p_ctl_t *bye = calloc((size_t)n, sizeof(*bye));
  if (!bye) return;
  sc_p2p_hdr_t h = {.kind = SC_P2P_BYE, .dtype = SC_UINT8};
  for (int i = 0; i < n; i++) {
    bye[i].req.state = SC_TP_REQ_DONE;
    if (i == p->comm->rank || p->peers[i].dead || !p->peers[i].used) continue;
    sc_p2p_hdr_encode(&h, bye[i].hdr);
    sc_p2p_tp_post(p, 1, i, bye[i].hdr, SC_P2P_FRAME_BYTES, &bye[i].req);
  }
  const int64_t end = sc_now_ms() + 1000;
  for (int pending = 1; pending && sc_now_ms() < end;) {
    int progressed;
    if (p->ops->progress(p->tp, 10, &progressed) != SC_SUCCESS)
      sc_error_get_detail(p->tp_msg, sizeof(p->tp_msg));
    pending = 0;
    for (int i = 0; i < n; i++) pending |= bye[i].req.state == SC_TP_REQ_PENDING;
  }
  p->ops->cancel_all(p->tp, SC_ERR_ABORTED);
  free(bye);
}

/* w bytes from every rank into all (rank order) over the collectives'
 * transport. No print: the exchange is no call of the user's. */
static sc_result_t lane_allgather(sc_comm_t *comm, const void *mine, void *all, size_t w) {
  sc_sched_t s;
  sc_sched_init(&s);
  sc_result_t r = sc_small_allgather_schedule(comm->nranks, comm->rank, w, &s);
  if (r == SC_SUCCESS) {
    sc_op_t xop = {.coll = SC_COLL_ALLGATHER,
                   .sendbuf = mine,
                   .recvbuf = all,
                   .count = w,
                   .dtype = SC_UINT8,
                   .op = SC_SUM};
    sc_exec_args_t a = {.op = &xop, .sched = &s, .elem_size = 1};
    r = sc_sched_execute(comm, &a);
  }
  sc_sched_free(&s);
  return r;
}

sc_result_t sc_p2p_create(sc_comm_t *comm, const sc_tp_config_t *tpc) {
  if (!comm->cfg.p2p) return SC_SUCCESS;
  sc_p2p_t *p = calloc(1, sizeof(*p));
  if (!p) return SC_ERR(SC_ERR_NOMEM, "point-to-point state");
  p->comm = comm;
  p->ops = comm->tpops;
  pthread_mutex_init(&p->lock, NULL);
  pthread_mutex_init(&p->drive, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  comm->p2p = p;
  const int n = comm->nranks;
  p->peers = calloc((size_t)n, sizeof(*p->peers));
  if (!p->peers) return SC_ERR(SC_ERR_NOMEM, "point-to-point peers of %d ranks", n);
  if (n < 2) return SC_SUCCESS;
  uint8_t mine[SC_TP_ADDR_MAX] = {0};
  size_t len = sizeof(mine);
  /* The lane's setup logs what the collectives' transport logged already. */
  sc_log_repeating(1);
  sc_result_t r = p->ops->create(tpc, &p->tp, mine, &len);
  if (r != SC_SUCCESS) {
    sc_log_repeating(0);
    p->tp = NULL;
    return r;
  }
  /* The table is as wide as the longest address (UCX's differ by host),
   * agreed on first: at SC_TP_ADDR_MAX per rank it was 0.77 MiB at 1,024
   * ranks over tcp, whose address is 32 bytes, and it stayed resident in the
   * C library's heap after creation. The tail keeps a transport that copies
   * a whole header from the last slot inside the table. */
  uint32_t *lens = calloc((size_t)n, sizeof(*lens));
  uint8_t *all = NULL;
  size_t w = 0;
  if (!lens) r = SC_ERR(SC_ERR_NOMEM, "point-to-point address lengths of %d ranks", n);
  if (r == SC_SUCCESS) {
    const uint32_t l32 = (uint32_t)len;
    r = lane_allgather(comm, &l32, lens, sizeof(l32));
  }
  for (int i = 0; r == SC_SUCCESS && i < n; i++) {
    if (lens[i] == 0 || lens[i] > SC_TP_ADDR_MAX)
      r = SC_ERR(SC_ERR_REMOTE, "point-to-point lane: rank %d published an address of %u bytes", i,
                 (unsigned)lens[i]);
    else if (lens[i] > w)
      w = lens[i];
  }
  free(lens);
  if (r == SC_SUCCESS) {
    all = calloc((size_t)n * w + SC_TP_ADDR_MAX, 1);
    if (!all) r = SC_ERR(SC_ERR_NOMEM, "point-to-point addresses of %d ranks", n);
  }
  if (r == SC_SUCCESS) r = lane_allgather(comm, mine, all, w);
  if (r == SC_SUCCESS) r = p->ops->connect_all(p->tp, all, w);
  sc_log_repeating(0);
  free(all);
  if (r != SC_SUCCESS) {
    char d[SC_ERRMSG_MAX];
    sc_error_get_detail(d, sizeof(d));
    return SC_ERR(r, "connecting the point-to-point lane (SC_P2P=0 goes without): %s", d);
  }
  return SC_SUCCESS;
}

void sc_p2p_stop(sc_comm_t *comm) {
  sc_p2p_t *p = comm->p2p;
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  int started = p->started, was = p->closed;
  p->closed = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->lock);
  if (was) return;
  if (started) {
    if (p->tp) p->ops->wake(p->tp);
    pthread_join(p->thread, NULL);
  }
  if (p->tp) {
    if (!started) sc_p2p_say_bye(p);
    p->ops->cancel_all(p->tp, SC_ERR_ABORTED);
    p->ops->destroy(p->tp);
    p->tp = NULL;
  }
}

void sc_p2p_free(sc_comm_t *comm) {
  sc_p2p_t *p = comm->p2p;
  if (!p) return;
  sc_p2p_stop(comm);
  sc_p2p_batches_free(p);
  if (p->dstream) sc_devrt()->stream_destroy(p->dstream);
  pthread_mutex_destroy(&p->lock);
  pthread_mutex_destroy(&p->drive);
  pthread_cond_destroy(&p->cv);
  for (int i = 0; p->peers && i < p->comm->nranks; i++) free(p->peers[i].dead_msg);
  free(p->peers);
  free(p);
  comm->p2p = NULL;
}
