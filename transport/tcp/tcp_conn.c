/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: endpoint creation, the poll sets, teardown. Connections
 * are made in tcp_setup.c (when) and tcp_connect.c (connect_all). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/tcp/tcp_internal.h"

sc_result_t sc_tcp_create(const sc_tp_config_t *cfg, sc_transport_t **out, void *addr,
                          size_t *addrlen) {
  if (!cfg || !out || !addr || !addrlen)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp create: NULL argument");
  *out = NULL;
  if (cfg->nranks < 1 || cfg->nranks > SC_RANKS_MAX || cfg->rank < 0 || cfg->rank >= cfg->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp create: rank %d of %d is out of range", cfg->rank,
                  cfg->nranks);
  if (cfg->timeout_ms <= 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp create: timeout %d ms must be positive",
                  cfg->timeout_ms);
  if (cfg->nsocks < 0 || cfg->nsocks > SC_TCP_MAX_SOCKS || cfg->spin_us < 0)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "tcp create: SC_NSOCKS=%d is not in 1..%d or SC_SPIN_US=%d is negative",
                  cfg->nsocks, SC_TCP_MAX_SOCKS, cfg->spin_us);

  sc_sockaddr_t hint, *hintp = NULL;
  if (cfg->route_hint && sc_socket_addr_from_storage(cfg->route_hint, &hint) == SC_SUCCESS)
    hintp = &hint;
  sc_sockaddr_t local;
  char ifname[sizeof(cfg->ifname) + 1];
  memcpy(ifname, cfg->ifname, sizeof(cfg->ifname));
  ifname[sizeof(cfg->ifname)] = '\0';
  SC_CHECK(sc_socket_pick_addr(ifname, hintp, &local));

  sc_tcp_transport_t *tp = calloc(1, sizeof(*tp));
  if (!tp) return SC_ERR(SC_ERR_NOMEM, "tcp create: out of memory");
  tp->base.ops = &sc_tcp_transport;
  tp->base.rank = cfg->rank;
  tp->base.nranks = cfg->nranks;
  tp->nsocks = cfg->nsocks ? cfg->nsocks : 1; /* 0: a zeroed config means the minimum */
  tp->spin_us = cfg->spin_us;
  tp->lazy = cfg->connect_lazy != 0;
  pthread_mutex_init(&tp->wlock, NULL);
  memcpy(tp->secret, cfg->secret, SC_SECRET_LEN);
  tp->sockbuf = cfg->sockbuf_bytes;
  tp->timeout_ms = cfg->timeout_ms;
  tp->listen_fd = -1;
  tp->wake_fd = -1;
  tp->peers = calloc((size_t)cfg->nranks, sizeof(*tp->peers));
  sc_result_t res = SC_SUCCESS;
  if (!tp->peers) {
    res = SC_ERR(SC_ERR_NOMEM, "tcp create: out of memory for %d peers", cfg->nranks);
    goto fail;
  }
  tp->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (tp->wake_fd < 0) {
    res = SC_ERR(SC_ERR_SYSTEM, "tcp create: eventfd: %s", strerror(errno));
    goto fail;
  }
  /* Backlog: every higher rank may connect at once. */
  int backlog = cfg->nranks < 128 ? 128 : (cfg->nranks > 4096 ? 4096 : cfg->nranks);
  SC_CHECK_GOTO(sc_socket_listen(&local, backlog, &tp->listen_fd), res, fail);
  /* Accepted sockets inherit the listener's buffer sizes, and the window scale
   * is fixed at the handshake: set them before any peer knows our address. */
  SC_CHECK_GOTO(sc_socket_set_bufsize(tp->listen_fd, tp->sockbuf), res, fail);
  tp->listen_addr = local;

  uint8_t *blob = addr;
  sc_wire_put_u32(blob, SC_TCP_BLOB_MAGIC);
  SC_CHECK_GOTO(sc_socket_addr_pack(&local, blob + 4), res, fail);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  sc_wire_put_u32(blob + 4 + SC_SOCKET_ADDR_WIRE_LEN, cpus > 0 ? (uint32_t)cpus : 0);
  *addrlen = SC_TCP_BLOB_LEN;
  char a[64];
  SC_INFO(SC_SUBSYS_NET, "tcp: rank %d of %d listening on %s (%d sockets per peer)", tp->base.rank,
          tp->base.nranks, sc_socket_addr_str(&local, a, sizeof(a)), tp->nsocks);
  *out = &tp->base;
  return SC_SUCCESS;

fail:
  sc_tcp_destroy(&tp->base);
  return res;
}

sc_result_t sc_tcp_peer_init_socks(sc_tcp_transport_t *tp, int peer, int nsocks) {
  sc_tcp_peer_t *p = &tp->peers[peer];
  for (int k = 0; p->socks && k < p->nsocks; k++) {
    if (p->socks[k].fd >= 0) close(p->socks[k].fd);
    free(p->socks[k].sq.v);
    free(p->socks[k].rq.v);
  }
  free(p->socks);
  p->nsocks = 0;
  p->socks = calloc((size_t)nsocks, sizeof(*p->socks));
  if (!p->socks) {
    char name[SC_TCP_NAME_LEN];
    return SC_ERR(SC_ERR_NOMEM, "tcp: out of memory for %d sockets to %s", nsocks,
                  sc_tcp_peer_name(tp, p, name));
  }
  for (int k = 0; k < nsocks; k++) p->socks[k].fd = -1;
  p->nsocks = nsocks;
  return SC_SUCCESS;
}

