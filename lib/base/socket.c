/* SPDX-License-Identifier: BSD-3-Clause */
/* Socket helpers for the bootstrap and the TCP transport. Every socket made
 * here is non-blocking and close-on-exec; every wait is a poll() against an
 * absolute deadline on the monotonic clock, restarted on EINTR; every send
 * uses MSG_NOSIGNAL so that a vanished peer is an error code, never SIGPIPE. */
/* accept4 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/fdlimit.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/base/wire.h"

int sc_secret_equal(const uint8_t *a, const uint8_t *b, size_t n) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < n; i++) diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}

/* A call that makes a descriptor failed with errno e; out of descriptors,
 * the error says why and what to do. */
static sc_result_t fd_call_failed(const char *call, int e) {
  if (e == EMFILE || e == ENFILE) {
    char why[640];
    return SC_ERR(SC_ERR_SYSTEM, "%s: %s: %s", call, strerror(e),
                  sc_fdlimit_explain(e, why, sizeof why));
  }
  return SC_ERR(SC_ERR_SYSTEM, "%s: %s", call, strerror(e));
}

static sc_result_t socket_failed(int e) {
  return fd_call_failed("socket()", e);
}

sc_result_t sc_random_bytes(void *buf, size_t n) {
  uint8_t *p = buf;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return SC_ERR(SC_ERR_SYSTEM, "getrandom(%zu bytes): %s", n, strerror(errno));
    }
    p += got;
    n -= (size_t)got;
  }
  return SC_SUCCESS;
}

/* ---- addresses ---- */

sc_result_t sc_socket_addr_from_storage(const void *ss, sc_sockaddr_t *out) {
  const struct sockaddr *sa = ss;
  memset(out, 0, sizeof(*out));
  if (sa->sa_family == AF_INET) {
    memcpy(&out->sa, ss, sizeof(struct sockaddr_in));
    out->len = sizeof(struct sockaddr_in);
  } else if (sa->sa_family == AF_INET6) {
    memcpy(&out->sa, ss, sizeof(struct sockaddr_in6));
    out->len = sizeof(struct sockaddr_in6);
  } else {
    return SC_ERR(SC_ERR_INVALID_ARG, "address family %d is neither IPv4 nor IPv6",
                  (int)sa->sa_family);
  }
  return SC_SUCCESS;
}

sc_result_t sc_socket_addr_pack(const sc_sockaddr_t *a, uint8_t out[SC_SOCKET_ADDR_WIRE_LEN]) {
  memset(out, 0, SC_SOCKET_ADDR_WIRE_LEN);
  if (a->sa.ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)&a->sa;
    out[0] = 4;
    sc_wire_put_u16(out + 2, ntohs(in->sin_port));
    memcpy(out + 8, &in->sin_addr, 4);
  } else if (a->sa.ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->sa;
    out[0] = 6;
    sc_wire_put_u16(out + 2, ntohs(in6->sin6_port));
    sc_wire_put_u32(out + 4, in6->sin6_scope_id);
    memcpy(out + 8, &in6->sin6_addr, 16);
  } else {
    return SC_ERR(SC_ERR_INVALID_ARG, "address family %d is neither IPv4 nor IPv6",
                  (int)a->sa.ss_family);
  }
  return SC_SUCCESS;
}

int sc_socket_addr_ip_cmp(const uint8_t a[SC_SOCKET_ADDR_WIRE_LEN],
                          const uint8_t b[SC_SOCKET_ADDR_WIRE_LEN]) {
  if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
  /* Bytes 8..23: the IP address, zero past an IPv4 one (pack's layout). */
  return memcmp(a + 8, b + 8, SC_SOCKET_ADDR_WIRE_LEN - 8);
}

