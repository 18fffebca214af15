/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: connection setup (connect_all).
 *
 * The higher rank of each pair opens nsocks sockets to the lower rank and
 * sends a hello on each; the lower rank authenticates every one of them by
 * the secret, learns the socket's index and the pair's socket count from it,
 * and acks. A peer counts as connected once all of its sockets are. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/tcp/tcp_internal.h"

typedef enum sc_setup_state {
  SC_SETUP_RETRY_WAIT, /* outgoing: connect again at retry_at */
  SC_SETUP_CONNECTING, /* outgoing: non-blocking connect in flight */
  SC_SETUP_SEND_HELLO,
  SC_SETUP_READ_ACK,
  SC_SETUP_READ_HELLO, /* incoming: not yet authenticated */
  SC_SETUP_SEND_ACK,
  SC_SETUP_DONE,
  SC_SETUP_CLOSED
} sc_setup_state_t;

typedef struct sc_setup_conn {
  int fd;
  sc_setup_state_t state;
  int is_out;
  int peer; /* outgoing: target; incoming: the sender of a valid hello, else -1 */
  int sock; /* socket index within the pair */
  uint8_t buf[SC_TCP_HELLO_LEN];
  size_t len, done;
  int64_t retry_at, since;
  int attempts, last_err;
  sc_sockaddr_t from; /* incoming: the remote address */
} sc_setup_conn_t;

typedef struct sc_setup {
  sc_tcp_transport_t *tp;
  sc_setup_conn_t *out; /* rank * nsocks: lower rank i's socket k at i * nsocks + k */
  size_t nout;
  sc_setup_conn_t *in;
  size_t nin, incap;
  int need_in, have_in, need_out, have_out; /* peers, not sockets */
  struct pollfd *pfds;
  sc_setup_conn_t **pconn;
  size_t pcap;
} sc_setup_t;

static int sc_setup_retryable(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EHOSTUNREACH ||
         e == EAGAIN || e == EADDRNOTAVAIL || e == ECONNABORTED;
}

static void setup_close(sc_setup_conn_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->state = SC_SETUP_CLOSED;
}

static void setup_drop_in(sc_setup_t *s, sc_setup_conn_t *c, const char *why) {
  char a[64];
  SC_WARN(SC_SUBSYS_NET, "tcp: rank %d drops a connection from %s during setup: %s",
          s->tp->base.rank, sc_socket_addr_str(&c->from, a, sizeof(a)), why);
  setup_close(c);
}

/* Outgoing connection failed before any byte was exchanged: try again later. */
static void setup_retry(sc_setup_conn_t *c, int err) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->last_err = err;
  int backoff = 5 << (c->attempts < 6 ? c->attempts : 6);
  c->retry_at = sc_now_ms() + (backoff > 200 ? 200 : backoff);
  c->state = SC_SETUP_RETRY_WAIT;
}

static void setup_established(sc_setup_t *s, sc_setup_conn_t *c) {
  sc_tcp_peer_t *p = &s->tp->peers[c->peer];
  p->socks[c->sock].fd = c->fd;
  c->fd = -1;
  c->state = SC_SETUP_DONE;
  if (++p->nconn < p->nsocks) return;
  p->connected = 1;
  if (c->peer < s->tp->base.rank)
    s->have_out++;
  else
    s->have_in++;
  SC_TRACE(SC_SUBSYS_NET, "tcp: rank %d connected with %s over %d sockets", s->tp->base.rank,
           p->name, p->nsocks);
}

