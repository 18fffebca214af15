/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport's print check (transport/ucx/ucx.c, transport.h's
 * sc_tp_req_t fp): two ranks' transports in one process, driven by hand.
 * A receive whose print differs from its message's fails with
 * SC_ERR_MISMATCH, its buffer untouched, progress says so once and the
 * pair is then out of step; a print difference wins over a length
 * difference; a receive without a print takes any message; eager and
 * rendezvous messages, receive posted before or after the message came.
 * References: the bytes the sender wrote, and the contract's codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/base/clock.h"
#include "transport/transport.h"

#define BIG 262144 /* above the rendezvous threshold the tests set */

typedef struct pair {
  sc_transport_t *tp[2];
  uint8_t addrs[2][SC_TP_ADDR_MAX];
  int mismatches[2]; /* SC_ERR_MISMATCH returns of each rank's progress */
  int remotes[2];    /* SC_ERR_REMOTE returns */
  /* Requests and buffers of one_message: a rendezvous send whose receive
   * never matched stays with UCX until pair_close, so they live as long */
  sc_tp_req_t req[8];
  uint8_t *buf[8];
  int nreq, nbuf;
} pair_t;

/* rndv: messages from 1 KiB go by rendezvous (the receiver's UCX reads the
 * sender's buffer once the receive matched), else UCX's defaults. */
static void pair_open(pair_t *p, int rndv) {
  memset(p, 0, sizeof(*p));
  if (rndv)
    setenv("UCX_RNDV_THRESH", "1k", 1);
  else
    unsetenv("UCX_RNDV_THRESH");
  for (int r = 0; r < 2; r++) {
    sc_tp_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.rank = r;
    cfg.nranks = 2;
    cfg.timeout_ms = 10000;
    cfg.nsocks = 1;
    cfg.spin_us = r ? 20 : 0; /* rank 0 sleeps at once, rank 1 spins first */
    size_t len = sizeof(p->addrs[r]);
    assert_int_equal(sc_ucx_transport.create(&cfg, &p->tp[r], p->addrs[r], &len), SC_SUCCESS);
  }
  for (int r = 0; r < 2; r++)
    assert_int_equal(sc_ucx_transport.connect_all(p->tp[r], p->addrs, SC_TP_ADDR_MAX), SC_SUCCESS);
}

static void pair_close(pair_t *p) {
  for (int r = 0; r < 2; r++) {
    sc_ucx_transport.cancel_all(p->tp[r], SC_ERR_ABORTED);
    sc_ucx_transport.destroy(p->tp[r]);
  }
  for (int i = 0; i < p->nbuf; i++) free(p->buf[i]);
  unsetenv("UCX_RNDV_THRESH");
}

static sc_tp_req_t *pair_req(pair_t *p) {
  assert_true(p->nreq < 8);
  sc_tp_req_t *r = &p->req[p->nreq++];
  memset(r, 0, sizeof(*r));
  return r;
}

static uint8_t *pair_buf(pair_t *p, size_t n) {
  assert_true(p->nbuf < 8);
  uint8_t *b = malloc(n);
  assert_non_null(b);
  p->buf[p->nbuf++] = b;
  return b;
}

static void pump(pair_t *p) {
  for (int r = 0; r < 2; r++) {
    sc_result_t res = sc_ucx_transport.progress(p->tp[r], 1, NULL);
    if (res == SC_ERR_MISMATCH) p->mismatches[r]++;
    if (res == SC_ERR_REMOTE) p->remotes[r]++;
  }
}

/* Progress both ranks until neither request is pending (NULL: none), then
 * a few rounds more, so that a second report would show. */
static void run(pair_t *p, sc_tp_req_t *a, sc_tp_req_t *b) {
  int64_t end = sc_now_ms() + 10000;
  while (((a && a->state == SC_TP_REQ_PENDING) || (b && b->state == SC_TP_REQ_PENDING)) &&
         sc_now_ms() < end)
    pump(p);
  for (int i = 0; i < 20; i++) pump(p);
  if (a) assert_int_not_equal(a->state, SC_TP_REQ_PENDING);
  if (b) assert_int_not_equal(b->state, SC_TP_REQ_PENDING);
}

/* A print: bytes not all zero, the count among them. */
static void print_of(uint8_t fp[SC_TP_FP_LEN], uint64_t count) {
  memset(fp, 0, SC_TP_FP_LEN);
  fp[0] = 0x10;
  fp[1] = 1; /* the collective */
  for (int i = 0; i < 7; i++) fp[9 + i] = (uint8_t)(count >> (8 * i));
}

static void fill(uint8_t *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 31u + seed);
}

static int all_zero(const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i]) return 0;
  return 1;
}

static int all_byte(const uint8_t *b, size_t n, uint8_t v) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return 0;
  return 1;
}

/* One message from rank 0 to rank 1: send print/length, receive
 * print/length (count 0: no print); the receive posted before the send or
 * after the message came. Returns the receive's status; *untouched: the
 * receive buffer still holds its sentinel. */
