/* SPDX-License-Identifier: BSD-3-Clause */
/* The sparse algorithm registry (algorithms/sparse_registry.h) and the fusion
 * policy registry (lib/fusion/policy.h): every value of the public enum has
 * exactly one row, the names are unique and the ones docs/API.md fixes, the
 * public name functions round-trip through the tables' lookups and refuse
 * values outside the enum and a NULL name with SC_ERR_INVALID_ARG, and the
 * other columns hold what the library relies on (fingerprint codes on the
 * wire, the cost model's candidates, the planners, density refusals). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "algorithms/sparse_registry.h"
#include "lib/core/fingerprint.h"
#include "lib/fusion/fusion.h"
#include "lib/fusion/plan.h"
#include "lib/fusion/policy.h"
#include "sparsecoll.h"

/* The enums' values as the header lists them, with the names docs/API.md
 * and SC_GTOPK_ALGO's documentation give them: the reference the tables are
 * held to. */
static const struct {
  sc_sparse_algo_t algo;
  const char *name;
  int pick;        /* SC_GTOPK_ALGO takes it; the cost model may choose it */
  uint8_t fp_code; /* the fingerprint's variant byte since wire version 2 */
} want_sparse[] = {{SC_SPARSE_GTOPK, "gtopk", 1, 2},
                   {SC_SPARSE_GTOPK_TREE, "tree", 1, 3},
                   {SC_SPARSE_ALLGATHER, "allgather", 0, 4},
                   {SC_SPARSE_GTOPK_HIER, "hier", 1, 6},
                   {SC_SPARSE_HITOPK, "hitopk", 1, 7}};
enum { NSPARSE = sizeof(want_sparse) / sizeof(want_sparse[0]) };

static const struct {
  sc_fusion_policy_t policy;
  const char *name;
  int dense_only; /* sc_fusion_create refuses density > 0 */
} want_fusion[] = {{SC_FUSE_NONE, "wfbp", 0},     {SC_FUSE_SIZE, "size", 0},
                   {SC_FUSE_MGWFBP, "mgwfbp", 0}, {SC_FUSE_DEAR, "dear", 1},
                   {SC_FUSE_SINGLE, "single", 0}, {SC_FUSE_P3, "p3", 1}};
enum { NFUSION = sizeof(want_fusion) / sizeof(want_fusion[0]) };

static void test_sparse_rows(void **state) {
  (void)state;
  int n;
  const sc_sparse_algo_entry_t *c = sc_sparse_algos(&n);
  assert_int_equal(n, NSPARSE);
  assert_int_equal(SC_SPARSE_ALGO_COUNT, NSPARSE);
  for (int w = 0; w < NSPARSE; w++) {
    int rows = 0;
    for (int i = 0; i < n; i++) rows += c[i].algo == want_sparse[w].algo;
    assert_int_equal(rows, 1);
    /* The tuner indexes its estimates by the enum value. */
    assert_true((unsigned)want_sparse[w].algo < SC_SPARSE_ALGO_COUNT);
  }
  for (int i = 0; i < n; i++) {
    assert_non_null(c[i].name);
    /* Only hitopk, an algorithm of sc_gtopk_allreduce alone, has no schedule. */
    if (c[i].algo == SC_SPARSE_HITOPK)
      assert_null(c[i].gen);
    else
      assert_non_null(c[i].gen);
    assert_non_null(c[i].about);
    assert_true(c[i].fp_code >= SC_FP_SPARSE_MIN && c[i].fp_code != SC_FP_SPARSE_OTHER);
    for (int j = 0; j < i; j++) {
      assert_string_not_equal(c[i].name, c[j].name);
      assert_true(strcasecmp(c[i].name, c[j].name) != 0);
      assert_int_not_equal(c[i].fp_code, c[j].fp_code);
      if (c[i].gen) assert_ptr_not_equal(c[i].gen, c[j].gen);
    }
  }
}

