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
#include "lib/core/p2p_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "lib/base/clock.h"
#include "lib/base/log.h"

/* ---- operations ---- */

void sc_p2p_describe(const char *fn, int is_send, int peer, int tag, uint64_t count,
                     sc_dtype_t dtype, char *out, size_t len) {
  snprintf(out, len, "%s %s rank %d (tag %d, count %" PRIu64 " of %s)", fn, is_send ? "to" : "from",
           peer, tag, count, sc_dtype_name(dtype));
}

void sc_p2p_op_describe(const sc_p2p_op_t *op, char *out, size_t len) {
  sc_p2p_describe(op->fn, op->is_send, op->peer, op->tag, op->count, op->dtype, out, len);
}

sc_result_t sc_p2p_dev_copy(sc_p2p_t *p, int device, void *dst, const void *src, size_t bytes) {
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) return SC_ERR(SC_ERR_INTERNAL, "point-to-point staging copy without a device runtime");
  if (rt->current_device() != device) SC_CHECK(rt->set_device(device));
  pthread_mutex_lock(&p->lock);
  sc_result_t r = SC_SUCCESS;
  if (!p->dstream) {
    r = rt->stream_create(&p->dstream);
    if (r == SC_SUCCESS) p->dstream_device = device;
  }
  void *stream = p->dstream;
  pthread_mutex_unlock(&p->lock);
  SC_CHECK(r);
  if (p->dstream_device != device)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "point-to-point: device buffers of CUDA device %d on a communicator whose "
                  "staging copies run on device %d",
                  device, p->dstream_device);
  void *ev = NULL;
  r = rt->event_create(&ev);
  if (r == SC_SUCCESS) r = rt->memcpy_async(dst, src, bytes, stream);
  if (r == SC_SUCCESS) r = rt->event_record(ev, stream);
  if (r == SC_SUCCESS)
    r = sc_dev_event_wait(rt, ev, p->comm->cfg.timeout_ms, "a point-to-point staging copy");
  if (ev) rt->event_destroy(ev);
  return r;
}

/* The last thing done to op: it may be freed at once by its waiter. The
 * error detail (res != SC_SUCCESS) was recorded on this thread just before.
 * A receive into device memory is copied there first. */
void sc_p2p_op_complete(sc_p2p_op_t *op, sc_result_t res) {
  /* A buffer offered and not read goes back only once the receiver can no
   * longer read it. */
  if (res != SC_SUCCESS && op->offered && op->lane->ops->withdraw)
    op->lane->ops->withdraw(op->lane->tp, op->peer);
  if (res == SC_SUCCESS && op->dev && op->bytes &&
      (res = sc_p2p_dev_copy(op->lane, op->device, op->dev, op->buf, op->bytes)) != SC_SUCCESS) {
    char why[SC_ERRMSG_MAX / 2], what[160];
    sc_error_get_detail(why, sizeof(why));
    sc_p2p_op_describe(op, what, sizeof(what));
    SC_ERR(res, "rank %d: %s: copying the message to device memory: %s", op->lane->comm->rank, what,
           why);
  }
  sc_request_complete(&op->req, res);
}

/* Records res with op's description and the reason, then completes op. */
void sc_p2p_op_fail(sc_p2p_t *p, sc_p2p_op_t *op, sc_result_t res, const char *why) {
  char what[160];
  sc_p2p_op_describe(op, what, sizeof(what));
  SC_ERR(res, "rank %d: %s: %s", p->comm->rank, what, why);
  sc_p2p_op_complete(op, res);
}

void sc_p2p_op_fail_later(sc_p2p_t *p, sc_p2p_op_t *op, sc_result_t res, const char *why) {
  if (op->in_active) {
    op->fail = res;
    op->final = 1;
  } else {
    sc_p2p_op_fail(p, op, res, why);
  }
}

void sc_p2p_timeout_why(const sc_p2p_t *p, char *out, size_t len) {
  snprintf(out, len, "no progress for %d ms (SC_TIMEOUT_MS)", p->comm->cfg.timeout_ms);
}

