/* SPDX-License-Identifier: BSD-3-Clause */
/* In-process transport: every rank is a thread of one process, so a message
 * is one memcpy from the sender's buffer into the receiver's, made by
 * whichever side posts second. It exists so that the real executor can run
 * every rank in one process (test/sim/sim_executor.c) and be compared with
 * the schedule simulator.
 *
 * The "fabric" is the set of endpoints, one per rank, that find each other
 * through their address blobs (a pointer is a valid address inside one
 * process; the blob also carries the pid so that a blob from another process
 * is refused). Endpoints are reference counted, so a rank may destroy its
 * transport while a peer still holds a pointer to it.
 *
 * Locking. Each endpoint has `qlock`, guarding the queues of what is waiting
 * to be matched at that receiver (sends from each peer, its own receives from
 * each peer), and `clock`, guarding its list of completed requests and the
 * condition variable its progress() sleeps on. Matching happens under the
 * receiver's qlock and hands both requests to their owners' completion lists
 * under their clocks: the order is always qlock -> clock, and no thread holds
 * two qlocks, so there is no cycle. Only the owning thread publishes a
 * request's state (in progress()); the matching thread writes its status
 * under the owner's clock before handing it over.
 *
 * Queues are rings of request pointers that only grow, and grow when a
 * request is posted (by the poster, under the lock that guards the ring):
 * no allocation per message once a schedule's pattern has been seen, and a
 * match never allocates, so it cannot fail half-way.
 *
 * Prints (transport.h's fp). A receive whose print is not all zero meets a
 * send of another print: both fail with SC_ERR_MISMATCH before a byte is
 * copied, each with the other's print in peer_fp (the two meet at once, so
 * the sender learns the receive's print as from a transport whose receiver
 * speaks first), and the pair breaks as for a wrong length. A print that
 * differs is reported before a length that differs. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "test/loopback/loopback.h"

#define SC_LB_MAGIC 0x73636c6f6f706231ull /* "sclloopb1" */

typedef struct sc_lb_addr {
  uint64_t magic;
  int64_t pid;
  int32_t rank, nranks;
  uintptr_t ep;
} sc_lb_addr_t;

typedef struct sc_lb_queue {
  sc_tp_req_t **slot;
  size_t cap, head, n;
} sc_lb_queue_t;

typedef struct sc_lb_ep {
  int rank, nranks;
  atomic_int refs;
  pthread_mutex_t qlock;
  sc_lb_queue_t *sends; /* [peer]: peer's sends to this rank, not yet matched */
  sc_lb_queue_t *recvs; /* [peer]: this rank's receives from peer, not yet matched */
  /* Per peer: set on both ends once a message of the wrong length arrived
   * between the pair; later requests between them fail at once. */
  atomic_uchar *broken;
  pthread_mutex_t clock;
  pthread_cond_t cv;
  sc_lb_queue_t done; /* matched or failed requests, to be published by progress() */
  size_t inflight;    /* posted and not yet published (owner only): bounds `done` */
  int woken;
  int has_error;           /* the owner's progress() has an error to report once */
  sc_result_t error;       /* under clock */
  char errmsg[256];        /* under clock */
  char peer_msg[256];      /* text for requests to a broken peer; owner thread only */
  struct sc_lb_ep **peers; /* [nranks] after connect_all */
} sc_lb_ep_t;

typedef struct sc_lb_transport {
  sc_transport_t base;
  sc_lb_ep_t *ep;
} sc_lb_transport_t;

static sc_lb_ep_t *lb_ep(sc_transport_t *t) {
  return ((sc_lb_transport_t *)t)->ep;
}

/* Room for `need` entries; the caller holds the ring's lock. */
static sc_result_t q_reserve(sc_lb_queue_t *q, size_t need) {
  if (need <= q->cap) return SC_SUCCESS;
  size_t cap = q->cap ? q->cap : 16;
  while (cap < need) cap *= 2;
  sc_tp_req_t **slot = malloc(cap * sizeof(*slot));
  if (!slot) return SC_ERR(SC_ERR_NOMEM, "loopback: queue of %zu requests", cap);
  for (size_t i = 0; i < q->n; i++) slot[i] = q->slot[(q->head + i) % q->cap];
  free(q->slot);
  q->slot = slot;
  q->cap = cap;
  q->head = 0;
  return SC_SUCCESS;
}

