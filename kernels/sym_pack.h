/* SPDX-License-Identifier: BSD-3-Clause */
/* Symmetric matrices packed to their upper triangle (K-FAC's Kronecker
 * factors, lib/core/sym.c): a d x d row-major matrix of es-byte elements
 * travels as its entries (i, j) with j >= i, row by row, d(d+1)/2 of them.
 * The index arithmetic is shared with the CUDA kernels (SC_HD). */
#ifndef SC_KERNELS_SYM_PACK_H
#define SC_KERNELS_SYM_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/half_bits.h" /* SC_HD */

/* Entries of the upper triangle (0 when that overflows). */
static inline SC_HD uint64_t sc_sym_packed_count(uint64_t d) {
  if (d == 0 || d == UINT64_MAX) return 0; /* d + 1 wraps: the count overflows */
  uint64_t a = d, b = d + 1;
  if (a % 2 == 0)
    a /= 2;
  else
    b /= 2;
  if (a > UINT64_MAX / b) return 0;
  return a * b;
}

/* Where row i (i < d) of the upper triangle starts in the packed form. */
static inline SC_HD uint64_t sc_sym_row_offset(uint64_t d, uint64_t i) {
  return i * d - (i * (i - (i > 0 ? 1 : 0))) / 2;
}

/* The packed index of entry (i, j) of the symmetric matrix, either half. */
static inline SC_HD uint64_t sc_sym_packed_index(uint64_t d, uint64_t i, uint64_t j) {
  uint64_t lo = i < j ? i : j, hi = i < j ? j : i;
  return sc_sym_row_offset(d, lo) + (hi - lo);
}

/* packed = the upper triangle of full (its lower triangle is not read). */
void sc_sym_pack(void *packed, const void *full, size_t d, size_t es);
/* full = the symmetric matrix whose upper triangle is packed (both halves
 * written). packed and full do not overlap. */
void sc_sym_unpack(void *full, const void *packed, size_t d, size_t es);

#endif
