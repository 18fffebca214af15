/* SPDX-License-Identifier: BSD-3-Clause */
/* The cost model: predictions of single-chunk ring and recursive doubling
 * equal their textbook formulas, and the choice flips from recursive doubling
 * to Rabenseifner/ring where the formulas cross. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/core/comm.h"
#include "lib/core/links.h"
#include "lib/tune/tune.h"

static const double alpha = 20e-6, beta = 1e-9; /* 20 us, 1 GB/s */

static sc_link_model_t plain_model(void) {
  sc_link_model_t m = {.alpha_s = alpha, .beta_s_per_b = beta};
  return m; /* no reduction cost, no shared host: the formulas' world */
}

static sc_coll_args_t allreduce_args(int p, size_t count) {
  sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                      .nranks = p,
                      .count = count,
                      .elem_size = 4,
                      .chunk_elems = (size_t)1 << 40}; /* one chunk: no pipelining */
  return a;
}

static void test_ring_and_rd_match_formulas(void **state) {
  sc_link_model_t m = plain_model();
  for (int p = 2; p <= 32; p *= 2) {
    size_t count = (size_t)p * 4096;
    double bytes = (double)count * 4, t;
    sc_coll_args_t a = allreduce_args(p, count);
    assert_int_equal(sc_tune_predict(&m, sc_ring_allreduce_schedule, &a, &t), SC_SUCCESS);
    double ring = 2.0 * (p - 1) * (alpha + bytes / p * beta);
    assert_true(fabs(t - ring) <= 1e-9 * ring + 1e-12);
    assert_int_equal(sc_tune_predict(&m, sc_rd_allreduce_schedule, &a, &t), SC_SUCCESS);
    double rd = log2(p) * (alpha + bytes * beta);
    assert_true(fabs(t - rd) <= 1e-9 * rd + 1e-12);
  }
}

/* Below the size where recursive doubling's log2P (a + nb) meets
 * Rabenseifner's 2 log2P a + 2(P-1)/P nb (the cheaper of the large-message
 * formulas) rd is chosen; above it, Rabenseifner or ring. */
static void test_crossover_where_formulas_put_it(void **state) {
  sc_link_model_t m = plain_model();
  int p = 8;
  double lg = 3.0, frac = 2.0 * (p - 1) / p;
  double cross_bytes = lg * alpha / ((lg - frac) * beta);
  size_t below = (size_t)(cross_bytes * 0.8 / 4) / p * p;
  size_t above = (size_t)(cross_bytes * 1.25 / 4) / p * p;
  int best;
  double est[SC_TUNE_MAX_CANDIDATES];
  sc_coll_args_t a = allreduce_args(p, 2);
  assert_int_equal(sc_tune_best(&m, &a, &best, est), SC_SUCCESS);
  assert_string_equal(sc_tune_candidate_name(SC_COLL_ALLREDUCE, best), "rd");
  a = allreduce_args(p, below);
  assert_int_equal(sc_tune_best(&m, &a, &best, est), SC_SUCCESS);
  assert_string_equal(sc_tune_candidate_name(SC_COLL_ALLREDUCE, best), "rd");
  /* The model's Rabenseifner is the formula's. */
  double bytes = (double)below * 4;
  double rab = 2 * lg * alpha + frac * bytes * beta;
  assert_true(fabs(est[3] - rab) <= 1e-6 * rab);
  a = allreduce_args(p, above);
  assert_int_equal(sc_tune_best(&m, &a, &best, est), SC_SUCCESS);
  const char *big = sc_tune_candidate_name(SC_COLL_ALLREDUCE, best);
  assert_true(!strcmp(big, "ring") || !strcmp(big, "rabenseifner"));
  a = allreduce_args(p, (size_t)16 << 20);
  assert_int_equal(sc_tune_best(&m, &a, &best, est), SC_SUCCESS);
  big = sc_tune_candidate_name(SC_COLL_ALLREDUCE, best);
  assert_true(!strcmp(big, "ring") || !strcmp(big, "rabenseifner"));
  assert_true(est[0] < est[2]); /* ring beats rd for large messages */
}

