/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers of the TCP transport unit tests: see tcp_nodes.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/base/error.h"
#include "lib/base/socket.h"
#include "test/unit/tcp_nodes.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/transport.h"

const sc_transport_ops_t *ops = &sc_tcp_transport;

static struct sockaddr_storage loop_hint;
uint8_t secret[SC_SECRET_LEN];
/* Configuration of the nodes the next create_nodes makes (reset before each test). */
int cfg_nsocks[MAXN];
int cfg_spin_us;
int cfg_lazy;

void set_nsocks(int n) {
  for (int r = 0; r < MAXN; r++) cfg_nsocks[r] = n;
}

int reset_cfg(void **state) {
  (void)state;
  set_nsocks(0);
  cfg_spin_us = 0;
  cfg_lazy = 0;
  return 0;
}

/* host: where the route hint points, so that the nodes advertise loopback. */
void create_nodes_on(node_t *nodes, int n, uint8_t *addrs, int timeout_ms, const char *host) {
  sc_sockaddr_t hint;
  assert_int_equal(sc_socket_resolve(host, 9, &hint), SC_SUCCESS);
  memset(&loop_hint, 0, sizeof(loop_hint));
  memcpy(&loop_hint, &hint.sa, hint.len);
  for (int r = 0; r < n; r++) {
    sc_tp_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.rank = r;
    cfg.nranks = n;
    memcpy(cfg.secret, secret, sizeof(secret));
    cfg.route_hint = &loop_hint;
    cfg.sockbuf_bytes = 1 << 20;
    cfg.timeout_ms = timeout_ms;
    cfg.nsocks = cfg_nsocks[r];
    cfg.spin_us = cfg_spin_us;
    cfg.connect_lazy = cfg_lazy;
    memset(&nodes[r], 0, sizeof(nodes[r]));
    nodes[r].rank = r;
    nodes[r].nranks = n;
    nodes[r].addrs = addrs;
    size_t len = 0;
    assert_int_equal(ops->create(&cfg, &nodes[r].tp, addrs + (size_t)r * SC_TP_ADDR_MAX, &len),
                     SC_SUCCESS);
    assert_true(len > 0 && len <= SC_TP_ADDR_MAX);
  }
}

void create_nodes(node_t *nodes, int n, uint8_t *addrs, int timeout_ms) {
  create_nodes_on(nodes, n, addrs, timeout_ms, "127.0.0.1");
}

void *connect_main(void *arg) {
  node_t *nd = arg;
  nd->res = ops->connect_all(nd->tp, nd->addrs, SC_TP_ADDR_MAX);
  snprintf(nd->err, sizeof(nd->err), "%s", sc_last_error());
  return NULL;
}

void connect_nodes(node_t *nodes, int n) {
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_create(&nodes[r].tid, NULL, connect_main, &nodes[r]), 0);
  for (int r = 0; r < n; r++) pthread_join(nodes[r].tid, NULL);
  for (int r = 0; r < n; r++) {
    if (nodes[r].res != SC_SUCCESS) fprintf(stderr, "rank %d: %s\n", r, nodes[r].err);
    assert_int_equal(nodes[r].res, SC_SUCCESS);
  }
}

void destroy_nodes(node_t *nodes, int n) {
  for (int r = 0; r < n; r++)
    if (nodes[r].tp) ops->destroy(nodes[r].tp);
}

/* Content that differs per (src, dst, seq) and per position, so that a lost,
 * duplicated or reordered chunk is visible. */
void pattern(uint8_t *buf, size_t len, int src, int dst, int seq) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(src * 1000003 + dst * 1009 + seq + 1);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(buf + i, &x, 8);
  }
  x ^= x << 13;
  for (; i < len; i++) buf[i] = (uint8_t)(x >> (8 * (i & 7)));
}

void msg_print(uint8_t fp[SC_TP_FP_LEN], int src, int dst, int seq, int receiving) {
  memset(fp, 0, SC_TP_FP_LEN);
  if (receiving && seq % 3 == 2) return;
  fp[0] = 0x10; /* never all zero */
  fp[1] = (uint8_t)src;
  fp[2] = (uint8_t)dst;
  for (int i = 0; i < 4; i++) fp[SC_TP_FP_LEN - 1 - i] = (uint8_t)((unsigned)seq >> (8 * i));
}

