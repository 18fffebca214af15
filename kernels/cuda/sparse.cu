/* SPDX-License-Identifier: BSD-3-Clause */
/* Sparse gather/scatter and the error-feedback residual updates on the
 * device: the element loops of lib/sparse/ef.c's step, each one kernel over the
 * nnz selected entries (grid-stride), with the averaging arithmetic of
 * kernels/cuda/hd.h. */
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/hd.h"

namespace {

template <typename B>
__global__ void k_gather(B *values, const B *x, const uint32_t *idx, uint64_t nnz) {
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nnz; j += step)
    values[j] = x[idx[j]];
}

/* divisor 1 copies bits; otherwise the value divided in float32 (float64 for
 * float64) and rounded to nearest even for fp16/bf16, as sc_gtopk_allreduce
 * averages the global sum. */
__device__ __forceinline__ uint16_t div16(sc_dtype_t dtype, uint16_t v, int d) {
  return dtype == SC_FLOAT16 ? sc_hd_avg_f16(v, d) : sc_hd_avg_bf16(v, d);
}

template <typename B>
__global__ void k_scatter(B *dst, const uint32_t *idx, const B *values, uint64_t nnz,
                          sc_dtype_t dtype, int divisor) {
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nnz; j += step) {
    B v = values[j];
    if (divisor != 1) {
      if (sizeof(B) == 2)
        v = (B)div16(dtype, (uint16_t)v, divisor);
      else if (sizeof(B) == 4)
        v = (B)sc_f32_bits(sc_hd_avg_f32(sc_bits_f32((uint32_t)v), divisor));
      else
        v = (B)sc_f64_bits(sc_hd_avg_f64(sc_bits_f64((uint64_t)v), divisor));
    }
    dst[idx[j]] = v;
  }
}

template <typename B> __global__ void k_clear(B *res, const uint32_t *idx, uint64_t nnz) {
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nnz; j += step)
    res[idx[j]] = 0;
}

template <typename B>
__global__ void k_restore(B *res, const uint32_t *idx, const B *values, const uint8_t *survived,
                          uint64_t nnz) {
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nnz; j += step)
    if (!survived || !survived[j]) res[idx[j]] = values[j];
}

sc_result_t float_size(const char *fn, sc_dtype_t dtype, size_t *es) {
  *es = 0;
  if (dtype == SC_FLOAT16 || dtype == SC_BFLOAT16)
    *es = 2;
  else if (dtype == SC_FLOAT32)
    *es = 4;
  else if (dtype == SC_FLOAT64)
    *es = 8;
  if (*es == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not a float type", fn, (int)dtype);
  return SC_SUCCESS;
}

} // namespace

extern "C" const void *sc_cuda_sparse_module_kernel(void) {
  return (const void *)k_gather<uint32_t>;
}

extern "C" sc_result_t sc_cuda_sparse_gather(void *values, const void *x, const uint32_t *indices,
                                             size_t nnz, sc_dtype_t dtype, void *stream) {
  const char *fn = "sc_cuda_sparse_gather";
  size_t es;
  SC_CHECK(float_size(fn, dtype, &es));
  if (nnz == 0) return SC_SUCCESS;
  if (!values || !x || !indices)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with nnz %zu", fn,
                  !values ? "values" : (!x ? "x" : "indices"), nnz);
  const unsigned g = sc_hd_grid(nnz, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  cudaStream_t s = sc_cuda_stream(stream);
  if (es == 2)
    k_gather<uint16_t>
        <<<g, SC_CUDA_BLOCK, 0, s>>>((uint16_t *)values, (const uint16_t *)x, indices, nnz);
  else if (es == 4)
    k_gather<uint32_t>
        <<<g, SC_CUDA_BLOCK, 0, s>>>((uint32_t *)values, (const uint32_t *)x, indices, nnz);
  else
    k_gather<uint64_t>
        <<<g, SC_CUDA_BLOCK, 0, s>>>((uint64_t *)values, (const uint64_t *)x, indices, nnz);
  SC_CUDA_LAUNCHED(fn);
  return SC_SUCCESS;
}

