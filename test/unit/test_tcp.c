/* TCP transport: several instances in one process over loopback, connected by
 * threads, exchanging messages; peers that lie about lengths, vanish, or do
 * not know the secret. */
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
#include <unistd.h>

#include <cmocka.h>

#include "lib/error.h"
#include "lib/socket.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/transport.h"

#define MAXN 4
static const sc_transport_ops_t *ops = &sc_tcp_transport;

typedef struct node {
  pthread_t tid;
  sc_transport_t *tp;
  int rank, nranks;
  uint8_t *addrs; /* shared table, nranks * SC_TP_ADDR_MAX */
  sc_result_t res;
  char err[SC_ERRMSG_MAX];
  int seq_base;
  int nmsgs;
} node_t;

static struct sockaddr_storage loop_hint;
static uint8_t secret[SC_SECRET_LEN];

/* host: where the route hint points, so that the nodes advertise loopback. */
static void create_nodes_on(node_t *nodes, int n, uint8_t *addrs, int timeout_ms,
                            const char *host) {
  sc_boot_addr_t hint;
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

static void create_nodes(node_t *nodes, int n, uint8_t *addrs, int timeout_ms) {
  create_nodes_on(nodes, n, addrs, timeout_ms, "127.0.0.1");
}

static void *connect_main(void *arg) {
  node_t *nd = arg;
  nd->res = ops->connect_all(nd->tp, nd->addrs, SC_TP_ADDR_MAX);
  snprintf(nd->err, sizeof(nd->err), "%s", sc_last_error());
  return NULL;
}

static void connect_nodes(node_t *nodes, int n) {
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_create(&nodes[r].tid, NULL, connect_main, &nodes[r]), 0);
  for (int r = 0; r < n; r++) pthread_join(nodes[r].tid, NULL);
  for (int r = 0; r < n; r++) {
    if (nodes[r].res != SC_SUCCESS) fprintf(stderr, "rank %d: %s\n", r, nodes[r].err);
    assert_int_equal(nodes[r].res, SC_SUCCESS);
  }
}

static void destroy_nodes(node_t *nodes, int n) {
  for (int r = 0; r < n; r++)
    if (nodes[r].tp) ops->destroy(nodes[r].tp);
}

/* Content that differs per (src, dst, seq) and per position, so that a lost,
 * duplicated or reordered chunk is visible. */
static void pattern(uint8_t *buf, size_t len, int src, int dst, int seq) {
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

static int check_pattern(const uint8_t *buf, size_t len, int src, int dst, int seq) {
  uint8_t *want = malloc(len ? len : 1);
  pattern(want, len, src, dst, seq);
  int ok = memcmp(want, buf, len) == 0;
  free(want);
  return ok;
}

/* Drives tp until every request is finished; 0 on success, else the error. */
static sc_result_t drive(sc_transport_t *tp, sc_tp_req_t *reqs, int nreq, int timeout_ms, char *err,
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

static const size_t sizes[] = {0, 1, 4095, (1u << 20) + 3, 16u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Every size to every peer, all posted at once: per-peer FIFO order is what
 * matches each receive to its message. */
static void *exchange_main(void *arg) {
  node_t *nd = arg;
  int n = nd->nranks, me = nd->rank;
  sc_tp_req_t reqs[2 * MAXN * NSIZES];
  uint8_t *sbuf[MAXN][NSIZES] = {{0}}, *rbuf[MAXN][NSIZES] = {{0}};
  memset(reqs, 0, sizeof(reqs));
  int k = 0;
  nd->res = SC_SUCCESS;
  for (size_t s = 0; s < NSIZES; s++)
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      size_t len = sizes[s];
      rbuf[p][s] = malloc(len + 1);
      sbuf[p][s] = malloc(len + 1);
      pattern(sbuf[p][s], len, me, p, (int)s);
      sc_result_t r = ops->irecv(nd->tp, p, rbuf[p][s], len, &reqs[k++]);
      if (r == SC_SUCCESS) r = ops->isend(nd->tp, p, sbuf[p][s], len, &reqs[k++]);
      if (r != SC_SUCCESS && nd->res == SC_SUCCESS) {
        nd->res = r;
        snprintf(nd->err, sizeof(nd->err), "post: %s", sc_last_error());
      }
    }
  if (nd->res == SC_SUCCESS) nd->res = drive(nd->tp, reqs, k, 20000, nd->err, sizeof(nd->err));
  for (size_t s = 0; s < NSIZES; s++)
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      if (nd->res == SC_SUCCESS && !check_pattern(rbuf[p][s], sizes[s], p, me, (int)s)) {
        nd->res = SC_ERR_INTERNAL;
        snprintf(nd->err, sizeof(nd->err), "rank %d: wrong content from %d at size %zu", me, p,
                 sizes[s]);
      }
      free(rbuf[p][s]);
      free(sbuf[p][s]);
    }
  return NULL;
}

static void run_threads(node_t *nodes, int n, void *(*fn)(void *)) {
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_create(&nodes[r].tid, NULL, fn, &nodes[r]), 0);
  for (int r = 0; r < n; r++) pthread_join(nodes[r].tid, NULL);
  for (int r = 0; r < n; r++) {
    if (nodes[r].res != SC_SUCCESS) fprintf(stderr, "rank %d: %s\n", r, nodes[r].err);
    assert_int_equal(nodes[r].res, SC_SUCCESS);
  }
}