int sc_p2p_op_tr_pending(const sc_p2p_op_t *op) {
  for (int i = 0; i < op->ntr; i++)
    if (op->tr[i].state == SC_TP_REQ_PENDING) return 1;
  return 0;
}

void sc_p2p_active_add(sc_p2p_t *p, sc_p2p_op_t *op) {
  if (op->in_active) return;
  op->in_active = 1;
  op->anext = p->active;
  p->active = op;
}

void sc_p2p_wait_remove(sc_p2p_op_t **list, sc_p2p_op_t *op) {
  for (sc_p2p_op_t **pp = list; *pp; pp = &(*pp)->wnext)
    if (*pp == op) {
      *pp = op->wnext;
      op->waiting = 0;
      return;
    }
}

sc_p2p_op_t *sc_p2p_wait_take_id(sc_p2p_op_t **list, uint64_t id) {
  for (sc_p2p_op_t **pp = list; *pp; pp = &(*pp)->wnext)
    if ((*pp)->id == id) {
      sc_p2p_op_t *op = *pp;
      *pp = op->wnext;
      op->waiting = 0;
      return op;
    }
  return NULL;
}

/* more: the message's payload is posted next (sc_tp_req_t's `more`). */
static sc_result_t tp_post(sc_p2p_t *p, int is_send, int peer, void *buf, size_t len,
                           sc_tp_req_t *req, int more) {
  memset(req, 0, sizeof(*req));
  req->more = more;
  if (is_send) p->peers[peer].used = 1;
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

sc_result_t sc_p2p_tp_post(sc_p2p_t *p, int is_send, int peer, void *buf, size_t len,
                           sc_tp_req_t *req) {
  return tp_post(p, is_send, peer, buf, len, req, 0);
}

/* ---- peers ---- */

void sc_p2p_tp_failed(sc_p2p_t *p, int peer, sc_result_t st) {
  sc_p2p_peer_t *pp = &p->peers[peer];
  /* A peer that left before the pair carried anything, with no receive of
   * the caller's from it, ends only the lane's standing receive: the end of
   * a job whose ranks finish at different times, not news for the log. A
   * later call with it fails with the text all the same. */
  if (!pp->used && !pp->posted.head) pp->quiet = 1;
  char why[SC_ERRMSG_MAX / 2];
  snprintf(why, sizeof(why), "the point-to-point lane to rank %d failed: %s", peer,
           p->tp_msg[0] ? p->tp_msg : sc_strerror(st));
  sc_p2p_peer_fail(p, peer, st == SC_ERR_ABORTED || st == SC_ERR_TIMEOUT ? st : SC_ERR_REMOTE, why);
}

void sc_p2p_send_ctl(sc_p2p_t *p, int peer, sc_p2p_kind_t kind, uint64_t id) {
  sc_p2p_ctl_t *c = sc_p2p_ctl_get();
  if (!c) {
    sc_p2p_peer_fail(p, peer, SC_ERR_NOMEM, "no memory for a control frame");
    return;
  }
  sc_p2p_hdr_t h = {.kind = kind, .dtype = SC_UINT8, .id = id};
  sc_p2p_hdr_encode(&h, c->hdr);
  c->peer = peer;
  sc_p2p_tp_post(p, 1, peer, c->hdr, SC_P2P_FRAME_BYTES, &c->req); /* a failure shows in c->req */
  c->next = p->ctls;
  p->ctls = c;
}

void sc_p2p_unexp_free(sc_p2p_unexp_t *u) {
  u->lane->unexp_bytes -= u->charge;
  if (u->data != u->small) free(u->data);
  sc_p2p_unexp_put(u);
}

/* Every operation with peer fails, now or once its requests settle; the peer
 * refuses operations from now on. */
void sc_p2p_peer_fail(sc_p2p_t *p, int peer, sc_result_t res, const char *why) {
  sc_p2p_peer_t *pp = &p->peers[peer];
  if (pp->dead) return;
  pp->dead = 1;
  pp->dead_res = res;
  sc_errtext_set(&pp->dead_msg, SC_ERRMSG_MAX / 2, "%s", why);
  if (res != SC_ERR_ABORTED && !pp->quiet)
    SC_WARN(SC_SUBSYS_COLL, "rank %d: %s", p->comm->rank, why);
  sc_p2p_entry_t *e;
  while ((e = pp->posted.head)) {
    sc_p2p_list_remove(&pp->posted, e);
    sc_p2p_op_fail(p, e->owner, res, why);
  }
  for (sc_p2p_entry_t *next, *f = pp->unexp.head; f; f = next) {
    next = f->next;
    sc_p2p_unexp_t *u = f->owner;
    /* An eager message sent before a goodbye stays for a later receive; a
     * rendezvous one cannot finish without its sender. */
    if (pp->bye && u->kind == SC_P2P_EAGER) continue;
    sc_p2p_list_remove(&pp->unexp, f);
    if (u->self_send) sc_p2p_op_fail(p, u->self_send, res, why);
    /* Only an eager payload still being received has a request (on the
     * pending list) that must settle first; a rendezvous request has none. */
    if (u->arrived || u->kind != SC_P2P_EAGER || !u->data)
      sc_p2p_unexp_free(u);
    else
      u->drop = 1; /* freed when its request settles */
  }
  sc_p2p_reads_fail(p, peer, res, why);
  for (sc_p2p_op_t **list = &pp->wait_cts; list;
       list = list == &pp->wait_cts ? &pp->wait_data : NULL) {
    sc_p2p_op_t *op;
    while ((op = *list)) {
      *list = op->wnext;
      op->waiting = 0;
      sc_p2p_op_fail_later(p, op, res, why);
    }
  }
  /* After a goodbye, a payload being received was sent in full before it
   * (over tcp it may still be on another socket): it completes, or fails
   * with its transport request. */
  for (sc_p2p_op_t *op = p->active; op; op = op->anext)
    if (op->peer == peer && !(pp->bye && op->final)) op->fail = res;
  for (sc_p2p_unexp_t *u = p->pending; u; u = u->pnext)
    if (u->peer == peer && u->recv && !pp->bye) {
      sc_p2p_op_fail(p, u->recv, res, why);
      u->recv = NULL;
      u->drop = 1;
    }
}

void sc_p2p_peer_post_header(sc_p2p_t *p, int peer) {
  sc_p2p_peer_t *pp = &p->peers[peer];
  if (pp->dead) return;
  pp->hposted = 1; /* a failed post is seen as a failed request */
  sc_p2p_tp_post(p, 0, peer, pp->hbuf, SC_P2P_FRAME_BYTES, &pp->hreq);
}

/* ---- matching ---- */

/* A matched message's payload lands in op's buffer: receive it. */
static void recv_payload(sc_p2p_t *p, sc_p2p_op_t *op) {
  op->final = 1;
  op->deadline_ms = SC_P2P_UNSTAMPED;
  if (op->bytes) sc_p2p_tp_post(p, 0, op->peer, op->buf, op->bytes, &op->tr[op->ntr++]);
  sc_p2p_active_add(p, op);
}

void sc_p2p_ask_data(sc_p2p_t *p, sc_p2p_op_t *op, uint64_t id) {
  sc_p2p_send_ctl(p, op->peer, SC_P2P_CTS, id);
  op->id = id;
  op->wnext = p->peers[op->peer].wait_data;
  p->peers[op->peer].wait_data = op;
  op->waiting = 1;
  op->deadline_ms = SC_P2P_UNSTAMPED;
}

/* Receive op meets unexpected message u (both taken off their lists). */
static void match_unexp(sc_p2p_t *p, sc_p2p_op_t *op, sc_p2p_unexp_t *u) {
  const int rank = p->comm->rank;
  int bad =
      sc_p2p_mismatch(rank, op->peer, op->tag, op->count, op->dtype, u->ent.count, u->ent.dtype);
  if (u->self_send) {
    sc_p2p_op_t *s = u->self_send;
    if (bad) {
      sc_p2p_op_complete(op, SC_ERR_MISMATCH);
    } else {
      if (op->bytes) memcpy(op->buf, s->buf, op->bytes);
      sc_p2p_op_complete(op, SC_SUCCESS);
    }
    sc_p2p_op_complete(s, SC_SUCCESS);
    sc_p2p_unexp_free(u);
    return;
  }
  if (u->kind == SC_P2P_RTS) {
    if (!bad && sc_p2p_read_offer(p, op, u)) {
      sc_p2p_unexp_free(u);
      return;
    }
    if (bad) {
      sc_p2p_send_ctl(p, op->peer, SC_P2P_DROP, u->id);
      sc_p2p_op_complete(op, SC_ERR_MISMATCH);
    } else {
      sc_p2p_ask_data(p, op, u->id);
    }
    sc_p2p_unexp_free(u);
    return;
  }
  if (bad) {
    sc_p2p_op_complete(op, SC_ERR_MISMATCH);
    if (u->arrived)
      sc_p2p_unexp_free(u);
    else
      u->drop = 1;
    return;
  }
  if (u->arrived) {
    if (op->bytes) memcpy(op->buf, u->data, op->bytes);
    sc_p2p_op_complete(op, SC_SUCCESS);
    sc_p2p_unexp_free(u);
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
      sc_p2p_peer_fail(p, peer, SC_ERR_NOMEM, why);
      return NULL;
    }
  }
  sc_p2p_unexp_t *u = sc_p2p_unexp_get();
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
    if (u->drop) sc_p2p_unexp_free(u);
    return;
  }
  u->data = malloc(u->bytes);
  if (!u->data) {
    sc_p2p_peer_fail(p, u->peer, SC_ERR_NOMEM, "no memory to buffer an unexpected message");
    return;
  }
  sc_p2p_tp_post(p, 0, u->peer, u->data, u->bytes, &u->req);
  u->pnext = p->pending;
  p->pending = u;
}

