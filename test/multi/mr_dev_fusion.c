/* SPDX-License-Identifier: BSD-3-Clause */
/* Fusion with device tensors on N ranks (run under sc-run with the device
 * stand-in, SC_DEVRT_STANDIN; test/multi/dev_sparse.sh). For each policy,
 * dense and gTop-k buckets, separate and contiguous (zero-copy) tensors,
 * a fusion object over device tensors and one over host tensors of the same
 * data run the same rounds (a skipped tensor included); the device results,
 * copied back, must equal the host results bit for bit. The host engine is
 * the reference here: mr_fusion checks it against the exact averages and
 * against direct gTop-k calls. Mixed host and device tensors are refused.
 * --quick: a few policies, for the run with slow streams. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "sparsecoll.h"
#include "test/multi/mr_common.h"

static sc_comm_t *comm;
static const sc_devrt_t *rt;
static void *ev;
static int quick; /* --quick: a few policies (the slow-stream run) */

enum { NT = 9 };
static const size_t counts[NT] = {1, 3, 1000, 4096, 7, 20000, 129, 2, 3336};
static const sc_dtype_t dense_dt[NT] = {SC_FLOAT32, SC_FLOAT32, SC_INT32,   SC_INT32,  SC_FLOAT32,
                                        SC_FLOAT32, SC_FLOAT64, SC_FLOAT64, SC_FLOAT32};
static const sc_dtype_t sparse_dt[NT] = {SC_FLOAT32, SC_FLOAT32, SC_FLOAT16, SC_FLOAT16, SC_FLOAT32,
                                         SC_FLOAT32, SC_FLOAT64, SC_FLOAT64, SC_BFLOAT16};

static void die(const char *what) {
  fprintf(stderr, "rank %d: %s: %s\n", mr_rank, what, sc_last_error());
  exit(1);
}

static void dcopy(void *dst, const void *src, size_t bytes) {
  if (rt->memcpy_async(dst, src, bytes, NULL) != SC_SUCCESS) die("memcpy_async");
  if (rt->event_record(ev, NULL) != SC_SUCCESS) die("event_record");
  if (sc_dev_event_wait(rt, ev, 60000, "test copy") != SC_SUCCESS) die("event wait");
}

typedef struct tensors {
  void *buf[NT];
  void *block;
  int device;
} tensors_t;

static void *xalloc(int device, size_t bytes) {
  void *p = NULL;
  if (!device) return malloc(bytes);
  if (rt->malloc_device(&p, bytes) != SC_SUCCESS) die("malloc_device");
  return p;
}

/* contiguous: one allocation in forward order (tensor NT-1 first), as
 * frameworks flatten parameters; the counts keep every tensor aligned. */
static void tensors_alloc(tensors_t *ts, const sc_dtype_t *dt, int contiguous, int device) {
  memset(ts, 0, sizeof(*ts));
  ts->device = device;
  size_t total = 0;
  for (int t = 0; t < NT; t++) total += counts[t] * sc_dtype_size(dt[t]);
  if (contiguous) {
    ts->block = xalloc(device, total);
    char *p = ts->block;
    for (int t = NT - 1; t >= 0; t--) {
      ts->buf[t] = p;
      p += counts[t] * sc_dtype_size(dt[t]);
    }
  } else {
    for (int t = 0; t < NT; t++) ts->buf[t] = xalloc(device, counts[t] * sc_dtype_size(dt[t]));
  }
}

static void tensors_free(tensors_t *ts) {
  void (*fr)(void *) = free;
  if (ts->block) {
    if (ts->device)
      rt->free_device(ts->block);
    else
      fr(ts->block);
    return;
  }
  for (int t = 0; t < NT; t++) {
    if (ts->device)
      rt->free_device(ts->buf[t]);
    else
      fr(ts->buf[t]);
  }
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Rank r's gradient of tensor t in round `round`: varied magnitudes (the
 * gTop-k selection matters), integers (exact in every dtype). */
static void fill(void *buf, sc_dtype_t dt, int t, int round) {
  for (size_t i = 0; i < counts[t]; i++) {
    uint64_t z =
        mix(((uint64_t)mr_rank * 131 + (uint64_t)round) * 1000003u + (uint64_t)t * 7919 + i);
    mr_set(buf, i, dt, (double)((int)(z % 257) - 128));
  }
}

/* The policy's name as the library spells it (sc_fusion_policy_name). */
static const char *policy_name(int pol) {
  const char *nm = "?";
  (void)sc_fusion_policy_name((sc_fusion_policy_t)pol, &nm);
  return nm;
}