static void test_exchange_sizes(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, 5000);
  connect_nodes(nodes, 3);
  run_threads(nodes, 3, exchange_main);
  destroy_nodes(nodes, 3);
}

/* ---- many messages posted at once, FIFO per peer ---- */

#define NMSG 400
static size_t msg_len(int seq) {
  return seq % 5 == 0 ? 0 : (size_t)((seq * 7919) % 3000);
}

static void *many_main(void *arg) {
  node_t *nd = arg;
  int n = nd->nranks, me = nd->rank;
  int per = 2 * NMSG;
  sc_tp_req_t *reqs = calloc((size_t)per * n, sizeof(*reqs));
  uint8_t **bufs = calloc((size_t)per * n, sizeof(*bufs));
  int k = 0;
  nd->res = SC_SUCCESS;
  for (int seq = 0; seq < NMSG && nd->res == SC_SUCCESS; seq++)
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      size_t len = msg_len(seq);
      bufs[k] = malloc(len + 1);
      sc_result_t r = ops->irecv(nd->tp, p, bufs[k], len, &reqs[k]);
      k++;
      bufs[k] = malloc(len + 1);
      pattern(bufs[k], len, me, p, seq);
      if (r == SC_SUCCESS) r = ops->isend(nd->tp, p, bufs[k], len, &reqs[k]);
      k++;
      if (r != SC_SUCCESS) {
        nd->res = r;
        snprintf(nd->err, sizeof(nd->err), "post: %s", sc_last_error());
      }
    }
  if (nd->res == SC_SUCCESS) nd->res = drive(nd->tp, reqs, k, 20000, nd->err, sizeof(nd->err));
  k = 0;
  for (int seq = 0; seq < NMSG; seq++)
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      if (nd->res == SC_SUCCESS && !check_pattern(bufs[k], msg_len(seq), p, me, seq)) {
        nd->res = SC_ERR_INTERNAL;
        snprintf(nd->err, sizeof(nd->err), "rank %d: message %d from %d out of order or corrupt",
                 me, seq, p);
      }
      free(bufs[k]);
      free(bufs[k + 1]);
      k += 2;
    }
  free(bufs);
  free(reqs);
  return NULL;
}

static void test_many_queued(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, 5000);
  connect_nodes(nodes, 3);
  run_threads(nodes, 3, many_main);
  destroy_nodes(nodes, 3);
}

/* ---- a sender whose length disagrees with the posted receive ---- */

