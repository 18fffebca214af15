/* SPDX-License-Identifier: BSD-3-Clause */
/* The fusion rules on one rank (no peers; the communicator is local):
 * sc_fusion_config_init fills every field, a wait on a tensor with no round
 * in flight returns at once, a wait only this rank could unblock fails at
 * once naming the missing tensor (SC_TIMEOUT_MS is 60 s here), a second
 * ready while the round is in flight is refused without losing the round,
 * and a skipped tensor (its buffer NaN) receives zeros. The multi-rank side
 * is test/multi/mr_fusion_rules.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "sparsecoll.h"

static void test_config_init_defaults(void **state) {
  (void)state;
  sc_fusion_config_t cfg;
  memset(&cfg, 0xab, sizeof(cfg));
  sc_fusion_config_init(&cfg);
  assert_int_equal(cfg.policy, SC_FUSE_SIZE);
  assert_int_equal(cfg.bucket_bytes, 0);
  assert_true(cfg.alpha_us == 0.0 && cfg.beta_us_per_byte == 0.0 && cfg.density == 0.0);
  assert_int_equal(cfg.select, SC_SELECT_EXACT);
  assert_int_equal(cfg.slice_bytes, 0);
  sc_fusion_config_init(NULL); /* must not crash */
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Three tensors in one SIZE bucket on a 1-rank communicator. */
static void test_rules_one_rank(void **state) {
  (void)state;
  setenv("SC_TIMEOUT_MS", "60000", 1);
  sc_unique_id_t id;
  sc_comm_t *comm = NULL;
  assert_int_equal(sc_get_unique_id(&id), SC_SUCCESS);
  assert_int_equal(sc_comm_init_rank(&comm, 1, id, 0), SC_SUCCESS);
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.alpha_us = 10;
  cfg.beta_us_per_byte = 0.001;
  cfg.select = (sc_select_t)5;
  sc_fusion_t *f = NULL;
  assert_int_equal(sc_fusion_create(comm, &cfg, &f), SC_ERR_INVALID_ARG);
  assert_null(f);
  cfg.select = SC_SELECT_EXACT;
  assert_int_equal(sc_fusion_create(comm, &cfg, &f), SC_SUCCESS);
  float a[4], b[3], c[5];
  float *bufs[3] = {a, b, c};
  const size_t n[3] = {4, 3, 5};
  int tid;
  for (int t = 0; t < 3; t++)
    assert_int_equal(sc_fusion_add_tensor(f, bufs[t], n[t], SC_FLOAT32, 1, &tid), SC_SUCCESS);
  assert_int_equal(sc_fusion_plan(f), SC_SUCCESS);
  int nb = 0;
  assert_int_equal(sc_fusion_num_buckets(f, &nb), SC_SUCCESS);
  assert_int_equal(nb, 1);
  /* Never made ready: nothing in flight. */
  assert_int_equal(sc_fusion_wait(f, 1), SC_SUCCESS);
  for (int t = 0; t < 3; t++)
    for (size_t i = 0; i < n[t]; i++) bufs[t][i] = (float)(10 * t + (int)i);
  assert_int_equal(sc_fusion_ready(f, 0), SC_SUCCESS);
  assert_int_equal(sc_fusion_ready(f, 2), SC_SUCCESS);
  double t0 = now_ms();
  assert_int_equal(sc_fusion_wait(f, 0), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "tensor 1 ("));
  assert_int_equal(sc_fusion_wait_all(f), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "tensor 1 ("));
  assert_true(now_ms() - t0 < 2000);
  /* Tensor 1 itself has no round in flight; a second ready of 0 is refused. */
  assert_int_equal(sc_fusion_wait(f, 1), SC_SUCCESS);
  assert_int_equal(sc_fusion_ready(f, 0), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "tensor 0 is already ready"));
  assert_int_equal(sc_fusion_ready(f, 1), SC_SUCCESS);
  assert_int_equal(sc_fusion_skip(f, 2), SC_ERR_INVALID_ARG); /* launched: still refused */
  assert_int_equal(sc_fusion_wait_all(f), SC_SUCCESS);
  for (int t = 0; t < 3; t++)
    for (size_t i = 0; i < n[t]; i++) assert_true(bufs[t][i] == (float)(10 * t + (int)i));
  /* Skip: the buffer is not read and receives the (zero) average. */
  for (size_t i = 0; i < n[1]; i++) b[i] = NAN;
  assert_int_equal(sc_fusion_ready(f, 0), SC_SUCCESS);
  assert_int_equal(sc_fusion_skip(f, 1), SC_SUCCESS);
  assert_int_equal(sc_fusion_skip(f, 1), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_fusion_ready(f, 2), SC_SUCCESS);
  assert_int_equal(sc_fusion_wait(f, 2), SC_SUCCESS);
  for (size_t i = 0; i < n[1]; i++) assert_true(b[i] == 0.0f);
  assert_true(a[3] == 3.0f && c[4] == 24.0f);
  assert_int_equal(sc_fusion_destroy(f), SC_SUCCESS);
  assert_int_equal(sc_comm_destroy(comm), SC_SUCCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_init_defaults),
      cmocka_unit_test(test_rules_one_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
