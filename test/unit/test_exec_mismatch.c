/* SPDX-License-Identifier: BSD-3-Clause */
/* Operation prints in messages (transport.h's sc_tp_req_t fp): the
 * loopback transport's side of the contract, then the real executor
 * (lib/core/executor.c) on 2 and 3 ranks, one thread each over loopback,
 * where the ranks' calls differ: every rank whose message meets another
 * print fails with SC_ERR_MISMATCH, and its text names both calls. The
 * expected texts are written out here by hand. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/algorithms.h"
#include "lib/base/clock.h"
#include "lib/core/comm.h"
#include "lib/core/fingerprint.h"
#include "lib/schedule/sched.h"
#include "test/loopback/loopback.h"

#define MAXP 3
#define NMAX 1000

/* ---- the loopback transport's prints ---------------------------------- */

typedef struct pair {
  sc_transport_t *tp[2];
} pair_t;

static void pair_open(pair_t *p) {
  static uint8_t addrs[2][SC_TP_ADDR_MAX];
  for (int r = 0; r < 2; r++) {
    sc_tp_config_t cfg = {.rank = r, .nranks = 2, .timeout_ms = 1000};
    size_t len = 0;
    assert_int_equal(sc_loopback_transport.create(&cfg, &p->tp[r], addrs[r], &len), SC_SUCCESS);
  }
  for (int r = 0; r < 2; r++)
    assert_int_equal(sc_loopback_transport.connect_all(p->tp[r], addrs, SC_TP_ADDR_MAX),
                     SC_SUCCESS);
}

static void pair_close(pair_t *p) {
  for (int r = 0; r < 2; r++) {
    sc_loopback_transport.cancel_all(p->tp[r], SC_ERR_ABORTED);
    sc_loopback_transport.destroy(p->tp[r]);
  }
}

static void print_of(uint8_t fp[SC_TP_FP_LEN], uint8_t v) {
  for (int i = 0; i < SC_TP_FP_LEN; i++) fp[i] = (uint8_t)(v + i);
}

/* Posts a send of slen bytes (print sfp) from rank 0 and a receive of rlen
 * (print rfp) at rank 1, in either order, and returns both progress results. */
static void exchange(pair_t *p, const uint8_t *sfp, const uint8_t *rfp, size_t slen, size_t rlen,
                     int recv_first, sc_tp_req_t *s, sc_tp_req_t *r, uint8_t *rbuf,
                     sc_result_t res[2]) {
  static const uint8_t src[64] = {1, 2, 3, 4, 5, 6, 7, 8};
  memset(s, 0, sizeof(*s));
  memset(r, 0, sizeof(*r));
  if (sfp) memcpy(s->fp, sfp, SC_TP_FP_LEN);
  if (rfp) memcpy(r->fp, rfp, SC_TP_FP_LEN);
  if (recv_first)
    assert_int_equal(sc_loopback_transport.irecv(p->tp[1], 0, rbuf, rlen, r), SC_SUCCESS);
  assert_int_equal(sc_loopback_transport.isend(p->tp[0], 1, src, slen, s), SC_SUCCESS);
  if (!recv_first)
    assert_int_equal(sc_loopback_transport.irecv(p->tp[1], 0, rbuf, rlen, r), SC_SUCCESS);
  int progressed;
  res[0] = sc_loopback_transport.progress(p->tp[0], 100, &progressed);
  res[1] = sc_loopback_transport.progress(p->tp[1], 100, &progressed);
}

