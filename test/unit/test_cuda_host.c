/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA kernels' element arithmetic and launch geometry
 * (kernels/cuda/hd.h, hd_launch.h), run on the CPU against the CPU kernels as
 * the independent reference: every dtype and op of the element reduction and
 * AVG; the scatter's averaging; grid sizes, vector width by alignment and
 * balanced chunks for counts 0, 1, primes and unaligned offsets. The fp16/bf16
 * conversion cores are the CPU converters' own (kernels/half_bits.h), which
 * test_kernels checks against references of its own. The top-k decisions are
 * test_cuda_topk_host.c's. Needs no GPU, and runs in builds without CUDA. */
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
#include "kernels/cuda/hd.h"
#include "kernels/cuda/hd_launch.h"
#include "kernels/cuda/hd_topk.h"
#include "sparsecoll.h"
#include "test/unit/test_cuda_data.h"

/* ---- element reductions and AVG ---- */

static const sc_dtype_t all_dtypes[] = {SC_INT8,   SC_UINT8,   SC_INT32,    SC_UINT32,  SC_INT64,
                                        SC_UINT64, SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};

/* The device kernels' element loops, run here. */
static void hd_reduce(sc_dtype_t dtype, int op, void *dst, const void *a, const void *b, size_t n) {
  switch (dtype) {
#define CASE(DTYPE, T, SFX)                                                                        \
  case DTYPE:                                                                                      \
    for (size_t i = 0; i < n; i++)                                                                 \
      ((T *)dst)[i] = sc_hd_red_##SFX(op, ((const T *)a)[i], ((const T *)b)[i]);                   \
    break;
    SC_HD_FOR_EACH_DTYPE(CASE)
#undef CASE
  }
}

static void hd_avg(sc_dtype_t dtype, void *buf, size_t n, int d) {
  switch (dtype) {
#define CASE(DTYPE, T, SFX)                                                                        \
  case DTYPE:                                                                                      \
    for (size_t i = 0; i < n; i++) ((T *)buf)[i] = sc_hd_avg_##SFX(((T *)buf)[i], d);              \
    break;
    SC_HD_FOR_EACH_DTYPE(CASE)
#undef CASE
  }
}

static void test_reduce_every_dtype_and_op(void **state) {
  (void)state;
  enum { N = 4099 };
  static uint8_t a[N * 8], b[N * 8], ref[N * 8], got[N * 8];
  rng_seed(2);
  for (unsigned t = 0; t < sizeof all_dtypes / sizeof all_dtypes[0]; t++) {
    sc_dtype_t dt = all_dtypes[t];
    size_t bytes = N * sc_dtype_size(dt);
    for (int op = SC_SUM; op <= SC_AVG; op++) {
      fill_bits(a, N, dt);
      fill_bits(b, N, dt);
      sc_reduce_kernel(dt, (sc_redop_t)op, ref, a, b, N);
      hd_reduce(dt, op, got, a, b, N);
      expect_same(dt, op, ref, got, N, a, b);
      /* In place, as the device kernel is called for a += b. */
      memcpy(got, a, bytes);
      hd_reduce(dt, op, got, got, b, N);
      expect_same(dt, op, ref, got, N, a, b);
    }
    for (int d = 2; d <= 9; d += 7) {
      fill_bits(a, N, dt);
      memcpy(ref, a, bytes);
      memcpy(got, a, bytes);
      sc_avg_finalize(dt, ref, N, d);
      hd_avg(dt, got, N, d);
      expect_same(dt, -d, ref, got, N, a, a);
    }
  }
}

/* The scatter's averaging equals lib/sparse/ef.c's: (float)value / (float)p,
 * stored through double, for every fp16 and bf16 pattern. */
static void test_scatter_average_as_gtopk(void **state) {
  (void)state;
  for (int p = 2; p <= 7; p += 5)
    for (uint32_t h = 0; h < 65536; h++) {
      float fh = (float)(double)(sc_half_to_float((uint16_t)h) / (float)p);
      float fb = (float)(double)(sc_bfloat16_to_float((uint16_t)h) / (float)p);
      uint16_t want_h = sc_float_to_half(fh), want_b = sc_float_to_bfloat16(fb);
      if ((want_h & 0x7fff) > 0x7c00) want_h = sc_hd_avg_f16((uint16_t)h, p); /* NaN payloads */
      if ((want_b & 0x7fff) > 0x7f80) want_b = sc_hd_avg_bf16((uint16_t)h, p);
      assert_int_equal(sc_hd_avg_f16((uint16_t)h, p), want_h);
      assert_int_equal(sc_hd_avg_bf16((uint16_t)h, p), want_b);
    }
}

/* ---- launch geometry ---- */

static void test_grid_sizes(void **state) {
  (void)state;
  assert_int_equal(sc_hd_grid(0, 256, 4096), 0);
  assert_int_equal(sc_hd_grid(1, 256, 4096), 1);
  assert_int_equal(sc_hd_grid(256, 256, 4096), 1);
  assert_int_equal(sc_hd_grid(257, 256, 4096), 2);
  assert_int_equal(sc_hd_grid((uint64_t)1 << 40, 256, 4096), 4096);
  const uint64_t primes[] = {2, 3, 5, 7, 251, 257, 65521, 1000003};
  for (unsigned i = 0; i < sizeof primes / sizeof primes[0]; i++) {
    uint32_t g = sc_hd_grid(primes[i], 256, 1u << 30);
    assert_true((uint64_t)g * 256 >= primes[i]);
    assert_true((uint64_t)(g - 1) * 256 < primes[i]);
  }
  assert_int_equal(sc_hd_tiles(0), 0);
  assert_int_equal(sc_hd_tiles(1), 1);
  assert_int_equal(sc_hd_tiles(SC_CUDA_TILE), 1);
  assert_int_equal(sc_hd_tiles(SC_CUDA_TILE + 1), 2);
}

