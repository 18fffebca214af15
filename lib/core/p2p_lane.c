/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point lane's thread and engine: it takes the submitted
 * operations, drives the lane's transport, settles requests, enforces
 * SC_TIMEOUT_MS and the communicator's failure, and at the close fails what
 * is left; a caller in a blocking call or a wait drives the same engine
 * itself (sc_p2p_drive). Creation and the close are in p2p_life.c. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base/clock.h"
#include "lib/base/log.h"
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

/* The lane closes: everything still pending fails with SC_ERR_ABORTED. */
static void fail_all(sc_p2p_t *p, sc_p2p_op_t *queued) {
  const char *why = "the communicator was aborted or destroyed";
  sc_p2p_say_bye(p);
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
static void lane_round(sc_p2p_t *p, sc_p2p_op_t *q, int block_ms, int reads) {
  for (sc_p2p_op_t *op = q, *next; op; op = next) {
    next = op->qnext;
    sc_p2p_start_op(p, op);
  }
  if (p->tp) {
    int progressed = 0;
    sc_result_t r = p->ops->progress(p->tp, q || p->busy || p->reads ? 0 : block_ms, &progressed);
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
    /* Before the scans: a read done now answers FIN, which scan_ctls then
     * settles, so that a caller done with its operations leaves no frame
     * behind to rouse the lane thread for. */
    if (reads && sc_p2p_reads_step(p)) p->busy = 1;
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

/* Bytes of this lane still to be written, or to be read from offered
 * buffers: the transport's wait() watches for neither, so the engine must
 * keep moving them itself. */
static int lane_sending(const sc_p2p_t *p) {
  if (p->ctls || p->reads) return 1;
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
  if (p->active || p->pending || p->ctls || p->reads) return 1;
  for (int i = 0; i < p->comm->nranks; i++) {
    const sc_p2p_peer_t *pp = &p->peers[i];
    if (pp->posted.head || pp->wait_cts || pp->wait_data) return 1;
  }
  return 0;
}

/* Whether a large message of the lane is under way or awaited: a read of an
 * offered buffer, a rendezvous waiting for its answer or its data, or a
 * receive posted for one. Its peer's next frame must be taken as it comes
 * for the message to move while its caller computes. */
static int lane_rendezvous(const sc_p2p_t *p) {
  if (p->reads) return 1;
  for (int i = 0; i < p->comm->nranks; i++) {
    const sc_p2p_peer_t *pp = &p->peers[i];
    if (pp->wait_cts || pp->wait_data) return 1;
    for (const sc_p2p_entry_t *e = pp->posted.head; e; e = e->next)
      if (((const sc_p2p_op_t *)e->owner)->bytes > SC_P2P_EAGER_BYTES) return 1;
  }
  return 0;
}

/* A caller whose non-blocking call (sc_isend, sc_irecv, sc_test) leaves the
 * engine with operations pending is usually back within microseconds (irecv,
 * isend, then wait): for this long the lane thread leaves the engine to it.
 * Where ranks outnumber cores, a lane thread that took over at once competed
 * for a core with its own caller and the peers: a 256 KiB isend/irecv/wait
 * exchange took three times the blocking group's time (perf/README.md, "Send
 * and receive on one host"). What a caller leaves for longer (its compute)
 * the lane thread moves after it. */
#define SC_P2P_GRACE_US 100

/* Whether the lane thread is in a caller's grace now; *end: until when. No
 * clock read on the lane thread's busy rounds while no grace runs. */
static int in_grace(sc_p2p_t *p, int64_t *end) {
  const unsigned seq = atomic_load(&p->left_seq);
  const int fresh = seq != p->seen_seq;
  *end = 0;
  if (!fresh && !p->grace_end_us && !atomic_load(&p->grace_cut)) return 0;
  p->seen_seq = seq;
  const int64_t now = sc_now_us();
  if (fresh) p->grace_end_us = now + SC_P2P_GRACE_US;
  if (atomic_exchange(&p->grace_cut, 0) || now >= p->grace_end_us) p->grace_end_us = 0;
  *end = p->grace_end_us;
  return p->grace_end_us != 0;
}

/* Parks on cv until until_us (CLOCK_MONOTONIC) at most; a submission, the
 * close and, unless grace, a caller's kick end it early or prevent it.
 * Returns 0 when a submission or the close prevented it. */
static int lane_park(sc_p2p_t *p, int64_t until_us, int grace) {
  pthread_mutex_lock(&p->lock);
  const int called = p->qhead || p->closed;
  if (!called && (grace || !p->kicked)) {
    p->parked = grace ? 1 : 2;
    struct timespec ts;
    ts.tv_sec = (time_t)(until_us / 1000000);
    ts.tv_nsec = (long)(until_us % 1000000) * 1000;
    pthread_cond_timedwait(&p->cv, &p->lock, &ts);
    p->parked = 0;
  }
  if (!grace) p->kicked = 0;
  pthread_mutex_unlock(&p->lock);
  return !called;
}

/* Parks while no caller drives and a caller's grace runs; returns whether
 * one ran (a submission or the close ends it early). */
static int sit_out_grace(sc_p2p_t *p) {
  int64_t end;
  int sat = 0;
  while (atomic_load(&p->drivers) == 0 && in_grace(p, &end)) {
    sat = 1;
    if (!lane_park(p, end, 1)) break; /* a submission or the close: the thread goes on */
  }
  return sat;
}

/* The lane thread's wait with the engine free. In a caller's grace, parked
 * until it ends. With operations waiting for peers and no caller driving, in
 * the transport until a peer may have sent something; otherwise parked on
 * cv for SC_P2P_POLL_MS at most, so that the messages a driving caller takes
 * itself do not wake this thread too (a message nothing waits for is taken
 * within that time, or by the receive that wants it). Submissions, the close
 * and a caller leaving operations waiting behind it wake it. */
static void lane_idle(sc_p2p_t *p, int watch) {
  if (sit_out_grace(p) && atomic_load(&p->drivers) == 0) return;
  if (watch && atomic_load(&p->drivers) == 0) {
    p->ops->wait(p->tp, SC_P2P_POLL_MS);
    sit_out_grace(p); /* a caller that came back meanwhile takes its message itself */
    if (atomic_load(&p->drivers) == 0) return;
  }
  lane_park(p, sc_now_us() + SC_P2P_POLL_MS * 1000, 0);
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
    int64_t end;
    if (lane_may_idle(p) || in_grace(p, &end)) {
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
    lane_round(p, q, block, 1);
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
 * rouse it: its transport wait does not watch for room to write. rouse < 0:
 * where a large message is under way or awaited (lane_rendezvous). grace: a
 * non-blocking call's turn, after which the caller is likely back at once;
 * not after a wait, where the lane thread taking the peers' next messages
 * at once kept a 4-rank 32 KiB exchange 15-30% faster. */
static void engine_leave(sc_p2p_t *p, int rouse, int grace) {
  const int sending = lane_sending(p), left = lane_pending(p);
  if (rouse < 0) rouse = left && lane_rendezvous(p);
  if (left && grace) atomic_fetch_add(&p->left_seq, 1); /* the lane thread's grace starts */
  pthread_mutex_unlock(&p->drive);
  pthread_mutex_lock(&p->lock);
  if (left) {
    p->kicked = 1; /* also for a lane thread about to park */
    /* One parked for longer than a grace parks again for the grace only. */
    if (p->parked == 2 && (rouse || sending)) pthread_cond_signal(&p->cv);
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
  /* No read of an offered buffer here: the caller's next call (its send's
   * RTS, which the peer waits for) goes first, and the lane thread reads. */
  lane_round(p, q, 0, 0);
  /* A large message needs its peer's answer (CTS, or the receiver's DATA)
   * taken at once to overlap with the caller's work: rouse the lane thread. */
  engine_leave(p, op->bytes > SC_P2P_EAGER_BYTES, 1);
  return 1;
}

void sc_p2p_poll(sc_comm_t *comm) {
  sc_p2p_t *p = comm->p2p;
  if (!p || !engine_try(p)) return;
  int closed;
  sc_p2p_op_t *q = take_queue(p, 0, &closed);
  if (!closed) lane_round(p, q, 0, 1);
  engine_leave(p, 0, 1);
}

static void drive_until_done(sc_p2p_t *p, sc_request_t *const *reqs, int n) {
  int closed = 0;
  while (!all_done(reqs, n) && !closed) {
    sc_p2p_op_t *q = take_queue(p, 0, &closed);
    if (!closed) lane_round(p, q, SC_P2P_POLL_MS, 1);
  }
}

void sc_p2p_drive(sc_comm_t *comm, sc_request_t *const *reqs, int n) {
  sc_p2p_t *p = comm->p2p;
  if (!p || !p->tp || !p->ops->wait || all_done(reqs, n)) return;
  if (pthread_mutex_trylock(&p->drive) == 0) {
    if (p->ready) {
      atomic_fetch_add(&p->drivers, 1);
      drive_until_done(p, reqs, n);
      atomic_fetch_sub(&p->drivers, 1);
      /* The lane thread takes over what waits for a peer, or bytes still to
       * write; at once where a large message is under way. A closing lane
       * was woken by its closer. */
      engine_leave(p, -1, 0);
      return;
    }
    /* ready: the lane thread posted its header receives (it runs first). */
    pthread_mutex_unlock(&p->drive);
    pthread_mutex_lock(&p->lock);
    p->kicked = 1;
    if (p->parked) pthread_cond_signal(&p->cv);
    if (!p->closed) p->ops->wake(p->tp);
    pthread_mutex_unlock(&p->lock);
    return;
  }
  /* The lane thread has the engine. It moves the operations with no grace
   * (this caller sleeps until they are done), and starts what is queued at
   * its next round: one waiting in the transport is roused for that. */
  atomic_store(&p->grace_cut, 1);
  pthread_mutex_lock(&p->lock);
  if (p->parked == 1 || (p->qhead && p->parked)) pthread_cond_signal(&p->cv);
  if (p->qhead && !p->closed) p->ops->wake(p->tp);
  pthread_mutex_unlock(&p->lock);
}
