/* SPDX-License-Identifier: BSD-3-Clause */
/* The network model's per-message CPU (sc_link_model_t.msg_cpu_s): its fit
 * from the calibration's rounds, one message priced as LogGP prices it, and
 * the all-to-all's choice it moves (Bruck's log2 P messages against the
 * pairwise exchange's P - 1 for small blocks). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/tune/tune.h"

static void assert_near(double got, double want) {
  if (fabs(got - want) > 1e-12 + 1e-9 * fabs(want)) fail_msg("got %.12g, want %.12g", got, want);
}

/* A fan of k messages each way takes the round's time plus k - 1 messages'
 * CPU; the rest of the round is the wire. Out of range: clamped. */
static void test_fit_msg(void **state) {
  (void)state;
  double alpha, msg;
  sc_tune_fit_msg(86.6e-6, 86.6e-6 + 2 * 50e-6, 3, &alpha, &msg);
  assert_near(msg, 50e-6);
  assert_near(alpha, 36.6e-6);
  sc_tune_fit_msg(80e-6, 80e-6 + 9 * 4e-6, 10, &alpha, &msg);
  assert_near(msg, 4e-6);
  assert_near(alpha, 76e-6);
  /* A fan faster than the round (noise): no message CPU. */
  sc_tune_fit_msg(80e-6, 70e-6, 3, &alpha, &msg);
  assert_near(msg, 0);
  assert_near(alpha, 80e-6);
  /* More than the whole round per message: all of it, no wire left. */
  sc_tune_fit_msg(80e-6, 1e-3, 2, &alpha, &msg);
  assert_near(msg, 80e-6);
  assert_near(alpha, 0);
  /* One message each way (two ranks) cannot tell them apart; nor no fan. */
  sc_tune_fit_msg(80e-6, 200e-6, 1, &alpha, &msg);
  assert_near(msg, 0);
  assert_near(alpha, 80e-6);
  sc_tune_fit_msg(80e-6, NAN, 3, &alpha, &msg);
  assert_near(msg, 0);
  assert_near(alpha, 80e-6);
}

static sc_link_model_t net(double alpha, double beta, double msg) {
  sc_link_model_t m;
  memset(&m, 0, sizeof(m));
  m.alpha_s = alpha;
  m.beta_s_per_b = beta;
  m.host_s_per_b = beta;
  m.gamma_s_per_b = 1.0 / 6e9;
  m.msg_cpu_s = msg;
  return m;
}

/* Two ranks swap one block (the ring all-gather on 2): each message is
 * priced o/2 + b beta + L + o/2, LogGP's one message. */
static void test_one_message(void **state) {
  (void)state;
  const double L = 30e-6, beta = 8e-9, o = 20e-6;
  sc_coll_args_t a = {.coll = SC_COLL_ALLGATHER,
                      .nranks = 2,
                      .count = 1000,
                      .elem_size = 4,
                      .chunk_elems = 1 << 20};
  int ring = sc_algo_find(SC_COLL_ALLGATHER, "ring");
  assert_true(ring >= 0);
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(SC_COLL_ALLGATHER, &n);
  double with, without;
  sc_link_model_t m = net(L, beta, o), m0 = net(L, beta, 0);
  assert_int_equal(sc_tune_predict(&m, c[ring].gen, &a, &with), SC_SUCCESS);
  assert_int_equal(sc_tune_predict(&m0, c[ring].gen, &a, &without), SC_SUCCESS);
  assert_near(with, L + o + 4000 * beta);
  assert_near(without, L + 4000 * beta);
}

/* Eight hosts, blocks of 8 bytes. With the wire alone the pairwise
 * exchange's P - 1 messages, all posted at once, arrive together one
 * latency later, ahead of Bruck's three rounds; with the message CPU the
 * calibration measured on the 1 Gbit/s emulated cluster (about 50 us of
 * an 87 us round: perf/README.md) each rank spends 7 messages' CPU either
 * way, and Bruck wins, as it did there (273 against 416 us). */
static void test_alltoall_choice(void **state) {
  (void)state;
  sc_coll_args_t a = {
      .coll = SC_COLL_ALLTOALL, .nranks = 8, .count = 2, .elem_size = 4, .chunk_elems = 1 << 17};
  const int pairwise = sc_algo_find(SC_COLL_ALLTOALL, "pairwise"),
            bruck = sc_algo_find(SC_COLL_ALLTOALL, "bruck");
  assert_true(pairwise >= 0 && bruck >= 0);
  int pick;
  double est[SC_TUNE_MAX_CANDIDATES];
  sc_link_model_t wire = net(87e-6, 8e-9, 0);
  assert_int_equal(sc_tune_best(&wire, &a, &pick, est), SC_SUCCESS);
  assert_int_equal(pick, pairwise);
  const double L = 37e-6, o = 50e-6;
  sc_link_model_t cpu = net(L, 8e-9, o);
  assert_int_equal(sc_tune_best(&cpu, &a, &pick, est), SC_SUCCESS);
  assert_int_equal(pick, bruck);
  /* Pairwise: seven messages' CPU on every rank (half of each as it posts,
   * half as it takes one), and one latency that overlaps none of it at
   * most. */
  assert_true(est[pairwise] >= 7 * o && est[pairwise] <= 7 * o + L + 1e-6);
  /* Bruck: three rounds of one message each way, each at least a round. */
  assert_true(est[bruck] >= 3 * (L + o));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fit_msg),
      cmocka_unit_test(test_one_message),
      cmocka_unit_test(test_alltoall_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
