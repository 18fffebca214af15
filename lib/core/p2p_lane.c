/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point lane's thread and life cycle: it takes the submitted
 * operations, drives the lane's transport, settles requests, enforces
 * SC_TIMEOUT_MS and the communicator's failure, and at the close says
 * goodbye and fails what is left; creation connects the lane (an all-gather
 * of its addresses over the collectives' transport). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "kernels/devrt.h"
#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/core/fingerprint.h"
#include "lib/core/p2p_internal.h"

/* ---- the lane thread ---- */

static void scan_active(sc_p2p_t *p) {
  sc_p2p_op_t **pp = &p->active;
  while (*pp) {
    sc_p2p_op_t *op = *pp;
    if (sc_p2p_op_tr_pending(op)) {
      pp = &op->anext;
      continue;
    }
    *pp = op->anext;
    op->in_active = 0;
    sc_result_t st = SC_SUCCESS;
    for (int i = 0; i < op->ntr; i++)
      if (op->tr[i].state == SC_TP_REQ_ERROR)
        st = op->tr[i].status ? op->tr[i].status : SC_ERR_REMOTE;
    if (st != SC_SUCCESS) {
      if (op->waiting)
        sc_p2p_wait_remove(
            op->is_send ? &p->peers[op->peer].wait_cts : &p->peers[op->peer].wait_data, op);
      op->final = 1;
      sc_p2p_tp_failed(p, op->peer, st); /* fails op->fail too */
      if (op->fail == SC_SUCCESS) op->fail = st;
    }
    if (!op->final) continue; /* a rendezvous send waiting for its CTS */
    if (op->fail != SC_SUCCESS) {
      sc_p2p_peer_t *peer = &p->peers[op->peer];
      sc_p2p_op_fail(p, op, op->fail, peer->dead ? peer->dead_msg : "failed");
    } else {
      sc_p2p_op_complete(op, SC_SUCCESS);
    }
  }
}

static void scan_pending(sc_p2p_t *p) {
  sc_p2p_unexp_t **pp = &p->pending;
  while (*pp) {
    sc_p2p_unexp_t *u = *pp;
    if (u->req.state == SC_TP_REQ_PENDING) {
      pp = &u->pnext;
      continue;
    }
    *pp = u->pnext;
    if (u->req.state == SC_TP_REQ_ERROR) sc_p2p_tp_failed(p, u->peer, u->req.status);
    u->arrived = 1;
    if (u->recv && u->req.state != SC_TP_REQ_ERROR) {
      if (u->bytes) memcpy(u->recv->buf, u->data, u->bytes);
      sc_p2p_op_complete(u->recv, SC_SUCCESS);
      sc_p2p_unexp_free(u);
    } else if (u->drop || u->req.state == SC_TP_REQ_ERROR) {
      /* on the peer's list still only when not dropped: peer_fail took it */
      if (!u->drop) sc_p2p_list_remove(&p->peers[u->peer].unexp, &u->ent);
      sc_p2p_unexp_free(u);
    }
  }
}

static void scan_ctls(sc_p2p_t *p) {
  sc_p2p_ctl_t **cp = &p->ctls;
  while (*cp) {
    sc_p2p_ctl_t *c = *cp;
    if (c->req.state == SC_TP_REQ_PENDING) {
      cp = &c->next;
      continue;
    }
    *cp = c->next;
    if (c->req.state == SC_TP_REQ_ERROR) sc_p2p_tp_failed(p, c->peer, c->req.status);
    free(c);
  }
}

/* Operations past SC_TIMEOUT_MS fail. One that waits in a list leaves it
 * alone; one whose messages are in the transport cannot be taken back from
 * it, so the whole lane is failed (cancel_all) and every operation with it. */
static void check_deadlines(sc_p2p_t *p, int64_t now) {
  const int n = p->comm->nranks;
  char why[160];
  snprintf(why, sizeof(why), "no progress for %d ms (SC_TIMEOUT_MS)", p->comm->cfg.timeout_ms);
  for (int i = 0; i < n; i++) {
    sc_p2p_peer_t *pp = &p->peers[i];
    for (sc_p2p_entry_t *e = pp->posted.head, *next; e; e = next) {
      next = e->next;
      sc_p2p_op_t *op = e->owner;
      if (now < op->deadline_ms) continue;
      sc_p2p_list_remove(&pp->posted, e);
      sc_p2p_op_fail(p, op, SC_ERR_TIMEOUT, why);
    }
    for (sc_p2p_entry_t *e = pp->unexp.head, *next; e; e = next) {
      next = e->next;
      sc_p2p_unexp_t *u = e->owner;
      if (!u->self_send || now < u->self_send->deadline_ms) continue;
      sc_p2p_list_remove(&pp->unexp, e);
      sc_p2p_op_fail(p, u->self_send, SC_ERR_TIMEOUT, why);
      sc_p2p_unexp_free(u);
    }
    for (sc_p2p_op_t **list = &pp->wait_cts; list;
         list = list == &pp->wait_cts ? &pp->wait_data : NULL) {
      for (sc_p2p_op_t *op = *list, *next; op; op = next) {
        next = op->wnext;
        if (now < op->deadline_ms) continue;
        sc_p2p_wait_remove(list, op);
        if (op->in_active) {
          op->final = 1;
          op->fail = SC_ERR_TIMEOUT;
        } else {
          sc_p2p_op_fail(p, op, SC_ERR_TIMEOUT, why);
        }
      }
    }
  }
  int stuck = 0;
  for (sc_p2p_op_t *op = p->active; op && !stuck; op = op->anext)
    stuck = sc_p2p_op_tr_pending(op) && now >= op->deadline_ms;
  if (!stuck) return;
  SC_ERR(SC_ERR_TIMEOUT, "rank %d: point-to-point messages %s", p->comm->rank, why);
  sc_error_get_detail(p->tp_msg, sizeof(p->tp_msg));
  p->ops->cancel_all(p->tp, SC_ERR_TIMEOUT);
  for (int i = 0; i < n; i++)
    if (i != p->comm->rank) sc_p2p_peer_fail(p, i, SC_ERR_TIMEOUT, p->tp_msg);
}

/* The communicator failed (a collective, or the liveness watch, which also
 * sees peers die that a transport would only notice at the timeout, as UCX):
 * what is pending fails with its first failure, as later calls would. */
static void check_comm_failed(sc_p2p_t *p) {
  sc_comm_t *comm = p->comm;
  int err = atomic_load(&comm->error);
  if (err == SC_SUCCESS || p->comm_failed) return;
  p->comm_failed = 1;
  char why[SC_ERRMSG_MAX / 2], first[SC_ERRMSG_MAX / 2 - 64];
  pthread_mutex_lock(&comm->lock);
  snprintf(first, sizeof(first), "%s", comm->errmsg);
  pthread_mutex_unlock(&comm->lock);
  snprintf(why, sizeof(why), "the communicator failed: %s", first);
  for (int i = 0; i < comm->nranks; i++) {
    p->peers[i].quiet = 1;
    sc_p2p_peer_fail(p, i, (sc_result_t)err, why);
  }
}

static sc_p2p_op_t *take_queue(sc_p2p_t *p, int *closed) {
  pthread_mutex_lock(&p->lock);
  sc_p2p_op_t *q = p->qhead;
  p->qhead = p->qtail = NULL;
  *closed = p->closed;
  pthread_mutex_unlock(&p->lock);
  return q;
}

/* A destroy (not an abort) says goodbye to every peer still there, so that
 * their lanes take the close that follows for what it is rather than a
 * failure; bounded by a second. Called by whoever owns the lane. */
static void say_bye(sc_p2p_t *p) {
  const int n = p->comm->nranks;
  if (!p->tp || atomic_load(&p->comm->aborted)) return;
  sc_p2p_ctl_t *bye = calloc((size_t)n, sizeof(*bye));
  if (!bye) return;
  sc_p2p_hdr_t h = {.kind = SC_P2P_BYE, .dtype = SC_UINT8};
  for (int i = 0; i < n; i++) {
    bye[i].req.state = SC_TP_REQ_DONE;
    if (i == p->comm->rank || p->peers[i].dead) continue;
    sc_p2p_hdr_encode(&h, bye[i].hdr);
    sc_p2p_tp_post(p, 1, i, bye[i].hdr, SC_P2P_HDR_BYTES, &bye[i].req);
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

/* The lane closes: everything still pending fails with SC_ERR_ABORTED. */
static void fail_all(sc_p2p_t *p, sc_p2p_op_t *queued) {
  const char *why = "the communicator was aborted or destroyed";
  say_bye(p);
  if (p->tp) p->ops->cancel_all(p->tp, SC_ERR_ABORTED);
  for (sc_p2p_op_t *op = queued, *next; op; op = next) {
    next = op->qnext;
    sc_p2p_op_fail(p, op, SC_ERR_ABORTED, why);
  }
  for (int i = 0; i < p->comm->nranks; i++) {
    p->peers[i].dead = 0;
    p->peers[i].bye = 0; /* nothing is kept for a later receive now */
    sc_p2p_peer_fail(p, i, SC_ERR_ABORTED, why);
  }
  /* cancel_all settled every request: what peer_fail deferred ends now */
  scan_active(p);
  scan_pending(p);
  scan_ctls(p);
}

void *sc_p2p_main(void *arg) {
  sc_p2p_t *p = arg;
  sc_log_set_rank(p->comm->rank);
  for (int i = 0; i < p->comm->nranks; i++)
    if (i != p->comm->rank && p->tp) sc_p2p_peer_post_header(p, i);
  int64_t next_check = sc_now_ms() + SC_P2P_POLL_MS;
  /* A header handled last round posted the next header's receive, and a
   * transport may fill that at once from what it has read already (TCP):
   * then the next round must not wait in the transport for more. */
  int busy = 0;
  for (;;) {
    int closed;
    sc_p2p_op_t *q = take_queue(p, &closed);
    if (closed) {
      fail_all(p, q);
      break;
    }
    for (sc_p2p_op_t *op = q, *next; op; op = next) {
      next = op->qnext;
      sc_p2p_start_op(p, op);
    }
    if (p->tp) {
      int progressed = 0;
      sc_result_t r = p->ops->progress(p->tp, q || busy ? 0 : SC_P2P_POLL_MS, &progressed);
      busy = 0;
      if (r != SC_SUCCESS) sc_error_get_detail(p->tp_msg, sizeof(p->tp_msg));
      for (int i = 0; i < p->comm->nranks; i++) {
        sc_p2p_peer_t *pp = &p->peers[i];
        if (!pp->hposted || pp->hreq.state == SC_TP_REQ_PENDING) continue;
        if (pp->hreq.state == SC_TP_REQ_ERROR) {
          pp->hposted = 0;
          sc_p2p_tp_failed(p, i, pp->hreq.status);
        } else {
          sc_p2p_on_header(p, i);
          busy = 1;
        }
      }
      scan_active(p);
      scan_pending(p);
      scan_ctls(p);
    } else if (!q) {
      pthread_mutex_lock(&p->lock);
      if (!p->qhead && !p->closed) {
        struct timespec ts;
        sc_clock_deadline_ts(SC_P2P_POLL_MS, &ts);
        pthread_cond_timedwait(&p->cv, &p->lock, &ts);
      }
      pthread_mutex_unlock(&p->lock);
    }
    int64_t now = sc_now_ms();
    if (now >= next_check) {
      check_comm_failed(p);
      check_deadlines(p, now);
      next_check = now + SC_P2P_POLL_MS;
    }
  }
  return NULL;
}

/* ---- life cycle ---- */

sc_result_t sc_p2p_create(sc_comm_t *comm, const sc_tp_config_t *tpc) {
  if (!comm->cfg.p2p) return SC_SUCCESS;
  sc_p2p_t *p = calloc(1, sizeof(*p));
  if (!p) return SC_ERR(SC_ERR_NOMEM, "point-to-point state");
  p->comm = comm;
  p->ops = comm->tpops;
  pthread_mutex_init(&p->lock, NULL);
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
  const size_t w = SC_TP_ADDR_MAX;
  uint8_t *all = calloc((size_t)n + 1, w);
  if (!all) return SC_ERR(SC_ERR_NOMEM, "point-to-point addresses of %d ranks", n);
  uint8_t *mine = all + (size_t)n * w;
  size_t len = w;
  /* The lane's setup logs what the collectives' transport logged already. */
  sc_log_repeating(1);
  sc_result_t r = p->ops->create(tpc, &p->tp, mine, &len);
  if (r != SC_SUCCESS) {
    sc_log_repeating(0);
    p->tp = NULL;
    free(all);
    return r;
  }
  /* No print: the exchange is no call of the user's. */
  sc_sched_t s;
  sc_sched_init(&s);
  r = sc_small_allgather_schedule(n, comm->rank, w, &s);
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
    if (!started) say_bye(p);
    p->ops->cancel_all(p->tp, SC_ERR_ABORTED);
    p->ops->destroy(p->tp);
    p->tp = NULL;
  }
}

void sc_p2p_free(sc_comm_t *comm) {
  sc_p2p_t *p = comm->p2p;
  if (!p) return;
  sc_p2p_stop(comm);
  if (p->dstream) sc_devrt()->stream_destroy(p->dstream);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cv);
  free(p->peers);
  free(p);
  comm->p2p = NULL;
}