static void q_push(sc_lb_queue_t *q, sc_tp_req_t *r) {
  q->slot[(q->head + q->n) % q->cap] = r;
  q->n++;
}

static sc_tp_req_t *q_pop(sc_lb_queue_t *q) {
  if (!q->n) return NULL;
  sc_tp_req_t *r = q->slot[q->head];
  q->head = (q->head + 1) % q->cap;
  q->n--;
  return r;
}

static void q_free(sc_lb_queue_t *q, size_t n) {
  for (size_t i = 0; q && i < n; i++) free(q[i].slot);
  free(q);
}

static void ep_unref(sc_lb_ep_t *ep) {
  if (!ep || atomic_fetch_sub(&ep->refs, 1) != 1) return;
  pthread_mutex_destroy(&ep->qlock);
  pthread_mutex_destroy(&ep->clock);
  pthread_cond_destroy(&ep->cv);
  q_free(ep->sends, (size_t)ep->nranks);
  q_free(ep->recvs, (size_t)ep->nranks);
  free(ep->done.slot);
  free(ep->broken);
  free(ep->peers);
  free(ep);
}

/* Hands a finished request to its owner. Caller holds the receiver's qlock
 * (or owns r and holds nothing). */
static void complete(sc_lb_ep_t *owner, sc_tp_req_t *r, sc_result_t code, const char *msg) {
  pthread_mutex_lock(&owner->clock);
  r->status = code;
  q_push(&owner->done, r);
  if (code != SC_SUCCESS && !owner->has_error) {
    owner->has_error = 1;
    owner->error = code;
    snprintf(owner->errmsg, sizeof(owner->errmsg), "%s", msg);
  }
  pthread_cond_signal(&owner->cv);
  pthread_mutex_unlock(&owner->clock);
}

/* A receive with a print takes only a message with the same print, one
 * without a print included: the rule of a transport that matches on the
 * print (UCX's tag), stricter than sc_tp_prints_differ, so that the
 * executor's handling of a peer whose messages carry no print can be tested
 * here. */
static int fp_set(const uint8_t fp[SC_TP_FP_LEN]) {
  for (int i = 0; i < SC_TP_FP_LEN; i++)
    if (fp[i]) return 1;
  return 0;
}

/* Matches the send s (from rank `from`) with the receive r at endpoint dst.
 * Caller holds dst->qlock. */
static void match(sc_lb_ep_t *dst, int from, sc_tp_req_t *s, sc_tp_req_t *r) {
  sc_lb_ep_t *src = dst->peers[from];
  if (fp_set(r->fp) && memcmp(s->fp, r->fp, SC_TP_FP_LEN) != 0) {
    char msg[256];
    atomic_store(&dst->broken[from], 1);
    atomic_store(&src->broken[dst->rank], 1);
    snprintf(msg, sizeof(msg),
             "rank %d sent a message of another operation than rank %d's receive (its print "
             "differs)",
             from, dst->rank);
    memcpy(r->peer_fp, s->fp, SC_TP_FP_LEN);
    memcpy(s->peer_fp, r->fp, SC_TP_FP_LEN);
    complete(dst, r, SC_ERR_MISMATCH, msg);
    complete(src, s, SC_ERR_MISMATCH, msg);
    return;
  }
  if (s->len != r->len) {
    char msg[256];
    atomic_store(&dst->broken[from], 1);
    atomic_store(&src->broken[dst->rank], 1);
    snprintf(msg, sizeof(msg), "rank %d sent a message of %zu bytes where rank %d expected %zu",
             from, s->len, dst->rank, r->len);
    complete(dst, r, SC_ERR_REMOTE, msg);
    complete(src, s, SC_ERR_REMOTE, msg);
    return;
  }
  if (r->len) memcpy(r->buf, s->buf, r->len);
  complete(dst, r, SC_SUCCESS, NULL);
  complete(src, s, SC_SUCCESS, NULL);
}

