/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks that call mismatched collectives (run under sc-run).
 * Usage: fail_mismatch SCENARIO [check|report]
 *   SCENARIO: match, count, nonblocking, dtype, op, root, kind, missing, sparse,
 *             absent (rank 1 makes no call: report mode only),
 *             counts:A:B (an all-reduce of A floats, of B on rank 1)
 *   check:  SC_CHECK_MISMATCH=1 is set; every rank must fail the mismatched
 *           call with SC_ERR_MISMATCH within 5 s, with a message naming both
 *           calls, the peer rank and host, and cause (rank 1) or victim
 *           (the others); later calls fail at once with the same code.
 *           "match": the checked operations give exact results.
 *   report: print what each rank got ("rank R: RESULT in T s: MESSAGE", then
 *           "rank R async: RESULT", what sc_comm_get_async_error says after)
 *           for the script to assert (the default behaviour), then linger
 *           SC_TIMEOUT_MS + 1 s, or with MR_REPORT_DIR until every rank has
 *           left its mark there (all have their results: an exit can no
 *           longer be what a peer reports).
 * Rank 1 is the odd one out; in report mode MR_ODD_RANK names another. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sparsecoll.h"

#define N 1000

static int rank, nranks, failures;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* MR_REPORT_DIR/reported-R: rank R has printed its result. */
static void report_mark_path(const char *dir, int r, char *path, size_t len) {
  snprintf(path, len, "%s/reported-%d", dir, r);
}

static int all_reported(const char *dir, int n) {
  char path[4096];
  for (int r = 0; r < n; r++) {
    report_mark_path(dir, r, path, sizeof(path));
    if (access(path, F_OK) != 0) return 0;
  }
  return 1;
}

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "rank %d FAIL: ", rank);                                                       \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    failures++;                                                                                    \
  } while (0)

static void need(const char *msg, const char *word) {
  if (!strstr(msg, word)) FAIL("message lacks \"%s\": %s", word, msg);
}

/* Every rank adds rank+1 at each element: the sum is exact in float32. */
static int check_allreduce(sc_comm_t *comm, sc_request_t **pending) {
  float *buf = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) buf[i] = (float)(rank + 1) * (float)(i % 7);
  sc_result_t r;
  if (pending) {
    r = sc_iallreduce(buf, buf, N, SC_FLOAT32, SC_SUM, comm, pending);
    if (r == SC_SUCCESS) r = sc_wait(pending);
  } else {
    r = sc_allreduce(buf, buf, N, SC_FLOAT32, SC_SUM, comm);
  }
  int ok = r == SC_SUCCESS;
  if (!ok) FAIL("allreduce: %s: %s", sc_strerror(r), sc_last_error());
  float tri = (float)(nranks * (nranks + 1) / 2);
  for (int i = 0; ok && i < N; i++)
    if (buf[i] != tri * (float)(i % 7)) {
      FAIL("allreduce element %d = %g, want %g", i, buf[i], tri * (float)(i % 7));
      ok = 0;
    }
  free(buf);
  return ok;
}

static int check_match(sc_comm_t *comm) {
  sc_request_t *req = NULL;
  int ok = check_allreduce(comm, NULL) && check_allreduce(comm, &req);
  int root = nranks > 2 ? 2 : 0;
  int v[4] = {rank == root ? 42 : -1, 0, 0, 0};
  sc_result_t r = sc_broadcast(v, v, 4, SC_INT32, root, comm);
  if (r != SC_SUCCESS || v[0] != 42)
    FAIL("broadcast: %s, v[0] = %d want 42: %s", sc_strerror(r), v[0], sc_last_error());
  r = sc_barrier(comm);
  if (r != SC_SUCCESS) FAIL("barrier: %s: %s", sc_strerror(r), sc_last_error());
  /* A sparse all-reduce goes through the same check: one entry per rank at
   * index rank, exact sum = the union. */
  uint32_t idx = (uint32_t)rank, oidx[64];
  float val = (float)(rank + 1), oval[64];
  size_t onnz = 0;
  r = sc_sparse_allreduce(&idx, &val, 1, 64, 1, SC_FLOAT32, SC_SPARSE_ALLGATHER, oidx, oval, &onnz,
                          comm);
  if (r != SC_SUCCESS || onnz != (size_t)nranks)
    FAIL("sparse allreduce: %s, nnz %zu: %s", sc_strerror(r), onnz, sc_last_error());
  for (size_t i = 0; r == SC_SUCCESS && i < onnz; i++)
    if (oidx[i] != i || oval[i] != (float)(i + 1))
      FAIL("sparse entry %zu = (%u, %g)", i, oidx[i], oval[i]);
  return ok && failures == 0;
}

