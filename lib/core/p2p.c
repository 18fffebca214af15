/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messaging. Transports match messages per peer strictly in
 * posting order and need each message's exact length, so sends and receives
 * that match by tag cannot share the collectives' message stream: they get
 * their own transport instance, the p2p lane, driven by its own thread (a
 * transport instance is single-threaded). User threads hand it operations
 * through a locked queue and wake it.
 *
 * On the lane, every frame is a fixed-size header (p2p_match.h), followed by
 * a payload message of the length the header states for EAGER and DATA.
 * Each peer always has one header receive posted, so a sender never waits
 * for this rank to call anything; after a header that announces a payload,
 * the payload's receive is posted before the next header's, into the
 * matched user buffer (no copy), a buffer of its own for a message no
 * receive wanted yet, or a scratch buffer for one that is dropped. Large
 * messages go by rendezvous (RTS, CTS or DROP, DATA), so that the payload
 * moves once, from the sender's buffer into the receiver's, by whatever
 * zero-copy path the transport has.
 *
 * Only the lane thread touches the lane, the matching lists and the
 * operations in flight; it completes an operation's request last, after
 * which the operation belongs to its waiter (sc_request_finish frees it). */
#include "lib/core/p2p.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/core/fingerprint.h"
#include "lib/core/p2p_match.h"

/* How long the lane thread waits in the transport before it looks at its
 * queue and deadlines again without being woken. */
#define SC_P2P_POLL_MS 20

enum { SC_TR_MAX = 3 };

typedef struct sc_p2p_op {
  sc_request_t req;        /* first: sc_test, sc_wait and their free work unchanged */
  struct sc_p2p_op *qnext; /* submission queue */
  struct sc_p2p_op *anext; /* the lane's list of operations with requests in flight */
  struct sc_p2p_op *wnext; /* the peer's list of sends waiting for CTS / receives for DATA */
  sc_p2p_entry_t ent;      /* the peer's posted receives */
  const char *fn;
  int is_send, peer, tag;
  sc_dtype_t dtype;
  uint64_t count, bytes, id;
  uint8_t *buf;
  int64_t deadline_ms;
  int in_active, final, waiting;
  sc_result_t fail; /* decided while requests were still in flight */
  int ntr;
  sc_tp_req_t tr[SC_TR_MAX];
  uint8_t hdr[SC_P2P_HDR_BYTES], hdr2[SC_P2P_HDR_BYTES];
} sc_p2p_op_t;

/* A message that arrived before a receive wanted it (or one being dropped). */
typedef struct sc_p2p_unexp {
  sc_p2p_entry_t ent;
  struct sc_p2p_unexp *pnext; /* the lane's list of payloads in flight */
  sc_p2p_kind_t kind;
  uint64_t bytes, id;
  int peer, arrived, drop;
  uint8_t *data;
  sc_p2p_op_t *recv;      /* matched while its payload was still arriving */
  sc_p2p_op_t *self_send; /* a send to this rank: its buffer, not a copy */
  sc_tp_req_t req;
  struct sc_p2p *lane;
  uint64_t charge; /* its share of the lane's unexp_bytes */
} sc_p2p_unexp_t;

typedef struct sc_p2p_ctl {
  struct sc_p2p_ctl *next;
  int peer;
  sc_tp_req_t req;
  uint8_t hdr[SC_P2P_HDR_BYTES];
} sc_p2p_ctl_t;

typedef struct sc_p2p_peer {
  int dead, quiet; /* quiet: its end was said elsewhere (BYE, the communicator's failure) */
  sc_result_t dead_res;
  char dead_msg[SC_ERRMSG_MAX / 2];
  sc_p2p_list_t posted, unexp;
  sc_p2p_op_t *wait_cts, *wait_data;
  uint64_t next_id;
  int hposted;
  sc_tp_req_t hreq;
  uint8_t hbuf[SC_P2P_HDR_BYTES];
} sc_p2p_peer_t;

struct sc_p2p {
  sc_comm_t *comm;
  const sc_transport_ops_t *ops;
  sc_transport_t *tp; /* NULL for one rank: only self-sends */
  pthread_mutex_t lock;
  pthread_cond_t cv;
  sc_p2p_op_t *qhead, *qtail;
  int started, closed;
  pthread_t thread;
  /* the lane thread's */
  sc_p2p_peer_t *peers;
  sc_p2p_op_t *active;
  sc_p2p_unexp_t *pending;
  sc_p2p_ctl_t *ctls;
  int comm_failed;
  uint64_t unexp_bytes;           /* held by messages from peers no receive has taken yet */
  char tp_msg[SC_ERRMSG_MAX / 2]; /* the transport's last failure */
};

/* What an unmatched arrival costs against SC_P2P_UNEXPECTED_BYTES besides
 * its payload: its record and the allocator's share. */
#define SC_P2P_UNEXP_OVERHEAD 128

/* ---- operations ---- */

static void op_describe(const sc_p2p_op_t *op, char *out, size_t len) {
  snprintf(out, len, "%s %s rank %d (tag %d, count %" PRIu64 " of %s)", op->fn,
           op->is_send ? "to" : "from", op->peer, op->tag, op->count, sc_dtype_name(op->dtype));
}

/* The last thing done to op: it may be freed at once by its waiter. The
 * error detail (res != SC_SUCCESS) was recorded on this thread just before. */
static void op_complete(sc_p2p_op_t *op, sc_result_t res) {
  sc_request_complete(&op->req, res);
}

/* Records res with op's description and the reason, then completes op. */
static void op_fail(sc_p2p_t *p, sc_p2p_op_t *op, sc_result_t res, const char *why) {
  char what[160];
  op_describe(op, what, sizeof(what));
  SC_ERR(res, "rank %d: %s: %s", p->comm->rank, what, why);
  op_complete(op, res);
}

