/* SPDX-License-Identifier: BSD-3-Clause */
/* The per-dtype passes of topk_keys.h, written once as a macro and expanded
 * for 16-, 32- and 64-bit patterns: each pass is a plain loop over the raw
 * bits, so the key computation (and, where the loop allows it, the whole
 * pass) vectorizes without a call or a switch per element. */
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/topk_keys.h"

/* The caller's buffer holds floats; reading it as integers of the same width
 * must not be subject to type-based alias analysis. */
#if defined(__GNUC__)
typedef uint16_t __attribute__((may_alias)) sc_topk_b16;
typedef uint32_t __attribute__((may_alias)) sc_topk_b32;
typedef uint64_t __attribute__((may_alias)) sc_topk_b64;
#else
typedef uint16_t sc_topk_b16;
typedef uint32_t sc_topk_b32;
typedef uint64_t sc_topk_b64;
#endif

/* Compaction passes test fixed-size chunks first: gcc -O2's vector cost
 * model only takes loops whose trip count needs no epilogue. */
#define SC_TOPK_SKIP 32

/* The streaming passes prefetch this many bytes ahead of the element they
 * read: on the 2-core VM the hardware prefetcher alone left one core's reads
 * of 100 MiB at 7-9 GB/s, and with a software prefetch 1 KiB ahead the
 * exact selector's best time went from 32 to 30 ms and the Gaussian one's
 * from 11-12 to 9-10 ms (float32, n = 25 * 2^20, k = n / 1000, alternating
 * builds). A prefetch never faults, so reading past the end of the vector is
 * harmless; the address is formed as an integer so that no out-of-bounds
 * pointer is computed. */
#define SC_TOPK_AHEAD 1024

static inline void prefetch_ahead(const void *p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64)
    __builtin_prefetch((const void *)((uintptr_t)p + SC_TOPK_AHEAD + o));
}

/* SFX: name suffix; B: the pattern type; S: a signed type of the same width
 * (keys are below its maximum, and SSE2 compares signed lanes only); ABS:
 * magnitude mask; INF: key of infinity; BITS: key width. */
