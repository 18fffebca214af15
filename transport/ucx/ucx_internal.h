/* SPDX-License-Identifier: BSD-3-Clause */
/* UCX transport internals shared by setup (ucx_setup.c) and the data path
 * (ucx.c). The tag and blob helpers at the top need no UCX and are tested
 * on their own (test/unit/test_ucx_tag.c).
 *
 * Matching. Every communicator has its own UCP context and worker, so
 * messages of two communicators never meet. Within one, a message's 64-bit
 * tag is the sender's rank (high 16 bits), the sender's count of sends to
 * that receiver (32 bits) and a 16-bit hash of the message's print (low 16
 * bits, sc_ucx_fp_hash: 0 for no print). The receiver posts each receive
 * from a peer with the next number it expects from that peer; a receive
 * with a print also names its hash, under a full mask, so that a message of
 * another operation never matches it and no byte of it reaches the buffer:
 * progress finds such a message by probing the receive's tag without the
 * hash bits (ucx.c). A receive without a print masks the hash bits out. A
 * receive thus matches exactly the send posted in the same position,
 * whatever order UCX delivers them in, which is the transport contract's
 * ordering.
 *
 * Why 32 bits of count are enough: a receive names the count modulo 2^32,
 * so two messages of a pair could be confused only with 2^32 of them in
 * flight at once. A sender runs ahead of its receiver only by messages the
 * receiver's UCX already holds (an eager send completes once buffered; a
 * rendezvous send waits for the receive), each one at least a buffer
 * descriptor of some hundred bytes there: 2^32 of them is hundreds of GiB
 * held by one worker, long past SC_TIMEOUT_MS of an executor that waits on
 * each operation's receives.
 *
 * Why a hash and not the print: the tag is the only header a UCP tagged
 * message has. Carrying the 16 bytes themselves would take a second
 * message, or an iov datatype ([print | payload]) whose payload lands in
 * the buffer before the print can be read, and which UCX cannot mix with a
 * device buffer (one memory type per operation). So a mismatch names the
 * peer and its message, not the peer's call (peer_fp stays zero); two
 * prints that share a hash (1 in 65536) are left to the length check and
 * the liveness watch's comparison of the calls.
 *
 * Lanes. A pair of ranks on one host talks through the host lane, a pair on
 * two hosts through the net lane. They are one UCP context and worker unless
 * their rendezvous thresholds differ (sc_ucx_rndv_plan): then the net lane
 * is a second context and worker, and the peers of other hosts reach it.
 *
 * Address blob (host byte order: it is only compared, never interpreted
 * across machines of different endianness):
 *   u32 'SCUX', u16 host-lane worker address length, u8 flags, u8 0,
 *   i32 rank, i32 pid, i32 host CPUs, u64 FNV-1a of the hostname, u64 of
 *   the boot id, u64 network namespace inode, u16 net-lane worker address
 *   length (0: no net lane of its own), 6 bytes 0, then the host lane's
 *   worker address and the net lane's (its network-only address). */
#ifndef SC_UCX_INTERNAL_H
#define SC_UCX_INTERNAL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/base/yield.h"
#include "transport/transport.h"

#define SC_UCX_BLOB_MAGIC 0x53435558u /* 'SCUX' */
#define SC_UCX_RANK_BITS  16
#define SC_UCX_SEQ_BITS   32
#define SC_UCX_HASH_BITS  16
#define SC_UCX_SEQ_MASK   ((UINT64_C(1) << SC_UCX_SEQ_BITS) - 1)
#define SC_UCX_HASH_MASK  ((UINT64_C(1) << SC_UCX_HASH_BITS) - 1)
/* A receive's tag mask without a print: sender and count only. */
#define SC_UCX_MASK_NO_PRINT (~SC_UCX_HASH_MASK)
_Static_assert(SC_UCX_RANK_BITS + SC_UCX_SEQ_BITS + SC_UCX_HASH_BITS == 64, "ucx tag layout");

/* flags: this rank's UCX may use shared memory (UCX_TLS allows it and its
 * worker address has it), so a same-host pair is carried by memory. */
#define SC_UCX_FLAG_SHM 1u
/* flags: device pointers may go to this rank's UCX as they are: its UCP
 * context reports CUDA memory (ucp_context_query's memory types) and the
 * library's device runtime is CUDA. The stand-in runtime's device memory
 * (test/devfake) is an emulation UCX cannot read, and Debian's UCX 1.13 has
 * no CUDA support: both leave the bit clear, and the executor stages. */
#define SC_UCX_FLAG_CUDA 2u

typedef struct sc_ucx_blob_hdr {
  uint32_t magic;
  uint16_t addr_len;
  uint8_t flags;
  uint8_t zero;
  int32_t rank;
  int32_t pid;
  int32_t host_cpus;
  uint64_t host_hash;
  uint64_t boot_hash;
  uint64_t netns;
  uint16_t net_addr_len;
  uint16_t zero2[3];
} sc_ucx_blob_hdr_t;

