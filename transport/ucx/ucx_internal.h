/* UCX transport internals shared by setup (ucx_setup.c) and the data path
 * (ucx.c). The tag and blob helpers at the top need no UCX and are tested
 * on their own (test/unit/test_ucx_tag.c).
 *
 * Matching. Every communicator has its own UCP context and worker, so
 * messages of two communicators never meet. Within one, a message's 64-bit
 * tag is the sender's rank (high 16 bits) and the sender's count of sends to
 * that receiver (low 48 bits); the receiver posts each receive from a peer
 * with the next number it expects from that peer and a full mask. A receive
 * thus matches exactly the send posted in the same position, whatever order
 * UCX delivers them in, which is the transport contract's ordering.
 *
 * Address blob (host byte order: it is only compared, never interpreted
 * across machines of different endianness):
 *   u32 'SCUX', u16 worker address length, u8 flags, u8 0, i32 rank,
 *   i32 pid, i32 host CPUs, u64 FNV-1a of the hostname, u64 of the boot id,
 *   u64 network namespace inode, then the UCP worker address. */
#ifndef SC_UCX_INTERNAL_H
#define SC_UCX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/yield.h"
#include "transport/transport.h"

#define SC_UCX_BLOB_MAGIC 0x53435558u /* 'SCUX' */
#define SC_UCX_RANK_BITS  16
#define SC_UCX_SEQ_BITS   (64 - SC_UCX_RANK_BITS)
#define SC_UCX_SEQ_MASK   ((UINT64_C(1) << SC_UCX_SEQ_BITS) - 1)

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
} sc_ucx_blob_hdr_t;

#define SC_UCX_ADDR_ROOM (SC_TP_ADDR_MAX - sizeof(sc_ucx_blob_hdr_t))

_Static_assert(SC_RANKS_MAX <= (1 << SC_UCX_RANK_BITS), "ranks do not fit the ucx tag");

static inline uint64_t sc_ucx_tag(int sender, uint64_t seq) {
  return ((uint64_t)(uint32_t)sender << SC_UCX_SEQ_BITS) | (seq & SC_UCX_SEQ_MASK);
}

static inline int sc_ucx_tag_sender(uint64_t tag) {
  return (int)(tag >> SC_UCX_SEQ_BITS);
}

static inline uint64_t sc_ucx_tag_seq(uint64_t tag) {
  return tag & SC_UCX_SEQ_MASK;
}

/* Ranks on one host: same name, same kernel boot, same network namespace (a
 * rank in its own namespace stands for another host of an emulated cluster,
 * as it does for tcp). */
static inline int sc_ucx_blob_same_host(const sc_ucx_blob_hdr_t *a, const sc_ucx_blob_hdr_t *b) {
  return a->host_hash == b->host_hash && a->boot_hash == b->boot_hash && a->netns == b->netns;
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

/* UCX's rendezvous threshold when the user has not set UCX_RNDV_THRESH
 * (user_value NULL): 64 KiB, so that messages below it go eager, as on our
 * own shm (two copies below SC_SHM_SINGLE_COPY_MIN). UCX's own choice over
 * its shared memory is lower: a 64 KiB all-reduce on 2 ranks then sent two
 * 32 KiB rendezvous (a handshake and a process_vm_readv each) and took
 * 1.5-1.7x the time of Open MPI over the same UCX, whose all-reduce sends one
 * 64 KiB message (perf/README.md). NULL: the user's value stands. */
#define SC_UCX_RNDV_THRESH_DEFAULT "64k"
static inline const char *sc_ucx_rndv_thresh(const char *user_value) {
  return user_value ? NULL : SC_UCX_RNDV_THRESH_DEFAULT;
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
} sc_ucx_op_t;

typedef struct sc_ucx_peer {
  ucp_ep_h ep;
  sc_ucx_blob_hdr_t blob;
  int host_ranks; /* ranks whose blob says they share this peer's host */
  uint64_t send_seq, recv_seq;
  int dead;
  int peer_errors; /* the endpoint has UCP_ERR_HANDLING_MODE_PEER */
  char err[256];
  struct sc_ucx_transport *tp; /* for the endpoint's error callback */
  int rank;
} sc_ucx_peer_t;

struct sc_ucx_transport {
  sc_transport_t base;
  ucp_context_h ctx;
  ucp_worker_h worker;
  int efd; /* the worker's event fd */
  int spin_us;
  sc_yield_t yield; /* whether the spin may yield the core now (base/yield.h) */
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
  char errmsg[256];
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

sc_result_t sc_ucx_create(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                          size_t *addrlen);
sc_result_t sc_ucx_connect_all(sc_transport_t *tp, const void *addrs, size_t stride);
void sc_ucx_destroy(sc_transport_t *tp);
#endif

#endif