/* The same inputs give the same choice (every rank computes it alone). */
static void test_choice_is_deterministic(void **state) {
  sc_link_model_t m = plain_model();
  m.gamma_s_per_b = 1.0 / 5e9;
  m.host_cores = 2;
  m.host_s_per_b = 1e-9;
  for (size_t count = 1; count < ((size_t)1 << 24); count *= 7) {
    sc_coll_args_t a = allreduce_args(6, count);
    a.chunk_elems = 1 << 16;
    int b1, b2;
    double e1[SC_TUNE_MAX_CANDIDATES], e2[SC_TUNE_MAX_CANDIDATES];
    assert_int_equal(sc_tune_best(&m, &a, &b1, e1), SC_SUCCESS);
    assert_int_equal(sc_tune_best(&m, &a, &b2, e2), SC_SUCCESS);
    assert_int_equal(b1, b2);
    assert_memory_equal(e1, e2, sizeof(double) * 4);
  }
}

/* One host: the processor-sharing replay of recursive doubling on two ranks
 * (copy to scratch, send, receive-and-reduce) against the timeline worked
 * out by hand, with enough cores and with the two ranks sharing one. */
static void test_host_model_timeline(void **state) {
  sc_link_model_t m = {.alpha_s = 30e-6,
                       .gamma_s_per_b = 1.0 / 4e9,
                       .host_s_per_b = 1.0 / 2e9,
                       .host_s_per_msg = 10e-6};
  const double bytes = 4096.0 * 4;
  sc_coll_args_t a = allreduce_args(2, 4096);
  double copy = bytes * m.gamma_s_per_b;
  double send = 0.5 * m.host_s_per_msg + 0.5 * bytes * m.host_s_per_b;
  double recv = send + bytes * m.gamma_s_per_b;
  double t;
  m.host_cores = 2;
  assert_int_equal(sc_tune_predict(&m, sc_rd_allreduce_schedule, &a, &t), SC_SUCCESS);
  double expect = copy + send + m.alpha_s + recv;
  assert_true(fabs(t - expect) <= 1e-9 * expect);
  m.host_cores = 1; /* both ranks runnable on one core: each at half speed */
  assert_int_equal(sc_tune_predict(&m, sc_rd_allreduce_schedule, &a, &t), SC_SUCCESS);
  expect = 2 * (copy + send) + m.alpha_s + 2 * recv;
  assert_true(fabs(t - expect) <= 1e-9 * expect);
}

/* Hand-built schedules of a few steps on a few ranks (peers as given). */
typedef struct hand_sched {
  sc_sched_t s[4];
  int p;
} hand_sched_t;

static void hand_init(hand_sched_t *h, int p) {
  h->p = p;
  for (int i = 0; i < p; i++) sc_sched_init(&h->s[i]);
}

static void hand_free(hand_sched_t *h) {
  for (int i = 0; i < h->p; i++) sc_sched_free(&h->s[i]);
}

/* Rank 0 sends count floats to rank `to`, which waits for them; the other
 * ranks of p have nothing to do. The simulated time. */
static double one_message(const sc_link_model_t *m, int p, int to, size_t count) {
  hand_sched_t h;
  hand_init(&h, p);
  assert_int_equal(sc_sched_send(&h.s[0], to, SC_BUF_SEND, 0, count), SC_SUCCESS);
  assert_int_equal(sc_sched_recv(&h.s[to], 0, SC_BUF_RECV, 0, count), SC_SUCCESS);
  double t = 0;
  assert_int_equal(sc_tune_simulate_host(m, p, p, 0, 4, h.s, &t), SC_SUCCESS);
  hand_free(&h);
  return t;
}

static void assert_time(double t, double expect) {
  assert_true(fabs(t - expect) <= 1e-9 * expect);
}

/* When its receiver notices a message: rank 0 sends, the receiver waits for
 * it (ranks with nothing to do share the cores). Polling (spin_s long), it
 * sees it alpha after the send; asleep (spin_s over before the message
 * came), wake_s later; with more ranks than cores, turn_s later for each
 * other rank per core; from a sender on its own core, same_core_s later
 * still (the sender has to give the core up first). On 4 ranks and 2 cores
 * (rank i on core i mod 2), 0 -> 1 crosses cores and 0 -> 2 does not. */
