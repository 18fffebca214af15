/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport checks through the public API (run by sc-run).
 * Every rank first prints "pid P" so that the script can look for anything of
 * this job's in /dev/shm (the transport must never leave a file there).
 *
 *   mr_shm kill  : 64 MiB float all-reduces; rank 1 SIGKILLs itself while one
 *                  is in flight. The others must fail with SC_ERR_REMOTE naming
 *                  rank 1 and its host, within the timeout.
 *   mr_shm many N: N small all-reduces (int32 and float) checked against the
 *                  closed-form sum every time.
 *   mr_shm init  : create and destroy a communicator; print the result (for
 *                  the test that expects SC_TRANSPORT=shm to refuse a peer on
 *                  another host).
 *   mr_shm setupkill MS: rank 1 SIGKILLs itself MS ms after it starts, during
 *                  or right after connection setup; the others create the
 *                  communicator and run one all-reduce (either may fail). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sparsecoll.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *kill_later(void *arg) {
  (void)arg;
  usleep(20 * 1000); /* the 64 MiB all-reduce is under way by then */
  raise(SIGKILL);
  return NULL;
}

static void *kill_after(void *arg) {
  usleep((useconds_t)(*(int *)arg) * 1000);
  raise(SIGKILL);
  return NULL;
}

static int run_kill(sc_comm_t *comm, int rank, int n) {
  size_t count = (size_t)16 << 20; /* 64 MiB of float */
  float *buf = malloc(count * sizeof(float));
  if (!buf) return 1;
  for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
  if (sc_allreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm) != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: warm-up all-reduce: %s\n", rank, sc_last_error());
    return 1;
  }
  if (buf[0] != (float)n || buf[count - 1] != (float)n) {
    fprintf(stderr, "rank %d FAIL: warm-up result %g, want %d\n", rank, buf[0], n);
    return 1;
  }
  pthread_t t;
  if (rank == 1) pthread_create(&t, NULL, kill_later, NULL);
  const char *tmo = getenv("SC_TIMEOUT_MS");
  double limit = (tmo ? atof(tmo) : 300000) / 1000.0;
  double t0 = now_s();
  sc_result_t r = SC_SUCCESS;
  for (int i = 0; i < 100 && r == SC_SUCCESS; i++)
    r = sc_allreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm);
  double dt = now_s() - t0;
  if (rank == 1) { /* unreachable unless the kill failed */
    fprintf(stderr, "rank 1 FAIL: still alive after 100 all-reduces\n");
    return 1;
  }
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", sc_last_error());
  char host[256];
  gethostname(host, sizeof(host));
  host[sizeof(host) - 1] = '\0';
  int ok = 1;
  if (r != SC_ERR_REMOTE) {
    fprintf(stderr, "rank %d FAIL: got %s, want SC_ERR_REMOTE: %s\n", rank, sc_strerror(r), msg);
    ok = 0;
  } else if (!strstr(msg, "rank 1 (") || !strstr(msg, host)) {
    /* Rank 1's own neighbours name it; the others may name the neighbour
     * that gave up on them, but always a rank and a host. */
    if (!strstr(msg, "rank ") || !strstr(msg, host)) {
      fprintf(stderr, "rank %d FAIL: message names no rank and host: %s\n", rank, msg);
      ok = 0;
    }
  }
  if (dt >= limit) {
    fprintf(stderr, "rank %d FAIL: took %.2f s, timeout %.2f s\n", rank, dt, limit);
    ok = 0;
  }
  printf("rank %d: failed in %.3f s with: %s\n", rank, dt, msg);
  sc_comm_destroy(comm);
  free(buf);
  return ok ? 0 : 1;
}

static int run_many(sc_comm_t *comm, int rank, int n, int iters) {
  enum { COUNT = 16 };
  int32_t ib[COUNT];
  float fb[COUNT];
  double t0 = now_s();
  for (int it = 0; it < iters; it++) {
    for (int k = 0; k < COUNT; k++) {
      ib[k] = rank * 1000 + it + k;
      fb[k] = (float)(rank + k);
    }
    sc_result_t r = sc_allreduce(ib, ib, COUNT, SC_INT32, SC_SUM, comm);
    if (r == SC_SUCCESS) r = sc_allreduce(fb, fb, COUNT, SC_FLOAT32, SC_SUM, comm);
    if (r != SC_SUCCESS) {
      fprintf(stderr, "rank %d FAIL: iteration %d: %s: %s\n", rank, it, sc_strerror(r),
              sc_last_error());
      return 1;
    }
    int32_t rsum = n * (n - 1) / 2;
    for (int k = 0; k < COUNT; k++) {
      int32_t iwant = 1000 * rsum + n * (it + k);
      float fwant = (float)(rsum + n * k);
      if (ib[k] != iwant || fb[k] != fwant) {
        fprintf(stderr, "rank %d FAIL: iteration %d element %d: %d/%g, want %d/%g\n", rank, it, k,
                ib[k], fb[k], iwant, fwant);
        return 1;
      }
    }
  }
  printf("rank %d: %d x 2 small all-reduces in %.3f s\n", rank, iters, now_s() - t0);
  return sc_comm_destroy(comm) == SC_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "many";
  printf("pid %d\n", (int)getpid());
  fflush(stdout);
  if (!strcmp(mode, "setupkill") && atoi(getenv("SC_RANK") ? getenv("SC_RANK") : "0") == 1) {
    static int ms;
    ms = argc > 2 ? atoi(argv[2]) : 0;
    pthread_t t;
    pthread_create(&t, NULL, kill_after, &ms);
  }
  sc_comm_t *comm;
  sc_result_t r = sc_comm_init_env(&comm);
  if (!strcmp(mode, "init")) {
    printf("init: %s: %s\n", sc_strerror(r), r == SC_SUCCESS ? "" : sc_last_error());
    if (r == SC_SUCCESS) sc_comm_destroy(comm);
    return r == SC_SUCCESS ? 0 : 2;
  }
  if (r != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return strcmp(mode, "setupkill") ? 1 : 0;
  }
  int rank, n;
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &n);
  if (!strcmp(mode, "kill")) return run_kill(comm, rank, n);
  if (!strcmp(mode, "setupkill")) {
    float v = 1.0f;
    r = sc_allreduce(&v, &v, 1, SC_FLOAT32, SC_SUM, comm);
    printf("rank %d: all-reduce: %s\n", rank, sc_strerror(r));
    fflush(stdout);
    while (rank == 1) pause(); /* the kill comes */
    sc_comm_destroy(comm);
    return 0;
  }
  if (!strcmp(mode, "many")) return run_many(comm, rank, n, argc > 2 ? atoi(argv[2]) : 1000);
  fprintf(stderr, "usage: mr_shm kill|many [N]|init|setupkill MS\n");
  return 2;
}
