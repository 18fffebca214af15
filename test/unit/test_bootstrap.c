/* SPDX-License-Identifier: BSD-3-Clause */
/* Unique id and rendezvous: the root service and its clients as threads of
 * one process over loopback, including clients that misbehave. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/base/error.h"
#include "lib/base/socket.h"
#include "lib/control/bootstrap.h"
#include "lib/control/bootstrap_wire.h"
#include "perf/proc_self.h"
#include "test/unit/boot_clients.h"

/* ---- unique id ---- */

static uint32_t fnv1a(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

/* Layout as documented in bootstrap.c: checksum over the first 64 bytes at 64. */
static void reseal(sc_unique_id_t *id) {
  uint8_t *p = (uint8_t *)id->internal;
  uint32_t h = fnv1a(p, 64);
  p[64] = (uint8_t)(h >> 24);
  p[65] = (uint8_t)(h >> 16);
  p[66] = (uint8_t)(h >> 8);
  p[67] = (uint8_t)h;
}

static void test_unique_id(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN], got_secret[SC_SECRET_LEN];
  new_secret(secret);
  sc_sockaddr_t a = loopback(4711), b;
  sc_unique_id_t id;
  assert_int_equal(sc_unique_id_encode(&a, secret, &id), SC_SUCCESS);
  assert_int_equal(sc_unique_id_decode(&id, &b, got_secret), SC_SUCCESS);
  assert_int_equal(b.len, a.len);
  assert_memory_equal(&b.sa, &a.sa, a.len);
  assert_memory_equal(got_secret, secret, SC_SECRET_LEN);

  /* IPv6 too. */
  sc_sockaddr_t v6;
  assert_int_equal(sc_socket_resolve("[::1]", 5000, &v6), SC_SUCCESS);
  assert_int_equal(sc_unique_id_encode(&v6, secret, &id), SC_SUCCESS);
  assert_int_equal(sc_unique_id_decode(&id, &b, got_secret), SC_SUCCESS);
  char s[64];
  assert_string_equal(sc_socket_addr_str(&b, s, sizeof(s)), "[::1]:5000");

  assert_int_equal(sc_unique_id_encode(&a, secret, &id), SC_SUCCESS);
  sc_unique_id_t bad = id;
  bad.internal[0] ^= 1; /* magic */
  assert_int_equal(sc_unique_id_decode(&bad, &b, got_secret), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "magic"));
  bad = id;
  bad.internal[40] ^= 0x10; /* inside the secret: checksum */
  assert_int_equal(sc_unique_id_decode(&bad, &b, got_secret), SC_ERR_INVALID_ARG);
  bad = id;
  bad.internal[5] = 99; /* version */
  reseal(&bad);
  assert_int_equal(sc_unique_id_decode(&bad, &b, got_secret), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "version"));
  bad = id;
  bad.internal[8] = 9; /* address family tag */
  reseal(&bad);
  assert_int_equal(sc_unique_id_decode(&bad, &b, got_secret), SC_ERR_INVALID_ARG);
  bad = id;
  bad.internal[10] = bad.internal[11] = 0; /* port 0 */
  reseal(&bad);
  assert_int_equal(sc_unique_id_decode(&bad, &b, got_secret), SC_ERR_INVALID_ARG);
  bad = id;
  bad.internal[127] = 1; /* padding */
  assert_int_equal(sc_unique_id_decode(&bad, &b, got_secret), SC_ERR_INVALID_ARG);
  memset(&bad, 0, sizeof(bad));
  assert_int_equal(sc_unique_id_decode(&bad, &b, got_secret), SC_ERR_INVALID_ARG);

  sc_sockaddr_t zero = loopback(0);
  assert_int_equal(sc_unique_id_encode(&zero, secret, &id), SC_ERR_INVALID_ARG);
}

/* ---- rendezvous ---- */

static void rendezvous(int n) {
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  sc_sockaddr_t root = start_root(secret, 5000);
  client_t *c = calloc((size_t)n, sizeof(*c));
  assert_non_null(c);
  for (int r = 0; r < n; r++) client_start(&c[r], root, secret, n - 1 - r, n, 5000);
  for (int r = 0; r < n; r++) client_join(&c[r]);
  for (int r = 0; r < n; r++) {
    check_table(&c[r]);
    free(c[r].table);
  }
  free(c);
}

static void test_rendezvous_1(void **state) {
  (void)state;
  rendezvous(1);
}

static void test_rendezvous_2(void **state) {
  (void)state;
  rendezvous(2);
}