static void test_host_model_noticing(void **state) {
  sc_link_model_t m = {.alpha_s = 5e-6,
                       .host_s_per_b = 1.0 / 2e9,
                       .host_s_per_msg = 2e-6,
                       .host_cores = 4,
                       .turn_s = 3e-6,
                       .wake_s = 40e-6,
                       .same_core_s = 11e-6};
  const size_t count = 1 << 16;
  const double bytes = (double)count * 4;
  const double send = 0.5 * m.host_s_per_msg + 0.5 * bytes * m.host_s_per_b, recv = send;
  m.spin_s = 1.0;
  assert_time(one_message(&m, 4, 1, count), send + m.alpha_s + recv);
  m.spin_s = send / 2; /* asleep when the message comes */
  assert_time(one_message(&m, 4, 1, count), send + m.alpha_s + m.wake_s + recv);
  m.spin_s = 1.0;
  m.host_cores = 2; /* two ranks per core: one other's turn */
  const double cross = send + m.alpha_s + m.turn_s + recv;
  assert_time(one_message(&m, 4, 1, count), cross);
  assert_time(one_message(&m, 4, 2, count), cross + m.same_core_s);
  m.host_cores = 1; /* four per core: three others' turns, the sender on it too */
  assert_time(one_message(&m, 4, 1, count), send + m.alpha_s + 3 * m.turn_s + m.same_core_s + recv);
  m.host_cores = 2;
  m.same_core_s = 0; /* without the term a link within a core costs as one across */
  assert_time(one_message(&m, 4, 2, count), cross);
}

/* What waiting costs in CPU: rank 0 sends, rank 1 waits for it, both on one
 * core. Polling throughout, rank 1 takes poll_cpu of the core's share, so
 * the send runs at 1/(1 + poll_cpu) speed; with cores to spare it takes
 * nothing. Polling for only a third of the send's time, it slows the send
 * while it polls, and then, asleep when the message comes, sees it wake_s
 * later and pays wake_cpu_s to be woken. */
static void test_host_model_waiting_costs(void **state) {
  sc_link_model_t m = {.alpha_s = 5e-6,
                       .host_s_per_b = 1.0 / 2e9,
                       .host_s_per_msg = 2e-6,
                       .host_cores = 1,
                       .wake_s = 40e-6,
                       .wake_cpu_s = 7e-6,
                       .poll_cpu = 0.5};
  const size_t count = 1 << 16;
  const double bytes = (double)count * 4;
  const double send = 0.5 * m.host_s_per_msg + 0.5 * bytes * m.host_s_per_b, recv = send;
  m.spin_s = 1.0;
  assert_time(one_message(&m, 2, 1, count), 1.5 * send + m.alpha_s + recv);
  m.host_cores = 2; /* a core each: polling takes nothing from the sender */
  assert_time(one_message(&m, 2, 1, count), send + m.alpha_s + recv);
  m.host_cores = 1;
  m.spin_s = send / 3; /* by then the send has done spin_s / 1.5 of its work */
  assert_time(one_message(&m, 2, 1, count),
              send + m.spin_s / 3 + m.alpha_s + m.wake_s + m.wake_cpu_s + recv);
}

/* Placement: rank i runs on core i mod cores, and ranks do not move to an
 * idle core. On 4 ranks and 2 cores, ranks 0 and 2 copying at once share
 * core 0 while core 1 idles (each at half speed); ranks 0 and 1 have a core
 * each. */
static void test_host_model_placement(void **state) {
  sc_link_model_t m = {.gamma_s_per_b = 1.0 / 4e9, .host_cores = 2};
  const size_t count = 1 << 16;
  const double copy = (double)count * 4 * m.gamma_s_per_b;
  for (int other = 1; other <= 2; other++) {
    hand_sched_t h;
    hand_init(&h, 4);
    assert_int_equal(sc_sched_copy(&h.s[0], SC_BUF_RECV, 0, SC_BUF_SEND, 0, count), SC_SUCCESS);
    assert_int_equal(sc_sched_copy(&h.s[other], SC_BUF_RECV, 0, SC_BUF_SEND, 0, count), SC_SUCCESS);
    double t;
    assert_int_equal(sc_tune_simulate_host(&m, 4, 4, 0, 4, h.s, &t), SC_SUCCESS);
    double expect = other == 2 ? 2 * copy : copy;
    assert_true(fabs(t - expect) <= 1e-9 * expect);
    hand_free(&h);
  }
}

/* Cache: a region costs cold_s_per_b more per byte unless the rank touched
 * it within its last reuse_b bytes. One rank copies block 0 of SEND to block
 * 0 of RECV twice, then block 1. While reuse_b is shorter than the whole
 * operation's traffic (three copies), the run before it left nothing hot:
 * the first copy finds both regions cold, the second hot (touched one copy
 * ago), the third cold again (other regions); with reuse_b shorter than one
 * copy the second is cold too. When the three copies fit in reuse_b, the
 * run before left every region hot. */
