/* TCP transport internals shared by connection setup (tcp_conn.c), the data
 * path (tcp.c) and the unit test that forges setup messages.
 *
 * Wire formats, multi-byte fields big-endian:
 *   address blob : u32 'SCTB', packed address (SC_SOCKET_ADDR_WIRE_LEN)
 *   hello        : u32 'SCTH', u32 version, u8 secret[32], u32 from, u32 to, u32 nranks
 *                  (the higher rank connects and sends it)
 *   ack          : u32 'SCTK', u32 from, u32 to (the lower rank's answer)
 *   message      : u32 'SCTM', u32 reserved, u64 payload length, payload */
#ifndef SC_TCP_INTERNAL_H
#define SC_TCP_INTERNAL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/bootstrap.h"
#include "lib/socket.h"
#include "transport/transport.h"

#define SC_TCP_BLOB_MAGIC  0x53435442u /* 'SCTB' */
#define SC_TCP_HELLO_MAGIC 0x53435448u /* 'SCTH' */
#define SC_TCP_ACK_MAGIC   0x5343544bu /* 'SCTK' */
#define SC_TCP_MSG_MAGIC   0x5343544du /* 'SCTM' */
#define SC_TCP_VERSION     1

#define SC_TCP_BLOB_LEN  (4 + SC_SOCKET_ADDR_WIRE_LEN)
#define SC_TCP_HELLO_LEN (4 + 4 + SC_SECRET_LEN + 4 + 4 + 4)
#define SC_TCP_ACK_LEN   12
#define SC_TCP_HDR_LEN   16

_Static_assert(SC_TCP_BLOB_LEN <= SC_TP_ADDR_MAX, "address blob too large");
_Static_assert(SC_TCP_HDR_LEN == sizeof(((sc_tp_req_t *)0)->hdr), "message header size");

typedef struct sc_tcp_peer {
  int fd;   /* -1 before setup and after death */
  int dead; /* failed: requests to it fail at once with err */
  sc_boot_addr_t addr;
  char name[96]; /* "rank 3 (127.0.0.1:40123)" for error texts */
  sc_tp_req_t *sq_head, *sq_tail;
  sc_tp_req_t *rq_head, *rq_tail;
  int nsend, nrecv;
  char err[320];
} sc_tcp_peer_t;

struct sc_transport {
  int rank, nranks;
  uint8_t secret[SC_SECRET_LEN];
  size_t sockbuf;
  int timeout_ms;
  int listen_fd;
  sc_boot_addr_t listen_addr;
  int wake_fd; /* eventfd: wake() makes a progress() blocked in poll return */
  int connected;
  sc_tcp_peer_t *peers;
  struct pollfd *pfds; /* nranks + 1, reused by progress */
  int *pfd_peer;
};

static inline void sc_tcp_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static inline uint32_t sc_tcp_get32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void sc_tcp_put64(uint8_t *p, uint64_t v) {
  sc_tcp_put32(p, (uint32_t)(v >> 32));
  sc_tcp_put32(p + 4, (uint32_t)v);
}

static inline uint64_t sc_tcp_get64(const uint8_t *p) {
  return ((uint64_t)sc_tcp_get32(p) << 32) | sc_tcp_get32(p + 4);
}

void sc_tcp_encode_hello(uint8_t out[SC_TCP_HELLO_LEN], const uint8_t secret[SC_SECRET_LEN],
                         int from, int to, int nranks);

/* tcp_conn.c */
sc_result_t sc_tcp_create(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                          size_t *addrlen);
sc_result_t sc_tcp_connect_all(sc_transport_t *tp, const void *addrs, size_t stride);
void sc_tcp_destroy(sc_transport_t *tp);

#endif
