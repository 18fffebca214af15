/* SPDX-License-Identifier: BSD-3-Clause */
/* Every dense collective on device buffers, through the device stand-in
 * (SC_DEVRT_STANDIN, test/devfake/), whose device memory the host cannot
 * touch, or through CUDA on a GPU: inputs are uploaded and results downloaded
 * through the library's device runtime table. Each result is checked against the reference
 * every rank computes on the host (test/multi/mr_common.c), and the guard
 * elements past each output must be untouched. Then non-blocking calls on
 * device buffers, and mixed host/device buffers (refused, nothing sent).
 *
 * Modes: (none) every collective, dtype and op at a few counts;
 * --allreduce-only: the all-reduce alone, for a forced SC_ALGO;
 * --quick: a sample (three dtypes); --peer-death: rank 1 (or the last)
 * is killed after a warm-up and every other rank's device all-reduce must
 * fail with SC_ERR_REMOTE within the timeout; --abort: on 2 ranks, rank 1
 * stays away and an abort from another thread must wake rank 0's blocked
 * device all-reduce; --late: rank 1 joins an all-reduce on the kernel path
 * only after SC_TIMEOUT_MS (the script sets it short and turns the liveness
 * watch off): every other rank's call must fail with SC_ERR_TIMEOUT from the
 * kernel's bounded wait, naming rank 1, and rank 1's with SC_ERR_REMOTE,
 * naming a rank that gave up. Run under sc-run. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/devrt.h"
#include "test/multi/mr_common.h"

#define GUARD        64
#define SENTINEL(dt) ((dt) == SC_UINT8 || (dt) == SC_UINT32 || (dt) == SC_UINT64 ? 200.0 : -100.0)

static sc_comm_t *comm;
static const sc_devrt_t *rt;
static void *stream, *event;
static unsigned char *hs, *hr; /* host images of the device buffers */
static unsigned char *ds, *dr; /* device */
static size_t cap_bytes;       /* of each buffer */

static size_t esz(sc_dtype_t dt) {
  return sc_dtype_size(dt);
}

/* ---- the emulated device, through the stand-in's table ---- */

static void dev_wait(void) {
  if (rt->event_record(event, stream) != SC_SUCCESS) {
    mr_fail("event_record failed");
    return;
  }
  struct timespec t0, now, nap = {0, 20000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int done = 0;
    if (rt->event_query(event, &done) != SC_SUCCESS) {
      mr_fail("event_query failed");
      return;
    }
    if (done) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec > 60) {
      mr_fail("a copy on the emulated device did not end within 60 s");
      exit(1);
    }
    nanosleep(&nap, NULL);
  }
}

static void upload(void *dev, const void *host, size_t bytes) {
  if (bytes && rt->memcpy_async(dev, host, bytes, stream) != SC_SUCCESS) mr_fail("upload failed");
  dev_wait();
}

static void download(void *host, const void *dev, size_t bytes) {
  if (bytes && rt->memcpy_async(host, dev, bytes, stream) != SC_SUCCESS) mr_fail("download failed");
  dev_wait();
}

/* The library's own device runtime: the stand-in where SC_DEVRT_STANDIN names
 * it (the library loads the same module, so both see one emulated device),
 * else CUDA on a machine with a GPU (test/gpu/gpu_checks.sh). */
static int load_runtime(void) {
  rt = sc_devrt();
  return rt != NULL;
}

/* ---- checks ---- */

static void fill_const(void *buf, size_t n, sc_dtype_t dt, double v) {
  for (size_t i = 0; i < n; i++) mr_set(buf, i, dt, v);
}

typedef struct ctx {
  sc_dtype_t dt;
  sc_redop_t op;
  size_t base;
  int root;
  size_t block;
} ctx_t;

