/* SPDX-License-Identifier: BSD-3-Clause */
/* See sparse_merge.h. The selection is a three-way quickselect on magnitude
 * keys (expected linear time, and duplicates, e.g. many equal values, do not
 * degrade it), then one pass in index order that keeps every entry above the
 * k-th key and the lowest-indexed ones equal to it: so the result depends on
 * the values only, never on the pivots. */
#include "kernels/cpu/sparse_merge.h"

#include <string.h>

#include "kernels/cpu/reduce.h"

int sc_sparse_dtype_ok(sc_dtype_t dtype) {
  return dtype == SC_FLOAT32 || dtype == SC_FLOAT64 || dtype == SC_FLOAT16 || dtype == SC_BFLOAT16;
}

static size_t width(sc_dtype_t dtype) {
  return dtype == SC_FLOAT64 ? 8 : dtype == SC_FLOAT32 ? 4 : 2;
}

/* |v| as an unsigned key that orders like the magnitude (sign bit cleared). */
static uint64_t mag_key(sc_dtype_t dtype, const void *val, size_t i) {
  if (dtype == SC_FLOAT64) {
    uint64_t u;
    memcpy(&u, (const uint8_t *)val + i * 8, 8);
    return u & 0x7fffffffffffffffull;
  }
  if (dtype == SC_FLOAT32) {
    uint32_t u;
    memcpy(&u, (const uint8_t *)val + i * 4, 4);
    return u & 0x7fffffffu;
  }
  uint16_t h;
  memcpy(&h, (const uint8_t *)val + i * 2, 2);
  return h & 0x7fffu;
}

static float half_get(sc_dtype_t dtype, const void *val, size_t i) {
  uint16_t h;
  memcpy(&h, (const uint8_t *)val + i * 2, 2);
  return dtype == SC_FLOAT16 ? sc_half_to_float(h) : sc_bfloat16_to_float(h);
}

static void half_put(sc_dtype_t dtype, void *val, size_t i, float f) {
  uint16_t h = dtype == SC_FLOAT16 ? sc_float_to_half(f) : sc_float_to_bfloat16(f);
  memcpy((uint8_t *)val + i * 2, &h, 2);
}

double sc_sparse_value(sc_dtype_t dtype, const void *val, size_t i) {
  if (dtype == SC_FLOAT64) {
    double d;
    memcpy(&d, (const uint8_t *)val + i * 8, 8);
    return d;
  }
  if (dtype == SC_FLOAT32) {
    float f;
    memcpy(&f, (const uint8_t *)val + i * 4, 4);
    return f;
  }
  return half_get(dtype, val, i);
}

/* dst[i] = a[ia] + b[ib] in the dtype's arithmetic. */
static void add_into(sc_dtype_t dtype, void *dst, size_t i, const void *a, size_t ia, const void *b,
                     size_t ib) {
  if (dtype == SC_FLOAT64) {
    double x, y;
    memcpy(&x, (const uint8_t *)a + ia * 8, 8);
    memcpy(&y, (const uint8_t *)b + ib * 8, 8);
    x += y;
    memcpy((uint8_t *)dst + i * 8, &x, 8);
  } else if (dtype == SC_FLOAT32) {
    float x, y;
    memcpy(&x, (const uint8_t *)a + ia * 4, 4);
    memcpy(&y, (const uint8_t *)b + ib * 4, 4);
    x += y;
    memcpy((uint8_t *)dst + i * 4, &x, 4);
  } else {
    half_put(dtype, dst, i, half_get(dtype, a, ia) + half_get(dtype, b, ib));
  }
}

/* Value copy with a constant size per case, so that it compiles to a move
 * (a memcpy of variable size would be a call per element). */
static inline void copy_val(void *dst, size_t di, const void *src, size_t si, size_t w) {
  uint8_t *d = dst;
  const uint8_t *s = src;
  switch (w) {
  case 8:
    memcpy(d + di * 8, s + si * 8, 8);
    break;
  case 4:
    memcpy(d + di * 4, s + si * 4, 4);
    break;
  default:
    memcpy(d + di * 2, s + si * 2, 2);
    break;
  }
}

/* Bits of the magnitude keys per dtype (sign bit excluded). */
static int key_bits(sc_dtype_t dtype) {
  return dtype == SC_FLOAT64 ? 63 : dtype == SC_FLOAT32 ? 31 : 15;
}

