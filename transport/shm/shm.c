/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport data path: per peer a FIFO of sends, of CMA sends
 * waiting for the receiver's read, and of posted receives, linked through the
 * caller's requests (no allocation per message).
 *
 * Small and medium messages are copied into the peer's ring and out of it
 * (the stream pipelines messages larger than the ring). Large ones, when the
 * receiver could read this process's memory at setup, leave only a record in
 * the ring; the receiver copies the payload straight from the sender's buffer
 * with process_vm_readv (one copy) and bumps a counter that completes the
 * send. Nothing is consumed from a ring without a posted receive, and a
 * record's print and length are checked against it before a byte lands in the
 * buffer.
 *
 * How a rank waits (spin, yield, sleep on the doorbell) is shm_wait.c's; the
 * passes over the rings it makes meanwhile are here (sc_shm_pass_all). */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/base/yield.h"
#include "transport/shm/shm_internal.h"

/* Progress rounds that look at peers' liveness without reading the clock
 * between two that do (a peer's check is due every SC_SHM_CHECK_MS): a small
 * message's round trip is shorter than a clock read on a VM. */
#define SC_SHM_CLOCK_EVERY 16

void sc_shm_req_finish(sc_tp_req_t *r, sc_tp_req_state_t state, sc_result_t status) {
  r->status = status;
  r->u.shm.next = NULL;
  __atomic_store_n(&r->state, (int)state, __ATOMIC_RELEASE);
}

void sc_shm_wake_peer(sc_shm_transport_t *tp, sc_shm_peer_t *p) {
  if (!p->hdr || p->db_len == 0) return;
  /* Pairs with the sleeper's fence between setting `sleeping` and its last
   * look at the rings: one of the two sides sees the other's store. */
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (!__atomic_load_n(&p->hdr->sleeping, __ATOMIC_RELAXED)) return;
  char b = 1;
  /* EAGAIN: a wake-up is already queued; ECONNREFUSED: the peer is gone
   * (its liveness check reports that). */
  while (sendto(tp->db_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&p->db_addr,
                p->db_len) < 0 &&
         errno == EINTR) {
  }
}

static void fp_hex(char out[2 * SC_TP_FP_LEN + 1], const uint8_t fp[SC_TP_FP_LEN]) {
  for (int i = 0; i < SC_TP_FP_LEN; i++) snprintf(out + 2 * i, 3, "%02x", fp[i]);
}

/* The head receive met a record of another operation: it fails with
 * SC_ERR_MISMATCH and learns the peer's print (the executor names both
 * calls); the ring holds the rest of a message nobody here expects, so the
 * peer then fails as if it had sent garbage. */
static sc_result_t recv_mismatch(sc_shm_transport_t *tp, sc_shm_peer_t *p, const sc_shm_rec_t *h) {
  sc_tp_req_t *r = sc_shm_q_pop(&p->rq_head, &p->rq_tail);
  p->nrecv--;
  tp->npending--;
  memcpy(r->peer_fp, h->fp, SC_TP_FP_LEN);
  char theirs[2 * SC_TP_FP_LEN + 1], ours[2 * SC_TP_FP_LEN + 1];
  fp_hex(theirs, h->fp);
  fp_hex(ours, r->fp);
  sc_shm_req_finish(r, SC_TP_REQ_ERROR, SC_ERR_MISMATCH);
  return sc_shm_peer_fail_code(
      tp, p, SC_ERR_MISMATCH,
      "sent a message of another operation (print %s where this rank's receive "
      "has %s)",
      theirs, ours);
}

/* ---- send side ---- */

