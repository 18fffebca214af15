/* SPDX-License-Identifier: BSD-3-Clause */
/* Deterministic inputs and the independent reference the results are checked
 * against: every rank can compute every rank's input, so the expected value of
 * any output element needs no communication. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "perf/perf_internal.h"

static const perf_dtype_info_t *dtype_info_of(sc_dtype_t t) {
  for (int i = 0; i < PERF_N_DTYPES; i++)
    if (perf_dtype_infos[i].dtype == t) return &perf_dtype_infos[i];
  return &perf_dtype_infos[0];
}

/* ---- 16-bit float conversions (exact for the small integers used here,
 * round-to-nearest-even in general) ---- */

static uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000u;
  int fexp = (int)((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffffu;
  if (fexp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  int exp = fexp - 127 + 15;
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - exp;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)h;
}

static double half_to_double(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = ldexp(mant + 1024, exp - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static double bf16_to_double(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, sizeof(f));
  return f;
}

/* ---- element access ---- */

static void store_small(const perf_case_t *c, void *buf, size_t pos, unsigned v) {
  void *p = perf_elem(buf, c->elem_size, pos);
  switch (c->dtype) {
  case SC_INT8:
    *(int8_t *)p = (int8_t)v;
    break;
  case SC_UINT8:
    *(uint8_t *)p = (uint8_t)v;
    break;
  case SC_INT32:
    *(int32_t *)p = (int32_t)v;
    break;
  case SC_UINT32:
    *(uint32_t *)p = (uint32_t)v;
    break;
  case SC_INT64:
    *(int64_t *)p = (int64_t)v;
    break;
  case SC_UINT64:
    *(uint64_t *)p = (uint64_t)v;
    break;
  case SC_FLOAT16:
    *(uint16_t *)p = float_to_half((float)v);
    break;
  case SC_BFLOAT16:
    *(uint16_t *)p = float_to_bf16((float)v);
    break;
  case SC_FLOAT32:
    *(float *)p = (float)v;
    break;
  case SC_FLOAT64:
    *(double *)p = (double)v;
    break;
  }
}

static uint64_t load_bits(const perf_case_t *c, const void *buf, size_t pos) {
  const void *p = (const char *)buf + c->elem_size * pos;
  switch (c->dtype) {
  case SC_INT8:
    return (uint64_t)(int64_t) * (const int8_t *)p;
  case SC_UINT8:
    return *(const uint8_t *)p;
  case SC_INT32:
    return (uint64_t)(int64_t) * (const int32_t *)p;
  case SC_UINT32:
    return *(const uint32_t *)p;
  case SC_INT64:
    return (uint64_t) * (const int64_t *)p;
  case SC_UINT64:
    return *(const uint64_t *)p;
  default:
    return 0;
  }
}

static double load_double(const perf_case_t *c, const void *buf, size_t pos) {
  const void *p = (const char *)buf + c->elem_size * pos;
  switch (c->dtype) {
  case SC_FLOAT16:
    return half_to_double(*(const uint16_t *)p);
  case SC_BFLOAT16:
    return bf16_to_double(*(const uint16_t *)p);
  case SC_FLOAT32:
    return *(const float *)p;
  case SC_FLOAT64:
    return *(const double *)p;
  default:
    return 0;
  }
}

/* ---- the input formula ---- */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Ranges that keep every partial and final result exact in the dtype and
 * keep signed integer arithmetic in the library free of overflow. */
void perf_setup_values(perf_case_t *c) {
  const perf_dtype_info_t *di = dtype_info_of(c->dtype);
  double limit = di->is_float     ? di->exact_limit
                 : di->bits == 64 ? 9.2e18
                                  : ldexp(1.0, di->bits - (di->is_signed ? 1 : 0)) - 1;
  double per_rank = floor(limit / c->nranks);
  unsigned mod = 100;
  if (c->reduces && (c->op == SC_SUM || c->op == SC_AVG)) {
    mod = per_rank + 1 > 8 ? 8 : (unsigned)(per_rank + 1);
    if (mod < 2 && (di->is_float || c->op == SC_SUM)) mod = 2;
  }
  c->value_mod = mod;
  int twos = di->is_float ? di->max_pow2 : di->bits - (di->is_signed ? 2 : 1);
  c->prod_twos = twos < c->nranks ? twos : c->nranks;
}

static unsigned input_value(const perf_case_t *c, int rank, size_t index) {
  if (c->timing && c->reduces) {
    /* Values repeated in-place reduction leaves unchanged, so the timed loop
     * never overflows into Inf/NaN or wrapped integers. */
    if (c->op == SC_PROD) return 1;
    if (c->op == SC_SUM || c->op == SC_AVG) return 0;
  }
  uint64_t h =
      mix64((uint64_t)index * 0x9e3779b97f4a7c15ull ^ ((uint64_t)rank + 1) * 0xd1b54a32d192ed03ull);
  if (c->reduces && c->op == SC_PROD) return (rank < c->prod_twos && (h & 3) == 0) ? 2 : 1;
  return (unsigned)(h % c->value_mod);
}

void perf_store_input(const perf_case_t *c, void *buf, size_t pos, int rank, size_t index) {
  store_small(c, buf, pos, input_value(c, rank, index));
}

void perf_poison(void *buf, size_t bytes) {
  /* 0xa5 bytes are a negative or large number in every dtype, never an expected value. */
  memset(buf, 0xa5, bytes);
}

static int matches(const perf_case_t *c, const void *buf, size_t pos, uint64_t want_u,
                   double want_d, int inexact) {
  const perf_dtype_info_t *di = dtype_info_of(c->dtype);
  if (!di->is_float) {
    uint64_t mask = di->bits == 64 ? ~0ull : (1ull << di->bits) - 1;
    return ((load_bits(c, buf, pos) ^ want_u) & mask) == 0;
  }
  double got = load_double(c, buf, pos);
  if (!inexact || want_d == 0) return got == want_d;
  /* AVG may divide or multiply by 1/P, rounding once more: allow 2 ulps. */
  int e;
  frexp(want_d, &e);
  return fabs(got - want_d) <= 2 * ldexp(1.0, e - 1 - di->mant_bits);
}

int perf_is_input(const perf_case_t *c, const void *buf, size_t pos, int rank, size_t index) {
  unsigned v = input_value(c, rank, index);
  return matches(c, buf, pos, v, v, 0);
}

int perf_is_reduced(const perf_case_t *c, const void *buf, size_t pos, size_t index) {
  uint64_t u = 0;
  double d = 0;
  for (int r = 0; r < c->nranks; r++) {
    unsigned v = input_value(c, r, index);
    if (r == 0) {
      u = v;
      d = v;
      continue;
    }
    switch (c->op) {
    case SC_SUM:
    case SC_AVG:
      u += v;
      d += v;
      break;
    case SC_PROD:
      u *= v;
      d *= v;
      break;
    case SC_MIN:
      if (v < u) {
        u = v;
        d = v;
      }
      break;
    case SC_MAX:
      if (v > u) {
        u = v;
        d = v;
      }
      break;
    }
  }
  int inexact = 0;
  if (c->op == SC_AVG) {
    u /= (uint64_t)c->nranks; /* integer types truncate */
    d /= c->nranks;
    inexact = d != floor(d);
  }
  return matches(c, buf, pos, u, d, inexact);
}
