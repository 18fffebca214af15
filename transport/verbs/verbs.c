/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's data path (protocol in verbs_proto.h): posting
 * receives as clear-to-send writes into the sender's FIFO, posting sends
 * once their clear-to-send arrived, the completion queue, async events and
 * progress, which polls the CQ for at most SC_SPIN_US and then sleeps on the
 * completion channel, the async fd and the wake-up eventfd. Clear-to-sends
 * come as writes with immediate so that a sender waiting for one sleeps too.
 * What a failure does to requests is verbs_fail.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/verbs/verbs_internal.h"

static sc_result_t post_check(sc_vb_transport_t *tp, int peer, const void *buf, size_t len,
                              sc_tp_req_t *req, const char *op) {
  if (!tp || !req) return SC_ERR(SC_ERR_INVALID_ARG, "verbs %s: NULL transport or request", op);
  if (!tp->connected)
    return SC_ERR(SC_ERR_INVALID_ARG, "verbs %s: connect_all has not succeeded", op);
  if (peer < 0 || peer >= tp->base.nranks || peer == tp->base.rank)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "verbs %s: peer %d is not another rank of %d (this is rank %d)", op, peer,
                  tp->base.nranks, tp->base.rank);
  if (len && !buf)
    return SC_ERR(SC_ERR_INVALID_ARG, "verbs %s: NULL buffer for %zu bytes", op, len);
  if (req->state == SC_TP_REQ_PENDING)
    return SC_ERR(SC_ERR_INVALID_ARG, "verbs %s: request is still pending", op);
  int k = sc_vb_nstripes(len, tp->peers[peer].nqps);
  size_t off, n;
  sc_vb_stripe(len, k, 0, &off, &n);
  if (sc_vb_stripe_wrs(n) > SC_VB_SQ_DEPTH - 1)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "verbs %s: %zu bytes to peer %d is more than one message "
                  "may carry",
                  op, len, peer);
  return SC_SUCCESS;
}

static sc_result_t post(sc_vb_transport_t *tp, int peer, void *buf, size_t len, sc_tp_req_t *req,
                        int sending) {
  sc_vb_peer_t *p = &tp->peers[peer];
  if (p->closed && !p->dead) {
    char t[200];
    snprintf(t, sizeof(t),
             "verbs: rank %d: peer %d closed its connection (it exited or destroyed "
             "its communicator)",
             tp->base.rank, peer);
    sc_vb_peer_error(tp, peer, t);
  }
  if (p->dead) {
    req->status = SC_ERR_REMOTE;
    __atomic_store_n(&req->state, (int)SC_TP_REQ_ERROR, __ATOMIC_RELEASE);
    return SC_ERR(SC_ERR_REMOTE, "%s", p->err);
  }
  req->u.verbs.reg = NULL; /* registered when it takes a slot: see need_reg */
  req->status = SC_SUCCESS;
  req->peer = peer;
  req->is_send = sending;
  req->buf = buf;
  req->len = len;
  req->state = SC_TP_REQ_PENDING;
  sc_vb_list_push(sending ? &p->swait : &p->rwait, req);
  return SC_SUCCESS;
}

/* Registers r's buffer as it takes a slot, so that only messages in flight
 * (at most 2 * SC_VB_FIFO_DEPTH per active peer) hold cache entries. 0: go on;
 * 1: the cache is full of buffers in flight, try again once some complete;
 * -1: the registration failed and the peer was failed (its message numbers
 * would fall out of step with the peer's otherwise). */
static int need_reg(sc_vb_transport_t *tp, int peer, sc_tp_req_t *r) {
  if (!r->len || r->u.verbs.reg) return 0;
  sc_vb_rc_entry_t *e;
  sc_result_t res = sc_vb_acquire(tp, peer, r, &e);
  if (res == SC_ERR_NOMEM) return 1;
  if (res != SC_SUCCESS) {
    char d[SC_ERRMSG_MAX], t[SC_ERRMSG_MAX + 64];
    sc_error_get_detail(d, sizeof(d));
    snprintf(t, sizeof(t), "verbs: rank %d, a message with peer %d: %s", tp->base.rank, peer, d);
    sc_vb_peer_error(tp, peer, t);
    return -1;
  }
  r->u.verbs.reg = e;
  return 0;
}

