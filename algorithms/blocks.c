/* SPDX-License-Identifier: BSD-3-Clause */
/* Block partitioning and argument checks shared by the schedule generators. */
#include <stdint.h>

#include "algorithms/algorithms.h"
#include "lib/base/error.h"

void sc_block_range(size_t count, int nranks, int b, size_t *off, size_t *len) {
  size_t p = (size_t)nranks, ub = (size_t)b;
  size_t base = count / p, rem = count % p;
  *len = base + (ub < rem ? 1 : 0);
  *off = ub * base + (ub < rem ? ub : rem);
}

void sc_send_chunks(sc_sched_t *s, int peer, sc_buf_t buf, size_t off, size_t len, size_t chunk) {
  for (size_t c = 0; c < len; c += chunk)
    sc_sched_send(s, peer, buf, off + c, len - c < chunk ? len - c : chunk);
}

sc_result_t sc_coll_args_check(const sc_coll_args_t *a) {
  /* The generators' rank arithmetic (r + 2^k, 2(P-1) hops) stays in int. */
  if (a->nranks < 1 || a->nranks > (1 << 30))
    return SC_ERR(SC_ERR_INVALID_ARG, "nranks %d outside [1, 2^30]", a->nranks);
  if (a->rank < 0 || a->rank >= a->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "rank %d outside [0, %d)", a->rank, a->nranks);
  if (a->chunk_elems == 0) return SC_ERR(SC_ERR_INVALID_ARG, "chunk_elems is 0");
  const int rooted = a->coll == SC_COLL_BROADCAST || a->coll == SC_COLL_REDUCE ||
                     a->coll == SC_COLL_GATHER || a->coll == SC_COLL_SCATTER;
  if (rooted && (a->root < 0 || a->root >= a->nranks))
    return SC_ERR(SC_ERR_INVALID_ARG, "root %d outside [0, %d)", a->root, a->nranks);
  /* RS and AG address nranks*count elements: offsets must not wrap. */
  const int blocks = a->coll == SC_COLL_REDUCE_SCATTER || a->coll == SC_COLL_ALLGATHER ||
                     a->coll == SC_COLL_ALLTOALL || a->coll == SC_COLL_GATHER ||
                     a->coll == SC_COLL_SCATTER;
  if (blocks && a->count > SIZE_MAX / (size_t)a->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "count %zu * nranks %d overflows", a->count, a->nranks);
  if (a->coll == SC_COLL_ALLTOALLV && (!a->sendcounts || !a->sdispls))
    return SC_ERR(SC_ERR_INVALID_ARG, "alltoallv without send counts or displacements");
  if ((a->coll == SC_COLL_ALLTOALLV || a->coll == SC_COLL_ALLGATHERV) &&
      (!a->recvcounts || !a->rdispls))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s without receive counts or displacements",
                  a->coll == SC_COLL_ALLTOALLV ? "alltoallv" : "allgatherv");
  return SC_SUCCESS;
}

int sc_coll_trivial(const sc_coll_args_t *a, sc_sched_t *s) {
  if (a->count == 0) return 1;
  if (a->avg) sc_sched_set_avg(s, SC_BUF_RECV, 0, a->count);
  if (a->nranks > 1) return 0;
  sc_sched_copy(s, SC_BUF_RECV, 0, SC_BUF_SEND, 0, a->count);
  return 1;
}
