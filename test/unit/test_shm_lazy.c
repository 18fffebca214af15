/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport, pairs connected on first use (connect_lazy):
 * nothing of a peer is mapped at connect_all; a receive alone connects
 * nothing, the peer's first send connects the pair; messages of every path
 * (empty, ring, larger than the ring, single copy) arrive exactly; the ring
 * bytes of a segment stay within SC_SHM_BUDGET_BYTES (a pair beyond it gets a
 * smaller ring, 16 KiB at least) and both sides agree on the size; with
 * /proc/PID/fd refused the segment is asked for over the doorbell; a peer
 * whose transport is gone fails the post naming it. Ranks are threads of
 * this process (test/unit/shm_nodes.c). */
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
#include "sparsecoll.h"
#include "test/unit/shm_nodes.h"
#include "transport/shm/shm_internal.h"
#include "transport/transport.h"

static sc_shm_transport_t *T(int i) {
  return sc_shm_of(nodes[i].tp);
}

/* from -> to, len bytes, checked byte for byte. */
static void transfer(int from, int to, size_t len, uint32_t salt) {
  uint8_t *src = malloc(len ? len : 1), *dst = malloc(len ? len : 1);
  assert_non_null(src);
  assert_non_null(dst);
  fill(src, len, salt);
  memset(dst, 0xee, len);
  sc_tp_req_t rs, rr;
  memset(&rs, 0, sizeof(rs));
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[to].tp, from, dst, len, &rr), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[from].tp, to, src, len, &rs), SC_SUCCESS);
  sc_tp_req_t *reqs[2] = {&rs, &rr};
  assert_int_equal(drive(3, reqs, 2), SC_SUCCESS);
  assert_int_equal(rs.state, SC_TP_REQ_DONE);
  assert_int_equal(rr.state, SC_TP_REQ_DONE);
  assert_memory_equal(src, dst, len);
  free(src);
  free(dst);
}

static void test_first_use(void **state) {
  (void)state;
  lazy_nodes = 1;
  setup_n(3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(T(i)->lazy, 1);
    assert_int_equal(T(i)->nready, 0);
    for (int j = 0; j < 3; j++) assert_null(T(i)->peers[j].hdr);
  }
  /* A receive alone: node 1's segment stays unmapped in node 0. */
  uint8_t buf[64], src[64];
  fill(src, sizeof(src), 7);
  sc_tp_req_t rr, rs;
  memset(&rr, 0, sizeof(rr));
  memset(&rs, 0, sizeof(rs));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, buf, sizeof(buf), &rr), SC_SUCCESS);
  int prog = 0;
  for (int k = 0; k < 100; k++) assert_int_equal(ops->progress(nodes[0].tp, 0, &prog), SC_SUCCESS);
  assert_int_equal(rr.state, SC_TP_REQ_PENDING);
  assert_null(T(0)->peers[1].hdr);
  assert_int_equal(T(0)->nready, 0);
  /* The first send connects the pair on both sides. */
  assert_int_equal(ops->isend(nodes[1].tp, 0, src, sizeof(src), &rs), SC_SUCCESS);
  sc_tp_req_t *reqs[2] = {&rs, &rr};
  assert_int_equal(drive(3, reqs, 2), SC_SUCCESS);
  assert_memory_equal(src, buf, sizeof(buf));
  assert_int_equal(T(0)->peers[1].ready, 1);
  assert_int_equal(T(1)->peers[0].ready, 1);
  assert_int_equal(T(0)->peers[1].rx.size, SC_SHM_RING_BYTES);
  /* Every path, both directions. */
  size_t lens[] = {0, 1, 4093, SC_SHM_RING_BYTES + 13, SC_SHM_SINGLE_COPY_MIN + 8191};
  for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
    transfer(0, 1, lens[k], (uint32_t)k);
    transfer(1, 0, lens[k], (uint32_t)k + 100);
  }
  /* Rank 2 was never named: nothing of it mapped, nothing of it mapped it. */
  assert_null(T(0)->peers[2].hdr);
  assert_null(T(1)->peers[2].hdr);
  assert_int_equal(T(2)->nready, 0);
  assert_int_equal(T(0)->nready, 1);
  teardown_n(3);
  lazy_nodes = 0;
}

/* Budget 256 KiB + 8 KiB per segment: the first pair into a segment gets a
 * full ring, the next only the floor; the sizes agree on both sides and a
 * message 12 times the small ring streams through it. */