/* One signalled write-with-immediate on qp 0 of len bytes at src (inside
 * the registered clear-to-send buffer) to offset at of the peer's FIFO
 * region: a clear-to-send, or a refusal. 0 or ibv_post_send's error. */
static int post_to_fifo(sc_vb_transport_t *tp, int peer, const void *src, uint32_t len, uint64_t at,
                        const sc_vb_imm_t *imm, const sc_vb_wrid_t *id) {
  sc_vb_peer_t *p = &tp->peers[peer];
  struct ibv_sge sge = {(uint64_t)(uintptr_t)src, len, tp->cts_mr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = sc_vb_wrid_encode(id);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(sc_vb_imm_encode(imm));
  wr.wr.rdma.remote_addr = p->blob.fifo_addr + at;
  wr.wr.rdma.rkey = p->blob.fifo_rkey;
  int rc = ibv_post_send(p->qp[0], &wr, &bad);
  if (rc == 0) p->sq_used[0]++;
  return rc;
}

/* Receives waiting for a credit: each takes the next slot and writes its
 * clear-to-send into the sender's FIFO. */
static sc_result_t pump_recvs(sc_vb_transport_t *tp, int peer, int *moved) {
  sc_vb_peer_t *p = &tp->peers[peer];
  while (p->rwait.head && !p->dead && sc_vb_fifo_can_take(&p->rfifo) &&
         p->sq_used[0] < SC_VB_SQ_DEPTH) {
    sc_tp_req_t *r = p->rwait.head;
    if (need_reg(tp, peer, r) != 0) break;
    uint64_t msg = p->rfifo.next;
    int slot = sc_vb_fifo_take(&p->rfifo, sc_vb_nstripes(r->len, p->nqps));
    sc_vb_list_pop(&p->rwait);
    p->rreq[slot] = r;
    r->u.verbs.msg = msg;
    sc_vb_cts_t *c = &tp->ctsbuf[(size_t)peer * SC_VB_FIFO_DEPTH + (size_t)slot];
    sc_vb_rc_entry_t *e = r->u.verbs.reg;
    c->addr = (uint64_t)(uintptr_t)r->buf;
    c->size = r->len;
    c->rkey = e ? e->rkey : 0;
    memcpy(c->fp, r->fp, SC_TP_FP_LEN);
    c->seq = (uint32_t)(msg + 1);
    sc_vb_imm_t imm = {slot, 1, 0, 1, (uint32_t)(msg & 0x3fff)};
    sc_vb_wrid_t id = {SC_VB_WR_CTS, peer, 0, slot, 1};
    uint64_t at = ((uint64_t)tp->base.rank * SC_VB_FIFO_DEPTH + (uint64_t)slot) * sizeof(*c);
    int rc = post_to_fifo(tp, peer, c, sizeof(*c), at, &imm, &id);
    if (rc != 0) {
      char t[256];
      snprintf(t, sizeof(t), "verbs: rank %d: ibv_post_send of a clear-to-send to peer %d: %s",
               tp->base.rank, peer, strerror(rc));
      sc_vb_peer_error(tp, peer, t);
      return SC_SUCCESS;
    }
    *moved = 1;
  }
  return SC_SUCCESS;
}

/* Posts stripe i of k of send r (message slot) on qp i: writes of at most
 * SC_VB_WR_MAX, the last one with immediate and signalled. */
static int post_stripe(sc_vb_transport_t *tp, int peer, sc_tp_req_t *r, int slot, int k, int i,
                       const volatile sc_vb_cts_t *cts, int error) {
  sc_vb_peer_t *p = &tp->peers[peer];
  size_t off = 0, n = 0;
  if (!error) sc_vb_stripe(r->len, k, i, &off, &n);
  int nwr = sc_vb_stripe_wrs(n);
  sc_vb_rc_entry_t *e = r->u.verbs.reg;
  for (int w = 0; w < nwr; w++) {
    size_t o = off + (size_t)w * SC_VB_WR_MAX;
    size_t len = w == nwr - 1 ? n - (size_t)w * SC_VB_WR_MAX : SC_VB_WR_MAX;
    struct ibv_sge sge = {(uint64_t)(uintptr_t)(r->buf + o), (uint32_t)len, e ? e->lkey : 0};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = len ? &sge : NULL;
    wr.num_sge = len ? 1 : 0;
    wr.wr.rdma.remote_addr = cts->addr + o;
    wr.wr.rdma.rkey = cts->rkey;
    if (w == nwr - 1) {
      sc_vb_imm_t imm = {slot, k, error, 0, (uint32_t)(r->u.verbs.msg & 0x3fff)};
      sc_vb_wrid_t id = {SC_VB_WR_DATA, peer, i, slot, nwr};
      wr.wr_id = sc_vb_wrid_encode(&id);
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.imm_data = htonl(sc_vb_imm_encode(&imm));
    } else {
      wr.opcode = IBV_WR_RDMA_WRITE;
    }
    int rc = ibv_post_send(p->qp[i], &wr, &bad);
    if (rc != 0) return rc;
    p->sq_used[i]++;
  }
  return 0;
}

/* Refuses send r (message slot) for its print: one write-with-immediate, on
 * qp 0, that puts the send's print into the receiver's refusal table and
 * tells it why, no byte into the receive's buffer. */
static int post_refusal(sc_vb_transport_t *tp, int peer, sc_tp_req_t *r, int slot) {
  int n = tp->base.nranks;
  uint8_t *src = (uint8_t *)tp->ctsbuf + sc_vb_refusal_offset(n, peer);
  memcpy(src, r->fp, SC_TP_FP_LEN);
  sc_vb_imm_t imm = {slot, 1, SC_VB_REFUSE_PRINT, 0, (uint32_t)(r->u.verbs.msg & 0x3fff)};
  sc_vb_wrid_t id = {SC_VB_WR_DATA, peer, 0, slot, 1};
  return post_to_fifo(tp, peer, src, SC_TP_FP_LEN, sc_vb_refusal_offset(n, tp->base.rank), &imm,
                      &id);
}

/* Sends whose clear-to-send arrived (and whose slot is free on this side too:
 * the sender may hear the next clear-to-send before its own completion). A
 * send whose print or length is not the receive's is refused (verbs_proto.h):
 * it fails, the receive learns why from the refusal, and the pair is out of
 * step. */
static void pump_sends(sc_vb_transport_t *tp, int peer, int *moved) {
  sc_vb_peer_t *p = &tp->peers[peer];
  while (p->swait.head && !p->dead && sc_vb_fifo_can_take(&p->sfifo)) {
    uint64_t msg = p->sfifo.next;
    int slot = sc_vb_slot_of(msg);
    const volatile sc_vb_cts_t *cts = &tp->fifo[(size_t)peer * SC_VB_FIFO_DEPTH + (size_t)slot];
    /* The clear-to-send's completion, not only its bytes, says it is all there. */
    if (p->cts_seen <= msg || !sc_vb_cts_ready(cts, msg)) return;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    sc_tp_req_t *r = p->swait.head;
    uint8_t cts_fp[SC_TP_FP_LEN];
    for (int i = 0; i < SC_TP_FP_LEN; i++) cts_fp[i] = cts->fp[i];
    uint64_t cts_size = cts->size;
    sc_vb_refuse_t error = sc_vb_send_verdict(cts_fp, cts_size, r->fp, r->len);
    if (!error && need_reg(tp, peer, r) != 0) return;
    int k = error ? 1 : sc_vb_nstripes(r->len, p->nqps);
    for (int i = 0; i < k; i++) {
      size_t off = 0, n = 0;
      if (!error) sc_vb_stripe(r->len, k, i, &off, &n);
      if (p->sq_used[i] + sc_vb_stripe_wrs(n) > SC_VB_SQ_DEPTH) return; /* room later */
    }
    sc_vb_list_pop(&p->swait);
    r->u.verbs.msg = msg;
    sc_vb_fifo_take(&p->sfifo, k);
    p->sreq[slot] = error ? NULL : r;
    char t[300];
    for (int i = 0; i < k; i++) {
      int rc = error == SC_VB_REFUSE_PRINT ? post_refusal(tp, peer, r, slot)
                                           : post_stripe(tp, peer, r, slot, k, i, cts, error);
      if (rc != 0) {
        if (error) sc_vb_req_finish(tp, r, SC_ERR_REMOTE);
        snprintf(t, sizeof(t), "verbs: rank %d: ibv_post_send to peer %d: %s", tp->base.rank, peer,
                 strerror(rc));
        sc_vb_peer_error(tp, peer, t);
        return;
      }
    }
    *moved = 1;
    if (error == SC_VB_REFUSE_PRINT) {
      memcpy(r->peer_fp, cts_fp, SC_TP_FP_LEN);
      snprintf(t, sizeof(t),
               "verbs: rank %d's send of %zu bytes to peer %d belongs to another operation than "
               "the receive peer %d posted for it (%llu bytes): their prints differ",
               tp->base.rank, r->len, peer, peer, (unsigned long long)cts_size);
      sc_vb_req_finish(tp, r, SC_ERR_MISMATCH);
      sc_vb_peer_error_code(tp, peer, SC_ERR_MISMATCH, t, 1);
    } else if (error) {
      snprintf(t, sizeof(t),
               "verbs: rank %d sent %zu bytes to peer %d, which posted a receive of %llu bytes",
               tp->base.rank, r->len, peer, (unsigned long long)cts_size);
      sc_vb_req_finish(tp, r, SC_ERR_REMOTE);
      sc_vb_peer_error_code(tp, peer, SC_ERR_REMOTE, t, 1);
    }
  }
}

static sc_result_t vb_isend(sc_transport_t *base, int peer, const void *buf, size_t len,
                            sc_tp_req_t *req) {
  sc_vb_transport_t *tp = sc_vb_of(base);
  SC_CHECK(post_check(tp, peer, buf, len, req, "isend"));
  SC_CHECK(post(tp, peer, (void *)buf, len, req, 1));
  int moved = 0;
  pump_sends(tp, peer, &moved);
  return SC_SUCCESS;
}

static sc_result_t vb_irecv(sc_transport_t *base, int peer, void *buf, size_t len,
                            sc_tp_req_t *req) {
  sc_vb_transport_t *tp = sc_vb_of(base);
  SC_CHECK(post_check(tp, peer, buf, len, req, "irecv"));
  SC_CHECK(post(tp, peer, buf, len, req, 0));
  int moved = 0;
  return pump_recvs(tp, peer, &moved);
}

static void on_completion(sc_vb_transport_t *tp, const struct ibv_wc *wc, int *moved) {
  sc_vb_wrid_t id;
  if (sc_vb_wrid_decode(wc->wr_id, &id) != SC_SUCCESS || id.peer >= tp->base.nranks) return;
  sc_vb_peer_t *p = &tp->peers[id.peer];
  if (id.kind != SC_VB_WR_RECV) p->sq_used[id.qp] -= id.nwr;
  if (wc->status != IBV_WC_SUCCESS) {
    if (p->dead) return; /* flushed after the peer failed */
    char t[300];
    snprintf(t, sizeof(t), "verbs: rank %d: peer %d: %s (%s on qp %d, vendor error 0x%x)",
             tp->base.rank, id.peer, tp->api->wc_status_str(wc->status),
             id.kind == SC_VB_WR_RECV  ? "receive"
             : id.kind == SC_VB_WR_CTS ? "clear-to-send"
                                       : "data",
             id.qp, wc->vendor_err);
    sc_vb_peer_error(tp, id.peer, t);
    return;
  }
  *moved = 1;
  if (p->dead) return;
  if (id.kind == SC_VB_WR_DATA) {
    if (sc_vb_fifo_complete(&p->sfifo, id.slot) == 1 && p->sreq[id.slot]) {
      sc_vb_req_finish(tp, p->sreq[id.slot], SC_SUCCESS);
      p->sreq[id.slot] = NULL;
    }
    return;
  }
  if (id.kind != SC_VB_WR_RECV) return; /* a clear-to-send went out */
  if (sc_vb_post_recv(tp, id.peer, id.qp) != SC_SUCCESS) {
    char d[SC_ERRMSG_MAX];
    sc_error_get_detail(d, sizeof(d));
    sc_vb_peer_error(tp, id.peer, d);
    return;
  }
  sc_vb_imm_t imm;
  sc_vb_imm_decode(ntohl(wc->imm_data), &imm);
  char t[300];
  if (imm.cts) { /* pump_sends reads the FIFO entry */
    if (imm.seq14 != (p->cts_seen & 0x3fff)) {
      snprintf(t, sizeof(t), "verbs: rank %d: peer %d sent clear-to-send %u out of order",
               tp->base.rank, id.peer, imm.seq14);
      sc_vb_peer_error(tp, id.peer, t);
      return;
    }
    p->cts_seen++;
    return;
  }
  sc_tp_req_t *r = imm.slot < SC_VB_FIFO_DEPTH ? p->rreq[imm.slot] : NULL;
  if (imm.error == SC_VB_REFUSE_PRINT && r && imm.seq14 == (r->u.verbs.msg & 0x3fff)) {
    /* The refusal's write put the sender's print in place before its immediate. */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    memcpy(r->peer_fp, (const uint8_t *)tp->fifo + sc_vb_refusal_offset(tp->base.nranks, id.peer),
           SC_TP_FP_LEN);
    p->rreq[imm.slot] = NULL;
    sc_vb_req_finish(tp, r, SC_ERR_MISMATCH);
    snprintf(t, sizeof(t),
             "verbs: rank %d: peer %d refused the receive of %zu bytes: its send belongs to "
             "another operation (their prints differ)",
             tp->base.rank, id.peer, r->len);
    sc_vb_peer_error_code(tp, id.peer, SC_ERR_MISMATCH, t, 0);
    return;
  }
  if (imm.error) {
    snprintf(t, sizeof(t),
             "verbs: rank %d: peer %d sent a message of another length than the %zu "
             "bytes posted",
             tp->base.rank, id.peer, r ? r->len : (size_t)0);
    sc_vb_peer_error(tp, id.peer, t);
    return;
  }
  if (!r || imm.seq14 != (r->u.verbs.msg & 0x3fff) ||
      imm.nstripes != sc_vb_nstripes(r->len, p->nqps)) {
    snprintf(t, sizeof(t), "verbs: rank %d: peer %d wrote slot %d out of protocol (imm 0x%x)",
             tp->base.rank, id.peer, imm.slot, ntohl(wc->imm_data));
    sc_vb_peer_error(tp, id.peer, t);
    return;
  }
  if (sc_vb_fifo_complete(&p->rfifo, imm.slot) == 1) {
    sc_vb_req_finish(tp, r, SC_SUCCESS);
    p->rreq[imm.slot] = NULL;
  }
}

/* One pass: completions, then the waiting requests of every peer. */
static void pass(sc_vb_transport_t *tp, int *moved) {
  struct ibv_wc wc[32];
  int n;
  while ((n = ibv_poll_cq(tp->cq, 32, wc)) > 0)
    for (int i = 0; i < n; i++) on_completion(tp, &wc[i], moved);
  if (n < 0) {
    for (int i = 0; i < tp->base.nranks; i++)
      if (i != tp->base.rank) sc_vb_peer_error(tp, i, "verbs: ibv_poll_cq failed");
  }
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_vb_peer_t *p = &tp->peers[i];
    if (p->swait.head) pump_sends(tp, i, moved);
    if (p->rwait.head) pump_recvs(tp, i, moved);
  }
}