/* An inline payload (in the frame just read) kept for a later receive. */
static void unexp_inline(sc_p2p_t *p, sc_p2p_unexp_t *u, const uint8_t *src) {
  u->arrived = 1;
  if (!u->bytes) return;
  u->data = u->bytes <= sizeof(u->small) ? u->small : malloc(u->bytes);
  if (!u->data) {
    sc_p2p_peer_fail(p, u->peer, SC_ERR_NOMEM, "no memory to buffer an unexpected message");
    return;
  }
  memcpy(u->data, src, u->bytes);
}

static void protocol_error(sc_p2p_t *p, int peer) {
  char why[SC_ERRMSG_MAX / 2];
  sc_error_get_detail(why, sizeof(why));
  sc_p2p_peer_fail(p, peer, SC_ERR_REMOTE, why);
}

/* A header arrived from peer: act on it, post its payload's receive, then
 * the next header's. */
void sc_p2p_on_header(sc_p2p_t *p, int peer) {
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
    const int inl = h.kind == SC_P2P_EAGER && h.bytes <= SC_P2P_INLINE_BYTES;
    if (op && h.kind == SC_P2P_EAGER) {
      if (!sc_p2p_mismatch(rank, peer, h.tag, op->count, op->dtype, h.count, h.dtype)) {
        if (!inl) {
          recv_payload(p, op);
          break;
        }
        if (h.bytes) memcpy(op->buf, pp->hbuf + SC_P2P_HDR_BYTES, h.bytes);
        sc_p2p_op_complete(op, SC_SUCCESS);
        break;
      }
      sc_p2p_op_complete(op, SC_ERR_MISMATCH);
      if (inl) break; /* nothing follows the frame to discard */
    }
    sc_p2p_unexp_t *u = unexp_new(p, peer, &h);
    if (!u) {
      sc_p2p_peer_fail(p, peer, SC_ERR_NOMEM, "no memory for an incoming message");
      return;
    }
    if (h.kind == SC_P2P_RTS) u->offer = sc_p2p_offer_get(pp->hbuf);
    if (op && h.kind == SC_P2P_EAGER) {
      u->drop = 1; /* its receive failed above: the payload is read and discarded */
      unexp_receive(p, u);
    } else if (op) {
      match_unexp(p, op, u); /* a rendezvous: CTS, or DROP on a mismatch */
    } else {
      sc_p2p_list_push(&pp->unexp, &u->ent);
      if (inl)
        unexp_inline(p, u, pp->hbuf + SC_P2P_HDR_BYTES);
      else if (h.kind == SC_P2P_EAGER)
        unexp_receive(p, u);
    }
    break;
  }
  case SC_P2P_CTS:
  case SC_P2P_DROP:
  case SC_P2P_FIN: {
    sc_p2p_op_t *op = sc_p2p_wait_take_id(&pp->wait_cts, h.id);
    if (!op) break; /* the send timed out meanwhile */
    if (h.kind == SC_P2P_CTS) {
      sc_p2p_hdr_t d = {.kind = SC_P2P_DATA,
                        .dtype = op->dtype,
                        .tag = op->tag,
                        .count = op->count,
                        .bytes = op->bytes,
                        .id = op->id};
      sc_p2p_hdr_encode(&d, op->hdr2);
      op->deadline_ms = SC_P2P_UNSTAMPED;
      if (tp_post(p, 1, peer, op->hdr2, SC_P2P_FRAME_BYTES, &op->tr[op->ntr++], 1) == SC_SUCCESS)
        sc_p2p_tp_post(p, 1, peer, op->buf, op->bytes, &op->tr[op->ntr++]);
    }
    op->final = 1;
    if (op->in_active || sc_p2p_op_tr_pending(op))
      sc_p2p_active_add(p, op);
    else
      sc_p2p_op_complete(op, SC_SUCCESS);
    break;
  }
  case SC_P2P_REVOKE:
    sc_p2p_on_revoke(p, peer, h.id);
    break;
  case SC_P2P_REVOKED:
    sc_p2p_on_revoked(p, peer, h.id);
    break;
  case SC_P2P_BYE: {
    char why[128];
    snprintf(why, sizeof(why),
             "rank %d closed its point-to-point lane (its communicator was destroyed)", peer);
    SC_ERR(SC_ERR_REMOTE, "%s", why);
    pp->quiet = 1;
    pp->bye = 1;
    sc_p2p_peer_fail(p, peer, SC_ERR_REMOTE, why);
    return; /* nothing follows: no header receive left pending for its close */
  }
  case SC_P2P_DATA: {
    sc_p2p_op_t *op = sc_p2p_wait_take_id(&pp->wait_data, h.id);
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
        sc_p2p_peer_fail(p, peer, SC_ERR_NOMEM, "no memory to drop a message");
        return;
      }
      u->drop = 1;
      unexp_receive(p, u);
    }
    break;
  }
  }
  sc_p2p_peer_post_header(p, peer);
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
      sc_p2p_op_complete(op, SC_ERR_NOMEM);
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