int check_pattern(const uint8_t *buf, size_t len, int src, int dst, int seq) {
  uint8_t *want = malloc(len ? len : 1);
  pattern(want, len, src, dst, seq);
  int ok = memcmp(want, buf, len) == 0;
  free(want);
  return ok;
}

/* Drives tp until every request is finished; 0 on success, else the error. */
sc_result_t drive(sc_transport_t *tp, sc_tp_req_t *reqs, int nreq, int timeout_ms, char *err,
                  size_t errlen) {
  int64_t deadline = sc_now_ms() + timeout_ms;
  for (;;) {
    int pending = 0;
    for (int i = 0; i < nreq; i++) {
      if (reqs[i].state == SC_TP_REQ_PENDING)
        pending++;
      else if (reqs[i].state == SC_TP_REQ_ERROR) {
        snprintf(err, errlen, "request %d failed: %s", i, sc_strerror(reqs[i].status));
        return reqs[i].status;
      }
    }
    if (!pending) return SC_SUCCESS;
    if (sc_now_ms() > deadline) {
      snprintf(err, errlen, "%d requests still pending at the deadline", pending);
      return SC_ERR_TIMEOUT;
    }
    int moved;
    sc_result_t r = ops->progress(tp, 20, &moved);
    if (r != SC_SUCCESS) {
      snprintf(err, errlen, "%s", sc_last_error());
      return r;
    }
  }
}

/* ---- all-to-all exchange of the interesting sizes ---- */

const size_t sizes[] = {0, 1, 4095, (1u << 20) + 3, 16u << 20};

/* Every size to every peer, all posted at once (receives before sends, sizes
 * interleaved over the peers): per-peer order is what matches each receive to
 * its message, whatever sockets its segments travel on. */
void *exchange_main(void *arg) {
  node_t *nd = arg;
  int n = nd->nranks, me = nd->rank;
  size_t ns = nd->sizes ? nd->nsizes : NSIZES;
  const size_t *sz = nd->sizes ? nd->sizes : sizes;
  sc_tp_req_t reqs[2 * MAXN * MAXSIZES];
  uint8_t *sbuf[MAXN][MAXSIZES] = {{0}}, *rbuf[MAXN][MAXSIZES] = {{0}};
  memset(reqs, 0, sizeof(reqs));
  int k = 0;
  nd->res = SC_SUCCESS;
  for (size_t s = 0; s < ns; s++)
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      size_t len = sz[s];
      /* Guard bytes after the posted length: a receive must not write past it. */
      rbuf[p][s] = malloc(len + 64);
      memset(rbuf[p][s] + len, 0xC3, 64);
      sbuf[p][s] = malloc(len + 1);
      pattern(sbuf[p][s], len, me, p, (int)s);
      msg_print(reqs[k].fp, p, me, (int)s, 1);
      sc_result_t r = ops->irecv(nd->tp, p, rbuf[p][s], len, &reqs[k++]);
      msg_print(reqs[k].fp, me, p, (int)s, 0);
      if (r == SC_SUCCESS) r = ops->isend(nd->tp, p, sbuf[p][s], len, &reqs[k++]);
      if (r != SC_SUCCESS && nd->res == SC_SUCCESS) {
        nd->res = r;
        snprintf(nd->err, sizeof(nd->err), "post: %s", sc_last_error());
      }
    }
  if (nd->res == SC_SUCCESS) nd->res = drive(nd->tp, reqs, k, 30000, nd->err, sizeof(nd->err));
  for (size_t s = 0; s < ns; s++)
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      int guard_ok = 1;
      for (size_t g = 0; g < 64; g++) guard_ok &= rbuf[p][s][sz[s] + g] == 0xC3;
      if (nd->res == SC_SUCCESS &&
          (!check_pattern(rbuf[p][s], sz[s], p, me, (int)s) || !guard_ok)) {
        nd->res = SC_ERR_INTERNAL;
        snprintf(nd->err, sizeof(nd->err), "rank %d: wrong content from %d at size %zu (#%zu)%s",
                 me, p, sz[s], s, guard_ok ? "" : ", written past its end");
      }
      free(rbuf[p][s]);
      free(sbuf[p][s]);
    }
  return NULL;
}

