/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch wire parsers (lib/control/watch.c): what arrives from an untrusted
 * peer is accepted only when well-formed; every bound is enforced. The
 * references are byte layouts written out here, independently of the
 * library's own frame builder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
  frame(b, 5, 0, 1, 0);
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

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_hello), cmocka_unit_test(test_frame)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