static void test_host_model_cache_reuse(void **state) {
  sc_link_model_t m = {.gamma_s_per_b = 1.0 / 4e9, .host_cores = 1, .cold_s_per_b = 1.0 / 3e9};
  const size_t count = 1 << 16;
  const double bytes = (double)count * 4, copy = bytes * m.gamma_s_per_b,
               cold = bytes * m.cold_s_per_b;
  hand_sched_t h;
  hand_init(&h, 1);
  assert_int_equal(sc_sched_copy(&h.s[0], SC_BUF_RECV, 0, SC_BUF_SEND, 0, count), SC_SUCCESS);
  assert_int_equal(sc_sched_copy(&h.s[0], SC_BUF_RECV, 0, SC_BUF_SEND, 0, count), SC_SUCCESS);
  assert_int_equal(sc_sched_copy(&h.s[0], SC_BUF_RECV, count, SC_BUF_SEND, count, count),
                   SC_SUCCESS);
  double t;
  m.reuse_b = 2 * bytes;
  assert_int_equal(sc_tune_simulate_host(&m, 1, 1, 0, 4, h.s, &t), SC_SUCCESS);
  double expect = 3 * copy + 2 * cold + 0 + 2 * cold;
  assert_true(fabs(t - expect) <= 1e-9 * expect);
  m.reuse_b = bytes / 2;
  assert_int_equal(sc_tune_simulate_host(&m, 1, 1, 0, 4, h.s, &t), SC_SUCCESS);
  expect = 3 * copy + 6 * cold;
  assert_true(fabs(t - expect) <= 1e-9 * expect);
  m.reuse_b = 3 * bytes;
  assert_int_equal(sc_tune_simulate_host(&m, 1, 1, 0, 4, h.s, &t), SC_SUCCESS);
  assert_true(fabs(t - 3 * copy) <= 1e-9 * copy);
  m.reuse_b = 3 * bytes - 1; /* one byte short: the first touches are cold again */
  assert_int_equal(sc_tune_simulate_host(&m, 1, 1, 0, 4, h.s, &t), SC_SUCCESS);
  expect = 3 * copy + 4 * cold;
  assert_true(fabs(t - expect) <= 1e-9 * expect);
  m.cold_s_per_b = 0;
  assert_int_equal(sc_tune_simulate_host(&m, 1, 1, 0, 4, h.s, &t), SC_SUCCESS);
  assert_true(fabs(t - 3 * copy) <= 1e-9 * copy);
  hand_free(&h);
}

/* A message of at least pull_min_b bytes is copied by its receiver alone, at
 * its own rate: rank 0 sends the same block to ranks 1 and 2 (enough cores).
 * Two-sided, rank 0 copies half of each message in turn; single copy, its
 * sends cost only the per-message share and the receivers copy in
 * parallel. */
static void test_host_model_single_copy(void **state) {
  sc_link_model_t m = {.alpha_s = 5e-6,
                       .host_s_per_b = 1.0 / 2e9,
                       .host_s_per_msg = 2e-6,
                       .host_cores = 3,
                       .pull_s_per_b = 1.0 / 3e9};
  const size_t count = 1 << 18;
  const double bytes = (double)count * 4, half_msg = 0.5 * m.host_s_per_msg;
  hand_sched_t h;
  hand_init(&h, 3);
  for (int r = 1; r <= 2; r++) {
    assert_int_equal(sc_sched_send(&h.s[0], r, SC_BUF_SEND, 0, count), SC_SUCCESS);
    assert_int_equal(sc_sched_recv(&h.s[r], 0, SC_BUF_RECV, 0, count), SC_SUCCESS);
  }
  double t, half_copy = 0.5 * bytes * m.host_s_per_b;
  assert_int_equal(sc_tune_simulate_host(&m, 3, 3, 0, 4, h.s, &t), SC_SUCCESS);
  double expect = 2 * (half_msg + half_copy) + m.alpha_s + half_msg + half_copy;
  assert_true(fabs(t - expect) <= 1e-9 * expect);
  m.pull_min_b = bytes;
  assert_int_equal(sc_tune_simulate_host(&m, 3, 3, 0, 4, h.s, &t), SC_SUCCESS);
  expect = 2 * half_msg + m.alpha_s + half_msg + bytes * m.pull_s_per_b;
  assert_true(fabs(t - expect) <= 1e-9 * expect);
  m.pull_min_b = bytes + 1; /* just below the threshold: two-sided again */
  assert_int_equal(sc_tune_simulate_host(&m, 3, 3, 0, 4, h.s, &t), SC_SUCCESS);
  expect = 2 * (half_msg + half_copy) + m.alpha_s + half_msg + half_copy;
  assert_true(fabs(t - expect) <= 1e-9 * expect);
  hand_free(&h);
}

