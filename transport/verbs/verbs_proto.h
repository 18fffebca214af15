/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's protocol decisions as pure functions (no ibverbs
 * header, no I/O), so that they build and are unit-tested on machines
 * without RDMA: SC_IB_* settings, SC_IB_HCA matching, the clear-to-send
 * FIFO and its credits, striping across the QPs of a peer, the immediate
 * data and work-request ids, the address blob, the props of a pair and the
 * GPUDirect registration plan. The registration cache is verbs_regcache.h.
 *
 * The data path (as NCCL's net_ib): for message n to a peer, the receiver
 * RDMA-writes a clear-to-send entry (its buffer address, rkey, size, the
 * receive's print, n + 1) into slot n % SC_VB_FIFO_DEPTH of the sender's
 * FIFO, as a write with immediate so that the sender hears of it on its
 * completion queue; the sender then RDMA-writes the data striped over the
 * peer's QPs, each stripe ending with a write-with-immediate that names the
 * slot; the receiver's request completes when every stripe's immediate
 * arrived. A sender whose send has another print or length than the entry
 * writes no data: it refuses the message with one write-with-immediate
 * whose immediate says why (sc_vb_send_verdict), for another print writing
 * its own print into the receiver's refusal table first, so that both ends
 * fail and can name both calls. A slot is reused
 * only when its previous message completed on that side, which is the credit
 * bound: at most SC_VB_FIFO_DEPTH messages in flight per peer and direction,
 * so at most that many data and as many clear-to-send immediates per QP are
 * outstanding and the receive queues (2 * DEPTH) never run dry. */
#ifndef SC_VERBS_PROTO_H
#define SC_VERBS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"
#include "transport/transport.h"

#define SC_VB_FIFO_DEPTH 32         /* slots per peer and direction (<= 256: 8 bits of imm) */
#define SC_VB_QPS_MAX    16         /* SC_IB_QPS_PER_PEER's bound */
#define SC_VB_WR_MAX     (1u << 30) /* bytes of one RDMA write (below every HCA's max_msg_sz) */
#define SC_VB_STRIPE_MIN 65536      /* a message is striped only in pieces at least this large */
#define SC_VB_SQ_DEPTH   (4 * SC_VB_FIFO_DEPTH + 8) /* send WRs per QP */
#define SC_VB_HCA_MAX    16                         /* entries of an SC_IB_HCA list */
#define SC_VB_NAME_MAX   64

/* ---- settings ---- */

typedef struct sc_vb_hca_entry {
  char name[SC_VB_NAME_MAX];
  int port; /* 0 = any port */
} sc_vb_hca_entry_t;

/* SC_IB_HCA as NCCL_IB_HCA: "[^][=]name[:port][,name[:port]...]". '^' excludes the
 * listed devices instead of selecting them; '=' matches names exactly instead of
 * as prefixes. Empty: every device. */
typedef struct sc_vb_hca_spec {
  int exclude;
  int exact;
  int n;
  sc_vb_hca_entry_t e[SC_VB_HCA_MAX];
} sc_vb_hca_spec_t;

typedef struct sc_vb_env {
  sc_vb_hca_spec_t hca;
  int gid_index; /* SC_IB_GID_INDEX: -1 = automatic (RoCE v2 IPv4 entry, else 0) */
  int timeout;   /* SC_IB_TIMEOUT: local ACK timeout exponent, 4.096 us * 2^t */
  int retry_cnt; /* SC_IB_RETRY_CNT */
  int qps_per_peer;
  size_t reg_cache_bytes; /* 0 = register per message */
  int gdr;                /* SC_IB_GDR: sc_vb_gdr_want_t */
} sc_vb_env_t;

sc_result_t sc_vb_parse_hca(const char *s, sc_vb_hca_spec_t *out);
/* Whether device `name`, port `port` is selected by spec. */
int sc_vb_hca_match(const sc_vb_hca_spec_t *spec, const char *name, int port);
/* Reads and validates every SC_IB_* variable (lib/base/config.h), naming the bad one. */
sc_result_t sc_vb_read_env(sc_vb_env_t *out);
/* The device-absent decision, before any device is opened: with zero devices the
 * answer is SC_ERR_UNSUPPORTED "no RDMA device: ..." whatever SC_IB_HCA says (a name
 * cannot be checked against nothing, and the machine is the first thing to fix);
 * with devices, an inclusive SC_IB_HCA entry that matches none of them is
 * SC_ERR_INVALID_ARG naming it. why describes where the count came from. */
sc_result_t sc_vb_check_devices(const sc_vb_hca_spec_t *spec, const char *const *names, int n,
                                const char *why);

/* ---- FIFO and credits ---- */

/* A clear-to-send entry, written by the receiver into the sender's FIFO. seq is
 * last so that a reader that sees the new seq sees the rest, the print
 * included (the HCA writes in address order, the assumption NCCL makes too;
 * besides, the sender reads an entry only after its immediate's completion). */
typedef struct sc_vb_cts {
  uint64_t addr;
  uint64_t size;
  uint8_t fp[SC_TP_FP_LEN]; /* the receive's print (sc_tp_req_t's fp; all zero: none) */
  uint32_t rkey;
  uint32_t seq; /* message number + 1; 0 = never written */
} sc_vb_cts_t;
_Static_assert(offsetof(sc_vb_cts_t, seq) + sizeof(uint32_t) == sizeof(sc_vb_cts_t),
               "the clear-to-send's seq must be its last bytes");

/* A rank's FIFO memory (one registration, published as the blob's fifo_addr
 * and fifo_rkey): nranks * DEPTH clear-to-send entries, section w written by
 * rank w, then the refusal table, nranks prints, entry w written by rank w
 * when it refuses a message to this rank for its print (one per pair: a
 * refusal leaves the pair out of step, and nothing follows it). */
size_t sc_vb_fifo_bytes(int nranks);
/* Where rank `writer`'s refusal print lies in a FIFO of nranks ranks. */
size_t sc_vb_refusal_offset(int nranks, int writer);

/* Why a sender refuses a clear-to-send, the immediate's error code. */
typedef enum sc_vb_refuse {
  SC_VB_REFUSE_NONE = 0,
  SC_VB_REFUSE_LENGTH = 1, /* the receive's size is not the send's length */
  SC_VB_REFUSE_PRINT = 2   /* the receive's print is not the send's: another operation */
} sc_vb_refuse_t;

/* The sender's verdict on the clear-to-send of its next send: the prints
 * first (compared when the receive has one), so that a print that differs
 * wins over a length that differs; then the size. */
sc_vb_refuse_t sc_vb_send_verdict(const uint8_t cts_fp[SC_TP_FP_LEN], uint64_t cts_size,
                                  const uint8_t send_fp[SC_TP_FP_LEN], size_t len);

/* One direction to one peer: message n uses slot n % DEPTH; busy[s] counts
 * what is still outstanding in slot s (stripes on the receiving side,
 * signalled stripes on the sending side). */
typedef struct sc_vb_fifo {
  uint64_t next;                  /* number of the next message */
  uint8_t busy[SC_VB_FIFO_DEPTH]; /* outstanding completions of the slot's message */
  uint32_t inflight;              /* slots with busy != 0 */
} sc_vb_fifo_t;

static inline int sc_vb_slot_of(uint64_t msg) {
  return (int)(msg % SC_VB_FIFO_DEPTH);
}
/* Whether the next message may take its slot (the slot's previous message completed). */
int sc_vb_fifo_can_take(const sc_vb_fifo_t *f);
/* Takes the slot for the next message with `outstanding` completions to wait for (>= 1);
 * returns the slot, -1 when the slot is busy. */
int sc_vb_fifo_take(sc_vb_fifo_t *f, int outstanding);
/* One completion for slot s; returns 1 when the slot's message is complete, 0 when
 * more are due, -1 when the slot had nothing outstanding (a protocol error). */
int sc_vb_fifo_complete(sc_vb_fifo_t *f, int slot);
/* The sender's side: whether FIFO entry e announces message msg. */
static inline int sc_vb_cts_ready(const volatile sc_vb_cts_t *e, uint64_t msg) {
  return e->seq == (uint32_t)(msg + 1);
}

/* ---- striping and slicing ---- */

/* How many stripes (one per QP used, <= nqps) a message of len bytes takes: one per
 * SC_VB_STRIPE_MIN, at least 1 (a zero-length message is one empty stripe). */
int sc_vb_nstripes(size_t len, int nqps);
/* Stripe i of k: offset and length. Stripes are equal but for the last, a multiple
 * of 64 bytes (cache lines) each. */
void sc_vb_stripe(size_t len, int k, int i, size_t *off, size_t *n);
/* Work requests a stripe of n bytes needs (writes of at most SC_VB_WR_MAX, the last
 * one with immediate; one WR for an empty stripe). */
int sc_vb_stripe_wrs(size_t n);

/* ---- immediate data and work-request ids ---- */

/* imm (host order; the wire carries it big-endian): bits 0-7 slot, 8-15 stripe count,
 * 16 error (the sender refused the message: bits 8-15 then hold why, an
 * sc_vb_refuse_t, and the refusal is the message's one stripe), 17 clear-to-send (the
 * receiver's FIFO write: the sender learns of it by this completion, so that it can
 * sleep instead of polling its FIFO), 18-31 the message number's low 14 bits (a
 * consistency check). */
typedef struct sc_vb_imm {
  int slot;
  int nstripes; /* 1 when error */
  int error;    /* sc_vb_refuse_t */
  int cts;
  uint32_t seq14;
} sc_vb_imm_t;

uint32_t sc_vb_imm_encode(const sc_vb_imm_t *in);
void sc_vb_imm_decode(uint32_t imm, sc_vb_imm_t *out);

/* Completions name their request through wr_id, without allocation: the kind, the
 * peer, the QP and the slot index into per-peer tables. */
typedef enum sc_vb_wr_kind {
  SC_VB_WR_DATA = 1, /* the signalled last write of a stripe (sender) */
  SC_VB_WR_CTS = 2,  /* a clear-to-send write (receiver) */
  SC_VB_WR_RECV = 3  /* a posted receive consumed by a write-with-immediate */
} sc_vb_wr_kind_t;

typedef struct sc_vb_wrid {
  int kind;
  int peer; /* < 2^24 */
  int qp;   /* < 256 */
  int slot; /* < 256 */
  int nwr;  /* send WRs this completion retires on its QP (< 2^16) */
} sc_vb_wrid_t;

uint64_t sc_vb_wrid_encode(const sc_vb_wrid_t *in);
/* SC_ERR_INTERNAL for an id no encode made (unknown kind). */
sc_result_t sc_vb_wrid_decode(uint64_t id, sc_vb_wrid_t *out);

/* ---- address blob ---- */

/* What every rank publishes (SC_TP_ADDR_MAX = 192 bytes; this is 96). Per-pair data,
 * the QP numbers, cannot fit (nranks * QPs * 4 bytes), so they go over a TCP side
 * channel whose address is here. Big-endian on the wire. */
typedef struct sc_vb_blob {
  uint8_t sock[24]; /* side channel, sc_socket_addr_pack form */
  uint8_t gid[16];
  uint64_t host_id;   /* hash of hostname and boot id: same value = same host */
  uint64_t fifo_addr; /* base of this rank's FIFO (nranks * DEPTH entries, by writer rank) */
  uint32_t fifo_rkey;
  uint32_t speed_mbps; /* port data rate in Mbit/s (width * lane speed) */
  uint16_t lid;
  uint8_t port;
  uint8_t mtu;        /* enum ibv_mtu value (1 = 256 ... 5 = 4096) */
  uint8_t link_layer; /* 1 = InfiniBand, 2 = Ethernet (RoCE) */
  uint8_t qps;
  uint8_t gdr; /* sc_vb_gdr_mode_t this rank can use */
  uint8_t gid_index;
} sc_vb_blob_t;

#define SC_VB_BLOB_LEN   96
#define SC_VB_BLOB_MAGIC 0x53435642u /* "SCVB" */

void sc_vb_blob_pack(const sc_vb_blob_t *in, uint8_t out[SC_VB_BLOB_LEN]);
sc_result_t sc_vb_blob_unpack(const uint8_t *in, size_t len, sc_vb_blob_t *out);

/* ---- props ---- */

typedef struct sc_vb_pair {
  int same_host;
  double bandwidth_bps;
  double latency_s;
  int device_mem; /* sc_vb_gdr_direct of the two blobs' gdr */
} sc_vb_pair_t;

/* From two ranks' blobs only, so every rank answers the same for any pair. */
void sc_vb_pair_props(const sc_vb_blob_t *a, const sc_vb_blob_t *b, sc_vb_pair_t *out);
/* A port's data rate in Mbit/s from ibv_port_attr's active_width (1 = 1x, 2 = 4x,
 * 4 = 8x, 8 = 12x, 16 = 2x) and active_speed (1 SDR ... 128 NDR, 256 XDR); 0 when
 * either is unknown. */
uint32_t sc_vb_port_mbps(int active_width, int active_speed);
/* The path MTU two ports use: the smaller. */
static inline int sc_vb_path_mtu(int a, int b) {
  return a < b ? a : b;
}

/* ---- GPUDirect registration plan ---- */

typedef enum sc_vb_gdr_mode {
  SC_VB_GDR_NONE = 0,    /* host memory only: device buffers are staged */
  SC_VB_GDR_DMABUF = 1,  /* ibv_reg_dmabuf_mr on the CUDA driver's dma-buf fd */
  SC_VB_GDR_PEERMEM = 2, /* ibv_reg_mr on the device pointer (nvidia-peermem) */
  SC_VB_GDR_STAGE = 3    /* through pinned host memory */
} sc_vb_gdr_mode_t;

/* SC_IB_GDR: which registration of device buffers to use. */
typedef enum sc_vb_gdr_want {
  SC_VB_GDR_WANT_AUTO = 0, /* dma-buf, else peer memory, else staging */
  SC_VB_GDR_WANT_DMABUF,
  SC_VB_GDR_WANT_PEERMEM,
  SC_VB_GDR_WANT_STAGE
} sc_vb_gdr_want_t;

/* What the probe at communicator creation found (verbs_gdr.c): each is 1 only
 * when a real registration of a small device allocation that way worked. */
typedef struct sc_vb_gdr_caps {
  int have_device; /* a device runtime with a current device */
  int dmabuf_ok;   /* ibv_reg_dmabuf_mr on the runtime's dma-buf fd of the allocation */
  int peermem_ok;  /* ibv_reg_mr on the device pointer (nvidia-peermem) */
} sc_vb_gdr_caps_t;

/* The order the issue fixes: dma-buf, else peer memory, else staging; a forced
 * mode that did not work stages (the caller says why). No device: NONE. */
sc_vb_gdr_mode_t sc_vb_gdr_plan(const sc_vb_gdr_caps_t *caps, sc_vb_gdr_want_t want);
/* Whether device buffers move directly between two ranks that published these
 * modes: both sides must register device memory for the HCA. */
int sc_vb_gdr_direct(int mode_a, int mode_b);
/* The dma-buf range of [addr, addr + len): whole pages as NCCL registers them
 * (cuMemGetHandleForAddressRange wants page-aligned ranges); *start and *size
 * page-aligned, *off = addr - *start. An empty range still takes one page. */
void sc_vb_dmabuf_range(uintptr_t addr, size_t len, size_t page, uintptr_t *start, size_t *size,
                        size_t *off);
const char *sc_vb_gdr_name(sc_vb_gdr_mode_t m);

#endif
