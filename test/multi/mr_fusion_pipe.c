/* SPDX-License-Identifier: BSD-3-Clause */
/* PowerSGD fusion buckets overlapped on the worker (bucket b's Q round in
 * flight while bucket b+1's P round is computed and issued) against the
 * same arithmetic one bucket at a time, bit for bit: for PowerSGD and
 * ACP-SGD (one bucket at a time either way; rank 2, error feedback) a model of matrices (square,
 * tall, wide, a 1 x n row, a float64 one) and vectors in several buckets, four rounds, two with
 * every tensor ready in reverse order before sc_fusion_wait_all and two bucket by bucket, each
 * bucket waited for before the next is readied (the worker must not hold a finished bucket for a
 * successor). Every round of the overlapped fusion and of one planned with SC_FUSION_PIPELINE=0
 * must equal, bit for bit, a reference written here from the low-rank phases: per bucket, each
 * round's factors of its matrices concatenated and summed in one sc_allreduce, its other tensors in
 * one more (AVG), in registration order. Run under sc-run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/compress/compress.h"
#include "test/multi/mr_common.h"

#define NT     10
#define ROUNDS 4

static sc_comm_t *comm;

/* rows x cols (cols 0: a vector of rows elements), dtype. */
static const struct {
  size_t rows, cols;
  sc_dtype_t dt;
} shape[NT] = {{24, 16, SC_FLOAT32}, {40, 0, SC_FLOAT32},  {16, 9, SC_FLOAT32}, {5, 31, SC_FLOAT32},
               {1, 13, SC_FLOAT32},  {12, 12, SC_FLOAT32}, {7, 0, SC_FLOAT32},  {20, 6, SC_FLOAT64},
               {9, 7, SC_FLOAT64},   {33, 3, SC_FLOAT32}};

static int is_matrix(int l) {
  return shape[l].cols > 1 && shape[l].rows > 1;
}

static size_t count_of(int l) {
  return shape[l].cols ? shape[l].rows * shape[l].cols : shape[l].rows;
}

static size_t bytes_of(int l) {
  return count_of(l) * sc_dtype_size(shape[l].dt);
}

static void fill(void *buf, int l, int rank, int round) {
  for (size_t i = 0; i < count_of(l); i++) {
    double x = sin(0.29 * (double)(i + 1) * (double)(l + 3) + 1.7 * rank + 0.53 * round);
    x *= 1.0 + 0.5 * (double)((i * 5 + (size_t)l) % 7);
    if (shape[l].dt == SC_FLOAT64)
      ((double *)buf)[i] = x;
    else
      ((float *)buf)[i] = (float)x;
  }
}

/* One round of the reference for the tensors of one bucket (ids in lst). */
static void ref_bucket(const int *lst, int n, void **g, sc_lowrank_t **lr, int lowrank) {
  int rounds = 0;
  for (int j = 0; j < n; j++)
    if (lowrank && is_matrix(lst[j]) && sc_lowrank_rounds(lr[lst[j]]) > rounds)
      rounds = sc_lowrank_rounds(lr[lst[j]]);
  size_t cap = 0;
  for (int j = 0; j < n; j++) cap += bytes_of(lst[j]) + 64 * sizeof(double);
  char *cat = malloc(cap);
  for (int k = 0; k < rounds; k++) {
    size_t at = 0, es = 4;
    sc_dtype_t dt = SC_FLOAT32;
    for (int j = 0; j < n; j++) {
      const int l = lst[j];
      if (!is_matrix(l)) continue;
      void *fac;
      size_t cnt;
      sc_lowrank_before(lr[l], g[l], k, &fac, &cnt, &dt);
      es = sc_dtype_size(dt);
      memcpy(cat + at, fac, cnt * es);
      at += cnt * es;
    }
    MR_OK(sc_allreduce(cat, cat, at / es, dt, SC_SUM, comm));
    at = 0;
    for (int j = 0; j < n; j++) {
      const int l = lst[j];
      if (!is_matrix(l)) continue;
      void *fac;
      size_t cnt;
      sc_lowrank_factor(lr[l], k, &fac, &cnt, &dt);
      memcpy(fac, cat + at, cnt * es);
      at += cnt * es;
    }
  }
  size_t at = 0;
  for (int j = 0; j < n; j++) {
    const int l = lst[j];
    if (lowrank && is_matrix(l)) continue;
    memcpy(cat + at, g[l], bytes_of(l));
    at += bytes_of(l);
  }
  if (at)
    MR_OK(sc_allreduce(cat, cat, at / sc_dtype_size(shape[lst[0]].dt), shape[lst[0]].dt, SC_AVG,
                       comm));
  at = 0;
  for (int j = 0; j < n; j++) {
    const int l = lst[j];
    if (lowrank && is_matrix(l)) {
      sc_lowrank_finish(lr[l], g[l], mr_nranks);
      continue;
    }
    memcpy(g[l], cat + at, bytes_of(l));
    at += bytes_of(l);
  }
  free(cat);
}

typedef struct {
  sc_fusion_t *f;
  void *t[NT];
  int id[NT], bucket[NT], nb;
} fus_t;

