/* SPDX-License-Identifier: BSD-3-Clause */
/* Pairwise all-to-all. Out of place, step k (1 <= k < P) sends block r+k to
 * rank r+k and receives block r-k from rank r-k (mod P). Every send is posted
 * before the first receive: receives complete one after another, so had the
 * sends of step k+1 waited for step k's receive, a link would idle at every
 * step's end until the slowest pair of that step was done (4 hosts at
 * 1 Gbit/s, 64 MiB: 0.67 of the link). Posted at once, the sends leave in
 * step order as the receivers take them, and the next step's data is on its
 * way while this one's last bytes arrive.
 *
 * In place, the block received at step k (r-k) is the one this rank sends at
 * step P-k: receiving it at step k would overwrite it before it leaves. So
 * steps k and P-k run together, k = 1 .. P/2: send block r+k and block r-k,
 * receive from r-k into one block of SCRATCH, receive from r+k straight into
 * block r+k, then copy SCRATCH into block r-k. Each write lands on a block
 * whose send was already posted, and the executor waits for that send first.
 * The two receives differ on purpose: rank r+k takes this rank's send of
 * block r+k at its first receive (into its SCRATCH), which waits for nothing
 * but posted sends; had both receives landed in place, every rank's first
 * receive would wait for its own send to be taken by a peer that waits the
 * same way: a cycle around the ring under a rendezvous transport. For k = P/2
 * (P even) both peers are one rank: its block goes through SCRATCH. SCRATCH:
 * one block, reused from step to step (the copy out of it runs before the
 * next receive into it).
 *
 * Blocks travel in chunk_elems pieces, each receive posted with its send's
 * length (every rank has the same count): the executor's early posts of
 * receives from one peer work a chunk at a time. */
#include "algorithms/algorithms.h"
#include "lib/base/error.h"

static void recv_chunks(sc_sched_t *s, int peer, sc_buf_t buf, size_t off, size_t len,
                        size_t chunk) {
  for (size_t c = 0; c < len; c += chunk)
    sc_sched_recv(s, peer, buf, off + c, len - c < chunk ? len - c : chunk);
}

sc_result_t sc_pairwise_alltoall_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count, chunk = a->chunk_elems;
  if (n == 0) return s->status;
  const size_t own = (size_t)r * n;
  if (p == 1) {
    sc_sched_copy(s, SC_BUF_RECV, own, SC_BUF_SEND, own, n);
    return s->status;
  }
  if (!a->in_place) {
    for (int k = 1; k < p; k++) {
      const int to = (r + k) % p;
      sc_send_chunks(s, to, SC_BUF_SEND, (size_t)to * n, n, chunk);
    }
    /* After the sends, so that the wire starts before the local copy. */
    sc_sched_copy(s, SC_BUF_RECV, own, SC_BUF_SEND, own, n);
    for (int k = 1; k < p; k++) {
      const int from = (r - k + p) % p;
      recv_chunks(s, from, SC_BUF_RECV, (size_t)from * n, n, chunk);
    }
    return s->status;
  }
  sc_sched_need_scratch(s, n);
  for (int k = 1; 2 * k <= p; k++) {
    const int to = (r + k) % p, from = (r - k + p) % p;
    sc_send_chunks(s, to, SC_BUF_SEND, (size_t)to * n, n, chunk);
    if (to != from) sc_send_chunks(s, from, SC_BUF_SEND, (size_t)from * n, n, chunk);
    recv_chunks(s, from, SC_BUF_SCRATCH, 0, n, chunk);
    if (to != from) recv_chunks(s, to, SC_BUF_RECV, (size_t)to * n, n, chunk);
    sc_sched_copy(s, SC_BUF_RECV, (size_t)from * n, SC_BUF_SCRATCH, 0, n);
  }
  return s->status;
}
