/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_FUSE_P3 on N ranks (run under sc-run with SC_TIMEOUT_MS=60000): ranks
 * make tensors ready in different orders, at different times and from a
 * second thread, with slices from a few elements to the library default, in
 * float32, float64 and int32; every result must equal the plain average
 * computed here. Also: the DeAR loop (wait, refill, ready, tensor by tensor),
 * skipped tensors (zeros, buffer not read), a second ready refused while the
 * round is in flight, a wait on a tensor never made ready returning at once,
 * gTop-k + P3 refused, and slice_bytes that differ between ranks refused. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test/multi/mr_common.h"

static sc_comm_t *comm;

enum { NT = 10 };
static const size_t counts[NT] = {7, 3000, 1, 40000, 64, 257, 5000, 3, 12000, 100};
static const sc_dtype_t dts[NT] = {SC_FLOAT32, SC_FLOAT32, SC_INT32,   SC_FLOAT32, SC_FLOAT64,
                                   SC_FLOAT32, SC_FLOAT64, SC_FLOAT32, SC_INT32,   SC_FLOAT32};

static void *bufs[NT];

/* Multiples of P: every average is exact in every dtype. */
static long input(int r, int round, int t, size_t i) {
  long v = (long)((i * 7 + (size_t)r * 13 + (size_t)round * 5 + (size_t)t * 3) % 23) - 11;
  return v * mr_nranks;
}

static void fill(int t, int round) {
  for (size_t i = 0; i < counts[t]; i++)
    mr_set(bufs[t], i, dts[t], (double)input(mr_rank, round, t, i));
}

typedef int (*skip_fn)(int r, int round, int t);
static int never(int r, int round, int t) {
  (void)r, (void)round, (void)t;
  return 0;
}

static void check(int t, int round, skip_fn sk, const char *what) {
  mr_checks++;
  for (size_t i = 0; i < counts[t]; i++) {
    long sum = 0;
    for (int r = 0; r < mr_nranks; r++)
      if (!sk(r, round, t)) sum += input(r, round, t, i);
    double want = (double)sum / mr_nranks, got = mr_get(bufs[t], i, dts[t]);
    if (got != want) {
      mr_fail("%s: round %d tensor %d [%zu]: got %g, want %g", what, round, t, i, got, want);
      return;
    }
  }
}

static sc_fusion_t *make(size_t slice_bytes) {
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.policy = SC_FUSE_P3;
  cfg.slice_bytes = slice_bytes;
  cfg.alpha_us = 40;
  cfg.beta_us_per_byte = 0.002;
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  for (int t = 0; t < NT && f; t++) {
    int id;
    MR_OK(sc_fusion_add_tensor(f, bufs[t], counts[t], dts[t], 10.0 + t, &id));
  }
  if (f) MR_OK(sc_fusion_plan(f));
  if (f) {
    int nb = 0, b = -1;
    MR_OK(sc_fusion_num_buckets(f, &nb));
    MR_OK(sc_fusion_bucket_of(f, NT - 1, &b));
    mr_checks++;
    if (nb != NT || b != NT - 1)
      mr_fail("p3: %d buckets, tensor %d in %d: want one per tensor", nb, NT - 1, b);
  }
  return f;
}

/* The order rank r makes tensors ready in a round: backward order on rank 0,
 * reversed on odd ranks, rotated on the others. */
static int order(int r, int round, int k) {
  if (r == 0) return k;
  if (r % 2) return NT - 1 - k;
  return (k + 3 * r + round) % NT;
}

