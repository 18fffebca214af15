/* SPDX-License-Identifier: BSD-3-Clause */
/* The decisions of the CUDA top-k kernels (kernels/cuda/topk.cu) as
 * host-device functions, so that the unit tests replay a selection on the CPU
 * with exactly the code the kernels run and compare it with the CPU
 * selectors (kernels/cpu/topk_exact.c, topk_gaussian.c).
 *
 * Keys and ties are those of kernels/cpu/topk_keys.h: key(v) = the bits of
 * v with the sign cleared, except NaN, whose key is 0. The exact selection of
 * k < n entries is: T = the k-th largest key; every i with key > T, then the
 * r = k - #{key > T} lowest indices whose magnitude bits equal T (NaN never
 * ties: its magnitude bits exceed the key of infinity), all in index order.
 * k >= n is T = 0, r = n: every non-NaN entry. */
#ifndef SC_KERNELS_CUDA_HD_TOPK_H
#define SC_KERNELS_CUDA_HD_TOPK_H

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/hd.h"

/* Radix digit width: a 2048-bin histogram fits a block's shared memory; keys
 * of 15, 31 and 63 bits take 2, 3 and 6 passes. */
#define SC_CUDA_RADIX_BITS       11
#define SC_CUDA_RADIX_MAX_PASSES 6

/* A float format seen as magnitude keys. */
typedef struct sc_hd_keyfmt {
  unsigned key_bits; /* 15, 31 or 63; 0: not a float dtype */
  unsigned size;     /* bytes per element */
  uint64_t abs_mask; /* clears the sign */
  uint64_t inf_key;  /* key of infinity, the largest non-NaN key */
} sc_hd_keyfmt_t;

SC_HDI sc_hd_keyfmt_t sc_hd_keyfmt(sc_dtype_t dtype) {
  sc_hd_keyfmt_t f = {0, 0, 0, 0};
  switch (dtype) {
  case SC_FLOAT16:
    f.key_bits = 15, f.size = 2, f.abs_mask = 0x7fffu, f.inf_key = 0x7c00u;
    break;
  case SC_BFLOAT16:
    f.key_bits = 15, f.size = 2, f.abs_mask = 0x7fffu, f.inf_key = 0x7f80u;
    break;
  case SC_FLOAT32:
    f.key_bits = 31, f.size = 4, f.abs_mask = 0x7fffffffu, f.inf_key = 0x7f800000u;
    break;
  case SC_FLOAT64:
    f.key_bits = 63, f.size = 8, f.abs_mask = 0x7fffffffffffffffull;
    f.inf_key = 0x7ff0000000000000ull;
    break;
  default:
    break;
  }
  return f;
}

/* The raw pattern of element i, zero-extended. */
SC_HDI uint64_t sc_hd_load_bits(const void *x, unsigned size, size_t i) {
  if (size == 2) return ((const uint16_t *)x)[i];
  if (size == 4) return ((const uint32_t *)x)[i];
  return ((const uint64_t *)x)[i];
}

SC_HDI uint64_t sc_hd_mag(uint64_t bits, const sc_hd_keyfmt_t *f) {
  return bits & f->abs_mask;
}

SC_HDI uint64_t sc_hd_key(uint64_t bits, const sc_hd_keyfmt_t *f) {
  uint64_t m = bits & f->abs_mask;
  return m > f->inf_key ? 0 : m;
}

/* |v| of a key <= inf_key, as a double (the CPU selector's key_value). */
SC_HDI double sc_hd_key_value(uint64_t key, sc_dtype_t dtype) {
  switch (dtype) {
  case SC_FLOAT16:
    return (double)sc_half_to_float_core((uint16_t)key);
  case SC_BFLOAT16:
    return (double)sc_bfloat16_to_float_core((uint16_t)key);
  case SC_FLOAT32:
    return (double)sc_bits_f32((uint32_t)key);
  default:
    return sc_bits_f64(key);
  }
}

/* ---- radix select: passes, digits, bucket choice, bookkeeping ---- */

SC_HDI unsigned sc_hd_radix_passes(unsigned key_bits) {
  return (key_bits + SC_CUDA_RADIX_BITS - 1) / SC_CUDA_RADIX_BITS;
}

/* Pass p (0 = most significant) covers key bits [*shift, *shift + *width). */
SC_HDI void sc_hd_radix_pass(unsigned key_bits, unsigned p, unsigned *shift, unsigned *width) {
  unsigned s = key_bits;
  unsigned w = 0;
  for (unsigned q = 0; q <= p; q++) {
    w = s < SC_CUDA_RADIX_BITS ? s : SC_CUDA_RADIX_BITS;
    s -= w;
  }
  *shift = s;
  *width = w;
}

/* The digit of `key` in a pass, or -1 when the key's bits above the pass
 * differ from the prefix chosen by the earlier passes (the fused filter). */
SC_HDI int sc_hd_radix_digit(uint64_t key, unsigned shift, unsigned width, uint64_t prefix) {
  if ((key >> (shift + width)) != prefix) return -1;
  return (int)((key >> shift) & (((uint64_t)1 << width) - 1));
}

