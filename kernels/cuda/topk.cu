/* SPDX-License-Identifier: BSD-3-Clause */
/* Top-k by magnitude on the device (docs/CUDA.md, "Top-k").
 *
 * Exact: a most-significant-digit radix select in the manner of RAFT's AIR
 * top-k. Each pass is one kernel that filters the elements by the key prefix
 * the earlier passes chose and histograms the next 11-bit digit of the ones
 * that pass; its last block to finish picks the bucket holding the k-th
 * largest key and updates the selection state in device memory: the passes
 * run back to back with no host round trip. Once the superset of the selection (every key
 * whose chosen bits are at least the prefix) fits the candidate list, the
 * next pass over the vector appends it there and later passes read only the
 * list. The answer is the CPU exact selector's: every key above the
 * threshold and the lowest-index ties, in index order. With the list kept,
 * its selected entries are marked in two bitmaps that one count, one scan
 * and one write compact in index order, so the vector is read twice in all
 * (the first two passes); otherwise (k >= n, or ties too many for the list)
 * the same count, scan and write run over the vector. Every decision is a
 * function of kernels/cuda/hd_topk.h, replayed on the CPU by
 * test/unit/test_cuda_topk_host.c.
 *
 * Gaussian: the primitives the host-side selector needs (the strided sample,
 * the count-and-compaction above a threshold key). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/hd_topk.h"
#include "kernels/topk_top.h"

namespace {

#define SC_PASS_THREADS 256
#define SC_TOTAL_OFFSET 128

static_assert(sizeof(sc_radix_state_t) <= SC_TOTAL_OFFSET, "state overlaps the totals");
static_assert(SC_CUDA_TILE_THREADS == SC_CUDA_MAP_THREADS, "one block size for both compactions");

/* The state, and the histograms of every pass zeroed. */
__global__ void k_radix_init(sc_radix_state_t *st, uint64_t n, uint64_t k, uint64_t cap,
                             uint32_t *hist, unsigned hist_words) {
  if (threadIdx.x == 0) sc_hd_radix_init(st, n, k, cap);
  for (unsigned i = threadIdx.x; i < hist_words; i += blockDim.x) hist[i] = 0;
}

/* A warp's staging of list appends in shared memory: appends gather there
 * and go to the list in one reservation per SC_WARP_STAGE entries, so that
 * the list's one counter (a single address every block updates) sees a few
 * atomics per warp and pass instead of one per warp and sweep. count is
 * warp-uniform. */
#define SC_WARP_STAGE 256
struct WarpStage {
  uint32_t *buf; /* SC_WARP_STAGE entries of the block's shared memory */
  unsigned count;
};

/* Moves the staged entries to the list. Every lane of the warp calls it. */
__device__ __forceinline__ void stage_flush(WarpStage &ws, sc_radix_state_t *st, uint32_t *list,
                                            uint64_t cap) {
  __syncwarp();
  if (ws.count == 0) return;
  const unsigned lane = threadIdx.x & 31u;
  uint32_t at = 0;
  if (lane == 0) at = atomicAdd(&st->len, ws.count);
  at = __shfl_sync(0xffffffffu, at, 0);
  for (unsigned j = lane; j < ws.count; j += 32)
    if ((uint64_t)at + j < cap) list[at + j] = ws.buf[j];
  __syncwarp();
  ws.count = 0;
}

/* Appends the elements whose bit is set in each lane's mask; slot q of a
 * lane is element index_of(q). Every lane of the warp calls it
 * (warp-uniform control flow). */
