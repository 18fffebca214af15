/* SPDX-License-Identifier: BSD-3-Clause */
/* The executor's receive lookahead (lib/core/executor.c): while a receive step
 * waits, the next receive step may be posted early, but never where the
 * early post would let incoming data overwrite memory that something
 * before its step still reads or writes. Hand-written schedules on 2 or 3
 * ranks (threads) over the loopback transport, whose messages are copied
 * only when both sides have posted (like a rendezvous), set up each hazard
 * so that a wrong early post gives wrong bytes; the expected bytes are
 * written out by hand from the schedules. Then when it applies, from the
 * executor's count of early posts: the next chunk from the same peer on
 * another host, and none in each case it leaves out. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "lib/core/comm.h"
#include "lib/schedule/sched.h"
#include "test/loopback/loopback.h"

#define B      64 /* elements of one region */
#define NELEM  (4 * B)
#define ROUNDS 20 /* the hazards are races without the rules: repeat them */

/* Regions of a rank's buffers, in elements. */
#define Y_OFF 0 /* RECV[0, B) */
#define X_OFF B /* RECV[B, 2B) */
#define C_OFF (2 * B)
#define T_OFF (3 * B)

typedef struct rank {
  sc_comm_t *comm;
  sc_sched_t sched;
  int32_t send[NELEM], recv[NELEM];
  sc_result_t res;
  char err[256];
} rank_t;

static rank_t ranks[3];
static int nranks;

static int host_of[3] = {0, 1, 2};

static void open_fabric(int p, int timeout_ms) {
  static uint8_t addrs[3][SC_TP_ADDR_MAX];
  nranks = p;
  for (int r = 0; r < p; r++) {
    rank_t *k = &ranks[r];
    memset(k, 0, sizeof(*k));
    sc_sched_init(&k->sched);
    sc_comm_t *c = k->comm = calloc(1, sizeof(sc_comm_t));
    assert_non_null(c);
    c->rank = r;
    c->nranks = p;
    c->cfg.timeout_ms = timeout_ms;
    c->tpops = &sc_loopback_transport;
    c->tune.host_of = host_of; /* each rank a host of its own: the lookahead applies */
    c->tune.nhosts = p;
    c->cfg.chunk_bytes = B * sizeof(int32_t); /* and B elements are a whole chunk */
    sc_tp_config_t cfg = {.rank = r, .nranks = p, .timeout_ms = 1000};
    size_t len = 0;
    assert_int_equal(c->tpops->create(&cfg, &c->tp, addrs[r], &len), SC_SUCCESS);
    for (int i = 0; i < NELEM; i++) {
      k->send[i] = 100000 * (r + 1) + i; /* rank 1's SEND[Y] is "A", SEND[X] is "B" */
      k->recv[i] = 500 + 1000 * r + i;
    }
  }
  for (int r = 0; r < p; r++)
    assert_int_equal(ranks[r].comm->tpops->connect_all(ranks[r].comm->tp, addrs, SC_TP_ADDR_MAX),
                     SC_SUCCESS);
}

static void close_fabric(void) {
  for (int r = 0; r < nranks; r++) {
    sc_comm_t *c = ranks[r].comm;
    c->tpops->cancel_all(c->tp, SC_ERR_ABORTED);
    c->tpops->destroy(c->tp);
    sc_exec_state_free(&c->ex);
    free(c);
    sc_sched_free(&ranks[r].sched);
  }
}

static int late_ms; /* the last rank starts this late */

static void *run_rank(void *arg) {
  rank_t *k = arg;
  if (late_ms && k == &ranks[nranks - 1]) {
    struct timespec ts = {0, late_ms * 1000000L};
    nanosleep(&ts, NULL);
  }
  sc_op_t op = {.coll = SC_COLL_ALLREDUCE,
                .sendbuf = k->send,
                .recvbuf = k->recv,
                .count = NELEM,
                .dtype = SC_INT32,
                .op = SC_SUM};
  sc_exec_args_t a = {.op = &op, .sched = &k->sched, .elem_size = sizeof(int32_t)};
  k->res = sc_sched_execute(k->comm, &a);
  if (k->res != SC_SUCCESS) snprintf(k->err, sizeof(k->err), "%s", sc_last_error());
  return NULL;
}

/* Runs every rank's schedule, one thread each; fails on any error. */
static void run_all(void) {
  pthread_t th[3];
  for (int r = 0; r < nranks; r++)
    assert_int_equal(pthread_create(&th[r], NULL, run_rank, &ranks[r]), 0);
  for (int r = 0; r < nranks; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < nranks; r++) {
    if (ranks[r].res != SC_SUCCESS) print_error("rank %d: %s\n", r, ranks[r].err);
    assert_int_equal(ranks[r].res, SC_SUCCESS);
  }
}

/* Rank 1 sends A (its SEND[Y]) and B (its SEND[X]) to rank 0 and receives
 * one region from rank 0 into RECV[C]; a token first when asked, so that
 * rank 0 has posted its first steps before A and B arrive. */