/* The mismatched call; fills the words its message must contain. */
/* The counts scenario's buffer; extern, so the compiler keeps the pointer. */
float *fail_mismatch_big;

static sc_result_t run_scenario(const char *s, sc_comm_t *comm, const char **w1, const char **w2) {
  static float buf[2 * N];
  static double dbuf[N];
  const char *odd_env = getenv("MR_ODD_RANK");
  int odd = rank == (odd_env && *odd_env ? atoi(odd_env) : 1);
  if (!strncmp(s, "counts:", 7)) {
    /* Rank 1's count differs; the words are "count A," and "count B,". */
    static char wa[48], wb[48];
    unsigned long long a = 0, b = 0;
    if (sscanf(s + 7, "%llu:%llu", &a, &b) != 2) {
      fprintf(stderr, "counts:A:B, not %s\n", s);
      exit(2);
    }
    snprintf(wa, sizeof(wa), "count %llu,", a);
    snprintf(wb, sizeof(wb), "count %llu,", b);
    *w1 = wa;
    *w2 = wb;
    size_t n = (size_t)(odd ? b : a);
    /* Kept until the process exits (a failed call may leave the
     * communicator, and so the buffer, in use), reachable from a global. */
    float *big = fail_mismatch_big = calloc(n ? n : 1, sizeof(float));
    if (!big) {
      fprintf(stderr, "no memory for %zu floats\n", n);
      exit(2);
    }
    return sc_allreduce(big, big, n, SC_FLOAT32, SC_SUM, comm);
  }
  if (!strcmp(s, "count")) {
    *w1 = "count 1000";
    *w2 = "count 999";
    return sc_allreduce(buf, buf, odd ? N - 1 : N, SC_FLOAT32, SC_SUM, comm);
  }
  if (!strcmp(s, "nonblocking")) {
    /* The same through the queue and the progress thread. */
    *w1 = "count 1000";
    *w2 = "count 998";
    sc_request_t *req = NULL;
    sc_result_t r = sc_iallreduce(buf, buf, odd ? N - 2 : N, SC_FLOAT32, SC_SUM, comm, &req);
    return r == SC_SUCCESS ? sc_wait(&req) : r;
  }
  if (!strcmp(s, "absent")) {
    /* Rank 1 makes no further call (report mode: it lingers, alive). */
    *w1 = "fingerprint exchange (SC_CHECK_MISMATCH)";
    *w2 = "rank 1";
    return odd ? SC_SUCCESS : sc_allreduce(buf, buf, N, SC_FLOAT32, SC_SUM, comm);
  }
  if (!strcmp(s, "dtype")) {
    *w1 = "float32";
    *w2 = "float64";
    if (odd) return sc_allreduce(dbuf, dbuf, N, SC_FLOAT64, SC_SUM, comm);
    return sc_allreduce(buf, buf, N, SC_FLOAT32, SC_SUM, comm);
  }
  if (!strcmp(s, "op")) {
    *w1 = "float32, sum";
    *w2 = "float32, max";
    return sc_allreduce(buf, buf, N, SC_FLOAT32, odd ? SC_MAX : SC_SUM, comm);
  }
  if (!strcmp(s, "root")) {
    *w1 = "root 0)";
    *w2 = "root 1)";
    return sc_broadcast(buf, buf, N, SC_FLOAT32, odd ? 1 : 0, comm);
  }
  if (!strcmp(s, "kind")) {
    *w1 = "allreduce #1 (count 1000";
    *w2 = "broadcast #1 (count 1000";
    if (odd) return sc_broadcast(buf, buf, N, SC_FLOAT32, 0, comm);
    return sc_allreduce(buf, buf, N, SC_FLOAT32, SC_SUM, comm);
  }
  if (!strcmp(s, "missing")) {
    /* Rank 1 skips the barrier: its all-reduce meets the others' barrier. */
    *w1 = "barrier #1 (count 0, no dtype, no op, root -1)";
    *w2 = "allreduce #1 (count 1000, float32, sum, root -1)";
    sc_result_t r = odd ? SC_SUCCESS : sc_barrier(comm);
    if (r != SC_SUCCESS) return r;
    return sc_allreduce(buf, buf, N, SC_FLOAT32, SC_SUM, comm);
  }
  if (!strcmp(s, "sparse")) {
    *w1 = "sparse gtopk allreduce #1 (k 8 of dense_len 1000";
    *w2 = "sparse gtopk allreduce #1 (k 9 of dense_len 1000";
    uint32_t idx[9], oidx[9];
    float val[9], oval[9];
    for (int i = 0; i < 9; i++) {
      idx[i] = (uint32_t)(10 * i);
      val[i] = 1.0f;
    }
    size_t k = odd ? 9 : 8, onnz = 0;
    return sc_sparse_allreduce(idx, val, k, N, k, SC_FLOAT32, SC_SPARSE_GTOPK, oidx, oval, &onnz,
                               comm);
  }
  fprintf(stderr, "unknown scenario %s\n", s);
  exit(2);
}

