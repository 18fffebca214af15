/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch (lib/control/watch.c) under sc-run, public API only.
 * Usage: fail_watch MODE VICTIM BOUND_S [PIDFILE]
 *   kill  : VICTIM SIGKILLs itself while the others sit in an all-reduce
 *           (the lowest survivor through iallreduce + sc_wait, so the progress
 *           thread path is covered; with SC_ALGO=ring most survivors never
 *           exchange data with the victim). Every survivor must return
 *           SC_ERR_REMOTE naming "rank VICTIM" within BOUND_S seconds.
 *   idle  : as kill, but the survivors call nothing: sc_comm_get_async_error
 *           must turn SC_ERR_REMOTE within BOUND_S, and the next call must
 *           fail at once naming the victim.
 *   stop  : VICTIM writes its pid to PIDFILE and SIGSTOPs itself; every other
 *           rank must fail with SC_ERR_TIMEOUT within BOUND_S (the message
 *           names the stopped rank or the rank a timed-out call waited on); the lowest
 *           survivor then SIGCONTs it, and the resumed victim's next call must
 *           fail too (within BOUND_S).
 *   stopname: as stop, but every survivor's message must name the stopped
 *           rank (with the tree, rank 0 learns of a deeper rank's quiet from
 *           its parent).
 * The victim acts 200 ms after the warm-up, or FAIL_WATCH_DELAY_MS.
 *   clean : no victim. A split communicator, then staggered destroys (the
 *           last rank leaves the split first, rank 0 leaves the parent first):
 *           nobody may be told of a death, and the process's descriptor and
 *           thread counts must return to what they were before init.
 *   abort : every rank aborts; descriptor and thread counts return too.
 * Each rank prints "rank R: OK ..." or "rank R: FAIL ..." (the script counts). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sparsecoll.h"
#include "test/failure/fail_common.h"

static int g_rank = -1;
static int g_fail;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    printf("rank %d: FAIL ", g_rank);                                                              \
    printf(__VA_ARGS__);                                                                           \
    printf("\n");                                                                                  \
    fflush(stdout);                                                                                \
    g_fail = 1;                                                                                    \
  } while (0)

/* Expected: the failure code, the message naming the victim. */
static void check_failure(const char *what, sc_result_t r, double dt, sc_result_t want, int victim,
                          double bound, sc_comm_t *comm) {
  char msg[1024], key[32];
  snprintf(msg, sizeof(msg), "%s", sc_last_error());
  snprintf(key, sizeof(key), "rank %d ", victim);
  if (r != want)
    FAIL("%s returned %s, want %s: %s", what, sc_strerror(r), sc_strerror(want), msg);
  else if (victim >= 0 && !strstr(msg, key))
    FAIL("%s: message does not name '%s': %s", what, key, msg);
  else if (dt > bound)
    FAIL("%s failed after %.3f s, bound %.1f s: %s", what, dt, bound, msg);
  sc_result_t async = SC_SUCCESS;
  sc_comm_get_async_error(comm, &async);
  if (async != want) FAIL("async error %s, want %s", sc_strerror(async), sc_strerror(want));
  double t1 = now_s();
  sc_result_t again = sc_barrier(comm);
  if (again != want || now_s() - t1 > 1.0)
    FAIL("call after the failure: %s after %.2f s", sc_strerror(again), now_s() - t1);
  if (!g_fail) {
    printf("rank %d: OK %s failed in %.3f s with %s: %s\n", g_rank, what, dt, sc_strerror(r), msg);
    fflush(stdout);
  }
}

static int run_victim(const char *mode, int victim, double bound, const char *pidfile, int n) {
  int stop = !strncmp(mode, "stop", 4), named = strcmp(mode, "stop") != 0;
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    FAIL("init: %s", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &g_rank);
  size_t count = 1 << 16;
  float *buf = calloc(count, sizeof(float));
  if (sc_allreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm) != SC_SUCCESS) {
    FAIL("warm-up: %s", sc_last_error());
    return 1;
  }
  int first = victim == 0 ? 1 : 0; /* lowest survivor */
  if (g_rank == victim) {
    /* The others are inside their call (or idle) by then. FAIL_WATCH_DELAY_MS
     * longer: they wait on this rank while it still sends heartbeats, so
     * their calls time out before its silence does. */
    const char *delay = getenv("FAIL_WATCH_DELAY_MS");
    sleep_ms(delay && *delay ? atoi(delay) : 200);
    if (stop) {
      FILE *f = fopen(pidfile, "w");
      if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
      }
      raise(SIGSTOP);
      /* Resumed by the lowest survivor: everybody gave up on this rank. */
      double t0 = now_s();
      sc_result_t r = sc_allreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm);
      double dt = now_s() - t0;
      if (r == SC_SUCCESS || dt > bound)
        FAIL("resumed victim: %s after %.3f s: %s", sc_strerror(r), dt, sc_last_error());
      else
        printf("rank %d: OK resumed victim failed in %.3f s with %s: %s\n", g_rank, dt,
               sc_strerror(r), sc_last_error());
      sc_comm_destroy(comm);
      free(buf);
      return g_fail;
    }
    raise(SIGKILL);
  }
  double t0 = now_s();
  sc_result_t want = stop ? SC_ERR_TIMEOUT : SC_ERR_REMOTE;
  if (!strcmp(mode, "idle")) {
    sc_result_t async = SC_SUCCESS;
    while (async == SC_SUCCESS && now_s() - t0 < bound + 5) {
      sleep_ms(10);
      sc_comm_get_async_error(comm, &async);
    }
    double dt = now_s() - t0;
    if (async != want || dt > bound)
      FAIL("idle rank: async error %s after %.3f s", sc_strerror(async), dt);
    else
      printf("rank %d: idle, learned of the failure %.3f s after the warm-up\n", g_rank, dt);
    double t1 = now_s();
    sc_result_t r = sc_allreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm);
    check_failure("call after the notice", r, now_s() - t1, want, victim, 1.0, comm);
  } else {
    sc_result_t r;
    if (g_rank == first) {
      sc_request_t *req = NULL;
      r = sc_iallreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm, &req);
      if (r == SC_SUCCESS) r = sc_wait(&req);
    } else {
      r = sc_allreduce(buf, buf, count, SC_FLOAT32, SC_SUM, comm);
    }
    /* Stopped: a rank's own timeout may name the rank it waited on. */
    check_failure(g_rank == first ? "sc_wait(iallreduce)" : "sc_allreduce", r, now_s() - t0, want,
                  named ? victim : -1, bound, comm);
  }
  if (stop && g_rank == first) {
    sleep_ms(500); /* the other survivors fail too before the victim runs again */
    FILE *f = fopen(pidfile, "r");
    int pid = 0;
    if (!f || fscanf(f, "%d", &pid) != 1 || pid <= 0)
      FAIL("no victim pid in %s", pidfile);
    else
      kill(pid, SIGCONT);
    if (f) fclose(f);
  }
  (void)n;
  /* A survivor that leaves at once closes its connections, and a slower
   * survivor could report that close instead: this test is about the watch. */
  sleep_ms(1000);
  sc_comm_destroy(comm);
  free(buf);
  return g_fail;
}

