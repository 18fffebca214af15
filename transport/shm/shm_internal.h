/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport internals, shared by setup (shm_setup.c), the data
 * path (shm.c), the ring (shm_ring.c), the per-peer mux (transport/mux.c) and
 * the unit test.
 *
 * Each rank owns one shared-memory segment with room for the receive ring of
 * every sender (channel s of rank r's segment carries s -> r). The segment is
 * an anonymous memfd: nothing is ever named in /dev/shm, so a killed job, even
 * one killed during setup, leaves no file behind; the memory goes when the
 * last process mapping it exits. It is sparse: a channel gets pages only
 * when its pair is connected.
 *
 * Connecting (shm_connect.c). Eager (SC_CONNECT=eager): at connect_all every
 * rank reserves every local peer's channel with a full ring and passes its
 * descriptor to every peer over the doorbell sockets (SCM_RIGHTS). Lazy (the
 * default, when every local rank asks for it): connect_all only records the
 * peers' addresses; the first isend naming a peer connects the pair (an
 * irecv only reserves the control page of the peer's channel here and waits
 * for the peer's first send to size it, then connects too). The peer's
 * descriptor is opened through /proc/PID/fd/N (N is in its
 * address); where that is refused, it is asked for over the doorbell and the
 * peer's progress answers with SCM_RIGHTS. Whichever side of a pair connects
 * first sizes both channels of the pair: a full ring while the ring bytes
 * claimed in the receiving segment stay within its owner's budget
 * (SC_SHM_BUDGET_BYTES), else the largest power of two that fits, at least
 * SC_SHM_RING_MIN. The board only needs the peers' header pages, which
 * board_peek maps on first look.
 *
 * A channel is a byte stream through a power-of-two ring, like a TCP stream:
 *   record : u32 type, u32 reserved, u64 payload length, u64 address, the print of
 *            the operation the message belongs to (SC_TP_FP_LEN bytes,
 *            sc_tp_req_t's fp; every kind of record carries it)
 *   EAGER  : the payload follows in the stream, padded to 8 bytes
 *   CMA    : the payload stays in the sender's memory at `address`; the
 *            receiver reads it with process_vm_readv and bumps the channel's
 *            cma_done counter, which completes the sender's request.
 *   DEV    : device memory (shm_ipc.c): `address` is the offset in the
 *            allocation whose IPC handle and size follow the record; the
 *            receiver opens the handle, copies device to device on its own
 *            stream and, once the copy's event is done, bumps dev_done.
 *
 * Waking: a thread of a rank that is about to sleep counts itself in
 * `sleeping` in its own segment (the progress thread and the point-to-point
 * lane's waiting thread may both sleep) and polls an abstract unix datagram
 * socket (its doorbell; abstract names vanish with the process). A peer that
 * changed something the sleeper may wait for (tail, head, cma_done) sends one
 * datagram only when it sees the count nonzero (a Dekker pair of seq_cst
 * fences makes the check race-free). `oncpu` says whether the owner runs, and
 * where: a waiter with more ranks than cores keeps looking while the peer it
 * waits on runs on another core,
 * and yields otherwise (shm.c, shm_progress). */
#ifndef SC_SHM_INTERNAL_H
#define SC_SHM_INTERNAL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "lib/base/yield.h"
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
  volatile uint64_t dev_done;                          /* consumer: device records finished */
  _Alignas(SC_SHM_CACHELINE) volatile uint32_t closed; /* either side gave the stream up */
  /* The ring's size, set once by the side that connects the pair first
   * (0: not yet). */
  _Alignas(SC_SHM_CACHELINE) volatile uint64_t ring_bytes;
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
  uint64_t next_rewind; /* producer: no rewind (below) before this position */
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
/* Copy n readable bytes out without consuming them. */
void sc_shm_ring_peek(const sc_shm_ring_t *r, void *dst, uint64_t n);
/* Make the own counter visible (release). Returns 1 when it changed. */
int sc_shm_ring_publish(sc_shm_ring_t *r);
/* Small messages keep to the first SC_SHM_RING_HOT bytes of a ring: a
 * producer past them whose consumer has taken everything writes a rewind
 * record and goes on at the ring's start. Streaming through the whole ring
 * would bring every line in from memory on each side, one ring's worth of
 * misses before it is warm and again whenever other work evicted it (8 B at
 * P = 2, VM: 2,000 exchanges at 2-3 us each until the ring first wrapped,
 * against 0.5-1 us after); the window stays in the caches. The producer
 * reads the consumer's counter for this at most once per quarter window. */
#define SC_SHM_RING_HOT ((uint64_t)16 << 10)
/* Producer, before a record: 1 when it rewound (a record is written). */
int sc_shm_ring_rewind(sc_shm_ring_t *r);
/* Consumer, at a rewind record (not consumed yet): 1 with the position at
 * the ring's start, 0 where the rule above could not have written one. */
int sc_shm_ring_rewound(sc_shm_ring_t *r);

/* ---- wire ---- */

#define SC_SHM_REC_EAGER  0x53434d45u /* 'SCME' */
#define SC_SHM_REC_CMA    0x53434d43u /* 'SCMC' */
#define SC_SHM_REC_DEV    0x53434d44u /* 'SCMD' */
#define SC_SHM_REC_REWIND 0x53434d52u /* 'SCMR': the next record is at the ring's start */
#define SC_SHM_REC_FP     24          /* where the print starts */
#define SC_SHM_REC_LEN    (SC_SHM_REC_FP + SC_TP_FP_LEN)
/* Records and padded payloads keep every record at a multiple of 8 bytes in
 * the stream, so its u64 fields are aligned wherever it lands in the ring. */
_Static_assert(SC_SHM_REC_LEN % 8 == 0, "record length keeps the stream 8-byte aligned");
/* What follows a DEV record: the IPC handle, then the allocation's size and its base
 * address in the sender (u64 each: kernels/devrt_ipc.c retires stale mappings by it). */
#define SC_SHM_DEV_EXT_LEN (SC_DEV_IPC_HANDLE_BYTES + 16)

static inline uint64_t sc_shm_pad8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}

/* A record read from a peer's stream, against the posted receive of len
 * bytes (pure, in shm_ring.c, fuzzed by test/fuzz/fuzz_shm_ring.c). */
typedef enum sc_shm_rec_verdict {
  SC_SHM_REC_OK = 0,
  SC_SHM_REC_BAD_TYPE,
  SC_SHM_REC_BAD_PRINT,   /* a message of another operation than the posted receive's */
  SC_SHM_REC_BAD_LEN,     /* not the posted length */
  SC_SHM_REC_CMA_REFUSED, /* single-copy record although this side refused it */
  SC_SHM_REC_DEV_WANTED,  /* a host record where the receive is device memory */
  SC_SHM_REC_HOST_WANTED  /* a device record where the receive is host memory */
} sc_shm_rec_verdict_t;

typedef struct sc_shm_rec {
  uint32_t type;
  uint64_t len, addr;
  uint8_t fp[SC_TP_FP_LEN];
} sc_shm_rec_t;

/* fp: the send's print (NULL: none, all zero). */
void sc_shm_rec_encode(uint8_t rec[SC_SHM_REC_LEN], uint32_t type, uint64_t len, uint64_t addr,
                       const uint8_t *fp);
/* fp: the receive's print (all zero or NULL: checks none); cma_ok: this side
 * accepts single-copy records. The fields land in *out whatever the verdict,
 * for the error text. After the type the print comes first: ranks in
 * different operations disagree about lengths too, and the print is what
 * names the cause. */
sc_shm_rec_verdict_t sc_shm_rec_check(const uint8_t rec[SC_SHM_REC_LEN], size_t len,
                                      const uint8_t *fp, int cma_ok, sc_shm_rec_t *out);
/* The same for a receive whose buffer is device memory (device = 1) or not:
 * DEV records are valid only for the first, EAGER and CMA ones only for the
 * second. */
sc_shm_rec_verdict_t sc_shm_rec_check_dev(const uint8_t rec[SC_SHM_REC_LEN], size_t len,
                                          const uint8_t *fp, int cma_ok, int device,
                                          sc_shm_rec_t *out);

/* Address blob (native byte order: only a same-host peer reads it as more
 * than bytes to compare). */
#define SC_SHM_BLOB_MAGIC 0x53435342u /* 'SCSB' */
typedef struct sc_shm_blob {
  uint32_t magic;
  int32_t pid;
  int32_t rank;
  uint32_t caps;      /* SC_SHM_CAP_* */
  uint64_t nonce;     /* per transport instance: names the doorbell */
  uint64_t host_hash; /* FNV-1a of the hostname */
  uint64_t boot_hash; /* FNV-1a of /proc/sys/kernel/random/boot_id */
  uint64_t pidns;     /* inode of /proc/self/ns/pid: pids only mean something within one */
  uint64_t netns;     /* inode of /proc/self/ns/net: the doorbells' abstract names live in one */
  int32_t seg_fd;     /* the segment's descriptor in its owner (/proc/PID/fd/N) */
  uint32_t lazy;      /* connects pairs on first use (SC_CONNECT=lazy) */
  char host[48];      /* for error texts */
} sc_shm_blob_t;
#define SC_SHM_BLOB_LEN sizeof(sc_shm_blob_t)
/* The rank had a device runtime with IPC when it created its transport. */
#define SC_SHM_CAP_DEVICE 1u
_Static_assert(SC_SHM_BLOB_LEN <= SC_TP_ADDR_MAX, "shm address blob too large");

/* Same kernel, pid and network namespaces: shared memory, pids and doorbells
 * work between them. */
int sc_shm_blob_same_host(const sc_shm_blob_t *a, const sc_shm_blob_t *b);
int sc_shm_blob_valid(const sc_shm_blob_t *b);

/* ---- segment ---- */

#define SC_SHM_SEG_MAGIC  0x5343534547000001ull
#define SC_SHM_RING_BYTES ((uint64_t)256 << 10) /* a full ring; a channel's room */
/* A connected pair's channel at full size, in its receiver's segment. */
#define SC_SHM_PAIR_BYTES (SC_SHM_CTL_BYTES + SC_SHM_RING_BYTES)
#define SC_SHM_RING_MIN   ((uint64_t)16 << 10) /* a ring the budget cannot refuse */
#define SC_SHM_HDR_BYTES  4096
#define SC_SHM_STEP       ((uint64_t)64 << 10) /* ring bytes copied between publishes */
#define SC_SHM_CHECK_MS   100                  /* liveness check period while waiting */

/* The board (shm_board.c): two slots per rank, used alternately by the
 * rank's numbered board calls. A slot is overwritten two calls later, which a
 * rank starts only after reading every peer's post of the call between, so
 * after every peer has read the overwritten one. */
#define SC_SHM_BOARD_BYTES 1024
typedef struct sc_shm_board_slot {
  _Alignas(SC_SHM_CACHELINE) volatile uint64_t seq; /* the call's number: stored last (release) */
  uint64_t fp;                                      /* what the call is, for the readers' check */
  uint8_t data[SC_SHM_BOARD_BYTES];                 /* its first 48 bytes share seq's line */
} sc_shm_board_slot_t;

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
  volatile uint64_t ring_budget; /* ring bytes its channels may claim (shm_connect.c) */
  _Alignas(SC_SHM_CACHELINE) volatile uint64_t ring_used; /* claimed so far, by either side */
  _Alignas(SC_SHM_CACHELINE) volatile uint32_t sleeping; /* owner's threads (about to be) in poll */
  /* 1 + the CPU the owner runs on, 0 while it has given its core up (a
   * yield or a sleep): a hint for peers deciding whether to look again or
   * yield (shm.c, shm_progress). Its own line: written at every yield. */
  _Alignas(SC_SHM_CACHELINE) volatile uint32_t oncpu;
  sc_shm_board_slot_t board[2]; /* every peer maps the header page: they read it */
} sc_shm_seg_hdr_t;
_Static_assert(sizeof(sc_shm_seg_hdr_t) <= SC_SHM_HDR_BYTES, "segment header");

static inline size_t sc_shm_chan_stride(uint64_t ring_bytes) {
  return SC_SHM_CTL_BYTES + (size_t)ring_bytes;
}
static inline size_t sc_shm_seg_bytes(int nranks, uint64_t ring_bytes) {
  return SC_SHM_HDR_BYTES + (size_t)nranks * sc_shm_chan_stride(ring_bytes);
}

/* ---- device memory over IPC (shm_ipc.c) ---- */

#define SC_SHM_DEV_COPIES  32  /* device copies in flight per transport (its event pool) */
#define SC_SHM_IPC_CACHE   64  /* peer allocations kept open per transport */
#define SC_SHM_DEV_POLL_US 100 /* sleep slice while device copies run */
_Static_assert(SC_SHM_IPC_CACHE > SC_SHM_DEV_COPIES, "an unreferenced entry always exists");

/* A peer's allocation opened in this process (peer -1: free). */
typedef struct sc_shm_ipc_entry {
  int peer;
  int refs;          /* copies in flight that read it: not closed before they end */
  uint64_t last_use; /* LRU stamp */
  uint64_t key;      /* hash of the handle, compared before its bytes */
  sc_dev_ipc_handle_t h;
  void *base;
  size_t size; /* as this process sees the mapping (mem_range) */
} sc_shm_ipc_entry_t;

/* Pure, for the unit test: the entry of (peer, handle) or -1; the entry to
 * (re)use for a new one: a free one, else the least recently used one no
 * copy holds, else -1. */
uint64_t sc_shm_ipc_key(const sc_dev_ipc_handle_t *h);
int sc_shm_ipc_find(const sc_shm_ipc_entry_t *c, int n, int peer, const sc_dev_ipc_handle_t *h,
                    uint64_t key);
int sc_shm_ipc_victim(const sc_shm_ipc_entry_t *c, int n);
/* off + len lies within an allocation of size bytes (no overflow). */
int sc_shm_dev_span_ok(uint64_t off, uint64_t len, uint64_t size);
/* Both blobs announce a device runtime with IPC and belong to different
 * processes (CUDA refuses to open a handle in its own process). */
int sc_shm_blob_pair_device(const sc_shm_blob_t *a, const sc_shm_blob_t *b);

/* A receive whose device copy runs: completes when its event has. */
typedef struct sc_shm_dev_copy {
  void *event;
  sc_tp_req_t *req;
  int peer;
  int entry; /* cache entry it reads, -1: none (an empty message) */
} sc_shm_dev_copy_t;

typedef struct sc_shm_dev {
  const sc_devrt_t *rt;
  void *stream;                                /* every copy: FIFO order = completion order */
  sc_shm_dev_copy_t copies[SC_SHM_DEV_COPIES]; /* ring in stream order */
  unsigned head, count;
  sc_shm_ipc_entry_t cache[SC_SHM_IPC_CACHE];
  uint64_t clock;
  uint64_t opens, evictions;
  int claims_logged; /* the runtime could not size a mapping: said once */
} sc_shm_dev_t;

/* ---- transport state ---- */

typedef struct sc_shm_peer {
  int local; /* reached through shared memory */
  int dead;
  int gone; /* exited or closed: drain the ring, then fail what is still queued */
  const char *gone_how;
  char name[128]; /* "rank 3 (host, pid 1234)" */
  char *err;      /* why it failed (SC_SHM_ERR_LEN bytes), allocated then */
  pid_t pid;
  int pidfd; /* -1: liveness by kill(pid, 0) */
  int64_t next_check_ms;
  sc_shm_blob_t blob;
  int ready;          /* the pair's channels are set up (tx, rx); set once, atomically */
  uint64_t wait_tail; /* sc_shm_wait's thread only: the rx tail it last returned for */
  int want_channels;  /* a post named it: connect the pair, not only map the header */
  int listening;      /* a receive waits: its channel's control page is reserved here */
  int asked;          /* its descriptor was asked for over the doorbell (2: sent) */
  int64_t ask_deadline_ms;
  sc_shm_seg_hdr_t *hdr; /* the peer's segment header (NULL until mapped) */
  size_t hdr_len;
  uint8_t *chan;      /* our channel in the peer's segment */
  size_t chan_len;    /* 0: inside the header mapping (the whole segment) */
  sc_shm_ring_t tx;   /* me -> peer, in the peer's segment */
  sc_shm_ring_t rx;   /* peer -> me, in mine */
  uint64_t cma_sent;  /* CMA records written to the peer */
  uint64_t cma_recvd; /* CMA records read from the peer */
  uint64_t dev_sent;  /* device records written to the peer */
  uint64_t dev_recvd; /* device records from the peer whose copy ended */
  struct sockaddr_un db_addr;
  socklen_t db_len;
  sc_tp_req_t *sq_head, *sq_tail; /* sends not yet fully in the ring */
  sc_tp_req_t *cq_head, *cq_tail; /* CMA sends waiting for the receiver's read */
  sc_tp_req_t *dq_head, *dq_tail; /* device sends waiting for the receiver's copy */
  sc_tp_req_t *rq_head, *rq_tail;
  int nsend, ncma, ndev, nrecv;
  int ncopy; /* receives from the peer whose device copy runs (in tp->dev->copies) */
} sc_shm_peer_t;

#define SC_SHM_ERR_LEN 384 /* a failed peer's text (sc_errtext_set) */
static inline const char *sc_shm_peer_err(const sc_shm_peer_t *p) {
  return sc_errtext(p->err);
}

typedef struct sc_shm_transport {
  sc_transport_t base;
  int partial; /* inside the mux: peers on other hosts are simply not ours */
  int spin_us, timeout_ms;
  uint8_t tag[16];
  sc_shm_blob_t me;
  int seg_fd; /* memfd: eager, until every local peer has its own descriptor of it */
  uint8_t *seg;
  size_t seg_len;
  sc_shm_seg_hdr_t *hdr;
  int db_fd; /* doorbell: abstract unix datagram socket */
  struct sockaddr_un db_addr;
  socklen_t db_len;
  int connected;
  int lazy;                /* pairs connect on first use (shm_connect.c) */
  int budget_set;          /* SC_SHM_BUDGET_BYTES was given */
  uint64_t budget;         /* ring bytes of this rank's segment, before connect_all */
  int nlocal;              /* local peers, self excluded */
  int nready;              /* local peers whose channels are set up */
  int nasked;              /* local peers whose descriptor was asked for and has not come */
  int64_t next_service_ms; /* when the doorbell is next read for requests while awake */
  int npending;            /* requests queued on local peers */
  /* The host's local ranks fit its cores (set at connect_all). If not, the
   * peer waited for is often not running, and looking again before yielding
   * only delays it. */
  int fits_cores;
  uint32_t oncpu;          /* what this rank last stored in hdr->oncpu while running */
  int clock_skips;         /* liveness passes left before the next one reads the clock */
  sc_yield_t yield;        /* whether spinning may yield the core now */
  volatile uint64_t probe; /* peers read it through process_vm_readv */
  sc_shm_peer_t *peers;
  struct pollfd *pfds; /* 1 + nranks */
  int *pfd_peer;
  sc_shm_dev_t *dev; /* created at the first device request */
  int db_pending;    /* atomic: sc_shm_wait saw the doorbell ring; progress reads it */
  int woken;         /* atomic: wake() was called (sc_shm_wait's spin takes it) */
  /* The send side of every pair whose peer left before this rank connected
   * back (shm_connect.c, drain_only): closed, with no ring; nothing is ever
   * sent through it. */
  sc_shm_chan_ctl_t left_tx;
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

/* shm_connect.c */
/* Reserve and size this rank's channel with every local peer (eager) and
 * pass the descriptors; every rank of the host calls it. */
sc_result_t sc_shm_connect_eager(sc_shm_transport_t *tp, int64_t deadline);
/* The pair's channels, set up now (SC_SUCCESS with p->ready), on their way
 * (SC_SUCCESS, p->asked: the peer's answer completes it in a progress
 * pass), or an error naming the peer. */
sc_result_t sc_shm_peer_connect(sc_shm_transport_t *tp, sc_shm_peer_t *p);
/* A receive from a pair not connected yet: reserve the control page of the
 * peer's channel in this segment (only), so that the peer's first send
 * connects the pair; sc_shm_peer_came tells when it has. */
sc_result_t sc_shm_peer_listen(sc_shm_transport_t *tp, sc_shm_peer_t *p);
int sc_shm_peer_came(const sc_shm_transport_t *tp, const sc_shm_peer_t *p);
/* The peer's header page mapped (the board), or on its way (p->asked). */
sc_result_t sc_shm_peer_attach(sc_shm_transport_t *tp, sc_shm_peer_t *p);
/* Read the doorbell: answer the peers' requests for this rank's descriptor,
 * complete the pairs whose descriptor came, drop wake-ups. */
sc_result_t sc_shm_db_service(sc_shm_transport_t *tp);
/* After a failure: flag `closed` in the channels of this segment that peers
 * connected while this rank did not connect back (lazy). */
void sc_shm_close_unconnected(sc_shm_transport_t *tp);
/* The default ring budget of a segment with `local` ranks on the host: an
 * eighth of its memory shared among them (no bound where that is unknown). */
uint64_t sc_shm_default_budget(int local);
/* Test-only: 1 makes /proc/PID/fd look refused (the doorbell path). */
extern int sc_shm_test_no_procfd;

/* shm.c: one pass over every local peer with queued work; `check`: which
 * liveness checks (below). */
enum { SC_SHM_CHECK_NONE = 0, SC_SHM_CHECK_LAZY, SC_SHM_CHECK_NOW };
sc_result_t sc_shm_pass_all(sc_shm_transport_t *tp, int *moved, int check, char *first_err,
                            size_t errlen);
/* The peer's liveness (exited, closed), due at now or forced. */
sc_result_t sc_shm_check_peer(sc_shm_transport_t *tp, sc_shm_peer_t *p, int64_t now, int force);
/* shm_wait.c: the transport's progress (spin, yield, sleep). */
sc_result_t sc_shm_progress(sc_transport_t *base, int timeout_ms, int *progressed);
void sc_shm_wait(sc_transport_t *base, int timeout_ms);
/* For the mux (transport/mux.c), which sleeps on the doorbell and its tcp
 * sockets at once as sleep_once does on the doorbell alone, by the thread
 * that drives progress: enter counts this rank in `sleeping`, so that peers
 * ring for what they put in a ring from now on, then looks at the rings for
 * what came before. 0: poll *db with the other descriptors, then
 * sc_shm_sleep_leave (rang: *db reported POLLIN; the next progress reads
 * it). 1: do not sleep, and no leave: the rings moved (*moved), failed
 * (*res, with its detail), the doorbell rang already or a device copy runs
 * (its end rings no doorbell). */
int sc_shm_sleep_enter(sc_transport_t *base, struct pollfd *db, int *moved, sc_result_t *res);
void sc_shm_sleep_leave(sc_transport_t *base, int rang);

static inline int sc_shm_peer_queued(const sc_shm_peer_t *p) {
  return p->nsend + p->ncma + p->ndev + p->nrecv + p->ncopy;
}

/* shm.c: how the peer left (exited, closed its end), or NULL while it has not. */
const char *sc_shm_peer_left(const sc_shm_peer_t *p);

/* shm_board.c: the board ops (transport.h); the mux forwards to them. */
size_t sc_shm_board_max(sc_transport_t *tp);
void sc_shm_board_post(sc_transport_t *tp, uint64_t seq, uint64_t fp, const void *data, size_t len);
sc_result_t sc_shm_board_peek(sc_transport_t *tp, int peer, uint64_t seq, int64_t now_ms,
                              const void **data, uint64_t *fp);

/* shm.c: for the mux */
int sc_shm_is_local(sc_transport_t *tp, int peer);
int sc_shm_pending(sc_transport_t *tp);
/* Ranks a and b reach each other through shared memory (from their blobs:
 * the same answer on every rank). */
int sc_shm_pair_local(sc_transport_t *tp, int a, int b);
/* What a peer that closed its end of the pair is said to have done. */
#define SC_SHM_CLOSED_TEXT "closed its end of the shared-memory channel"

/* Either side closed the pair's channels (a cancel, a withdraw, a close). */
static inline int sc_shm_chan_closed(const sc_shm_peer_t *p) {
  return p->ready && (__atomic_load_n(&p->rx.ctl->closed, __ATOMIC_ACQUIRE) ||
                      __atomic_load_n(&p->tx.ctl->closed, __ATOMIC_ACQUIRE));
}

/* Rank peer's state, or NULL when peer is not another rank of tp's. */
static inline sc_shm_peer_t *sc_shm_other(sc_shm_transport_t *tp, int peer) {
  return tp && tp->peers && peer >= 0 && peer < tp->base.nranks && peer != tp->base.rank
             ? &tp->peers[peer]
             : NULL;
}

/* shm_read.c: len bytes at the peer's address `at` into buf by single copy.
 * An address that cannot be read while the peer is there fails the peer, or
 * with `offered` (the lane's read of an offered buffer) is SC_ERR_UNSUPPORTED
 * with no text. A pair closed before or during the read fails the peer. */
sc_result_t sc_shm_cma_copy(sc_shm_transport_t *tp, sc_shm_peer_t *p, uint8_t *buf, size_t len,
                            uint64_t at, int offered);
/* The transport's rget and peer_reads (transport.h). */
sc_result_t sc_shm_rget(sc_transport_t *tp, int peer, void *buf, uint64_t at, size_t len);
int sc_shm_peer_reads(sc_transport_t *tp, int peer);

/* shm_fail.c: mark the peer failed with the text, fail its requests and
 * close the pair's channels; returns code (SC_ERR_REMOTE, or SC_ERR_MISMATCH
 * for the receive that met another operation's message) with the text. */
sc_result_t sc_shm_peer_fail_code(sc_shm_transport_t *tp, sc_shm_peer_t *p, sc_result_t code,
                                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The same with SC_ERR_REMOTE. */
#define sc_shm_peer_fail(tp, p, ...) sc_shm_peer_fail_code(tp, p, SC_ERR_REMOTE, __VA_ARGS__)
/* The transport's cancel_all and withdraw (transport.h). */
void sc_shm_cancel_all(sc_transport_t *base, sc_result_t why);
void sc_shm_withdraw(sc_transport_t *base, int peer);
/* Ring the peer's doorbell if it announced it sleeps. */
void sc_shm_wake_peer(sc_shm_transport_t *tp, sc_shm_peer_t *p);
void sc_shm_req_finish(sc_tp_req_t *r, sc_tp_req_state_t state, sc_result_t status);
/* Publish that this rank runs, and on which CPU (hdr->oncpu). */
void sc_shm_mark_running(sc_shm_transport_t *tp);
/* A local peer with requests queued here announces that it runs, on a CPU
 * other than the one this rank last announced. */
int sc_shm_peer_runs_elsewhere(const sc_shm_transport_t *tp);

/* The per-peer FIFOs, linked through the requests. */
static inline void sc_shm_q_push(sc_tp_req_t **head, sc_tp_req_t **tail, sc_tp_req_t *r) {
  r->u.shm.next = NULL;
  if (*tail)
    (*tail)->u.shm.next = r;
  else
    *head = r;
  *tail = r;
}

static inline sc_tp_req_t *sc_shm_q_pop(sc_tp_req_t **head, sc_tp_req_t **tail) {
  sc_tp_req_t *r = *head;
  *head = r->u.shm.next;
  if (!*head) *tail = NULL;
  return r;
}

/* shm_ipc.c: the device path */
/* The stream and event pool, once (what names the caller in errors). */
sc_result_t sc_shm_dev_init(sc_shm_transport_t *tp, const char *what);
/* The DEV record and its extension for send r (IPC handle of buf's allocation). */
/* Head send r of p: its record into the ring (when there is room), then to
 * the queue waiting for the receiver's copy; a buffer without a handle
 * fails it. */
sc_result_t sc_shm_dev_send(sc_shm_transport_t *tp, sc_shm_peer_t *p, sc_tp_req_t *r, int *moved);
/* Device sends whose receiver's copy ended (dev_done) complete. */
sc_result_t sc_shm_dev_acks(sc_shm_transport_t *tp, sc_shm_peer_t *p, int *moved);
sc_result_t sc_shm_dev_encode(sc_shm_transport_t *tp, const sc_tp_req_t *r,
                              uint8_t rec[SC_SHM_REC_LEN + SC_SHM_DEV_EXT_LEN]);
int sc_shm_dev_copy_free(const sc_shm_transport_t *tp);
/* Receive r (p's queue head) got DEV record h with extension ext: open the
 * handle, check the span, start the copy; r moves from p's queue to the
 * copies. Failures are the peer's (garbage) or the runtime's. */
sc_result_t sc_shm_dev_start(sc_shm_transport_t *tp, sc_shm_peer_t *p, const sc_shm_rec_t *h,
                             const uint8_t ext[SC_SHM_DEV_EXT_LEN]);
/* Complete the copies that ended, in order; acknowledges them to the senders. */
sc_result_t sc_shm_dev_poll(sc_shm_transport_t *tp, int *moved);
int sc_shm_dev_inflight(const sc_shm_transport_t *tp);
/* Wait (at most timeout_ms) until no copy runs, then fail the requests of
 * those left with why: nothing writes into a caller's buffer afterwards. */
void sc_shm_dev_cancel(sc_shm_transport_t *tp, sc_result_t why, int timeout_ms);
void sc_shm_dev_destroy(sc_shm_transport_t *tp);

#endif