static void run_case(sc_fusion_policy_t policy, double density, int contiguous) {
  const sc_dtype_t *dt = density > 0 ? sparse_dt : dense_dt;
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.policy = policy;
  cfg.density = density;
  cfg.bucket_bytes = 16384;
  cfg.slice_bytes = 4096;
  cfg.alpha_us = 50; /* a given model: both objects plan the same buckets */
  cfg.beta_us_per_byte = 0.001;
  tensors_t h, d;
  tensors_alloc(&h, dt, contiguous, 0);
  tensors_alloc(&d, dt, contiguous, 1);
  sc_fusion_t *fh = NULL, *fd = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &fh));
  MR_OK(sc_fusion_create(comm, &cfg, &fd));
  if (!fh || !fd) return;
  int id;
  for (int t = 0; t < NT; t++) {
    MR_OK(sc_fusion_add_tensor(fh, h.buf[t], counts[t], dt[t], 10.0 * (t + 1), &id));
    MR_OK(sc_fusion_add_tensor(fd, d.buf[t], counts[t], dt[t], 10.0 * (t + 1), &id));
  }
  MR_OK(sc_fusion_plan(fh));
  MR_OK(sc_fusion_plan(fd));
  int nbh = -1, nbd = -2;
  MR_OK(sc_fusion_num_buckets(fh, &nbh));
  MR_OK(sc_fusion_num_buckets(fd, &nbd));
  mr_checks++;
  if (nbh != nbd)
    mr_fail("%s: host plan %d buckets, device plan %d", policy_name(policy), nbh, nbd);
  for (int round = 0; round < 3; round++) {
    for (int t = 0; t < NT; t++) {
      fill(h.buf[t], dt[t], t, round);
      dcopy(d.buf[t], h.buf[t], counts[t] * sc_dtype_size(dt[t]));
    }
    /* Round 1 skips tensor 2 (an unused parameter); ready order varies by
     * rank. One object's round at a time: both share the communicator, and
     * interleaved launches of two objects would differ between ranks. */
    for (int o = 0; o < 2; o++) {
      sc_fusion_t *f = o ? fd : fh;
      for (int j = 0; j < NT; j++) {
        int t = (j + mr_rank * (round + 1)) % NT;
        if (round == 1 && t == 2)
          MR_OK(sc_fusion_skip(f, t));
        else
          MR_OK(sc_fusion_ready(f, t));
      }
      MR_OK(sc_fusion_wait_all(f));
    }
    for (int t = 0; t < NT; t++) {
      size_t bytes = counts[t] * sc_dtype_size(dt[t]);
      void *back = malloc(bytes);
      dcopy(back, d.buf[t], bytes);
      mr_checks++;
      if (memcmp(back, h.buf[t], bytes)) {
        size_t es = sc_dtype_size(dt[t]), i = 0;
        while (!memcmp((char *)back + i * es, (char *)h.buf[t] + i * es, es)) i++;
        mr_fail("%s density %g %s round %d tensor %d element %zu: device %g, host %g",
                policy_name(policy), density, contiguous ? "contiguous" : "separate", round, t, i,
                mr_get(back, i, dt[t]), mr_get(h.buf[t], i, dt[t]));
      }
      free(back);
    }
  }
  MR_OK(sc_fusion_destroy(fh));
  MR_OK(sc_fusion_destroy(fd));
  tensors_free(&h);
  tensors_free(&d);
}

static void mixed_refused(void) {
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  float hbuf[16];
  void *dbuf = xalloc(1, 64);
  int id;
  MR_OK(sc_fusion_add_tensor(f, hbuf, 16, SC_FLOAT32, 0, &id));
  sc_result_t r = sc_fusion_add_tensor(f, dbuf, 16, SC_FLOAT32, 0, &id);
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG || !strstr(sc_last_error(), "one memory kind"))
    mr_fail("host then device tensor: %s (%s)", sc_strerror(r), sc_last_error());
  MR_OK(sc_fusion_destroy(f));
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  MR_OK(sc_fusion_add_tensor(f, dbuf, 16, SC_FLOAT32, 0, &id));
  r = sc_fusion_add_tensor(f, hbuf, 16, SC_FLOAT32, 0, &id);
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG || !strstr(sc_last_error(), "one memory kind"))
    mr_fail("device then host tensor: %s (%s)", sc_strerror(r), sc_last_error());
  MR_OK(sc_fusion_destroy(f));
  rt->free_device(dbuf);
}

int main(int argc, char **argv) {
  quick = argc > 1 && !strcmp(argv[1], "--quick");
  rt = sc_devrt();
  if (!rt || rt->device_count() < 1) {
    printf("skipped: no device runtime (set SC_DEVRT_STANDIN to the stand-in)\n");
    return 77;
  }
  if (rt->event_create(&ev) != SC_SUCCESS) die("event_create");
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  mixed_refused();
  const sc_fusion_policy_t dense[] = {SC_FUSE_NONE, SC_FUSE_SIZE,   SC_FUSE_MGWFBP,
                                      SC_FUSE_DEAR, SC_FUSE_SINGLE, SC_FUSE_P3};
  /* Sparse: policies whose plan does not depend on a measurement. */
  const sc_fusion_policy_t sparse[] = {SC_FUSE_NONE, SC_FUSE_SIZE, SC_FUSE_SINGLE};
  for (int contiguous = 0; contiguous < 2; contiguous++) {
    for (size_t p = 0; p < sizeof(dense) / sizeof(dense[0]); p++)
      if (!quick || dense[p] == SC_FUSE_SIZE || dense[p] == SC_FUSE_P3)
        run_case(dense[p], 0.0, contiguous);
    for (size_t p = 0; p < sizeof(sparse) / sizeof(sparse[0]); p++)
      if (!quick || sparse[p] == SC_FUSE_SIZE) run_case(sparse[p], 0.05, contiguous);
  }
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  rt->event_destroy(ev);
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
