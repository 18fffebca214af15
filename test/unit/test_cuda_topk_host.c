/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA top-k decisions (kernels/cuda/hd_topk.h), run on the CPU: keys
 * against magnitudes decoded by the CPU selector (sc_topk_magnitude); radix
 * digits per pass and dtype; the bucket choice of the parallel chooser
 * against a serial walk; a replay of the whole multi-pass radix select (the
 * superset of the selection appended to the candidate list in a shuffled
 * order, as the device's atomics do; its compaction through the bitmaps, or
 * the vector's when the list is not kept) and of the Gaussian-k primitives,
 * compared index for index with sc_topk_exact_indices /
 * sc_topk_gaussian_indices on random, tied, NaN and +-0 inputs in every float
 * dtype; the threshold key. Needs no GPU, and runs in builds without CUDA. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/topk.h"
#include "kernels/cpu/topk_gaussian.h"
#include "kernels/cuda/hd.h"
#include "kernels/cuda/hd_launch.h"
#include "kernels/cuda/hd_topk.h"
#include "sparsecoll.h"
#include "test/unit/test_cuda_data.h"

_Static_assert(SC_CUDA_TOPK_SAMPLE == SC_TOPK_SAMPLE, "the device samples as the CPU does");
_Static_assert(SC_CUDA_TOPK_TOP == SC_TOPK_TOP, "the device keeps the CPU's sample top");

/* ---- keys and radix digits ---- */

static const sc_dtype_t float_dtypes[] = {SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};

/* Keys order like |v| (decoded independently), NaN has key 0, the sign
 * does not matter. */
static void test_keys_order_like_magnitudes(void **state) {
  (void)state;
  enum { N = 20000 };
  static uint64_t x[N];
  rng_seed(3);
  for (unsigned t = 0; t < 4; t++) {
    sc_dtype_t dt = float_dtypes[t];
    sc_hd_keyfmt_t f = sc_hd_keyfmt(dt);
    assert_int_equal(f.size, sc_dtype_size(dt));
    fill_bits(x, N, dt);
    for (size_t i = 0; i + 1 < N; i++) {
      uint64_t bi = sc_hd_load_bits(x, f.size, i), bj = sc_hd_load_bits(x, f.size, i + 1);
      double mi = sc_topk_magnitude(x, dt, i), mj = sc_topk_magnitude(x, dt, i + 1);
      uint64_t ki = sc_hd_key(bi, &f), kj = sc_hd_key(bj, &f);
      if (isnan(mi)) assert_int_equal(ki, 0);
      if (isnan(mi) || isnan(mj)) continue;
      assert_int_equal(ki < kj, mi < mj);
      assert_int_equal(ki == kj, mi == mj);
      uint64_t sign = (uint64_t)1 << (8 * f.size - 1);
      assert_int_equal(sc_hd_key(bi ^ sign, &f), ki);
      assert_true(sc_hd_key_value(ki, dt) == mi);
    }
  }
  assert_int_equal(sc_hd_keyfmt(SC_INT32).key_bits, 0);
}

/* Passes tile the key bits from the top, digits reassemble the key, and a
 * key whose upper bits differ from the prefix is filtered out. */
static void test_radix_digits_per_pass(void **state) {
  (void)state;
  rng_seed(4);
  const unsigned want_passes[4] = {2, 2, 3, 6};
  for (unsigned t = 0; t < 4; t++) {
    sc_hd_keyfmt_t f = sc_hd_keyfmt(float_dtypes[t]);
    unsigned passes = sc_hd_radix_passes(f.key_bits);
    assert_int_equal(passes, want_passes[t]);
    assert_true(passes <= SC_CUDA_RADIX_MAX_PASSES);
    for (int rep = 0; rep < 1000; rep++) {
      uint64_t key = rng_next() & (((uint64_t)1 << f.key_bits) - 1);
      uint64_t prefix = 0;
      unsigned top = f.key_bits;
      for (unsigned p = 0; p < passes; p++) {
        unsigned s, w;
        sc_hd_radix_pass(f.key_bits, p, &s, &w);
        assert_int_equal(s + w, top);
        assert_true(w >= 1 && w <= SC_CUDA_RADIX_BITS);
        int d = sc_hd_radix_digit(key, s, w, prefix);
        assert_true(d >= 0);
        assert_int_equal(sc_hd_radix_digit(key, s, w, prefix ^ 1), -1);
        prefix = (prefix << w) | (uint64_t)d;
        top = s;
      }
      assert_int_equal(top, 0);
      assert_int_equal(prefix, key);
    }
  }
}

/* The chooser's per-bucket test picks exactly the bucket of the serial walk
 * (sparse and dense histograms, every r from 1 to the total at the edges). */
static void test_radix_bucket_choice(void **state) {
  (void)state;
  static uint32_t hist[1 << SC_CUDA_RADIX_BITS];
  rng_seed(5);
  for (int rep = 0; rep < 300; rep++) {
    unsigned w = 1 + (unsigned)(rng_next() % SC_CUDA_RADIX_BITS);
    unsigned nb = 1u << w;
    uint64_t total = 0;
    for (unsigned b = 0; b < nb; b++) {
      hist[b] = rng_next() % 3 == 0 ? (uint32_t)(rng_next() % 50) : 0;
      total += hist[b];
    }
    if (total == 0) continue;
    for (int q = 0; q < 20; q++) {
      uint64_t r = q < 2 ? (q == 0 ? 1 : total) : 1 + rng_next() % total;
      uint64_t cum_serial;
      int b_serial = sc_hd_radix_pick(hist, w, r, &cum_serial);
      assert_true(b_serial >= 0);
      /* The parallel form: each bucket knows the count above it. */
      int hits = 0;
      uint64_t cum = 0;
      for (int b = (int)nb - 1; b >= 0; b--) {
        if (sc_hd_radix_hit(cum, hist[b], r)) {
          hits++;
          assert_int_equal(b, b_serial);
          assert_int_equal(cum, cum_serial);
        }
        cum += hist[b];
      }
      assert_int_equal(hits, 1);
    }
  }
}

/* ---- replays of the device selections ---- */

/* The final compaction as the kernels do it: per-tile packed counts, an
 * exclusive scan, then per tile and thread (blocked) the take rule and the
 * positions. Writes nothing when the selection exceeds cap. */
static uint64_t replay_compact(const void *x, size_t n, const sc_hd_keyfmt_t *f, uint64_t t,
                               uint64_t r, uint64_t cap, uint32_t *out) {
  uint64_t ntiles = sc_hd_tiles(n);
  uint64_t *tiles = calloc(ntiles + 1, sizeof *tiles);
  assert_non_null(tiles);
  for (uint64_t b = 0; b < ntiles; b++)
    for (uint64_t i = b * SC_CUDA_TILE; i < n && i < (b + 1) * SC_CUDA_TILE; i++) {
      unsigned fl = sc_hd_select_flags(sc_hd_load_bits(x, f->size, i), f, t);
      tiles[b] += ((uint64_t)(fl & 1u) << 32) | ((fl >> 1) & 1u);
    }
  uint64_t sum = 0;
  for (uint64_t b = 0; b < ntiles; b++) {
    uint64_t v = tiles[b];
    tiles[b] = sum;
    sum += v;
  }
  uint64_t total = sc_hd_select_total(sum >> 32, sum & 0xffffffffu, r);
  if (total <= cap) {
    uint8_t *seen = calloc(total + 1, 1);
    for (uint64_t b = 0; b < ntiles; b++) {
      uint64_t gt = tiles[b] >> 32, eq = tiles[b] & 0xffffffffu;
      for (uint64_t i = b * SC_CUDA_TILE; i < n && i < (b + 1) * SC_CUDA_TILE; i++) {
        unsigned fl = sc_hd_select_flags(sc_hd_load_bits(x, f->size, i), f, t);
        uint64_t pos;
        if (sc_hd_select_take(fl, gt, eq, r, &pos)) {
          assert_true(pos < total);
          assert_false(seen[pos]);
          seen[pos] = 1;
          out[pos] = (uint32_t)i;
        }
        gt += fl & 1u;
        eq += (fl >> 1) & 1u;
      }
    }
    free(seen);
  }
  free(tiles);
  return sum >> 32 == 0 && r == 0 ? 0 : total;
}

static void shuffle(uint32_t *v, size_t m) {
  for (size_t i = m; i > 1; i--) {
    size_t j = rng_next() % i;
    uint32_t tmp = v[i - 1];
    v[i - 1] = v[j];
    v[j] = tmp;
  }
}

/* The compaction of a kept list as the kernels do it: the selected entries
 * marked in two bitmaps (in the list's shuffled order), per-tile packed bit
 * counts over 16-byte groups of words, an exclusive scan, then per group the
 * bits in index order. */
static uint64_t replay_compact_list(const void *x, size_t n, const sc_hd_keyfmt_t *f,
                                    const sc_radix_state_t *st, const uint32_t *list, uint64_t cap,
                                    uint32_t *out) {
  uint64_t words = sc_hd_map_words(n), ntiles = sc_hd_map_tiles(n);
  uint32_t *gt = calloc(words, 4), *eq = calloc(words, 4);
  uint64_t *tiles = calloc(ntiles + 1, sizeof *tiles);
  assert_true(gt && eq && tiles);
  for (uint64_t j = 0; j < st->len; j++) {
    uint32_t i = list[j];
    unsigned fl = sc_hd_select_flags(sc_hd_load_bits(x, f->size, i), f, st->prefix);
    if (fl & 1u) gt[i >> 5] |= 1u << (i & 31u);
    if (fl & 2u) eq[i >> 5] |= 1u << (i & 31u);
  }
  const uint64_t ngroups = words / SC_CUDA_MAP_ITEMS;
  for (uint64_t v = 0; v < ngroups; v++)
    for (unsigned q = 0; q < SC_CUDA_MAP_ITEMS; q++) {
      uint64_t w = v * SC_CUDA_MAP_ITEMS + q;
      tiles[v / SC_CUDA_MAP_THREADS] +=
          ((uint64_t)__builtin_popcount(gt[w]) << 32) | (uint64_t)__builtin_popcount(eq[w]);
    }
  uint64_t sum = 0;
  for (uint64_t b = 0; b < ntiles; b++) {
    uint64_t v = tiles[b];
    tiles[b] = sum;
    sum += v;
  }
  uint64_t total = sc_hd_select_total(sum >> 32, sum & 0xffffffffu, st->r);
  if (total <= cap) {
    uint8_t *seen = calloc(total + 1, 1);
    for (uint64_t b = 0; b < ntiles; b++) {
      uint64_t g = tiles[b] >> 32, e = tiles[b] & 0xffffffffu;
      for (uint64_t w = b * SC_CUDA_MAP_TILE; w < words && w < (b + 1) * SC_CUDA_MAP_TILE; w++)
        for (unsigned bit = 0; bit < 32; bit++) {
          unsigned fl = sc_hd_map_flags(gt[w], eq[w], bit);
          if (!fl) continue;
          uint64_t pos;
          if (sc_hd_select_take(fl, g, e, st->r, &pos)) {
            assert_true(pos < total);
            assert_false(seen[pos]);
            seen[pos] = 1;
            out[pos] = (uint32_t)(w * 32 + bit);
          }
          g += fl & 1u;
          e += (fl >> 1) & 1u;
        }
    }
    free(seen);
  }
  free(gt);
  free(eq);
  free(tiles);
  return total;
}

/* The exact selection pass by pass: the fused filter and histogram over the
 * vector or the candidate list, the superset appended to the list (in a
 * shuffled order, as atomics do) when the state asks, the chooser (every
 * bucket tests sc_hd_radix_hit; exactly one advances the state), then the
 * compaction of the list (paths[1]) or of the vector (paths[0]). */
static size_t replay_exact(const void *x, size_t n, sc_dtype_t dt, size_t k, uint32_t *out,
                           int paths[2]) {
  sc_hd_keyfmt_t f = sc_hd_keyfmt(dt);
  if (k == 0 || n == 0) return 0;
  sc_hd_topk_layout_t l = sc_hd_topk_layout(n, sc_hd_tiles(n));
  sc_radix_state_t st;
  sc_hd_radix_init(&st, n, k < n ? k : n, l.cap);
  uint32_t *list = malloc((l.cap + 1) * 4);
  static uint32_t hist[1 << SC_CUDA_RADIX_BITS];
  if (k < n) {
    for (unsigned p = 0; p < sc_hd_radix_passes(f.key_bits); p++) {
      unsigned s, w;
      sc_hd_radix_pass(f.key_bits, p, &s, &w);
      memset(hist, 0, sizeof hist);
      uint64_t len = sc_hd_radix_src_len(&st, n), superset = st.above + st.cand;
      int write = st.write;
      if (write) assert_int_equal(st.src, SC_RADIX_SRC_VECTOR);
      for (uint64_t j = 0; j < len; j++) {
        uint32_t i = st.src == SC_RADIX_SRC_VECTOR ? (uint32_t)j : list[j];
        uint64_t key = sc_hd_key(sc_hd_load_bits(x, f.size, i), &f);
        int d = sc_hd_radix_digit(key, s, w, st.prefix);
        if (d >= 0) hist[d]++;
        if (write && sc_hd_radix_keep(key, s, w, st.prefix)) {
          assert_true(st.len < l.cap);
          list[st.len++] = i;
        }
      }
      if (write) {
        assert_int_equal(st.len, superset);
        shuffle(list, st.len);
      }
      int hits = 0;
      uint64_t cum = 0, r = st.r;
      for (int b = (1 << w) - 1; b >= 0; b--) {
        if (sc_hd_radix_hit(cum, hist[b], r)) {
          sc_hd_radix_advance(&st, w, (uint64_t)b, cum, hist[b]);
          hits++;
        }
        cum += hist[b];
      }
      assert_int_equal(hits, 1);
      if (write) assert_int_equal(st.src, SC_RADIX_SRC_LIST);
    }
  }
  uint64_t total;
  if (st.src == SC_RADIX_SRC_LIST) {
    paths[1] = 1;
    total = replay_compact_list(x, n, &f, &st, list, k, out);
  } else {
    paths[0] = 1;
    total = replay_compact(x, n, &f, st.prefix, st.r, k, out);
  }
  free(list);
  return (size_t)total;
}

static void test_exact_replay_equals_cpu(void **state) {
  (void)state;
  const size_t ns[] = {0, 1, 2, 3, 7, 31, 97, 1009, 2048, 2049, 5003, 70001};
  int paths[2] = {0, 0};
  rng_seed(6);
  for (unsigned t = 0; t < 4; t++) {
    sc_dtype_t dt = float_dtypes[t];
    for (unsigned a = 0; a < sizeof ns / sizeof ns[0]; a++) {
      size_t n = ns[a];
      void *x = malloc(n * 8 + 8);
      for (int kind = 0; kind < 5; kind++) {
        if (n > 5003 && kind != 0 && kind != 1) continue;
        fill_case(x, n, dt, kind);
        const size_t ks[] = {1, 2, n / 100 + 1, n / 2, n > 0 ? n - 1 : 0, n, n + 5};
        for (unsigned q = 0; q < sizeof ks / sizeof ks[0]; q++) {
          size_t k = ks[q], m = k < n ? k : n;
          uint32_t *cpu = malloc(2 * m * 4 + 4), *dev = malloc(m * 4 + 4);
          size_t cpu_nnz = 0;
          assert_int_equal(sc_topk_exact_indices(x, n, dt, k, cpu, &cpu_nnz), SC_SUCCESS);
          size_t dev_nnz = replay_exact(x, n, dt, k, dev, paths);
          if (dev_nnz != cpu_nnz)
            fail_msg("dtype %d kind %d n %zu k %zu: %zu entries, CPU %zu", (int)dt, kind, n, k,
                     dev_nnz, cpu_nnz);
          if (dev_nnz && memcmp(cpu, dev, dev_nnz * 4) != 0)
            fail_msg("dtype %d kind %d n %zu k %zu: indices differ", (int)dt, kind, n, k);
          free(cpu);
          free(dev);
        }
      }
      free(x);
    }
  }
  /* Both compactions were exercised: the kept list's and the vector's. */
  assert_true(paths[0] && paths[1]);
}

/* The Gaussian selector assembled from the device primitives (the sample
 * plan, the key of a threshold, the count and compaction) and the CPU's
 * decisions, exactly as docs/CUDA.md prescribes for the caller. */
static int cmp_desc(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? 1 : (x > y ? -1 : 0);
}

static size_t replay_gaussian(const void *x, size_t n, sc_dtype_t dt, size_t k, uint32_t *out) {
  sc_hd_keyfmt_t f = sc_hd_keyfmt(dt);
  int paths[2] = {0, 0};
  if (k == 0 || n == 0) return 0;
  if (k >= n) return replay_exact(x, n, dt, k, out, paths);
  uint64_t cnt, stride, first;
  sc_hd_sample_plan(n, k, &cnt, &stride, &first);
  double *v = malloc(cnt * sizeof *v);
  size_t m = 0;
  for (uint64_t j = 0; j < cnt; j++) {
    double val = sc_hd_key_value(sc_hd_mag(sc_hd_load_bits(x, f.size, first + j * stride), &f), dt);
    if (isfinite(val)) v[m++] = val;
  }
  qsort(v, m, sizeof *v, cmp_desc);
  size_t h = m < SC_CUDA_TOPK_TOP ? m : SC_CUDA_TOPK_TOP;
  double slope;
  double t = sc_topk_sample_threshold(v, h, cnt, n, k, &slope);
  free(v);
  sc_topk_search_t s;
  sc_topk_search_init(&s, k, slope);
  for (int round = 0; round < SC_TOPK_ROUNDS && h > 0; round++) {
    uint64_t key;
    if (isnan(t) || !sc_topk_search_key(&s, sc_hd_threshold_key(dt, t), &key)) break;
    size_t count = (size_t)replay_compact(x, n, &f, key, 0, 2 * k, out);
    if (sc_topk_search_record(&s, key, sc_hd_key_value(key, dt), count)) return count;
    t = sc_topk_search_next(&s);
  }
  return replay_exact(x, n, dt, k, out, paths);
}

static void test_gaussian_replay_equals_cpu(void **state) {
  (void)state;
  const size_t ns[] = {1, 2, 97, 1009, 5003, 100003};
  rng_seed(7);
  for (unsigned t = 0; t < 4; t++) {
    sc_dtype_t dt = float_dtypes[t];
    for (unsigned a = 0; a < sizeof ns / sizeof ns[0]; a++) {
      size_t n = ns[a];
      void *x = malloc(n * 8);
      for (int kind = 0; kind < 5; kind++) {
        if (n > 5003 && kind != 0) continue;
        fill_case(x, n, dt, kind);
        const size_t ks[] = {1, n / 1000 + 1, n / 100 + 1, n / 3 + 1, n};
        for (unsigned q = 0; q < sizeof ks / sizeof ks[0]; q++) {
          size_t k = ks[q], m = k < n ? k : n;
          uint32_t *cpu = malloc(2 * m * 4 + 4), *dev = malloc(2 * m * 4 + 4);
          size_t cpu_nnz = 0;
          assert_int_equal(sc_topk_gaussian_indices(x, n, dt, k, cpu, &cpu_nnz), SC_SUCCESS);
          size_t dev_nnz = replay_gaussian(x, n, dt, k, dev);
          if (dev_nnz != cpu_nnz || (dev_nnz && memcmp(cpu, dev, dev_nnz * 4) != 0))
            fail_msg("dtype %d kind %d n %zu k %zu: %zu entries, CPU %zu (or indices differ)",
                     (int)dt, kind, n, k, dev_nnz, cpu_nnz);
          free(cpu);
          free(dev);
        }
      }
      free(x);
    }
  }
}

/* The threshold key: the largest key whose magnitude is <= t. */
static void test_threshold_key(void **state) {
  (void)state;
  rng_seed(8);
  for (unsigned t = 0; t < 4; t++) {
    sc_dtype_t dt = float_dtypes[t];
    sc_hd_keyfmt_t f = sc_hd_keyfmt(dt);
    assert_int_equal(sc_hd_threshold_key(dt, -1.0), 0);
    assert_int_equal(sc_hd_threshold_key(dt, NAN), 0);
    assert_int_equal(sc_hd_threshold_key(dt, INFINITY), f.inf_key);
    for (int rep = 0; rep < 2000; rep++) {
      double v = fabs(rng_normal()) * pow(10.0, (double)(rng_next() % 9) - 4);
      uint64_t key = sc_hd_threshold_key(dt, v);
      assert_true(sc_hd_key_value(key, dt) <= v);
      assert_true(key < f.inf_key);
      assert_true(sc_hd_key_value(key + 1, dt) > v);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keys_order_like_magnitudes),
      cmocka_unit_test(test_radix_digits_per_pass),
      cmocka_unit_test(test_radix_bucket_choice),
      cmocka_unit_test(test_exact_replay_equals_cpu),
      cmocka_unit_test(test_gaussian_replay_equals_cpu),
      cmocka_unit_test(test_threshold_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