static void rank1_sends_a_b(int token, int recv_back) {
  sc_sched_t *s = &ranks[1].sched;
  if (token) sc_sched_recv(s, 0, SC_BUF_RECV, T_OFF, 1);
  sc_sched_send(s, 0, SC_BUF_SEND, Y_OFF, B);
  sc_sched_send(s, 0, SC_BUF_SEND, X_OFF, B);
  if (recv_back) sc_sched_recv(s, 0, SC_BUF_RECV, C_OFF, B);
}

static int32_t a_val(int i) {
  return 200000 + Y_OFF + i; /* rank 1's SEND[Y + i] */
}
static int32_t b_val(int i) {
  return 200000 + X_OFF + i; /* rank 1's SEND[X + i] */
}
static int32_t x0_val(int i) {
  return 500 + X_OFF + i; /* rank 0's RECV[X + i] before the schedule */
}

/* A send still in flight reads X: the receive into X may not be posted
 * early. Rank 0: send X to rank 2; receive Y and X from rank 1 (which sends
 * A and B at once). Rank 2 starts 50 ms late, so the send is still in
 * flight when B is there: rank 2 must get X's old bytes. */
static void test_inflight_send(void **state) {
  (void)state;
  for (int round = 0; round < 3; round++) {
    open_fabric(3, 10000);
    sc_sched_t *s = &ranks[0].sched;
    sc_sched_send(s, 2, SC_BUF_RECV, X_OFF, B);
    sc_sched_recv(s, 1, SC_BUF_RECV, Y_OFF, B);
    sc_sched_recv(s, 1, SC_BUF_RECV, X_OFF, B);
    rank1_sends_a_b(0, 0);
    sc_sched_recv(&ranks[2].sched, 0, SC_BUF_RECV, C_OFF, B);
    late_ms = 50;
    run_all();
    late_ms = 0;
    for (int i = 0; i < B; i++) {
      assert_int_equal(ranks[2].recv[C_OFF + i], x0_val(i));
      assert_int_equal(ranks[0].recv[Y_OFF + i], a_val(i));
      assert_int_equal(ranks[0].recv[X_OFF + i], b_val(i));
    }
    close_fabric();
  }
}

/* A SEND between the two receives reads X: rank 0: receive Y; send X;
 * receive X. Rank 1 must get X's old bytes. */
static void test_send_between(void **state) {
  (void)state;
  for (int round = 0; round < ROUNDS; round++) {
    open_fabric(2, 10000);
    sc_sched_t *s = &ranks[0].sched;
    sc_sched_send(s, 1, SC_BUF_RECV, T_OFF, 1);
    sc_sched_recv(s, 1, SC_BUF_RECV, Y_OFF, B);
    sc_sched_send(s, 1, SC_BUF_RECV, X_OFF, B);
    sc_sched_recv(s, 1, SC_BUF_RECV, X_OFF, B);
    rank1_sends_a_b(1, 1);
    run_all();
    for (int i = 0; i < B; i++) {
      assert_int_equal(ranks[1].recv[C_OFF + i], x0_val(i));
      assert_int_equal(ranks[0].recv[X_OFF + i], b_val(i));
    }
    close_fabric();
  }
}

/* The current step writes X (a reduction into X), the next receives into
 * X: the received bytes must win. Rank 0: X = SEND[Y] + A; receive X. */
static void test_current_dst(void **state) {
  (void)state;
  for (int round = 0; round < ROUNDS; round++) {
    open_fabric(2, 10000);
    sc_sched_t *s = &ranks[0].sched;
    sc_sched_recv_reduce(s, 1, SC_BUF_RECV, X_OFF, SC_BUF_SEND, Y_OFF, B);
    sc_sched_recv(s, 1, SC_BUF_RECV, X_OFF, B);
    rank1_sends_a_b(0, 0);
    run_all();
    for (int i = 0; i < B; i++) assert_int_equal(ranks[0].recv[X_OFF + i], b_val(i));
    close_fabric();
  }
}

/* The current step reads X (its operand), the next receives into X: the
 * reduction must see X's old bytes. Rank 0: Y = X + A; receive X. */
static void test_current_operand(void **state) {
  (void)state;
  for (int round = 0; round < ROUNDS; round++) {
    open_fabric(2, 10000);
    sc_sched_t *s = &ranks[0].sched;
    sc_sched_recv_reduce(s, 1, SC_BUF_RECV, Y_OFF, SC_BUF_RECV, X_OFF, B);
    sc_sched_recv(s, 1, SC_BUF_RECV, X_OFF, B);
    rank1_sends_a_b(0, 0);
    run_all();
    for (int i = 0; i < B; i++) {
      assert_int_equal(ranks[0].recv[Y_OFF + i], x0_val(i) + a_val(i));
      assert_int_equal(ranks[0].recv[X_OFF + i], b_val(i));
    }
    close_fabric();
  }
}