int main(int argc, char **argv) {
  const char *scenario = argc > 1 ? argv[1] : "count";
  int report = argc > 2 && !strcmp(argv[2], "report");
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &nranks);
  char host[256] = "?";
  gethostname(host, sizeof(host));
  host[63] = '\0'; /* the library keeps 63 characters */
  /* #0: a matched call first, so the mismatch is not the first operation. */
  if (!check_allreduce(comm, NULL)) return 1;
  if (!strcmp(scenario, "match")) {
    int ok = check_match(comm);
    if (ok) printf("rank %d: matched operations correct\n", rank);
    sc_comm_destroy(comm);
    return ok ? 0 : 1;
  }
  const char *w1 = "", *w2 = "";
  double t0 = now_s();
  sc_result_t r = run_scenario(scenario, comm, &w1, &w2);
  double dt = now_s() - t0;
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", r == SC_SUCCESS ? "" : sc_last_error());
  if (report) {
    printf("rank %d: %s in %.3f s: %s\n", rank, sc_strerror(r), dt, msg);
    sc_result_t async = SC_SUCCESS;
    sc_comm_get_async_error(comm, &async);
    printf("rank %d async: %s\n", rank, sc_strerror(async));
    fflush(stdout);
    /* Stay until every peer has its result (every mark is in MR_REPORT_DIR),
     * or without the directory until every peer has hit its own timeout, so
     * that what the peers report is the mismatch's doing and not this
     * process's exit. Not destroyed: destroy would wait for queued work. */
    const char *tmo = getenv("SC_TIMEOUT_MS");
    double linger = (tmo ? atof(tmo) / 1000.0 : 300.0) + 1.0;
    const char *dir = getenv("MR_REPORT_DIR");
    if (dir) {
      char path[4096];
      report_mark_path(dir, rank, path, sizeof(path));
      FILE *f = fopen(path, "w");
      if (f) fclose(f);
    }
    while (now_s() - t0 < linger && !(dir && all_reported(dir, nranks))) usleep(20000);
    return 0;
  }
  if (r != SC_ERR_MISMATCH) {
    FAIL("got %s, want SC_ERR_MISMATCH: %s", sc_strerror(r), msg);
  } else {
    char me[64], other[64];
    snprintf(me, sizeof(me), "rank %d of %d (%s)", rank, nranks, host);
    snprintf(other, sizeof(other), "does not match rank %d (%s)", rank == 1 ? 0 : 1, host);
    need(msg, me);
    need(msg, other);
    need(msg, w1);
    need(msg, w2);
    need(msg, rank == 1 ? "this rank is a cause" : "this rank is a victim");
    if (dt > 5.0) FAIL("took %.3f s (bound 5 s)", dt);
    sc_result_t async = SC_SUCCESS;
    sc_comm_get_async_error(comm, &async);
    if (async != SC_ERR_MISMATCH) FAIL("async error %s", sc_strerror(async));
    double t1 = now_s();
    sc_result_t again = sc_barrier(comm);
    if (again != SC_ERR_MISMATCH || now_s() - t1 > 1.0)
      FAIL("call after the mismatch: %s after %.2f s", sc_strerror(again), now_s() - t1);
  }
  printf("rank %d: %s in %.3f s: %s\n", rank, failures ? "FAIL" : "mismatch", dt, msg);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}
