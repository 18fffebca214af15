/* SPDX-License-Identifier: BSD-3-Clause */
/* Sparse all-reduce schedules (docs/ALGORITHMS.md, "Sparse all-reduce"),
 * pure like every generator. Arguments: nranks, rank, count = k (the number
 * of entries kept by each Merge, and the bound on every set a peer may send:
 * every rank's input holds at most k entries). Sets: 0 the input, 1 the
 * output, 2.. scratch (lib/schedule/sched.h, SC_STEP_SPARSE_*). The output set must
 * hold k entries (gtopk, tree, hier) or nranks * k (allgather): the
 * registry's out_all (algorithms/sparse_registry.h). */
#ifndef SC_ALGORITHMS_SPARSE_H
#define SC_ALGORITHMS_SPARSE_H

#include "algorithms/algorithms.h"

/* Butterfly: log2 P' rounds of exchange-and-merge with rank ^ 2^i; ranks
 * P'..P-1 fold into rank - P' first and get the result and their survival
 * mask back at the end. The same set on every rank, no broadcast. */
sc_result_t sc_sparse_gtopk_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* The papers' tree: binomial reduce-with-merge to rank 0, then binomial
 * broadcast of the result. Every parent tracks its children's entries
 * through its merges and sends each child, with the result, the survival
 * mask of the set the child sent up (SC_SPF_MASK); a child applies it to
 * everything it tracks, so every rank learns which of its own entries
 * reached the result, as in the butterfly. */
sc_result_t sc_sparse_tree_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Hierarchical, for hosts that hold several ranks (a->host_of; NULL: one
 * host, which is the tree): the papers' tree reduce inside each host to its
 * lowest rank, the butterfly among those leaders (hosts P'..H-1 fold into
 * host - P' first), then a binomial broadcast inside each host, with the
 * tree's survival masks. Between hosts one set per host crosses the network
 * per round, where the flat butterfly sends one per rank. */
sc_result_t sc_sparse_hier_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* TopK-SGD baseline: ring all-gather of every rank's set (each message
 * carries its count first), then the exact sum by index in rank order. */
sc_result_t sc_sparse_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s);

#endif
