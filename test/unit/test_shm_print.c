/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport: the print of the operation every record carries
 * (transport.h's sc_tp_req_t fp), between whole transports in one process.
 * A message of another operation, whatever its record kind (copied through
 * the ring, streamed through it, read by single copy) and even of another
 * length, fails its receive with SC_ERR_MISMATCH and the sender's print
 * before a payload byte lands; progress says so once, before any other
 * peer's failure; the pair then fails both ways as for a failed peer. Through the mux
 * (SC_TRANSPORT=auto) the prints travel the same. The record verdict itself: test_shm_ipc.c. */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "test/unit/shm_nodes.h"
#include "transport/shm/shm_internal.h"
#include "transport/transport.h"

static int use_shm(void **state) {
  (void)state;
  ops = &sc_shm_transport;
  return 0;
}

static void print_of(uint8_t fp[SC_TP_FP_LEN], uint8_t salt) {
  for (int i = 0; i < SC_TP_FP_LEN; i++) fp[i] = (uint8_t)(salt + 5 * i);
}

/* Rounds of progress on nodes[me] (the other node moves too) until it
 * reports an error or 3 s pass; returns what it reported. */
static sc_result_t until_error(int me, const sc_tp_req_t *req) {
  sc_result_t r = SC_SUCCESS;
  int64_t deadline = sc_now_ms() + 3000;
  while (r == SC_SUCCESS && sc_now_ms() < deadline && (!req || req->state == SC_TP_REQ_PENDING)) {
    int prog;
    ops->progress(nodes[1 - me].tp, 0, &prog);
    r = ops->progress(nodes[me].tp, 10, &prog);
  }
  return r;
}

enum { KIND_EAGER, KIND_STREAMED, KIND_SINGLE_COPY };

/* Rank 0 sends `sent` bytes with print B where rank 1 posted `posted` bytes
 * with print A. */
static void mismatch(int kind, size_t sent, size_t posted) {
  setup_n(2);
  if (ops == &sc_shm_transport && kind == KIND_STREAMED) /* through the ring: no single copy */
    sc_shm_of(nodes[1].tp)->peers[0].rx.ctl->cma_ok = 2;
  enum { GUARD = 4096 };
  uint8_t a[SC_TP_FP_LEN], b[SC_TP_FP_LEN];
  print_of(a, 0x31);
  print_of(b, 0x31);
  b[SC_TP_FP_LEN - 1] ^= 0x01;
  uint8_t *rbuf = malloc(posted + GUARD), *sbuf = malloc(sent), small[8] = {0};
  memset(rbuf, 0xA5, posted + GUARD);
  memset(sbuf, 0x5A, sent);
  sc_tp_req_t rr, later, sr;
  memset(&rr, 0, sizeof(rr));
  memset(&later, 0, sizeof(later));
  memset(&sr, 0, sizeof(sr));
  memcpy(rr.fp, a, sizeof(a));
  memcpy(later.fp, a, sizeof(a));
  memcpy(sr.fp, b, sizeof(b));
  /* Both receives are posted before anything is sent: progress meets the record. */
  assert_int_equal(ops->irecv(nodes[1].tp, 0, rbuf, posted, &rr), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[1].tp, 0, small, sizeof(small), &later), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[0].tp, 1, sbuf, sent, &sr), SC_SUCCESS);
  if (ops == &sc_shm_transport) {
    /* The kind of record this is about. */
    sc_shm_peer_t *tx = &sc_shm_of(nodes[0].tp)->peers[1];
    assert_int_equal(tx->cma_sent, kind == KIND_SINGLE_COPY ? 1 : 0);
    if (kind == KIND_STREAMED) assert_true(sent > tx->tx.size);
  }
  sc_result_t r = until_error(1, &rr);
  assert_int_equal(r, SC_ERR_MISMATCH);
  assert_int_equal(rr.state, SC_TP_REQ_ERROR);
  assert_int_equal(rr.status, SC_ERR_MISMATCH);
  assert_memory_equal(rr.peer_fp, b, SC_TP_FP_LEN);
  assert_memory_equal(rr.fp, a, SC_TP_FP_LEN);
  const char *e = sc_last_error();
  assert_non_null(strstr(e, "rank 0 ("));
  char want[128];
  snprintf(want, sizeof(want), "another operation (print 31363b40454a4f54595e63686d72777d");
  assert_non_null(strstr(e, want));
  assert_non_null(strstr(e, "this rank's receive has 31363b40454a4f54595e63686d72777c"));
  assert_null(strstr(e, "bytes were expected"));
  for (size_t i = 0; i < posted + GUARD; i++) assert_int_equal(rbuf[i], 0xA5);
  /* The other receive from that peer fails as for a failed peer. */
  assert_int_equal(later.state, SC_TP_REQ_ERROR);
  assert_int_equal(later.status, SC_ERR_REMOTE);
  for (size_t i = 0; i < sizeof(small); i++) assert_int_equal(small[i], 0);
  /* Reported once. */
  int prog;
  assert_int_equal(ops->progress(nodes[1].tp, 0, &prog), SC_SUCCESS);
  assert_int_equal(ops->progress(nodes[1].tp, 10, &prog), SC_SUCCESS);
  /* Later requests to that peer fail at once, with the same story. */
  sc_tp_req_t again, send_again;
  memset(&again, 0, sizeof(again));
  memset(&send_again, 0, sizeof(send_again));
  assert_int_equal(ops->irecv(nodes[1].tp, 0, small, sizeof(small), &again), SC_ERR_REMOTE);
  assert_int_equal(again.status, SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "another operation"));
  assert_int_equal(ops->isend(nodes[1].tp, 0, small, sizeof(small), &send_again), SC_ERR_REMOTE);
  /* The sender: a send still waiting on the receiver (the rest of a
   * streamed one, a single-copy one) fails; so does its next receive. */
  sc_tp_req_t back;
  memset(&back, 0, sizeof(back));
  r = ops->irecv(nodes[0].tp, 1, small, sizeof(small), &back);
  if (r == SC_SUCCESS) r = until_error(0, &back);
  assert_int_equal(r, SC_ERR_REMOTE);
  assert_int_equal(back.state, SC_TP_REQ_ERROR);
  assert_non_null(strstr(sc_last_error(), "rank 1 ("));
  if (kind == KIND_EAGER)
    assert_int_equal(sr.state, SC_TP_REQ_DONE);
  else
    assert_int_equal(sr.state, SC_TP_REQ_ERROR);
  free(rbuf);
  free(sbuf);
  teardown_n(2);
}

