/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: the print of the operation every segment header carries
 * (transport.h's sc_tp_req_t fp). The receiver's rule against a model of the
 * wire format, the header a send writes read back raw from the socket, a
 * message of another operation (whole or striped, of the same length or
 * not) failing its receive with SC_ERR_MISMATCH before a payload byte lands,
 * a mismatch reported before another peer's failure, and matching or
 * unchecked prints letting the data through. */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "test/unit/tcp_nodes.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/transport.h"

/* A segment header written byte by byte from the wire format in
 * tcp_internal.h: u32 magic, u32 seq, u64 length (big-endian), 16-byte print. */
static void forge_hdr(uint8_t h[SC_TCP_HDR_LEN], uint32_t magic, uint32_t seq, uint64_t len,
                      const uint8_t fp[SC_TP_FP_LEN]) {
  for (int i = 0; i < 4; i++) h[i] = (uint8_t)(magic >> (24 - 8 * i));
  for (int i = 0; i < 4; i++) h[4 + i] = (uint8_t)(seq >> (24 - 8 * i));
  for (int i = 0; i < 8; i++) h[8 + i] = (uint8_t)(len >> (56 - 8 * i));
  memcpy(h + 16, fp, SC_TP_FP_LEN);
}

static sc_tcp_hdr_verdict_t hdr_verdict(uint32_t magic, uint32_t seq, uint64_t len,
                                        const uint8_t *sent_fp, uint32_t want_seq, size_t want_len,
                                        const uint8_t *posted_fp) {
  uint8_t *h = malloc(SC_TCP_HDR_LEN); /* exact size */
  forge_hdr(h, magic, seq, len, sent_fp);
  sc_tcp_hdr_t out;
  memset(&out, 0xee, sizeof(out));
  sc_tcp_hdr_verdict_t v = sc_tcp_hdr_check(h, want_seq, want_len, posted_fp, &out);
  /* Whatever the verdict, the fields are the header's, print included. */
  assert_int_equal(out.magic, magic);
  assert_int_equal(out.seq, seq);
  assert_int_equal(out.len, len);
  assert_memory_equal(out.fp, sent_fp, SC_TP_FP_LEN);
  free(h);
  return v;
}

/* The receiver's rule: magic, then the print (only where the receive posted
 * one), then sequence number and length; a print that differs wins over a
 * length or sequence number that differs. */
static void test_hdr_print(void **state) {
  (void)state;
  assert_int_equal(SC_TCP_HDR_LEN, 16 + 16); /* the header grows by the print, no more */
  const uint32_t M = 0x5343544du;            /* 'SCTM' */
  uint8_t a[SC_TP_FP_LEN], b[SC_TP_FP_LEN], zero[SC_TP_FP_LEN] = {0};
  for (int i = 0; i < SC_TP_FP_LEN; i++) a[i] = (uint8_t)(0x10 + i);
  /* Equal prints. */
  assert_int_equal(hdr_verdict(M, 7, 1000, a, 7, 1000, a), SC_TCP_HDR_OK);
  /* A differing print, same length. */
  memcpy(b, a, sizeof(b));
  b[SC_TP_FP_LEN - 1] ^= 0x80;
  assert_int_equal(hdr_verdict(M, 7, 1000, b, 7, 1000, a), SC_TCP_HDR_BAD_PRINT);
  /* A differing print and a differing length or sequence number: the print wins. */
  assert_int_equal(hdr_verdict(M, 7, 999, b, 7, 1000, a), SC_TCP_HDR_BAD_PRINT);
  assert_int_equal(hdr_verdict(M, 8, 1000, b, 7, 1000, a), SC_TCP_HDR_BAD_PRINT);
  assert_int_equal(hdr_verdict(M, 9, 1ull << 62, b, 7, 1000, a), SC_TCP_HDR_BAD_PRINT);
  /* The same print, a differing length or sequence number: as without prints. */
  assert_int_equal(hdr_verdict(M, 7, 999, a, 7, 1000, a), SC_TCP_HDR_BAD_LEN);
  assert_int_equal(hdr_verdict(M, 8, 1000, a, 7, 1000, a), SC_TCP_HDR_BAD_SEQ);
  /* A receive posted without a print checks none: any print passes. */
  assert_int_equal(hdr_verdict(M, 7, 1000, b, 7, 1000, zero), SC_TCP_HDR_OK);
  assert_int_equal(hdr_verdict(M, 7, 1000, b, 7, 1000, NULL), SC_TCP_HDR_OK);
  assert_int_equal(hdr_verdict(M, 7, 1000, zero, 7, 1000, zero), SC_TCP_HDR_OK);
  assert_int_equal(hdr_verdict(M, 7, 999, b, 7, 1000, zero), SC_TCP_HDR_BAD_LEN);
  /* A message without a print (no operation sends one: a forged or garbled
   * header) is judged by sequence number and length alone. */
  assert_int_equal(hdr_verdict(M, 7, 1000, zero, 7, 1000, a), SC_TCP_HDR_OK);
  assert_int_equal(hdr_verdict(M, 7, 1ull << 62, zero, 7, 1000, a), SC_TCP_HDR_BAD_LEN);
  assert_int_equal(hdr_verdict(M, 0x7fffffff, 1ull << 62, zero, 7, 1000, a), SC_TCP_HDR_BAD_SEQ);
  /* The magic comes first. */
  assert_int_equal(hdr_verdict(M ^ 1, 7, 1000, b, 7, 1000, a), SC_TCP_HDR_BAD_MAGIC);
  /* Every bit of the print counts. */
  for (int i = 0; i < SC_TP_FP_LEN; i++)
    for (int k = 0; k < 8; k++) {
      memcpy(b, a, sizeof(b));
      b[i] ^= (uint8_t)(1u << k);
      assert_int_equal(hdr_verdict(M, 7, 1000, b, 7, 1000, a), SC_TCP_HDR_BAD_PRINT);
      /* A print with a single bit set is a print: it is checked. */
      memset(b, 0, sizeof(b));
      b[i] = (uint8_t)(1u << k);
      assert_int_equal(hdr_verdict(M, 7, 1000, a, 7, 1000, b), SC_TCP_HDR_BAD_PRINT);
      assert_int_equal(hdr_verdict(M, 7, 1000, b, 7, 1000, a), SC_TCP_HDR_BAD_PRINT);
      assert_int_equal(hdr_verdict(M, 7, 1000, b, 7, 1000, b), SC_TCP_HDR_OK);
    }
}

/* What a sender's request carries is what the header on the wire holds:
 * read it back from the receiving socket, raw. */
static void test_hdr_on_wire(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 2, addrs, 5000);
  connect_nodes(nodes, 2);
  uint8_t msg[5] = "wire", fp[SC_TP_FP_LEN];
  for (int i = 0; i < SC_TP_FP_LEN; i++) fp[i] = (uint8_t)(0xf0 - 3 * i);
  sc_tp_req_t sr = {0};
  memcpy(sr.fp, fp, sizeof(fp));
  assert_int_equal(ops->isend(nodes[1].tp, 0, msg, sizeof(msg), &sr), SC_SUCCESS);
  char err[256];
  assert_int_equal(drive(nodes[1].tp, &sr, 1, 2000, err, sizeof(err)), SC_SUCCESS);
  int fd = sc_tcp_of(nodes[0].tp)->peers[1].socks[0].fd;
  uint8_t got[SC_TCP_HDR_LEN + sizeof(msg)], want[SC_TCP_HDR_LEN];
  size_t have = 0;
  int64_t deadline = sc_now_ms() + 2000;
  while (have < sizeof(got) && sc_now_ms() < deadline) {
    ssize_t n = recv(fd, got + have, sizeof(got) - have, MSG_DONTWAIT);
    if (n > 0) have += (size_t)n;
    if (n <= 0) poll(NULL, 0, 1);
  }
  assert_int_equal(have, sizeof(got));
  forge_hdr(want, 0x5343544du, 0, sizeof(msg), fp);
  assert_memory_equal(got, want, SC_TCP_HDR_LEN);
  assert_memory_equal(got + SC_TCP_HDR_LEN, msg, sizeof(msg));
  destroy_nodes(nodes, 2);
}

