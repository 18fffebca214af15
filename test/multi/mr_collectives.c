/* SPDX-License-Identifier: BSD-3-Clause */
/* Every dense collective, dtype and op, in place and out of place, at counts
 * 0, 1, nranks-1, nranks+1, a prime and a multi-MiB one, against references
 * each rank computes independently; then non-blocking requests, two
 * communicators at once, sc_comm_split and argument errors. Run under sc-run.
 * --allreduce-only: the all-reduce alone (for a forced SC_ALGO); --rs-ag-only:
 * the reduce-scatter and all-gather alone (for a forced SC_RS_ALGO / SC_AG_ALGO). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "test/multi/mr_common.h"

#define GUARD 64 /* elements past the end that must stay untouched */
/* A value no result can take (sums stay within [-64, 128] for 8 ranks) and
 * every dtype can hold. */
#define SENTINEL(dt) ((dt) == SC_UINT8 || (dt) == SC_UINT32 || (dt) == SC_UINT64 ? 200.0 : -100.0)

static sc_comm_t *comm;
static size_t max_elems;
static unsigned char *sbuf, *rbuf;

static size_t esz(sc_dtype_t dt) {
  return sc_dtype_size(dt);
}

static void fill_const(void *buf, size_t n, sc_dtype_t dt, double v) {
  for (size_t i = 0; i < n; i++) mr_set(buf, i, dt, v);
}

/* Compare n elements of buf with want(i); report the first few mismatches. */
static void expect(const char *what, const void *buf, size_t n, sc_dtype_t dt,
                   double (*want)(size_t i, void *ctx), void *ctx) {
  int shown = 0;
  for (size_t i = 0; i < n; i++) {
    double got = mr_get(buf, i, dt), exp = want(i, ctx);
    if (got != exp && shown++ < 3) mr_fail("%s: element %zu is %g, expected %g", what, i, got, exp);
  }
}

static void expect_guard(const char *what, const void *buf, size_t from, sc_dtype_t dt) {
  for (size_t i = from; i < from + GUARD; i++)
    if (mr_get(buf, i, dt) != SENTINEL(dt)) {
      mr_fail("%s: wrote past its output (element %zu)", what, i);
      return;
    }
}

typedef struct ctx {
  sc_dtype_t dt;
  sc_redop_t op;
  size_t base;
  int root;
  size_t block;
} ctx_t;

static double want_reduced(size_t i, void *p) {
  ctx_t *c = p;
  return mr_expected(c->base + i, c->dt, c->op, mr_nranks);
}

static double want_root_input(size_t i, void *p) {
  ctx_t *c = p;
  return mr_input(c->root, i, c->dt, SC_SUM, mr_nranks);
}

static double want_gathered(size_t j, void *p) {
  ctx_t *c = p;
  return mr_input((int)(j / c->block), j, c->dt, SC_SUM, mr_nranks);
}

static double want_sentinel(size_t i, void *p) {
  (void)i;
  return SENTINEL(((ctx_t *)p)->dt);
}

static void test_allreduce(size_t n, sc_dtype_t dt, sc_redop_t op, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "allreduce n=%zu %s %s %s", n, mr_dtype_names[dt], mr_op_names[op],
           inplace ? "in-place" : "out-of-place");
  fill_const(rbuf, n + GUARD, dt, SENTINEL(dt));
  void *in = inplace ? (void *)rbuf : (void *)sbuf;
  mr_fill(in, n, mr_rank, 0, dt, op);
  MR_OK(sc_allreduce(in, rbuf, n, dt, op, comm));
  ctx_t c = {.dt = dt, .op = op};
  expect(what, rbuf, n, dt, want_reduced, &c);
  expect_guard(what, rbuf, n, dt);
}

/* inplace: 0 out of place; 1 recvbuf == sendbuf (result at offset 0);
 * 2 NCCL's recvbuf == sendbuf + rank*recvcount. */
static void test_reduce_scatter(size_t rc, sc_dtype_t dt, sc_redop_t op, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "reduce_scatter rc=%zu %s %s inplace=%d", rc, mr_dtype_names[dt],
           mr_op_names[op], inplace);
  size_t total = rc * (size_t)mr_nranks;
  fill_const(sbuf, total + GUARD, dt, SENTINEL(dt));
  fill_const(rbuf, rc + GUARD, dt, SENTINEL(dt));
  mr_fill(sbuf, total, mr_rank, 0, dt, op);
  void *out = inplace == 0   ? (void *)rbuf
              : inplace == 1 ? (void *)sbuf
                             : (void *)(sbuf + (size_t)mr_rank * rc * esz(dt));
  MR_OK(sc_reduce_scatter(sbuf, out, rc, dt, op, comm));
  ctx_t c = {.dt = dt, .op = op, .base = (size_t)mr_rank * rc};
  expect(what, out, rc, dt, want_reduced, &c);
  if (inplace == 0)
    expect_guard(what, rbuf, rc, dt);
  else
    expect_guard(what, sbuf, total, dt);
}

