/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point lane's offered buffers (docs/ARCHITECTURE.md,
 * "Point-to-point"): a rendezvous sender's RTS may carry its host buffer's
 * address; a receiver whose transport can read the sender's memory
 * (transport.h's rget) reads it once the RTS meets its receive, a piece per
 * round of the engine, and answers FIN; one that cannot answers CTS as for
 * any RTS. An offered buffer goes
 * back to its owner unread only once the receiver cannot read it: a timed-out
 * send asks the receiver to drop the RTS (REVOKE, answered REVOKED), and
 * every other failure closes the pair first (sc_p2p_op_complete's
 * withdraw). On the lane's engine, as the rest of p2p.c. */
#include <inttypes.h>

#include "lib/base/log.h"
#include "lib/core/p2p_internal.h"

/* The bytes of one read between two looks at the lane's queue and headers:
 * a read of a large message then holds back neither the caller's next send
 * (its RTS) nor the peers' frames for longer than this takes to copy (tens
 * of microseconds), and a piece of 256 KiB cost a 2 MiB exchange 10% in
 * rounds between the pieces. */
#define SC_P2P_READ_CHUNK ((uint64_t)1 << 20)

int sc_p2p_read_offer(sc_p2p_t *p, sc_p2p_op_t *op, const sc_p2p_unexp_t *u) {
  if (!u->offer || op->dev || !p->ops->rget || !op->bytes) return 0;
  op->id = u->id;
  op->offer = u->offer;
  op->offer_done = 0;
  op->deadline_ms = SC_P2P_UNSTAMPED;
  op->wnext = NULL;
  sc_p2p_op_t **tail = &p->reads;
  while (*tail) tail = &(*tail)->wnext;
  *tail = op;
  return 1;
}

int sc_p2p_reads_step(sc_p2p_t *p) {
  sc_p2p_op_t *op = p->reads;
  if (!op) return 0;
  uint64_t n = op->bytes - op->offer_done;
  if (n > SC_P2P_READ_CHUNK) n = SC_P2P_READ_CHUNK;
  sc_result_t r =
      p->ops->rget(p->tp, op->peer, op->buf + op->offer_done, op->offer + op->offer_done, n);
  if (r == SC_SUCCESS) {
    op->offer_done += n;
    if (op->offer_done < op->bytes) return 1;
  }
  p->reads = op->wnext;
  op->wnext = NULL;
  if (r == SC_SUCCESS) {
    SC_TRACE(SC_SUBSYS_COLL, "rank %d: read %" PRIu64 " bytes of rank %d's offered buffer",
             p->comm->rank, op->bytes, op->peer);
    sc_p2p_send_ctl(p, op->peer, SC_P2P_FIN, op->id);
    sc_p2p_op_complete(op, SC_SUCCESS);
  } else if (r == SC_ERR_UNSUPPORTED) {
    sc_p2p_ask_data(p, op, op->id); /* the data frame brings every byte again */
  } else {
    char why[SC_ERRMSG_MAX / 2];
    sc_error_get_detail(why, sizeof(why));
    sc_p2p_op_fail(p, op, r, why);
  }
  return p->reads != NULL;
}

void sc_p2p_reads_fail(sc_p2p_t *p, int peer, sc_result_t res, const char *why) {
  for (sc_p2p_op_t **pp = &p->reads; *pp;) {
    sc_p2p_op_t *op = *pp;
    if (op->peer != peer) {
      pp = &op->wnext;
      continue;
    }
    *pp = op->wnext;
    op->wnext = NULL;
    sc_p2p_op_fail(p, op, res, why);
  }
}

void sc_p2p_revoke(sc_p2p_t *p, sc_p2p_op_t *op) {
  op->revoking = 1;
  op->deadline_ms = SC_P2P_UNSTAMPED;
  sc_p2p_send_ctl(p, op->peer, SC_P2P_REVOKE, op->id);
}

void sc_p2p_on_revoke(sc_p2p_t *p, int peer, uint64_t id) {
  sc_p2p_peer_t *pp = &p->peers[peer];
  /* A read under way finishes: its FIN settles the send, which keeps its
   * buffer offered until then. */
  for (const sc_p2p_op_t *op = p->reads; op; op = op->wnext)
    if (op->peer == peer && op->id == id) return;
  for (sc_p2p_entry_t *e = pp->unexp.head; e; e = e->next) {
    sc_p2p_unexp_t *u = e->owner;
    if (u->kind != SC_P2P_RTS || u->id != id) continue;
    sc_p2p_list_remove(&pp->unexp, e);
    sc_p2p_unexp_free(u);
    break;
  }
  sc_p2p_send_ctl(p, peer, SC_P2P_REVOKED, id);
}

void sc_p2p_on_revoked(sc_p2p_t *p, int peer, uint64_t id) {
  sc_p2p_op_t *op = sc_p2p_wait_take_id(&p->peers[peer].wait_cts, id);
  if (!op) return; /* it was read, or cleared to send, first */
  op->offered = 0; /* the receiver dropped the offer unread */
  char why[160];
  sc_p2p_timeout_why(p, why, sizeof(why));
  sc_p2p_op_fail_later(p, op, SC_ERR_TIMEOUT, why);
}