static sc_result_t setup_start_connect(sc_setup_t *s, sc_setup_conn_t *c) {
  sc_tcp_peer_t *p = &s->tp->peers[c->peer];
  c->attempts++;
  int fd = socket(p->addr.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return SC_ERR(SC_ERR_SYSTEM, "tcp: socket(): %s", strerror(errno));
  sc_result_t r = sc_socket_set_bufsize(fd, s->tp->sockbuf);
  if (r == SC_SUCCESS) r = sc_socket_set_nodelay(fd);
  if (r != SC_SUCCESS) {
    close(fd);
    return r;
  }
  c->fd = fd;
  int err = connect(fd, (const struct sockaddr *)&p->addr.sa, p->addr.len) == 0 ? 0 : errno;
  if (err == 0) {
    c->state = SC_SETUP_SEND_HELLO;
  } else if (err == EINPROGRESS || err == EINTR) {
    c->state = SC_SETUP_CONNECTING;
  } else if (sc_setup_retryable(err)) {
    setup_retry(c, err);
  } else {
    setup_close(c);
    return SC_ERR(SC_ERR_SYSTEM, "tcp: rank %d connecting to %s: %s", s->tp->base.rank, p->name,
                  strerror(err));
  }
  return SC_SUCCESS;
}

/* Moves c->buf[done..len) in the direction its state says. Returns 1 when
 * complete, 0 when it would block, -1 on EOF/error (errno-like code in *err). */
static int setup_io(sc_setup_conn_t *c, int sending, int *err) {
  while (c->done < c->len) {
    ssize_t n = sending
                    ? send(c->fd, c->buf + c->done, c->len - c->done, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : recv(c->fd, c->buf + c->done, c->len - c->done, MSG_DONTWAIT);
    if (n > 0) {
      c->done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    *err = n == 0 ? 0 : errno;
    return -1;
  }
  return 1;
}

static sc_result_t setup_fail_out(sc_setup_t *s, sc_setup_conn_t *c, int err, const char *when) {
  sc_tcp_peer_t *p = &s->tp->peers[c->peer];
  setup_close(c);
  return SC_ERR(SC_ERR_REMOTE,
                "tcp: %s %s while rank %d %s on socket %d of %d (does it use the same secret and "
                "nranks=%d?)",
                p->name, err ? strerror(err) : "closed the connection", s->tp->base.rank, when,
                c->sock, p->nsocks, s->tp->base.nranks);
}

static sc_result_t setup_on_out(sc_setup_t *s, sc_setup_conn_t *c) {
  sc_tcp_transport_t *tp = s->tp;
  int err = 0;
  if (c->state == SC_SETUP_CONNECTING) {
    socklen_t el = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
    if (err == 0) {
      c->state = SC_SETUP_SEND_HELLO;
    } else if (sc_setup_retryable(err) || err == ECONNRESET) {
      setup_retry(c, err);
      return SC_SUCCESS;
    } else {
      sc_tcp_peer_t *p = &tp->peers[c->peer];
      setup_close(c);
      return SC_ERR(SC_ERR_SYSTEM, "tcp: rank %d connecting to %s: %s", tp->base.rank, p->name,
                    strerror(err));
    }
  }
  if (c->state == SC_SETUP_SEND_HELLO) {
    if (c->len == 0) {
      sc_tcp_encode_hello(c->buf, tp->secret, tp->base.rank, c->peer, tp->base.nranks, c->sock,
                          tp->nsocks);
      c->len = SC_TCP_HELLO_LEN;
      c->done = 0;
    }
    int st = setup_io(c, 1, &err);
    if (st < 0) return setup_fail_out(s, c, err, "sent its hello");
    if (st == 0) return SC_SUCCESS;
    memset(c->buf, 0, sizeof(c->buf));
    c->state = SC_SETUP_READ_ACK;
    c->len = SC_TCP_ACK_LEN;
    c->done = 0;
  }
  if (c->state == SC_SETUP_READ_ACK) {
    int st = setup_io(c, 0, &err);
    if (st < 0) return setup_fail_out(s, c, err, "waited for its ack");
    if (st == 0) return SC_SUCCESS;
    if (!sc_tcp_ack_valid(c->buf, c->peer, tp->base.rank, c->sock)) {
      uint32_t magic = sc_wire_get_u32(c->buf), from = sc_wire_get_u32(c->buf + 4),
               to = sc_wire_get_u32(c->buf + 8), sock = sc_wire_get_u32(c->buf + 12);
      sc_tcp_peer_t *p = &tp->peers[c->peer];
      setup_close(c);
      return SC_ERR(SC_ERR_REMOTE,
                    "tcp: %s answered rank %d's hello on socket %d with a malformed ack (magic "
                    "0x%08x, from %u, to %u, socket %u)",
                    p->name, tp->base.rank, c->sock, magic, from, to, sock);
    }
    setup_established(s, c);
  }
  return SC_SUCCESS;
}

const char *sc_tcp_hello_parse(const uint8_t buf[SC_TCP_HELLO_LEN],
                               const uint8_t secret[SC_SECRET_LEN], int rank, int nranks,
                               sc_tcp_hello_t *out, char *why, size_t whylen) {
  const uint8_t *h = buf;
  sc_tcp_hello_t m = {
      .magic = sc_wire_get_u32(h),
      .version = sc_wire_get_u32(h + 4),
      .from = sc_wire_get_u32(h + 8 + SC_SECRET_LEN),
      .to = sc_wire_get_u32(h + 12 + SC_SECRET_LEN),
      .nranks = sc_wire_get_u32(h + 16 + SC_SECRET_LEN),
      .sock = sc_wire_get_u32(h + 20 + SC_SECRET_LEN),
      .nsocks = sc_wire_get_u32(h + 24 + SC_SECRET_LEN),
  };
  *out = m;
  if (m.magic != SC_TCP_HELLO_MAGIC || m.version != SC_TCP_VERSION) {
    snprintf(why, whylen, "not a libsparsecoll tcp version %d hello (magic 0x%08x, version %u)",
             SC_TCP_VERSION, m.magic, m.version);
    return why;
  }
  if (!sc_secret_equal(h + 8, secret, SC_SECRET_LEN)) return "wrong secret";
  if (m.nranks != (uint32_t)nranks || m.to != (uint32_t)rank || m.from <= (uint32_t)rank ||
      m.from >= (uint32_t)nranks) {
    snprintf(why, whylen, "hello from rank %u to rank %u with nranks=%u does not fit rank %d of %d",
             m.from, m.to, m.nranks, rank, nranks);
    return why;
  }
  if (m.nsocks < 1 || m.nsocks > SC_TCP_MAX_SOCKS || m.sock >= m.nsocks) {
    snprintf(why, whylen, "hello from rank %u for socket %u of %u does not fit (1..%d sockets)",
             m.from, m.sock, m.nsocks, SC_TCP_MAX_SOCKS);
    return why;
  }
  return NULL;
}

void sc_tcp_encode_ack(uint8_t out[SC_TCP_ACK_LEN], int from, int to, int sock) {
  sc_wire_put_u32(out, SC_TCP_ACK_MAGIC);
  sc_wire_put_u32(out + 4, (uint32_t)from);
  sc_wire_put_u32(out + 8, (uint32_t)to);
  sc_wire_put_u32(out + 12, (uint32_t)sock);
}

int sc_tcp_ack_valid(const uint8_t buf[SC_TCP_ACK_LEN], int peer, int rank, int sock) {
  return sc_wire_get_u32(buf) == SC_TCP_ACK_MAGIC && sc_wire_get_u32(buf + 4) == (uint32_t)peer &&
         sc_wire_get_u32(buf + 8) == (uint32_t)rank && sc_wire_get_u32(buf + 12) == (uint32_t)sock;
}

/* A complete hello on an incoming connection: NULL when it may be acked, else
 * why it is dropped (in why). */
static const char *hello_check(sc_setup_t *s, sc_setup_conn_t *c, char *why, size_t whylen) {
  sc_tcp_transport_t *tp = s->tp;
  sc_tcp_hello_t m;
  const char *bad =
      sc_tcp_hello_parse(c->buf, tp->secret, tp->base.rank, tp->base.nranks, &m, why, whylen);
  if (bad) return bad;
  uint32_t from = m.from, sock = m.sock, nsocks = m.nsocks;
  const sc_tcp_peer_t *p = &tp->peers[from];
  /* sock < nsocks == p->nsocks: p->socks[sock] exists. */
  if (p->nsocks && nsocks != (uint32_t)p->nsocks) {
    snprintf(why, whylen,
             "hello from rank %u for socket %u of %u does not fit (it announced %d before)", from,
             sock, nsocks, p->nsocks);
    return why;
  }
  if (p->nsocks && p->socks[sock].fd >= 0) {
    snprintf(why, whylen, "socket %u of rank %u is already connected", sock, from);
    return why;
  }
  for (size_t i = 0; i < s->nin; i++)
    if (&s->in[i] != c && s->in[i].state == SC_SETUP_SEND_ACK && s->in[i].peer == (int)from &&
        s->in[i].sock == (int)sock) {
      snprintf(why, whylen, "socket %u of rank %u is already connecting", sock, from);
      return why;
    }
  c->peer = (int)from;
  c->sock = (int)sock;
  if (!p->nsocks && sc_tcp_peer_init_socks(tp, (int)from, (int)nsocks) != SC_SUCCESS)
    return "out of memory";
  return NULL;
}

static void setup_on_in(sc_setup_t *s, sc_setup_conn_t *c) {
  sc_tcp_transport_t *tp = s->tp;
  int err = 0;
  if (c->state == SC_SETUP_READ_HELLO) {
    int st = setup_io(c, 0, &err);
    if (st < 0) {
      setup_drop_in(s, c, err ? strerror(err) : "closed before its hello was complete");
      return;
    }
    if (st == 0) return;
    char buf[200];
    const char *why = hello_check(s, c, buf, sizeof(buf));
    if (why) {
      c->peer = -1;
      setup_drop_in(s, c, why);
      return;
    }
    memset(c->buf, 0, sizeof(c->buf));
    sc_tcp_encode_ack(c->buf, tp->base.rank, c->peer, c->sock);
    c->len = SC_TCP_ACK_LEN;
    c->done = 0;
    c->state = SC_SETUP_SEND_ACK;
  }
  if (c->state == SC_SETUP_SEND_ACK) {
    int st = setup_io(c, 1, &err);
    if (st < 0) {
      setup_drop_in(s, c, err ? strerror(err) : "closed before the ack");
      return;
    }
    if (st == 1) setup_established(s, c);
  }
}

static sc_result_t setup_accept(sc_setup_t *s) {
  sc_tcp_transport_t *tp = s->tp;
  /* Bounded so that a flood of idle connections cannot exhaust descriptors:
   * beyond it the oldest unauthenticated one is dropped. */
  size_t unauth_max = (size_t)tp->base.nranks * SC_TCP_MAX_SOCKS + 64;
  for (int k = 0; k < 64; k++) {
    int fd;
    sc_sockaddr_t from;
    SC_CHECK(sc_socket_accept(tp->listen_fd, &fd, &from));
    if (fd < 0) return SC_SUCCESS;
    size_t unauth = 0, oldest = SIZE_MAX, slot = SIZE_MAX;
    for (size_t i = 0; i < s->nin; i++) {
      if (s->in[i].state == SC_SETUP_READ_HELLO) {
        unauth++;
        if (oldest == SIZE_MAX || s->in[i].since < s->in[oldest].since) oldest = i;
      } else if (s->in[i].state == SC_SETUP_CLOSED || s->in[i].state == SC_SETUP_DONE) {
        slot = i;
      }
    }
    if (unauth >= unauth_max) {
      setup_drop_in(s, &s->in[oldest], "too many connections without a hello");
      slot = oldest;
    }
    if (slot == SIZE_MAX) {
      if (s->nin == s->incap) {
        size_t ncap = s->incap ? 2 * s->incap : 16;
        sc_setup_conn_t *n = realloc(s->in, ncap * sizeof(*n));
        if (!n) {
          close(fd);
          return SC_ERR(SC_ERR_NOMEM, "tcp: out of memory during connection setup");
        }
        s->in = n;
        s->incap = ncap;
      }
      slot = s->nin++;
    }
    sc_setup_conn_t *c = &s->in[slot];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->peer = -1;
    c->state = SC_SETUP_READ_HELLO;
    c->len = SC_TCP_HELLO_LEN;
    c->since = sc_now_ms();
    c->from = from;
  }
  return SC_SUCCESS;
}

static sc_result_t setup_timeout_error(sc_setup_t *s) {
  sc_tcp_transport_t *tp = s->tp;
  char list[700];
  size_t used = 0;
  int missing = 0;
  list[0] = '\0';
  for (int i = 0; i < tp->base.nranks; i++) {
    const sc_tcp_peer_t *p = &tp->peers[i];
    if (i == tp->base.rank || p->connected) continue;
    missing++;
    if (used + 140 >= sizeof(list)) continue;
    char a[64];
    sc_socket_addr_str(&p->addr, a, sizeof(a));
    const char *what = "never connected to us";
    char buf[120];
    if (p->nconn > 0) {
      snprintf(buf, sizeof(buf), "%d of %d sockets connected", p->nconn, p->nsocks);
      what = buf;
    } else if (i < tp->base.rank) {
      /* The first socket that has not finished tells the story. */
      const sc_setup_conn_t *c = &s->out[(size_t)i * (size_t)tp->nsocks];
      for (int k = 0; k < tp->nsocks; k++)
        if (s->out[(size_t)i * (size_t)tp->nsocks + (size_t)k].state != SC_SETUP_DONE) {
          c = &s->out[(size_t)i * (size_t)tp->nsocks + (size_t)k];
          break;
        }
      if (c->state == SC_SETUP_READ_ACK)
        what = "took our hello but sent no ack";
      else if (c->state == SC_SETUP_CONNECTING || c->state == SC_SETUP_SEND_HELLO)
        what = "did not complete the TCP handshake";
      else if (c->last_err) {
        snprintf(buf, sizeof(buf), "%s, %d attempts", strerror(c->last_err), c->attempts);
        what = buf;
      }
    }
    used += (size_t)snprintf(list + used, sizeof(list) - used, "%srank %d (%s: %s)",
                             missing > 1 ? ", " : "", i, a, what);
  }
  return SC_ERR(
      SC_ERR_TIMEOUT,
      "tcp: rank %d: connection setup timed out after %d ms; %d peer%s never connected: %s",
      tp->base.rank, tp->timeout_ms, missing, missing == 1 ? "" : "s", list);
}

static void setup_free(sc_setup_t *s) {
  for (size_t i = 0; s->out && i < s->nout; i++)
    if (s->out[i].fd >= 0) close(s->out[i].fd);
  for (size_t i = 0; i < s->nin; i++)
    if (s->in[i].fd >= 0) close(s->in[i].fd);
  free(s->out);
  free(s->in);
  free(s->pfds);
  free(s->pconn);
}

int sc_tcp_same_host(const sc_sockaddr_t *a, const sc_sockaddr_t *b) {
  if (a->sa.ss_family != b->sa.ss_family) return 0;
  if (a->sa.ss_family == AF_INET)
    return ((const struct sockaddr_in *)&a->sa)->sin_addr.s_addr ==
           ((const struct sockaddr_in *)&b->sa)->sin_addr.s_addr;
  if (a->sa.ss_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6 *)&a->sa)->sin6_addr,
                  &((const struct sockaddr_in6 *)&b->sa)->sin6_addr, sizeof(struct in6_addr)) == 0;
  return 0;
}

/* Ranks advertising one address share a host (every rank counts the same
 * from the same table). */
static void count_host_ranks(sc_tcp_transport_t *tp) {
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_tcp_peer_t *p = &tp->peers[i];
    p->host_ranks = 0;
    for (int j = 0; j < tp->base.nranks; j++)
      p->host_ranks += sc_tcp_same_host(&p->addr, &tp->peers[j].addr);
  }
}

