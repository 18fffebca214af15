/* SPDX-License-Identifier: BSD-3-Clause */
/* Low-rank compression's dense kernels (PowerSGD, ACP-SGD; lib/compress/
 * lowrank.c): the skinny products of a rows x cols row-major matrix M with
 * r-column factors, and the orthonormalization of a factor. Factors are held
 * transposed, r x n row-major ("pt": column k of P is pt + k * rows), so that
 * every column is contiguous. Each result is a pure function of its inputs
 * with a fixed order of operations (no threads, no data-dependent order):
 * the same inputs give the same bits on every rank. f32 for float32 and the
 * half types (computed in float32), f64 for float64. */
#ifndef SC_KERNELS_CPU_LOWRANK_H
#define SC_KERNELS_CPU_LOWRANK_H

#include <stddef.h>
#include <stdint.h>

/* pt[k * rows + i] = sum_j m[i * cols + j] * qt[k * cols + j] (P = M Q):
 * M read once from memory, each row reused from cache over the r columns. */
void sc_lr_project_f32(float *pt, const float *m, size_t rows, size_t cols, const float *qt,
                       size_t r);
void sc_lr_project_f64(double *pt, const double *m, size_t rows, size_t cols, const double *qt,
                       size_t r);
/* The same without the AVX2 build sc_lr_project takes where the CPU has it
 * (SSE2 only): the same bits, exported so that tests compare the two. */
void sc_lr_project_portable_f32(float *pt, const float *m, size_t rows, size_t cols,
                                const float *qt, size_t r);
void sc_lr_project_portable_f64(double *pt, const double *m, size_t rows, size_t cols,
                                const double *qt, size_t r);

/* qt[k * cols + j] = sum_i m[i * cols + j] * pt[k * rows + i] (Q = M^T P):
 * M read once, in column strips whose r partial rows of Q stay in cache. */
void sc_lr_project_t_f32(float *qt, const float *m, size_t rows, size_t cols, const float *pt,
                         size_t r);
void sc_lr_project_t_f64(double *qt, const double *m, size_t rows, size_t cols, const double *pt,
                         size_t r);

/* For the nrows rows i of out (rows x cols, row-major): out[i, j] =
 * beta * out[i, j] + alpha * sum_k pt[k * ldp + i] * qt[k * cols + j]
 * (out = beta out + alpha P Q^T); beta == 0 does not read out. */
void sc_lr_expand_f32(float *out, size_t nrows, size_t cols, const float *pt, size_t ldp,
                      const float *qt, size_t r, float alpha, float beta);
void sc_lr_expand_f64(double *out, size_t nrows, size_t cols, const double *pt, size_t ldp,
                      const double *qt, size_t r, double alpha, double beta);

/* Orthonormalizes the r vectors of length n stored at vt + k * n, in order,
 * by modified Gram-Schmidt with re-orthogonalization (repeated while a pass
 * removes more than half of what is left, at most three passes). A vector
 * that is zero, or whose part outside the span of the earlier ones is at
 * rounding level, is set to zero (never NaN); the others end with unit norm.
 * Returns the number of nonzero vectors. */
size_t sc_lr_orth_f32(float *vt, size_t n, size_t r);
size_t sc_lr_orth_f64(double *vt, size_t n, size_t r);

/* out[0..n) = standard normal deviates that depend on seed and n only
 * (splitmix64 -> two uniforms -> Box-Muller, in double). */
void sc_lr_normal_f32(float *out, size_t n, uint64_t seed);
void sc_lr_normal_f64(double *out, size_t n, uint64_t seed);

#endif
