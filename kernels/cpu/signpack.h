/* SPDX-License-Identifier: BSD-3-Clause */
/* Signs packed one bit per element, most significant bit first: element i
 * is bit 7 - (i % 8) of byte i / 8. Bit 1 stands for +1 (v >= 0, -0.0
 * included), bit 0 for -1 (v < 0, and NaN, which compares false). The
 * 1-bit compressed all-reduce (lib/compress/onebit.c) sends these. */
#ifndef SC_KERNELS_CPU_SIGNPACK_H
#define SC_KERNELS_CPU_SIGNPACK_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of n packed signs. */
static inline size_t sc_sign_bytes(size_t n) {
  return n / 8 + (n % 8 != 0);
}

/* Element i of a packed array: 1 (+1) or 0 (-1). */
static inline int sc_sign_bit(const uint8_t *bits, size_t i) {
  return bits[i >> 3] >> (7 - (i & 7)) & 1;
}

/* bits[0, sc_sign_bytes(n)) = the signs of v[0, n); the unused low bits of
 * a last partial byte are 0. */
void sc_sign_pack_f64(uint8_t *bits, const double *v, size_t n);

/* bits[0, sc_sign_bytes(n)) = 1 where v[i] > 0 (1 for positive, 0 for zero
 * or negative): the "is positive" plane of a vote count. */
void sc_sign_pack_pos_f64(uint8_t *bits, const double *v, size_t n);

/* sc_sign_pack_f64, then v[i] -= a sign(v[i]) (v[i] - a where the bit is
 * 1, v[i] + a where it is 0): what the scaled signs leave behind, in the
 * same pass. */
void sc_sign_pack_sub_f64(uint8_t *bits, double *v, size_t n, double a);

/* out[i] = +a where bit i is 1, -a where it is 0, for i < n. */
void sc_sign_unpack_f64(double *out, const uint8_t *bits, size_t n, double a);

/* The same into float32: out[i] = (float)(+-a). */
void sc_sign_unpack_f32(float *out, const uint8_t *bits, size_t n, double a);

#endif
