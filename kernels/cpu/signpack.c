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

void sc_sign_lut4_f64(double *lut, double a) {
  for (unsigned h = 0; h < 16; h++)
    for (unsigned k = 0; k < 4; k++) lut[4 * h + k] = h >> (3 - k) & 1 ? a : -a;
}

/* Below this many elements the unpacking goes bit by bit: building a table
 * would cost more than it saves. */
enum { LUT_MIN = 64 };

void sc_sign_unpack_f64(double *out, const uint8_t *bits, size_t n, double a) {
  const double pm[2] = {-a, a};
  size_t i = 0;
  if (n >= LUT_MIN) {
    double lut[64];
    sc_sign_lut4_f64(lut, a);
    for (; i + 8 <= n; i += 8) {
      memcpy(out + i, lut + 4 * (bits[i >> 3] >> 4), 4 * sizeof(double));
      memcpy(out + i + 4, lut + 4 * (bits[i >> 3] & 15), 4 * sizeof(double));
    }
  }
  for (; i < n; i++) out[i] = pm[bits[i >> 3] >> (7 - (i & 7)) & 1];
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
  size_t i = 0;
  if (n >= LUT_MIN) {
    float lut[64];
    for (unsigned h = 0; h < 16; h++)
      for (unsigned k = 0; k < 4; k++) lut[4 * h + k] = pm[h >> (3 - k) & 1];
    for (; i + 8 <= n; i += 8) {
      memcpy(out + i, lut + 4 * (bits[i >> 3] >> 4), 4 * sizeof(float));
      memcpy(out + i + 4, lut + 4 * (bits[i >> 3] & 15), 4 * sizeof(float));
    }
  }
  for (; i < n; i++) out[i] = pm[bits[i >> 3] >> (7 - (i & 7)) & 1];
}

void sc_sign_pack_f32(uint8_t *bits, const float *v, size_t n) {
  const size_t full = n / 8;
  for (size_t b = 0; b < full; b++) {
    unsigned byte = 0;
    for (int k = 0; k < 8; k++) byte |= (unsigned)(v[8 * b + k] >= 0.0f) << (7 - k);
    bits[b] = (uint8_t)byte;
  }
  if (n % 8) {
    unsigned byte = 0;
    for (size_t k = 0; k < n % 8; k++) byte |= (unsigned)(v[8 * full + k] >= 0.0f) << (7 - k);
    bits[full] = (uint8_t)byte;
  }
}

/* The error-feedback pass on element k of the byte at w, x; the squares'
 * sum is the only dependency between elements, so consecutive elements
 * overlap. k is a constant in the unrolled byte loops below. */
#define EF_STEP(k, xk)                                                                             \
  do {                                                                                             \
    const double c = sc_sign_residual(w[k], a) + (xk);                                             \
    s += c * c;                                                                                    \
    byte |= (unsigned)(c >= 0.0) << (7 - (k));                                                     \
    w[k] = c;                                                                                      \
  } while (0)

#define EF_BYTE(X)                                                                                 \
  do {                                                                                             \
    EF_STEP(0, X(0));                                                                              \
    EF_STEP(1, X(1));                                                                              \
    EF_STEP(2, X(2));                                                                              \
    EF_STEP(3, X(3));                                                                              \
    EF_STEP(4, X(4));                                                                              \
    EF_STEP(5, X(5));                                                                              \
    EF_STEP(6, X(6));                                                                              \
    EF_STEP(7, X(7));                                                                              \
  } while (0)

#define X32(k) ((double)x[k])
#define X64(k) (x[k])

void sc_sign_ef_f32(uint8_t *bits, double *w, const float *x, size_t n, double a, double *sq) {
  double s = *sq;
  const size_t full = n / 8;
  for (size_t b = 0; b < full; b++, w += 8, x += 8) {
    unsigned byte = 0;
    EF_BYTE(X32);
    bits[b] = (uint8_t)byte;
  }
  if (n % 8) {
    unsigned byte = 0;
    for (size_t k = 0; k < n % 8; k++) EF_STEP(k, X32(k));
    bits[full] = (uint8_t)byte;
  }
  *sq = s;
}