template <int M, typename F>
__device__ __forceinline__ void warp_append(unsigned mask, F index_of, WarpStage &ws,
                                            sc_radix_state_t *st, uint32_t *list, uint64_t cap) {
  static_assert(32 * M <= SC_WARP_STAGE, "one call's appends fit an empty stage");
  const unsigned c = __popc(mask);
  if (!__any_sync(0xffffffffu, c != 0)) return;
  const unsigned lane = threadIdx.x & 31u;
  unsigned inc = c;
#pragma unroll
  for (unsigned d = 1; d < 32; d <<= 1) {
    const unsigned o = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += o;
  }
  const unsigned total = __shfl_sync(0xffffffffu, inc, 31);
  if (ws.count + total > SC_WARP_STAGE) stage_flush(ws, st, list, cap);
  unsigned pos = ws.count + inc - c;
#pragma unroll
  for (int q = 0; q < M; q++)
    if ((mask >> q) & 1u) ws.buf[pos++] = index_of(q);
  ws.count += total;
}

/* One element of a pass: its digit into the block's histogram, and its bit
 * in the lane's append mask when the superset is being written. */
__device__ __forceinline__ unsigned pass_element(uint64_t key, unsigned shift, unsigned width,
                                                 uint64_t prefix, int write, uint32_t *sh) {
  const int d = sc_hd_radix_digit(key, shift, width, prefix);
  if (d >= 0) atomicAdd(&sh[d], 1u);
  return write && sc_hd_radix_keep(key, shift, width, prefix);
}

/* Elements per lane and sweep of the scalar loop: loaded before any is
 * used, so that each thread has that many loads in flight. */
#define SC_PASS_UNROLL 4
/* 16-byte vectors per lane and sweep of the vector loop: 8 elements per
 * lane (two vectors of 4-byte elements, one of 2-byte ones), so that one
 * call's appends fit a warp's stage. */
template <typename B> __host__ __device__ constexpr unsigned pass_vec_unroll() {
  return sizeof(B) == 2 ? 1 : 2;
}

/* The block's part of the pass over source entries [lo, hi) (the list's,
 * or the vector's elements one by one): warps walk it in lock step (base is
 * warp-uniform), each lane taking every 32nd entry, so that loads coalesce. */
template <typename B>
__device__ void pass_scalar(const B *x, const uint32_t *list, uint64_t lo, uint64_t hi,
                            sc_hd_keyfmt_t f, unsigned shift, unsigned width, uint64_t prefix,
                            int write, sc_radix_state_t *st, uint32_t *out, uint64_t cap,
                            uint32_t *sh, WarpStage &ws) {
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint64_t sweep = (uint64_t)gridDim.x * blockDim.x * SC_PASS_UNROLL;
  const unsigned lane = threadIdx.x & 31u;
  for (uint64_t base = lo + (tid & ~(uint64_t)31) * SC_PASS_UNROLL; base < hi; base += sweep) {
    uint32_t idx[SC_PASS_UNROLL];
    uint64_t key[SC_PASS_UNROLL];
#pragma unroll
    for (unsigned u = 0; u < SC_PASS_UNROLL; u++) {
      const uint64_t j = base + u * 32 + lane;
      idx[u] = j < hi ? (list ? list[j] : (uint32_t)j) : UINT32_MAX;
    }
#pragma unroll
    for (unsigned u = 0; u < SC_PASS_UNROLL; u++)
      key[u] = idx[u] != UINT32_MAX ? sc_hd_key((uint64_t)x[idx[u]], &f) : 0;
    unsigned mask = 0;
#pragma unroll
    for (unsigned u = 0; u < SC_PASS_UNROLL; u++)
      if (idx[u] != UINT32_MAX) mask |= pass_element(key[u], shift, width, prefix, write, sh) << u;
    if (write)
      warp_append<SC_PASS_UNROLL>(
          mask, [&](int q) { return idx[q]; }, ws, st, out, cap);
  }
}

/* The block's part of the pass over the vector's first nvec 16-byte vectors
 * (x 16-byte aligned): each lane loads whole vectors, grid-strided. */