static int op_tr_pending(const sc_p2p_op_t *op) {
  for (int i = 0; i < op->ntr; i++)
    if (op->tr[i].state == SC_TP_REQ_PENDING) return 1;
  return 0;
}

static void active_add(sc_p2p_t *p, sc_p2p_op_t *op) {
  if (op->in_active) return;
  op->in_active = 1;
  op->anext = p->active;
  p->active = op;
}

static void wait_remove(sc_p2p_op_t **list, sc_p2p_op_t *op) {
  for (sc_p2p_op_t **pp = list; *pp; pp = &(*pp)->wnext)
    if (*pp == op) {
      *pp = op->wnext;
      op->waiting = 0;
      return;
    }
}

static sc_p2p_op_t *wait_take_id(sc_p2p_op_t **list, uint64_t id) {
  for (sc_p2p_op_t **pp = list; *pp; pp = &(*pp)->wnext)
    if ((*pp)->id == id) {
      sc_p2p_op_t *op = *pp;
      *pp = op->wnext;
      op->waiting = 0;
      return op;
    }
  return NULL;
}

static sc_result_t tp_post(sc_p2p_t *p, int is_send, int peer, void *buf, size_t len,
                           sc_tp_req_t *req) {
  memset(req, 0, sizeof(*req));
  sc_result_t r = is_send ? p->ops->isend(p->tp, peer, buf, len, req)
                          : p->ops->irecv(p->tp, peer, buf, len, req);
  if (r != SC_SUCCESS) {
    /* the request's failure is what the lane thread acts on */
    sc_error_get_detail(p->tp_msg, sizeof(p->tp_msg));
    req->status = r;
    req->state = SC_TP_REQ_ERROR;
  }
  return r;
}

/* ---- peers ---- */

static void peer_fail(sc_p2p_t *p, int peer, sc_result_t res, const char *why);

static void tp_failed(sc_p2p_t *p, int peer, sc_result_t st) {
  char why[SC_ERRMSG_MAX / 2];
  snprintf(why, sizeof(why), "the point-to-point lane to rank %d failed: %s", peer,
           p->tp_msg[0] ? p->tp_msg : sc_strerror(st));
  peer_fail(p, peer, st == SC_ERR_ABORTED || st == SC_ERR_TIMEOUT ? st : SC_ERR_REMOTE, why);
}

static void send_ctl(sc_p2p_t *p, int peer, sc_p2p_kind_t kind, uint64_t id) {
  sc_p2p_ctl_t *c = calloc(1, sizeof(*c));
  if (!c) {
    peer_fail(p, peer, SC_ERR_NOMEM, "no memory for a control frame");
    return;
  }
  sc_p2p_hdr_t h = {.kind = kind, .dtype = SC_UINT8, .id = id};
  sc_p2p_hdr_encode(&h, c->hdr);
  c->peer = peer;
  tp_post(p, 1, peer, c->hdr, SC_P2P_HDR_BYTES, &c->req); /* a failure shows in c->req */
  c->next = p->ctls;
  p->ctls = c;
}

static void unexp_free(sc_p2p_unexp_t *u) {
  u->lane->unexp_bytes -= u->charge;
  free(u->data);
  free(u);
}

/* Every operation with peer fails, now or once its requests settle; the peer
 * refuses operations from now on. */
static void peer_fail(sc_p2p_t *p, int peer, sc_result_t res, const char *why) {
  sc_p2p_peer_t *pp = &p->peers[peer];
  if (pp->dead) return;
  pp->dead = 1;
  pp->dead_res = res;
  snprintf(pp->dead_msg, sizeof(pp->dead_msg), "%s", why);
  if (res != SC_ERR_ABORTED && !pp->quiet)
    SC_WARN(SC_SUBSYS_COLL, "rank %d: %s", p->comm->rank, why);
  sc_p2p_entry_t *e;
  while ((e = pp->posted.head)) {
    sc_p2p_list_remove(&pp->posted, e);
    op_fail(p, e->owner, res, why);
  }
  while ((e = pp->unexp.head)) {
    sc_p2p_list_remove(&pp->unexp, e);
    sc_p2p_unexp_t *u = e->owner;
    if (u->self_send) op_fail(p, u->self_send, res, why);
    /* Only an eager payload still being received has a request (on the
     * pending list) that must settle first; a rendezvous request has none. */
    if (u->arrived || u->kind != SC_P2P_EAGER || !u->data)
      unexp_free(u);
    else
      u->drop = 1; /* freed when its request settles */
  }
  for (sc_p2p_op_t **list = &pp->wait_cts; list;
       list = list == &pp->wait_cts ? &pp->wait_data : NULL) {
    sc_p2p_op_t *op;
    while ((op = *list)) {
      *list = op->wnext;
      op->waiting = 0;
      if (op->in_active) {
        op->fail = res;
        op->final = 1;
      } else {
        op_fail(p, op, res, why);
      }
    }
  }
  for (sc_p2p_op_t *op = p->active; op; op = op->anext)
    if (op->peer == peer) op->fail = res;
  for (sc_p2p_unexp_t *u = p->pending; u; u = u->pnext)
    if (u->peer == peer && u->recv) {
      op_fail(p, u->recv, res, why);
      u->recv = NULL;
      u->drop = 1;
    }
}

static void peer_post_header(sc_p2p_t *p, int peer) {
  sc_p2p_peer_t *pp = &p->peers[peer];
  if (pp->dead) return;
  pp->hposted = 1; /* a failed post is seen as a failed request */
  tp_post(p, 0, peer, pp->hbuf, SC_P2P_HDR_BYTES, &pp->hreq);
}

/* ---- matching ---- */

/* A matched message's payload lands in op's buffer: receive it. */
static void recv_payload(sc_p2p_t *p, sc_p2p_op_t *op) {
  op->final = 1;
  op->deadline_ms = sc_now_ms() + p->comm->cfg.timeout_ms;
  if (op->bytes) tp_post(p, 0, op->peer, op->buf, op->bytes, &op->tr[op->ntr++]);
  active_add(p, op);
}

