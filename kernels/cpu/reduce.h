/* SPDX-License-Identifier: BSD-3-Clause */
/* Element-wise reductions and fp16/bf16 conversion on the CPU. Callers have
 * validated dtype and op; these never fail. */
#ifndef SC_KERNELS_CPU_REDUCE_H
#define SC_KERNELS_CPU_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

/* dst[i] = a[i] (op) b[i] for i < n. dst may alias a or b exactly.
 * SC_AVG reduces as SC_SUM (sc_avg_finalize divides). Integer SUM/PROD wrap
 * modulo 2^bits (no undefined behaviour). MIN/MAX propagate NaN. fp16/bf16:
 * convert to float32, reduce, round to nearest even. */
void sc_reduce_kernel(sc_dtype_t dtype, sc_redop_t op, void *dst, const void *a, const void *b,
                      size_t n);

/* buf[i] /= nranks (integers: truncation toward zero; floats: IEEE division,
 * fp16/bf16 through float32). */
void sc_avg_finalize(sc_dtype_t dtype, void *buf, size_t n, int nranks);

uint16_t sc_float_to_half(float f);
float sc_half_to_float(uint16_t h);
uint16_t sc_float_to_bfloat16(float f);
float sc_bfloat16_to_float(uint16_t h);

/* Array forms of the conversions above (same results element for element);
 * the reduction kernels use them to move fp16/bf16 blocks through float32. */
void sc_half_to_float_array(float *dst, const uint16_t *src, size_t n);
void sc_float_to_half_array(uint16_t *dst, const float *src, size_t n);
void sc_bfloat16_to_float_array(float *dst, const uint16_t *src, size_t n);
void sc_float_to_bfloat16_array(uint16_t *dst, const float *src, size_t n);
/* The fp16 array converters without the F16C instructions the two above use
 * when the CPU has them; exported so that tests can check one against the
 * other. */
void sc_half_to_float_array_portable(float *dst, const uint16_t *src, size_t n);
void sc_float_to_half_array_portable(uint16_t *dst, const float *src, size_t n);

#endif
