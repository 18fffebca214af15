/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: making connections, for connect_all (eager) and for
 * progress() (lazy).
 *
 * The rank that connects a pair opens its nsocks sockets to the other's
 * listener and sends a hello on each; the other authenticates every one by
 * the secret, learns the socket's index and the pair's count from it, and
 * answers with an ack. A peer counts as connected once all of its sockets
 * are.
 *
 * Who connects: under eager, every higher rank to every lower rank. Under
 * lazy, a rank that sends to a peer it has no connection with, at once (a
 * receive waits: every message has a sender, and a small send completes
 * before its receive is posted, as over an eager connection). When both
 * connect at once the higher rank's connection wins: the higher rank refuses a hello while it
 * connects itself, and the lower rank, at the first hello of the higher one, abandons its own
 * sockets. Neither side moves data before its acks, so nothing sent is lost;
 * a higher rank that acked a hello of the lower one never connects itself,
 * so the two rules cannot both keep a connection.
 *
 * Every connection of one rank is driven from one poll loop, so a slow peer
 * or a stray connection that sends nothing delays nobody; every pair has a
 * deadline (cfg->timeout_ms from its start). */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/tcp/tcp_setup_internal.h"

static int sc_setup_retryable(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ENETUNREACH || e == EHOSTUNREACH ||
         e == EAGAIN || e == EADDRNOTAVAIL || e == ECONNABORTED;
}

static void setup_close(sc_setup_conn_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->state = SC_SETUP_FREE;
}

/* A connection dropped before it carried anything. Under lazy setup a rank
 * that abandons its sockets for the peer's leaves such connections behind:
 * not worth a warning. */