static void test_loopback_prints(void **state) {
  (void)state;
  uint8_t a[SC_TP_FP_LEN], b[SC_TP_FP_LEN], zero[SC_TP_FP_LEN] = {0}, rbuf[64];
  print_of(a, 0x10);
  print_of(b, 0x40);
  sc_tp_req_t s, r;
  sc_result_t res[2];
  for (int order = 0; order < 2; order++) {
    /* Equal prints: the message arrives. */
    pair_t p;
    pair_open(&p);
    memset(rbuf, 0xee, sizeof(rbuf));
    exchange(&p, a, a, 8, 8, order, &s, &r, rbuf, res);
    assert_int_equal(res[0], SC_SUCCESS);
    assert_int_equal(res[1], SC_SUCCESS);
    assert_int_equal(r.state, SC_TP_REQ_DONE);
    assert_int_equal(rbuf[7], 8);
    /* A receive without a print takes any message. */
    exchange(&p, b, NULL, 8, 8, order, &s, &r, rbuf, res);
    assert_int_equal(r.state, SC_TP_REQ_DONE);
    assert_int_equal(s.state, SC_TP_REQ_DONE);
    /* Another print: both ends fail before a byte lands, each with the
     * other's print; progress says so once; the pair is broken after. */
    memset(rbuf, 0xee, sizeof(rbuf));
    exchange(&p, b, a, 8, 8, order, &s, &r, rbuf, res);
    assert_int_equal(res[0], SC_ERR_MISMATCH);
    assert_int_equal(res[1], SC_ERR_MISMATCH);
    assert_int_equal(r.state, SC_TP_REQ_ERROR);
    assert_int_equal(r.status, SC_ERR_MISMATCH);
    assert_memory_equal(r.peer_fp, b, SC_TP_FP_LEN);
    assert_int_equal(s.state, SC_TP_REQ_ERROR);
    assert_int_equal(s.status, SC_ERR_MISMATCH);
    assert_memory_equal(s.peer_fp, a, SC_TP_FP_LEN);
    assert_int_equal(rbuf[0], 0xee);
    int progressed;
    assert_int_equal(sc_loopback_transport.progress(p.tp[1], 0, &progressed), SC_SUCCESS);
    sc_tp_req_t again;
    memset(&again, 0, sizeof(again));
    assert_int_equal(sc_loopback_transport.irecv(p.tp[1], 0, rbuf, 8, &again), SC_ERR_REMOTE);
    pair_close(&p);
    /* A print that differs is reported before a length that differs, and
     * a send without a print meets a receive that has one. */
    pair_open(&p);
    exchange(&p, b, a, 8, 16, order, &s, &r, rbuf, res);
    assert_int_equal(r.status, SC_ERR_MISMATCH);
    pair_close(&p);
    pair_open(&p);
    exchange(&p, NULL, a, 8, 8, order, &s, &r, rbuf, res);
    assert_int_equal(r.status, SC_ERR_MISMATCH);
    assert_memory_equal(r.peer_fp, zero, SC_TP_FP_LEN);
    pair_close(&p);
    /* Equal prints, lengths that differ: the length check, as before. */
    pair_open(&p);
    exchange(&p, a, a, 8, 16, order, &s, &r, rbuf, res);
    assert_int_equal(r.status, SC_ERR_REMOTE);
    pair_close(&p);
  }
}

/* ---- the executor ------------------------------------------------------ */

typedef struct rank {
  sc_comm_t *comm;
  sc_sched_t sched;
  sc_op_t op;
  uint8_t fp[SC_TP_FP_LEN];
  int unchecked; /* posts without a print (args.fp NULL) */
  float send[NMAX], recv[NMAX];
  sc_result_t res;
  char err[SC_ERRMSG_MAX];
} rank_t;

static rank_t ranks[MAXP];
static int nranks;
static sc_peer_head_t peers[MAXP];

static void open_fabric(int p) {
  static uint8_t addrs[MAXP][SC_TP_ADDR_MAX];
  nranks = p;
  for (int r = 0; r < p; r++) snprintf(peers[r].hostname, sizeof(peers[r].hostname), "host%d", r);
  for (int r = 0; r < p; r++) {
    rank_t *k = &ranks[r];
    memset(k, 0, sizeof(*k));
    sc_sched_init(&k->sched);
    sc_comm_t *c = k->comm = calloc(1, sizeof(sc_comm_t));
    assert_non_null(c);
    c->rank = r;
    c->nranks = p;
    c->cfg.timeout_ms = 10000;
    assert_int_equal(sc_comm_peers_keep(c, peers, sizeof(peers[0])), SC_SUCCESS);
    c->tpops = &sc_loopback_transport;
    sc_tp_config_t cfg = {.rank = r, .nranks = p, .timeout_ms = 1000};
    size_t len = 0;
    assert_int_equal(c->tpops->create(&cfg, &c->tp, addrs[r], &len), SC_SUCCESS);
    for (int i = 0; i < NMAX; i++) k->send[i] = (float)(r + 1);
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
    sc_comm_peers_free(c);
    free(c);
    sc_sched_free(&ranks[r].sched);
  }
}