static sc_result_t send_pass(sc_shm_transport_t *tp, sc_shm_peer_t *p, int *moved) {
  if (p->cq_head) {
    uint64_t done = __atomic_load_n(&p->tx.ctl->cma_done, __ATOMIC_ACQUIRE);
    if (done > p->cma_sent)
      return sc_shm_peer_fail(tp, p, "acknowledged %llu single-copy messages of %llu sent",
                              (unsigned long long)done, (unsigned long long)p->cma_sent);
    while (p->cq_head) {
      if (p->cq_head->u.shm.ticket > done) break;
      sc_tp_req_t *r = sc_shm_q_pop(&p->cq_head, &p->cq_tail);
      p->ncma--;
      tp->npending--;
      sc_shm_req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
      *moved = 1;
    }
  }
  if (p->dq_head) SC_CHECK(sc_shm_dev_acks(tp, p, moved));
  while (p->sq_head) {
    sc_tp_req_t *r = p->sq_head;
    if (!r->u.shm.rec_done && r->device) {
      SC_CHECK(sc_shm_dev_send(tp, p, r, moved));
      if (!r->u.shm.rec_done) break; /* no room yet */
      continue;
    }
    if (!r->u.shm.rec_done) {
      sc_shm_ring_rewind(&p->tx);
      uint64_t room = sc_shm_ring_space(&p->tx, SC_SHM_REC_LEN);
      if (room == (uint64_t)-1) return sc_shm_peer_fail(tp, p, "corrupted its ring's head counter");
      if (room < SC_SHM_REC_LEN) break;
      int cma = r->len >= SC_SHM_SINGLE_COPY_MIN &&
                __atomic_load_n(&p->tx.ctl->cma_ok, __ATOMIC_ACQUIRE) == 1;
      uint8_t rec[SC_SHM_REC_LEN];
      sc_shm_rec_encode(rec, cma ? SC_SHM_REC_CMA : SC_SHM_REC_EAGER, r->len,
                        (uint64_t)(uintptr_t)r->buf, r->fp);
      sc_shm_ring_put(&p->tx, rec, SC_SHM_REC_LEN);
      r->u.shm.rec_done = 1;
      *moved = 1;
      if (cma) {
        r->u.shm.ticket = ++p->cma_sent;
        sc_shm_q_pop(&p->sq_head, &p->sq_tail);
        p->nsend--;
        sc_shm_q_push(&p->cq_head, &p->cq_tail, r);
        p->ncma++;
        continue;
      }
    }
    uint64_t total = sc_shm_pad8(r->len);
    while (r->u.shm.done < total) {
      uint64_t want = total - r->u.shm.done;
      if (want > SC_SHM_STEP) want = SC_SHM_STEP;
      uint64_t room = sc_shm_ring_space(&p->tx, want);
      if (room == (uint64_t)-1) return sc_shm_peer_fail(tp, p, "corrupted its ring's head counter");
      uint64_t n = room < want ? room : want;
      if (n == 0) break;
      uint64_t real = r->u.shm.done < r->len ? r->len - r->u.shm.done : 0;
      if (real > n) real = n;
      sc_shm_ring_put(&p->tx, r->buf + r->u.shm.done, real);
      sc_shm_ring_put_pad(&p->tx, n - real);
      r->u.shm.done += n;
      *moved = 1;
      /* Publish every step: the receiver copies out while we copy in. */
      if (r->u.shm.done < total && sc_shm_ring_publish(&p->tx)) sc_shm_wake_peer(tp, p);
    }
    if (r->u.shm.done < total) break;
    sc_shm_q_pop(&p->sq_head, &p->sq_tail);
    p->nsend--;
    tp->npending--;
    sc_shm_req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
  }
  if (sc_shm_ring_publish(&p->tx)) sc_shm_wake_peer(tp, p);
  return SC_SUCCESS;
}

/* ---- receive side ---- */

static sc_result_t cma_read(sc_shm_transport_t *tp, sc_shm_peer_t *p, sc_tp_req_t *r, uint64_t at) {
  return sc_shm_cma_copy(tp, p, r->buf, r->len, at, 0);
}

static void recv_done(sc_shm_transport_t *tp, sc_shm_peer_t *p) {
  sc_tp_req_t *r = sc_shm_q_pop(&p->rq_head, &p->rq_tail);
  p->nrecv--;
  tp->npending--;
  sc_shm_req_finish(r, SC_TP_REQ_DONE, SC_SUCCESS);
}

