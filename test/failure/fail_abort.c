/* SPDX-License-Identifier: BSD-3-Clause */
/* Failure table row "local abort from another thread" (run under sc-run,
 * n=2): sc_comm_abort from any thread, twice, from two threads at once, with
 * the peer alive or already dead, wakes every blocked call and pending
 * request with SC_ERR_ABORTED and returns within a bound; later calls answer
 * SC_ERR_ABORTED at once; destroy then frees the handle.
 * Rank 1 only helps: it takes part in the splits, never in the collectives
 * rank 0 blocks in, and finally leaves (mode dead) or waits (mode alive).
 * Usage: fail_abort alive|dead [bound_seconds] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/failure/fail_common.h"

#define COUNT 4096

static double bound;
static int fails;

typedef struct aborter {
  sc_comm_t *comm;
  pthread_barrier_t *go;
  int delay_ms;
  double took; /* seconds both aborts took */
  sc_result_t r1, r2;
} aborter_t;

static void *abort_twice(void *arg) {
  aborter_t *a = arg;
  usleep((useconds_t)a->delay_ms * 1000);
  pthread_barrier_wait(a->go); /* both threads call abort at the same moment */
  double t0 = fail_now();
  a->r1 = sc_comm_abort(a->comm);
  a->r2 = sc_comm_abort(a->comm);
  a->took = fail_now() - t0;
  return NULL;
}

/* Two threads abort comm after delay_ms; returns once both are done. */
static void start_aborters(aborter_t a[2], pthread_t t[2], pthread_barrier_t *go, sc_comm_t *comm,
                           int delay_ms) {
  pthread_barrier_init(go, NULL, 2);
  for (int i = 0; i < 2; i++) {
    a[i] = (aborter_t){.comm = comm, .go = go, .delay_ms = delay_ms};
    pthread_create(&t[i], NULL, abort_twice, &a[i]);
  }
}

static void join_aborters(aborter_t a[2], pthread_t t[2], pthread_barrier_t *go, const char *what) {
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    if (a[i].r1 != SC_SUCCESS || a[i].r2 != SC_SUCCESS || a[i].took > bound) {
      fprintf(stderr, "FAIL %s: abort thread %d: %s, %s after %.3f s\n", what, i,
              sc_strerror(a[i].r1), sc_strerror(a[i].r2), a[i].took);
      fails++;
    }
    printf("%s: abort thread %d returned after %.3f s\n", what, i, a[i].took);
  }
  pthread_barrier_destroy(go);
}

/* After an abort: every call fails at once with SC_ERR_ABORTED; destroy works. */
static void after_abort(sc_comm_t *comm, const char *what) {
  float x[4] = {0};
  double t0 = fail_now();
  sc_result_t r = sc_allreduce(x, x, 4, SC_FLOAT32, SC_SUM, comm);
  const char *kw[] = {"aborted", NULL};
  char w[96];
  snprintf(w, sizeof(w), "%s: call after abort", what);
  if (!fail_expect(0, w, r, SC_ERR_ABORTED, fail_now() - t0, 0.5, sc_last_error(), kw)) fails++;
  sc_result_t async = SC_SUCCESS;
  sc_comm_get_async_error(comm, &async);
  if (async != SC_ERR_ABORTED) {
    fprintf(stderr, "FAIL %s: async error %s\n", what, sc_strerror(async));
    fails++;
  }
  if (sc_comm_destroy(comm) != SC_SUCCESS) {
    fprintf(stderr, "FAIL %s: destroy after abort: %s\n", what, sc_last_error());
    fails++;
  }
}

/* A blocking all-reduce the peer never joins, with a non-blocking one queued
 * behind it; two threads abort 300 ms in. */
