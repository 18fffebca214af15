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

/* Where a pass reads its elements from and where it writes the ones that
 * pass its filter: the full vector, or one of two index lists that take
 * turns (a pass never writes the list it reads). */
enum { SC_RADIX_SRC_VECTOR = 0, SC_RADIX_LIST_A = 1, SC_RADIX_LIST_B = 2 };

/* The selection's state between passes; lives in device memory so that the
 * passes run back to back without the host. */
typedef struct sc_radix_state {
  uint64_t prefix; /* key bits chosen by the passes so far */
  uint64_t r;      /* entries still to take among keys with that prefix */
  uint64_t above;  /* entries whose key is above every key with that prefix */
  uint64_t cand;   /* entries whose key has that prefix (the next pass's filter output) */
  uint64_t cap;    /* capacity of each candidate list */
  uint32_t len[3]; /* entries written to list A / B in the current pass ([0] unused) */
  int32_t src;     /* what the next pass reads */
  int32_t dst;     /* what the next pass writes its filtered entries to (0: nothing) */
} sc_radix_state_t;

SC_HDI void sc_hd_radix_init(sc_radix_state_t *st, uint64_t n, uint64_t k, uint64_t cap) {
  st->prefix = 0;
  st->r = k;
  st->above = 0;
  st->cand = n;
  st->cap = cap;
  st->len[0] = st->len[1] = st->len[2] = 0;
  st->src = SC_RADIX_SRC_VECTOR;
  st->dst = 0;
}

/* Number of entries the next pass reads. */
SC_HDI uint64_t sc_hd_radix_src_len(const sc_radix_state_t *st, uint64_t n) {
  return st->src == SC_RADIX_SRC_VECTOR ? n : st->len[st->src];
}

/* After a pass of `width` bits chose bucket b (count entries, cum_above
 * above it): narrow the prefix, and plan the next pass. The list this pass
 * wrote (its filter output: the entries of the old prefix) becomes the next
 * source; the next pass writes a list when its filter output, the entries of
 * the new prefix, fits one. */
SC_HDI void sc_hd_radix_advance(sc_radix_state_t *st, unsigned width, uint64_t b,
                                uint64_t cum_above, uint64_t count) {
  st->r -= cum_above;
  st->above += cum_above;
  st->prefix = (st->prefix << width) | b;
  st->cand = count;
  if (st->dst != 0) st->src = st->dst;
  st->dst = 0;
  if (count <= st->cap) st->dst = st->src == SC_RADIX_LIST_A ? SC_RADIX_LIST_B : SC_RADIX_LIST_A;
  if (st->dst != 0) st->len[st->dst] = 0;
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
  uint64_t state;  /* sc_radix_state_t, then the compaction's totals (2 x uint64) */
  uint64_t hist;   /* one 2^SC_CUDA_RADIX_BITS-bin histogram per pass */
  uint64_t tiles;  /* per-tile packed counts (gt << 32 | eq), scanned in place */
  uint64_t sample; /* SC_CUDA_TOPK_SAMPLE doubles */
  uint64_t list_a, list_b;
  uint64_t cap;   /* entries each candidate list holds */
  uint64_t bytes; /* total */
} sc_hd_topk_layout_t;

SC_HDI uint64_t sc_hd_align256(uint64_t x) {
  return (x + 255) & ~(uint64_t)255;
}

/* Candidates are compacted once they fit an eighth of the vector (plus a
 * floor for short ones): a list that long costs less to read back than the
 * vector, and the two lists stay a quarter of its indices. */
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
  l.list_a = l.sample + sc_hd_align256((uint64_t)SC_CUDA_TOPK_SAMPLE * sizeof(double));
  l.list_b = l.list_a + sc_hd_align256(cap * sizeof(uint32_t));
  l.bytes = l.list_b + sc_hd_align256(cap * sizeof(uint32_t));
  return l;
}

#endif