/* A send whose print differs from its receive's: the receive fails with
 * SC_ERR_MISMATCH and learns the sender's print, no payload byte lands,
 * progress reports it once, and the pair is then failed both ways. */
static void test_print_mismatch(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 2, addrs, 5000);
  connect_nodes(nodes, 2);
  enum { LEN = 1000, GUARD = 4096 };
  uint8_t mine[SC_TP_FP_LEN], theirs[SC_TP_FP_LEN];
  for (int i = 0; i < SC_TP_FP_LEN; i++) {
    mine[i] = (uint8_t)(0x20 + i);
    theirs[i] = (uint8_t)(0x20 + i);
  }
  theirs[3] = 0x99;
  uint8_t *rbuf = malloc(LEN + GUARD), small[8] = {0};
  memset(rbuf, 0xA5, LEN + GUARD);
  uint8_t sbuf[LEN];
  memset(sbuf, 0x5A, sizeof(sbuf));
  sc_tp_req_t rr = {0}, later = {0}, sr = {0};
  memcpy(rr.fp, mine, sizeof(mine));
  memcpy(later.fp, mine, sizeof(mine));
  memcpy(sr.fp, theirs, sizeof(theirs));
  /* Both receives are posted before anything is sent: progress meets the message. */
  assert_int_equal(ops->irecv(nodes[0].tp, 1, rbuf, LEN, &rr), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[0].tp, 1, small, sizeof(small), &later), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[1].tp, 0, sbuf, LEN, &sr), SC_SUCCESS);
  sc_result_t r = recv_until_error(nodes, &rr);
  assert_int_equal(r, SC_ERR_MISMATCH);
  assert_int_equal(rr.state, SC_TP_REQ_ERROR);
  assert_int_equal(rr.status, SC_ERR_MISMATCH);
  assert_memory_equal(rr.peer_fp, theirs, SC_TP_FP_LEN);
  assert_memory_equal(rr.fp, mine, SC_TP_FP_LEN);
  const char *e = sc_last_error();
  assert_non_null(strstr(e, "rank 1 (127.0.0.1:"));
  assert_non_null(strstr(e, "sent a message of another operation (print 202122992425"));
  assert_non_null(strstr(e, "where this rank's receive has 202122232425"));
  for (size_t i = 0; i < LEN + GUARD; i++) assert_int_equal(rbuf[i], 0xA5);
  /* The other receive from that peer fails as for a failed peer. */
  assert_int_equal(later.state, SC_TP_REQ_ERROR);
  assert_int_equal(later.status, SC_ERR_REMOTE);
  for (size_t i = 0; i < sizeof(small); i++) assert_int_equal(small[i], 0);
  /* Reported once: the next rounds have nothing to say. */
  int moved;
  assert_int_equal(ops->progress(nodes[0].tp, 0, &moved), SC_SUCCESS);
  assert_int_equal(ops->progress(nodes[0].tp, 10, &moved), SC_SUCCESS);
  /* Later requests to that peer fail at once, with the same story. */
  sc_tp_req_t again = {0}, send_again = {0};
  memcpy(again.fp, mine, sizeof(mine));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, small, sizeof(small), &again), SC_ERR_REMOTE);
  assert_int_equal(again.state, SC_TP_REQ_ERROR);
  assert_int_equal(again.status, SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "another operation"));
  assert_int_equal(ops->isend(nodes[0].tp, 1, small, sizeof(small), &send_again), SC_ERR_REMOTE);
  /* The sender learns at its next request to rank 0: the connection is gone. */
  sc_tp_req_t back = {0};
  r = ops->irecv(nodes[1].tp, 0, small, sizeof(small), &back);
  int64_t deadline = sc_now_ms() + 3000;
  while (r == SC_SUCCESS && back.state == SC_TP_REQ_PENDING && sc_now_ms() < deadline)
    r = ops->progress(nodes[1].tp, 10, &moved);
  assert_int_equal(r, SC_ERR_REMOTE);
  assert_int_equal(back.state, SC_TP_REQ_ERROR);
  assert_non_null(strstr(sc_last_error(), "rank 0 (127.0.0.1:"));
  free(rbuf);
  destroy_nodes(nodes, 2);
}

