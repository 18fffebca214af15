/* SPDX-License-Identifier: BSD-3-Clause */
/* Element-wise reduction kernels. One switch on (dtype, op) picks a loop; each
 * loop is a tight body gcc vectorizes. fp16/bf16 go through float32 in small
 * stack blocks so that the float part uses the same vectorized loops. */
#include <string.h>

#include "kernels/cpu/reduce.h"

/* Elements per inner chunk. A constant trip count lets gcc -O2 (very-cheap
 * vector cost model: no epilogue, no runtime alias check) vectorize the chunk
 * loop; the remainder runs the same body as a scalar loop. */
#define SC_REDUCE_CHUNK 64
/* Elements of fp16/bf16 widened to float per step: two 1 KiB stack arrays. */
#define SC_HALF_BLOCK 256

/* dst may equal a or b exactly, which gives no loop-carried dependence, but the
 * compiler cannot prove that without a runtime check that -O2 refuses to emit. */
#if defined(__clang__)
#define SC_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define SC_IVDEP _Pragma("GCC ivdep")
#else
#define SC_IVDEP
#endif

/* Defines name(dst, a, b, n): dst[i] = EXPR with x = a[i], y = b[i]. */
#define SC_DEFINE_BINARY_LOOP(name, T, EXPR)                                                       \
  static void name(T *dst, const T *a, const T *b, size_t n) {                                     \
    size_t i = 0;                                                                                  \
    for (; i + SC_REDUCE_CHUNK <= n; i += SC_REDUCE_CHUNK) {                                       \
      T *d = dst + i;                                                                              \
      const T *pa = a + i;                                                                         \
      const T *pb = b + i;                                                                         \
      SC_IVDEP                                                                                     \
      for (size_t j = 0; j < SC_REDUCE_CHUNK; j++) {                                               \
        T x = pa[j];                                                                               \
        T y = pb[j];                                                                               \
        d[j] = (EXPR);                                                                             \
      }                                                                                            \
    }                                                                                              \
    for (; i < n; i++) {                                                                           \
      T x = a[i];                                                                                  \
      T y = b[i];                                                                                  \
      dst[i] = (EXPR);                                                                             \
    }                                                                                              \
  }

/* Wrapping SUM and PROD are the same bit operation for signed and unsigned
 * integers of one width, so signed types use the unsigned loops: modular
 * arithmetic without signed overflow. uint8 operands are widened to unsigned
 * (not promoted to int) and the cast back to uint8 drops the carry bits. */
static inline uint8_t sc_add_u8(uint8_t x, uint8_t y) {
  return (uint8_t)((unsigned)x + y);
}

static inline uint8_t sc_mul_u8(uint8_t x, uint8_t y) {
  return (uint8_t)((unsigned)x * y);
}

SC_DEFINE_BINARY_LOOP(sc_sum_u8, uint8_t, sc_add_u8(x, y))
SC_DEFINE_BINARY_LOOP(sc_prod_u8, uint8_t, sc_mul_u8(x, y))
SC_DEFINE_BINARY_LOOP(sc_sum_u32, uint32_t, x + y)
SC_DEFINE_BINARY_LOOP(sc_prod_u32, uint32_t, (x * y))
SC_DEFINE_BINARY_LOOP(sc_sum_u64, uint64_t, x + y)
SC_DEFINE_BINARY_LOOP(sc_prod_u64, uint64_t, (x * y))

SC_DEFINE_BINARY_LOOP(sc_min_i8, int8_t, x < y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_max_i8, int8_t, x > y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_min_u8, uint8_t, x < y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_max_u8, uint8_t, x > y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_min_i32, int32_t, x < y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_max_i32, int32_t, x > y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_min_u32, uint32_t, x < y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_max_u32, uint32_t, x > y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_min_i64, int64_t, x < y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_max_i64, int64_t, x > y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_min_u64, uint64_t, x < y ? x : y)
SC_DEFINE_BINARY_LOOP(sc_max_u64, uint64_t, x > y ? x : y)

SC_DEFINE_BINARY_LOOP(sc_sum_f32, float, x + y)
SC_DEFINE_BINARY_LOOP(sc_prod_f32, float, (x * y))
SC_DEFINE_BINARY_LOOP(sc_sum_f64, double, x + y)
SC_DEFINE_BINARY_LOOP(sc_prod_f64, double, (x * y))

/* Float MIN/MAX. A NaN operand gives the canonical quiet NaN (not either
 * operand's payload) so that a op b == b op a bit for bit, whatever order the
 * ranks combine in. Equal operands can differ only as -0/+0: MIN takes -0 and
 * MAX +0 (the OR / AND of the bits), again for commutativity. Written as
 * selects on compares so the loops vectorize. */
#define SC_CANON_NAN_F32 __builtin_nanf("")
#define SC_CANON_NAN_F64 __builtin_nan("")

