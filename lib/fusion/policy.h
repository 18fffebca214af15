/* SPDX-License-Identifier: BSD-3-Clause */
/* The one list of fusion policies (sc_fusion_policy_t): per policy its one
 * name, its bucket planner and whether it takes density > 0. sc_fusion_create's
 * checks, sc_fusion_plan, the plan's log line, sc_fusion_policy_name (and
 * through it the Python package and its DistributedOptimizer) and
 * sc_fusion_replay -p all read this table. */
#ifndef SC_FUSION_POLICY_H
#define SC_FUSION_POLICY_H

#include <stddef.h>

#include "lib/fusion/plan.h"
#include "sparsecoll.h"

/* Rows of the table, one per sc_fusion_policy_t value. */
#define SC_FUSION_POLICY_COUNT 6

/* The bucket boundaries of in (plan.h: first[0..nb], returns nb) under cfg
 * (bucket_bytes already defaulted, density as given) and the all-reduce model
 * T(m) = alpha_us + beta_us_per_byte * m the plan step settled on. */
typedef size_t (*sc_fusion_planner_t)(const sc_fplan_in_t *in, const sc_fusion_config_t *cfg,
                                      double alpha_us, double beta_us_per_byte, size_t *first);

typedef struct sc_fusion_policy_entry {
  sc_fusion_policy_t policy;
  const char *name; /* as Python's Fusion and DistributedOptimizer, sc_fusion_replay -p take it */
  sc_fusion_planner_t plan;
  /* NULL: density > 0 makes every bucket a gTop-k step. Else the reason the
   * policy refuses density > 0 (sc_fusion_create: SC_ERR_UNSUPPORTED). */
  const char *dense_only;
  const char *about; /* one line */
} sc_fusion_policy_entry_t;

/* Every row, in the order of the enum's values: n = SC_FUSION_POLICY_COUNT. */
const sc_fusion_policy_entry_t *sc_fusion_policies(int *n);
/* policy's row, or NULL when policy is no value of the enum. */
const sc_fusion_policy_entry_t *sc_fusion_policy_get(sc_fusion_policy_t policy);
/* The row called name (case-insensitive), or NULL. */
const sc_fusion_policy_entry_t *sc_fusion_policy_find(const char *name);

#endif