sc_result_t sc_socket_addr_unpack(const uint8_t in[SC_SOCKET_ADDR_WIRE_LEN], sc_sockaddr_t *a) {
  uint16_t port = sc_wire_get_u16(in + 2);
  if (port == 0) return SC_ERR(SC_ERR_INVALID_ARG, "packed address has port 0");
  /* Bytes pack leaves zero must be zero, so that a packed address has exactly
   * one encoding (the unique id's checksum and the fuzzers rely on it). */
  int v4 = in[0] == 4;
  for (size_t i = 1; i < SC_SOCKET_ADDR_WIRE_LEN; i++) {
    int reserved = i == 1 || (v4 && ((i >= 4 && i < 8) || i >= 12));
    if (reserved && in[i] != 0)
      return SC_ERR(SC_ERR_INVALID_ARG, "packed address has a nonzero reserved byte %zu", i);
  }
  memset(a, 0, sizeof(*a));
  if (in[0] == 4) {
    struct sockaddr_in *sin = (struct sockaddr_in *)&a->sa;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    memcpy(&sin->sin_addr, in + 8, 4);
    a->len = sizeof(*sin);
  } else if (in[0] == 6) {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&a->sa;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    sin6->sin6_scope_id = sc_wire_get_u32(in + 4);
    memcpy(&sin6->sin6_addr, in + 8, 16);
    a->len = sizeof(*sin6);
  } else {
    return SC_ERR(SC_ERR_INVALID_ARG, "packed address has unknown family tag %u", in[0]);
  }
  return SC_SUCCESS;
}

const char *sc_socket_addr_str(const sc_sockaddr_t *a, char *buf, size_t len) {
  if (len == 0) return buf;
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->sa.ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)&a->sa;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(in->sin_port));
  } else if (a->sa.ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
  } else {
    snprintf(buf, len, "<family %d>", (int)a->sa.ss_family);
  }
  return buf;
}

static int sc_is_link_local6(const struct sockaddr_in6 *in6) {
  return IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr);
}

/* Bridges for local containers and VMs are up and non-loopback but other hosts
 * cannot reach them; automatic choice skips them (NCCL does the same). */
static int sc_is_local_bridge(const char *name) {
  return strncmp(name, "docker", 6) == 0 || strncmp(name, "virbr", 5) == 0;
}

/* Rank of an interface address for automatic choice; lower is better, -1 = unusable. */
static int sc_addr_score(const struct ifaddrs *ifa, const char *ifname) {
  if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) return -1;
  int fam = ifa->ifa_addr->sa_family;
  if (fam != AF_INET && fam != AF_INET6) return -1;
  int loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
  if (ifname && *ifname) {
    if (strncmp(ifa->ifa_name, ifname, strlen(ifname)) != 0) return -1;
  } else if (sc_is_local_bridge(ifa->ifa_name)) {
    return -1;
  }
  int score = fam == AF_INET ? 0 : 1;
  if (fam == AF_INET6 && sc_is_link_local6((const struct sockaddr_in6 *)ifa->ifa_addr)) score = 2;
  if (loop) score += 10; /* automatic choice: loopback only as the last resort */
  return score;
}

