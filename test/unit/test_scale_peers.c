/* SPDX-License-Identifier: BSD-3-Clause */
/* The peers each schedule talks to (docs/SCALE.md): every candidate of every
 * collective in the registry, built for every rank of P = 2..300 (the
 * schedules of O(P) steps per rank at P = 2..40 and a sample above), its
 * distinct peers per rank counted and checked against the model's formula:
 * ring 2, double binary tree <= 4, recursive doubling and Rabenseifner
 * log2 P' (+1 where a rank folds), binomial trees and chains P - 1 pairs in
 * all, dissemination and Bruck the set {r +- 2^k}, hierarchical (L - 1) +
 * the rail's, and P - 1 only for pairwise, direct and linear; and the
 * unions the probe of perf/scale.sh connects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/registry.h"

static int ceil_log2(int p) {
  int k = 0;
  while ((1 << k) < p) k++;
  return k;
}

static int floor_log2(int p) {
  int k = 0;
  while ((2 << k) <= p) k++;
  return k;
}

/* Distinct peers of one schedule's sends and receives. */
static int count_peers(const sc_sched_t *s, int nranks, unsigned char *seen) {
  memset(seen, 0, (size_t)nranks);
  int n = 0;
  for (size_t i = 0; i < s->nsteps; i++) {
    const sc_step_t *t = &s->steps[i];
    if (t->kind == SC_STEP_COPY || t->kind == SC_STEP_SPARSE_SUM) continue;
    assert_true(t->peer >= 0 && t->peer < nranks);
    if (!seen[t->peer]) seen[t->peer] = 1, n++;
  }
  return n;
}

/* |{(r +- 2^k) mod P : 0 <= k < ceil(log2 P)} minus r|: dissemination's and
 * Bruck's peers, written from the definition. */
static int pow2_ring_peers(int p, int r) {
  unsigned char *seen = calloc((size_t)p, 1);
  assert_non_null(seen);
  int n = 0;
  for (int k = 0; k < ceil_log2(p); k++) {
    int d = (int)((1L << k) % p);
    int a = (r + d) % p, b = ((r - d) % p + p) % p;
    if (a != r && !seen[a]) seen[a] = 1, n++;
    if (b != r && !seen[b]) seen[b] = 1, n++;
  }
  free(seen);
  return n;
}

enum { RANKS_PER_HOST = 8 };

