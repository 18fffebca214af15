/* SPDX-License-Identifier: BSD-3-Clause */
/* Top-k by magnitude on the device (docs/CUDA.md, "Top-k").
 *
 * Exact: a most-significant-digit radix select in the manner of RAFT's AIR
 * top-k. Each pass is one kernel that filters the elements by the key prefix
 * the earlier passes chose and histograms the next 11-bit digit of the ones
 * that pass (and, once they fit, appends them to a candidate list that the
 * next pass reads instead of the vector), then one block picks the bucket
 * holding the k-th largest key and updates the selection state in device
 * memory: the passes run back to back with no host round trip. A final
 * index-ordered compaction (per-tile counts, one scan, per-tile writes)
 * takes every key above the threshold and the lowest-index ties, which is the
 * CPU exact selector's answer. Every decision is a function of
 * kernels/cuda/hd_topk.h, replayed on the CPU by test/unit/test_cuda_topk_host.c.
 *
 * Gaussian: the primitives the host-side selector needs (the strided sample,
 * the count-and-compaction above a threshold key). */
#include <math.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/hd_topk.h"
#include "kernels/topk_top.h"

namespace {

#define SC_CHOOSE_THREADS 1024
#define SC_PASS_THREADS   256
#define SC_TOTAL_OFFSET   128

static_assert(sizeof(sc_radix_state_t) <= SC_TOTAL_OFFSET, "state overlaps the totals");
static_assert(SC_CHOOSE_THREADS * 2 >= (1 << SC_CUDA_RADIX_BITS), "two bins per chooser thread");

__global__ void k_radix_init(sc_radix_state_t *st, uint64_t n, uint64_t k, uint64_t cap) {
  sc_hd_radix_init(st, n, k, cap);
}

/* The fused filter and histogram of one pass. Warps walk the source in
 * lock step (base is warp-uniform) so that list appends can be reserved with
 * one atomic per warp. */
template <typename B>
__global__ void k_radix_pass(const B *x, uint64_t n, sc_hd_keyfmt_t f, unsigned shift,
                             unsigned width, sc_radix_state_t *st, uint32_t *hist, uint32_t *list_a,
                             uint32_t *list_b) {
  __shared__ uint32_t sh[1 << SC_CUDA_RADIX_BITS];
  const unsigned nb = 1u << width;
  for (unsigned b = threadIdx.x; b < nb; b += blockDim.x) sh[b] = 0;
  __syncthreads();
  const uint64_t prefix = st->prefix;
  const int src = st->src, dst = st->dst;
  const uint64_t len = sc_hd_radix_src_len(st, n);
  const uint32_t *in = src == SC_RADIX_LIST_A ? list_a : list_b;
  uint32_t *out = dst == SC_RADIX_LIST_A ? list_a : list_b;
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t base = (uint64_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); base < len;
       base += stride) {
    const uint64_t j = base + lane;
    int d = -1;
    uint32_t i = 0;
    if (j < len) {
      i = src == SC_RADIX_SRC_VECTOR ? (uint32_t)j : in[j];
      d = sc_hd_radix_digit(sc_hd_key((uint64_t)x[i], &f), shift, width, prefix);
      if (d >= 0) atomicAdd(&sh[d], 1u);
    }
    if (dst != 0) {
      const unsigned mask = __ballot_sync(0xffffffffu, d >= 0);
      if (mask) {
        const unsigned leader = __ffs(mask) - 1;
        uint32_t at = 0;
        if (lane == leader) at = atomicAdd(&st->len[dst], (uint32_t)__popc(mask));
        at = __shfl_sync(0xffffffffu, at, leader);
        if (d >= 0) out[at + __popc(mask & ((1u << lane) - 1u))] = i;
      }
    }
  }
  __syncthreads();
  for (unsigned b = threadIdx.x; b < nb; b += blockDim.x)
    if (sh[b]) atomicAdd(&hist[b], sh[b]);
}

/* Thread t owns the buckets at positions 2t, 2t + 1 counted from the top;
 * a scan gives each the count above it; the one bucket that holds the r-th
 * largest advances the state. */
