/* SPDX-License-Identifier: BSD-3-Clause */
/* Symmetric matrices packed to their upper triangle, on the device
 * (kernels/sym_pack.h has the layout and its index arithmetic): one
 * thread per entry of the full matrix, striding; pack reads the entries on
 * or above the diagonal, unpack writes every entry from its packed place. */
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/sym_pack.h"

namespace {

template <class T> __global__ void k_sym_pack(T *packed, const T *full, uint64_t d) {
  const uint64_t n = d * d, stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n; x += stride) {
    uint64_t i = x / d, j = x % d;
    if (j >= i) packed[sc_sym_row_offset(d, i) + (j - i)] = full[x];
  }
}

template <class T> __global__ void k_sym_unpack(T *full, const T *packed, uint64_t d) {
  const uint64_t n = d * d, stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n; x += stride)
    full[x] = packed[sc_sym_packed_index(d, x / d, x % d)];
}

template <class T>
sc_result_t launch(int unpack, void *dst, const void *src, uint64_t d, cudaStream_t s) {
  uint32_t g = sc_hd_grid(d * d, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  if (!g) return SC_SUCCESS;
  if (unpack)
    k_sym_unpack<T><<<g, SC_CUDA_BLOCK, 0, s>>>((T *)dst, (const T *)src, d);
  else
    k_sym_pack<T><<<g, SC_CUDA_BLOCK, 0, s>>>((T *)dst, (const T *)src, d);
  SC_CUDA_LAUNCHED(unpack ? "sc_cuda_sym_unpack" : "sc_cuda_sym_pack");
  return SC_SUCCESS;
}

sc_result_t dispatch(int unpack, void *dst, const void *src, size_t d, size_t es, void *stream) {
  const char *fn = unpack ? "sc_cuda_sym_unpack" : "sc_cuda_sym_pack";
  if (d == 0) return SC_SUCCESS;
  if (!dst || !src) return SC_ERR(SC_ERR_INVALID_ARG, "%s: NULL buffer with d = %zu", fn, d);
  cudaStream_t s = sc_cuda_stream(stream);
  switch (es) {
  case 1:
    return launch<uint8_t>(unpack, dst, src, d, s);
  case 2:
    return launch<uint16_t>(unpack, dst, src, d, s);
  case 4:
    return launch<uint32_t>(unpack, dst, src, d, s);
  case 8:
    return launch<uint64_t>(unpack, dst, src, d, s);
  default:
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: element size %zu", fn, es);
  }
}

} // namespace

extern "C" const void *sc_cuda_sym_module_kernel(void) {
  return (const void *)k_sym_pack<uint32_t>;
}

extern "C" sc_result_t sc_cuda_sym_pack(void *packed, const void *full, size_t d, size_t es,
                                        void *stream) {
  return dispatch(0, packed, full, d, es, stream);
}

extern "C" sc_result_t sc_cuda_sym_unpack(void *full, const void *packed, size_t d, size_t es,
                                          void *stream) {
  return dispatch(1, full, packed, d, es, stream);
}
