/* SPDX-License-Identifier: BSD-3-Clause */
/* Bucket fusion on N ranks (run under sc-run): every policy, with separate
 * and with contiguous (zero-copy) tensors, gives each tensor the average over
 * ranks of every rank's input, over several rounds, whatever order (and
 * thread) each rank calls ready in; a second ready before the wait is
 * refused; the plan is checked
 * for shape; mismatched registrations fail with SC_ERR_MISMATCH on every rank;
 * with density > 0 (if gTop-k is available) every bucket equals a direct
 * sc_gtopk_allreduce of the same fused data with its own error feedback. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/multi/mr_common.h"

static sc_comm_t *comm;

enum { NT = 14 };
/* Sizes cover 1 element, odd counts (DeAR padding) and multi-bucket totals. */
static const size_t counts[NT] = {1,     3,   17, 1000,  4096, 50000, 7,
                                  70000, 129, 2,  33333, 8,    5,     20000};
/* int32 and float64 runs make the planners split buckets by dtype. */
static const sc_dtype_t dtypes[NT] = {SC_FLOAT32, SC_FLOAT32, SC_FLOAT32, SC_FLOAT32, SC_INT32,
                                      SC_INT32,   SC_FLOAT32, SC_FLOAT32, SC_FLOAT64, SC_FLOAT64,
                                      SC_FLOAT32, SC_FLOAT32, SC_FLOAT32, SC_FLOAT32};

/* The policy's name as the library spells it (sc_fusion_policy_name). */
static const char *policy_name(int pol) {
  const char *nm = "?";
  (void)sc_fusion_policy_name((sc_fusion_policy_t)pol, &nm);
  return nm;
}

static int is_float(sc_dtype_t dt) {
  return dt == SC_FLOAT32 || dt == SC_FLOAT64;
}

/* Rank r's input: integers; for floats a multiple of P so the mean is exact. */
static long input(int r, int round, int t, size_t i) {
  long v = (long)((i * 7 + (size_t)r * 13 + (size_t)round * 5 + (size_t)t * 3) % 17) - 8;
  return is_float(dtypes[t]) ? v * mr_nranks : v;
}

static double expected(int round, int t, size_t i) {
  long sum = 0;
  for (int r = 0; r < mr_nranks; r++) sum += input(r, round, t, i);
  if (is_float(dtypes[t])) return (double)sum / mr_nranks;
  return (double)(sum / mr_nranks); /* C division truncates toward zero, as SC_AVG */
}

typedef struct tensors {
  void *buf[NT];
  void *block; /* contiguous layout: all tensors in one allocation, forward order */
} tensors_t;

static void tensors_alloc(tensors_t *ts, int contiguous) {
  memset(ts, 0, sizeof(*ts));
  size_t total = 0;
  for (int t = 0; t < NT; t++) total += counts[t] * sc_dtype_size(dtypes[t]);
  if (contiguous) {
    /* Frameworks flatten in forward order: tensor NT-1 first. Alignment holds
     * because the float64 tensors come before any odd-sized float32 here. */
    ts->block = malloc(total);
    char *p = ts->block;
    for (int t = NT - 1; t >= 0; t--) {
      ts->buf[t] = p;
      p += counts[t] * sc_dtype_size(dtypes[t]);
    }
  } else {
    for (int t = 0; t < NT; t++) ts->buf[t] = malloc(counts[t] * sc_dtype_size(dtypes[t]));
  }
}

static void tensors_free(tensors_t *ts) {
  if (ts->block)
    free(ts->block);
  else
    for (int t = 0; t < NT; t++) free(ts->buf[t]);
}

static void fill(tensors_t *ts, int t, int round) {
  for (size_t i = 0; i < counts[t]; i++)
    mr_set(ts->buf[t], i, dtypes[t], (double)input(mr_rank, round, t, i));
}

static void check_round(tensors_t *ts, int t, int round, const char *what) {
  for (size_t i = 0; i < counts[t]; i++) {
    double got = mr_get(ts->buf[t], i, dtypes[t]), want = expected(round, t, i);
    if (got != want) {
      mr_fail("%s: round %d tensor %d [%zu]: got %g, want %g", what, round, t, i, got, want);
      return;
    }
  }
}