static void nap(int r, int round, int k) {
  unsigned h = (unsigned)(r * 131 + round * 17 + k * 7) % 5;
  if (h) usleep(h * 300);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void run_orders(size_t slice_bytes, int rounds) {
  char what[64];
  snprintf(what, sizeof(what), "p3 orders slice %zu", slice_bytes);
  sc_fusion_t *f = make(slice_bytes);
  for (int round = 0; round < rounds && f; round++) {
    for (int k = 0; k < NT; k++) {
      int t = order(mr_rank, round, k);
      fill(t, round);
      MR_OK(sc_fusion_ready(f, t));
      nap(mr_rank, round, k);
    }
    /* Waits in an order of their own, some twice (the second returns at once). */
    for (int k = 0; k < NT; k++) MR_OK(sc_fusion_wait(f, (k * 3 + round) % NT));
    MR_OK(sc_fusion_wait_all(f));
    for (int t = 0; t < NT; t++) check(t, round, never, what);
  }
  MR_OK(sc_fusion_destroy(f));
}

/* The DeAR loop: before each forward layer wait for its tensor, then write
 * its next gradient and make it ready (here in forward order, the reverse of
 * registration). */
static void run_dear_loop(void) {
  const char *what = "p3 dear loop";
  sc_fusion_t *f = make(1024);
  for (int t = 0; t < NT; t++) {
    fill(t, 0);
    MR_OK(sc_fusion_ready(f, t));
  }
  for (int round = 1; round < 5; round++) {
    for (int k = 0; k < NT; k++) {
      int t = NT - 1 - k;
      MR_OK(sc_fusion_wait(f, t));
      check(t, round - 1, never, what);
      fill(t, round);
      MR_OK(sc_fusion_ready(f, t));
    }
  }
  MR_OK(sc_fusion_wait_all(f));
  for (int t = 0; t < NT; t++) check(t, 4, never, what);
  MR_OK(sc_fusion_destroy(f));
}

static int skips(int r, int round, int t) {
  return t == 2 || (t == 5 && r == round % mr_nranks) || (t == 8 && r % 2 == 1);
}

static void run_skip(void) {
  const char *what = "p3 skip";
  sc_fusion_t *f = make(1000);
  for (int round = 0; round < 3; round++) {
    for (int t = NT - 1; t >= 0; t--) {
      if (skips(mr_rank, round, t)) {
        for (size_t i = 0; i < counts[t]; i++)
          mr_set(bufs[t], i, dts[t], dts[t] == SC_INT32 ? 12345 : NAN); /* must not be read */
        MR_OK(sc_fusion_skip(f, t));
      } else {
        fill(t, round);
        MR_OK(sc_fusion_ready(f, t));
      }
    }
    MR_OK(sc_fusion_wait_all(f));
    for (int t = 0; t < NT; t++) check(t, round, skips, what);
  }
  MR_OK(sc_fusion_destroy(f));
}

/* Readies from a second thread (a backward hook) while this one waits. */
typedef struct hook {
  sc_fusion_t *f;
  int round;
} hook_t;

static void *hook_main(void *p) {
  hook_t *h = p;
  for (int k = 0; k < NT; k++) {
    int t = order(mr_rank, h->round, k);
    fill(t, h->round);
    MR_OK(sc_fusion_ready(h->f, t));
    nap(mr_rank + 1, h->round, k);
  }
  return NULL;
}

static void run_threads(void) {
  const char *what = "p3 threads";
  sc_fusion_t *f = make(4096);
  for (int round = 0; round < 3; round++) {
    hook_t h = {f, round};
    pthread_t th;
    pthread_create(&th, NULL, hook_main, &h);
    pthread_join(th, NULL);
    /* Highest priority first, as the next forward pass would. */
    for (int t = NT - 1; t >= 0; t--) {
      MR_OK(sc_fusion_wait(f, t));
      check(t, round, never, what);
    }
  }
  MR_OK(sc_fusion_destroy(f));
}

static void run_rules(void) {
  const char *what = "p3 rules";
  sc_fusion_t *f = make(512);
  /* Never made ready: no round in flight, returns at once. */
  double t0 = now_ms();
  MR_OK(sc_fusion_wait(f, 4));
  MR_OK(sc_fusion_wait_all(f));
  mr_checks++;
  if (now_ms() - t0 > 2000)
    mr_fail("%s: a wait with nothing in flight took %.0f ms", what, now_ms() - t0);
  for (int t = 0; t < NT; t++) {
    fill(t, 7);
    MR_OK(sc_fusion_ready(f, t));
  }
  sc_result_t r = sc_fusion_ready(f, 3);
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG || !strstr(sc_last_error(), "already ready"))
    mr_fail("%s: second ready: %s (%s), want SC_ERR_INVALID_ARG", what, sc_strerror(r),
            sc_last_error());
  r = sc_fusion_skip(f, 3);
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG)
    mr_fail("%s: skip after ready: %s, want SC_ERR_INVALID_ARG", what, sc_strerror(r));
  MR_OK(sc_fusion_wait_all(f));
  for (int t = 0; t < NT; t++) check(t, 7, never, what);
  MR_OK(sc_fusion_destroy(f));

  /* gTop-k slices are refused up front. */
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.policy = SC_FUSE_P3;
  cfg.density = 0.01;
  sc_fusion_t *fb = NULL;
  r = sc_fusion_create(comm, &cfg, &fb);
  mr_checks++;
  if (r != SC_ERR_UNSUPPORTED || fb || !strstr(sc_last_error(), "P3"))
    mr_fail("%s: P3 with density: %s (%s), want SC_ERR_UNSUPPORTED", what, sc_strerror(r),
            sc_last_error());
  /* slice_bytes is part of the configuration every rank must share. */
  if (mr_nranks > 1) {
    cfg.density = 0;
    cfg.slice_bytes = mr_rank == mr_nranks - 1 ? 4096 : 8192;
    MR_OK(sc_fusion_create(comm, &cfg, &fb));
    int id;
    for (int t = 0; t < NT; t++)
      MR_OK(sc_fusion_add_tensor(fb, bufs[t], counts[t], dts[t], 1, &id));
    r = sc_fusion_plan(fb);
    mr_checks++;
    if (r != SC_ERR_MISMATCH || !strstr(sc_last_error(), "slice_bytes"))
      mr_fail("%s: slice_bytes differing: %s (%s), want SC_ERR_MISMATCH", what, sc_strerror(r),
              sc_last_error());
    MR_OK(sc_fusion_destroy(fb));
  }
}

int main(void) {
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  for (int t = 0; t < NT; t++) bufs[t] = malloc(counts[t] * sc_dtype_size(dts[t]));
  /* A few elements per slice: about 5,500 slices a round, two all-reduces
   * (agreement and slice) each, so two rounds; at 24 bytes and four rounds
   * this call was most of the script's time over every transport. */
  run_orders(48, 2);
  run_orders(16384, 4); /* several slices for the large tensors only */
  run_orders(0, 4);     /* the library default (from the model: 40 us, 2 ns/B) */
  run_dear_loop();
  run_skip();
  run_threads();
  run_rules();
  /* The application's own collectives on the parent still match: the
   * scheduler runs on a communicator of its own. */
  MR_OK(sc_barrier(comm));
  for (int t = 0; t < NT; t++) free(bufs[t]);
  MR_OK(sc_comm_destroy(comm));
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
