/* SPDX-License-Identifier: BSD-3-Clause */
/* Bucket planners of the fusion engine: pure functions from the registered
 * tensors (in the order their gradients become ready in backward) to bucket
 * boundaries. Bucket b holds tensors [first[b], first[b+1]); first must have
 * room for n + 1 entries; each planner returns the number of buckets. */
#ifndef SC_FUSION_PLAN_H
#define SC_FUSION_PLAN_H

#include <stddef.h>
#include <stdint.h>

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
/* DeAR: the size rule filled from the last tensor backwards (DeAR sizes its
 * buckets in forward order; boundaries are still listed in ready order), and
 * the first bucket in forward order is capped at bucket_bytes / SC_FPLAN_DEAR_FIRST_DIV and each
 * later one at twice the previous cap (up to bucket_bytes). Forward cannot start before the first
 * bucket's reduce-scatter (the last one launched in backward) and all-gather are done, so that
 * bucket is the stall between backward and the next forward; the doubling keeps each all-gather
 * short enough to finish while the layers before it compute. */
#define SC_FPLAN_DEAR_FIRST_DIV 16
size_t sc_fplan_dear(const sc_fplan_in_t *in, size_t bucket_bytes, size_t *first);
/* The same with the first cap given: buckets filled from the last tensor
 * backwards, the k-th of them capped at min(bucket_bytes, first_cap * 2^k)
 * (first_cap = bucket_bytes: the plain size rule in forward order). */
size_t sc_fplan_dear_capped(const sc_fplan_in_t *in, size_t bucket_bytes, size_t first_cap,
                            size_t *first);
/* DeAR's modelled iteration, from the start of backward to the end of the
 * next forward pass. The reduce-scatters run in ready order as in
 * sc_fplan_timeline, each taking alpha + beta/2 * bytes (half an
 * all-reduce's bytes; its own launch, so a whole alpha). The all-gathers
 * follow on the same link in forward order at the same cost, and a
 * bucket's layers run forward once its all-gather is done, the layers
 * before them are done and backward is over. The API knows backward times
 * only; forward takes SC_FPLAN_DEAR_FWD_PER_BWD of each, the usual
 * proportion (and the traces' in perf/traces). */
#define SC_FPLAN_DEAR_FWD_PER_BWD 0.5
double sc_fplan_dear_time(const sc_fplan_in_t *in, const size_t *first, size_t nb, double alpha_us,
                          double beta_us_per_byte);
/* DeAR's plan under that model, by local search: from each of a few plans
 * (the size rule's family with first caps bucket_bytes / 2^k, one bucket per
 * tensor, sc_fplan_size, and OMGS's plan of the reduce-scatters alone) a
 * steepest descent drops, adds or moves one boundary at a time while the
 * modelled iteration shortens; the best end wins. At most
 * SC_FPLAN_DEAR_SEARCH_EVALS plans are priced in all, each in O(buckets).
 * The price has local minima, so this is not proven optimal: against every
 * partition of up to 11 tensors it was exact in all but 3 of 100,000 random
 * models and within 0.08% in those. The size rule's forward-order growth fixes
 * the first bucket's size for every model; this one lets the times decide,
 * e.g. a first bucket small enough that its reduce-scatter and all-gather,
 * both exposed between backward and forward, cost little. No bucket passes
 * max_bytes (a larger tensor is alone), groups never mix. Without backward
 * times, or with beta <= 0, it is sc_fplan_dear. */
#define SC_FPLAN_DEAR_SEARCH_EVALS 2000000
size_t sc_fplan_dear_model(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                           size_t max_bytes, size_t *first);
/* MG-WFBP's greedy merge under T(m) = alpha + beta*m: tensor l joins the
 * bucket of l+1 iff ready[l+1] - start(l's bucket) < alpha, and the merge
 * does not take the bucket past max_bytes (SIZE_MAX: the paper's rule). The engine
 * caps at bucket_bytes: the merge rule trusts the model's end time of the
 * previous bucket, and a merged bucket launches only when its last tensor
 * is ready, so when the link finishes earlier than modelled it idles until
 * then; the cap bounds that idle time to producing one bucket's gradients,
 * while merges of small tensors (the startups MG-WFBP saves) still happen. */
size_t sc_fplan_mgwfbp_cap(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                           size_t max_bytes, size_t *first);

/* OMGS (sparse buckets): the contiguous partition whose modelled timeline
 * (sc_fplan_timeline with T(m) = alpha + beta*m, here the gTop-k collective
 * plus the selection) ends first, by dynamic programming over prefixes: a
 * bucket's end, max(end of the previous, ready of its last tensor) + T, grows
 * with the previous end, so the best prefix is the best start for any last
 * bucket. Ties keep fewer buckets. No bucket passes max_bytes (a tensor
 * larger than that is alone). first needs n + 1 entries; O(n^2). */
size_t sc_fplan_omgs(const sc_fplan_in_t *in, double alpha_us, double beta_us_per_byte,
                     size_t max_bytes, size_t *first);