__global__ void k_radix_choose(sc_radix_state_t *st, const uint32_t *hist, unsigned width) {
  const unsigned nb = 1u << width;
  const unsigned pos0 = threadIdx.x * 2;
  const uint64_t r = st->r; /* read before the scan's barriers; written after */
  unsigned long long mine = 0;
  for (unsigned q = 0; q < 2; q++)
    if (pos0 + q < nb) mine += hist[nb - 1 - (pos0 + q)];
  unsigned long long total;
  unsigned long long cum = sc_block_exclusive_scan(mine, &total);
  for (unsigned q = 0; q < 2; q++) {
    if (pos0 + q >= nb) break;
    const unsigned b = nb - 1 - (pos0 + q);
    const uint64_t c = hist[b];
    if (sc_hd_radix_hit(cum, c, r)) sc_hd_radix_advance(st, width, b, cum, c);
    cum += c;
  }
}

__device__ __forceinline__ unsigned long long pack_flags(unsigned fl) {
  return ((unsigned long long)(fl & 1u) << 32) | ((fl >> 1) & 1u);
}

/* Per-tile counts of keys above t and of ties (packed gt << 32 | eq; both
 * stay below 2^32 since n <= UINT32_MAX). Striped loads: order does not
 * matter for a count. */
template <typename B>
__global__ void k_select_count(const B *x, uint64_t n, sc_hd_keyfmt_t f, const uint64_t *t_dev,
                               uint64_t t_host, unsigned long long *tiles) {
  const uint64_t t = t_dev ? *t_dev : t_host;
  const uint64_t base = (uint64_t)blockIdx.x * SC_CUDA_TILE + threadIdx.x;
  unsigned long long c = 0;
#pragma unroll
  for (unsigned j = 0; j < SC_CUDA_TILE_ITEMS; j++) {
    const uint64_t i = base + (uint64_t)j * SC_CUDA_TILE_THREADS;
    if (i < n) c += pack_flags(sc_hd_select_flags((uint64_t)x[i], &f, t));
  }
  unsigned long long total;
  sc_block_exclusive_scan(c, &total);
  if (threadIdx.x == 0) tiles[blockIdx.x] = total;
}

/* Exclusive scan of the tile counts in place, by one block; *total gets the
 * sum. */
__global__ void k_tile_scan(unsigned long long *tiles, uint64_t ntiles, unsigned long long *total) {
  uint64_t b, e;
  sc_hd_chunk(ntiles, blockDim.x, threadIdx.x, &b, &e);
  unsigned long long s = 0;
  for (uint64_t i = b; i < e; i++) s += tiles[i];
  unsigned long long tot;
  unsigned long long before = sc_block_exclusive_scan(s, &tot);
  for (uint64_t i = b; i < e; i++) {
    const unsigned long long v = tiles[i];
    tiles[i] = before;
    before += v;
  }
  if (threadIdx.x == 0) *total = tot;
}

/* Each thread owns SC_CUDA_TILE_ITEMS consecutive elements (blocked, for the
 * index order); positions come from the tile's scanned offset and the
 * block's scan. Writes nothing when the selection exceeds cap. */
template <typename B>
__global__ void k_select_write(const B *x, uint64_t n, sc_hd_keyfmt_t f, const uint64_t *t_dev,
                               uint64_t t_host, const uint64_t *r_dev,
                               const unsigned long long *tiles, const unsigned long long *total,
                               uint64_t cap, uint32_t *out) {
  const uint64_t t = t_dev ? *t_dev : t_host;
  const uint64_t r = r_dev ? *r_dev : 0;
  const unsigned long long tot = *total;
  if (sc_hd_select_total(tot >> 32, tot & 0xffffffffu, r) > cap) return; /* block-uniform */
  const uint64_t base =
      (uint64_t)blockIdx.x * SC_CUDA_TILE + (uint64_t)threadIdx.x * SC_CUDA_TILE_ITEMS;
  unsigned fl[SC_CUDA_TILE_ITEMS];
  unsigned long long c = 0;
#pragma unroll
  for (unsigned j = 0; j < SC_CUDA_TILE_ITEMS; j++) {
    const uint64_t i = base + j;
    fl[j] = i < n ? sc_hd_select_flags((uint64_t)x[i], &f, t) : 0u;
    c += pack_flags(fl[j]);
  }
  unsigned long long block_total;
  const unsigned long long before = sc_block_exclusive_scan(c, &block_total) + tiles[blockIdx.x];
  uint64_t gt = before >> 32, eq = before & 0xffffffffu;
#pragma unroll
  for (unsigned j = 0; j < SC_CUDA_TILE_ITEMS; j++) {
    if (!fl[j]) continue;
    uint64_t pos;
    if (sc_hd_select_take(fl[j], gt, eq, r, &pos)) out[pos] = (uint32_t)(base + j);
    gt += fl[j] & 1u;
    eq += (fl[j] >> 1) & 1u;
  }
}