static inline float sc_bits_or_f32(float x, float y) {
  uint32_t ux, uy;
  memcpy(&ux, &x, sizeof ux);
  memcpy(&uy, &y, sizeof uy);
  ux |= uy;
  memcpy(&x, &ux, sizeof x);
  return x;
}

static inline float sc_bits_and_f32(float x, float y) {
  uint32_t ux, uy;
  memcpy(&ux, &x, sizeof ux);
  memcpy(&uy, &y, sizeof uy);
  ux &= uy;
  memcpy(&x, &ux, sizeof x);
  return x;
}

static inline double sc_bits_or_f64(double x, double y) {
  uint64_t ux, uy;
  memcpy(&ux, &x, sizeof ux);
  memcpy(&uy, &y, sizeof uy);
  ux |= uy;
  memcpy(&x, &ux, sizeof x);
  return x;
}

static inline double sc_bits_and_f64(double x, double y) {
  uint64_t ux, uy;
  memcpy(&ux, &x, sizeof ux);
  memcpy(&uy, &y, sizeof uy);
  ux &= uy;
  memcpy(&x, &ux, sizeof x);
  return x;
}

SC_DEFINE_BINARY_LOOP(sc_min_f32, float,
                      (x != x || y != y) ? SC_CANON_NAN_F32
                                         : (x < y ? x : (y < x ? y : sc_bits_or_f32(x, y))))
SC_DEFINE_BINARY_LOOP(sc_max_f32, float,
                      (x != x || y != y) ? SC_CANON_NAN_F32
                                         : (x > y ? x : (y > x ? y : sc_bits_and_f32(x, y))))
SC_DEFINE_BINARY_LOOP(sc_min_f64, double,
                      (x != x || y != y) ? SC_CANON_NAN_F64
                                         : (x < y ? x : (y < x ? y : sc_bits_or_f64(x, y))))
SC_DEFINE_BINARY_LOOP(sc_max_f64, double,
                      (x != x || y != y) ? SC_CANON_NAN_F64
                                         : (x > y ? x : (y > x ? y : sc_bits_and_f64(x, y))))

typedef void (*sc_loop_u8_fn)(uint8_t *, const uint8_t *, const uint8_t *, size_t);
typedef void (*sc_loop_f32_fn)(float *, const float *, const float *, size_t);

static sc_loop_f32_fn sc_f32_loop_for(sc_redop_t op) {
  switch (op) {
  case SC_PROD:
    return sc_prod_f32;
  case SC_MIN:
    return sc_min_f32;
  case SC_MAX:
    return sc_max_f32;
  case SC_SUM:
  case SC_AVG:
  default:
    return sc_sum_f32;
  }
}

/* fp16/bf16: widen a block of each input to float, reduce with the float32
 * loop, narrow into dst. Both inputs are read before dst is written, so exact
 * aliasing is harmless. */
static void sc_reduce_16bit(int is_bf16, sc_redop_t op, uint16_t *dst, const uint16_t *a,
                            const uint16_t *b, size_t n) {
  float fa[SC_HALF_BLOCK];
  float fb[SC_HALF_BLOCK];
  sc_loop_f32_fn loop = sc_f32_loop_for(op);
  for (size_t i = 0; i < n; i += SC_HALF_BLOCK) {
    size_t m = n - i < SC_HALF_BLOCK ? n - i : SC_HALF_BLOCK;
    if (is_bf16) {
      sc_bfloat16_to_float_array(fa, a + i, m);
      sc_bfloat16_to_float_array(fb, b + i, m);
      loop(fa, fa, fb, m);
      sc_float_to_bfloat16_array(dst + i, fa, m);
    } else {
      sc_half_to_float_array(fa, a + i, m);
      sc_half_to_float_array(fb, b + i, m);
      loop(fa, fa, fb, m);
      sc_float_to_half_array(dst + i, fa, m);
    }
  }
}

