/* Element arithmetic shared by the CUDA kernels and the CPU: compiled as
 * __host__ __device__ under nvcc and as plain static inline C elsewhere, so
 * that the unit tests (test/unit/test_cuda_host.c) run exactly the code the
 * kernels run, against the CPU kernels of kernels/cpu as the reference. The
 * results are bit-identical to kernels/cpu/reduce.c and half.c: wrapping
 * integer SUM/PROD, NaN-canonical and sign-of-zero-symmetric MIN/MAX,
 * fp16/bf16 through float32 with round-to-nearest-even, AVG as a division
 * after the sum. */
#ifndef SC_KERNELS_CUDA_HD_H
#define SC_KERNELS_CUDA_HD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sparsecoll.h"

#ifdef __CUDACC__
#define SC_HD __host__ __device__
#else
#define SC_HD
#endif
#define SC_HDI static inline SC_HD

/* The canonical quiet NaN the CPU MIN/MAX return (__builtin_nan("")). */
#define SC_HD_NAN32 0x7fc00000u
#define SC_HD_NAN64 0x7ff8000000000000ull

SC_HDI uint32_t sc_hd_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

SC_HDI float sc_hd_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

SC_HDI uint64_t sc_hd_f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

SC_HDI double sc_hd_bits_f64(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* ---- fp16 / bf16: the integer-only cores of kernels/cpu/half.c ---- */

SC_HDI float sc_hd_half_to_float(uint16_t h) {
  uint32_t mag = (uint32_t)(h & 0x7fffu) << 13;
  uint32_t exp = mag & 0x0f800000u;
  uint32_t normal = mag + 0x38000000u;    /* exponent bias 15 -> 127 */
  uint32_t infnan = normal + 0x38000000u; /* exponent 255, payload kept */
  int32_t m = h & 0x3ff;
  int32_t s = 0;
  s += m < 0x8 ? 8 : 0;
  m = m < 0x8 ? m << 8 : m;
  s += m < 0x80 ? 4 : 0;
  m = m < 0x80 ? m << 4 : m;
  s += m < 0x200 ? 2 : 0;
  m = m < 0x200 ? m << 2 : m;
  s += m < 0x400 ? 1 : 0;
  m = m < 0x400 ? m << 1 : m;
  uint32_t sub = ((uint32_t)(113 - s) << 23) | ((uint32_t)(m & 0x3ff) << 13);
  sub = (h & 0x3ffu) == 0 ? 0u : sub;
  infnan |= (h & 0x3ffu) != 0 ? 0x00400000u : 0u; /* a signalling NaN comes out quiet */
  uint32_t r = exp == 0x0f800000u ? infnan : (exp == 0 ? sub : normal);
  return sc_hd_bits_f32(r | (uint32_t)(h & 0x8000u) << 16);
}

SC_HDI uint16_t sc_hd_float_to_half(float f) {
  uint32_t x = sc_hd_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  /* Normal result: rebias and round to nearest even on the 13 dropped bits. */
  uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
  /* Subnormal result: the 24-bit significand shifted right by 14 + t, rounded
   * to nearest even (t capped at 11, where everything rounds to zero). */
  int32_t fexp = (int32_t)(ax >> 23);
  uint32_t sig = (ax & 0x7fffffu) | 0x800000u;
  uint32_t t = (uint32_t)(fexp >= 112 ? 0 : (fexp <= 101 ? 11 : 112 - fexp));
  uint32_t half_ulp = 0x2000u << t;
  uint32_t odd = (sig >> (14 + t)) & 1u;
  uint32_t sub = (sig + half_ulp - 1u + odd) >> (14 + t);
  uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);
  uint32_t r = ax < 0x38800000u ? sub : normal;
  r = ax >= 0x47800000u ? 0x7c00u : r;
  r = ax > 0x7f800000u ? nan : r;
  return (uint16_t)(r | sign);
}

SC_HDI float sc_hd_bf16_to_float(uint16_t h) {
  return sc_hd_bits_f32((uint32_t)h << 16);
}

SC_HDI uint16_t sc_hd_float_to_bf16(float f) {
  uint32_t x = sc_hd_f32_bits(f);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  uint32_t nan = (x >> 16) | 0x0040u;
  return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/* ---- element reductions: op is an sc_redop_t (AVG reduces as SUM) ---- */

/* Integer SUM/PROD wrap modulo 2^bits: the arithmetic runs on the unsigned
 * pattern of the same width, as the CPU kernels do. */
#define SC_HD_DEFINE_INT(SFX, T, U)                                                                \
  SC_HDI T sc_hd_red_##SFX(int op, T x, T y) {                                                     \
    U ux = (U)x, uy = (U)y;                                                                        \
    switch (op) {                                                                                  \
    case SC_PROD:                                                                                  \
      return (T)(U)((uint64_t)ux * (uint64_t)uy);                                                  \
    case SC_MIN:                                                                                   \
      return x < y ? x : y;                                                                        \
    case SC_MAX:                                                                                   \
      return x > y ? x : y;                                                                        \
    default:                                                                                       \
      return (T)(U)((uint64_t)ux + (uint64_t)uy);                                                  \
    }                                                                                              \
  }

