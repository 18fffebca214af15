/* SPDX-License-Identifier: BSD-3-Clause */
/* The bootstrap's answer tree: its shape, and the table reaching every live
 * rank when ranks are gone or stopped after checking in (the root service and
 * its clients as threads of one process over loopback). */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/base/error.h"
#include "lib/base/socket.h"
#include "lib/control/bootstrap.h"
#include "lib/control/bootstrap_wire.h"
#include "test/unit/boot_clients.h"

/* The answer's tree, against properties that do not come from the code under
 * test: every rank is reached once from the root, its parent lists it as a
 * child, and node v (rank v - 1) lies popcount(v) hops below the root (the
 * binomial tree's depth), so no rank is more than ceil(log2(nranks + 1))
 * hops away and the root has floor(log2(nranks)) + 1 children. */
static void check_tree(int nranks) {
  int *seen = calloc((size_t)nranks, sizeof(int));
  int *queue = malloc(((size_t)nranks + 1) * sizeof(int));
  int *depth = calloc((size_t)nranks + 1, sizeof(int));
  assert_true(seen && queue && depth);
  int head = 0, tail = 0, kids[SC_BOOT_TREE_MAX];
  queue[tail++] = -1;
  int max_depth = 0, height = 0;
  while ((1L << height) < (long)nranks + 1) height++;
  while (head < tail) {
    int v = queue[head++];
    int n = sc_boot_tree_children(v, nranks, kids);
    if (v == -1) {
      int want = 0;
      while ((1L << want) <= nranks) want++;
      assert_int_equal(n, want);
    }
    for (int i = 0; i < n; i++) {
      int k = kids[i];
      assert_true(k >= 0 && k < nranks);
      assert_int_equal(seen[k], 0);
      seen[k] = 1;
      assert_int_equal(sc_boot_tree_parent(k), v);
      depth[k + 1] = depth[v + 1] + 1;
      assert_int_equal(depth[k + 1], __builtin_popcount((unsigned)k + 1));
      if (depth[k + 1] > max_depth) max_depth = depth[k + 1];
      queue[tail++] = k;
    }
  }
  assert_int_equal(tail, nranks + 1);
  assert_true(max_depth <= height);
  /* Out of range: no children. */
  assert_int_equal(sc_boot_tree_children(nranks, nranks, kids), 0);
  assert_int_equal(sc_boot_tree_children(-2, nranks, kids), 0);
  free(seen);
  free(queue);
  free(depth);
}

static void test_tree_shape(void **state) {
  (void)state;
  for (int n = 1; n <= 1100; n++) check_tree(n);
  int big[] = {2047, 2048, 4095, 4096, 16384, SC_RANKS_MAX - 1, SC_RANKS_MAX};
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) check_tree(big[i]);
  int kids[SC_BOOT_TREE_MAX];
  assert_int_equal(sc_boot_tree_children(0, SC_RANKS_MAX + 1, kids), 0);
  assert_int_equal(sc_boot_tree_children(0, 0, kids), 0);
}

/* A rank that checks in through a raw hello, listening at *lfd for its answer
 * (the caller closes it to play a rank that died after checking in, or
 * leaves it open and never accepts to play one that is stopped). */
static void fake_check_in(sc_sockaddr_t root, const uint8_t secret[SC_SECRET_LEN], int rank,
                          int nranks, int *lfd) {
  sc_sockaddr_t me = loopback(0);
  assert_int_equal(sc_socket_listen(&me, 4, lfd), SC_SUCCESS);
  uint8_t packed[SC_SOCKET_ADDR_WIRE_LEN], msg[SC_BOOT_HELLO_LEN + BLOB];
  assert_int_equal(sc_socket_addr_pack(&me, packed), SC_SUCCESS);
  sc_boot_hello_build(msg, secret, (uint32_t)rank, (uint32_t)nranks, BLOB, packed);
  fill_blob(msg + SC_BOOT_HELLO_LEN, BLOB, rank);
  int fd = raw_connect(root);
  int64_t deadline = sc_now_ms() + 3000;
  assert_int_equal(sc_socket_write_all(fd, msg, sizeof(msg), deadline, "root"), SC_SUCCESS);
  uint8_t ack[SC_BOOT_REPLY_LEN];
  assert_int_equal(sc_socket_read_all(fd, ack, sizeof(ack), deadline, "root"), SC_SUCCESS);
  sc_boot_reply_t rep;
  char why[128];
  assert_int_equal(sc_boot_reply_parse(ack, sizeof(ack), 0, &rep, why, sizeof(why)), SC_SUCCESS);
  assert_int_equal(rep.status, SC_SUCCESS);
  close(fd);
}

