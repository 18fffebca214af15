/* SPDX-License-Identifier: BSD-3-Clause */
/* UCX transport ops: tagged sends and receives (the tag scheme is in
 * ucx_internal.h), completion callbacks, and progress, which drives the
 * workers (one per lane, ucx_internal.h), then spins on ucp_worker_progress
 * for at most spin_us, then arms them and sleeps in poll on their event fds
 * for the rest of the caller's timeout, as the tcp and shm transports wait.
 *
 * A pending request lives in UCX's request memory (sc_ucx_op_t) on a list,
 * so that a failed peer or cancel_all can fail the caller's requests at
 * once: the caller's request is then detached (op->req = NULL) and UCX's
 * is freed whenever UCX completes it. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/ucx/ucx_internal.h"

static void req_finish(sc_tp_req_t *r, sc_result_t status) {
  r->status = status;
  __atomic_store_n(&r->state, status == SC_SUCCESS ? (int)SC_TP_REQ_DONE : (int)SC_TP_REQ_ERROR,
                   __ATOMIC_RELEASE);
}

static void report_code(sc_ucx_transport_t *tp, sc_result_t code, const char *msg) {
  if (tp->has_error) return;
  tp->has_error = 1;
  tp->errcode = code;
  snprintf(tp->errmsg, sizeof(tp->errmsg), "%s", msg);
}

static void report(sc_ucx_transport_t *tp, const char *msg) {
  report_code(tp, SC_ERR_REMOTE, msg);
}

void sc_ucx_op_unlink(sc_ucx_transport_t *tp, sc_ucx_op_t *op) {
  if (op->prev)
    op->prev->next = op->next;
  else if (tp->pending == op)
    tp->pending = op->next;
  if (op->next) op->next->prev = op->prev;
  op->prev = op->next = NULL;
}

static void op_link(sc_ucx_transport_t *tp, sc_ucx_op_t *op, sc_tp_req_t *req, int peer,
                    uint64_t tag, int print) {
  op->req = req;
  op->tp = tp;
  op->peer = peer;
  op->tag = tag;
  op->print = print;
  op->prev = NULL;
  op->next = tp->pending;
  if (tp->pending) tp->pending->prev = op;
  tp->pending = op;
}

/* Detaches and fails every pending request to or from peer (all peers when
 * peer < 0); returns how many. UCX is asked to cancel them too (a
 * callback may run inside ucp_request_cancel and free the op); what it
 * cannot cancel at once stays with UCX, detached, until it completes. */
static int fail_pending(sc_ucx_transport_t *tp, int peer, sc_result_t why) {
  int n = 0;
  sc_ucx_op_t *op = tp->pending, *next;
  for (; op; op = next) {
    next = op->next;
    if (!op->req || (peer >= 0 && op->peer != peer)) continue;
    sc_tp_req_t *r = op->req;
    op->req = NULL;
    req_finish(r, why);
    n++;
    ucp_request_cancel(tp->peers[op->peer].worker, op);
  }
  return n;
}

void sc_ucx_peer_fail(sc_ucx_transport_t *tp, sc_ucx_peer_t *p, const char *fmt, ...) {
  if (p->dead) return;
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  snprintf(p->err, sizeof(p->err), "ucx: rank %d %s (seen by rank %d)", p->rank, what,
           tp->base.rank);
  p->dead = 1;
  if (fail_pending(tp, p->rank, SC_ERR_REMOTE) > 0) {
    SC_WARN(SC_SUBSYS_NET, "%s", p->err);
    report(tp, p->err);
  } else {
    /* Nothing waited on it: a peer that finished and closed looks the same. */
    SC_INFO(SC_SUBSYS_NET, "%s; no request was pending", p->err);
  }
}

