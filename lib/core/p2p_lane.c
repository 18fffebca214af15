/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point lane's thread and life cycle: it takes the submitted
 * operations, drives the lane's transport, settles requests, enforces
 * SC_TIMEOUT_MS and the communicator's failure, and at the close says
 * goodbye and fails what is left; creation connects the lane (an all-gather
 * of its addresses over the collectives' transport). */
#include <stdatomic.h>
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
      sc_p2p_op_fail(p, op, op->fail, peer->dead ? sc_p2p_dead_msg(peer) : "failed");
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
    sc_p2p_ctl_put(c);
  }
}

/* Whether op's deadline has passed; an unstamped one gets its deadline now. */
static int expired(sc_p2p_op_t *op, int64_t now, int timeout_ms) {
  if (op->deadline_ms == SC_P2P_UNSTAMPED) {
    op->deadline_ms = now + timeout_ms;
    return 0;
  }
  return now >= op->deadline_ms;
}

/* Operations past SC_TIMEOUT_MS fail. One that waits in a list leaves it
 * alone; one whose messages are in the transport cannot be taken back from
 * it, so the whole lane is failed (cancel_all) and every operation with it. */
static void check_deadlines(sc_p2p_t *p, int64_t now) {
  const int n = p->comm->nranks, timeout_ms = p->comm->cfg.timeout_ms;
  char why[160];
  sc_p2p_timeout_why(p, why, sizeof(why));
  for (int i = 0; i < n; i++) {
    sc_p2p_peer_t *pp = &p->peers[i];
    for (sc_p2p_entry_t *e = pp->posted.head, *next; e; e = next) {
      next = e->next;
      sc_p2p_op_t *op = e->owner;
      if (!expired(op, now, timeout_ms)) continue;
      sc_p2p_list_remove(&pp->posted, e);
      sc_p2p_op_fail(p, op, SC_ERR_TIMEOUT, why);
    }
    for (sc_p2p_entry_t *e = pp->unexp.head, *next; e; e = next) {
      next = e->next;
      sc_p2p_unexp_t *u = e->owner;
      if (!u->self_send || !expired(u->self_send, now, timeout_ms)) continue;
      sc_p2p_list_remove(&pp->unexp, e);
      sc_p2p_op_fail(p, u->self_send, SC_ERR_TIMEOUT, why);
      sc_p2p_unexp_free(u);
    }
    for (sc_p2p_op_t **list = &pp->wait_cts; list;
         list = list == &pp->wait_cts ? &pp->wait_data : NULL) {
      for (sc_p2p_op_t *op = *list, *next; op; op = next) {
        next = op->wnext;
        if (!expired(op, now, timeout_ms)) continue;
        /* An offered buffer goes back once the receiver cannot read it: it
         * drops the offer, or (no answer either) the pair is closed. */
        if (op->offered && !op->revoking && !pp->dead) {
          sc_p2p_revoke(p, op);
          continue;
        }
        sc_p2p_wait_remove(list, op);
        sc_p2p_op_fail_later(p, op, SC_ERR_TIMEOUT, why);
      }
    }
  }
  int stuck = 0;
  for (sc_p2p_op_t *op = p->active; op; op = op->anext)
    stuck |= sc_p2p_op_tr_pending(op) && expired(op, now, timeout_ms);
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

/* The submitted operations, or NULL; *closed: the lane is closing. A
 * driving caller leaves the queue of a closing lane to the lane's fail_all. */
static sc_p2p_op_t *take_queue(sc_p2p_t *p, int lane, int *closed) {
  pthread_mutex_lock(&p->lock);
  *closed = p->closed;
  sc_p2p_op_t *q = NULL;
  if (lane || !p->closed) {
    q = p->qhead;
    p->qhead = p->qtail = NULL;
  }
  pthread_mutex_unlock(&p->lock);
  return q;
}

/* A destroy (not an abort) says goodbye to every peer still there that the
 * lane exchanged messages with, so that their lanes take the close that
 * follows for what it is rather than a failure; bounded by a second. A pair
 * never used has no connection to close (SC_CONNECT=lazy). Called by
 * whoever owns the lane. */
static void say_bye(sc_p2p_t *p) {
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

/* One round of the lane's engine, by whoever holds p->drive: start q,
 * move bytes (waiting in the transport at most block_ms), act on arrived
 * headers, settle what finished, and every SC_P2P_POLL_MS the deadlines and
 * the communicator's failure. */
static void lane_round(sc_p2p_t *p, sc_p2p_op_t *q, int block_ms) {
  for (sc_p2p_op_t *op = q, *next; op; op = next) {
    next = op->qnext;
    sc_p2p_start_op(p, op);
  }
  if (p->tp) {
    int progressed = 0;
    sc_result_t r = p->ops->progress(p->tp, q || p->busy ? 0 : block_ms, &progressed);
    /* A header handled now posts the next header's receive, and a transport
     * may fill that at once from what it has read already (TCP): then the
     * next round must not wait in the transport for more. */
    p->busy = 0;
    if (r != SC_SUCCESS) sc_error_get_detail(p->tp_msg, sizeof(p->tp_msg));
    for (int i = 0; i < p->comm->nranks; i++) {
      sc_p2p_peer_t *pp = &p->peers[i];
      if (!pp->hposted || pp->hreq.state == SC_TP_REQ_PENDING) continue;
      if (pp->hreq.state == SC_TP_REQ_ERROR) {
        pp->hposted = 0;
        sc_p2p_tp_failed(p, i, pp->hreq.status);
      } else {
        pp->used = 1;
        sc_p2p_on_header(p, i);
        p->busy = 1;
      }
    }
    scan_active(p);
    scan_pending(p);
    scan_ctls(p);
  } else if (!q && block_ms > 0) {
    pthread_mutex_lock(&p->lock);
    if (!p->qhead && !p->closed) {
      struct timespec ts;
      sc_clock_deadline_ts(block_ms, &ts);
      pthread_cond_timedwait(&p->cv, &p->lock, &ts);
    }
    pthread_mutex_unlock(&p->lock);
  }
  if (p->busy && --p->clock_skips > 0) return;
  p->clock_skips = SC_P2P_CLOCK_EVERY;
  int64_t now = sc_now_ms();
  if (now >= p->next_check) {
    check_comm_failed(p);
    check_deadlines(p, now);
    p->next_check = now + SC_P2P_POLL_MS;
  }
}

/* Bytes of this lane still to be written: the transport's wait() does not
 * watch for room to write, so the engine must keep moving them itself. */
static int lane_sending(const sc_p2p_t *p) {
  if (p->ctls) return 1;
  for (const sc_p2p_op_t *op = p->active; op; op = op->anext)
    if (op->is_send && sc_p2p_op_tr_pending(op)) return 1;
  return 0;
}

/* Whether the lane thread may give the engine up while it waits: with a
 * transport that can wait without it, and nothing for the engine to do but
 * wait for the peers. */
static int lane_may_idle(sc_p2p_t *p) {
  if (!p->tp || !p->ops->wait || p->busy || lane_sending(p)) return 0;
  pthread_mutex_lock(&p->lock);
  int idle = !p->qhead && !p->closed;
  pthread_mutex_unlock(&p->lock);
  return idle;
}

/* Whether an operation of the lane waits for a peer: then a peer's message
 * needs an answer or completes it, and must be taken when it comes. */
static int lane_pending(const sc_p2p_t *p) {
  if (p->active || p->pending || p->ctls) return 1;
  for (int i = 0; i < p->comm->nranks; i++) {
    const sc_p2p_peer_t *pp = &p->peers[i];
    if (pp->posted.head || pp->wait_cts || pp->wait_data) return 1;
  }
  return 0;
}

/* The lane thread's wait with the engine free. With operations waiting for
 * peers and no caller driving, in the transport until a peer may have sent
 * something; otherwise parked on cv for SC_P2P_POLL_MS at most, so that the
 * messages a driving caller takes itself do not wake this thread too (a
 * message nothing waits for is taken within that time, or by the receive
 * that wants it). Submissions, the close and a caller leaving operations
 * waiting behind it wake it. */
static void lane_idle(sc_p2p_t *p, int watch) {
  if (watch && atomic_load(&p->drivers) == 0) {
    p->ops->wait(p->tp, SC_P2P_POLL_MS);
    if (atomic_load(&p->drivers) == 0) return; /* else the message is the driver's */
  }
  pthread_mutex_lock(&p->lock);
  if (!p->qhead && !p->closed && !p->kicked) {
    p->parked = 1;
    struct timespec ts;
    sc_clock_deadline_ts(SC_P2P_POLL_MS, &ts);
    pthread_cond_timedwait(&p->cv, &p->lock, &ts);
    p->parked = 0;
  }
  p->kicked = 0;
  pthread_mutex_unlock(&p->lock);
}

void *sc_p2p_main(void *arg) {
  sc_p2p_t *p = arg;
  sc_log_set_rank(p->comm->rank);
  pthread_mutex_lock(&p->drive);
  for (int i = 0; i < p->comm->nranks; i++)
    if (i != p->comm->rank && p->tp) sc_p2p_peer_post_header(p, i);
  p->next_check = sc_now_ms() + SC_P2P_POLL_MS;
  p->ready = 1;
  for (;;) {
    int block = SC_P2P_POLL_MS;
    if (lane_may_idle(p)) {
      const int watch = lane_pending(p);
      pthread_mutex_unlock(&p->drive);
      lane_idle(p, watch);
      pthread_mutex_lock(&p->drive);
      block = 0;
    }
    int closed;
    sc_p2p_op_t *q = take_queue(p, 1, &closed);
    if (closed) {
      fail_all(p, q);
      break;
    }
    lane_round(p, q, block);
  }
  pthread_mutex_unlock(&p->drive);
  return NULL;
}

static int all_done(sc_request_t *const *reqs, int n) {
  for (int i = 0; i < n; i++)
    if (reqs[i] && !sc_request_done(reqs[i])) return 0;
  return 1;
}

/* Leaves the engine after a caller's turn at it. What waits for a peer is
 * the lane thread's again: rouse: wake it now if it parked; otherwise it
 * takes over at the end of its park (SC_P2P_POLL_MS at most), or the
 * caller's own sc_wait/sc_test drives it first. Bytes still to write always
 * rouse it: its transport wait does not watch for room to write. */
static void engine_leave(sc_p2p_t *p, int rouse) {
  const int sending = lane_sending(p), left = lane_pending(p);
  pthread_mutex_unlock(&p->drive);
  pthread_mutex_lock(&p->lock);
  if (left) {
    p->kicked = 1; /* also for a lane thread about to park */
    if (p->parked && (rouse || sending)) pthread_cond_signal(&p->cv);
  }
  if (sending && !p->closed) p->ops->wake(p->tp);
  pthread_mutex_unlock(&p->lock);
}

/* The engine, if a caller may take it now without waiting: 1 with drive
 * held. Only where the lane thread gives it up (a transport with a wait op)
 * and once the thread posted its header receives (it runs first). */
static int engine_try(sc_p2p_t *p) {
  if (!p->tp || !p->ops->wait || pthread_mutex_trylock(&p->drive) != 0) return 0;
  if (p->ready) return 1;
  pthread_mutex_unlock(&p->drive);
  return 0;
}

int sc_p2p_start_inline(sc_p2p_t *p, sc_p2p_op_t *op, sc_result_t *err) {
  *err = SC_SUCCESS;
  if (!engine_try(p)) return 0;
  int closed;
  /* What this or another thread queued before goes first: order per (pair,
   * tag) is the order of the calls. */
  sc_p2p_op_t *q = take_queue(p, 0, &closed);
  if (closed) {
    pthread_mutex_unlock(&p->drive);
    *err = sc_p2p_closing_error(p, op->fn);
    return 1;
  }
  op->qnext = NULL;
  if (q) {
    sc_p2p_op_t *t = q;
    while (t->qnext) t = t->qnext;
    t->qnext = op;
  } else {
    q = op;
  }
  lane_round(p, q, 0);
  /* A large message needs its peer's answer (CTS, or the receiver's DATA)
   * taken at once to overlap with the caller's work: rouse the lane thread. */
  engine_leave(p, op->bytes > SC_P2P_EAGER_BYTES);
  return 1;
}

void sc_p2p_poll(sc_comm_t *comm) {
  sc_p2p_t *p = comm->p2p;
  if (!p || !engine_try(p)) return;
  int closed;
  sc_p2p_op_t *q = take_queue(p, 0, &closed);
  if (!closed) lane_round(p, q, 0);
  engine_leave(p, 0);
}

void sc_p2p_drive(sc_comm_t *comm, sc_request_t *const *reqs, int n) {
  sc_p2p_t *p = comm->p2p;
  if (!p || !p->tp || !p->ops->wait || all_done(reqs, n)) return;
  if (pthread_mutex_trylock(&p->drive) == 0) {
    if (p->ready) {
      atomic_fetch_add(&p->drivers, 1);
      int closed = 0;
      while (!all_done(reqs, n) && !closed) {
        sc_p2p_op_t *q = take_queue(p, 0, &closed);
        if (!closed) lane_round(p, q, SC_P2P_POLL_MS);
      }
      atomic_fetch_sub(&p->drivers, 1);
      /* The lane thread takes over what waits for a peer, or bytes still to
       * write. A closing lane was woken by its closer. */
      engine_leave(p, 1);
      return;
    }
    /* ready: the lane thread posted its header receives (it runs first). */
    pthread_mutex_unlock(&p->drive);
    pthread_mutex_lock(&p->lock);
    p->kicked = 1;
    if (p->parked) pthread_cond_signal(&p->cv);
    if (!p->closed) p->ops->wake(p->tp);
    pthread_mutex_unlock(&p->lock);
  } else {
    /* Whoever holds the engine starts what is queued at its next round; a
     * lane thread waiting in the transport must be roused for it. */
    pthread_mutex_lock(&p->lock);
    if (p->qhead && p->parked) pthread_cond_signal(&p->cv);
    if (p->qhead && !p->closed) p->ops->wake(p->tp);
    pthread_mutex_unlock(&p->lock);
  }
}

/* ---- life cycle ---- */

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
