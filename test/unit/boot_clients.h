/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks of a bootstrap played by threads of one test process over loopback,
 * and the root service started in it (test_bootstrap.c,
 * test_bootstrap_tree.c). Failures are cmocka assertions. */
#ifndef SC_TEST_BOOT_CLIENTS_H
#define SC_TEST_BOOT_CLIENTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "lib/base/socket.h"

/* Every client's blob length. */
#define BLOB 24

/* One rank running sc_bootstrap_exchange on a thread of its own. */
typedef struct client {
  pthread_t tid;
  sc_sockaddr_t root;
  uint8_t secret[SC_SECRET_LEN];
  int rank, nranks, timeout_ms, delay_ms;
  size_t bloblen;
  uint8_t *table;
  sc_result_t res;
  char err[SC_ERRMSG_MAX];
} client_t;

/* 127.0.0.1:port. */
sc_sockaddr_t loopback(uint16_t port);
/* A port nobody listens on right now. */
uint16_t free_port(void);
/* A root service on an ephemeral loopback port; its address. */
sc_sockaddr_t start_root(const uint8_t secret[SC_SECRET_LEN], int timeout_ms);
/* The blob rank `rank` sends (len bytes). */
void fill_blob(uint8_t *b, size_t len, int rank);
/* Starts rank `rank` of nranks checking in with root; client_join waits for it. */
void client_start(client_t *c, sc_sockaddr_t root, const uint8_t *secret, int rank, int nranks,
                  int timeout_ms);
void client_join(client_t *c);
/* Asserts that c succeeded and holds every rank's blob. */
void check_table(const client_t *c);
void new_secret(uint8_t s[SC_SECRET_LEN]);
/* A plain connection to root. */
int raw_connect(sc_sockaddr_t root);

#endif