static void permute(int *perm, unsigned seed) {
  for (int i = 0; i < NT; i++) perm[i] = i;
  for (int i = NT - 1; i > 0; i--) {
    seed = seed * 1103515245u + 12345u;
    int j = (int)((seed >> 8) % (unsigned)(i + 1));
    int x = perm[i];
    perm[i] = perm[j];
    perm[j] = x;
  }
}

typedef struct ready_arg {
  sc_fusion_t *f;
  tensors_t *ts;
  const int *ids;
  int n, round;
  sc_result_t res;
  char err[256];
} ready_arg_t;

static void *ready_thread(void *p) {
  ready_arg_t *a = p;
  a->res = SC_SUCCESS;
  for (int i = 0; i < a->n && a->res == SC_SUCCESS; i++) {
    fill(a->ts, a->ids[i], a->round);
    a->res = sc_fusion_ready(a->f, a->ids[i]);
  }
  if (a->res != SC_SUCCESS) snprintf(a->err, sizeof(a->err), "%s", sc_last_error());
  return NULL;
}

static void check_plan_shape(sc_fusion_t *f, sc_fusion_policy_t pol, const char *what) {
  int nb = -1, prev = 0;
  MR_OK(sc_fusion_num_buckets(f, &nb));
  for (int t = 0; t < NT; t++) {
    int b = -1;
    MR_OK(sc_fusion_bucket_of(f, t, &b));
    if (b < prev || b > prev + 1 || (t == 0 && b != 0) || b >= nb)
      mr_fail("%s: tensor %d in bucket %d after bucket %d (of %d)", what, t, b, prev, nb);
    if (t > 0 && dtypes[t] != dtypes[t - 1] && b == prev)
      mr_fail("%s: tensors %d and %d of different dtypes share bucket %d", what, t - 1, t, b);
    prev = b;
  }
  int runs = 1;
  for (int t = 1; t < NT; t++) runs += dtypes[t] != dtypes[t - 1];
  if (pol == SC_FUSE_NONE && nb != NT) mr_fail("%s: %d buckets, want %d", what, nb, NT);
  if (pol == SC_FUSE_SINGLE && nb != runs) mr_fail("%s: %d buckets, want %d", what, nb, runs);
  if ((pol == SC_FUSE_SIZE || pol == SC_FUSE_DEAR) && nb <= runs)
    mr_fail("%s: %d buckets: the 64 KiB limit should split more", what, nb);
}

/* Several rounds: each rank readies in its own permutation (round 1 from two
 * threads), waits per tensor or with wait_all; round 3 is readied again
 * before anyone waited (refused: the round is still in flight). */
