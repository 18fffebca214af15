/* SPDX-License-Identifier: BSD-3-Clause */
/* Bucket fusion with compression (sc_fusion_config_t.compress): for FP16,
 * BF16, ONEBIT, POWERSGD and ACPSGD under SC_FUSE_SIZE and SC_FUSE_NONE, a
 * model of matrices (sc_fusion_add_matrix: square, tall, wide, a 1 x n row),
 * vectors and a float64 vector, three rounds with ready calls in reverse
 * order. Every round's result must be the same bits on every rank and equal
 * what the public calls give on their own (bit for bit; low rank within
 * rounding, as its bucket sums every matrix's factor in one all-reduce): each bucket's tensors
 * concatenated in registration order through sc_allreduce_compressed (AVG) or sc_onebit_allreduce
 * with a state of its own; each matrix through sc_lowrank_allreduce with its own state (same seed,
 * error feedback) and the bucket's other tensors through one sc_allreduce (AVG); a bucket that is
 * not float32 (and a low-rank bucket without a matrix) densely. Also: the fp16 and bf16 results
 * within their rounding of the exact average; sc_fusion_bucket_compress; AUTO's choices (the same
 * on every rank; on a slow network every float32 bucket compressed, on a fast one none; with a
 * calibrated model, after its trial of every candidate, one of them) and its results as
 * the chosen modes'; the plan leaves the gradients as they were (AUTO's trial runs on scratch);
 * AUTO's buckets within 2 MiB with top-k a candidate; the refusals (a
 * dense-only policy, TOPK without density, lowrank 0, density with another mode). Run under sc-run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/multi/mr_common.h"

#define NT     7
#define ROUNDS 3

static sc_comm_t *comm;

/* rows x cols (cols 0: a vector of rows elements), dtype. */
static const struct {
  size_t rows, cols;
  sc_dtype_t dt;
} shape[NT] = {{16, 16, SC_FLOAT32}, {37, 0, SC_FLOAT32}, {64, 5, SC_FLOAT32}, {3, 29, SC_FLOAT32},
               {1, 40, SC_FLOAT32},  {11, 0, SC_FLOAT64}, {8, 8, SC_FLOAT32}};

static size_t count_of(int l) {
  return shape[l].cols ? shape[l].rows * shape[l].cols : shape[l].rows;
}

static double input(int rank, int round, int l, size_t i) {
  /* Varied magnitudes and signs, a different matrix per rank and round. */
  double x = sin(0.37 * (double)(i + 1) * (double)(l + 2) + 1.3 * rank + 0.71 * round);
  return x * (1.0 + 0.25 * (double)((i * 7 + (size_t)l) % 5));
}

static void fill(void *buf, int l, int rank, int round) {
  for (size_t i = 0; i < count_of(l); i++) {
    if (shape[l].dt == SC_FLOAT64)
      ((double *)buf)[i] = input(rank, round, l, i);
    else
      ((float *)buf)[i] = (float)input(rank, round, l, i);
  }
}

static size_t bytes_of(int l) {
  return count_of(l) * sc_dtype_size(shape[l].dt);
}

/* The reference of one bucket (tensors [a, b)), from the inputs in ref[]. */
typedef struct {
  sc_onebit_t *ob[NT];  /* per bucket, by its first tensor */
  sc_lowrank_t *lr[NT]; /* per matrix */
} refstate_t;