sc_result_t sc_tcp_pollset_reserve(sc_tcp_transport_t *tp, size_t n) {
  if (n <= tp->npfds) return SC_SUCCESS;
  size_t cap = tp->npfds ? tp->npfds : 16;
  while (cap < n) cap *= 2;
  struct pollfd *pf = realloc(tp->pfds, cap * sizeof(*pf));
  if (pf) tp->pfds = pf;
  int *pp = realloc(tp->pfd_peer, cap * sizeof(*pp));
  if (pp) tp->pfd_peer = pp;
  int *ps = realloc(tp->pfd_sock, cap * sizeof(*ps));
  if (ps) tp->pfd_sock = ps;
  if (!pf || !pp || !ps)
    return SC_ERR(SC_ERR_NOMEM, "tcp: out of memory for a poll set of %zu descriptors", cap);
  tp->npfds = cap;
  return SC_SUCCESS;
}

sc_result_t sc_tcp_wset_rebuild(sc_tcp_transport_t *tp) {
  size_t n = 2 + tp->data_socks;
  pthread_mutex_lock(&tp->wlock);
  sc_result_t r = SC_SUCCESS;
  if (n > tp->wset_cap) {
    struct pollfd *w = realloc(tp->wset, n * sizeof(*w));
    if (!w) {
      pthread_mutex_unlock(&tp->wlock);
      return SC_ERR(SC_ERR_NOMEM, "tcp: out of memory for a poll set of %zu sockets", n);
    }
    tp->wset = w;
    tp->wset_cap = n;
  }
  size_t k = 0;
  tp->wset[k++] = (struct pollfd){.fd = tp->wake_fd, .events = POLLIN};
  if (tp->lazy) tp->wset[k++] = (struct pollfd){.fd = tp->listen_fd, .events = POLLIN};
  for (int i = 0; i < tp->base.nranks; i++) {
    const sc_tcp_peer_t *p = &tp->peers[i];
    if (!p->connected || p->dead) continue;
    for (int s = 0; s < p->nsocks && k < tp->wset_cap; s++)
      if (p->socks[s].fd >= 0)
        tp->wset[k++] = (struct pollfd){.fd = p->socks[s].fd, .events = POLLIN};
  }
  tp->nwset = k;
  tp->wgen++;
  pthread_mutex_unlock(&tp->wlock);
  return r;
}

void sc_tcp_peer_close(sc_tcp_peer_t *p) {
  for (int k = 0; p->socks && k < p->nsocks; k++) {
    if (p->socks[k].fd >= 0) close(p->socks[k].fd);
    p->socks[k].fd = -1;
  }
}

void sc_tcp_peer_release(sc_tcp_peer_t *p) {
  free(p->err);
  p->err = NULL;
}

const char *sc_tcp_peer_name(const sc_tcp_transport_t *tp, const sc_tcp_peer_t *p,
                             char buf[SC_TCP_NAME_LEN]) {
  const int rank = (int)(p - tp->peers);
  sc_sockaddr_t a;
  char s[64];
  if (p->addr[0] && sc_socket_addr_unpack(p->addr, &a) == SC_SUCCESS)
    snprintf(buf, SC_TCP_NAME_LEN, "rank %d (%s)", rank, sc_socket_addr_str(&a, s, sizeof(s)));
  else
    snprintf(buf, SC_TCP_NAME_LEN, "rank %d", rank);
  return buf;
}

void sc_tcp_peer_sockaddr(const sc_tcp_peer_t *p, sc_sockaddr_t *out) {
  if (sc_socket_addr_unpack(p->addr, out) != SC_SUCCESS) memset(out, 0, sizeof(*out));
}

void sc_tcp_destroy(sc_transport_t *base) {
  if (!base) return;
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  if (tp->connected && tp->lazy)
    SC_INFO(SC_SUBSYS_NET, "tcp: rank %d connected with %d of its %d peers", tp->base.rank,
            tp->npeers_connected, tp->base.nranks - 1);
  sc_tcp_setup_close(tp);
  /* Pending requests are the caller's memory and may be gone by now; callers
   * run cancel_all first when they still wait on something. */
  for (int i = 0; tp->peers && i < tp->base.nranks; i++) {
    sc_tcp_peer_t *p = &tp->peers[i];
    sc_tcp_peer_close(p);
    for (int k = 0; p->socks && k < p->nsocks; k++) {
      free(p->socks[k].sq.v);
      free(p->socks[k].rq.v);
    }
    free(p->socks);
    sc_tcp_peer_release(p);
  }
  if (tp->listen_fd >= 0) close(tp->listen_fd);
  if (tp->wake_fd >= 0) close(tp->wake_fd);
  memset(tp->secret, 0, sizeof(tp->secret));
  free(tp->peers);
  free(tp->pfds);
  free(tp->wset);
  free(tp->wpfds);
  pthread_mutex_destroy(&tp->wlock);
  free(tp->pfd_peer);
  free(tp->pfd_sock);
  free(tp);
}