static void blocked_and_pending(sc_comm_t *comm, const char *what) {
  static float a[COUNT], b[COUNT];
  sc_request_t *pending = NULL;
  if (sc_iallreduce(b, b, COUNT, SC_FLOAT32, SC_SUM, comm, &pending) != SC_SUCCESS) fails++;
  aborter_t ab[2];
  pthread_t t[2];
  pthread_barrier_t go;
  start_aborters(ab, t, &go, comm, 300);
  double t0 = fail_now();
  sc_result_t r = sc_allreduce(a, a, COUNT, SC_FLOAT32, SC_SUM, comm);
  double dt = fail_now() - t0;
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", sc_last_error());
  join_aborters(ab, t, &go, what);
  char w[96];
  snprintf(w, sizeof(w), "%s: blocked all-reduce", what);
  const char *kw[] = {"aborted", "rank 0", "allreduce #", "count 4096", "float32", NULL};
  /* It can only return through the abort, 300 ms in. */
  if (!fail_expect(0, w, r, SC_ERR_ABORTED, dt, 0.3 + bound, msg, kw) || dt < 0.25) fails++;
  t0 = fail_now();
  r = sc_wait(&pending);
  snprintf(w, sizeof(w), "%s: queued request", what);
  if (!fail_expect(0, w, r, SC_ERR_ABORTED, fail_now() - t0, bound, sc_last_error(), kw) || pending)
    fails++;
  after_abort(comm, what);
}

/* Only a non-blocking request is pending; the caller polls sc_test. */
static void pending_only(sc_comm_t *comm, const char *what) {
  static float b[COUNT];
  sc_request_t *req = NULL;
  if (sc_iallreduce(b, b, COUNT, SC_FLOAT32, SC_SUM, comm, &req) != SC_SUCCESS) fails++;
  aborter_t ab[2];
  pthread_t t[2];
  pthread_barrier_t go;
  start_aborters(ab, t, &go, comm, 300);
  double t0 = fail_now();
  int done = 0;
  sc_result_t r = SC_IN_PROGRESS;
  while (!done && fail_now() - t0 < 0.3 + bound) {
    r = sc_test(&req, &done);
    if (!done) usleep(1000);
  }
  double dt = fail_now() - t0;
  join_aborters(ab, t, &go, what);
  char w[96];
  snprintf(w, sizeof(w), "%s: polled request", what);
  const char *kw[] = {"aborted", "allreduce #0 (count 4096, float32)", NULL};
  if (!fail_expect(0, w, r, SC_ERR_ABORTED, dt, 0.3 + bound, sc_last_error(), kw) || !done) fails++;
  after_abort(comm, what);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "alive";
  bound = argc > 2 ? atof(argv[2]) : 2.0;
  sc_comm_t *world, *c1, *c2;
  if (sc_comm_init_env(&world) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  int rank;
  sc_comm_rank(world, &rank);
  if (sc_comm_split(world, 0, rank, &c1) != SC_SUCCESS ||
      sc_comm_split(world, 0, rank, &c2) != SC_SUCCESS) {
    fprintf(stderr, "rank %d: split failed: %s\n", rank, sc_last_error());
    return 1;
  }
  int dead = !strcmp(mode, "dead");
  if (rank != 0) {
    /* Keeps c1 and c2 open (idle) while rank 0 aborts its ends. */
    if (sc_barrier(world) != SC_SUCCESS) return 1;
    if (dead) _exit(0); /* leaves without a word: sockets close with the process */
    sleep(2);
    sc_comm_destroy(c1);
    sc_comm_destroy(c2);
    sc_comm_abort(world); /* rank 0 aborts its end too */
    sc_comm_destroy(world);
    return 0;
  }
  blocked_and_pending(c1, "peer alive, blocked + queued");
  pending_only(c2, "peer alive, non-blocking");
  if (sc_barrier(world) != SC_SUCCESS) {
    fprintf(stderr, "FAIL: barrier: %s\n", sc_last_error());
    fails++;
  }
  if (dead) usleep(500 * 1000); /* rank 1 is gone by now */
  /* No call in flight: the aborts alone, peer alive or dead. */
  aborter_t ab[2];
  pthread_t t[2];
  pthread_barrier_t go;
  const char *what = dead ? "peer dead, idle" : "peer alive, idle";
  start_aborters(ab, t, &go, world, 0);
  join_aborters(ab, t, &go, what);
  after_abort(world, what);
  printf("fail_abort %s: %d failures\n", mode, fails);
  return fails ? 1 : 0;
}