static sc_result_t recv_pass(sc_shm_transport_t *tp, sc_shm_peer_t *p, int *moved) {
  int acked = 0;
  sc_result_t res = SC_SUCCESS;
  while (p->rq_head && res == SC_SUCCESS) {
    sc_tp_req_t *r = p->rq_head;
    if (!r->u.shm.rec_done) {
      uint64_t have = sc_shm_ring_avail(&p->rx, SC_SHM_REC_LEN);
      if (have == (uint64_t)-1) {
        res = sc_shm_peer_fail(tp, p, "corrupted its ring's tail counter");
        break;
      }
      if (have < SC_SHM_REC_LEN) break;
      uint8_t rec[SC_SHM_REC_LEN + SC_SHM_DEV_EXT_LEN];
      sc_shm_ring_peek(&p->rx, rec, SC_SHM_REC_LEN);
      uint32_t type;
      memcpy(&type, rec, sizeof(type));
      if (type == SC_SHM_REC_REWIND) {
        if (!sc_shm_ring_rewound(&p->rx)) {
          res = sc_shm_peer_fail(tp, p, "sent a rewind record where none can stand");
          break;
        }
        *moved = 1;
        continue;
      }
      sc_shm_rec_t h;
      int cma_ok = __atomic_load_n(&p->rx.ctl->cma_ok, __ATOMIC_RELAXED) == 1;
      sc_shm_rec_verdict_t v = sc_shm_rec_check_dev(rec, r->len, r->fp, cma_ok, r->device, &h);
      if (v == SC_SHM_REC_OK && h.type == SC_SHM_REC_DEV) {
        /* The record with its handle, and a free copy slot (copies end in
         * order: pass_all completes the oldest first). */
        have = sc_shm_ring_avail(&p->rx, sizeof(rec));
        if (have == (uint64_t)-1) {
          res = sc_shm_peer_fail(tp, p, "corrupted its ring's tail counter");
          break;
        }
        if (have < sizeof(rec) || !sc_shm_dev_copy_free(tp)) break;
        sc_shm_ring_get(&p->rx, rec, sizeof(rec));
        *moved = 1;
        r->u.shm.rec_done = 1;
        res = sc_shm_dev_start(tp, p, &h, rec + SC_SHM_REC_LEN);
        continue;
      }
      sc_shm_ring_skip(&p->rx, SC_SHM_REC_LEN);
      *moved = 1;
      if (v == SC_SHM_REC_BAD_TYPE) {
        res = sc_shm_peer_fail(tp, p, "sent a malformed record (type 0x%08x)", h.type);
        break;
      }
      if (v == SC_SHM_REC_BAD_PRINT) {
        res = recv_mismatch(tp, p, &h);
        break;
      }
      if (v == SC_SHM_REC_BAD_LEN) {
        res = sc_shm_peer_fail(tp, p, "sent a %llu-byte message where %zu bytes were expected",
                               (unsigned long long)h.len, r->len);
        break;
      }
      if (v == SC_SHM_REC_CMA_REFUSED) {
        res = sc_shm_peer_fail(tp, p, "sent a single-copy record although it was refused");
        break;
      }
      if (v == SC_SHM_REC_DEV_WANTED || v == SC_SHM_REC_HOST_WANTED) {
        res = sc_shm_peer_fail(tp, p, "sent a %s message where %s memory was posted",
                               v == SC_SHM_REC_DEV_WANTED ? "host" : "device",
                               v == SC_SHM_REC_DEV_WANTED ? "device" : "host");
        break;
      }
      r->u.shm.rec_done = 1;
      if (h.type == SC_SHM_REC_CMA) {
        res = cma_read(tp, p, r, h.addr);
        if (res != SC_SUCCESS) break;
        p->cma_recvd++;
        __atomic_store_n(&p->rx.ctl->cma_done, p->cma_recvd, __ATOMIC_RELEASE);
        acked = 1;
        recv_done(tp, p);
        continue;
      }
    }
    uint64_t total = sc_shm_pad8(r->len);
    while (r->u.shm.done < total) {
      uint64_t want = total - r->u.shm.done;
      if (want > SC_SHM_STEP) want = SC_SHM_STEP;
      uint64_t have = sc_shm_ring_avail(&p->rx, want);
      if (have == (uint64_t)-1) {
        res = sc_shm_peer_fail(tp, p, "corrupted its ring's tail counter");
        break;
      }
      uint64_t n = have < want ? have : want;
      if (n == 0) break;
      uint64_t real = r->u.shm.done < r->len ? r->len - r->u.shm.done : 0;
      if (real > n) real = n;
      sc_shm_ring_get(&p->rx, r->buf + r->u.shm.done, real);
      sc_shm_ring_skip(&p->rx, n - real);
      r->u.shm.done += n;
      *moved = 1;
      if (r->u.shm.done < total && sc_shm_ring_publish(&p->rx)) sc_shm_wake_peer(tp, p);
    }
    if (res != SC_SUCCESS || r->u.shm.done < total) break;
    recv_done(tp, p);
  }
  if (p->dead) return res;
  if (sc_shm_ring_publish(&p->rx) || acked) sc_shm_wake_peer(tp, p);
  return res;
}