/* One candidate at one P: every rank's peer count checked. */
static void check_candidate(sc_coll_t coll, const sc_algo_entry_t *e, int p) {
  int *host_of = malloc(sizeof(int) * (size_t)p);
  size_t *counts = malloc(sizeof(size_t) * (size_t)p), *displs = malloc(sizeof(size_t) * (size_t)p);
  int *peers = malloc(sizeof(int) * (size_t)p);
  unsigned char *seen = malloc((size_t)p);
  uint64_t *mates = malloc(sizeof(uint64_t) * (size_t)p);
  assert_true(host_of && counts && displs && peers && seen && mates);
  for (int r = 0; r < p; r++) mates[r] = 3;
  for (int r = 0; r < p; r++) {
    host_of[r] = r / RANKS_PER_HOST;
    counts[r] = 3;
    displs[r] = 3 * (size_t)r;
  }
  const char *name = e->name;
  for (int r = 0; r < p; r++) {
    /* One chunk per block: the peers do not depend on the pipelining. */
    sc_coll_args_t a = {.coll = coll,
                        .nranks = p,
                        .rank = r,
                        .root = 0,
                        .count = (size_t)64 * (size_t)p,
                        .elem_size = 4,
                        .chunk_elems = (size_t)64 * (size_t)p,
                        .host_of = e->hier ? host_of : NULL,
                        .sendcounts = counts,
                        .sdispls = displs,
                        .recvcounts = counts,
                        .rdispls = displs};
    if (coll == SC_COLL_ALLTOALLV || coll == SC_COLL_ALLGATHERV) a.count = 3 * (size_t)p;
    /* The uneven all-to-all's hier: its host-mates' counts, 3 for every rank. */
    if (coll == SC_COLL_ALLTOALLV && e->hier) a.a2av_mates = mates;
    sc_sched_t s;
    sc_sched_init(&s);
    assert_int_equal(e->gen(&a, &s), SC_SUCCESS);
    peers[r] = count_peers(&s, p, seen);
    sc_sched_free(&s);
  }
  int k = floor_log2(p), fold = p - (1 << k), sum = 0, max = 0, n1 = 0, nk = 0, nk1 = 0;
  for (int r = 0; r < p; r++) {
    sum += peers[r];
    max = peers[r] > max ? peers[r] : max;
    n1 += peers[r] == 1;
    nk += peers[r] == k;
    nk1 += peers[r] == k + 1;
  }
  int hosts = (p + RANKS_PER_HOST - 1) / RANKS_PER_HOST;
  int local = p < RANKS_PER_HOST ? p : RANKS_PER_HOST;
  for (int r = 0; r < p; r++) {
    if (!strcmp(name, "ring")) {
      assert_int_equal(peers[r], p - 1 < 2 ? p - 1 : 2);
    } else if (!strcmp(name, "pairwise") || !strcmp(name, "direct")) {
      assert_int_equal(peers[r], p - 1);
    } else if (!strcmp(name, "linear")) {
      assert_int_equal(peers[r], r == 0 ? p - 1 : 1);
    } else if (!strcmp(name, "dissemination") || !strcmp(name, "bruck")) {
      assert_int_equal(peers[r], pow2_ring_peers(p, r));
    } else if (!strcmp(name, "binomial")) {
      assert_true(peers[r] >= 1 && peers[r] <= ceil_log2(p));
      if (r == 0) assert_int_equal(peers[r], ceil_log2(p));
    } else if (!strcmp(name, "chain")) {
      assert_true(peers[r] >= 1 && peers[r] <= 2);
    } else if (!strcmp(name, "tree")) {
      assert_true(peers[r] >= (p - 1 < 2 ? p - 1 : 2) && peers[r] <= 4);
    } else if (!strcmp(name, "hier") && p % RANKS_PER_HOST == 0) {
      int rail = hosts - 1 < 2 ? hosts - 1 : 2;
      if (coll == SC_COLL_ALLTOALL || coll == SC_COLL_ALLTOALLV) rail = hosts - 1;
      assert_int_equal(peers[r], local - 1 + rail);
    }
  }
  if (!strcmp(name, "rd") || !strcmp(name, "rabenseifner") || !strcmp(name, "recursive-halving") ||
      !strcmp(name, "recursive-doubling")) {
    /* P' = 2^k ranks exchange with k partners; each of the P - P' extra ranks
     * folds into one of them, which then has k + 1 (k = 1: the ranks with one
     * partner are both the folded ones and P' ones). */
    if (fold == 0) {
      assert_int_equal(nk, p);
    } else if (k > 1) {
      assert_int_equal(n1, fold);
      assert_int_equal(nk1, fold);
      assert_int_equal(nk, p - 2 * fold);
    } else {
      assert_int_equal(nk1, fold);
      assert_int_equal(n1, p - fold);
    }
    assert_int_equal(max, k + (fold > 0));
  }
  /* Trees: P - 1 pairs; the double binary tree at most two trees' worth. */
  if (!strcmp(name, "binomial") || !strcmp(name, "chain")) assert_int_equal(sum, 2 * (p - 1));
  if (!strcmp(name, "tree")) {
    assert_true(sum <= 4 * (p - 1));
    assert_int_equal(max, p == 5 ? 3 : (p - 1 < 4 ? p - 1 : 4));
  }
  free(host_of);
  free(counts);
  free(displs);
  free(peers);
  free(seen);
  free(mates);
}

/* Candidates whose schedules have O(log P) steps per rank run at every P up
 * to 300; the others (O(P) steps: ring, pairwise, linear, direct, Bruck's
 * copies, chain, hierarchical) at every P up to 40; all of them at a sample
 * up to 1024 (powers of two, their neighbours, 100 and 1000). */
static int every_p(const char *name) {
  static const char *const cheap[] = {
      "tree",     "rd",           "rabenseifner", "recursive-halving", "recursive-doubling",
      "binomial", "dissemination"};
  for (size_t i = 0; i < sizeof(cheap) / sizeof(cheap[0]); i++)
    if (!strcmp(name, cheap[i])) return 1;
  return 0;
}

