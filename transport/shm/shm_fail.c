/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport: a pair that fails. Its requests fail with the
 * peer's text; the pair's channels are closed on both sides, so that the
 * peer's waits on this rank and its reads of this rank's memory fail at once
 * instead of at their timeout. Which pairs close when a communicator is
 * cancelled (cancel_all) and when a lent buffer's send fails (withdraw). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/shm/shm_internal.h"

static int fail_queue(sc_tp_req_t **head, sc_tp_req_t **tail, int *count, sc_result_t why) {
  int n = 0;
  for (sc_tp_req_t *r = *head; r;) {
    sc_tp_req_t *next = r->u.shm.next;
    sc_shm_req_finish(r, SC_TP_REQ_ERROR, why);
    r = next;
    n++;
  }
  *head = *tail = NULL;
  *count = 0;
  return n;
}

static void fail_all_queues(sc_shm_transport_t *tp, sc_shm_peer_t *p, sc_result_t why) {
  int n = fail_queue(&p->sq_head, &p->sq_tail, &p->nsend, why);
  n += fail_queue(&p->cq_head, &p->cq_tail, &p->ncma, why);
  n += fail_queue(&p->dq_head, &p->dq_tail, &p->ndev, why);
  n += fail_queue(&p->rq_head, &p->rq_tail, &p->nrecv, why);
  tp->npending -= n;
}

/* Marks the peer failed with the text and fails its requests; returns code
 * (SC_ERR_REMOTE, or SC_ERR_MISMATCH for the receive that met another
 * operation's message) with the text. */
sc_result_t sc_shm_peer_fail_code(sc_shm_transport_t *tp, sc_shm_peer_t *p, sc_result_t code,
                                  const char *fmt, ...) {
  char what[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  char pending[120] = "";
  int nr = p->nrecv + p->ncopy, ns = p->nsend + p->ncma + p->ndev;
  if (sc_shm_peer_queued(p))
    snprintf(pending, sizeof(pending), " while %d receive%s and %d send%s were pending", nr,
             nr == 1 ? "" : "s", ns, ns == 1 ? "" : "s");
  sc_errtext_set(&p->err, SC_SHM_ERR_LEN, "%s %s%s (seen by rank %d over shared memory)", p->name,
                 what, pending, tp->base.rank);
  p->dead = 1;
  /* A peer never connected to (gone before it was, as at the end of a job
   * the point-to-point lane's goodbyes to ranks that left) is the caller's
   * error, not news for the log. Nor is one that closed its end (destroyed
   * its communicator) while only receives of ours waited on it: at the end of
   * a job the point-to-point lane's standing receive, whose peer took this
   * rank's goodbye and left; a caller's receive fails with the text, and its
   * caller reports it. */
  int quiet = !p->ready ||
              (p->gone && ns == 0 && p->gone_how && strcmp(p->gone_how, SC_SHM_CLOSED_TEXT) == 0);
  /* Tell the peer, in case it is alive and waits on us. */
  if (p->tx.ctl) __atomic_store_n(&p->tx.ctl->closed, 1u, __ATOMIC_RELEASE);
  if (p->rx.ctl) __atomic_store_n(&p->rx.ctl->closed, 1u, __ATOMIC_RELEASE);
  sc_shm_wake_peer(tp, p);
  fail_all_queues(tp, p, SC_ERR_REMOTE);
  if (quiet)
    SC_INFO(SC_SUBSYS_SHM, "shm: %s", sc_shm_peer_err(p));
  else
    SC_WARN(SC_SUBSYS_SHM, "shm: %s", sc_shm_peer_err(p));
  return SC_ERR(code, "%s", sc_shm_peer_err(p));
}

/* Marks p failed (its text already set) and closes both channels, so that
 * the peer's waits on this rank and its reads of this rank's memory fail
 * now. */
static void close_pair(sc_shm_transport_t *tp, sc_shm_peer_t *p) {
  p->dead = 1;
  if (p->ready) {
    __atomic_store_n(&p->tx.ctl->closed, 1u, __ATOMIC_RELEASE);
    __atomic_store_n(&p->rx.ctl->closed, 1u, __ATOMIC_RELEASE);
    sc_shm_wake_peer(tp, p);
  }
}

void sc_shm_cancel_all(sc_transport_t *base, sc_result_t why) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  if (!tp || !tp->peers) return;
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_shm_peer_t *p = &tp->peers[i];
    /* Half a message in the ring, or a payload the peer may still read from
     * our memory, leaves the stream out of step: close it on both sides. */
    int torn = (p->sq_head && p->sq_head->u.shm.rec_done) ||
               (p->rq_head && p->rq_head->u.shm.rec_done) || p->cq_head || p->dq_head || p->ncopy;
    fail_all_queues(tp, p, why);
    /* A failed communicator is never used again: closing makes the peers
     * blocked on this rank fail now, not at their timeout (as tcp does). */
    int failed = why != SC_ERR_ABORTED && why != SC_ERR_INVALID_ARG;
    if ((torn || failed) && !p->dead && p->local) {
      sc_errtext_set(&p->err, SC_SHM_ERR_LEN,
                     "%s: shared-memory channel closed by rank %d after %s (%s)", p->name,
                     tp->base.rank,
                     torn ? "requests were cancelled mid-message" : "its communicator failed",
                     sc_strerror(why));
      close_pair(tp, p);
    }
  }
  if (tp->lazy && why != SC_ERR_ABORTED && why != SC_ERR_INVALID_ARG) sc_shm_close_unconnected(tp);
  /* Last: no device copy writes into a buffer the caller gets back. */
  sc_shm_dev_cancel(tp, why, tp->timeout_ms);
}

void sc_shm_withdraw(sc_transport_t *base, int peer) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  sc_shm_peer_t *p = sc_shm_other(tp, peer);
  if (!p || p->dead || !p->local) return;
  fail_all_queues(tp, p, SC_ERR_REMOTE);
  sc_errtext_set(&p->err, SC_SHM_ERR_LEN,
                 "%s: shared-memory channel closed by rank %d after a send whose buffer it "
                 "offered for reading failed",
                 p->name, tp->base.rank);
  close_pair(tp, p);
}