void sc_p2p_start_op(sc_p2p_t *p, sc_p2p_op_t *op) {
  sc_p2p_peer_t *pp = &p->peers[op->peer];
  op->deadline_ms = SC_P2P_UNSTAMPED;
  if (pp->dead) {
    sc_p2p_entry_t *e = pp->bye && !op->is_send ? sc_p2p_list_take(&pp->unexp, op->tag) : NULL;
    if (e)
      match_unexp(p, op, e->owner);
    else
      sc_p2p_op_fail(p, op, pp->dead_res, sc_p2p_dead_msg(pp));
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
  if (!eager && !op->device && p->comm->cfg.p2p_read && p->ops->peer_reads &&
      p->ops->peer_reads(p->tp, op->peer)) {
    op->offered = 1;
    op->lane = p;
    sc_p2p_offer_put(op->hdr, (uint64_t)(uintptr_t)op->buf);
  }
  const int inl = eager && op->bytes <= SC_P2P_INLINE_BYTES;
  if (inl && op->bytes) memcpy(op->hdr + SC_P2P_HDR_BYTES, op->buf, op->bytes);
  const int more = eager && !inl && op->bytes;
  sc_result_t r = tp_post(p, 1, op->peer, op->hdr, SC_P2P_FRAME_BYTES, &op->tr[op->ntr++], more);
  if (r == SC_SUCCESS && more)
    sc_p2p_tp_post(p, 1, op->peer, op->buf, op->bytes, &op->tr[op->ntr++]);
  if (eager) {
    op->final = 1;
  } else {
    op->wnext = pp->wait_cts;
    pp->wait_cts = op;
    op->waiting = 1;
  }
  sc_p2p_active_add(p, op);
}