/* The caller's request r failed because of its peer: fail the pair. */
static void req_peer_fail(sc_ucx_transport_t *tp, sc_tp_req_t *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void req_peer_fail(sc_ucx_transport_t *tp, sc_tp_req_t *r, const char *fmt, ...) {
  sc_ucx_peer_t *p = &tp->peers[r->peer];
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  sc_ucx_peer_fail(tp, p, "%s", what);
  req_finish(r, SC_ERR_REMOTE);
  report(tp, p->err);
}

/* A receive finished with UCX status st and got bytes: the exact length or
 * the pair fails. */
static void recv_finish(sc_ucx_transport_t *tp, sc_tp_req_t *r, ucs_status_t st, size_t got) {
  if (st == UCS_OK && got == r->len) {
    req_finish(r, SC_SUCCESS);
  } else if (st == UCS_OK) {
    req_peer_fail(tp, r, "sent a message of %zu bytes where rank %d expected %zu", got,
                  tp->base.rank, r->len);
  } else if (st == UCS_ERR_MESSAGE_TRUNCATED) {
    req_peer_fail(tp, r, "sent a message of more than the %zu bytes rank %d expected", r->len,
                  tp->base.rank);
  } else {
    req_peer_fail(tp, r, "failed a receive: %s", ucs_status_string(st));
  }
}

static void send_cb(void *request, ucs_status_t st, void *user_data) {
  sc_ucx_transport_t *tp = user_data;
  sc_ucx_op_t *op = request;
  sc_tp_req_t *r = op->req;
  sc_ucx_op_unlink(tp, op);
  op->req = NULL;
  ucp_request_free(request);
  if (!r) return;
  if (st == UCS_OK) {
    req_finish(r, SC_SUCCESS);
    tp->completed++;
  } else {
    req_peer_fail(tp, r, "failed a send: %s", ucs_status_string(st));
  }
}

static void recv_cb(void *request, ucs_status_t st, const ucp_tag_recv_info_t *info,
                    void *user_data) {
  sc_ucx_transport_t *tp = user_data;
  sc_ucx_op_t *op = request;
  sc_tp_req_t *r = op->req;
  size_t got = st == UCS_OK && info ? info->length : 0;
  /* Not yet linked: UCX completed the receive inside ucp_tag_recv_nbx (an
   * orphan, detached by a failure, is always still on the list). */
  if (!r && tp->posting && !op->prev && tp->pending != op) {
    tp->imm_done = 1;
    tp->imm_status = st;
    tp->imm_len = got;
    ucp_request_free(request);
    return;
  }
  sc_ucx_op_unlink(tp, op);
  op->req = NULL;
  ucp_request_free(request);
  if (!r) return;
  recv_finish(tp, r, st, got);
  if (r->state == SC_TP_REQ_DONE) tp->completed++; /* what progress reports as moved */
}

static sc_result_t post_check(sc_ucx_transport_t *tp, int peer, const void *buf, size_t len,
                              sc_tp_req_t *req, const char *op) {
  if (!tp || !req) return SC_ERR(SC_ERR_INVALID_ARG, "ucx %s: NULL transport or request", op);
  if (!tp->connected)
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx %s: connect_all has not succeeded", op);
  if (peer < 0 || peer >= tp->base.nranks || peer == tp->base.rank)
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx %s: peer %d is not another rank of %d (this is rank %d)",
                  op, peer, tp->base.nranks, tp->base.rank);
  if (len && !buf) return SC_ERR(SC_ERR_INVALID_ARG, "ucx %s: NULL buffer for %zu bytes", op, len);
  if (req->state == SC_TP_REQ_PENDING)
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx %s: request is still pending", op);
  if (req->device && !sc_ucx_pair_device(&tp->me, &tp->peers[peer].blob))
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "ucx %s: a device buffer for rank %d, but this pair's UCX does not take CUDA "
                  "memory (rank %d: %s, peer: %s; props device_mem is 0)",
                  op, peer, tp->base.rank, tp->me.flags & SC_UCX_FLAG_CUDA ? "yes" : "no",
                  tp->peers[peer].blob.flags & SC_UCX_FLAG_CUDA ? "yes" : "no");
  return SC_SUCCESS;
}

/* Declared on every operation, so that UCX never guesses (a guess costs a
 * pointer query per message in CUDA builds of UCX). A device request
 * reaches here only for a pair whose props said device_mem. */
