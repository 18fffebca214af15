/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: the per-socket data path (tcp_io.c) used by the ops in tcp.c. */
#ifndef SC_TCP_IO_H
#define SC_TCP_IO_H

#include "transport/tcp/tcp_internal.h"

/* Room for `more` segments in q; grows by doubling, so a steady stream of
 * messages allocates nothing. */
sc_result_t sc_tcp_ring_reserve(sc_tcp_ring_t *q, size_t more);
/* The next free slot at the tail (after sc_tcp_ring_reserve). */
sc_tcp_seg_t *sc_tcp_ring_push(sc_tcp_ring_t *q);
/* Move bytes of socket `sock` of p without blocking; *moved counts them. */
sc_result_t sc_tcp_send_progress(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock, size_t *moved);
sc_result_t sc_tcp_recv_progress(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock, size_t *moved);
/* The peer's streams are unusable: close them, fail everything queued, keep
 * the text for later requests. Returns SC_ERR_REMOTE with the text. */
sc_result_t sc_tcp_peer_fail(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, int sock, const char *fmt,
                             ...) __attribute__((format(printf, 4, 5)));
/* Fail and forget every pending request of p (cancel_all). */
void sc_tcp_peer_cancel(sc_tcp_transport_t *tp, sc_tcp_peer_t *p, sc_result_t why);

#endif
