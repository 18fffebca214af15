/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport striping: messages cut into segments over several sockets
 * per pair must arrive exactly and in order, for sizes around the stripe
 * threshold, many interleaved messages, differing socket counts per rank,
 * and cancelled receives; wrong lengths and garbage headers on any socket
 * fail naming the peer without writing a byte. */
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

/* Two connected ranks with ns sockets per pair. */
static void connect_pair(node_t nodes[2], uint8_t addrs[2 * SC_TP_ADDR_MAX], int ns) {
  set_nsocks(ns);
  create_nodes(nodes, 2, addrs, NODES_SETUP_MS);
  connect_nodes(nodes, 2);
}

/* ---- striping over several sockets ---- */

/* The placement rule on its own: segments tile the message exactly, are
 * aligned, never outnumber the sockets, and small messages stay whole. */
static void test_stripe_rule(void **state) {
  (void)state;
  const size_t m = SC_TCP_STRIPE_MIN;
  const size_t lens[] = {0,     1,         m - 1,     m,         m + 1,          2 * m - 1,
                         2 * m, 2 * m + 1, 3 * m + 5, 64u << 20, (64u << 20) + 1};
  for (int ns = 1; ns <= 8; ns++)
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
      size_t len = lens[i], stripe = 0;
      int k = sc_tcp_stripes(len, ns, &stripe);
      assert_true(k >= 1 && k <= ns);
      if (len <= m || ns == 1) {
        assert_int_equal(k, 1);
        assert_int_equal(stripe, len);
        continue;
      }
      assert_int_equal(stripe % SC_TCP_STRIPE_ALIGN, 0);
      /* k - 1 full stripes and a non-empty last one cover len exactly. */
      assert_true((size_t)(k - 1) * stripe < len);
      assert_true((size_t)k * stripe >= len);
      /* Large messages use every socket. */
      if (len >= (size_t)ns * m) assert_int_equal(k, ns);
    }
}

/* Sizes around the stripe threshold and its multiples, over 1..4 sockets. */
static const size_t stripe_sizes[] = {
    SC_TCP_STRIPE_MIN - 1,
    SC_TCP_STRIPE_MIN,
    SC_TCP_STRIPE_MIN + 1,
    7,
    2 * SC_TCP_STRIPE_MIN - 1,
    2 * SC_TCP_STRIPE_MIN,
    0,
    2 * SC_TCP_STRIPE_MIN + 1,
    3 * SC_TCP_STRIPE_MIN + 4097,
    4 * SC_TCP_STRIPE_MIN + 3,
    100,
    (5u << 20) + 7,
    SC_TCP_STRIPE_ALIGN * 4 + 1,
    (9u << 20) + 4095,
    1,
};

static void test_stripe_sizes(void **state) {
  (void)state;
  for (int ns = 1; ns <= 4; ns++) {
    set_nsocks(ns);
    exchange(2, stripe_sizes, sizeof(stripe_sizes) / sizeof(stripe_sizes[0]));
    exchange(3, stripe_sizes, sizeof(stripe_sizes) / sizeof(stripe_sizes[0]));
  }
}

/* Ranks configured with different counts: each pair uses the count of its
 * higher rank (which connects), and both ends must agree on it. */
static void test_stripe_mixed_counts(void **state) {
  (void)state;
  cfg_nsocks[0] = 4;
  cfg_nsocks[1] = 2;
  cfg_nsocks[2] = 3;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, NODES_SETUP_MS);
  connect_nodes(nodes, 3);
  assert_int_equal(sc_tcp_of(nodes[0].tp)->peers[1].nsocks, 2);
  assert_int_equal(sc_tcp_of(nodes[1].tp)->peers[0].nsocks, 2);
  assert_int_equal(sc_tcp_of(nodes[0].tp)->peers[2].nsocks, 3);
  assert_int_equal(sc_tcp_of(nodes[2].tp)->peers[0].nsocks, 3);
  assert_int_equal(sc_tcp_of(nodes[1].tp)->peers[2].nsocks, 3);
  assert_int_equal(sc_tcp_of(nodes[2].tp)->peers[1].nsocks, 3);
  for (int r = 0; r < 3; r++) {
    nodes[r].sizes = stripe_sizes;
    nodes[r].nsizes = sizeof(stripe_sizes) / sizeof(stripe_sizes[0]);
  }
  run_threads(nodes, 3, exchange_main);
  destroy_nodes(nodes, 3);
}