static void test_mismatch_eager(void **state) {
  (void)state;
  mismatch(KIND_EAGER, 1000, 1000);
}

static void test_mismatch_streamed(void **state) {
  (void)state;
  mismatch(KIND_STREAMED, (size_t)600 << 10, (size_t)600 << 10);
}

static void test_mismatch_single_copy(void **state) {
  (void)state;
  mismatch(KIND_SINGLE_COPY, (size_t)600 << 10, (size_t)600 << 10);
}

/* Another operation of another length: the print names the cause, not the
 * length ("sent a 100-byte message where 50 bytes were expected"). */
static void test_print_wins_over_length(void **state) {
  (void)state;
  mismatch(KIND_EAGER, 100, 50);
  mismatch(KIND_SINGLE_COPY, (size_t)1 << 20, (size_t)600 << 10);
}

/* Matching prints and receives posted without one, in one stream. */
static void match_stream(void) {
  enum { NM = 4 };
  const size_t lens[NM] = {100, 0, (size_t)600 << 10, 3};
  uint8_t *in[NM], *out[NM];
  sc_tp_req_t rr[NM], sr[NM];
  sc_tp_req_t *all[2 * NM];
  memset(rr, 0, sizeof(rr));
  memset(sr, 0, sizeof(sr));
  for (int m = 0; m < NM; m++) {
    in[m] = malloc(lens[m] + 1);
    out[m] = malloc(lens[m] + 1);
    fill(out[m], lens[m], (uint32_t)m);
    print_of(sr[m].fp, (uint8_t)(16 * m + 1));
    /* Messages 0 and 2 are checked; 1 and 3 posted without a print. */
    if (m % 2 == 0) memcpy(rr[m].fp, sr[m].fp, SC_TP_FP_LEN);
    assert_int_equal(ops->irecv(nodes[0].tp, 1, in[m], lens[m], &rr[m]), SC_SUCCESS);
    assert_int_equal(ops->isend(nodes[1].tp, 0, out[m], lens[m], &sr[m]), SC_SUCCESS);
    all[2 * m] = &rr[m];
    all[2 * m + 1] = &sr[m];
  }
  assert_int_equal(drive(2, all, 2 * NM), SC_SUCCESS);
  for (int m = 0; m < NM; m++) {
    assert_int_equal(rr[m].state, SC_TP_REQ_DONE);
    assert_memory_equal(in[m], out[m], lens[m]);
    free(in[m]);
    free(out[m]);
  }
}

static void test_print_match(void **state) {
  (void)state;
  setup_n(2);
  match_stream();
  teardown_n(2);
}

/* A mismatch and another peer's failure met in one progress call: the call
 * reports the mismatch, whichever peer came first, and both peers are failed. */
