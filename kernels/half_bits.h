/* SPDX-License-Identifier: BSD-3-Clause */
/* Float bit patterns, and the fp16 (IEEE binary16) and bf16 <-> float32
 * element cores, written once for the CPU converters (kernels/cpu/half.c) and
 * the CUDA kernels (kernels/cuda/hd.h). The cores are branch-free integer
 * code (selects and constant shifts, no float arithmetic: gcc will not
 * if-convert a possibly trapping float op, SSE2 has no per-lane variable
 * shift, and integer code does not depend on the rounding mode or DAZ), so
 * that the CPU array converters vectorize and the device gives the same bits
 * as the host. */
#ifndef SC_KERNELS_HALF_BITS_H
#define SC_KERNELS_HALF_BITS_H

#include <stdint.h>
#include <string.h>

/* SC_HD marks code the CUDA kernels share with the host. SC_HALF_INLINE:
 * the cores must be inlined into the CPU chunk loops to vectorize (gcc's size
 * heuristics would otherwise keep the larger ones out of line). */
#ifdef __CUDACC__
#define SC_HD          __host__ __device__
#define SC_HALF_INLINE static __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define SC_HD
#define SC_HALF_INLINE static inline __attribute__((always_inline))
#else
#define SC_HD
#define SC_HALF_INLINE static inline
#endif

SC_HALF_INLINE uint32_t sc_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

SC_HALF_INLINE float sc_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

SC_HALF_INLINE uint64_t sc_f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

SC_HALF_INLINE double sc_bits_f64(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

SC_HALF_INLINE float sc_half_to_float_core(uint16_t h) {
  uint32_t mag = (uint32_t)(h & 0x7fffu) << 13;
  uint32_t exp = mag & 0x0f800000u;
  /* Rebias the exponent from 15 to 127. */
  uint32_t normal = mag + 0x38000000u;
  /* Inf/NaN: rebias once more so the exponent becomes 255, keeping the payload. */
  uint32_t infnan = normal + 0x38000000u;
  /* Subnormal: normalize the 10-bit mantissa so its leading 1 reaches bit 10.
   * A binary search with constant shifts (not clz, not float arithmetic) keeps
   * this exact under any rounding mode or DAZ and vectorizable. The compares
   * are signed because SSE2 has no unsigned ones. */
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
  /* A signalling NaN comes out quiet, as the F16C instruction does it. */
  infnan |= (h & 0x3ffu) != 0 ? 0x00400000u : 0u;
  uint32_t r = exp == 0x0f800000u ? infnan : (exp == 0 ? sub : normal);
  return sc_bits_f32(r | (uint32_t)(h & 0x8000u) << 16);
}

/* x >> (14 + t) for t in [0, 15], with constant shifts only (SSE2 has no
 * per-lane variable shift). */
SC_HALF_INLINE uint32_t sc_shr_14_plus(uint32_t x, uint32_t t) {
  x >>= 14;
  x = (t & 8u) ? x >> 8 : x;
  x = (t & 4u) ? x >> 4 : x;
  x = (t & 2u) ? x >> 2 : x;
  x = (t & 1u) ? x >> 1 : x;
  return x;
}

SC_HALF_INLINE uint16_t sc_float_to_half_core(float f) {
  uint32_t x = sc_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  /* Normal result: rebias (subtract 112 << 23, written as a wrapping add) and
   * round to nearest even on the 13 dropped bits. A carry out of the mantissa
   * correctly bumps the exponent, up to 0x7c00 (inf) from 65520 on. */
  uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
  /* Subnormal result (value < 2^-14): the half unit is 2^-24, so the result is
   * the 24-bit significand shifted right by 126 - exp, rounded to nearest even.
   * The shift is capped at 25, where every such value rounds to zero (float
   * subnormals included). Integer-only: exact under any rounding mode. */
  int32_t fexp = (int32_t)(ax >> 23);
  uint32_t sig = (ax & 0x7fffffu) | 0x800000u;
  uint32_t t = (uint32_t)(fexp >= 112 ? 0 : (fexp <= 101 ? 11 : 112 - fexp));
  uint32_t half_ulp = 0x2000u;
  half_ulp = (t & 8u) ? half_ulp << 8 : half_ulp;
  half_ulp = (t & 4u) ? half_ulp << 4 : half_ulp;
  half_ulp = (t & 2u) ? half_ulp << 2 : half_ulp;
  half_ulp = (t & 1u) ? half_ulp << 1 : half_ulp;
  uint32_t odd = sc_shr_14_plus(sig, t) & 1u;
  uint32_t sub = sc_shr_14_plus(sig + half_ulp - 1u + odd, t);
  /* NaN stays NaN: keep the top payload bits and set the quiet bit (a payload
   * only in the dropped bits would otherwise turn into inf). */
  uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);
  /* ax < 2^31, so signed compares (all SSE2 has) see the same order. */
  int32_t sax = (int32_t)ax;
  uint32_t r = sax < 0x38800000 ? sub : normal;
  r = sax >= 0x47800000 ? 0x7c00u : r;
  r = sax > 0x7f800000 ? nan : r;
  return (uint16_t)(r | sign);
}

SC_HALF_INLINE float sc_bfloat16_to_float_core(uint16_t h) {
  return sc_bits_f32((uint32_t)h << 16);
}

SC_HALF_INLINE uint16_t sc_float_to_bfloat16_core(float f) {
  uint32_t x = sc_f32_bits(f);
  /* Rounding a NaN could carry into the exponent (inf) or clear the payload;
   * a quiet NaN with the top payload bits is returned instead. Finite values
   * too large round to inf through the same carry, which is what we want. */
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  uint32_t nan = (x >> 16) | 0x0040u;
  uint32_t r = (int32_t)(x & 0x7fffffffu) > 0x7f800000 ? nan : rounded;
  return (uint16_t)r;
}

#endif