/* Rank r's call and its schedule, as sc_op_run would make them. */
static void set_call(int r, sc_coll_t coll, size_t count, sc_redop_t op, int root, uint64_t seq) {
  rank_t *k = &ranks[r];
  k->op = (sc_op_t){.coll = coll,
                    .sendbuf = k->send,
                    .recvbuf = k->recv,
                    .count = count,
                    .dtype = SC_FLOAT32,
                    .op = op,
                    .root = root,
                    .seq = seq};
  sc_coll_args_t a = {.coll = coll,
                      .nranks = nranks,
                      .rank = r,
                      .root = root,
                      .count = count,
                      .elem_size = sizeof(float),
                      .chunk_elems = 64};
  sc_sched_reset(&k->sched);
  if (coll == SC_COLL_BROADCAST)
    assert_int_equal(sc_binomial_broadcast_schedule(&a, &k->sched), SC_SUCCESS);
  else
    assert_int_equal(sc_ring_allreduce_schedule(&a, &k->sched), SC_SUCCESS);
  sc_fingerprint_t f;
  sc_fp_from_op(&k->op, &f);
  sc_fp_msg_encode(&f, k->fp);
}

static void *run_rank(void *arg) {
  rank_t *k = arg;
  sc_exec_args_t a = {.op = &k->op,
                      .sched = &k->sched,
                      .elem_size = sizeof(float),
                      .fp = k->unchecked ? NULL : k->fp};
  k->res = sc_sched_execute(k->comm, &a);
  if (k->res != SC_SUCCESS) sc_error_get_detail(k->err, sizeof(k->err));
  return NULL;
}

static void run_all(void) {
  pthread_t th[MAXP];
  for (int r = 0; r < nranks; r++)
    assert_int_equal(pthread_create(&th[r], NULL, run_rank, &ranks[r]), 0);
  for (int r = 0; r < nranks; r++) pthread_join(th[r], NULL);
}

/* The detail reads "<sc_strerror>: <text> (<file>:<line>)". */
static void expect(int r, sc_result_t code, const char *text) {
  char want[SC_ERRMSG_MAX];
  snprintf(want, sizeof(want), "%s: %s (", sc_strerror(code), text ? text : "");
  int ok = ranks[r].res == code && (!text || strncmp(ranks[r].err, want, strlen(want)) == 0);
  if (!ok)
    print_error("rank %d: %s: %s\n  want: %s\n", r, sc_strerror(ranks[r].res), ranks[r].err,
                text ? want : "(any text)");
  assert_true(ok);
}

/* Matched calls: the prints change nothing. */
static void test_matched(void **state) {
  (void)state;
  open_fabric(3);
  for (int r = 0; r < 3; r++) set_call(r, SC_COLL_ALLREDUCE, NMAX, SC_SUM, 0, 5);
  run_all();
  for (int r = 0; r < 3; r++) {
    expect(r, SC_SUCCESS, NULL);
    for (int i = 0; i < NMAX; i++) assert_true(ranks[r].recv[i] == 6.0f);
  }
  close_fabric();
}

/* The second row: counts that differ by one. The number is far
 * from 0 so that the peer's 16 bits are read against this rank's call. */
static void test_count(void **state) {
  (void)state;
  open_fabric(2);
  set_call(0, SC_COLL_ALLREDUCE, 1000, SC_SUM, 0, 70007);
  set_call(1, SC_COLL_ALLREDUCE, 999, SC_SUM, 0, 70007);
  run_all();
  expect(0, SC_ERR_MISMATCH,
         "rank 1 (host1) called allreduce #70007 (count 999, float32, sum, root -1) where rank 0 "
         "(host0) called allreduce #70007 (count 1000, float32, sum, root -1)");
  expect(1, SC_ERR_MISMATCH,
         "rank 0 (host0) called allreduce #70007 (count 1000, float32, sum, root -1) where rank 1 "
         "(host1) called allreduce #70007 (count 999, float32, sum, root -1)");
  close_fabric();
}

/* Another collective, and another reduction, on one of three ranks: the
 * ranks whose messages meet its print name it; the third rank's ring
 * neighbour fails, so it fails too (as for a failed peer) or names it. */
