/* fp16 (IEEE binary16) and bf16 conversions. The element cores are branch-free
 * integer code (selects and constant shifts, no float arithmetic: gcc will not
 * if-convert a possibly trapping float op, and integer code does not depend on
 * the rounding mode) so that the array converters below vectorize. On x86-64
 * CPUs with F16C the fp16 array converters use the hardware instructions
 * instead (several times faster than the portable code); both give the same
 * bits, NaNs included, which the unit test checks by comparing the arrays with
 * the scalar functions. */
#include <string.h>

#include "kernels/cpu/reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#define SC_HAVE_F16C_PATH 1
#endif

/* Array converters walk fixed-size chunks: a constant trip count lets gcc -O2
 * (very-cheap vector cost model, which refuses loops needing an epilogue)
 * vectorize the chunk loop; the tail falls back to the same core. */
#define SC_CVT_CHUNK 64

/* The cores must be inlined into the chunk loops to vectorize; gcc's size
 * heuristics would otherwise keep the larger ones out of line. */
#if defined(__GNUC__)
#define SC_CVT_INLINE static inline __attribute__((always_inline))
#else
#define SC_CVT_INLINE static inline
#endif

static inline uint32_t sc_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float sc_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

SC_CVT_INLINE float sc_half_to_float_core(uint16_t h) {
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
SC_CVT_INLINE uint32_t sc_shr_14_plus(uint32_t x, uint32_t t) {
  x >>= 14;
  x = (t & 8u) ? x >> 8 : x;
  x = (t & 4u) ? x >> 4 : x;
  x = (t & 2u) ? x >> 2 : x;
  x = (t & 1u) ? x >> 1 : x;
  return x;
}

SC_CVT_INLINE uint16_t sc_float_to_half_core(float f) {
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

SC_CVT_INLINE float sc_bfloat16_to_float_core(uint16_t h) {
  return sc_bits_f32((uint32_t)h << 16);
}

SC_CVT_INLINE uint16_t sc_float_to_bfloat16_core(float f) {
  uint32_t x = sc_f32_bits(f);
  /* Rounding a NaN could carry into the exponent (inf) or clear the payload;
   * a quiet NaN with the top payload bits is returned instead. Finite values
   * too large round to inf through the same carry, which is what we want. */
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  uint32_t nan = (x >> 16) | 0x0040u;
  uint32_t r = (int32_t)(x & 0x7fffffffu) > 0x7f800000 ? nan : rounded;
  return (uint16_t)r;
}

uint16_t sc_float_to_half(float f) {
  return sc_float_to_half_core(f);
}

float sc_half_to_float(uint16_t h) {
  return sc_half_to_float_core(h);
}

uint16_t sc_float_to_bfloat16(float f) {
  return sc_float_to_bfloat16_core(f);
}

float sc_bfloat16_to_float(uint16_t h) {
  return sc_bfloat16_to_float_core(h);
}

#define SC_DEFINE_ARRAY_CVT(name, TOUT, TIN, core)                                                 \
  void name(TOUT *dst, const TIN *src, size_t n) {                                                 \
    size_t i = 0;                                                                                  \
    for (; i + SC_CVT_CHUNK <= n; i += SC_CVT_CHUNK) {                                             \
      TOUT *d = dst + i;                                                                           \
      const TIN *s = src + i;                                                                      \
      for (size_t j = 0; j < SC_CVT_CHUNK; j++) d[j] = core(s[j]);                                 \
    }                                                                                              \
    for (; i < n; i++) dst[i] = core(src[i]);                                                      \
  }

SC_DEFINE_ARRAY_CVT(sc_half_to_float_array_portable, float, uint16_t, sc_half_to_float_core)
SC_DEFINE_ARRAY_CVT(sc_float_to_half_array_portable, uint16_t, float, sc_float_to_half_core)

#ifdef SC_HAVE_F16C_PATH
/* The tail goes through a padded copy so that every element of the array is
 * converted by the same instruction. */
__attribute__((target("avx,f16c"))) static void
sc_half_to_float_array_f16c(float *dst, const uint16_t *src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  if (i < n) {
    uint16_t in[8] = {0};
    float out[8];
    memcpy(in, src + i, (n - i) * sizeof *src);
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)in)));
    memcpy(dst + i, out, (n - i) * sizeof *dst);
  }
}

__attribute__((target("avx,f16c"))) static void
sc_float_to_half_array_f16c(uint16_t *dst, const float *src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    float in[8] = {0};
    uint16_t out[8];
    memcpy(in, src + i, (n - i) * sizeof *src);
    _mm_storeu_si128((__m128i *)out,
                     _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
    memcpy(dst + i, out, (n - i) * sizeof *dst);
  }
}

/* F16C instructions are VEX-encoded: they need the CPU flag and an OS that
 * saves the AVX state (OSXSAVE, XCR0 bits 1-2). Asked with cpuid directly
 * because clang's __builtin_cpu_supports does not know "f16c". */
static int sc_cpu_probe_f16c(void) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned need = bit_OSXSAVE | bit_AVX | bit_F16C;
  if ((ecx & need) != need) return 0;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  return (xcr0_lo & 0x6u) == 0x6u;
}

/* Cached because cpuid is slow (a VM exit under a hypervisor) and this is
 * asked per block. Threads that race to fill it store the same value. */
static int sc_cpu_has_f16c(void) {
  static atomic_int cached; /* 0 unknown, 1 no, 2 yes */
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v == 0) {
    v = sc_cpu_probe_f16c() ? 2 : 1;
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v == 2;
}

void sc_half_to_float_array(float *dst, const uint16_t *src, size_t n) {
  if (sc_cpu_has_f16c())
    sc_half_to_float_array_f16c(dst, src, n);
  else
    sc_half_to_float_array_portable(dst, src, n);
}

void sc_float_to_half_array(uint16_t *dst, const float *src, size_t n) {
  if (sc_cpu_has_f16c())
    sc_float_to_half_array_f16c(dst, src, n);
  else
    sc_float_to_half_array_portable(dst, src, n);
}
#else
void sc_half_to_float_array(float *dst, const uint16_t *src, size_t n) {
  sc_half_to_float_array_portable(dst, src, n);
}

void sc_float_to_half_array(uint16_t *dst, const float *src, size_t n) {
  sc_float_to_half_array_portable(dst, src, n);
}
#endif

SC_DEFINE_ARRAY_CVT(sc_bfloat16_to_float_array, float, uint16_t, sc_bfloat16_to_float_core)
SC_DEFINE_ARRAY_CVT(sc_float_to_bfloat16_array, uint16_t, float, sc_float_to_bfloat16_core)