static void setup_drop_in(sc_tcp_transport_t *tp, sc_setup_conn_t *c, const char *why, int benign) {
  char a[64];
  if (benign && tp->lazy)
    SC_INFO(SC_SUBSYS_NET, "tcp: rank %d drops a connection from %s during setup: %s",
            tp->base.rank, sc_socket_addr_str(&c->from, a, sizeof(a)), why);
  else
    SC_WARN(SC_SUBSYS_NET, "tcp: rank %d drops a connection from %s during setup: %s",
            tp->base.rank, sc_socket_addr_str(&c->from, a, sizeof(a)), why);
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

/* A cleared slot (fd -1, state FREE): a reused one keeps nothing of its
 * last connection. */
static sc_result_t conn_alloc(sc_tcp_setup_t *st, size_t *slot) {
  for (size_t i = 0; i < st->n; i++)
    if (st->c[i].state == SC_SETUP_FREE) {
      *slot = i;
      memset(&st->c[i], 0, sizeof(st->c[i]));
      st->c[i].fd = -1;
      return SC_SUCCESS;
    }
  if (st->n == st->cap) {
    size_t ncap = st->cap ? 2 * st->cap : 16;
    sc_setup_conn_t *nc = realloc(st->c, ncap * sizeof(*nc));
    if (!nc) return SC_ERR(SC_ERR_NOMEM, "tcp: out of memory during connection setup");
    st->c = nc;
    st->cap = ncap;
  }
  *slot = st->n++;
  memset(&st->c[*slot], 0, sizeof(st->c[*slot]));
  st->c[*slot].fd = -1;
  return SC_SUCCESS;
}

static void waiting_add(sc_tcp_transport_t *tp, int peer) {
  sc_tcp_setup_t *st = tp->setup;
  for (size_t i = 0; i < st->nwaiting; i++)
    if (st->waiting[i] == peer) return;
  /* Room for every peer was reserved at open. */
  st->waiting[st->nwaiting++] = peer;
}

static void waiting_remove(sc_tcp_setup_t *st, int peer) {
  for (size_t i = 0; i < st->nwaiting; i++)
    if (st->waiting[i] == peer) {
      st->waiting[i] = st->waiting[--st->nwaiting];
      return;
    }
}

/* Closes every connection in setup with peer (all, or only ours). */
static void close_peer_conns(sc_tcp_setup_t *st, int peer, int only_out) {
  for (size_t i = 0; i < st->n; i++) {
    sc_setup_conn_t *c = &st->c[i];
    if (c->state != SC_SETUP_FREE && c->peer == peer && (!only_out || c->is_out)) setup_close(c);
  }
}

/* The pair cannot be made: the peer fails, its setup stops. */
static sc_result_t peer_fails(sc_tcp_transport_t *tp, int peer, sc_result_t code,
                              const char *text) {
  close_peer_conns(tp->setup, peer, 0);
  waiting_remove(tp->setup, peer);
  return sc_tcp_peer_setup_failed(tp, peer, code, "%s", text);
}

static sc_result_t setup_established(sc_tcp_transport_t *tp, sc_setup_conn_t *c, int *changed) {
  sc_tcp_peer_t *p = &tp->peers[c->peer];
  int peer = c->peer;
  p->socks[c->sock].fd = c->fd;
  c->fd = -1;
  c->state = SC_SETUP_FREE;
  if (++p->nconn < p->nsocks) return SC_SUCCESS;
  p->connected = 1;
  tp->npeers_connected++;
  waiting_remove(tp->setup, peer);
  *changed = 1;
  char name[SC_TCP_NAME_LEN];
  SC_TRACE(SC_SUBSYS_NET, "tcp: rank %d connected with %s over %d sockets (%s)", tp->base.rank,
           sc_tcp_peer_name(tp, p, name), p->nsocks,
           p->link == SC_TCP_LINK_OUT ? "it connected" : "the peer connected");
  return sc_tcp_peer_connected(tp, peer);
}

static sc_result_t setup_start_connect(sc_tcp_transport_t *tp, sc_setup_conn_t *c) {
  sc_tcp_peer_t *p = &tp->peers[c->peer];
  c->attempts++;
  sc_sockaddr_t addr;
  sc_tcp_peer_sockaddr(p, &addr);
  int fd = socket(addr.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return SC_ERR(SC_ERR_SYSTEM, "tcp: socket(): %s", strerror(errno));
  sc_result_t r = sc_socket_set_bufsize(fd, tp->sockbuf);
  if (r == SC_SUCCESS) r = sc_socket_set_nodelay(fd);
  if (r != SC_SUCCESS) {
    close(fd);
    return r;
  }
  c->fd = fd;
  int err = connect(fd, (const struct sockaddr *)&addr.sa, addr.len) == 0 ? 0 : errno;
  if (err == 0) {
    c->state = SC_SETUP_SEND_HELLO;
  } else if (err == EINPROGRESS || err == EINTR) {
    c->state = SC_SETUP_CONNECTING;
  } else if (sc_setup_retryable(err)) {
    setup_retry(c, err);
  } else {
    setup_close(c);
    char name[SC_TCP_NAME_LEN];
    return SC_ERR(SC_ERR_SYSTEM, "tcp: rank %d connecting to %s: %s", tp->base.rank,
                  sc_tcp_peer_name(tp, p, name), strerror(err));
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

static sc_result_t setup_fail_out(sc_tcp_transport_t *tp, sc_setup_conn_t *c, int err,
                                  const char *when) {
  sc_tcp_peer_t *p = &tp->peers[c->peer];
  char text[300], name[SC_TCP_NAME_LEN];
  snprintf(text, sizeof(text),
           "tcp: %s %s while rank %d %s on socket %d of %d (does it use the same secret and "
           "nranks=%d?)",
           sc_tcp_peer_name(tp, p, name), err ? strerror(err) : "closed the connection",
           tp->base.rank, when, c->sock, p->nsocks, tp->base.nranks);
  return peer_fails(tp, c->peer, SC_ERR_REMOTE, text);
}

static sc_result_t setup_on_out(sc_tcp_transport_t *tp, sc_setup_conn_t *c, int *changed) {
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
      char text[200], name[SC_TCP_NAME_LEN];
      snprintf(text, sizeof(text), "tcp: rank %d connecting to %s: %s", tp->base.rank,
               sc_tcp_peer_name(tp, &tp->peers[c->peer], name), strerror(err));
      return peer_fails(tp, c->peer, SC_ERR_SYSTEM, text);
    }
  }
  if (c->state == SC_SETUP_SEND_HELLO) {
    if (c->len == 0) {
      sc_tcp_encode_hello(c->buf, tp->secret, tp->base.rank, c->peer, tp->base.nranks, c->sock,
                          tp->peers[c->peer].nsocks);
      c->len = SC_TCP_HELLO_LEN;
      c->done = 0;
    }
    int st = setup_io(c, 1, &err);
    if (st < 0) return setup_fail_out(tp, c, err, "sent its hello");
    if (st == 0) return SC_SUCCESS;
    memset(c->buf, 0, sizeof(c->buf));
    c->state = SC_SETUP_READ_ACK;
    c->len = SC_TCP_ACK_LEN;
    c->done = 0;
  }
  if (c->state == SC_SETUP_READ_ACK) {
    int st = setup_io(c, 0, &err);
    if (st < 0) return setup_fail_out(tp, c, err, "waited for its ack");
    if (st == 0) return SC_SUCCESS;
    if (sc_tcp_nack_valid(c->buf, c->peer, tp->base.rank, c->sock) && c->peer > tp->base.rank) {
      /* The peer connects to us itself: its hellos are on their way. */
      tp->peers[c->peer].refused = 1;
      setup_close(c);
      return SC_SUCCESS;
    }
    if (!sc_tcp_ack_valid(c->buf, c->peer, tp->base.rank, c->sock)) {
      uint32_t magic = sc_wire_get_u32(c->buf), from = sc_wire_get_u32(c->buf + 4),
               to = sc_wire_get_u32(c->buf + 8), sock = sc_wire_get_u32(c->buf + 12);
      char text[300], name[SC_TCP_NAME_LEN];
      snprintf(text, sizeof(text),
               "tcp: %s answered rank %d's hello on socket %d with a malformed ack (magic "
               "0x%08x, from %u, to %u, socket %u)",
               sc_tcp_peer_name(tp, &tp->peers[c->peer], name), tp->base.rank, c->sock, magic, from,
               to, sock);
      return peer_fails(tp, c->peer, SC_ERR_REMOTE, text);
    }
    return setup_established(tp, c, changed);
  }
  return SC_SUCCESS;
}

/* A complete hello on an incoming connection: NULL when it may be answered
 * (c->refusing tells whether with a refusal), else why it is dropped. */
static const char *hello_check(sc_tcp_transport_t *tp, sc_setup_conn_t *c, char *why,
                               size_t whylen) {
  sc_tcp_setup_t *st = tp->setup;
  sc_tcp_hello_t m;
  const char *bad =
      sc_tcp_hello_parse(c->buf, tp->secret, tp->base.rank, tp->base.nranks, &m, why, whylen);
  if (bad) return bad;
  int from = (int)m.from, sock = (int)m.sock, nsocks = (int)m.nsocks;
  sc_tcp_peer_t *p = &tp->peers[from];
  if (p->dead) {
    snprintf(why, whylen, "rank %d failed before (%s)", from, sc_tcp_peer_err(p));
    return why;
  }
  if (p->link == SC_TCP_LINK_OUT) {
    if (tp->base.rank > from) {
      c->peer = from;
      c->sock = sock;
      c->refusing = 1;
      return NULL;
    }
    /* The higher rank connects: ours is abandoned. None of our sockets was
     * acked (a higher rank that acks ours never connects itself). */
    if (p->nconn > 0) {
      snprintf(why, whylen, "rank %d connects while %d of our sockets to it are established", from,
               p->nconn);
      return why;
    }
    close_peer_conns(st, from, 1);
    p->link = SC_TCP_LINK_NONE;
  }
  if (p->link == SC_TCP_LINK_NONE) {
    if (sc_tcp_peer_init_socks(tp, from, nsocks) != SC_SUCCESS) return "out of memory";
    p->link = SC_TCP_LINK_IN;
    p->nconn = 0;
    p->setup_deadline = sc_now_ms() + tp->timeout_ms;
    waiting_add(tp, from);
  }
  /* sock < nsocks == p->nsocks: p->socks[sock] exists. */
  if (nsocks != p->nsocks) {
    snprintf(why, whylen,
             "hello from rank %d for socket %d of %d does not fit (it announced %d before)", from,
             sock, nsocks, p->nsocks);
    return why;
  }
  if (p->socks[sock].fd >= 0) {
    snprintf(why, whylen, "socket %d of rank %d is already connected", sock, from);
    return why;
  }
  for (size_t i = 0; i < st->n; i++)
    if (&st->c[i] != c && st->c[i].state == SC_SETUP_SEND_ACK && !st->c[i].refusing &&
        st->c[i].peer == from && st->c[i].sock == sock) {
      snprintf(why, whylen, "socket %d of rank %d is already connecting", sock, from);
      return why;
    }
  c->peer = from;
  c->sock = sock;
  return NULL;
}

static sc_result_t setup_on_in(sc_tcp_transport_t *tp, sc_setup_conn_t *c, int *changed) {
  int err = 0;
  if (c->state == SC_SETUP_READ_HELLO) {
    int st = setup_io(c, 0, &err);
    if (st < 0) {
      setup_drop_in(tp, c, err ? strerror(err) : "closed before its hello was complete", 1);
      return SC_SUCCESS;
    }
    if (st == 0) return SC_SUCCESS;
    char buf[200];
    const char *why = hello_check(tp, c, buf, sizeof(buf));
    if (why) {
      c->peer = -1;
      setup_drop_in(tp, c, why, 0);
      return SC_SUCCESS;
    }
    memset(c->buf, 0, sizeof(c->buf));
    if (c->refusing)
      sc_tcp_encode_nack(c->buf, tp->base.rank, c->peer, c->sock);
    else
      sc_tcp_encode_ack(c->buf, tp->base.rank, c->peer, c->sock);
    c->len = SC_TCP_ACK_LEN;
    c->done = 0;
    c->state = SC_SETUP_SEND_ACK;
  }
  if (c->state == SC_SETUP_SEND_ACK) {
    int st = setup_io(c, 1, &err);
    if (st < 0) {
      setup_drop_in(tp, c, err ? strerror(err) : "closed before the ack", 1);
      return SC_SUCCESS;
    }
    if (st == 1 && c->refusing) setup_close(c);
    if (st == 1 && c->state == SC_SETUP_SEND_ACK) return setup_established(tp, c, changed);
  }
  return SC_SUCCESS;
}

static sc_result_t setup_accept(sc_tcp_transport_t *tp) {
  sc_tcp_setup_t *st = tp->setup;
  /* Bounded so that a flood of idle connections cannot exhaust descriptors:
   * beyond it the oldest unauthenticated one is dropped. */
  size_t unauth_max = (size_t)tp->base.nranks * SC_TCP_MAX_SOCKS + 64;
  for (int k = 0; k < 64; k++) {
    int fd;
    sc_sockaddr_t from;
    SC_CHECK(sc_socket_accept(tp->listen_fd, &fd, &from));
    if (fd < 0) return SC_SUCCESS;
    size_t unauth = 0, oldest = SIZE_MAX;
    for (size_t i = 0; i < st->n; i++) {
      if (st->c[i].state != SC_SETUP_READ_HELLO) continue;
      unauth++;
      if (oldest == SIZE_MAX || st->c[i].since < st->c[oldest].since) oldest = i;
    }
    if (unauth >= unauth_max)
      setup_drop_in(tp, &st->c[oldest], "too many connections without a hello", 0);
    size_t slot;
    sc_result_t r = conn_alloc(st, &slot);
    if (r != SC_SUCCESS) {
      close(fd);
      return r;
    }
    sc_setup_conn_t *c = &st->c[slot];
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

sc_result_t sc_tcp_setup_open(sc_tcp_transport_t *tp) {
  sc_tcp_setup_t *st = calloc(1, sizeof(*st));
  if (st) st->waiting = calloc((size_t)tp->base.nranks, sizeof(*st->waiting));
  if (!st || !st->waiting) {
    free(st);
    return SC_ERR(SC_ERR_NOMEM, "tcp: out of memory for connection setup of %d ranks",
                  tp->base.nranks);
  }
  tp->setup = st;
  return SC_SUCCESS;
}

void sc_tcp_setup_close(sc_tcp_transport_t *tp) {
  sc_tcp_setup_t *st = tp->setup;
  if (!st) return;
  for (size_t i = 0; i < st->n; i++)
    if (st->c[i].fd >= 0) close(st->c[i].fd);
  free(st->c);
  free(st->pidx);
  free(st->waiting);
  free(st);
  tp->setup = NULL;
}

sc_result_t sc_tcp_setup_begin(sc_tcp_transport_t *tp, int peer) {
  sc_tcp_setup_t *st = tp->setup;
  sc_tcp_peer_t *p = &tp->peers[peer];
  if (p->connected || p->dead || p->link != SC_TCP_LINK_NONE) return SC_SUCCESS;
  SC_CHECK(sc_tcp_peer_init_socks(tp, peer, tp->nsocks));
  p->link = SC_TCP_LINK_OUT;
  p->nconn = 0;
  p->refused = 0;
  p->setup_deadline = sc_now_ms() + tp->timeout_ms;
  waiting_add(tp, peer);
  for (int k = 0; k < tp->nsocks; k++) {
    size_t slot;
    SC_CHECK(conn_alloc(st, &slot));
    sc_setup_conn_t *c = &st->c[slot];
    c->is_out = 1;
    c->peer = peer;
    c->sock = k;
    c->since = sc_now_ms();
    sc_result_t r = setup_start_connect(tp, c);
    if (r != SC_SUCCESS) {
      char text[SC_ERRMSG_MAX];
      sc_error_get_detail(text, sizeof(text));
      return peer_fails(tp, peer, r, text);
    }
  }
  return SC_SUCCESS;
}

sc_result_t sc_tcp_setup_tick(sc_tcp_transport_t *tp, int64_t *wake_at) {
  sc_tcp_setup_t *st = tp->setup;
  int64_t now = sc_now_ms();
  sc_result_t res = SC_SUCCESS;
  for (size_t i = 0; i < st->n; i++) {
    sc_setup_conn_t *c = &st->c[i];
    if (c->state != SC_SETUP_RETRY_WAIT) continue;
    if (c->retry_at <= now) {
      sc_result_t r = setup_start_connect(tp, c);
      if (r != SC_SUCCESS) {
        char text[SC_ERRMSG_MAX];
        sc_error_get_detail(text, sizeof(text));
        r = peer_fails(tp, c->peer, r, text);
        if (res == SC_SUCCESS) res = r;
        continue;
      }
    }
    if (c->state == SC_SETUP_RETRY_WAIT && c->retry_at < *wake_at) *wake_at = c->retry_at;
  }
  if (!tp->lazy) return res;
  for (size_t i = 0; i < st->nwaiting; i++) {
    int peer = st->waiting[i];
    sc_tcp_peer_t *p = &tp->peers[peer];
    if (p->link == SC_TCP_LINK_NONE) continue; /* receives only: the sender connects */
    if (p->setup_deadline > now) {
      if (p->setup_deadline < *wake_at) *wake_at = p->setup_deadline;
      continue;
    }
    char what[120], text[300], name[SC_TCP_NAME_LEN];
    sc_tcp_setup_describe_pair(tp, peer, what, sizeof(what));
    snprintf(text, sizeof(text), "tcp: rank %d: connecting with %s timed out after %d ms (%s)",
             tp->base.rank, sc_tcp_peer_name(tp, p, name), tp->timeout_ms, what);
    sc_result_t r = peer_fails(tp, peer, SC_ERR_TIMEOUT, text);
    if (res == SC_SUCCESS) res = r;
    i = (size_t)-1;
  }
  return res;
}

int sc_tcp_setup_busy(sc_tcp_transport_t *tp) {
  sc_tcp_setup_t *st = tp->setup;
  if (!st) return 0;
  /* Free slots at the end are forgotten, so that the slot loops (this one
   * runs in every progress call) stay as long as the connections in flight,
   * not as the most there ever were (every peer's sockets after eager setup). */
  while (st->n > 0 && st->c[st->n - 1].state == SC_SETUP_FREE) st->n--;
  return st->nwaiting > 0 || st->n > 0;
}

void sc_tcp_setup_waiting(sc_tcp_transport_t *tp, int peer) {
  waiting_add(tp, peer);
}

static int listener_polled(const sc_tcp_transport_t *tp) {
  return tp->lazy || !tp->connected;
}

size_t sc_tcp_setup_nfds(const sc_tcp_transport_t *tp) {
  return tp->setup ? tp->setup->n + (size_t)listener_polled(tp) : 0;
}

void sc_tcp_setup_fill(sc_tcp_transport_t *tp, struct pollfd *pfds, size_t *n) {
  sc_tcp_setup_t *st = tp->setup;
  if (!st) return;
  size_t need = st->n + 1;
  if (need > st->pcap) {
    size_t *np = realloc(st->pidx, need * sizeof(*np));
    if (!np) return; /* polled again next time; the deadlines still hold */
    st->pidx = np;
    st->pcap = need;
  }
  size_t k = 0;
  if (listener_polled(tp)) {
    pfds[(*n)++] = (struct pollfd){.fd = tp->listen_fd, .events = POLLIN};
    st->pidx[k++] = SIZE_MAX;
  }
  for (size_t i = 0; i < st->n; i++) {
    sc_setup_conn_t *c = &st->c[i];
    short ev = c->state == SC_SETUP_CONNECTING || c->state == SC_SETUP_SEND_HELLO ||
                       c->state == SC_SETUP_SEND_ACK
                   ? POLLOUT
               : c->state == SC_SETUP_READ_ACK || c->state == SC_SETUP_READ_HELLO ? POLLIN
                                                                                  : 0;
    if (!ev) continue;
    pfds[(*n)++] = (struct pollfd){.fd = c->fd, .events = ev};
    st->pidx[k++] = i;
  }
}

sc_result_t sc_tcp_setup_handle(sc_tcp_transport_t *tp, struct pollfd *pfds, size_t n,
                                int *changed) {
  sc_tcp_setup_t *st = tp->setup;
  sc_result_t res = SC_SUCCESS;
  char first_err[SC_ERRMSG_MAX] = "";
  int listener_ready = 0;
  /* Accepting may move st->c: the polled connections first. */
  for (size_t k = 0; k < n; k++) {
    if (!pfds[k].revents) continue;
    size_t i = st->pidx[k];
    if (i == SIZE_MAX) {
      listener_ready = 1;
      continue;
    }
    sc_setup_conn_t *c = &st->c[i];
    if (c->state == SC_SETUP_FREE || c->fd != pfds[k].fd) continue; /* closed meanwhile */
    sc_result_t r = c->is_out ? setup_on_out(tp, c, changed) : setup_on_in(tp, c, changed);
    if (r != SC_SUCCESS) {
      *changed = 1;
      if (res == SC_SUCCESS) {
        res = r;
        sc_error_get_detail(first_err, sizeof(first_err));
      }
    }
  }
  if (listener_ready) {
    sc_result_t r = setup_accept(tp);
    if (r != SC_SUCCESS && res == SC_SUCCESS) {
      res = r;
      sc_error_get_detail(first_err, sizeof(first_err));
    }
  }
  if (res != SC_SUCCESS) sc_error_set_detail(first_err);
  return res;
}
