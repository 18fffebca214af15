/* SPDX-License-Identifier: BSD-3-Clause */
/* The passes of topk_mstopk_passes.h, written once as a macro and expanded
 * for 16-, 32- and 64-bit patterns. The per-element work of the counting and
 * statistics loops is selects and integer compares over fixed-size chunks
 * (gcc -O2's cheap vector cost model takes only loops with a known trip count
 * and no in-order float reduction), so they vectorize; a chunk holding an
 * entry for the list, rare by construction, is then compacted by a scalar
 * loop. */
#include <string.h>

#include "kernels/cpu/topk_mstopk_passes.h"
#include "kernels/half_bits.h"

#if defined(__GNUC__)
typedef uint16_t __attribute__((may_alias)) sc_mst_b16;
typedef uint32_t __attribute__((may_alias)) sc_mst_b32;
typedef uint64_t __attribute__((may_alias)) sc_mst_b64;
#else
typedef uint16_t sc_mst_b16;
typedef uint32_t sc_mst_b32;
typedef uint64_t sc_mst_b64;
#endif

/* Elements per vectorized chunk (one float lane each for the sum and the
 * maximum: element-wise, no horizontal step per chunk), and chunks per
 * flush of the lanes into the double sum (no float lane adds more than 64
 * magnitudes). */
#define SC_MST_CHUNK 32
#define SC_MST_FLUSH 64
/* Bytes prefetched ahead (see kernels/cpu/topk_keys.c: software prefetch
 * helps one core's streaming reads on the development VM). */
#define SC_MST_AHEAD 1024

/* The statistics pass is bound by instructions, not memory, with SSE2 alone
 * (no 32-bit max or blend: each takes three instructions there): on x86-64
 * it is also built for AVX2 and picked at load time where the CPU has it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define SC_MST_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SC_MST_CLONES
#endif

static inline void mst_prefetch(const void *p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64)
    __builtin_prefetch((const void *)((uintptr_t)p + SC_MST_AHEAD + o));
}

static inline float val_h16(int16_t m) {
  return sc_half_to_float_core((uint16_t)m);
}
static inline float val_b16(int16_t m) {
  return sc_bfloat16_to_float_core((uint16_t)m);
}
static inline float val_f32(int32_t m) {
  return sc_bits_f32((uint32_t)m);
}
static inline double val_f64(int64_t m) {
  return sc_bits_f64((uint64_t)m);
}

/* SFX: name suffix; B: the pattern type; S: a signed type of the same width
 * (magnitude keys are below its maximum, and SSE2 compares signed lanes
 * only); ABS: magnitude mask; INF: key of infinity; A: the type of the lane
 * sums. */
