/* SPDX-License-Identifier: BSD-3-Clause */
/* Socket helpers shared by the bootstrap and the TCP transport: interface
 * choice, name resolution, deadline-bounded connect/read/write. */
#ifndef SC_SOCKET_H
#define SC_SOCKET_H

#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

/* Every deadline_ms here is on the library's clock (sc_now_ms). */
#include "lib/base/clock.h"
#include "sparsecoll.h"

#define SC_SECRET_LEN 32    /* bytes of the job secret every connection presents */
#define SC_RANKS_MAX  65536 /* the most ranks a communicator may have */

/* A socket address with its length (IPv4 or IPv6). */
typedef struct sc_sockaddr {
  struct sockaddr_storage sa;
  socklen_t len;
} sc_sockaddr_t;

/* n bytes from getrandom(). */
sc_result_t sc_random_bytes(void *buf, size_t n);

/* The address to bind and advertise: the first up, non-loopback interface
 * whose name starts with ifname (any when ifname is "" or NULL, then falling
 * back to loopback); with route_hint and no ifname, the local address the
 * kernel would use to reach it. Port 0. */
sc_result_t sc_socket_pick_addr(const char *ifname, const sc_sockaddr_t *route_hint,
                                sc_sockaddr_t *out);
/* Resolve "host" + port (numeric or name). */
sc_result_t sc_socket_resolve(const char *host, uint16_t port, sc_sockaddr_t *out);
/* "1.2.3.4:5" or "[::1]:5" into buf. */
const char *sc_socket_addr_str(const sc_sockaddr_t *a, char *buf, size_t len);

/* Non-blocking listening socket bound to *addr (port 0 allowed); *addr gets the
 * bound port. */
sc_result_t sc_socket_listen(sc_sockaddr_t *addr, int backlog, int *fd);
/* Connect with retry on refusal until deadline_ms (sc_now_ms clock); returns a
 * non-blocking socket with TCP_NODELAY. */
sc_result_t sc_socket_connect(const sc_sockaddr_t *addr, int64_t deadline_ms, int *fd);
/* Move exactly n bytes or fail (SC_ERR_REMOTE on EOF/reset, SC_ERR_TIMEOUT at
 * the deadline). `who` names the other side in the error text. */
sc_result_t sc_socket_write_all(int fd, const void *buf, size_t n, int64_t deadline_ms,
                                const char *who);
sc_result_t sc_socket_read_all(int fd, void *buf, size_t n, int64_t deadline_ms, const char *who);

/* Additions used by the bootstrap and the TCP transport. */

/* An address in a fixed, byte-order independent form for unique ids and
 * transport address blobs: {u8 family 4|6, u8 0, u16 port, u32 scope id,
 * u8 addr[16]}, multi-byte fields big-endian. unpack rejects an unknown
 * family or port 0 (SC_ERR_INVALID_ARG). */
#define SC_SOCKET_ADDR_WIRE_LEN 24
sc_result_t sc_socket_addr_pack(const sc_sockaddr_t *a, uint8_t out[SC_SOCKET_ADDR_WIRE_LEN]);
sc_result_t sc_socket_addr_unpack(const uint8_t in[SC_SOCKET_ADDR_WIRE_LEN], sc_sockaddr_t *a);
/* Orders two packed addresses by family, then IP address, the port aside
 * (0: the same host's address). */
int sc_socket_addr_ip_cmp(const uint8_t a[SC_SOCKET_ADDR_WIRE_LEN],
                          const uint8_t b[SC_SOCKET_ADDR_WIRE_LEN]);
/* sockaddr_storage (family set) -> sc_sockaddr_t with the right length. */
sc_result_t sc_socket_addr_from_storage(const void *ss, sc_sockaddr_t *out);
/* SO_SNDBUF and SO_RCVBUF; set before listen/connect so that the TCP window
 * scale is negotiated for them. 0 leaves the kernel default. */
sc_result_t sc_socket_set_bufsize(int fd, size_t bytes);
/* TCP_NODELAY on. */
sc_result_t sc_socket_set_nodelay(int fd);
/* Accept one pending connection (non-blocking, close-on-exec, TCP_NODELAY).
 * *fd = -1 and SC_SUCCESS when none is pending; the peer's address in *peer
 * when not NULL. */
sc_result_t sc_socket_accept(int listen_fd, int *fd, sc_sockaddr_t *peer);
/* Equality of secrets in constant time: no early return, no timing side channel. */
int sc_secret_equal(const uint8_t *a, const uint8_t *b, size_t n);

#endif