static void test_budget(void **state) {
  (void)state;
  lazy_nodes = 1;
  char v[32];
  snprintf(v, sizeof(v), "%llu", (unsigned long long)(SC_SHM_RING_BYTES + (8 << 10)));
  setenv("SC_SHM_BUDGET_BYTES", v, 1);
  setup_n(3);
  transfer(1, 0, 1000, 1);
  transfer(2, 0, 1000, 2);
  assert_int_equal(T(0)->peers[1].rx.size, SC_SHM_RING_BYTES);
  assert_int_equal(T(1)->peers[0].tx.size, SC_SHM_RING_BYTES);
  assert_int_equal(T(0)->peers[2].rx.size, SC_SHM_RING_MIN);
  assert_int_equal(T(2)->peers[0].tx.size, SC_SHM_RING_MIN);
  /* The reverse channels live in the senders' segments, each its first. */
  assert_int_equal(T(2)->peers[0].rx.size, SC_SHM_RING_BYTES);
  assert_true(T(0)->hdr->ring_used <= SC_SHM_RING_BYTES + SC_SHM_RING_MIN);
  transfer(2, 0, 12 * SC_SHM_RING_MIN + 5, 3);
  transfer(0, 2, 12 * SC_SHM_RING_MIN + 5, 4);
  /* A budget of half a ring: every pair into that segment gets the largest
   * power of two within it. */
  teardown_n(3);
  snprintf(v, sizeof(v), "%llu", (unsigned long long)(SC_SHM_RING_BYTES / 2 + 100));
  setenv("SC_SHM_BUDGET_BYTES", v, 1);
  setup_n(3);
  transfer(1, 0, 10, 5);
  assert_int_equal(T(0)->peers[1].rx.size, SC_SHM_RING_BYTES / 2);
  teardown_n(3);
  unsetenv("SC_SHM_BUDGET_BYTES");
  lazy_nodes = 0;
}

/* /proc/PID/fd refused: the segment comes over the doorbell, for the
 * channels and for the board's header pages. */
static void test_ask_over_doorbell(void **state) {
  (void)state;
  lazy_nodes = 1;
  sc_shm_test_no_procfd = 1;
  setup_n(3);
  transfer(0, 2, 5000, 9);
  assert_int_equal(T(0)->peers[2].ready, 1);
  assert_int_equal(T(2)->peers[0].ready, 1);
  assert_int_equal(T(0)->nasked, 0);
  transfer(2, 0, SC_SHM_SINGLE_COPY_MIN + 1, 10);
  transfer(1, 2, 3, 11);
  /* The board: a header page asked for, then read. */
  ops->board_post(nodes[1].tp, 1, 42, "abc", 4);
  const void *data = NULL;
  uint64_t fp = 0;
  for (int k = 0; k < 100000 && !data; k++) {
    assert_int_equal(ops->board_peek(nodes[0].tp, 1, 1, sc_now_ms(), &data, &fp), SC_SUCCESS);
    int prog = 0;
    assert_int_equal(ops->progress(nodes[1].tp, 0, &prog), SC_SUCCESS);
  }
  assert_non_null(data);
  assert_int_equal(fp, 42);
  assert_string_equal((const char *)data, "abc");
  teardown_n(3);
  sc_shm_test_no_procfd = 0;
  lazy_nodes = 0;
}

/* A peer whose transport is gone before the pair connected: the post fails
 * naming it, and so does the next one. */
static void test_peer_gone_before_connect(void **state) {
  (void)state;
  lazy_nodes = 1;
  setup_n(3);
  ops->destroy(nodes[1].tp);
  nodes[1].tp = NULL;
  uint8_t b[8] = {0};
  sc_tp_req_t rs;
  memset(&rs, 0, sizeof(rs));
  assert_int_equal(ops->isend(nodes[0].tp, 1, b, sizeof(b), &rs), SC_ERR_REMOTE);
  assert_int_equal(rs.state, SC_TP_REQ_ERROR);
  assert_non_null(strstr(sc_last_error(), "rank 1"));
  memset(&rs, 0, sizeof(rs));
  assert_int_equal(ops->isend(nodes[0].tp, 1, b, sizeof(b), &rs), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "rank 1"));
  /* The other pair is untouched. */
  transfer(0, 2, 100, 12);
  teardown_n(3);
  lazy_nodes = 0;
}

/* Mixed: one rank asks for eager connection, so every rank of the host
 * connects every pair, with full rings, at connect_all. */
static void test_eager_wins(void **state) {
  (void)state;
  lazy_nodes = 1;
  eager_rank = 1;
  setup_n(3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(T(i)->lazy, 0);
    assert_int_equal(T(i)->nready, 2);
    assert_int_equal(T(i)->peers[(i + 1) % 3].rx.size, SC_SHM_RING_BYTES);
    assert_int_equal(T(i)->peers[(i + 2) % 3].tx.size, SC_SHM_RING_BYTES);
  }
  transfer(2, 1, 777, 13);
  transfer(0, 2, SC_SHM_SINGLE_COPY_MIN, 14);
  teardown_n(3);
  eager_rank = -1;
  lazy_nodes = 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_use),         cmocka_unit_test(test_budget),
      cmocka_unit_test(test_ask_over_doorbell), cmocka_unit_test(test_peer_gone_before_connect),
      cmocka_unit_test(test_eager_wins),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
