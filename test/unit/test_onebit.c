/* SPDX-License-Identifier: BSD-3-Clause */
/* The sign packing of the 1-bit all-reduce (kernels/cpu/signpack.h) against
 * a bit-by-bit reference: element i is bit 7 - i % 8 of byte i / 8 (most
 * significant first), 1 for v >= 0 (-0.0 included), 0 for v < 0 and NaN;
 * the "positive" plane; unpacking to +-a (double and float32); packing
 * with the residual's subtraction in the same pass; nothing written past the packed
 * bytes and a partial last byte's low bits zero, for n = 0..70 and 1000.
 * The fused passes of the 1-bit all-reduce (the worker's error feedback in
 * float32 and float64, the server's sum with its residual, the vote)
 * against scalar references written here, for n = 0, 1, 7, 8, 9, 63, 64,
 * 65, primes and 1000, and 1 to 9 ranks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/signpack.h"

/* Values with every case: positive, negative, +-0, NaN, +-inf, tiny. */
static double value(size_t i) {
  switch ((i * 7 + 3) % 11) {
  case 0:
    return 0.0;
  case 1:
    return -0.0;
  case 2:
    return NAN;
  case 3:
    return INFINITY;
  case 4:
    return -INFINITY;
  case 5:
    return -1e-300;
  case 6:
    return 1e-300;
  default:
    return ((i * 2654435761u) >> 7 & 1) ? (double)i * 0.5 : -(double)i * 0.25 - 1.0;
  }
}

static void check_n(size_t n) {
  double *v = malloc((n + 1) * sizeof(double)), *out = malloc((n + 1) * sizeof(double));
  const size_t nb = sc_sign_bytes(n);
  uint8_t *bits = malloc(nb + 4), *pos = malloc(nb + 4);
  assert_non_null(v);
  assert_non_null(out);
  assert_non_null(bits);
  assert_non_null(pos);
  assert_int_equal(nb, (n + 7) / 8);
  for (size_t i = 0; i < n; i++) v[i] = value(i);
  memset(bits, 0xa5, nb + 4);
  memset(pos, 0xa5, nb + 4);
  sc_sign_pack_f64(bits, v, n);
  sc_sign_pack_pos_f64(pos, v, n);
  for (size_t g = nb; g < nb + 4; g++) {
    assert_int_equal(bits[g], 0xa5);
    assert_int_equal(pos[g], 0xa5);
  }
  for (size_t b = 0; b < nb; b++) {
    unsigned ref = 0, refp = 0;
    for (unsigned k = 0; k < 8; k++) {
      size_t i = 8 * b + k;
      unsigned s = 0, p = 0;
      if (i < n) {
        /* by the sign bit and class, not by a comparison like the kernel's */
        s = !isnan(v[i]) && (v[i] == 0.0 || !signbit(v[i]));
        p = s && v[i] != 0.0;
      }
      ref |= s << (7 - k);
      refp |= p << (7 - k);
    }
    assert_int_equal(bits[b], ref);
    assert_int_equal(pos[b], refp);
  }
  for (size_t i = 0; i < n; i++)
    assert_int_equal(sc_sign_bit(bits, i), (bits[i / 8] >> (7 - i % 8)) & 1);
  out[n] = 42.0;
  sc_sign_unpack_f64(out, bits, n, 2.5);
  for (size_t i = 0; i < n; i++) {
    const int s = !isnan(v[i]) && (v[i] == 0.0 || !signbit(v[i]));
    assert_true(out[i] == (s ? 2.5 : -2.5));
  }
  assert_true(out[n] == 42.0);
  /* unpacking into float32 */
  float *f = malloc((n + 1) * sizeof(float));
  assert_non_null(f);
  f[n] = 42.0f;
  sc_sign_unpack_f32(f, bits, n, 0.1);
  for (size_t i = 0; i < n; i++) assert_true(f[i] == (sc_sign_bit(bits, i) ? 0.1f : -0.1f));
  assert_true(f[n] == 42.0f);
  free(f);
  /* packing and subtracting in one pass: the same bits, v - a sign(v) */
  uint8_t *bits2 = malloc(nb + 1);
  assert_non_null(bits2);
  bits2[nb] = 0x5a;
  memcpy(out, v, n * sizeof(double));
  sc_sign_pack_sub_f64(bits2, out, n, 0.75);
  assert_int_equal(bits2[nb], 0x5a);
  assert_memory_equal(bits2, bits, nb);
  for (size_t i = 0; i < n; i++) {
    const double want = sc_sign_bit(bits, i) ? v[i] - 0.75 : v[i] + 0.75;
    assert_true(isnan(want) ? isnan(out[i]) : out[i] == want);
  }
  free(bits2);
  free(v);
  free(out);
  free(bits);
  free(pos);
}