/* Receive op meets unexpected message u (both taken off their lists). */
static void match_unexp(sc_p2p_t *p, sc_p2p_op_t *op, sc_p2p_unexp_t *u) {
  const int rank = p->comm->rank;
  int bad =
      sc_p2p_mismatch(rank, op->peer, op->tag, op->count, op->dtype, u->ent.count, u->ent.dtype);
  if (u->self_send) {
    sc_p2p_op_t *s = u->self_send;
    if (bad) {
      op_complete(op, SC_ERR_MISMATCH);
    } else {
      if (op->bytes) memcpy(op->buf, s->buf, op->bytes);
      op_complete(op, SC_SUCCESS);
    }
    op_complete(s, SC_SUCCESS);
    unexp_free(u);
    return;
  }
  if (u->kind == SC_P2P_RTS) {
    send_ctl(p, op->peer, bad ? SC_P2P_DROP : SC_P2P_CTS, u->id);
    if (bad) {
      op_complete(op, SC_ERR_MISMATCH);
    } else {
      op->id = u->id;
      op->wnext = p->peers[op->peer].wait_data;
      p->peers[op->peer].wait_data = op;
      op->waiting = 1;
      op->deadline_ms = sc_now_ms() + p->comm->cfg.timeout_ms;
    }
    unexp_free(u);
    return;
  }
  if (bad) {
    op_complete(op, SC_ERR_MISMATCH);
    if (u->arrived)
      unexp_free(u);
    else
      u->drop = 1;
    return;
  }
  if (u->arrived) {
    if (op->bytes) memcpy(op->buf, u->data, op->bytes);
    op_complete(op, SC_SUCCESS);
    unexp_free(u);
  } else {
    u->recv = op; /* completed when the payload is in */
  }
}

/* A record of h from peer, or NULL: no memory, or (peer failed, saying so)
 * the bytes from peers no receive has taken yet would pass
 * SC_P2P_UNEXPECTED_BYTES. A sender the receiver never answers could
 * otherwise fill this rank's memory; a send to this rank holds no copy. */
static sc_p2p_unexp_t *unexp_new(sc_p2p_t *p, int peer, const sc_p2p_hdr_t *h) {
  uint64_t charge = 0;
  if (peer != p->comm->rank) {
    int payload = h->kind == SC_P2P_EAGER || h->kind == SC_P2P_DATA;
    charge = SC_P2P_UNEXP_OVERHEAD + (payload ? h->bytes : 0);
    const uint64_t limit = p->comm->cfg.p2p_unexp_bytes;
    if (charge > limit || p->unexp_bytes > limit - charge) {
      char why[SC_ERRMSG_MAX / 2];
      snprintf(why, sizeof(why),
               "messages from rank %d no receive has taken yet would hold over "
               "SC_P2P_UNEXPECTED_BYTES=%" PRIu64 " bytes on rank %d (%" PRIu64 " held, %" PRIu64
               " more arriving): post the receives sooner or raise it",
               peer, limit, p->comm->rank, p->unexp_bytes, charge);
      SC_ERR(SC_ERR_NOMEM, "%s", why);
      peer_fail(p, peer, SC_ERR_NOMEM, why);
      return NULL;
    }
  }
  sc_p2p_unexp_t *u = calloc(1, sizeof(*u));
  if (!u) return NULL;
  u->lane = p;
  u->charge = charge;
  p->unexp_bytes += charge;
  u->ent.tag = h->tag;
  u->ent.dtype = h->dtype;
  u->ent.count = h->count;
  u->ent.owner = u;
  u->kind = h->kind;
  u->bytes = h->bytes;
  u->id = h->id;
  u->peer = peer;
  return u;
}

/* Receives an eager payload into a buffer of its own (u->drop: to discard). */
static void unexp_receive(sc_p2p_t *p, sc_p2p_unexp_t *u) {
  if (!u->bytes) {
    u->arrived = 1;
    if (u->drop) unexp_free(u);
    return;
  }
  u->data = malloc(u->bytes);
  if (!u->data) {
    peer_fail(p, u->peer, SC_ERR_NOMEM, "no memory to buffer an unexpected message");
    return;
  }
  tp_post(p, 0, u->peer, u->data, u->bytes, &u->req);
  u->pnext = p->pending;
  p->pending = u;
}

static void protocol_error(sc_p2p_t *p, int peer) {
  char why[SC_ERRMSG_MAX / 2];
  sc_error_get_detail(why, sizeof(why));
  peer_fail(p, peer, SC_ERR_REMOTE, why);
}

/* A header arrived from peer: act on it, post its payload's receive, then
 * the next header's. */