/* inplace: 0 out of place; 1 NCCL's sendbuf == recvbuf + rank*sendcount;
 * 2 sendbuf == recvbuf (this rank's block at offset 0 on entry). */
static void test_allgather(size_t sc, sc_dtype_t dt, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "allgather sc=%zu %s inplace=%d", sc, mr_dtype_names[dt], inplace);
  size_t total = sc * (size_t)mr_nranks;
  fill_const(rbuf, total + GUARD, dt, SENTINEL(dt));
  size_t mybase = (size_t)mr_rank * sc;
  void *in;
  if (inplace == 1)
    in = rbuf + mybase * esz(dt);
  else if (inplace == 2)
    in = rbuf;
  else
    in = sbuf;
  for (size_t i = 0; i < sc; i++)
    mr_set(in, i, dt, mr_input(mr_rank, mybase + i, dt, SC_SUM, mr_nranks));
  MR_OK(sc_allgather(in, rbuf, sc, dt, comm));
  ctx_t c = {.dt = dt, .block = sc ? sc : 1};
  expect(what, rbuf, total, dt, want_gathered, &c);
  expect_guard(what, rbuf, total, dt);
}

static void test_broadcast(size_t n, sc_dtype_t dt, int root, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "broadcast n=%zu %s root=%d %s", n, mr_dtype_names[dt], root,
           inplace ? "in-place" : "out-of-place");
  fill_const(rbuf, n + GUARD, dt, SENTINEL(dt));
  void *in = inplace ? (void *)rbuf : (void *)sbuf;
  if (mr_rank == root) mr_fill(in, n, root, 0, dt, SC_SUM);
  MR_OK(sc_broadcast(mr_rank == root ? in : NULL, rbuf, n, dt, root, comm));
  ctx_t c = {.dt = dt, .root = root};
  expect(what, rbuf, n, dt, want_root_input, &c);
  expect_guard(what, rbuf, n, dt);
}

static void test_reduce(size_t n, sc_dtype_t dt, sc_redop_t op, int root, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "reduce n=%zu %s %s root=%d %s", n, mr_dtype_names[dt],
           mr_op_names[op], root, inplace ? "in-place" : "out-of-place");
  fill_const(rbuf, n + GUARD, dt, SENTINEL(dt));
  void *in = inplace ? (void *)rbuf : (void *)sbuf;
  mr_fill(in, n, mr_rank, 0, dt, op);
  MR_OK(sc_reduce(in, rbuf, n, dt, op, root, comm));
  ctx_t c = {.dt = dt, .op = op};
  if (mr_rank == root)
    expect(what, rbuf, n, dt, want_reduced, &c);
  else if (!inplace)
    expect(what, rbuf, n, dt, want_sentinel, &c); /* recvbuf unused off root */
  expect_guard(what, rbuf, n, dt);
}

/* Every dtype, op, placement and count of the all-reduce alone (runs once
 * per forced algorithm). */
static void test_allreduce_only(void) {
  size_t p = (size_t)mr_nranks;
  size_t counts[] = {0, 1, p > 1 ? p - 1 : 2, p + 1, 1009, 65537};
  for (int dt = SC_INT8; dt <= SC_FLOAT64; dt++)
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
      for (int op = SC_SUM; op <= SC_AVG; op++)
        for (int inplace = 0; inplace < 2; inplace++)
          test_allreduce(counts[ci], (sc_dtype_t)dt, (sc_redop_t)op, inplace);
  size_t big = (size_t)(3u << 20) / 4 + 7;
  test_allreduce(big, SC_FLOAT32, SC_SUM, 0);
  test_allreduce(big, SC_FLOAT16, SC_AVG, 1);
  test_allreduce(big / 2, SC_INT64, SC_MAX, 0);
}

/* What sc_reduce_scatter_algo / sc_allgather_algo report against the variable that forces
 * them: the forced name (any case); under hier, hier exactly where there is a hierarchy
 * (several hosts, fewer hosts than ranks), else a flat one; under auto, one of the
 * collective's names. */
