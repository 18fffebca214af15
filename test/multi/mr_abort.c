/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_comm_abort from another thread wakes a blocked collective and a pending
 * non-blocking request with SC_ERR_ABORTED; a second abort is harmless; later
 * calls answer SC_ERR_ABORTED at once; destroy then frees the handle.
 * Rank 1 never joins the collective, so only abort can end rank 0's wait. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sparsecoll.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *abort_later(void *arg) {
  usleep(300 * 1000);
  sc_comm_abort(arg);
  sc_comm_abort(arg); /* twice: still fine */
  return NULL;
}

int main(void) {
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  int rank, fails = 0;
  sc_comm_rank(comm, &rank);
  if (rank != 0) {
    sleep(3); /* never takes part; then leaves through abort */
    sc_comm_abort(comm);
    return sc_comm_destroy(comm) == SC_SUCCESS ? 0 : 1;
  }
  static float a[1000], b[1000];
  sc_request_t *pending = NULL;
  /* Queued behind the blocked call below. */
  if (sc_iallreduce(b, b, 1000, SC_FLOAT32, SC_SUM, comm, &pending) != SC_SUCCESS) fails++;
  pthread_t t;
  pthread_create(&t, NULL, abort_later, comm);
  double t0 = now_s();
  sc_result_t r = sc_allreduce(a, a, 1000, SC_FLOAT32, SC_SUM, comm);
  double dt = now_s() - t0;
  pthread_join(t, NULL);
  if (r != SC_ERR_ABORTED || dt > 5.0) {
    fprintf(stderr, "FAIL: blocked call returned %s after %.2f s: %s\n", sc_strerror(r), dt,
            sc_last_error());
    fails++;
  }
  r = sc_wait(&pending);
  if (r != SC_ERR_ABORTED || pending) {
    fprintf(stderr, "FAIL: pending request: %s\n", sc_strerror(r));
    fails++;
  }
  r = sc_barrier(comm);
  if (r != SC_ERR_ABORTED || !strstr(sc_last_error(), "aborted")) {
    fprintf(stderr, "FAIL: call after abort: %s: %s\n", sc_strerror(r), sc_last_error());
    fails++;
  }
  sc_result_t async;
  sc_comm_get_async_error(comm, &async);
  if (async != SC_ERR_ABORTED) {
    fprintf(stderr, "FAIL: async error after abort: %s\n", sc_strerror(async));
    fails++;
  }
  if (sc_comm_destroy(comm) != SC_SUCCESS) fails++;
  printf("abort: blocked call woke after %.3f s; %d failures\n", dt, fails);
  return fails ? 1 : 0;
}
