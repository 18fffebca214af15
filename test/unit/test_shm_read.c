/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared memory's read of a peer's memory (transport.h's rget, by which the
 * point-to-point lane's receiver takes a sender's offered buffer) and its
 * withdraw: the bytes arrive exactly; an address the peer does not have, or
 * reads the peer's rules refuse, is SC_ERR_UNSUPPORTED with the pair
 * intact (the lane then asks for the data); after the owner withdraws, a
 * read fails with SC_ERR_REMOTE naming the close, and the owner's side of
 * the pair is closed too; peer_reads tells the owner whether its peer can
 * read it; under the mux a peer on another host (TCP) has no read. Ranks are threads of this
 * process (test/unit/shm_nodes.c), so a read is of this process's memory by its own pid. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/base/error.h"
#include "sparsecoll.h"
#include "test/unit/shm_nodes.h"
#include "transport/shm/shm_internal.h"
#include "transport/transport.h"

static uint64_t addr_of(const void *p) {
  return (uint64_t)(uintptr_t)p;
}

/* from -> to, 16 bytes, n ranks driven: the pair still carries messages. */
static void small_message(int n, int from, int to) {
  uint8_t s[16], r[16];
  fill(s, sizeof(s), 99);
  memset(r, 0, sizeof(r));
  sc_tp_req_t rs, rr;
  memset(&rs, 0, sizeof(rs));
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[to].tp, from, r, sizeof(r), &rr), SC_SUCCESS);
  assert_int_equal(ops->isend(nodes[from].tp, to, s, sizeof(s), &rs), SC_SUCCESS);
  sc_tp_req_t *reqs[2] = {&rs, &rr};
  assert_int_equal(drive(n, reqs, 2), SC_SUCCESS);
  assert_memory_equal(r, s, sizeof(s));
}

static void test_read(void **state) {
  (void)state;
  setup_n(2);
  assert_non_null(ops->rget);
  const size_t len = ((size_t)3 << 20) + 5;
  uint8_t *src = malloc(len), *dst = malloc(len);
  assert_non_null(src);
  assert_non_null(dst);
  fill(src, len, 7);
  memset(dst, 0xee, len);
  assert_int_equal(ops->rget(nodes[1].tp, 0, dst, addr_of(src), len), SC_SUCCESS);
  assert_memory_equal(dst, src, len);
  /* Part of a buffer, from inside it. */
  memset(dst, 0xee, len);
  assert_int_equal(ops->rget(nodes[0].tp, 1, dst, addr_of(src + 1001), 4096), SC_SUCCESS);
  assert_memory_equal(dst, src + 1001, 4096);
  assert_int_equal(dst[4096], 0xee);
  /* An address the peer does not have: nothing failed, no text. */
  sc_error_set_detail("");
  assert_int_equal(ops->rget(nodes[1].tp, 0, dst, 8, 64), SC_ERR_UNSUPPORTED);
  assert_string_equal(sc_last_error(), "");
  small_message(2, 0, 1);
  small_message(2, 1, 0);
  /* Reads refused, as the connect's probe records it: the owner knows too,
   * and offers nothing. */
  assert_int_equal(ops->peer_reads(nodes[0].tp, 1), 1);
  sc_shm_of(nodes[1].tp)->peers[0].rx.ctl->cma_ok = 2;
  assert_int_equal(ops->rget(nodes[1].tp, 0, dst, addr_of(src), 64), SC_ERR_UNSUPPORTED);
  assert_int_equal(ops->peer_reads(nodes[0].tp, 1), 0);
  sc_shm_of(nodes[1].tp)->peers[0].rx.ctl->cma_ok = 1;
  assert_int_equal(ops->peer_reads(nodes[0].tp, 1), 1);
  assert_int_equal(ops->peer_reads(nodes[0].tp, 0), 0);
  /* Itself and a rank out of range are the caller's mistakes. */
  assert_int_equal(ops->rget(nodes[1].tp, 1, dst, addr_of(src), 64), SC_ERR_INVALID_ARG);
  assert_int_equal(ops->rget(nodes[1].tp, 2, dst, addr_of(src), 64), SC_ERR_INVALID_ARG);
  free(src);
  free(dst);
  teardown_n(2);
}

static void test_withdraw(void **state) {
  (void)state;
  setup_n(2);
  uint8_t src[256], dst[256];
  fill(src, sizeof(src), 3);
  ops->withdraw(nodes[0].tp, 1);
  assert_int_equal(ops->peer_reads(nodes[0].tp, 1), 0);
  /* The reader sees the close, also where the bytes themselves were there. */
  assert_int_equal(ops->rget(nodes[1].tp, 0, dst, addr_of(src), sizeof(src)), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "rank 0 ("));
  assert_non_null(strstr(sc_last_error(), "closed its end"));
  /* The owner's side is closed as well, saying why. */
  sc_tp_req_t rr;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, dst, sizeof(dst), &rr), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "offered for reading failed"));
  teardown_n(2);
}

/* Under the mux: rank 2 looks like another host's (TCP), which has no read;
 * withdrawing it leaves its pair alone. */
static void test_mux(void **state) {
  (void)state;
  ops = &sc_mux_transport;
  remote_rank = 2;
  setup_n(3);
  uint8_t src[512], dst[512];
  fill(src, sizeof(src), 5);
  assert_int_equal(ops->rget(nodes[1].tp, 0, dst, addr_of(src), sizeof(src)), SC_SUCCESS);
  assert_memory_equal(dst, src, sizeof(src));
  assert_int_equal(ops->rget(nodes[2].tp, 0, dst, addr_of(src), sizeof(src)), SC_ERR_UNSUPPORTED);
  assert_int_equal(ops->peer_reads(nodes[0].tp, 1), 1);
  assert_int_equal(ops->peer_reads(nodes[0].tp, 2), 0);
  ops->withdraw(nodes[0].tp, 2);
  small_message(3, 0, 2);
  teardown_n(3);
  ops = &sc_shm_transport;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_read),
      cmocka_unit_test(test_withdraw),
      cmocka_unit_test(test_mux),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