/* ---- liveness ---- */

/* The peer exited or closed its end: what it left in the ring is still
 * delivered; whatever else we wait for from it fails. */
static sc_result_t peer_gone(sc_shm_transport_t *tp, sc_shm_peer_t *p, const char *how) {
  int moved = 0;
  p->gone = 1;
  /* Acknowledgements it stored before leaving complete our sends. */
  if (p->cq_head || p->dq_head) SC_CHECK(send_pass(tp, p, &moved));
  SC_CHECK(recv_pass(tp, p, &moved));
  if (!p->dead && sc_shm_peer_queued(p)) return sc_shm_peer_fail(tp, p, "%s", how);
  return SC_SUCCESS;
}

const char *sc_shm_peer_left(const sc_shm_peer_t *p) {
  /* A peer that closed its end first (its communicator destroyed, or its
   * own failure told) left cleanly, whether its process is still there or
   * not; one that exited without closing did not. */
  if (sc_shm_chan_closed(p)) return SC_SHM_CLOSED_TEXT;
  int exited = 0;
  if (p->pidfd >= 0) {
    struct pollfd q = {.fd = p->pidfd, .events = POLLIN};
    exited = poll(&q, 1, 0) > 0;
  } else {
    exited = kill(p->pid, 0) != 0 && errno == ESRCH;
  }
  return exited ? "exited" : NULL;
}

sc_result_t sc_shm_check_peer(sc_shm_transport_t *tp, sc_shm_peer_t *p, int64_t now, int force) {
  if (p->dead || !sc_shm_peer_queued(p)) return SC_SUCCESS;
  if (p->gone) return peer_gone(tp, p, p->gone_how);
  if (!force && now < p->next_check_ms) return SC_SUCCESS;
  p->next_check_ms = now + SC_SHM_CHECK_MS;
  const char *how = sc_shm_peer_left(p);
  if (!how) return SC_SUCCESS;
  /* Asked for its descriptor, never answered: nothing to drain. */
  if (!p->ready)
    return sc_shm_peer_fail(tp, p, "%s before its shared-memory channel was set up", how);
  p->gone_how = how;
  return peer_gone(tp, p, p->gone_how);
}

/* ---- progress ---- */

/* One pass over every local peer with queued work. The first failure (or a
 * mismatch) is returned and its text kept; the other peers still move.
 * `check`: one of SC_SHM_CHECK_*; a lazy pass without a clock read still
 * reports the peers already known gone (now = 0 is before every peer's next
 * check). */
sc_result_t sc_shm_pass_all(sc_shm_transport_t *tp, int *moved, int check, char *first_err,
                            size_t errlen) {
  sc_result_t res = SC_SUCCESS;
  int64_t now = 0;
  if (check == SC_SHM_CHECK_NOW || (check == SC_SHM_CHECK_LAZY && --tp->clock_skips < 0)) {
    now = sc_now_ms();
    tp->clock_skips = SC_SHM_CLOCK_EVERY;
  }
  if (sc_shm_dev_inflight(tp)) {
    res = sc_shm_dev_poll(tp, moved);
    if (res != SC_SUCCESS) sc_error_get_detail(first_err, errlen);
  }
  /* Peers asking for this rank's descriptor are answered while it is awake
   * too (now is read every SC_SHM_CLOCK_EVERY passes), and the answers this
   * rank waits for are looked for at every pass. */
  if (tp->lazy && (tp->nasked > 0 || now >= tp->next_service_ms)) {
    tp->next_service_ms = now + 1;
    sc_result_t r = sc_shm_db_service(tp);
    if (r != SC_SUCCESS && res == SC_SUCCESS) {
      res = r;
      sc_error_get_detail(first_err, errlen);
    }
  }
  for (int i = 0; i < tp->base.nranks && tp->npending > 0; i++) {
    sc_shm_peer_t *p = &tp->peers[i];
    if (!p->local || p->dead || !sc_shm_peer_queued(p)) continue;
    sc_result_t r = SC_SUCCESS;
    if (!p->ready && !p->asked && sc_shm_peer_came(tp, p)) r = sc_shm_peer_connect(tp, p);
    if (!p->ready) {
      if (r == SC_SUCCESS && check) r = sc_shm_check_peer(tp, p, now, 0);
      if (r != SC_SUCCESS && res == SC_SUCCESS) {
        res = r;
        sc_error_get_detail(first_err, errlen);
      }
      continue;
    }
    if (p->sq_head || p->cq_head || p->dq_head) r = send_pass(tp, p, moved);
    if (r == SC_SUCCESS && p->rq_head) r = recv_pass(tp, p, moved);
    if (r == SC_SUCCESS && check) r = sc_shm_check_peer(tp, p, now, 0);
    /* A mismatch outranks an earlier failure (as in tcp.c): the executor
     * must see it to name both calls; the other peers are failed anyway. */
    if (r != SC_SUCCESS &&
        (res == SC_SUCCESS || (r == SC_ERR_MISMATCH && res != SC_ERR_MISMATCH))) {
      res = r;
      sc_error_get_detail(first_err, errlen);
    }
  }
  return res;
}