static void expect(const char *what, const void *buf, size_t n, sc_dtype_t dt,
                   double (*want)(size_t i, const ctx_t *c), const ctx_t *c) {
  int shown = 0;
  mr_checks++;
  for (size_t i = 0; i < n; i++) {
    double got = mr_get(buf, i, dt), exp = want(i, c);
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

static double want_reduced(size_t i, const ctx_t *c) {
  return mr_expected(c->base + i, c->dt, c->op, mr_nranks);
}
static double want_root_input(size_t i, const ctx_t *c) {
  return mr_input(c->root, i, c->dt, SC_SUM, mr_nranks);
}
static double want_gathered(size_t j, const ctx_t *c) {
  return mr_input((int)(j / c->block), j, c->dt, SC_SUM, mr_nranks);
}
static double want_sentinel(size_t i, const ctx_t *c) {
  (void)i;
  return SENTINEL(c->dt);
}

/* ---- the collectives ---- */

static void test_allreduce(size_t n, sc_dtype_t dt, sc_redop_t op, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "device allreduce n=%zu %s %s %s", n, mr_dtype_names[dt],
           mr_op_names[op], inplace ? "in-place" : "out-of-place");
  size_t es = esz(dt);
  fill_const(hr, n + GUARD, dt, SENTINEL(dt));
  mr_fill(inplace ? hr : hs, n, mr_rank, 0, dt, op);
  upload(dr, hr, (n + GUARD) * es);
  if (!inplace) upload(ds, hs, n * es);
  MR_OK(sc_allreduce(inplace ? dr : ds, dr, n, dt, op, comm));
  memset(hr, 0, (n + GUARD) * es);
  download(hr, dr, (n + GUARD) * es);
  ctx_t c = {.dt = dt, .op = op};
  expect(what, hr, n, dt, want_reduced, &c);
  expect_guard(what, hr, n, dt);
}

/* inplace: 0 out of place; 1 recvbuf == sendbuf; 2 recvbuf == sendbuf + rank*rc. */
static void test_reduce_scatter(size_t rc, sc_dtype_t dt, sc_redop_t op, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "device reduce_scatter rc=%zu %s %s inplace=%d", rc,
           mr_dtype_names[dt], mr_op_names[op], inplace);
  size_t es = esz(dt), total = rc * (size_t)mr_nranks;
  fill_const(hs, total + GUARD, dt, SENTINEL(dt));
  fill_const(hr, rc + GUARD, dt, SENTINEL(dt));
  mr_fill(hs, total, mr_rank, 0, dt, op);
  upload(ds, hs, (total + GUARD) * es);
  upload(dr, hr, (rc + GUARD) * es);
  size_t out_off = inplace == 2 ? (size_t)mr_rank * rc * es : 0;
  unsigned char *out = inplace == 0 ? dr : ds + out_off;
  MR_OK(sc_reduce_scatter(ds, out, rc, dt, op, comm));
  ctx_t c = {.dt = dt, .op = op, .base = (size_t)mr_rank * rc};
  if (inplace == 0) {
    download(hr, dr, (rc + GUARD) * es);
    expect(what, hr, rc, dt, want_reduced, &c);
    expect_guard(what, hr, rc, dt);
  } else {
    download(hs, ds, (total + GUARD) * es);
    expect(what, hs + out_off, rc, dt, want_reduced, &c);
    expect_guard(what, hs, total, dt);
  }
}

/* inplace: 0 out of place; 1 sendbuf == recvbuf + rank*sc; 2 sendbuf == recvbuf. */
static void test_allgather(size_t sc, sc_dtype_t dt, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "device allgather sc=%zu %s inplace=%d", sc, mr_dtype_names[dt],
           inplace);
  size_t es = esz(dt), total = sc * (size_t)mr_nranks, mybase = (size_t)mr_rank * sc;
  fill_const(hr, total + GUARD, dt, SENTINEL(dt));
  unsigned char *hin = inplace == 1 ? hr + mybase * es : inplace == 2 ? hr : hs;
  for (size_t i = 0; i < sc; i++)
    mr_set(hin, i, dt, mr_input(mr_rank, mybase + i, dt, SC_SUM, mr_nranks));
  upload(dr, hr, (total + GUARD) * es);
  if (inplace == 0) upload(ds, hs, sc * es);
  unsigned char *in = inplace == 1 ? dr + mybase * es : inplace == 2 ? dr : ds;
  MR_OK(sc_allgather(in, dr, sc, dt, comm));
  download(hr, dr, (total + GUARD) * es);
  ctx_t c = {.dt = dt, .block = sc ? sc : 1};
  expect(what, hr, total, dt, want_gathered, &c);
  expect_guard(what, hr, total, dt);
}