template <typename B>
__global__ void k_sample(const B *x, sc_dtype_t dtype, sc_hd_keyfmt_t f, uint64_t cnt,
                         uint64_t stride, uint64_t first, double *out) {
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < cnt; j += step)
    out[j] = sc_hd_key_value(sc_hd_mag((uint64_t)x[first + j * stride], &f), dtype);
}

/* The workspace carved per sc_hd_topk_layout. */
struct Ws {
  sc_hd_topk_layout_t l;
  sc_radix_state_t *st;
  unsigned long long *total;
  uint32_t *hist, *list_a, *list_b;
  unsigned long long *tiles;
  double *sample;
  uint64_t ntiles;
};

sc_result_t check_args(const char *fn, const void *x, size_t n, sc_dtype_t dtype, void *ws,
                       size_t ws_bytes, sc_hd_keyfmt_t *f, Ws *w) {
  *f = sc_hd_keyfmt(dtype);
  if (f->key_bits == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not floating point", fn, (int)dtype);
  if (n > UINT32_MAX) return SC_ERR(SC_ERR_INVALID_ARG, "%s: n %zu exceeds UINT32_MAX", fn, n);
  if (n && !x) return SC_ERR(SC_ERR_INVALID_ARG, "%s: x is NULL with n %zu", fn, n);
  w->ntiles = sc_hd_tiles(n);
  w->l = sc_hd_topk_layout(n, w->ntiles);
  if (n && (!ws || ws_bytes < w->l.bytes))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: workspace of %zu bytes, %llu needed for n %zu", fn,
                  ws ? ws_bytes : 0, (unsigned long long)w->l.bytes, n);
  char *base = (char *)ws;
  w->st = (sc_radix_state_t *)(base + w->l.state);
  w->total = (unsigned long long *)(base + w->l.state + SC_TOTAL_OFFSET);
  w->hist = (uint32_t *)(base + w->l.hist);
  w->tiles = (unsigned long long *)(base + w->l.tiles);
  w->sample = (double *)(base + w->l.sample);
  w->list_a = (uint32_t *)(base + w->l.list_a);
  w->list_b = (uint32_t *)(base + w->l.list_b);
  return SC_SUCCESS;
}

/* Count, scan and (when the selection fits cap) write the index-ordered
 * selection against a threshold in device memory (t_dev, r_dev) or given. */
template <typename B>
sc_result_t compact(const char *fn, const B *x, uint64_t n, sc_hd_keyfmt_t f, const Ws &w,
                    const uint64_t *t_dev, uint64_t t_host, const uint64_t *r_dev, uint64_t cap,
                    uint32_t *out, cudaStream_t s) {
  const unsigned g = (unsigned)w.ntiles;
  k_select_count<B><<<g, SC_CUDA_TILE_THREADS, 0, s>>>(x, n, f, t_dev, t_host, w.tiles);
  k_tile_scan<<<1, 1024, 0, s>>>(w.tiles, w.ntiles, w.total);
  k_select_write<B><<<g, SC_CUDA_TILE_THREADS, 0, s>>>(x, n, f, t_dev, t_host, r_dev, w.tiles,
                                                       w.total, cap, out);
  SC_CUDA_LAUNCHED(fn);
  return SC_SUCCESS;
}

