/* SPDX-License-Identifier: BSD-3-Clause */
/* CPU reduction kernels and fp16/bf16 conversion, each checked against a
 * reference written here independently of the library: scalar loops for the
 * reductions, gcc's _Float16 for fp16 where the compiler has it, and a
 * nearest-value search in double arithmetic for fp16 and bf16. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/reduce.h"
#include "kernels/half_bits.h"
#include "sparsecoll.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void) {
  /* splitmix64: fixed seed, so a failure reproduces. */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int half_is_nan(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

static int bf16_is_nan(uint16_t h) {
  return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
}

static const sc_dtype_t all_dtypes[] = {SC_INT8,   SC_UINT8,   SC_INT32,    SC_UINT32,  SC_INT64,
                                        SC_UINT64, SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
static const char *const dtype_names[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                          "uint64", "float16", "bfloat16", "float32", "float64"};
static const sc_redop_t all_ops[] = {SC_SUM, SC_PROD, SC_MIN, SC_MAX, SC_AVG};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

static size_t elem_size(sc_dtype_t t) {
  switch (t) {
  case SC_INT8:
  case SC_UINT8:
    return 1;
  case SC_FLOAT16:
  case SC_BFLOAT16:
    return 2;
  case SC_INT32:
  case SC_UINT32:
  case SC_FLOAT32:
    return 4;
  default:
    return 8;
  }
}

/* ---- independent conversion references ---- */

/* Value of the non-negative fp16 (bits k <= 0x7c00) or bf16 (k <= 0x7f80)
 * pattern; the inf pattern stands for the next power of two, the value a
 * format with one more exponent would have there, which is the boundary that
 * IEEE overflow rounding uses. */
static double ref_half_value(uint32_t k) {
  uint32_t e = k >> 10, m = k & 0x3ffu;
  return e == 0 ? ldexp((double)m, -24) : ldexp((double)(1024u + m), (int)e - 25);
}

static double ref_bf16_value(uint32_t k) {
  uint32_t e = k >> 7, m = k & 0x7fu;
  return e == 0 ? ldexp((double)m, -133) : ldexp((double)(128u + m), (int)e - 134);
}

/* Nearest representable value to f, found by binary search for the largest
 * pattern not above |f| and a comparison with the midpoint to the next one
 * (exact in double), ties to the even pattern. Returns 0xffff for NaN. */
static uint16_t ref_nearest(float f, double (*value)(uint32_t), uint32_t inf_bits,
                            uint32_t sign_bit) {
  if (isnan(f)) return 0xffff;
  uint32_t sign = signbit(f) ? sign_bit : 0;
  double a = fabs((double)f);
  if (a >= value(inf_bits)) return (uint16_t)(sign | inf_bits);
  uint32_t lo = 0, hi = inf_bits - 1; /* invariant: value(lo) <= a */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1) / 2;
    if (value(mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  double midpoint = (value(lo) + value(lo + 1)) / 2;
  uint32_t r;
  if (a < midpoint)
    r = lo;
  else if (a > midpoint)
    r = lo + 1;
  else
    r = (lo & 1u) ? lo + 1 : lo;
  return (uint16_t)(sign | r);
}

static uint16_t ref_f2h_search(float f) {
  return ref_nearest(f, ref_half_value, 0x7c00u, 0x8000u);
}

static uint16_t ref_f2bf(float f) {
  return ref_nearest(f, ref_bf16_value, 0x7f80u, 0x8000u);
}

static float ref_bf2f(uint16_t h) {
  if (bf16_is_nan(h)) return NAN;
  uint32_t k = h & 0x7fffu;
  double v = k == 0x7f80u ? INFINITY : ref_bf16_value(k);
  return (float)((h & 0x8000u) ? -v : v);
}

#ifdef __FLT16_MAX__
/* gcc's _Float16 conversions round to nearest even (libgcc soft-fp on x86-64
 * without AVX512-FP16). */
static uint16_t ref_f2h(float f) {
  if (isnan(f)) return 0xffff;
  _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, sizeof u);
  return u;
}

static float ref_h2f(uint16_t u) {
  _Float16 h;
  memcpy(&h, &u, sizeof h);
  return (float)h;
}
#else
static uint16_t ref_f2h(float f) {
  return ref_f2h_search(f);
}

static float ref_h2f(uint16_t h) {
  if (half_is_nan(h)) return NAN;
  uint32_t k = h & 0x7fffu;
  double v = k == 0x7c00u ? INFINITY : ref_half_value(k);
  return (float)((h & 0x8000u) ? -v : v);
}
#endif

/* ---- reduction reference ---- */

/* MIN/MAX as the library documents them: NaN wins, and -0 < +0 so that the
 * result does not depend on the argument order. */
static float ref_min_f(float x, float y) {
  if (isnan(x) || isnan(y)) return NAN;
  if (x == 0 && y == 0) return (signbit(x) || signbit(y)) ? -0.0f : 0.0f;
  return fminf(x, y);
}

static float ref_max_f(float x, float y) {
  if (isnan(x) || isnan(y)) return NAN;
  if (x == 0 && y == 0) return (signbit(x) && signbit(y)) ? -0.0f : 0.0f;
  return fmaxf(x, y);
}

static double ref_min_d(double x, double y) {
  if (isnan(x) || isnan(y)) return NAN;
  if (x == 0 && y == 0) return (signbit(x) || signbit(y)) ? -0.0 : 0.0;
  return fmin(x, y);
}

static double ref_max_d(double x, double y) {
  if (isnan(x) || isnan(y)) return NAN;
  if (x == 0 && y == 0) return (signbit(x) && signbit(y)) ? -0.0 : 0.0;
  return fmax(x, y);
}

static float ref_float_op(sc_redop_t op, float x, float y) {
  switch (op) {
  case SC_PROD:
    return x * y;
  case SC_MIN:
    return ref_min_f(x, y);
  case SC_MAX:
    return ref_max_f(x, y);
  default:
    return x + y;
  }
}

#define REF_INT_OP(op, x, y, WIDE)                                                                 \
  ((op) == SC_PROD  ? (WIDE)(x) * (WIDE)(y)                                                        \
   : (op) == SC_MIN ? ((x) < (y) ? (WIDE)(x) : (WIDE)(y))                                          \
   : (op) == SC_MAX ? ((x) > (y) ? (WIDE)(x) : (WIDE)(y))                                          \
                    : (WIDE)(x) + (WIDE)(y))

/* One element of a op b, computed in a type wide enough that nothing
 * overflows, then reduced modulo 2^bits on the way back. */
static void ref_elem(sc_dtype_t t, sc_redop_t op, const void *pa, const void *pb, void *out) {
  switch (t) {
  case SC_INT8: {
    int8_t x, y;
    memcpy(&x, pa, 1);
    memcpy(&y, pb, 1);
    int64_t w = REF_INT_OP(op, x, y, int64_t);
    uint8_t r = (uint8_t)((uint64_t)w & 0xffu);
    memcpy(out, &r, 1);
    break;
  }
  case SC_UINT8: {
    uint8_t x, y;
    memcpy(&x, pa, 1);
    memcpy(&y, pb, 1);
    uint64_t w = REF_INT_OP(op, x, y, uint64_t);
    uint8_t r = (uint8_t)(w % 256u);
    memcpy(out, &r, 1);
    break;
  }
  case SC_INT32: {
    int32_t x, y;
    memcpy(&x, pa, 4);
    memcpy(&y, pb, 4);
    int64_t w = REF_INT_OP(op, x, y, int64_t);
    uint32_t r = (uint32_t)((uint64_t)w & 0xffffffffu);
    memcpy(out, &r, 4);
    break;
  }
  case SC_UINT32: {
    uint32_t x, y;
    memcpy(&x, pa, 4);
    memcpy(&y, pb, 4);
    uint64_t w = REF_INT_OP(op, x, y, uint64_t);
    uint32_t r = (uint32_t)(w % 4294967296ull);
    memcpy(out, &r, 4);
    break;
  }
  case SC_INT64: {
    int64_t x, y;
    memcpy(&x, pa, 8);
    memcpy(&y, pb, 8);
    __int128 w = REF_INT_OP(op, x, y, __int128);
    uint64_t r = (uint64_t)((unsigned __int128)w & 0xffffffffffffffffull);
    memcpy(out, &r, 8);
    break;
  }
  case SC_UINT64: {
    uint64_t x, y;
    memcpy(&x, pa, 8);
    memcpy(&y, pb, 8);
    unsigned __int128 w = REF_INT_OP(op, x, y, unsigned __int128);
    uint64_t r = (uint64_t)(w & 0xffffffffffffffffull);
    memcpy(out, &r, 8);
    break;
  }
  case SC_FLOAT16: {
    uint16_t x, y;
    memcpy(&x, pa, 2);
    memcpy(&y, pb, 2);
    uint16_t r = ref_f2h(ref_float_op(op, ref_h2f(x), ref_h2f(y)));
    memcpy(out, &r, 2);
    break;
  }
  case SC_BFLOAT16: {
    uint16_t x, y;
    memcpy(&x, pa, 2);
    memcpy(&y, pb, 2);
    uint16_t r = ref_f2bf(ref_float_op(op, ref_bf2f(x), ref_bf2f(y)));
    memcpy(out, &r, 2);
    break;
  }
  case SC_FLOAT32: {
    float x, y;
    memcpy(&x, pa, 4);
    memcpy(&y, pb, 4);
    float r = ref_float_op(op, x, y);
    memcpy(out, &r, 4);
    break;
  }
  case SC_FLOAT64: {
    double x, y, r;
    memcpy(&x, pa, 8);
    memcpy(&y, pb, 8);
    if (op == SC_PROD)
      r = x * y;
    else if (op == SC_MIN)
      r = ref_min_d(x, y);
    else if (op == SC_MAX)
      r = ref_max_d(x, y);
    else
      r = x + y;
    memcpy(out, &r, 8);
    break;
  }
  }
}

static int is_nan_elem(sc_dtype_t t, const void *p) {
  if (t == SC_FLOAT16 || t == SC_BFLOAT16) {
    uint16_t h;
    memcpy(&h, p, 2);
    return t == SC_FLOAT16 ? half_is_nan(h) : bf16_is_nan(h);
  }
  if (t == SC_FLOAT32) {
    float f;
    memcpy(&f, p, 4);
    return isnan(f);
  }
  if (t == SC_FLOAT64) {
    double d;
    memcpy(&d, p, 8);
    return isnan(d);
  }
  return 0;
}

/* Bits must match, except that any NaN matches any NaN (payloads of SUM/PROD
 * NaNs are the hardware's business; MIN/MAX NaNs get their own test). */
static int elem_matches(sc_dtype_t t, const void *got, const void *want) {
  if (is_nan_elem(t, want)) return is_nan_elem(t, got);
  return memcmp(got, want, elem_size(t)) == 0;
}

/* ---- input generation ---- */

static const float special_f32[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 1e-40f};

static void fill_random(sc_dtype_t t, void *buf, size_t n) {
  uint8_t *p = buf;
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng_next();
    switch (t) {
    case SC_FLOAT16: {
      /* Mostly moderate magnitudes (so sums and products are interesting),
       * sometimes any pattern: subnormals, inf, NaN. */
      uint16_t h = (uint16_t)r;
      if ((r >> 16) % 8 != 0) h = (uint16_t)((h & 0x83ffu) | ((10u + (r >> 20) % 11u) << 10));
      memcpy(p + 2 * i, &h, 2);
      break;
    }
    case SC_BFLOAT16: {
      uint16_t h = (uint16_t)r;
      if ((r >> 16) % 8 != 0) h = (uint16_t)((h & 0x807fu) | ((120u + (r >> 20) % 15u) << 7));
      memcpy(p + 2 * i, &h, 2);
      break;
    }
    case SC_FLOAT32: {
      float f;
      if (r % 32 == 0)
        f = special_f32[(r >> 8) % (sizeof special_f32 / sizeof special_f32[0])];
      else
        f = ldexpf((float)((r >> 8) & 0xffffff) / 16777216.0f + 0.5f, (int)((r >> 40) % 33) - 16);
      if ((r >> 60) & 1) f = -f;
      memcpy(p + 4 * i, &f, 4);
      break;
    }
    case SC_FLOAT64: {
      double d;
      if (r % 32 == 0)
        d = special_f32[(r >> 8) % (sizeof special_f32 / sizeof special_f32[0])];
      else
        d = ldexp((double)((r >> 8) & 0xfffffffffffull) / 17592186044416.0 + 0.5,
                  (int)((r >> 52) % 65) - 32);
      if ((r >> 63) & 1) d = -d;
      memcpy(p + 8 * i, &d, 8);
      break;
    }
    default:
      memcpy(p + elem_size(t) * i, &r, elem_size(t));
      break;
    }
  }
}

/* ---- reduction tests ---- */

#define GUARD_BYTES 64

/* Runs the kernel into a separate dst, into dst == a and into dst == b, and
 * compares each with the reference, checking that nothing past n is touched. */
static void check_reduce(sc_dtype_t t, sc_redop_t op, size_t n) {
  size_t es = elem_size(t), bytes = n * es;
  uint8_t *a = malloc(bytes + GUARD_BYTES), *b = malloc(bytes + GUARD_BYTES);
  uint8_t *want = malloc(bytes + GUARD_BYTES), *dst = malloc(bytes + GUARD_BYTES);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(want);
  assert_non_null(dst);
  fill_random(t, a, n);
  fill_random(t, b, n);
  for (size_t i = 0; i < n; i++) ref_elem(t, op, a + i * es, b + i * es, want + i * es);

  for (int variant = 0; variant < 3; variant++) {
    uint8_t *x = malloc(bytes + GUARD_BYTES), *y = malloc(bytes + GUARD_BYTES);
    assert_non_null(x);
    assert_non_null(y);
    memcpy(x, a, bytes);
    memcpy(y, b, bytes);
    memset(x + bytes, 0xa5, GUARD_BYTES);
    memset(y + bytes, 0xa5, GUARD_BYTES);
    memset(dst, 0xa5, bytes + GUARD_BYTES);
    uint8_t *out = variant == 0 ? dst : variant == 1 ? x : y;
    sc_reduce_kernel(t, op, out, x, y, n);
    for (size_t i = 0; i < n; i++) {
      if (!elem_matches(t, out + i * es, want + i * es)) {
        uint64_t g = 0, w = 0, va = 0, vb = 0;
        memcpy(&g, out + i * es, es);
        memcpy(&w, want + i * es, es);
        memcpy(&va, a + i * es, es);
        memcpy(&vb, b + i * es, es);
        fail_msg("%s %s n=%zu %s i=%zu: a=%#llx b=%#llx got %#llx want %#llx", dtype_names[t],
                 op_names[op], n,
                 variant == 0   ? "dst"
                 : variant == 1 ? "dst==a"
                                : "dst==b",
                 i, (unsigned long long)va, (unsigned long long)vb, (unsigned long long)g,
                 (unsigned long long)w);
      }
    }
    for (size_t i = 0; i < GUARD_BYTES; i++) {
      assert_int_equal(dst[bytes + i], 0xa5);
      assert_int_equal(x[bytes + i], 0xa5);
      assert_int_equal(y[bytes + i], 0xa5);
    }
    /* The operand that is not the destination is read-only. */
    if (variant != 1 && bytes) assert_memory_equal(x, a, bytes);
    if (variant != 2 && bytes) assert_memory_equal(y, b, bytes);
    free(x);
    free(y);
  }
  free(a);
  free(b);
  free(want);
  free(dst);
}

static const size_t test_lengths[] = {0, 1, 7, 63, 64, 65, 255, 256, 257, 1001, 4099};

static void test_reduce_all(void **state) {
  for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++)
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++)
      for (size_t l = 0; l < sizeof test_lengths / sizeof test_lengths[0]; l++)
        check_reduce(all_dtypes[d], all_ops[o], test_lengths[l]);
}