static void run_policy(sc_fusion_policy_t pol, int contiguous, int calibrate) {
  char what[96];
  snprintf(what, sizeof(what), "%s %s%s", policy_name(pol), contiguous ? "contiguous" : "separate",
           calibrate ? " calibrated" : "");
  tensors_t ts;
  tensors_alloc(&ts, contiguous);
  sc_fusion_config_t cfg = {.policy = pol, .bucket_bytes = 64 * 1024};
  if (!calibrate) {
    cfg.alpha_us = 40.0;
    cfg.beta_us_per_byte = 0.002;
  }
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  if (!f) return;
  for (int t = 0; t < NT; t++) {
    int id = -1;
    /* Backward times differ per rank on purpose: the plan uses their mean. */
    MR_OK(sc_fusion_add_tensor(f, ts.buf[t], counts[t], dtypes[t], 10.0 + t + mr_rank, &id));
    if (id != t) mr_fail("%s: tensor id %d, want %d", what, id, t);
  }
  MR_OK(sc_fusion_plan(f));
  check_plan_shape(f, pol, what);
  const int rounds = 5;
  for (int round = 0; round < rounds; round++) {
    int perm[NT];
    permute(perm, (unsigned)(mr_rank * 7919 + round * 31 + (int)pol));
    if (round == 1) {
      ready_arg_t a[2] = {
          {.f = f, .ts = &ts, .ids = perm, .n = NT / 2, .round = round},
          {.f = f, .ts = &ts, .ids = perm + NT / 2, .n = NT - NT / 2, .round = round}};
      pthread_t th[2];
      for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, ready_thread, &a[k]);
      for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
      for (int k = 0; k < 2; k++)
        if (a[k].res != SC_SUCCESS)
          mr_fail("%s: ready from thread %d: %s: %s", what, k, sc_strerror(a[k].res), a[k].err);
    } else if (round == 3) {
      /* Readied twice before any wait: the buffer is the library's until the
       * round is delivered, so the second ready is refused and the round's
       * result still arrives (test/multi/mr_fusion_rules.c checks more). */
      for (int i = 0; i < NT; i++) {
        fill(&ts, perm[i], round);
        MR_OK(sc_fusion_ready(f, perm[i]));
      }
      for (int i = 0; i < NT; i++) {
        mr_checks++;
        if (sc_fusion_ready(f, perm[NT - 1 - i]) != SC_ERR_INVALID_ARG)
          mr_fail("%s: a second ready of tensor %d in flight was not refused", what,
                  perm[NT - 1 - i]);
      }
    } else {
      for (int i = 0; i < NT; i++) {
        fill(&ts, perm[i], round);
        MR_OK(sc_fusion_ready(f, perm[i]));
      }
    }
    if (round % 2 == 0) {
      MR_OK(sc_fusion_wait_all(f));
    } else {
      /* Per tensor, in forward order as a framework's next forward would. */
      for (int t = NT - 1; t >= 0; t--) MR_OK(sc_fusion_wait(f, t));
    }
    for (int t = 0; t < NT; t++) check_round(&ts, t, round, what);
    /* A second wait is a no-op that keeps the result. */
    MR_OK(sc_fusion_wait(f, 0));
    check_round(&ts, 0, round, what);
  }
  MR_OK(sc_fusion_destroy(f));
  tensors_free(&ts);
}

/* Rank P-1 registers something else: every rank must see SC_ERR_MISMATCH
 * naming the first difference. */
static void run_mismatch(int kind) {
  static float bufs[NT][8];
  sc_fusion_config_t cfg = {.policy = SC_FUSE_SIZE, .alpha_us = 10, .beta_us_per_byte = 0.001};
  int odd = mr_rank == mr_nranks - 1;
  if (kind == 2 && odd) cfg.policy = SC_FUSE_MGWFBP;
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  if (!f) return;
  int n = kind == 1 && odd ? 6 : 5, id;
  for (int t = 0; t < n; t++) {
    size_t c = kind == 0 && odd && t == 3 ? 7 : 8;
    MR_OK(sc_fusion_add_tensor(f, bufs[t], c, SC_FLOAT32, 1.0, &id));
  }
  sc_result_t r = sc_fusion_plan(f);
  const char *want = kind == 0 ? "tensor 3 " : kind == 1 ? "tensor 5 " : "config";
  mr_checks++;
  if (r != SC_ERR_MISMATCH)
    mr_fail("mismatch kind %d: plan returned %s (%s), want SC_ERR_MISMATCH", kind, sc_strerror(r),
            sc_last_error());
  else if (!strstr(sc_last_error(), want))
    mr_fail("mismatch kind %d: detail \"%s\" does not name \"%s\"", kind, sc_last_error(), want);
  MR_OK(sc_fusion_destroy(f));
}

/* Sparse buckets: the fusion's result for every bucket must equal
 * sc_gtopk_allreduce run directly on the same fused data with a residual of
 * its own, round after round (so the per-bucket error feedback is checked). */
