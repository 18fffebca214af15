/* SPDX-License-Identifier: BSD-3-Clause */
/* Launch geometry of the CUDA kernels as plain functions (grid sizes,
 * vector width by alignment, balanced chunks), tested on the CPU by
 * test/unit/test_cuda_host.c for counts 0, 1, primes and unaligned offsets. */
#ifndef SC_KERNELS_CUDA_HD_LAUNCH_H
#define SC_KERNELS_CUDA_HD_LAUNCH_H

#include "kernels/cuda/hd.h"

/* Threads per block of the element-wise kernels, and the widest load. */
#define SC_CUDA_BLOCK     256
#define SC_CUDA_VEC_BYTES 16
/* Grid-stride kernels never need more blocks than keep every SM busy; a
 * fixed cap keeps the launch independent of the device. */
#define SC_CUDA_MAX_BLOCKS 4096

/* Blocks for `items` work items, `block` per block, at most max_blocks; 0
 * when there is nothing to do (no launch). */
SC_HDI uint32_t sc_hd_grid(uint64_t items, uint32_t block, uint32_t max_blocks) {
  if (items == 0 || block == 0) return 0;
  uint64_t g = (items + block - 1) / block;
  return g < max_blocks ? (uint32_t)g : max_blocks;
}

/* An element range split into a scalar head, whole vectors of velems
 * elements (SC_CUDA_VEC_BYTES each) and a scalar tail. */
typedef struct sc_hd_vec_plan {
  uint64_t head, nvec, tail;
  uint32_t velems; /* 1: no vector loads (the head then holds everything) */
} sc_hd_vec_plan_t;

/* Vector loads need every pointer at the same offset modulo the vector size,
 * on an element boundary: then a head of a few elements brings all of them to
 * a vector boundary together. addrs: the byte addresses of dst and sources. */
SC_HDI sc_hd_vec_plan_t sc_hd_vec_plan(const uint64_t *addrs, unsigned naddr, uint64_t n,
                                       unsigned esize) {
  sc_hd_vec_plan_t p = {n, 0, 0, 1};
  if (esize == 0 || esize > SC_CUDA_VEC_BYTES || n == 0) return p;
  uint64_t off = addrs[0] % SC_CUDA_VEC_BYTES;
  if (off % esize != 0) return p;
  for (unsigned i = 1; i < naddr; i++)
    if (addrs[i] % SC_CUDA_VEC_BYTES != off) return p;
  uint64_t head = ((SC_CUDA_VEC_BYTES - off) % SC_CUDA_VEC_BYTES) / esize;
  if (head > n) head = n;
  p.velems = SC_CUDA_VEC_BYTES / esize;
  p.head = head;
  p.nvec = (n - head) / p.velems;
  p.tail = n - head - p.nvec * p.velems;
  return p;
}

/* Element index of scalar work item j (j < head + tail): the head, then the
 * tail after the vectors. */
SC_HDI uint64_t sc_hd_vec_scalar_index(const sc_hd_vec_plan_t *p, uint64_t j) {
  return j < p->head ? j : p->head + p->nvec * p->velems + (j - p->head);
}

/* Part i of `parts` nearly equal, contiguous parts of [0, total). */
SC_HDI void sc_hd_chunk(uint64_t total, uint64_t parts, uint64_t i, uint64_t *begin,
                        uint64_t *end) {
  uint64_t q = total / parts, rem = total % parts;
  *begin = i * q + (i < rem ? i : rem);
  *end = *begin + q + (i < rem ? 1 : 0);
}

/* Tiles of the index-ordered compaction. */
#define SC_CUDA_TILE_THREADS 256
#define SC_CUDA_TILE_ITEMS   8
#define SC_CUDA_TILE         (SC_CUDA_TILE_THREADS * SC_CUDA_TILE_ITEMS)

SC_HDI uint64_t sc_hd_tiles(uint64_t n) {
  return (n + SC_CUDA_TILE - 1) / SC_CUDA_TILE;
}

#endif