/* The k-th largest (1 <= k <= n) of key[0..n): radix select from the top,
 * 11 bits per pass over the keys that share the prefix found so far. */
static uint64_t kth_largest(const uint64_t *key, size_t n, size_t k, int bits) {
  uint32_t count[1 << 11];
  uint64_t prefix = 0, mask = 0;
  for (int hi = bits; hi > 0; hi -= 11) {
    const int lo = hi > 11 ? hi - 11 : 0;
    const uint64_t digits = (1ull << (hi - lo)) - 1;
    memset(count, 0, sizeof(uint32_t) * (digits + 1));
    for (size_t i = 0; i < n; i++)
      if ((key[i] & mask) == prefix) count[(key[i] >> lo) & digits]++;
    for (uint64_t b = digits + 1; b-- > 0;) {
      if (k <= count[b]) {
        prefix |= b << lo;
        break;
      }
      k -= count[b];
    }
    mask |= digits << lo;
  }
  return prefix;
}

/* The union of A and B into work (index, value, magnitude key, source),
 * one loop per value type so that the hot path has no per-element dispatch. */
#define SC_UNION_NATIVE(NAME, T, U, MASK)                                                          \
  static size_t NAME(sc_spview_t a, sc_spview_t b, sc_merge_work_t *work) {                        \
    const T *av = a.val, *bv = b.val;                                                              \
    T *uv = work->val;                                                                             \
    uint32_t *ui = work->idx;                                                                      \
    uint8_t *src = work->src;                                                                      \
    uint64_t *key = work->key;                                                                     \
    size_t u = 0, ia = 0, ib = 0;                                                                  \
    /* Both sides non-empty: selects instead of branches (the order of the                         \
     * indices is data, and mispredicted branches would dominate). */                              \
    while (ia < a.n && ib < b.n) {                                                                 \
      const uint32_t x = a.idx[ia], y = b.idx[ib];                                                 \
      const int from_a = x <= y, from_b = y <= x;                                                  \
      const T va = av[ia], vb = bv[ib];                                                            \
      const T v = from_a && from_b ? va + vb : from_a ? va : vb;                                   \
      U bits;                                                                                      \
      memcpy(&bits, &v, sizeof(bits));                                                             \
      ui[u] = from_a ? x : y;                                                                      \
      uv[u] = v;                                                                                   \
      src[u] = (uint8_t)(from_a | from_b << 1);                                                    \
      key[u++] = bits & (MASK);                                                                    \
      ia += (size_t)from_a;                                                                        \
      ib += (size_t)from_b;                                                                        \
    }                                                                                              \
    for (; ia < a.n; ia++, u++) {                                                                  \
      U bits;                                                                                      \
      memcpy(&bits, &av[ia], sizeof(bits));                                                        \
      ui[u] = a.idx[ia], uv[u] = av[ia], src[u] = 1, key[u] = bits & (MASK);                       \
    }                                                                                              \
    for (; ib < b.n; ib++, u++) {                                                                  \
      U bits;                                                                                      \
      memcpy(&bits, &bv[ib], sizeof(bits));                                                        \
      ui[u] = b.idx[ib], uv[u] = bv[ib], src[u] = 2, key[u] = bits & (MASK);                       \
    }                                                                                              \
    return u;                                                                                      \
  }

SC_UNION_NATIVE(union_f32, float, uint32_t, 0x7fffffffu)
SC_UNION_NATIVE(union_f64, double, uint64_t, 0x7fffffffffffffffull)

static size_t union_half(sc_dtype_t dtype, sc_spview_t a, sc_spview_t b, sc_merge_work_t *work) {
  uint8_t *uval = work->val;
  size_t u = 0, ia = 0, ib = 0;
  while (ia < a.n || ib < b.n) {
    if (ib >= b.n || (ia < a.n && a.idx[ia] < b.idx[ib])) {
      work->idx[u] = a.idx[ia];
      copy_val(uval, u, a.val, ia, 2);
      work->src[u] = 1;
      ia++;
    } else if (ia >= a.n || b.idx[ib] < a.idx[ia]) {
      work->idx[u] = b.idx[ib];
      copy_val(uval, u, b.val, ib, 2);
      work->src[u] = 2;
      ib++;
    } else {
      work->idx[u] = a.idx[ia];
      add_into(dtype, uval, u, a.val, ia, b.val, ib);
      work->src[u] = 3;
      ia++;
      ib++;
    }
    work->key[u] = mag_key(dtype, uval, u);
    u++;
  }
  return u;
}