static sc_result_t vb_progress(sc_transport_t *base, int timeout_ms, int *progressed) {
  if (progressed) *progressed = 0;
  sc_vb_transport_t *tp = sc_vb_of(base);
  if (!tp) return SC_ERR(SC_ERR_INVALID_ARG, "verbs progress: NULL transport");
  if (!tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "verbs progress: not connected");
  int moved = 0;
  sc_vb_on_async(tp);
  pass(tp, &moved);
  if (!moved && !tp->report_pending && timeout_ms > 0) {
    int64_t t0 = sc_now_us();
    int64_t spin = (int64_t)tp->spin_us < (int64_t)timeout_ms * 1000 ? tp->spin_us
                                                                     : (int64_t)timeout_ms * 1000;
    /* With more ranks than cores the peer may be waiting for this very
     * core: hand it over between looks, but not while another program holds
     * it (lib/base/yield.h): sleep then. */
    for (int64_t now = t0; !moved && now - t0 < spin;) {
      if (!sc_yield_allowed(&tp->yield, now)) break;
      now = sc_yield_core(&tp->yield, now);
      pass(tp, &moved);
    }
    int left = timeout_ms - (int)((sc_now_us() - t0) / 1000);
    if (!moved && left > 0) {
      /* Arm, then look once more: a completion between the last poll and the
       * arming raises no event. */
      if (!tp->cq_armed && ibv_req_notify_cq(tp->cq, 0) == 0) tp->cq_armed = 1;
      pass(tp, &moved);
      if (!moved) {
        struct pollfd *pf = tp->pfds;
        pf[0] = (struct pollfd){.fd = tp->wake_fd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = tp->ch->fd, .events = POLLIN};
        pf[2] = (struct pollfd){.fd = tp->dev.ctx->async_fd, .events = POLLIN};
        int npf = 3;
        for (int i = 0; i < base->nranks; i++)
          if (tp->peers[i].sock >= 0) {
            tp->pfd_peer[npf] = i;
            pf[npf++] = (struct pollfd){.fd = tp->peers[i].sock, .events = POLLIN};
          }
        int rc = poll(pf, (nfds_t)npf, left);
        if (rc < 0 && errno != EINTR)
          return SC_ERR(SC_ERR_SYSTEM, "verbs progress: poll: %s", strerror(errno));
        if (rc > 0 && pf[0].revents) {
          uint64_t v;
          while (read(tp->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR) {
          }
        }
        if (rc > 0 && pf[2].revents) sc_vb_on_async(tp);
        if (rc > 0 && pf[1].revents) {
          /* Consume the channel's event so that it can fire again once re-armed. */
          struct ibv_cq *ecq;
          void *ectx;
          if (tp->api->get_cq_event(tp->ch, &ecq, &ectx) == 0) {
            tp->api->ack_cq_events(ecq, 1);
            tp->cq_armed = 0;
          }
        }
        if (rc > 0) pass(tp, &moved); /* completions first: they may finish a peer's last work */
        for (int k = 3; rc > 0 && k < npf; k++)
          if (pf[k].revents) sc_vb_on_peer_sock(tp, tp->pfd_peer[k]);
      }
    }
  }
  if (progressed) *progressed = moved;
  if (tp->report_pending) {
    tp->report_pending = 0;
    return SC_ERR(tp->report_code, "%s", tp->report);
  }
  return SC_SUCCESS;
}

static sc_result_t vb_reg(sc_transport_t *base, void *buf, size_t len, void **handle) {
  sc_vb_transport_t *tp = sc_vb_of(base);
  if (!tp || !handle || (!buf && len))
    return SC_ERR(SC_ERR_INVALID_ARG, "verbs reg: NULL argument");
  *handle = NULL;
  if (!len) return SC_SUCCESS;
  sc_vb_rc_entry_t *e;
  SC_CHECK(sc_vb_rc_acquire(tp->rc, buf, len, &e));
  *handle = e;
  return SC_SUCCESS;
}

static sc_result_t vb_dereg(sc_transport_t *base, void *handle) {
  sc_vb_transport_t *tp = sc_vb_of(base);
  if (tp && handle) sc_vb_rc_release(tp->rc, handle);
  return SC_SUCCESS;
}

static void vb_wake(sc_transport_t *base) {
  if (!base) return;
  sc_vb_transport_t *tp = sc_vb_of(base);
  uint64_t one = 1;
  while (write(tp->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

static sc_result_t vb_props(sc_transport_t *base, int a, int b, sc_tp_props_t *out) {
  sc_vb_transport_t *tp = sc_vb_of(base);
  if (!tp || !out || a < 0 || b < 0 || a >= base->nranks || b >= base->nranks || a == b)
    return SC_ERR(SC_ERR_INVALID_ARG, "verbs props: ranks %d and %d of %d", a, b,
                  base ? base->nranks : 0);
  if (!tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "verbs props: not connected");
  sc_vb_pair_t pp;
  sc_vb_pair_props(&tp->peers[a].blob, &tp->peers[b].blob, &pp);
  memset(out, 0, sizeof(*out));
  out->kind = SC_TP_KIND_NET;
  out->locality = pp.same_host ? SC_TP_SAME_HOST : SC_TP_OTHER_HOST;
  out->costs_unfitted = pp.same_host; /* a loop through the HCA: not shm's costs nor tcp's */
  out->latency_s = pp.latency_s;
  out->bandwidth_bps = pp.bandwidth_bps;
  out->receiver_spins = 1;
  out->device_mem = pp.device_mem;
  return SC_SUCCESS;
}

const sc_transport_ops_t sc_verbs_transport = {
    .name = "verbs",
    .create = sc_vb_create,
    .connect_all = sc_vb_connect_all,
    .isend = vb_isend,
    .irecv = vb_irecv,
    .progress = vb_progress,
    .cancel_all = sc_vb_cancel_all,
    .reg = vb_reg,
    .dereg = vb_dereg,
    .wake = vb_wake,
    .destroy = sc_vb_destroy,
    .props = vb_props,
};