/* mode[j]: what bucket j travels as (sc_fusion_bucket_compress). */
static void reference(const sc_compress_t *bmode, const int *bucket, void **ref, refstate_t *rs,
                      int lowrank) {
  for (int a = 0; a < NT;) {
    int b = a;
    while (b < NT && bucket[b] == bucket[a]) b++;
    const sc_compress_t mode = bmode[bucket[a]];
    const sc_dtype_t dt = shape[a].dt;
    size_t n = 0;
    for (int l = a; l < b; l++) n += count_of(l);
    const size_t es = sc_dtype_size(dt);
    int lowr = mode == SC_COMPRESS_POWERSGD || mode == SC_COMPRESS_ACPSGD;
    char *cat = malloc(n * es);
    size_t at = 0;
    for (int l = a; l < b; l++) {
      if (lowr && shape[l].cols && shape[l].rows > 1 && shape[l].cols > 1) {
        if (!rs->lr[l])
          MR_OK(sc_lowrank_create(shape[l].rows, shape[l].cols, dt, lowrank,
                                  mode == SC_COMPRESS_POWERSGD ? SC_LOWRANK_POWERSGD
                                                               : SC_LOWRANK_ACPSGD,
                                  1, 12345, &rs->lr[l]));
        MR_OK(sc_lowrank_allreduce(ref[l], rs->lr[l], comm));
        continue;
      }
      memcpy(cat + at, ref[l], bytes_of(l));
      at += bytes_of(l);
    }
    const size_t m = at / es;
    if (dt != SC_FLOAT32 || lowr || mode == SC_COMPRESS_NONE) {
      MR_OK(sc_allreduce(cat, cat, m, dt, SC_AVG, comm));
    } else if (mode == SC_COMPRESS_ONEBIT) {
      if (!rs->ob[a]) MR_OK(sc_onebit_create(m, dt, SC_ONEBIT_SCALED, comm, &rs->ob[a]));
      MR_OK(sc_onebit_allreduce(cat, rs->ob[a], comm));
    } else {
      MR_OK(sc_allreduce_compressed(cat, cat, m, dt, SC_AVG,
                                    mode == SC_COMPRESS_FP16 ? SC_FLOAT16 : SC_BFLOAT16, comm));
    }
    at = 0;
    for (int l = a; l < b; l++) {
      if (lowr && shape[l].cols && shape[l].rows > 1 && shape[l].cols > 1) continue;
      memcpy(ref[l], cat + at, bytes_of(l));
      at += bytes_of(l);
    }
    free(cat);
    a = b;
  }
}

/* beta: the model's us per byte (AUTO prices the buckets with it); 0: the
 * model calibrated, and AUTO's trial run. */