static void fus_make(fus_t *u, sc_compress_t mode, int pipeline) {
  /* Set either way: an inherited 0 must not make both fusions alike. */
  setenv("SC_FUSION_PIPELINE", pipeline ? "1" : "0", 1);
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.policy = SC_FUSE_SIZE;
  cfg.compress = mode;
  cfg.lowrank = 2;
  cfg.seed = 777;
  cfg.bucket_bytes = 300; /* several buckets, several tensors in some */
  cfg.alpha_us = 50;
  cfg.beta_us_per_byte = 0.001;
  u->f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &u->f));
  for (int l = 0; l < NT; l++) {
    u->t[l] = malloc(bytes_of(l));
    if (shape[l].cols)
      MR_OK(sc_fusion_add_matrix(u->f, u->t[l], shape[l].rows, shape[l].cols, shape[l].dt, 10.0,
                                 &u->id[l]));
    else
      MR_OK(sc_fusion_add_tensor(u->f, u->t[l], shape[l].rows, shape[l].dt, 10.0, &u->id[l]));
  }
  MR_OK(sc_fusion_plan(u->f));
  unsetenv("SC_FUSION_PIPELINE");
  MR_OK(sc_fusion_num_buckets(u->f, &u->nb));
  for (int l = 0; l < NT; l++) MR_OK(sc_fusion_bucket_of(u->f, u->id[l], &u->bucket[l]));
}

static void fus_round(fus_t *u, int round) {
  for (int l = 0; l < NT; l++) fill(u->t[l], l, mr_rank, round);
  if (round % 2 == 0) {
    for (int l = NT - 1; l >= 0; l--) MR_OK(sc_fusion_ready(u->f, u->id[l]));
    MR_OK(sc_fusion_wait_all(u->f));
    return;
  }
  for (int b = 0; b < u->nb; b++) {
    for (int l = NT - 1; l >= 0; l--)
      if (u->bucket[l] == b) MR_OK(sc_fusion_ready(u->f, u->id[l]));
    for (int l = 0; l < NT; l++)
      if (u->bucket[l] == b) MR_OK(sc_fusion_wait(u->f, u->id[l]));
  }
}

static void fus_free(fus_t *u) {
  MR_OK(sc_fusion_destroy(u->f));
  for (int l = 0; l < NT; l++) free(u->t[l]);
}

static void run_mode(sc_compress_t mode, const char *name) {
  fus_t pipe, seq;
  fus_make(&pipe, mode, 1);
  fus_make(&seq, mode, 0);
  if (!pipe.f || !seq.f) return;
  /* The plan must give what the test claims to cover: consecutive low-rank
   * buckets, and the same buckets in both fusions. */
  int lowr = 0, consecutive = 0, prev = 0;
  int lowr_of[NT];
  for (int b = 0; b < pipe.nb; b++) {
    sc_compress_t c = SC_COMPRESS_NONE;
    MR_OK(sc_fusion_bucket_compress(pipe.f, b, &c));
    lowr_of[b] = c == mode;
    lowr += lowr_of[b];
    consecutive += prev && lowr_of[b];
    prev = lowr_of[b];
  }
  mr_checks++;
  if (lowr < 3 || consecutive < 2 || pipe.nb != seq.nb ||
      memcmp(pipe.bucket, seq.bucket, sizeof(pipe.bucket)) != 0)
    mr_fail("%s: %d buckets, %d low-rank, %d after another: the plan covers too little", name,
            pipe.nb, lowr, consecutive);
  sc_lowrank_t *lr[NT] = {0};
  void *ref[NT];
  for (int l = 0; l < NT; l++) {
    ref[l] = malloc(bytes_of(l));
    if (is_matrix(l))
      MR_OK(sc_lowrank_create(
          shape[l].rows, shape[l].cols, shape[l].dt, 2,
          mode == SC_COMPRESS_POWERSGD ? SC_LOWRANK_POWERSGD : SC_LOWRANK_ACPSGD, 1, 777, &lr[l]));
  }
  for (int round = 0; round < ROUNDS; round++) {
    fus_round(&pipe, round);
    fus_round(&seq, round);
    for (int b = 0; b < pipe.nb; b++) {
      int lst[NT], n = 0;
      for (int l = 0; l < NT; l++)
        if (pipe.bucket[l] == b) {
          lst[n++] = l;
          fill(ref[l], l, mr_rank, round);
        }
      if (n) ref_bucket(lst, n, ref, lr, lowr_of[b]);
    }
    for (int l = 0; l < NT; l++) {
      mr_checks += 2;
      const struct {
        const char *what;
        const void *got;
      } runs[2] = {{"overlapped", pipe.t[l]}, {"one bucket at a time", seq.t[l]}};
      for (int k = 0; k < 2; k++) {
        if (memcmp(runs[k].got, ref[l], bytes_of(l)) == 0) continue;
        size_t at = 0;
        while (at < count_of(l) &&
               mr_get(runs[k].got, at, shape[l].dt) == mr_get(ref[l], at, shape[l].dt))
          at++;
        mr_fail("%s round %d, %s: tensor %d (bucket %d) differs from the reference at %zu: %.17g "
                "vs %.17g",
                name, round, runs[k].what, l, pipe.bucket[l], at,
                mr_get(runs[k].got, at, shape[l].dt), mr_get(ref[l], at, shape[l].dt));
      }
    }
  }
  for (int l = 0; l < NT; l++) {
    free(ref[l]);
    if (lr[l]) sc_lowrank_destroy(lr[l]);
  }
  fus_free(&pipe);
  fus_free(&seq);
  if (mr_rank == 0)
    printf("%s: %d buckets (%d low-rank), %d rounds checked\n", name, pipe.nb, lowr, ROUNDS);
}

int main(void) {
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  run_mode(SC_COMPRESS_POWERSGD, "powersgd");
  run_mode(SC_COMPRESS_ACPSGD, "acpsgd");
  sc_comm_destroy(comm);
  printf("rank %d of %d: overlapped low-rank buckets: %ld checks, %ld failures\n", mr_rank,
         mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