template <typename B>
sc_result_t exact(const B *x, uint64_t n, sc_hd_keyfmt_t f, uint64_t k, uint32_t *indices,
                  const Ws &w, cudaStream_t s, uint64_t *nnz) {
  const char *fn = "sc_cuda_topk_exact";
  /* k >= n takes every non-NaN entry: threshold 0 with n ties allowed. */
  k_radix_init<<<1, 1, 0, s>>>(w.st, n, k < n ? k : n, w.l.cap);
  if (k < n) {
    const unsigned passes = sc_hd_radix_passes(f.key_bits);
    SC_CUDA_TRY(
        fn, cudaMemsetAsync(w.hist, 0, (size_t)passes * sizeof(uint32_t) << SC_CUDA_RADIX_BITS, s));
    const unsigned g = sc_hd_grid(n, SC_PASS_THREADS, SC_CUDA_MAX_BLOCKS);
    for (unsigned p = 0; p < passes; p++) {
      unsigned shift, width;
      sc_hd_radix_pass(f.key_bits, p, &shift, &width);
      uint32_t *hist = w.hist + ((size_t)p << SC_CUDA_RADIX_BITS);
      k_radix_pass<B>
          <<<g, SC_PASS_THREADS, 0, s>>>(x, n, f, shift, width, w.st, hist, w.list_a, w.list_b);
      k_radix_choose<<<1, SC_CHOOSE_THREADS, 0, s>>>(w.st, hist, width);
    }
  }
  SC_CHECK(compact<B>(fn, x, n, f, w, &w.st->prefix, 0, &w.st->r, k, indices, s));
  sc_radix_state_t st;
  unsigned long long tot;
  SC_CUDA_TRY(fn, cudaMemcpyAsync(&st, w.st, sizeof st, cudaMemcpyDeviceToHost, s));
  SC_CUDA_TRY(fn, cudaMemcpyAsync(&tot, w.total, sizeof tot, cudaMemcpyDeviceToHost, s));
  SC_CUDA_TRY(fn, cudaStreamSynchronize(s));
  *nnz = sc_hd_select_total(tot >> 32, tot & 0xffffffffu, st.r);
  return SC_SUCCESS;
}

template <typename B>
sc_result_t above(const B *x, uint64_t n, sc_hd_keyfmt_t f, uint64_t key, uint32_t *indices,
                  uint64_t cap, const Ws &w, cudaStream_t s, uint64_t *count) {
  const char *fn = "sc_cuda_topk_above";
  SC_CHECK(compact<B>(fn, x, n, f, w, NULL, key, NULL, cap, indices, s));
  unsigned long long tot;
  SC_CUDA_TRY(fn, cudaMemcpyAsync(&tot, w.total, sizeof tot, cudaMemcpyDeviceToHost, s));
  SC_CUDA_TRY(fn, cudaStreamSynchronize(s));
  *count = tot >> 32;
  return SC_SUCCESS;
}

} // namespace

extern "C" const void *sc_cuda_topk_module_kernel(void) {
  return (const void *)k_radix_init;
}

extern "C" size_t sc_cuda_topk_workspace_size(size_t n, sc_dtype_t dtype) {
  if (sc_hd_keyfmt(dtype).key_bits == 0) return 0;
  return (size_t)sc_hd_topk_layout(n, sc_hd_tiles(n)).bytes;
}

extern "C" uint64_t sc_cuda_topk_threshold_key(sc_dtype_t dtype, double t) {
  return sc_hd_threshold_key(dtype, t);
}

extern "C" sc_result_t sc_cuda_topk_exact(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                          uint32_t *indices, void *values, size_t *nnz,
                                          void *workspace, size_t workspace_bytes, void *stream) {
  const char *fn = "sc_cuda_topk_exact";
  if (!nnz) return SC_ERR(SC_ERR_INVALID_ARG, "%s: nnz is NULL", fn);
  *nnz = 0;
  sc_hd_keyfmt_t f;
  Ws w;
  SC_CHECK(check_args(fn, x, n, dtype, workspace, workspace_bytes, &f, &w));
  if (k == 0 || n == 0) return SC_SUCCESS;
  if (!indices) return SC_ERR(SC_ERR_INVALID_ARG, "%s: indices is NULL with k %zu", fn, k);
  cudaStream_t s = sc_cuda_stream(stream);
  uint64_t got = 0;
  sc_result_t r;
  if (f.size == 2)
    r = exact<uint16_t>((const uint16_t *)x, n, f, k, indices, w, s, &got);
  else if (f.size == 4)
    r = exact<uint32_t>((const uint32_t *)x, n, f, k, indices, w, s, &got);
  else
    r = exact<uint64_t>((const uint64_t *)x, n, f, k, indices, w, s, &got);
  if (r != SC_SUCCESS) return r;
  *nnz = (size_t)got;
  if (values) SC_CHECK(sc_cuda_sparse_gather(values, x, indices, *nnz, dtype, stream));
  return SC_SUCCESS;
}

