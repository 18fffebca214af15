/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch wire parsers (lib/control/watch.c): what arrives from an untrusted
 * peer is accepted only when well-formed; every bound is enforced. The
 * references are byte layouts written out here, independently of the
 * library's own frame builder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/control/watch.h"

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void hello(uint8_t *h, const uint8_t *secret, uint32_t rank, uint32_t nranks) {
  memset(h, 0, SC_WATCH_HELLO_LEN);
  put32(h, 0x53435748u);
  h[5] = 1;
  memcpy(h + 8, secret, 32);
  put32(h + 40, rank);
  put32(h + 44, nranks);
}

static void test_hello(void **state) {
  (void)state;
  uint8_t secret[32], other[32], h[SC_WATCH_HELLO_LEN];
  for (int i = 0; i < 32; i++) secret[i] = (uint8_t)i, other[i] = (uint8_t)(i + 1);
  char why[128];
  int rank = -1;
  hello(h, secret, 3, 5);
  assert_int_equal(sc_watch_hello_parse(h, sizeof(h), secret, 5, &rank, why, sizeof(why)),
                   SC_SUCCESS);
  assert_int_equal(rank, 3);
  /* Short, wrong secret, wrong job size, rank 0 (the hub itself), rank >= n. */
  assert_int_equal(sc_watch_hello_parse(h, sizeof(h) - 1, secret, 5, &rank, why, sizeof(why)),
                   SC_ERR_REMOTE);
  assert_int_equal(sc_watch_hello_parse(h, sizeof(h), other, 5, &rank, why, sizeof(why)),
                   SC_ERR_REMOTE);
  assert_non_null(strstr(why, "secret"));
  assert_int_equal(sc_watch_hello_parse(h, sizeof(h), secret, 4, &rank, why, sizeof(why)),
                   SC_ERR_REMOTE);
  hello(h, secret, 0, 5);
  assert_int_equal(sc_watch_hello_parse(h, sizeof(h), secret, 5, &rank, why, sizeof(why)),
                   SC_ERR_REMOTE);
  hello(h, secret, 5, 5);
  assert_int_equal(sc_watch_hello_parse(h, sizeof(h), secret, 5, &rank, why, sizeof(why)),
                   SC_ERR_REMOTE);
  hello(h, secret, 1, 5);
  h[5] = 2; /* a future version */
  assert_int_equal(sc_watch_hello_parse(h, sizeof(h), secret, 5, &rank, why, sizeof(why)),
                   SC_ERR_REMOTE);
  assert_non_null(strstr(why, "version"));
  hello(h, secret, 1, 5);
  h[0] ^= 1;
  assert_int_equal(sc_watch_hello_parse(h, sizeof(h), secret, 5, &rank, why, sizeof(why)),
                   SC_ERR_REMOTE);
  assert_int_equal(rank, 3); /* untouched by every rejection */
}

static void frame(uint8_t *b, int type, unsigned len, uint32_t subject, uint32_t code) {
  put32(b, 0x53435746u);
  b[4] = 1;
  b[5] = (uint8_t)type;
  b[6] = (uint8_t)(len >> 8);
  b[7] = (uint8_t)len;
  put32(b + 8, subject);
  put32(b + 12, code);
}