/* ---- the locality decision: props of every pair -> model kind ---- */

enum { HOST_A = 0, HOST_B = 1 };

/* Props of the ordered pairs of p ranks; host[i] is rank i's machine,
 * ns[i] != ns[j] puts ranks of one machine in different namespaces (no
 * shared memory: TCP with their own addresses), tcp_only: no shm at all. */
static sc_tune_kind_t links_kind(int p, const int *host, const int *ns, int tcp_only,
                                 const int *spins, sc_link_model_t *m) {
  sc_links_t l;
  sc_links_init(&l);
  for (int a = 0; a < p; a++)
    for (int b = 0; b < p; b++) {
      if (a == b) continue;
      sc_tp_props_t pr = {.kind = SC_TP_KIND_NET, .receiver_spins = spins ? spins[b] : 1};
      int same_ns = host[a] == host[b] && ns[a] == ns[b];
      if (same_ns && !tcp_only) {
        pr.kind = SC_TP_KIND_SHM;
        pr.single_copy_min = (size_t)256 << 10;
      }
      /* TCP: one address per namespace, so another namespace is another host. */
      pr.locality = same_ns ? SC_TP_SAME_HOST : SC_TP_OTHER_HOST;
      sc_links_add(&l, &pr);
    }
  if (m) sc_links_model(&l, 2, 50, m);
  return sc_links_kind(&l);
}

static void test_links_kind(void **state) {
  (void)state;
  const int one[4] = {HOST_A, HOST_A, HOST_A, HOST_A}, same_ns[4] = {0, 0, 0, 0};
  const int own_ns[4] = {0, 1, 2, 3}, two[4] = {HOST_A, HOST_A, HOST_B, HOST_B};
  sc_link_model_t m;
  /* auto on one host: every pair shared memory. */
  assert_int_equal(links_kind(4, one, same_ns, 0, NULL, &m), SC_TUNE_HOST_MEM);
  assert_int_equal(m.host_cores, 2);
  assert_true(m.pull_min_b == (double)(256 << 10));
  assert_true(fabs(m.spin_s - 50e-6) < 1e-15);
  /* tcp on one host; a receiver that sleeps at once makes the model sleep. */
  const int spins[4] = {1, 1, 0, 1};
  assert_int_equal(links_kind(4, one, same_ns, 1, spins, &m), SC_TUNE_HOST_TCP);
  assert_int_equal(m.host_cores, 2);
  assert_true(m.spin_s == 0 && m.pull_min_b == 0);
  /* The emulated cluster: one machine, one hostname, a network namespace
   * per rank. Shared memory refuses, TCP crosses a network: network model. */
  assert_int_equal(links_kind(4, one, own_ns, 0, NULL, &m), SC_TUNE_NET);
  assert_int_equal(m.host_cores, 0);
  assert_int_equal(links_kind(4, one, own_ns, 1, NULL, NULL), SC_TUNE_NET);
  /* Two hosts of two ranks under auto: shm within, tcp across. */
  assert_int_equal(links_kind(4, two, same_ns, 0, NULL, NULL), SC_TUNE_NET);
  /* One host where one pair of namespaces shares memory and the rest not. */
  const int half[4] = {0, 0, 1, 2};
  assert_int_equal(links_kind(4, one, half, 0, NULL, NULL), SC_TUNE_NET);
}

/* Same-host pairs mixing memory and a network stack price as TCP; pairs
 * stating a nominal link set the network model's alpha and beta. */
