/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport data path: per socket, a ring of segments to send and a ring
 * of segments expected, each pointing into a caller's request.
 *
 * Bytes go straight between the user's buffers and the kernel (gathered
 * headers and payloads on send, scatter on receive); the only copies are the
 * kernel's. A socket is read only for a posted segment and never past it, so
 * every segment header is checked against the posted message (print, sequence
 * number and whole length) before a byte of its payload lands anywhere. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/tcp/tcp_io.h"

/* iovecs gathered into one sendmsg: several small queued messages leave in a
 * single syscall. */
#define SC_TCP_SEND_IOV 64

static void req_finish(sc_tp_req_t *r, sc_tp_req_state_t state, sc_result_t status) {
  r->status = status;
  /* The waiter reads the payload after it sees the state. */
  __atomic_store_n(&r->state, (int)state, __ATOMIC_RELEASE);
}

static sc_tcp_seg_t *ring_at(sc_tcp_ring_t *q, size_t i) {
  return &q->v[(q->head + i) % q->cap];
}

static void ring_pop(sc_tcp_ring_t *q) {
  q->head = (q->head + 1) % q->cap;
  q->count--;
}

sc_result_t sc_tcp_ring_reserve(sc_tcp_ring_t *q, size_t more) {
  if (q->count + more <= q->cap) return SC_SUCCESS;
  size_t ncap = q->cap ? q->cap : 16;
  while (ncap < q->count + more) ncap *= 2;
  sc_tcp_seg_t *v = malloc(ncap * sizeof(*v));
  if (!v) return SC_ERR(SC_ERR_NOMEM, "tcp: out of memory for a queue of %zu messages", ncap);
  for (size_t i = 0; i < q->count; i++) v[i] = *ring_at(q, i);
  free(q->v);
  q->v = v;
  q->cap = ncap;
  q->head = 0;
  return SC_SUCCESS;
}

sc_tcp_seg_t *sc_tcp_ring_push(sc_tcp_ring_t *q) {
  sc_tcp_seg_t *s = &q->v[(q->head + q->count) % q->cap];
  q->count++;
  return s;
}

/* Fails every pending request with a segment in q (once each) and empties q. */
static void ring_fail(sc_tcp_ring_t *q, sc_result_t why) {
  for (size_t i = 0; i < q->count; i++) {
    sc_tp_req_t *r = ring_at(q, i)->req;
    if (r->state == SC_TP_REQ_PENDING) req_finish(r, SC_TP_REQ_ERROR, why);
  }
  q->head = q->count = 0;
}