static void test_pack(void **state) {
  (void)state;
  for (size_t n = 0; n <= 70; n++) check_n(n);
  check_n(1000);
  check_n(1003);
}

/* Known bytes: MSB first, written out by hand. */
static void test_msb_first(void **state) {
  (void)state;
  const double v[10] = {1, -1, -1, -1, -1, -1, -1, 2, -3, 4};
  uint8_t b[2] = {0, 0};
  sc_sign_pack_f64(b, v, 10);
  assert_int_equal(b[0], 0x81);
  assert_int_equal(b[1], 0x40);
}

/* A sign as the reference sees it: +1 for v >= 0 (-0.0 too), -1 else. */
static double ref_sgn(double v) {
  return !isnan(v) && (v == 0.0 || !signbit(v)) ? 1.0 : -1.0;
}

/* Bit i of a packed array, written out. */
static unsigned ref_bit(const uint8_t *bits, size_t i) {
  return (bits[i / 8] >> (7 - i % 8)) & 1u;
}

static int same_double(double a, double b) {
  return isnan(a) ? isnan(b) : memcmp(&a, &b, sizeof a) == 0;
}

static const size_t lens[] = {0, 1, 7, 8, 9, 13, 63, 64, 65, 97, 127, 128, 129, 1000, 1009};

/* Worker pass: residual of (w, a) + x, squares summed in order, signs,
 * w = c; float32 and float64 inputs, from a non-zero starting sum. */
static void test_ef(void **state) {
  (void)state;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    const size_t n = lens[li], nb = (n + 7) / 8;
    double *w = malloc((n + 1) * sizeof(double));
    double *x64 = malloc((n + 1) * sizeof(double)), *ref = malloc((n + 1) * sizeof(double));
    float *x32 = malloc((n + 1) * sizeof(float));
    uint8_t *bits = malloc(nb + 2);
    assert_true(w && x64 && ref && x32 && bits);
    for (int dt = 0; dt < 2; dt++) {
      const double a = dt ? 0.375 : 1.25;
      double rsq = 0.5, sq = 0.5;
      for (size_t i = 0; i < n; i++) {
        w[i] = value(i + 5);
        x32[i] = (float)(((i * 40503u) % 29) * 0.125 - 1.75);
        x64[i] = dt ? value(i * 3 + 1) : (double)x32[i];
        const double r = w[i] >= 0.0 ? w[i] - a : w[i] + a; /* what the residual stands for */
        ref[i] = r + x64[i];
        rsq += ref[i] * ref[i];
      }
      w[n] = 42.0;
      memset(bits, 0xa5, nb + 2);
      if (dt)
        sc_sign_ef_f64(bits, w, x64, n, a, &sq);
      else
        sc_sign_ef_f32(bits, w, x32, n, a, &sq);
      assert_true(same_double(sq, rsq));
      assert_true(w[n] == 42.0);
      assert_int_equal(bits[nb], 0xa5);
      for (size_t i = 0; i < n; i++) {
        assert_true(same_double(w[i], ref[i]));
        assert_int_equal(ref_bit(bits, i), ref_sgn(ref[i]) > 0);
      }
      for (size_t i = n; i < 8 * nb; i++) assert_int_equal(ref_bit(bits, i), 0);
      /* float32 signs straight from the input */
      memset(bits, 0xa5, nb + 2);
      sc_sign_pack_f32(bits, x32, n);
      assert_int_equal(bits[nb], 0xa5);
      for (size_t i = 0; i < n; i++) assert_int_equal(ref_bit(bits, i), ref_sgn(x32[i]) > 0);
      for (size_t i = n; i < 8 * nb; i++) assert_int_equal(ref_bit(bits, i), 0);
    }
    free(w);
    free(x64);
    free(ref);
    free(x32);
    free(bits);
  }
}