template <typename B>
__device__ void pass_vector(const B *x, uint64_t nvec, sc_hd_keyfmt_t f, unsigned shift,
                            unsigned width, uint64_t prefix, int write, sc_radix_state_t *st,
                            uint32_t *out, uint64_t cap, uint32_t *sh, WarpStage &ws) {
  constexpr unsigned V = 16 / sizeof(B);
  constexpr unsigned U = pass_vec_unroll<B>();
  union Vec {
    uint4 u;
    B e[V];
  };
  const uint4 *xv = reinterpret_cast<const uint4 *>(x);
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  /* Warp-uniform trip count: every lane runs the appends' shuffles. */
  const uint64_t warp_first = tid & ~(uint64_t)31;
  for (uint64_t v0 = warp_first; v0 < nvec; v0 += stride * U) {
    Vec w[U];
    uint64_t vi[U];
#pragma unroll
    for (unsigned u = 0; u < U; u++) {
      vi[u] = v0 + (tid - warp_first) + u * stride;
      if (vi[u] < nvec) w[u].u = xv[vi[u]];
    }
    unsigned mask = 0;
#pragma unroll
    for (unsigned u = 0; u < U; u++)
      if (vi[u] < nvec)
#pragma unroll
        for (unsigned e = 0; e < V; e++)
          mask |= pass_element(sc_hd_key((uint64_t)w[u].e[e], &f), shift, width, prefix, write, sh)
                  << (u * V + e);
    if (write)
      warp_append<U * V>(
          mask, [&](int q) { return (uint32_t)(vi[q / V] * V + q % V); }, ws, st, out, cap);
  }
}

/* Thread t owns the buckets at positions t * per ... counted from the top;
 * a scan gives each the count above it; the one bucket that holds the r-th
 * largest advances the state. Run by one whole block. */
__device__ void radix_choose(sc_radix_state_t *st, const uint32_t *hist, unsigned width) {
  const unsigned nb = 1u << width;
  const unsigned per = (nb + blockDim.x - 1) / blockDim.x;
  const unsigned pos0 = threadIdx.x * per;
  const uint64_t r = st->r; /* read before the scan's barriers; written after */
  unsigned long long mine = 0;
  for (unsigned q = 0; q < per; q++)
    if (pos0 + q < nb) mine += __ldcg(&hist[nb - 1 - (pos0 + q)]);
  unsigned long long total;
  unsigned long long cum = sc_block_exclusive_scan(mine, &total);
  for (unsigned q = 0; q < per; q++) {
    if (pos0 + q >= nb) break;
    const unsigned b = nb - 1 - (pos0 + q);
    const uint64_t c = __ldcg(&hist[b]);
    if (sc_hd_radix_hit(cum, c, r)) sc_hd_radix_advance(st, width, b, cum, c);
    cum += c;
  }
}

/* One pass: the fused filter and histogram over the vector or the list,
 * the append of the superset when the state asks for it, and, in the block
 * that finishes last, the choice of the bucket (so a pass is one launch).
 * The first pass also zeroes the bitmaps (clear). vec: x is 16-byte
 * aligned. */
