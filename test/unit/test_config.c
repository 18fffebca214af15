/* SPDX-License-Identifier: BSD-3-Clause */
/* Configuration parsing, the SC_* table, errors and the thread-local detail,
 * dtype sizes, token-derived secrets, and API argument checks that need no
 * network. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/core/comm.h"

static void test_parse_long(void **state) {
  long v = 0;
  assert_int_equal(sc_parse_long("X", "42", 0, 100, &v), SC_SUCCESS);
  assert_int_equal(v, 42);
  assert_int_equal(sc_parse_long("X", "-5", -10, 10, &v), SC_SUCCESS);
  assert_int_equal(v, -5);
  assert_int_equal(sc_parse_long("X", "101", 0, 100, &v), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "X"));
  assert_int_equal(sc_parse_long("X", "12abc", 0, 100, &v), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_long("X", "", 0, 100, &v), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_long("X", NULL, 0, 100, &v), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_long("X", "99999999999999999999999", 0, 100, &v), SC_ERR_INVALID_ARG);
  assert_int_equal(v, -5); /* untouched on failure */
}

static void test_parse_size(void **state) {
  size_t v = 0;
  assert_int_equal(sc_parse_size("S", "4096", 0, SIZE_MAX, &v), SC_SUCCESS);
  assert_int_equal(v, 4096);
  assert_int_equal(sc_parse_size("S", "512K", 0, SIZE_MAX, &v), SC_SUCCESS);
  assert_int_equal(v, 512 * 1024);
  assert_int_equal(sc_parse_size("S", "64M", 0, SIZE_MAX, &v), SC_SUCCESS);
  assert_int_equal(v, 64u << 20);
  assert_int_equal(sc_parse_size("S", "2GB", 0, SIZE_MAX, &v), SC_SUCCESS);
  assert_int_equal(v, (size_t)2 << 30);
  assert_int_equal(sc_parse_size("S", "-1", 0, SIZE_MAX, &v), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_size("S", "3X", 0, SIZE_MAX, &v), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_size("S", "63", 64, 128, &v), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_size("S", "99999999999999999999G", 0, SIZE_MAX, &v),
                   SC_ERR_INVALID_ARG);
}

static void test_parse_hostport(void **state) {
  char host[64];
  uint16_t port = 0;
  assert_int_equal(sc_parse_hostport("A", "127.0.0.1:29500", host, sizeof(host), &port),
                   SC_SUCCESS);
  assert_string_equal(host, "127.0.0.1");
  assert_int_equal(port, 29500);
  assert_int_equal(sc_parse_hostport("A", "[::1]:80", host, sizeof(host), &port), SC_SUCCESS);
  assert_string_equal(host, "::1");
  assert_int_equal(port, 80);
  assert_int_equal(sc_parse_hostport("A", "node-3:1", host, sizeof(host), &port), SC_SUCCESS);
  assert_string_equal(host, "node-3");
  assert_int_equal(sc_parse_hostport("A", "host", host, sizeof(host), &port), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_hostport("A", "host:0", host, sizeof(host), &port), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_hostport("A", "host:65536", host, sizeof(host), &port),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_hostport("A", ":80", host, sizeof(host), &port), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_parse_hostport("A", "::1:80", host, sizeof(host), &port), SC_ERR_INVALID_ARG);
  char tiny[4];
  assert_int_equal(sc_parse_hostport("A", "longhost:80", tiny, sizeof(tiny), &port),
                   SC_ERR_INVALID_ARG);
}

static void test_parse_choice(void **state) {
  static const char *const c[] = {"auto", "ring", "tree"};
  int idx = -1;
  assert_int_equal(sc_parse_choice("SC_ALGO", "RING", c, 3, &idx), SC_SUCCESS);
  assert_int_equal(idx, 1);
  assert_int_equal(sc_parse_choice("SC_ALGO", "bogus", c, 3, &idx), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "auto, ring, tree"));
}

