/* SPDX-License-Identifier: BSD-3-Clause */
/* The decisions of MSTopK selection (docs/ALGORITHMS.md, "MSTopK"), shared by
 * the CPU kernel (kernels/cpu/topk_mstopk.c), the device path and the unit
 * tests: plain C, SC_HD under nvcc.
 *
 * Magnitudes are compared as keys: the bit pattern with the sign cleared,
 * which orders like |v| for every non-NaN value (0 for +-0, inf_key for
 * infinity). A threshold t selects the entries with key >= key_ceil(t), i.e.
 * |v| >= t. Counts never include NaN.
 *
 * The bisection runs over ratios in [0, 1], thresholds mean + ratio * (max -
 * mean) of the finite magnitudes. It keeps two keys: hi, the lowest tried
 * whose count is <= k, and lo, the highest tried whose count is > k. The
 * selection is every entry with key >= hi (hi_count <= k of them) and then,
 * in index order, the first k - hi_count entries of the band lo <= key < hi:
 * exactly min(k, m) entries for m non-NaN ones. */
#ifndef SC_KERNELS_TOPK_MSTOPK_H
#define SC_KERNELS_TOPK_MSTOPK_H

#include <stdint.h>

#include "kernels/half_bits.h"
#include "sparsecoll.h"

#ifndef SC_MSTOPK_HDI
#define SC_MSTOPK_HDI static inline SC_HD
#endif

/* Bisection rounds when SC_MSTOPK_ITERS is not set. */
#define SC_MSTOPK_DEFAULT_ITERS 20
#define SC_MSTOPK_MAX_ITERS     64

typedef struct sc_mstopk {
  uint64_t k;                /* entries wanted, already min(k, m) */
  uint64_t inf_key;          /* key of infinity for the dtype */
  double mean, max;          /* of the finite magnitudes; mean <= max */
  double l, r, pend;         /* the ratio bracket, and the ratio of the pending threshold */
  uint64_t lo_key, lo_count; /* count(key >= lo_key) = lo_count > k (a lower bound
                                when the count was implied) */
  uint64_t hi_key, hi_count; /* count(key >= hi_key) = hi_count <= k */
} sc_mstopk_t;

/* Key of infinity: the largest non-NaN key of the dtype. */
SC_MSTOPK_HDI uint64_t sc_mstopk_inf_key(sc_dtype_t dt) {
  switch (dt) {
  case SC_FLOAT16:
    return 0x7c00u;
  case SC_BFLOAT16:
    return 0x7f80u;
  case SC_FLOAT32:
    return 0x7f800000u;
  default:
    return 0x7ff0000000000000ull;
  }
}

/* |v| of a non-NaN key. */
SC_MSTOPK_HDI double sc_mstopk_key_value(sc_dtype_t dt, uint64_t key) {
  switch (dt) {
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

/* The smallest key whose magnitude is >= t (t >= 0; inf_key for a t above
 * every finite value): binary search over the keys, exact for every dtype
 * without per-type rounding code. */
SC_MSTOPK_HDI uint64_t sc_mstopk_key_ceil(sc_dtype_t dt, double t) {
  uint64_t lo = 0, hi = sc_mstopk_inf_key(dt);
  if (!(t > 0)) return 0;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (sc_mstopk_key_value(dt, mid) >= t)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* m: non-NaN entries; n_inf: infinite ones; mean, max: of the finite
 * magnitudes (ignored without finite entries). k >= m: every non-NaN entry
 * (hi = lo = 0); k = 0 < m: nothing (hi above infinity). More than k
 * infinities: the band is the infinities. */
SC_MSTOPK_HDI void sc_mstopk_init(sc_mstopk_t *s, sc_dtype_t dt, uint64_t k, uint64_t m,
                                  uint64_t n_inf, double mean, double max) {
  s->inf_key = sc_mstopk_inf_key(dt);
  s->k = k < m ? k : m;
  s->mean = mean < max ? mean : max; /* a rounded mean may pass an all-equal max */
  s->max = max;
  s->l = 0;
  s->r = 1;
  s->pend = 0;
  if (k >= m) {
    s->lo_key = s->hi_key = 0;
    s->lo_count = s->hi_count = m;
  } else if (k == 0) {
    s->lo_key = 0;
    s->lo_count = m;
    s->hi_key = s->inf_key + 1;
    s->hi_count = 0;
  } else if (n_inf > k) {
    s->lo_key = s->inf_key;
    s->lo_count = n_inf;
    s->hi_key = s->inf_key + 1;
    s->hi_count = 0;
  } else {
    s->lo_key = 0;
    s->lo_count = m;
    s->hi_key = s->inf_key;
    s->hi_count = n_inf;
  }
}

/* 1 when no further round can change lo or hi: no key lies strictly
 * between them. (A hi whose count is k already fixes the selection, but the
 * rounds go on narrowing the band that the contract describes.) */
SC_MSTOPK_HDI int sc_mstopk_done(const sc_mstopk_t *s) {
  return s->hi_key - s->lo_key <= 1;
}

/* The next threshold: the middle of the ratio bracket. */
SC_MSTOPK_HDI double sc_mstopk_next(sc_mstopk_t *s) {
  s->pend = s->l + (s->r - s->l) / 2;
  return s->mean + s->pend * (s->max - s->mean);
}

/* 1 with *count when the count at key follows from the bracket (key at or
 * below lo: more than k; at or above hi: at most k), so no pass is needed. */
SC_MSTOPK_HDI int sc_mstopk_implied(const sc_mstopk_t *s, uint64_t key, uint64_t *count) {
  if (key <= s->lo_key) {
    *count = s->lo_count;
    return 1;
  }
  if (key >= s->hi_key) {
    *count = s->hi_count;
    return 1;
  }
  return 0;
}

/* The count of the pending threshold's key: the bisection step. */
SC_MSTOPK_HDI void sc_mstopk_record(sc_mstopk_t *s, uint64_t key, uint64_t count) {
  if (count <= s->k) {
    s->r = s->pend;
    if (key < s->hi_key) {
      s->hi_key = key;
      s->hi_count = count;
    }
  } else {
    s->l = s->pend;
    if (key > s->lo_key) {
      s->lo_key = key;
      s->lo_count = count;
    }
  }
}

/* Entries the band contributes, lowest index first. */
SC_MSTOPK_HDI uint64_t sc_mstopk_fill(const sc_mstopk_t *s) {
  return s->k - s->hi_count;
}

/* The band rule for one non-NaN key, in index order: 1 when selected;
 * *fill counts down the band's remaining places. */
SC_MSTOPK_HDI int sc_mstopk_take(const sc_mstopk_t *s, uint64_t key, uint64_t *fill) {
  if (key >= s->hi_key) return 1;
  if (key >= s->lo_key && *fill > 0) {
    (*fill)--;
    return 1;
  }
  return 0;
}

#endif