void sc_reduce_kernel(sc_dtype_t dtype, sc_redop_t op, void *dst, const void *a, const void *b,
                      size_t n) {
  if (op == SC_AVG) op = SC_SUM;
  switch (dtype) {
  case SC_INT8:
  case SC_UINT8: {
    sc_loop_u8_fn loop = NULL;
    if (op == SC_SUM)
      loop = sc_sum_u8;
    else if (op == SC_PROD)
      loop = sc_prod_u8;
    if (loop) {
      loop(dst, a, b, n);
    } else if (dtype == SC_INT8) {
      (op == SC_MIN ? sc_min_i8 : sc_max_i8)(dst, a, b, n);
    } else {
      (op == SC_MIN ? sc_min_u8 : sc_max_u8)(dst, a, b, n);
    }
    break;
  }
  case SC_INT32:
  case SC_UINT32:
    if (op == SC_SUM)
      sc_sum_u32(dst, a, b, n);
    else if (op == SC_PROD)
      sc_prod_u32(dst, a, b, n);
    else if (dtype == SC_INT32)
      (op == SC_MIN ? sc_min_i32 : sc_max_i32)(dst, a, b, n);
    else
      (op == SC_MIN ? sc_min_u32 : sc_max_u32)(dst, a, b, n);
    break;
  case SC_INT64:
  case SC_UINT64:
    if (op == SC_SUM)
      sc_sum_u64(dst, a, b, n);
    else if (op == SC_PROD)
      sc_prod_u64(dst, a, b, n);
    else if (dtype == SC_INT64)
      (op == SC_MIN ? sc_min_i64 : sc_max_i64)(dst, a, b, n);
    else
      (op == SC_MIN ? sc_min_u64 : sc_max_u64)(dst, a, b, n);
    break;
  case SC_FLOAT16:
    sc_reduce_16bit(0, op, dst, a, b, n);
    break;
  case SC_BFLOAT16:
    sc_reduce_16bit(1, op, dst, a, b, n);
    break;
  case SC_FLOAT32:
    sc_f32_loop_for(op)(dst, a, b, n);
    break;
  case SC_FLOAT64:
    if (op == SC_SUM)
      sc_sum_f64(dst, a, b, n);
    else if (op == SC_PROD)
      sc_prod_f64(dst, a, b, n);
    else if (op == SC_MIN)
      sc_min_f64(dst, a, b, n);
    else
      sc_max_f64(dst, a, b, n);
    break;
  }
}

/* Defines name(buf, n, d): buf[i] = buf[i] / d in T's own arithmetic (C
 * integer division truncates toward zero). Chunked like the binary loops so
 * the float divisions vectorize. */
#define SC_DEFINE_DIV_LOOP(name, T, DT)                                                            \
  static void name(T *buf, size_t n, DT d) {                                                       \
    size_t i = 0;                                                                                  \
    for (; i + SC_REDUCE_CHUNK <= n; i += SC_REDUCE_CHUNK) {                                       \
      T *p = buf + i;                                                                              \
      for (size_t j = 0; j < SC_REDUCE_CHUNK; j++) p[j] = (T)(p[j] / d);                           \
    }                                                                                              \
    for (; i < n; i++) buf[i] = (T)(buf[i] / d);                                                   \
  }

SC_DEFINE_DIV_LOOP(sc_div_i8, int8_t, int)
SC_DEFINE_DIV_LOOP(sc_div_u8, uint8_t, unsigned)
SC_DEFINE_DIV_LOOP(sc_div_i32, int32_t, int32_t)
SC_DEFINE_DIV_LOOP(sc_div_u32, uint32_t, uint32_t)
SC_DEFINE_DIV_LOOP(sc_div_i64, int64_t, int64_t)
SC_DEFINE_DIV_LOOP(sc_div_u64, uint64_t, uint64_t)
SC_DEFINE_DIV_LOOP(sc_div_f32, float, float)
SC_DEFINE_DIV_LOOP(sc_div_f64, double, double)

static void sc_avg_16bit(int is_bf16, uint16_t *buf, size_t n, float d) {
  float f[SC_HALF_BLOCK];
  for (size_t i = 0; i < n; i += SC_HALF_BLOCK) {
    size_t m = n - i < SC_HALF_BLOCK ? n - i : SC_HALF_BLOCK;
    if (is_bf16) {
      sc_bfloat16_to_float_array(f, buf + i, m);
      sc_div_f32(f, m, d);
      sc_float_to_bfloat16_array(buf + i, f, m);
    } else {
      sc_half_to_float_array(f, buf + i, m);
      sc_div_f32(f, m, d);
      sc_float_to_half_array(buf + i, f, m);
    }
  }
}

void sc_avg_finalize(sc_dtype_t dtype, void *buf, size_t n, int nranks) {
  /* Dividing by 1 changes nothing, and a count below 1 has no average; doing
   * nothing beats dividing by zero in a function that cannot fail. */
  if (nranks <= 1) return;
  switch (dtype) {
  case SC_INT8:
    sc_div_i8(buf, n, nranks);
    break;
  case SC_UINT8:
    sc_div_u8(buf, n, (unsigned)nranks);
    break;
  case SC_INT32:
    sc_div_i32(buf, n, nranks);
    break;
  case SC_UINT32:
    sc_div_u32(buf, n, (uint32_t)nranks);
    break;
  case SC_INT64:
    sc_div_i64(buf, n, nranks);
    break;
  case SC_UINT64:
    sc_div_u64(buf, n, (uint64_t)nranks);
    break;
  case SC_FLOAT16:
    sc_avg_16bit(0, buf, n, (float)nranks);
    break;
  case SC_BFLOAT16:
    sc_avg_16bit(1, buf, n, (float)nranks);
    break;
  case SC_FLOAT32:
    sc_div_f32(buf, n, (float)nranks);
    break;
  case SC_FLOAT64:
    sc_div_f64(buf, n, (double)nranks);
    break;
  }
}