static void check_algo_name(const char *what, const char *var, const char *got,
                            const char *const *names) {
  const char *want = getenv(var);
  int nhosts = 0, known = 0;
  MR_OK(sc_comm_local(comm, NULL, NULL, NULL, &nhosts));
  const int hierarchy = nhosts > 1 && nhosts < mr_nranks;
  for (int i = 0; names[i]; i++) known |= got && !strcmp(got, names[i]);
  mr_checks++;
  if (!known) {
    mr_fail("%s reports %s, none of its algorithms", what, got ? got : "(null)");
  } else if (want && !strcasecmp(want, "hier")) {
    if ((strcmp(got, "hier") == 0) != hierarchy)
      mr_fail("%s reports %s under %s=hier on %d hosts", what, got, var, nhosts);
  } else if (want && strcasecmp(want, "auto") && strcasecmp(want, got)) {
    mr_fail("%s reports %s under %s=%s", what, got, var, want);
  }
}

/* Every dtype, op, placement and count of the reduce-scatter and the
 * all-gather alone (runs once per forced SC_RS_ALGO / SC_AG_ALGO). */
static void test_rs_ag_only(void) {
  static const char *const rs_names[] = {"ring", "recursive-halving", "hier", NULL};
  static const char *const ag_names[] = {"ring", "recursive-doubling", "hier", NULL};
  for (size_t n = 1; n <= ((size_t)1 << 20); n *= 32) {
    const char *rs = NULL, *ag = NULL;
    MR_OK(sc_reduce_scatter_algo(comm, n, SC_FLOAT32, &rs));
    MR_OK(sc_allgather_algo(comm, n, SC_FLOAT32, &ag));
    check_algo_name("sc_reduce_scatter_algo", "SC_RS_ALGO", rs, rs_names);
    check_algo_name("sc_allgather_algo", "SC_AG_ALGO", ag, ag_names);
  }
  size_t p = (size_t)mr_nranks;
  size_t counts[] = {0, 1, p > 1 ? p - 1 : 2, p + 1, 1009, 65537};
  for (int dt = SC_INT8; dt <= SC_FLOAT64; dt++)
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
      for (int inplace = 0; inplace < 3; inplace++) {
        test_allgather(counts[ci], (sc_dtype_t)dt, inplace);
        for (int op = SC_SUM; op <= SC_AVG; op++)
          test_reduce_scatter(counts[ci], (sc_dtype_t)dt, (sc_redop_t)op, inplace);
      }
  size_t big = ((size_t)3 << 20) / p + 7; /* 12 MiB of float32 in all: many slices */
  test_reduce_scatter(big, SC_FLOAT32, SC_SUM, 0);
  test_reduce_scatter(big, SC_FLOAT16, SC_AVG, 2);
  test_allgather(big, SC_FLOAT32, 1);
  test_allgather(big / 2, SC_INT64, 2);
}

static void test_all_dense(void) {
  size_t p = (size_t)mr_nranks;
  size_t counts[] = {0, 1, p > 1 ? p - 1 : 2, p + 1, 1009};
  int roots[] = {0, mr_nranks - 1, mr_nranks / 2};
  for (int dt = SC_INT8; dt <= SC_FLOAT64; dt++) {
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
      size_t n = counts[ci];
      for (int inplace = 0; inplace < 3; inplace++) {
        if (inplace < 2) {
          test_broadcast(n, (sc_dtype_t)dt, roots[(ci + (size_t)inplace) % 3], inplace);
        }
        test_allgather(n, (sc_dtype_t)dt, inplace);
        for (int op = SC_SUM; op <= SC_AVG; op++) {
          test_reduce_scatter(n, (sc_dtype_t)dt, (sc_redop_t)op, inplace);
          if (inplace < 2) {
            test_allreduce(n, (sc_dtype_t)dt, (sc_redop_t)op, inplace);
            test_reduce(n, (sc_dtype_t)dt, (sc_redop_t)op, roots[(ci + (size_t)op) % 3], inplace);
          }
        }
      }
    }
  }
  /* Every root at least once. */
  for (int root = 0; root < mr_nranks; root++) {
    test_broadcast(13, SC_INT32, root, root & 1);
    test_reduce(13, SC_FLOAT32, SC_SUM, root, root & 1);
  }
  /* Multi-MiB: several pipeline chunks per block. */
  size_t big = (size_t)(3u << 20) / 4 + 7;
  test_allreduce(big, SC_FLOAT32, SC_SUM, 0);
  test_allreduce(big, SC_FLOAT32, SC_SUM, 1);
  test_allreduce(big, SC_FLOAT16, SC_AVG, 1);
  test_allreduce(big / 2, SC_INT64, SC_MAX, 0);
  test_reduce_scatter(big / p + 3, SC_FLOAT32, SC_SUM, 0);
  test_allgather(big / p + 5, SC_FLOAT32, 1);
  test_broadcast(big, SC_FLOAT32, mr_nranks - 1, 0);
  test_reduce(big, SC_FLOAT32, SC_SUM, mr_nranks / 2, 1);
}