static void on_header(sc_p2p_t *p, int peer) {
  sc_p2p_peer_t *pp = &p->peers[peer];
  sc_p2p_hdr_t h;
  pp->hposted = 0;
  if (sc_p2p_hdr_decode(pp->hbuf, peer, SC_P2P_EAGER_BYTES, &h) != SC_SUCCESS) {
    protocol_error(p, peer);
    return;
  }
  const int rank = p->comm->rank;
  switch (h.kind) {
  case SC_P2P_EAGER:
  case SC_P2P_RTS: {
    sc_p2p_entry_t *e = sc_p2p_list_take(&pp->posted, h.tag);
    sc_p2p_op_t *op = e ? e->owner : NULL;
    if (op && h.kind == SC_P2P_EAGER) {
      if (!sc_p2p_mismatch(rank, peer, h.tag, op->count, op->dtype, h.count, h.dtype)) {
        recv_payload(p, op);
        break;
      }
      op_complete(op, SC_ERR_MISMATCH);
    }
    sc_p2p_unexp_t *u = unexp_new(p, peer, &h);
    if (!u) {
      peer_fail(p, peer, SC_ERR_NOMEM, "no memory for an incoming message");
      return;
    }
    if (op && h.kind == SC_P2P_EAGER) {
      u->drop = 1; /* its receive failed above: the payload is read and discarded */
      unexp_receive(p, u);
    } else if (op) {
      match_unexp(p, op, u); /* a rendezvous: CTS, or DROP on a mismatch */
    } else {
      sc_p2p_list_push(&pp->unexp, &u->ent);
      if (h.kind == SC_P2P_EAGER) unexp_receive(p, u);
    }
    break;
  }
  case SC_P2P_CTS:
  case SC_P2P_DROP: {
    sc_p2p_op_t *op = wait_take_id(&pp->wait_cts, h.id);
    if (!op) break; /* the send timed out meanwhile */
    if (h.kind == SC_P2P_CTS) {
      sc_p2p_hdr_t d = {.kind = SC_P2P_DATA,
                        .dtype = op->dtype,
                        .tag = op->tag,
                        .count = op->count,
                        .bytes = op->bytes,
                        .id = op->id};
      sc_p2p_hdr_encode(&d, op->hdr2);
      op->deadline_ms = sc_now_ms() + p->comm->cfg.timeout_ms;
      if (tp_post(p, 1, peer, op->hdr2, SC_P2P_HDR_BYTES, &op->tr[op->ntr++]) == SC_SUCCESS)
        tp_post(p, 1, peer, op->buf, op->bytes, &op->tr[op->ntr++]);
    }
    op->final = 1;
    if (op->in_active || op_tr_pending(op))
      active_add(p, op);
    else
      op_complete(op, SC_SUCCESS);
    break;
  }
  case SC_P2P_BYE: {
    char why[128];
    snprintf(why, sizeof(why),
             "rank %d closed its point-to-point lane (its communicator was destroyed)", peer);
    SC_ERR(SC_ERR_REMOTE, "%s", why);
    pp->quiet = 1;
    peer_fail(p, peer, SC_ERR_REMOTE, why);
    return; /* nothing follows: no header receive left pending for its close */
  }
  case SC_P2P_DATA: {
    sc_p2p_op_t *op = wait_take_id(&pp->wait_data, h.id);
    if (op && op->bytes != h.bytes) {
      SC_ERR(SC_ERR_REMOTE,
             "point-to-point DATA from rank %d: %" PRIu64 " bytes, %" PRIu64
             " were cleared to send",
             peer, h.bytes, op->bytes);
      op->wnext = pp->wait_data;
      pp->wait_data = op;
      op->waiting = 1;
      protocol_error(p, peer);
      return;
    }
    if (op) {
      recv_payload(p, op);
    } else if (h.bytes) {
      /* The receive timed out after its CTS left: bounded by the bytes the
       * header claims, which only a garbled header could make huge. */
      if (h.bytes > ((uint64_t)1 << 40)) {
        SC_ERR(SC_ERR_REMOTE, "point-to-point DATA from rank %d: %" PRIu64 " bytes unasked for",
               peer, h.bytes);
        protocol_error(p, peer);
        return;
      }
      sc_p2p_unexp_t *u = unexp_new(p, peer, &h);
      if (!u) {
        peer_fail(p, peer, SC_ERR_NOMEM, "no memory to drop a message");
        return;
      }
      u->drop = 1;
      unexp_receive(p, u);
    }
    break;
  }
  }
  peer_post_header(p, peer);
}

/* ---- starting operations (lane thread) ---- */

static void start_self(sc_p2p_t *p, sc_p2p_op_t *op) {
  sc_p2p_peer_t *pp = &p->peers[op->peer];
  if (op->is_send) {
    sc_p2p_entry_t *e = sc_p2p_list_take(&pp->posted, op->tag);
    sc_p2p_hdr_t h = {.kind = SC_P2P_EAGER,
                      .dtype = op->dtype,
                      .tag = op->tag,
                      .count = op->count,
                      .bytes = op->bytes};
    sc_p2p_unexp_t *u = unexp_new(p, op->peer, &h);
    if (!u) {
      if (e) sc_p2p_list_push(&pp->posted, e);
      SC_ERR(SC_ERR_NOMEM, "self-send");
      op_complete(op, SC_ERR_NOMEM);
      return;
    }
    u->arrived = 1;
    u->self_send = op;
    if (e)
      match_unexp(p, e->owner, u);
    else
      sc_p2p_list_push(&pp->unexp, &u->ent);
    return;
  }
  sc_p2p_entry_t *e = sc_p2p_list_take(&pp->unexp, op->tag);
  if (e)
    match_unexp(p, op, e->owner);
  else
    sc_p2p_list_push(&pp->posted, &op->ent);
}

static void start_op(sc_p2p_t *p, sc_p2p_op_t *op) {
  sc_p2p_peer_t *pp = &p->peers[op->peer];
  op->deadline_ms = sc_now_ms() + p->comm->cfg.timeout_ms;
  if (pp->dead) {
    op_fail(p, op, pp->dead_res, pp->dead_msg);
    return;
  }
  if (op->peer == p->comm->rank) {
    start_self(p, op);
    return;
  }
  if (!op->is_send) {
    sc_p2p_entry_t *e = sc_p2p_list_take(&pp->unexp, op->tag);
    if (e)
      match_unexp(p, op, e->owner);
    else
      sc_p2p_list_push(&pp->posted, &op->ent);
    return;
  }
  const int eager = op->bytes <= SC_P2P_EAGER_BYTES;
  op->id = pp->next_id++;
  sc_p2p_hdr_t h = {.kind = eager ? SC_P2P_EAGER : SC_P2P_RTS,
                    .dtype = op->dtype,
                    .tag = op->tag,
                    .count = op->count,
                    .bytes = op->bytes,
                    .id = op->id};
  sc_p2p_hdr_encode(&h, op->hdr);
  sc_result_t r = tp_post(p, 1, op->peer, op->hdr, SC_P2P_HDR_BYTES, &op->tr[op->ntr++]);
  if (r == SC_SUCCESS && eager && op->bytes)
    tp_post(p, 1, op->peer, op->buf, op->bytes, &op->tr[op->ntr++]);
  if (eager) {
    op->final = 1;
  } else {
    op->wnext = pp->wait_cts;
    pp->wait_cts = op;
    op->waiting = 1;
  }
  active_add(p, op);
}

