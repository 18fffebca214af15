/* SPDX-License-Identifier: BSD-3-Clause */
/* The uneven all-to-all's count matrix, shared by sc_alltoall_perf -v and
 * perf/compare/mpi_alltoall.c; perf/compare/gloo_alltoall.py does the same
 * arithmetic in Python. Integers only, so that every rank and every peer
 * library derives the same P x P matrix from (P, seed, skew, elements)
 * without exchanging it, whatever their libm.
 *
 * The model is a mixture-of-experts router with one expert per rank: the
 * experts' popularity follows Zipf's law with exponent `skew` (0: uniform,
 * 1, 2) over an order of the experts drawn from the seed, and each rank's
 * router scales those weights by its own factor in [0.5, 1.5) per expert,
 * so that no two ranks route alike. Every rank sends the same number of
 * elements (its tokens); what a rank receives depends on its expert's
 * popularity, as in MoE dispatch. Header-only: mpicc builds
 * mpi_alltoall.c alone, outside the library's build. */
#ifndef SC_PERF_A2A_MATRIX_H
#define SC_PERF_A2A_MATRIX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define A2A_SHARE_ONE    (1ull << 20) /* a row of shares sums to at most this */
#define A2A_MAX_RANKS    32768        /* skew 2 keeps every weight >= 1 */
#define A2A_MAX_ELEMS    (1ull << 40) /* elems x A2A_SHARE_ONE fits in 64 bits */
#define A2A_MAX_SKEW     2
#define A2A_SEED_DEFAULT 1

/* splitmix64: a generator that Python reproduces with one mask. */
static inline uint64_t a2a_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* share[i * P + j]: the part of rank i's buffer that goes to rank j, in units
 * of 1 / A2A_SHARE_ONE. Returns 0, or -1 (P, skew out of range, no memory). */
static inline int a2a_shares(int P, uint64_t seed, int skew, uint64_t *share) {
  if (P < 1 || P > A2A_MAX_RANKS || skew < 0 || skew > A2A_MAX_SKEW) return -1;
  int *order = malloc((size_t)P * sizeof(*order)), *pop = malloc((size_t)P * sizeof(*pop));
  if (!order || !pop) {
    free(order);
    free(pop);
    return -1;
  }
  uint64_t state = seed;
  for (int j = 0; j < P; j++) order[j] = j;
  for (int j = P - 1; j > 0; j--) { /* Fisher-Yates: order[m] is the m-th most popular */
    int k = (int)(a2a_next(&state) % (uint64_t)(j + 1)), t = order[j];
    order[j] = order[k];
    order[k] = t;
  }
  for (int m = 0; m < P; m++) pop[order[m]] = m;
  for (int i = 0; i < P; i++) {
    uint64_t *row = share + (size_t)i * P, sum = 0;
    for (int j = 0; j < P; j++) {
      uint64_t m1 = (uint64_t)pop[j] + 1, base = 1ull << 30;
      for (int s = 0; s < skew; s++) base /= m1;
      row[j] = base * (512 + a2a_next(&state) % 1024); /* < 2^41 */
      sum += row[j];
    }
    for (int j = 0; j < P; j++) row[j] = row[j] * A2A_SHARE_ONE / sum;
  }
  free(order);
  free(pop);
  return 0;
}

/* count[i * P + j]: elements rank i sends to rank j when every rank sends
 * elems (<= A2A_MAX_ELEMS) in all: each row's cumulative shares rounded
 * down, so that a row sums to elems exactly. */
static inline void a2a_counts(int P, const uint64_t *share, uint64_t elems, size_t *count) {
  for (int i = 0; i < P; i++) {
    const uint64_t *row = share + (size_t)i * P;
    uint64_t total = 0, cum = 0, prev = 0;
    for (int j = 0; j < P; j++) total += row[j];
    for (int j = 0; j < P; j++) {
      cum += row[j];
      uint64_t upto = elems * cum / total;
      count[(size_t)i * P + j] = (size_t)(upto - prev);
      prev = upto;
    }
  }
}

#endif