static void test_rendezvous_5(void **state) {
  (void)state;
  rendezvous(5);
}

/* More ranks than the root serves connections at once
 * (SC_BOOT_CONN_MAX): the rest wait in the backlog and for their answer. */
static void test_rendezvous_many(void **state) {
  (void)state;
  rendezvous(2 * SC_BOOT_CONN_MAX + 7);
}

/* More idle connections than the root serves at once: the oldest of them is
 * dropped after SC_BOOT_HELLO_MS each time one is needed, and the real ranks
 * behind them in the backlog still meet. */
static void test_idle_flood(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  sc_sockaddr_t root = start_root(secret, 8000);
  enum { NIDLE = SC_BOOT_CONN_MAX + 6 };
  int idle[NIDLE];
  for (int i = 0; i < NIDLE; i++)
    assert_int_equal(sc_socket_connect(&root, sc_now_ms() + 2000, &idle[i]), SC_SUCCESS);
  client_t c[3];
  int64_t t0 = sc_now_ms();
  for (int r = 0; r < 3; r++) client_start(&c[r], root, secret, r, 3, 8000);
  for (int r = 0; r < 3; r++) {
    client_join(&c[r]);
    check_table(&c[r]);
    free(c[r].table);
  }
  int64_t took = sc_now_ms() - t0;
  assert_true(took < 5000);
  for (int i = 0; i < NIDLE; i++) close(idle[i]);
}

/* The root's descriptors stay bounded: ranks as processes (so that the
 * descriptors this process holds are the root's alone), more of them than
 * SC_BOOT_CONN_MAX, all checking in at once. This process samples its own
 * descriptor count until every rank has its table. */
static void test_root_descriptors(void **state) {
  (void)state;
  enum { N = 3 * SC_BOOT_CONN_MAX };
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  uint16_t port = free_port();
  int base = (int)proc_count_fds(0);
  assert_true(base > 0);
  pid_t pid[N];
  for (int r = 0; r < N; r++) {
    pid[r] = fork();
    assert_true(pid[r] >= 0);
    if (pid[r] == 0) {
      uint8_t blob[BLOB];
      uint8_t *table = malloc((size_t)N * BLOB);
      fill_blob(blob, BLOB, r);
      sc_sockaddr_t root = loopback(port);
      sc_result_t res = sc_bootstrap_exchange(&root, secret, r, N, blob, BLOB, table, 20000);
      int ok = res == SC_SUCCESS;
      for (int k = 0; ok && k < N; k++) {
        fill_blob(blob, BLOB, k);
        ok = memcmp(table + (size_t)k * BLOB, blob, BLOB) == 0;
      }
      if (!ok) fprintf(stderr, "rank %d: %s\n", r, res ? sc_last_error() : "wrong table");
      _exit(ok ? 0 : 1);
    }
  }
  sc_sockaddr_t bind = loopback(port), bound;
  assert_int_equal(sc_bootstrap_root_start(&bind, secret, 20000, &bound), SC_SUCCESS);
  int peak = 0, left = N, failed = 0;
  while (left > 0) {
    int n = (int)proc_count_fds(0);
    if (n > peak) peak = n;
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      left--;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
    } else {
      poll(NULL, 0, 1);
    }
  }
  fprintf(stderr, "%d ranks: the root held at most %d descriptors (listener included)\n", N,
          peak - base);
  assert_int_equal(failed, 0);
  assert_true(peak - base <= SC_BOOT_CONN_MAX + 1);
}

/* The client's side against a root played here: a connection to the
 * client's listener with a wrong secret, and one with garbage, are dropped,
 * and the root's real answer that follows is read. */
