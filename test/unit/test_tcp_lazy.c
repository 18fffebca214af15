/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport with SC_CONNECT=lazy: connect_all only reads the address
 * table, a pair is connected by the first send between its ranks, both ranks
 * sending at once leaves one connection (the higher rank's), requests posted
 * before the pair is connected keep their order, a small send completes
 * before its receive is posted, pairs never used stay unconnected, and a
 * peer that never answers fails the waiting requests at the deadline with
 * its name. */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "test/unit/tcp_nodes.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/transport.h"

/* Sockets established between two nodes, counted from both ends. */
static int pair_socks(node_t *nodes, int a, int b) {
  const sc_tcp_peer_t *pa = &sc_tcp_of(nodes[a].tp)->peers[b];
  int n = 0;
  for (int k = 0; pa->socks && k < pa->nsocks; k++) n += pa->socks[k].fd >= 0;
  return n;
}

/* Every size to every peer, both directions posted at once: every pair is
 * raced from both ends. */
static void test_lazy_exchange(void **state) {
  (void)state;
  cfg_lazy = 1;
  for (int ns = 1; ns <= 3; ns += 2) {
    set_nsocks(ns);
    for (int n = 2; n <= MAXN; n++) exchange(n, sizes, NSIZES);
  }
}

static size_t small_len(int seq) {
  return (size_t)((seq * 131) % 700);
}

/* Many messages queued before the pair exists, through a window of receives. */
static void test_lazy_many_queued(void **state) {
  (void)state;
  cfg_lazy = 1;
  many(3, 200, small_len, 0);
  many(4, 120, small_len, 4);
}

/* Each node sends to its successor and receives from its predecessor,
 * nd->nmsgs rounds. */
static void *ring_main(void *arg) {
  node_t *nd = arg;
  int n = nd->nranks, me = nd->rank, next = (me + 1) % n, prev = (me + n - 1) % n;
  nd->res = SC_SUCCESS;
  for (int round = 0; round < nd->nmsgs && nd->res == SC_SUCCESS; round++) {
    uint8_t out[100], in[100];
    pattern(out, sizeof(out), me, next, round);
    sc_tp_req_t r[2];
    memset(r, 0, sizeof(r));
    nd->res = ops->irecv(nd->tp, prev, in, sizeof(in), &r[0]);
    if (nd->res == SC_SUCCESS) nd->res = ops->isend(nd->tp, next, out, sizeof(out), &r[1]);
    if (nd->res == SC_SUCCESS) nd->res = drive(nd->tp, r, 2, 10000, nd->err, sizeof(nd->err));
    if (nd->res == SC_SUCCESS && !check_pattern(in, sizeof(in), prev, me, round)) {
      nd->res = SC_ERR_INTERNAL;
      snprintf(nd->err, sizeof(nd->err), "rank %d: wrong content from %d", me, prev);
    }
  }
  return NULL;
}

/* A ring connects each rank with its two neighbours only. */
static void test_lazy_ring_connects_neighbours(void **state) {
  (void)state;
  set_nsocks(2);
  cfg_lazy = 1;
  const int n = MAXN;
  node_t nodes[MAXN];
  uint8_t addrs[MAXN * SC_TP_ADDR_MAX];
  create_nodes(nodes, n, addrs, NODES_SETUP_MS);
  connect_nodes(nodes, n);
  for (int r = 0; r < n; r++) assert_int_equal(sc_tcp_of(nodes[r].tp)->npeers_connected, 0);
  for (int r = 0; r < n; r++) nodes[r].nmsgs = 5;
  run_threads(nodes, n, ring_main);
  for (int r = 0; r < n; r++) {
    int next = (r + 1) % n;
    /* The sender connected; the receiver may still be reading the last ack
     * of a pair it has not used since: count from the sender's end. */
    assert_int_equal(pair_socks(nodes, r, next), 2);
    for (int q = 0; q < n; q++)
      if (q != r && q != next && q != (r + n - 1) % n) assert_int_equal(pair_socks(nodes, r, q), 0);
    assert_true(sc_tcp_of(nodes[r].tp)->npeers_connected <= 2);
  }
  destroy_nodes(nodes, n);
}

/* A small send completes before its receiver posts anything, from the lower
 * and from the higher rank of the pair (the receiver only drives progress). */
static void test_lazy_send_completes_first(void **state) {
  (void)state;
  cfg_lazy = 1;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 2, addrs, NODES_SETUP_MS);
  connect_nodes(nodes, 2);
  for (int from = 0; from < 2; from++) {
    int to = 1 - from;
    uint8_t out[64], in[64] = {0};
    pattern(out, sizeof(out), from, to, 7);
    sc_tp_req_t s = {0}, r = {0};
    assert_int_equal(ops->isend(nodes[from].tp, to, out, sizeof(out), &s), SC_SUCCESS);
    int64_t end = sc_now_ms() + 5000;
    while (s.state == SC_TP_REQ_PENDING && sc_now_ms() < end) {
      int moved;
      assert_int_equal(ops->progress(nodes[from].tp, 0, &moved), SC_SUCCESS);
      assert_int_equal(ops->progress(nodes[to].tp, 0, &moved), SC_SUCCESS);
    }
    assert_int_equal(s.state, SC_TP_REQ_DONE);
    assert_int_equal(ops->irecv(nodes[to].tp, from, in, sizeof(in), &r), SC_SUCCESS);
    char err[256];
    assert_int_equal(drive(nodes[to].tp, &r, 1, 5000, err, sizeof(err)), SC_SUCCESS);
    assert_true(check_pattern(in, sizeof(in), from, to, 7));
  }
  /* The second message used the pair the first one made. */
  assert_int_equal(sc_tcp_of(nodes[0].tp)->npeers_connected, 1);
  assert_int_equal(sc_tcp_of(nodes[1].tp)->npeers_connected, 1);
  destroy_nodes(nodes, 2);
}

