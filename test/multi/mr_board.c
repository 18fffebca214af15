/* SPDX-License-Identifier: BSD-3-Clause */
/* The board (lib/core/board.c): the smallest collectives where every rank is on
 * this host, checked where the board's own logic could go wrong. Run under
 * sc-run, every rank with the same mode:
 *   data      every collective, dtype and op at counts 0, 1, 7 and the last
 *             and first counts on either side of SC_BOARD_BYTES (the second
 *             runs as a schedule), in place and out, against references
 *   stress    thousands of back-to-back all-reduces, broadcasts and
 *             all-gathers whose inputs change every call: a slot read after
 *             its owner reused it gives a wrong element
 *   mismatch  rank 1 asks for one more element than the others: every rank
 *             fails with SC_ERR_MISMATCH naming both calls, without
 *             SC_CHECK_MISMATCH
 *   death     the last rank exits instead of posting: the others fail with
 *             SC_ERR_REMOTE naming it, in well under SC_TIMEOUT_MS
 *   late      rank 1 posts 2 s late with SC_TIMEOUT_MS=500: rank 0 fails
 *             with SC_ERR_TIMEOUT naming rank 1
 *   abort     rank 1 posts 2 s late and another thread of rank 0 aborts its
 *             communicator after 0.2 s: rank 0's call ends with
 *             SC_ERR_ABORTED at once
 * SC_BOARD_BYTES must be 1024 (the default) for data's boundary counts. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/multi/mr_common.h"

#define BOARD_BYTES 1024
#define MAXN        (BOARD_BYTES + 64)

static sc_comm_t *comm;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void check_elems(const char *what, const void *buf, size_t n, sc_dtype_t dt,
                        double (*want)(size_t i, const void *ctx), const void *ctx) {
  int shown = 0;
  for (size_t i = 0; i < n; i++) {
    double got = mr_get(buf, i, dt), exp = want(i, ctx);
    if (got != exp && shown++ < 3) mr_fail("%s: element %zu is %g, expected %g", what, i, got, exp);
  }
}

typedef struct {
  sc_dtype_t dt;
  sc_redop_t op;
  size_t base, n;
  int root;
} ref_t;

static double want_reduced(size_t i, const void *p) {
  const ref_t *c = p;
  return mr_expected(c->base + i, c->dt, c->op, mr_nranks);
}
static double want_root_input(size_t i, const void *p) {
  const ref_t *c = p;
  return mr_input(c->root, i, c->dt, SC_SUM, mr_nranks);
}
static double want_gathered(size_t i, const void *p) {
  const ref_t *c = p;
  return mr_input((int)(i / c->n), i % c->n, c->dt, SC_SUM, mr_nranks);
}

static void one_size(size_t n, sc_dtype_t dt, int inplace) {
  static unsigned char s[MAXN * 8 * 8], r[MAXN * 8 * 8];
  const int P = mr_nranks, me = mr_rank;
  char what[160];
  for (int op = SC_SUM; op <= SC_AVG; op++) {
    if (op == SC_AVG && dt != SC_FLOAT32 && dt != SC_FLOAT64) continue;
    ref_t c = {dt, (sc_redop_t)op, 0, n, 0};
    mr_fill(s, n, me, 0, dt, (sc_redop_t)op);
    void *out = inplace ? (void *)s : (void *)r;
    MR_OK(sc_allreduce(s, out, n, dt, (sc_redop_t)op, comm));
    snprintf(what, sizeof(what), "allreduce n=%zu %s %s%s", n, mr_dtype_names[dt], mr_op_names[op],
             inplace ? " in place" : "");
    check_elems(what, out, n, dt, want_reduced, &c);
    /* reduce-scatter: rank q's block is elements [q n, (q + 1) n) */
    if ((size_t)P * n * sc_dtype_size(dt) <= 2 * BOARD_BYTES) {
      mr_fill(s, (size_t)P * n, me, 0, dt, (sc_redop_t)op);
      out = inplace ? (void *)(s + (size_t)me * n * sc_dtype_size(dt)) : (void *)r;
      MR_OK(sc_reduce_scatter(s, out, n, dt, (sc_redop_t)op, comm));
      c.base = (size_t)me * n;
      snprintf(what, sizeof(what), "reduce_scatter n=%zu %s %s%s", n, mr_dtype_names[dt],
               mr_op_names[op], inplace ? " in place" : "");
      check_elems(what, out, n, dt, want_reduced, &c);
      c.base = 0;
    }
    int root = (int)(n % (size_t)P);
    mr_fill(s, n, me, 0, dt, (sc_redop_t)op);
    memset(r, 0, n * 8);
    MR_OK(sc_reduce(s, inplace && me == root ? (void *)s : (void *)r, n, dt, (sc_redop_t)op, root,
                    comm));
    if (me == root) {
      snprintf(what, sizeof(what), "reduce n=%zu %s %s root %d", n, mr_dtype_names[dt],
               mr_op_names[op], root);
      check_elems(what, inplace ? (void *)s : (void *)r, n, dt, want_reduced, &c);
    }
  }
  for (int root = 0; root < P; root++) {
    ref_t c = {dt, SC_SUM, 0, n, root};
    mr_fill(s, n, me, 0, dt, SC_SUM);
    if (!inplace) memset(r, 0xa5, n * 8);
    void *out = inplace ? (void *)s : (void *)r;
    MR_OK(sc_broadcast(s, out, n, dt, root, comm));
    snprintf(what, sizeof(what), "broadcast n=%zu %s root %d%s", n, mr_dtype_names[dt], root,
             inplace ? " in place" : "");
    check_elems(what, out, n, dt, want_root_input, &c);
  }
  ref_t c = {dt, SC_SUM, 0, n, 0};
  size_t es = sc_dtype_size(dt);
  void *in = inplace ? (void *)(r + (size_t)me * n * es) : (void *)s;
  mr_fill(in, n, me, 0, dt, SC_SUM);
  MR_OK(sc_allgather(in, r, n, dt, comm));
  snprintf(what, sizeof(what), "allgather n=%zu %s%s", n, mr_dtype_names[dt],
           inplace ? " in place" : "");
  check_elems(what, r, (size_t)P * n, dt, want_gathered, &c);
}

