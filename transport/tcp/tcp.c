/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport ops: posting requests (cut into segments over a peer's
 * sockets, see tcp_internal.h) and progress, which tries its I/O, then spins
 * on poll(0) for at most spin_us, then sleeps in poll for the rest of the
 * caller's timeout. Spinning catches a reply that is microseconds away
 * without a wake-up through the scheduler; the bound keeps an idle rank from
 * burning the core its peers need. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/tcp/tcp_io.h"

static sc_result_t post_check(sc_tcp_transport_t *tp, int peer, const void *buf, size_t len,
                              sc_tp_req_t *req, const char *op) {
  if (!tp || !req) return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: NULL transport or request", op);
  if (!tp->connected)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: connect_all has not succeeded", op);
  if (peer < 0 || peer >= tp->base.nranks || peer == tp->base.rank)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: peer %d is not another rank of %d (this is rank %d)",
                  op, peer, tp->base.nranks, tp->base.rank);
  if (len && !buf) return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: NULL buffer for %zu bytes", op, len);
  if (req->state == SC_TP_REQ_PENDING)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: request is still pending", op);
  return SC_SUCCESS;
}

/* The post's arguments, kept in the request it owns from now on. */
static void req_take(sc_tp_req_t *req, int peer, const void *buf, size_t len, int sending) {
  req->status = SC_SUCCESS;
  req->peer = peer;
  req->is_send = sending;
  req->buf = (uint8_t *)buf;
  req->len = len;
  req->state = SC_TP_REQ_PENDING;
}

/* Queues req's segments on p's sockets and tries the sockets it heads at once. */
static sc_result_t post(sc_tcp_transport_t *tp, int peer, const void *buf, size_t len,
                        sc_tp_req_t *req, int sending) {
  sc_tcp_peer_t *p = &tp->peers[peer];
  if (p->dead) {
    req->status = SC_ERR_REMOTE;
    __atomic_store_n(&req->state, (int)SC_TP_REQ_ERROR, __ATOMIC_RELEASE);
    return SC_ERR(SC_ERR_REMOTE, "%s", sc_tcp_peer_err(p));
  }
  size_t stripe;
  int k = sc_tcp_stripes(len, p->nsocks, &stripe);
  for (int j = 0; j < k; j++) {
    sc_tcp_sock_t *sk = &p->socks[j];
    SC_CHECK(sc_tcp_ring_reserve(sending ? &sk->sq : &sk->rq, 1));
  }
  req_take(req, peer, buf, len, sending);
  req->u.tcp.segs_left = k;
  uint32_t seq = sending ? p->send_seq++ : p->recv_seq++;
  for (int j = 0; j < k; j++) {
    sc_tcp_sock_t *sk = &p->socks[j];
    sc_tcp_seg_t *s = sc_tcp_ring_push(sending ? &sk->sq : &sk->rq);
    s->req = req;
    s->off = (size_t)j * stripe;
    s->len = len - s->off < stripe ? len - s->off : stripe;
    s->done = 0;
    s->hdr_done = 0;
    s->seq = seq;
    s->nseg = k;
    if (sending) {
      sc_wire_put_u32(s->hdr, SC_TCP_MSG_MAGIC);
      sc_wire_put_u32(s->hdr + 4, seq);
      sc_wire_put_u64(s->hdr + 8, (uint64_t)len);
      memcpy(s->hdr + SC_TCP_HDR_FP, req->fp, SC_TP_FP_LEN);
    }
  }
  if (sending)
    p->nsend++;
  else
    p->nrecv++;
  /* A socket with older segments queued is pushed by progress() in order,
   * unless they were held back for this one (req->more). */
  for (int sock = 0; sock < k && !p->dead; sock++) {
    sc_tcp_sock_t *sk = &p->socks[sock];
    size_t moved = 0;
    if (sending && (sk->sq.count == 1 || sk->held)) {
      sk->held = req->more;
      if (!req->more) SC_CHECK(sc_tcp_send_progress(tp, p, sock, &moved));
    } else if (!sending && sk->rq.count == 1)
      SC_CHECK(sc_tcp_recv_progress(tp, p, sock, &moved));
  }
  return SC_SUCCESS;
}