/* A peer that never drives its transport: the send fails at the deadline
 * with the peer named; a receive from a rank that sends nothing connects
 * nothing; cancel_all fails what waits for a pair. */
static void test_lazy_deadline_and_cancel(void **state) {
  (void)state;
  cfg_lazy = 1;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, 300);
  connect_nodes(nodes, 3);
  uint8_t buf[16] = {0}, rb[16];
  sc_tp_req_t s = {0}, r = {0};
  assert_int_equal(ops->irecv(nodes[1].tp, 2, rb, sizeof(rb), &r), SC_SUCCESS);
  int64_t t0 = sc_now_ms();
  assert_int_equal(ops->isend(nodes[1].tp, 0, buf, sizeof(buf), &s), SC_SUCCESS);
  sc_result_t res = SC_SUCCESS;
  while (s.state == SC_TP_REQ_PENDING && sc_now_ms() - t0 < 3000) {
    int moved;
    res = ops->progress(nodes[1].tp, 20, &moved);
    if (res != SC_SUCCESS) break;
  }
  int64_t took = sc_now_ms() - t0;
  assert_int_equal(res, SC_ERR_TIMEOUT);
  assert_non_null(strstr(sc_last_error(), "rank 0 (127.0.0.1:"));
  assert_non_null(strstr(sc_last_error(), "sent no ack"));
  assert_int_equal(s.state, SC_TP_REQ_ERROR);
  assert_true(took >= 250 && took < 2000);
  /* Later requests to the failed peer fail at once. */
  sc_tp_req_t s2 = {0};
  assert_int_equal(ops->isend(nodes[1].tp, 0, buf, sizeof(buf), &s2), SC_ERR_REMOTE);
  /* The receive from rank 2 waits, unconnected, until cancelled. */
  assert_int_equal(r.state, SC_TP_REQ_PENDING);
  assert_int_equal(pair_socks(nodes, 1, 2), 0);
  ops->cancel_all(nodes[1].tp, SC_ERR_ABORTED);
  assert_int_equal(r.state, SC_TP_REQ_ERROR);
  assert_int_equal(r.status, SC_ERR_ABORTED);
  destroy_nodes(nodes, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_lazy_exchange, reset_cfg),
      cmocka_unit_test_setup(test_lazy_many_queued, reset_cfg),
      cmocka_unit_test_setup(test_lazy_ring_connects_neighbours, reset_cfg),
      cmocka_unit_test_setup(test_lazy_send_completes_first, reset_cfg),
      cmocka_unit_test_setup(test_lazy_deadline_and_cancel, reset_cfg),
  };
  return cmocka_run_group_tests(tests, tcp_test_setup, NULL);
}
