/* SPDX-License-Identifier: BSD-3-Clause */
/* The sparse algorithm registry (algorithms/sparse_registry.h). */
#include "algorithms/sparse_registry.h"

#include <strings.h>

/* fp_code 5 is the fingerprint's "sparse, no registered algorithm"; 0 and 1
 * are dense. */
static const sc_sparse_algo_entry_t sc_sparse_algo_table[] = {
    {SC_SPARSE_GTOPK, "gtopk", sc_sparse_gtopk_schedule, 2, 1, 0, "rd", 0,
     "butterfly of exchange-and-merge, no broadcast"},
    {SC_SPARSE_GTOPK_TREE, "tree", sc_sparse_tree_schedule, 3, 1, 0, NULL, 0,
     "the papers' binomial tree reduce-with-merge, then broadcast"},
    {SC_SPARSE_ALLGATHER, "allgather", sc_sparse_allgather_schedule, 4, 0, 0, NULL, 1,
     "TopK-SGD baseline: ring all-gather of every set, exact sum"},
    {SC_SPARSE_GTOPK_HIER, "hier", sc_sparse_hier_schedule, 6, 1, 1, "rd", 0,
     "tree inside each host, butterfly among hosts, broadcast inside each host"},
    {SC_SPARSE_HITOPK, "hitopk", NULL, 7, 1, 1, "rd", 0,
     "sc_gtopk_allreduce only: reduce-scatter in each host, top-k per shard, sparse all-gather "
     "among hosts, all-gather in each host"},
};
_Static_assert(sizeof(sc_sparse_algo_table) / sizeof(sc_sparse_algo_table[0]) ==
                   SC_SPARSE_ALGO_COUNT,
               "one row per sc_sparse_algo_t value");

const sc_sparse_algo_entry_t *sc_sparse_algos(int *n) {
  *n = SC_SPARSE_ALGO_COUNT;
  return sc_sparse_algo_table;
}

const sc_sparse_algo_entry_t *sc_sparse_algo_get(sc_sparse_algo_t algo) {
  for (int i = 0; i < SC_SPARSE_ALGO_COUNT; i++)
    if (sc_sparse_algo_table[i].algo == algo) return &sc_sparse_algo_table[i];
  return NULL;
}

const sc_sparse_algo_entry_t *sc_sparse_algo_find(const char *name) {
  for (int i = 0; name && i < SC_SPARSE_ALGO_COUNT; i++)
    if (!strcasecmp(sc_sparse_algo_table[i].name, name)) return &sc_sparse_algo_table[i];
  return NULL;
}

const sc_sparse_algo_entry_t *sc_sparse_algo_of_gen(sc_sched_gen_t gen) {
  for (int i = 0; gen && i < SC_SPARSE_ALGO_COUNT; i++)
    if (sc_sparse_algo_table[i].gen == gen) return &sc_sparse_algo_table[i];
  return NULL;
}

const char *sc_sparse_algo_label(sc_sparse_algo_t algo) {
  const sc_sparse_algo_entry_t *e = sc_sparse_algo_get(algo);
  return e ? e->name : "invalid-sparse-algo";
}