static void test_broadcast(size_t n, sc_dtype_t dt, int root, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "device broadcast n=%zu %s root=%d %s", n, mr_dtype_names[dt], root,
           inplace ? "in-place" : "out-of-place");
  size_t es = esz(dt);
  fill_const(hr, n + GUARD, dt, SENTINEL(dt));
  if (mr_rank == root) mr_fill(inplace ? hr : hs, n, root, 0, dt, SC_SUM);
  upload(dr, hr, (n + GUARD) * es);
  if (mr_rank == root && !inplace) upload(ds, hs, n * es);
  MR_OK(sc_broadcast(mr_rank == root ? (inplace ? dr : ds) : NULL, dr, n, dt, root, comm));
  download(hr, dr, (n + GUARD) * es);
  ctx_t c = {.dt = dt, .root = root};
  expect(what, hr, n, dt, want_root_input, &c);
  expect_guard(what, hr, n, dt);
}

static void test_reduce(size_t n, sc_dtype_t dt, sc_redop_t op, int root, int inplace) {
  char what[128];
  snprintf(what, sizeof(what), "device reduce n=%zu %s %s root=%d %s", n, mr_dtype_names[dt],
           mr_op_names[op], root, inplace ? "in-place" : "out-of-place");
  size_t es = esz(dt);
  fill_const(hr, n + GUARD, dt, SENTINEL(dt));
  mr_fill(inplace ? hr : hs, n, mr_rank, 0, dt, op);
  upload(dr, hr, (n + GUARD) * es);
  if (!inplace) upload(ds, hs, n * es);
  MR_OK(sc_reduce(inplace ? dr : ds, dr, n, dt, op, root, comm));
  download(hr, dr, (n + GUARD) * es);
  ctx_t c = {.dt = dt, .op = op};
  if (mr_rank == root)
    expect(what, hr, n, dt, want_reduced, &c);
  else if (!inplace)
    expect(what, hr, n, dt, want_sentinel, &c);
  expect_guard(what, hr, n, dt);
}

static int dtype_in_sample(int dt, int quick) {
  return !quick || dt == SC_FLOAT32 || dt == SC_INT32 || dt == SC_FLOAT16;
}

static void test_allreduce_only(int quick) {
  size_t p = (size_t)mr_nranks;
  size_t counts[] = {0, 1, p + 1, 1009, 65537};
  for (int dt = SC_INT8; dt <= SC_FLOAT64; dt++) {
    if (!dtype_in_sample(dt, quick)) continue;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
      for (int op = SC_SUM; op <= SC_AVG; op++)
        test_allreduce(counts[ci], (sc_dtype_t)dt, (sc_redop_t)op, (int)((ci + (size_t)op) & 1));
  }
  size_t big = (size_t)(3u << 20) / 4 + 7; /* ~3 MiB of float32: several staging chunks */
  test_allreduce(big, SC_FLOAT32, SC_SUM, 0);
  test_allreduce(big, SC_FLOAT16, SC_AVG, 1);
}

