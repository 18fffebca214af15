/* SPDX-License-Identifier: BSD-3-Clause */
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
 * to that peer fail at once with the same text. A message whose print
 * (sc_tp_req_t's fp) differs from its receive's fails that receive with
 * SC_ERR_MISMATCH, which progress reports once; the pair's channel is then
 * out of step, and the peer's other requests fail as for a failed peer.
 *
 * What a transport provides: an sc_transport_ops_t with every op filled
 * (props included) but the optional board ops; its own type with sc_transport_t as the first
 * member, whose ops, rank and nranks create sets; its own member in sc_tp_req_t's union `u` for
 * per-request state; a row in transport/registry.c, which names it for SC_TRANSPORT. Composite
 * transports (mux.c) hold their children as sc_transport_t * and call them through child->ops. */
#ifndef SC_TRANSPORT_H
#define SC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "config.h"
#include "lib/base/socket.h"
#include "sparsecoll.h"

/* Bytes of an address blob exchanged at bootstrap. A UCP worker address
 * (transport/ucx/) alone is ~215 bytes with TCP and shared memory and grows
 * by tens of bytes per NIC or RDMA device. The largest bootstrap record
 * (this plus lib/core/comm.h's sc_peer_head_t, 140 bytes) must stay within
 * lib/control/'s SC_BOOT_BLOB_MAX (1024; checked in lib/core/comm.c). */
#define SC_TP_ADDR_MAX 768

/* Bytes of an operation's print in a message header: every message says
 * which call of the communicator it belongs to, so that ranks that called
 * different operations fail with SC_ERR_MISMATCH at their first message
 * instead of reading each other's bytes or waiting for the timeout. */
#define SC_TP_FP_LEN 16

typedef enum sc_tp_req_state {
  SC_TP_REQ_IDLE = 0,
  SC_TP_REQ_PENDING,
  SC_TP_REQ_DONE,
  SC_TP_REQ_ERROR
} sc_tp_req_state_t;

/* A request's private part belongs to the transport that accepted it: the
 * post's arguments, then one member of `u` per transport, so that no field
 * means one thing to TCP and another to shared memory. A new transport adds
 * its own member. */
typedef struct sc_tp_req {
  /* public: read by the caller */
  volatile int state; /* sc_tp_req_state_t */
  sc_result_t status; /* when state == ERROR */
  /* set by the caller after clearing the request, before posting: buf is
   * device memory (only to a transport whose props say device_mem) */
  int device;
  /* set by the caller after clearing the request, before posting a send:
   * the caller's next send to the same peer follows at once, so a transport
   * may hold this one back until that post or its next progress (TCP: both
   * leave in one segment, not two through a network's per-packet costs). */
  int more;
  /* set by the caller after clearing the request, before posting: the print
   * of the operation the message belongs to (lib/core/fingerprint.h's
   * sc_fp_msg_encode; all zero: none). A send carries it in the header its
   * transport writes; where the receive's print and the incoming message's
   * are both not all zero (no operation sends without one: a message
   * without a print is judged by sequence number and length alone, as a
   * forged or garbled header must be) and they differ, the receive fails with
   * SC_ERR_MISMATCH, the message's print in peer_fp, before any payload
   * byte reaches buf. A print that differs takes precedence over a length
   * that differs. */
  uint8_t fp[SC_TP_FP_LEN];
  /* public: when status == SC_ERR_MISMATCH, the print the peer's message
   * (or, for a transport whose receiver speaks first, the peer's receive)
   * carried */
  uint8_t peer_fp[SC_TP_FP_LEN];
  /* private to the transport: the post's arguments */
  int peer;
  int is_send;
  uint8_t *buf;
  size_t len;
  union {
    struct {
      int segs_left;          /* segments of the message not yet complete */
      struct sc_tp_req *next; /* posted before its peer was connected: the peer's queue */
    } tcp;
    struct {
      uint64_t done;          /* ring bytes moved, padding included */
      int rec_done;           /* the message's record is written (send) or read (receive) */
      uint64_t ticket;        /* single-copy send: the receiver's cma_done that completes it */
      struct sc_tp_req *next; /* the peer's queue */
    } shm;
    struct {
      void *reg;              /* registration cache entry holding buf (NULL for 0 bytes) */
      struct sc_tp_req *next; /* the peer's waiting list (no clear-to-send or no credit yet) */
      uint64_t msg;           /* the message's number to or from the peer */
    } verbs;
  } u;
} sc_tp_req_t;

/* The receiver's rule for prints (see fp above): 1 when a receive posted
 * with print `posted` must refuse a message carrying `sent`, that is when
 * both are prints (not all zero, not NULL) and they differ. tcp, shm and
 * verbs apply it; UCX matches on a hash of the print in its tag, so there a
 * receive with a print also refuses a message without one (ucx_internal.h). */
static inline int sc_tp_prints_differ(const uint8_t *posted, const uint8_t *sent) {
  uint8_t p = 0, s = 0, d = 0;
  for (int i = 0; posted && sent && i < SC_TP_FP_LEN; i++) {
    p |= posted[i];
    s |= sent[i];
    d |= (uint8_t)(posted[i] ^ sent[i]);
  }
  return p && s && d;
}

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
  int connect_lazy;              /* SC_CONNECT=lazy: connect_all only records the peers'
                                    addresses; a pair is connected when isend or irecv first
                                    names it (a transport may still connect eagerly) */
} sc_tp_config_t;