static void test_kind_and_op(void **state) {
  (void)state;
  open_fabric(2);
  set_call(0, SC_COLL_ALLREDUCE, 1000, SC_SUM, 0, 3);
  set_call(1, SC_COLL_BROADCAST, 1000, SC_SUM, 0, 3);
  run_all();
  expect(1, SC_ERR_MISMATCH,
         "rank 0 (host0) called allreduce #3 (count 1000, float32, sum, root -1) where rank 1 "
         "(host1) called broadcast #3 (count 1000, float32, no op, root 0)");
  expect(0, SC_ERR_MISMATCH,
         "rank 1 (host1) called broadcast #3 (count 1000, float32, no op, root 0) where rank 0 "
         "(host0) called allreduce #3 (count 1000, float32, sum, root -1)");
  close_fabric();

  /* Rank 0 may be left waiting for rank 2, which failed: the liveness watch
   * then relays the mismatch as the communicator's error (lib/control/watch.c's
   * sc_watch_record), which a blocked executor heeds at once. */
  open_fabric(3);
  set_call(0, SC_COLL_ALLREDUCE, 1000, SC_SUM, 0, 9);
  set_call(1, SC_COLL_ALLREDUCE, 1000, SC_MAX, 0, 9);
  set_call(2, SC_COLL_ALLREDUCE, 1000, SC_SUM, 0, 9);
  pthread_t th[3];
  for (int r = 0; r < 3; r++)
    assert_int_equal(pthread_create(&th[r], NULL, run_rank, &ranks[r]), 0);
  pthread_join(th[1], NULL);
  pthread_join(th[2], NULL);
  sc_comm_t *c0 = ranks[0].comm;
  const char *relayed = "rank 2 (host2, pid 1) failed: rank 1 called max where rank 2 called sum";
  snprintf(c0->errmsg, sizeof(c0->errmsg), "%s", relayed);
  atomic_store(&c0->error, SC_ERR_MISMATCH);
  c0->tpops->wake(c0->tp);
  int64_t t0 = sc_now_ms();
  pthread_join(th[0], NULL);
  assert_true(sc_now_ms() - t0 < 2000);
  /* The ring: rank 1 receives from 0 and sends to 2; whichever of its
   * messages shows it first. */
  const char *r1_from0 = "rank 0 (host0) called allreduce #9 (count 1000, float32, sum, root -1) "
                         "where rank 1 (host1) called allreduce #9 (count 1000, float32, max, "
                         "root -1)",
             *r1_from2 = "rank 2 (host2) called allreduce #9 (count 1000, float32, sum, root -1) "
                         "where rank 1 (host1) called allreduce #9 (count 1000, float32, max, "
                         "root -1)";
  expect(1, SC_ERR_MISMATCH, strstr(ranks[1].err, "rank 0 (host0)") ? r1_from0 : r1_from2);
  expect(2, SC_ERR_MISMATCH,
         "rank 1 (host1) called allreduce #9 (count 1000, float32, max, root -1) where rank 2 "
         "(host2) called allreduce #9 (count 1000, float32, sum, root -1)");
  /* Rank 0's messages meet rank 1's print, or rank 2's broken link, or it
   * waits until the relay. */
  if (ranks[0].res != SC_ERR_MISMATCH && ranks[0].res != SC_ERR_REMOTE)
    print_error("rank 0: %s: %s\n", sc_strerror(ranks[0].res), ranks[0].err);
  assert_true(ranks[0].res == SC_ERR_MISMATCH || ranks[0].res == SC_ERR_REMOTE);
  if (strstr(ranks[0].err, "rank 2 (host2, pid 1)")) expect(0, SC_ERR_MISMATCH, relayed);
  close_fabric();
}

/* A peer whose messages carry no print (a transport that carries only part
 * of it, or SC_CHECK_MISMATCH's exchange): still SC_ERR_MISMATCH, naming
 * this rank's call and the peer. */
static void test_unprinted_peer(void **state) {
  (void)state;
  open_fabric(2);
  set_call(0, SC_COLL_ALLREDUCE, 1000, SC_SUM, 0, 12);
  set_call(1, SC_COLL_ALLREDUCE, 1000, SC_SUM, 0, 12);
  ranks[1].unchecked = 1;
  run_all();
  expect(0, SC_ERR_MISMATCH,
         "rank 1 (host1) called another operation (its messages carry no print of it) where rank "
         "0 (host0) called allreduce #12 (count 1000, float32, sum, root -1)");
  expect(1, SC_ERR_MISMATCH, NULL);
  assert_non_null(strstr(ranks[1].err, "rank 0 (host0) called allreduce #12 (count 1000"));
  close_fabric();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loopback_prints), cmocka_unit_test(test_matched),
      cmocka_unit_test(test_count),           cmocka_unit_test(test_kind_and_op),
      cmocka_unit_test(test_unprinted_peer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
