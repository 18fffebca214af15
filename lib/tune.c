/* Algorithm choice. Costs come from the alpha-beta model: a message costs
 * alpha plus beta per byte, and an algorithm's time is the sum over the
 * messages on its critical path. The per-transport alpha/beta below are the
 * model's inputs (measured on loopback TCP on the development machine), not
 * thresholds: crossovers fall out of the formulas. */
#include <math.h>

#include "lib/comm.h"
#include "lib/log.h"

typedef struct sc_link_model {
  double alpha_s;      /* seconds per message */
  double beta_s_per_b; /* seconds per byte */
} sc_link_model_t;

static const sc_link_model_t sc_tcp_model = {.alpha_s = 25e-6, .beta_s_per_b = 1.0 / 2.0e9};

static int sc_ceil_log2(int p) {
  int l = 0;
  while ((1 << l) < p) l++;
  return l;
}

/* Pipelined chain: the last chunk leaves the root after nchunks-1 chunk
 * times and needs P-1 hops. */
static double sc_chain_cost(const sc_link_model_t *m, int p, size_t bytes, size_t chunk_bytes) {
  if (p <= 1 || bytes == 0) return 0.0;
  double nchunks = ceil((double)bytes / (double)chunk_bytes);
  double per = m->alpha_s + m->beta_s_per_b * (double)(bytes < chunk_bytes ? bytes : chunk_bytes);
  return ((double)(p - 1) + nchunks - 1.0) * per;
}

static double sc_binomial_cost(const sc_link_model_t *m, int p, size_t bytes) {
  return sc_ceil_log2(p) * (m->alpha_s + m->beta_s_per_b * (double)bytes);
}

static int sc_use_chain(sc_comm_t *comm, const sc_op_t *op, size_t es) {
  if (comm->cfg.bcast_algo == SC_BCAST_CHAIN) return 1;
  if (comm->cfg.bcast_algo == SC_BCAST_BINOMIAL) return 0;
  size_t bytes = op->count * es;
  double chain = sc_chain_cost(&sc_tcp_model, comm->nranks, bytes, comm->cfg.chunk_bytes);
  double binom = sc_binomial_cost(&sc_tcp_model, comm->nranks, bytes);
  SC_TRACE(SC_SUBSYS_TUNE, "%s of %zu bytes on %d ranks: chain %.1f us, binomial %.1f us",
           sc_coll_name(op->coll), bytes, comm->nranks, chain * 1e6, binom * 1e6);
  return chain < binom;
}

sc_result_t sc_tune_build_schedule(sc_comm_t *comm, const sc_op_t *op, sc_sched_t *s) {
  size_t es = sc_dtype_size(op->dtype);
  size_t chunk = comm->cfg.chunk_bytes / es;
  sc_coll_args_t a = {.coll = op->coll,
                      .nranks = comm->nranks,
                      .rank = comm->rank,
                      .root = op->root,
                      .count = op->count,
                      .elem_size = es,
                      .chunk_elems = chunk ? chunk : 1,
                      .avg = op->op == SC_AVG};
  switch (op->coll) {
  case SC_COLL_ALLREDUCE:
    if (comm->cfg.algo != SC_ALGO_AUTO && comm->cfg.algo != SC_ALGO_RING)
      return SC_ERR(SC_ERR_UNSUPPORTED, "SC_ALGO: only ring is implemented in this release");
    return sc_ring_allreduce_schedule(&a, s);
  case SC_COLL_REDUCE_SCATTER:
    return sc_ring_reduce_scatter_schedule(&a, s);
  case SC_COLL_ALLGATHER:
    return sc_ring_allgather_schedule(&a, s);
  case SC_COLL_BROADCAST:
    return sc_use_chain(comm, op, es) ? sc_chain_broadcast_schedule(&a, s)
                                      : sc_binomial_broadcast_schedule(&a, s);
  case SC_COLL_REDUCE:
    return sc_use_chain(comm, op, es) ? sc_chain_reduce_schedule(&a, s)
                                      : sc_binomial_reduce_schedule(&a, s);
  case SC_COLL_BARRIER:
    return sc_dissemination_barrier_schedule(&a, s);
  default:
    return SC_ERR(SC_ERR_INTERNAL, "no algorithm for collective %d", (int)op->coll);
  }
}
