/* SPDX-License-Identifier: BSD-3-Clause */
/* MSTopK on the device (docs/CUDA.md, "Top-k"): the statistics pass (sum of
 * the finite magnitudes, their count and largest key, the infinities) as one
 * grid-stride kernel with warp reductions and one atomic per warp. The
 * counting rounds and the band's list run through sc_cuda_topk_above; the
 * decisions are kernels/topk_mstopk.h's, taken on the host by the caller
 * (kernels/devrt.c). */
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/hd.h"
#include "kernels/topk_mstopk.h"

namespace {

/* The accumulators at the start of the workspace. */
struct MstStats {
  double sum;
  unsigned long long nfinite, ninf, max_key;
};

template <typename B>
__global__ void k_mstopk_stats(const B *x, uint64_t n, sc_dtype_t dt, B abs_mask, B inf,
                               MstStats *st) {
  double s = 0;
  unsigned long long nf = 0, ni = 0, mx = 0;
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const B m = (B)(x[i] & abs_mask);
    if (m < inf) {
      s += sc_mstopk_key_value(dt, (uint64_t)m);
      nf++;
      mx = (unsigned long long)m > mx ? (unsigned long long)m : mx;
    } else if (m == inf) {
      ni++;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_down_sync(0xffffffffu, s, o);
    nf += __shfl_down_sync(0xffffffffu, nf, o);
    ni += __shfl_down_sync(0xffffffffu, ni, o);
    const unsigned long long om = __shfl_down_sync(0xffffffffu, mx, o);
    mx = om > mx ? om : mx;
  }
  if ((threadIdx.x & 31u) == 0) {
    atomicAdd(&st->sum, s);
    atomicAdd(&st->nfinite, nf);
    atomicAdd(&st->ninf, ni);
    atomicMax(&st->max_key, mx);
  }
}

template <typename B>
void launch_stats(const void *x, uint64_t n, sc_dtype_t dt, uint64_t abs_mask, MstStats *st,
                  cudaStream_t s) {
  const unsigned g = sc_hd_grid(n, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  k_mstopk_stats<B>
      <<<g, SC_CUDA_BLOCK, 0, s>>>((const B *)x, n, dt, (B)abs_mask, (B)sc_mstopk_inf_key(dt), st);
}

} // namespace

extern "C" const void *sc_cuda_mstopk_module_kernel(void) {
  return (const void *)k_mstopk_stats<uint32_t>;
}

extern "C" sc_result_t sc_cuda_mstopk_stats(const void *x, size_t n, sc_dtype_t dtype,
                                            sc_cuda_mstopk_stats_t *out, void *workspace,
                                            size_t workspace_bytes, void *stream) {
  const char *fn = "sc_cuda_mstopk_stats";
  if (!out) return SC_ERR(SC_ERR_INVALID_ARG, "%s: out is NULL", fn);
  *out = sc_cuda_mstopk_stats_t{};
  const size_t es = sc_dtype_size(dtype);
  if (es != 2 && es != 4 && es != 8)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not floating point", fn, (int)dtype);
  if (n == 0) return SC_SUCCESS;
  if (!x) return SC_ERR(SC_ERR_INVALID_ARG, "%s: x is NULL with n %zu", fn, n);
  if (!workspace || workspace_bytes < sizeof(MstStats) || (uintptr_t)workspace % 8)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: workspace %p of %zu bytes (%zu, 8-aligned, needed)", fn,
                  workspace, workspace_bytes, sizeof(MstStats));
  cudaStream_t s = sc_cuda_stream(stream);
  MstStats *st = (MstStats *)workspace;
  SC_CUDA_TRY(fn, cudaMemsetAsync(st, 0, sizeof *st, s));
  if (es == 2)
    launch_stats<uint16_t>(x, n, dtype, 0x7fffu, st, s);
  else if (es == 4)
    launch_stats<uint32_t>(x, n, dtype, 0x7fffffffu, st, s);
  else
    launch_stats<uint64_t>(x, n, dtype, 0x7fffffffffffffffull, st, s);
  SC_CUDA_LAUNCHED(fn);
  MstStats h;
  SC_CUDA_TRY(fn, cudaMemcpyAsync(&h, st, sizeof h, cudaMemcpyDeviceToHost, s));
  SC_CUDA_TRY(fn, cudaStreamSynchronize(s));
  out->sum = h.sum;
  out->nfinite = h.nfinite;
  out->ninf = h.ninf;
  out->max_key = h.max_key;
  return SC_SUCCESS;
}

extern "C" sc_result_t sc_cuda_copy_wait(void *dst, const void *src, size_t bytes, void *stream) {
  const char *fn = "sc_cuda_copy_wait";
  cudaStream_t s = sc_cuda_stream(stream);
  if (bytes) SC_CUDA_TRY(fn, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  SC_CUDA_TRY(fn, cudaStreamSynchronize(s));
  return SC_SUCCESS;
}