static void test_links_mixed_and_nominal(void **state) {
  (void)state;
  sc_links_t l;
  sc_links_init(&l);
  sc_tp_props_t shm = {.kind = SC_TP_KIND_SHM,
                       .locality = SC_TP_SAME_HOST,
                       .single_copy_min = 1 << 18,
                       .receiver_spins = 1};
  sc_tp_props_t tcp = {.kind = SC_TP_KIND_NET, .locality = SC_TP_SAME_HOST, .receiver_spins = 1};
  sc_links_add(&l, &shm);
  assert_int_equal(sc_links_kind(&l), SC_TUNE_HOST_MEM);
  sc_links_add(&l, &tcp);
  assert_int_equal(sc_links_kind(&l), SC_TUNE_HOST_TCP);
  assert_false(sc_links_settled(&l));

  sc_link_model_t m, d;
  sc_tp_props_t net = {.kind = SC_TP_KIND_NET,
                       .locality = SC_TP_OTHER_HOST,
                       .latency_s = 50e-6,
                       .bandwidth_bps = 125e6,
                       .receiver_spins = 1};
  sc_links_init(&l);
  for (int i = 0; i < 3; i++) sc_links_add(&l, &net);
  sc_links_model(&l, 4, 50, &m);
  assert_true(m.alpha_s == 50e-6 && m.beta_s_per_b == 1.0 / 125e6 && m.host_cores == 0);
  net.bandwidth_bps = net.latency_s = 0; /* one pair unknown: the defaults */
  sc_links_add(&l, &net);
  assert_true(sc_links_settled(&l));
  sc_links_model(&l, 4, 50, &m);
  sc_tune_default_model(SC_TUNE_NET, 0, 0, &d);
  assert_true(m.alpha_s == d.alpha_s && m.beta_s_per_b == d.beta_s_per_b);
}

/* Pairs of one host whose props say the defaults were not fitted to them
 * (UCX, verbs) are counted, pairs on other hosts are not; SC_TUNE=auto
 * measures where the ranks span hosts or any such pair exists, model never,
 * measure always. */
static void test_links_unfitted(void **state) {
  (void)state;
  sc_links_t l;
  sc_tp_props_t shm = {.kind = SC_TP_KIND_SHM, .locality = SC_TP_SAME_HOST, .receiver_spins = 1};
  sc_tp_props_t ucx = shm;
  ucx.costs_unfitted = 1;
  sc_tp_props_t far = {.kind = SC_TP_KIND_NET, .locality = SC_TP_OTHER_HOST, .costs_unfitted = 1};
  sc_links_init(&l);
  sc_links_add(&l, &shm);
  sc_links_add(&l, &far);
  assert_int_equal(l.unfitted, 0);
  sc_links_add(&l, &ucx);
  sc_links_add(&l, &ucx);
  assert_int_equal(l.unfitted, 2);
  /* The model's kind is the same: the costs are measured, not re-kinded. */
  sc_links_init(&l);
  sc_links_add(&l, &ucx);
  assert_int_equal(sc_links_kind(&l), SC_TUNE_HOST_MEM);
  for (int hosts = 1; hosts <= 2; hosts++)
    for (int unfitted = 0; unfitted <= 1; unfitted++) {
      assert_int_equal(sc_tune_measures(SC_TUNING_AUTO, hosts, unfitted), hosts > 1 || unfitted);
      assert_false(sc_tune_measures(SC_TUNING_MODEL, hosts, unfitted));
      assert_true(sc_tune_measures(SC_TUNING_MEASURE, hosts, unfitted));
    }
}

/* The fitted defaults, pinned: the kind decides which, never their values. */
static void test_default_models_pinned(void **state) {
  (void)state;
  sc_link_model_t m;
  sc_tune_default_model(SC_TUNE_HOST_MEM, 2, (size_t)256 << 10, &m);
  assert_true(m.alpha_s == 0.7223e-6 && m.host_s_per_b == 6.311e-11 && m.host_cores == 2);
  assert_true(m.pull_min_b == 262144.0 && m.same_core_s == 2.446e-6);
  sc_tune_default_model(SC_TUNE_HOST_TCP, 2, 0, &m);
  assert_true(m.alpha_s == 2.369e-6 && m.wake_cpu_s == 0.1151e-6 && m.pull_min_b == 0);
  assert_true(m.host_s_per_msg == 9.322e-6 && m.peer_budget == 0);
  sc_tune_default_model(SC_TUNE_NET, 0, 0, &m);
  assert_true(m.alpha_s == 40e-6 && m.beta_s_per_b == 1.0 / 1.5e9 && m.host_cores == 0);
  sc_tune_host_waiting(0, 50, &m);
  assert_true(m.spin_s == 0);
  sc_tune_host_waiting(1, 50, &m);
  assert_true(fabs(m.spin_s - 50e-6) < 1e-15);
}