/* Prints that match and receives posted without one pass, in one stream:
 * the data arrives intact (the exchanges of tcp_nodes.c mix both too). */
static void test_print_match(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 2, addrs, 5000);
  connect_nodes(nodes, 2);
  enum { NM = 4 };
  const size_t lens[NM] = {100, 0, 70000, 3};
  uint8_t *in[NM], *out[NM];
  sc_tp_req_t rr[NM], sr[NM];
  memset(rr, 0, sizeof(rr));
  memset(sr, 0, sizeof(sr));
  for (int m = 0; m < NM; m++) {
    in[m] = malloc(lens[m] + 1);
    out[m] = malloc(lens[m] + 1);
    pattern(out[m], lens[m], 1, 0, m);
    for (int i = 0; i < SC_TP_FP_LEN; i++) sr[m].fp[i] = (uint8_t)(m * 16 + i + 1);
    /* Messages 0 and 2 are checked; 1 and 3 posted without a print. */
    if (m % 2 == 0) memcpy(rr[m].fp, sr[m].fp, SC_TP_FP_LEN);
    assert_int_equal(ops->irecv(nodes[0].tp, 1, in[m], lens[m], &rr[m]), SC_SUCCESS);
    assert_int_equal(ops->isend(nodes[1].tp, 0, out[m], lens[m], &sr[m]), SC_SUCCESS);
  }
  char err[256];
  assert_int_equal(drive(nodes[1].tp, sr, NM, 3000, err, sizeof(err)), SC_SUCCESS);
  assert_int_equal(drive(nodes[0].tp, rr, NM, 3000, err, sizeof(err)), SC_SUCCESS);
  for (int m = 0; m < NM; m++) {
    assert_true(check_pattern(in[m], lens[m], 1, 0, m));
    free(in[m]);
    free(out[m]);
  }
  destroy_nodes(nodes, 2);
}