/* Every element is covered once, by the vectors or the scalar items, and
 * vectors start on a 16-byte boundary of every pointer. */
static void test_vector_plan(void **state) {
  (void)state;
  const uint64_t counts[] = {0, 1, 2, 3, 5, 7, 13, 31, 97, 1009, 65537};
  const unsigned sizes[] = {1, 2, 4, 8};
  static uint8_t seen[65537];
  for (unsigned z = 0; z < 4; z++) {
    unsigned es = sizes[z];
    for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++) {
      uint64_t n = counts[c];
      for (uint64_t o1 = 0; o1 < 16; o1 += es)
        for (uint64_t o2 = 0; o2 < 16; o2 += es) {
          const uint64_t addrs[3] = {0x10000 + o1, 0x20000 + o1, 0x30000 + o2};
          sc_hd_vec_plan_t p = sc_hd_vec_plan(addrs, 3, n, es);
          assert_int_equal(p.head + p.nvec * p.velems + p.tail, n);
          if (o1 != o2 || n == 0) {
            assert_int_equal(p.velems, 1);
            assert_int_equal(p.head, n);
          } else {
            assert_int_equal(p.velems, 16 / es);
            assert_true(p.head < p.velems && p.tail < p.velems);
            if (p.nvec)
              for (int i = 0; i < 3; i++) assert_int_equal((addrs[i] + p.head * es) % 16, 0);
          }
          memset(seen, 0, n);
          for (uint64_t v = 0; v < p.nvec * p.velems; v++) seen[p.head + v]++;
          for (uint64_t j = 0; j < p.head + p.tail; j++) seen[sc_hd_vec_scalar_index(&p, j)]++;
          for (uint64_t i = 0; i < n; i++) assert_int_equal(seen[i], 1);
        }
    }
  }
  /* An element-misaligned pointer (a 4-byte type at an odd address). */
  const uint64_t odd[1] = {0x10001};
  assert_int_equal(sc_hd_vec_plan(odd, 1, 100, 4).velems, 1);
}

static void test_chunks_and_layout(void **state) {
  (void)state;
  const uint64_t totals[] = {0, 1, 7, 1023, 1024, 1025, ((uint64_t)1 << 21) + 3};
  const uint64_t parts[] = {1, 3, 1024};
  for (unsigned a = 0; a < sizeof totals / sizeof totals[0]; a++)
    for (unsigned b = 0; b < 3; b++) {
      uint64_t next = 0, lo = UINT64_MAX, hi = 0;
      for (uint64_t i = 0; i < parts[b]; i++) {
        uint64_t s, e;
        sc_hd_chunk(totals[a], parts[b], i, &s, &e);
        assert_int_equal(s, next);
        next = e;
        lo = e - s < lo ? e - s : lo;
        hi = e - s > hi ? e - s : hi;
      }
      assert_int_equal(next, totals[a]);
      assert_true(hi - lo <= 1);
    }
  const uint64_t ns[] = {0, 1, 2047, 2048, 100003, (uint64_t)1 << 32};
  for (unsigned a = 0; a < sizeof ns / sizeof ns[0]; a++) {
    sc_hd_topk_layout_t l = sc_hd_topk_layout(ns[a], sc_hd_tiles(ns[a]));
    assert_true(l.cap <= ns[a]);
    assert_true(ns[a] <= 2048 || l.cap >= ns[a] / 8);
    assert_true(sizeof(sc_radix_state_t) + 2 * 8 <= l.hist);
    assert_true(l.hist + ((uint64_t)SC_CUDA_RADIX_MAX_PASSES * 4 << SC_CUDA_RADIX_BITS) <= l.tiles);
    assert_true(l.tiles + (sc_hd_tiles(ns[a]) + 1) * 8 <= l.sample);
    assert_true(l.sample + SC_CUDA_TOPK_SAMPLE * 8 <= l.list);
    assert_true(l.list + l.cap * 4 <= l.gt_map);
    /* Two bitmaps of whole 16-byte words, adjacent: the first pass clears
     * both from gt_map to the end. */
    uint64_t words = sc_hd_map_words(ns[a]);
    assert_true(words * 32 >= ns[a] && words % SC_CUDA_MAP_ITEMS == 0);
    assert_true(sc_hd_map_tiles(ns[a]) * SC_CUDA_MAP_TILE >= words);
    assert_true(sc_hd_map_tiles(ns[a]) <= sc_hd_tiles(ns[a]) || ns[a] == 0);
    assert_true(l.gt_map + words * 4 <= l.eq_map);
    assert_true(l.eq_map + words * 4 <= l.bytes);
    assert_int_equal((l.bytes - l.gt_map) % 16, 0);
    assert_int_equal(l.hist % 256 + l.tiles % 256 + l.sample % 256 + l.list % 256 + l.gt_map % 256 +
                         l.eq_map % 256,
                     0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_every_dtype_and_op),
      cmocka_unit_test(test_scatter_average_as_gtopk),
      cmocka_unit_test(test_grid_sizes),
      cmocka_unit_test(test_vector_plan),
      cmocka_unit_test(test_chunks_and_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