static sc_result_t lb_create(const sc_tp_config_t *cfg, sc_transport_t **tpp, void *addr,
                             size_t *addrlen) {
  if (cfg->nranks < 1 || cfg->rank < 0 || cfg->rank >= cfg->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "loopback: rank %d of %d", cfg->rank, cfg->nranks);
  sc_lb_transport_t *tp = calloc(1, sizeof(*tp));
  sc_lb_ep_t *ep = calloc(1, sizeof(*ep));
  const size_t n = (size_t)cfg->nranks;
  if (ep) {
    ep->sends = calloc(n, sizeof(*ep->sends));
    ep->recvs = calloc(n, sizeof(*ep->recvs));
    ep->broken = calloc(n, sizeof(*ep->broken));
    ep->peers = calloc(n, sizeof(*ep->peers));
  }
  if (!tp || !ep || !ep->sends || !ep->recvs || !ep->broken || !ep->peers) {
    if (ep) {
      free(ep->sends);
      free(ep->recvs);
      free(ep->broken);
      free(ep->peers);
    }
    free(ep);
    free(tp);
    return SC_ERR(SC_ERR_NOMEM, "loopback endpoint for %d ranks", cfg->nranks);
  }
  ep->rank = cfg->rank;
  ep->nranks = cfg->nranks;
  atomic_init(&ep->refs, 1);
  pthread_mutex_init(&ep->qlock, NULL);
  pthread_mutex_init(&ep->clock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ep->cv, &ca);
  pthread_condattr_destroy(&ca);
  tp->ep = ep;
  tp->base.ops = &sc_loopback_transport;
  tp->base.rank = cfg->rank;
  tp->base.nranks = cfg->nranks;
  sc_lb_addr_t a = {.magic = SC_LB_MAGIC,
                    .pid = (int64_t)getpid(),
                    .rank = cfg->rank,
                    .nranks = cfg->nranks,
                    .ep = (uintptr_t)ep};
  memcpy(addr, &a, sizeof(a));
  *addrlen = sizeof(a);
  *tpp = &tp->base;
  return SC_SUCCESS;
}

static sc_result_t lb_connect_all(sc_transport_t *t, const void *addrs, size_t stride) {
  sc_lb_ep_t *ep = lb_ep(t);
  if (stride < sizeof(sc_lb_addr_t))
    return SC_ERR(SC_ERR_INVALID_ARG, "loopback: address stride %zu", stride);
  for (int i = 0; i < ep->nranks; i++) {
    sc_lb_addr_t a;
    memcpy(&a, (const uint8_t *)addrs + (size_t)i * stride, sizeof(a));
    if (a.magic != SC_LB_MAGIC || a.pid != (int64_t)getpid() || a.rank != i ||
        a.nranks != ep->nranks || !a.ep) {
      for (int j = 0; j < i; j++)
        if (ep->peers[j] != ep) ep_unref(ep->peers[j]);
      memset(ep->peers, 0, (size_t)ep->nranks * sizeof(*ep->peers));
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "loopback: rank %d's address is not a loopback endpoint of this process "
                    "with %d ranks (every rank must use SC_TRANSPORT=loopback in one process)",
                    i, ep->nranks);
    }
    ep->peers[i] = (sc_lb_ep_t *)a.ep;
    if (ep->peers[i] != ep) atomic_fetch_add(&ep->peers[i]->refs, 1);
  }
  return SC_SUCCESS;
}

static sc_result_t lb_post_check(sc_lb_ep_t *ep, int peer, const void *buf, size_t len,
                                 sc_tp_req_t *req) {
  if (peer < 0 || peer >= ep->nranks || peer == ep->rank || !ep->peers[peer])
    return SC_ERR(SC_ERR_INVALID_ARG, "loopback: rank %d cannot post to peer %d", ep->rank, peer);
  if (len && !buf) return SC_ERR(SC_ERR_INVALID_ARG, "loopback: NULL buffer of %zu bytes", len);
  /* Room for its completion now, so that a match never allocates. */
  if (ep->inflight + 1 > ep->done.cap) {
    pthread_mutex_lock(&ep->clock);
    sc_result_t res = q_reserve(&ep->done, ep->inflight + 1);
    pthread_mutex_unlock(&ep->clock);
    SC_CHECK(res);
  }
  req->peer = peer;
  req->len = len;
  req->status = SC_SUCCESS;
  req->state = SC_TP_REQ_PENDING;
  return SC_SUCCESS;
}

/* Publishes the requests that matched or failed (their owner's job: the
 * caller is the owner thread, holding clock). Returns the error to report
 * once, its text then in peer_msg; SC_SUCCESS when there is none. */