/* With the plain model `from` is a's choice; a factor of 1.5 on all-reduce
 * candidate `factor_at` costs `from` exactly the replay with beta 1.5x and
 * hands the choice to `to`, whose estimate is unchanged. */
static void assert_factor_moves_choice(const sc_coll_args_t *a, int factor_at, int from, int to) {
  const sc_link_model_t m = plain_model();
  int n, best;
  const sc_algo_entry_t *c = sc_algo_candidates(a->coll, &n);
  assert_true(from >= 0 && from < n && to >= 0 && to < n && factor_at >= 0);
  double est[SC_TUNE_MAX_CANDIDATES], est2[SC_TUNE_MAX_CANDIDATES];
  assert_int_equal(sc_tune_best(&m, a, &best, est), SC_SUCCESS);
  assert_int_equal(best, from);
  sc_link_model_t s = m;
  s.allreduce_beta_scale[factor_at] = 1.5;
  assert_int_equal(sc_tune_best(&s, a, &best, est2), SC_SUCCESS);
  assert_int_equal(best, to);
  assert_true(est2[to] == est[to]);
  sc_link_model_t b = m;
  b.beta_s_per_b *= 1.5;
  double want;
  assert_int_equal(sc_tune_predict(&b, c[from].gen, a, &want), SC_SUCCESS);
  assert_true(fabs(est2[from] - want) <= 1e-12 * want);
}

/* A candidate's measured network factor (allreduce_beta_scale) scales its
 * bytes' time and nothing else: at 8 ranks and 1 MiB Rabenseifner is the
 * replay's choice; charged 1.5x for its bytes it costs exactly the replay
 * with beta 1.5x, loses to the ring, and the ring's estimate is unchanged.
 * A factor of 0 is none. */
static void test_allreduce_beta_scale(void **state) {
  (void)state;
  sc_coll_args_t a = allreduce_args(8, (size_t)1 << 18);
  a.chunk_elems = 1 << 17; /* pipelined, as the library runs it */
  const int rab = sc_algo_find(SC_COLL_ALLREDUCE, "rabenseifner");
  assert_factor_moves_choice(&a, rab, rab, sc_algo_find(SC_COLL_ALLREDUCE, "ring"));
}

/* The reduce-scatter's and all-gather's halves of Rabenseifner (recursive
 * halving, recursive doubling) are charged Rabenseifner's measured factor,
 * their rings the ring's, and nothing else moves them: at 8 ranks, where
 * the replay puts the halving and doubling ahead, a factor of 1.5 on
 * Rabenseifner costs each exactly the replay with beta 1.5x and hands the
 * choice to the ring, whose estimate is unchanged; a factor on another
 * all-reduce (the tree) changes nothing. */
static void test_rs_ag_twin_scale(void **state) {
  (void)state;
  const sc_coll_t colls[2] = {SC_COLL_REDUCE_SCATTER, SC_COLL_ALLGATHER};
  const char *half[2] = {"recursive-halving", "recursive-doubling"};
  const int rab = sc_algo_find(SC_COLL_ALLREDUCE, "rabenseifner");
  const int tree = sc_algo_find(SC_COLL_ALLREDUCE, "tree");
  assert_true(rab >= 0 && tree >= 0);
  for (int k = 0; k < 2; k++) {
    sc_coll_args_t a = allreduce_args(8, (size_t)1 << 16); /* bytes outweigh 4 alphas */
    a.coll = colls[k];
    a.chunk_elems = 1 << 17;
    const int h = sc_algo_find(a.coll, half[k]);
    int n, best;
    sc_algo_candidates(a.coll, &n);
    double est[SC_TUNE_MAX_CANDIDATES], est2[SC_TUNE_MAX_CANDIDATES];
    sc_link_model_t m = plain_model(), t = m;
    t.allreduce_beta_scale[tree] = 3;
    assert_int_equal(sc_tune_best(&m, &a, &best, est), SC_SUCCESS);
    assert_int_equal(sc_tune_best(&t, &a, &best, est2), SC_SUCCESS);
    assert_int_equal(best, h);
    for (int i = 0; i < n; i++) assert_true(est2[i] == est[i] || (isinf(est[i]) && isinf(est2[i])));
    assert_factor_moves_choice(&a, rab, h, sc_algo_find(a.coll, "ring"));
  }
}