static sc_result_t read_addrs(sc_tcp_transport_t *tp, const void *addrs, size_t stride) {
  if (stride < SC_TCP_BLOB_LEN)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: stride %zu < address blob of %d bytes",
                  stride, SC_TCP_BLOB_LEN);
  const uint8_t *tab = addrs;
  for (int i = 0; i < tp->base.nranks; i++) {
    const uint8_t *b = tab + (size_t)i * stride;
    sc_tcp_peer_t *p = &tp->peers[i];
    if (sc_wire_get_u32(b) != SC_TCP_BLOB_MAGIC ||
        sc_socket_addr_unpack(b + 4, &p->addr) != SC_SUCCESS)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "tcp connect_all: address blob of rank %d is not a tcp address", i);
    p->host_cpus = (int)sc_wire_get_u32(b + 4 + SC_SOCKET_ADDR_WIRE_LEN);
    char a[64];
    snprintf(p->name, sizeof(p->name), "rank %d (%s)", i,
             sc_socket_addr_str(&p->addr, a, sizeof(a)));
  }
  /* Catches a table in the wrong order before it sends data to the wrong rank. */
  uint8_t mine[SC_SOCKET_ADDR_WIRE_LEN];
  SC_CHECK(sc_socket_addr_pack(&tp->listen_addr, mine));
  if (memcmp(mine, tab + (size_t)tp->base.rank * stride + 4, SC_SOCKET_ADDR_WIRE_LEN) != 0)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "tcp connect_all: the table's entry for rank %d is not this endpoint's address",
                  tp->base.rank);
  count_host_ranks(tp);
  return SC_SUCCESS;
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

