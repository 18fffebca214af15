/* TCP transport data path: one socket per peer, a FIFO of pending sends and a
 * FIFO of posted receives per peer, linked through the caller's requests.
 *
 * Bytes go straight between the user's buffers and the kernel (writev-style
 * gather on send, scatter on receive); the only copies are the kernel's.
 * A receive never reads past the message it is posted for, and nothing is
 * read from a peer without a posted receive, so the payload length in a
 * header is checked against the posted length before a byte of payload
 * lands anywhere. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/error.h"
#include "lib/log.h"
#include "transport/tcp/tcp_internal.h"

/* iovecs gathered into one sendmsg: several small queued messages leave in a
 * single syscall. */
#define SC_TCP_SEND_IOV 64

static void req_finish(sc_tp_req_t *r, sc_tp_req_state_t state, sc_result_t status) {
  r->status = status;
  r->next = NULL;
  /* The waiter reads the payload after it sees the state. */
  __atomic_store_n(&r->state, (int)state, __ATOMIC_RELEASE);
}

static void fail_queue(sc_tp_req_t **head, sc_tp_req_t **tail, int *count, sc_result_t why) {
  sc_tp_req_t *r = *head;
  while (r) {
    sc_tp_req_t *next = r->next;
    req_finish(r, SC_TP_REQ_ERROR, why);
    r = next;
  }
  *head = *tail = NULL;
  *count = 0;
}

