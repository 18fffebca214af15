/* One vtable for every transport (modelled on NCCL's net plugin and Gloo's
 * pairs). A transport instance belongs to one communicator and is driven by
 * that communicator's progress thread only (no locking inside), except
 * `wake`, which any thread may call.
 *
 * Messages are tagged by order: per peer, receives match sends in the order
 * both sides posted them. The receiver posts the exact length it expects; a
 * message of any other length fails with SC_ERR_REMOTE naming the peer.
 * Requests are caller-owned (no allocation per message); a pending request
 * must not be reused or freed until it completes or cancel_all returned.
 * Sends to one's own rank are invalid (the executor copies locally).
 * After a peer fails, progress reports SC_ERR_REMOTE once; later requests
 * to that peer fail at once with the same text. */
#ifndef SC_TRANSPORT_H
#define SC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "base/socket.h"
#include "sparsecoll.h"

#define SC_TP_ADDR_MAX 192 /* bytes of an address blob exchanged at bootstrap */

typedef enum sc_tp_req_state {
  SC_TP_REQ_IDLE = 0,
  SC_TP_REQ_PENDING,
  SC_TP_REQ_DONE,
  SC_TP_REQ_ERROR
} sc_tp_req_state_t;

typedef struct sc_tp_req {
  /* public: read by the caller */
  volatile int state; /* sc_tp_req_state_t */
  sc_result_t status; /* when state == ERROR */
  /* private to the transport */
  int peer;
  int is_send;
  uint8_t *buf;
  size_t len;
  size_t done; /* payload bytes moved */
  uint8_t hdr[16];
  size_t hdr_done;
  struct sc_tp_req *next;
} sc_tp_req_t;

typedef struct sc_tp_config {
  int rank;
  int nranks;
  uint8_t secret[SC_SECRET_LEN]; /* every connection presents it; others are dropped */
  char ifname[64];               /* SC_SOCKET_IFNAME ("" = automatic) */
  const void *route_hint;        /* struct sockaddr_storage * of the bootstrap root, may be NULL:
                                    without ifname, advertise the local address that reaches it */
  size_t sockbuf_bytes;          /* SO_SNDBUF/SO_RCVBUF, 0 = kernel default */
  int timeout_ms;                /* bound for connection setup */
  int nsocks;                    /* SC_NSOCKS: TCP data sockets per peer (>= 1) */
  int spin_us;                   /* SC_SPIN_US: poll this long before sleeping */
} sc_tp_config_t;

/* Shared memory sends a message of at least this many bytes by single copy:
 * the receiver reads it from the sender's memory (process_vm_readv); smaller
 * ones go through the channel's ring. The cost model (tune/tune_model.c)
 * charges the copy accordingly. Why so large: a single-copy send completes
 * only when its receiver has read it and each read walks the sender's page
 * tables, while two copies through the ring let the sender move on at once;
 * on 4 ranks on 2 cores all-reduce of 64 KiB-1 MiB took 1.3-1.8x as long
 * with single copy from 16 KiB as with it from 256 KiB (the ring's size). */
#define SC_SHM_SINGLE_COPY_MIN ((size_t)256 << 10)

/* TCP waits without spinning when more of its ranks share this host than it
 * has online CPUs (a spinning rank would delay the very sender it waits
 * for); the cost model waits the same way. */
static inline int sc_tcp_spins(int local_ranks, long cpus) {
  return !(cpus > 0 && local_ranks > cpus);
}

typedef struct sc_transport sc_transport_t; /* each transport defines its own */

typedef struct sc_transport_ops {
  const char *name;
  /* Open the local endpoint; write its address blob (<= SC_TP_ADDR_MAX bytes)
   * to addr and its length to *addrlen (output only). */
  sc_result_t (*create)(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                        size_t *addrlen);
  /* Connect to every peer. addrs holds nranks blobs of `stride` bytes, rank-major. */
  sc_result_t (*connect_all)(sc_transport_t *tp, const void *addrs, size_t stride);
  sc_result_t (*isend)(sc_transport_t *tp, int peer, const void *buf, size_t len, sc_tp_req_t *req);
  sc_result_t (*irecv)(sc_transport_t *tp, int peer, void *buf, size_t len, sc_tp_req_t *req);
  /* Move bytes; wait at most timeout_ms for readiness (0 = do not block). Returns an
   * error when a peer failed (its pending requests are failed too); *progressed
   * tells whether any byte moved. */
  sc_result_t (*progress)(sc_transport_t *tp, int timeout_ms, int *progressed);
  /* Fail and forget every pending request (abort, error cleanup). */
  void (*cancel_all)(sc_transport_t *tp, sc_result_t why);
  /* Memory registration hooks; tcp and shm implement them as no-ops. */
  sc_result_t (*reg)(sc_transport_t *tp, void *buf, size_t len, void **handle);
  sc_result_t (*dereg)(sc_transport_t *tp, void *handle);
  /* Any thread: make a progress() blocked in poll return now. */
  void (*wake)(sc_transport_t *tp);
  /* Closes everything; does not touch requests (call cancel_all first). */
  void (*destroy)(sc_transport_t *tp);
} sc_transport_ops_t;

extern const sc_transport_ops_t sc_tcp_transport;
/* Shared memory to every peer; connect_all fails if one is on another host. */
extern const sc_transport_ops_t sc_shm_transport;
/* Per peer: shm for same-host peers, tcp for the others (SC_TRANSPORT=auto). */
extern const sc_transport_ops_t sc_mux_transport;

#endif