static sc_result_t publish_locked(sc_lb_ep_t *ep, int *progressed) {
  sc_tp_req_t *r;
  while ((r = q_pop(&ep->done))) {
    ep->inflight--;
    if (r->status == SC_SUCCESS) *progressed = 1;
    __atomic_store_n(&r->state, r->status == SC_SUCCESS ? SC_TP_REQ_DONE : SC_TP_REQ_ERROR,
                     __ATOMIC_RELEASE);
  }
  if (!ep->has_error) return SC_SUCCESS;
  memcpy(ep->peer_msg, ep->errmsg, sizeof(ep->peer_msg));
  ep->has_error = 0;
  return ep->error;
}

/* A request to a pair that already failed fails at once, with the text the
 * failure was first reported with. The failure itself (a request of this
 * rank that failed, not yet reported by progress) is reported first, so
 * that the caller sees that request fail as progress would have shown it. */
static sc_result_t lb_refuse(sc_lb_ep_t *ep, sc_tp_req_t *req) {
  int progressed = 0;
  pthread_mutex_lock(&ep->clock);
  sc_result_t first = publish_locked(ep, &progressed);
  pthread_mutex_unlock(&ep->clock);
  req->state = SC_TP_REQ_ERROR;
  req->status = SC_ERR_REMOTE;
  if (first != SC_SUCCESS) return SC_ERR(first, "%s", ep->peer_msg);
  return SC_ERR(SC_ERR_REMOTE, "%s",
                ep->peer_msg[0] ? ep->peer_msg : "loopback: the link to this peer failed");
}

/* A send and a receive are one rule seen from either end: under the
 * receiver's queue lock, match the oldest opposite request the pair has
 * queued, else queue this one. rx owns the queues, sender names the pair. */
static sc_result_t lb_post(sc_lb_ep_t *ep, sc_lb_ep_t *rx, int sender, sc_tp_req_t *req) {
  sc_lb_queue_t *theirs = req->is_send ? &rx->recvs[sender] : &rx->sends[sender];
  sc_lb_queue_t *mine = req->is_send ? &rx->sends[sender] : &rx->recvs[sender];
  pthread_mutex_lock(&rx->qlock);
  if (atomic_load(&rx->broken[sender])) {
    pthread_mutex_unlock(&rx->qlock);
    return lb_refuse(ep, req);
  }
  sc_result_t res = SC_SUCCESS;
  sc_tp_req_t *other = q_pop(theirs);
  if (other)
    match(rx, sender, req->is_send ? req : other, req->is_send ? other : req);
  else if ((res = q_reserve(mine, mine->n + 1)) == SC_SUCCESS)
    q_push(mine, req);
  pthread_mutex_unlock(&rx->qlock);
  if (res != SC_SUCCESS) {
    req->state = SC_TP_REQ_IDLE;
    return res;
  }
  ep->inflight++;
  return SC_SUCCESS;
}

static sc_result_t lb_isend(sc_transport_t *t, int peer, const void *buf, size_t len,
                            sc_tp_req_t *req) {
  sc_lb_ep_t *ep = lb_ep(t);
  SC_CHECK(lb_post_check(ep, peer, buf, len, req));
  req->is_send = 1;
  req->buf = (uint8_t *)(uintptr_t)buf;
  return lb_post(ep, ep->peers[peer], ep->rank, req);
}

static sc_result_t lb_irecv(sc_transport_t *t, int peer, void *buf, size_t len, sc_tp_req_t *req) {
  sc_lb_ep_t *ep = lb_ep(t);
  SC_CHECK(lb_post_check(ep, peer, buf, len, req));
  req->is_send = 0;
  req->buf = buf;
  return lb_post(ep, ep, peer, req);
}

static sc_result_t lb_progress(sc_transport_t *t, int timeout_ms, int *progressed) {
  sc_lb_ep_t *ep = lb_ep(t);
  *progressed = 0;
  pthread_mutex_lock(&ep->clock);
  if (!ep->done.n && !ep->woken && !ep->has_error && timeout_ms > 0) {
    struct timespec until;
    sc_clock_deadline_ts(timeout_ms, &until);
    while (!ep->done.n && !ep->woken && !ep->has_error)
      if (pthread_cond_timedwait(&ep->cv, &ep->clock, &until) == ETIMEDOUT) break;
  }
  ep->woken = 0;
  sc_result_t err = publish_locked(ep, progressed);
  pthread_mutex_unlock(&ep->clock);
  return err != SC_SUCCESS ? SC_ERR(err, "%s", ep->peer_msg) : SC_SUCCESS;
}

