/* TCP transport: endpoint creation, connection setup and teardown.
 *
 * For each pair the higher rank connects to the lower rank's listener and
 * presents the job secret in a hello; the lower rank checks it and answers
 * with an ack. All connections of one rank are set up concurrently from a
 * single poll loop, so a slow peer or a stray connection that sends nothing
 * delays nobody, and everything is bounded by cfg->timeout_ms. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/error.h"
#include "lib/log.h"
#include "transport/tcp/tcp_internal.h"

void sc_tcp_encode_hello(uint8_t out[SC_TCP_HELLO_LEN], const uint8_t secret[SC_SECRET_LEN],
                         int from, int to, int nranks) {
  sc_tcp_put32(out, SC_TCP_HELLO_MAGIC);
  sc_tcp_put32(out + 4, SC_TCP_VERSION);
  memcpy(out + 8, secret, SC_SECRET_LEN);
  sc_tcp_put32(out + 8 + SC_SECRET_LEN, (uint32_t)from);
  sc_tcp_put32(out + 12 + SC_SECRET_LEN, (uint32_t)to);
  sc_tcp_put32(out + 16 + SC_SECRET_LEN, (uint32_t)nranks);
}

sc_result_t sc_tcp_create(const sc_tp_config_t *cfg, sc_transport_t **out, void *addr,
                          size_t *addrlen) {
  if (!cfg || !out || !addr || !addrlen)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp create: NULL argument");
  *out = NULL;
  if (cfg->nranks < 1 || cfg->nranks > SC_BOOT_RANKS_MAX || cfg->rank < 0 ||
      cfg->rank >= cfg->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp create: rank %d of %d is out of range", cfg->rank,
                  cfg->nranks);
  if (cfg->timeout_ms <= 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp create: timeout %d ms must be positive",
                  cfg->timeout_ms);

  sc_boot_addr_t hint, *hintp = NULL;
  if (cfg->route_hint && sc_socket_addr_from_storage(cfg->route_hint, &hint) == SC_SUCCESS)
    hintp = &hint;
  sc_boot_addr_t local;
  char ifname[sizeof(cfg->ifname) + 1];
  memcpy(ifname, cfg->ifname, sizeof(cfg->ifname));
  ifname[sizeof(cfg->ifname)] = '\0';
  SC_CHECK(sc_socket_pick_addr(ifname, hintp, &local));

  sc_transport_t *tp = calloc(1, sizeof(*tp));
  if (!tp) return SC_ERR(SC_ERR_NOMEM, "tcp create: out of memory");
  tp->rank = cfg->rank;
  tp->nranks = cfg->nranks;
  memcpy(tp->secret, cfg->secret, SC_SECRET_LEN);
  tp->sockbuf = cfg->sockbuf_bytes;
  tp->timeout_ms = cfg->timeout_ms;
  tp->listen_fd = -1;
  tp->wake_fd = -1;
  tp->peers = calloc((size_t)cfg->nranks, sizeof(*tp->peers));
  tp->pfds = calloc((size_t)cfg->nranks + 1, sizeof(*tp->pfds));
  tp->pfd_peer = calloc((size_t)cfg->nranks + 1, sizeof(*tp->pfd_peer));
  sc_result_t res = SC_SUCCESS;
  if (!tp->peers || !tp->pfds || !tp->pfd_peer) {
    res = SC_ERR(SC_ERR_NOMEM, "tcp create: out of memory for %d peers", cfg->nranks);
    goto fail;
  }
  for (int i = 0; i < cfg->nranks; i++) {
    tp->peers[i].fd = -1;
    snprintf(tp->peers[i].name, sizeof(tp->peers[i].name), "rank %d", i);
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
  sc_tcp_put32(blob, SC_TCP_BLOB_MAGIC);
  SC_CHECK_GOTO(sc_socket_addr_pack(&local, blob + 4), res, fail);
  *addrlen = SC_TCP_BLOB_LEN;
  char a[64];
  SC_INFO(SC_SUBSYS_NET, "tcp: rank %d of %d listening on %s", tp->rank, tp->nranks,
          sc_socket_addr_str(&local, a, sizeof(a)));
  *out = tp;
  return SC_SUCCESS;

fail:
  sc_tcp_destroy(tp);
  return res;
}

/* ---- connect_all ---- */

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
  int peer; /* outgoing: target; incoming: the sender of a valid hello, else -1 */
  uint8_t buf[SC_TCP_HELLO_LEN];
  size_t len, done;
  int64_t retry_at, since;
  int attempts, last_err;
  sc_boot_addr_t from; /* incoming: the remote address */
} sc_setup_conn_t;