#define SC_MST_DEFINE(SFX, B, S, ABS, INF, A)                                                      \
  static inline S mkey_##SFX(B b) {                                                                \
    return (S)(b & (ABS));                                                                         \
  }                                                                                                \
                                                                                                   \
  static uint64_t key_at_##SFX(const void *xv, size_t i) {                                         \
    return (uint64_t)mkey_##SFX(((const B *)xv)[i]);                                               \
  }                                                                                                \
                                                                                                   \
  /* The lanes' sum by a fixed tree of element-wise adds (each a vector                            \
   * loop), the lanes cleared. */                                                                  \
  static inline double lane_sum_##SFX(A *lane) {                                                   \
    for (size_t w = SC_MST_CHUNK / 2; w > 0; w /= 2)                                               \
      for (size_t j = 0; j < w; j++) lane[j] += lane[j + w];                                       \
    double t = (double)lane[0];                                                                    \
    for (size_t j = 0; j < SC_MST_CHUNK; j++) lane[j] = 0;                                         \
    return t;                                                                                      \
  }                                                                                                \
                                                                                                   \
  SC_MST_CLONES static void scan_##SFX(const void *xv, size_t n, uint64_t g64, uint32_t *idx,      \
                                       void *keysv, size_t cap, sc_mstopk_stats_t *st) {           \
    const B *x = xv;                                                                               \
    S *keys = keysv;                                                                               \
    /* g == 0 lists nothing: a threshold above every key. The vector loop                          \
     * only flags chunks holding a key >= gate, which covers the listed ones                       \
     * and every infinity and NaN; the scalar loop over a flagged chunk                            \
     * counts those and lists. */                                                                  \
    const S g = g64 == 0 ? (S)((INF) + 1) : (S)g64;                                                \
    const S gate = g < (S)(INF) ? g : (S)(INF);                                                    \
    double sum = 0;                                                                                \
    uint64_t nonfin = 0, ninf = 0;                                                                 \
    S mx = 0;                                                                                      \
    size_t c = 0, i = 0;                                                                           \
    A lane[SC_MST_CHUNK] = {0};                                                                    \
    S mxl[SC_MST_CHUNK] = {0};                                                                     \
    unsigned chunks = 0;                                                                           \
    for (;;) {                                                                                     \
      size_t len = n - i >= SC_MST_CHUNK ? SC_MST_CHUNK : n - i;                                   \
      S hits = 0;                                                                                  \
      if (len == SC_MST_CHUNK) {                                                                   \
        mst_prefetch(x + i, SC_MST_CHUNK * sizeof(B));                                             \
        for (size_t j = 0; j < SC_MST_CHUNK; j++) {                                                \
          S m = mkey_##SFX(x[i + j]);                                                              \
          /* An integer select, then the magnitude of 0 or m: no float select. */                  \
          S mf = m < (S)(INF) ? m : 0;                                                             \
          lane[j] += val_##SFX(mf);                                                                \
          mxl[j] = mf > mxl[j] ? mf : mxl[j];                                                      \
          hits += m >= gate;                                                                       \
        }                                                                                          \
        if (++chunks == SC_MST_FLUSH) {                                                            \
          sum += lane_sum_##SFX(lane);                                                             \
          chunks = 0;                                                                              \
        }                                                                                          \
      } else {                                                                                     \
        for (size_t j = 0; j < len; j++) {                                                         \
          S m = mkey_##SFX(x[i + j]);                                                              \
          S mf = m < (S)(INF) ? m : 0;                                                             \
          sum += (double)val_##SFX(mf);                                                            \
          mx = mf > mx ? mf : mx;                                                                  \
        }                                                                                          \
        hits = len > 0;                                                                            \
      }                                                                                            \
      /* Branch-free: every entry is written at slot min(c, cap) (slot cap                         \
       * is scratch) and c advances for the listed ones. */                                        \
      if (hits)                                                                                    \
        for (size_t j = 0; j < len; j++) {                                                         \
          S m = mkey_##SFX(x[i + j]);                                                              \
          nonfin += m >= (S)(INF);                                                                 \
          ninf += m == (S)(INF);                                                                   \
          size_t at = c < cap ? c : cap;                                                           \
          idx[at] = (uint32_t)(i + j);                                                             \
          keys[at] = m;                                                                            \
          c += (m >= g) & (m <= (S)(INF));                                                         \
        }                                                                                          \
      i += len;                                                                                    \
      if (len < SC_MST_CHUNK) break;                                                               \
    }                                                                                              \
    sum += lane_sum_##SFX(lane);                                                                   \
    for (size_t j = 0; j < SC_MST_CHUNK; j++) mx = mxl[j] > mx ? mxl[j] : mx;                      \
    st->sum = sum;                                                                                 \
    st->nfinite = (uint64_t)n - nonfin;                                                            \
    st->ninf = ninf;                                                                               \
    st->max_key = (uint64_t)mx;                                                                    \
    st->listed = c;                                                                                \
  }                                                                                                \
                                                                                                   \
  SC_MST_CLONES static size_t count_##SFX(const void *xv, size_t n, uint64_t t64) {                \
    const B *x = xv;                                                                               \
    const S t = (S)t64;                                                                            \
    size_t c = 0, i = 0;                                                                           \
    for (; i + SC_MST_CHUNK <= n; i += SC_MST_CHUNK) {                                             \
      mst_prefetch(x + i, SC_MST_CHUNK * sizeof(B));                                               \
      S h = 0;                                                                                     \
      for (size_t j = 0; j < SC_MST_CHUNK; j++) {                                                  \
        S m = mkey_##SFX(x[i + j]);                                                                \
        h += (m >= t) & (m <= (S)(INF));                                                           \
      }                                                                                            \
      c += (size_t)h;                                                                              \
    }                                                                                              \
    for (; i < n; i++) {                                                                           \
      S m = mkey_##SFX(x[i]);                                                                      \
      c += (m >= t) & (m <= (S)(INF));                                                             \
    }                                                                                              \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  static size_t count_list_##SFX(const void *keysv, size_t m, uint64_t t64) {                      \
    const S *k = keysv;                                                                            \
    const S t = (S)t64;                                                                            \
    size_t c = 0, j = 0;                                                                           \
    for (; j + SC_MST_CHUNK <= m; j += SC_MST_CHUNK) {                                             \
      S h = 0;                                                                                     \
      for (size_t l = 0; l < SC_MST_CHUNK; l++) h += k[j + l] >= t;                                \
      c += (size_t)h;                                                                              \
    }                                                                                              \
    for (; j < m; j++) c += k[j] >= t;                                                             \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  static size_t select_##SFX(const void *xv, size_t n, const sc_mstopk_t *s, uint32_t *out) {      \
    const B *x = xv;                                                                               \
    uint64_t fill = sc_mstopk_fill(s);                                                             \
    size_t c = 0;                                                                                  \
    for (size_t i = 0; i < n; i++) {                                                               \
      S m = mkey_##SFX(x[i]);                                                                      \
      if (m <= (S)(INF) && sc_mstopk_take(s, (uint64_t)m, &fill)) out[c++] = (uint32_t)i;          \
    }                                                                                              \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  static size_t select_list_##SFX(const uint32_t *idx, const void *keysv, size_t m,                \
                                  const sc_mstopk_t *s, uint32_t *out) {                           \
    const S *k = keysv;                                                                            \
    uint64_t fill = sc_mstopk_fill(s);                                                             \
    size_t c = 0;                                                                                  \
    for (size_t j = 0; j < m; j++)                                                                 \
      if (sc_mstopk_take(s, (uint64_t)k[j], &fill)) out[c++] = idx[j];                             \
    return c;                                                                                      \
  }                                                                                                \
                                                                                                   \
  static const sc_mstopk_ops_t ops_##SFX = {sizeof(S),        scan_##SFX,   count_##SFX,           \
                                            count_list_##SFX, select_##SFX, select_list_##SFX,     \
                                            key_at_##SFX};

SC_MST_DEFINE(h16, sc_mst_b16, int16_t, 0x7fffu, 0x7c00, float)
SC_MST_DEFINE(b16, sc_mst_b16, int16_t, 0x7fffu, 0x7f80, float)
SC_MST_DEFINE(f32, sc_mst_b32, int32_t, 0x7fffffffu, 0x7f800000, float)
SC_MST_DEFINE(f64, sc_mst_b64, int64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ll, double)

const sc_mstopk_ops_t *sc_mstopk_ops(sc_dtype_t dtype) {
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