typedef struct one {
  int rndv, recv_first;
  uint64_t send_count, recv_count; /* 0: no print */
  size_t send_len, recv_len;
} one_t;

static sc_result_t one_message(const one_t *o, pair_t *p, int *untouched) {
  uint8_t *src = pair_buf(p, o->send_len), *dst = pair_buf(p, o->recv_len);
  fill(src, o->send_len, 7);
  memset(dst, 0xa5, o->recv_len);
  sc_tp_req_t *rs = pair_req(p), *rr = pair_req(p);
  if (o->send_count) print_of(rs->fp, o->send_count);
  if (o->recv_count) print_of(rr->fp, o->recv_count);
  memset(rr->peer_fp, 0x77, sizeof(rr->peer_fp)); /* the transport must clear it */
  if (o->recv_first) {
    assert_int_equal(sc_ucx_transport.irecv(p->tp[1], 0, dst, o->recv_len, rr), SC_SUCCESS);
    pump(p);
    assert_int_equal(sc_ucx_transport.isend(p->tp[0], 1, src, o->send_len, rs), SC_SUCCESS);
  } else {
    assert_int_equal(sc_ucx_transport.isend(p->tp[0], 1, src, o->send_len, rs), SC_SUCCESS);
    for (int i = 0; i < 20; i++) pump(p); /* the message waits, unexpected, at rank 1 */
    assert_int_equal(sc_ucx_transport.irecv(p->tp[1], 0, dst, o->recv_len, rr), SC_SUCCESS);
  }
  run(p, rr, NULL);
  sc_result_t st = rr->state == SC_TP_REQ_DONE ? SC_SUCCESS : rr->status;
  if (st == SC_SUCCESS) {
    assert_int_equal(o->send_len, o->recv_len);
    assert_memory_equal(dst, src, o->send_len);
  }
  if (st == SC_ERR_MISMATCH) assert_true(all_zero(rr->peer_fp, SC_TP_FP_LEN));
  *untouched = all_byte(dst, o->recv_len, 0xa5);
  return st;
}

static void check_matching(int rndv, int recv_first) {
  pair_t p;
  pair_open(&p, rndv);
  size_t len = rndv ? BIG : 4096;
  one_t o = {rndv, recv_first, 1000, 1000, len, len};
  int untouched;
  assert_int_equal(one_message(&o, &p, &untouched), SC_SUCCESS);
  /* and a receive without a print takes a message that has one */
  one_t o2 = {rndv, recv_first, 1000, 0, len, len};
  assert_int_equal(one_message(&o2, &p, &untouched), SC_SUCCESS);
  assert_int_equal(p.mismatches[0] + p.mismatches[1] + p.remotes[0] + p.remotes[1], 0);
  pair_close(&p);
}

/* Prints that differ: SC_ERR_MISMATCH, not a byte in the buffer, one report
 * on the receiver and none on the sender; then the pair is out of step. */
static void check_mismatch(int rndv, int recv_first, uint64_t send_count, uint64_t recv_count,
                           size_t send_len, size_t recv_len) {
  pair_t p;
  pair_open(&p, rndv);
  one_t o = {rndv, recv_first, send_count, recv_count, send_len, recv_len};
  int untouched;
  assert_int_equal(one_message(&o, &p, &untouched), SC_ERR_MISMATCH);
  assert_true(untouched);
  assert_int_equal(p.mismatches[1], 1);
  assert_int_equal(p.remotes[1], 0);
  assert_int_equal(p.mismatches[0], 0);
  /* out of step: the next receive from rank 0 fails at once, as for a
   * failed peer, and so does a send to it */
  uint8_t b[8];
  sc_tp_req_t r;
  memset(&r, 0, sizeof(r));
  print_of(r.fp, recv_count);
  assert_int_equal(sc_ucx_transport.irecv(p.tp[1], 0, b, sizeof(b), &r), SC_ERR_REMOTE);
  assert_int_equal(r.state, SC_TP_REQ_ERROR);
  memset(&r, 0, sizeof(r));
  assert_int_equal(sc_ucx_transport.isend(p.tp[1], 0, b, sizeof(b), &r), SC_ERR_REMOTE);
  pair_close(&p);
}

static void test_match_eager(void **state) {
  (void)state;
  check_matching(0, 1);
  check_matching(0, 0);
}

static void test_match_rndv(void **state) {
  (void)state;
  check_matching(1, 1);
  check_matching(1, 0);
}

static void test_mismatch_eager(void **state) {
  (void)state;
  check_mismatch(0, 1, 1000, 999, 4000, 4000);
  check_mismatch(0, 0, 1000, 999, 4000, 4000);
  /* a message without a print for a receive with one */
  check_mismatch(0, 1, 0, 999, 4000, 4000);
}

