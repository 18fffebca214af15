/* SPDX-License-Identifier: BSD-3-Clause */
/* Random small models for the planners' brute-force tests (test_fusion_omgs,
 * test_fusion_dear): sizes over four decades, like conv kernels next to
 * biases; a fifth of the layers take no backward time; optional dtype
 * groups and size cap. Each test keeps its own generator state. Include
 * after cmocka.h: fplan_mask_of asserts. */
#ifndef SC_TEST_FPLAN_RANDOM_H
#define SC_TEST_FPLAN_RANDOM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

enum { MAXN = 11 };

typedef struct model {
  size_t n;
  size_t bytes[MAXN];
  double bw[MAXN];
  int group[MAXN];
  double alpha, beta;
  size_t cap;
} model_t;

static inline double fplan_urand(uint64_t *rng) {
  *rng ^= *rng << 13;
  *rng ^= *rng >> 7;
  *rng ^= *rng << 17;
  return (double)(*rng >> 11) / 9007199254740992.0;
}

static inline void fplan_random_model(model_t *m, size_t n, int groups, int capped, uint64_t *rng) {
  m->n = n;
  for (size_t l = 0; l < n; l++) {
    m->bytes[l] = (size_t)(4 * pow(10, 1 + 4 * fplan_urand(rng)));
    m->bw[l] = fplan_urand(rng) < 0.2 ? 0 : 5 + 200 * fplan_urand(rng);
    m->group[l] = groups ? (int)(fplan_urand(rng) * 2) : 0;
  }
  m->alpha = fplan_urand(rng) < 0.1 ? 0 : 10 + 500 * fplan_urand(rng);
  m->beta = 1e-4 + 0.05 * fplan_urand(rng);
  m->cap = capped ? (size_t)(4 * pow(10, 2 + 3 * fplan_urand(rng))) : SIZE_MAX;
}

/* The cut-point mask of a plan (bit l: a bucket ends after tensor l),
 * asserting that first[] is a partition of the model's tensors. */
static inline unsigned fplan_mask_of(const model_t *m, const size_t *first, size_t nb) {
  unsigned mask = 0;
  assert_int_equal(first[0], 0);
  assert_int_equal(first[nb], m->n);
  for (size_t b = 0; b + 1 < nb; b++) {
    assert_true(first[b + 1] > first[b]);
    mask |= 1u << (first[b + 1] - 1);
  }
  return mask;
}

#endif