template <typename B>
__global__ void __launch_bounds__(SC_PASS_THREADS)
    k_radix_pass(const B *x, uint64_t n, sc_hd_keyfmt_t f, unsigned shift, unsigned width,
                 sc_radix_state_t *st, uint32_t *hist, uint32_t *list, uint4 *clear,
                 uint64_t nclear, int vec) {
  __shared__ uint32_t sh[1 << SC_CUDA_RADIX_BITS];
  __shared__ uint32_t stage[SC_PASS_THREADS / 32][SC_WARP_STAGE];
  __shared__ unsigned last;
  const unsigned nb = 1u << width;
  for (unsigned b = threadIdx.x; b < nb; b += blockDim.x) sh[b] = 0;
  if (clear)
    for (uint64_t w = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; w < nclear;
         w += (uint64_t)gridDim.x * blockDim.x)
      clear[w] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  const uint64_t prefix = st->prefix, cap = st->cap;
  const int write = st->write;
  WarpStage ws = {stage[threadIdx.x / 32], 0};
  if (st->src == SC_RADIX_SRC_LIST) {
    pass_scalar<B>(x, list, 0, st->len, f, shift, width, prefix, write, st, list, cap, sh, ws);
  } else if (vec) {
    const uint64_t nvec = n / (16 / sizeof(B));
    pass_vector<B>(x, nvec, f, shift, width, prefix, write, st, list, cap, sh, ws);
    pass_scalar<B>(x, NULL, nvec * (16 / sizeof(B)), n, f, shift, width, prefix, write, st, list,
                   cap, sh, ws);
  } else {
    pass_scalar<B>(x, NULL, 0, n, f, shift, width, prefix, write, st, list, cap, sh, ws);
  }
  if (write) stage_flush(ws, st, list, cap);
  __syncthreads();
  for (unsigned b = threadIdx.x; b < nb; b += blockDim.x)
    if (sh[b]) atomicAdd(&hist[b], sh[b]);
  /* The last block to finish sees every block's counts. */
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&st->done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  radix_choose(st, hist, width);
  if (threadIdx.x == 0) st->done = 0;
}

__device__ __forceinline__ unsigned long long pack_flags(unsigned fl) {
  return ((unsigned long long)(fl & 1u) << 32) | ((fl >> 1) & 1u);
}

/* Whether the radix state kept its list (then the compaction reads the
 * bitmaps, else the vector). No state (the Gaussian primitives): the
 * vector. */
__device__ __forceinline__ bool kept(const sc_radix_state_t *st) {
  return st && st->src == SC_RADIX_SRC_LIST;
}

__device__ __forceinline__ unsigned long long pack_words(uint4 g, uint4 e) {
  return ((unsigned long long)(__popc(g.x) + __popc(g.y) + __popc(g.z) + __popc(g.w)) << 32) |
         (unsigned)(__popc(e.x) + __popc(e.y) + __popc(e.z) + __popc(e.w));
}

/* The compaction's inputs: the vector against a threshold (t_host, or the
 * state's), or the kept list's bitmaps; vtiles and mtiles tiles of each. */
template <typename B> struct Compaction {
  const B *x;
  uint64_t n;
  sc_hd_keyfmt_t f;
  const sc_radix_state_t *st;
  uint64_t t_host;
  const uint4 *gt_map, *eq_map;
  uint64_t nvec; /* 16-byte groups of words in each bitmap */
  uint64_t vtiles, mtiles;
};

/* Per-tile counts of the entries above the threshold and of the ties
 * (packed gt << 32 | eq; both stay below 2^32 since n <= UINT32_MAX).
 * Vector: striped loads, order does not matter for a count. Bitmaps: one
 * 16-byte load of each per thread (the words it owns in the write). Blocks
 * stride over the tiles. */
template <typename B> __global__ void k_compact_count(Compaction<B> c, unsigned long long *tiles) {
  const bool map = kept(c.st);
  const uint64_t t = c.st ? c.st->prefix : c.t_host;
  const uint64_t ntiles = map ? c.mtiles : c.vtiles;
  for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    unsigned long long cnt = 0;
    if (map) {
      const uint64_t v = tile * SC_CUDA_MAP_THREADS + threadIdx.x;
      if (v < c.nvec) cnt = pack_words(c.gt_map[v], c.eq_map[v]);
    } else {
      const uint64_t base = tile * SC_CUDA_TILE + threadIdx.x;
#pragma unroll
      for (unsigned j = 0; j < SC_CUDA_TILE_ITEMS; j++) {
        const uint64_t i = base + (uint64_t)j * SC_CUDA_TILE_THREADS;
        if (i < c.n) cnt += pack_flags(sc_hd_select_flags((uint64_t)c.x[i], &c.f, t));
      }
    }
    unsigned long long total;
    sc_block_exclusive_scan(cnt, &total);
    if (threadIdx.x == 0) tiles[tile] = total;
  }
}

