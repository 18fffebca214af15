/* SPDX-License-Identifier: BSD-3-Clause */
/* The cost model's choices that keep a job within its connections: the
 * candidates that connect every pair left out past the peer budget, each
 * registry flag against the peers its schedules name; on one host over
 * tcp, Bruck's all-to-all for small blocks; and the uneven all-to-all's
 * hier-or-pairwise rule. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/tune/tune.h"

/* A peer budget below P - 1 leaves out the candidates that connect every
 * pair (registry's all_peers: pairwise all-to-all, linear gather and
 * scatter, direct all-gatherv), priced INFINITY, and keeps the others as
 * priced; no budget, or one that holds P - 1, changes nothing. The
 * registry's flags are checked against the peers each schedule talks to: a
 * flagged one reaches P - 1 on some rank, an unflagged one fewer (P = 64). */
static void test_peer_budget(void **state) {
  (void)state;
  sc_link_model_t m;
  sc_tune_default_model(SC_TUNE_HOST_TCP, 2, 0, &m);
  const sc_coll_t colls[] = {SC_COLL_ALLTOALL, SC_COLL_GATHER, SC_COLL_SCATTER};
  for (size_t k = 0; k < sizeof(colls) / sizeof(colls[0]); k++) {
    sc_coll_args_t a = {
        .coll = colls[k], .nranks = 64, .count = 2, .elem_size = 4, .chunk_elems = 1 << 17};
    int n, free_pick, bound_pick;
    const sc_algo_entry_t *c = sc_algo_candidates(colls[k], &n);
    double est[SC_TUNE_MAX_CANDIDATES], bound[SC_TUNE_MAX_CANDIDATES];
    m.peer_budget = 0;
    assert_int_equal(sc_tune_best(&m, &a, &free_pick, est), SC_SUCCESS);
    m.peer_budget = 63;
    assert_int_equal(sc_tune_best(&m, &a, &bound_pick, bound), SC_SUCCESS);
    assert_int_equal(bound_pick, free_pick);
    m.peer_budget = 16;
    assert_int_equal(sc_tune_best(&m, &a, &bound_pick, bound), SC_SUCCESS);
    int flagged = 0;
    for (int i = 0; i < n; i++) {
      assert_int_equal(sc_tune_over_budget(&m, &c[i], 64), c[i].all_peers);
      if (c[i].all_peers) {
        flagged++;
        assert_true(isinf(bound[i]));
        assert_int_not_equal(bound_pick, i);
      } else {
        assert_true(bound[i] == est[i]);
      }
      /* The most peers one rank's schedule names, against the flag. */
      int most = 0;
      for (int r = 0; r < 64 && !c[i].hier; r++) {
        sc_sched_t s;
        sc_sched_init(&s);
        sc_coll_args_t ar = a;
        ar.rank = r;
        assert_int_equal(c[i].gen(&ar, &s), SC_SUCCESS);
        char seen[64] = {0};
        int d = 0;
        for (size_t j = 0; j < s.nsteps; j++)
          if ((s.steps[j].kind == SC_STEP_SEND || s.steps[j].kind == SC_STEP_RECV ||
               s.steps[j].kind == SC_STEP_RECV_REDUCE) &&
              s.steps[j].peer != r && !seen[s.steps[j].peer]) {
            seen[s.steps[j].peer] = 1;
            d++;
          }
        if (d > most) most = d;
        sc_sched_free(&s);
      }
      if (!c[i].hier) assert_int_equal(most == 63, c[i].all_peers);
    }
    assert_true(flagged == 1);
  }
}

/* One host over tcp, 16 ranks: Bruck's log2 P messages per rank for small
 * blocks, the pairwise exchange's P - 1 for large (measured: 424 against
 * 903 us at 4 B a block, 1487 against 1377 at 16 KiB; perf/README.md). */
static void test_alltoall_host_tcp_choice(void **state) {
  (void)state;
  sc_link_model_t m;
  sc_tune_default_model(SC_TUNE_HOST_TCP, 2, 0, &m);
  sc_coll_args_t a = {
      .coll = SC_COLL_ALLTOALL, .nranks = 16, .count = 1, .elem_size = 4, .chunk_elems = 1 << 17};
  int pick;
  double est[SC_TUNE_MAX_CANDIDATES];
  assert_int_equal(sc_tune_best(&m, &a, &pick, est), SC_SUCCESS);
  assert_int_equal(pick, sc_algo_find(SC_COLL_ALLTOALL, "bruck"));
  a.count = 4096;
  assert_int_equal(sc_tune_best(&m, &a, &pick, est), SC_SUCCESS);
  assert_int_equal(pick, sc_algo_find(SC_COLL_ALLTOALL, "pairwise"));
}

/* The uneven all-to-all runs hier only where it is priced faster at some
 * block size and within SC_TUNE_A2AV_HIER_SLACK at every one; lo and hi are
 * the extreme ratios, infinite where either side cannot run. */
static void test_a2av_hier_rule(void **state) {
  (void)state;
  double lo, hi;
  int worst;
  const double pw[4] = {10, 20, 40, 80};
  const double faster[4] = {5, 19, 40, 88}; /* 88 / 80: the slack itself */
  assert_true(sc_tune_a2av_hier_wins(pw, faster, 4, &lo, &hi, &worst));
  assert_true(fabs(lo - (0.5)) < 1e-12);
  assert_true(fabs(hi - (SC_TUNE_A2AV_HIER_SLACK)) < 1e-12);
  assert_int_equal(worst, 3);
  /* Level everywhere: nothing gained. */
  assert_false(sc_tune_a2av_hier_wins(pw, pw, 4, &lo, &hi, &worst));
  assert_true(fabs(lo - (1)) < 1e-12);
  assert_int_equal(worst, 0); /* the first of equal ratios */
  /* Much faster small, past the slack at one large size. */
  const double over[4] = {1, 2, 4, 80 * (SC_TUNE_A2AV_HIER_SLACK + 0.01)};
  assert_false(sc_tune_a2av_hier_wins(pw, over, 4, &lo, &hi, &worst));
  assert_true(fabs(lo - (0.1)) < 1e-12);
  assert_true(hi > SC_TUNE_A2AV_HIER_SLACK);
  assert_int_equal(worst, 3);
  /* A size where hier, or pairwise, cannot be priced. */
  const double gap[4] = {1, INFINITY, 4, 8};
  assert_false(sc_tune_a2av_hier_wins(pw, gap, 4, &lo, &hi, &worst));
  assert_true(isinf(hi));
  assert_int_equal(worst, 1);
  const double pgap[4] = {10, NAN, 40, INFINITY};
  assert_false(sc_tune_a2av_hier_wins(pgap, faster, 4, &lo, &hi, &worst));
  assert_true(isinf(hi));
  assert_int_equal(worst, 1);
  /* No sizes: no choice of hier. */
  assert_false(sc_tune_a2av_hier_wins(pw, faster, 0, &lo, &hi, &worst));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peer_budget),
      cmocka_unit_test(test_alltoall_host_tcp_choice),
      cmocka_unit_test(test_a2av_hier_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