static void test_frame(void **state) {
  (void)state;
  uint8_t b[SC_WATCH_HDR_LEN];
  sc_watch_frame_t f;
  char why[128];
  frame(b, SC_WATCH_NOTICE, 17, 2, SC_ERR_REMOTE);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_SUCCESS);
  assert_int_equal(f.type, SC_WATCH_NOTICE);
  assert_int_equal(f.len, 17);
  assert_int_equal(f.subject, 2);
  assert_int_equal(f.code, SC_ERR_REMOTE);
  frame(b, SC_WATCH_FAILED, SC_WATCH_TEXT_MAX, 3, SC_ERR_TIMEOUT);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_SUCCESS);
  /* Text one byte over the bound, the largest u16, subject outside the job,
   * an unknown type, a code outside sc_result_t, bad magic and version. */
  frame(b, SC_WATCH_FAILED, SC_WATCH_TEXT_MAX + 1, 3, SC_ERR_TIMEOUT);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, SC_WATCH_FAILED, 0xffff, 3, SC_ERR_TIMEOUT);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, SC_WATCH_NOTICE, 0, 4, SC_ERR_REMOTE);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, 0, 0, 1, 0);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, 8, 0, 1, 0);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  /* The tree's frames: an event with text; a forwarded call 0 or 24 bytes,
   * nothing else; a quiet report exactly 4. */
  frame(b, SC_WATCH_EVENT, 40, 3, SC_ERR_TIMEOUT);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_SUCCESS);
  assert_int_equal(f.type, SC_WATCH_EVENT);
  frame(b, SC_WATCH_OP, SC_WATCH_HB_OP_LEN, 3, 0);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_SUCCESS);
  frame(b, SC_WATCH_OP, 0, 3, 0);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_SUCCESS);
  frame(b, SC_WATCH_OP, SC_WATCH_HB_OP_LEN - 1, 3, 0);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, SC_WATCH_QUIET, SC_WATCH_QUIET_LEN, 3, 0);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_SUCCESS);
  frame(b, SC_WATCH_QUIET, 0, 3, 0);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, SC_WATCH_QUIET, SC_WATCH_QUIET_LEN, 4, 0);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, SC_WATCH_NOTICE, 0, 1, 0x7fffffffu);
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, SC_WATCH_HEARTBEAT, 0, 1, 0);
  b[1] ^= 0x20;
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  frame(b, SC_WATCH_HEARTBEAT, 0, 1, 0);
  b[4] = 2;
  assert_int_equal(sc_watch_frame_parse(b, sizeof(b), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  assert_int_equal(sc_watch_frame_parse(b, 15, 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
}

/* A heartbeat's report of the call its rank executes: u64 number, then the
 * 16-byte print; none when idle. */
static void test_heartbeat_report(void **state) {
  (void)state;
  sc_watch_op_t op = {.busy = 1, .seq = 0x0102030405060708ULL}, back;
  for (int i = 0; i < SC_WATCH_FP_LEN; i++) op.fp[i] = (uint8_t)(0xa0 + i);
  uint8_t b[SC_WATCH_HB_OP_LEN + 1];
  assert_int_equal(sc_watch_hb_put(&op, b), 24);
  const uint8_t want[24] = {1,    2,    3,    4,    5,    6,    7,    8,    0xa0, 0xa1, 0xa2, 0xa3,
                            0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf};
  assert_memory_equal(b, want, sizeof(want));
  char why[128];
  memset(&back, 0x5a, sizeof(back));
  assert_int_equal(sc_watch_hb_parse(b, 24, &back, why, sizeof(why)), SC_SUCCESS);
  assert_int_equal(back.busy, 1);
  assert_true(back.seq == op.seq);
  assert_memory_equal(back.fp, op.fp, SC_WATCH_FP_LEN);
  /* Idle: nothing after the header, and nothing read. */
  sc_watch_op_t idle = {0};
  assert_int_equal(sc_watch_hb_put(&idle, b), 0);
  assert_int_equal(sc_watch_hb_parse(b, 0, &back, why, sizeof(why)), SC_SUCCESS);
  assert_int_equal(back.busy, 0);
  assert_true(back.seq == 0);
  /* One byte short or over, a report without a print. */
  assert_int_equal(sc_watch_hb_parse(want, 23, &back, why, sizeof(why)), SC_ERR_REMOTE);
  assert_int_equal(sc_watch_hb_parse(b, 25, &back, why, sizeof(why)), SC_ERR_REMOTE);
  memset(b + 8, 0, SC_WATCH_FP_LEN);
  assert_int_equal(sc_watch_hb_parse(b, 24, &back, why, sizeof(why)), SC_ERR_REMOTE);
  /* The frame: a heartbeat's length is 0 or a report's, nothing between. */
  uint8_t h[SC_WATCH_HDR_LEN];
  sc_watch_frame_t f;
  frame(h, SC_WATCH_HEARTBEAT, 24, 2, 0);
  assert_int_equal(sc_watch_frame_parse(h, sizeof(h), 4, &f, why, sizeof(why)), SC_SUCCESS);
  assert_int_equal(f.len, 24);
  frame(h, SC_WATCH_HEARTBEAT, 0, 2, 0);
  assert_int_equal(sc_watch_frame_parse(h, sizeof(h), 4, &f, why, sizeof(why)), SC_SUCCESS);
  const unsigned bad[] = {1, 16, 23, 25, 40, SC_WATCH_TEXT_MAX};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    frame(h, SC_WATCH_HEARTBEAT, bad[i], 2, 0);
    assert_int_equal(sc_watch_frame_parse(h, sizeof(h), 4, &f, why, sizeof(why)), SC_ERR_REMOTE);
  }
  /* Other frames keep their text bound. */
  frame(h, SC_WATCH_FAILED, 25, 2, SC_ERR_MISMATCH);
  assert_int_equal(sc_watch_frame_parse(h, sizeof(h), 4, &f, why, sizeof(why)), SC_SUCCESS);
}

static sc_watch_op_t call(uint64_t seq, uint8_t v) {
  sc_watch_op_t op = {.busy = 1, .seq = seq};
  for (int i = 0; i < SC_WATCH_FP_LEN; i++) op.fp[i] = (uint8_t)(v + i);
  return op;
}

/* Rank 0's comparison: the same number with another print is a mismatch;
 * another number (a rank that moved on or is behind) and idle ranks are
 * not. */
static void test_hub_compare(void **state) {
  (void)state;
  const sc_watch_op_t idle = {0};
  sc_watch_op_t ops[5] = {call(7, 1), call(7, 1), idle, call(8, 2), call(6, 3)};
  for (int r = 0; r < 5; r++) assert_int_equal(sc_watch_op_conflict(ops, 5, r), -1);
  ops[2] = call(7, 9); /* rank 2 made another call #7 */
  assert_int_equal(sc_watch_op_conflict(ops, 5, 2), 0);
  assert_int_equal(sc_watch_op_conflict(ops, 5, 0), 2);
  assert_int_equal(sc_watch_op_conflict(ops, 5, 1), 2);
  assert_int_equal(sc_watch_op_conflict(ops, 5, 3), -1);
  ops[0] = idle; /* rank 0 between calls: rank 1 is the one left to compare */
  assert_int_equal(sc_watch_op_conflict(ops, 5, 2), 1);
  assert_int_equal(sc_watch_op_conflict(ops, 5, 0), -1);
  /* Prints that differ in one byte, the last. */
  sc_watch_op_t two[2] = {call(70000, 4), call(70000, 4)};
  assert_int_equal(sc_watch_op_conflict(two, 2, 1), -1);
  two[1].fp[SC_WATCH_FP_LEN - 1] ^= 1;
  assert_int_equal(sc_watch_op_conflict(two, 2, 1), 0);
  /* Out of range: nothing. */
  assert_int_equal(sc_watch_op_conflict(two, 2, 2), -1);
  assert_int_equal(sc_watch_op_conflict(two, 2, -1), -1);
}

static void describe_stub(void *ctx, const sc_watch_op_t *op, char *out, size_t len) {
  snprintf(out, len, "%s #%llu (print %02x)", (const char *)ctx, (unsigned long long)op->seq,
           op->fp[0]);
}

static void test_hub_reason(void **state) {
  (void)state;
  sc_watch_op_t a = call(7, 0x11), b = call(7, 0x22);
  char out[400];
  sc_watch_op_mismatch_reason(out, sizeof(out), &a, &b, 0, "hostA", describe_stub, "allreduce");
  assert_string_equal(out,
                      "called allreduce #7 (print 11) where rank 0 (hostA) called allreduce #7 "
                      "(print 22)");
  /* Cut to the room given, terminated. */
  sc_watch_op_mismatch_reason(out, 20, &a, &b, 0, "hostA", describe_stub, "allreduce");
  assert_int_equal(strlen(out), 19);
}

/* The tree: rank r's parent is (r-1)/k; subtrees against a walk written
 * here from the children's ranks (r*k+1 .. r*k+k). */
static int below_ref(int k, int s, int c, int n) {
  if (s == c) return 1;
  for (int i = 1; i <= k; i++) {
    long long kid = (long long)c * k + i;
    if (kid < n && kid <= s && below_ref(k, s, (int)kid, n)) return 1;
  }
  return 0;
}

static void test_tree(void **state) {
  (void)state;
  assert_int_equal(sc_watch_parent_of(2, 0), -1);
  assert_int_equal(sc_watch_parent_of(2, 1), 0);
  assert_int_equal(sc_watch_parent_of(2, 2), 0);
  assert_int_equal(sc_watch_parent_of(2, 3), 1);
  assert_int_equal(sc_watch_parent_of(2, 10), 4);
  assert_int_equal(sc_watch_parent_of(8, 8), 0);
  assert_int_equal(sc_watch_parent_of(8, 9), 1);
  assert_int_equal(sc_watch_parent_of(64, 1023), 15);
  const int ks[] = {2, 3, 8};
  for (int ki = 0; ki < 3; ki++)
    for (int c = 0; c < 40; c++)
      for (int s = 0; s < 40; s++)
        assert_int_equal(sc_watch_in_subtree(ks[ki], s, c), below_ref(ks[ki], s, c, 40));
  assert_false(sc_watch_in_subtree(2, -1, 0));
  assert_false(sc_watch_in_subtree(2, 3, -1));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_hello),
                                     cmocka_unit_test(test_frame),
                                     cmocka_unit_test(test_heartbeat_report),
                                     cmocka_unit_test(test_hub_compare),
                                     cmocka_unit_test(test_hub_reason),
                                     cmocka_unit_test(test_tree)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