static void test_reduce_self_alias(void **state) {
  /* dst == a == b: x op x. */
  for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++) {
    sc_dtype_t t = all_dtypes[d];
    size_t es = elem_size(t), n = 300;
    uint8_t *a = malloc(n * es), *want = malloc(n * es);
    assert_non_null(a);
    assert_non_null(want);
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++) {
      fill_random(t, a, n);
      for (size_t i = 0; i < n; i++) ref_elem(t, all_ops[o], a + i * es, a + i * es, want + i * es);
      sc_reduce_kernel(t, all_ops[o], a, a, a, n);
      for (size_t i = 0; i < n; i++) assert_true(elem_matches(t, a + i * es, want + i * es));
    }
    free(a);
    free(want);
  }
}

static void test_integer_wrap(void **state) {
  int8_t i8a[3] = {127, -128, -128}, i8b[3] = {1, -1, -1}, i8r[3];
  sc_reduce_kernel(SC_INT8, SC_SUM, i8r, i8a, i8b, 3);
  assert_int_equal(i8r[0], -128);
  assert_int_equal(i8r[1], 127);
  sc_reduce_kernel(SC_INT8, SC_PROD, i8r, i8a, i8b, 3);
  assert_int_equal(i8r[0], 127);
  assert_int_equal(i8r[1], -128); /* -128 * -1 = 128 = -128 mod 256 */

  uint8_t u8a[2] = {200, 16}, u8b[2] = {100, 17}, u8r[2];
  sc_reduce_kernel(SC_UINT8, SC_SUM, u8r, u8a, u8b, 2);
  assert_int_equal(u8r[0], 44);
  sc_reduce_kernel(SC_UINT8, SC_PROD, u8r, u8a, u8b, 2);
  assert_int_equal(u8r[0], (200 * 100) % 256);
  assert_int_equal(u8r[1], (16 * 17) % 256);

  int32_t i32a[2] = {INT32_MAX, INT32_MIN}, i32b[2] = {1, -1}, i32r[2];
  sc_reduce_kernel(SC_INT32, SC_SUM, i32r, i32a, i32b, 2);
  assert_int_equal(i32r[0], INT32_MIN);
  assert_int_equal(i32r[1], INT32_MAX);

  int64_t i64a[3] = {INT64_MAX, INT64_MIN, 3037000500}, i64b[3] = {3, -1, 3037000500}, i64r[3];
  sc_reduce_kernel(SC_INT64, SC_PROD, i64r, i64a, i64b, 3);
  for (int i = 0; i < 3; i++) {
    unsigned __int128 w =
        (unsigned __int128)(__int128)i64a[i] * (unsigned __int128)(__int128)i64b[i];
    assert_int_equal((uint64_t)i64r[i], (uint64_t)w);
  }
  assert_int_equal(i64r[0], INT64_MAX - 2); /* 3 * (2^63 - 1) = 2^63 - 3 mod 2^64 */
  assert_int_equal(i64r[1], INT64_MIN);
  sc_reduce_kernel(SC_INT64, SC_SUM, i64r, i64a, i64b, 2);
  assert_int_equal(i64r[0], INT64_MIN + 2);
  assert_int_equal(i64r[1], INT64_MAX);

  uint64_t u64a[1] = {UINT64_MAX}, u64b[1] = {UINT64_MAX}, u64r[1];
  sc_reduce_kernel(SC_UINT64, SC_PROD, u64r, u64a, u64b, 1);
  assert_int_equal(u64r[0], 1);
  sc_reduce_kernel(SC_UINT64, SC_SUM, u64r, u64a, u64b, 1);
  assert_int_equal(u64r[0], UINT64_MAX - 1);
}

