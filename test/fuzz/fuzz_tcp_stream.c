/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target: the TCP receive path (sc_tcp_recv_progress in tcp_io.c) on
 * real sockets. Up to 6 receives are posted on 1..4 sockets the way tcp.c
 * posts them (segments placed by sc_tcp_stripes); the sender's side is
 * written here from the wire format (tcp_internal.h), fed in chunks of
 * fuzzer-chosen sizes, with fuzzer-chosen bytes flipped and junk appended.
 * The input is
 *   u8 unchecked << 2 | nsocks-1 | u8 nmsgs-1 | u16 length code per message |
 *   u8 first junk byte | (u8 socket, u8 chunk, u24 stream offset, u8 xor)...
 * Every message carries a print of its own; bit m of `unchecked` posts
 * receive m without one (it then checks none).
 * A length code below 0x8000 is the length; above, the first two are
 * SC_TCP_STRIPE_MIN + 8 * (code - 0x8000), the others code - 0x8000.
 * Each tuple writes a chunk of up to 255 bytes (0: 4096) to a socket and
 * flips one byte of that socket's stream at the offset. Checked against the
 * model: without flipped header bytes that count (the print of a receive
 * posted without one does not) every receive completes, its buffer holds the
 * payload with exactly the flipped payload bytes changed and the junk after
 * the last segment is never read; a receive whose header had a flipped byte
 * never completes, no byte of that segment's payload lands, and the peer is
 * failed. A receive failed with SC_ERR_MISMATCH is one whose checked print
 * was flipped behind an intact magic, it holds that header's print in
 * peer_fp, it is the only one, and the receive path returned SC_ERR_MISMATCH
 * exactly once. Receive buffers are exact-size heap blocks, so a byte written
 * past one is caught by ASan. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test/fuzz/fuzz_common.h"
#include "transport/tcp/tcp_io.h"

const char *const fuzz_target_name = "tcp_stream";

#define MAX_SOCKS 4
#define MAX_MSGS  6
#define JUNK      64

typedef struct wstream {
  uint8_t *b;
  size_t len, cap, sent;
  uint8_t *orig;     /* the stream before the flips */
  size_t end;        /* bytes of real segments; junk follows */
  uint8_t *hdr_mask; /* 1 + the segment's index where a byte belongs to its header */
  int fd;
} wstream_t;

/* A segment as written: its message, where its header starts in its stream. */
typedef struct wseg {
  int m, sock;
  size_t at, off, len;
} wseg_t;

#define MAX_SEGS (MAX_MSGS * MAX_SOCKS)

static void ws_add(wstream_t *w, const uint8_t *p, size_t n, int hdr_of) {
  if (w->len + n > w->cap) {
    size_t c = w->cap ? w->cap : 256;
    while (c < w->len + n) c *= 2;
    w->b = realloc(w->b, c);
    w->hdr_mask = realloc(w->hdr_mask, c);
    w->orig = realloc(w->orig, c);
    w->cap = c;
  }
  memcpy(w->b + w->len, p, n);
  memcpy(w->orig + w->len, p, n);
  memset(w->hdr_mask + w->len, hdr_of, n);
  w->len += n;
}

