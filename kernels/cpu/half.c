/* SPDX-License-Identifier: BSD-3-Clause */
/* fp16 (IEEE binary16) and bf16 conversions. The element cores are
 * kernels/half_bits.h's branch-free integer code, shared with the CUDA
 * kernels, so that the array converters below vectorize. On x86-64
 * CPUs with F16C the fp16 array converters use the hardware instructions
 * instead (several times faster than the portable code); both give the same
 * bits, NaNs included, which the unit test checks by comparing the arrays with
 * the scalar functions. */
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/half_bits.h"

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