/* ---- NaN and MIN/MAX symmetry ---- */

static const uint32_t tricky_f32[] = {
    0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u,
    0x7fffffffu,                                        /* NaNs, quiet and signalling */
    0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, /* zeros, infs */
    0x3f800000u, 0xbf800000u, 0x00000001u, 0x80000001u,
    0x7f7fffffu,
};
static const uint16_t tricky_f16[] = {0x7e00, 0xfe00, 0x7c01, 0xfd55, 0x7fff, 0x0000, 0x8000,
                                      0x7c00, 0xfc00, 0x3c00, 0xbc00, 0x0001, 0x8001, 0x7bff};
static const uint16_t tricky_bf16[] = {0x7fc0, 0xffc0, 0x7f81, 0xff92, 0x7fff, 0x0000, 0x8000,
                                       0x7f80, 0xff80, 0x3f80, 0xbf80, 0x0001, 0x8001, 0x7f7f};
#define NTRICKY (sizeof tricky_f32 / sizeof tricky_f32[0])

/* The same kind of value as a double, keeping a NaN's sign, payload and
 * quietness (a conversion would quiet a signalling NaN). */
static double f32_pattern_as_f64(uint32_t u) {
  if (!isnan(sc_bits_f32(u))) return (double)sc_bits_f32(u);
  uint64_t b = ((uint64_t)(u & 0x80000000u) << 32) | 0x7ff0000000000000ull |
               ((uint64_t)(u & 0x7fffffu) << 29);
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

static void test_minmax_nan_and_symmetry(void **state) {
  for (size_t i = 0; i < NTRICKY; i++) {
    for (size_t j = 0; j < NTRICKY; j++) {
      for (int o = SC_MIN; o <= SC_MAX; o++) {
        sc_redop_t op = (sc_redop_t)o;
        float x = sc_bits_f32(tricky_f32[i]), y = sc_bits_f32(tricky_f32[j]), xy, yx;
        sc_reduce_kernel(SC_FLOAT32, op, &xy, &x, &y, 1);
        sc_reduce_kernel(SC_FLOAT32, op, &yx, &y, &x, 1);
        assert_int_equal(sc_f32_bits(xy), sc_f32_bits(yx));
        if (isnan(x) || isnan(y)) {
          assert_true(isnan(xy));
          assert_true(sc_f32_bits(xy) & 0x00400000u); /* quiet */
        } else {
          assert_int_equal(sc_f32_bits(xy), sc_f32_bits(ref_float_op(op, x, y)));
        }

        double dx = f32_pattern_as_f64(tricky_f32[i]), dy = f32_pattern_as_f64(tricky_f32[j]);
        double dxy, dyx;
        sc_reduce_kernel(SC_FLOAT64, op, &dxy, &dx, &dy, 1);
        sc_reduce_kernel(SC_FLOAT64, op, &dyx, &dy, &dx, 1);
        assert_int_equal(sc_f64_bits(dxy), sc_f64_bits(dyx));
        if (isnan(dx) || isnan(dy)) {
          assert_true(isnan(dxy));
          assert_true(sc_f64_bits(dxy) & 0x0008000000000000ull);
        } else {
          double want = op == SC_MIN ? ref_min_d(dx, dy) : ref_max_d(dx, dy);
          assert_int_equal(sc_f64_bits(dxy), sc_f64_bits(want));
        }

        uint16_t hx = tricky_f16[i], hy = tricky_f16[j], hxy, hyx;
        sc_reduce_kernel(SC_FLOAT16, op, &hxy, &hx, &hy, 1);
        sc_reduce_kernel(SC_FLOAT16, op, &hyx, &hy, &hx, 1);
        assert_int_equal(hxy, hyx);
        if (half_is_nan(hx) || half_is_nan(hy))
          assert_true(half_is_nan(hxy) && (hxy & 0x200u));
        else
          assert_int_equal(hxy, ref_f2h(ref_float_op(op, ref_h2f(hx), ref_h2f(hy))));

        uint16_t bx = tricky_bf16[i], by = tricky_bf16[j], bxy, byx;
        sc_reduce_kernel(SC_BFLOAT16, op, &bxy, &bx, &by, 1);
        sc_reduce_kernel(SC_BFLOAT16, op, &byx, &by, &bx, 1);
        assert_int_equal(bxy, byx);
        if (bf16_is_nan(bx) || bf16_is_nan(by))
          assert_true(bf16_is_nan(bxy) && (bxy & 0x40u));
        else
          assert_int_equal(bxy, ref_f2bf(ref_float_op(op, ref_bf2f(bx), ref_bf2f(by))));
      }
    }
  }
  /* Long vectors, both orders, through the vectorized path. */
  enum { N = 1000 };
  float *fa = malloc(N * sizeof(float)), *fb = malloc(N * sizeof(float));
  float *r1 = malloc(N * sizeof(float)), *r2 = malloc(N * sizeof(float));
  assert_true(fa && fb && r1 && r2);
  for (size_t i = 0; i < N; i++) {
    uint64_t r = rng_next();
    fa[i] = sc_bits_f32(tricky_f32[r % NTRICKY]);
    fb[i] = sc_bits_f32(tricky_f32[(r >> 8) % NTRICKY]);
  }
  for (int o = SC_MIN; o <= SC_MAX; o++) {
    sc_reduce_kernel(SC_FLOAT32, (sc_redop_t)o, r1, fa, fb, N);
    sc_reduce_kernel(SC_FLOAT32, (sc_redop_t)o, r2, fb, fa, N);
    assert_memory_equal(r1, r2, N * sizeof(float));
    for (size_t i = 0; i < N; i++)
      assert_int_equal(isnan(r1[i]) != 0, isnan(fa[i]) || isnan(fb[i]));
  }
  free(fa);
  free(fb);
  free(r1);
  free(r2);
}

/* ---- fp16 conversion ---- */

static void test_half_round_trip_all(void **state) {
  for (uint32_t u = 0; u <= 0xffffu; u++) {
    uint16_t h = (uint16_t)u;
    float f = sc_half_to_float(h);
    if (half_is_nan(h)) {
      assert_true(isnan(f));
      uint16_t back = sc_float_to_half(f);
      assert_true(half_is_nan(back));
      assert_true(back & 0x200u); /* quiet */
      continue;
    }
    if (sc_f32_bits(f) != sc_f32_bits(ref_h2f(h)))
      fail_msg("half %#06x -> %a, reference %a", h, (double)f, (double)ref_h2f(h));
    assert_int_equal(sc_float_to_half(f), h);
  }
  /* The array forms (hardware F16C where the CPU has it, and the portable
   * code) agree with the scalar functions bit for bit, NaNs included, over all
   * values; an odd length exercises the tails. */
  enum { N = 65536 - 3 };
  uint16_t *hs = malloc(N * sizeof *hs), *back = malloc(N * sizeof *back);
  float *fs = malloc(N * sizeof *fs), *fp = malloc(N * sizeof *fp);
  assert_true(hs && back && fs && fp);
  for (size_t i = 0; i < N; i++) hs[i] = (uint16_t)(i + 3);
  sc_half_to_float_array(fs, hs, N);
  sc_half_to_float_array_portable(fp, hs, N);
  for (size_t i = 0; i < N; i++) {
    uint32_t want = sc_f32_bits(sc_half_to_float(hs[i]));
    if (sc_f32_bits(fs[i]) != want || sc_f32_bits(fp[i]) != want)
      fail_msg("half %#06x: array %#010x, portable %#010x, scalar %#010x", hs[i],
               sc_f32_bits(fs[i]), sc_f32_bits(fp[i]), want);
  }
  sc_float_to_half_array(back, fs, N);
  for (size_t i = 0; i < N; i++) assert_int_equal(back[i], sc_float_to_half(fs[i]));
  sc_float_to_half_array_portable(back, fs, N);
  for (size_t i = 0; i < N; i++) assert_int_equal(back[i], sc_float_to_half(fs[i]));
  free(hs);
  free(back);
  free(fs);
  free(fp);
}

static void check_f2h(float f, int expect) {
  uint16_t got = sc_float_to_half(f), want = ref_f2h(f), want2 = ref_f2h_search(f);
  if (isnan(f)) {
    assert_true(half_is_nan(got));
    return;
  }
  if (got != want || got != want2 || (expect >= 0 && got != (uint16_t)expect))
    fail_msg("float %a (%#010x) -> half %#06x, _Float16 %#06x, search %#06x, expected %#x",
             (double)f, sc_f32_bits(f), got, want, want2, expect);
}

static void test_half_cases(void **state) {
  check_f2h(1.0f + 0x1p-11f, 0x3c00);     /* tie, to even (down) */
  check_f2h(1.0f + 3 * 0x1p-11f, 0x3c02); /* tie, to even (up) */
  check_f2h(1.0f + 0x1p-11f + 0x1p-23f, 0x3c01);
  check_f2h(0x1p-24f, 0x0001); /* smallest subnormal */
  check_f2h(0x1p-25f, 0x0000); /* tie with zero, to even */
  check_f2h(0x1.000002p-25f, 0x0001);
  check_f2h(3 * 0x1p-25f, 0x0002);       /* 1.5 units: tie, to even */
  check_f2h(5 * 0x1p-25f, 0x0002);       /* 2.5 units: tie, to even */
  check_f2h(1023 * 0x1p-24f, 0x03ff);    /* largest subnormal */
  check_f2h(1023.5f * 0x1p-24f, 0x0400); /* tie, rounds up into the normals */
  check_f2h(0x1p-14f - 0x1p-30f, 0x0400);
  check_f2h(0x1p-14f, 0x0400); /* smallest normal */
  check_f2h(65504.0f, 0x7bff);
  check_f2h(65519.99f, 0x7bff);
  check_f2h(nextafterf(65520.0f, 0.0f), 0x7bff);
  check_f2h(65520.0f, 0x7c00); /* tie at the top: to inf */
  check_f2h(1e10f, 0x7c00);
  check_f2h(-65520.0f, 0xfc00);
  check_f2h(0.0f, 0x0000);
  check_f2h(-0.0f, 0x8000);
  check_f2h(INFINITY, 0x7c00);
  check_f2h(-INFINITY, 0xfc00);
  check_f2h(1e-40f, 0x0000); /* float subnormal */
  check_f2h(-1e-40f, 0x8000);
  check_f2h(-1023 * 0x1p-24f, 0x83ff);
  check_f2h(NAN, -1);
  check_f2h(sc_bits_f32(0x7f800001u), -1); /* payload only in dropped bits */
  check_f2h(sc_bits_f32(0xff801fffu), -1);
  check_f2h(sc_bits_f32(0x7fffffffu), -1);
  assert_true(sc_half_to_float(0x0001) == 0x1p-24f);
  assert_true(sc_half_to_float(0x03ff) == 1023 * 0x1p-24f);
  assert_true(sc_half_to_float(0x7bff) == 65504.0f);
  assert_int_equal(sc_f32_bits(sc_half_to_float(0x8000)), 0x80000000u);
  assert_true(isinf(sc_half_to_float(0x7c00)));

  /* Random patterns: half uniformly over all floats, half concentrated on the
   * exponents near fp16's range where rounding is not trivial; the array forms
   * must agree with the scalar function, NaNs included. */
  enum { BATCH = 4099 };
  float *fs = malloc(BATCH * sizeof *fs);
  uint16_t *ha = malloc(BATCH * sizeof *ha), *hp = malloc(BATCH * sizeof *hp);
  assert_true(fs && ha && hp);
  for (int batch = 0; batch < 500; batch++) {
    for (size_t i = 0; i < BATCH; i++) {
      uint32_t u = (uint32_t)rng_next();
      if (i & 1) u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 48) << 23);
      fs[i] = sc_bits_f32(u);
    }
    sc_float_to_half_array(ha, fs, BATCH);
    sc_float_to_half_array_portable(hp, fs, BATCH);
    for (size_t i = 0; i < BATCH; i++) {
      uint16_t got = sc_float_to_half(fs[i]);
      if (ha[i] != got || hp[i] != got)
        fail_msg("float %#010x: array %#06x, portable %#06x, scalar %#06x", sc_f32_bits(fs[i]),
                 ha[i], hp[i], got);
      if (isnan(fs[i]))
        assert_true(half_is_nan(got) && (got & 0x200u));
      else if (got != ref_f2h(fs[i]))
        fail_msg("float %#010x -> %#06x, want %#06x", sc_f32_bits(fs[i]), got, ref_f2h(fs[i]));
    }
  }
  free(fs);
  free(ha);
  free(hp);
  /* The search reference agrees on a sample too, so it is trustworthy where it
   * is the only reference (compilers without _Float16). */
  for (int i = 0; i < 100000; i++) {
    uint32_t u = (uint32_t)rng_next();
    u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 48) << 23);
    assert_int_equal(sc_float_to_half(sc_bits_f32(u)), ref_f2h_search(sc_bits_f32(u)));
  }
}