static void test_mismatch_outranks(void **state) {
  (void)state;
  setup_n(3);
  uint8_t b1[8], b2[8], out[8] = "other";
  sc_tp_req_t from1, from2, sr;
  memset(&from1, 0, sizeof(from1));
  memset(&from2, 0, sizeof(from2));
  memset(&sr, 0, sizeof(sr));
  memset(from1.fp, 0x11, SC_TP_FP_LEN);
  memset(from2.fp, 0x22, SC_TP_FP_LEN);
  memset(sr.fp, 0x23, SC_TP_FP_LEN);
  assert_int_equal(ops->irecv(nodes[0].tp, 1, b1, sizeof(b1), &from1), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[0].tp, 2, b2, sizeof(b2), &from2), SC_SUCCESS);
  /* Rank 1 (looked at first) closes its end; rank 2 sends another operation's message. */
  ops->destroy(nodes[1].tp);
  nodes[1].tp = NULL;
  assert_int_equal(ops->isend(nodes[2].tp, 0, out, sizeof(out), &sr), SC_SUCCESS);
  /* The first pass looks at rank 1's liveness too (it reads the clock). */
  sc_shm_transport_t *t0 = sc_shm_of(nodes[0].tp);
  t0->clock_skips = 0;
  t0->peers[1].next_check_ms = 0;
  int prog;
  sc_result_t r = ops->progress(nodes[0].tp, 0, &prog);
  assert_int_equal(r, SC_ERR_MISMATCH);
  assert_non_null(strstr(sc_last_error(), "rank 2 ("));
  assert_int_equal(from2.status, SC_ERR_MISMATCH);
  assert_int_equal(from1.state, SC_TP_REQ_ERROR);
  assert_int_equal(from1.status, SC_ERR_REMOTE);
  sc_tp_req_t again;
  memset(&again, 0, sizeof(again));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, b1, sizeof(b1), &again), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "closed"));
  teardown_n(3);
}

/* The mux hands its children the caller's requests: the print goes out with
 * the send and the peer's comes back in the receive. */
static void test_mux_keeps_prints(void **state) {
  (void)state;
  ops = &sc_mux_transport;
  setup_n(2);
  match_stream();
  teardown_n(2);
  mismatch(KIND_EAGER, 1000, 1000);
  ops = &sc_shm_transport;
}

/* Under the mux a mismatch met by one child outranks a failure the other
 * child reports in the same progress call. Rank 2 looks remote (TCP) and
 * goes away; rank 1 (shared memory) sends another operation's message. */
static void test_mux_mismatch_outranks(void **state) {
  (void)state;
  ops = &sc_mux_transport;
  remote_rank = 2;
  setup_n(3);
  remote_rank = -1;
  uint8_t b1[8], b2[8], out[8] = "other";
  sc_tp_req_t from1, from2, sr;
  memset(&from1, 0, sizeof(from1));
  memset(&from2, 0, sizeof(from2));
  memset(&sr, 0, sizeof(sr));
  memset(from1.fp, 0x11, SC_TP_FP_LEN);
  memset(from2.fp, 0x22, SC_TP_FP_LEN);
  memset(sr.fp, 0x12, SC_TP_FP_LEN);
  memset(b1, 0xee, sizeof(b1));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, b1, sizeof(b1), &from1), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[0].tp, 2, b2, sizeof(b2), &from2), SC_SUCCESS);
  ops->destroy(nodes[2].tp);
  nodes[2].tp = NULL;
  assert_int_equal(ops->isend(nodes[1].tp, 0, out, sizeof(out), &sr), SC_SUCCESS);
  poll(NULL, 0, 50); /* rank 2's end is closed in rank 0's socket by now */
  int prog;
  sc_result_t r = ops->progress(nodes[0].tp, 0, &prog);
  assert_int_equal(r, SC_ERR_MISMATCH);
  assert_int_equal(from1.status, SC_ERR_MISMATCH);
  uint8_t want[SC_TP_FP_LEN];
  memset(want, 0x12, sizeof(want));
  assert_memory_equal(from1.peer_fp, want, SC_TP_FP_LEN);
  for (size_t i = 0; i < sizeof(b1); i++) assert_int_equal(b1[i], 0xee);
  /* Rank 2 went over TCP: its receive failed with TCP's text. */
  assert_int_equal(from2.state, SC_TP_REQ_ERROR);
  assert_int_equal(from2.status, SC_ERR_REMOTE);
  sc_tp_req_t again;
  memset(&again, 0, sizeof(again));
  assert_int_equal(ops->irecv(nodes[0].tp, 2, b2, sizeof(b2), &again), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "closed the connection"));
  teardown_n(3);
  ops = &sc_shm_transport;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_mismatch_eager, use_shm),
      cmocka_unit_test_setup(test_mismatch_streamed, use_shm),
      cmocka_unit_test_setup(test_mismatch_single_copy, use_shm),
      cmocka_unit_test_setup(test_print_wins_over_length, use_shm),
      cmocka_unit_test_setup(test_print_match, use_shm),
      cmocka_unit_test_setup(test_mismatch_outranks, use_shm),
      cmocka_unit_test_setup(test_mux_keeps_prints, use_shm),
      cmocka_unit_test_setup(test_mux_mismatch_outranks, use_shm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