#define SC_UCX_ADDR_ROOM (SC_TP_ADDR_MAX - sizeof(sc_ucx_blob_hdr_t))

enum { SC_UCX_LANE_HOST = 0, SC_UCX_LANE_NET = 1, SC_UCX_LANES = 2 };

/* Where in b's blob (of blob_len bytes) the worker address for a pair of
 * the given lane starts, and its length: the net lane's address when b has
 * a net lane of its own, else its only one. 0 when the lengths do not fit
 * blob_len (a malformed blob). */
static inline size_t sc_ucx_blob_address(const sc_ucx_blob_hdr_t *b, size_t blob_len, int lane,
                                         size_t *len) {
  size_t hdr = sizeof(*b), host = b->addr_len, net = b->net_addr_len;
  *len = 0;
  if (host == 0 || hdr + host + net > blob_len) return 0;
  if (lane == SC_UCX_LANE_NET && net > 0) {
    *len = net;
    return hdr + host;
  }
  *len = host;
  return hdr;
}

_Static_assert(SC_RANKS_MAX <= (1 << SC_UCX_RANK_BITS), "ranks do not fit the ucx tag");

static inline uint64_t sc_ucx_tag(int sender, uint64_t seq, unsigned hash) {
  return ((uint64_t)(uint32_t)sender << (SC_UCX_SEQ_BITS + SC_UCX_HASH_BITS)) |
         (seq & SC_UCX_SEQ_MASK) << SC_UCX_HASH_BITS | ((uint64_t)hash & SC_UCX_HASH_MASK);
}

static inline int sc_ucx_tag_sender(uint64_t tag) {
  return (int)(tag >> (SC_UCX_SEQ_BITS + SC_UCX_HASH_BITS));
}

static inline uint64_t sc_ucx_tag_seq(uint64_t tag) {
  return (tag >> SC_UCX_HASH_BITS) & SC_UCX_SEQ_MASK;
}

static inline unsigned sc_ucx_tag_hash(uint64_t tag) {
  return (unsigned)(tag & SC_UCX_HASH_MASK);
}

/* The print's 16-bit hash for the tag: FNV-1a over its bytes, folded; 0 only
 * for the all-zero print (none), so that a message without a print never
 * matches a receive that has one. Every rank computes it alike. */
static inline unsigned sc_ucx_fp_hash(const uint8_t fp[SC_TP_FP_LEN]) {
  uint32_t h = 2166136261u;
  int any = 0;
  for (int i = 0; i < SC_TP_FP_LEN; i++) {
    any |= fp[i];
    h = (h ^ fp[i]) * 16777619u;
  }
  if (!any) return 0;
  unsigned f = (unsigned)((h >> 16) ^ (h & 0xffffu));
  return f ? f : 1u;
}

/* The mask a receive is posted with: the hash bits count only when it has a
 * print. */
static inline uint64_t sc_ucx_recv_mask(unsigned hash) {
  return hash ? UINT64_MAX : SC_UCX_MASK_NO_PRINT;
}

/* Ranks on one host: same name, same kernel boot, same network namespace (a
 * rank in its own namespace stands for another host of an emulated cluster,
 * as it does for tcp). */
static inline int sc_ucx_blob_same_host(const sc_ucx_blob_hdr_t *a, const sc_ucx_blob_hdr_t *b) {
  return a->host_hash == b->host_hash && a->boot_hash == b->boot_hash && a->netns == b->netns;
}

/* The lane of the pair (a, b): the same on both ends. */
static inline int sc_ucx_pair_lane(const sc_ucx_blob_hdr_t *a, const sc_ucx_blob_hdr_t *b) {
  return sc_ucx_blob_same_host(a, b) ? SC_UCX_LANE_HOST : SC_UCX_LANE_NET;
}

/* Whether a waiting receiver spins (ucx.c's spin yields the core whenever a
 * look finds nothing). Over UCX's shared memory it always does, as our shm
 * transport does: with more ranks than CPUs a sleep on the worker's event fd
 * costs a wake-up per message, and P = 4 and 8 on 2 cores measured 1.2-1.6x
 * our shm's time at 1 MiB that way against 1.0-1.2x with the yielding spin
 * (perf/README.md). Without shared memory (UCX over TCP loopback) the rule
 * is tcp's: no spin when the host has more of the job's ranks than CPUs. */
static inline int sc_ucx_spins(int local_ranks, int cpus, unsigned flags) {
  return (flags & SC_UCX_FLAG_SHM) || !(cpus > 0 && local_ranks > cpus);
}

