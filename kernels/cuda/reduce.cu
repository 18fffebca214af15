/* SPDX-License-Identifier: BSD-3-Clause */
/* Element-wise reduction and AVG finalization on the device. One template
 * per (dtype, op): a vector kernel moves 16 bytes per load and store when
 * every pointer shares its offset modulo 16 (a short scalar head brings them
 * to a boundary), a scalar kernel does the head and the tail, or everything
 * when the offsets differ. The element arithmetic is kernels/cuda/hd.h's,
 * which the CPU tests check against kernels/cpu/reduce.c. */
#include "kernels/cuda/cuda_tags.cuh"
#include "kernels/cuda/cuda_util.cuh"

namespace {

using namespace sc_cuda;

/* Both inputs are loaded before dst is stored, so exact aliasing is safe. */
template <class Tag, int OP>
__global__ void k_reduce_vec(typename Tag::T *dst, const typename Tag::T *a,
                             const typename Tag::T *b, uint64_t head, uint64_t nvec) {
  const uint4 *va = reinterpret_cast<const uint4 *>(a + head);
  const uint4 *vb = reinterpret_cast<const uint4 *>(b + head);
  uint4 *vd = reinterpret_cast<uint4 *>(dst + head);
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += stride) {
    Vec<Tag> x, y;
    x.u = va[v];
    y.u = vb[v];
#pragma unroll
    for (unsigned j = 0; j < sizeof x.e / sizeof x.e[0]; j++) x.e[j] = Tag::red(OP, x.e[j], y.e[j]);
    vd[v] = x.u;
  }
}

template <class Tag, int OP>
__global__ void k_reduce_scalar(typename Tag::T *dst, const typename Tag::T *a,
                                const typename Tag::T *b, sc_hd_vec_plan_t p) {
  const uint64_t m = p.head + p.tail;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride) {
    uint64_t i = sc_hd_vec_scalar_index(&p, j);
    dst[i] = Tag::red(OP, a[i], b[i]);
  }
}

template <class Tag>
__global__ void k_avg_vec(typename Tag::T *buf, uint64_t head, uint64_t nvec, int d) {
  uint4 *vb = reinterpret_cast<uint4 *>(buf + head);
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += stride) {
    Vec<Tag> x;
    x.u = vb[v];
#pragma unroll
    for (unsigned j = 0; j < sizeof x.e / sizeof x.e[0]; j++) x.e[j] = Tag::avg(x.e[j], d);
    vb[v] = x.u;
  }
}

template <class Tag> __global__ void k_avg_scalar(typename Tag::T *buf, sc_hd_vec_plan_t p, int d) {
  const uint64_t m = p.head + p.tail;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += stride) {
    uint64_t i = sc_hd_vec_scalar_index(&p, j);
    buf[i] = Tag::avg(buf[i], d);
  }
}

template <class Tag, int OP>
sc_result_t launch_reduce(void *dst, const void *a, const void *b, size_t n, cudaStream_t s) {
  typedef typename Tag::T T;
  const uint64_t addrs[3] = {(uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)a,
                             (uint64_t)(uintptr_t)b};
  sc_hd_vec_plan_t p = sc_hd_vec_plan(addrs, 3, n, sizeof(T));
  uint32_t g = sc_hd_grid(p.nvec, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  if (g)
    k_reduce_vec<Tag, OP>
        <<<g, SC_CUDA_BLOCK, 0, s>>>((T *)dst, (const T *)a, (const T *)b, p.head, p.nvec);
  g = sc_hd_grid(p.head + p.tail, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  if (g)
    k_reduce_scalar<Tag, OP><<<g, SC_CUDA_BLOCK, 0, s>>>((T *)dst, (const T *)a, (const T *)b, p);
  SC_CUDA_LAUNCHED("sc_cuda_reduce");
  return SC_SUCCESS;
}

template <class Tag>
sc_result_t launch_reduce_op(sc_redop_t op, void *dst, const void *a, const void *b, size_t n,
                             cudaStream_t s) {
  switch (op) {
  case SC_PROD:
    return launch_reduce<Tag, SC_PROD>(dst, a, b, n, s);
  case SC_MIN:
    return launch_reduce<Tag, SC_MIN>(dst, a, b, n, s);
  case SC_MAX:
    return launch_reduce<Tag, SC_MAX>(dst, a, b, n, s);
  default: /* SUM, and AVG, whose division is sc_cuda_avg_finalize's */
    return launch_reduce<Tag, SC_SUM>(dst, a, b, n, s);
  }
}

template <class Tag> sc_result_t launch_avg(void *buf, size_t n, int d, cudaStream_t s) {
  typedef typename Tag::T T;
  const uint64_t addr = (uint64_t)(uintptr_t)buf;
  sc_hd_vec_plan_t p = sc_hd_vec_plan(&addr, 1, n, sizeof(T));
  uint32_t g = sc_hd_grid(p.nvec, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  if (g) k_avg_vec<Tag><<<g, SC_CUDA_BLOCK, 0, s>>>((T *)buf, p.head, p.nvec, d);
  g = sc_hd_grid(p.head + p.tail, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  if (g) k_avg_scalar<Tag><<<g, SC_CUDA_BLOCK, 0, s>>>((T *)buf, p, d);
  SC_CUDA_LAUNCHED("sc_cuda_avg_finalize");
  return SC_SUCCESS;
}

} // namespace

extern "C" const void *sc_cuda_reduce_module_kernel(void) {
  return (const void *)k_reduce_vec<Tag_f32, SC_SUM>;
}

extern "C" sc_result_t sc_cuda_reduce(void *dst, const void *a, const void *b, size_t count,
                                      sc_dtype_t dtype, sc_redop_t op, void *stream) {
  const char *fn = "sc_cuda_reduce";
  if (sc_dtype_size(dtype) == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if ((unsigned)op > SC_AVG)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, (int)op);
  if (count == 0) return SC_SUCCESS;
  if (!dst || !a || !b)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with count %zu", fn,
                  !dst ? "dst" : (!a ? "a" : "b"), count);
  cudaStream_t s = sc_cuda_stream(stream);
  switch (dtype) {
#define SC_CASE(DTYPE, TYPE, SFX)                                                                  \
  case DTYPE:                                                                                      \
    return launch_reduce_op<Tag_##SFX>(op, dst, a, b, count, s);
    SC_HD_FOR_EACH_DTYPE(SC_CASE)
#undef SC_CASE
  }
  return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
}

extern "C" sc_result_t sc_cuda_avg_finalize(void *buf, size_t count, sc_dtype_t dtype, int nranks,
                                            void *stream) {
  const char *fn = "sc_cuda_avg_finalize";
  if (sc_dtype_size(dtype) == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if (count == 0 || nranks <= 1) return SC_SUCCESS;
  if (!buf) return SC_ERR(SC_ERR_INVALID_ARG, "%s: buf is NULL with count %zu", fn, count);
  cudaStream_t s = sc_cuda_stream(stream);
  switch (dtype) {
#define SC_CASE(DTYPE, TYPE, SFX)                                                                  \
  case DTYPE:                                                                                      \
    return launch_avg<Tag_##SFX>(buf, count, nranks, s);
    SC_HD_FOR_EACH_DTYPE(SC_CASE)
#undef SC_CASE
  }
  return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
}
