/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel-driven all-reduce between the GPUs (or MPS clients of one GPU)
 * of one host: every block reads the peers' halves through their IPC
 * mappings and meets its peers' blocks at flags in device memory
 * (kernels/ipc_allreduce_plan.h has the layout, the plan and the protocol).
 * Peer data is loaded with ld.global.cg (L2, not L1: an SM's L1 is not kept
 * coherent with another process's writes); a barrier publishes the block's
 * writes with __syncthreads and a release store at system scope, and sees
 * the peers' with an acquire load. Every wait is bounded: by the host's
 * abort word and by a deadline on the global timer, and a block that gives up
 * writes why into its rank's status word for the host to read. */
#include "kernels/cuda/cuda_tags.cuh"
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/ipc_allreduce_plan.h"

namespace {

using namespace sc_cuda;
static_assert(SC_IPCAR_VEC == SC_CUDA_VEC_BYTES, "the plan's vector is a Vec");

__device__ __forceinline__ void st_release(volatile uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t ld_acquire(volatile uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Barrier value e for this block (the protocol of ipc_allreduce_plan.h).
 * Returns nonzero when a wait gave up; the status word says why. */
__device__ int barrier(const sc_ipcar_args_t &a, uint32_t e) {
  __syncthreads();
  uint32_t why = 0;
  const int t = threadIdx.x;
  if (t < a.nranks) {
    st_release(sc_ipcar_flag(a.region[t], blockIdx.x, (uint32_t)a.rank), e);
    volatile uint32_t *mine = sc_ipcar_flag(a.region[a.rank], blockIdx.x, (uint32_t)t);
    const uint64_t start = now_ns();
    for (unsigned spins = 1; !sc_ipcar_reached(ld_acquire(mine), e); spins++) {
      if ((spins & 1023u) != 0) continue;
      if (*a.abort_flag) {
        why = SC_IPCAR_ST_ABORTED | (uint32_t)t;
        break;
      }
      if (now_ns() - start > a.timeout_ns) {
        why = SC_IPCAR_ST_TIMEOUT | (uint32_t)t;
        break;
      }
    }
    if (!why && ld_acquire(sc_ipcar_status(a.region[t])) != 0) why = SC_IPCAR_ST_PEER | (uint32_t)t;
    if (why) atomicCAS(sc_ipcar_status(a.region[a.rank]), 0u, why);
  }
  return __syncthreads_or(why != 0);
}

template <class Tag> __device__ __forceinline__ Vec<Tag> load_cg(const uint8_t *half, uint64_t v) {
  Vec<Tag> x;
  x.u = __ldcg(reinterpret_cast<const uint4 *>(half) + v);
  return x;
}

/* Vector v's elements below count into out: one 16-byte store when out is
 * aligned and the vector is whole, element stores otherwise. */
template <class Tag>
__device__ __forceinline__ void store_out(typename Tag::T *out, int aligned, uint64_t v,
                                          uint64_t count, const Vec<Tag> &x) {
  const unsigned ve = sizeof x.e / sizeof x.e[0];
  const uint64_t e0 = v * ve;
  if (aligned && e0 + ve <= count) {
    reinterpret_cast<uint4 *>(out)[v] = x.u;
    return;
  }
  for (unsigned j = 0; j < ve && e0 + j < count; j++) out[e0 + j] = x.e[j];
}

/* Vector v reduced over every rank's half, in rank order. */
template <class Tag, int OP>
__device__ __forceinline__ Vec<Tag> reduce_vec(const sc_ipcar_args_t &a, uint64_t v) {
  Vec<Tag> acc = load_cg<Tag>(a.region[0] + a.half_off, v);
  for (int j = 1; j < a.nranks; j++) {
    Vec<Tag> x = load_cg<Tag>(a.region[j] + a.half_off, v);
#pragma unroll
    for (unsigned k = 0; k < sizeof acc.e / sizeof acc.e[0]; k++)
      acc.e[k] = Tag::red(OP, acc.e[k], x.e[k]);
  }
  if (a.op == SC_AVG) {
#pragma unroll
    for (unsigned k = 0; k < sizeof acc.e / sizeof acc.e[0]; k++)
      acc.e[k] = Tag::avg(acc.e[k], a.nranks);
  }
  return acc;
}

template <class Tag, int OP>
__global__ void __launch_bounds__(SC_IPCAR_THREADS) k_ipc_allreduce(sc_ipcar_args_t a) {
  typedef typename Tag::T T;
  T *out = static_cast<T *>(a.out);
  const int aligned = ((uintptr_t)a.out % SC_IPCAR_VEC) == 0;
  const uint64_t nvec = sc_ipcar_vecs(a.count, sizeof(T));
  const uint64_t first = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  if (barrier(a, a.epoch)) return;
  if (a.mode == SC_IPCAR_ONESHOT) {
    for (uint64_t v = first; v < nvec; v += stride)
      store_out<Tag>(out, aligned, v, a.count, reduce_vec<Tag, OP>(a, v));
    return;
  }
  uint64_t b, e;
  sc_ipcar_chunk(nvec, (uint32_t)a.nranks, (uint32_t)a.rank, &b, &e);
  uint4 *mine = reinterpret_cast<uint4 *>(a.region[a.rank] + a.half_off);
  for (uint64_t u = first; b + u < e; u += stride)
    __stcg(mine + b + u, reduce_vec<Tag, OP>(a, b + u).u);
  if (barrier(a, a.epoch + 1)) return;
  /* Each rank starts with the chunk after its own, so that the ranks do not
   * all read one peer's memory at once. */
  for (int s = 0; s < a.nranks; s++) {
    const int j = (a.rank + 1 + s) % a.nranks;
    sc_ipcar_chunk(nvec, (uint32_t)a.nranks, (uint32_t)j, &b, &e);
    for (uint64_t u = first; b + u < e; u += stride)
      store_out<Tag>(out, aligned, b + u, a.count, load_cg<Tag>(a.region[j] + a.half_off, b + u));
  }
}

template <class Tag> sc_result_t launch(const sc_ipcar_args_t &a, cudaStream_t s) {
  dim3 grid((unsigned)a.nblocks), block(SC_IPCAR_THREADS);
  switch (a.op) {
  case SC_PROD:
    k_ipc_allreduce<Tag, SC_PROD><<<grid, block, 0, s>>>(a);
    break;
  case SC_MIN:
    k_ipc_allreduce<Tag, SC_MIN><<<grid, block, 0, s>>>(a);
    break;
  case SC_MAX:
    k_ipc_allreduce<Tag, SC_MAX><<<grid, block, 0, s>>>(a);
    break;
  default: /* SUM, and AVG, which divides at the end */
    k_ipc_allreduce<Tag, SC_SUM><<<grid, block, 0, s>>>(a);
    break;
  }
  SC_CUDA_LAUNCHED("sc_cuda_ipc_allreduce");
  return SC_SUCCESS;
}

} // namespace

extern "C" const void *sc_cuda_ipcar_module_kernel(void) {
  return (const void *)k_ipc_allreduce<Tag_f32, SC_SUM>;
}

extern "C" sc_result_t sc_cuda_ipc_allreduce(const sc_ipcar_args_t *a, void *stream) {
  const char *fn = "sc_cuda_ipc_allreduce";
  if (a->nranks < 1 || a->nranks > SC_IPCAR_MAX_RANKS || a->rank < 0 || a->rank >= a->nranks ||
      a->nblocks < 1 || a->nblocks > SC_IPCAR_MAX_BLOCKS)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: rank %d of %d, %d blocks", fn, a->rank, a->nranks,
                  a->nblocks);
  if ((unsigned)a->op > SC_AVG)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, a->op);
  if (a->count == 0) return SC_SUCCESS;
  cudaStream_t s = sc_cuda_stream(stream);
  switch ((sc_dtype_t)a->dtype) {
#define SC_CASE(DTYPE, TYPE, SFX)                                                                  \
  case DTYPE:                                                                                      \
    return launch<Tag_##SFX>(*a, s);
    SC_HD_FOR_EACH_DTYPE(SC_CASE)
#undef SC_CASE
  }
  return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, a->dtype);
}

extern "C" sc_result_t sc_cuda_ipcar_geometry(int *sms, int *blocks_per_sm) {
  const char *fn = "sc_cuda_ipcar_geometry";
  int dev = 0;
  SC_CUDA_TRY(fn, cudaGetDevice(&dev));
  SC_CUDA_TRY(fn, cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
  SC_CUDA_TRY(fn, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                      blocks_per_sm, k_ipc_allreduce<Tag_f64, SC_SUM>, SC_IPCAR_THREADS, 0));
  return SC_SUCCESS;
}
