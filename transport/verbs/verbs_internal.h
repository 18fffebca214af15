/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's state, shared by verbs_setup.c (create, connect_all,
 * destroy), verbs.c (the data path) and verbs_fail.c (failures). The
 * protocol itself is in verbs_proto.h. */
#ifndef SC_VERBS_INTERNAL_H
#define SC_VERBS_INTERNAL_H

#include <poll.h>
#include <stdint.h>

#include "lib/base/socket.h"
#include "lib/base/yield.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_proto.h"
#include "transport/verbs/verbs_regcache.h"

typedef struct sc_vb_reqlist {
  sc_tp_req_t *head, *tail;
} sc_vb_reqlist_t;

typedef struct sc_vb_peer {
  sc_vb_blob_t blob; /* the peer's published address */
  int nqps;          /* min of both sides' SC_IB_QPS_PER_PEER: both stripe alike */
  struct ibv_qp *qp[SC_VB_QPS_MAX];
  int sq_used[SC_VB_QPS_MAX]; /* send WRs posted and not yet retired */
  /* sending: slots by message number, busy = stripes not yet acknowledged */
  sc_vb_fifo_t sfifo;
  sc_tp_req_t *sreq[SC_VB_FIFO_DEPTH];
  sc_vb_reqlist_t swait; /* posted, waiting for the receiver's clear-to-send */
  uint64_t cts_seen;     /* clear-to-send immediates received (they arrive in order on qp 0) */
  /* receiving: busy = stripes whose immediate has not arrived */
  sc_vb_fifo_t rfifo;
  sc_tp_req_t *rreq[SC_VB_FIFO_DEPTH];
  sc_vb_reqlist_t rwait; /* posted, waiting for a free slot (credit) */
  int dead;
  char err[256];
  /* The side channel of connect_all, kept open as a liveness sensor: the peer's
   * kernel closes it when the process ends, while RDMA alone reports a dead peer
   * only when a write to it fails. -1 once closed. */
  int sock;
  int closed;
} sc_vb_peer_t;

typedef struct sc_vb_transport {
  sc_transport_t base;
  const sc_vb_api_t *api;
  sc_vb_env_t env;
  sc_vb_dev_t dev;
  struct ibv_pd *pd;
  struct ibv_comp_channel *ch;
  struct ibv_cq *cq;
  int cq_armed;
  int gid_index;
  union ibv_gid gid;
  /* FIFO: nranks * DEPTH entries, section w written by rank w (its clear-to-sends),
   * then the refusal table (sc_vb_fifo_bytes) */
  sc_vb_cts_t *fifo;
  struct ibv_mr *fifo_mr;
  /* the source of this rank's clear-to-send and refusal writes, same layout by
   * destination rank */
  sc_vb_cts_t *ctsbuf;
  struct ibv_mr *cts_mr;
  sc_vb_regcache_t *rc;
  sc_vb_gdr_mode_t gdr;
  int listen_fd;
  int wake_fd;
  int spin_us;
  sc_yield_t yield; /* whether the spin may yield the core now (lib/base/yield.h) */
  int timeout_ms;
  uint8_t secret[SC_SECRET_LEN];
  int connected;
  int report_pending; /* a peer failed since the last progress: report it once */
  sc_result_t report_code;
  char report[SC_ERRMSG_MAX];
  sc_vb_peer_t *peers;
  struct pollfd *pfds; /* 3 + nranks: wake, channel, async, the peers' side channels */
  int *pfd_peer;
} sc_vb_transport_t;

static inline sc_vb_transport_t *sc_vb_of(sc_transport_t *t) {
  return (sc_vb_transport_t *)t;
}

static inline void sc_vb_list_push(sc_vb_reqlist_t *l, sc_tp_req_t *r) {
  r->u.verbs.next = NULL;
  if (l->tail)
    l->tail->u.verbs.next = r;
  else
    l->head = r;
  l->tail = r;
}

static inline sc_tp_req_t *sc_vb_list_pop(sc_vb_reqlist_t *l) {
  sc_tp_req_t *r = l->head;
  if (r) {
    l->head = r->u.verbs.next;
    if (!l->head) l->tail = NULL;
  }
  return r;
}

static inline void sc_vb_req_finish(sc_vb_transport_t *tp, sc_tp_req_t *r, sc_result_t status) {
  if (r->u.verbs.reg) sc_vb_rc_release(tp->rc, r->u.verbs.reg);
  r->u.verbs.reg = NULL;
  r->status = status;
  __atomic_store_n(&r->state, status == SC_SUCCESS ? (int)SC_TP_REQ_DONE : (int)SC_TP_REQ_ERROR,
                   __ATOMIC_RELEASE);
}

/* ---- failures (verbs_fail.c) ---- */
/* Peer peer failed: its requests fail with SC_ERR_REMOTE, later posts too (with
 * text), and progress reports text once with code (SC_ERR_MISMATCH where a
 * message of another operation put the pair out of step). soft: leave its
 * queue pairs running, so that what was posted last (the refusal of the
 * peer's receive) still goes out. */
void sc_vb_peer_error_code(sc_vb_transport_t *tp, int peer, sc_result_t code, const char *text,
                           int soft);
/* The same with SC_ERR_REMOTE, queue pairs stopped. */
void sc_vb_peer_error(sc_vb_transport_t *tp, int peer, const char *text);
/* Reads the device's async events; a fatal one fails the peers it touches. */
void sc_vb_on_async(sc_vb_transport_t *tp);
/* peer's side channel is readable: its end closed, or bytes to drop. */
void sc_vb_on_peer_sock(sc_vb_transport_t *tp, int peer);
void sc_vb_cancel_all(sc_transport_t *base, sc_result_t why);

sc_result_t sc_vb_create(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                         size_t *addrlen);
sc_result_t sc_vb_connect_all(sc_transport_t *tp, const void *addrs, size_t stride);
void sc_vb_destroy(sc_transport_t *tp);
/* Posts a receive for one write-with-immediate on qp q of peer p. */
sc_result_t sc_vb_post_recv(sc_vb_transport_t *tp, int peer, int q);

/* ---- GPUDirect RDMA (verbs_gdr.c) ---- */
/* Sets tp->gdr by the probe and logs it (staging once per process at INFO). */
void sc_vb_gdr_setup(sc_vb_transport_t *tp);
/* The registration cache's callbacks for device memory, in tp->gdr's way. */
sc_result_t sc_vb_gdr_reg(sc_vb_transport_t *tp, uintptr_t addr, size_t len, void **mr,
                          uint32_t *lkey, uint32_t *rkey);
void sc_vb_gdr_dereg(sc_vb_transport_t *tp, void *mr);
/* The cache entry for request r's buffer: host memory, or (r->device) the
 * device allocation holding it, which the pair must move directly. */
sc_result_t sc_vb_acquire(sc_vb_transport_t *tp, int peer, const sc_tp_req_t *r,
                          sc_vb_rc_entry_t **out);

#endif
