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

/* The 1-bit all-reduce's residual kept lazily: w holds the value c whose
 * signs were last sent with scale a, and the residual it stands for is
 * c - a sign(c) (c - a where c >= 0, c + a elsewhere), formed when the next
 * pass reads w. This saves the pass that would write the residual back. */
static inline double sc_sign_residual(double c, double a) {
  return c - (c >= 0.0 ? a : -a);
}

/* The fused error-feedback pass, for i < n in index order: c = the residual
 * of (w[i], a) + x[i]; *sq += c * c; bit i = c >= 0; w[i] = c. bits gets
 * sc_sign_bytes(n) bytes (a partial last byte's low bits 0). The same bits
 * as forming c, summing its squares, then sc_sign_pack_sub_f64. */
void sc_sign_ef_f32(uint8_t *bits, double *w, const float *x, size_t n, double a, double *sq);
void sc_sign_ef_f64(uint8_t *bits, double *w, const double *x, size_t n, double a, double *sq);

/* sc_sign_pack_f64 of float32 values (the same bits as of their doubles). */
void sc_sign_pack_f32(uint8_t *bits, const float *v, size_t n);

/* lut[16 * 4]: entry h holds +a or -a by the 4 bits of nibble h, most
 * significant first; sc_sign_sum_ef and sc_sign_unpack_* read it a nibble
 * at a time. */
void sc_sign_lut4_f64(double *lut, double a);

/* The 1-bit server's fused pass over m elements: for k < m, t = 0 + the sum
 * over ranks i < p in rank order of +-a_i (bit k of rank i's signs, at
 * in + i * stride; luts + 64 i is sc_sign_lut4_f64 of a_i); v = t / p + the
 * residual of (s[k], b); *sq += v * v in index order; bit k of out = v >= 0;
 * s[k] = v. out gets sc_sign_bytes(m) bytes (a partial last byte's low bits
 * 0). */
void sc_sign_sum_ef(uint8_t *out, double *s, const uint8_t *in, size_t stride, const double *luts,
                    int p, size_t m, double b, double *sq);

/* The majority vote's server pass: with c_k the count of ranks whose bit k
 * is 1 (p ranks at in + i * stride), bit k of pos is 2 c_k > p and bit k of
 * neg is 2 c_k < p, for k < m; sc_sign_bytes(m) bytes each. */
void sc_sign_vote(uint8_t *pos, uint8_t *neg, const uint8_t *in, size_t stride, int p, size_t m);

#endif