static void run_mode(sc_compress_t mode, sc_fusion_policy_t policy, const char *name, double beta) {
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.policy = policy;
  cfg.compress = mode;
  cfg.lowrank = 2;
  cfg.seed = 12345;
  cfg.bucket_bytes = 1500; /* several buckets, several tensors in some */
  cfg.alpha_us = beta > 0 ? 50 : 0;
  cfg.beta_us_per_byte = beta;
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  if (!f) return;
  void *t[NT], *ref[NT];
  int id[NT], bucket[NT];
  for (int l = 0; l < NT; l++) {
    t[l] = malloc(bytes_of(l));
    ref[l] = malloc(bytes_of(l));
    if (shape[l].cols)
      MR_OK(sc_fusion_add_matrix(f, t[l], shape[l].rows, shape[l].cols, shape[l].dt, 10.0, &id[l]));
    else
      MR_OK(sc_fusion_add_tensor(f, t[l], shape[l].rows, shape[l].dt, 10.0, &id[l]));
  }
  for (int l = 0; l < NT; l++) {
    fill(t[l], l, mr_rank, 99);
    memcpy(ref[l], t[l], bytes_of(l));
  }
  MR_OK(sc_fusion_plan(f));
  for (int l = 0; l < NT; l++) {
    mr_checks++;
    if (memcmp(t[l], ref[l], bytes_of(l)) != 0) mr_fail("%s: the plan changed tensor %d", name, l);
  }
  int nb = 0;
  MR_OK(sc_fusion_num_buckets(f, &nb));
  for (int l = 0; l < NT; l++) MR_OK(sc_fusion_bucket_of(f, id[l], &bucket[l]));
  /* What each bucket travels as. */
  const int lowr = mode == SC_COMPRESS_POWERSGD || mode == SC_COMPRESS_ACPSGD;
  sc_compress_t bmode[NT];
  for (int a = 0; a < NT;) {
    int b = a, has_matrix = 0;
    while (b < NT && bucket[b] == bucket[a]) {
      has_matrix |= shape[b].cols && shape[b].rows > 1 && shape[b].cols > 1;
      b++;
    }
    sc_compress_t want = mode, got = SC_COMPRESS_AUTO;
    if (shape[a].dt != SC_FLOAT32 && !lowr) want = SC_COMPRESS_NONE;
    if (lowr && !has_matrix) want = SC_COMPRESS_NONE;
    MR_OK(sc_fusion_bucket_compress(f, bucket[a], &got));
    bmode[bucket[a]] = got;
    if (mode == SC_COMPRESS_AUTO) {
      /* A slow network: a float32 bucket compresses (fp16, or ACP-SGD with
       * a matrix), a float64 vector has only dense. A fast one: dense. */
      const int f32 = shape[a].dt == SC_FLOAT32;
      const int cand = got == SC_COMPRESS_FP16 || (has_matrix && got == SC_COMPRESS_ACPSGD);
      int ok = got == SC_COMPRESS_NONE;
      if (beta >= 1.0 && f32) ok = cand;
      /* Calibrated: whatever is cheapest here, among the candidates. */
      if (beta == 0.0) ok = ok || (f32 && cand);
      if (!ok)
        mr_fail("%s: bucket %d (tensors %d-%d, %s%s): auto chose %d", name, bucket[a], a, b - 1,
                shape[a].dt == SC_FLOAT32 ? "float32" : "float64", has_matrix ? ", a matrix" : "",
                (int)got);
    } else if (got != want) {
      mr_fail("%s: bucket %d (tensors %d-%d): sc_fusion_bucket_compress %d, want %d", name,
              bucket[a], a, b - 1, (int)got, (int)want);
    }
    a = b;
  }
  /* Every rank's plan made the same choices. */
  int mine[NT], all_min[NT], all_max[NT];
  for (int j = 0; j < NT; j++) mine[j] = j < nb ? (int)bmode[j] : 0;
  MR_OK(sc_allreduce(mine, all_min, NT, SC_INT32, SC_MIN, comm));
  MR_OK(sc_allreduce(mine, all_max, NT, SC_INT32, SC_MAX, comm));
  mr_checks++;
  if (memcmp(all_min, all_max, sizeof(all_min)) != 0)
    mr_fail("%s: the ranks' buckets travel differently", name);
  refstate_t rs;
  memset(&rs, 0, sizeof(rs));
  for (int round = 0; round < ROUNDS; round++) {
    for (int l = 0; l < NT; l++) {
      fill(t[l], l, mr_rank, round);
      memcpy(ref[l], t[l], bytes_of(l));
    }
    for (int l = NT - 1; l >= 0; l--) MR_OK(sc_fusion_ready(f, id[l]));
    MR_OK(sc_fusion_wait_all(f));
    reference(bmode, bucket, ref, &rs, cfg.lowrank);
    for (int l = 0; l < NT; l++) {
      mr_checks++;
      const sc_compress_t bm = bmode[bucket[l]];
      /* A low-rank bucket sums every matrix's factor in one all-reduce, the
       * reference one per matrix: the same sums, possibly in another order
       * (another algorithm for another size), so equal within rounding. */
      const int lowr_b = bm == SC_COMPRESS_POWERSGD || bm == SC_COMPRESS_ACPSGD;
      double scale = 0;
      for (size_t i = 0; i < count_of(l); i++)
        if (fabs(mr_get(ref[l], i, shape[l].dt)) > scale)
          scale = fabs(mr_get(ref[l], i, shape[l].dt));
      const double near = lowr_b ? 1e-4 * scale + 1e-12 : 0;
      size_t at = 0;
      while (at < count_of(l) &&
             fabs(mr_get(t[l], at, shape[l].dt) - mr_get(ref[l], at, shape[l].dt)) <= near)
        at++;
      if (at < count_of(l) || (!lowr_b && memcmp(t[l], ref[l], bytes_of(l)) != 0))
        mr_fail("%s round %d: tensor %d (bucket %d) differs from the public calls at %zu: %g vs "
                "%g (tolerance %g)",
                name, round, l, bucket[l], at, at < count_of(l) ? mr_get(t[l], at, shape[l].dt) : 0,
                at < count_of(l) ? mr_get(ref[l], at, shape[l].dt) : 0, near);
      /* Every rank the same bits. */
      uint64_t h = 1469598103934665603ull, hmin = 0, hmax = 0;
      for (size_t b = 0; b < bytes_of(l); b++)
        h = (h ^ ((const uint8_t *)t[l])[b]) * 1099511628211ull;
      MR_OK(sc_allreduce(&h, &hmin, 1, SC_UINT64, SC_MIN, comm));
      MR_OK(sc_allreduce(&h, &hmax, 1, SC_UINT64, SC_MAX, comm));
      mr_checks++;
      if (hmin != hmax) mr_fail("%s round %d: tensor %d differs between ranks", name, round, l);
      /* The half-precision wire: within its rounding of the exact average. */
      if (bm == SC_COMPRESS_FP16 || bm == SC_COMPRESS_BF16) {
        const double ulp = bm == SC_COMPRESS_FP16 ? 1.0 / 1024 : 1.0 / 128;
        for (size_t i = 0; i < count_of(l); i++) {
          double exact = 0, mag = 0;
          for (int r = 0; r < mr_nranks; r++) {
            exact += input(r, round, l, i);
            mag += fabs(input(r, round, l, i));
          }
          exact /= mr_nranks;
          /* A rounding per step of the exchange and one of the input, each
           * at most half an ulp of the partial's magnitude. */
          const double tol = (mr_nranks + 2) * ulp * (mag + 1e-30) + 1e-6;
          const double got = mr_get(t[l], i, shape[l].dt);
          if (fabs(got - exact) > tol) {
            mr_fail("%s round %d: tensor %d element %zu = %.9g, exact average %.9g (tol %.3g)",
                    name, round, l, i, got, exact, tol);
            break;
          }
        }
      }
    }
  }
  MR_OK(sc_fusion_destroy(f));
  for (int l = 0; l < NT; l++) {
    free(t[l]);
    free(ref[l]);
    if (rs.ob[l]) sc_onebit_destroy(rs.ob[l]);
    if (rs.lr[l]) sc_lowrank_destroy(rs.lr[l]);
  }
  if (mr_rank == 0) printf("%s: %d buckets, %d rounds checked\n", name, nb, ROUNDS);
}