static void test_length_mismatch(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 2, addrs, 5000);
  connect_nodes(nodes, 2);
  enum { POSTED = 512, SENT = 1024, GUARD = 4096 };
  uint8_t *rbuf = malloc(POSTED + GUARD);
  memset(rbuf, 0xA5, POSTED + GUARD);
  uint8_t sbuf[SENT];
  memset(sbuf, 0x5A, sizeof(sbuf));
  sc_tp_req_t rr = {0}, sr = {0};
  assert_int_equal(ops->isend(nodes[1].tp, 0, sbuf, SENT, &sr), SC_SUCCESS);
  sc_result_t r = ops->irecv(nodes[0].tp, 1, rbuf, POSTED, &rr);
  int64_t deadline = sc_now_ms() + 3000;
  while (r == SC_SUCCESS && rr.state == SC_TP_REQ_PENDING && sc_now_ms() < deadline) {
    int moved;
    ops->progress(nodes[1].tp, 0, &moved);
    r = ops->progress(nodes[0].tp, 10, &moved);
  }
  assert_int_equal(r, SC_ERR_REMOTE);
  assert_int_equal(rr.state, SC_TP_REQ_ERROR);
  assert_int_equal(rr.status, SC_ERR_REMOTE);
  const char *e = sc_last_error();
  assert_non_null(strstr(e, "rank 1 (127.0.0.1:"));
  assert_non_null(strstr(e, "sent a 1024-byte message where 512 bytes were expected"));
  for (size_t i = 0; i < POSTED + GUARD; i++) assert_int_equal(rbuf[i], 0xA5);
  /* The peer is dead now: later requests fail at once, with the same story. */
  sc_tp_req_t again = {0};
  assert_int_equal(ops->irecv(nodes[0].tp, 1, rbuf, POSTED, &again), SC_ERR_REMOTE);
  assert_int_equal(again.state, SC_TP_REQ_ERROR);
  assert_non_null(strstr(sc_last_error(), "1024-byte"));
  free(rbuf);
  destroy_nodes(nodes, 2);
}

/* ---- a peer that goes away while a receive is pending ---- */

