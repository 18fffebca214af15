/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_TRANSPORT=auto's verdict (sc_tp_auto_choose over transport/registry.c's
 * table) against the rule in docs/UCX.md, written here independently as a
 * count: UCX exactly when auto was asked for, UCX is built, some pair spans
 * two hosts and the number of ranks reporting RDMA equals the number of
 * ranks (at least two). Every combination of capability bits for 1..6 ranks
 * is tried, with the bits embedded in records carrying other bits and bytes.
 * With UCX built, also the reading of UCX's context report that sc-info and
 * auto share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "transport/registry.h"
#include "transport/ucx/ucx_auto.h"

/* A record like the bootstrap's: the capability word among other fields. */
typedef struct {
  char pad[13];
  uint32_t caps;
  char tail[7];
} rec_t;

/* The registry's rows as a build with (built) or without every optional
 * transport has them: only whether ops is NULL counts, so any vtable stands
 * in for one this build lacks. */
static const sc_tp_entry_t *rows_built(int built, sc_tp_entry_t *rows, size_t *n) {
  memcpy(rows, sc_tp_registry(n), SC_TP_COUNT * sizeof(*rows));
  for (size_t i = 0; i < *n; i++)
    if (rows[i].package) rows[i].ops = built ? &sc_tcp_transport : NULL;
  return rows;
}

static int choose(int requested, int built, int nranks, const void *caps, size_t stride,
                  int cross) {
  sc_tp_entry_t rows[SC_TP_COUNT];
  size_t n;
  rows_built(built, rows, &n);
  return sc_tp_auto_choose(rows, n, requested, nranks, caps, stride, cross);
}

static int ref_choose(int requested, int built, int nranks, const int *rdma, int cross) {
  if (requested != 0) return requested; /* explicit: as asked, verbs included */
  int with = 0;
  for (int i = 0; i < nranks; i++) with += rdma[i] ? 1 : 0;
  int ucx = built && cross && nranks >= 2 && with == nranks;
  return ucx ? 3 : 0;
}

static void test_every_combination(void **state) {
  (void)state;
  int seen_ucx = 0, seen_auto = 0;
  for (int n = 1; n <= 6; n++) {
    rec_t recs[6];
    int rdma[6];
    for (unsigned mask = 0; mask < (1u << n); mask++) {
      for (int i = 0; i < n; i++) {
        memset(&recs[i], 0xA5, sizeof(recs[i]));
        rdma[i] = (mask >> i) & 1;
        /* Other capability bits set at random must not count as RDMA. */
        recs[i].caps = (rdma[i] ? SC_TP_CAP_UCX_RDMA : 0) | ((unsigned)rand() & ~1u);
      }
      for (int req = 0; req <= 4; req++)
        for (int built = 0; built <= 1; built++)
          for (int cross = 0; cross <= 1; cross++) {
            int want = ref_choose(req, built, n, rdma, cross);
            int got = choose(req, built, n, &recs[0].caps, sizeof(rec_t), cross);
            if (got != want)
              fail_msg("n=%d mask=%#x req=%d built=%d cross=%d: got %d, want %d", n, mask, req,
                       built, cross, got, want);
            if (req == 0) {
              seen_ucx += want == 3;
              seen_auto += want == 0;
            }
          }
    }
  }
  /* Both verdicts occur (the sweep is not vacuous). */
  assert_true(seen_ucx > 0);
  assert_true(seen_auto > 0);
}

/* auto never yields verbs, and an explicit choice is never overridden. */
static void test_verbs_never_auto(void **state) {
  (void)state;
  rec_t recs[4];
  for (int i = 0; i < 4; i++) recs[i].caps = 0xffffffffu;
  for (int cross = 0; cross <= 1; cross++)
    for (int built = 0; built <= 1; built++) {
      assert_int_not_equal(choose(SC_TP_AUTO, built, 4, &recs[0].caps, sizeof(rec_t), cross),
                           SC_TP_VERBS);
      assert_int_equal(choose(SC_TP_TCP, built, 4, &recs[0].caps, sizeof(rec_t), cross), SC_TP_TCP);
    }
}

#ifdef SC_HAVE_UCX
/* This machine's report (UCX 1.13, no HCA: the ib component loads without a
 * device) and the same with HCA resources added. */
static const char *const no_rdma =
    "#\n# UCP context\n#\n#     component 0  :  self\n#     component 4  :  ib\n"
    "#     component 5  :  rdmacm\n#            md 0  :  component 0  self \n"
    "#      resource 0  :  md 0  dev 0  flags -- self/memory0\n"
    "#      resource 1  :  md 1  dev 1  flags -- tcp/lo\n"
    "#      resource 2  :  md 1  dev 2  flags -- tcp/eth0\n"
    "#      resource 3  :  md 2  dev 3  flags -- sysv/memory\n"
    "#      resource 4  :  md 4  dev 4  flags -- cma/memory\n#\n";

static void test_info_parse(void **state) {
  (void)state;
  assert_int_equal(sc_ucx_info_has_rdma(no_rdma), 0);
  assert_int_equal(sc_ucx_info_has_rdma(""), 0);
  assert_int_equal(sc_ucx_info_has_rdma(NULL), 0);
  const char *const hca[] = {"rc_mlx5/mlx5_0:1", "rc_verbs/mlx5_0:1", "ud_verbs/mlx5_1:1",
                             "ud_mlx5/mlx5_0:1", "dc_mlx5/mlx5_0:1"};
  for (size_t i = 0; i < sizeof(hca) / sizeof(hca[0]); i++) {
    char text[1024];
    /* In the middle and as the last line without a newline. */
    snprintf(text, sizeof(text), "%s#      resource 5  :  md 5  dev 5  flags -- %s\n#\n", no_rdma,
             hca[i]);
    assert_int_equal(sc_ucx_info_has_rdma(text), 1);
    snprintf(text, sizeof(text), "%s#      resource 5  :  md 5  dev 5  flags -- %s", no_rdma,
             hca[i]);
    assert_int_equal(sc_ucx_info_has_rdma(text), 1);
  }
  /* "rc" outside a resource line's transport name is not RDMA. */
  assert_int_equal(sc_ucx_info_has_rdma("#     component 9  :  rc -- rc\n"
                                        "#      resource 0  :  md 0  dev 0  flags -- tcp/rc0\n"),
                   0);
}
#endif

int main(void) {
  srand(19);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_combination),
      cmocka_unit_test(test_verbs_never_auto),
#ifdef SC_HAVE_UCX
      cmocka_unit_test(test_info_parse),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
