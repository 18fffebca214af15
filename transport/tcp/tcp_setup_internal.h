/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: the state of the connections being made (tcp_setup.c),
 * shared with the timeout report (tcp_setup_report.c). */
#ifndef SC_TCP_SETUP_INTERNAL_H
#define SC_TCP_SETUP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "transport/tcp/tcp_internal.h"

typedef enum sc_setup_state {
  SC_SETUP_FREE = 0,   /* slot unused */
  SC_SETUP_RETRY_WAIT, /* outgoing: connect again at retry_at */
  SC_SETUP_CONNECTING, /* outgoing: non-blocking connect in flight */
  SC_SETUP_SEND_HELLO,
  SC_SETUP_READ_ACK,
  SC_SETUP_READ_HELLO, /* incoming: not yet authenticated */
  SC_SETUP_SEND_ACK    /* incoming: the ack, or the refusal (refusing) */
} sc_setup_state_t;

typedef struct sc_setup_conn {
  int fd;
  sc_setup_state_t state;
  int is_out;
  int refusing; /* incoming: the answer is a refusal; close after it */
  int peer;     /* outgoing: target; incoming: the sender of a valid hello, else -1 */
  int sock;     /* socket index within the pair */
  uint8_t buf[SC_TCP_HELLO_LEN];
  size_t len, done;
  int64_t retry_at, since;
  int attempts, last_err;
  sc_sockaddr_t from; /* incoming: the remote address */
} sc_setup_conn_t;

struct sc_tcp_setup {
  sc_setup_conn_t *c;
  size_t n, cap;
  size_t *pidx; /* what sc_tcp_setup_fill appended: a slot, or SIZE_MAX for the listener */
  size_t pcap;
  int *waiting; /* peers with a pair being made or requests waiting for one */
  size_t nwaiting;
};

/* What the pair with peer waits for (how far its setup got), for a timeout's
 * text: out gets at most len bytes. */
void sc_tcp_setup_describe_pair(const sc_tcp_transport_t *tp, int peer, char *out, size_t len);

#endif