/* ---- the lane thread ---- */

static void scan_active(sc_p2p_t *p) {
  sc_p2p_op_t **pp = &p->active;
  while (*pp) {
    sc_p2p_op_t *op = *pp;
    if (op_tr_pending(op)) {
      pp = &op->anext;
      continue;
    }
    *pp = op->anext;
    op->in_active = 0;
    sc_result_t st = SC_SUCCESS;
    for (int i = 0; i < op->ntr; i++)
      if (op->tr[i].state == SC_TP_REQ_ERROR)
        st = op->tr[i].status ? op->tr[i].status : SC_ERR_REMOTE;
    if (st != SC_SUCCESS) {
      if (op->waiting)
        wait_remove(op->is_send ? &p->peers[op->peer].wait_cts : &p->peers[op->peer].wait_data, op);
      op->final = 1;
      tp_failed(p, op->peer, st); /* fails op->fail too */
      if (op->fail == SC_SUCCESS) op->fail = st;
    }
    if (!op->final) continue; /* a rendezvous send waiting for its CTS */
    if (op->fail != SC_SUCCESS) {
      sc_p2p_peer_t *peer = &p->peers[op->peer];
      op_fail(p, op, op->fail, peer->dead ? peer->dead_msg : "failed");
    } else {
      op_complete(op, SC_SUCCESS);
    }
  }
}

static void scan_pending(sc_p2p_t *p) {
  sc_p2p_unexp_t **pp = &p->pending;
  while (*pp) {
    sc_p2p_unexp_t *u = *pp;
    if (u->req.state == SC_TP_REQ_PENDING) {
      pp = &u->pnext;
      continue;
    }
    *pp = u->pnext;
    if (u->req.state == SC_TP_REQ_ERROR) tp_failed(p, u->peer, u->req.status);
    u->arrived = 1;
    if (u->recv && u->req.state != SC_TP_REQ_ERROR) {
      if (u->bytes) memcpy(u->recv->buf, u->data, u->bytes);
      op_complete(u->recv, SC_SUCCESS);
      unexp_free(u);
    } else if (u->drop || u->req.state == SC_TP_REQ_ERROR) {
      /* on the peer's list still only when not dropped: peer_fail took it */
      if (!u->drop) sc_p2p_list_remove(&p->peers[u->peer].unexp, &u->ent);
      unexp_free(u);
    }
  }
}

static void scan_ctls(sc_p2p_t *p) {
  sc_p2p_ctl_t **cp = &p->ctls;
  while (*cp) {
    sc_p2p_ctl_t *c = *cp;
    if (c->req.state == SC_TP_REQ_PENDING) {
      cp = &c->next;
      continue;
    }
    *cp = c->next;
    if (c->req.state == SC_TP_REQ_ERROR) tp_failed(p, c->peer, c->req.status);
    free(c);
  }
}

/* Operations past SC_TIMEOUT_MS fail. One that waits in a list leaves it
 * alone; one whose messages are in the transport cannot be taken back from
 * it, so the whole lane is failed (cancel_all) and every operation with it. */
static void check_deadlines(sc_p2p_t *p, int64_t now) {
  const int n = p->comm->nranks;
  char why[160];
  snprintf(why, sizeof(why), "no progress for %d ms (SC_TIMEOUT_MS)", p->comm->cfg.timeout_ms);
  for (int i = 0; i < n; i++) {
    sc_p2p_peer_t *pp = &p->peers[i];
    for (sc_p2p_entry_t *e = pp->posted.head, *next; e; e = next) {
      next = e->next;
      sc_p2p_op_t *op = e->owner;
      if (now < op->deadline_ms) continue;
      sc_p2p_list_remove(&pp->posted, e);
      op_fail(p, op, SC_ERR_TIMEOUT, why);
    }
    for (sc_p2p_entry_t *e = pp->unexp.head, *next; e; e = next) {
      next = e->next;
      sc_p2p_unexp_t *u = e->owner;
      if (!u->self_send || now < u->self_send->deadline_ms) continue;
      sc_p2p_list_remove(&pp->unexp, e);
      op_fail(p, u->self_send, SC_ERR_TIMEOUT, why);
      unexp_free(u);
    }
    for (sc_p2p_op_t **list = &pp->wait_cts; list;
         list = list == &pp->wait_cts ? &pp->wait_data : NULL) {
      for (sc_p2p_op_t *op = *list, *next; op; op = next) {
        next = op->wnext;
        if (now < op->deadline_ms) continue;
        wait_remove(list, op);
        if (op->in_active) {
          op->final = 1;
          op->fail = SC_ERR_TIMEOUT;
        } else {
          op_fail(p, op, SC_ERR_TIMEOUT, why);
        }
      }
    }
  }
  int stuck = 0;
  for (sc_p2p_op_t *op = p->active; op && !stuck; op = op->anext)
    stuck = op_tr_pending(op) && now >= op->deadline_ms;
  if (!stuck) return;
  SC_ERR(SC_ERR_TIMEOUT, "rank %d: point-to-point messages %s", p->comm->rank, why);
  sc_error_get_detail(p->tp_msg, sizeof(p->tp_msg));
  p->ops->cancel_all(p->tp, SC_ERR_TIMEOUT);
  for (int i = 0; i < n; i++)
    if (i != p->comm->rank) peer_fail(p, i, SC_ERR_TIMEOUT, p->tp_msg);
}

/* The communicator failed (a collective, or the liveness watch, which also
 * sees peers die that a transport would only notice at the timeout, as UCX):
 * what is pending fails with its first failure, as later calls would. */
