/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks of a bootstrap played by threads of one test process over loopback
 * (test_bootstrap.c, test_bootstrap_tree.c). */
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
#include <unistd.h>

#include <cmocka.h>

#include "lib/base/error.h"
#include "lib/base/socket.h"
#include "lib/control/bootstrap.h"
#include "test/unit/boot_clients.h"

sc_sockaddr_t loopback(uint16_t port) {
  sc_sockaddr_t a;
  memset(&a, 0, sizeof(a));
  struct sockaddr_in *in = (struct sockaddr_in *)&a.sa;
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.len = sizeof(*in);
  return a;
}

/* A port nobody listens on right now. */
uint16_t free_port(void) {
  sc_sockaddr_t a = loopback(0);
  int fd;
  assert_int_equal(sc_socket_listen(&a, 1, &fd), SC_SUCCESS);
  close(fd);
  return ntohs(((struct sockaddr_in *)&a.sa)->sin_port);
}

sc_sockaddr_t start_root(const uint8_t secret[SC_SECRET_LEN], int timeout_ms) {
  sc_sockaddr_t bind = loopback(0), bound;
  assert_int_equal(sc_bootstrap_root_start(&bind, secret, timeout_ms, &bound), SC_SUCCESS);
  assert_int_not_equal(ntohs(((struct sockaddr_in *)&bound.sa)->sin_port), 0);
  return bound;
}

void fill_blob(uint8_t *b, size_t len, int rank) {
  for (size_t i = 0; i < len; i++) b[i] = (uint8_t)(rank * 37 + i * 11 + 5);
}

static void *client_main(void *arg) {
  client_t *c = arg;
  if (c->delay_ms) poll(NULL, 0, c->delay_ms);
  uint8_t blob[SC_BOOT_BLOB_MAX];
  fill_blob(blob, c->bloblen, c->rank);
  c->table = calloc((size_t)c->nranks * c->bloblen + 1, 1);
  c->res = sc_bootstrap_exchange(&c->root, c->secret, c->rank, c->nranks, blob, c->bloblen,
                                 c->table, c->timeout_ms);
  snprintf(c->err, sizeof(c->err), "%s", sc_last_error());
  return NULL;
}

void client_start(client_t *c, sc_sockaddr_t root, const uint8_t *secret, int rank, int nranks,
                  int timeout_ms) {
  memset(c, 0, sizeof(*c));
  c->root = root;
  memcpy(c->secret, secret, SC_SECRET_LEN);
  c->rank = rank;
  c->nranks = nranks;
  c->timeout_ms = timeout_ms;
  c->bloblen = BLOB;
  assert_int_equal(pthread_create(&c->tid, NULL, client_main, c), 0);
}

void client_join(client_t *c) {
  pthread_join(c->tid, NULL);
}

void check_table(const client_t *c) {
  if (c->res != SC_SUCCESS) fprintf(stderr, "rank %d: %s\n", c->rank, c->err);
  assert_int_equal(c->res, SC_SUCCESS);
  uint8_t want[SC_BOOT_BLOB_MAX];
  for (int r = 0; r < c->nranks; r++) {
    fill_blob(want, c->bloblen, r);
    assert_memory_equal(c->table + (size_t)r * c->bloblen, want, c->bloblen);
  }
}

void new_secret(uint8_t s[SC_SECRET_LEN]) {
  assert_int_equal(sc_random_bytes(s, SC_SECRET_LEN), SC_SUCCESS);
}

int raw_connect(sc_sockaddr_t root) {
  int fd;
  assert_int_equal(sc_socket_connect(&root, sc_now_ms() + 2000, &fd), SC_SUCCESS);
  return fd;
}
