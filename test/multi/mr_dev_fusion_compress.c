/* SPDX-License-Identifier: BSD-3-Clause */
/* Compressed fusion buckets with device tensors (test/multi/dev_sparse.sh,
 * the device stand-in or CUDA): for FP16, BF16, ONEBIT, POWERSGD and ACPSGD
 * a fusion object over device tensors and one over host tensors of the same
 * data (matrices, vectors, a float64 vector; separate tensors, and for two
 * modes one contiguous block: zero copy) plan the same buckets, travel them
 * the same way (sc_fusion_bucket_compress; a float32 bucket compressed) and
 * run three rounds, a tensor skipped in one; the device results, copied
 * back, must equal the host results bit for bit on every rank. The host
 * engine is the reference here: mr_fusion_compress checks it against the
 * public compressed calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "sparsecoll.h"
#include "test/multi/mr_common.h"

#define NT 6

static sc_comm_t *comm;
static const sc_devrt_t *rt;
static void *ev;

/* rows x cols (cols 0: a vector of rows elements), dtype. */
static const struct {
  size_t rows, cols;
  sc_dtype_t dt;
} shape[NT] = {{16, 16, SC_FLOAT32}, {37, 0, SC_FLOAT32}, {64, 5, SC_FLOAT32},
               {3, 29, SC_FLOAT32},  {11, 0, SC_FLOAT64}, {8, 8, SC_FLOAT32}};

static size_t count_of(int l) {
  return shape[l].cols ? shape[l].rows * shape[l].cols : shape[l].rows;
}

static size_t bytes_of(int l) {
  return count_of(l) * sc_dtype_size(shape[l].dt);
}

static void dcopy(void *dst, const void *src, size_t bytes) {
  MR_OK(rt->memcpy_async(dst, src, bytes, NULL));
  MR_OK(rt->event_record(ev, NULL));
  MR_OK(sc_dev_event_wait(rt, ev, 60000, "test copy"));
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Non-integers of varied magnitude and sign: the rounding of each mode shows. */
static void fill(void *buf, int l, int round) {
  for (size_t i = 0; i < count_of(l); i++) {
    uint64_t z =
        mix(((uint64_t)mr_rank * 131 + (uint64_t)round) * 1000003u + (uint64_t)l * 7919 + i);
    mr_set(buf, i, shape[l].dt, ((double)(z % 100003) - 50001.0) / (1.0 + (double)(z % 7)) / 997.0);
  }
}

/* contiguous: every tensor in one allocation (device or host), in order. */
static void place(void **t, void **block, int device, int contiguous) {
  size_t total = 0;
  for (int l = 0; l < NT; l++) total += bytes_of(l);
  *block = NULL;
  if (contiguous) {
    if (device)
      MR_OK(rt->malloc_device(block, total));
    else
      *block = malloc(total);
  }
  char *p = *block;
  for (int l = 0; l < NT; l++) {
    if (contiguous) {
      t[l] = p;
      p += bytes_of(l);
    } else if (device) {
      MR_OK(rt->malloc_device(&t[l], bytes_of(l)));
    } else {
      t[l] = malloc(bytes_of(l));
    }
  }
}

static void unplace(void **t, void *block, int device) {
  void (*fr)(void *) = free;
  for (int l = 0; l < NT && !block; l++) {
    if (device)
      rt->free_device(t[l]);
    else
      fr(t[l]);
  }
  if (block && device) rt->free_device(block);
  if (block && !device) fr(block);
}

static sc_fusion_t *make(const sc_fusion_config_t *cfg, void **t, int *id) {
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, cfg, &f));
  for (int l = 0; l < NT && f; l++) {
    if (shape[l].cols)
      MR_OK(sc_fusion_add_matrix(f, t[l], shape[l].rows, shape[l].cols, shape[l].dt, 10.0, &id[l]));
    else
      MR_OK(sc_fusion_add_tensor(f, t[l], shape[l].rows, shape[l].dt, 10.0, &id[l]));
  }
  if (f) MR_OK(sc_fusion_plan(f));
  return f;
}

