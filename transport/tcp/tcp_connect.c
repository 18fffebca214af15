/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: connect_all. It reads the address table (every peer's
 * listener, and from it which ranks share a host); under SC_CONNECT=eager it
 * then connects every pair and returns once all are, under lazy it returns at
 * once and progress() connects each pair on its first use (tcp_setup.c). */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/tcp/tcp_internal.h"

/* Ranks advertising one address share a host (every rank counts the same
 * from the same table). Sorting the addresses keeps this O(P log P): at
 * thousands of ranks a pairwise count would cost more than the connections. */
typedef struct addr_key {
  const uint8_t *a; /* packed */
  int rank;
} addr_key_t;

static int key_cmp(const void *x, const void *y) {
  const addr_key_t *a = x, *b = y;
  int c = sc_socket_addr_ip_cmp(a->a, b->a);
  return c ? c : (a->rank > b->rank) - (a->rank < b->rank);
}

static sc_result_t count_host_ranks(sc_tcp_transport_t *tp) {
  int n = tp->base.nranks;
  addr_key_t *k = malloc((size_t)n * sizeof(*k));
  if (!k) return SC_ERR(SC_ERR_NOMEM, "tcp connect_all: out of memory for %d addresses", n);
  for (int i = 0; i < n; i++) k[i] = (addr_key_t){.a = tp->peers[i].addr, .rank = i};
  qsort(k, (size_t)n, sizeof(*k), key_cmp);
  for (int lo = 0; lo < n;) {
    int hi = lo + 1;
    while (hi < n && sc_socket_addr_ip_cmp(k[lo].a, k[hi].a) == 0) hi++;
    for (int j = lo; j < hi; j++) tp->peers[k[j].rank].host_ranks = hi - lo;
    lo = hi;
  }
  free(k);
  return SC_SUCCESS;
}

static sc_result_t read_addrs(sc_tcp_transport_t *tp, const void *addrs, size_t stride) {
  if (stride < SC_TCP_BLOB_LEN)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: stride %zu < address blob of %d bytes",
                  stride, SC_TCP_BLOB_LEN);
  const uint8_t *tab = addrs;
  for (int i = 0; i < tp->base.nranks; i++) {
    const uint8_t *b = tab + (size_t)i * stride;
    sc_tcp_peer_t *p = &tp->peers[i];
    sc_sockaddr_t a;
    if (sc_wire_get_u32(b) != SC_TCP_BLOB_MAGIC || sc_socket_addr_unpack(b + 4, &a) != SC_SUCCESS)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "tcp connect_all: address blob of rank %d is not a tcp address", i);
    memcpy(p->addr, b + 4, SC_SOCKET_ADDR_WIRE_LEN);
    p->host_cpus = (int)sc_wire_get_u32(b + 4 + SC_SOCKET_ADDR_WIRE_LEN);
  }
  /* Catches a table in the wrong order before it sends data to the wrong rank. */
  uint8_t mine[SC_SOCKET_ADDR_WIRE_LEN];
  SC_CHECK(sc_socket_addr_pack(&tp->listen_addr, mine));
  if (memcmp(mine, tab + (size_t)tp->base.rank * stride + 4, SC_SOCKET_ADDR_WIRE_LEN) != 0)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "tcp connect_all: the table's entry for rank %d is not this endpoint's address",
                  tp->base.rank);
  return count_host_ranks(tp);
}

/* Spinning only pays when the peer that will answer has a core of its own
 * (sc_tcp_spins; measured: 8-byte all-reduce of 4 ranks on 2 CPUs took 1.9x
 * as long with a 50 us spin as with none). */
static void limit_spin(sc_tcp_transport_t *tp) {
  int local = tp->peers[tp->base.rank].host_ranks;
  long cpus = tp->peers[tp->base.rank].host_cpus;
  sc_yield_init(&tp->yield, local, (int)cpus);
  if (tp->spin_us > 0 && !sc_tcp_spins(local, cpus)) {
    SC_INFO(SC_SUBSYS_NET,
            "tcp: %d ranks on this host share %ld CPUs: waiting without spinning (SC_SPIN_US=%d "
            "ignored)",
            local, cpus, tp->spin_us);
    tp->spin_us = 0;
  }
}

/* Every higher rank connects to this one, this one to every lower rank. */
static sc_result_t connect_eager(sc_tcp_transport_t *tp) {
  int64_t deadline = sc_now_ms() + tp->timeout_ms;
  for (int i = 0; i < tp->base.rank; i++) SC_CHECK(sc_tcp_setup_begin(tp, i));
  while (tp->npeers_connected < tp->base.nranks - 1) {
    int64_t now = sc_now_ms();
    if (now >= deadline) return sc_tcp_setup_timeout_error(tp);
    int64_t wake_at = deadline;
    SC_CHECK(sc_tcp_setup_tick(tp, &wake_at));
    SC_CHECK(sc_tcp_pollset_reserve(tp, sc_tcp_setup_nfds(tp)));
    size_t n = 0;
    sc_tcp_setup_fill(tp, tp->pfds, &n);
    int rc = poll(tp->pfds, n, sc_ms_until(wake_at));
    if (rc < 0 && errno != EINTR)
      return SC_ERR(SC_ERR_SYSTEM, "tcp connect_all: poll: %s", strerror(errno));
    if (rc <= 0) continue;
    int changed = 0;
    SC_CHECK(sc_tcp_setup_handle(tp, tp->pfds, n, &changed));
  }
  return SC_SUCCESS;
}

sc_result_t sc_tcp_connect_all(sc_transport_t *base, const void *addrs, size_t stride) {
  if (!base || !addrs) return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: NULL argument");
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  if (tp->connected || tp->setup)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: already connected");
  SC_CHECK(read_addrs(tp, addrs, stride));
  limit_spin(tp);
  SC_CHECK(sc_tcp_setup_open(tp));
  if (!tp->lazy) SC_CHECK(connect_eager(tp));
  SC_CHECK(sc_tcp_pollset_reserve(tp, 2));
  tp->connected = 1;
  SC_CHECK(sc_tcp_wset_rebuild(tp));
  if (tp->lazy)
    SC_INFO(SC_SUBSYS_NET, "tcp: rank %d has the addresses of %d peers; pairs connect on first use",
            tp->base.rank, tp->base.nranks - 1);
  else
    SC_INFO(SC_SUBSYS_NET, "tcp: rank %d connected to all %d peers", tp->base.rank,
            tp->base.nranks - 1);
  return SC_SUCCESS;
}
