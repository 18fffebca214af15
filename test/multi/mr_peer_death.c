/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank that leaves early (exits, or is killed) must make every other rank's
 * next collective fail with SC_ERR_REMOTE and a message naming a peer, within
 * the timeout, never hang; the survivors' communicator then reports the error
 * from sc_comm_get_async_error and fails later calls at once.
 * Usage: mr_peer_death [exit|kill] (the dying rank is nranks-1 or 1). */
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

int main(int argc, char **argv) {
  const char *how = argc > 1 ? argv[1] : "exit";
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  int rank, n;
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &n);
  int victim = n > 2 ? 1 : n - 1;
  size_t count = 1 << 20;
  float *buf = calloc(count, sizeof(float));
  if (sc_allreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm) != SC_SUCCESS) {
    fprintf(stderr, "rank %d: warm-up allreduce failed: %s\n", rank, sc_last_error());
    return 1;
  }
  if (rank == victim) {
    if (!strcmp(how, "kill")) raise(SIGKILL);
    _exit(0); /* leaves without destroying: sockets close with the process */
  }
  double t0 = now_s();
  sc_result_t r = SC_SUCCESS;
  for (int i = 0; i < 50 && r == SC_SUCCESS; i++)
    r = sc_allreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm);
  double dt = now_s() - t0;
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", sc_last_error());
  int ok = 1;
  if (r != SC_ERR_REMOTE) {
    fprintf(stderr, "rank %d FAIL: got %s, want SC_ERR_REMOTE: %s\n", rank, sc_strerror(r), msg);
    ok = 0;
  } else if (!strstr(msg, "rank ")) {
    fprintf(stderr, "rank %d FAIL: message names no peer: %s\n", rank, msg);
    ok = 0;
  }
  sc_result_t async = SC_SUCCESS;
  sc_comm_get_async_error(comm, &async);
  if (async != SC_ERR_REMOTE) {
    fprintf(stderr, "rank %d FAIL: async error %s\n", rank, sc_strerror(async));
    ok = 0;
  }
  /* Later calls fail at once with the same error. */
  double t1 = now_s();
  sc_result_t again = sc_barrier(comm);
  if (again != SC_ERR_REMOTE || now_s() - t1 > 1.0) {
    fprintf(stderr, "rank %d FAIL: call after failure: %s after %.2f s\n", rank, sc_strerror(again),
            now_s() - t1);
    ok = 0;
  }
  printf("rank %d: failed in %.3f s with: %s\n", rank, dt, msg);
  sc_comm_destroy(comm);
  free(buf);
  return ok ? 0 : 1;
}