static sc_result_t sc_pick_by_route(const sc_sockaddr_t *hint, sc_sockaddr_t *out) {
  /* A UDP connect sends nothing; it only asks the kernel which source address
   * it would route from. */
  int fd = socket(hint->sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SC_ERR(SC_ERR_SYSTEM, "socket(UDP): %s", strerror(errno));
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  sc_result_t res = SC_SUCCESS;
  if (connect(fd, (const struct sockaddr *)&hint->sa, hint->len) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    char a[64];
    res = SC_ERR(SC_ERR_SYSTEM, "no route to %s: %s", sc_socket_addr_str(hint, a, sizeof(a)),
                 strerror(errno));
  }
  close(fd);
  if (res != SC_SUCCESS) return res;
  SC_CHECK(sc_socket_addr_from_storage(&ss, out));
  if (out->sa.ss_family == AF_INET)
    ((struct sockaddr_in *)&out->sa)->sin_port = 0;
  else
    ((struct sockaddr_in6 *)&out->sa)->sin6_port = 0;
  return SC_SUCCESS;
}

sc_result_t sc_socket_pick_addr(const char *ifname, const sc_sockaddr_t *route_hint,
                                sc_sockaddr_t *out) {
  if (!out) return SC_ERR(SC_ERR_INVALID_ARG, "sc_socket_pick_addr: out is NULL");
  int explicit_if = ifname && *ifname;
  if (!explicit_if && route_hint && route_hint->len > 0) {
    if (sc_pick_by_route(route_hint, out) == SC_SUCCESS) return SC_SUCCESS;
    SC_INFO(SC_SUBSYS_NET, "%s; choosing an interface without the route hint", sc_last_error());
  }
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0) return fd_call_failed("getifaddrs", errno);
  const struct ifaddrs *best = NULL;
  int best_score = INT_MAX;
  for (const struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
    int score = sc_addr_score(ifa, ifname);
    if (score >= 0 && score < best_score) {
      best = ifa;
      best_score = score;
    }
  }
  sc_result_t res = SC_SUCCESS;
  if (!best) {
    char names[256] = "";
    size_t used = 0;
    for (const struct ifaddrs *ifa = list; ifa && used < sizeof(names); ifa = ifa->ifa_next)
      if (ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET && (ifa->ifa_flags & IFF_UP))
        used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "",
                                 ifa->ifa_name);
    res = SC_ERR(explicit_if ? SC_ERR_INVALID_ARG : SC_ERR_SYSTEM,
                 "no up interface with an IP address%s%s%s (IPv4 interfaces up: %s)",
                 explicit_if ? " whose name starts with '" : "", explicit_if ? ifname : "",
                 explicit_if ? "' (SC_SOCKET_IFNAME)" : "", names[0] ? names : "none");
  } else {
    res = sc_socket_addr_from_storage(best->ifa_addr, out);
    if (res == SC_SUCCESS && out->sa.ss_family == AF_INET6) {
      struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->sa;
      in6->sin6_port = 0;
      if (sc_is_link_local6(in6)) in6->sin6_scope_id = if_nametoindex(best->ifa_name);
    } else if (res == SC_SUCCESS) {
      ((struct sockaddr_in *)&out->sa)->sin_port = 0;
    }
    if (res == SC_SUCCESS) {
      char a[64];
      SC_INFO(SC_SUBSYS_NET, "using interface %s address %s", best->ifa_name,
              sc_socket_addr_str(out, a, sizeof(a)));
    }
  }
  freeifaddrs(list);
  return res;
}

sc_result_t sc_socket_resolve(const char *host, uint16_t port, sc_sockaddr_t *out) {
  if (!host || !*host || !out) return SC_ERR(SC_ERR_INVALID_ARG, "sc_socket_resolve: empty host");
  char name[256];
  size_t hl = strlen(host);
  if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
    host++;
    hl -= 2;
  }
  if (hl >= sizeof(name)) return SC_ERR(SC_ERR_INVALID_ARG, "host name too long (%zu bytes)", hl);
  memcpy(name, host, hl);
  name[hl] = '\0';
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int rc;
  do rc = getaddrinfo(name, NULL, &hints, &res);
  while (rc == EAI_SYSTEM && errno == EINTR);
  if (rc != 0) {
    sc_result_t code = (rc == EAI_NONAME || rc == EAI_FAMILY) ? SC_ERR_INVALID_ARG : SC_ERR_SYSTEM;
    return SC_ERR(code, "cannot resolve '%s': %s", name,
                  rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
  }
  const struct addrinfo *pick = NULL;
  for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  if (!pick)
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
      if (ai->ai_family == AF_INET6) {
        pick = ai;
        break;
      }
  sc_result_t r;
  if (!pick) {
    r = SC_ERR(SC_ERR_INVALID_ARG, "'%s' has no IPv4 or IPv6 address", name);
  } else {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, pick->ai_addr, pick->ai_addrlen);
    r = sc_socket_addr_from_storage(&ss, out);
    if (r == SC_SUCCESS) {
      if (out->sa.ss_family == AF_INET)
        ((struct sockaddr_in *)&out->sa)->sin_port = htons(port);
      else
        ((struct sockaddr_in6 *)&out->sa)->sin6_port = htons(port);
    }
  }
  freeaddrinfo(res);
  return r;
}

/* ---- socket options ---- */

sc_result_t sc_socket_set_nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    return SC_ERR(SC_ERR_SYSTEM, "setsockopt(TCP_NODELAY): %s", strerror(errno));
  return SC_SUCCESS;
}

