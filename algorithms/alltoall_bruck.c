/* SPDX-License-Identifier: BSD-3-Clause */
/* Bruck's all-to-all: ceil(log2 P) messages per rank instead of P-1, each
 * about half the data, for blocks small enough that latency dominates.
 *
 * SCRATCH holds T, P blocks: T[i] starts as SEND block (r+i) mod P, the
 * block for the rank i places ahead. Step k (d = 2^k) sends every T[i] whose
 * index has bit k set to rank r+d and receives the same indices from rank
 * r-d, so a block that started at index i moves i ranks ahead in all: after
 * the last step T[i] holds the block rank r-i sent to r, which belongs in
 * RECV block (r-i) mod P. Any P works: indices stop at P-1.
 *
 * The indices with bit k set come in runs of d ([d, 2d), [3d, 4d), ...), so
 * a step packs them into A with one COPY per run and sends A as one message
 * (with a single run it sends T's run itself); the receive lands in B and is
 * unpacked. The run [d, 2d) is made of the indices whose highest bit is k: no
 * later step moves them, so they are unpacked straight into their RECV
 * blocks, and the final inverse rotation costs nothing extra. Block r (T[0])
 * never moves: it is copied SEND -> RECV directly.
 *
 * In place (SEND == RECV): SEND is read only by the rotation at the start,
 * before anything writes RECV, and nothing is ever sent from SEND or RECV.
 * Reusing A every step is safe: the executor lets the next pack wait for
 * the previous send, which the peer takes with the receive it posts right
 * after its own sends. SCRATCH: T, A and B, P + 2M blocks, M the largest
 * number of indices below P with one bit set (at most P/2 rounded up). */
#include <stdint.h>

#include "algorithms/algorithms.h"
#include "lib/base/error.h"

static void recv_chunks(sc_sched_t *s, int peer, sc_buf_t buf, size_t off, size_t len,
                        size_t chunk) {
  for (size_t c = 0; c < len; c += chunk)
    sc_sched_recv(s, peer, buf, off + c, len - c < chunk ? len - c : chunk);
}

/* The length of the run of indices with bit value d set that starts at j
 * (an odd multiple of d below p), in blocks. */
static size_t run_len(size_t p, size_t d, size_t j) {
  return (j + d < p ? j + d : p) - j;
}

/* How many indices in [0, p) have bit value d set. */
static size_t bit_count(size_t p, size_t d) {
  size_t c = 0;
  for (size_t j = d; j < p; j += 2 * d) c += run_len(p, d, j);
  return c;
}

sc_result_t sc_bruck_alltoall_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  SC_CHECK(sc_coll_args_check(a));
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count, chunk = a->chunk_elems;
  if (n == 0) return s->status;
  const size_t own = (size_t)r * n;
  sc_sched_copy(s, SC_BUF_RECV, own, SC_BUF_SEND, own, n);
  if (p == 1) return s->status;

  const size_t up = (size_t)p;
  size_t most = 0;
  for (size_t d = 1; d < up; d *= 2) {
    size_t c = bit_count(up, d);
    if (c > most) most = c;
  }
  if (up + 2 * most > SIZE_MAX / n)
    return SC_ERR(SC_ERR_INVALID_ARG, "bruck: scratch of %zu blocks of %zu elements overflows",
                  up + 2 * most, n);
  const size_t tp = 0, ap = up * n, bp = ap + most * n;
  sc_sched_need_scratch(s, bp + most * n);

  /* T[i] = SEND block (r + i) mod P. */
  sc_sched_copy(s, SC_BUF_SCRATCH, tp, SC_BUF_SEND, own, (up - (size_t)r) * n);
  if (r > 0) sc_sched_copy(s, SC_BUF_SCRATCH, tp + (up - (size_t)r) * n, SC_BUF_SEND, 0, own);

  for (size_t d = 1; d < up; d *= 2) {
    const int to = (int)(((size_t)r + d) % up), from = (int)(((size_t)r + up - d) % up);
    const size_t len = bit_count(up, d) * n;
    if (3 * d >= up) {
      sc_send_chunks(s, to, SC_BUF_SCRATCH, tp + d * n, len, chunk);
    } else {
      size_t at = ap;
      for (size_t j = d; j < up; j += 2 * d) {
        const size_t run = run_len(up, d, j) * n;
        sc_sched_copy(s, SC_BUF_SCRATCH, at, SC_BUF_SCRATCH, tp + j * n, run);
        at += run;
      }
      sc_send_chunks(s, to, SC_BUF_SCRATCH, ap, len, chunk);
    }
    recv_chunks(s, from, SC_BUF_SCRATCH, bp, len, chunk);
    size_t at = bp;
    for (size_t i = d; i < 2 * d && i < up; i++, at += n)
      sc_sched_copy(s, SC_BUF_RECV, (((size_t)r + up - i) % up) * n, SC_BUF_SCRATCH, at, n);
    for (size_t j = 3 * d; j < up; j += 2 * d) {
      const size_t run = run_len(up, d, j) * n;
      sc_sched_copy(s, SC_BUF_SCRATCH, tp + j * n, SC_BUF_SCRATCH, at, run);
      at += run;
    }
  }
  return s->status;
}