/* Small and striped messages interleaved, over 2 and 3 sockets, all posted
 * at once and through a small window of receives. */
static void test_stripe_interleaved(void **state) {
  (void)state;
  for (int ns = 2; ns <= 3; ns++) {
    set_nsocks(ns);
    many(3, 90, msg_len_striped, 0);
    many(3, 90, msg_len_striped, 3);
    many(2, NMSG, msg_len, 5);
  }
}

/* Striped on both sides, but the lengths differ: no byte lands anywhere. */
static void test_length_mismatch_striped(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  connect_pair(nodes, addrs, 2);
  const size_t posted = 2 * SC_TCP_STRIPE_MIN + 5, sent = 3 * SC_TCP_STRIPE_MIN, guard = 4096;
  uint8_t *rbuf = malloc(posted + guard), *sbuf = malloc(sent);
  memset(rbuf, 0xA5, posted + guard);
  memset(sbuf, 0x5A, sent);
  sc_tp_req_t rr = {0}, sr = {0};
  assert_int_equal(ops->isend(nodes[1].tp, 0, sbuf, sent, &sr), SC_SUCCESS);
  /* The header may already be there when the receive is posted. */
  sc_result_t r = ops->irecv(nodes[0].tp, 1, rbuf, posted, &rr);
  if (r == SC_SUCCESS) r = recv_until_error(nodes, &rr);
  assert_int_equal(r, SC_ERR_REMOTE);
  assert_int_equal(rr.state, SC_TP_REQ_ERROR);
  const char *e = sc_last_error();
  assert_non_null(strstr(e, "rank 1 (127.0.0.1:"));
  char want[96];
  snprintf(want, sizeof(want), "sent a %zu-byte message where %zu bytes were expected", sent,
           posted);
  assert_non_null(strstr(e, want));
  for (size_t i = 0; i < posted + guard; i++) assert_int_equal(rbuf[i], 0xA5);
  free(rbuf);
  free(sbuf);
  destroy_nodes(nodes, 2);
}

/* Bytes forged straight onto one of rank 1's sockets: garbage on the second
 * socket of a striped receive, then (single socket) a well-formed header with
 * an absurd length. Both fail the receive naming rank 1; nothing is written. */