/* Several requests in flight, completed in a different order than posted. */
static void test_nonblocking(void) {
  enum { NREQ = 6 };
  size_t n = 10007;
  float *bufs[NREQ];
  sc_request_t *reqs[NREQ];
  for (int k = 0; k < NREQ; k++) {
    bufs[k] = malloc(n * mr_nranks * sizeof(float));
    for (size_t i = 0; i < n; i++) bufs[k][i] = (float)(mr_rank + k + (int)(i % 5));
  }
  for (int k = 0; k < NREQ; k++) {
    if (k % 3 == 2)
      MR_OK(sc_iallgather(bufs[k], bufs[k] + n, 0, SC_FLOAT32, comm, &reqs[k]));
    else
      MR_OK(sc_iallreduce(bufs[k], bufs[k], n, SC_FLOAT32, SC_SUM, comm, &reqs[k]));
  }
  int done = 0;
  sc_result_t tr = sc_test(&reqs[NREQ - 1], &done);
  if (tr != SC_SUCCESS && tr != SC_IN_PROGRESS) mr_fail("sc_test -> %s", sc_strerror(tr));
  if (done && reqs[NREQ - 1] != NULL) mr_fail("sc_test done but request not cleared");
  for (int k = NREQ - 1; k >= 0; k--)
    if (reqs[k]) MR_OK(sc_wait(&reqs[k]));
  for (int k = 0; k < NREQ; k++) {
    if (reqs[k] != NULL) mr_fail("sc_wait left request %d set", k);
    if (k % 3 == 2) continue;
    for (size_t i = 0; i < n; i++) {
      double want = 0;
      for (int r = 0; r < mr_nranks; r++) want += r + k + (int)(i % 5);
      if (bufs[k][i] != (float)want) {
        mr_fail("nonblocking allreduce %d element %zu: %g != %g", k, i, bufs[k][i], want);
        break;
      }
    }
  }
  for (int k = 0; k < NREQ; k++) free(bufs[k]);
}

/* A second communicator from a unique id made on rank 0 and shipped over the
 * first; ranks rotated; operations on both interleaved. */
static void test_two_comms(void) {
  sc_unique_id_t id;
  memset(&id, 0, sizeof(id));
  if (mr_rank == 0) MR_OK(sc_get_unique_id(&id));
  MR_OK(sc_broadcast(&id, &id, sizeof(id), SC_UINT8, 0, comm));
  sc_comm_t *c2 = NULL;
  int r2 = (mr_rank + 1) % mr_nranks;
  MR_OK(sc_comm_init_rank(&c2, mr_nranks, id, r2));
  if (!c2) return;
  int got = -1, size = -1;
  MR_OK(sc_comm_rank(c2, &got));
  MR_OK(sc_comm_size(c2, &size));
  if (got != r2 || size != mr_nranks) mr_fail("second comm rank/size %d/%d", got, size);
  int64_t a = mr_rank, b = r2 * 10;
  sc_request_t *ra, *rb;
  MR_OK(sc_iallreduce(&a, &a, 1, SC_INT64, SC_SUM, comm, &ra));
  MR_OK(sc_iallreduce(&b, &b, 1, SC_INT64, SC_SUM, c2, &rb));
  MR_OK(sc_wait(&rb));
  MR_OK(sc_wait(&ra));
  int64_t want = (int64_t)mr_nranks * (mr_nranks - 1) / 2;
  if (a != want || b != want * 10) mr_fail("two comms: %lld %lld", (long long)a, (long long)b);
  /* The rotated ranks must order an all-gather by the new ranks. */
  int32_t mine = r2, all[64];
  MR_OK(sc_allgather(&mine, all, 1, SC_INT32, c2));
  for (int i = 0; i < mr_nranks && i < 64; i++)
    if (all[i] != i) mr_fail("second comm allgather[%d] = %d", i, all[i]);
  MR_OK(sc_comm_destroy(c2));
}