/* Closes listener lfd and keeps its port bound, not listening: a connection
 * to it is refused, as to a rank that is gone, and no listener opened later
 * in this process (the clients' own) can be given the port. Had one been, the
 * table passed to the gone rank would reach that client instead, and the gone
 * rank's children would wait for it until their timeout. */
static int hold_port(int lfd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  assert_int_equal(getsockname(lfd, (struct sockaddr *)&ss, &len), 0);
  close(lfd);
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&ss, len), 0);
  return fd;
}

/* Ranks gone after checking in: rank 1 (a child of the root) and rank 5 (a
 * child of rank 3) in a job of 8. The root answers rank 1's child (rank 2)
 * in its place and rank 3 passes the table to rank 5's child (rank 6):
 * every live rank gets the whole table, the gone ranks' blobs included. */
static void test_tree_adopts_gone_ranks(void **state) {
  (void)state;
  enum { N = 8 };
  int kids[SC_BOOT_TREE_MAX];
  assert_int_equal(sc_boot_tree_children(1, N, kids), 1);
  assert_int_equal(kids[0], 2);
  assert_int_equal(sc_boot_tree_children(5, N, kids), 1);
  assert_int_equal(kids[0], 6);
  assert_int_equal(sc_boot_tree_parent(5), 3);
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  sc_sockaddr_t root = start_root(secret, 8000);
  /* The gone ranks check in and close their listeners before the others
   * start, so that the job cannot complete while they still listen. */
  int gone[2];
  fake_check_in(root, secret, 1, N, &gone[0]);
  fake_check_in(root, secret, 5, N, &gone[1]);
  gone[0] = hold_port(gone[0]);
  gone[1] = hold_port(gone[1]);
  client_t c[N];
  for (int r = 0; r < N; r++)
    if (r != 1 && r != 5) client_start(&c[r], root, secret, r, N, 8000);
  for (int r = 0; r < N; r++) {
    if (r == 1 || r == 5) continue;
    client_join(&c[r]);
    check_table(&c[r]);
    free(c[r].table);
  }
  close(gone[0]);
  close(gone[1]);
}

/* A rank that checked in and then stopped (its listener takes the connection
 * but it never reads): the rank below it times out, naming it as the rank the
 * table comes through; the others get the table. */
static void test_tree_stopped_rank_named(void **state) {
  (void)state;
  enum { N = 4 };
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  sc_sockaddr_t root = start_root(secret, 8000);
  client_t c[N];
  for (int r = 0; r < N; r++)
    if (r != 1) client_start(&c[r], root, secret, r, N, 1500);
  int stopped;
  fake_check_in(root, secret, 1, N, &stopped);
  for (int r = 0; r < N; r++) {
    if (r == 1) continue;
    client_join(&c[r]);
    if (r == 2) {
      if (c[r].res != SC_ERR_TIMEOUT) fprintf(stderr, "rank 2: %s\n", c[r].err);
      assert_int_equal(c[r].res, SC_ERR_TIMEOUT);
      assert_non_null(strstr(c[r].err, "through rank 1"));
    } else {
      check_table(&c[r]);
    }
    free(c[r].table);
  }
  close(stopped);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tree_shape),
      cmocka_unit_test(test_tree_adopts_gone_ranks),
      cmocka_unit_test(test_tree_stopped_rank_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