/* UCX's rendezvous thresholds (RNDV_THRESH of each lane's context) when
 * the user has not set UCX_RNDV_THRESH; a value of the user's stands for
 * both lanes (one context, host NULL).
 * - Host lane: 64 KiB, so that messages below it go eager, as on our own shm
 *   (two copies below SC_SHM_SINGLE_COPY_MIN). UCX's own choice over its
 *   shared memory is lower: a 64 KiB all-reduce on 2 ranks then sent two
 *   32 KiB rendezvous (a handshake and a process_vm_readv each) and took
 *   1.5-1.7x the time of Open MPI over the same UCX, whose all-reduce sends
 *   one 64 KiB message (perf/README.md).
 * - Net lane: with RDMA, the same (net NULL: one context); a rendezvous is
 *   what lets RDMA move large messages without a copy. Without RDMA UCX's
 *   network is TCP, where a rendezvous buys nothing (no zero copy) and costs
 *   a handshake with the receiver first: on the 1 Gbit/s bed, 8 hosts,
 *   1 MiB all-reduces took 1.5-1.9x as long as eager ones (Rabenseifner's
 *   dependent steps each waited for it). So eager at every size ("inf"). */
/* Whether the bootstrap root's address (a struct sockaddr_storage *, may be
 * NULL) is a loopback one: every rank then reached the root inside one
 * host's network namespace, so no pair spans two hosts and a net lane of its
 * own would be a UCP context (~15 ms to open) that nothing uses. */
static inline int sc_ucx_root_is_loopback(const void *route_hint) {
  const struct sockaddr_storage *ss = route_hint;
  if (!ss) return 0;
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *in = route_hint;
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = route_hint;
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
           (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127);
  }
  return 0;
}

typedef struct sc_ucx_rndv_plan {
  const char *host; /* RNDV_THRESH of the (first) context; NULL: the user's */
  const char *net;  /* of a net lane's own context; NULL: no such context */
} sc_ucx_rndv_plan_t;
#define SC_UCX_RNDV_THRESH_DEFAULT     "64k"
#define SC_UCX_RNDV_THRESH_OWN_CORE    "256k"
#define SC_UCX_RNDV_THRESH_NET_DEFAULT "inf"
/* one_host: no pair can span two hosts (sc_ucx_root_is_loopback).
 * nranks, host_cpus: the context opens before the bootstrap says where the
 * ranks run, so nranks bounds the ranks on this host; where that bound is at
 * most the host's CPUs, every rank has a core and the host lane sends
 * eagerly up to 256 KiB: a handshake per message costs more than the copy
 * (P = 2 here, 256 KiB all-reduce: 50-53 us against 56-64 with 64k). Where
 * ranks may share cores, 64k: an eager message waits for its receiver to
 * be scheduled (P = 8 on 2 cores: 256k was 10-40% slower from 256 KiB). */
static inline sc_ucx_rndv_plan_t sc_ucx_rndv_plan(const char *user_value, int rdma, int one_host,
                                                  int nranks, int host_cpus) {
  sc_ucx_rndv_plan_t p = {NULL, NULL};
  if (user_value) return p;
  p.host = nranks <= host_cpus ? SC_UCX_RNDV_THRESH_OWN_CORE : SC_UCX_RNDV_THRESH_DEFAULT;
  if (!rdma && !one_host) p.net = SC_UCX_RNDV_THRESH_NET_DEFAULT;
  return p;
}

/* This rank's CUDA flag: both conditions, or the executor must stage. */
static inline unsigned sc_ucx_cuda_flag(int ucx_has_cuda_mem, int devrt_is_cuda) {
  return ucx_has_cuda_mem && devrt_is_cuda ? SC_UCX_FLAG_CUDA : 0u;
}

/* Device buffers pass between a and b through UCX only when both ends' UCX
 * can take them (each end's UCX touches its own buffer); both derive it
 * from the same two blobs, so either both stage or neither does. */
static inline int sc_ucx_pair_device(const sc_ucx_blob_hdr_t *a, const sc_ucx_blob_hdr_t *b) {
  return (a->flags & b->flags & SC_UCX_FLAG_CUDA) != 0;
}

/* The props of the pair (a, b) from their two blobs and the number of ranks
 * on b's host; the same on every rank. */
