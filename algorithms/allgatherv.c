/* SPDX-License-Identifier: BSD-3-Clause */
/* All-gather with a count per rank: block i is recvcounts[i] elements at
 * rdispls[i], the same arrays on every rank, so both ends of every message
 * know its length and blocks may be cut into chunk_elems pieces. An empty
 * block is no message at all (both ends skip it).
 *
 * In place (SEND == RECV + rdispls[rank]) the own block's COPY is onto
 * itself, and is skipped; blocks do not overlap, so no receive lands where a
 * send reads. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

static void recv_chunks(sc_sched_t *s, int peer, size_t off, size_t len, size_t chunk) {
  for (size_t c = 0; c < len; c += chunk)
    sc_sched_recv(s, peer, SC_BUF_RECV, off + c, len - c < chunk ? len - c : chunk);
}

static void own_copy(const sc_coll_args_t *a, sc_sched_t *s) {
  const size_t len = a->recvcounts[a->rank];
  if (len) sc_sched_copy(s, SC_BUF_RECV, a->rdispls[a->rank], SC_BUF_SEND, 0, len);
}

/* Ring: hop h (0..P-2) sends block r-h to the right and receives block
 * r-h-1 from the left, forwarding each chunk as it arrives (allgather.c with
 * uneven blocks). */
sc_result_t sc_ring_allgatherv_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t chunk = a->chunk_elems;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  if (p > 1) sc_send_chunks(s, right, SC_BUF_SEND, 0, a->recvcounts[r], chunk);
  own_copy(a, s);
  for (int h = 0; h < p - 1; h++) {
    const int b = sc_ring_block(r, h + 1, p);
    const size_t off = a->rdispls[b], len = a->recvcounts[b];
    for (size_t c = 0; c < len; c += chunk) {
      const size_t m = len - c < chunk ? len - c : chunk;
      sc_sched_recv(s, left, SC_BUF_RECV, off + c, m);
      if (h + 1 < p - 1) sc_sched_send(s, right, SC_BUF_RECV, off + c, m);
    }
  }
  return s->status;
}

/* Direct: every send posted at once (to r+1, r+2, ...), then the receives
 * (from r-1, r-2, ...), so that no two ranks start on the same peer. */
sc_result_t sc_direct_allgatherv_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t chunk = a->chunk_elems;
  for (int k = 1; k < p; k++)
    sc_send_chunks(s, (r + k) % p, SC_BUF_SEND, 0, a->recvcounts[r], chunk);
  own_copy(a, s);
  for (int k = 1; k < p; k++) {
    const int src = (r - k + p) % p;
    recv_chunks(s, src, a->rdispls[src], a->recvcounts[src], chunk);
  }
  return s->status;
}