typedef struct sc_setup {
  sc_transport_t *tp;
  sc_setup_conn_t *out; /* one per lower rank, indexed by rank */
  sc_setup_conn_t *in;
  size_t nin, incap;
  int need_in, have_in, need_out, have_out;
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
  SC_WARN(SC_SUBSYS_NET, "tcp: rank %d drops a connection from %s during setup: %s", s->tp->rank,
          sc_socket_addr_str(&c->from, a, sizeof(a)), why);
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

static void setup_established(sc_setup_t *s, sc_setup_conn_t *c, int peer) {
  sc_tcp_peer_t *p = &s->tp->peers[peer];
  p->fd = c->fd;
  c->fd = -1;
  c->state = SC_SETUP_DONE;
  if (peer < s->tp->rank)
    s->have_out++;
  else
    s->have_in++;
  SC_TRACE(SC_SUBSYS_NET, "tcp: rank %d connected with %s", s->tp->rank, p->name);
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
    return SC_ERR(SC_ERR_SYSTEM, "tcp: rank %d connecting to %s: %s", s->tp->rank, p->name,
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
                "tcp: %s %s while rank %d %s (does it use the same secret and nranks=%d?)", p->name,
                err ? strerror(err) : "closed the connection", s->tp->rank, when, s->tp->nranks);
}

static sc_result_t setup_on_out(sc_setup_t *s, sc_setup_conn_t *c) {
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
      sc_tcp_peer_t *p = &s->tp->peers[c->peer];
      setup_close(c);
      return SC_ERR(SC_ERR_SYSTEM, "tcp: rank %d connecting to %s: %s", s->tp->rank, p->name,
                    strerror(err));
    }
  }
  if (c->state == SC_SETUP_SEND_HELLO) {
    if (c->len == 0) {
      sc_tcp_encode_hello(c->buf, s->tp->secret, s->tp->rank, c->peer, s->tp->nranks);
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
    uint32_t magic = sc_tcp_get32(c->buf), from = sc_tcp_get32(c->buf + 4),
             to = sc_tcp_get32(c->buf + 8);
    if (magic != SC_TCP_ACK_MAGIC || from != (uint32_t)c->peer || to != (uint32_t)s->tp->rank) {
      sc_tcp_peer_t *p = &s->tp->peers[c->peer];
      setup_close(c);
      return SC_ERR(SC_ERR_REMOTE,
                    "tcp: %s answered rank %d's hello with a malformed ack (magic 0x%08x, from "
                    "%u, to %u)",
                    p->name, s->tp->rank, magic, from, to);
    }
    setup_established(s, c, c->peer);
  }
  return SC_SUCCESS;
}

static void setup_on_in(sc_setup_t *s, sc_setup_conn_t *c) {
  sc_transport_t *tp = s->tp;
  int err = 0;
  if (c->state == SC_SETUP_READ_HELLO) {
    int st = setup_io(c, 0, &err);
    if (st < 0) {
      setup_drop_in(s, c, err ? strerror(err) : "closed before its hello was complete");
      return;
    }
    if (st == 0) return;
    const uint8_t *h = c->buf;
    uint32_t magic = sc_tcp_get32(h), ver = sc_tcp_get32(h + 4);
    uint32_t from = sc_tcp_get32(h + 8 + SC_SECRET_LEN), to = sc_tcp_get32(h + 12 + SC_SECRET_LEN);
    uint32_t nranks = sc_tcp_get32(h + 16 + SC_SECRET_LEN);
    char why[160];
    if (magic != SC_TCP_HELLO_MAGIC || ver != SC_TCP_VERSION) {
      snprintf(why, sizeof(why), "not a libsparsecoll tcp hello (magic 0x%08x, version %u)", magic,
               ver);
      setup_drop_in(s, c, why);
      return;
    }
    if (!sc_secret_equal(h + 8, tp->secret, SC_SECRET_LEN)) {
      setup_drop_in(s, c, "wrong secret");
      return;
    }
    if (nranks != (uint32_t)tp->nranks || to != (uint32_t)tp->rank || from <= (uint32_t)tp->rank ||
        from >= (uint32_t)tp->nranks) {
      snprintf(why, sizeof(why),
               "hello from rank %u to rank %u with nranks=%u does not fit rank %d of %d", from, to,
               nranks, tp->rank, tp->nranks);
      setup_drop_in(s, c, why);
      return;
    }
    if (tp->peers[from].fd >= 0) {
      snprintf(why, sizeof(why), "rank %u is already connected", from);
      setup_drop_in(s, c, why);
      return;
    }
    for (size_t i = 0; i < s->nin; i++)
      if (&s->in[i] != c && s->in[i].state == SC_SETUP_SEND_ACK && s->in[i].peer == (int)from) {
        snprintf(why, sizeof(why), "rank %u is already connecting", from);
        setup_drop_in(s, c, why);
        return;
      }
    c->peer = (int)from;
    memset(c->buf, 0, sizeof(c->buf));
    sc_tcp_put32(c->buf, SC_TCP_ACK_MAGIC);
    sc_tcp_put32(c->buf + 4, (uint32_t)tp->rank);
    sc_tcp_put32(c->buf + 8, from);
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
    if (st == 1) setup_established(s, c, c->peer);
  }
}