static void test_data(void) {
  for (int dt = 0; dt <= SC_FLOAT64; dt++) {
    size_t es = sc_dtype_size((sc_dtype_t)dt);
    size_t counts[] = {0, 1, 7, BOARD_BYTES / es, BOARD_BYTES / es + 1};
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
      for (int inplace = 0; inplace <= 1; inplace++) one_size(counts[ci], (sc_dtype_t)dt, inplace);
  }
  MR_OK(sc_barrier(comm));
}

/* Inputs that differ at every call: element i of rank q at call t. */
static int32_t val(int q, int t, size_t i) {
  return (int32_t)((q + 1) * 1000 + t * 7 + (int)i) % 100003;
}

static void test_stress(void) {
  const int P = mr_nranks, me = mr_rank, calls = 3000;
  int32_t s[64], r[64 * 8];
  for (int t = 0; t < calls && !mr_failures; t++) {
    size_t n = 1 + (size_t)t % 16;
    for (size_t i = 0; i < n; i++) s[i] = val(me, t, i);
    switch (t % 3) {
    case 0:
      MR_OK(sc_allreduce(s, r, n, SC_INT32, SC_SUM, comm));
      for (size_t i = 0; i < n; i++) {
        int64_t want = 0;
        for (int q = 0; q < P; q++) want += val(q, t, i);
        if (r[i] != (int32_t)want)
          mr_fail("call %d: allreduce element %zu is %d, expected %lld", t, i, r[i],
                  (long long)want);
      }
      break;
    case 1: {
      int root = t % P;
      MR_OK(sc_broadcast(s, r, n, SC_INT32, root, comm));
      for (size_t i = 0; i < n; i++)
        if (r[i] != val(root, t, i))
          mr_fail("call %d: broadcast element %zu is %d, expected %d", t, i, r[i], val(root, t, i));
      break;
    }
    default:
      MR_OK(sc_allgather(s, r, n, SC_INT32, comm));
      for (int q = 0; q < P; q++)
        for (size_t i = 0; i < n; i++)
          if (r[(size_t)q * n + i] != val(q, t, i))
            mr_fail("call %d: allgather element %zu of rank %d is %d, expected %d", t, i, q,
                    r[(size_t)q * n + i], val(q, t, i));
    }
    if (t % 500 == 0) MR_OK(sc_barrier(comm));
  }
}