typedef struct sc_transport_ops sc_transport_ops_t;

/* The base every transport embeds as the first member of its own type
 * (sc_tcp_transport_t, sc_shm_transport_t, ...), which it reaches from the
 * base with a cast in one small inline helper. create fills all three. */
typedef struct sc_transport {
  const sc_transport_ops_t *ops;
  int rank, nranks;
} sc_transport_t;

/* What carries the messages between two ranks. */
typedef enum sc_tp_kind {
  SC_TP_KIND_NET = 0, /* a network stack (TCP), loopback included */
  SC_TP_KIND_SHM,     /* shared memory between processes */
  SC_TP_KIND_INPROC   /* memory of one process */
} sc_tp_kind_t;

typedef enum sc_tp_locality {
  SC_TP_SAME_PROCESS = 0,
  SC_TP_SAME_HOST, /* shares the CPUs and memory of one machine */
  SC_TP_OTHER_HOST /* across a network, emulated or not: TCP counts a rank in another network
                      namespace of this machine (its own address) as another host */
} sc_tp_locality_t;

/* The link between two ranks, as the cost model needs it (lib/core/links.c
 * folds the props of every pair into the model lib/tune/ prices). */
typedef struct sc_tp_props {
  sc_tp_kind_t kind;
  sc_tp_locality_t locality;
  double latency_s;       /* nominal one-way latency of a small message; 0 = unknown */
  double bandwidth_bps;   /* nominal bytes per second of one direction; 0 = unknown */
  size_t single_copy_min; /* messages of at least this many bytes are read by the receiver
                             from the sender's memory (one copy, the send completes when it
                             is read); 0 = never */
  int receiver_spins;     /* 1: a waiting receiver polls SC_SPIN_US before it sleeps; 0: it
                             sleeps at once */
  int device_mem;         /* 1: isend/irecv take device buffers (req->device) for this pair
                             and move them device to device (CUDA IPC, GPUDirect); 0: the
                             executor stages device buffers through pinned host memory */
  int costs_unfitted;     /* 1: a pair of one host whose costs the one-host model's defaults
                             (lib/tune/tune_model.c, fitted to shm and tcp) do not describe, so
                             SC_TUNE=auto calibrates instead (UCX, verbs) */
} sc_tp_props_t;