static void test_client_drops_impostors(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN], wrong[SC_SECRET_LEN];
  new_secret(secret);
  memcpy(wrong, secret, sizeof(wrong));
  wrong[3] ^= 1;
  sc_sockaddr_t root = loopback(0);
  int lfd;
  assert_int_equal(sc_socket_listen(&root, 4, &lfd), SC_SUCCESS);
  client_t c;
  client_start(&c, root, secret, 1, 2, 5000);
  int64_t deadline = sc_now_ms() + 4000;
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  assert_int_equal(poll(&p, 1, 4000), 1);
  int fd;
  assert_int_equal(sc_socket_accept(lfd, &fd, NULL), SC_SUCCESS);
  assert_true(fd >= 0);
  uint8_t hello[SC_BOOT_HELLO_LEN], blob[BLOB];
  assert_int_equal(sc_socket_read_all(fd, hello, sizeof(hello), deadline, "client"), SC_SUCCESS);
  assert_int_equal(sc_socket_read_all(fd, blob, sizeof(blob), deadline, "client"), SC_SUCCESS);
  sc_boot_hello_t h;
  char why[128];
  assert_int_equal(sc_boot_hello_parse(hello, sizeof(hello), secret, &h, why, sizeof(why)),
                   SC_SUCCESS);
  assert_int_equal(h.rank, 1);
  uint8_t ack[SC_BOOT_REPLY_LEN] = {0x53, 0x43, 0x42, 0x52}; /* 'SCBR', status 0, len 0 */
  assert_int_equal(sc_socket_write_all(fd, ack, sizeof(ack), deadline, "client"), SC_SUCCESS);
  close(fd);
  close(lfd);
  sc_sockaddr_t listener;
  assert_int_equal(sc_socket_addr_unpack(h.addr, &listener), SC_SUCCESS);

  uint8_t head[SC_BOOT_ANSWER_LEN + SC_BOOT_REPLY_LEN];
  int bad[2];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(sc_socket_connect(&listener, deadline, &bad[i]), SC_SUCCESS);
    if (i == 0) {
      sc_boot_answer_build(head, wrong);
    } else {
      assert_int_equal(sc_random_bytes(head, sizeof(head)), SC_SUCCESS);
      head[0] = 'X';
    }
    assert_int_equal(sc_socket_write_all(bad[i], head, SC_BOOT_ANSWER_LEN, deadline, "client"),
                     SC_SUCCESS);
  }
  int good;
  assert_int_equal(sc_socket_connect(&listener, deadline, &good), SC_SUCCESS);
  /* The payload: both blobs, then both listeners' addresses (rank 1 of 2
   * has no children to pass them on to, so their bytes do not matter). */
  uint8_t table[2 * (BLOB + SC_SOCKET_ADDR_WIRE_LEN)] = {0};
  assert_int_equal(sizeof(table), sc_boot_payload_len(2, BLOB));
  fill_blob(table, BLOB, 0);
  fill_blob(table + BLOB, BLOB, 1);
  sc_boot_answer_build(head, secret);
  memcpy(head + SC_BOOT_ANSWER_LEN, ack, sizeof(ack));
  head[SC_BOOT_ANSWER_LEN + 11] = sizeof(table);
  assert_int_equal(sc_socket_write_all(good, head, sizeof(head), deadline, "client"), SC_SUCCESS);
  assert_int_equal(sc_socket_write_all(good, table, sizeof(table), deadline, "client"), SC_SUCCESS);
  client_join(&c);
  check_table(&c);
  free(c.table);
  /* The impostors' connections were closed by the client. */
  for (int i = 0; i < 2; i++) {
    char b;
    struct pollfd q = {.fd = bad[i], .events = POLLIN};
    assert_int_equal(poll(&q, 1, 2000), 1);
    assert_true(recv(bad[i], &b, 1, 0) <= 0);
    close(bad[i]);
  }
  close(good);
}

/* The client may start before the root listens: it retries until the deadline. */
static void test_root_starts_late(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  uint16_t port = free_port();
  client_t c[2];
  for (int r = 0; r < 2; r++) client_start(&c[r], loopback(port), secret, r, 2, 5000);
  poll(NULL, 0, 200);
  sc_sockaddr_t bind = loopback(port), bound;
  assert_int_equal(sc_bootstrap_root_start(&bind, secret, 5000, &bound), SC_SUCCESS);
  for (int r = 0; r < 2; r++) {
    client_join(&c[r]);
    check_table(&c[r]);
    free(c[r].table);
  }
}

/* A wrong secret, random bytes, and a connection that never says anything:
 * each is dropped and the real ranks still meet. */
