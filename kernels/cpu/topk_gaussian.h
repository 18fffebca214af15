/* SPDX-License-Identifier: BSD-3-Clause */
/* The decisions of the Gaussian-k selector (kernels/cpu/topk_gaussian.c) as
 * plain functions, so that the unit tests can drive them without data: the
 * first threshold from a sample, the bracketing search over thresholds, and
 * when to give up and fall back to the exact selector. */
#ifndef SC_KERNELS_CPU_TOPK_GAUSSIAN_H
#define SC_KERNELS_CPU_TOPK_GAUSSIAN_H

#include <stddef.h>
#include <stdint.h>

/* Most strided positions sampled: enough for the tail estimate at density
 * 0.001, few enough to cost about a percent of a counting pass. */
#define SC_TOPK_SAMPLE 16384
/* Largest sampled magnitudes kept for the tail estimate. */
#define SC_TOPK_TOP 256
/* From this many sampled positions expected among the top k, the tail fit
 * is checked against the sample, and the sample's own order statistic taken
 * when they disagree (sc_topk_sample_threshold). */
#define SC_TOPK_EMPIRICAL_RANK 8
/* Counting passes before the exact fallback. */
#define SC_TOPK_ROUNDS 4

/* 1 when a threshold selection of `count` entries meets the contract for k:
 * k/2 <= count <= 2k. */
int sc_topk_count_in_range(size_t count, size_t k);

/* The first threshold from the h largest sample magnitudes top[0..h)
 * (finite, sorted descending) of `taken` strided positions of an n-element
 * vector. Writes *slope = d ln(count) / d threshold estimated from the sample
 * (< 0), or 0 when the sample cannot tell (ties). */
double sc_topk_sample_threshold(const double *top, size_t h, size_t taken, size_t n, size_t k,
                                double *slope);

/* The bracketing search: `lo` is the best threshold found that passes too
 * many (count > 2k), `hi` the best that passes too few (count < k/2). Keys
 * order like magnitudes; a selection takes every key > the threshold key. */
typedef struct sc_topk_search {
  size_t k;
  double slope; /* from sc_topk_sample_threshold; 0: unknown */
  int has_lo, has_hi;
  uint64_t lo_key, hi_key;
  double lo_t, hi_t;
  size_t lo_count, hi_count;
} sc_topk_search_t;

void sc_topk_search_init(sc_topk_search_t *s, size_t k, double slope);
/* Records a counting round (threshold key, its magnitude t, count); returns 1
 * when the count is in range (the round's selection is the answer), else
 * tightens the bracket on that side and returns 0. */
int sc_topk_search_record(sc_topk_search_t *s, uint64_t key, double t, size_t count);
/* The next threshold magnitude: interpolation of ln(count) between the
 * bracket ends when both exist, else a step along the sample's slope (or a
 * factor of 2 without one). */
double sc_topk_search_next(const sc_topk_search_t *s);
/* The key to count with next, given the key of the proposed threshold: the
 * proposal when it lies strictly inside the bracket, else a bisection in key
 * space. Returns 0 when no untried key can land in range (fall back to exact). */
int sc_topk_search_key(const sc_topk_search_t *s, uint64_t proposed, uint64_t *key);

#endif
