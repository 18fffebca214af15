/* SPDX-License-Identifier: BSD-3-Clause */
/* K-FAC's pieces that need no communicator:
 * - the packed upper triangle (kernels/sym_pack.h): the index arithmetic
 *   against a counter walked row by row, pack and unpack against plain
 *   double loops over (i, j), for d = 0..40 and every element size, the
 *   lower triangle of the input never read;
 * - sc_place_factors against brute force: BLOCK's largest load equals the
 *   best over every contiguous split (every cut position tried), LPT's is
 *   within Graham's 4/3 - 1/(3P) of the best over every assignment (P^n
 *   tried), both for every n <= 7 and P <= 3 over random dimensions; the
 *   factors below local_below get -1 and count for nothing; errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/sym_pack.h"
#include "sparsecoll.h"

static void test_index_arithmetic(void **state) {
  (void)state;
  for (uint64_t d = 0; d <= 60; d++) {
    assert_int_equal(sc_sym_packed_count(d), d * (d + 1) / 2);
    uint64_t k = 0;
    for (uint64_t i = 0; i < d; i++) {
      assert_int_equal(sc_sym_row_offset(d, i), k);
      for (uint64_t j = i; j < d; j++, k++) {
        assert_int_equal(sc_sym_packed_index(d, i, j), k);
        assert_int_equal(sc_sym_packed_index(d, j, i), k);
      }
    }
  }
  assert_int_equal(sc_sym_packed_count((uint64_t)1 << 31),
                   ((uint64_t)1 << 30) * (((uint64_t)1 << 31) + 1));
  assert_int_equal(sc_sym_packed_count((uint64_t)1 << 40), 0); /* 2^79: overflows */
  assert_int_equal(sc_sym_packed_count(UINT64_MAX), 0);
}

static void test_pack_unpack(void **state) {
  (void)state;
  const size_t sizes[] = {1, 2, 4, 8};
  for (size_t s = 0; s < 4; s++) {
    const size_t es = sizes[s];
    for (size_t d = 0; d <= 40; d++) {
      size_t full = d * d * es, packed = d * (d + 1) / 2 * es;
      uint8_t *a = malloc(full + 1), *p = malloc(packed + 1), *b = malloc(full + 1);
      assert_non_null(a);
      assert_non_null(p);
      assert_non_null(b);
      for (size_t x = 0; x < full; x++) a[x] = (uint8_t)(x * 131u + d);
      memset(p, 0xcd, packed + 1);
      sc_sym_pack(p, a, d, es);
      assert_int_equal(p[packed], 0xcd); /* nothing past the packed form */
      size_t k = 0;
      for (size_t i = 0; i < d; i++)
        for (size_t j = i; j < d; j++, k++)
          assert_memory_equal(p + k * es, a + (i * d + j) * es, es);
      /* Unpacking gives the symmetric matrix of the upper triangle. */
      memset(b, 0xee, full + 1);
      sc_sym_unpack(b, p, d, es);
      assert_int_equal(b[full], 0xee);
      for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) {
          size_t lo = i < j ? i : j, hi = i < j ? j : i;
          assert_memory_equal(b + (i * d + j) * es, a + (lo * d + hi) * es, es);
        }
      /* The lower triangle of the input is not read. */
      for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < i; j++) memset(a + (i * d + j) * es, 0x5a, es);
      uint8_t *p2 = malloc(packed + 1);
      assert_non_null(p2);
      sc_sym_pack(p2, a, d, es);
      assert_memory_equal(p2, p, packed);
      free(p2);
      free(a);
      free(p);
      free(b);
    }
  }
}

/* ---- placement ---- */

static uint64_t cost(size_t d) {
  return (uint64_t)d * d * d;
}

static uint64_t max_load(const size_t *dims, int n, int P, const int *owner, size_t local_below) {
  uint64_t load[8] = {0}, m = 0;
  for (int i = 0; i < n; i++) {
    if (dims[i] < local_below) {
      assert_int_equal(owner[i], -1);
      continue;
    }
    assert_true(owner[i] >= 0 && owner[i] < P);
    load[owner[i]] += cost(dims[i]);
  }
  for (int r = 0; r < P; r++)
    if (load[r] > m) m = load[r];
  return m;
}

/* The best largest load over every assignment of the eligible factors. */
static uint64_t best_any(const size_t *dims, int n, int P, size_t local_below) {
  int owner[8];
  uint64_t best = UINT64_MAX;
  long total = 1;
  for (int i = 0; i < n; i++) total *= P;
  for (long code = 0; code < total; code++) {
    long c = code;
    for (int i = 0; i < n; i++) {
      owner[i] = dims[i] < local_below ? -1 : (int)(c % P);
      c /= P;
    }
    uint64_t m = max_load(dims, n, P, owner, local_below);
    if (m < best) best = m;
  }
  return best;
}