static const char *plural(int n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

/* The peer's stream is unusable: fail everything queued on it and remember why
 * for later requests. Returns SC_ERR_REMOTE with the text. */
static sc_result_t peer_fail(sc_transport_t *tp, sc_tcp_peer_t *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static sc_result_t peer_fail(sc_transport_t *tp, sc_tcp_peer_t *p, const char *fmt, ...) {
  char what[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  char pending[96] = "";
  if (p->nrecv && p->nsend)
    snprintf(pending, sizeof(pending), " while %d %s and %d %s were pending", p->nrecv,
             plural(p->nrecv, "receive", "receives"), p->nsend, plural(p->nsend, "send", "sends"));
  else if (p->nrecv)
    snprintf(pending, sizeof(pending), " while %d %s pending", p->nrecv,
             plural(p->nrecv, "receive was", "receives were"));
  else if (p->nsend)
    snprintf(pending, sizeof(pending), " while %d %s pending", p->nsend,
             plural(p->nsend, "send was", "sends were"));
  snprintf(p->err, sizeof(p->err), "%s %s%s (seen by rank %d)", p->name, what, pending, tp->rank);
  p->dead = 1;
  if (p->fd >= 0) close(p->fd);
  p->fd = -1;
  fail_queue(&p->sq_head, &p->sq_tail, &p->nsend, SC_ERR_REMOTE);
  fail_queue(&p->rq_head, &p->rq_tail, &p->nrecv, SC_ERR_REMOTE);
  SC_WARN(SC_SUBSYS_NET, "tcp: %s", p->err);
  return SC_ERR(SC_ERR_REMOTE, "%s", p->err);
}

static sc_result_t peer_io_error(sc_transport_t *tp, sc_tcp_peer_t *p, int err, int sending) {
  if (err == 0) return peer_fail(tp, p, "closed the connection");
  if (err == ECONNRESET || err == EPIPE || err == ENOTCONN)
    return peer_fail(tp, p, "reset the connection (%s)", strerror(err));
  return peer_fail(tp, p, "failed: %s: %s", sending ? "send" : "recv", strerror(err));
}

/* ---- send side ---- */

static sc_result_t send_progress(sc_transport_t *tp, sc_tcp_peer_t *p, size_t *moved) {
  while (p->sq_head) {
    struct iovec iov[SC_TCP_SEND_IOV];
    int n = 0;
    for (sc_tp_req_t *r = p->sq_head; r && n + 2 <= SC_TCP_SEND_IOV; r = r->next) {
      if (r->hdr_done < SC_TCP_HDR_LEN) {
        iov[n].iov_base = r->hdr + r->hdr_done;
        iov[n++].iov_len = SC_TCP_HDR_LEN - r->hdr_done;
      }
      if (r->done < r->len) {
        iov[n].iov_base = r->buf + r->done;
        iov[n++].iov_len = r->len - r->done;
      }
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(p->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return SC_SUCCESS;
      return peer_io_error(tp, p, errno, 1);
    }
    *moved += (size_t)w;
    size_t left = (size_t)w;
    while (p->sq_head) {
      sc_tp_req_t *r = p->sq_head;
      size_t h = SC_TCP_HDR_LEN - r->hdr_done;
      if (h > left) h = left;
      r->hdr_done += h;
      left -= h;
      size_t b = r->len - r->done;
      if (b > left) b = left;
      r->done += b;
      left -= b;
      if (r->hdr_done < SC_TCP_HDR_LEN || r->done < r->len) break;
      p->sq_head = r->next;
      if (!p->sq_head) p->sq_tail = NULL;
      p->nsend--;
      req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
    }
  }
  return SC_SUCCESS;
}

/* ---- receive side ---- */

/* A complete header for the head receive: check it before any payload is read. */
static sc_result_t recv_header_done(sc_transport_t *tp, sc_tcp_peer_t *p, sc_tp_req_t *r) {
  uint32_t magic = sc_tcp_get32(r->hdr);
  uint64_t len = sc_tcp_get64(r->hdr + 8);
  if (magic != SC_TCP_MSG_MAGIC)
    return peer_fail(tp, p, "sent a malformed message header (magic 0x%08x, expected 0x%08x)",
                     magic, SC_TCP_MSG_MAGIC);
  if (len != (uint64_t)r->len)
    return peer_fail(tp, p, "sent a %llu-byte message where %zu bytes were expected",
                     (unsigned long long)len, r->len);
  if (r->len == 0) {
    p->rq_head = r->next;
    if (!p->rq_head) p->rq_tail = NULL;
    p->nrecv--;
    req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
  }
  return SC_SUCCESS;
}

static sc_result_t recv_progress(sc_transport_t *tp, sc_tcp_peer_t *p, size_t *moved) {
  while (p->rq_head) {
    sc_tp_req_t *r = p->rq_head;
    struct iovec iov[2];
    int n = 0;
    if (r->hdr_done < SC_TCP_HDR_LEN) {
      iov[n].iov_base = r->hdr + r->hdr_done;
      iov[n++].iov_len = SC_TCP_HDR_LEN - r->hdr_done;
    } else {
      iov[n].iov_base = r->buf + r->done;
      iov[n++].iov_len = r->len - r->done;
      /* The next posted receive's header may ride along: it is only a header,
       * so nothing unchecked reaches a payload buffer. */
      if (r->next) {
        iov[n].iov_base = r->next->hdr;
        iov[n++].iov_len = SC_TCP_HDR_LEN;
      }
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t got = recvmsg(p->fd, &msg, MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return SC_SUCCESS;
      return peer_io_error(tp, p, errno, 0);
    }
    if (got == 0) return peer_io_error(tp, p, 0, 0);
    *moved += (size_t)got;
    size_t left = (size_t)got;
    if (r->hdr_done < SC_TCP_HDR_LEN) {
      r->hdr_done += left;
      if (r->hdr_done == SC_TCP_HDR_LEN) SC_CHECK(recv_header_done(tp, p, r));
      continue;
    }
    size_t b = r->len - r->done;
    if (b > left) b = left;
    r->done += b;
    left -= b;
    if (r->done < r->len) continue;
    sc_tp_req_t *next = r->next;
    p->rq_head = next;
    if (!p->rq_head) p->rq_tail = NULL;
    p->nrecv--;
    req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
    if (left > 0) {
      next->hdr_done = left;
      if (next->hdr_done == SC_TCP_HDR_LEN) SC_CHECK(recv_header_done(tp, p, next));
    }
  }
  return SC_SUCCESS;
}

/* ---- ops ---- */

static sc_result_t post_check(sc_transport_t *tp, int peer, const void *buf, size_t len,
                              sc_tp_req_t *req, const char *op) {
  if (!tp || !req) return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: NULL transport or request", op);
  if (!tp->connected)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: connect_all has not succeeded", op);
  if (peer < 0 || peer >= tp->nranks || peer == tp->rank)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: peer %d is not another rank of %d (this is rank %d)",
                  op, peer, tp->nranks, tp->rank);
  if (len && !buf) return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: NULL buffer for %zu bytes", op, len);
  if (req->state == SC_TP_REQ_PENDING)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp %s: request is still pending", op);
  return SC_SUCCESS;
}

static void req_init(sc_tp_req_t *req, int peer, int is_send, const void *buf, size_t len) {
  req->status = SC_SUCCESS;
  req->peer = peer;
  req->is_send = is_send;
  req->buf = (uint8_t *)buf;
  req->len = len;
  req->done = 0;
  req->hdr_done = 0;
  req->next = NULL;
  req->state = SC_TP_REQ_PENDING;
}

static sc_result_t tcp_isend(sc_transport_t *tp, int peer, const void *buf, size_t len,
                             sc_tp_req_t *req) {
  SC_CHECK(post_check(tp, peer, buf, len, req, "isend"));
  sc_tcp_peer_t *p = &tp->peers[peer];
  if (p->dead) {
    req_finish(req, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
    return SC_ERR(SC_ERR_REMOTE, "%s", p->err);
  }
  req_init(req, peer, 1, buf, len);
  sc_tcp_put32(req->hdr, SC_TCP_MSG_MAGIC);
  sc_tcp_put32(req->hdr + 4, 0);
  sc_tcp_put64(req->hdr + 8, (uint64_t)len);
  if (p->sq_tail)
    p->sq_tail->next = req;
  else
    p->sq_head = req;
  p->sq_tail = req;
  p->nsend++;
  if (p->sq_head != req) return SC_SUCCESS; /* progress() pushes the queue in order */
  size_t moved = 0;
  return send_progress(tp, p, &moved);
}

static sc_result_t tcp_irecv(sc_transport_t *tp, int peer, void *buf, size_t len,
                             sc_tp_req_t *req) {
  SC_CHECK(post_check(tp, peer, buf, len, req, "irecv"));
  sc_tcp_peer_t *p = &tp->peers[peer];
  if (p->dead) {
    req_finish(req, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
    return SC_ERR(SC_ERR_REMOTE, "%s", p->err);
  }
  req_init(req, peer, 0, buf, len);
  if (p->rq_tail)
    p->rq_tail->next = req;
  else
    p->rq_head = req;
  p->rq_tail = req;
  p->nrecv++;
  if (p->rq_head != req) return SC_SUCCESS;
  size_t moved = 0;
  return recv_progress(tp, p, &moved);
}

/* One pass over every peer with queued work. The first failure is returned
 * and its text kept; the other peers still move. */
static sc_result_t progress_pass(sc_transport_t *tp, size_t *moved, char *first_err,
                                 size_t errlen) {
  sc_result_t res = SC_SUCCESS;
  for (int i = 0; i < tp->nranks; i++) {
    sc_tcp_peer_t *p = &tp->peers[i];
    if (p->dead || p->fd < 0) continue;
    sc_result_t r = SC_SUCCESS;
    if (p->sq_head) r = send_progress(tp, p, moved);
    if (r == SC_SUCCESS && p->rq_head) r = recv_progress(tp, p, moved);
    if (r != SC_SUCCESS && res == SC_SUCCESS) {
      res = r;
      sc_error_get_detail(first_err, errlen);
    }
  }
  return res;
}

static sc_result_t tcp_progress(sc_transport_t *tp, int timeout_ms, int *progressed) {
  if (progressed) *progressed = 0;
  if (!tp) return SC_ERR(SC_ERR_INVALID_ARG, "tcp progress: NULL transport");
  char first_err[SC_ERRMSG_MAX];
  size_t moved = 0;
  sc_result_t res = progress_pass(tp, &moved, first_err, sizeof(first_err));
  if (moved == 0 && res == SC_SUCCESS && timeout_ms > 0) {
    int n = 0;
    tp->pfds[n] = (struct pollfd){.fd = tp->wake_fd, .events = POLLIN};
    tp->pfd_peer[n++] = -1;
    for (int i = 0; i < tp->nranks; i++) {
      sc_tcp_peer_t *p = &tp->peers[i];
      if (p->dead || p->fd < 0 || (!p->sq_head && !p->rq_head)) continue;
      tp->pfds[n] = (struct pollfd){
          .fd = p->fd, .events = (short)((p->sq_head ? POLLOUT : 0) | (p->rq_head ? POLLIN : 0))};
      tp->pfd_peer[n++] = i;
    }
    int rc = poll(tp->pfds, (nfds_t)n, timeout_ms);
    if (rc < 0 && errno != EINTR)
      return SC_ERR(SC_ERR_SYSTEM, "tcp progress: poll: %s", strerror(errno));
    if (rc > 0) {
      if (tp->pfds[0].revents) {
        uint64_t v;
        while (read(tp->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR) {
        }
      }
      if (rc > (tp->pfds[0].revents ? 1 : 0))
        res = progress_pass(tp, &moved, first_err, sizeof(first_err));
    }
  }
  if (progressed) *progressed = moved > 0;
  if (res != SC_SUCCESS) sc_error_set_detail(first_err);
  return res;
}

static void tcp_cancel_all(sc_transport_t *tp, sc_result_t why) {
  if (!tp) return;
  for (int i = 0; i < tp->nranks; i++) {
    sc_tcp_peer_t *p = &tp->peers[i];
    /* Half a message on the wire leaves the stream out of step with the
     * peer's: the connection cannot carry anything after it. */
    int torn = (p->sq_head && p->sq_head->hdr_done > 0) || (p->rq_head && p->rq_head->hdr_done > 0);
    fail_queue(&p->sq_head, &p->sq_tail, &p->nsend, why);
    fail_queue(&p->rq_head, &p->rq_tail, &p->nrecv, why);
    if (torn && !p->dead) {
      snprintf(p->err, sizeof(p->err),
               "%s: connection closed by rank %d after requests were "
               "cancelled mid-message (%s)",
               p->name, tp->rank, sc_strerror(why));
      p->dead = 1;
      if (p->fd >= 0) close(p->fd);
      p->fd = -1;
    }
  }
}

static sc_result_t tcp_reg(sc_transport_t *tp, void *buf, size_t len, void **handle) {
  if (handle) *handle = NULL;
  return SC_SUCCESS;
}

static sc_result_t tcp_dereg(sc_transport_t *tp, void *handle) {
  return SC_SUCCESS;
}

static void tcp_wake(sc_transport_t *tp) {
  if (!tp) return;
  uint64_t one = 1;
  /* EAGAIN means the counter is already non-zero: a wake-up is pending anyway. */
  while (write(tp->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

const sc_transport_ops_t sc_tcp_transport = {
    .name = "tcp",
    .create = sc_tcp_create,
    .connect_all = sc_tcp_connect_all,
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .progress = tcp_progress,
    .cancel_all = tcp_cancel_all,
    .reg = tcp_reg,
    .dereg = tcp_dereg,
    .wake = tcp_wake,
    .destroy = sc_tcp_destroy,
};