extern "C" sc_result_t sc_cuda_sparse_scatter(void *dst, size_t n, const uint32_t *indices,
                                              const void *values, size_t nnz, sc_dtype_t dtype,
                                              int zero_first, int divisor, void *stream) {
  const char *fn = "sc_cuda_sparse_scatter";
  size_t es;
  SC_CHECK(float_size(fn, dtype, &es));
  if (divisor < 1) return SC_ERR(SC_ERR_INVALID_ARG, "%s: divisor %d < 1", fn, divisor);
  if (nnz > n) return SC_ERR(SC_ERR_INVALID_ARG, "%s: nnz %zu > n %zu", fn, nnz, n);
  if (n && !dst) return SC_ERR(SC_ERR_INVALID_ARG, "%s: dst is NULL with n %zu", fn, n);
  if (nnz && (!indices || !values))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with nnz %zu", fn,
                  !indices ? "indices" : "values", nnz);
  cudaStream_t s = sc_cuda_stream(stream);
  /* All-zero bits are +0 in every float format. */
  if (zero_first && n) SC_CUDA_TRY(fn, cudaMemsetAsync(dst, 0, n * es, s));
  if (nnz == 0) return SC_SUCCESS;
  const unsigned g = sc_hd_grid(nnz, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  if (es == 2)
    k_scatter<uint16_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint16_t *)dst, indices,
                                                    (const uint16_t *)values, nnz, dtype, divisor);
  else if (es == 4)
    k_scatter<uint32_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint32_t *)dst, indices,
                                                    (const uint32_t *)values, nnz, dtype, divisor);
  else
    k_scatter<uint64_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint64_t *)dst, indices,
                                                    (const uint64_t *)values, nnz, dtype, divisor);
  SC_CUDA_LAUNCHED(fn);
  return SC_SUCCESS;
}

extern "C" sc_result_t sc_cuda_ef_accumulate(void *residual, const void *grad, size_t n,
                                             sc_dtype_t dtype, void *stream) {
  size_t es;
  SC_CHECK(float_size("sc_cuda_ef_accumulate", dtype, &es));
  return sc_cuda_reduce(residual, residual, grad, n, dtype, SC_SUM, stream);
}

extern "C" sc_result_t sc_cuda_ef_clear(void *residual, const uint32_t *indices, size_t nnz,
                                        sc_dtype_t dtype, void *stream) {
  const char *fn = "sc_cuda_ef_clear";
  size_t es;
  SC_CHECK(float_size(fn, dtype, &es));
  if (nnz == 0) return SC_SUCCESS;
  if (!residual || !indices)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with nnz %zu", fn,
                  !residual ? "residual" : "indices", nnz);
  const unsigned g = sc_hd_grid(nnz, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  cudaStream_t s = sc_cuda_stream(stream);
  if (es == 2)
    k_clear<uint16_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint16_t *)residual, indices, nnz);
  else if (es == 4)
    k_clear<uint32_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint32_t *)residual, indices, nnz);
  else
    k_clear<uint64_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint64_t *)residual, indices, nnz);
  SC_CUDA_LAUNCHED(fn);
  return SC_SUCCESS;
}

extern "C" sc_result_t sc_cuda_ef_restore(void *residual, const uint32_t *indices,
                                          const void *values, const uint8_t *survived, size_t nnz,
                                          sc_dtype_t dtype, void *stream) {
  const char *fn = "sc_cuda_ef_restore";
  size_t es;
  SC_CHECK(float_size(fn, dtype, &es));
  if (nnz == 0) return SC_SUCCESS;
  if (!residual || !indices || !values)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with nnz %zu", fn,
                  !residual ? "residual" : (!indices ? "indices" : "values"), nnz);
  const unsigned g = sc_hd_grid(nnz, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  cudaStream_t s = sc_cuda_stream(stream);
  if (es == 2)
    k_restore<uint16_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint16_t *)residual, indices,
                                                    (const uint16_t *)values, survived, nnz);
  else if (es == 4)
    k_restore<uint32_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint32_t *)residual, indices,
                                                    (const uint32_t *)values, survived, nnz);
  else
    k_restore<uint64_t><<<g, SC_CUDA_BLOCK, 0, s>>>((uint64_t *)residual, indices,
                                                    (const uint64_t *)values, survived, nnz);
  SC_CUDA_LAUNCHED(fn);
  return SC_SUCCESS;
}
