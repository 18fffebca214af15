/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch wire: the pure parsers of what a peer sends (bounds and
 * authentication) and one connection's buffered non-blocking I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/socket.h"
#include "lib/base/wire.h"
#include "lib/control/watch_internal.h"

sc_result_t sc_watch_hello_parse(const uint8_t *h, size_t len, const uint8_t *secret,
                                 int job_nranks, int *rank, char *why, size_t whylen) {
  if (len != SC_WATCH_HELLO_LEN) {
    snprintf(why, whylen, "watch hello of %zu bytes, expected %d", len, SC_WATCH_HELLO_LEN);
    return SC_ERR_REMOTE;
  }
  if (sc_wire_get_u32(h) != SC_WATCH_HELLO_MAGIC) {
    snprintf(why, whylen, "not a watch hello (bad magic)");
    return SC_ERR_REMOTE;
  }
  unsigned ver = sc_wire_get_u16(h + 4);
  if (ver != SC_WATCH_VERSION) {
    snprintf(why, whylen, "watch protocol version %u, this library speaks %u", ver,
             SC_WATCH_VERSION);
    return SC_ERR_REMOTE;
  }
  if (!sc_secret_equal(h + 8, secret, SC_SECRET_LEN)) {
    snprintf(why, whylen, "wrong secret");
    return SC_ERR_REMOTE;
  }
  uint32_t r = sc_wire_get_u32(h + 8 + SC_SECRET_LEN), n = sc_wire_get_u32(h + 12 + SC_SECRET_LEN);
  if (job_nranks < 1 || n != (uint32_t)job_nranks || r == 0 || r >= n) {
    snprintf(why, whylen, "watch hello for rank %u of %u, this job has %d ranks", r, n, job_nranks);
    return SC_ERR_REMOTE;
  }
  *rank = (int)r;
  return SC_SUCCESS;
}

sc_result_t sc_watch_frame_parse(const uint8_t *b, size_t len, int nranks, sc_watch_frame_t *out,
                                 char *why, size_t whylen) {
  if (len != SC_WATCH_HDR_LEN) {
    snprintf(why, whylen, "watch frame header of %zu bytes, expected %d", len, SC_WATCH_HDR_LEN);
    return SC_ERR_REMOTE;
  }
  uint32_t magic = sc_wire_get_u32(b);
  uint16_t tlen = sc_wire_get_u16(b + 6);
  uint32_t subject = sc_wire_get_u32(b + 8), code = sc_wire_get_u32(b + 12);
  if (magic != SC_WATCH_FRAME_MAGIC) {
    snprintf(why, whylen, "sent garbage on the watch connection (magic 0x%08x)", magic);
    return SC_ERR_REMOTE;
  }
  if (b[4] != SC_WATCH_VERSION) {
    snprintf(why, whylen, "watch frame version %u, this library speaks %u", b[4], SC_WATCH_VERSION);
    return SC_ERR_REMOTE;
  }
  if (b[5] < SC_WATCH_HEARTBEAT || b[5] > SC_WATCH_QUIET || tlen > SC_WATCH_TEXT_MAX ||
      nranks < 1 || subject >= (uint32_t)nranks || code > SC_ERR_INTERNAL) {
    snprintf(why, whylen, "invalid watch frame (type %u, %u bytes, rank %u, code %u)", b[5], tlen,
             subject, code);
    return SC_ERR_REMOTE;
  }
  if ((b[5] == SC_WATCH_HEARTBEAT || b[5] == SC_WATCH_OP) && tlen != 0 &&
      tlen != SC_WATCH_HB_OP_LEN) {
    snprintf(why, whylen, "invalid watch heartbeat of %u bytes (0 or %d)", tlen,
             SC_WATCH_HB_OP_LEN);
    return SC_ERR_REMOTE;
  }
  if (b[5] == SC_WATCH_QUIET && tlen != SC_WATCH_QUIET_LEN) {
    snprintf(why, whylen, "invalid watch quiet report of %u bytes (%d)", tlen, SC_WATCH_QUIET_LEN);
    return SC_ERR_REMOTE;
  }
  *out = (sc_watch_frame_t){.type = b[5], .len = tlen, .subject = subject, .code = code};
  return SC_SUCCESS;
}