/* A request for a pair not yet connected waits in the peer's queue; the
 * pair's setup starts (tcp_setup.c says which side connects when). */
static sc_result_t post_later(sc_tcp_transport_t *tp, int peer, const void *buf, size_t len,
                              sc_tp_req_t *req, int sending) {
  sc_tcp_peer_t *p = &tp->peers[peer];
  req_take(req, peer, buf, len, sending);
  req->u.tcp.next = NULL;
  if (p->pend_tail)
    p->pend_tail->u.tcp.next = req;
  else
    p->pend = req;
  p->pend_tail = req;
  sc_tcp_setup_waiting(tp, peer);
  if (sending) return sc_tcp_setup_begin(tp, peer);
  return SC_SUCCESS;
}

static sc_result_t submit(sc_tcp_transport_t *tp, int peer, const void *buf, size_t len,
                          sc_tp_req_t *req, int sending) {
  sc_tcp_peer_t *p = &tp->peers[peer];
  if (p->connected || p->dead) return post(tp, peer, buf, len, req, sending);
  return post_later(tp, peer, buf, len, req, sending);
}

static sc_result_t tcp_isend(sc_transport_t *base, int peer, const void *buf, size_t len,
                             sc_tp_req_t *req) {
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  SC_CHECK(post_check(tp, peer, buf, len, req, "isend"));
  return submit(tp, peer, buf, len, req, 1);
}

static sc_result_t tcp_irecv(sc_transport_t *base, int peer, void *buf, size_t len,
                             sc_tp_req_t *req) {
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  SC_CHECK(post_check(tp, peer, buf, len, req, "irecv"));
  return submit(tp, peer, buf, len, req, 0);
}

sc_result_t sc_tcp_peer_connected(sc_tcp_transport_t *tp, int peer) {
  sc_tcp_peer_t *p = &tp->peers[peer];
  tp->data_socks += (size_t)p->nsocks;
  sc_result_t res = SC_SUCCESS;
  if (tp->connected) res = sc_tcp_wset_rebuild(tp);
  sc_tp_req_t *r = p->pend;
  p->pend = p->pend_tail = NULL;
  /* In posting order, so that sequence numbers follow it. */
  while (r) {
    sc_tp_req_t *next = r->u.tcp.next;
    sc_result_t e = post(tp, peer, r->buf, r->len, r, r->is_send);
    if (e != SC_SUCCESS) {
      r->status = e;
      __atomic_store_n(&r->state, (int)SC_TP_REQ_ERROR, __ATOMIC_RELEASE);
      if (res == SC_SUCCESS) res = e;
    }
    r = next;
  }
  return res;
}

sc_result_t sc_tcp_peer_setup_failed(sc_tcp_transport_t *tp, int peer, sc_result_t code,
                                     const char *fmt, ...) {
  sc_tcp_peer_t *p = &tp->peers[peer];
  char text[SC_TCP_ERR_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  sc_errtext_set(&p->err, SC_TCP_ERR_LEN, "%s", text);
  p->dead = 1;
  p->link = SC_TCP_LINK_NONE;
  sc_tcp_peer_close(p);
  sc_tcp_peer_cancel(tp, p, code == SC_ERR_TIMEOUT ? SC_ERR_TIMEOUT : SC_ERR_REMOTE);
  SC_WARN(SC_SUBSYS_NET, "%s", sc_tcp_peer_err(p));
  return SC_ERR(code, "%s", sc_tcp_peer_err(p));
}

/* Whether failure r of one peer is the one a pass reports rather than res,
 * another's: the first, except that a mismatch outranks the rest. The
 * executor must see the mismatch to name both calls, and the other failures
 * of that moment are mostly its echo (peers closing after their own
 * verdict); the peers behind them are failed all the same. */
static int outranks(sc_result_t r, sc_result_t res) {
  return r != SC_SUCCESS && (res == SC_SUCCESS || (r == SC_ERR_MISMATCH && res != SC_ERR_MISMATCH));
}

/* One pass over every socket with queued work. The first failure (or a
 * mismatch) is returned and its text kept; the other peers still move. */
static sc_result_t progress_pass(sc_tcp_transport_t *tp, size_t *moved, char *first_err,
                                 size_t errlen) {
  sc_result_t res = SC_SUCCESS;
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_tcp_peer_t *p = &tp->peers[i];
    if (p->dead || !p->connected) continue;
    sc_result_t r = SC_SUCCESS;
    for (int k = 0; k < p->nsocks && r == SC_SUCCESS; k++) {
      if (p->socks[k].sq.count) r = sc_tcp_send_progress(tp, p, k, moved);
      if (r == SC_SUCCESS && p->socks[k].rq.count) r = sc_tcp_recv_progress(tp, p, k, moved);
    }
    if (outranks(r, res)) {
      res = r;
      sc_error_get_detail(first_err, errlen);
    }
  }
  return res;
}