sc_result_t sc_socket_set_bufsize(int fd, size_t bytes) {
  if (bytes == 0) return SC_SUCCESS;
  int v = bytes > INT_MAX / 2 ? INT_MAX / 2 : (int)bytes;
  /* The kernel silently caps at net.core.[rw]mem_max; that is not an error. */
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0)
    return SC_ERR(SC_ERR_SYSTEM, "setsockopt(SO_SNDBUF/SO_RCVBUF=%d): %s", v, strerror(errno));
  return SC_SUCCESS;
}

sc_result_t sc_socket_listen(sc_sockaddr_t *addr, int backlog, int *fd) {
  if (!addr || !fd) return SC_ERR(SC_ERR_INVALID_ARG, "sc_socket_listen: NULL argument");
  *fd = -1;
  char a[64];
  int s = socket(addr->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return socket_failed(errno);
  int one = 1;
  /* Restarting a job on the same port must not wait for TIME_WAIT to expire. */
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (bind(s, (const struct sockaddr *)&addr->sa, addr->len) != 0) {
    int e = errno;
    close(s);
    return SC_ERR(SC_ERR_SYSTEM, "bind(%s): %s", sc_socket_addr_str(addr, a, sizeof(a)),
                  strerror(e));
  }
  if (listen(s, backlog > 0 ? backlog : SOMAXCONN) != 0 ||
      getsockname(s, (struct sockaddr *)&ss, &len) != 0) {
    int e = errno;
    close(s);
    return SC_ERR(SC_ERR_SYSTEM, "listen(%s): %s", sc_socket_addr_str(addr, a, sizeof(a)),
                  strerror(e));
  }
  sc_result_t r = sc_socket_addr_from_storage(&ss, addr);
  if (r != SC_SUCCESS) {
    close(s);
    return r;
  }
  *fd = s;
  return SC_SUCCESS;
}

sc_result_t sc_socket_accept(int listen_fd, int *fd, sc_sockaddr_t *peer) {
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int s = accept4(listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s >= 0) {
      if (peer && sc_socket_addr_from_storage(&ss, peer) != SC_SUCCESS)
        memset(peer, 0, sizeof(*peer));
      sc_socket_set_nodelay(s); /* latency only; failure is harmless */
      *fd = s;
      return SC_SUCCESS;
    }
    *fd = -1;
    switch (errno) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
      return SC_SUCCESS;
    /* The connection died in the queue, or Linux reports a pending network
     * error of that connection: try the next one. */
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EOPNOTSUPP:
      continue;
    case EMFILE:
    case ENFILE:
      return fd_call_failed("accept", errno);
    default:
      return SC_ERR(SC_ERR_SYSTEM, "accept: %s", strerror(errno));
    }
  }
}

/* A loopback connect to a port nobody listens on can, rarely, connect the
 * socket to itself (TCP simultaneous open when the kernel picks the target
 * port as the source port). */
static int sc_is_self_connected(int fd) {
  struct sockaddr_storage me, peer;
  socklen_t ml = sizeof(me), pl = sizeof(peer);
  if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 ||
      getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
    return 0;
  return ml == pl && memcmp(&me, &peer, ml) == 0;
}

static int sc_connect_retryable(int e) {
  return e == ECONNREFUSED || e == ETIMEDOUT || e == ECONNRESET || e == ENETUNREACH ||
         e == EHOSTUNREACH || e == EAGAIN || e == EADDRNOTAVAIL || e == ECONNABORTED;
}

