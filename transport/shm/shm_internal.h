/* Shared-memory transport internals, shared by setup (shm_setup.c), the data
 * path (shm.c), the ring (shm_ring.c), the per-peer mux (transport/mux.c) and
 * the unit test.
 *
 * Each rank owns one shared-memory segment holding the receive rings of every
 * sender (channel s of rank r's segment carries s -> r). The segment is an
 * anonymous memfd whose descriptor travels to the peers over the doorbell
 * sockets (SCM_RIGHTS) during connect_all: nothing is ever named in /dev/shm,
 * so a killed job, even one killed during setup, leaves no file behind; the
 * memory goes when the last process mapping it exits.
 *
 * A channel is a byte stream through a power-of-two ring, like a TCP stream:
 *   record : u32 type, u32 reserved, u64 payload length, u64 address
 *   EAGER  : the payload follows in the stream, padded to 8 bytes
 *   CMA    : the payload stays in the sender's memory at `address`; the
 *            receiver reads it with process_vm_readv and bumps the channel's
 *            cma_done counter, which completes the sender's request.
 *
 * Waking: a rank that is about to sleep sets `sleeping` in its own segment
 * and polls an abstract unix datagram socket (its doorbell; abstract names
 * vanish with the process). A peer that changed something the sleeper may
 * wait for (tail, head, cma_done) sends one datagram only when it sees the
 * flag set (a Dekker pair of seq_cst fences makes the check race-free). */
#ifndef SC_SHM_INTERNAL_H
#define SC_SHM_INTERNAL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "transport/transport.h"

#define SC_SHM_CACHELINE 64

/* Shared memory sends a message of at least this many bytes by single copy:
 * the receiver reads it from the sender's memory (process_vm_readv); smaller
 * ones go through the channel's ring. Its props tell the cost model, which
 * charges the copy accordingly. Why so large: a single-copy send completes
 * only when its receiver has read it and each read walks the sender's page
 * tables, while two copies through the ring let the sender move on at once;
 * on 4 ranks on 2 cores all-reduce of 64 KiB-1 MiB took 1.3-1.8x as long
 * with single copy from 16 KiB as with it from 256 KiB (the ring's size). */
#define SC_SHM_SINGLE_COPY_MIN ((size_t)256 << 10)

/* ---- ring (shm_ring.c): one producer, one consumer, any processes ---- */

typedef struct sc_shm_chan_ctl {
  _Alignas(SC_SHM_CACHELINE) volatile uint64_t tail;   /* producer: bytes written */
  _Alignas(SC_SHM_CACHELINE) volatile uint64_t head;   /* consumer: bytes consumed */
  volatile uint64_t cma_done;                          /* consumer: CMA records finished */
  volatile uint32_t cma_ok;                            /* consumer: 0 unknown, 1 yes, 2 no */
  _Alignas(SC_SHM_CACHELINE) volatile uint32_t closed; /* either side gave the stream up */
} sc_shm_chan_ctl_t;

#define SC_SHM_CTL_BYTES 4096 /* keeps channels page-aligned: peers map only theirs */
_Static_assert(sizeof(sc_shm_chan_ctl_t) <= SC_SHM_CTL_BYTES, "channel control block");

/* One side's view of a ring. Positions are free-running 64-bit counters; the
 * cached copy of the other side's counter saves a shared cache-line read per
 * operation when there is room (producer) or data (consumer). */
typedef struct sc_shm_ring {
  sc_shm_chan_ctl_t *ctl;
  uint8_t *data;
  uint64_t size; /* power of two */
  uint64_t pos;  /* own counter (tail for the producer, head for the consumer) */
  uint64_t seen; /* last value read of the other side's counter */
  uint64_t published;
  int producer;
} sc_shm_ring_t;

void sc_shm_ring_init(sc_shm_ring_t *r, sc_shm_chan_ctl_t *ctl, uint8_t *data, uint64_t size,
                      int producer);
/* Free bytes (producer); refreshes the cached head only when need exceeds
 * the cached room. Returns (uint64_t)-1 when the consumer's head is
 * inconsistent (ahead of the tail or more than a ring behind). */