/* Exclusive scan of the tile counts in place, by one block; *total gets the
 * sum. */
template <typename B>
__global__ void k_tile_scan(Compaction<B> c, unsigned long long *tiles, unsigned long long *total) {
  const uint64_t ntiles = kept(c.st) ? c.mtiles : c.vtiles;
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

/* The index-ordered write: every entry above the threshold and the r
 * lowest-index ties. Vector: each thread owns SC_CUDA_TILE_ITEMS consecutive
 * elements (blocked, for the index order). Bitmaps: each thread owns 4
 * consecutive words. Positions come from the tile's scanned offset and the
 * block's scan. Writes nothing when the selection exceeds cap. */
template <typename B>
__global__ void k_compact_write(Compaction<B> c, const unsigned long long *tiles,
                                const unsigned long long *total, uint64_t cap, uint32_t *out) {
  const bool map = kept(c.st);
  const uint64_t t = c.st ? c.st->prefix : c.t_host;
  const uint64_t r = c.st ? c.st->r : 0;
  const unsigned long long tot = *total;
  if (sc_hd_select_total(tot >> 32, tot & 0xffffffffu, r) > cap) return; /* grid-uniform */
  const uint64_t ntiles = map ? c.mtiles : c.vtiles;
  for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    if (map) {
      const uint64_t v = tile * SC_CUDA_MAP_THREADS + threadIdx.x;
      uint4 g = make_uint4(0, 0, 0, 0), e = make_uint4(0, 0, 0, 0);
      if (v < c.nvec) g = c.gt_map[v], e = c.eq_map[v];
      unsigned long long block_total;
      const unsigned long long before =
          sc_block_exclusive_scan(pack_words(g, e), &block_total) + tiles[tile];
      uint64_t gt = before >> 32, eq = before & 0xffffffffu;
      const uint32_t gw[SC_CUDA_MAP_ITEMS] = {g.x, g.y, g.z, g.w};
      const uint32_t ew[SC_CUDA_MAP_ITEMS] = {e.x, e.y, e.z, e.w};
#pragma unroll
      for (unsigned q = 0; q < SC_CUDA_MAP_ITEMS; q++) {
        uint32_t bits = gw[q] | ew[q];
        while (bits) {
          const unsigned b = __ffs(bits) - 1;
          bits &= bits - 1;
          const unsigned fl = sc_hd_map_flags(gw[q], ew[q], b);
          uint64_t pos;
          if (sc_hd_select_take(fl, gt, eq, r, &pos))
            out[pos] = (uint32_t)((v * SC_CUDA_MAP_ITEMS + q) * 32 + b);
          gt += fl & 1u;
          eq += (fl >> 1) & 1u;
        }
      }
    } else {
      const uint64_t base = tile * SC_CUDA_TILE + (uint64_t)threadIdx.x * SC_CUDA_TILE_ITEMS;
      unsigned fl[SC_CUDA_TILE_ITEMS];
      unsigned long long cnt = 0;
#pragma unroll
      for (unsigned j = 0; j < SC_CUDA_TILE_ITEMS; j++) {
        const uint64_t i = base + j;
        fl[j] = i < c.n ? sc_hd_select_flags((uint64_t)c.x[i], &c.f, t) : 0u;
        cnt += pack_flags(fl[j]);
      }
      unsigned long long block_total;
      const unsigned long long before = sc_block_exclusive_scan(cnt, &block_total) + tiles[tile];
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
  }
}

/* The kept list's selected entries (against the final threshold) as bits of
 * the two bitmaps; nothing when the list was not kept. */
template <typename B>
__global__ void k_map_mark(const B *x, sc_hd_keyfmt_t f, const sc_radix_state_t *st,
                           const uint32_t *list, uint32_t *gt_map, uint32_t *eq_map) {
  if (!kept(st)) return;
  const uint64_t t = st->prefix, len = st->len;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < len; j += stride) {
    const uint32_t i = list[j];
    const unsigned fl = sc_hd_select_flags((uint64_t)x[i], &f, t);
    if (fl & 1u) atomicOr(&gt_map[i >> 5], 1u << (i & 31u));
    if (fl & 2u) atomicOr(&eq_map[i >> 5], 1u << (i & 31u));
  }
}