static void test_config_table(void **state) {
  size_t n = 0;
  const sc_config_var_t *t = sc_config_table(&n);
  assert_true(n >= 10);
  const char *required[] = {"SC_DEBUG",         "SC_TRANSPORT",      "SC_ALGO", "SC_TIMEOUT_MS",
                            "SC_SOCKET_IFNAME", "SC_CHECK_MISMATCH", "SC_RANK", "SC_WORLD_SIZE",
                            "SC_ROOT_ADDR",     "SC_AUTH_TOKEN"};
  for (size_t r = 0; r < sizeof(required) / sizeof(required[0]); r++) {
    int found = 0;
    for (size_t i = 0; i < n; i++) found |= !strcmp(t[i].name, required[r]);
    assert_true(found);
  }
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(strncmp(t[i].name, "SC_", 3), 0);
    assert_true(strlen(t[i].meaning) > 10);
    for (size_t j = i + 1; j < n; j++) assert_string_not_equal(t[i].name, t[j].name);
  }
  assert_string_equal(sc_config_get("SC_TIMEOUT_MS"), "300000");
  setenv("SC_TIMEOUT_MS", "1234", 1);
  long v;
  assert_int_equal(sc_config_long("SC_TIMEOUT_MS", 1, 100000, &v), SC_SUCCESS);
  assert_int_equal(v, 1234);
  setenv("SC_TIMEOUT_MS", "soon", 1);
  assert_int_equal(sc_config_long("SC_TIMEOUT_MS", 1, 100000, &v), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "SC_TIMEOUT_MS"));
  unsetenv("SC_TIMEOUT_MS");
  assert_null(sc_config_get("SC_NOT_A_VARIABLE"));
}

static void *other_thread_error(void *arg) {
  /* A fresh thread starts with no detail, and its errors stay its own. */
  const char **seen = arg;
  *seen = strdup(sc_last_error());
  SC_ERR(SC_ERR_REMOTE, "thread-only failure");
  return NULL;
}

static void test_errors(void **state) {
  for (int r = SC_SUCCESS; r <= SC_ERR_INTERNAL; r++) {
    assert_non_null(sc_strerror((sc_result_t)r));
    assert_string_not_equal(sc_strerror((sc_result_t)r), "unknown result code");
  }
  assert_string_equal(sc_strerror((sc_result_t)1000), "unknown result code");
  assert_string_equal(sc_strerror((sc_result_t)-1), "unknown result code");
  assert_int_equal(SC_ERR(SC_ERR_TIMEOUT, "waiting for rank %d", 7), SC_ERR_TIMEOUT);
  assert_non_null(strstr(sc_last_error(), "waiting for rank 7"));
  assert_non_null(strstr(sc_last_error(), "test_config.c"));
  const char *seen = NULL;
  pthread_t t;
  pthread_create(&t, NULL, other_thread_error, &seen);
  pthread_join(t, NULL);
  assert_string_equal(seen, "");
  free((void *)seen);
  assert_non_null(strstr(sc_last_error(), "waiting for rank 7"));
  sc_error_set_detail("");
  assert_string_equal(sc_last_error(), "");
}