static void test_garbage_header(void **state) {
  (void)state;
  for (int ns = 2; ns >= 1; ns--) {
    set_nsocks(ns);
    node_t nodes[2];
    uint8_t addrs[2 * SC_TP_ADDR_MAX];
    create_nodes(nodes, 2, addrs, NODES_SETUP_MS);
    connect_nodes(nodes, 2);
    uint8_t hdr[SC_TCP_HDR_LEN] = {0}; /* no print: the receive posts none either */
    const char *want;
    if (ns == 2) {
      assert_int_equal(sc_random_bytes(hdr, sizeof(hdr)), SC_SUCCESS);
      hdr[0] = 'X';
      want = "sent a malformed message header";
    } else {
      sc_wire_put_u32(hdr, SC_TCP_MSG_MAGIC);
      sc_wire_put_u32(hdr + 4, 0);
      sc_wire_put_u64(hdr + 8, 1ull << 62);
      want = "sent a 4611686018427387904-byte message where 4096 bytes were expected";
    }
    int fd = sc_tcp_of(nodes[1].tp)->peers[0].socks[ns - 1].fd;
    assert_true(fd >= 0);
    assert_int_equal(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    size_t posted = ns == 2 ? 2 * SC_TCP_STRIPE_MIN + 1 : 4096;
    uint8_t *rbuf = malloc(posted);
    memset(rbuf, 0xA5, posted);
    sc_tp_req_t rr = {0};
    sc_result_t r = ops->irecv(nodes[0].tp, 1, rbuf, posted, &rr);
    if (r == SC_SUCCESS) r = recv_until_error(nodes, &rr);
    assert_int_equal(r, SC_ERR_REMOTE);
    assert_int_equal(rr.state, SC_TP_REQ_ERROR);
    assert_int_equal(rr.status, SC_ERR_REMOTE);
    const char *e = sc_last_error();
    assert_non_null(strstr(e, "rank 1 (127.0.0.1:"));
    assert_non_null(strstr(e, want));
    if (ns == 2) assert_non_null(strstr(e, "socket 1 of 2"));
    for (size_t i = 0; i < posted; i++) assert_int_equal(rbuf[i], 0xA5);
    free(rbuf);
    destroy_nodes(nodes, 2);
  }
}

/* Cancelled receives that never saw a byte leave the pair in step, even when
 * they were striped: the next messages still match. */
static void test_cancel_striped(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  connect_pair(nodes, addrs, 3);
  size_t big = 3 * SC_TCP_STRIPE_MIN;
  uint8_t *junk = malloc(big);
  sc_tp_req_t c[3] = {{0}};
  assert_int_equal(ops->irecv(nodes[0].tp, 1, junk, 10, &c[0]), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[0].tp, 1, junk, big, &c[1]), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[0].tp, 1, junk, 7, &c[2]), SC_SUCCESS);
  ops->cancel_all(nodes[0].tp, SC_ERR_ABORTED);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c[i].state, SC_TP_REQ_ERROR);
    assert_int_equal(c[i].status, SC_ERR_ABORTED);
  }
  free(junk);
  for (int r = 0; r < 2; r++) {
    nodes[r].sizes = stripe_sizes;
    nodes[r].nsizes = sizeof(stripe_sizes) / sizeof(stripe_sizes[0]);
  }
  run_threads(nodes, 2, exchange_main);
  destroy_nodes(nodes, 2);
}

/* Where segments are queued: whole messages on socket 0, one after another,
 * and a striped message's k segments on sockets 0..k-1 (tcp_internal.h says
 * why no socket takes turns). Counted on pending receives, then cancelled. */
static void test_placement(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  connect_pair(nodes, addrs, 3);
  const size_t m = SC_TCP_STRIPE_MIN;
  const size_t lens[] = {10, 64u << 10, m, 2 * m + 1, 7, 5 * m, 1};
  enum { NL = sizeof(lens) / sizeof(lens[0]) };
  uint8_t *junk = malloc(5 * m);
  sc_tp_req_t rq[NL] = {{0}};
  size_t want[3] = {0, 0, 0};
  sc_tcp_peer_t *p = &sc_tcp_of(nodes[0].tp)->peers[1];
  assert_int_equal(p->nsocks, 3);
  for (int i = 0; i < NL; i++) {
    size_t stripe;
    int k = sc_tcp_stripes(lens[i], 3, &stripe);
    for (int j = 0; j < k; j++) want[j]++;
    assert_int_equal(ops->irecv(nodes[0].tp, 1, junk, lens[i], &rq[i]), SC_SUCCESS);
    for (int j = 0; j < 3; j++) assert_int_equal(p->socks[j].rq.count, want[j]);
  }
  /* 7 messages; 2 m + 1 and 5 m bytes striped over all 3 sockets. */
  assert_int_equal(want[0], 7);
  assert_int_equal(want[1], 2);
  assert_int_equal(want[2], 2);
  ops->cancel_all(nodes[0].tp, SC_ERR_ABORTED);
  for (int i = 0; i < NL; i++) assert_int_equal(rq[i].state, SC_TP_REQ_ERROR);
  free(junk);
  destroy_nodes(nodes, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_stripe_rule, reset_cfg),
      cmocka_unit_test_setup(test_stripe_sizes, reset_cfg),
      cmocka_unit_test_setup(test_stripe_mixed_counts, reset_cfg),
      cmocka_unit_test_setup(test_stripe_interleaved, reset_cfg),
      cmocka_unit_test_setup(test_length_mismatch_striped, reset_cfg),
      cmocka_unit_test_setup(test_garbage_header, reset_cfg),
      cmocka_unit_test_setup(test_cancel_striped, reset_cfg),
      cmocka_unit_test_setup(test_placement, reset_cfg),
  };
  return cmocka_run_group_tests(tests, tcp_test_setup, NULL);
}