static void run_mode(sc_compress_t mode, sc_fusion_policy_t policy, int contiguous,
                     const char *name) {
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.policy = policy;
  cfg.compress = mode;
  cfg.lowrank = 2;
  cfg.seed = 777;
  cfg.bucket_bytes = 1500; /* several buckets, several tensors in some */
  cfg.alpha_us = 50;       /* a given model: both objects plan the same buckets */
  cfg.beta_us_per_byte = 0.001;
  void *h[NT], *d[NT], *hb, *db;
  int hid[NT], did[NT];
  place(h, &hb, 0, contiguous);
  place(d, &db, 1, contiguous);
  sc_fusion_t *fh = make(&cfg, h, hid), *fd = make(&cfg, d, did);
  if (!fh || !fd) return;
  int nbh = -1, nbd = -2, compressed = 0;
  MR_OK(sc_fusion_num_buckets(fh, &nbh));
  MR_OK(sc_fusion_num_buckets(fd, &nbd));
  mr_checks++;
  if (nbh != nbd) mr_fail("%s: host plan %d buckets, device plan %d", name, nbh, nbd);
  for (int l = 0; l < NT; l++) {
    int bh = -1, bd = -2;
    sc_compress_t ch = SC_COMPRESS_AUTO, cd = SC_COMPRESS_NONE;
    MR_OK(sc_fusion_bucket_of(fh, hid[l], &bh));
    MR_OK(sc_fusion_bucket_of(fd, did[l], &bd));
    MR_OK(sc_fusion_bucket_compress(fh, bh, &ch));
    MR_OK(sc_fusion_bucket_compress(fd, bd, &cd));
    mr_checks++;
    if (bh != bd || ch != cd)
      mr_fail("%s: tensor %d: host bucket %d travels as %d, device bucket %d as %d", name, l, bh,
              (int)ch, bd, (int)cd);
    compressed |= cd == mode;
  }
  mr_checks++;
  if (!compressed) mr_fail("%s: no bucket travels compressed", name);
  for (int round = 0; round < 3; round++) {
    for (int l = 0; l < NT; l++) {
      fill(h[l], l, round);
      dcopy(d[l], h[l], bytes_of(l));
    }
    /* One object's round at a time: both share the communicator. */
    for (int o = 0; o < 2; o++) {
      sc_fusion_t *f = o ? fd : fh;
      for (int j = NT - 1; j >= 0; j--) {
        int l = (j + mr_rank) % NT;
        if (round == 1 && l == 1)
          MR_OK(sc_fusion_skip(f, o ? did[l] : hid[l]));
        else
          MR_OK(sc_fusion_ready(f, o ? did[l] : hid[l]));
      }
      MR_OK(sc_fusion_wait_all(f));
    }
    for (int l = 0; l < NT; l++) {
      void *back = malloc(bytes_of(l));
      dcopy(back, d[l], bytes_of(l));
      mr_checks++;
      if (memcmp(back, h[l], bytes_of(l))) {
        size_t es = sc_dtype_size(shape[l].dt), i = 0;
        while (!memcmp((char *)back + i * es, (char *)h[l] + i * es, es)) i++;
        mr_fail("%s round %d tensor %d element %zu: device %.9g, host %.9g", name, round, l, i,
                mr_get(back, i, shape[l].dt), mr_get(h[l], i, shape[l].dt));
      }
      /* Every rank the same bits. */
      uint64_t x = 1469598103934665603ull, lo = 0, hi = 0;
      for (size_t b = 0; b < bytes_of(l); b++)
        x = (x ^ ((const uint8_t *)back)[b]) * 1099511628211ull;
      MR_OK(sc_allreduce(&x, &lo, 1, SC_UINT64, SC_MIN, comm));
      MR_OK(sc_allreduce(&x, &hi, 1, SC_UINT64, SC_MAX, comm));
      mr_checks++;
      if (lo != hi) mr_fail("%s round %d: tensor %d differs between ranks", name, round, l);
      free(back);
    }
  }
  MR_OK(sc_fusion_destroy(fh));
  MR_OK(sc_fusion_destroy(fd));
  unplace(h, hb, 0);
  unplace(d, db, 1);
  if (mr_rank == 0) printf("%s: %d buckets, 3 rounds bit for bit\n", name, nbd);
}

int main(void) {
  rt = sc_devrt();
  if (!rt || rt->device_count() < 1) {
    printf("skipped: no device runtime (set SC_DEVRT_STANDIN to the stand-in)\n");
    return 77;
  }
  if (rt->event_create(&ev) != SC_SUCCESS) return 1;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  run_mode(SC_COMPRESS_FP16, SC_FUSE_SIZE, 0, "fp16 size");
  run_mode(SC_COMPRESS_BF16, SC_FUSE_NONE, 1, "bf16 wfbp contiguous");
  run_mode(SC_COMPRESS_ONEBIT, SC_FUSE_SIZE, 0, "onebit size");
  run_mode(SC_COMPRESS_POWERSGD, SC_FUSE_SIZE, 1, "powersgd size contiguous");
  run_mode(SC_COMPRESS_ACPSGD, SC_FUSE_NONE, 0, "acpsgd wfbp");
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  rt->event_destroy(ev);
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