uint64_t sc_shm_ring_space(sc_shm_ring_t *r, uint64_t need);
void sc_shm_ring_put(sc_shm_ring_t *r, const void *src, uint64_t n);
void sc_shm_ring_put_pad(sc_shm_ring_t *r, uint64_t n); /* advance without writing */
/* Readable bytes (consumer); (uint64_t)-1 when the producer's tail is bogus. */
uint64_t sc_shm_ring_avail(sc_shm_ring_t *r, uint64_t need);
void sc_shm_ring_get(sc_shm_ring_t *r, void *dst, uint64_t n);
void sc_shm_ring_skip(sc_shm_ring_t *r, uint64_t n);
/* Make the own counter visible (release). Returns 1 when it changed. */
int sc_shm_ring_publish(sc_shm_ring_t *r);

/* ---- wire ---- */

#define SC_SHM_REC_EAGER 0x53434d45u /* 'SCME' */
#define SC_SHM_REC_CMA   0x53434d43u /* 'SCMC' */
#define SC_SHM_REC_LEN   24

static inline uint64_t sc_shm_pad8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}

/* A record read from a peer's stream, against the posted receive of len
 * bytes (pure, in shm_ring.c, fuzzed by test/fuzz/fuzz_shm_ring.c). */
typedef enum sc_shm_rec_verdict {
  SC_SHM_REC_OK = 0,
  SC_SHM_REC_BAD_TYPE,
  SC_SHM_REC_BAD_LEN,    /* not the posted length */
  SC_SHM_REC_CMA_REFUSED /* single-copy record although this side refused it */
} sc_shm_rec_verdict_t;

typedef struct sc_shm_rec {
  uint32_t type;
  uint64_t len, addr;
} sc_shm_rec_t;

void sc_shm_rec_encode(uint8_t rec[SC_SHM_REC_LEN], uint32_t type, uint64_t len, uint64_t addr);
/* cma_ok: this side accepts single-copy records. The fields land in *out
 * whatever the verdict, for the error text. */
sc_shm_rec_verdict_t sc_shm_rec_check(const uint8_t rec[SC_SHM_REC_LEN], size_t len, int cma_ok,
                                      sc_shm_rec_t *out);

/* Address blob (native byte order: only a same-host peer reads it as more
 * than bytes to compare). */
#define SC_SHM_BLOB_MAGIC 0x53435342u /* 'SCSB' */
typedef struct sc_shm_blob {
  uint32_t magic;
  int32_t pid;
  int32_t rank;
  uint32_t reserved;
  uint64_t nonce;     /* per transport instance: names the doorbell */
  uint64_t host_hash; /* FNV-1a of the hostname */
  uint64_t boot_hash; /* FNV-1a of /proc/sys/kernel/random/boot_id */
  uint64_t pidns;     /* inode of /proc/self/ns/pid: pids only mean something within one */
  uint64_t netns;     /* inode of /proc/self/ns/net: the doorbells' abstract names live in one */
  char host[48];      /* for error texts */
} sc_shm_blob_t;
#define SC_SHM_BLOB_LEN sizeof(sc_shm_blob_t)
_Static_assert(SC_SHM_BLOB_LEN <= SC_TP_ADDR_MAX, "shm address blob too large");

/* Same kernel, pid and network namespaces: shared memory, pids and doorbells
 * work between them. */
int sc_shm_blob_same_host(const sc_shm_blob_t *a, const sc_shm_blob_t *b);
int sc_shm_blob_valid(const sc_shm_blob_t *b);

/* ---- segment ---- */

#define SC_SHM_SEG_MAGIC  0x5343534547000001ull
#define SC_SHM_RING_BYTES ((uint64_t)256 << 10)
#define SC_SHM_HDR_BYTES  4096
#define SC_SHM_STEP       ((uint64_t)64 << 10) /* ring bytes copied between publishes */
#define SC_SHM_CHECK_MS   100                  /* liveness check period while waiting */

typedef struct sc_shm_seg_hdr {
  uint64_t magic;
  uint64_t ring_bytes;
  uint8_t tag[16]; /* derived from the job secret: a peer only attaches to its job's segments */
  int32_t owner_rank;
  int32_t owner_pid;
  int32_t nranks;
  int32_t reserved;
  uint64_t probe_addr; /* an address in the owner holding probe_value: CMA detection */
  uint64_t probe_value;
  _Alignas(SC_SHM_CACHELINE) volatile uint32_t sleeping; /* owner is (about to be) in poll */
} sc_shm_seg_hdr_t;
_Static_assert(sizeof(sc_shm_seg_hdr_t) <= SC_SHM_HDR_BYTES, "segment header");

