/* SPDX-License-Identifier: BSD-3-Clause */
/* Sign packing: the inner loops work on whole bytes of 8 elements with no
 * branch, so that compilers vectorise them; a partial last byte takes the
 * same path on a zero-padded copy. */
#include <string.h>

#include "kernels/cpu/signpack.h"

static inline uint8_t pack8_ge(const double *v) {
  unsigned b = 0;
  for (int k = 0; k < 8; k++) b |= (unsigned)(v[k] >= 0.0) << (7 - k);
  return (uint8_t)b;
}

static inline uint8_t pack8_gt(const double *v) {
  unsigned b = 0;
  for (int k = 0; k < 8; k++) b |= (unsigned)(v[k] > 0.0) << (7 - k);
  return (uint8_t)b;
}

void sc_sign_pack_f64(uint8_t *bits, const double *v, size_t n) {
  const size_t full = n / 8, rest = n % 8;
  for (size_t b = 0; b < full; b++) bits[b] = pack8_ge(v + 8 * b);
  if (rest) {
    double t[8];
    for (size_t k = 0; k < 8; k++) t[k] = k < rest ? v[8 * full + k] : -1.0;
    bits[full] = pack8_ge(t);
  }
}

void sc_sign_pack_pos_f64(uint8_t *bits, const double *v, size_t n) {
  const size_t full = n / 8, rest = n % 8;
  for (size_t b = 0; b < full; b++) bits[b] = pack8_gt(v + 8 * b);
  if (rest) {
    double t[8] = {0};
    for (size_t k = 0; k < rest; k++) t[k] = v[8 * full + k];
    bits[full] = pack8_gt(t);
  }
}

void sc_sign_unpack_f64(double *out, const uint8_t *bits, size_t n, double a) {
  const double pm[2] = {-a, a};
  for (size_t i = 0; i < n; i++) out[i] = pm[bits[i >> 3] >> (7 - (i & 7)) & 1];
}

void sc_sign_pack_sub_f64(uint8_t *bits, double *v, size_t n, double a) {
  const size_t full = n / 8;
  for (size_t b = 0; b < full; b++) {
    double *x = v + 8 * b;
    bits[b] = pack8_ge(x);
    for (int k = 0; k < 8; k++) x[k] = x[k] >= 0.0 ? x[k] - a : x[k] + a;
  }
  if (n % 8) {
    sc_sign_pack_f64(bits + full, v + 8 * full, n % 8);
    for (size_t i = 8 * full; i < n; i++) v[i] = v[i] >= 0.0 ? v[i] - a : v[i] + a;
  }
}

void sc_sign_unpack_f32(float *out, const uint8_t *bits, size_t n, double a) {
  const float pm[2] = {(float)-a, (float)a};
  for (size_t i = 0; i < n; i++) out[i] = pm[bits[i >> 3] >> (7 - (i & 7)) & 1];
}