/* The poll set of one round: the listener while peers are missing, then every
 * connection that waits for something. */
static sc_result_t setup_pollset(sc_setup_t *s, size_t *count) {
  size_t need = s->nout + s->nin + 1;
  if (need > s->pcap) {
    struct pollfd *np = realloc(s->pfds, need * sizeof(*np));
    if (np) s->pfds = np;
    sc_setup_conn_t **nc = realloc(s->pconn, need * sizeof(*nc));
    if (nc) s->pconn = nc;
    if (!np || !nc) return SC_ERR(SC_ERR_NOMEM, "tcp connect_all: out of memory");
    s->pcap = need;
  }
  size_t n = 0;
  if (s->have_in < s->need_in) {
    s->pfds[n] = (struct pollfd){.fd = s->tp->listen_fd, .events = POLLIN};
    s->pconn[n++] = NULL;
  }
  for (size_t i = 0; i < s->nout; i++) {
    sc_setup_conn_t *c = &s->out[i];
    short ev = c->state == SC_SETUP_CONNECTING || c->state == SC_SETUP_SEND_HELLO ? POLLOUT
               : c->state == SC_SETUP_READ_ACK                                    ? POLLIN
                                                                                  : 0;
    if (!ev) continue;
    s->pfds[n] = (struct pollfd){.fd = c->fd, .events = ev};
    s->pconn[n++] = c;
  }
  for (size_t i = 0; i < s->nin; i++) {
    sc_setup_conn_t *c = &s->in[i];
    short ev = c->state == SC_SETUP_READ_HELLO ? POLLIN
               : c->state == SC_SETUP_SEND_ACK ? POLLOUT
                                               : 0;
    if (!ev) continue;
    s->pfds[n] = (struct pollfd){.fd = c->fd, .events = ev};
    s->pconn[n++] = c;
  }
  *count = n;
  return SC_SUCCESS;
}