sc_result_t sc_socket_connect(const sc_sockaddr_t *addr, int64_t deadline_ms, int *fd) {
  if (!addr || !fd) return SC_ERR(SC_ERR_INVALID_ARG, "sc_socket_connect: NULL argument");
  *fd = -1;
  char a[64];
  sc_socket_addr_str(addr, a, sizeof(a));
  int backoff_ms = 5;
  int last_err = 0;
  int attempts = 0;
  for (;;) {
    attempts++;
    int s = socket(addr->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return socket_failed(errno);
    int err = 0;
    if (connect(s, (const struct sockaddr *)&addr->sa, addr->len) != 0) err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      /* After EINTR the connect goes on asynchronously, exactly as EINPROGRESS. */
      struct pollfd p = {.fd = s, .events = POLLOUT};
      int rc;
      do rc = poll(&p, 1, sc_ms_until(deadline_ms));
      while (rc < 0 && errno == EINTR && sc_ms_until(deadline_ms) > 0);
      if (rc <= 0) {
        close(s);
        return SC_ERR(SC_ERR_TIMEOUT, "connect to %s: no answer before the deadline", a);
      }
      socklen_t el = sizeof(err);
      if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
    }
    if (err == 0 && sc_is_self_connected(s)) err = ECONNREFUSED;
    if (err == 0) {
      sc_socket_set_nodelay(s);
      *fd = s;
      SC_TRACE(SC_SUBSYS_NET, "connected to %s after %d attempt(s)", a, attempts);
      return SC_SUCCESS;
    }
    close(s);
    if (!sc_connect_retryable(err))
      return SC_ERR(SC_ERR_SYSTEM, "connect to %s: %s", a, strerror(err));
    last_err = err;
    int left = sc_ms_until(deadline_ms);
    if (left == 0)
      return SC_ERR(SC_ERR_TIMEOUT, "connect to %s: %s (%d attempts before the deadline)", a,
                    strerror(last_err), attempts);
    poll(NULL, 0, backoff_ms < left ? backoff_ms : left);
    if (backoff_ms < 200) backoff_ms *= 2;
  }
}

/* Wait until fd is ready for `events` or the deadline passes. */
static sc_result_t sc_wait_fd(int fd, short events, int64_t deadline_ms, const char *what,
                              const char *who, size_t done, size_t n) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events};
    int left = sc_ms_until(deadline_ms);
    int rc = left > 0 ? poll(&p, 1, left) : 0;
    if (rc > 0) return SC_SUCCESS; /* errors and hangups surface in the next read/write */
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return SC_ERR(SC_ERR_SYSTEM, "poll (%s %s): %s", what, who, strerror(errno));
    return SC_ERR(SC_ERR_TIMEOUT, "%s %s: deadline passed after %zu of %zu bytes", what, who, done,
                  n);
  }
}

sc_result_t sc_socket_write_all(int fd, const void *buf, size_t n, int64_t deadline_ms,
                                const char *who) {
  const uint8_t *p = buf;
  size_t done = 0;
  if (!who) who = "peer";
  while (done < n) {
    ssize_t w = send(fd, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      done += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      SC_CHECK(sc_wait_fd(fd, POLLOUT, deadline_ms, "sending to", who, done, n));
      continue;
    }
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN))
      return SC_ERR(SC_ERR_REMOTE, "%s closed the connection (%s) after %zu of %zu bytes", who,
                    strerror(errno), done, n);
    return SC_ERR(SC_ERR_SYSTEM, "send to %s: %s", who, w < 0 ? strerror(errno) : "no progress");
  }
  return SC_SUCCESS;
}

sc_result_t sc_socket_read_all(int fd, void *buf, size_t n, int64_t deadline_ms, const char *who) {
  uint8_t *p = buf;
  size_t done = 0;
  if (!who) who = "peer";
  while (done < n) {
    ssize_t r = recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (r > 0) {
      done += (size_t)r;
      continue;
    }
    if (r == 0)
      return SC_ERR(SC_ERR_REMOTE, "%s closed the connection after %zu of %zu bytes", who, done, n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      SC_CHECK(sc_wait_fd(fd, POLLIN, deadline_ms, "receiving from", who, done, n));
      continue;
    }
    if (errno == ECONNRESET || errno == EPIPE || errno == ENOTCONN || errno == ETIMEDOUT)
      return SC_ERR(SC_ERR_REMOTE, "%s reset the connection (%s) after %zu of %zu bytes", who,
                    strerror(errno), done, n);
    return SC_ERR(SC_ERR_SYSTEM, "recv from %s: %s", who, strerror(errno));
  }
  return SC_SUCCESS;
}
