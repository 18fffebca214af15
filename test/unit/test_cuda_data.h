/* SPDX-License-Identifier: BSD-3-Clause */
/* Test data shared by the CUDA tests (test_cuda_host.c,
 * test_cuda_topk_host.c, test_cuda_kernels.c): a seeded generator, inputs
 * with planted specials, and the comparison of a reduction's result with the
 * CPU kernel's. Include after cmocka.h. */
#ifndef SC_TEST_UNIT_TEST_CUDA_DATA_H
#define SC_TEST_UNIT_TEST_CUDA_DATA_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "sparsecoll.h"

static uint64_t rng_state;

static inline void rng_seed(uint64_t s) {
  rng_state = s * 0x9e3779b97f4a7c15ull + 1;
}

static inline uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline double rng_normal(void) {
  double u = ((double)(rng_next() >> 11) + 1.0) * 0x1p-53;
  double v = ((double)(rng_next() >> 11) + 1.0) * 0x1p-53;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Random bits, with specials planted: zeros of both signs, infinities, NaNs,
 * extremes of the integer types. */
static inline void fill_bits(void *buf, size_t n, sc_dtype_t dtype) {
  size_t es = sc_dtype_size(dtype);
  uint8_t *p = buf;
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng_next();
    unsigned pick = (unsigned)(rng_next() % 16);
    if (pick == 0) r = 0;
    if (pick == 1) r = (uint64_t)1 << (8 * es - 1); /* -0, INT_MIN */
    if (pick == 2) r = ~(uint64_t)0;                /* NaN, -1, UINT_MAX */
    if (pick == 3 && dtype == SC_FLOAT32) r = f32_bits((float)rng_normal());
    if (pick == 3 && dtype == SC_FLOAT16) r = sc_float_to_half((float)rng_normal());
    if (pick == 3 && dtype == SC_BFLOAT16) r = sc_float_to_bfloat16((float)rng_normal());
    if (pick == 4 && dtype == SC_FLOAT16) r = 0x7c00;      /* inf */
    if (pick == 4 && dtype == SC_FLOAT32) r = 0x7f800000u; /* inf */
    if (pick == 5 && dtype == SC_FLOAT16) r = 0x7bff;      /* 65504: sums overflow */
    if (pick == 5 && dtype == SC_BFLOAT16) r = 0x7f7f;     /* max */
    if (pick == 6) r = r % 5;                              /* small values, ties */
    memcpy(p + i * es, &r, es);
  }
}

static inline int is_nan(sc_dtype_t dt, const void *p) {
  uint64_t b = 0;
  memcpy(&b, p, sc_dtype_size(dt));
  switch (dt) {
  case SC_FLOAT16:
    return (b & 0x7fff) > 0x7c00;
  case SC_BFLOAT16:
    return (b & 0x7fff) > 0x7f80;
  case SC_FLOAT32:
    return (b & 0x7fffffff) > 0x7f800000;
  case SC_FLOAT64:
    return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
  default:
    return 0;
  }
}

/* Bit for bit, except that which NaN a SUM, PROD or division of NaNs gives
 * is not part of the contract (x86 keeps an operand's payload, in an order
 * the compiler may swap; the GPU gives its canonical NaN): there both must
 * be NaN. MIN/MAX give the canonical NaN everywhere, so they compare bits. */
static inline void expect_same(sc_dtype_t dt, int op, const uint8_t *ref, const uint8_t *got,
                               size_t n, const uint8_t *a, const uint8_t *b) {
  size_t es = sc_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    const uint8_t *r = ref + i * es, *g = got + i * es;
    if (memcmp(r, g, es) == 0) continue;
    if (op != SC_MIN && op != SC_MAX && is_nan(dt, r) && is_nan(dt, g)) continue;
    uint64_t va = 0, vb = 0, vr = 0, vg = 0;
    memcpy(&va, a + i * es, es);
    memcpy(&vb, b + i * es, es);
    memcpy(&vr, r, es);
    memcpy(&vg, g, es);
    fail_msg("dtype %d op %d element %zu: a %llx b %llx: CPU %llx, device code %llx", (int)dt, op,
             i, (unsigned long long)va, (unsigned long long)vb, (unsigned long long)vr,
             (unsigned long long)vg);
  }
}

/* Inputs: 0 normal, 1 few distinct values (ties, +-0, NaN), 2 mostly NaN,
 * 3 all zeros of both signs, 4 random bit patterns. */
static inline void fill_case(void *x, size_t n, sc_dtype_t dt, int kind) {
  size_t es = sc_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    double v;
    int nan = 0;
    switch (kind) {
    case 0:
      v = rng_normal();
      break;
    case 1: {
      static const double few[] = {0.0, -0.0, 1.0, -1.0, 2.0, 0.5};
      unsigned c = (unsigned)(rng_next() % 7);
      nan = c == 6;
      v = nan ? 0 : few[c];
      break;
    }
    case 2:
      nan = rng_next() % 4 != 0;
      v = rng_normal();
      break;
    case 3:
      v = rng_next() % 2 ? 0.0 : -0.0;
      break;
    default: {
      uint64_t r = rng_next();
      memcpy((char *)x + i * es, &r, es);
      continue;
    }
    }
    if (dt == SC_FLOAT64) {
      double d = nan ? NAN : v;
      memcpy((char *)x + i * 8, &d, 8);
    } else if (dt == SC_FLOAT32) {
      float g = nan ? NAN : (float)v;
      memcpy((char *)x + i * 4, &g, 4);
    } else {
      float g = nan ? NAN : (float)v;
      uint16_t h = dt == SC_FLOAT16 ? sc_float_to_half(g) : sc_float_to_bfloat16(g);
      memcpy((char *)x + i * 2, &h, 2);
    }
  }
}

#endif