void sc_sign_ef_f64(uint8_t *bits, double *w, const double *x, size_t n, double a, double *sq) {
  double s = *sq;
  const size_t full = n / 8;
  for (size_t b = 0; b < full; b++, w += 8, x += 8) {
    unsigned byte = 0;
    EF_BYTE(X64);
    bits[b] = (uint8_t)byte;
  }
  if (n % 8) {
    unsigned byte = 0;
    for (size_t k = 0; k < n % 8; k++) EF_STEP(k, X64(k));
    bits[full] = (uint8_t)byte;
  }
  *sq = s;
}

/* t[0..8) = 0 + the sum over ranks in rank order of +-a_i by byte b of
 * each rank's signs, a nibble's table entry at a time. */
static inline void sum_byte(double *t, const uint8_t *in, size_t stride, const double *luts, int p,
                            size_t b) {
  for (int k = 0; k < 8; k++) t[k] = 0.0;
  for (int r = 0; r < p; r++) {
    const unsigned byte = in[(size_t)r * stride + b];
    const double *hi = luts + 64 * r + 4 * (byte >> 4), *lo = luts + 64 * r + 4 * (byte & 15);
    for (int k = 0; k < 4; k++) {
      t[k] += hi[k];
      t[k + 4] += lo[k];
    }
  }
}

/* One element of the server's pass: t / p (times 1 / p when that is the
 * same), plus the residual of (s[k], b). */
#define SUM_STEP(k)                                                                                \
  do {                                                                                             \
    const double v = (pow2 ? t[k] * inv : t[k] / dp) + sc_sign_residual(s[k], b);                  \
    q += v * v;                                                                                    \
    o |= (unsigned)(v >= 0.0) << (7 - (k));                                                        \
    s[k] = v;                                                                                      \
  } while (0)

void sc_sign_sum_ef(uint8_t *out, double *s, const uint8_t *in, size_t stride, const double *luts,
                    int p, size_t m, double b, double *sq) {
  /* t / p is t * (1 / p) to the bit when p is a power of two */
  const double dp = (double)p, inv = 1.0 / dp;
  const int pow2 = (p & (p - 1)) == 0;
  double q = *sq, t[8];
  const size_t full = m / 8;
  for (size_t byte = 0; byte < full; byte++, s += 8) {
    sum_byte(t, in, stride, luts, p, byte);
    unsigned o = 0;
    SUM_STEP(0);
    SUM_STEP(1);
    SUM_STEP(2);
    SUM_STEP(3);
    SUM_STEP(4);
    SUM_STEP(5);
    SUM_STEP(6);
    SUM_STEP(7);
    out[byte] = (uint8_t)o;
  }
  if (m % 8) {
    sum_byte(t, in, stride, luts, p, full);
    unsigned o = 0;
    for (size_t k = 0; k < m % 8; k++) SUM_STEP(k);
    out[full] = (uint8_t)o;
  }
  *sq = q;
}

void sc_sign_vote(uint8_t *pos, uint8_t *neg, const uint8_t *in, size_t stride, int p, size_t m) {
  for (size_t byte = 0; 8 * byte < m; byte++) {
    int c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < p; r++) {
      const unsigned v = in[(size_t)r * stride + byte];
      for (int k = 0; k < 8; k++) c[k] += v >> (7 - k) & 1;
    }
    const size_t len = m - 8 * byte < 8 ? m - 8 * byte : 8;
    unsigned po = 0, ne = 0;
    for (size_t k = 0; k < len; k++) {
      po |= (unsigned)(2 * c[k] > p) << (7 - k);
      ne |= (unsigned)(2 * c[k] < p) << (7 - k);
    }
    pos[byte] = (uint8_t)po;
    neg[byte] = (uint8_t)ne;
  }
}