static void test_bad_clients_dropped(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN], wrong[SC_SECRET_LEN];
  new_secret(secret);
  memcpy(wrong, secret, sizeof(wrong));
  wrong[7] ^= 0x40;
  sc_sockaddr_t root = start_root(secret, 5000);

  int silent = raw_connect(root);
  int noisy = raw_connect(root);
  uint8_t junk[300];
  assert_int_equal(sc_random_bytes(junk, sizeof(junk)), SC_SUCCESS);
  junk[0] = 'X'; /* never the hello magic, whatever the random bytes */
  assert_int_equal(sc_socket_write_all(noisy, junk, sizeof(junk), sc_now_ms() + 1000, "root"),
                   SC_SUCCESS);
  client_t impostor;
  client_start(&impostor, root, wrong, 1, 3, 2000);
  client_join(&impostor);
  assert_int_equal(impostor.res, SC_ERR_REMOTE);
  free(impostor.table);

  client_t c[3];
  for (int r = 0; r < 3; r++) client_start(&c[r], root, secret, r, 3, 5000);
  for (int r = 0; r < 3; r++) {
    client_join(&c[r]);
    check_table(&c[r]);
    free(c[r].table);
  }
  /* The root closed the garbage connection. */
  struct pollfd p = {.fd = noisy, .events = POLLIN};
  assert_int_equal(poll(&p, 1, 2000), 1);
  char b;
  assert_true(recv(noisy, &b, 1, 0) <= 0);
  close(noisy);
  close(silent);
}

static void test_timeout_names_missing(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  sc_sockaddr_t root = start_root(secret, 500);
  client_t c[2];
  /* Clients wait longer than the root so that the root's answer arrives first. */
  client_start(&c[0], root, secret, 0, 6, 3000);
  client_start(&c[1], root, secret, 4, 6, 3000);
  int64_t t0 = sc_now_ms();
  for (int i = 0; i < 2; i++) client_join(&c[i]);
  int64_t took = sc_now_ms() - t0;
  for (int i = 0; i < 2; i++) {
    if (c[i].res != SC_ERR_TIMEOUT) fprintf(stderr, "%s\n", c[i].err);
    assert_int_equal(c[i].res, SC_ERR_TIMEOUT);
    assert_non_null(strstr(c[i].err, "ranks 1-3,5 never checked in"));
    assert_non_null(strstr(c[i].err, "500 ms"));
    free(c[i].table);
  }
  assert_true(took < 2500);
}

/* Without a root at all the client's own timeout names the root it waited for. */
static void test_nobody_listening(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  uint16_t port = free_port();
  client_t c;
  int64_t t0 = sc_now_ms();
  client_start(&c, loopback(port), secret, 0, 2, 300);
  client_join(&c);
  int64_t took = sc_now_ms() - t0;
  assert_int_equal(c.res, SC_ERR_TIMEOUT);
  char want[64];
  snprintf(want, sizeof(want), "127.0.0.1:%u", port);
  assert_non_null(strstr(c.err, want));
  assert_true(took >= 250 && took < 2000);
  free(c.table);
}

static void test_nranks_mismatch(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  sc_sockaddr_t root = start_root(secret, 3000);
  client_t a, b, late;
  client_start(&a, root, secret, 0, 4, 3000);
  poll(NULL, 0, 100); /* let rank 0 fix nranks=4 first */
  client_start(&b, root, secret, 3, 5, 3000);
  client_join(&a);
  client_join(&b);
  for (client_t *c = &a; c; c = c == &a ? &b : NULL) {
    if (c->res != SC_ERR_INVALID_ARG) fprintf(stderr, "%s\n", c->err);
    assert_int_equal(c->res, SC_ERR_INVALID_ARG);
    assert_non_null(strstr(c->err, "rank 3 says nranks=5, rank 0 said 4"));
    free(c->table);
  }
  /* A rank that arrives after the failure hears about it too. */
  client_start(&late, root, secret, 1, 4, 3000);
  client_join(&late);
  assert_int_equal(late.res, SC_ERR_INVALID_ARG);
  assert_non_null(strstr(late.err, "nranks=5"));
  free(late.table);
}

static void test_duplicate_rank(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  sc_sockaddr_t root = start_root(secret, 3000);
  client_t a, b;
  client_start(&a, root, secret, 1, 3, 3000);
  poll(NULL, 0, 100);
  client_start(&b, root, secret, 1, 3, 3000);
  client_join(&a);
  client_join(&b);
  assert_int_equal(a.res, SC_ERR_INVALID_ARG);
  assert_int_equal(b.res, SC_ERR_INVALID_ARG);
  assert_non_null(strstr(b.err, "rank 1 checked in twice"));
  free(a.table);
  free(b.table);
}