static void test_all_dense(int quick) {
  size_t p = (size_t)mr_nranks;
  size_t counts[] = {0, 1, p + 1, 1009};
  int roots[] = {0, mr_nranks - 1, mr_nranks / 2};
  for (int dt = SC_INT8; dt <= SC_FLOAT64; dt++) {
    if (!dtype_in_sample(dt, quick)) continue;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
      size_t n = counts[ci];
      int inplace = (int)((ci + (size_t)dt) % 3);
      test_broadcast(n, (sc_dtype_t)dt, roots[(ci + (size_t)dt) % 3], inplace & 1);
      test_allgather(n, (sc_dtype_t)dt, inplace);
      for (int op = SC_SUM; op <= SC_AVG; op++) {
        int ip = (int)((ci + (size_t)op + (size_t)dt) % 3);
        test_reduce_scatter(n, (sc_dtype_t)dt, (sc_redop_t)op, ip);
        test_allreduce(n, (sc_dtype_t)dt, (sc_redop_t)op, ip & 1);
        test_reduce(n, (sc_dtype_t)dt, (sc_redop_t)op, roots[(ci + (size_t)op) % 3], ip & 1);
      }
    }
  }
  /* Multi-MiB: several staging chunks per message. */
  size_t big = (size_t)(3u << 20) / 4 + 7;
  test_allreduce(big, SC_FLOAT32, SC_SUM, 1);
  test_allreduce(big / 2, SC_INT64, SC_MAX, 0);
  test_reduce_scatter(big / p + 3, SC_FLOAT32, SC_SUM, 0);
  test_allgather(big / p + 5, SC_FLOAT32, 1);
  test_broadcast(big, SC_FLOAT32, mr_nranks - 1, 0);
  test_reduce(big, SC_FLOAT32, SC_AVG, mr_nranks / 2, 1);
}

/* Several device all-reduces in flight at once, waited in reverse order. */
static void test_nonblocking(void) {
  enum { NREQ = 4 };
  size_t n = 10007;
  sc_request_t *reqs[NREQ];
  float *h = (float *)hs;
  for (int k = 0; k < NREQ; k++)
    for (size_t i = 0; i < n; i++) h[(size_t)k * n + i] = (float)(mr_rank + k + (int)(i % 5));
  upload(ds, hs, NREQ * n * sizeof(float));
  for (int k = 0; k < NREQ; k++)
    MR_OK(sc_iallreduce(ds + (size_t)k * n * 4, ds + (size_t)k * n * 4, n, SC_FLOAT32, SC_SUM, comm,
                        &reqs[k]));
  for (int k = NREQ - 1; k >= 0; k--) MR_OK(sc_wait(&reqs[k]));
  download(hs, ds, NREQ * n * sizeof(float));
  for (int k = 0; k < NREQ; k++)
    for (size_t i = 0; i < n; i++) {
      double want = 0;
      for (int r = 0; r < mr_nranks; r++) want += r + k + (int)(i % 5);
      if (h[(size_t)k * n + i] != (float)want) {
        mr_fail("nonblocking device allreduce %d element %zu: %g != %g", k, i, h[(size_t)k * n + i],
                want);
        break;
      }
    }
}

static void expect_invalid_naming(sc_result_t r, const char *what, const char *a, const char *b) {
  mr_checks++;
  const char *msg = sc_last_error();
  if (r != SC_ERR_INVALID_ARG)
    mr_fail("%s: got %s, want invalid argument", what, sc_strerror(r));
  else if (!strstr(msg, a) || !strstr(msg, b))
    mr_fail("%s: the error does not name %s and %s: %s", what, a, b, msg);
}

/* Mixed host and device buffers are refused before anything is sent: the
 * collectives afterwards still match up. */
