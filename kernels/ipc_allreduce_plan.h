/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel-driven all-reduce between the ranks of one host (the device
 * all-reduce's kernel path, lib/core/dev_allreduce.c): its memory layout,
 * its chunk plan and its flag protocol, as plain functions that the CUDA
 * kernel (kernels/cuda/ipc_allreduce.cu), the stand-in's emulation
 * (kernels/devrt_emu_ipcar.c) and the CPU tests (test/unit/test_ipcar_plan.c,
 * which replays P ranks' blocks in random interleavings) all run.
 *
 * Every rank owns one device region that every peer maps through IPC:
 *   flags[block][from]  uint32: the last barrier value rank `from` reached
 *                       in block `block`, written by `from` into this region
 *   status              uint32: why this rank's kernel gave up (0: it did not)
 *   half[0], half[1]    the data halves, used by alternate launches
 * A launch first copies its round of the input into the rank's own half
 * (a copy on the same stream), then runs the kernel:
 *   one-shot:  barrier e; each block reduces its vectors of every rank's half
 *              in rank order and writes the result.
 *   two-shot:  barrier e; rank r reduces chunk r of every rank's half into its
 *              own half (reduce-scatter); barrier e + 1; every rank copies
 *              chunk j from rank j's half (all-gather).
 * A barrier is per block: block b writes e into flags[b][rank] of every rank,
 * then waits until its own flags[b][j] reached e for every j. It orders only
 * block b's work with block b's work elsewhere, which is enough because a
 * vector's block is a function of its offset in its chunk alone
 * (sc_ipcar_block_of): the block that reads a vector in the all-gather is the
 * block that wrote it on the owner. No barrier ends a launch: the next launch
 * writes the other half, and the launch after it (the same half again) cannot
 * begin on this rank before every peer has begun the launch in between
 * (its first barrier), which on every peer's stream follows the end of the
 * launch that read this half. */
#ifndef SC_KERNELS_IPC_ALLREDUCE_PLAN_H
#define SC_KERNELS_IPC_ALLREDUCE_PLAN_H

#include <stdint.h>

#include "kernels/half_bits.h" /* SC_HD */

#define SC_IPCAR_HDI static inline SC_HD

/* Ranks and blocks the flags have room for; threads per block. */
#define SC_IPCAR_MAX_RANKS  16
#define SC_IPCAR_MAX_BLOCKS 64
#define SC_IPCAR_THREADS    512
/* Bytes of one vector, the unit of the plan: halves and chunks start at
 * vector boundaries, and a half's tail past the count holds stale bytes that
 * are reduced (harmlessly: no integer op traps, float ops do not fault) but
 * never written out. */
#define SC_IPCAR_VEC 16

/* status: the kind in the high half, the rank waited for in the low. A rank
 * whose barrier passed checks every peer's status word too: a peer that gave
 * up makes it give up (PEER), so that a rank arriving after the others timed
 * out does not return a result they did not. */
#define SC_IPCAR_ST_TIMEOUT 0x10000u
#define SC_IPCAR_ST_ABORTED 0x20000u
#define SC_IPCAR_ST_PEER    0x30000u
#define SC_IPCAR_ST_KIND    0xffff0000u

typedef enum sc_ipcar_mode { SC_IPCAR_ONESHOT = 0, SC_IPCAR_TWOSHOT = 1 } sc_ipcar_mode_t;

typedef struct sc_ipcar_layout {
  uint64_t flags_off, status_off, half_off[2];
  uint64_t half_bytes; /* a multiple of SC_IPCAR_VEC */
  uint64_t total;      /* the region's bytes */
} sc_ipcar_layout_t;

/* The layout of a region whose halves hold at least half_bytes each. */
SC_IPCAR_HDI sc_ipcar_layout_t sc_ipcar_layout(uint64_t half_bytes) {
  sc_ipcar_layout_t l;
  const uint64_t align = 256; /* the start of every part: what cudaMalloc gives */
  l.half_bytes = (half_bytes + align - 1) / align * align;
  l.flags_off = 0;
  l.status_off = (uint64_t)SC_IPCAR_MAX_BLOCKS * SC_IPCAR_MAX_RANKS * sizeof(uint32_t);
  l.half_off[0] = (l.status_off + sizeof(uint32_t) + align - 1) / align * align;
  l.half_off[1] = l.half_off[0] + l.half_bytes;
  l.total = l.half_off[1] + l.half_bytes;
  return l;
}

/* Index (in uint32 words from flags_off) of the flag `from` writes for block b. */
SC_IPCAR_HDI uint32_t sc_ipcar_flag_index(uint32_t block, uint32_t from) {
  return block * SC_IPCAR_MAX_RANKS + from;
}

/* Whether a flag holding `flag` has reached barrier value e. Values only
 * grow (mod 2^32), and no rank is more than one barrier ahead of another. */
SC_IPCAR_HDI int sc_ipcar_reached(uint32_t flag, uint32_t e) {
  return (int32_t)(flag - e) >= 0;
}

SC_IPCAR_HDI uint32_t sc_ipcar_barriers(sc_ipcar_mode_t mode) {
  return mode == SC_IPCAR_TWOSHOT ? 2u : 1u;
}

/* One-shot up to oneshot_max bytes (every rank reads all P inputs: fewest
 * steps), two-shot above (each byte crosses once per direction). */
SC_IPCAR_HDI sc_ipcar_mode_t sc_ipcar_mode_for(uint64_t bytes, uint64_t oneshot_max) {
  return bytes <= oneshot_max ? SC_IPCAR_ONESHOT : SC_IPCAR_TWOSHOT;
}

/* Elements one launch carries: the half's vectors, rounded down to a
 * multiple of nranks (so that every rank's chunk fits), times the vector's
 * elements. 0 when es does not divide the vector or the half holds less
 * than one vector per rank. */
SC_IPCAR_HDI uint64_t sc_ipcar_round_elems(uint64_t half_bytes, uint32_t es, uint32_t nranks) {
  if (es == 0 || SC_IPCAR_VEC % es != 0 || nranks == 0) return 0;
  uint64_t vecs = half_bytes / SC_IPCAR_VEC / nranks * nranks;
  return vecs * (SC_IPCAR_VEC / es);
}

/* Vectors holding count elements of es bytes. */
SC_IPCAR_HDI uint64_t sc_ipcar_vecs(uint64_t count, uint32_t es) {
  return (count * es + SC_IPCAR_VEC - 1) / SC_IPCAR_VEC;
}

/* Chunk j of nvec vectors split over nranks ranks: [*begin, *end), the
 * first chunks one vector longer when nranks does not divide nvec. */
SC_IPCAR_HDI void sc_ipcar_chunk(uint64_t nvec, uint32_t nranks, uint32_t j, uint64_t *begin,
                                 uint64_t *end) {
  uint64_t q = nvec / nranks, rem = nvec % nranks;
  *begin = j * q + (j < rem ? j : rem);
  *end = *begin + q + (j < rem ? 1 : 0);
}

/* The block that handles the vector at offset u of a chunk (or of the whole
 * range in one-shot), with nblocks blocks of `threads` threads striding the
 * range together: thread t of block b takes u = b * threads + t, then every
 * nblocks * threads further. */
SC_IPCAR_HDI uint32_t sc_ipcar_block_of(uint64_t u, uint32_t nblocks, uint32_t threads) {
  return (uint32_t)((u / threads) % nblocks);
}

/* Blocks per rank: as many as the device's SMs give every rank that shares
 * the device one block each twice over, within [1, SC_IPCAR_MAX_BLOCKS].
 * Every rank's blocks must be resident at once (a block that waits holds its
 * slot), so ranks sharing one GPU divide it. */
SC_IPCAR_HDI uint32_t sc_ipcar_blocks(int sms, int blocks_per_sm, int ranks_on_device) {
  if (sms <= 0 || blocks_per_sm <= 0 || ranks_on_device <= 0) return 1;
  int64_t slots = (int64_t)sms * blocks_per_sm / (2 * (int64_t)ranks_on_device);
  if (slots < 1) slots = 1;
  return slots > SC_IPCAR_MAX_BLOCKS ? SC_IPCAR_MAX_BLOCKS : (uint32_t)slots;
}

/* One launch's arguments (by value to the kernel; the stand-in's emulation
 * takes the same fields). */
typedef struct sc_ipcar_args {
  uint8_t *region[SC_IPCAR_MAX_RANKS]; /* every rank's region as mapped here */
  void *out;                           /* where this launch's result goes */
  uint64_t count;                      /* elements of this launch */
  uint64_t half_off;                   /* the launch's half in every region */
  uint64_t timeout_ns;                 /* how long one barrier may wait */
  /* Pinned host word: nonzero makes every wait give up (an abort, a peer the
   * host saw die, a deadline the host enforced). */
  const volatile uint32_t *abort_flag;
  uint32_t epoch; /* the first barrier's value; two-shot's second is epoch + 1 */
  int32_t nranks, rank, nblocks, mode, dtype, op;
} sc_ipcar_args_t;

SC_IPCAR_HDI volatile uint32_t *sc_ipcar_flag(uint8_t *region, uint32_t block, uint32_t from) {
  return (volatile uint32_t *)(region + sc_ipcar_layout(0).flags_off) +
         sc_ipcar_flag_index(block, from);
}

SC_IPCAR_HDI uint32_t *sc_ipcar_status(uint8_t *region) {
  return (uint32_t *)(region + sc_ipcar_layout(0).status_off);
}

#endif