static void check_comm_failed(sc_p2p_t *p) {
  sc_comm_t *comm = p->comm;
  int err = atomic_load(&comm->error);
  if (err == SC_SUCCESS || p->comm_failed) return;
  p->comm_failed = 1;
  char why[SC_ERRMSG_MAX / 2], first[SC_ERRMSG_MAX / 2 - 64];
  pthread_mutex_lock(&comm->lock);
  snprintf(first, sizeof(first), "%s", comm->errmsg);
  pthread_mutex_unlock(&comm->lock);
  snprintf(why, sizeof(why), "the communicator failed: %s", first);
  for (int i = 0; i < comm->nranks; i++) {
    p->peers[i].quiet = 1;
    peer_fail(p, i, (sc_result_t)err, why);
  }
}

static sc_p2p_op_t *take_queue(sc_p2p_t *p, int *closed) {
  pthread_mutex_lock(&p->lock);
  sc_p2p_op_t *q = p->qhead;
  p->qhead = p->qtail = NULL;
  *closed = p->closed;
  pthread_mutex_unlock(&p->lock);
  return q;
}

/* A destroy (not an abort) says goodbye to every peer still there, so that
 * their lanes take the close that follows for what it is rather than a
 * failure; bounded by a second. Called by whoever owns the lane. */
static void say_bye(sc_p2p_t *p) {
  const int n = p->comm->nranks;
  if (!p->tp || atomic_load(&p->comm->aborted)) return;
  sc_p2p_ctl_t *bye = calloc((size_t)n, sizeof(*bye));
  if (!bye) return;
  sc_p2p_hdr_t h = {.kind = SC_P2P_BYE, .dtype = SC_UINT8};
  for (int i = 0; i < n; i++) {
    bye[i].req.state = SC_TP_REQ_DONE;
    if (i == p->comm->rank || p->peers[i].dead) continue;
    sc_p2p_hdr_encode(&h, bye[i].hdr);
    tp_post(p, 1, i, bye[i].hdr, SC_P2P_HDR_BYTES, &bye[i].req);
  }
  const int64_t end = sc_now_ms() + 1000;
  for (int pending = 1; pending && sc_now_ms() < end;) {
    int progressed;
    if (p->ops->progress(p->tp, 10, &progressed) != SC_SUCCESS)
      sc_error_get_detail(p->tp_msg, sizeof(p->tp_msg));
    pending = 0;
    for (int i = 0; i < n; i++) pending |= bye[i].req.state == SC_TP_REQ_PENDING;
  }
  p->ops->cancel_all(p->tp, SC_ERR_ABORTED);
  free(bye);
}

/* The lane closes: everything still pending fails with SC_ERR_ABORTED. */
static void fail_all(sc_p2p_t *p, sc_p2p_op_t *queued) {
  const char *why = "the communicator was aborted or destroyed";
  say_bye(p);
  if (p->tp) p->ops->cancel_all(p->tp, SC_ERR_ABORTED);
  for (sc_p2p_op_t *op = queued, *next; op; op = next) {
    next = op->qnext;
    op_fail(p, op, SC_ERR_ABORTED, why);
  }
  for (int i = 0; i < p->comm->nranks; i++) {
    p->peers[i].dead = 0;
    peer_fail(p, i, SC_ERR_ABORTED, why);
  }
  /* cancel_all settled every request: what peer_fail deferred ends now */
  scan_active(p);
  scan_pending(p);
  scan_ctls(p);
}

static void *sc_p2p_main(void *arg) {
  sc_p2p_t *p = arg;
  sc_log_set_rank(p->comm->rank);
  for (int i = 0; i < p->comm->nranks; i++)
    if (i != p->comm->rank && p->tp) peer_post_header(p, i);
  int64_t next_check = sc_now_ms() + SC_P2P_POLL_MS;
  for (;;) {
    int closed;
    sc_p2p_op_t *q = take_queue(p, &closed);
    if (closed) {
      fail_all(p, q);
      break;
    }
    for (sc_p2p_op_t *op = q, *next; op; op = next) {
      next = op->qnext;
      start_op(p, op);
    }
    if (p->tp) {
      int progressed = 0;
      sc_result_t r = p->ops->progress(p->tp, q ? 0 : SC_P2P_POLL_MS, &progressed);
      if (r != SC_SUCCESS) sc_error_get_detail(p->tp_msg, sizeof(p->tp_msg));
      for (int i = 0; i < p->comm->nranks; i++) {
        sc_p2p_peer_t *pp = &p->peers[i];
        if (!pp->hposted || pp->hreq.state == SC_TP_REQ_PENDING) continue;
        if (pp->hreq.state == SC_TP_REQ_ERROR) {
          pp->hposted = 0;
          tp_failed(p, i, pp->hreq.status);
        } else {
          on_header(p, i);
        }
      }
      scan_active(p);
      scan_pending(p);
      scan_ctls(p);
    } else if (!q) {
      pthread_mutex_lock(&p->lock);
      if (!p->qhead && !p->closed) {
        struct timespec ts;
        sc_clock_deadline_ts(SC_P2P_POLL_MS, &ts);
        pthread_cond_timedwait(&p->cv, &p->lock, &ts);
      }
      pthread_mutex_unlock(&p->lock);
    }
    int64_t now = sc_now_ms();
    if (now >= next_check) {
      check_comm_failed(p);
      check_deadlines(p, now);
      next_check = now + SC_P2P_POLL_MS;
    }
  }
  return NULL;
}

/* ---- life cycle ---- */