static ucs_memory_type_t mem_type(const sc_tp_req_t *req) {
  return req->device ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

/* Fills req; a request to a peer that already failed fails at once. */
static sc_result_t post_begin(sc_ucx_transport_t *tp, int peer, const void *buf, size_t len,
                              sc_tp_req_t *req, int sending) {
  req->peer = peer;
  req->is_send = sending;
  req->buf = (uint8_t *)(uintptr_t)buf;
  req->len = len;
  /* A receive whose message arrived before the peer closed still matches
   * it (tcp, too, reads what the peer wrote before it closed). */
  if (tp->peers[peer].dead &&
      (sending ||
       !ucp_tag_probe_nb(tp->peers[peer].worker, sc_ucx_tag(peer, tp->peers[peer].recv_seq, 0),
                         SC_UCX_MASK_NO_PRINT, 0, &(ucp_tag_recv_info_t){0}))) {
    req_finish(req, SC_ERR_REMOTE);
    return SC_ERR(SC_ERR_REMOTE, "%s", tp->peers[peer].err);
  }
  req->status = SC_SUCCESS;
  req->state = SC_TP_REQ_PENDING;
  return SC_SUCCESS;
}

static sc_result_t ucx_isend(sc_transport_t *base, int peer, const void *buf, size_t len,
                             sc_tp_req_t *req) {
  sc_ucx_transport_t *tp = sc_ucx_of(base);
  SC_CHECK(post_check(tp, peer, buf, len, req, "isend"));
  SC_CHECK(post_begin(tp, peer, buf, len, req, 1));
  sc_ucx_peer_t *p = &tp->peers[peer];
  ucp_request_param_t prm = {.op_attr_mask =
                                 UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                 UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE,
                             .cb.send = send_cb,
                             .user_data = tp,
                             .datatype = ucp_dt_make_contig(1),
                             .memory_type = mem_type(req)};
  uint64_t tag = sc_ucx_tag(tp->base.rank, p->send_seq++, sc_ucx_fp_hash(req->fp));
  ucs_status_ptr_t h = ucp_tag_send_nbx(p->ep, buf, len, tag, &prm);
  if (h == NULL) {
    req_finish(req, SC_SUCCESS);
  } else if (UCS_PTR_IS_ERR(h)) {
    req_peer_fail(tp, req, "refused a send: %s", ucs_status_string(UCS_PTR_STATUS(h)));
    tp->has_error = 0; /* reported here */
    return SC_ERR(SC_ERR_REMOTE, "%s", p->err);
  } else {
    op_link(tp, h, req, peer, tag, 0);
  }
  return SC_SUCCESS;
}

static sc_result_t ucx_irecv(sc_transport_t *base, int peer, void *buf, size_t len,
                             sc_tp_req_t *req) {
  sc_ucx_transport_t *tp = sc_ucx_of(base);
  SC_CHECK(post_check(tp, peer, buf, len, req, "irecv"));
  SC_CHECK(post_begin(tp, peer, buf, len, req, 0));
  sc_ucx_peer_t *p = &tp->peers[peer];
  /* No immediate completion: the length comes only through the callback. */
  ucp_request_param_t prm = {.op_attr_mask =
                                 UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                 UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE |
                                 UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                             .cb.recv = recv_cb,
                             .user_data = tp,
                             .datatype = ucp_dt_make_contig(1),
                             .memory_type = mem_type(req)};
  unsigned hash = sc_ucx_fp_hash(req->fp);
  uint64_t tag = sc_ucx_tag(peer, p->recv_seq++, hash);
  tp->posting = 1;
  tp->imm_done = 0;
  ucs_status_ptr_t h = ucp_tag_recv_nbx(p->worker, buf, len, tag, sc_ucx_recv_mask(hash), &prm);
  tp->posting = 0;
  if (UCS_PTR_IS_ERR(h)) {
    recv_finish(tp, req, UCS_PTR_STATUS(h), 0);
  } else if (tp->imm_done) {
    recv_finish(tp, req, tp->imm_status, tp->imm_len);
  } else {
    op_link(tp, h, req, peer, tag, hash != 0);
    /* its message may already be held, unmatched, under another print */
    if (hash) tp->scan_due = 1;
    return SC_SUCCESS;
  }
  if (req->state == SC_TP_REQ_DONE) return SC_SUCCESS;
  tp->has_error = 0; /* reported here */
  return SC_ERR(SC_ERR_REMOTE, "%s", tp->peers[peer].err);
}

static int drain(sc_ucx_transport_t *tp) {
  int any = 0;
  for (int i = 0; i < tp->nbusy; i++)
    while (ucp_worker_progress(tp->lane[tp->busy[i]].worker)) any = 1;
  if (any) tp->scan_due = 1;
  return any;
}

/* Receive op met a message of another print in its place: it fails with
 * SC_ERR_MISMATCH, its buffer untouched (the message never matched it), and
 * the pair is out of step, so the peer's other requests fail as for a
 * failed peer. The message stays with UCX, unmatched, until the worker
 * closes. */
static void recv_other_print(sc_ucx_transport_t *tp, sc_ucx_op_t *op, uint64_t sender_tag) {
  sc_tp_req_t *r = op->req;
  sc_ucx_peer_t *p = &tp->peers[op->peer];
  op->req = NULL;
  /* The tag holds only a hash of the peer's print, not the print. */
  memset(r->peer_fp, 0, sizeof(r->peer_fp));
  req_finish(r, SC_ERR_MISMATCH);
  char what[200], text[256];
  snprintf(what, sizeof(what),
           "sent message %llu of another operation than the receive rank %d posted in its "
           "place (print hash 0x%04x, the receive's 0x%04x)",
           (unsigned long long)sc_ucx_tag_seq(op->tag), tp->base.rank, sc_ucx_tag_hash(sender_tag),
           sc_ucx_tag_hash(op->tag));
  snprintf(text, sizeof(text), "ucx: rank %d %s (seen by rank %d)", p->rank, what, tp->base.rank);
  report_code(tp, SC_ERR_MISMATCH, text);
  ucp_request_cancel(p->worker, op); /* its callback frees op */
  sc_ucx_peer_fail(tp, p, "%s", what);
}

/* A receive with a print matches only a message of the same hash, so a
 * message of another print waits in UCX's unexpected queue under the
 * receive's sender and count: probe for it with the hash bits masked out
 * (no removal; no byte moves). Only when a message may have arrived or such
 * a receive was posted since the last look, and only before sleeping, so
 * that a wait that completes costs nothing. 1 when one was found. */
static int find_other_prints(sc_ucx_transport_t *tp) {
  if (!tp->scan_due) return 0;
  tp->scan_due = 0;
  for (sc_ucx_op_t *op = tp->pending; op; op = op->next) {
    if (!op->req || !op->print) continue;
    ucp_tag_recv_info_t info = {0};
    if (!ucp_tag_probe_nb(tp->peers[op->peer].worker, op->tag, SC_UCX_MASK_NO_PRINT, 0, &info))
      continue;
    recv_other_print(tp, op, info.sender_tag);
    tp->scan_due = 1; /* the list changed under the walk: other peers at the next look */
    return 1;
  }
  return 0;
}

/* Arms every busy lane's worker: UCS_OK when all are armed, UCS_ERR_BUSY
 * when one had events since the last progress (drain, then arm again). */
static ucs_status_t arm_lanes(sc_ucx_transport_t *tp) {
  for (int i = 0; i < tp->nbusy; i++) {
    ucs_status_t st = ucp_worker_arm(tp->lane[tp->busy[i]].worker);
    if (st != UCS_OK) return st;
  }
  return UCS_OK;
}

static int settled(sc_ucx_transport_t *tp, size_t before) {
  return tp->completed != before || tp->has_error || __atomic_load_n(&tp->woken, __ATOMIC_ACQUIRE);
}

/* Spin, then sleep on the workers' event fds until something completes, a
 * wake-up, an error or the timeout. */
static sc_result_t wait_events(sc_ucx_transport_t *tp, size_t before, int timeout_ms) {
  int64_t t0 = sc_now_us(), end = t0 + (int64_t)timeout_ms * 1000;
  if (tp->spin_us > 0) {
    int64_t spin_end = t0 + tp->spin_us < end ? t0 + tp->spin_us : end;
    int64_t now = t0;
    while (!settled(tp, before) && now < spin_end) {
      /* With more ranks than cores the sender may be waiting for this very
       * core: hand it over rather than hold it for the whole spin; but not
       * while another program holds it (lib/base/yield.h): sleep then. */
      if (!drain(tp)) {
        if (!sc_yield_allowed(&tp->yield, now)) break;
        now = sc_yield_core(&tp->yield, now);
      } else {
        now = sc_now_us();
      }
    }
  }
  while (!settled(tp, before)) {
    int64_t left = end - sc_now_us();
    if (left <= 0 || find_other_prints(tp)) break;
    ucs_status_t st = arm_lanes(tp);
    if (st == UCS_ERR_BUSY) { /* events arrived since the last progress */
      drain(tp);
      continue;
    }
    if (st != UCS_OK)
      return SC_ERR(SC_ERR_SYSTEM, "ucx progress: ucp_worker_arm: %s", ucs_status_string(st));
    /* wake sets the flag before it signals: seen here or the fd fires. */
    if (__atomic_load_n(&tp->woken, __ATOMIC_ACQUIRE)) break;
    struct pollfd pfd[SC_UCX_LANES];
    for (int i = 0; i < tp->nbusy; i++)
      pfd[i] = (struct pollfd){.fd = tp->lane[tp->busy[i]].efd, .events = POLLIN};
    int ms = (int)((left + 999) / 1000);
    if (poll(pfd, (nfds_t)tp->nbusy, ms) < 0 && errno != EINTR)
      return SC_ERR(SC_ERR_SYSTEM, "ucx progress: poll on the workers' event fds: %s",
                    strerror(errno));
    drain(tp);
  }
  return SC_SUCCESS;
}

static sc_result_t ucx_progress(sc_transport_t *base, int timeout_ms, int *progressed) {
  if (progressed) *progressed = 0;
  sc_ucx_transport_t *tp = sc_ucx_of(base);
  if (!tp) return SC_ERR(SC_ERR_INVALID_ARG, "ucx progress: NULL transport");
  if (!tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "ucx progress: not connected");
  size_t before = tp->completed;
  drain(tp);
  if (timeout_ms > 0 && !settled(tp, before)) SC_CHECK(wait_events(tp, before, timeout_ms));
  __atomic_store_n(&tp->woken, 0, __ATOMIC_RELEASE);
  if (progressed) *progressed = tp->completed != before;
  if (tp->has_error) {
    tp->has_error = 0;
    return SC_ERR(tp->errcode, "%s", tp->errmsg);
  }
  return SC_SUCCESS;
}

static void ucx_cancel_all(sc_transport_t *base, sc_result_t why) {
  if (!base) return;
  sc_ucx_transport_t *tp = sc_ucx_of(base);
  if (fail_pending(tp, -1, why) > 0 || (why != SC_ERR_ABORTED && why != SC_ERR_INVALID_ARG))
    tp->abandon = 1;
  tp->has_error = 0;
}

static sc_result_t ucx_reg(sc_transport_t *tp, void *buf, size_t len, void **handle) {
  (void)tp, (void)buf, (void)len;
  if (handle) *handle = NULL;
  return SC_SUCCESS;
}

static sc_result_t ucx_dereg(sc_transport_t *tp, void *handle) {
  (void)tp, (void)handle;
  return SC_SUCCESS;
}

static void ucx_wake(sc_transport_t *base) {
  if (!base) return;
  sc_ucx_transport_t *tp = sc_ucx_of(base);
  __atomic_store_n(&tp->woken, 1, __ATOMIC_RELEASE);
  /* Writes a waited-on worker's wake-up event fd (the wait polls every
   * busy lane's): safe from any thread. */
  ucp_worker_signal(tp->lane[tp->busy[0]].worker);
}

static sc_result_t ucx_props(sc_transport_t *base, int a, int b, sc_tp_props_t *out) {
  sc_ucx_transport_t *tp = sc_ucx_of(base);
  if (!tp || !out || a < 0 || b < 0 || a >= base->nranks || b >= base->nranks || a == b)
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx props: ranks %d and %d of %d", a, b,
                  base ? base->nranks : 0);
  if (!tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "ucx props: not connected");
  sc_ucx_pair_props(&tp->peers[a].blob, &tp->peers[b].blob, tp->peers[b].host_ranks, out);
  return SC_SUCCESS;
}

const sc_transport_ops_t sc_ucx_transport = {
    .name = "ucx",
    .create = sc_ucx_create,
    .connect_all = sc_ucx_connect_all,
    .isend = ucx_isend,
    .irecv = ucx_irecv,
    .progress = ucx_progress,
    .cancel_all = ucx_cancel_all,
    .reg = ucx_reg,
    .dereg = ucx_dereg,
    .wake = ucx_wake,
    .destroy = sc_ucx_destroy,
    .props = ucx_props,
};