extern "C" sc_result_t sc_cuda_topk_above(const void *x, size_t n, sc_dtype_t dtype, uint64_t key,
                                          uint32_t *indices, size_t cap, size_t *count,
                                          void *workspace, size_t workspace_bytes, void *stream) {
  const char *fn = "sc_cuda_topk_above";
  if (!count) return SC_ERR(SC_ERR_INVALID_ARG, "%s: count is NULL", fn);
  *count = 0;
  sc_hd_keyfmt_t f;
  Ws w;
  SC_CHECK(check_args(fn, x, n, dtype, workspace, workspace_bytes, &f, &w));
  if (n == 0) return SC_SUCCESS;
  if (cap && !indices)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: indices is NULL with cap %zu", fn, cap);
  cudaStream_t s = sc_cuda_stream(stream);
  uint64_t got = 0;
  sc_result_t r;
  if (f.size == 2)
    r = above<uint16_t>((const uint16_t *)x, n, f, key, indices, cap, w, s, &got);
  else if (f.size == 4)
    r = above<uint32_t>((const uint32_t *)x, n, f, key, indices, cap, w, s, &got);
  else
    r = above<uint64_t>((const uint64_t *)x, n, f, key, indices, cap, w, s, &got);
  *count = (size_t)got;
  return r;
}

extern "C" sc_result_t sc_cuda_topk_sample(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                           double *top, size_t *h, size_t *taken, void *workspace,
                                           size_t workspace_bytes, void *stream) {
  const char *fn = "sc_cuda_topk_sample";
  if (!top || !h || !taken)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !top ? "top" : (!h ? "h" : "taken"));
  *h = *taken = 0;
  sc_hd_keyfmt_t f;
  Ws w;
  SC_CHECK(check_args(fn, x, n, dtype, workspace, workspace_bytes, &f, &w));
  if (k == 0 || k >= n)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: k %zu outside (0, n = %zu)", fn, k, n);
  uint64_t cnt, stride, first;
  sc_hd_sample_plan(n, k, &cnt, &stride, &first);
  cudaStream_t s = sc_cuda_stream(stream);
  const unsigned g = sc_hd_grid(cnt, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS);
  if (f.size == 2)
    k_sample<uint16_t>
        <<<g, SC_CUDA_BLOCK, 0, s>>>((const uint16_t *)x, dtype, f, cnt, stride, first, w.sample);
  else if (f.size == 4)
    k_sample<uint32_t>
        <<<g, SC_CUDA_BLOCK, 0, s>>>((const uint32_t *)x, dtype, f, cnt, stride, first, w.sample);
  else
    k_sample<uint64_t>
        <<<g, SC_CUDA_BLOCK, 0, s>>>((const uint64_t *)x, dtype, f, cnt, stride, first, w.sample);
  SC_CUDA_LAUNCHED(fn);
  /* At most 128 KiB, sorted on the host: the decisions that follow run there. */
  double *v = (double *)malloc(cnt * sizeof(double));
  if (!v) return SC_ERR(SC_ERR_NOMEM, "%s: %llu sample values", fn, (unsigned long long)cnt);
  cudaError_t e = cudaMemcpyAsync(v, w.sample, cnt * sizeof(double), cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) {
    free(v);
    return SC_ERR(SC_ERR_SYSTEM, "%s: copying the sample back failed: %s", fn,
                  cudaGetErrorString(e));
  }
  /* The CPU selector's own heap, not a sort of the whole sample (1.76 ms
   * against 0.10 on the development VM: kernels/topk_top.h). */
  *h = sc_topk_largest_desc(v, (size_t)cnt, top, SC_CUDA_TOPK_TOP);
  *taken = (size_t)cnt;
  free(v);
  return SC_SUCCESS;
}
