/* SPDX-License-Identifier: BSD-3-Clause */
/* The algorithm registry (algorithms/registry.h). */
#include <strings.h>

#include "algorithms/registry.h"

static const sc_algo_entry_t sc_allreduce_algos[] = {
    {"ring", sc_ring_allreduce_schedule, "reduce-scatter + all-gather rings, pipelined in chunks",
     0, NULL, SC_SYM_SHIFT, 0},
    {"tree", sc_tree_allreduce_schedule, "pipelined double binary tree", 0, NULL, 0, 0},
    {"rd", sc_rd_allreduce_schedule, "recursive doubling of the whole vector", 0, NULL, SC_SYM_XOR,
     0},
    {"rabenseifner", sc_rabenseifner_allreduce_schedule,
     "recursive halving reduce-scatter + recursive doubling all-gather", 0, NULL, SC_SYM_XOR, 0},
    {"hier", sc_hier_allreduce_schedule,
     "per host reduce-scatter, all-reduce across hosts per local rank, per host all-gather", 1,
     NULL, 0, 0},
};
static const sc_algo_entry_t sc_reduce_scatter_algos[] = {
    {"ring", sc_ring_reduce_scatter_schedule, "ring, one block per step", 0, "ring", SC_SYM_SHIFT,
     0},
    {"recursive-halving", sc_rh_reduce_scatter_schedule, "Rabenseifner's first half", 0,
     "rabenseifner", SC_SYM_XOR, 0},
    {"hier", sc_hier_reduce_scatter_schedule,
     "per host reduce-scatter to the rails, ring reduce-scatter across hosts per rail", 1, NULL, 0,
     0},
};
static const sc_algo_entry_t sc_allgather_algos[] = {
    {"ring", sc_ring_allgather_schedule, "ring, one block per step", 0, "ring", SC_SYM_SHIFT, 0},
    {"recursive-doubling", sc_rd_allgather_schedule, "Rabenseifner's second half", 0,
     "rabenseifner", SC_SYM_NONE, 0},
    {"hier", sc_hier_allgather_schedule,
     "ring all-gather across hosts per rail, per host all-gather", 1, NULL, 0, 0},
};
/* Broadcast and reduce share names: SC_BCAST_ALGO forces both. */
static const sc_algo_entry_t sc_broadcast_algos[] = {
    {"chain", sc_chain_broadcast_schedule, "pipelined chain from the root", 0, NULL, 0, 0},
    {"binomial", sc_binomial_broadcast_schedule, "binomial tree", 0, NULL, 0, 0},
};
static const sc_algo_entry_t sc_reduce_algos[] = {
    {"chain", sc_chain_reduce_schedule, "pipelined chain to the root", 0, NULL, 0, 0},
    {"binomial", sc_binomial_reduce_schedule, "binomial tree", 0, NULL, 0, 0},
};
static const sc_algo_entry_t sc_barrier_algos[] = {
    {"dissemination", sc_dissemination_barrier_schedule, "dissemination, ceil(log2 P) rounds", 0,
     NULL, 0, 0},
};

/* SC_A2A_ALGO forces the all-to-all, SC_A2AV_ALGO the uneven one. */
static const sc_algo_entry_t sc_alltoall_algos[] = {
    {"pairwise", sc_pairwise_alltoall_schedule, "pairwise exchange, P-1 steps", 0, NULL,
     SC_SYM_SHIFT, 1},
    {"bruck", sc_bruck_alltoall_schedule, "Bruck, ceil(log2 P) steps of half the data", 0, NULL,
     SC_SYM_SHIFT, 0},
    {"hier", sc_hier_alltoall_schedule,
     "regroup inside each host, one message per host and local rank across hosts", 1, NULL, 0, 0},
};
static const sc_algo_entry_t sc_alltoallv_algos[] = {
    {"pairwise", sc_pairwise_alltoallv_schedule, "pairwise exchange, P-1 steps", 0, NULL, 0, 1},
    {"sparse", sc_sparse_alltoallv_schedule,
     "pairwise exchange of the non-empty blocks only, after a count check", 0, NULL, 0, 0},
    {"hier", sc_hier_alltoallv_schedule,
     "counts exchanged inside each host, then one message per host and local rank across "
     "hosts (hosts of equal rank counts)",
     1, NULL, 0, 0},
};
/* Gather and scatter share names (SC_GATHER_ALGO forces both). */
static const sc_algo_entry_t sc_gather_algos[] = {
    {"binomial", sc_binomial_gather_schedule, "binomial tree", 0, NULL, 0, 0},
    {"linear", sc_linear_gather_schedule, "every rank sends to the root", 0, NULL, 0, 1},
};
static const sc_algo_entry_t sc_scatter_algos[] = {
    {"binomial", sc_binomial_scatter_schedule, "binomial tree", 0, NULL, 0, 0},
    {"linear", sc_linear_scatter_schedule, "the root sends to every rank", 0, NULL, 0, 1},
};
/* Both rotate with equal blocks only: the cost model windows them then
 * (lib/tune/tune_model.c, sc_tune_window). */
static const sc_algo_entry_t sc_allgatherv_algos[] = {
    {"ring", sc_ring_allgatherv_schedule, "ring, one block per step", 0, NULL, SC_SYM_SHIFT, 0},
    {"direct", sc_direct_allgatherv_schedule, "every rank sends its block to every rank", 0, NULL,
     SC_SYM_SHIFT, 1},
};

const sc_algo_entry_t *sc_algo_candidates(sc_coll_t coll, int *n) {
#define SC_ALGOS(arr) (*n = (int)(sizeof(arr) / sizeof(arr[0])), arr)
  switch (coll) {
  case SC_COLL_ALLREDUCE:
    return SC_ALGOS(sc_allreduce_algos);
  case SC_COLL_REDUCE_SCATTER:
    return SC_ALGOS(sc_reduce_scatter_algos);
  case SC_COLL_ALLGATHER:
    return SC_ALGOS(sc_allgather_algos);
  case SC_COLL_BROADCAST:
    return SC_ALGOS(sc_broadcast_algos);
  case SC_COLL_REDUCE:
    return SC_ALGOS(sc_reduce_algos);
  case SC_COLL_ALLTOALL:
    return SC_ALGOS(sc_alltoall_algos);
  case SC_COLL_ALLTOALLV:
    return SC_ALGOS(sc_alltoallv_algos);
  case SC_COLL_GATHER:
    return SC_ALGOS(sc_gather_algos);
  case SC_COLL_SCATTER:
    return SC_ALGOS(sc_scatter_algos);
  case SC_COLL_ALLGATHERV:
    return SC_ALGOS(sc_allgatherv_algos);
  default:
    return SC_ALGOS(sc_barrier_algos);
  }
#undef SC_ALGOS
}

int sc_algo_find(sc_coll_t coll, const char *name) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  for (int i = 0; name && i < n; i++)
    if (!strcasecmp(c[i].name, name)) return i;
  return -1;
}

int sc_algo_hier_index(sc_coll_t coll) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  for (int i = 0; i < n; i++)
    if (c[i].hier) return i;
  return -1;
}

const char *sc_coll_name(sc_coll_t c) {
  static const char *const names[] = {"allreduce", "reduce_scatter", "allgather", "broadcast",
                                      "reduce",    "barrier",        "alltoall",  "alltoallv",
                                      "gather",    "scatter",        "allgatherv"};
  return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "invalid-collective";
}