/* ---- posting ---- */

static sc_result_t post_check(sc_shm_transport_t *tp, int peer, const void *buf, size_t len,
                              sc_tp_req_t *req, const char *op) {
  if (!tp || !req) return SC_ERR(SC_ERR_INVALID_ARG, "shm %s: NULL transport or request", op);
  if (!tp->connected)
    return SC_ERR(SC_ERR_INVALID_ARG, "shm %s: connect_all has not succeeded", op);
  if (peer < 0 || peer >= tp->base.nranks || peer == tp->base.rank)
    return SC_ERR(SC_ERR_INVALID_ARG, "shm %s: peer %d is not another rank of %d (this is rank %d)",
                  op, peer, tp->base.nranks, tp->base.rank);
  if (!tp->peers[peer].local)
    return SC_ERR(SC_ERR_INVALID_ARG, "shm %s: %s is not on this host", op, tp->peers[peer].name);
  if (len && !buf) return SC_ERR(SC_ERR_INVALID_ARG, "shm %s: NULL buffer for %zu bytes", op, len);
  if (req->state == SC_TP_REQ_PENDING)
    return SC_ERR(SC_ERR_INVALID_ARG, "shm %s: request is still pending", op);
  if (req->device && !sc_shm_blob_pair_device(&tp->me, &tp->peers[peer].blob))
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "shm %s: a device buffer for %s, but this pair has no device IPC (rank %d: %s, "
                  "peer: %s; props device_mem is 0)",
                  op, tp->peers[peer].name, tp->base.rank,
                  tp->me.caps & SC_SHM_CAP_DEVICE ? "yes" : "no",
                  tp->peers[peer].blob.pid == tp->me.pid          ? "same process"
                  : tp->peers[peer].blob.caps & SC_SHM_CAP_DEVICE ? "yes"
                                                                  : "no");
  if (req->device) SC_CHECK(sc_shm_dev_init(tp, op));
  return SC_SUCCESS;
}

static void req_init(sc_tp_req_t *req, int peer, int is_send, const void *buf, size_t len) {
  req->status = SC_SUCCESS;
  req->peer = peer;
  req->is_send = is_send;
  req->buf = (uint8_t *)buf;
  req->len = len;
  memset(&req->u.shm, 0, sizeof(req->u.shm));
  req->state = SC_TP_REQ_PENDING;
}