static void test_sparse_columns(void **state) {
  (void)state;
  for (int w = 0; w < NSPARSE; w++) {
    const sc_sparse_algo_entry_t *e = sc_sparse_algo_get(want_sparse[w].algo);
    assert_non_null(e);
    assert_string_equal(e->name, want_sparse[w].name);
    assert_int_equal(e->pick, want_sparse[w].pick);
    assert_int_equal(e->fp_code, want_sparse[w].fp_code);
    if (e->gen) assert_ptr_equal(sc_sparse_algo_of_gen(e->gen), e);
  }
  assert_ptr_equal(sc_sparse_algo_get(SC_SPARSE_GTOPK)->gen, sc_sparse_gtopk_schedule);
  assert_ptr_equal(sc_sparse_algo_get(SC_SPARSE_GTOPK_TREE)->gen, sc_sparse_tree_schedule);
  assert_ptr_equal(sc_sparse_algo_get(SC_SPARSE_ALLGATHER)->gen, sc_sparse_allgather_schedule);
  assert_ptr_equal(sc_sparse_algo_get(SC_SPARSE_GTOPK_HIER)->gen, sc_sparse_hier_schedule);
  /* Only the all-gather returns the exact sum of up to nranks * k entries;
   * only hier and hitopk need hosts that hold several ranks; the butterflies' exchanges
   * take recursive doubling's network factor, the tree's none. */
  for (int w = 0; w < NSPARSE; w++) {
    const sc_sparse_algo_entry_t *e = sc_sparse_algo_get(want_sparse[w].algo);
    assert_int_equal(e->out_all, e->algo == SC_SPARSE_ALLGATHER);
    assert_int_equal(e->hier, e->algo == SC_SPARSE_GTOPK_HIER || e->algo == SC_SPARSE_HITOPK);
    if (e->algo == SC_SPARSE_GTOPK || e->algo == SC_SPARSE_GTOPK_HIER)
      assert_string_equal(e->allreduce_twin, "rd");
    else if (e->algo == SC_SPARSE_GTOPK_TREE)
      assert_null(e->allreduce_twin);
  }
  assert_null(sc_sparse_algo_of_gen(sc_ring_allreduce_schedule));
  assert_null(sc_sparse_algo_of_gen(NULL));
}

static void test_sparse_name_function(void **state) {
  (void)state;
  for (int w = 0; w < NSPARSE; w++) {
    const char *nm = NULL;
    assert_int_equal(sc_sparse_algo_name(want_sparse[w].algo, &nm), SC_SUCCESS);
    assert_non_null(nm);
    assert_string_equal(nm, want_sparse[w].name);
    const sc_sparse_algo_entry_t *e = sc_sparse_algo_find(nm);
    assert_non_null(e);
    assert_int_equal(e->algo, want_sparse[w].algo);
    assert_string_equal(sc_sparse_algo_label(want_sparse[w].algo), nm);
  }
  assert_ptr_equal(sc_sparse_algo_find("TREE"), sc_sparse_algo_get(SC_SPARSE_GTOPK_TREE));
  assert_null(sc_sparse_algo_find("gtopk_tree"));
  assert_null(sc_sparse_algo_find(NULL));
  const int bad[] = {-1, NSPARSE, NSPARSE + 1, 1000, INT32_MIN};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *nm = "untouched";
    assert_int_equal(sc_sparse_algo_name((sc_sparse_algo_t)bad[i], &nm), SC_ERR_INVALID_ARG);
    assert_string_equal(nm, "untouched");
    assert_non_null(strstr(sc_last_error(), "sc_sparse_algo_name"));
    assert_null(sc_sparse_algo_get((sc_sparse_algo_t)bad[i]));
    assert_string_equal(sc_sparse_algo_label((sc_sparse_algo_t)bad[i]), "invalid-sparse-algo");
  }
  assert_int_equal(sc_sparse_algo_name(SC_SPARSE_GTOPK, NULL), SC_ERR_INVALID_ARG);
}

static void test_fusion_rows(void **state) {
  (void)state;
  int n;
  const sc_fusion_policy_entry_t *c = sc_fusion_policies(&n);
  assert_int_equal(n, NFUSION);
  assert_int_equal(SC_FUSION_POLICY_COUNT, NFUSION);
  for (int w = 0; w < NFUSION; w++) {
    int rows = 0;
    for (int i = 0; i < n; i++) rows += c[i].policy == want_fusion[w].policy;
    assert_int_equal(rows, 1);
    const sc_fusion_policy_entry_t *e = sc_fusion_policy_get(want_fusion[w].policy);
    assert_non_null(e);
    assert_string_equal(e->name, want_fusion[w].name);
    assert_int_equal(e->dense_only != NULL, want_fusion[w].dense_only);
    assert_non_null(e->plan);
    assert_non_null(e->about);
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++) assert_true(strcasecmp(c[i].name, c[j].name) != 0);
}