SC_HD_DEFINE_INT(i8, int8_t, uint8_t)
SC_HD_DEFINE_INT(u8, uint8_t, uint8_t)
SC_HD_DEFINE_INT(i32, int32_t, uint32_t)
SC_HD_DEFINE_INT(u32, uint32_t, uint32_t)
SC_HD_DEFINE_INT(i64, int64_t, uint64_t)
SC_HD_DEFINE_INT(u64, uint64_t, uint64_t)

/* Float MIN/MAX: a NaN operand gives the canonical NaN; equal operands
 * (only -0/+0 differ) give the OR (MIN: -0) or AND (MAX: +0) of the bits, so
 * that a op b == b op a bit for bit. */
SC_HDI float sc_hd_red_f32(int op, float x, float y) {
  switch (op) {
  case SC_PROD:
    return x * y;
  case SC_MIN:
    if (x != x || y != y) return sc_hd_bits_f32(SC_HD_NAN32);
    return x < y ? x : (y < x ? y : sc_hd_bits_f32(sc_hd_f32_bits(x) | sc_hd_f32_bits(y)));
  case SC_MAX:
    if (x != x || y != y) return sc_hd_bits_f32(SC_HD_NAN32);
    return x > y ? x : (y > x ? y : sc_hd_bits_f32(sc_hd_f32_bits(x) & sc_hd_f32_bits(y)));
  default:
    return x + y;
  }
}

SC_HDI double sc_hd_red_f64(int op, double x, double y) {
  switch (op) {
  case SC_PROD:
    return x * y;
  case SC_MIN:
    if (x != x || y != y) return sc_hd_bits_f64(SC_HD_NAN64);
    return x < y ? x : (y < x ? y : sc_hd_bits_f64(sc_hd_f64_bits(x) | sc_hd_f64_bits(y)));
  case SC_MAX:
    if (x != x || y != y) return sc_hd_bits_f64(SC_HD_NAN64);
    return x > y ? x : (y > x ? y : sc_hd_bits_f64(sc_hd_f64_bits(x) & sc_hd_f64_bits(y)));
  default:
    return x + y;
  }
}

SC_HDI uint16_t sc_hd_red_f16(int op, uint16_t x, uint16_t y) {
  return sc_hd_float_to_half(sc_hd_red_f32(op, sc_hd_half_to_float(x), sc_hd_half_to_float(y)));
}

SC_HDI uint16_t sc_hd_red_bf16(int op, uint16_t x, uint16_t y) {
  return sc_hd_float_to_bf16(sc_hd_red_f32(op, sc_hd_bf16_to_float(x), sc_hd_bf16_to_float(y)));
}

/* ---- AVG: the sum divided by nranks (> 1), as sc_avg_finalize does ---- */

SC_HDI int8_t sc_hd_avg_i8(int8_t x, int d) {
  return (int8_t)(x / d);
}
SC_HDI uint8_t sc_hd_avg_u8(uint8_t x, int d) {
  return (uint8_t)(x / (unsigned)d);
}
SC_HDI int32_t sc_hd_avg_i32(int32_t x, int d) {
  return (int32_t)(x / (int32_t)d);
}
SC_HDI uint32_t sc_hd_avg_u32(uint32_t x, int d) {
  return x / (uint32_t)d;
}
SC_HDI int64_t sc_hd_avg_i64(int64_t x, int d) {
  return x / (int64_t)d;
}
SC_HDI uint64_t sc_hd_avg_u64(uint64_t x, int d) {
  return x / (uint64_t)d;
}
SC_HDI float sc_hd_avg_f32(float x, int d) {
  return x / (float)d;
}
SC_HDI double sc_hd_avg_f64(double x, int d) {
  return x / (double)d;
}
SC_HDI uint16_t sc_hd_avg_f16(uint16_t x, int d) {
  return sc_hd_float_to_half(sc_hd_half_to_float(x) / (float)d);
}
SC_HDI uint16_t sc_hd_avg_bf16(uint16_t x, int d) {
  return sc_hd_float_to_bf16(sc_hd_bf16_to_float(x) / (float)d);
}

#endif
