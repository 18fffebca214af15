/* Socket helpers shared by the bootstrap and the TCP transport: interface
 * choice, name resolution, deadline-bounded connect/read/write. */
#ifndef SC_SOCKET_H
#define SC_SOCKET_H

#include <stddef.h>
#include <stdint.h>

#include "lib/bootstrap.h"

/* Milliseconds on a monotonic clock. */
int64_t sc_now_ms(void);
/* n bytes from getrandom(). */
sc_result_t sc_random_bytes(void *buf, size_t n);

/* The address to bind and advertise: the first up, non-loopback interface
 * whose name starts with ifname (any when ifname is "" or NULL, then falling
 * back to loopback); with route_hint and no ifname, the local address the
 * kernel would use to reach it. Port 0. */
sc_result_t sc_socket_pick_addr(const char *ifname, const sc_boot_addr_t *route_hint,
                                sc_boot_addr_t *out);
/* Resolve "host" + port (numeric or name). */
sc_result_t sc_socket_resolve(const char *host, uint16_t port, sc_boot_addr_t *out);
/* "1.2.3.4:5" or "[::1]:5" into buf. */
const char *sc_socket_addr_str(const sc_boot_addr_t *a, char *buf, size_t len);

/* Non-blocking listening socket bound to *addr (port 0 allowed); *addr gets the
 * bound port. */
sc_result_t sc_socket_listen(sc_boot_addr_t *addr, int backlog, int *fd);
/* Connect with retry on refusal until deadline_ms (sc_now_ms clock); returns a
 * non-blocking socket with TCP_NODELAY. */
sc_result_t sc_socket_connect(const sc_boot_addr_t *addr, int64_t deadline_ms, int *fd);
/* Move exactly n bytes or fail (SC_ERR_REMOTE on EOF/reset, SC_ERR_TIMEOUT at
 * the deadline). `who` names the other side in the error text. */
sc_result_t sc_socket_write_all(int fd, const void *buf, size_t n, int64_t deadline_ms,
                                const char *who);
sc_result_t sc_socket_read_all(int fd, void *buf, size_t n, int64_t deadline_ms, const char *who);
sc_result_t sc_socket_set_nonblocking(int fd);

#endif