/* A striped message of another operation, and of another length: the print
 * wins (SC_ERR_MISMATCH, the sender's print learnt), and no segment's
 * payload lands, on any socket. */
static void test_print_mismatch_striped(void **state) {
  (void)state;
  node_t nodes[2];
  uint8_t addrs[2 * SC_TP_ADDR_MAX];
  set_nsocks(3);
  create_nodes(nodes, 2, addrs, 5000);
  connect_nodes(nodes, 2);
  const size_t posted = 2 * SC_TCP_STRIPE_MIN + 5, sent = 3 * SC_TCP_STRIPE_MIN, guard = 4096;
  uint8_t *rbuf = malloc(posted + guard), *sbuf = malloc(sent);
  memset(rbuf, 0xA5, posted + guard);
  memset(sbuf, 0x5A, sent);
  sc_tp_req_t rr = {0}, sr = {0};
  for (int i = 0; i < SC_TP_FP_LEN; i++) {
    rr.fp[i] = (uint8_t)(0x40 + i);
    sr.fp[i] = (uint8_t)(0x40 + i);
  }
  sr.fp[0] = 0x41;
  assert_int_equal(ops->isend(nodes[1].tp, 0, sbuf, sent, &sr), SC_SUCCESS);
  /* The header may already be there when the receive is posted. */
  sc_result_t r = ops->irecv(nodes[0].tp, 1, rbuf, posted, &rr);
  if (r == SC_SUCCESS) r = recv_until_error(nodes, &rr);
  assert_int_equal(r, SC_ERR_MISMATCH);
  assert_int_equal(rr.state, SC_TP_REQ_ERROR);
  assert_int_equal(rr.status, SC_ERR_MISMATCH);
  assert_memory_equal(rr.peer_fp, sr.fp, SC_TP_FP_LEN);
  const char *e = sc_last_error();
  assert_non_null(strstr(e, "rank 1 (127.0.0.1:"));
  assert_non_null(strstr(e, "another operation"));
  assert_null(strstr(e, "bytes were expected"));
  for (size_t i = 0; i < posted + guard; i++) assert_int_equal(rbuf[i], 0xA5);
  int moved;
  assert_int_equal(ops->progress(nodes[0].tp, 0, &moved), SC_SUCCESS);
  free(rbuf);
  free(sbuf);
  destroy_nodes(nodes, 2);
}

/* A mismatch and another peer's failure met in one progress call: the call
 * reports the mismatch, whichever peer came first, and both peers are failed. */
static void test_mismatch_outranks(void **state) {
  (void)state;
  node_t nodes[3];
  uint8_t addrs[3 * SC_TP_ADDR_MAX];
  create_nodes(nodes, 3, addrs, 5000);
  connect_nodes(nodes, 3);
  uint8_t b1[8], b2[8], out[8] = "other";
  sc_tp_req_t from1 = {0}, from2 = {0}, sr = {0};
  memset(from1.fp, 0x11, SC_TP_FP_LEN);
  memset(from2.fp, 0x22, SC_TP_FP_LEN);
  memset(sr.fp, 0x23, SC_TP_FP_LEN);
  assert_int_equal(ops->irecv(nodes[0].tp, 1, b1, sizeof(b1), &from1), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[0].tp, 2, b2, sizeof(b2), &from2), SC_SUCCESS);
  /* Rank 1 (looked at first) goes away; rank 2 sends another operation's message. */
  ops->destroy(nodes[1].tp);
  nodes[1].tp = NULL;
  assert_int_equal(ops->isend(nodes[2].tp, 0, out, sizeof(out), &sr), SC_SUCCESS);
  poll(NULL, 0, 50); /* both are in rank 0's sockets now */
  int moved;
  sc_result_t r = ops->progress(nodes[0].tp, 0, &moved);
  assert_int_equal(r, SC_ERR_MISMATCH);
  assert_non_null(strstr(sc_last_error(), "rank 2 (127.0.0.1:"));
  assert_int_equal(from2.status, SC_ERR_MISMATCH);
  assert_int_equal(from1.state, SC_TP_REQ_ERROR);
  assert_int_equal(from1.status, SC_ERR_REMOTE);
  sc_tp_req_t again = {0};
  assert_int_equal(ops->irecv(nodes[0].tp, 1, b1, sizeof(b1), &again), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "closed the connection"));
  destroy_nodes(nodes, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hdr_print),
      cmocka_unit_test_setup(test_hdr_on_wire, reset_cfg),
      cmocka_unit_test_setup(test_print_mismatch, reset_cfg),
      cmocka_unit_test_setup(test_print_mismatch_striped, reset_cfg),
      cmocka_unit_test_setup(test_print_match, reset_cfg),
      cmocka_unit_test_setup(test_mismatch_outranks, reset_cfg),
  };
  return cmocka_run_group_tests(tests, tcp_test_setup, NULL);
}
