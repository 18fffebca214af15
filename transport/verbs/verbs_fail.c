/* SPDX-License-Identifier: BSD-3-Clause */
/* How failures reach the verbs transport's requests: a failed peer (its
 * requests fail, its queue pairs stop, progress reports it once), the
 * device's async events, a peer's closed side channel, and cancel_all. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/verbs/verbs_internal.h"

/* Fails every request of peer p with why and, unless keep, the peer itself: its
 * queue pairs go to the error state (the HCA stops touching the buffers) and
 * later posts fail at once with err. */
static void peer_fail(sc_vb_transport_t *tp, int peer, sc_result_t why, int keep) {
  sc_vb_peer_t *p = &tp->peers[peer];
  sc_tp_req_t *r;
  while ((r = sc_vb_list_pop(&p->swait))) sc_vb_req_finish(tp, r, why);
  while ((r = sc_vb_list_pop(&p->rwait))) sc_vb_req_finish(tp, r, why);
  for (int s = 0; s < SC_VB_FIFO_DEPTH; s++) {
    if (p->sreq[s]) sc_vb_req_finish(tp, p->sreq[s], why);
    if (p->rreq[s]) sc_vb_req_finish(tp, p->rreq[s], why);
    p->sreq[s] = p->rreq[s] = NULL;
  }
  if (keep || p->dead) return;
  p->dead = 1;
  for (int q = 0; q < p->nqps; q++) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    if (p->qp[q]) tp->api->modify_qp(p->qp[q], &a, IBV_QP_STATE);
  }
}

void sc_vb_peer_error_code(sc_vb_transport_t *tp, int peer, sc_result_t code, const char *text,
                           int soft) {
  sc_vb_peer_t *p = &tp->peers[peer];
  if (p->dead) return;
  snprintf(p->err, sizeof(p->err), "%s", text);
  SC_WARN(SC_SUBSYS_NET, "%s", text);
  peer_fail(tp, peer, SC_ERR_REMOTE, soft);
  p->dead = 1;
  if (!tp->report_pending) {
    tp->report_pending = 1;
    tp->report_code = code;
    snprintf(tp->report, sizeof(tp->report), "%s", text);
  }
}

void sc_vb_peer_error(sc_vb_transport_t *tp, int peer, const char *text) {
  sc_vb_peer_error_code(tp, peer, SC_ERR_REMOTE, text, 0);
}

void sc_vb_on_async(sc_vb_transport_t *tp) {
  struct ibv_async_event ev;
  while (tp->api->get_async_event(tp->dev.ctx, &ev) == 0) {
    enum ibv_event_type type = ev.event_type;
    struct ibv_qp *qp = NULL;
    int fatal = 0;
    switch (type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      qp = ev.element.qp;
      fatal = 1;
      break;
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_PORT_ERR:
      fatal = 1;
      break;
    default:
      break;
    }
    tp->api->ack_async_event(&ev);
    if (!fatal) {
      SC_INFO(SC_SUBSYS_NET, "verbs: async event %s", tp->api->event_type_str(type));
      continue;
    }
    for (int i = 0; i < tp->base.nranks; i++) {
      sc_vb_peer_t *p = &tp->peers[i];
      int hit = !qp;
      for (int q = 0; q < p->nqps && !hit; q++) hit = p->qp[q] == qp;
      if (!hit || i == tp->base.rank) continue;
      char t[300];
      snprintf(t, sizeof(t), "verbs: rank %d: peer %d: async event %s on %s port %d", tp->base.rank,
               i, tp->api->event_type_str(type), tp->dev.name, tp->dev.port);
      sc_vb_peer_error(tp, i, t);
    }
  }
}

/* A peer's side channel is readable: its end closed (the process ended or
 * destroyed its communicator). What can no longer complete fails now: receives
 * and sends still waiting for a clear-to-send. Sends already written complete
 * or fail on their own completions. */
void sc_vb_on_peer_sock(sc_vb_transport_t *tp, int peer) {
  sc_vb_peer_t *p = &tp->peers[peer];
  char b[64];
  ssize_t n = read(p->sock, b, sizeof(b));
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) return;
  close(p->sock);
  p->sock = -1;
  p->closed = 1;
  if (p->dead || !(p->rwait.head || p->swait.head || p->rfifo.inflight)) return;
  char t[200];
  snprintf(t, sizeof(t),
           "verbs: rank %d: peer %d closed its connection with messages pending (it exited or "
           "destroyed its communicator)",
           tp->base.rank, peer);
  sc_vb_peer_error(tp, peer, t);
}

void sc_vb_cancel_all(sc_transport_t *base, sc_result_t why) {
  if (!base) return;
  sc_vb_transport_t *tp = sc_vb_of(base);
  if (!tp->peers) return;
  int failed = why != SC_ERR_ABORTED && why != SC_ERR_INVALID_ARG;
  for (int i = 0; i < base->nranks; i++) {
    sc_vb_peer_t *p = &tp->peers[i];
    /* A slot in flight leaves the two sides' message numbers out of step. */
    int torn = p->sfifo.inflight || p->rfifo.inflight;
    if ((torn || failed) && !p->dead)
      snprintf(p->err, sizeof(p->err), "verbs: peer %d: closed by rank %d after %s (%s)", i,
               base->rank, torn ? "requests were cancelled mid-message" : "its communicator failed",
               sc_strerror(why));
    peer_fail(tp, i, why, !(torn || failed));
  }
}