static inline void sc_ucx_pair_props(const sc_ucx_blob_hdr_t *a, const sc_ucx_blob_hdr_t *b,
                                     int b_host_ranks, sc_tp_props_t *out) {
  *out = (sc_tp_props_t){0};
  if (!sc_ucx_blob_same_host(a, b)) {
    /* Which network UCX picks (RDMA or TCP) is UCX's choice at run time, so
     * latency and bandwidth stay unknown and the tuner measures or keeps
     * its network defaults, as for tcp. */
    out->kind = SC_TP_KIND_NET;
    out->locality = SC_TP_OTHER_HOST;
  } else {
    out->kind = (a->flags & b->flags & SC_UCX_FLAG_SHM) ? SC_TP_KIND_SHM : SC_TP_KIND_NET;
    out->locality = a->pid == b->pid ? SC_TP_SAME_PROCESS : SC_TP_SAME_HOST;
    /* UCX's rendezvous may read large messages straight from the sender
     * (CMA), but its thresholds are its own: claim no single copy. */
    out->single_copy_min = 0;
    /* Its per-message cost is not our shm's: 1.5-2 us more per message
     * on a 2-core VM, enough for the shm-fitted defaults to pick the ring
     * where recursive doubling takes 0.6-0.75 of its time (docs/UCX.md). */
    out->costs_unfitted = 1;
  }
  out->receiver_spins = sc_ucx_spins(b_host_ranks, b->host_cpus, b->flags);
  out->device_mem = sc_ucx_pair_device(a, b);
}

#ifdef SC_HAVE_UCX
#include <ucp/api/ucp.h>

typedef struct sc_ucx_transport sc_ucx_transport_t;

/* UCX's own request memory (ucp_params.request_size): what a pending
 * operation needs beyond UCX's part, so posting allocates nothing. `req` is
 * NULL once the caller's request was failed or forgotten (cancel_all, peer
 * failure) while UCX still owns this one. */
typedef struct sc_ucx_op {
  sc_tp_req_t *req;
  sc_ucx_transport_t *tp;
  struct sc_ucx_op *prev, *next; /* the transport's pending list */
  int peer;
  int print;    /* a receive posted with a print's hash (full mask) */
  uint64_t tag; /* a receive's tag */
} sc_ucx_op_t;

typedef struct sc_ucx_peer {
  ucp_ep_h ep;
  ucp_worker_h worker; /* of the lane that carries the pair */
  sc_ucx_blob_hdr_t blob;
  int host_ranks; /* ranks whose blob says they share this peer's host */
  uint64_t send_seq, recv_seq;
  int dead;
  int peer_errors; /* the endpoint has UCP_ERR_HANDLING_MODE_PEER */
  char err[256];
  struct sc_ucx_transport *tp; /* for the endpoint's error callback */
  int rank;
} sc_ucx_peer_t;

/* One UCP context and its worker (see "Lanes" above). */
typedef struct sc_ucx_lane {
  ucp_context_h ctx;
  ucp_worker_h worker;
  int efd; /* the worker's event fd */
} sc_ucx_lane_t;

struct sc_ucx_transport {
  sc_transport_t base;
  sc_ucx_lane_t lane[SC_UCX_LANES];
  int nlanes;             /* 1: lane[0] serves both */
  int nbusy;              /* lanes that carry a peer (connect_all): */
  int busy[SC_UCX_LANES]; /* only they are progressed and waited on */
  int spin_us;
  sc_yield_t yield; /* whether the spin may yield the core now (lib/base/yield.h) */
  int timeout_ms;
  int connected;
  int abandon; /* cancel_all failed requests, or a failure: destroy flushes briefly */
  sc_ucx_blob_hdr_t me;
  sc_ucx_peer_t *peers;
  sc_ucx_op_t *pending; /* posted, not complete (a list through UCX's request memory) */
  size_t completed;     /* requests finished by callbacks: progress compares it */
  int woken;            /* set by wake (any thread) */
  int posting;          /* inside ucp_tag_recv_nbx: a callback there completes it at once */
  int imm_done;
  ucs_status_t imm_status;
  size_t imm_len;
  int has_error; /* a failure to report once from progress */
  sc_result_t errcode;
  char errmsg[256];
  /* Messages may have arrived, or a receive with a print was posted, since
   * progress last looked for messages of another print (ucx.c). */
  int scan_due;
};

static inline sc_ucx_transport_t *sc_ucx_of(sc_transport_t *t) {
  return (sc_ucx_transport_t *)t;
}

void sc_ucx_op_unlink(sc_ucx_transport_t *tp, sc_ucx_op_t *op);
/* Fails the peer's pending requests and later ones with SC_ERR_REMOTE and
 * the text; progress reports it once if a request was pending. */
void sc_ucx_peer_fail(sc_ucx_transport_t *tp, sc_ucx_peer_t *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 when the UCP context reports CUDA memory among its memory types (a UCX
 * built with CUDA, on a machine where its CUDA memory domain opened). */
int sc_ucx_context_has_cuda(ucp_context_h ctx);
/* 1 when the context opened an RDMA transport (rc, ud, dc). */
int sc_ucx_context_has_rdma(ucp_context_h ctx);

sc_result_t sc_ucx_create(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                          size_t *addrlen);
sc_result_t sc_ucx_connect_all(sc_transport_t *tp, const void *addrs, size_t stride);
void sc_ucx_destroy(sc_transport_t *tp);
#endif

#endif