static void test_socket_helpers(void **state) {
  (void)state;
  sc_sockaddr_t a, hint = loopback(9);
  char s[64];
  assert_int_equal(sc_socket_pick_addr("lo", NULL, &a), SC_SUCCESS);
  assert_string_equal(sc_socket_addr_str(&a, s, sizeof(s)), "127.0.0.1:0");
  assert_int_equal(sc_socket_pick_addr("", &hint, &a), SC_SUCCESS);
  assert_string_equal(sc_socket_addr_str(&a, s, sizeof(s)), "127.0.0.1:0");
  assert_int_equal(sc_socket_pick_addr(NULL, NULL, &a), SC_SUCCESS);
  assert_int_equal(sc_socket_pick_addr("no-such-if", NULL, &a), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "no-such-if"));
  assert_int_equal(sc_socket_resolve("localhost", 80, &a), SC_SUCCESS);
  assert_int_equal(sc_socket_resolve("no-such-host.invalid", 80, &a) != SC_SUCCESS, 1);
  uint8_t wire[SC_SOCKET_ADDR_WIRE_LEN];
  sc_sockaddr_t b, v4 = loopback(4711);
  assert_int_equal(sc_socket_addr_pack(&v4, wire), SC_SUCCESS);
  assert_int_equal(sc_socket_addr_unpack(wire, &b), SC_SUCCESS);
  assert_memory_equal(&b.sa, &v4.sa, v4.len);
  wire[0] = 5;
  assert_int_equal(sc_socket_addr_unpack(wire, &b), SC_ERR_INVALID_ARG);
  uint8_t x[3] = {1, 2, 3}, y[3] = {1, 2, 4};
  assert_true(sc_secret_equal(x, x, 3));
  assert_false(sc_secret_equal(x, y, 3));
}

/* The rendezvous over IPv6 loopback, where there is one. */
static void test_rendezvous_ipv6(void **state) {
  (void)state;
  sc_sockaddr_t bind, bound;
  int fd;
  if (sc_socket_resolve("::1", 0, &bind) != SC_SUCCESS ||
      sc_socket_listen(&bind, 1, &fd) != SC_SUCCESS) {
    fprintf(stderr, "no IPv6 loopback here: skipping\n");
    skip();
  }
  close(fd);
  uint8_t secret[SC_SECRET_LEN];
  new_secret(secret);
  assert_int_equal(sc_socket_resolve("::1", 0, &bind), SC_SUCCESS);
  assert_int_equal(sc_bootstrap_root_start(&bind, secret, 5000, &bound), SC_SUCCESS);
  sc_unique_id_t id;
  sc_sockaddr_t root;
  uint8_t s2[SC_SECRET_LEN];
  assert_int_equal(sc_unique_id_encode(&bound, secret, &id), SC_SUCCESS);
  assert_int_equal(sc_unique_id_decode(&id, &root, s2), SC_SUCCESS);
  client_t c[2];
  for (int r = 0; r < 2; r++) client_start(&c[r], root, s2, r, 2, 5000);
  for (int r = 0; r < 2; r++) {
    client_join(&c[r]);
    check_table(&c[r]);
    free(c[r].table);
  }
}

static void test_bad_args(void **state) {
  (void)state;
  uint8_t secret[SC_SECRET_LEN] = {0}, blob[8] = {0}, all[64];
  sc_sockaddr_t a = loopback(1);
  assert_int_equal(sc_bootstrap_exchange(&a, secret, 2, 2, blob, 8, all, 100), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_bootstrap_exchange(&a, secret, 0, 0, blob, 8, all, 100), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_bootstrap_exchange(&a, secret, 0, 1, blob, SC_BOOT_BLOB_MAX + 1, all, 100),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_bootstrap_exchange(&a, secret, 0, 1, blob, 8, all, 0), SC_ERR_INVALID_ARG);
  sc_sockaddr_t bound;
  assert_int_equal(sc_bootstrap_root_start(&a, secret, 0, &bound), SC_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unique_id),
      cmocka_unit_test(test_rendezvous_1),
      cmocka_unit_test(test_rendezvous_2),
      cmocka_unit_test(test_rendezvous_5),
      cmocka_unit_test(test_rendezvous_many),
      cmocka_unit_test(test_idle_flood),
      cmocka_unit_test(test_root_descriptors),
      cmocka_unit_test(test_client_drops_impostors),
      cmocka_unit_test(test_root_starts_late),
      cmocka_unit_test(test_bad_clients_dropped),
      cmocka_unit_test(test_timeout_names_missing),
      cmocka_unit_test(test_nobody_listening),
      cmocka_unit_test(test_nranks_mismatch),
      cmocka_unit_test(test_duplicate_rank),
      cmocka_unit_test(test_socket_helpers),
      cmocka_unit_test(test_rendezvous_ipv6),
      cmocka_unit_test(test_bad_args),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