struct sc_transport_ops {
  const char *name;
  /* The most bytes of address blob create writes, the same on every rank:
   * the room a rank's blob gets in its bootstrap record (lib/core/comm.c),
   * so that the table every rank receives grows by what the transport uses
   * per rank, not by SC_TP_ADDR_MAX. 0: up to SC_TP_ADDR_MAX. */
  size_t addr_max;
  /* Memory one connected same-host pair takes in its receiver's budget at
   * full size (shm's channel: a control page and a ring), which the cost
   * model keeps the algorithms that connect every pair within
   * (lib/core/peers.c); 0: none. */
  size_t pair_bytes;
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
  /* Any thread: make a progress() (or wait()) blocked in poll return now. */
  void (*wake)(sc_transport_t *tp);
  /* Optional (NULL: not offered). Blocks until a peer may have sent
   * something, wake() was called, or timeout_ms passed, without moving a byte
   * or touching a request, so that it may run while another thread is inside
   * progress(); may return early. One thread at a time calls it. The
   * point-to-point lane waits here with its engine free for a caller to
   * drive (lib/core/p2p_lane.c). */
  void (*wait)(sc_transport_t *tp, int timeout_ms);
  /* Closes everything; does not touch requests (call cancel_all first). */
  void (*destroy)(sc_transport_t *tp);
  /* The link between ranks a and b (a != b), once connect_all succeeded.
   * It must answer for ANY pair, not only pairs that include this rank,
   * and every rank must give the same answer for the same pair: every
   * rank derives the cost model from the props of all pairs, and ranks
   * with different models choose different algorithms and deadlock. So
   * compute it only from what every rank has, the address blobs all
   * ranks exchanged at connect_all (put what it needs into the blob),
   * never from this process's own view (its CPU count, its routes, which
   * peers it happened to connect to). */
  sc_result_t (*props)(sc_transport_t *tp, int a, int b, sc_tp_props_t *out);
  /* Optional (NULL where a transport has none): the board, memory that
   * every rank of the communicator reads, for the core's smallest
   * collectives (lib/core/board.c). board_max: the bytes of one rank's post at
   * most, 0 where this communicator has no board (a peer on another
   * host); the same on every rank, once connect_all succeeded. */
  size_t (*board_max)(sc_transport_t *tp);
  /* This rank's post for its board call number seq (1, 2, ...): fp names
   * the call, for the readers' check; len <= board_max. */
  void (*board_post)(sc_transport_t *tp, uint64_t seq, uint64_t fp, const void *data, size_t len);
  /* peer's post for call seq: *data (NULL while it has not posted) and its
   * fp. The bytes stay in place until this rank posts call seq + 1. now_ms
   * (0: skip) lets it check the peer's liveness when due; a peer that left
   * without posting fails with SC_ERR_REMOTE naming it. */
  sc_result_t (*board_peek)(sc_transport_t *tp, int peer, uint64_t seq, int64_t now_ms,
                            const void **data, uint64_t *fp);
  /* Optional (NULL where a transport has none): a read of len bytes at
   * address `at` of peer's memory into buf, now, in the calling thread (the
   * point-to-point lane's rendezvous: its sender offers its buffer, and
   * keeps it in place until the receiver says it is read). SC_SUCCESS;
   * SC_ERR_UNSUPPORTED, nothing failed and no error text, where this pair
   * cannot (another host, reads not permitted, the address not readable):
   * the caller asks for the data instead; SC_ERR_REMOTE, the peer failed as
   * for a request, where it exited or closed its end, also after the read
   * began (it withdrew: the bytes may be torn). */
  sc_result_t (*rget)(sc_transport_t *tp, int peer, void *buf, uint64_t at, size_t len);
  /* Optional, with rget: whether peer's rget of this rank's memory can work
   * now (the pair is set up and the peer found it may read this process),
   * so that an owner offers its buffer only where it will be read. */
  int (*peer_reads)(sc_transport_t *tp, int peer);
  /* Optional, with rget: closes the pair, so that the peer's rget of this
   * rank's memory fails from now on, including one under way (it sees the
   * close once its read ends). The owner of an offered buffer calls it
   * before it gives the buffer back without the peer having read it. */
  void (*withdraw)(sc_transport_t *tp, int peer);
};

extern const sc_transport_ops_t sc_tcp_transport;
/* Shared memory to every peer; connect_all fails if one is on another host. */
extern const sc_transport_ops_t sc_shm_transport;
/* Per peer: shm for same-host peers, tcp for the others (SC_TRANSPORT=auto). */
extern const sc_transport_ops_t sc_mux_transport;
#ifdef SC_HAVE_UCX
/* UCX (transport/ucx/): UCP tagged messages; UCX picks RDMA, shm, TCP itself. */
extern const sc_transport_ops_t sc_ucx_transport;
#endif
#ifdef SC_HAVE_VERBS
/* ibverbs RC (transport/verbs/), libibverbs loaded at run time. */
extern const sc_transport_ops_t sc_verbs_transport;
#endif

/* SC_SHM_BUDGET_BYTES's largest value. */
#define SC_SHM_BUDGET_MAX ((size_t)1 << 50)

/* This host's memory in bytes (0: unknown). */
static inline uint64_t sc_tp_host_mem_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* The shared-memory budget of a rank whose host has mem_bytes of memory and
 * `local` ranks, where SC_SHM_BUDGET_BYTES does not set it: both transports
 * of a communicator (collectives and point-to-point) have a segment, a
 * quarter of the memory at most between them. */
static inline uint64_t sc_tp_shm_default_budget(uint64_t mem_bytes, int local) {
  return local < 1 || mem_bytes == 0 ? UINT64_MAX : mem_bytes / 8 / (uint64_t)local;
}

#endif