/* Owner thread: fails what q holds; returns how many. */
static size_t fail_queue(sc_lb_queue_t *q, sc_result_t why) {
  size_t n = 0;
  sc_tp_req_t *r;
  while ((r = q_pop(q))) {
    r->status = why;
    __atomic_store_n(&r->state, SC_TP_REQ_ERROR, __ATOMIC_RELEASE);
    n++;
  }
  return n;
}

/* Once each peer's qlock was taken, no match of ours is under way (matches
 * hand over under it), so nothing outside this thread refers to our requests
 * any more: what completed sits in `done`, the rest in the queues. */
static void lb_cancel_all(sc_transport_t *t, sc_result_t why) {
  if (!t) return;
  sc_lb_ep_t *ep = lb_ep(t);
  size_t n = 0;
  for (int i = 0; i < ep->nranks; i++) {
    sc_lb_ep_t *dst = ep->peers[i];
    if (!dst || dst == ep) continue;
    pthread_mutex_lock(&dst->qlock);
    n += fail_queue(&dst->sends[ep->rank], why);
    pthread_mutex_unlock(&dst->qlock);
  }
  pthread_mutex_lock(&ep->qlock);
  for (int i = 0; i < ep->nranks; i++) n += fail_queue(&ep->recvs[i], why);
  pthread_mutex_unlock(&ep->qlock);
  pthread_mutex_lock(&ep->clock);
  n += fail_queue(&ep->done, why);
  ep->has_error = 0;
  pthread_mutex_unlock(&ep->clock);
  ep->inflight = n <= ep->inflight ? ep->inflight - n : 0;
}

static sc_result_t lb_reg(sc_transport_t *t, void *buf, size_t len, void **handle) {
  (void)t, (void)len;
  *handle = buf;
  return SC_SUCCESS;
}

static sc_result_t lb_dereg(sc_transport_t *t, void *handle) {
  (void)t, (void)handle;
  return SC_SUCCESS;
}

static void lb_wake(sc_transport_t *t) {
  if (!t) return;
  sc_lb_ep_t *ep = lb_ep(t);
  pthread_mutex_lock(&ep->clock);
  ep->woken = 1;
  pthread_cond_signal(&ep->cv);
  pthread_mutex_unlock(&ep->clock);
}

static void lb_destroy(sc_transport_t *t) {
  if (!t) return;
  sc_lb_ep_t *ep = lb_ep(t);
  for (int i = 0; i < ep->nranks; i++)
    if (ep->peers[i] && ep->peers[i] != ep) ep_unref(ep->peers[i]);
  ep_unref(ep);
  free(t);
}

/* Every pair is two threads of this process; every rank answers alike. */
static sc_result_t lb_props(sc_transport_t *t, int a, int b, sc_tp_props_t *out) {
  if (a < 0 || b < 0 || a >= t->nranks || b >= t->nranks || a == b)
    return SC_ERR(SC_ERR_INVALID_ARG, "loopback: no link between ranks %d and %d of %d", a, b,
                  t->nranks);
  /* A message is one memcpy from the sender's buffer, made when both sides
   * posted: single copy from the first byte, completing the send. */
  *out = (sc_tp_props_t){.kind = SC_TP_KIND_INPROC,
                         .locality = SC_TP_SAME_PROCESS,
                         .single_copy_min = 1,
                         .receiver_spins = 0};
  return SC_SUCCESS;
}

const sc_transport_ops_t sc_loopback_transport = {.name = "loopback",
                                                  .create = lb_create,
                                                  .connect_all = lb_connect_all,
                                                  .isend = lb_isend,
                                                  .irecv = lb_irecv,
                                                  .progress = lb_progress,
                                                  .cancel_all = lb_cancel_all,
                                                  .reg = lb_reg,
                                                  .dereg = lb_dereg,
                                                  .wake = lb_wake,
                                                  .destroy = lb_destroy,
                                                  .props = lb_props};