/* values[j] = x[indices[j]] for the selection's entries, their number read
 * from the state and totals on the device, so that the gather is queued
 * behind the compaction before the host waits once for both. */
template <typename B>
__global__ void k_gather_selected(B *values, const B *x, const uint32_t *indices,
                                  const sc_radix_state_t *st, const unsigned long long *total,
                                  uint64_t cap) {
  const unsigned long long tot = *total;
  const uint64_t nnz = sc_hd_select_total(tot >> 32, tot & 0xffffffffu, st->r);
  if (nnz > cap) return; /* nothing was written */
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nnz; j += stride)
    values[j] = x[indices[j]];
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
  uint32_t *hist, *list, *gt_map, *eq_map;
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
  w->list = (uint32_t *)(base + w->l.list);
  w->gt_map = (uint32_t *)(base + w->l.gt_map);
  w->eq_map = (uint32_t *)(base + w->l.eq_map);
  return SC_SUCCESS;
}

/* Blocks of a compaction kernel, which strides over its tiles. */
#define SC_COMPACT_MAX_BLOCKS 1024

/* Count, scan and (when the selection fits cap) write the index-ordered
 * selection: over the vector against the radix state's threshold, or over
 * the bitmaps when the state kept its list (st), or over the vector against
 * t_host with no ties taken (st NULL). */
template <typename B>
sc_result_t compact(const char *fn, const B *x, uint64_t n, sc_hd_keyfmt_t f, const Ws &w,
                    const sc_radix_state_t *st, uint64_t t_host, uint64_t cap, uint32_t *out,
                    cudaStream_t s) {
  Compaction<B> c = {x,
                     n,
                     f,
                     st,
                     t_host,
                     (const uint4 *)w.gt_map,
                     (const uint4 *)w.eq_map,
                     sc_hd_map_words(n) / SC_CUDA_MAP_ITEMS,
                     w.ntiles,
                     sc_hd_map_tiles(n)};
  /* The vector's tiles outnumber the bitmaps' (sc_hd_topk_layout). */
  const unsigned g =
      (unsigned)(w.ntiles < SC_COMPACT_MAX_BLOCKS ? w.ntiles : SC_COMPACT_MAX_BLOCKS);
  k_compact_count<B><<<g, SC_CUDA_TILE_THREADS, 0, s>>>(c, w.tiles);
  k_tile_scan<B><<<1, 1024, 0, s>>>(c, w.tiles, w.total);
  k_compact_write<B><<<g, SC_CUDA_TILE_THREADS, 0, s>>>(c, w.tiles, w.total, cap, out);
  SC_CUDA_LAUNCHED(fn);
  return SC_SUCCESS;
}

/* Blocks of a pass: as many as the GPU holds at once (each strides over
 * the source), so that the last blocks never run on a half-empty GPU and
 * each block's setup (its histogram zeroed and merged) is paid once per
 * resident slot. */
template <typename B> unsigned pass_blocks(uint64_t n) {
  int dev = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_radix_pass<B>, SC_PASS_THREADS, 0) !=
          cudaSuccess ||
      sms <= 0 || per_sm <= 0) {
    (void)cudaGetLastError();
    sms = 1, per_sm = SC_CUDA_MAX_BLOCKS;
  }
  const uint64_t want = (uint64_t)sms * (unsigned)per_sm;
  const uint32_t g = sc_hd_grid(n, SC_PASS_THREADS * SC_PASS_UNROLL, SC_CUDA_MAX_BLOCKS);
  return (unsigned)(want < g ? want : g);
}

