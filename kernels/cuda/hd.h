/* SPDX-License-Identifier: BSD-3-Clause */
/* Element arithmetic shared by the CUDA kernels and the CPU: compiled as
 * __host__ __device__ under nvcc and as plain static inline C elsewhere, so
 * that the unit tests (test/unit/test_cuda_host.c) run exactly the code the
 * kernels run, against the CPU kernels of kernels/cpu as the reference. The
 * results are bit-identical to kernels/cpu/reduce.c and half.c: wrapping
 * integer SUM/PROD, NaN-canonical and sign-of-zero-symmetric MIN/MAX,
 * fp16/bf16 through float32 with round-to-nearest-even, AVG as a division
 * after the sum. The fp16/bf16 conversion cores are kernels/half_bits.h's,
 * the same code the CPU converters run. */
#ifndef SC_KERNELS_CUDA_HD_H
#define SC_KERNELS_CUDA_HD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/half_bits.h"
#include "sparsecoll.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

#define SC_HDI static inline SC_HD

/* The canonical quiet NaN the CPU MIN/MAX return (__builtin_nan("")). */
#define SC_HD_NAN32 0x7fc00000u
#define SC_HD_NAN64 0x7ff8000000000000ull

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
    if (x != x || y != y) return sc_bits_f32(SC_HD_NAN32);
    return x < y ? x : (y < x ? y : sc_bits_f32(sc_f32_bits(x) | sc_f32_bits(y)));
  case SC_MAX:
    if (x != x || y != y) return sc_bits_f32(SC_HD_NAN32);
    return x > y ? x : (y > x ? y : sc_bits_f32(sc_f32_bits(x) & sc_f32_bits(y)));
  default:
    return x + y;
  }
}

SC_HDI double sc_hd_red_f64(int op, double x, double y) {
  switch (op) {
  case SC_PROD:
    return x * y;
  case SC_MIN:
    if (x != x || y != y) return sc_bits_f64(SC_HD_NAN64);
    return x < y ? x : (y < x ? y : sc_bits_f64(sc_f64_bits(x) | sc_f64_bits(y)));
  case SC_MAX:
    if (x != x || y != y) return sc_bits_f64(SC_HD_NAN64);
    return x > y ? x : (y > x ? y : sc_bits_f64(sc_f64_bits(x) & sc_f64_bits(y)));
  default:
    return x + y;
  }
}

/* fp16 conversions: on the device the conversion instructions, which round
 * as the cores do (to nearest even, subnormals kept) and are several times
 * cheaper than their integer emulation; NaN alone goes through the cores,
 * whose payload rule (quiet bit set, payload kept) the instructions do not
 * follow. bfloat16's cores are a shift and an add already. */
SC_HDI float sc_hd_half_to_float(uint16_t h) {
#ifdef __CUDA_ARCH__
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) return sc_half_to_float_core(h);
  return __half2float(__ushort_as_half(h));
#else
  return sc_half_to_float_core(h);
#endif
}

SC_HDI uint16_t sc_hd_float_to_half(float f) {
#ifdef __CUDA_ARCH__
  if (f != f) return sc_float_to_half_core(f);
  return __half_as_ushort(__float2half_rn(f));
#else
  return sc_float_to_half_core(f);
#endif
}

SC_HDI uint16_t sc_hd_red_f16(int op, uint16_t x, uint16_t y) {
  return sc_hd_float_to_half(sc_hd_red_f32(op, sc_hd_half_to_float(x), sc_hd_half_to_float(y)));
}

SC_HDI uint16_t sc_hd_red_bf16(int op, uint16_t x, uint16_t y) {
  return sc_float_to_bfloat16_core(
      sc_hd_red_f32(op, sc_bfloat16_to_float_core(x), sc_bfloat16_to_float_core(y)));
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
  return sc_float_to_bfloat16_core(sc_bfloat16_to_float_core(x) / (float)d);
}

/* Every dtype with its element type and the suffix of its sc_hd_red_ and
 * sc_hd_avg_ functions, for the per-dtype dispatch: X(dtype, type, suffix). */
#define SC_HD_FOR_EACH_DTYPE(X)                                                                    \
  X(SC_INT8, int8_t, i8)                                                                           \
  X(SC_UINT8, uint8_t, u8)                                                                         \
  X(SC_INT32, int32_t, i32)                                                                        \
  X(SC_UINT32, uint32_t, u32)                                                                      \
  X(SC_INT64, int64_t, i64)                                                                        \
  X(SC_UINT64, uint64_t, u64)                                                                      \
  X(SC_FLOAT16, uint16_t, f16)                                                                     \
  X(SC_BFLOAT16, uint16_t, bf16)                                                                   \
  X(SC_FLOAT32, float, f32)                                                                        \
  X(SC_FLOAT64, double, f64)

#endif