static sc_result_t setup_accept(sc_setup_t *s) {
  sc_transport_t *tp = s->tp;
  /* Bounded so that a flood of idle connections cannot exhaust descriptors:
   * beyond it the oldest unauthenticated one is dropped. */
  size_t unauth_max = (size_t)tp->nranks + 64;
  for (int k = 0; k < 64; k++) {
    int fd;
    sc_boot_addr_t from;
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
  sc_transport_t *tp = s->tp;
  char list[700];
  size_t used = 0;
  int missing = 0;
  list[0] = '\0';
  for (int i = 0; i < tp->nranks; i++) {
    if (i == tp->rank || tp->peers[i].fd >= 0) continue;
    missing++;
    if (used + 120 >= sizeof(list)) continue;
    char a[64];
    sc_socket_addr_str(&tp->peers[i].addr, a, sizeof(a));
    const char *what = "never connected to us";
    char buf[96];
    if (i < tp->rank) {
      const sc_setup_conn_t *c = &s->out[i];
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
      tp->rank, tp->timeout_ms, missing, missing == 1 ? "" : "s", list);
}

static void setup_free(sc_setup_t *s) {
  for (int i = 0; s->out && i < s->tp->rank; i++)
    if (s->out[i].fd >= 0) close(s->out[i].fd);
  for (size_t i = 0; i < s->nin; i++)
    if (s->in[i].fd >= 0) close(s->in[i].fd);
  free(s->out);
  free(s->in);
  free(s->pfds);
  free(s->pconn);
}

sc_result_t sc_tcp_connect_all(sc_transport_t *tp, const void *addrs, size_t stride) {
  if (!tp || !addrs) return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: NULL argument");
  if (tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: already connected");
  if (stride < SC_TCP_BLOB_LEN)
    return SC_ERR(SC_ERR_INVALID_ARG, "tcp connect_all: stride %zu < address blob of %d bytes",
                  stride, SC_TCP_BLOB_LEN);
  const uint8_t *tab = addrs;
  for (int i = 0; i < tp->nranks; i++) {
    const uint8_t *b = tab + (size_t)i * stride;
    sc_tcp_peer_t *p = &tp->peers[i];
    if (sc_tcp_get32(b) != SC_TCP_BLOB_MAGIC ||
        sc_socket_addr_unpack(b + 4, &p->addr) != SC_SUCCESS)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "tcp connect_all: address blob of rank %d is not a tcp address", i);
    char a[64];
    snprintf(p->name, sizeof(p->name), "rank %d (%s)", i,
             sc_socket_addr_str(&p->addr, a, sizeof(a)));
  }
  /* Catches a table in the wrong order before it sends data to the wrong rank. */
  uint8_t mine[SC_SOCKET_ADDR_WIRE_LEN];
  SC_CHECK(sc_socket_addr_pack(&tp->listen_addr, mine));
  if (memcmp(mine, tab + (size_t)tp->rank * stride + 4, SC_SOCKET_ADDR_WIRE_LEN) != 0)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "tcp connect_all: the table's entry for rank %d is not this endpoint's address",
                  tp->rank);

  sc_setup_t s = {.tp = tp};
  s.need_out = tp->rank;
  s.need_in = tp->nranks - 1 - tp->rank;
  sc_result_t res = SC_SUCCESS;
  int64_t deadline = sc_now_ms() + tp->timeout_ms;
  s.out = calloc((size_t)tp->rank + 1, sizeof(*s.out));
  if (!s.out) return SC_ERR(SC_ERR_NOMEM, "tcp connect_all: out of memory");
  for (int i = 0; i < tp->rank; i++) {
    s.out[i].fd = -1;
    s.out[i].peer = i;
    SC_CHECK_GOTO(setup_start_connect(&s, &s.out[i]), res, done);
  }

  while (s.have_out < s.need_out || s.have_in < s.need_in) {
    int64_t now = sc_now_ms();
    if (now >= deadline) {
      res = setup_timeout_error(&s);
      goto done;
    }
    int64_t wake_at = deadline;
    for (int i = 0; i < tp->rank; i++) {
      sc_setup_conn_t *c = &s.out[i];
      if (c->state != SC_SETUP_RETRY_WAIT) continue;
      if (c->retry_at <= now) SC_CHECK_GOTO(setup_start_connect(&s, c), res, done);
      if (c->state == SC_SETUP_RETRY_WAIT && c->retry_at < wake_at) wake_at = c->retry_at;
    }
    size_t need = (size_t)tp->rank + s.nin + 1;
    if (need > s.pcap) {
      struct pollfd *np = realloc(s.pfds, need * sizeof(*np));
      if (np) s.pfds = np;
      sc_setup_conn_t **nc = realloc(s.pconn, need * sizeof(*nc));
      if (nc) s.pconn = nc;
      if (!np || !nc) {
        res = SC_ERR(SC_ERR_NOMEM, "tcp connect_all: out of memory");
        goto done;
      }
      s.pcap = need;
    }
    size_t n = 0;
    if (s.have_in < s.need_in) {
      s.pfds[n] = (struct pollfd){.fd = tp->listen_fd, .events = POLLIN};
      s.pconn[n++] = NULL;
    }
    for (int i = 0; i < tp->rank; i++) {
      sc_setup_conn_t *c = &s.out[i];
      short ev = c->state == SC_SETUP_CONNECTING || c->state == SC_SETUP_SEND_HELLO ? POLLOUT
                 : c->state == SC_SETUP_READ_ACK                                    ? POLLIN
                                                                                    : 0;
      if (!ev) continue;
      s.pfds[n] = (struct pollfd){.fd = c->fd, .events = ev};
      s.pconn[n++] = c;
    }
    for (size_t i = 0; i < s.nin; i++) {
      sc_setup_conn_t *c = &s.in[i];
      short ev = c->state == SC_SETUP_READ_HELLO ? POLLIN
                 : c->state == SC_SETUP_SEND_ACK ? POLLOUT
                                                 : 0;
      if (!ev) continue;
      s.pfds[n] = (struct pollfd){.fd = c->fd, .events = ev};
      s.pconn[n++] = c;
    }
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
      if (!c) {
        listener_ready = 1;
      } else if (c->peer >= 0 && c->peer < tp->rank && c == &s.out[c->peer]) {
        SC_CHECK_GOTO(setup_on_out(&s, c), res, done);
      } else {
        setup_on_in(&s, c);
      }
    }
    if (listener_ready) SC_CHECK_GOTO(setup_accept(&s), res, done);
  }
  tp->connected = 1;
  SC_INFO(SC_SUBSYS_NET, "tcp: rank %d connected to all %d peers", tp->rank, tp->nranks - 1);

done:
  setup_free(&s);
  return res;
}

void sc_tcp_destroy(sc_transport_t *tp) {
  if (!tp) return;
  /* Pending requests are the caller's memory and may be gone by now; callers
   * run cancel_all first when they still wait on something. */
  for (int i = 0; tp->peers && i < tp->nranks; i++)
    if (tp->peers[i].fd >= 0) close(tp->peers[i].fd);
  if (tp->listen_fd >= 0) close(tp->listen_fd);
  if (tp->wake_fd >= 0) close(tp->wake_fd);
  memset(tp->secret, 0, sizeof(tp->secret));
  free(tp->peers);
  free(tp->pfds);
  free(tp->pfd_peer);
  free(tp);
}
