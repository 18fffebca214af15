/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: exchanges over loopback, many queued messages, peers that
 * lie about lengths, vanish, or do not know the secret; the spin-then-sleep
 * wait; cancel and wake. Striping over several sockets: test_tcp_stripe.c;
 * the operation's print in every header: test_tcp_print.c. */
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

static void test_exchange_sizes(void **state) {
  (void)state;
  exchange(3, NULL, 0);
}

static void test_many_queued(void **state) {
  (void)state;
  many(3, NMSG, msg_len, 0);
}

/* ---- a sender whose length disagrees with the posted receive ---- */

static void test_length_mismatch(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 2, addrs, NODES_SETUP_MS);
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

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Waiting with nothing arriving spins at most spin_us per call and then
 * sleeps: the CPU time is bounded by the spins, not by the wall time; a spin
 * longer than the timeout is cut to it. */
static void test_spin_then_sleep(void **state) {
  (void)state;
  cfg_spin_us = 2000;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 2, addrs, NODES_SETUP_MS);
  connect_nodes(nodes, 2);
  uint8_t buf[8];
  sc_tp_req_t rr = {0};
  assert_int_equal(ops->irecv(nodes[0].tp, 1, buf, sizeof(buf), &rr), SC_SUCCESS);
  double cpu0 = thread_cpu_ms();
  int64_t t0 = sc_now_ms();
  for (int i = 0; i < 10; i++) {
    int moved = 1;
    assert_int_equal(ops->progress(nodes[0].tp, 30, &moved), SC_SUCCESS);
    assert_int_equal(moved, 0);
  }
  double cpu = thread_cpu_ms() - cpu0;
  int64_t wall = sc_now_ms() - t0;
  /* 10 spins of 2 ms plus syscalls; a busy wait would cost about the wall time. */
  assert_true(wall >= 250);
  assert_true(cpu < 150.0);
  /* A spin of a second inside a 50 ms progress call. */
  sc_tcp_of(nodes[0].tp)->spin_us = 1000000;
  t0 = sc_now_ms();
  int moved;
  assert_int_equal(ops->progress(nodes[0].tp, 50, &moved), SC_SUCCESS);
  assert_true(sc_now_ms() - t0 < 900);
  /* A message that arrives while the receiver spins is taken. */
  uint8_t out[8] = "spin";
  sc_tp_req_t sr = {0};
  assert_int_equal(ops->isend(nodes[1].tp, 0, out, sizeof(out), &sr), SC_SUCCESS);
  char err[256];
  assert_int_equal(drive(nodes[0].tp, &rr, 1, 2000, err, sizeof(err)), SC_SUCCESS);
  assert_string_equal((char *)buf, "spin");
  destroy_nodes(nodes, 2);
}

/* ---- a peer that goes away while a receive is pending ---- */

static void test_peer_destroyed(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, NODES_SETUP_MS);
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
  sc_sockaddr_t a;
  assert_int_equal(sc_socket_addr_unpack(blob + 4, &a), SC_SUCCESS);
  int fd;
  assert_int_equal(sc_socket_connect(&a, sc_now_ms() + 2000, &fd), SC_SUCCESS);
  return fd;
}

static void test_wrong_secret_ignored(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, NODES_SETUP_MS);
  /* An impostor claiming to be rank 2, a silent connection and random bytes,
   * all queued at rank 0's listener before the real peers. */
  uint8_t wrong[SC_SECRET_LEN];
  memcpy(wrong, secret, sizeof(wrong));
  wrong[0] ^= 1;
  uint8_t hello[SC_TCP_HELLO_LEN];
  sc_tcp_encode_hello(hello, wrong, 2, 0, 3, 0, 1);
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
  create_nodes(nodes, 2, addrs, NODES_SETUP_MS);
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
  sc_sockaddr_t a;
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

/* Props of any pair, the caller's own or not: ranks advertising one address
 * share a host; the receiver spins unless its host has more ranks than CPUs
 * (the blob carries them). */
static void test_props(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, NODES_SETUP_MS);
  sc_tp_props_t p;
  assert_int_equal(ops->props(nodes[0].tp, 1, 2, &p), SC_ERR_INVALID_ARG); /* not connected */
  connect_nodes(nodes, 3);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(ops->props(nodes[r].tp, 1, 2, &p), SC_SUCCESS);
    assert_int_equal(p.kind, SC_TP_KIND_NET);
    assert_int_equal(p.locality, SC_TP_SAME_HOST);
    assert_int_equal(p.receiver_spins, sc_tcp_spins(3, cpus));
    assert_true(p.single_copy_min == 0 && p.latency_s == 0 && p.bandwidth_bps == 0);
  }
  sc_tcp_transport_t *t = sc_tcp_of(nodes[0].tp);
  assert_int_equal(t->peers[2].host_ranks, 3);
  t->peers[2].host_cpus = 2; /* as if rank 2's host had 2 CPUs */
  assert_int_equal(ops->props(nodes[0].tp, 0, 2, &p), SC_SUCCESS);
  assert_int_equal(p.receiver_spins, 0);
  assert_int_equal(ops->props(nodes[0].tp, 2, 2, &p), SC_ERR_INVALID_ARG);
  assert_int_equal(ops->props(nodes[0].tp, 0, 3, &p), SC_ERR_INVALID_ARG);
  destroy_nodes(nodes, 3);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_exchange_sizes, reset_cfg),
      cmocka_unit_test_setup(test_many_queued, reset_cfg),
      cmocka_unit_test_setup(test_length_mismatch, reset_cfg),
      cmocka_unit_test_setup(test_spin_then_sleep, reset_cfg),
      cmocka_unit_test_setup(test_peer_destroyed, reset_cfg),
      cmocka_unit_test_setup(test_wrong_secret_ignored, reset_cfg),
      cmocka_unit_test_setup(test_setup_timeout, reset_cfg),
      cmocka_unit_test_setup(test_wake_and_cancel, reset_cfg),
      cmocka_unit_test_setup(test_ipv6, reset_cfg),
      cmocka_unit_test_setup(test_props, reset_cfg),
      cmocka_unit_test_setup(test_single_rank, reset_cfg),
  };
  return cmocka_run_group_tests(tests, tcp_test_setup, NULL);
}