static const char *plural(int n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

/* Requests that waited for the pair to be connected: none of their bytes
 * moved and none took a sequence number. */
static void pend_fail(sc_tcp_peer_t *p, sc_result_t why) {
  sc_tp_req_t *r = p->pend;
  p->pend = p->pend_tail = NULL;
  while (r) {
    sc_tp_req_t *next = r->u.tcp.next;
    if (r->state == SC_TP_REQ_PENDING) req_finish(r, SC_TP_REQ_ERROR, why);
    r = next;
  }
}

static void peer_fail_all(sc_tcp_peer_t *p, sc_result_t why) {
  pend_fail(p, why);
  for (int k = 0; k < p->nsocks; k++) {
    ring_fail(&p->socks[k].sq, why);
    ring_fail(&p->socks[k].rq, why);
  }
  p->nsend = p->nrecv = 0;
}

/* The peer's streams are unusable: close them, fail what is queued, keep the
 * text; returns `code` (SC_ERR_REMOTE, or SC_ERR_MISMATCH for the receive
 * that met another operation's message) with the text. */
static sc_result_t peer_fail_v(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock, sc_result_t code,
                               const char *fmt, va_list ap) {
  char what[200];
  vsnprintf(what, sizeof(what), fmt, ap);
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
  char where[48] = "";
  if (p->nsocks > 1) snprintf(where, sizeof(where), "socket %d of %d, ", sock, p->nsocks);
  char name[SC_TCP_NAME_LEN];
  sc_errtext_set(&p->err, SC_TCP_ERR_LEN, "%s %s%s (%sseen by rank %d)",
                 sc_tcp_peer_name(tp, p, name), what, pending, where, tp->base.rank);
  p->dead = 1;
  sc_tcp_peer_close(p);
  peer_fail_all(p, SC_ERR_REMOTE);
  SC_WARN(SC_SUBSYS_NET, "tcp: %s", sc_tcp_peer_err(p));
  return SC_ERR(code, "%s", sc_tcp_peer_err(p));
}

sc_result_t sc_tcp_peer_fail(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock, const char *fmt,
                             ...) {
  va_list ap;
  va_start(ap, fmt);
  sc_result_t r = peer_fail_v(tp, p, sock, SC_ERR_REMOTE, fmt, ap);
  va_end(ap);
  return r;
}

static sc_result_t peer_fail_code(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock,
                                  sc_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static sc_result_t peer_fail_code(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock,
                                  sc_result_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sc_result_t r = peer_fail_v(tp, p, sock, code, fmt, ap);
  va_end(ap);
  return r;
}

static sc_result_t peer_io_error(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock, int err,
                                 int sending) {
  if (err == 0) return sc_tcp_peer_fail(tp, p, sock, "closed the connection");
  if (err == ECONNRESET || err == EPIPE || err == ENOTCONN)
    return sc_tcp_peer_fail(tp, p, sock, "reset the connection (%s)", strerror(err));
  return sc_tcp_peer_fail(tp, p, sock, "failed: %s: %s", sending ? "send" : "recv", strerror(err));
}

/* Segment s of its request is complete; the request is when all are. */
static void seg_complete(sc_tcp_peer_t *p, sc_tcp_seg_t *s, int sending) {
  sc_tp_req_t *r = s->req;
  if (--r->u.tcp.segs_left > 0) return;
  if (sending)
    p->nsend--;
  else
    p->nrecv--;
  req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
}

/* ---- send side ---- */

sc_result_t sc_tcp_send_progress(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock,
                                 size_t *moved) {
  sc_tcp_sock_t *sk = &p->socks[sock];
  sc_tcp_ring_t *q = &sk->sq;
  while (q->count) {
    struct iovec iov[SC_TCP_SEND_IOV];
    int n = 0;
    for (size_t i = 0; i < q->count && n + 2 <= SC_TCP_SEND_IOV; i++) {
      sc_tcp_seg_t *s = ring_at(q, i);
      if (s->hdr_done < SC_TCP_HDR_LEN) {
        iov[n].iov_base = s->hdr + s->hdr_done;
        iov[n++].iov_len = SC_TCP_HDR_LEN - s->hdr_done;
      }
      if (s->done < s->len) {
        iov[n].iov_base = s->req->buf + s->off + s->done;
        iov[n++].iov_len = s->len - s->done;
      }
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(sk->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return SC_SUCCESS;
      return peer_io_error(tp, p, sock, errno, 1);
    }
    *moved += (size_t)w;
    size_t left = (size_t)w;
    while (q->count) {
      sc_tcp_seg_t *s = ring_at(q, 0);
      size_t h = SC_TCP_HDR_LEN - s->hdr_done;
      if (h > left) h = left;
      s->hdr_done += h;
      left -= h;
      size_t b = s->len - s->done;
      if (b > left) b = left;
      s->done += b;
      left -= b;
      if (s->hdr_done < SC_TCP_HDR_LEN || s->done < s->len) break;
      ring_pop(q);
      seg_complete(p, s, 1);
    }
  }
  return SC_SUCCESS;
}

/* ---- receive side ---- */

sc_tcp_hdr_verdict_t sc_tcp_hdr_check(const uint8_t hdr[SC_TCP_HDR_LEN], uint32_t seq, size_t len,
                                      const uint8_t *fp, sc_tcp_hdr_t *out) {
  out->magic = sc_wire_get_u32(hdr);
  out->seq = sc_wire_get_u32(hdr + 4);
  out->len = sc_wire_get_u64(hdr + 8);
  memcpy(out->fp, hdr + SC_TCP_HDR_FP, SC_TP_FP_LEN);
  if (out->magic != SC_TCP_MSG_MAGIC) return SC_TCP_HDR_BAD_MAGIC;
  if (sc_tp_prints_differ(fp, out->fp)) return SC_TCP_HDR_BAD_PRINT;
  if (out->seq != seq) return SC_TCP_HDR_BAD_SEQ;
  if (out->len != (uint64_t)len) return SC_TCP_HDR_BAD_LEN;
  return SC_TCP_HDR_OK;
}

static void fp_hex(char out[2 * SC_TP_FP_LEN + 1], const uint8_t fp[SC_TP_FP_LEN]) {
  for (int i = 0; i < SC_TP_FP_LEN; i++) snprintf(out + 2 * i, 3, "%02x", fp[i]);
}

/* The head segment's header is complete: check it before any payload reaches the
 * receive's buffer. */
static sc_result_t head_header_done(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock) {
  sc_tcp_ring_t *q = &p->socks[sock].rq;
  sc_tcp_seg_t *s = ring_at(q, 0);
  sc_tcp_hdr_t h;
  switch (sc_tcp_hdr_check(s->hdr, s->seq, s->req->len, s->req->fp, &h)) {
  case SC_TCP_HDR_OK:
    break;
  case SC_TCP_HDR_BAD_MAGIC:
    return sc_tcp_peer_fail(tp, p, sock,
                            "sent a malformed message header (magic 0x%08x, expected 0x%08x)",
                            h.magic, SC_TCP_MSG_MAGIC);
  case SC_TCP_HDR_BAD_PRINT: {
    /* The receive learns the peer's call (the executor names both); the
     * stream holds the rest of a message nobody here expects, so the peer
     * fails as if it had sent garbage, but after this receive's verdict. */
    sc_tp_req_t *r = s->req;
    memcpy(r->peer_fp, h.fp, SC_TP_FP_LEN);
    req_finish(r, SC_TP_REQ_ERROR, SC_ERR_MISMATCH);
    char theirs[2 * SC_TP_FP_LEN + 1], ours[2 * SC_TP_FP_LEN + 1];
    fp_hex(theirs, h.fp);
    fp_hex(ours, r->fp);
    return peer_fail_code(tp, p, sock, SC_ERR_MISMATCH,
                          "sent a message of another operation (print %s where this rank's "
                          "receive has %s)",
                          theirs, ours);
  }
  case SC_TCP_HDR_BAD_SEQ:
    return sc_tcp_peer_fail(tp, p, sock,
                            "sent part of its message #%u (%llu bytes) where part of message #%u "
                            "(%zu bytes) was expected: the two sides' message lengths disagree",
                            h.seq, (unsigned long long)h.len, s->seq, s->req->len);
  default:
    return sc_tcp_peer_fail(tp, p, sock, "sent a %llu-byte message where %zu bytes were expected",
                            (unsigned long long)h.len, s->req->len);
  }
  if (s->len == 0) {
    ring_pop(q);
    seg_complete(p, s, 0);
  }
  return SC_SUCCESS;
}

sc_result_t sc_tcp_recv_progress(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock,
                                 size_t *moved) {
  sc_tcp_sock_t *sk = &p->socks[sock];
  sc_tcp_ring_t *q = &sk->rq;
  while (q->count) {
    sc_tcp_seg_t *s = ring_at(q, 0);
    struct iovec iov[2];
    int n = 0;
    if (s->hdr_done < SC_TCP_HDR_LEN) {
      iov[n].iov_base = s->hdr + s->hdr_done;
      iov[n++].iov_len = SC_TCP_HDR_LEN - s->hdr_done;
      if (s->len > 0 && s->len <= SC_TCP_STAGE_BYTES) {
        iov[n].iov_base = tp->stage;
        iov[n++].iov_len = s->len;
      }
    } else {
      iov[n].iov_base = s->req->buf + s->off + s->done;
      iov[n++].iov_len = s->len - s->done;
      /* The next posted segment's header may ride along: it is only a header,
       * so nothing unchecked reaches a payload buffer. */
      if (q->count > 1) {
        iov[n].iov_base = ring_at(q, 1)->hdr;
        iov[n++].iov_len = SC_TCP_HDR_LEN;
      }
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t got = recvmsg(sk->fd, &msg, MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return SC_SUCCESS;
      return peer_io_error(tp, p, sock, errno, 0);
    }
    if (got == 0) return peer_io_error(tp, p, sock, 0, 0);
    *moved += (size_t)got;
    size_t left = (size_t)got;
    if (s->hdr_done < SC_TCP_HDR_LEN) {
      const size_t h = SC_TCP_HDR_LEN - s->hdr_done;
      if (left < h) {
        s->hdr_done += left;
        continue;
      }
      s->hdr_done = SC_TCP_HDR_LEN;
      left -= h;
      SC_CHECK(head_header_done(tp, p, sock));
      /* Staged payload bytes arrive only after a whole header. */
      if (left == 0) continue;
      memcpy(s->req->buf + s->off, tp->stage, left);
      s->done = left;
      if (s->done < s->len) continue;
      ring_pop(q);
      seg_complete(p, s, 0);
      continue;
    }
    size_t b = s->len - s->done;
    if (b > left) b = left;
    s->done += b;
    left -= b;
    if (s->done < s->len) continue;
    ring_pop(q);
    seg_complete(p, s, 0);
    if (left > 0) {
      sc_tcp_seg_t *next = ring_at(q, 0);
      next->hdr_done = left;
      if (next->hdr_done == SC_TCP_HDR_LEN) SC_CHECK(head_header_done(tp, p, sock));
    }
  }
  return SC_SUCCESS;
}

/* ---- cancel ---- */

/* Drops one direction's pending requests. When none of their bytes moved and
 * they are the newest messages of that direction, the sequence number
 * rewinds as if they had never been posted, so that the stream stays
 * in step with the peer's; returns 1 when that is impossible. */
static int cancel_dir(sc_tcp_peer_t *p, int sending, sc_result_t why) {
  int npend = sending ? p->nsend : p->nrecv;
  uint32_t *seq = sending ? &p->send_seq : &p->recv_seq;
  int torn = 0;
  uint32_t oldest_d = 0;
  for (int k = 0; k < p->nsocks; k++) {
    sc_tcp_ring_t *q = sending ? &p->socks[k].sq : &p->socks[k].rq;
    for (size_t i = 0; i < q->count; i++) {
      sc_tcp_seg_t *s = ring_at(q, i);
      if (s->hdr_done > 0 || s->done > 0 || s->req->u.tcp.segs_left != s->nseg) torn = 1;
      uint32_t d = *seq - s->seq;
      if (d > oldest_d) oldest_d = d;
    }
    ring_fail(q, why);
  }
  if (oldest_d != (uint32_t)npend) torn = 1;
  if (!torn) *seq -= (uint32_t)npend;
  if (sending)
    p->nsend = 0;
  else
    p->nrecv = 0;
  return torn;
}

void sc_tcp_peer_cancel(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, sc_result_t why) {
  if (!p->socks || p->dead || !p->connected) {
    peer_fail_all(p, why);
    return;
  }
  int torn = cancel_dir(p, 1, why);
  torn |= cancel_dir(p, 0, why);
  /* A communicator that failed is never used again (its error is sticky):
   * closing now makes the peers blocked on this rank fail at once instead of
   * at their timeout, even while the application keeps the communicator. */
  int failed = why != SC_ERR_ABORTED && why != SC_ERR_INVALID_ARG;
  if (!torn && !failed) return;
  /* Half a message on the wire leaves the streams out of step with the
   * peer's: the connection cannot carry anything after it. */
  char name[SC_TCP_NAME_LEN];
  sc_errtext_set(&p->err, SC_TCP_ERR_LEN, "%s: connection closed by rank %d after %s (%s)",
                 sc_tcp_peer_name(tp, p, name), tp->base.rank,
                 torn ? "requests were cancelled mid-message" : "its communicator failed",
                 sc_strerror(why));
  p->dead = 1;
  sc_tcp_peer_close(p);
}