template <typename B>
sc_result_t exact(const B *x, uint64_t n, sc_hd_keyfmt_t f, uint64_t k, uint32_t *indices,
                  B *values, const Ws &w, cudaStream_t s, uint64_t *nnz) {
  const char *fn = "sc_cuda_topk_exact";
  const unsigned passes = sc_hd_radix_passes(f.key_bits);
  /* k >= n takes every non-NaN entry: threshold 0 with n ties allowed. */
  k_radix_init<<<1, 256, 0, s>>>(w.st, n, k < n ? k : n, w.l.cap, w.hist,
                                 passes << SC_CUDA_RADIX_BITS);
  if (k < n) {
    const unsigned g = pass_blocks<B>(n);
    const int vec = (uintptr_t)x % 16 == 0;
    /* The two bitmaps are adjacent (their sizes are multiples of 256). */
    const uint64_t nclear = (w.l.bytes - w.l.gt_map) / sizeof(uint4);
    for (unsigned p = 0; p < passes; p++) {
      unsigned shift, width;
      sc_hd_radix_pass(f.key_bits, p, &shift, &width);
      uint32_t *hist = w.hist + ((size_t)p << SC_CUDA_RADIX_BITS);
      k_radix_pass<B><<<g, SC_PASS_THREADS, 0, s>>>(x, n, f, shift, width, w.st, hist, w.list,
                                                    p == 0 ? (uint4 *)w.gt_map : NULL, nclear, vec);
    }
    k_map_mark<B><<<sc_hd_grid(w.l.cap, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS), SC_CUDA_BLOCK, 0, s>>>(
        x, f, w.st, w.list, w.gt_map, w.eq_map);
  }
  SC_CHECK(compact<B>(fn, x, n, f, w, w.st, 0, k, indices, s));
  if (values) {
    const uint64_t m = k < n ? k : n;
    k_gather_selected<B><<<sc_hd_grid(m, SC_CUDA_BLOCK, SC_CUDA_MAX_BLOCKS), SC_CUDA_BLOCK, 0, s>>>(
        values, x, indices, w.st, w.total, k);
  }
  SC_CUDA_LAUNCHED(fn);
  /* The state and the totals behind it, in one copy. */
  unsigned char back[SC_TOTAL_OFFSET + sizeof(unsigned long long)];
  SC_CUDA_TRY(fn, cudaMemcpyAsync(back, w.st, sizeof back, cudaMemcpyDeviceToHost, s));
  SC_CUDA_TRY(fn, cudaStreamSynchronize(s));
  sc_radix_state_t st;
  unsigned long long tot;
  memcpy(&st, back, sizeof st);
  memcpy(&tot, back + SC_TOTAL_OFFSET, sizeof tot);
  *nnz = sc_hd_select_total(tot >> 32, tot & 0xffffffffu, st.r);
  return SC_SUCCESS;
}

template <typename B>
sc_result_t above(const B *x, uint64_t n, sc_hd_keyfmt_t f, uint64_t key, uint32_t *indices,
                  uint64_t cap, const Ws &w, cudaStream_t s, uint64_t *count) {
  const char *fn = "sc_cuda_topk_above";
  SC_CHECK(compact<B>(fn, x, n, f, w, NULL, key, cap, indices, s));
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
    r = exact<uint16_t>((const uint16_t *)x, n, f, k, indices, (uint16_t *)values, w, s, &got);
  else if (f.size == 4)
    r = exact<uint32_t>((const uint32_t *)x, n, f, k, indices, (uint32_t *)values, w, s, &got);
  else
    r = exact<uint64_t>((const uint64_t *)x, n, f, k, indices, (uint64_t *)values, w, s, &got);
  if (r != SC_SUCCESS) return r;
  *nnz = (size_t)got;
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