static void test_split(void) {
  int color = mr_rank % 2, key = -mr_rank;
  if (mr_nranks > 2 && mr_rank == 0) color = -1; /* takes part, gets no communicator */
  sc_comm_t *sub = NULL;
  MR_OK(sc_comm_split(comm, color, key, &sub));
  if (color < 0) {
    if (sub) mr_fail("split with negative color returned a communicator");
    return;
  }
  if (!sub) {
    mr_fail("split returned no communicator");
    return;
  }
  int members[64], nm = 0;
  for (int r = 0; r < mr_nranks; r++) {
    int c = r % 2;
    if (mr_nranks > 2 && r == 0) c = -1;
    if (c == color) members[nm++] = r;
  }
  int srank, ssize;
  MR_OK(sc_comm_rank(sub, &srank));
  MR_OK(sc_comm_size(sub, &ssize));
  /* key = -rank: members in decreasing parent rank. */
  int pos = 0;
  for (int i = 0; i < nm; i++)
    if (members[i] > mr_rank) pos++;
  if (ssize != nm || srank != pos)
    mr_fail("split: rank %d size %d, want %d %d", srank, ssize, pos, nm);
  int32_t me = mr_rank, all[64];
  MR_OK(sc_allgather(&me, all, 1, SC_INT32, sub));
  for (int i = 0; i < ssize; i++)
    if (all[i] != members[nm - 1 - i]) mr_fail("split allgather[%d] = %d", i, all[i]);
  MR_OK(sc_comm_destroy(sub));
}

static void expect_invalid(sc_result_t r, const char *what) {
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG)
    mr_fail("%s: got %s, want invalid argument", what, sc_strerror(r));
  else if (!*sc_last_error())
    mr_fail("%s: empty sc_last_error", what);
}

static void test_bad_arguments(void) {
  float x = 1;
  expect_invalid(sc_allreduce(&x, &x, 1, (sc_dtype_t)99, SC_SUM, comm), "bad dtype");
  expect_invalid(sc_allreduce(&x, &x, 1, SC_FLOAT32, (sc_redop_t)7, comm), "bad op");
  expect_invalid(sc_allreduce(NULL, &x, 1, SC_FLOAT32, SC_SUM, comm), "NULL sendbuf");
  expect_invalid(sc_broadcast(&x, &x, 1, SC_FLOAT32, mr_nranks, comm), "root out of range");
  expect_invalid(sc_reduce(&x, &x, 1, SC_FLOAT32, SC_SUM, -1, comm), "negative root");
  expect_invalid(sc_allreduce(&x, &x, 1, SC_FLOAT32, SC_SUM, NULL), "NULL comm");
  expect_invalid(sc_wait(NULL), "NULL request");
  const char *name = NULL;
  expect_invalid(sc_reduce_scatter_algo(NULL, 1, SC_FLOAT32, &name), "algo: NULL comm");
  expect_invalid(sc_allgather_algo(comm, 1, SC_FLOAT32, NULL), "algo: NULL name");
  expect_invalid(sc_allgather_algo(comm, 1, (sc_dtype_t)99, &name), "algo: bad dtype");
  /* Nothing was sent: the communicator still works. */
  MR_OK(sc_barrier(comm));
  sc_result_t err = SC_ERR_INTERNAL;
  MR_OK(sc_comm_get_async_error(comm, &err));
  if (err != SC_SUCCESS) mr_fail("async error %s after argument errors", sc_strerror(err));
}

int main(int argc, char **argv) {
  int allreduce_only = argc > 1 && !strcmp(argv[1], "--allreduce-only");
  int rs_ag_only = argc > 1 && !strcmp(argv[1], "--rs-ag-only");
  int split_only = argc > 1 && !strcmp(argv[1], "--split-only");
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  max_elems = (size_t)(3u << 20) + 4096 * (size_t)mr_nranks;
  sbuf = malloc((max_elems + GUARD) * 8);
  rbuf = malloc((max_elems + GUARD) * 8);
  if (allreduce_only) {
    test_allreduce_only();
  } else if (rs_ag_only) {
    test_rs_ag_only();
  } else if (split_only) {
    test_split();
  } else {
    test_bad_arguments();
    test_all_dense();
    test_nonblocking();
    test_two_comms();
    test_split();
  }
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  free(sbuf);
  free(rbuf);
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