/* Only SENDs may lie between: a COPY that reads X stops the lookahead.
 * Rank 0: receive Y; copy X to C; receive X. C must hold X's old bytes. */
static void test_copy_between(void **state) {
  (void)state;
  for (int round = 0; round < ROUNDS; round++) {
    open_fabric(2, 10000);
    sc_sched_t *s = &ranks[0].sched;
    sc_sched_recv(s, 1, SC_BUF_RECV, Y_OFF, B);
    sc_sched_copy(s, SC_BUF_RECV, C_OFF, SC_BUF_RECV, X_OFF, B);
    sc_sched_recv(s, 1, SC_BUF_RECV, X_OFF, B);
    rank1_sends_a_b(0, 0);
    run_all();
    for (int i = 0; i < B; i++) {
      assert_int_equal(ranks[0].recv[C_OFF + i], x0_val(i));
      assert_int_equal(ranks[0].recv[X_OFF + i], b_val(i));
    }
    close_fabric();
  }
}

/* Consecutive reductions alternate between the two staging buffers: each
 * must reduce its own message. Rank 0: Y += A; X += B (both from rank 1,
 * both already sent). */
static void test_reduce_chain(void **state) {
  (void)state;
  for (int round = 0; round < ROUNDS; round++) {
    open_fabric(2, 10000);
    sc_sched_t *s = &ranks[0].sched;
    sc_sched_recv_reduce(s, 1, SC_BUF_RECV, Y_OFF, SC_BUF_RECV, Y_OFF, B);
    sc_sched_send(s, 1, SC_BUF_SEND, C_OFF, 1);
    sc_sched_recv_reduce(s, 1, SC_BUF_RECV, X_OFF, SC_BUF_RECV, X_OFF, B);
    sc_sched_recv_reduce(s, 1, SC_BUF_RECV, C_OFF, SC_BUF_RECV, C_OFF, B);
    sc_sched_t *t = &ranks[1].sched;
    sc_sched_send(t, 0, SC_BUF_SEND, Y_OFF, B);
    sc_sched_send(t, 0, SC_BUF_SEND, X_OFF, B);
    sc_sched_send(t, 0, SC_BUF_SEND, C_OFF, B);
    sc_sched_recv(t, 0, SC_BUF_RECV, T_OFF, 1);
    run_all();
    for (int i = 0; i < B; i++) {
      assert_int_equal(ranks[0].recv[Y_OFF + i], 500 + Y_OFF + i + a_val(i));
      assert_int_equal(ranks[0].recv[X_OFF + i], x0_val(i) + b_val(i));
      assert_int_equal(ranks[0].recv[C_OFF + i], 500 + C_OFF + i + 200000 + C_OFF + i);
    }
    close_fabric();
  }
}

/* Rank 0 receives Y from rank 1, then X from rank x_from (1: the same
 * peer, 2: another); the sends are posted at once. Returns how many
 * receives rank 0 posted early. */
static uint64_t two_receives(int one_host_only, size_t chunk, int x_from) {
  open_fabric(3, 10000);
  static int one_host[3] = {0, 0, 0};
  for (int r = 0; r < 3; r++) {
    if (one_host_only) {
      ranks[r].comm->tune.host_of = one_host;
      ranks[r].comm->tune.nhosts = 1;
    }
    ranks[r].comm->cfg.chunk_bytes = chunk;
  }
  sc_sched_recv(&ranks[0].sched, 1, SC_BUF_RECV, Y_OFF, B);
  sc_sched_recv(&ranks[0].sched, x_from, SC_BUF_RECV, X_OFF, B);
  sc_sched_send(&ranks[1].sched, 0, SC_BUF_SEND, Y_OFF, B);
  sc_sched_send(&ranks[x_from].sched, 0, SC_BUF_SEND, X_OFF, B);
  run_all();
  for (int i = 0; i < B; i++) {
    assert_int_equal(ranks[0].recv[Y_OFF + i], a_val(i));
    assert_int_equal(ranks[0].recv[X_OFF + i], 100000 * (x_from + 1) + X_OFF + i);
  }
  uint64_t n = ranks[0].comm->ex.early_posts;
  close_fabric();
  return n;
}

/* The next chunk of a stream from a peer on another host is posted early;
 * not on one host, not below a chunk, not from another peer
 * (lib/core/executor.c says why). */
static void test_when_early(void **state) {
  (void)state;
  const size_t chunk = B * sizeof(int32_t);
  assert_int_equal(two_receives(0, chunk, 1), 1);
  assert_int_equal(two_receives(1, chunk, 1), 0);
  assert_int_equal(two_receives(0, chunk + 1, 1), 0);
  assert_int_equal(two_receives(0, chunk, 2), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inflight_send), cmocka_unit_test(test_send_between),
      cmocka_unit_test(test_current_dst),   cmocka_unit_test(test_current_operand),
      cmocka_unit_test(test_copy_between),  cmocka_unit_test(test_reduce_chain),
      cmocka_unit_test(test_when_early),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