/* ---- bf16 conversion ---- */

static void test_bf16_round_trip_all(void **state) {
  for (uint32_t u = 0; u <= 0xffffu; u++) {
    uint16_t h = (uint16_t)u;
    float f = sc_bfloat16_to_float(h);
    if (bf16_is_nan(h)) {
      assert_true(isnan(f));
      assert_true(bf16_is_nan(sc_float_to_bfloat16(f)));
      continue;
    }
    assert_int_equal(sc_f32_bits(f), sc_f32_bits(ref_bf2f(h)));
    assert_int_equal(sc_float_to_bfloat16(f), h);
  }
}

static void check_f2bf(uint32_t fbits, int expect) {
  float f = sc_bits_f32(fbits);
  uint16_t got = sc_float_to_bfloat16(f);
  if (isnan(f)) {
    if (!bf16_is_nan(got)) fail_msg("NaN %#010x -> bf16 %#06x, not a NaN", fbits, got);
    assert_true(got & 0x40u); /* quiet */
    return;
  }
  uint16_t want = ref_f2bf(f);
  if (got != want || (expect >= 0 && got != (uint16_t)expect))
    fail_msg("float %#010x -> bf16 %#06x, reference %#06x, expected %#x", fbits, got, want, expect);
}

static void test_bf16_cases(void **state) {
  check_f2bf(0x3f808000u, 0x3f80); /* 1 + 2^-8: tie, to even (down) */
  check_f2bf(0x3f818000u, 0x3f82); /* tie, to even (up) */
  check_f2bf(0x3f808001u, 0x3f81);
  check_f2bf(0x3f807fffu, 0x3f80);
  check_f2bf(0x7f7f0000u, 0x7f7f); /* largest finite */
  check_f2bf(0x7f7f7fffu, 0x7f7f);
  check_f2bf(0x7f7f8000u, 0x7f80); /* tie at the top: to inf */
  check_f2bf(0x7f7fffffu, 0x7f80); /* FLT_MAX */
  check_f2bf(0xff7fffffu, 0xff80);
  check_f2bf(0x00010000u, 0x0001); /* smallest subnormal */
  check_f2bf(0x00008000u, 0x0000); /* tie with zero */
  check_f2bf(0x00018000u, 0x0002); /* tie, to even (up) */
  check_f2bf(0x00000001u, 0x0000);
  check_f2bf(0x007fffffu, 0x0080); /* largest float subnormal rounds into the normals */
  check_f2bf(0x80000000u, 0x8000);
  check_f2bf(0x7f800000u, 0x7f80);
  check_f2bf(0xff800000u, 0xff80);
  check_f2bf(0x7f800001u, -1); /* NaN that truncates to inf */
  check_f2bf(0x7f808000u, -1);
  check_f2bf(0x7fffffffu, -1); /* NaN that would round past inf */
  check_f2bf(0xffffffffu, -1);
  check_f2bf(0x7fc00000u, -1);
  for (int i = 0; i < 1000000; i++) {
    uint32_t u = (uint32_t)rng_next();
    if (i & 1) u = (u & 0x8000ffffu) | (u & 0x00ff0000u); /* low exponents: subnormals */
    check_f2bf(u, -1);
  }
  uint16_t hs[1000], back[1000];
  float fs[1000];
  for (size_t i = 0; i < 1000; i++) fs[i] = sc_bits_f32((uint32_t)rng_next());
  sc_float_to_bfloat16_array(hs, fs, 1000);
  for (size_t i = 0; i < 1000; i++) assert_int_equal(hs[i], sc_float_to_bfloat16(fs[i]));
  sc_bfloat16_to_float_array(fs, hs, 1000);
  sc_float_to_bfloat16_array(back, fs, 1000);
  for (size_t i = 0; i < 1000; i++)
    if (!bf16_is_nan(hs[i])) assert_int_equal(back[i], hs[i]);
}