void run_threads(node_t *nodes, int n, void *(*fn)(void *)) {
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_create(&nodes[r].tid, NULL, fn, &nodes[r]), 0);
  for (int r = 0; r < n; r++) pthread_join(nodes[r].tid, NULL);
  for (int r = 0; r < n; r++) {
    if (nodes[r].res != SC_SUCCESS) fprintf(stderr, "rank %d: %s\n", r, nodes[r].err);
    assert_int_equal(nodes[r].res, SC_SUCCESS);
  }
}

void exchange(int n, const size_t *sz, size_t nsz) {
  node_t nodes[MAXN];
  uint8_t addrs[MAXN * SC_TP_ADDR_MAX];
  create_nodes(nodes, n, addrs, NODES_SETUP_MS);
  connect_nodes(nodes, n);
  for (int r = 0; r < n; r++) {
    nodes[r].sizes = sz;
    nodes[r].nsizes = nsz;
  }
  run_threads(nodes, n, exchange_main);
  destroy_nodes(nodes, n);
}
/* ---- many messages posted at once, FIFO per peer ---- */

size_t msg_len(int seq) {
  return seq % 5 == 0 ? 0 : (size_t)((seq * 7919) % 3000);
}

/* Small messages between striped ones of assorted sizes around the threshold. */
size_t msg_len_striped(int seq) {
  if (seq % 9 == 4) return SC_TCP_STRIPE_MIN + (size_t)((seq * 104729) % (3 * SC_TCP_STRIPE_MIN));
  if (seq % 9 == 7) return SC_TCP_STRIPE_MIN - (size_t)(seq % 3);
  return msg_len(seq);
}

many_cfg_t many_cfg = {NMSG, msg_len, 0};

/* Posts every receive still allowed by the window; returns the error. */
static sc_result_t many_post_recvs(node_t *nd, int p, int *posted, sc_tp_req_t *rreq,
                                   uint8_t **rbuf) {
  int outstanding = 0;
  for (int q = 0; q < *posted; q++) outstanding += rreq[q].state == SC_TP_REQ_PENDING;
  while (*posted < many_cfg.nmsgs && (!many_cfg.window || outstanding < many_cfg.window)) {
    int seq = (*posted)++;
    size_t len = many_cfg.len(seq);
    rbuf[seq] = malloc(len + 1);
    msg_print(rreq[seq].fp, p, nd->rank, seq, 1);
    SC_CHECK(ops->irecv(nd->tp, p, rbuf[seq], len, &rreq[seq]));
    outstanding++;
  }
  return SC_SUCCESS;
}

/* Every rank sends nmsgs messages to every peer, all posted at once; the
 * receives are posted all at once too, or a few at a time (window), so that
 * the queues wrap around while data streams in. */