static void run_sparse(sc_fusion_policy_t pol) {
  enum { SN = 6 };
  static const size_t sc_[SN] = {100, 3000, 5, 20000, 64, 777};
  char what[64];
  snprintf(what, sizeof(what), "sparse %s", policy_name(pol));
  sc_fusion_config_t cfg = {.policy = pol,
                            .bucket_bytes = 32 * 1024,
                            .alpha_us = 30,
                            .beta_us_per_byte = 0.001,
                            .density = 0.05};
  float *buf[SN];
  size_t total = 0;
  for (int t = 0; t < SN; t++) {
    buf[t] = malloc(sc_[t] * sizeof(float));
    total += sc_[t];
  }
  float *ref = malloc(total * sizeof(float));
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  int id;
  for (int t = 0; t < SN; t++) MR_OK(sc_fusion_add_tensor(f, buf[t], sc_[t], SC_FLOAT32, 5, &id));
  MR_OK(sc_fusion_plan(f));
  int nb = 0;
  MR_OK(sc_fusion_num_buckets(f, &nb));
  /* LAGS: layer-wise, every tensor its own gTop-k with its own k. */
  mr_checks++;
  if (pol == SC_FUSE_NONE && nb != SN) mr_fail("%s: %d buckets, want one per tensor", what, nb);
  sc_ef_t *ef[SN] = {0};
  for (int b = 0; b < nb; b++) {
    size_t n = 0;
    for (int t = 0; t < SN; t++) {
      int bt;
      MR_OK(sc_fusion_bucket_of(f, t, &bt));
      if (bt == b) n += sc_[t];
    }
    MR_OK(sc_ef_create(n, SC_FLOAT32, &ef[b]));
  }
  for (int round = 0; round < 3; round++) {
    int perm[SN] = {3, 0, 5, 1, 4, 2};
    if (mr_rank % 2) {
      for (int i = 0; i < SN; i++) perm[i] = SN - 1 - i;
    }
    size_t off = 0;
    for (int t = 0; t < SN; t++) {
      for (size_t i = 0; i < sc_[t]; i++) {
        unsigned h = (unsigned)((i + 1) * 2654435761u ^ (unsigned)(t * 97 + round * 13 + mr_rank));
        buf[t][i] = ref[off + i] = (float)((int)(h % 2001) - 1000) / 8.0f;
      }
      off += sc_[t];
    }
    for (int i = 0; i < SN; i++) MR_OK(sc_fusion_ready(f, perm[i]));
    MR_OK(sc_fusion_wait_all(f));
    /* The reference, bucket by bucket (tensors of a bucket are consecutive). */
    size_t start = 0;
    int t0 = 0;
    for (int b = 0; b < nb; b++) {
      size_t n = 0;
      int t = t0, bt;
      while (t < SN && (sc_fusion_bucket_of(f, t, &bt), bt == b)) n += sc_[t++];
      size_t k = (size_t)(0.05 * (double)n);
      MR_OK(sc_gtopk_allreduce(ref + start, n, SC_FLOAT32, k < 1 ? 1 : k, SC_SELECT_EXACT, ef[b],
                               comm));
      size_t o = start;
      for (int u = t0; u < t; u++) {
        if (memcmp(buf[u], ref + o, sc_[u] * sizeof(float)))
          mr_fail("%s: round %d tensor %d differs from direct gTop-k", what, round, u);
        o += sc_[u];
      }
      start += n;
      t0 = t;
    }
  }
  for (int b = 0; b < nb; b++) sc_ef_destroy(ef[b]);
  MR_OK(sc_fusion_destroy(f));
  for (int t = 0; t < SN; t++) free(buf[t]);
  free(ref);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  for (int pol = SC_FUSE_NONE; pol <= SC_FUSE_SINGLE; pol++)
    for (int contiguous = 0; contiguous < 2; contiguous++)
      run_policy((sc_fusion_policy_t)pol, contiguous, 0);
  run_policy(SC_FUSE_MGWFBP, 0, 1);
  if (mr_nranks > 1)
    for (int kind = 0; kind < 3; kind++) run_mismatch(kind);
  sc_ef_t *probe = NULL;
  if (sc_ef_create(16, SC_FLOAT32, &probe) == SC_SUCCESS) {
    sc_ef_destroy(probe);
    run_sparse(SC_FUSE_NONE);
    run_sparse(SC_FUSE_SIZE);
    run_sparse(SC_FUSE_MGWFBP);
    run_sparse(SC_FUSE_SINGLE);
  } else if (mr_rank == 0) {
    printf("sparse fusion not tested: sc_ef_create: %s\n", sc_last_error());
  }
  /* DeAR with gTop-k is refused up front. */
  sc_fusion_config_t bad = {.policy = SC_FUSE_DEAR, .density = 0.01};
  sc_fusion_t *fb = NULL;
  mr_checks++;
  if (sc_fusion_create(comm, &bad, &fb) != SC_ERR_UNSUPPORTED || fb)
    mr_fail("DeAR with density: want SC_ERR_UNSUPPORTED");
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