/* Bucket b holds the r-th largest of the filtered keys when the buckets
 * above it hold cum_above < r and b's own count takes the total to >= r.
 * Exactly one bucket passes when 1 <= r <= the histogram's total: each
 * thread of the choosing block tests its own buckets with this. */
SC_HDI int sc_hd_radix_hit(uint64_t cum_above, uint64_t count, uint64_t r) {
  return cum_above < r && cum_above + count >= r;
}

/* The same choice as one serial walk from the top bucket down (the CPU
 * selector's loop); returns the bucket and its cum_above, or -1. */
SC_HDI int sc_hd_radix_pick(const uint32_t *hist, unsigned width, uint64_t r, uint64_t *cum_above) {
  uint64_t cum = 0;
  for (int b = (1 << width) - 1; b >= 0; b--) {
    if (sc_hd_radix_hit(cum, hist[b], r)) {
      *cum_above = cum;
      return b;
    }
    cum += hist[b];
  }
  return -1;
}

/* Whether `key` belongs to the superset of the selection that a pass may
 * write to the candidate list: every key whose bits above the pass are at
 * least the prefix (the keys above it are all taken, the equal ones are
 * the candidates). */
SC_HDI int sc_hd_radix_keep(uint64_t key, unsigned shift, unsigned width, uint64_t prefix) {
  return (key >> (shift + width)) >= prefix;
}

/* Where a pass reads its elements from: the full vector, or the candidate
 * list that an earlier pass wrote. */
enum { SC_RADIX_SRC_VECTOR = 0, SC_RADIX_SRC_LIST = 1 };

/* The selection's state between passes; lives in device memory so that the
 * passes run back to back without the host. Once the superset of the
 * selection (every key whose bits chosen so far are at least the prefix)
 * fits the list, the next pass over the vector writes it there; every later
 * pass reads it, and the final compaction marks the selected entries of it
 * in two bitmaps instead of reading the vector again. */
typedef struct sc_radix_state {
  uint64_t prefix; /* key bits chosen by the passes so far */
  uint64_t r;      /* entries still to take among keys with that prefix */
  uint64_t above;  /* entries whose key is above every key with that prefix */
  uint64_t cand;   /* entries whose key has that prefix */
  uint64_t cap;    /* capacity of the candidate list */
  uint32_t len;    /* entries in the candidate list */
  int32_t src;     /* what the next pass reads */
  int32_t write;   /* 1: the next pass writes the superset to the list */
  uint32_t done;   /* blocks of the current pass that finished (the last one chooses) */
} sc_radix_state_t;

SC_HDI void sc_hd_radix_init(sc_radix_state_t *st, uint64_t n, uint64_t k, uint64_t cap) {
  st->prefix = 0;
  st->r = k;
  st->above = 0;
  st->cand = n;
  st->cap = cap;
  st->len = 0;
  st->src = SC_RADIX_SRC_VECTOR;
  st->write = n <= cap;
  st->done = 0;
}

/* Number of entries the next pass reads. */
SC_HDI uint64_t sc_hd_radix_src_len(const sc_radix_state_t *st, uint64_t n) {
  return st->src == SC_RADIX_SRC_VECTOR ? n : st->len;
}

/* After a pass of `width` bits chose bucket b (count entries, cum_above
 * above it): narrow the prefix, and plan the next pass. A pass that wrote
 * the list makes it the source of every later pass; a pass over the vector
 * writes it once the new superset (above + count entries) fits. */
SC_HDI void sc_hd_radix_advance(sc_radix_state_t *st, unsigned width, uint64_t b,
                                uint64_t cum_above, uint64_t count) {
  st->r -= cum_above;
  st->above += cum_above;
  st->prefix = (st->prefix << width) | b;
  st->cand = count;
  if (st->write) st->src = SC_RADIX_SRC_LIST;
  st->write = st->src == SC_RADIX_SRC_VECTOR && st->above + count <= st->cap;
}

/* ---- the final, index-ordered compaction ---- */

/* Element flags against the threshold key t: bit 0 key > t, bit 1 magnitude
 * bits == t (a tie). */
SC_HDI unsigned sc_hd_select_flags(uint64_t bits, const sc_hd_keyfmt_t *f, uint64_t t) {
  return (sc_hd_key(bits, f) > t ? 1u : 0u) | (sc_hd_mag(bits, f) == t ? 2u : 0u);
}

/* Whether an element with these flags is taken, given the ties before it
 * (in index order) and the r ties to take; *pos gets its output position
 * from the greater and tied elements before it. */
SC_HDI int sc_hd_select_take(unsigned flags, uint64_t gt_before, uint64_t eq_before, uint64_t r,
                             uint64_t *pos) {
  *pos = gt_before + (eq_before < r ? eq_before : r);
  return (flags & 1u) || ((flags & 2u) && eq_before < r);
}

/* Entries the selection returns: every greater one and up to r ties. */
SC_HDI uint64_t sc_hd_select_total(uint64_t gt, uint64_t eq, uint64_t r) {
  return gt + (eq < r ? eq : r);
}