sc_result_t sc_p2p_create(sc_comm_t *comm, const sc_tp_config_t *tpc) {
  if (!comm->cfg.p2p) return SC_SUCCESS;
  sc_p2p_t *p = calloc(1, sizeof(*p));
  if (!p) return SC_ERR(SC_ERR_NOMEM, "point-to-point state");
  p->comm = comm;
  p->ops = comm->tpops;
  pthread_mutex_init(&p->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  comm->p2p = p;
  const int n = comm->nranks;
  p->peers = calloc((size_t)n, sizeof(*p->peers));
  if (!p->peers) return SC_ERR(SC_ERR_NOMEM, "point-to-point peers of %d ranks", n);
  if (n < 2) return SC_SUCCESS;
  const size_t w = SC_TP_ADDR_MAX;
  uint8_t *all = calloc((size_t)n + 1, w);
  if (!all) return SC_ERR(SC_ERR_NOMEM, "point-to-point addresses of %d ranks", n);
  uint8_t *mine = all + (size_t)n * w;
  size_t len = w;
  /* The lane's setup logs what the collectives' transport logged already. */
  sc_log_repeating(1);
  sc_result_t r = p->ops->create(tpc, &p->tp, mine, &len);
  if (r != SC_SUCCESS) {
    sc_log_repeating(0);
    p->tp = NULL;
    free(all);
    return r;
  }
  /* No print: the exchange is no call of the user's. */
  sc_sched_t s;
  sc_sched_init(&s);
  r = sc_small_allgather_schedule(n, comm->rank, w, &s);
  if (r == SC_SUCCESS) {
    sc_op_t xop = {.coll = SC_COLL_ALLGATHER,
                   .sendbuf = mine,
                   .recvbuf = all,
                   .count = w,
                   .dtype = SC_UINT8,
                   .op = SC_SUM};
    sc_exec_args_t a = {.op = &xop, .sched = &s, .elem_size = 1};
    r = sc_sched_execute(comm, &a);
  }
  sc_sched_free(&s);
  if (r == SC_SUCCESS) r = p->ops->connect_all(p->tp, all, w);
  sc_log_repeating(0);
  free(all);
  if (r != SC_SUCCESS) {
    char d[SC_ERRMSG_MAX];
    sc_error_get_detail(d, sizeof(d));
    return SC_ERR(r, "connecting the point-to-point lane (SC_P2P=0 goes without): %s", d);
  }
  return SC_SUCCESS;
}

void sc_p2p_stop(sc_comm_t *comm) {
  sc_p2p_t *p = comm->p2p;
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  int started = p->started, was = p->closed;
  p->closed = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->lock);
  if (was) return;
  if (started) {
    if (p->tp) p->ops->wake(p->tp);
    pthread_join(p->thread, NULL);
  }
  if (p->tp) {
    if (!started) say_bye(p);
    p->ops->cancel_all(p->tp, SC_ERR_ABORTED);
    p->ops->destroy(p->tp);
    p->tp = NULL;
  }
}

void sc_p2p_free(sc_comm_t *comm) {
  sc_p2p_t *p = comm->p2p;
  if (!p) return;
  sc_p2p_stop(comm);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cv);
  free(p->peers);
  free(p);
  comm->p2p = NULL;
}

/* ---- the API ---- */

