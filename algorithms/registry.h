/* SPDX-License-Identifier: BSD-3-Clause */
/* The one list of algorithms: every collective's candidate schedule
 * generators, with the names users see. SC_ALGO and SC_BCAST_ALGO parsing,
 * the tuner's candidates, its log lines, sc-info and the perf binaries' -a
 * all read this table, so an algorithm added here is everywhere at once. */
#ifndef SC_ALGORITHMS_REGISTRY_H
#define SC_ALGORITHMS_REGISTRY_H

#include "algorithms/algorithms.h"

#define SC_ALGO_MAX 8 /* candidates of one collective, at most */

typedef sc_result_t (*sc_sched_gen_t)(const sc_coll_args_t *, sc_sched_t *);

typedef enum sc_algo_sym {
  SC_SYM_NONE = 0,
  SC_SYM_SHIFT, /* every peer shifted by r (mod P): rings, the pairwise exchange */
  SC_SYM_XOR    /* every peer XOR r on a power of two, and the replay with it (test_tune_window) */
} sc_algo_sym_t;

typedef struct sc_algo_entry {
  const char *name; /* as SC_ALGO / SC_BCAST_ALGO / perf -a take it */
  sc_sched_gen_t gen;
  const char *about; /* one line for sc-info */
  int hier; /* 1: needs a hierarchy (sc_hier_useful): a candidate only where there is one */
  /* The all-reduce whose traffic pattern this reduce-scatter's or all-gather's
   * is half of (NULL: none): the cost model charges it that all-reduce's
   * measured network factor (lib/tune/tune.h, allreduce_beta_scale). */
  const char *allreduce_twin;
  /* How rank r's schedule follows from rank 0's, so that the cost model may
   * replay a window of ranks (lib/tune/tune.h, sc_tune_predict_symmetric)
   * instead of all P: sc_algo_sym_t. */
  int sym;
  /* 1: some rank's schedule talks to every other rank (P - 1 peers, each a
   * connection and its descriptors); the cost model keeps such a candidate
   * within the job's descriptor limit (lib/tune/tune.h, peer_budget). */
  int all_peers;
} sc_algo_entry_t;

/* The candidates of coll, in a fixed order (the tuner's indices): n >= 1. */
const sc_algo_entry_t *sc_algo_candidates(sc_coll_t coll, int *n);
/* coll's candidate called name (case-insensitive): its index, or -1. */
int sc_algo_find(sc_coll_t coll, const char *name);
/* coll's "hier" candidate: its index, or -1 when coll has none. */
int sc_algo_hier_index(sc_coll_t coll);
/* "allreduce", "broadcast", ... */
const char *sc_coll_name(sc_coll_t c);

#endif