/* The compaction of a kept candidate list: its selected entries are marked
 * in two bitmaps over the vector's indices (bit i of word i / 32: key > t,
 * and a tie), then compacted in index order by tiles of words as the vector
 * is by tiles of elements. */
#define SC_CUDA_MAP_THREADS 256
#define SC_CUDA_MAP_ITEMS   4 /* words per thread: one 16-byte load */
#define SC_CUDA_MAP_TILE    (SC_CUDA_MAP_THREADS * SC_CUDA_MAP_ITEMS)

/* Words of one bitmap, padded to whole 16-byte loads. */
SC_HDI uint64_t sc_hd_map_words(uint64_t n) {
  uint64_t w = (n + 31) / 32;
  return (w + SC_CUDA_MAP_ITEMS - 1) / SC_CUDA_MAP_ITEMS * SC_CUDA_MAP_ITEMS;
}

SC_HDI uint64_t sc_hd_map_tiles(uint64_t n) {
  return (sc_hd_map_words(n) + SC_CUDA_MAP_TILE - 1) / SC_CUDA_MAP_TILE;
}

/* The flags of bit b of a word pair (sc_hd_select_flags' encoding). */
SC_HDI unsigned sc_hd_map_flags(uint32_t gt_word, uint32_t eq_word, unsigned b) {
  return ((gt_word >> b) & 1u) | (((eq_word >> b) & 1u) << 1);
}

/* ---- Gaussian-k: the sample and the threshold key ---- */

/* The strided sample positions of the CPU selector: cnt positions from
 * first, stride apart (n > 0, 0 < k < n). */
SC_HDI void sc_hd_sample_plan(uint64_t n, uint64_t k, uint64_t *cnt, uint64_t *stride,
                              uint64_t *first) {
  double want = (double)(SC_CUDA_TOPK_TOP / 8) * (double)n / (double)k;
  uint64_t c = want < (double)SC_CUDA_TOPK_SAMPLE ? (uint64_t)want : SC_CUDA_TOPK_SAMPLE;
  if (c > n) c = n;
  if (c == 0) c = 1;
  *cnt = c;
  *stride = n / c;
  *first = *stride / 2;
}

/* The largest key whose magnitude is <= t (|v| > t exactly when key(v) >
 * it); 0 for t < 0 or NaN. */
SC_HDI uint64_t sc_hd_threshold_key(sc_dtype_t dtype, double t) {
  sc_hd_keyfmt_t f = sc_hd_keyfmt(dtype);
  uint64_t lo = 0, hi = f.inf_key;
  if (!(t >= 0)) return 0;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (sc_hd_key_value(mid, dtype) <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* ---- the workspace of the top-k functions ---- */

/* Byte offsets into the caller's workspace, each 256-byte aligned. */
typedef struct sc_hd_topk_layout {
  uint64_t state;          /* sc_radix_state_t, then the compaction's totals (2 x uint64) */
  uint64_t hist;           /* one 2^SC_CUDA_RADIX_BITS-bin histogram per pass */
  uint64_t tiles;          /* per-tile packed counts (gt << 32 | eq), scanned in place */
  uint64_t sample;         /* SC_CUDA_TOPK_SAMPLE doubles */
  uint64_t list;           /* the candidate list */
  uint64_t gt_map, eq_map; /* the kept list's bitmaps, sc_hd_map_words(n) words each */
  uint64_t cap;            /* entries the list holds */
  uint64_t bytes;          /* total */
} sc_hd_topk_layout_t;

SC_HDI uint64_t sc_hd_align256(uint64_t x) {
  return (x + 255) & ~(uint64_t)255;
}

/* The list is kept once the superset fits an eighth of the vector (plus a
 * floor for short ones): the final compaction then reads the list and two
 * bitmaps of n / 32 words instead of the vector twice. ntiles counts the
 * vector's compaction tiles, which outnumber the bitmaps'. */
SC_HDI sc_hd_topk_layout_t sc_hd_topk_layout(uint64_t n, uint64_t ntiles) {
  sc_hd_topk_layout_t l;
  uint64_t cap = n / 8 + 2048;
  if (cap > n) cap = n;
  l.cap = cap;
  l.state = 0;
  l.hist = sc_hd_align256(sizeof(sc_radix_state_t) + 2 * sizeof(uint64_t));
  l.tiles = l.hist + sc_hd_align256((uint64_t)SC_CUDA_RADIX_MAX_PASSES * sizeof(uint32_t)
                                    << SC_CUDA_RADIX_BITS);
  l.sample = l.tiles + sc_hd_align256((ntiles + 1) * sizeof(uint64_t));
  l.list = l.sample + sc_hd_align256((uint64_t)SC_CUDA_TOPK_SAMPLE * sizeof(double));
  l.gt_map = l.list + sc_hd_align256(cap * sizeof(uint32_t));
  l.eq_map = l.gt_map + sc_hd_align256(sc_hd_map_words(n) * sizeof(uint32_t));
  l.bytes = l.eq_map + sc_hd_align256(sc_hd_map_words(n) * sizeof(uint32_t));
  return l;
}

#endif
