/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point lane's offered buffers (docs/ARCHITECTURE.md,
 * "Point-to-point"): a rendezvous sender's RTS may carry its host buffer's
 * address; a receiver whose transport can read the sender's memory
 * (transport.h's rget) reads it as the RTS meets its receive and answers
 * FIN, one that cannot answers CTS as for any RTS. An offered buffer goes
 * back to its owner unread only once the receiver cannot read it: a timed-out
 * send asks the receiver to drop the RTS (REVOKE, answered REVOKED), and
 * every other failure closes the pair first (sc_p2p_op_complete's
 * withdraw). On the lane's engine, as the rest of p2p.c. */
#include <inttypes.h>

#include "lib/base/log.h"
#include "lib/core/p2p_internal.h"

int sc_p2p_read_offer(sc_p2p_t *p, sc_p2p_op_t *op, const sc_p2p_unexp_t *u) {
  if (!u->offer || op->dev || !p->ops->rget || !op->bytes) return 0;
  sc_result_t r = p->ops->rget(p->tp, op->peer, op->buf, u->offer, op->bytes);
  if (r == SC_ERR_UNSUPPORTED) return 0;
  if (r != SC_SUCCESS) {
    char why[SC_ERRMSG_MAX / 2];
    sc_error_get_detail(why, sizeof(why));
    sc_p2p_op_fail(p, op, r, why);
    return 1;
  }
  SC_TRACE(SC_SUBSYS_COLL, "rank %d: read %" PRIu64 " bytes of rank %d's offered buffer",
           p->comm->rank, op->bytes, op->peer);
  sc_p2p_send_ctl(p, op->peer, SC_P2P_FIN, u->id);
  sc_p2p_op_complete(op, SC_SUCCESS);
  return 1;
}

void sc_p2p_revoke(sc_p2p_t *p, sc_p2p_op_t *op) {
  op->revoking = 1;
  op->deadline_ms = SC_P2P_UNSTAMPED;
  sc_p2p_send_ctl(p, op->peer, SC_P2P_REVOKE, op->id);
}

void sc_p2p_on_revoke(sc_p2p_t *p, int peer, uint64_t id) {
  sc_p2p_peer_t *pp = &p->peers[peer];
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
