/* SPDX-License-Identifier: BSD-3-Clause */
/* Per-dtype tags of the element-wise kernels (kernels/cuda/reduce.cu,
 * kernels/cuda/ipc_allreduce.cu): Tag_<suffix> gives a dtype's element type
 * and kernels/cuda/hd.h's arithmetic; Vec<Tag> is one 16-byte vector of its
 * elements. C++ (nvcc) only. */
#ifndef SC_KERNELS_CUDA_CUDA_TAGS_CUH
#define SC_KERNELS_CUDA_CUDA_TAGS_CUH

#include "kernels/cuda/hd.h"
#include "kernels/cuda/hd_launch.h"

namespace sc_cuda {

#define SC_TAG(DTYPE, TYPE, SFX)                                                                   \
  struct Tag_##SFX {                                                                               \
    typedef TYPE T;                                                                                \
    static __device__ __forceinline__ T red(int op, T x, T y) {                                    \
      return sc_hd_red_##SFX(op, x, y);                                                            \
    }                                                                                              \
    static __device__ __forceinline__ T avg(T x, int d) {                                          \
      return sc_hd_avg_##SFX(x, d);                                                                \
    }                                                                                              \
  };
SC_HD_FOR_EACH_DTYPE(SC_TAG)
#undef SC_TAG

template <class Tag> union Vec {
  uint4 u;
  typename Tag::T e[SC_CUDA_VEC_BYTES / sizeof(typename Tag::T)];
};

} // namespace sc_cuda

#endif
