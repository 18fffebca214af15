/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the .cu files: the error helpers and a block-wide scan. C++
 * (nvcc) only. */
#ifndef SC_KERNELS_CUDA_CUDA_UTIL_CUH
#define SC_KERNELS_CUDA_CUDA_UTIL_CUH

#include <cuda_runtime.h>

extern "C" {
#include "lib/base/error.h"
}
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/hd_launch.h"

/* A failed CUDA call as SC_ERR_SYSTEM naming the function and the call. */
#define SC_CUDA_TRY(fn, call)                                                                      \
  do {                                                                                             \
    cudaError_t sc_cuda_e_ = (call);                                                               \
    if (sc_cuda_e_ != cudaSuccess)                                                                 \
      return SC_ERR(SC_ERR_SYSTEM, "%s: %s failed: %s", fn, #call,                                 \
                    cudaGetErrorString(sc_cuda_e_));                                               \
  } while (0)

/* A launch's own error (bad configuration, no device) right after it. */
#define SC_CUDA_LAUNCHED(fn) SC_CUDA_TRY(fn, cudaGetLastError())

static inline cudaStream_t sc_cuda_stream(void *s) {
  return (cudaStream_t)s;
}

/* Exclusive prefix sum of v over the block (blockDim.x a multiple of 32, at
 * most 1024); *total gets the block's sum. Every thread must call it. */
__device__ static inline unsigned long long sc_block_exclusive_scan(unsigned long long v,
                                                                    unsigned long long *total) {
  __shared__ unsigned long long warp_before[32];
  __shared__ unsigned long long block_total;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const unsigned nwarps = blockDim.x >> 5;
  unsigned long long inc = v;
  for (unsigned d = 1; d < 32; d <<= 1) {
    unsigned long long o = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += o;
  }
  if (lane == 31) warp_before[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    unsigned long long w = lane < nwarps ? warp_before[lane] : 0;
    unsigned long long wi = w;
    for (unsigned d = 1; d < 32; d <<= 1) {
      unsigned long long o = __shfl_up_sync(0xffffffffu, wi, d);
      if (lane >= d) wi += o;
    }
    if (lane < nwarps) warp_before[lane] = wi - w;
    if (lane == 31) block_total = wi;
  }
  __syncthreads();
  unsigned long long before = warp_before[warp] + (inc - v);
  *total = block_total;
  __syncthreads(); /* a next call may overwrite the shared words */
  return before;
}

#endif