static sc_result_t shm_isend(sc_transport_t *base, int peer, const void *buf, size_t len,
                             sc_tp_req_t *req) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  SC_CHECK(post_check(tp, peer, buf, len, req, "isend"));
  sc_shm_peer_t *p = &tp->peers[peer];
  if (p->dead) {
    sc_shm_req_finish(req, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
    return SC_ERR(SC_ERR_REMOTE, "%s", sc_shm_peer_err(p));
  }
  if (!p->ready) {
    /* The pair's first post connects it (or asks the peer for its segment:
     * the answer, read by a progress pass, does). */
    sc_result_t c = sc_shm_peer_connect(tp, p);
    if (c != SC_SUCCESS) {
      sc_shm_req_finish(req, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
      return c;
    }
  }
  if (p->gone) {
    /* Nobody reads it. The receives queued first take what the peer left;
     * the rest fail with the send. */
    int moved = 0;
    sc_shm_req_finish(req, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
    SC_CHECK(recv_pass(tp, p, &moved));
    return sc_shm_peer_fail(tp, p, "%s", p->gone_how);
  }
  req_init(req, peer, 1, buf, len);
  sc_shm_q_push(&p->sq_head, &p->sq_tail, req);
  p->nsend++;
  tp->npending++;
  if (!p->ready || p->sq_head != req) return SC_SUCCESS; /* progress() pushes the queue in order */
  int moved = 0;
  return send_pass(tp, p, &moved);
}

static sc_result_t shm_irecv(sc_transport_t *base, int peer, void *buf, size_t len,
                             sc_tp_req_t *req) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  SC_CHECK(post_check(tp, peer, buf, len, req, "irecv"));
  sc_shm_peer_t *p = &tp->peers[peer];
  if (p->dead) {
    sc_shm_req_finish(req, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
    return SC_ERR(SC_ERR_REMOTE, "%s", sc_shm_peer_err(p));
  }
  if (!p->ready) {
    /* A receive only waits for the peer's first send to connect the pair
     * (a rank may post receives from peers that never send: the
     * point-to-point lane posts one from every peer). */
    sc_result_t c = sc_shm_peer_listen(tp, p);
    if (c == SC_SUCCESS && sc_shm_peer_came(tp, p)) c = sc_shm_peer_connect(tp, p);
    if (c != SC_SUCCESS) {
      sc_shm_req_finish(req, SC_TP_REQ_ERROR, SC_ERR_REMOTE);
      return c;
    }
  }
  req_init(req, peer, 0, buf, len);
  sc_shm_q_push(&p->rq_head, &p->rq_tail, req);
  p->nrecv++;
  tp->npending++;
  if (!p->ready || p->rq_head != req) return SC_SUCCESS;
  int moved = 0;
  return recv_pass(tp, p, &moved);
}

static sc_result_t shm_create(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                              size_t *addrlen) {
  return sc_shm_create_mode(cfg, 0, tp, addr, addrlen);
}

static sc_result_t shm_reg(sc_transport_t *tp, void *buf, size_t len, void **handle) {
  (void)tp, (void)buf, (void)len;
  if (handle) *handle = NULL;
  return SC_SUCCESS;
}

static sc_result_t shm_dereg(sc_transport_t *tp, void *handle) {
  (void)tp, (void)handle;
  return SC_SUCCESS;
}

static void shm_wake(sc_transport_t *base) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  if (!tp || tp->db_fd < 0) return;
  /* For a spinning sc_shm_wait, which does not read the doorbell. */
  __atomic_store_n(&tp->woken, 1, __ATOMIC_RELEASE);
  char b = 0;
  /* EAGAIN: the doorbell already holds a wake-up. */
  while (sendto(tp->db_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&tp->db_addr,
                tp->db_len) < 0 &&
         errno == EINTR) {
  }
}

int sc_shm_is_local(sc_transport_t *base, int peer) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  return tp && peer >= 0 && peer < base->nranks && tp->peers[peer].local;
}

int sc_shm_pending(sc_transport_t *base) {
  return base ? sc_shm_of(base)->npending : 0;
}

const sc_transport_ops_t sc_shm_transport = {
    .name = "shm",
    .addr_max = SC_SHM_BLOB_LEN,
    .pair_bytes = SC_SHM_PAIR_BYTES,
    .create = shm_create,
    .connect_all = sc_shm_connect_all,
    .isend = shm_isend,
    .irecv = shm_irecv,
    .progress = sc_shm_progress,
    .cancel_all = sc_shm_cancel_all,
    .reg = shm_reg,
    .dereg = shm_dereg,
    .wake = shm_wake,
    .wait = sc_shm_wait,
    .destroy = sc_shm_destroy,
    .props = sc_shm_props,
    .board_max = sc_shm_board_max,
    .board_post = sc_shm_board_post,
    .board_peek = sc_shm_board_peek,
    .rget = sc_shm_rget,
    .peer_reads = sc_shm_peer_reads,
    .withdraw = sc_shm_withdraw,
};
