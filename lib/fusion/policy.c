/* SPDX-License-Identifier: BSD-3-Clause */
/* The fusion policy registry (lib/fusion/policy.h). */
#include "lib/fusion/policy.h"

#include <strings.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/fusion/fusion.h"

static size_t plan_wfbp(const sc_fplan_in_t *in, const sc_fusion_config_t *cfg, double alpha,
                        double beta, size_t *first) {
  (void)cfg, (void)alpha, (void)beta;
  return sc_fplan_none(in, first);
}

/* The largest bucket. SC_COMPRESS_AUTO with top-k among its candidates
 * prices top-k by the sparse model, which is measured only up to
 * SC_FUSION_OMGS_MAX_BYTES (the selection slows several times per element
 * past the caches), so its buckets stay within that, as OMGS's do: a larger
 * one would be priced far below what its selection costs. */
static size_t plan_cap(const sc_fusion_config_t *cfg) {
  if (sc_fusion_mode(cfg) == SC_COMPRESS_AUTO && cfg->density > 0.0 &&
      cfg->bucket_bytes > SC_FUSION_OMGS_MAX_BYTES)
    return SC_FUSION_OMGS_MAX_BYTES;
  return cfg->bucket_bytes;
}

static size_t plan_size(const sc_fplan_in_t *in, const sc_fusion_config_t *cfg, double alpha,
                        double beta, size_t *first) {
  (void)alpha, (void)beta;
  return sc_fplan_size(in, plan_cap(cfg), first);
}

/* With density: OMGS, the optimum under the sparse cost (its startup includes
 * the selection's, so merges save both). */
static size_t plan_mgwfbp(const sc_fplan_in_t *in, const sc_fusion_config_t *cfg, double alpha,
                          double beta, size_t *first) {
  if (sc_fusion_mode(cfg) == SC_COMPRESS_TOPK)
    return sc_fplan_omgs(in, alpha, beta,
                         cfg->bucket_bytes < SC_FUSION_OMGS_MAX_BYTES ? cfg->bucket_bytes
                                                                      : SC_FUSION_OMGS_MAX_BYTES,
                         first);
  return sc_fplan_mgwfbp_cap(in, alpha, beta, plan_cap(cfg), first);
}

static size_t plan_dear(const sc_fplan_in_t *in, const sc_fusion_config_t *cfg, double alpha,
                        double beta, size_t *first) {
  size_t nb = sc_fplan_dear_model(in, alpha, beta, cfg->bucket_bytes, first);
  /* What the plan was chosen for, to set beside a measured iteration. */
  if (sc_log_enabled(SC_LOG_INFO, SC_SUBSYS_TUNE))
    SC_INFO(SC_SUBSYS_TUNE, "dear: %zu buckets, modelled backward to next forward %.1f us", nb,
            sc_fplan_dear_time(in, first, nb, alpha, beta));
  return nb;
}

static size_t plan_single(const sc_fplan_in_t *in, const sc_fusion_config_t *cfg, double alpha,
                          double beta, size_t *first) {
  (void)cfg, (void)alpha, (void)beta;
  return sc_fplan_single(in, first);
}

static const sc_fusion_policy_entry_t sc_fusion_policy_table[] = {
    {SC_FUSE_NONE, "wfbp", plan_wfbp, NULL, "one all-reduce per tensor, launched when it is ready"},
    {SC_FUSE_SIZE, "size", plan_size, NULL, "buckets of at most bucket_bytes in ready order"},
    {SC_FUSE_MGWFBP, "mgwfbp", plan_mgwfbp, NULL,
     "the optimal merge from the alpha-beta model and backward times"},
    {SC_FUSE_DEAR, "dear", plan_dear,
     "DeAR splits a dense all-reduce into reduce-scatter + all-gather, and gTop-k has no such "
     "halves",
     "reduce-scatter during backward, all-gather before the next forward"},
    {SC_FUSE_SINGLE, "single", plan_single, NULL,
     "everything in one all-reduce after the last tensor is ready"},
    /* Slices, not buckets: each tensor is its own bucket, sliced by p3.c. */
    {SC_FUSE_P3, "p3", plan_wfbp,
     "P3 all-reduces slices of tensors as they become ready everywhere, and a gTop-k selects "
     "per bucket and cannot be sliced",
     "slices of slice_bytes sent by priority (the next forward's order)"},
};
_Static_assert(sizeof(sc_fusion_policy_table) / sizeof(sc_fusion_policy_table[0]) ==
                   SC_FUSION_POLICY_COUNT,
               "one row per sc_fusion_policy_t value");

const sc_fusion_policy_entry_t *sc_fusion_policies(int *n) {
  *n = SC_FUSION_POLICY_COUNT;
  return sc_fusion_policy_table;
}

const sc_fusion_policy_entry_t *sc_fusion_policy_get(sc_fusion_policy_t policy) {
  for (int i = 0; i < SC_FUSION_POLICY_COUNT; i++)
    if (sc_fusion_policy_table[i].policy == policy) return &sc_fusion_policy_table[i];
  return NULL;
}

const sc_fusion_policy_entry_t *sc_fusion_policy_find(const char *name) {
  for (int i = 0; name && i < SC_FUSION_POLICY_COUNT; i++)
    if (!strcasecmp(sc_fusion_policy_table[i].name, name)) return &sc_fusion_policy_table[i];
  return NULL;
}

sc_result_t sc_fusion_policy_name(sc_fusion_policy_t policy, const char **name) {
  if (!name) return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_policy_name: name is NULL");
  const sc_fusion_policy_entry_t *row = sc_fusion_policy_get(policy);
  if (!row)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_policy_name: invalid policy %d", (int)policy);
  *name = row->name;
  return SC_SUCCESS;
}