/* Fails unless call returned want with a message holding each of the texts. */
static void expect_error(const char *what, sc_result_t got, sc_result_t want, const char *text1,
                         const char *text2) {
  const char *msg = sc_last_error();
  mr_checks++;
  if (got != want)
    mr_fail("%s: got %s, want %s: %s", what, sc_strerror(got), sc_strerror(want), msg);
  else if ((text1 && !strstr(msg, text1)) || (text2 && !strstr(msg, text2)))
    mr_fail("%s: message lacks \"%s\" / \"%s\": %s", what, text1 ? text1 : "", text2 ? text2 : "",
            msg);
  else
    printf("rank %d: %s: %s\n", mr_rank, what, msg);
}

static void *abort_later(void *arg) {
  (void)arg;
  struct timespec ts = {0, 200 * 1000 * 1000L};
  nanosleep(&ts, NULL);
  sc_comm_abort(comm);
  return NULL;
}

/* The failure modes: each makes one call fail and checks how. A call that
 * works first warms every rank up, so that the failing one is the board's. */
static float x[4] = {1, 2, 3, 4}, y[4];

static void test_mismatch(void) {
  MR_OK(sc_allreduce(x, y, 2, SC_FLOAT32, SC_SUM, comm));
  sc_result_t r = sc_allreduce(x, y, mr_rank == 1 ? 3 : 2, SC_FLOAT32, SC_SUM, comm);
  /* Every rank reads every post, so each sees a call unlike its own. */
  expect_error("count 3 on rank 1, 2 elsewhere", r, SC_ERR_MISMATCH,
               mr_rank == 1 ? "where rank 1 called allreduce (count 3" : "rank 1 (",
               "called allreduce (count 3");
}

static void test_death(void) {
  MR_OK(sc_allreduce(x, y, 4, SC_FLOAT32, SC_SUM, comm));
  if (mr_rank == mr_nranks - 1) _exit(0);
  double t0 = now_s();
  sc_result_t r = sc_allreduce(x, y, 4, SC_FLOAT32, SC_SUM, comm);
  char name[64];
  snprintf(name, sizeof(name), "rank %d", mr_nranks - 1);
  expect_error("the last rank exited", r, SC_ERR_REMOTE, name, NULL);
  if (now_s() - t0 > 20) mr_fail("the failure took %.1f s", now_s() - t0);
}

/* Rank 1 calls 2 s late; rank 0 gets abort_late's verdict on its call. */
static void test_late(int abort_it) {
  MR_OK(sc_allreduce(x, y, 4, SC_FLOAT32, SC_SUM, comm));
  if (mr_rank == 1) sleep(2);
  pthread_t t;
  if (abort_it && mr_rank == 0 && pthread_create(&t, NULL, abort_later, NULL) != 0)
    mr_fail("thread");
  double t0 = now_s();
  sc_result_t r = sc_allreduce(x, y, 4, SC_FLOAT32, SC_SUM, comm);
  double dt = now_s() - t0;
  if (mr_rank != 0) return;
  if (!abort_it) {
    expect_error("rank 1 posts 2 s late", r, SC_ERR_TIMEOUT, "rank 1 (", "SC_TIMEOUT_MS");
    return;
  }
  pthread_join(t, NULL);
  expect_error("aborted while rank 1 is late", r, SC_ERR_ABORTED, "abort", NULL);
  if (dt > 1.5) mr_fail("the abort took %.2f s to end the call", dt);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "data";
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  /* How each mode leaves the communicator before destroying it. A mismatch
   * is not followed by an abort: the liveness watch would tell a rank that
   * has not yet posted its call that this one aborted, and that rank would
   * report the abort instead of the mismatch (seen once in make check). A
   * destroy tells nobody anything, so a late rank reads the same posts and
   * reaches the same verdict. */
  enum { END_BARRIER, END_ABORT, END_DESTROY } end = END_ABORT;
  if (!strcmp(mode, "data")) {
    test_data();
    end = END_BARRIER;
  } else if (!strcmp(mode, "stress")) {
    test_stress();
    end = END_BARRIER;
  } else if (!strcmp(mode, "mismatch")) {
    test_mismatch();
    end = END_DESTROY;
  } else if (!strcmp(mode, "death")) {
    test_death();
  } else if (!strcmp(mode, "late") || !strcmp(mode, "abort")) {
    test_late(!strcmp(mode, "abort"));
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  if (end == END_ABORT)
    sc_comm_abort(comm); /* a failed communicator: its calls fail at once */
  else if (end == END_BARRIER)
    MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
