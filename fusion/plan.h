/* Bucket planners of the fusion engine: pure functions from the registered
 * tensors (in the order their gradients become ready in backward) to bucket
 * boundaries. Bucket b holds tensors [first[b], first[b+1]); first must have
 * room for n + 1 entries; each planner returns the number of buckets. */
#ifndef SC_FUSION_PLAN_H
#define SC_FUSION_PLAN_H

#include <stddef.h>

typedef struct sc_fplan_in {
  size_t n;
  const size_t *bytes; /* per tensor */
  const int *group;    /* one collective carries one dtype: tensors of different
                          groups never share a bucket; NULL = all alike */
  const double *bw_us; /* backward compute time per tensor; NULL = all 0 */
} sc_fplan_in_t;

/* WFBP: one bucket per tensor. */
size_t sc_fplan_none(const sc_fplan_in_t *in, size_t *first);
/* One bucket (one per group when groups differ). */
size_t sc_fplan_single(const sc_fplan_in_t *in, size_t *first);
/* Close a bucket when the next tensor would take it past bucket_bytes, in
 * ready order (DDP / Horovod); a tensor larger than the limit is alone. */
size_t sc_fplan_size(const sc_fplan_in_t *in, size_t bucket_bytes, size_t *first);
/* The same rule filled from the last tensor backwards (DeAR sizes its
 * buckets in forward order); boundaries are still listed in ready order. */
size_t sc_fplan_size_forward(const sc_fplan_in_t *in, size_t bucket_bytes, size_t *first);
/* DeAR: as sc_fplan_size_forward, but the first bucket in forward order is
 * capped at bucket_bytes / SC_FPLAN_DEAR_FIRST_DIV and each later one at
 * twice the previous cap (up to bucket_bytes). Forward cannot start before
 * the first bucket's reduce-scatter (the last one launched in backward) and
 * all-gather are done, so that bucket is the stall between backward and the
 * next forward; the doubling keeps each all-gather short enough to finish
 * while the layers before it compute. */
#define SC_FPLAN_DEAR_FIRST_DIV 16
size_t sc_fplan_dear(const sc_fplan_in_t *in, size_t bucket_bytes, size_t *first);
/* MG-WFBP's greedy merge under T(m) = alpha + beta*m: tensor l joins the
 * bucket of l+1 iff ready[l+1] - start(l's bucket) < alpha. */
size_t sc_fplan_mgwfbp(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                       size_t *first);
/* The same, but a merge never takes a bucket past max_bytes. The engine
 * caps at bucket_bytes: the merge rule trusts the model's end time of the
 * previous bucket, and a merged bucket launches only when its last tensor
 * is ready, so when the link finishes earlier than modelled it idles until
 * then; the cap bounds that idle time to producing one bucket's gradients,
 * while merges of small tensors (the startups MG-WFBP saves) still happen. */
size_t sc_fplan_mgwfbp_cap(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                           size_t max_bytes, size_t *first);

/* The modelled timeline of a plan: bucket b starts at max(end of b-1, ready
 * time of its last tensor) and takes alpha + beta*bytes. start/end (nb
 * entries each) may be NULL. Returns the end of the last bucket (0 if none). */
double sc_fplan_timeline(const sc_fplan_in_t *in, const size_t *first, size_t nb, double alpha_us,
                         double beta_us_per_byte, double *start, double *end);

#endif