/* The best largest load over every split of the eligible factors, in index
 * order, into at most P contiguous runs (cuts as a bit mask). */
static uint64_t best_contiguous(const size_t *dims, int n, int P, size_t local_below) {
  uint64_t c[8];
  int m = 0;
  for (int i = 0; i < n; i++)
    if (dims[i] >= local_below) c[m++] = cost(dims[i]);
  if (m == 0) return 0;
  uint64_t best = UINT64_MAX;
  for (unsigned mask = 0; mask < (1u << (m - 1)); mask++) {
    if (__builtin_popcount(mask) + 1 > P) continue;
    uint64_t cur = 0, worst = 0;
    for (int i = 0; i < m; i++) {
      cur += c[i];
      if (i == m - 1 || (mask >> i & 1u)) {
        if (cur > worst) worst = cur;
        cur = 0;
      }
    }
    if (worst < best) best = worst;
  }
  return best;
}

static void test_place_brute_force(void **state) {
  (void)state;
  uint64_t rng = 12345;
  int cases = 0;
  for (int n = 0; n <= 7; n++)
    for (int P = 1; P <= 3; P++)
      for (int rep = 0; rep < 12; rep++) {
        size_t dims[8];
        for (int i = 0; i < n; i++) {
          rng = rng * 6364136223846793005ull + 1442695040888963407ull;
          dims[i] = 1 + (size_t)(rng >> 33) % 40;
        }
        size_t local_below = rep % 3 == 0 ? 8 : 0;
        int owner[8];
        assert_int_equal(sc_place_factors(dims, n, P, SC_PLACE_BLOCK, local_below, owner),
                         SC_SUCCESS);
        assert_int_equal(max_load(dims, n, P, owner, local_below),
                         best_contiguous(dims, n, P, local_below));
        /* Contiguous: owners never go down along the index order. */
        int last = 0;
        for (int i = 0; i < n; i++) {
          if (owner[i] < 0) continue;
          assert_true(owner[i] >= last);
          last = owner[i];
        }
        assert_int_equal(sc_place_factors(dims, n, P, SC_PLACE_LPT, local_below, owner),
                         SC_SUCCESS);
        uint64_t lpt = max_load(dims, n, P, owner, local_below);
        uint64_t opt = best_any(dims, n, P, local_below);
        /* lpt <= (4/3 - 1/(3P)) opt, in integers. */
        assert_true(3 * (uint64_t)P * lpt <= (4 * (uint64_t)P - 1) * opt);
        cases++;
      }
  assert_true(cases > 200);
}

static void test_place_rules(void **state) {
  (void)state;
  /* LPT: the largest first, each to the least loaded (lowest on ties). */
  const size_t dims[] = {2, 10, 3, 10, 1};
  int owner[5];
  assert_int_equal(sc_place_factors(dims, 5, 2, SC_PLACE_LPT, 0, owner), SC_SUCCESS);
  assert_int_equal(owner[1], 0); /* 1000, first of the equal costs */
  assert_int_equal(owner[3], 1); /* 1000 */
  assert_int_equal(owner[2], 0); /* 27, both loads equal: the lowest rank */
  assert_int_equal(owner[0], 1); /* 8 onto 1000 rather than 1027 */
  assert_int_equal(owner[4], 1);
  /* local_below: small factors are everyone's. */
  assert_int_equal(sc_place_factors(dims, 5, 2, SC_PLACE_BLOCK, 3, owner), SC_SUCCESS);
  assert_int_equal(owner[0], -1);
  assert_int_equal(owner[4], -1);
  assert_int_equal(owner[1], 0); /* runs 1000 + 27 | 1000: the first run filled first */
  assert_int_equal(owner[2], 0);
  assert_int_equal(owner[3], 1);
  /* More ranks than factors: each factor its own rank under LPT. */
  assert_int_equal(sc_place_factors(dims, 5, 8, SC_PLACE_LPT, 0, owner), SC_SUCCESS);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < i; j++) assert_int_not_equal(owner[i], owner[j]);
  /* Errors. */
  assert_int_equal(sc_place_factors(dims, -1, 2, SC_PLACE_LPT, 0, owner), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_place_factors(dims, 5, 0, SC_PLACE_LPT, 0, owner), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_place_factors(dims, 5, 2, (sc_place_t)7, 0, owner), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_place_factors(NULL, 5, 2, SC_PLACE_LPT, 0, owner), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_place_factors(dims, 5, 2, SC_PLACE_LPT, 0, NULL), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "owner"));
  assert_int_equal(sc_place_factors(NULL, 0, 2, SC_PLACE_BLOCK, 0, NULL), SC_SUCCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_index_arithmetic),
      cmocka_unit_test(test_pack_unpack),
      cmocka_unit_test(test_place_brute_force),
      cmocka_unit_test(test_place_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