static void put_be(uint8_t *p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static uint8_t payload_byte(int m, size_t i) {
  return (uint8_t)(i * 7 + (i >> 9) + (size_t)m * 29 + 1);
}

/* Message m's print, as its sender writes it: never all zero. */
static void msg_print(uint8_t fp[SC_TP_FP_LEN], int m) {
  for (int i = 0; i < SC_TP_FP_LEN; i++) fp[i] = (uint8_t)(0x5c + 13 * i + 31 * m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setenv("SC_DEBUG", "NONE", 0); /* every failed peer would log a warning */
  if (size < 3) return 0;
  int nsocks = 1 + data[0] % MAX_SOCKS, nmsgs = 1 + data[1] % MAX_MSGS;
  int unchecked = data[0] / MAX_SOCKS;
  size_t pos = 2;
  size_t lens[MAX_MSGS];
  int big = 0;
  for (int m = 0; m < nmsgs; m++, pos += 2) {
    size_t v = pos + 1 < size ? ((size_t)data[pos] << 8 | data[pos + 1]) : 0;
    /* Striping starts above SC_TCP_STRIPE_MIN; two such messages at most
     * keep an execution short. */
    lens[m] = (v & 0x8000) && big++ < 2 ? SC_TCP_STRIPE_MIN + (v & 0x7fff) * 8 : v & 0x7fff;
  }
  uint8_t junk = pos < size ? data[pos++] : 0;

  sc_tcp_peer_t peers[2];
  sc_tcp_transport_t tp;
  memset(&tp, 0, sizeof(tp));
  memset(peers, 0, sizeof(peers));
  tp.base.rank = 0;
  tp.base.nranks = 2;
  tp.peers = peers;
  sc_tcp_peer_t *p = &peers[1];
  wstream_t ws[MAX_SOCKS];
  memset(ws, 0, sizeof(ws));
  for (int k = 0; k < MAX_SOCKS; k++) ws[k].fd = -1;
  sc_tp_req_t reqs[MAX_MSGS];
  uint8_t *bufs[MAX_MSGS] = {0}, *want[MAX_MSGS] = {0};
  int hdr_bad[MAX_MSGS] = {0};
  wseg_t segs[MAX_SEGS];
  int nsegs = 0, seg_bad[MAX_SEGS] = {0};
  int mismatch_returns = 0;
  if (sc_tcp_peer_init_socks(&tp, 1, nsocks) != SC_SUCCESS) return 0;
  for (int k = 0; k < nsocks; k++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) goto out;
    p->socks[k].fd = sv[0];
    ws[k].fd = sv[1];
  }

  /* Post every receive as tcp.c does and write the sender's streams. */
  for (int m = 0; m < nmsgs; m++) {
    size_t stripe;
    int nseg = sc_tcp_stripes(lens[m], nsocks, &stripe);
    bufs[m] = malloc(lens[m] ? lens[m] : 1);
    want[m] = malloc(lens[m] ? lens[m] : 1);
    if (!bufs[m] || !want[m]) goto out;
    memset(bufs[m], 0xee, lens[m] ? lens[m] : 1);
    for (size_t i = 0; i < lens[m]; i++) want[m][i] = payload_byte(m, i);
    sc_tp_req_t *r = &reqs[m];
    memset(r, 0, sizeof(*r));
    r->peer = 1;
    r->buf = bufs[m];
    r->len = lens[m];
    r->u.tcp.segs_left = nseg;
    r->state = SC_TP_REQ_PENDING;
    uint8_t fp[SC_TP_FP_LEN];
    msg_print(fp, m);
    if (!(unchecked >> m & 1)) memcpy(r->fp, fp, SC_TP_FP_LEN);
    uint32_t seq = p->recv_seq++;
    for (int j = 0; j < nseg; j++) {
      int k = j; /* segment j on socket j (tcp_internal.h) */
      if (sc_tcp_ring_reserve(&p->socks[k].rq, 1) != SC_SUCCESS) goto out;
      sc_tcp_seg_t *s = sc_tcp_ring_push(&p->socks[k].rq);
      memset(s, 0, sizeof(*s));
      s->req = r;
      s->off = (size_t)j * stripe;
      s->len = lens[m] - s->off < stripe ? lens[m] - s->off : stripe;
      s->seq = seq;
      s->nseg = nseg;
      uint8_t h[SC_TCP_HDR_LEN];
      put_be(h, 0x5343544du, 4);
      put_be(h + 4, seq, 4);
      put_be(h + 8, lens[m], 8);
      memcpy(h + 16, fp, SC_TP_FP_LEN);
      segs[nsegs] = (wseg_t){.m = m, .sock = k, .at = ws[k].len, .off = s->off, .len = s->len};
      ws_add(&ws[k], h, SC_TCP_HDR_LEN, ++nsegs);
      ws_add(&ws[k], want[m] + s->off, s->len, 0);
    }
    p->nrecv++;
  }
  for (int k = 0; k < nsocks; k++) {
    ws[k].end = ws[k].len;
    uint8_t j[JUNK];
    for (int i = 0; i < JUNK; i++) j[i] = (uint8_t)(junk + i);
    ws_add(&ws[k], j, JUNK, 0);
  }

  /* Flip bytes and note what each flip means for the model. */
  size_t chunks_at = pos;
  for (size_t q = pos; q + 6 <= size; q += 6) {
    wstream_t *w = &ws[data[q] % nsocks];
    size_t off = ((size_t)data[q + 2] << 16 | (size_t)data[q + 3] << 8 | data[q + 4]);
    uint8_t x = data[q + 5];
    if (!x || w->end == 0) continue;
    w->b[off % w->end] ^= x;
  }
  /* Two flips of one byte may cancel: what counts is the final stream. A
   * flipped print byte counts where the receive checks the print. */
  for (int k = 0; k < nsocks; k++)
    for (size_t i = 0; i < ws[k].end; i++) {
      if (!ws[k].hdr_mask[i] || ws[k].b[i] == ws[k].orig[i]) continue;
      int g = ws[k].hdr_mask[i] - 1, m = segs[g].m;
      int in_print = i - segs[g].at >= 16;
      if (in_print && (unchecked >> m & 1)) continue;
      seg_bad[g] = 1;
      hdr_bad[m] = 1;
    }
  /* Payload flips: the expected buffer changes where the stream did. */
  for (int k = 0; k < nsocks; k++) {
    size_t at = 0;
    for (size_t i = 0; i < p->socks[k].rq.count; i++) {
      sc_tcp_seg_t *s = &p->socks[k].rq.v[(p->socks[k].rq.head + i) % p->socks[k].rq.cap];
      at += SC_TCP_HDR_LEN;
      int m = (int)(s->req - reqs);
      memcpy(want[m] + s->off, ws[k].b + at, s->len);
      at += s->len;
    }
  }

  /* Feed the streams in the fuzzer's chunks, then whatever is left, and
   * let the receive path run after every write. */
  size_t q = chunks_at;
  for (int rounds = 0; rounds < 100000; rounds++) {
    int k = q + 1 < size ? data[q] % nsocks : rounds % nsocks;
    size_t chunk = q + 1 < size ? (data[q + 1] ? data[q + 1] : 4096) : 65536;
    if (q + 1 < size) q += 6;
    wstream_t *w = &ws[k];
    int wrote = 0;
    if (w->fd >= 0 && w->sent < w->len) {
      size_t n = w->len - w->sent < chunk ? w->len - w->sent : chunk;
      ssize_t s = send(w->fd, w->b + w->sent, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (s > 0) {
        w->sent += (size_t)s;
        wrote = 1;
      }
    }
    size_t moved = 0;
    for (int j = 0; j < nsocks && !p->dead; j++)
      if (p->socks[j].rq.count)
        mismatch_returns += sc_tcp_recv_progress(&tp, p, j, &moved) == SC_ERR_MISMATCH;
    if (p->dead || p->nrecv == 0) break;
    int all_sent = 1;
    for (int j = 0; j < nsocks; j++) all_sent &= ws[j].sent == ws[j].len;
    if (!wrote && !moved && all_sent) break;
  }

  int any_bad = 0, mismatches = 0;
  /* No byte of a segment whose header is bad lands in the buffer. */
  for (int g = 0; g < nsegs; g++) {
    if (!seg_bad[g]) continue;
    for (size_t i = 0; i < segs[g].len; i++)
      FUZZ_REQUIRE(bufs[segs[g].m][segs[g].off + i] == 0xee,
                   "message %d: payload byte %zu landed behind a bad header", segs[g].m,
                   segs[g].off + i);
  }
  for (int m = 0; m < nmsgs; m++) {
    any_bad |= hdr_bad[m];
    int st = reqs[m].state;
    if (st == SC_TP_REQ_ERROR && reqs[m].status == SC_ERR_MISMATCH) {
      mismatches++;
      /* One of its segments has the right magic and a print, checked, that
       * is not the posted one: the one peer_fp holds. */
      int found = 0;
      for (int g = 0; g < nsegs && !found; g++) {
        if (segs[g].m != m) continue;
        const uint8_t *h = ws[segs[g].sock].b + segs[g].at;
        found = !(unchecked >> m & 1) && memcmp(h, "SCTM", 4) == 0 &&
                memcmp(h + 16, reqs[m].fp, SC_TP_FP_LEN) != 0 &&
                memcmp(h + 16, reqs[m].peer_fp, SC_TP_FP_LEN) == 0;
      }
      FUZZ_REQUIRE(found, "message %d failed with SC_ERR_MISMATCH but no header says so", m);
    } else if (st == SC_TP_REQ_ERROR) {
      FUZZ_REQUIRE(reqs[m].status == SC_ERR_REMOTE, "message %d failed with %d", m,
                   (int)reqs[m].status);
    }
    if (hdr_bad[m]) {
      FUZZ_REQUIRE(st != SC_TP_REQ_DONE, "message %d completed with a corrupted header", m);
      continue;
    }
    if (st == SC_TP_REQ_DONE)
      FUZZ_REQUIRE(memcmp(bufs[m], want[m], lens[m]) == 0, "message %d has wrong bytes", m);
  }
  FUZZ_REQUIRE(mismatches <= 1 && mismatch_returns == mismatches,
               "%d receives failed with SC_ERR_MISMATCH, %d returns said so", mismatches,
               mismatch_returns);
  if (any_bad) {
    FUZZ_REQUIRE(p->dead, "a corrupted header did not fail the peer");
  } else {
    FUZZ_REQUIRE(!p->dead, "peer failed on a well-formed stream: %s", p->err);
    for (int m = 0; m < nmsgs; m++)
      FUZZ_REQUIRE(reqs[m].state == SC_TP_REQ_DONE, "message %d (%zu bytes) did not complete", m,
                   lens[m]);
    /* Reads stop at the last posted segment: the junk is still queued. */
    for (int k = 0; k < nsocks; k++) {
      while (ws[k].sent < ws[k].len) {
        ssize_t s = send(ws[k].fd, ws[k].b + ws[k].sent, ws[k].len - ws[k].sent, MSG_NOSIGNAL);
        if (s <= 0 && errno != EINTR) break;
        if (s > 0) ws[k].sent += (size_t)s;
      }
      uint8_t b[JUNK + 1];
      ssize_t n = recv(p->socks[k].fd, b, sizeof(b), MSG_DONTWAIT);
      FUZZ_REQUIRE(n == JUNK && ws[k].sent == ws[k].len, "socket %d: %zd junk bytes left", k, n);
    }
  }

out:
  sc_tcp_peer_close(p);
  for (int k = 0; k < nsocks; k++) {
    if (ws[k].fd >= 0) close(ws[k].fd);
    free(ws[k].b);
    free(ws[k].hdr_mask);
    free(ws[k].orig);
  }
  for (int k = 0; p->socks && k < nsocks; k++) free(p->socks[k].rq.v);
  free(p->socks);
  sc_tcp_peer_release(p);
  for (int m = 0; m < nmsgs; m++) {
    free(bufs[m]);
    free(want[m]);
  }
  return 0;
}