static void test_fusion_name_function(void **state) {
  (void)state;
  for (int w = 0; w < NFUSION; w++) {
    const char *nm = NULL;
    assert_int_equal(sc_fusion_policy_name(want_fusion[w].policy, &nm), SC_SUCCESS);
    assert_string_equal(nm, want_fusion[w].name);
    const sc_fusion_policy_entry_t *e = sc_fusion_policy_find(nm);
    assert_non_null(e);
    assert_int_equal(e->policy, want_fusion[w].policy);
  }
  assert_ptr_equal(sc_fusion_policy_find("MGWFBP"), sc_fusion_policy_get(SC_FUSE_MGWFBP));
  assert_null(sc_fusion_policy_find("none"));
  assert_null(sc_fusion_policy_find(NULL));
  const int bad[] = {-1, NFUSION, NFUSION + 1, 1000, INT32_MIN};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *nm = "untouched";
    assert_int_equal(sc_fusion_policy_name((sc_fusion_policy_t)bad[i], &nm), SC_ERR_INVALID_ARG);
    assert_string_equal(nm, "untouched");
    assert_non_null(strstr(sc_last_error(), "sc_fusion_policy_name"));
    assert_null(sc_fusion_policy_get((sc_fusion_policy_t)bad[i]));
  }
  assert_int_equal(sc_fusion_policy_name(SC_FUSE_SIZE, NULL), SC_ERR_INVALID_ARG);
}

/* Each row's planner against the planner of plan.h it stands for, on five
 * tensors of one dtype. */
static void test_fusion_planners(void **state) {
  (void)state;
  const size_t bytes[5] = {400, 100, 3000, 100, 100};
  const double bw[5] = {10, 20, 5, 40, 10};
  const sc_fplan_in_t in = {.n = 5, .bytes = bytes, .group = NULL, .bw_us = bw};
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.bucket_bytes = 1000;
  const double alpha = 30, beta = 0.01;
  size_t got[6], want[6];
#define SAME_PLAN(policy, call)                                                                    \
  do {                                                                                             \
    const size_t nb_want = (call);                                                                 \
    const size_t nb_got = sc_fusion_policy_get(policy)->plan(&in, &cfg, alpha, beta, got);         \
    assert_int_equal(nb_got, nb_want);                                                             \
    assert_memory_equal(got, want, (nb_want + 1) * sizeof(size_t));                                \
  } while (0)
  SAME_PLAN(SC_FUSE_NONE, sc_fplan_none(&in, want));
  SAME_PLAN(SC_FUSE_SIZE, sc_fplan_size(&in, cfg.bucket_bytes, want));
  SAME_PLAN(SC_FUSE_MGWFBP, sc_fplan_mgwfbp_cap(&in, alpha, beta, cfg.bucket_bytes, want));
  SAME_PLAN(SC_FUSE_DEAR, sc_fplan_dear_model(&in, alpha, beta, cfg.bucket_bytes, want));
  SAME_PLAN(SC_FUSE_SINGLE, sc_fplan_single(&in, want));
  SAME_PLAN(SC_FUSE_P3, sc_fplan_none(&in, want)); /* P3 slices each tensor's own bucket */
  cfg.density = 0.01; /* MG-WFBP with density is OMGS, capped at the smaller of the limits */
  SAME_PLAN(SC_FUSE_MGWFBP, sc_fplan_omgs(&in, alpha, beta, cfg.bucket_bytes, want));
  cfg.bucket_bytes = 64u << 20;
  SAME_PLAN(SC_FUSE_MGWFBP, sc_fplan_omgs(&in, alpha, beta, SC_FUSION_OMGS_MAX_BYTES, want));
#undef SAME_PLAN
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sparse_rows),          cmocka_unit_test(test_sparse_columns),
      cmocka_unit_test(test_sparse_name_function), cmocka_unit_test(test_fusion_rows),
      cmocka_unit_test(test_fusion_name_function), cmocka_unit_test(test_fusion_planners),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
