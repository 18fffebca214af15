/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: what a connection setup that timed out says, peer by peer
 * (how far each missing pair got), so that the error names the rank, its
 * address and the step it stopped at. */
#include <stdio.h>
#include <string.h>

#include "lib/base/error.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/tcp/tcp_setup_internal.h"

void sc_tcp_setup_describe_pair(const sc_tcp_transport_t *tp, int peer, char *out, size_t len) {
  const sc_tcp_peer_t *p = &tp->peers[peer];
  const sc_tcp_setup_t *st = tp->setup;
  if (p->nconn > 0) {
    snprintf(out, len, "%d of %d sockets connected", p->nconn, p->nsocks);
    return;
  }
  if (p->link == SC_TCP_LINK_IN) {
    snprintf(out, len, "it started connecting but did not finish");
    return;
  }
  if (p->link == SC_TCP_LINK_NONE || p->refused) {
    snprintf(out, len, "never connected to us");
    return;
  }
  const sc_setup_conn_t *c = NULL;
  for (size_t i = 0; i < st->n; i++)
    if (st->c[i].state != SC_SETUP_FREE && st->c[i].is_out && st->c[i].peer == peer) {
      c = &st->c[i];
      break;
    }
  if (!c)
    snprintf(out, len, "never connected to us");
  else if (c->state == SC_SETUP_READ_ACK)
    snprintf(out, len, "took our hello but sent no ack");
  else if (c->state == SC_SETUP_CONNECTING || c->state == SC_SETUP_SEND_HELLO)
    snprintf(out, len, "did not complete the TCP handshake");
  else if (c->last_err)
    snprintf(out, len, "%s, %d attempts", strerror(c->last_err), c->attempts);
  else
    snprintf(out, len, "no answer");
}

sc_result_t sc_tcp_setup_timeout_error(sc_tcp_transport_t *tp) {
  char list[700];
  size_t used = 0;
  int missing = 0;
  list[0] = '\0';
  for (int i = 0; i < tp->base.nranks; i++) {
    const sc_tcp_peer_t *p = &tp->peers[i];
    if (i == tp->base.rank || p->connected) continue;
    missing++;
    if (used + 140 >= sizeof(list)) continue;
    char a[64], what[120];
    sc_sockaddr_t addr;
    sc_tcp_peer_sockaddr(p, &addr);
    sc_socket_addr_str(&addr, a, sizeof(a));
    sc_tcp_setup_describe_pair(tp, i, what, sizeof(what));
    used += (size_t)snprintf(list + used, sizeof(list) - used, "%srank %d (%s: %s)",
                             missing > 1 ? ", " : "", i, a, what);
  }
  return SC_ERR(
      SC_ERR_TIMEOUT,
      "tcp: rank %d: connection setup timed out after %d ms; %d peer%s never connected: %s",
      tp->base.rank, tp->timeout_ms, missing, missing == 1 ? "" : "s", list);
}