static void expect_quiet(sc_comm_t *comm, const char *which) {
  sc_result_t async = SC_ERR_INTERNAL;
  sc_comm_get_async_error(comm, &async);
  if (async != SC_SUCCESS)
    FAIL("%s: a clean departure was reported: %s: %s", which, sc_strerror(async), sc_last_error());
}

static void check_allreduce(sc_comm_t *comm, int n, const char *which) {
  float v[64];
  for (int i = 0; i < 64; i++) v[i] = (float)(g_rank + i);
  sc_result_t r = sc_allreduce(v, v, 64, SC_FLOAT32, SC_SUM, comm);
  int bad = 0;
  for (int i = 0; i < 64 && r == SC_SUCCESS; i++)
    if (v[i] != (float)(n * (n - 1) / 2 + n * i)) bad = 1;
  if (r != SC_SUCCESS || bad) FAIL("%s allreduce: %s %s", which, sc_strerror(r), sc_last_error());
}

/* Threads end a little after destroy returns (the detached bootstrap root). */
static void check_counts(int fds0, int tasks0, const char *what) {
  int fds = -1, tasks = -1;
  for (int i = 0; i < 300; i++) {
    fail_res_t now;
    fail_res_count(&now);
    fds = now.fds;
    tasks = now.threads;
    if (fds == fds0 && tasks == tasks0) break;
    sleep_ms(10);
  }
  if (fds != fds0 || tasks != tasks0)
    FAIL("%s leaked: %d descriptors and %d threads, %d and %d before init", what, fds, tasks, fds0,
         tasks0);
}

static void *noop(void *arg) {
  return arg;
}

static int run_clean(int do_abort) {
  /* Runtimes start helper threads at the first pthread_create (TSan does):
   * let that happen before the baseline. */
  pthread_t t;
  if (pthread_create(&t, NULL, noop, NULL) == 0) pthread_join(t, NULL);
  sleep_ms(50);
  fail_res_t base;
  fail_res_count(&base);
  int fds0 = base.fds, tasks0 = base.threads;
  sc_comm_t *a, *b = NULL;
  if (sc_comm_init_env(&a) != SC_SUCCESS) {
    FAIL("init: %s", sc_last_error());
    return 1;
  }
  int n;
  sc_comm_rank(a, &g_rank);
  sc_comm_size(a, &n);
  check_allreduce(a, n, "parent");
  if (do_abort) {
    sc_comm_abort(a);
    sc_comm_destroy(a);
    check_counts(fds0, tasks0, "init + abort + destroy");
    if (!g_fail) printf("rank %d: OK abort left nothing behind\n", g_rank);
    return g_fail;
  }
  if (sc_comm_split(a, 0, g_rank, &b) != SC_SUCCESS) {
    FAIL("split: %s", sc_last_error());
    return 1;
  }
  check_allreduce(b, n, "split");
  /* The last rank leaves the split communicator first, rank 0 stays. */
  if (g_rank != n - 1) {
    sleep_ms(400);
    expect_quiet(b, "split (rank n-1 left first)");
  }
  sc_comm_destroy(b);
  /* Rank 0, the hub, leaves the parent first. */
  if (g_rank != 0) {
    sleep_ms(400);
    expect_quiet(a, "parent (rank 0 left first)");
  }
  sc_comm_destroy(a);
  check_counts(fds0, tasks0, "init + split + destroy");
  if (!g_fail) printf("rank %d: OK clean destroys reported no death, nothing leaked\n", g_rank);
  return g_fail;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argc > 1 ? argv[1] : "kill";
  int victim = argc > 2 ? atoi(argv[2]) : 1;
  double bound = argc > 3 ? atof(argv[3]) : 5.0;
  const char *pidfile = argc > 4 ? argv[4] : "/tmp/fail_watch.pid";
  if (!strcmp(mode, "clean")) return run_clean(0);
  if (!strcmp(mode, "abort")) return run_clean(1);
  return run_victim(mode, victim, bound, pidfile, 0);
}