void *many_main(void *arg) {
  node_t *nd = arg;
  int n = nd->nranks, me = nd->rank, m = many_cfg.nmsgs;
  sc_tp_req_t *sreq = calloc((size_t)m * MAXN, sizeof(*sreq));
  sc_tp_req_t *rreq = calloc((size_t)m * MAXN, sizeof(*rreq));
  uint8_t **sbuf = calloc((size_t)m * MAXN, sizeof(*sbuf));
  uint8_t **rbuf = calloc((size_t)m * MAXN, sizeof(*rbuf));
  int posted[MAXN] = {0};
  nd->res = SC_SUCCESS;
  for (int seq = 0; seq < m && nd->res == SC_SUCCESS; seq++)
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      size_t len = many_cfg.len(seq);
      sc_result_t r = SC_SUCCESS;
      /* Receives and sends interleaved in posting order. */
      if (seq == posted[p]) r = many_post_recvs(nd, p, &posted[p], rreq + p * m, rbuf + p * m);
      sbuf[p * m + seq] = malloc(len + 1);
      pattern(sbuf[p * m + seq], len, me, p, seq);
      msg_print(sreq[p * m + seq].fp, me, p, seq, 0);
      if (r == SC_SUCCESS) r = ops->isend(nd->tp, p, sbuf[p * m + seq], len, &sreq[p * m + seq]);
      if (r != SC_SUCCESS) {
        nd->res = r;
        snprintf(nd->err, sizeof(nd->err), "post: %s", sc_last_error());
      }
    }
  int64_t deadline = sc_now_ms() + 30000;
  while (nd->res == SC_SUCCESS) {
    int pending = 0;
    for (int p = 0; p < n && nd->res == SC_SUCCESS; p++) {
      if (p == me) continue;
      sc_result_t r = many_post_recvs(nd, p, &posted[p], rreq + p * m, rbuf + p * m);
      if (r != SC_SUCCESS) {
        nd->res = r;
        snprintf(nd->err, sizeof(nd->err), "post: %s", sc_last_error());
      }
      pending += m - posted[p];
      for (int q = 0; q < m; q++) {
        sc_tp_req_t *rq[2] = {&sreq[p * m + q], &rreq[p * m + q]};
        for (int d = 0; d < 2; d++) {
          if (d == 1 && q >= posted[p]) continue;
          if (rq[d]->state == SC_TP_REQ_PENDING) pending++;
          if (rq[d]->state == SC_TP_REQ_ERROR && nd->res == SC_SUCCESS) {
            nd->res = rq[d]->status;
            snprintf(nd->err, sizeof(nd->err), "message %d %s rank %d failed", q, d ? "from" : "to",
                     p);
          }
        }
      }
    }
    if (!pending || nd->res != SC_SUCCESS) break;
    if (sc_now_ms() > deadline) {
      nd->res = SC_ERR_TIMEOUT;
      snprintf(nd->err, sizeof(nd->err), "%d requests still pending at the deadline", pending);
      break;
    }
    int moved;
    sc_result_t r = ops->progress(nd->tp, 20, &moved);
    if (r != SC_SUCCESS) {
      nd->res = r;
      snprintf(nd->err, sizeof(nd->err), "%s", sc_last_error());
    }
  }
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    for (int seq = 0; seq < m; seq++) {
      if (nd->res == SC_SUCCESS &&
          !check_pattern(rbuf[p * m + seq], many_cfg.len(seq), p, me, seq)) {
        nd->res = SC_ERR_INTERNAL;
        snprintf(nd->err, sizeof(nd->err), "rank %d: message %d from %d out of order or corrupt",
                 me, seq, p);
      }
      free(rbuf[p * m + seq]);
      free(sbuf[p * m + seq]);
    }
  }
  free(sbuf);
  free(rbuf);
  free(sreq);
  free(rreq);
  return NULL;
}

void many(int n, int nmsgs, size_t (*len)(int), int window) {
  many_cfg = (many_cfg_t){nmsgs, len, window};
  node_t nodes[MAXN];
  uint8_t addrs[MAXN * SC_TP_ADDR_MAX];
  create_nodes(nodes, n, addrs, NODES_SETUP_MS);
  connect_nodes(nodes, n);
  run_threads(nodes, n, many_main);
  destroy_nodes(nodes, n);
}

/* Receive on nodes[0] from rank 1 until the request leaves PENDING or the
 * transport reports an error; returns the transport's result. */
sc_result_t recv_until_error(node_t *nodes, sc_tp_req_t *rr) {
  sc_result_t r = SC_SUCCESS;
  int64_t deadline = sc_now_ms() + 3000;
  while (r == SC_SUCCESS && rr->state == SC_TP_REQ_PENDING && sc_now_ms() < deadline) {
    int moved;
    ops->progress(nodes[1].tp, 0, &moved);
    r = ops->progress(nodes[0].tp, 10, &moved);
  }
  return r;
}

int tcp_test_setup(void **state) {
  (void)state;
  return sc_random_bytes(secret, sizeof(secret)) == SC_SUCCESS ? 0 : -1;
}