#define SC_TOPK_DEFINE(SFX, B, S, ABS, INF, BITS)                                                  \
  static inline S key_##SFX(B b) {                                                                 \
    S m = (S)(b & (ABS));                                                                          \
    return m > (S)(INF) ? 0 : m;                                                                   \
  }                                                                                                \
                                                                                                   \
  static void hist_##SFX(const void *xv, size_t n, unsigned s, unsigned w, uint64_t prefix,        \
                         uint32_t *hist) {                                                         \
    const B *x = xv;                                                                               \
    uint64_t mask = ((uint64_t)1 << w) - 1;                                                        \
    int whole = s + w >= (BITS);                                                                   \
    for (size_t i = 0; i < n;) {                                                                   \
      size_t e = n - i > SC_TOPK_SKIP ? i + SC_TOPK_SKIP : n;                                      \
      prefetch_ahead(x + i, SC_TOPK_SKIP * sizeof(B));                                             \
      if (whole) {                                                                                 \
        for (; i < e; i++) hist[(uint64_t)key_##SFX(x[i]) >> s]++;                                 \
      } else {                                                                                     \
        for (; i < e; i++) {                                                                       \
          uint64_t k = (uint64_t)key_##SFX(x[i]);                                                  \
          if ((k >> (s + w)) == prefix) hist[(k >> s) & mask]++;                                   \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  static void hist_list_##SFX(const void *xv, const uint32_t *list, size_t m, unsigned s,          \
                              unsigned w, uint64_t prefix, uint32_t *hist) {                       \
    const B *x = xv;                                                                               \
    uint64_t mask = ((uint64_t)1 << w) - 1;                                                        \
    for (size_t j = 0; j < m; j++) {                                                               \
      uint64_t k = (uint64_t)key_##SFX(x[list[j]]);                                                \
      if ((k >> (s + w)) == prefix) hist[(k >> s) & mask]++;                                       \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  /* Number of keys > t (t may be -1: all); their indices go to out while                          \
   * they fit in cap. Chunks are first counted with vector compares, so the                        \
   * compaction loop runs only where something passes (a few percent of the                        \
   * chunks at the densities top-k is used with), and not at all once the                          \
   * count has passed cap. */                                                                      \
  static size_t collect_##SFX(const B *x, size_t n, S t, uint32_t *out, size_t cap) {              \
    size_t c = 0, i = 0;                                                                           \
    for (; i + SC_TOPK_SKIP <= n; i += SC_TOPK_SKIP) {                                             \
      prefetch_ahead(x + i, SC_TOPK_SKIP * sizeof(B));                                             \
      S h = 0;                                                                                     \
      for (size_t j = 0; j < SC_TOPK_SKIP; j++) h += key_##SFX(x[i + j]) > t ? 1 : 0;              \
      if (h == 0) continue;                                                                        \
      if (c + (size_t)h <= cap) {                                                                  \
        for (size_t j = 0; j < SC_TOPK_SKIP; j++)                                                  \
          if (key_##SFX(x[i + j]) > t) out[c++] = (uint32_t)(i + j);                               \
      } else {                                                                                     \
        c += (size_t)h;                                                                            \
        cap = 0;                                                                                   \
      }                                                                                            \
    }                                                                                              \
    for (; i < n; i++) {                                                                           \
      if (key_##SFX(x[i]) > t) {                                                                   \
        if (c < cap) out[c] = (uint32_t)i;                                                         \
        c++;                                                                                       \
      }                                                                                            \
    }                                                                                              \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  static size_t collect_up_to_##SFX(const void *xv, size_t n, uint64_t t, uint32_t *out,           \
                                    size_t cap) {                                                  \
    return collect_##SFX(xv, n, (S)t, out, cap);                                                   \
  }                                                                                                \
                                                                                                   \
  static size_t gather_##SFX(const void *xv, size_t n, unsigned s, uint64_t min_prefix,            \
                             uint32_t *out) {                                                      \
    S t = min_prefix == 0 ? (S)-1 : (S)((min_prefix << s) - 1);                                    \
    return collect_##SFX(xv, n, t, out, SIZE_MAX);                                                 \
  }                                                                                                \
                                                                                                   \
  static size_t select_##SFX(const void *xv, size_t n, uint64_t t, size_t ties, uint32_t *out) {   \
    const B *x = xv;                                                                               \
    if (ties == 0) return collect_##SFX(x, n, (S)t, out, SIZE_MAX);                                \
    size_t c = 0;                                                                                  \
    for (size_t i = 0; i < n; i++) {                                                               \
      uint64_t raw = (uint64_t)(x[i] & (ABS));                                                     \
      if ((uint64_t)key_##SFX(x[i]) > t) {                                                         \
        out[c++] = (uint32_t)i;                                                                    \
      } else if (raw == t && ties > 0) {                                                           \
        out[c++] = (uint32_t)i;                                                                    \
        ties--;                                                                                    \
      }                                                                                            \
    }                                                                                              \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  static size_t filter_##SFX(const void *xv, const uint32_t *list, size_t m, uint64_t t,           \
                             size_t ties, uint32_t *out) {                                         \
    const B *x = xv;                                                                               \
    size_t c = 0;                                                                                  \
    for (size_t j = 0; j < m; j++) {                                                               \
      uint32_t i = list[j];                                                                        \
      uint64_t raw = (uint64_t)(x[i] & (ABS));                                                     \
      if ((uint64_t)key_##SFX(x[i]) > t) {                                                         \
        out[c++] = i;                                                                              \
      } else if (raw == t && ties > 0) {                                                           \
        out[c++] = i;                                                                              \
        ties--;                                                                                    \
      }                                                                                            \
    }                                                                                              \
    return c;                                                                                      \
  }

SC_TOPK_DEFINE(h16, sc_topk_b16, int16_t, 0x7fffu, 0x7c00, 15)
SC_TOPK_DEFINE(b16, sc_topk_b16, int16_t, 0x7fffu, 0x7f80, 15)
SC_TOPK_DEFINE(f32, sc_topk_b32, int32_t, 0x7fffffffu, 0x7f800000, 31)
SC_TOPK_DEFINE(f64, sc_topk_b64, int64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ll, 63)

static double value_h16(uint64_t key) {
  return (double)sc_half_to_float((uint16_t)key);
}

static double value_b16(uint64_t key) {
  return (double)sc_bfloat16_to_float((uint16_t)key);
}

static double value_f32(uint64_t key) {
  uint32_t u = (uint32_t)key;
  float f;
  memcpy(&f, &u, sizeof f);
  return (double)f;
}

static double value_f64(uint64_t key) {
  double d;
  memcpy(&d, &key, sizeof d);
  return d;
}

#define SC_TOPK_OPS(SFX, BITS, INF)                                                                \
  {                                                                                                \
    (BITS), (INF), hist_##SFX, hist_list_##SFX, gather_##SFX, select_##SFX, filter_##SFX,          \
        collect_up_to_##SFX, value_##SFX                                                           \
  }

static const sc_topk_ops_t ops_h16 = SC_TOPK_OPS(h16, 15, 0x7c00u);
static const sc_topk_ops_t ops_b16 = SC_TOPK_OPS(b16, 15, 0x7f80u);
static const sc_topk_ops_t ops_f32 = SC_TOPK_OPS(f32, 31, 0x7f800000u);
static const sc_topk_ops_t ops_f64 = SC_TOPK_OPS(f64, 63, 0x7ff0000000000000ull);

const sc_topk_ops_t *sc_topk_ops(sc_dtype_t dtype) {
  switch (dtype) {
  case SC_FLOAT16:
    return &ops_h16;
  case SC_BFLOAT16:
    return &ops_b16;
  case SC_FLOAT32:
    return &ops_f32;
  case SC_FLOAT64:
    return &ops_f64;
  default:
    return NULL;
  }
}