/* ---- sc_avg_finalize ---- */

static void test_avg_finalize(void **state) {
  int8_t i8[] = {-7, 7, -128, 127, 0, -1, 1, -2};
  const int8_t i8_want[] = {-3, 3, -64, 63, 0, 0, 0, -1};
  sc_avg_finalize(SC_INT8, i8, 8, 2);
  assert_memory_equal(i8, i8_want, sizeof i8);

  uint8_t u8[] = {255, 7, 0};
  sc_avg_finalize(SC_UINT8, u8, 3, 2);
  assert_int_equal(u8[0], 127);
  assert_int_equal(u8[1], 3);

  int32_t i32[] = {-7, INT32_MIN, INT32_MAX, -5};
  sc_avg_finalize(SC_INT32, i32, 4, 3);
  assert_int_equal(i32[0], -2);
  assert_int_equal(i32[1], -715827882); /* -2147483648 / 3 = -715827882.67 */
  assert_int_equal(i32[2], 715827882);
  assert_int_equal(i32[3], -1);

  uint32_t u32[] = {UINT32_MAX};
  sc_avg_finalize(SC_UINT32, u32, 1, 2);
  assert_int_equal(u32[0], 0x7fffffffu);

  int64_t i64[] = {-7, INT64_MIN};
  sc_avg_finalize(SC_INT64, i64, 2, 2);
  assert_int_equal(i64[0], -3);
  assert_int_equal(i64[1], INT64_MIN / 2);

  uint64_t u64[] = {UINT64_MAX};
  sc_avg_finalize(SC_UINT64, u64, 1, 3);
  assert_int_equal(u64[0], 0x5555555555555555ull);

  /* nranks 1 changes nothing. */
  int32_t one[] = {-7};
  sc_avg_finalize(SC_INT32, one, 1, 1);
  assert_int_equal(one[0], -7);

  /* Long buffers (chunked paths) against a plain division. */
  enum { N = 777 };
  int32_t *iv = malloc(N * sizeof *iv), *iw = malloc(N * sizeof *iw);
  float *fv = malloc(N * sizeof *fv), *fw = malloc(N * sizeof *fw);
  double *dv = malloc(N * sizeof *dv), *dw = malloc(N * sizeof *dw);
  uint16_t *hv = malloc(N * sizeof *hv), *hw = malloc(N * sizeof *hw);
  uint16_t *bv = malloc(N * sizeof *bv), *bw = malloc(N * sizeof *bw);
  assert_true(iv && iw && fv && fw && dv && dw && hv && hw && bv && bw);
  fill_random(SC_INT32, iv, N);
  fill_random(SC_FLOAT32, fv, N);
  fill_random(SC_FLOAT64, dv, N);
  fill_random(SC_FLOAT16, hv, N);
  fill_random(SC_BFLOAT16, bv, N);
  const int nranks = 7;
  for (size_t i = 0; i < N; i++) {
    long long q = (long long)iv[i] / nranks; /* C99 division truncates toward zero */
    assert_true(q * nranks + (long long)iv[i] % nranks == iv[i]);
    iw[i] = (int32_t)q;
    fw[i] = fv[i] / 7.0f;
    dw[i] = dv[i] / 7.0;
    hw[i] = ref_f2h(ref_h2f(hv[i]) / 7.0f);
    bw[i] = ref_f2bf(ref_bf2f(bv[i]) / 7.0f);
  }
  sc_avg_finalize(SC_INT32, iv, N, nranks);
  sc_avg_finalize(SC_FLOAT32, fv, N, nranks);
  sc_avg_finalize(SC_FLOAT64, dv, N, nranks);
  sc_avg_finalize(SC_FLOAT16, hv, N, nranks);
  sc_avg_finalize(SC_BFLOAT16, bv, N, nranks);
  for (size_t i = 0; i < N; i++) {
    assert_int_equal(iv[i], iw[i]);
    assert_true(elem_matches(SC_FLOAT32, &fv[i], &fw[i]));
    assert_true(elem_matches(SC_FLOAT64, &dv[i], &dw[i]));
    assert_true(elem_matches(SC_FLOAT16, &hv[i], &hw[i]));
    assert_true(elem_matches(SC_BFLOAT16, &bv[i], &bw[i]));
  }
  float exact[] = {7.0f, -1.0f};
  sc_avg_finalize(SC_FLOAT32, exact, 2, 2);
  assert_true(exact[0] == 3.5f && exact[1] == -0.5f);
  uint16_t h3 = 0x4200; /* 3.0 */
  sc_avg_finalize(SC_FLOAT16, &h3, 1, 2);
  assert_int_equal(h3, 0x3e00); /* 1.5 */
  free(iv);
  free(iw);
  free(fv);
  free(fw);
  free(dv);
  free(dw);
  free(hv);
  free(hw);
  free(bv);
  free(bw);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_all),          cmocka_unit_test(test_reduce_self_alias),
      cmocka_unit_test(test_integer_wrap),        cmocka_unit_test(test_minmax_nan_and_symmetry),
      cmocka_unit_test(test_half_round_trip_all), cmocka_unit_test(test_half_cases),
      cmocka_unit_test(test_bf16_round_trip_all), cmocka_unit_test(test_bf16_cases),
      cmocka_unit_test(test_avg_finalize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
