/* SPDX-License-Identifier: BSD-3-Clause */
/* The sign packing of the 1-bit all-reduce (kernels/cpu/signpack.h) against
 * a bit-by-bit reference: element i is bit 7 - i % 8 of byte i / 8 (most
 * significant first), 1 for v >= 0 (-0.0 included), 0 for v < 0 and NaN;
 * the "positive" plane; unpacking to +-a (double and float32); packing
 * with the residual's subtraction in the same pass; nothing written past the packed
 * bytes and a partial last byte's low bits zero, for n = 0..70 and 1000. */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_msb_first),
      cmocka_unit_test(test_pack),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