static void test_mismatch_rndv(void **state) {
  (void)state;
  check_mismatch(1, 1, 65536, 65535, BIG, BIG);
  check_mismatch(1, 0, 65536, 65535, BIG, BIG);
}

/* Prints and lengths both differ: the print wins, whichever is larger. */
static void test_print_wins(void **state) {
  (void)state;
  check_mismatch(0, 1, 1000, 999, 4000, 3996);
  check_mismatch(0, 0, 4, 1000000, 16, 4000);
  check_mismatch(1, 1, 65536, 65535, BIG, BIG - 4);
  check_mismatch(1, 0, 4, 65536, 16, BIG);
}

/* Same print, other length: the length check, SC_ERR_REMOTE. */
static void test_length_only(void **state) {
  (void)state;
  for (int rndv = 0; rndv < 2; rndv++) {
    pair_t p;
    pair_open(&p, rndv);
    size_t len = rndv ? BIG : 4000;
    one_t o = {rndv, 1, 1000, 1000, len - 4, len};
    int untouched;
    assert_int_equal(one_message(&o, &p, &untouched), SC_ERR_REMOTE);
    assert_int_equal(p.mismatches[1], 0);
    pair_close(&p);
  }
}

/* Messages of one operation match, the next operation's do not: the first
 * completes, the second fails with the mismatch. */
static void test_second_message(void **state) {
  (void)state;
  pair_t p;
  pair_open(&p, 0);
  uint8_t s1[64], s2[64], d1[64], d2[64];
  fill(s1, sizeof(s1), 1);
  fill(s2, sizeof(s2), 2);
  memset(d1, 0, sizeof(d1));
  memset(d2, 0xa5, sizeof(d2));
  sc_tp_req_t a, b, ra, rb;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  memset(&ra, 0, sizeof(ra));
  memset(&rb, 0, sizeof(rb));
  print_of(a.fp, 16);
  print_of(ra.fp, 16);
  print_of(b.fp, 16);
  b.fp[3] = 2; /* the next operation's sequence number differs */
  print_of(rb.fp, 16);
  rb.fp[3] = 3;
  assert_int_equal(sc_ucx_transport.irecv(p.tp[1], 0, d1, sizeof(d1), &ra), SC_SUCCESS);
  assert_int_equal(sc_ucx_transport.irecv(p.tp[1], 0, d2, sizeof(d2), &rb), SC_SUCCESS);
  assert_int_equal(sc_ucx_transport.isend(p.tp[0], 1, s1, sizeof(s1), &a), SC_SUCCESS);
  assert_int_equal(sc_ucx_transport.isend(p.tp[0], 1, s2, sizeof(s2), &b), SC_SUCCESS);
  run(&p, &ra, &rb);
  assert_int_equal(ra.state, SC_TP_REQ_DONE);
  assert_memory_equal(d1, s1, sizeof(s1));
  assert_int_equal(rb.state, SC_TP_REQ_ERROR);
  assert_int_equal(rb.status, SC_ERR_MISMATCH);
  assert_true(all_byte(d2, sizeof(d2), 0xa5));
  assert_int_equal(p.mismatches[1], 1);
  pair_close(&p);
}

/* The mismatch fails the pair's other pending receive as for a failed peer
 * (SC_ERR_REMOTE), and progress reports only the mismatch. */
static void test_others_fail(void **state) {
  (void)state;
  pair_t p;
  pair_open(&p, 0);
  uint8_t s[64], d[2][64];
  fill(s, sizeof(s), 3);
  sc_tp_req_t a, r0, r1;
  memset(&a, 0, sizeof(a));
  memset(&r0, 0, sizeof(r0));
  memset(&r1, 0, sizeof(r1));
  print_of(a.fp, 8);
  print_of(r0.fp, 9);
  print_of(r1.fp, 9);
  assert_int_equal(sc_ucx_transport.irecv(p.tp[1], 0, d[0], sizeof(d[0]), &r0), SC_SUCCESS);
  assert_int_equal(sc_ucx_transport.irecv(p.tp[1], 0, d[1], sizeof(d[1]), &r1), SC_SUCCESS);
  assert_int_equal(sc_ucx_transport.isend(p.tp[0], 1, s, sizeof(s), &a), SC_SUCCESS);
  run(&p, &r0, &r1);
  assert_int_equal(r0.status, SC_ERR_MISMATCH);
  assert_int_equal(r1.state, SC_TP_REQ_ERROR);
  assert_int_equal(r1.status, SC_ERR_REMOTE);
  assert_int_equal(p.mismatches[1], 1);
  assert_int_equal(p.remotes[1], 0);
  pair_close(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match_eager),    cmocka_unit_test(test_match_rndv),
      cmocka_unit_test(test_mismatch_eager), cmocka_unit_test(test_mismatch_rndv),
      cmocka_unit_test(test_print_wins),     cmocka_unit_test(test_length_only),
      cmocka_unit_test(test_second_message), cmocka_unit_test(test_others_fail),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
