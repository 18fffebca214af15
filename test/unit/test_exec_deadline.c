/* SPDX-License-Identifier: BSD-3-Clause */
/* The executor's no-progress deadline (lib/core/executor.c, sc_exec_progress):
 * an operation fails with SC_ERR_TIMEOUT once no byte has moved for
 * SC_TIMEOUT_MS, and only then. The time of the last progress is stamped
 * lazily (at the next round, from the clock that round reads anyway), so
 * these tests check both sides against the wall clock: a transport that
 * keeps moving for several timeouts never times out, one that stops does
 * within a few polling slices of the timeout, and an operation's first
 * wait counts from its own start, not from an earlier operation's. The
 * transport is a stand-in whose progress() sleeps a slice and reports
 * movement while the test says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "lib/core/comm.h"
#include "lib/core/exec_device.h"
#include "lib/schedule/sched.h"

#define TIMEOUT_MS 100
#define SLICE_MS   10

static int moving; /* what the stand-in's progress() reports */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static sc_result_t fake_progress(sc_transport_t *tp, int timeout_ms, int *progressed) {
  (void)tp;
  int ms = timeout_ms < SLICE_MS ? timeout_ms : SLICE_MS;
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
  *progressed = moving;
  return SC_SUCCESS;
}

static sc_transport_ops_t fake_ops;
static sc_comm_t comm;
static sc_sched_t sched;
static sc_op_t op;
static sc_exec_args_t args;

static sc_exec_ctx_t start_operation(void) {
  memset(&fake_ops, 0, sizeof(fake_ops));
  fake_ops.name = "fake";
  fake_ops.progress = fake_progress;
  memset(&comm, 0, sizeof(comm));
  comm.rank = 0;
  comm.nranks = 2;
  comm.cfg.timeout_ms = TIMEOUT_MS;
  comm.tpops = &fake_ops;
  sc_sched_init(&sched);
  sched.nsteps = 1;
  op = (sc_op_t){.coll = SC_COLL_ALLREDUCE, .dtype = SC_FLOAT32};
  args = (sc_exec_args_t){.op = &op, .sched = &sched, .elem_size = 4};
  /* As sc_sched_execute starts one. */
  return (sc_exec_ctx_t){.comm = &comm, .a = &args, .progress_unstamped = 1};
}

/* Rounds until one fails or `limit_ms` passes; the failing result, or
 * SC_SUCCESS. */
static sc_result_t rounds_for(sc_exec_ctx_t *c, double limit_ms, double *failed_at) {
  double t0 = now_ms();
  while (now_ms() - t0 < limit_ms) {
    sc_result_t r = sc_exec_progress(c, 1, 64, "receive", SC_EXEC_POLL_SLICE_MS);
    if (r != SC_SUCCESS) {
      *failed_at = now_ms();
      return r;
    }
  }
  return SC_SUCCESS;
}

static void test_moving_never_times_out(void **state) {
  (void)state;
  sc_exec_ctx_t c = start_operation();
  moving = 1;
  double at = 0;
  /* Four timeouts' worth of rounds, each moving data. */
  assert_int_equal(rounds_for(&c, 4 * TIMEOUT_MS, &at), SC_SUCCESS);
}

static void test_stall_times_out_after_the_timeout(void **state) {
  (void)state;
  sc_exec_ctx_t c = start_operation();
  moving = 1;
  double at = 0;
  assert_int_equal(rounds_for(&c, 2 * TIMEOUT_MS, &at), SC_SUCCESS);
  moving = 0;
  double stalled = now_ms();
  assert_int_equal(rounds_for(&c, 20 * TIMEOUT_MS, &at), SC_ERR_TIMEOUT);
  /* The last movement was reported by the round that ended just before
   * `stalled`: the deadline counts from then (give or take the clock's
   * millisecond), and a few slices late at most on a loaded machine. */
  assert_true(at - stalled >= TIMEOUT_MS - SLICE_MS - 2);
  assert_true(at - stalled < 10 * TIMEOUT_MS);
  assert_non_null(strstr(sc_last_error(), "no progress for 100 ms"));
  assert_non_null(strstr(sc_last_error(), "from rank 1"));
}

static void test_operation_counts_from_its_start(void **state) {
  (void)state;
  sc_exec_ctx_t c = start_operation();
  moving = 0;
  /* An idle gap before the operation must not count against it. */
  struct timespec gap = {0, 3 * TIMEOUT_MS * 1000000L};
  nanosleep(&gap, NULL);
  double t0 = now_ms(), at = 0;
  assert_int_equal(rounds_for(&c, 20 * TIMEOUT_MS, &at), SC_ERR_TIMEOUT);
  assert_true(at - t0 >= TIMEOUT_MS - 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_moving_never_times_out),
      cmocka_unit_test(test_stall_times_out_after_the_timeout),
      cmocka_unit_test(test_operation_counts_from_its_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