static void test_peer_destroyed(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, 5000);
  connect_nodes(nodes, 3);
  uint8_t buf[100];
  sc_tp_req_t rr[2] = {{0}};
  assert_int_equal(ops->irecv(nodes[0].tp, 2, buf, sizeof(buf), &rr[0]), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[0].tp, 2, buf, sizeof(buf), &rr[1]), SC_SUCCESS);
  ops->destroy(nodes[2].tp);
  nodes[2].tp = NULL;
  sc_result_t r = SC_SUCCESS;
  int64_t deadline = sc_now_ms() + 3000;
  while (r == SC_SUCCESS && sc_now_ms() < deadline) {
    int moved;
    r = ops->progress(nodes[0].tp, 50, &moved);
  }
  assert_int_equal(r, SC_ERR_REMOTE);
  const char *e = sc_last_error();
  assert_non_null(strstr(e, "rank 2 (127.0.0.1:"));
  assert_non_null(strstr(e, "closed the connection while 2 receives were pending"));
  assert_int_equal(rr[0].state, SC_TP_REQ_ERROR);
  assert_int_equal(rr[1].state, SC_TP_REQ_ERROR);
  sc_tp_req_t sr = {0};
  assert_int_equal(ops->isend(nodes[0].tp, 2, buf, sizeof(buf), &sr), SC_ERR_REMOTE);
  /* The other peer is unaffected. */
  sc_tp_req_t ok[2] = {{0}};
  uint8_t out[8] = "survive", in[8] = {0};
  assert_int_equal(ops->irecv(nodes[1].tp, 0, in, sizeof(in), &ok[0]), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[0].tp, 1, out, sizeof(out), &ok[1]), SC_SUCCESS);
  char err[256];
  assert_int_equal(drive(nodes[0].tp, &ok[1], 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_int_equal(drive(nodes[1].tp, &ok[0], 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_string_equal((char *)in, "survive");
  destroy_nodes(nodes, 3);
}

/* ---- strangers at the listener during connect_all ---- */

static int raw_connect_to(const uint8_t *blob) {
  sc_boot_addr_t a;
  assert_int_equal(sc_socket_addr_unpack(blob + 4, &a), SC_SUCCESS);
  int fd;
  assert_int_equal(sc_socket_connect(&a, sc_now_ms() + 2000, &fd), SC_SUCCESS);
  return fd;
}

static void test_wrong_secret_ignored(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, 5000);
  /* An impostor claiming to be rank 2, a silent connection and random bytes,
   * all queued at rank 0's listener before the real peers. */
  uint8_t wrong[SC_SECRET_LEN];
  memcpy(wrong, secret, sizeof(wrong));
  wrong[0] ^= 1;
  uint8_t hello[SC_TCP_HELLO_LEN];
  sc_tcp_encode_hello(hello, wrong, 2, 0, 3);
  int impostor = raw_connect_to(addrs);
  assert_int_equal(sc_socket_write_all(impostor, hello, sizeof(hello), sc_now_ms() + 1000, "r0"),
                   SC_SUCCESS);
  int silent = raw_connect_to(addrs);
  int noisy = raw_connect_to(addrs);
  uint8_t junk[SC_TCP_HELLO_LEN * 2];
  assert_int_equal(sc_random_bytes(junk, sizeof(junk)), SC_SUCCESS);
  junk[0] = 'X';
  assert_int_equal(sc_socket_write_all(noisy, junk, sizeof(junk), sc_now_ms() + 1000, "r0"),
                   SC_SUCCESS);

  connect_nodes(nodes, 3);
  /* The impostor got no ack: its connection was closed. */
  struct pollfd p = {.fd = impostor, .events = POLLIN};
  assert_int_equal(poll(&p, 1, 2000), 1);
  uint8_t ack[SC_TCP_ACK_LEN];
  assert_true(recv(impostor, ack, sizeof(ack), 0) <= 0);
  close(impostor);
  close(silent);
  close(noisy);
  /* The real rank 2 is connected to rank 0. */
  sc_tp_req_t rq[2] = {{0}};
  uint8_t out[5] = "real", in[5] = {0};
  assert_int_equal(ops->irecv(nodes[0].tp, 2, in, sizeof(in), &rq[0]), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[2].tp, 0, out, sizeof(out), &rq[1]), SC_SUCCESS);
  char err[256];
  assert_int_equal(drive(nodes[2].tp, &rq[1], 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_int_equal(drive(nodes[0].tp, &rq[0], 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_string_equal((char *)in, "real");
  destroy_nodes(nodes, 3);
}

/* ---- setup timeout names the peers that never came ---- */

static void test_setup_timeout(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, 300);
  int64_t t0 = sc_now_ms();
  connect_main(&nodes[1]); /* ranks 0 and 2 never call connect_all */
  int64_t took = sc_now_ms() - t0;
  assert_int_equal(nodes[1].res, SC_ERR_TIMEOUT);
  /* Rank 0's kernel completes the handshake but nobody answers the hello. */
  assert_non_null(strstr(nodes[1].err, "rank 0 (127.0.0.1:"));
  assert_non_null(strstr(nodes[1].err, "sent no ack"));
  assert_non_null(strstr(nodes[1].err, "rank 2 (127.0.0.1:"));
  assert_non_null(strstr(nodes[1].err, "never connected"));
  assert_true(took >= 250 && took < 2000);
  destroy_nodes(nodes, 3);
}

/* ---- wake, cancel ---- */

typedef struct waker {
  sc_transport_t *tp;
  int64_t returned_after;
} waker_t;

static void *block_in_progress(void *arg) {
  waker_t *w = arg;
  int64_t t0 = sc_now_ms();
  int moved;
  ops->progress(w->tp, 5000, &moved);
  w->returned_after = sc_now_ms() - t0;
  return NULL;
}

static void test_wake_and_cancel(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 2, addrs, 5000);
  connect_nodes(nodes, 2);
  uint8_t buf[64];
  sc_tp_req_t rr = {0};
  assert_int_equal(ops->irecv(nodes[0].tp, 1, buf, sizeof(buf), &rr), SC_SUCCESS);
  waker_t w = {.tp = nodes[0].tp};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, block_in_progress, &w), 0);
  poll(NULL, 0, 100);
  ops->wake(nodes[0].tp);
  pthread_join(t, NULL);
  assert_true(w.returned_after < 2000);

  ops->cancel_all(nodes[0].tp, SC_ERR_ABORTED);
  assert_int_equal(rr.state, SC_TP_REQ_ERROR);
  assert_int_equal(rr.status, SC_ERR_ABORTED);
  /* Nothing had been read yet, so the connection still works. */
  sc_tp_req_t rq[2] = {{0}};
  uint8_t out[3] = "ok", in[3] = {0};
  assert_int_equal(ops->irecv(nodes[0].tp, 1, in, sizeof(in), &rq[0]), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[1].tp, 0, out, sizeof(out), &rq[1]), SC_SUCCESS);
  char err[256];
  assert_int_equal(drive(nodes[1].tp, &rq[1], 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_int_equal(drive(nodes[0].tp, &rq[0], 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_string_equal((char *)in, "ok");

  void *h = (void *)1;
  assert_int_equal(ops->reg(nodes[0].tp, buf, sizeof(buf), &h), SC_SUCCESS);
  assert_int_equal(ops->dereg(nodes[0].tp, h), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[0].tp, 0, buf, 1, &rr), SC_ERR_INVALID_ARG); /* self */
  assert_int_equal(ops->isend(nodes[0].tp, 2, buf, 1, &rr), SC_ERR_INVALID_ARG);
  destroy_nodes(nodes, 2);
}

static int have_ipv6_loopback(void) {
  sc_boot_addr_t a;
  int fd;
  if (sc_socket_resolve("::1", 0, &a) != SC_SUCCESS || sc_socket_listen(&a, 1, &fd) != SC_SUCCESS)
    return 0;
  close(fd);
  return 1;
}

static void test_ipv6(void **state) {
  (void)state;
  if (!have_ipv6_loopback()) {
    fprintf(stderr, "no IPv6 loopback here: skipping\n");
    skip();
  }
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes_on(nodes, 2, addrs, 5000, "::1");
  connect_nodes(nodes, 2);
  sc_tp_req_t rq[2] = {{0}};
  uint8_t out[5] = "six", in[5] = {0};
  assert_int_equal(ops->irecv(nodes[1].tp, 0, in, sizeof(in), &rq[0]), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[0].tp, 1, out, sizeof(out), &rq[1]), SC_SUCCESS);
  char err[256];
  assert_int_equal(drive(nodes[0].tp, &rq[1], 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_int_equal(drive(nodes[1].tp, &rq[0], 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_string_equal((char *)in, "six");
  destroy_nodes(nodes, 2);
}

static void test_single_rank(void **state) {
  (void)state;
  node_t nodes[1];
  uint8_t addrs[SC_TP_ADDR_MAX];
  create_nodes(nodes, 1, addrs, 1000);
  connect_nodes(nodes, 1);
  int moved = 1;
  assert_int_equal(ops->progress(nodes[0].tp, 0, &moved), SC_SUCCESS);
  assert_int_equal(moved, 0);
  destroy_nodes(nodes, 1);
}

static int setup(void **state) {
  (void)state;
  return sc_random_bytes(secret, sizeof(secret)) == SC_SUCCESS ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exchange_sizes),       cmocka_unit_test(test_many_queued),
      cmocka_unit_test(test_length_mismatch),      cmocka_unit_test(test_peer_destroyed),
      cmocka_unit_test(test_wrong_secret_ignored), cmocka_unit_test(test_setup_timeout),
      cmocka_unit_test(test_wake_and_cancel),      cmocka_unit_test(test_ipv6),
      cmocka_unit_test(test_single_rank),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