static inline size_t sc_shm_chan_stride(uint64_t ring_bytes) {
  return SC_SHM_CTL_BYTES + (size_t)ring_bytes;
}
static inline size_t sc_shm_seg_bytes(int nranks, uint64_t ring_bytes) {
  return SC_SHM_HDR_BYTES + (size_t)nranks * sc_shm_chan_stride(ring_bytes);
}

/* ---- transport state ---- */

typedef struct sc_shm_peer {
  int local; /* reached through shared memory */
  int dead;
  int gone; /* exited or closed: drain the ring, then fail what is still queued */
  const char *gone_how;
  char name[128]; /* "rank 3 (host, pid 1234)" */
  char err[384];
  pid_t pid;
  int pidfd; /* -1: liveness by kill(pid, 0) */
  int64_t next_check_ms;
  sc_shm_blob_t blob;
  sc_shm_seg_hdr_t *hdr; /* the peer's segment header (NULL if not local) */
  size_t hdr_len;
  uint8_t *chan;      /* our channel in the peer's segment */
  size_t chan_len;    /* 0: inside the header mapping (the whole segment) */
  sc_shm_ring_t tx;   /* me -> peer, in the peer's segment */
  sc_shm_ring_t rx;   /* peer -> me, in mine */
  uint64_t cma_sent;  /* CMA records written to the peer */
  uint64_t cma_recvd; /* CMA records read from the peer */
  struct sockaddr_un db_addr;
  socklen_t db_len;
  sc_tp_req_t *sq_head, *sq_tail; /* sends not yet fully in the ring */
  sc_tp_req_t *cq_head, *cq_tail; /* CMA sends waiting for the receiver's read */
  sc_tp_req_t *rq_head, *rq_tail;
  int nsend, ncma, nrecv;
} sc_shm_peer_t;

typedef struct sc_shm_transport {
  sc_transport_t base;
  int partial; /* inside the mux: peers on other hosts are simply not ours */
  int spin_us, timeout_ms;
  uint8_t tag[16];
  sc_shm_blob_t me;
  int seg_fd; /* memfd, until every local peer has its own descriptor of it */
  uint8_t *seg;
  size_t seg_len;
  sc_shm_seg_hdr_t *hdr;
  int db_fd; /* doorbell: abstract unix datagram socket */
  struct sockaddr_un db_addr;
  socklen_t db_len;
  int connected;
  int nlocal;              /* local peers, self excluded */
  int npending;            /* requests queued on local peers */
  volatile uint64_t probe; /* peers read it through process_vm_readv */
  sc_shm_peer_t *peers;
  struct pollfd *pfds; /* 1 + nranks */
  int *pfd_peer;
} sc_shm_transport_t;

static inline sc_shm_transport_t *sc_shm_of(sc_transport_t *tp) {
  return (sc_shm_transport_t *)tp;
}

/* shm_setup.c */
sc_result_t sc_shm_create_mode(const sc_tp_config_t *cfg, int partial, sc_transport_t **tp,
                               void *addr, size_t *addrlen);
sc_result_t sc_shm_connect_all(sc_transport_t *tp, const void *addrs, size_t stride);
void sc_shm_destroy(sc_transport_t *tp);
sc_result_t sc_shm_props(sc_transport_t *tp, int a, int b, sc_tp_props_t *out);
void sc_shm_db_name(struct sockaddr_un *sa, socklen_t *len, int32_t pid, uint64_t nonce);
uint64_t sc_shm_fnv1a(const void *p, size_t n, uint64_t h);

/* shm.c: for the mux */
int sc_shm_is_local(sc_transport_t *tp, int peer);
int sc_shm_pending(sc_transport_t *tp);
/* Ranks a and b reach each other through shared memory (from their blobs:
 * the same answer on every rank). */
int sc_shm_pair_local(sc_transport_t *tp, int a, int b);
/* Mark the peer failed with the text; fails its requests. */
sc_result_t sc_shm_peer_fail(sc_shm_transport_t *tp, sc_shm_peer_t *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Ring the peer's doorbell if it announced it sleeps. */
void sc_shm_wake_peer(sc_shm_transport_t *tp, sc_shm_peer_t *p);

#endif
