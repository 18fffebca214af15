/* SPDX-License-Identifier: BSD-3-Clause */
#include "algorithms/exchange.h"

static size_t min_size(size_t a, size_t b) {
  return a < b ? a : b;
}

/* Emits x's send chunks from *sent on whose data is there: a chunk that
 * overlaps prev's receive range waits until that part has been received
 * (received elements from its start). prev NULL: everything is ready. Stops
 * at the first chunk not ready, keeping the per-peer order. */
static void send_ready_chunks(sc_sched_t *s, const sc_exchange_t *x, size_t chunk, size_t *sent,
                              const sc_exchange_t *prev, size_t received) {
  const size_t lo = prev ? prev->recv_off : 0, hi = prev ? lo + prev->recv_len : 0;
  while (*sent < x->send_len) {
    const size_t a = x->send_off + *sent, m = min_size(chunk, x->send_len - *sent), b = a + m;
    if (a < hi && b > lo && min_size(b, hi) > lo + received) break;
    sc_sched_send(s, x->peer, x->send_buf, a - x->send_base, m);
    *sent += m;
  }
}

void sc_exchange_start(sc_sched_t *s, const sc_exchange_t *x, size_t chunk) {
  size_t sent = 0;
  send_ready_chunks(s, &x[0], chunk, &sent, NULL, 0);
}

void sc_exchange_finish(sc_sched_t *s, const sc_exchange_t *x, int nx, size_t chunk) {
  for (int k = 0; k < nx; k++) {
    const sc_exchange_t *cur = &x[k], *next = k + 1 < nx ? &x[k + 1] : NULL;
    size_t sent = 0;
    if (next) send_ready_chunks(s, next, chunk, &sent, cur, 0);
    for (size_t c = 0; c < cur->recv_len; c += chunk) {
      const size_t m = min_size(chunk, cur->recv_len - c), off = cur->recv_off + c;
      if (cur->reduce)
        sc_sched_recv_reduce(s, cur->peer, cur->recv_buf, off - cur->recv_base, cur->operand_buf,
                             off - cur->operand_base, m);
      else
        sc_sched_recv(s, cur->peer, cur->recv_buf, off - cur->recv_base, m);
      if (next) send_ready_chunks(s, next, chunk, &sent, cur, c + m);
    }
    if (next) send_ready_chunks(s, next, chunk, &sent, NULL, 0);
  }
}

void sc_exchange_run(sc_sched_t *s, const sc_exchange_t *x, int nx, size_t chunk) {
  if (nx > 0) sc_exchange_start(s, x, chunk);
  sc_exchange_finish(s, x, nx, chunk);
}

int sc_fold_pow2_floor(int p) {
  int q = 1;
  while (q <= p / 2) q *= 2;
  return q;
}

int sc_fold_group_rank(int rank, int rem) {
  if (rank < 2 * rem) return rank % 2 ? rank / 2 : -1;
  return rank - rem;
}

int sc_fold_group_to_rank(int g, int rem) {
  return g < rem ? 2 * g + 1 : g + rem;
}

void sc_fold_leaf_allreduce(sc_sched_t *s, int rank, size_t n, size_t chunk) {
  const sc_exchange_t x = {.peer = rank + 1,
                           .send_buf = SC_BUF_SEND,
                           .send_len = n,
                           .recv_buf = SC_BUF_RECV,
                           .recv_len = n};
  sc_exchange_run(s, &x, 1, chunk);
}