/* The sparse all-reduce's choice across hosts, against the alpha-beta
 * arithmetic of its sets: S = 8 + k (4 + w) bytes each. With one rank per
 * host the butterfly's two exchange rounds (2 (S beta + alpha)) beat the
 * tree's four one-way rounds and hier is no candidate. With four ranks per
 * host the butterfly pushes four sets through each host's link per round
 * and hier one (the replay books shared links in replay order, so the
 * butterfly comes out above its 4 S beta a round, never below). A measured
 * factor that triples the butterflies' exchanges (recursive doubling's)
 * hands the choice to the tree. */
static void test_sparse_choice(void **state) {
  (void)state;
  const size_t k = 100000;
  const double set = 8.0 + (double)k * 12.0, round = set * beta + alpha;
  sc_link_model_t m = plain_model();
  m.local_alpha_s = 1e-6;
  m.local_beta_s_per_b = 1e-12;
  int one[4] = {0, 1, 2, 3}, four[16];
  for (int r = 0; r < 16; r++) four[r] = r / 4;
  sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                      .nranks = 4,
                      .count = k,
                      .elem_size = 8,
                      .chunk_elems = 1,
                      .host_of = one};
  double est[SC_SPARSE_ALGO_COUNT];
  assert_int_equal(sc_tune_best_sparse(&m, &a, est), SC_SPARSE_GTOPK);
  assert_true(fabs(est[SC_SPARSE_GTOPK] - 2 * round) <= 1e-9 * round);
  assert_true(isinf(est[SC_SPARSE_GTOPK_HIER]));
  assert_true(isinf(est[SC_SPARSE_ALLGATHER])); /* the baseline is never the model's pick */
  assert_true(est[SC_SPARSE_GTOPK_TREE] >= 4 * round);
  a.nranks = 16;
  a.host_of = four;
  assert_int_equal(sc_tune_best_sparse(&m, &a, est), SC_SPARSE_GTOPK_HIER);
  /* Inside a host each set costs S * 1e-12 + 1 us: a few microseconds. */
  assert_true(est[SC_SPARSE_GTOPK_HIER] >= 2 * round &&
              est[SC_SPARSE_GTOPK_HIER] <= 2 * round + 50e-6);
  /* The flat butterfly's two rounds across hosts push 4 ranks' sets each through a
   * host's one link (8 sets), and the last still takes alpha to arrive; a rank done
   * with the first of them may start the second while its host-mates still receive. */
  assert_true(est[SC_SPARSE_GTOPK] >= 8 * set * beta + alpha &&
              est[SC_SPARSE_GTOPK] >= 3.5 * est[SC_SPARSE_GTOPK_HIER]);
  assert_true(est[SC_SPARSE_GTOPK_TREE] >= 4 * round &&
              est[SC_SPARSE_GTOPK_TREE] <= 4 * round + 2 * (double)k * beta + 50e-6);
  const int rd = sc_algo_find(SC_COLL_ALLREDUCE, "rd");
  assert_true(rd >= 0);
  m.allreduce_beta_scale[rd] = 3;
  double est3[SC_SPARSE_ALGO_COUNT];
  assert_int_equal(sc_tune_best_sparse(&m, &a, est3), SC_SPARSE_GTOPK_TREE);
  assert_true(est3[SC_SPARSE_GTOPK_TREE] == est[SC_SPARSE_GTOPK_TREE]);
  assert_true(est3[SC_SPARSE_GTOPK_HIER] >= 2 * (3 * set * beta + alpha));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_and_rd_match_formulas),
      cmocka_unit_test(test_crossover_where_formulas_put_it),
      cmocka_unit_test(test_choice_is_deterministic),
      cmocka_unit_test(test_host_model_timeline),
      cmocka_unit_test(test_host_model_noticing),
      cmocka_unit_test(test_host_model_waiting_costs),
      cmocka_unit_test(test_host_model_placement),
      cmocka_unit_test(test_host_model_cache_reuse),
      cmocka_unit_test(test_host_model_single_copy),
      cmocka_unit_test(test_links_kind),
      cmocka_unit_test(test_links_mixed_and_nominal),
      cmocka_unit_test(test_links_unfitted),
      cmocka_unit_test(test_default_models_pinned),
      cmocka_unit_test(test_allreduce_beta_scale),
      cmocka_unit_test(test_rs_ag_twin_scale),
      cmocka_unit_test(test_sparse_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