/* Like progress_pass, but only the sockets poll reported (pfds[1..n)): with
 * several sockets per peer, trying the idle ones would double the syscalls. */
static sc_result_t progress_ready(sc_tcp_transport_t *tp, int first, int n, size_t *moved,
                                  char *first_err, size_t errlen) {
  sc_result_t res = SC_SUCCESS;
  for (int i = first; i < n; i++) {
    if (!tp->pfds[i].revents) continue;
    sc_tcp_peer_t *p = &tp->peers[tp->pfd_peer[i]];
    int k = tp->pfd_sock[i];
    if (p->dead) continue;
    sc_result_t r = SC_SUCCESS;
    /* Errors and hang-ups show up in the I/O calls, with their cause. */
    if (p->socks[k].sq.count && (tp->pfds[i].revents & ~POLLIN))
      r = sc_tcp_send_progress(tp, p, k, moved);
    if (r == SC_SUCCESS && p->socks[k].rq.count && (tp->pfds[i].revents & ~POLLOUT))
      r = sc_tcp_recv_progress(tp, p, k, moved);
    if (outranks(r, res)) {
      res = r;
      sc_error_get_detail(first_err, errlen);
    }
  }
  return res;
}

/* The wake-up descriptor, the setup's (listener and connections being
 * made: from 1 to *data) and every socket waiting to move bytes; returns how
 * many. */
static sc_result_t build_pollset(sc_tcp_transport_t *tp, int *count, int *data) {
  SC_CHECK(sc_tcp_pollset_reserve(tp, 1 + sc_tcp_setup_nfds(tp) + tp->data_socks));
  size_t m = 0;
  tp->pfds[m++] = (struct pollfd){.fd = tp->wake_fd, .events = POLLIN};
  sc_tcp_setup_fill(tp, tp->pfds, &m);
  int n = (int)m;
  *data = n;
  for (int i = 0; i < n; i++) tp->pfd_peer[i] = tp->pfd_sock[i] = -1;
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_tcp_peer_t *p = &tp->peers[i];
    if (p->dead || !p->connected) continue;
    for (int k = 0; k < p->nsocks; k++) {
      sc_tcp_sock_t *sk = &p->socks[k];
      if (!sk->sq.count && !sk->rq.count) continue;
      tp->pfds[n] = (struct pollfd){
          .fd = sk->fd,
          .events = (short)((sk->sq.count ? POLLOUT : 0) | (sk->rq.count ? POLLIN : 0))};
      tp->pfd_peer[n] = i;
      tp->pfd_sock[n] = k;
      n++;
    }
  }
  *count = n;
  return SC_SUCCESS;
}

/* Spin, then sleep: > 0 when something is ready, 0 at the timeout. Only
 * sockets with data to move make a spin worth it. */
static int wait_ready(sc_tcp_transport_t *tp, int n, int spin_worth, int timeout_ms) {
  int rc = 0;
  if (spin_worth && tp->spin_us > 0) {
    int64_t spin = (int64_t)tp->spin_us < (int64_t)timeout_ms * 1000 ? tp->spin_us
                                                                     : (int64_t)timeout_ms * 1000;
    int64_t t0 = sc_now_us(), end = t0 + spin, now = t0;
    for (;;) {
      rc = poll(tp->pfds, (nfds_t)n, 0);
      if (rc != 0) break;
      now = sc_now_us();
      /* While another program holds the core, a yield hands it a whole
       * slice: sleep in poll instead (lib/base/yield.h). */
      if (now >= end || !sc_yield_allowed(&tp->yield, now)) break;
      /* With more ranks than cores the sender may be waiting for this very
       * core: hand it over rather than hold it for the whole spin. */
      sc_yield_core(&tp->yield, now);
    }
    if (rc != 0) return rc;
    timeout_ms -= (int)((sc_now_us() - t0) / 1000);
    if (timeout_ms <= 0) return 0;
  }
  return poll(tp->pfds, (nfds_t)n, timeout_ms);
}