sc_result_t sc_tcp_connect_all(sc_transport_t *base, const void *addrs, size_t stride) {
  if (!base || !addrs) return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: NULL argument");
  sc_tcp_transport_t *tp = sc_tcp_of(base);
  if (tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: already connected");
  SC_CHECK(read_addrs(tp, addrs, stride));

  sc_setup_t s = {.tp = tp};
  s.need_out = tp->base.rank;
  s.need_in = tp->base.nranks - 1 - tp->base.rank;
  sc_result_t res = SC_SUCCESS;
  int64_t deadline = sc_now_ms() + tp->timeout_ms;
  s.nout = (size_t)tp->base.rank * (size_t)tp->nsocks;
  s.out = calloc(s.nout + 1, sizeof(*s.out));
  if (!s.out) return SC_ERR(SC_ERR_NOMEM, "tcp connect_all: out of memory");
  for (size_t i = 0; i < s.nout; i++) s.out[i].fd = -1;
  for (int i = 0; i < tp->base.rank; i++) {
    if (!tp->peers[i].socks) SC_CHECK_GOTO(sc_tcp_peer_init_socks(tp, i, tp->nsocks), res, done);
    for (int k = 0; k < tp->nsocks; k++) {
      sc_setup_conn_t *c = &s.out[(size_t)i * (size_t)tp->nsocks + (size_t)k];
      c->is_out = 1;
      c->peer = i;
      c->sock = k;
      SC_CHECK_GOTO(setup_start_connect(&s, c), res, done);
    }
  }

  while (s.have_out < s.need_out || s.have_in < s.need_in) {
    int64_t now = sc_now_ms();
    if (now >= deadline) {
      res = setup_timeout_error(&s);
      goto done;
    }
    int64_t wake_at = deadline;
    for (size_t i = 0; i < s.nout; i++) {
      sc_setup_conn_t *c = &s.out[i];
      if (c->state != SC_SETUP_RETRY_WAIT) continue;
      if (c->retry_at <= now) SC_CHECK_GOTO(setup_start_connect(&s, c), res, done);
      if (c->state == SC_SETUP_RETRY_WAIT && c->retry_at < wake_at) wake_at = c->retry_at;
    }
    size_t n = 0;
    SC_CHECK_GOTO(setup_pollset(&s, &n), res, done);
    int rc = poll(s.pfds, n, sc_ms_until(wake_at));
    if (rc < 0 && errno != EINTR) {
      res = SC_ERR(SC_ERR_SYSTEM, "tcp connect_all: poll: %s", strerror(errno));
      goto done;
    }
    if (rc <= 0) continue;
    /* Accepting may move s.in; handle the polled connections first. */
    int listener_ready = 0;
    for (size_t k = 0; k < n; k++) {
      if (!s.pfds[k].revents) continue;
      sc_setup_conn_t *c = s.pconn[k];
      if (!c)
        listener_ready = 1;
      else if (c->is_out)
        SC_CHECK_GOTO(setup_on_out(&s, c), res, done);
      else
        setup_on_in(&s, c);
    }
    if (listener_ready) SC_CHECK_GOTO(setup_accept(&s), res, done);
  }
  SC_CHECK_GOTO(sc_tcp_alloc_pollset(tp), res, done);
  limit_spin(tp);
  tp->connected = 1;
  SC_INFO(SC_SUBSYS_NET, "tcp: rank %d connected to all %d peers", tp->base.rank,
          tp->base.nranks - 1);

done:
  setup_free(&s);
  return res;
}