/* AUTO with top-k among its candidates prices top-k by the sparse model,
 * measured up to 2 MiB: under MG-WFBP with a startup that merges everything,
 * no bucket may pass 2 MiB (twelve 512 KiB tensors: three buckets of four).
 * Calibrated (the model measured here, and AUTO's trial of top-k run): every
 * rank's buckets travel alike and the plan leaves the gradients as they were. */
static void auto_cap(int calibrated) {
  enum { N = 12, LEN = 131072 };
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.policy = SC_FUSE_MGWFBP;
  cfg.compress = SC_COMPRESS_AUTO;
  cfg.density = 0.01;
  cfg.lowrank = 2;
  cfg.alpha_us = calibrated ? 0 : 1e9;
  cfg.beta_us_per_byte = calibrated ? 0 : 0.001;
  const char *name = calibrated ? "auto cap, calibrated" : "auto cap";
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  if (!f) return;
  float *buf = calloc((size_t)N * LEN, sizeof(float));
  for (size_t i = 0; i < (size_t)N * LEN; i++) buf[i] = (float)(i % 1009) - 504.0f + 0.5f * mr_rank;
  int id[N];
  for (int l = 0; l < N; l++)
    MR_OK(sc_fusion_add_tensor(f, buf + (size_t)l * LEN, LEN, SC_FLOAT32, 10.0, &id[l]));
  MR_OK(sc_fusion_plan(f));
  size_t changed = 0;
  for (size_t i = 0; i < (size_t)N * LEN; i++)
    changed += buf[i] != (float)(i % 1009) - 504.0f + 0.5f * mr_rank;
  mr_checks++;
  if (changed) mr_fail("%s: the plan changed %zu gradient elements", name, changed);
  int nb = 0;
  MR_OK(sc_fusion_num_buckets(f, &nb));
  size_t bytes[N] = {0};
  int mine[N] = {0}, lo[N], hi[N];
  for (int l = 0; l < N; l++) {
    int b = -1;
    MR_OK(sc_fusion_bucket_of(f, id[l], &b));
    if (b >= 0 && b < N) bytes[b] += LEN * sizeof(float);
    sc_compress_t what = SC_COMPRESS_AUTO;
    if (b >= 0) MR_OK(sc_fusion_bucket_compress(f, b, &what));
    mine[l] = (int)what;
  }
  MR_OK(sc_allreduce(mine, lo, N, SC_INT32, SC_MIN, comm));
  MR_OK(sc_allreduce(mine, hi, N, SC_INT32, SC_MAX, comm));
  mr_checks += 2;
  if (memcmp(lo, hi, sizeof(lo)) != 0) mr_fail("%s: the ranks' buckets travel differently", name);
  /* The startup of 1e9 us merges all it may; a calibrated model as it finds. */
  if (!calibrated && nb != 3) mr_fail("%s: %d buckets of twelve 512 KiB tensors, want 3", name, nb);
  for (int b = 0; b < N; b++)
    if (bytes[b] > ((size_t)2 << 20)) mr_fail("%s: bucket %d holds %zu bytes", name, b, bytes[b]);
  MR_OK(sc_fusion_destroy(f));
  free(buf);
}