sc_result_t sc_watch_hb_parse(const uint8_t *b, size_t len, sc_watch_op_t *out, char *why,
                              size_t whylen) {
  if (len == 0) {
    memset(out, 0, sizeof(*out));
    return SC_SUCCESS;
  }
  if (len != SC_WATCH_HB_OP_LEN) {
    snprintf(why, whylen, "invalid watch heartbeat of %zu bytes (0 or %d)", len,
             SC_WATCH_HB_OP_LEN);
    return SC_ERR_REMOTE;
  }
  int zero = 1;
  for (int i = 0; i < SC_WATCH_FP_LEN && zero; i++) zero = b[8 + i] == 0;
  if (zero) {
    snprintf(why, whylen, "a watch heartbeat reports a call without a print");
    return SC_ERR_REMOTE;
  }
  out->busy = 1;
  out->seq = sc_wire_get_u64(b);
  memcpy(out->fp, b + 8, SC_WATCH_FP_LEN);
  return SC_SUCCESS;
}

size_t sc_watch_hb_put(const sc_watch_op_t *op, uint8_t out[SC_WATCH_HB_OP_LEN]) {
  if (!op->busy) return 0;
  sc_wire_put_u64(out, op->seq);
  memcpy(out + 8, op->fp, SC_WATCH_FP_LEN);
  return SC_WATCH_HB_OP_LEN;
}

void sc_wconn_reset(sc_wconn_t *c) {
  free(c->b);
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  c->rank = -1;
}

sc_wconn_buf_t *sc_wconn_buf(sc_wconn_t *c) {
  if (!c->b) c->b = malloc(sizeof(*c->b));
  return c->b;
}

void sc_wconn_close(sc_wconn_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->out_off = c->out_len = c->in_done = 0;
}

/* Sends what is queued; -1 when the connection is broken. */
int sc_wconn_flush(sc_wconn_t *c) {
  while (c->out_off < c->out_len) { /* out_len > 0: the buffers exist */
    ssize_t n =
        send(c->fd, c->b->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n <= 0) return -1;
    c->out_off += (size_t)n;
  }
  c->out_off = c->out_len = 0;
  return 0;
}

/* Queues one frame (its bytes cut at SC_WATCH_TEXT_MAX); a report (a
 * heartbeat, a forwarded call or quiet) only when nothing else waits: any
 * frame proves liveness, and the next report replaces this one. */
void sc_wconn_queue_bytes(sc_wconn_t *c, int type, int subject, int code, const void *data,
                          size_t len) {
  if (c->fd < 0 || c->eof) return;
  if ((type == SC_WATCH_HEARTBEAT || type == SC_WATCH_OP || type == SC_WATCH_QUIET) &&
      c->out_len > c->out_off)
    return;
  size_t tlen = data ? len : 0;
  if (tlen > SC_WATCH_TEXT_MAX) tlen = SC_WATCH_TEXT_MAX;
  sc_wconn_buf_t *b = sc_wconn_buf(c);
  if (!b) return; /* as for a peer that reads nothing */
  if (c->out_off) {
    memmove(b->out, b->out + c->out_off, c->out_len - c->out_off);
    c->out_len -= c->out_off;
    c->out_off = 0;
  }
  if (c->out_len + SC_WATCH_HDR_LEN + tlen > sizeof(b->out)) return; /* peer reads nothing */
  uint8_t *p = b->out + c->out_len;
  sc_wire_put_u32(p, SC_WATCH_FRAME_MAGIC);
  p[4] = SC_WATCH_VERSION;
  p[5] = (uint8_t)type;
  sc_wire_put_u16(p + 6, (uint16_t)tlen);
  sc_wire_put_u32(p + 8, (uint32_t)subject);
  sc_wire_put_u32(p + 12, (uint32_t)code);
  if (tlen) memcpy(p + SC_WATCH_HDR_LEN, data, tlen);
  c->out_len += SC_WATCH_HDR_LEN + tlen;
  if (sc_wconn_flush(c) < 0) c->out_off = c->out_len = 0; /* the read side reports it */
}

void sc_wconn_queue(sc_wconn_t *c, int type, int subject, int code, const char *text) {
  sc_wconn_queue_bytes(c, type, subject, code, text, text ? strlen(text) : 0);
}