static void test_peers_every_candidate(void **state) {
  (void)state;
  static const int sample[] = {48, 63, 64, 65, 100, 127, 128, 129, 511, 512, 513, 1000, 1023, 1024};
  int checked = 0;
  /* The sanitizer runs' sample (SC_TEST_SAMPLE=1): every P to 64 and 16, the
   * sample to 129. */
  const char *sample_env = getenv("SC_TEST_SAMPLE");
  int sampled = sample_env && sample_env[0] == '1';
  int top_cheap = sampled ? 64 : 300, top_other = sampled ? 16 : 40;
  for (int c = 0; c < SC_COLL_COUNT_; c++) {
    int n = 0;
    const sc_algo_entry_t *e = sc_algo_candidates((sc_coll_t)c, &n);
    for (int i = 0; i < n; i++) {
      int all = every_p(e[i].name);
      for (int p = 2; p <= (all ? top_cheap : top_other); p++)
        check_candidate((sc_coll_t)c, &e[i], p);
      for (size_t j = 0; j < sizeof(sample) / sizeof(sample[0]); j++)
        if (!sampled || sample[j] <= 129) check_candidate((sc_coll_t)c, &e[i], sample[j]);
      checked++;
    }
  }
  /* A new candidate lands here too, with at least the generic bounds. */
  assert_true(checked >= 20);
}

/* The model's count at P = 1024 for the all-reduce candidates: none grows
 * faster than log2 P, so a lazy communicator's connections stay O(P log P)
 * in all, against P (P - 1) eager. */
static void test_allreduce_peers_not_linear(void **state) {
  (void)state;
  int n = 0;
  const sc_algo_entry_t *e = sc_algo_candidates(SC_COLL_ALLREDUCE, &n);
  const int p = 1024;
  unsigned char *seen = malloc(p);
  assert_non_null(seen);
  for (int i = 0; i < n; i++) {
    if (e[i].hier) continue;
    int max = 0;
    for (int r = 0; r < p; r += 37) {
      sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                          .nranks = p,
                          .rank = r,
                          .count = 4096,
                          .elem_size = 4,
                          .chunk_elems = 4096};
      sc_sched_t s;
      sc_sched_init(&s);
      assert_int_equal(e[i].gen(&a, &s), SC_SUCCESS);
      int v = count_peers(&s, p, seen);
      max = v > max ? v : max;
      sc_sched_free(&s);
    }
    assert_true(max >= 2 && max <= 10);
  }
  free(seen);
}

/* Distinct peers of the union of two all-reduce candidates' schedules at one
 * rank: what a lazily connected communicator holds after one call of each. */
static int union_peers(const char *a_name, const char *b_name, int p, int r, unsigned char *seen) {
  const char *names[2] = {a_name, b_name};
  int n = 0, ncand = 0;
  const sc_algo_entry_t *e = sc_algo_candidates(SC_COLL_ALLREDUCE, &ncand);
  memset(seen, 0, (size_t)p);
  for (int g = 0; g < 2; g++) {
    int i = sc_algo_find(SC_COLL_ALLREDUCE, names[g]);
    assert_true(i >= 0 && i < ncand);
    sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                        .nranks = p,
                        .rank = r,
                        .count = (size_t)4 * (size_t)p,
                        .elem_size = 4,
                        .chunk_elems = (size_t)4 * (size_t)p};
    sc_sched_t s;
    sc_sched_init(&s);
    assert_int_equal(e[i].gen(&a, &s), SC_SUCCESS);
    for (size_t j = 0; j < s.nsteps; j++) {
      const sc_step_t *t = &s.steps[j];
      if (t->kind == SC_STEP_COPY) continue;
      if (!seen[t->peer]) seen[t->peer] = 1, n++;
    }
    sc_sched_free(&s);
  }
  return n;
}

/* docs/SCALE.md's d for perf/scale.sh's probe at P = 2^k: over tcp the cost
 * model runs Rabenseifner (8 B) and the double binary tree (1 MiB): k + 2 at
 * most, k at rank 0; recursive doubling with a ring: k + 1 on every rank. */
static void test_probe_unions(void **state) {
  (void)state;
  unsigned char *seen = malloc(1024);
  assert_non_null(seen);
  const char *sample_env = getenv("SC_TEST_SAMPLE");
  int top_k = sample_env && sample_env[0] == '1' ? 7 : 10; /* the sanitizer runs' sample */
  for (int k = 4; k <= top_k; k++) {
    int p = 1 << k, max = 0;
    for (int r = 0; r < p; r++) {
      int d = union_peers("rabenseifner", "tree", p, r, seen);
      max = d > max ? d : max;
      if (r == 0) assert_int_equal(d, k);
      assert_int_equal(union_peers("rd", "ring", p, r, seen), k + 1);
    }
    assert_int_equal(max, k + 2);
  }
  free(seen);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peers_every_candidate),
      cmocka_unit_test(test_allreduce_peers_not_linear),
      cmocka_unit_test(test_probe_unions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