/* P3. Elements per slice of a tensor of elem_size-byte elements (at least 1). */
size_t sc_fplan_p3_slice_elems(size_t slice_bytes, size_t elem_size);
/* Slices of a tensor of count elements. */
size_t sc_fplan_p3_nslices(size_t count, size_t slice_elems);
/* The default slice: SC_FPLAN_P3_SLICE_ALPHAS startups' worth of bytes, so a
 * slice's own startup and the agreement step before it cost about 2/(K+2) of
 * the link, within [SC_FPLAN_P3_SLICE_MIN, SC_FPLAN_P3_SLICE_MAX]. The floor
 * is for what no startup measured at plan time shows: each step wakes the
 * scheduler and the progress thread, which on a loaded host costs ms (4
 * ranks on 2 busy cores, 1 Gbit/s bed: 64 KiB slices took 3.5 ms each
 * against 0.8 ms on the wire; 1 MiB slices ran near the link rate). */
#define SC_FPLAN_P3_SLICE_ALPHAS 16.0
#define SC_FPLAN_P3_SLICE_MIN    ((size_t)1024 * 1024)
#define SC_FPLAN_P3_SLICE_MAX    ((size_t)16 * 1024 * 1024)
size_t sc_fplan_p3_default_slice(double alpha_us, double beta_us_per_byte);
/* The tensor whose next slice goes now: the highest-priority tensor with a
 * round ready on every rank and not fully launched, i.e. the largest t with
 * agreed[t] > launched[t] (agreed: the MIN over ranks of each tensor's count
 * of readies; launched: its rounds whose slices are all launched). Tensors
 * register in backward order, so the largest index is the first one the
 * next forward pass needs. -1 when none. */
long sc_fplan_p3_next(size_t n, const uint64_t *agreed, const uint64_t *launched);
/* One agreement step's slices: repeats sc_fplan_p3_next's choice, advancing
 * launched[] and next[] (the slice of the current round each tensor sends
 * next, of ns[] slices) as the scheduler does, until the next slice would
 * take the step past budget_bytes or max_slices (the first always goes).
 * Slice i of tensor t has full_bytes[t] bytes, or tail_bytes[t] when last.
 * Writes the (tensor, slice) pairs in send order to out_t/out_i; returns
 * their count (0 when nothing is agreed and unsent). It reads only what every
 * rank holds alike (the agreement, the plan, the launches so far), so every
 * rank gets the same list and issues the same collectives in the same
 * order. A tensor that becomes ready on every rank during the step goes in
 * the next step, ahead of what is still queued: preemption is per step. */
size_t sc_fplan_p3_batch(size_t n, const uint64_t *agreed, uint64_t *launched, size_t *next,
                         const size_t *ns, const size_t *full_bytes, const size_t *tail_bytes,
                         size_t budget_bytes, size_t max_slices, size_t *out_t, size_t *out_i);
/* The default budget of one step, in slices of the plan's slice size
 * (SC_P3_STEP_SLICES overrides it): the agreement round is paid once per
 * this many bytes rather than per slice, but a newly ready tensor waits for
 * this much traffic in flight before it overtakes. One, because the
 * agreement is already hidden behind the slice in flight at the default
 * slice size, and the coarser preemption cost more than it saved: 4 ranks on
 * the 1 Gbit/s bed, 1 MiB slices, P3 took 2-11% longer per iteration with 4
 * slices a step than with 1 on ResNet-50 and VGG-16 (docs/REPRODUCTION.md,
 * (d)). Several slices a step pay off where a step costs more than a slice
 * (small slice_bytes on a busy host). SC_FPLAN_P3_BATCH_MAX caps the count
 * of small slices (tensors below a slice) in one step. */
#define SC_FPLAN_P3_BATCH_SLICES 1
#define SC_FPLAN_P3_BATCH_MAX    64

/* The modelled timeline of a plan: bucket b starts at max(end of b-1, ready
 * time of its last tensor) and takes alpha + beta*bytes. start/end (nb
 * entries each) may be NULL. Returns the end of the last bucket (0 if none). */
double sc_fplan_timeline(const sc_fplan_in_t *in, const size_t *first, size_t nb, double alpha_us,
                         double beta_us_per_byte, double *start, double *end);

/* The calibration's line T(bytes) = alpha + beta * bytes through n >= 2
 * measured points, x ascending: least squares, with alpha held to (0, y[0]]
 * (no collective costs less than its startup, so a fitted startup above the
 * smallest measured time is noise in the large points; at or below 0 it
 * takes y[0] so that merging keeps a price) and beta refitted through the
 * points for the held alpha. */
void sc_fplan_fit_line(const double *x, const double *y, int n, double *alpha_us,
                       double *beta_us_per_byte);

/* SC_COMPRESS_AUTO's corrected cost of one mode for a bucket it models at
 * c, from its trial: pts holds n pairs (modelled, measured), in any order,
 * a pair with a zero where it did not run. Between two points,
 * the line through them; below the first and above the last, the ratio
 * measured / modelled at that point (so the result is exact at every
 * point, never negative, and rises with c). A measured time below that of
 * a point modelled cheaper is raised to it; no usable point: c. */
#define SC_FPLAN_TRIAL_MAX 4
double sc_fplan_trial_cost(const double *pts, int n, double c);

#endif