size_t sc_sparse_merge(sc_dtype_t dtype, size_t k, sc_spview_t a, sc_spview_t b, uint32_t *out_idx,
                       void *out_val, uint8_t *surv_a, uint8_t *surv_b, sc_merge_work_t *work) {
  const size_t w = width(dtype);
  size_t u, ia, ib;
  if (dtype == SC_FLOAT32)
    u = union_f32(a, b, work);
  else if (dtype == SC_FLOAT64)
    u = union_f64(a, b, work);
  else
    u = union_half(dtype, a, b, work);
  uint64_t thresh = 0;
  size_t ties = 0; /* entries equal to thresh still to keep */
  int select = u > k;
  if (select && k > 0) {
    thresh = kth_largest(work->key, u, k, key_bits(dtype));
    size_t above = 0;
    for (size_t i = 0; i < u; i++) above += work->key[i] > thresh;
    ties = k - above;
  }
  size_t o = 0;
  if (!surv_a && !surv_b) {
    if (!select) {
      memcpy(out_idx, work->idx, u * 4);
      memcpy(out_val, work->val, u * w);
      return u;
    }
    for (size_t i = 0; i < u && o < k; i++) {
      const uint64_t key = work->key[i];
      if (key > thresh || (key == thresh && ties > 0)) {
        ties -= key == thresh;
        out_idx[o] = work->idx[i];
        copy_val(out_val, o, work->val, i, w);
        o++;
      }
    }
    return o;
  }
  ia = ib = 0;
  for (size_t i = 0; i < u; i++) {
    int keep = 1;
    if (select) {
      keep = k > 0 && (work->key[i] > thresh || (work->key[i] == thresh && ties > 0));
      if (keep && work->key[i] == thresh) ties--;
    }
    if (keep) {
      out_idx[o] = work->idx[i];
      copy_val(out_val, o, work->val, i, w);
      o++;
    }
    if (work->src[i] & 1) {
      if (surv_a) surv_a[ia] = (uint8_t)keep;
      ia++;
    }
    if (work->src[i] & 2) {
      if (surv_b) surv_b[ib] = (uint8_t)keep;
      ib++;
    }
  }
  return o;
}

size_t sc_sparse_sum(sc_dtype_t dtype, const sc_spview_t *sets, size_t nsets, uint32_t *out_idx,
                     void *out_val, uint32_t *acc_idx[2], void *acc_val[2]) {
  const int dbl = dtype == SC_FLOAT64;
  size_t n = 0;
  int cur = 0;
  for (size_t s = 0; s < nsets; s++) {
    const sc_spview_t *v = &sets[s];
    uint32_t *oi = acc_idx[cur ^ 1], *pi = acc_idx[cur];
    float *of = acc_val[cur ^ 1], *pf = acc_val[cur];
    double *od = acc_val[cur ^ 1], *pd = acc_val[cur];
    size_t o = 0, i = 0, j = 0;
    while (i < n || j < v->n) {
      if (j >= v->n || (i < n && pi[i] < v->idx[j])) {
        oi[o] = pi[i];
        if (dbl)
          od[o] = pd[i];
        else
          of[o] = pf[i];
        i++;
      } else {
        double x = sc_sparse_value(dtype, v->val, j);
        int both = i < n && pi[i] == v->idx[j];
        oi[o] = v->idx[j];
        if (dbl)
          od[o] = both ? pd[i] + x : x;
        else
          of[o] = both ? pf[i] + (float)x : (float)x;
        i += (size_t)both;
        j++;
      }
      o++;
    }
    n = o;
    cur ^= 1;
  }
  const float *pf = acc_val[cur];
  const double *pd = acc_val[cur];
  memcpy(out_idx, acc_idx[cur], n * sizeof(uint32_t));
  for (size_t i = 0; i < n; i++) {
    if (dbl)
      memcpy((uint8_t *)out_val + i * 8, &pd[i], 8);
    else if (dtype == SC_FLOAT32)
      memcpy((uint8_t *)out_val + i * 4, &pf[i], 4);
    else
      half_put(dtype, out_val, i, pf[i]);
  }
  return n;
}
