/* SPDX-License-Identifier: BSD-3-Clause */
/* The one list of sparse all-reduce algorithms (sc_sparse_algo_t): per
 * algorithm its one name, its schedule generator, its code in the mismatch
 * fingerprint and whether the cost model may pick it. sc_sparse_allreduce's
 * check and generator choice, the tuner's candidates and its log line,
 * SC_GTOPK_ALGO, the fingerprint, sc_sparse_algo_name (and through it the
 * Python package) and sc_gtopk_perf -a all read this table, so an algorithm
 * added here is everywhere at once. */
#ifndef SC_ALGORITHMS_SPARSE_REGISTRY_H
#define SC_ALGORITHMS_SPARSE_REGISTRY_H

#include <stdint.h>

#include "algorithms/registry.h"
#include "algorithms/sparse.h"

/* Rows of the table, one per sc_sparse_algo_t value; sizes the tuner's
 * estimates (indexed by the enum value). */
#define SC_SPARSE_ALGO_COUNT 5

typedef struct sc_sparse_algo_entry {
  sc_sparse_algo_t algo;
  const char *name; /* as SC_GTOPK_ALGO, sc_gtopk_perf -a, the logs and Python take it */
  /* NULL: no sparse all-reduce schedule (hitopk starts from dense
   * gradients inside sc_gtopk_allreduce; the cost model prices it in closed
   * form, lib/tune/tune_best.c). */
  sc_sched_gen_t gen;
  /* The variant byte of the mismatch fingerprint (lib/core/fingerprint.h):
   * on the wire between ranks, so a row keeps its code for good. */
  uint8_t fp_code;
  int pick; /* 1: a candidate of the cost model, and a value of SC_GTOPK_ALGO */
  int hier; /* 1: a candidate only where sc_hier_useful (a host holds several ranks) */
  /* The dense all-reduce whose measured network factor the cost model
   * charges this algorithm's exchanges (lib/tune/tune.h; NULL: none). */
  const char *allreduce_twin;
  int out_all;       /* 1: the result may hold nranks * k entries (the exact sum); 0: k */
  const char *about; /* one line */
} sc_sparse_algo_entry_t;

/* Every row, in the order of the enum's values: n = SC_SPARSE_ALGO_COUNT. */
const sc_sparse_algo_entry_t *sc_sparse_algos(int *n);
/* algo's row, or NULL when algo is no value of the enum. */
const sc_sparse_algo_entry_t *sc_sparse_algo_get(sc_sparse_algo_t algo);
/* The row called name (case-insensitive), or NULL. */
const sc_sparse_algo_entry_t *sc_sparse_algo_find(const char *name);
/* The row whose generator is gen, or NULL. */
const sc_sparse_algo_entry_t *sc_sparse_algo_of_gen(sc_sched_gen_t gen);
/* algo's name, or "invalid-sparse-algo": for log lines. */
const char *sc_sparse_algo_label(sc_sparse_algo_t algo);

#endif