/* The nibble table: entry h, column k is +a where bit 3 - k of h is 1. */
static void test_lut4(void **state) {
  (void)state;
  double lut[64];
  sc_sign_lut4_f64(lut, 0.625);
  for (unsigned h = 0; h < 16; h++)
    for (unsigned k = 0; k < 4; k++)
      assert_true(lut[4 * h + k] == ((h >> (3 - k)) & 1 ? 0.625 : -0.625));
}

/* Server pass and vote against sums over ranks written out per element. */
static void test_server(void **state) {
  (void)state;
  for (int p = 1; p <= 9; p++)
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
      const size_t m = lens[li], nb = (m + 7) / 8, stride = nb + 8 + (size_t)p;
      uint8_t *in = malloc(stride * (size_t)p), *out = malloc(nb + 2), *neg = malloc(nb + 2);
      double *s = malloc((m + 1) * sizeof(double)), *ref = malloc((m + 1) * sizeof(double));
      double *luts = malloc(64 * (size_t)p * sizeof(double)), a[9];
      assert_true(in && out && neg && s && ref && luts);
      for (size_t i = 0; i < stride * (size_t)p; i++) in[i] = (uint8_t)(i * 2654435761u >> 13);
      for (int r = 0; r < p; r++) {
        a[r] = 0.1 * (r + 1) + (r % 3) * 1e-3;
        sc_sign_lut4_f64(luts + 64 * r, a[r]);
      }
      const double b = 0.3;
      double rsq = 0.25, sq = 0.25;
      for (size_t k = 0; k < m; k++) {
        s[k] = value(k + 2) / 4;
        double t = 0.0;
        for (int r = 0; r < p; r++) t += ref_bit(in + (size_t)r * stride, k) ? a[r] : -a[r];
        const double res = s[k] >= 0.0 ? s[k] - b : s[k] + b;
        ref[k] = t / p + res;
        rsq += ref[k] * ref[k];
      }
      s[m] = 7.0;
      memset(out, 0xa5, nb + 2);
      sc_sign_sum_ef(out, s, in, stride, luts, p, m, b, &sq);
      assert_true(same_double(sq, rsq));
      assert_true(s[m] == 7.0);
      assert_int_equal(out[nb], 0xa5);
      for (size_t k = 0; k < m; k++) {
        assert_true(same_double(s[k], ref[k]));
        assert_int_equal(ref_bit(out, k), ref_sgn(ref[k]) > 0);
      }
      for (size_t k = m; k < 8 * nb; k++) assert_int_equal(ref_bit(out, k), 0);
      /* the vote: the sum of +-1 over ranks, its "> 0" and "< 0" planes */
      memset(out, 0xa5, nb + 2);
      memset(neg, 0xa5, nb + 2);
      sc_sign_vote(out, neg, in, stride, p, m);
      assert_int_equal(out[nb], 0xa5);
      assert_int_equal(neg[nb], 0xa5);
      for (size_t k = 0; k < 8 * nb; k++) {
        int v = 0;
        for (int r = 0; r < p; r++) v += ref_bit(in + (size_t)r * stride, k) ? 1 : -1;
        assert_int_equal(ref_bit(out, k), k < m && v > 0);
        assert_int_equal(ref_bit(neg, k), k < m && v < 0);
      }
      free(in);
      free(out);
      free(neg);
      free(s);
      free(ref);
      free(luts);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_msb_first), cmocka_unit_test(test_pack),   cmocka_unit_test(test_ef),
      cmocka_unit_test(test_lut4),      cmocka_unit_test(test_server),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