static void test_mixed(void) {
  expect_invalid_naming(sc_allreduce(hs, dr, 16, SC_FLOAT32, SC_SUM, comm),
                        "host send, device recv", "sendbuf", "recvbuf");
  expect_invalid_naming(sc_allgather(ds, hr, 16, SC_FLOAT32, comm), "device send, host recv",
                        "sendbuf", "recvbuf");
  expect_invalid_naming(sc_reduce_scatter(hs, dr, 16, SC_INT32, SC_MAX, comm), "reduce_scatter",
                        "sendbuf", "recvbuf");
  if (mr_rank == 0)
    expect_invalid_naming(sc_broadcast(hs, dr, 16, SC_FLOAT32, 0, comm), "broadcast root",
                          "sendbuf", "recvbuf");
  MR_OK(sc_barrier(comm));
  /* Off the root only the buffer the rank uses counts: a reduce's recvbuf is
   * not looked at, so a host one beside a device sendbuf is fine. */
  fill_const(hs, 33, SC_INT32, 0);
  mr_fill(hs, 33, mr_rank, 0, SC_INT32, SC_SUM);
  upload(ds, hs, 33 * 4);
  fill_const(hr, 33 + GUARD, SC_INT32, SENTINEL(SC_INT32));
  upload(dr, hr, (33 + GUARD) * 4);
  MR_OK(sc_reduce(ds, mr_rank == 0 ? (void *)dr : (void *)hr, 33, SC_INT32, SC_SUM, 0, comm));
  if (mr_rank == 0) {
    download(hr, dr, (33 + GUARD) * 4);
    ctx_t c = {.dt = SC_INT32, .op = SC_SUM};
    expect("device reduce with a host recvbuf off the root", hr, 33, SC_INT32, want_reduced, &c);
  }
  sc_result_t err = SC_ERR_INTERNAL;
  MR_OK(sc_comm_get_async_error(comm, &err));
  if (err != SC_SUCCESS) mr_fail("async error %s after refused calls", sc_strerror(err));
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A peer killed between device operations: the others' next ones fail,
 * naming a peer, long before SC_TIMEOUT_MS (which the script sets to 60 s),
 * and the communicator can still be destroyed. */
static int test_peer_death(void) {
  size_t n = (size_t)(3u << 20) / 4 + 7;
  int victim = mr_nranks > 2 ? 1 : mr_nranks - 1;
  MR_OK(sc_allreduce(ds, ds, n, SC_FLOAT32, SC_SUM, comm));
  if (mr_rank == victim) raise(SIGKILL);
  double t0 = now_s();
  sc_result_t r = SC_SUCCESS;
  for (int i = 0; i < 50 && r == SC_SUCCESS; i++)
    r = sc_allreduce(ds, dr, n, SC_FLOAT32, SC_SUM, comm);
  double dt = now_s() - t0;
  if (r != SC_ERR_REMOTE || !strstr(sc_last_error(), "rank "))
    mr_fail("after the peer's death: %s after %.1f s: %s", sc_strerror(r), dt, sc_last_error());
  else if (dt > 30)
    mr_fail("the failure took %.1f s to surface", dt);
  else
    printf("rank %d: device allreduce failed in %.2f s: %s\n", mr_rank, dt, sc_last_error());
  return 0;
}

static void *abort_later(void *arg) {
  usleep(500 * 1000);
  sc_comm_abort(arg);
  return NULL;
}

/* A file both ranks of one sc-run name alike (their parent's pid): rank 0
 * creates it once its call has returned. */
static void abort_marker(char *path, size_t len) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, len, "%s/mr_device_abort.%ld", dir && *dir ? dir : "/tmp", (long)getppid());
}

/* Rank 1 never joins: only the abort can end rank 0's wait. Rank 1 stays
 * until rank 0's call returned (or 60 s), so that its exit cannot be what
 * ends the wait on a loaded machine. */
static int test_abort(void) {
  char marker[256];
  abort_marker(marker, sizeof(marker));
  if (mr_rank != 0) {
    for (int i = 0; i < 600 && access(marker, F_OK) != 0; i++) usleep(100 * 1000);
    unlink(marker);
    sc_comm_abort(comm);
    return 0;
  }
  size_t n = (size_t)(3u << 20) / 4 + 7;
  pthread_t t;
  pthread_create(&t, NULL, abort_later, comm);
  double t0 = now_s();
  sc_result_t r = sc_allreduce(ds, dr, n, SC_FLOAT32, SC_SUM, comm);
  double dt = now_s() - t0;
  pthread_join(t, NULL);
  FILE *f = fopen(marker, "w");
  if (f) fclose(f);
  mr_checks++;
  if (r != SC_ERR_ABORTED || dt > 5.0)
    mr_fail("blocked device allreduce returned %s after %.2f s: %s", sc_strerror(r), dt,
            sc_last_error());
  return 0;
}