static sc_result_t p2p_check(const char *fn, const void *buf, size_t count, sc_dtype_t dtype,
                             int peer, int tag, sc_comm_t *comm) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  const size_t es = sc_dtype_size(dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if (count > SIZE_MAX / es)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: count %zu of %s overflows the address space", fn, count,
                  sc_dtype_name(dtype));
  if (count && !buf) return SC_ERR(SC_ERR_INVALID_ARG, "%s: buf is NULL with count %zu", fn, count);
  if (tag < 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: tag %d is negative", fn, tag);
  if (peer < 0 || peer >= comm->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: peer %d outside [0, %d)", fn, peer, comm->nranks);
  SC_CHECK(sc_comm_check_usable(comm));
  if (!comm->p2p)
    return SC_ERR(SC_ERR_UNSUPPORTED,
                  "%s: point-to-point is off on this communicator (SC_P2P=0 when it was created)",
                  fn);
  return SC_SUCCESS;
}

static sc_result_t p2p_new(const char *fn, int is_send, const void *buf, size_t count,
                           sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                           sc_p2p_op_t **out) {
  *out = NULL;
  SC_CHECK(p2p_check(fn, buf, count, dtype, peer, tag, comm));
  sc_p2p_op_t *op = calloc(1, sizeof(*op));
  if (!op) return SC_ERR(SC_ERR_NOMEM, "%s: request", fn);
  op->fn = fn;
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->dtype = dtype;
  op->count = count;
  op->bytes = (uint64_t)count * sc_dtype_size(dtype);
  op->buf = (uint8_t *)buf;
  op->ent.tag = tag;
  op->ent.dtype = dtype;
  op->ent.count = count;
  op->ent.owner = op;
  *out = op;
  return SC_SUCCESS;
}

/* Hands ops (a qnext chain) to the lane thread, starting it the first time. */
static sc_result_t p2p_submit(sc_comm_t *comm, sc_p2p_op_t *head, sc_p2p_op_t *tail) {
  sc_p2p_t *p = comm->p2p;
  pthread_mutex_lock(&p->lock);
  if (p->closed) {
    pthread_mutex_unlock(&p->lock);
    return SC_ERR(SC_ERR_ABORTED, "rank %d: %s: the communicator was aborted or is being destroyed",
                  comm->rank, head->fn);
  }
  if (!p->started) {
    int e = pthread_create(&p->thread, NULL, sc_p2p_main, p);
    if (e) {
      pthread_mutex_unlock(&p->lock);
      return SC_ERR(SC_ERR_SYSTEM, "pthread_create of the point-to-point thread: %s", strerror(e));
    }
    p->started = 1;
  }
  tail->qnext = NULL;
  if (p->qtail)
    p->qtail->qnext = head;
  else
    p->qhead = head;
  p->qtail = tail;
  pthread_cond_signal(&p->cv);
  /* Under the lock: once it is released, an abort may close and free the lane. */
  if (p->tp) p->ops->wake(p->tp);
  pthread_mutex_unlock(&p->lock);
  return SC_SUCCESS;
}

/* ---- groups ---- */

typedef struct sc_group_item {
  struct sc_group_item *next;
  sc_comm_t *comm;
  sc_p2p_op_t *deferred; /* a blocking send or receive, not yet started */
  sc_request_t *req;     /* what sc_group_end waits for */
  int idx;               /* 1-based position in the group, for the error's text */
  char what[160];
} sc_group_item_t;

static _Thread_local struct {
  int depth;
  sc_group_item_t *head, *tail;
  int n;
} sc_group;

static sc_result_t group_add(sc_comm_t *comm, sc_p2p_op_t *deferred, sc_request_t *req,
                             const char *what) {
  sc_group_item_t *it = calloc(1, sizeof(*it));
  if (!it) return SC_ERR(SC_ERR_NOMEM, "group entry");
  it->comm = comm;
  it->deferred = deferred;
  it->req = req;
  it->idx = sc_group.n + 1;
  snprintf(it->what, sizeof(it->what), "%s", what);
  if (sc_group.tail)
    sc_group.tail->next = it;
  else
    sc_group.head = it;
  sc_group.tail = it;
  sc_group.n++;
  return SC_SUCCESS;
}

int sc_group_take_coll(const char *fn, sc_comm_t *comm, const sc_op_t *op, sc_result_t *out) {
  if (sc_group.depth == 0) return 0;
  sc_request_t *req = NULL;
  *out = sc_op_submit(comm, op, &req);
  if (*out != SC_SUCCESS) return 1;
  char what[160];
  snprintf(what, sizeof(what), "%s (count %zu of %s)", fn, op->count, sc_dtype_name(op->dtype));
  *out = group_add(comm, NULL, req, what);
  if (*out != SC_SUCCESS) sc_wait(&req);
  return 1;
}

sc_result_t sc_group_start(void) {
  if (sc_group.depth == INT32_MAX)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_group_start: nested too deep");
  sc_group.depth++;
  return SC_SUCCESS;
}

sc_result_t sc_group_end(void) {
  if (sc_group.depth == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_group_end without sc_group_start on this thread");
  if (--sc_group.depth > 0) return SC_SUCCESS;
  sc_group_item_t *items = sc_group.head;
  const int n = sc_group.n;
  sc_group.head = sc_group.tail = NULL;
  sc_group.n = 0;
  sc_result_t first = SC_SUCCESS;
  char msg[SC_ERRMSG_MAX];
  /* Everything is started before anything is waited for: that is what makes
   * any call order deadlock-free. Consecutive calls on one communicator go
   * to its lane thread in one hand-off. */
  for (sc_group_item_t *it = items; it;) {
    if (!it->deferred) {
      it = it->next;
      continue;
    }
    sc_group_item_t *last = it;
    while (last->next && last->next->deferred && last->next->comm == it->comm) {
      last->deferred->qnext = last->next->deferred;
      last = last->next;
    }
    sc_result_t r = p2p_submit(it->comm, it->deferred, last->deferred);
    for (sc_group_item_t *x = it;; x = x->next) {
      if (r == SC_SUCCESS)
        x->req = &x->deferred->req;
      else
        free(x->deferred);
      x->deferred = NULL;
      if (r != SC_SUCCESS && first == SC_SUCCESS) {
        first = r;
        snprintf(msg, sizeof(msg), "sc_group_end: call %d of %d, %s: %s", x->idx, n, x->what,
                 sc_last_error());
      }
      if (x == last) break;
    }
    it = last->next;
  }
  for (sc_group_item_t *it = items, *next; it; it = next) {
    next = it->next;
    if (it->req) {
      sc_result_t r = sc_wait(&it->req);
      if (r != SC_SUCCESS && first == SC_SUCCESS) {
        first = r;
        snprintf(msg, sizeof(msg), "sc_group_end: call %d of %d, %s: %s", it->idx, n, it->what,
                 sc_last_error());
      }
    }
    free(it);
  }
  if (first != SC_SUCCESS) sc_error_set_detail(msg);
  return first;
}

static sc_result_t p2p_post(const char *fn, int is_send, const void *buf, size_t count,
                            sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                            sc_request_t **req) {
  sc_p2p_op_t *op;
  SC_CHECK(p2p_new(fn, is_send, buf, count, dtype, peer, tag, comm, &op));
  if (!req && sc_group.depth > 0) {
    char what[160];
    op_describe(op, what, sizeof(what));
    sc_result_t r = group_add(comm, op, NULL, what);
    if (r != SC_SUCCESS) free(op);
    return r;
  }
  sc_result_t r = p2p_submit(comm, op, op);
  if (r != SC_SUCCESS) {
    free(op);
    return r;
  }
  sc_request_t *mine = &op->req;
  if (req) {
    *req = mine;
    return SC_SUCCESS;
  }
  return sc_wait(&mine);
}

sc_result_t sc_send(const void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                    sc_comm_t *comm) {
  return p2p_post("sc_send", 1, buf, count, dtype, peer, tag, comm, NULL);
}

sc_result_t sc_recv(void *buf, size_t count, sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm) {
  return p2p_post("sc_recv", 0, buf, count, dtype, peer, tag, comm, NULL);
}

sc_result_t sc_isend(const void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                     sc_comm_t *comm, sc_request_t **req) {
  if (!req) return SC_ERR(SC_ERR_INVALID_ARG, "sc_isend: req is NULL");
  *req = NULL;
  return p2p_post("sc_isend", 1, buf, count, dtype, peer, tag, comm, req);
}

sc_result_t sc_irecv(void *buf, size_t count, sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                     sc_request_t **req) {
  if (!req) return SC_ERR(SC_ERR_INVALID_ARG, "sc_irecv: req is NULL");
  *req = NULL;
  return p2p_post("sc_irecv", 0, buf, count, dtype, peer, tag, comm, req);
}