/* Consumes the wake-ups wake() counted (an eventfd reads them all at once). */
static void drain_wake(sc_tcp_transport_t *tp) {
  uint64_t v;
  while (read(tp->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR) {
  }
}

/* Connections being made: due retries, deadlines, the lower rank's delayed
 * connects; with timeout 0 also their I/O (progress() polls them otherwise). */
static sc_result_t setup_step(sc_tcp_transport_t *tp, int io, int64_t *wake_at, size_t *moved) {
  sc_result_t res = sc_tcp_setup_tick(tp, wake_at);
  if (!io) return res;
  SC_CHECK(sc_tcp_pollset_reserve(tp, sc_tcp_setup_nfds(tp)));
  size_t n = 0;
  sc_tcp_setup_fill(tp, tp->pfds, &n);
  if (n == 0 || poll(tp->pfds, (nfds_t)n, 0) <= 0) return res;
  int changed = 0;
  sc_result_t r = sc_tcp_setup_handle(tp, tp->pfds, n, &changed);
  if (changed) (*moved)++;
  return res != SC_SUCCESS ? res : r;
}

static sc_result_t tcp_progress(sc_transport_t *base, int timeout_ms, int *progressed) {
  if (progressed) *progressed = 0;
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  if (!tp) return SC_ERR(SC_ERR_INVALID_ARG, "tcp progress: NULL transport");
  if (!tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "tcp progress: not connected");
  char first_err[SC_ERRMSG_MAX];
  size_t moved = 0;
  sc_result_t res = progress_pass(tp, &moved, first_err, sizeof(first_err));
  int64_t wake_at = INT64_MAX;
  /* Under lazy setup a peer may connect at any time, so a call that may not
   * block looks at the listener when nothing else moved; while no connection
   * is being made, at most once a millisecond, so that a caller spinning on
   * such calls pays no extra syscall for each. */
  const int busy = sc_tcp_setup_busy(tp);
  int io = timeout_ms <= 0 && moved == 0 && (busy || tp->lazy);
  if (io && !busy) {
    int64_t now = sc_now_ms();
    io = now != tp->listener_looked_ms;
    tp->listener_looked_ms = now;
  }
  if (res == SC_SUCCESS && (busy || io)) {
    res = setup_step(tp, io, &wake_at, &moved);
    if (res != SC_SUCCESS) sc_error_get_detail(first_err, sizeof(first_err));
  }
  if (moved == 0 && res == SC_SUCCESS && timeout_ms > 0) {
    int n = 0, data = 1;
    res = build_pollset(tp, &n, &data);
    if (res != SC_SUCCESS) return res;
    if (wake_at != INT64_MAX) {
      int until = sc_ms_until(wake_at);
      if (until < timeout_ms) timeout_ms = until > 0 ? until : 0;
    }
    int rc = wait_ready(tp, n, n > data, timeout_ms);
    if (rc < 0 && errno != EINTR)
      return SC_ERR(SC_ERR_SYSTEM, "tcp progress: poll: %s", strerror(errno));
    if (rc > 0) {
      if (tp->pfds[0].revents) drain_wake(tp);
      int changed = 0;
      if (data > 1) {
        res = sc_tcp_setup_handle(tp, tp->pfds + 1, (size_t)(data - 1), &changed);
        if (res != SC_SUCCESS) sc_error_get_detail(first_err, sizeof(first_err));
        if (changed) moved++;
      }
      /* A pair connected just now may have reused a polled descriptor's slot. */
      if (res == SC_SUCCESS && !changed && rc > (tp->pfds[0].revents ? 1 : 0))
        res = progress_ready(tp, data, n, &moved, first_err, sizeof(first_err));
    }
  }
  if (progressed) *progressed = moved > 0;
  if (res != SC_SUCCESS) sc_error_set_detail(first_err);
  return res;
}

sc_result_t sc_tcp_sleep_set(sc_transport_t *base, struct pollfd **fds, int *n) {
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  int data = 1;
  *fds = NULL;
  *n = 0;
  SC_CHECK(build_pollset(tp, n, &data));
  *fds = tp->pfds;
  return SC_SUCCESS;
}

void sc_tcp_slept(sc_transport_t *base) {
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  if (tp->pfds[0].revents) drain_wake(tp);
}

static void tcp_cancel_all(sc_transport_t *base, sc_result_t why) {
  if (!base) return;
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  for (int i = 0; i < tp->base.nranks; i++) sc_tcp_peer_cancel(tp, &tp->peers[i], why);
}

static sc_result_t tcp_reg(sc_transport_t *tp, void *buf, size_t len, void **handle) {
  if (handle) *handle = NULL;
  return SC_SUCCESS;
}

static sc_result_t tcp_dereg(sc_transport_t *tp, void *handle) {
  return SC_SUCCESS;
}

static void tcp_wait(sc_transport_t *base, int timeout_ms) {
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  if (!tp || !tp->connected) return;
  pthread_mutex_lock(&tp->wlock);
  if (tp->wpfds_gen != tp->wgen || !tp->wpfds) {
    if (tp->nwset > tp->wpfds_cap) {
      struct pollfd *w = realloc(tp->wpfds, tp->nwset * sizeof(*w));
      if (!w) {
        pthread_mutex_unlock(&tp->wlock);
        return; /* may return early */
      }
      tp->wpfds = w;
      tp->wpfds_cap = tp->nwset;
    }
    memcpy(tp->wpfds, tp->wset, tp->nwset * sizeof(*tp->wpfds));
    tp->nwpfds = tp->nwset;
    tp->wpfds_gen = tp->wgen;
  }
  pthread_mutex_unlock(&tp->wlock);
  int rc = poll(tp->wpfds, (nfds_t)tp->nwpfds, timeout_ms);
  if (rc <= 0) return;
  if (tp->wpfds[0].revents & POLLIN) drain_wake(tp);
  /* A closed or failed socket stays ready: reported once, then left to
   * progress(), or every later wait would return at once. */
  for (size_t i = 1; i < tp->nwpfds; i++)
    if (tp->wpfds[i].revents & (POLLHUP | POLLERR | POLLNVAL)) tp->wpfds[i].fd = -1;
}

static void tcp_wake(sc_transport_t *base) {
  if (!base) return;
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  uint64_t one = 1;
  /* EAGAIN means the counter is already non-zero: a wake-up is pending anyway. */
  while (write(tp->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

/* Ranks advertising one address share a host (a rank in its own network
 * namespace has its own address even on a machine it shares: its traffic
 * crosses a network, emulated or not). The receiver spins unless its host
 * has more of the job's ranks than CPUs, as limit_spin decides for it. */
sc_result_t sc_tcp_props(sc_transport_t *base, int a, int b, sc_tp_props_t *out) {
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  if (!tp || !out || a < 0 || b < 0 || a >= base->nranks || b >= base->nranks || a == b)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp props: ranks %d and %d of %d", a, b,
                  base ? base->nranks : 0);
  if (!tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "tcp props: not connected");
  const sc_tcp_peer_t *pa = &tp->peers[a], *pb = &tp->peers[b];
  memset(out, 0, sizeof(*out));
  out->kind = SC_TP_KIND_NET;
  out->locality =
      sc_socket_addr_ip_cmp(pa->addr, pb->addr) == 0 ? SC_TP_SAME_HOST : SC_TP_OTHER_HOST;
  out->receiver_spins = sc_tcp_spins(pb->host_ranks, pb->host_cpus);
  return SC_SUCCESS;
}

const sc_transport_ops_t sc_tcp_transport = {
    .name = "tcp",
    .addr_max = SC_TCP_BLOB_LEN,
    .create = sc_tcp_create,
    .connect_all = sc_tcp_connect_all,
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .progress = tcp_progress,
    .cancel_all = tcp_cancel_all,
    .reg = tcp_reg,
    .dereg = tcp_dereg,
    .wake = tcp_wake,
    .wait = tcp_wait,
    .destroy = sc_tcp_destroy,
    .props = sc_tcp_props,
};