static void refusal(const char *what, sc_result_t want, void (*set)(sc_fusion_config_t *)) {
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  set(&cfg);
  sc_fusion_t *f = NULL;
  sc_result_t r = sc_fusion_create(comm, &cfg, &f);
  mr_checks++;
  if (r != want) mr_fail("%s: %s, want %s", what, sc_strerror(r), sc_strerror(want));
  if (f) sc_fusion_destroy(f);
}

static void set_dear(sc_fusion_config_t *c) {
  c->policy = SC_FUSE_DEAR;
  c->compress = SC_COMPRESS_FP16;
}
static void set_topk0(sc_fusion_config_t *c) {
  c->compress = SC_COMPRESS_TOPK;
}
static void set_rank0(sc_fusion_config_t *c) {
  c->compress = SC_COMPRESS_ACPSGD;
  c->lowrank = 0;
}
static void set_both(sc_fusion_config_t *c) {
  c->compress = SC_COMPRESS_FP16;
  c->density = 0.1;
}
static void set_unknown(sc_fusion_config_t *c) {
  c->compress = (sc_compress_t)99;
}

int main(void) {
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  static const struct {
    sc_compress_t mode;
    const char *name;
  } modes[] = {{SC_COMPRESS_FP16, "fp16"},
               {SC_COMPRESS_BF16, "bf16"},
               {SC_COMPRESS_ONEBIT, "onebit"},
               {SC_COMPRESS_POWERSGD, "powersgd"},
               {SC_COMPRESS_ACPSGD, "acpsgd"}};
  for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
    char name[64];
    snprintf(name, sizeof(name), "%s size", modes[m].name);
    run_mode(modes[m].mode, SC_FUSE_SIZE, name, 0.001);
    snprintf(name, sizeof(name), "%s wfbp", modes[m].name);
    run_mode(modes[m].mode, SC_FUSE_NONE, name, 0.001);
  }
  run_mode(SC_COMPRESS_AUTO, SC_FUSE_SIZE, "auto size, slow network", 1.0);
  run_mode(SC_COMPRESS_AUTO, SC_FUSE_NONE, "auto wfbp, slow network", 1.0);
  run_mode(SC_COMPRESS_AUTO, SC_FUSE_SIZE, "auto size, fast network", 1e-9);
  run_mode(SC_COMPRESS_AUTO, SC_FUSE_SIZE, "auto size, calibrated", 0.0);
  auto_cap(0);
  auto_cap(1);
  refusal("SC_FUSE_DEAR with fp16", SC_ERR_UNSUPPORTED, set_dear);
  refusal("SC_COMPRESS_TOPK without density", SC_ERR_INVALID_ARG, set_topk0);
  refusal("lowrank 0", SC_ERR_INVALID_ARG, set_rank0);
  refusal("density with fp16", SC_ERR_INVALID_ARG, set_both);
  refusal("compress 99", SC_ERR_INVALID_ARG, set_unknown);
  sc_comm_destroy(comm);
  printf("rank %d of %d: fusion with compression: %ld checks, %ld failures\n", mr_rank, mr_nranks,
         mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