/* The kernel's wait for a rank that comes too late ends at SC_TIMEOUT_MS. */
static int test_late(void) {
  size_t n = 1000;
  MR_OK(sc_allreduce(ds, dr, n, SC_FLOAT32, SC_SUM, comm)); /* sets the path up */
  const char *t = getenv("SC_TIMEOUT_MS");
  double timeout = t ? atof(t) / 1000.0 : 300.0;
  if (mr_rank == 1) usleep((useconds_t)((timeout + 1.0) * 1e6));
  double t0 = now_s();
  sc_result_t r = sc_allreduce(ds, dr, n, SC_FLOAT32, SC_SUM, comm);
  double dt = now_s() - t0;
  mr_checks++;
  if (mr_rank == 1) {
    if (r != SC_ERR_REMOTE || !strstr(sc_last_error(), "all-reduce kernel gave up") || dt > 5)
      mr_fail("the late rank: %s after %.2f s: %s (expected SC_ERR_REMOTE at once, naming a rank "
              "that gave up)",
              sc_strerror(r), dt, sc_last_error());
    else
      printf("rank 1: device allreduce failed in %.2f s: %s\n", dt, sc_last_error());
    return 0;
  }
  if (r != SC_ERR_TIMEOUT || !strstr(sc_last_error(), "all-reduce kernel") ||
      !strstr(sc_last_error(), "rank 1"))
    mr_fail("a late peer: %s after %.2f s: %s (expected a timeout naming rank 1)", sc_strerror(r),
            dt, sc_last_error());
  else if (dt < timeout * 0.9 || dt > timeout * 3 + 2)
    mr_fail("the kernel's wait ended after %.2f s, SC_TIMEOUT_MS is %.2f s", dt, timeout);
  else
    printf("rank %d: device allreduce failed in %.2f s: %s\n", mr_rank, dt, sc_last_error());
  return 0;
}

int main(int argc, char **argv) {
  int allreduce_only = 0, quick = 0, death = 0, abort_mode = 0, per_rank = 0, late = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--allreduce-only")) allreduce_only = 1;
    if (!strcmp(argv[i], "--quick")) quick = 1;
    if (!strcmp(argv[i], "--peer-death")) death = 1;
    if (!strcmp(argv[i], "--abort")) abort_mode = 1;
    if (!strcmp(argv[i], "--late")) late = 1;
    /* one device per rank (rank mod the devices), as on a node of GPUs */
    if (!strcmp(argv[i], "--device-per-rank")) per_rank = 1;
  }
  if (!load_runtime()) {
    printf(
        "skipped: no device runtime (SC_DEVRT_STANDIN names no loadable stand-in, and no GPU)\n");
    return 77;
  }
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  if (per_rank && rt->set_device(mr_rank % rt->device_count()) != SC_SUCCESS) {
    fprintf(stderr, "rank %d: set_device failed\n", mr_rank);
    return 1;
  }
  cap_bytes = ((size_t)(3u << 20) + 4096 * (size_t)mr_nranks + GUARD) * 8;
  hs = malloc(cap_bytes);
  hr = malloc(cap_bytes);
  void *a = NULL, *b = NULL;
  if (!hs || !hr || rt->malloc_device(&a, cap_bytes) != SC_SUCCESS ||
      rt->malloc_device(&b, cap_bytes) != SC_SUCCESS || rt->stream_create(&stream) != SC_SUCCESS ||
      rt->event_create(&event) != SC_SUCCESS) {
    fprintf(stderr, "rank %d: device setup failed\n", mr_rank);
    return 1;
  }
  ds = a;
  dr = b;
  if (death || abort_mode || late) {
    if (death)
      test_peer_death();
    else if (late)
      test_late();
    else
      test_abort();
    MR_OK(sc_comm_destroy(comm));
    printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
    return mr_failures ? 1 : 0;
  }
  if (allreduce_only) {
    test_allreduce_only(quick);
  } else {
    test_mixed();
    test_all_dense(quick);
    test_nonblocking();
  }
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  rt->free_device(ds);
  rt->free_device(dr);
  rt->event_destroy(event);
  rt->stream_destroy(stream);
  free(hs);
  free(hr);
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