static void test_dtypes_and_version(void **state) {
  const size_t want[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  for (int t = SC_INT8; t <= SC_FLOAT64; t++)
    assert_int_equal(sc_dtype_size((sc_dtype_t)t), want[t]);
  assert_int_equal(sc_dtype_size((sc_dtype_t)10), 0);
  assert_int_equal(sc_dtype_size((sc_dtype_t)-1), 0);
  assert_int_equal(sc_get_version(),
                   SC_VERSION_MAJOR * 10000 + SC_VERSION_MINOR * 100 + SC_VERSION_PATCH);
}

static void test_secret_from_token(void **state) {
  uint8_t a[SC_SECRET_LEN], b[SC_SECRET_LEN], zero[SC_SECRET_LEN] = {0};
  assert_int_equal(sc_secret_from_token(NULL, a), SC_SUCCESS);
  assert_memory_equal(a, zero, SC_SECRET_LEN);
  const char *hex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
  assert_int_equal(sc_secret_from_token(hex, a), SC_SUCCESS);
  for (int i = 0; i < SC_SECRET_LEN; i++) assert_int_equal(a[i], i);
  assert_int_equal(sc_secret_from_token("s3cret", a), SC_SUCCESS);
  assert_int_equal(sc_secret_from_token("s3cret", b), SC_SUCCESS);
  assert_memory_equal(a, b, SC_SECRET_LEN);
  assert_memory_not_equal(a, zero, SC_SECRET_LEN);
  assert_int_equal(sc_secret_from_token("s3creT", b), SC_SUCCESS);
  assert_memory_not_equal(a, b, SC_SECRET_LEN);
}

static void test_api_arguments_without_comm(void **state) {
  float x = 0;
  sc_request_t *req = (sc_request_t *)&x;
  assert_int_equal(sc_iallreduce(&x, &x, 1, SC_FLOAT32, SC_SUM, NULL, &req), SC_ERR_INVALID_ARG);
  assert_null(req);
  assert_int_equal(sc_allreduce(&x, &x, 1, SC_FLOAT32, SC_SUM, NULL), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_comm_init_rank(NULL, 2, (sc_unique_id_t){{0}}, 0), SC_ERR_INVALID_ARG);
  sc_comm_t *c = (sc_comm_t *)&x;
  assert_int_equal(sc_comm_init_rank(&c, 0, (sc_unique_id_t){{0}}, 0), SC_ERR_INVALID_ARG);
  assert_null(c);
  assert_int_equal(sc_comm_init_rank(&c, 2, (sc_unique_id_t){{0}}, 2), SC_ERR_INVALID_ARG);
  /* A zeroed id is not one this library made. */
  assert_int_equal(sc_comm_init_rank(&c, 2, (sc_unique_id_t){{0}}, 1), SC_ERR_INVALID_ARG);
  assert_null(c);
  int done;
  assert_int_equal(sc_test(NULL, &done), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_comm_destroy(NULL), SC_ERR_INVALID_ARG);
  assert_int_equal(sc_comm_abort(NULL), SC_ERR_INVALID_ARG);
  size_t nnz;
  assert_int_equal(sc_topk(&x, 1, SC_FLOAT32, 1, SC_SELECT_EXACT, NULL, NULL, &nnz),
                   SC_ERR_INVALID_ARG);
}

static void test_init_env_without_variables(void **state) {
  const char *vars[] = {"SC_RANK",
                        "SC_WORLD_SIZE",
                        "RANK",
                        "WORLD_SIZE",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
  sc_comm_t *c = NULL;
  assert_int_equal(sc_comm_init_env(&c), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "SC_RANK"));
  setenv("SC_RANK", "3", 1);
  setenv("SC_WORLD_SIZE", "2", 1);
  setenv("SC_ROOT_ADDR", "127.0.0.1:1", 1);
  assert_int_equal(sc_comm_init_env(&c), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "SC_RANK=3"));
  setenv("SC_RANK", "0", 1);
  unsetenv("SC_ROOT_ADDR");
  assert_int_equal(sc_comm_init_env(&c), SC_ERR_INVALID_ARG);
  assert_non_null(strstr(sc_last_error(), "SC_ROOT_ADDR"));
  unsetenv("SC_RANK");
  unsetenv("SC_WORLD_SIZE");
}

/* A call refused because the communicator failed names the call the same
 * way whichever path refuses it: at submission (sc_op_submit), or when its
 * turn comes after the failure was recorded (sc_op_check_runnable, which
 * adds the call's number). CI once saw the second path drop count and dtype. */
static void test_refusal_names_the_call(void **state) {
  sc_comm_t comm;
  memset(&comm, 0, sizeof(comm));
  pthread_mutex_init(&comm.lock, NULL);
  comm.rank = 1;
  comm.nranks = 3;
  sc_op_t op = {.coll = SC_COLL_ALLREDUCE,
                .count = 100000,
                .dtype = SC_INT32,
                .op = SC_SUM,
                .root = -1,
                .seq = 7};
  assert_int_equal(sc_op_check_runnable(&comm, &op), SC_SUCCESS);

  snprintf(comm.errmsg, sizeof(comm.errmsg), "rank 2 (host, pid 9) closed its connections");
  atomic_store(&comm.error, SC_ERR_REMOTE);
  assert_int_equal(sc_op_check_runnable(&comm, &op), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "rank 1: allreduce #7 (count 100000, int32) not started: "
                                          "the communicator failed earlier: rank 2 (host"));
  sc_request_t *req = NULL;
  assert_int_equal(sc_op_submit(&comm, &op, &req), SC_ERR_REMOTE);
  assert_null(req);
  assert_non_null(strstr(sc_last_error(), "rank 1: allreduce (count 100000, int32) not started: "
                                          "the communicator failed earlier: rank 2 (host"));

  atomic_store(&comm.aborted, 1);
  assert_int_equal(sc_op_check_runnable(&comm, &op), SC_ERR_ABORTED);
  assert_non_null(strstr(sc_last_error(), "allreduce #7 (count 100000, int32) not started: "
                                          "the communicator was aborted"));
  pthread_mutex_destroy(&comm.lock);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_long),
      cmocka_unit_test(test_parse_size),
      cmocka_unit_test(test_parse_hostport),
      cmocka_unit_test(test_parse_choice),
      cmocka_unit_test(test_config_table),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_dtypes_and_version),
      cmocka_unit_test(test_secret_from_token),
      cmocka_unit_test(test_api_arguments_without_comm),
      cmocka_unit_test(test_init_env_without_variables),
      cmocka_unit_test(test_refusal_names_the_call),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
