/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport internals shared by connection setup (tcp_conn.c), the data
 * path (tcp.c) and the unit test that forges setup messages.
 *
 * Each pair of ranks is joined by nsocks sockets (SC_NSOCKS of the rank that
 * connects; the other adopts its count). Under SC_CONNECT=eager every higher
 * rank connects to every lower rank in connect_all. Under SC_CONNECT=lazy
 * (the default) connect_all only records the address table and a pair is
 * connected when a request first names it (tcp_setup.c says who connects and
 * how a race of both sides is settled); requests posted before that wait in
 * the peer's queue and are placed, in posting order, once it is connected. A message is cut
 * into k = stripes(len, nsocks) contiguous segments; segment j travels on
 * socket j. Both sides compute the same placement from the length they
 * posted, so each socket carries its segments in posting order and the
 * receiver knows which request every arriving segment belongs to; a message
 * of at most SC_TCP_STRIPE_MIN bytes is one segment on socket 0.
 *
 * Why always from socket 0 (wire version 3 on; version 2 rotated a cursor over
 * the sockets, message after message): a socket that carries every other
 * message of a step-by-step algorithm idles between its bursts, and behind
 * a shaped link TCP then stalls on the tail of each burst (loss probes,
 * spurious retransmits: the hierarchical all-reduce's rails on the bed's
 * 4 x 2 took 1.4-2.0x their link time with 64 KiB steps, 1.0-1.1x on one
 * socket; perf/README.md). Socket 0 now carries every message and the
 * others only the stripes of large ones.
 *
 * Wire formats, multi-byte fields big-endian:
 *   address blob : u32 'SCTB', packed address (SC_SOCKET_ADDR_WIRE_LEN), u32 online CPUs
 *                  of its host (every rank's props of any pair need them)
 *   hello        : u32 'SCTH', u32 version, u8 secret[32], u32 from, u32 to, u32 nranks,
 *                  u32 socket index, u32 nsocks (the connecting rank sends it, one hello
 *                  per socket)
 *   ack          : u32 'SCTK', u32 from, u32 to, u32 socket index (the answer)
 *   refusal      : u32 'SCTN', u32 from, u32 to, u32 socket index (the answer of a higher
 *                  rank that connects to the sender itself: its own connection wins)
 *   segment      : u32 'SCTM', u32 message sequence number (per peer and direction,
 *                  wrapping), u64 length of the whole message, the print of the
 *                  operation it belongs to (SC_TP_FP_LEN bytes, sc_tp_req_t's fp;
 *                  every segment of a message carries it), then this segment's bytes of
 *                  the payload
 * Version 4 added the print, version 5 hellos from either rank of a pair and the
 * refusal: a peer of another version is refused at its hello instead of having
 * its headers misread. */
#ifndef SC_TCP_INTERNAL_H
#define SC_TCP_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "lib/base/socket.h"
#include "lib/base/wire.h"
#include "lib/base/yield.h"
#include "transport/transport.h"

#define SC_TCP_BLOB_MAGIC  0x53435442u /* 'SCTB' */
#define SC_TCP_HELLO_MAGIC 0x53435448u /* 'SCTH' */
#define SC_TCP_ACK_MAGIC   0x5343544bu /* 'SCTK' */
#define SC_TCP_NACK_MAGIC  0x5343544eu /* 'SCTN' */
#define SC_TCP_MSG_MAGIC   0x5343544du /* 'SCTM' */
#define SC_TCP_VERSION     5

#define SC_TCP_BLOB_LEN  (4 + SC_SOCKET_ADDR_WIRE_LEN + 4)
#define SC_TCP_HELLO_LEN (4 + 4 + SC_SECRET_LEN + 4 * 5)
#define SC_TCP_ACK_LEN   16
#define SC_TCP_HDR_LEN   (16 + SC_TP_FP_LEN)
#define SC_TCP_HDR_FP    16 /* where the print starts */

#define SC_TCP_MAX_SOCKS 64
/* Messages up to this size are not split: below it the extra syscalls and
 * wake-ups of several sockets cost more than the parallel copies gain. */
#define SC_TCP_STRIPE_MIN (256u << 10)
/* Stripe boundaries fall on this multiple, so that each copy starts aligned. */
#define SC_TCP_STRIPE_ALIGN 4096u
/* A segment of at most this many payload bytes is read with its header in
 * one recvmsg, the payload into the transport's stage and copied to its
 * buffer once the header checks out: a small message costs one system call
 * instead of two, and no unchecked byte reaches a receive's buffer. */
#define SC_TCP_STAGE_BYTES 2048u

_Static_assert(SC_TCP_BLOB_LEN <= SC_TP_ADDR_MAX, "address blob too large");

/* One segment of one message queued on one socket. Send and receive queues
 * are rings of these per socket; the request itself counts its unfinished
 * segments in u.tcp.segs_left (see tcp.c). */
typedef struct sc_tcp_seg {
  sc_tp_req_t *req;
  size_t off, len; /* the part of req->buf this segment carries */
  size_t done;     /* payload bytes of this segment moved */
  size_t hdr_done;
  uint32_t seq; /* the message's sequence number */
  int nseg;     /* segments of the message (on sockets 0..nseg-1) */
  uint8_t hdr[SC_TCP_HDR_LEN];
} sc_tcp_seg_t;

typedef struct sc_tcp_ring {
  sc_tcp_seg_t *v;
  size_t head, count, cap;
} sc_tcp_ring_t;

typedef struct sc_tcp_sock {
  int fd;
  sc_tcp_ring_t sq, rq;
  int held; /* a send posted with `more` is queued unsent: the next post pushes it */
} sc_tcp_sock_t;

typedef enum sc_tcp_link {
  SC_TCP_LINK_NONE = 0, /* nothing started */
  SC_TCP_LINK_OUT,      /* this rank connects */
  SC_TCP_LINK_IN        /* the peer connects */
} sc_tcp_link_t;

typedef struct sc_tcp_peer {
  int nsocks;                    /* 0 until the first hello or connect; then fixed */
  int nconn;                     /* sockets established during setup */
  int connected;                 /* all nsocks sockets established */
  int dead;                      /* failed: requests to it fail at once with err */
  int link;                      /* sc_tcp_link_t: who connects the pair */
  int refused;                   /* our hellos were refused: the peer's own connection comes */
  int64_t setup_deadline;        /* ms: the pair must be connected by then */
  sc_tp_req_t *pend, *pend_tail; /* posted before the pair was connected (u.tcp.next) */
  sc_tcp_sock_t *socks;
  /* Its listener as packed in its address blob (lib/base/socket.h), checked by
   * connect_all; all zero before. Kept packed and the error text allocated
   * when the peer fails: every rank holds one entry per rank of the job. */
  uint8_t addr[SC_SOCKET_ADDR_WIRE_LEN];
  int host_cpus;  /* from its address blob */
  int host_ranks; /* ranks advertising its address: those sharing its host */
  uint32_t send_seq, recv_seq;
  int nsend, nrecv; /* pending requests (not segments) */
  char *err;        /* why it failed (SC_TCP_ERR_LEN bytes), once dead */
} sc_tcp_peer_t;

/* Bytes of a failed peer's error text and of a peer's name. */
#define SC_TCP_ERR_LEN  320
#define SC_TCP_NAME_LEN 96

typedef struct sc_tcp_transport {
  sc_transport_t base;
  int nsocks; /* SC_NSOCKS: how many this rank opens to each lower rank */
  int spin_us;
  sc_yield_t yield; /* whether the spin may yield the core now (lib/base/yield.h) */
  uint8_t secret[SC_SECRET_LEN];
  size_t sockbuf;
  int timeout_ms;
  int listen_fd;
  sc_sockaddr_t listen_addr;
  int wake_fd;   /* eventfd: wake() makes a progress() blocked in poll return */
  int connected; /* connect_all succeeded */
  int lazy;      /* SC_CONNECT=lazy */
  int npeers_connected;
  struct sc_tcp_setup *setup; /* connections being made (tcp_setup.c) */
  size_t data_socks;          /* sockets of the connected pairs */
  int64_t listener_looked_ms; /* when a call that may not block last polled the listener */
  sc_tcp_peer_t *peers;
  /* progress()'s poll set: wake_fd, then the setup's descriptors, then every
   * data socket with work; grown when connections are added, never per call. */
  struct pollfd *pfds;
  int *pfd_peer, *pfd_sock;
  size_t npfds;
  /* wait()'s set: wake_fd, the listener (lazy) and every data socket, rebuilt
   * under wlock by the progress thread when a pair is connected (generation
   * wgen); wait() polls its own copy, in which a socket that reported a
   * hang-up or error is dropped (progress() handles that). */
  pthread_mutex_t wlock;
  struct pollfd *wset;
  size_t nwset, wset_cap;
  unsigned wgen;
  struct pollfd *wpfds;
  size_t nwpfds, wpfds_cap;
  unsigned wpfds_gen;
  /* Small payloads read with their header (SC_TCP_STAGE_BYTES); only the
   * progress thread reads into it, and copies out before it returns. */
  uint8_t stage[SC_TCP_STAGE_BYTES];
} sc_tcp_transport_t;

static inline sc_tcp_transport_t *sc_tcp_of(sc_transport_t *tp) {
  return (sc_tcp_transport_t *)tp;
}

/* TCP waits without spinning when more of its ranks share this host than it
 * has online CPUs (a spinning rank would delay the very sender it waits
 * for); its props tell the cost model so, which waits the same way. */
static inline int sc_tcp_spins(int local_ranks, long cpus) {
  return !(cpus > 0 && local_ranks > cpus);
}

/* How many segments a len-byte message is cut into over nsocks sockets, and
 * the size of every segment but the last. */
static inline int sc_tcp_stripes(size_t len, int nsocks, size_t *stripe) {
  if (nsocks <= 1 || len <= SC_TCP_STRIPE_MIN) {
    *stripe = len;
    return 1;
  }
  size_t k = (len + SC_TCP_STRIPE_MIN - 1) / SC_TCP_STRIPE_MIN;
  if (k > (size_t)nsocks) k = (size_t)nsocks;
  size_t s = (len + k - 1) / k;
  s = (s + SC_TCP_STRIPE_ALIGN - 1) / SC_TCP_STRIPE_ALIGN * SC_TCP_STRIPE_ALIGN;
  *stripe = s;
  return (int)((len + s - 1) / s);
}

void sc_tcp_encode_hello(uint8_t out[SC_TCP_HELLO_LEN], const uint8_t secret[SC_SECRET_LEN],
                         int from, int to, int nranks, int sock, int nsocks);

/* ---- parsers of a peer's bytes: pure functions (bytes and this rank's view
 * in, verdict out) so that test/fuzz/fuzz_tcp_*.c fuzzes the code the
 * transport runs. ---- */

typedef enum sc_tcp_hdr_verdict {
  SC_TCP_HDR_OK = 0,
  SC_TCP_HDR_BAD_MAGIC,
  SC_TCP_HDR_BAD_SEQ,  /* another message's segment: the two sides' lengths disagree */
  SC_TCP_HDR_BAD_LEN,  /* the right message, but not the posted length */
  SC_TCP_HDR_BAD_PRINT /* a message of another operation than the posted receive's */
} sc_tcp_hdr_verdict_t;

typedef struct sc_tcp_hdr {
  uint32_t magic, seq;
  uint64_t len;
  uint8_t fp[SC_TP_FP_LEN];
} sc_tcp_hdr_t;

/* A segment header against the posted message (sequence number seq, len
 * bytes, print fp: all zero or NULL checks none); the fields land in *out
 * whatever the verdict, for the error text. After the magic the print comes
 * first: ranks in different operations disagree about sequence numbers and
 * lengths too, and the print is what names the cause. */
sc_tcp_hdr_verdict_t sc_tcp_hdr_check(const uint8_t hdr[SC_TCP_HDR_LEN], uint32_t seq, size_t len,
                                      const uint8_t *fp, sc_tcp_hdr_t *out);

typedef struct sc_tcp_hello {
  uint32_t magic, version, from, to, nranks, sock, nsocks;
} sc_tcp_hello_t;

/* A complete hello as rank `rank` of `nranks` with the job's secret sees it:
 * NULL when it may come from a higher rank of this job (fields in *out: from
 * in (rank, nranks), 1 <= nsocks <= SC_TCP_MAX_SOCKS, sock < nsocks), else
 * why it is dropped (in why, or a constant text). Whether it fits what that
 * peer announced before is the caller's business. */
const char *sc_tcp_hello_parse(const uint8_t buf[SC_TCP_HELLO_LEN],
                               const uint8_t secret[SC_SECRET_LEN], int rank, int nranks,
                               sc_tcp_hello_t *out, char *why, size_t whylen);

void sc_tcp_encode_ack(uint8_t out[SC_TCP_ACK_LEN], int from, int to, int sock);
/* The ack of hello (peer -> rank, socket sock): 1 when it is exactly that. */
int sc_tcp_ack_valid(const uint8_t buf[SC_TCP_ACK_LEN], int peer, int rank, int sock);

void sc_tcp_encode_nack(uint8_t out[SC_TCP_ACK_LEN], int from, int to, int sock);
/* The refusal of hello (peer -> rank, socket sock): 1 when it is exactly that. */
int sc_tcp_nack_valid(const uint8_t buf[SC_TCP_ACK_LEN], int peer, int rank, int sock);

/* tcp_conn.c */
sc_result_t sc_tcp_create(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                          size_t *addrlen);
void sc_tcp_destroy(sc_transport_t *tp);
/* nsocks closed sockets and empty queues for one peer (any it had are freed:
 * only while no segment is queued). */
sc_result_t sc_tcp_peer_init_socks(sc_tcp_transport_t *tp, int peer, int nsocks);
/* Room for n entries in progress()'s poll set. */
sc_result_t sc_tcp_pollset_reserve(sc_tcp_transport_t *tp, size_t n);
/* Rebuilds wait()'s set from the connected peers (progress thread). */
sc_result_t sc_tcp_wset_rebuild(sc_tcp_transport_t *tp);
void sc_tcp_peer_close(sc_tcp_peer_t *p);
/* Frees what a peer entry holds besides its sockets (its error text). */
void sc_tcp_peer_release(sc_tcp_peer_t *p);
/* The peer's name for error texts, "rank 3 (127.0.0.1:40123)" ("rank 3" before
 * connect_all read its address), in buf of SC_TCP_NAME_LEN bytes. */
const char *sc_tcp_peer_name(const sc_tcp_transport_t *tp, const sc_tcp_peer_t *p,
                             char buf[SC_TCP_NAME_LEN]);
/* The peer's listener unpacked (connect_all checked it). */
void sc_tcp_peer_sockaddr(const sc_tcp_peer_t *p, sc_sockaddr_t *out);
/* The error text of a failed peer (lib/base/error.h's sc_errtext_set). */
static inline const char *sc_tcp_peer_err(const sc_tcp_peer_t *p) {
  return sc_errtext(p->err);
}

/* tcp.c: the pair's sockets are all established; places its waiting
 * requests. Errors fail the peer. */
sc_result_t sc_tcp_peer_connected(sc_tcp_transport_t *tp, int peer);
/* The pair could not be connected: the peer fails with `code` and the text. */
sc_result_t sc_tcp_peer_setup_failed(sc_tcp_transport_t *tp, int peer, sc_result_t code,
                                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

typedef struct sc_tcp_setup sc_tcp_setup_t;

/* tcp_setup.c: connections being made, for connect_all (eager: to every lower
 * rank, waiting for all) and for progress() (lazy: on first use). */
sc_result_t sc_tcp_setup_open(sc_tcp_transport_t *tp);
void sc_tcp_setup_close(sc_tcp_transport_t *tp);
/* Starts this rank's connection of the pair (no-op when one exists). */
sc_result_t sc_tcp_setup_begin(sc_tcp_transport_t *tp, int peer);
/* Retries due, deadlines passed (those peers fail); lowers *wake_at to the
 * next moment it has work. */
sc_result_t sc_tcp_setup_tick(sc_tcp_transport_t *tp, int64_t *wake_at);
/* Appends the listener (when connections may come) and every connection
 * waiting for I/O to pfds at *n (room reserved by the caller:
 * sc_tcp_setup_nfds()). */
size_t sc_tcp_setup_nfds(const sc_tcp_transport_t *tp);
void sc_tcp_setup_fill(sc_tcp_transport_t *tp, struct pollfd *pfds, size_t *n);
/* Handles what poll reported for the entries sc_tcp_setup_fill appended at
 * pfds[0..n); *changed tells whether a pair got connected or a peer failed. */
sc_result_t sc_tcp_setup_handle(sc_tcp_transport_t *tp, struct pollfd *pfds, size_t n,
                                int *changed);
/* Whether anything of the setup waits (connections in flight or due). */
int sc_tcp_setup_busy(sc_tcp_transport_t *tp);
/* peer has requests waiting for the pair: its deadline and the lower rank's
 * delayed connect apply. */
void sc_tcp_setup_waiting(sc_tcp_transport_t *tp, int peer);
/* connect_all's deadline passed: the error listing every peer not connected. */
sc_result_t sc_tcp_setup_timeout_error(sc_tcp_transport_t *tp);
sc_result_t sc_tcp_connect_all(sc_transport_t *tp, const void *addrs, size_t stride);
sc_result_t sc_tcp_props(sc_transport_t *tp, int a, int b, sc_tp_props_t *out);
/* tcp.c, for the mux (transport/mux.c), which sleeps on these and shared
 * memory's doorbell at once: the descriptors a progress would sleep on (the
 * wake-up, the setup's, every socket with bytes to move, each with what it
 * waits for), valid until the next progress; then sc_tcp_slept with their
 * revents, which consumes a wake-up (it would make every later sleep return
 * at once). The bytes are moved by the next progress. */
sc_result_t sc_tcp_sleep_set(sc_transport_t *tp, struct pollfd **fds, int *n);
void sc_tcp_slept(sc_transport_t *tp);

#endif
