/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers of the shared-memory transport unit tests: see shm_nodes.h. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/base/socket.h"
#include "test/unit/shm_nodes.h"
#include "transport/shm/shm_internal.h"

const sc_transport_ops_t *ops = &sc_shm_transport;
node_t nodes[MAXN];
uint8_t addrs[MAXN][SC_TP_ADDR_MAX];
int remote_rank = -1;
int lazy_nodes, eager_rank = -1;

/* transport/mux.c: the shm blob sits at byte 72 of the mux's address. */
#define MUX_SHM_OFF 72

/* What remote_rank reads: every other rank's shm blob of another host. */
static uint8_t remote_view[MAXN][SC_TP_ADDR_MAX];

static void *connect_thread(void *p) {
  node_t *nd = p;
  int other_host = remote_rank >= 0 && nd == &nodes[remote_rank];
  nd->res = ops->connect_all(nd->tp, other_host ? remote_view : addrs, SC_TP_ADDR_MAX);
  return NULL;
}

/* Entries of /dev/shm whose name holds this process's pid: the transport
 * must never create one (a killed job would leave it behind). */
static int shm_files_of_this_pid(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "ls /dev/shm 2>/dev/null | grep -c -- '%d'", (int)getpid());
  FILE *f = popen(cmd, "r");
  int n = 0;
  if (f) {
    if (fscanf(f, "%d", &n) != 1) n = 0;
    pclose(f);
  }
  return n;
}

void setup_n(int n) {
  uint8_t secret[SC_SECRET_LEN];
  assert_int_equal(sc_random_bytes(secret, sizeof(secret)), SC_SUCCESS);
  /* The mux's TCP side advertises the address that reaches loopback. */
  static struct sockaddr_storage loop;
  sc_sockaddr_t hint;
  assert_int_equal(sc_socket_resolve("127.0.0.1", 9, &hint), SC_SUCCESS);
  memset(&loop, 0, sizeof(loop));
  memcpy(&loop, &hint.sa, hint.len);
  for (int i = 0; i < n; i++) {
    memset(&nodes[i], 0, sizeof(nodes[i]));
    nodes[i].cfg.rank = i;
    nodes[i].cfg.nranks = n;
    memcpy(nodes[i].cfg.secret, secret, SC_SECRET_LEN);
    nodes[i].cfg.timeout_ms = 5000;
    nodes[i].cfg.spin_us = 0;
    nodes[i].cfg.connect_lazy = lazy_nodes && i != eager_rank;
    nodes[i].cfg.route_hint = &loop;
    size_t len = 0;
    assert_int_equal(ops->create(&nodes[i].cfg, &nodes[i].tp, addrs[i], &len), SC_SUCCESS);
    assert_true(len > 0 && len <= SC_TP_ADDR_MAX);
  }
  /* Same-host is an equivalence: remote_rank sees the others as remote too. */
  if (remote_rank >= 0 && ops == &sc_mux_transport) {
    memcpy(remote_view, addrs, sizeof(remote_view));
    for (int i = 0; i < n; i++)
      (i == remote_rank ? addrs
                        : remote_view)[i][MUX_SHM_OFF + offsetof(sc_shm_blob_t, boot_hash)] ^= 1;
  } else {
    remote_rank = -1;
  }
  pthread_t th[MAXN];
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, connect_thread, &nodes[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) {
    assert_int_equal(nodes[i].res, SC_SUCCESS);
    if (ops == &sc_shm_transport) assert_int_equal(sc_shm_of(nodes[i].tp)->nlocal, n - 1);
  }
  assert_int_equal(shm_files_of_this_pid(), 0);
}

void teardown_n(int n) {
  for (int i = 0; i < n; i++) {
    if (!nodes[i].tp) continue;
    ops->cancel_all(nodes[i].tp, SC_ERR_ABORTED);
    ops->destroy(nodes[i].tp);
    nodes[i].tp = NULL;
  }
}

sc_result_t drive(int n, sc_tp_req_t **reqs, int nreq) {
  for (int iter = 0; iter < 2000000; iter++) {
    int pending = 0;
    for (int k = 0; k < nreq; k++) pending += reqs[k]->state == SC_TP_REQ_PENDING;
    if (!pending) return SC_SUCCESS;
    for (int i = 0; i < n; i++) {
      if (!nodes[i].tp) continue;
      int prog = 0;
      sc_result_t r = ops->progress(nodes[i].tp, 0, &prog);
      if (r != SC_SUCCESS) return r;
    }
  }
  return SC_ERR_TIMEOUT;
}

void fill(uint8_t *p, size_t n, uint32_t salt) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131u + salt) >> 3);
}
