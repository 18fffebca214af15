/* SPDX-License-Identifier: BSD-3-Clause */
/* The fusion engine's round and ownership rules on N ranks (run under
 * sc-run, with SC_TIMEOUT_MS=60000): the DeAR loop that waits on each tensor
 * just before refilling it completes under every policy, in both orders,
 * with every result checked against an average computed here; a skipped
 * tensor contributes zeros and receives the average (its buffer, full of
 * NaN, is not read); a wait that only this rank could unblock fails at once
 * (SC_ERR_INVALID_ARG naming the missing tensor, far below the timeout); a
 * second ready or skip of a tensor whose round is in flight is refused and
 * the round's result still arrives; sc_fusion_config_init's defaults work;
 * a gTop-k bucket with SC_SELECT_GAUSSIAN equals a direct Gaussian gTop-k
 * (and, on this data, differs from the exact one), one with SC_SELECT_MSTOPK
 * a direct MSTopK gTop-k. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test/multi/mr_common.h"

static sc_comm_t *comm;

enum { NT = 8 };
static const size_t counts[NT] = {5, 300, 17, 1000, 64, 2000, 3, 40};
/* The policy's name as the library spells it (sc_fusion_policy_name). */
static const char *policy_name(int pol) {
  const char *nm = "?";
  (void)sc_fusion_policy_name((sc_fusion_policy_t)pol, &nm);
  return nm;
}

typedef struct tensors {
  float *buf[NT];
  float *block;
} tensors_t;

static void tensors_alloc(tensors_t *ts, int contiguous) {
  size_t total = 0;
  for (int t = 0; t < NT; t++) total += counts[t];
  ts->block = contiguous ? malloc(total * sizeof(float)) : NULL;
  float *p = ts->block;
  for (int t = NT - 1; t >= 0; t--) { /* forward order, as frameworks flatten */
    ts->buf[t] = contiguous ? p : malloc(counts[t] * sizeof(float));
    if (contiguous) p += counts[t];
  }
}

static void tensors_free(tensors_t *ts) {
  if (ts->block)
    free(ts->block);
  else
    for (int t = 0; t < NT; t++) free(ts->buf[t]);
}

/* Multiples of P: every average is exact in float. */
static float input(int r, int round, int t, size_t i) {
  long v = (long)((i * 7 + (size_t)r * 13 + (size_t)round * 5 + (size_t)t * 3) % 17) - 8;
  return (float)(v * mr_nranks);
}

static void fill(tensors_t *ts, int t, int round) {
  for (size_t i = 0; i < counts[t]; i++) ts->buf[t][i] = input(mr_rank, round, t, i);
}

/* skipped(r, t): rank r skips tensor t this round. */
typedef int (*skip_fn)(int r, int round, int t);

static int never(int r, int round, int t) {
  (void)r, (void)round, (void)t;
  return 0;
}

static void check(const tensors_t *ts, int t, int round, skip_fn sk, const char *what) {
  for (size_t i = 0; i < counts[t]; i++) {
    double sum = 0;
    for (int r = 0; r < mr_nranks; r++)
      if (!sk(r, round, t)) sum += input(r, round, t, i);
    double want = sum / mr_nranks, got = ts->buf[t][i];
    mr_checks++;
    if (got != want) {
      mr_fail("%s: round %d tensor %d [%zu]: got %g, want %g", what, round, t, i, got, want);
      return;
    }
  }
}

static sc_fusion_t *make(sc_fusion_policy_t pol, size_t bucket_bytes, tensors_t *ts) {
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.policy = pol;
  cfg.bucket_bytes = bucket_bytes;
  cfg.alpha_us = 40;
  cfg.beta_us_per_byte = 0.002;
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  for (int t = 0; t < NT && f; t++) {
    int id;
    MR_OK(sc_fusion_add_tensor(f, ts->buf[t], counts[t], SC_FLOAT32, 10.0 + t, &id));
  }
  if (f) MR_OK(sc_fusion_plan(f));
  return f;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* DeAR's loop: before layer t's forward, wait for its gradient, then write
 * the next one and make it ready, tensor by tensor. A wait on a tensor its
 * bucket already delivered (or not readied yet) must return at once. */
static void run_dear_loop(sc_fusion_policy_t pol, int forward, int contiguous) {
  char what[64];
  snprintf(what, sizeof(what), "dear loop %s %s%s", policy_name(pol),
           forward ? "forward" : "backward", contiguous ? " contiguous" : "");
  tensors_t ts;
  tensors_alloc(&ts, contiguous);
  sc_fusion_t *f = make(pol, 4096, &ts);
  int nb = 0;
  MR_OK(sc_fusion_num_buckets(f, &nb));
  if (pol != SC_FUSE_NONE && nb >= NT) mr_fail("%s: %d buckets: no bucket is shared", what, nb);
  for (int t = 0; t < NT; t++) {
    fill(&ts, t, 0);
    MR_OK(sc_fusion_ready(f, t));
  }
  const int rounds = 4;
  double t0 = now_ms();
  for (int round = 1; round < rounds; round++) {
    for (int k = 0; k < NT; k++) {
      int t = forward ? NT - 1 - k : k;
      MR_OK(sc_fusion_wait(f, t));
      check(&ts, t, round - 1, never, what);
      fill(&ts, t, round);
      MR_OK(sc_fusion_ready(f, t));
    }
  }
  MR_OK(sc_fusion_wait_all(f));
  for (int t = 0; t < NT; t++) check(&ts, t, rounds - 1, never, what);
  double ms = now_ms() - t0;
  mr_checks++;
  if (ms > 20000) mr_fail("%s: %.0f ms: some wait sat out a timeout", what, ms);
  MR_OK(sc_fusion_destroy(f));
  tensors_free(&ts);
}

/* Tensor 2 is skipped on every rank, tensor 5 on rank round % P, and tensor 0
 * on odd ranks: each contributes zeros where skipped. */
static int skips(int r, int round, int t) {
  return t == 2 || (t == 5 && r == round % mr_nranks) || (t == 0 && r % 2 == 1);
}

static void run_skip(sc_fusion_policy_t pol, int contiguous) {
  char what[64];
  snprintf(what, sizeof(what), "skip %s%s", policy_name(pol), contiguous ? " contiguous" : "");
  tensors_t ts;
  tensors_alloc(&ts, contiguous);
  sc_fusion_t *f = make(pol, 4096, &ts);
  for (int round = 0; round < 3; round++) {
    for (int t = NT - 1; t >= 0; t--) { /* reverse: buckets complete out of order */
      if (skips(mr_rank, round, t)) {
        for (size_t i = 0; i < counts[t]; i++) ts.buf[t][i] = NAN; /* must not be read */
        MR_OK(sc_fusion_skip(f, t));
      } else {
        fill(&ts, t, round);
        MR_OK(sc_fusion_ready(f, t));
      }
    }
    MR_OK(sc_fusion_wait_all(f));
    for (int t = 0; t < NT; t++) check(&ts, t, round, skips, what);
  }
  MR_OK(sc_fusion_destroy(f));
  tensors_free(&ts);
}

/* r must be SC_ERR_INVALID_ARG, at once, naming tensor `missing`. */
static void expect_self_blocked(sc_result_t r, double ms, int missing, const char *what) {
  char want[32];
  snprintf(want, sizeof(want), "tensor %d (", missing);
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG)
    mr_fail("%s: %s (%s), want SC_ERR_INVALID_ARG", what, sc_strerror(r), sc_last_error());
  else if (!strstr(sc_last_error(), want))
    mr_fail("%s: \"%s\" does not name \"%s\"", what, sc_last_error(), want);
  else if (ms > 2000)
    mr_fail("%s: failed after %.0f ms, not at once (SC_TIMEOUT_MS=60000)", what, ms);
}

static sc_result_t timed_wait(sc_fusion_t *f, int id, double *ms) {
  double t0 = now_ms();
  sc_result_t r = id < 0 ? sc_fusion_wait_all(f) : sc_fusion_wait(f, id);
  *ms = now_ms() - t0;
  return r;
}

/* Every rank makes the same calls, so the collectives still match. */
static void run_self_block(sc_fusion_policy_t pol) {
  char what[96];
  tensors_t ts;
  tensors_alloc(&ts, 0);
  sc_fusion_t *f = make(pol, 4096, &ts);
  int b0, b1, last = NT - 1, bl;
  MR_OK(sc_fusion_bucket_of(f, 0, &b0));
  MR_OK(sc_fusion_bucket_of(f, 1, &b1));
  MR_OK(sc_fusion_bucket_of(f, last, &bl));
  double ms = 0;
  /* Round 0: everything but tensor 1. */
  for (int t = 0; t < NT; t++)
    if (t != 1) {
      fill(&ts, t, 0);
      MR_OK(sc_fusion_ready(f, t));
    }
  snprintf(what, sizeof(what), "%s: wait(0) with tensor 1 unready", policy_name(pol));
  if (b0 == b1 || pol == SC_FUSE_DEAR) expect_self_blocked(timed_wait(f, 0, &ms), ms, 1, what);
  /* Its bucket is tensor 1's, or ready behind it in launch order. */
  snprintf(what, sizeof(what), "%s: wait(%d) behind tensor 1", policy_name(pol), last);
  expect_self_blocked(timed_wait(f, last, &ms), ms, 1, what);
  snprintf(what, sizeof(what), "%s: wait_all with tensor 1 unready", policy_name(pol));
  expect_self_blocked(timed_wait(f, -1, &ms), ms, 1, what);
  /* Waiting on the missing tensor itself: it has no round in flight. */
  MR_OK(sc_fusion_wait(f, 1));
  fill(&ts, 1, 0);
  MR_OK(sc_fusion_ready(f, 1));
  snprintf(what, sizeof(what), "self-block %s round 0", policy_name(pol));
  MR_OK(sc_fusion_wait_all(f));
  for (int t = 0; t < NT; t++) check(&ts, t, 0, never, what);
  /* Round 1 in full; deliver only the last tensor's bucket, refill it: it
   * now waits behind bucket 0, which still holds round 1. */
  for (int t = 0; t < NT; t++) {
    fill(&ts, t, 1);
    MR_OK(sc_fusion_ready(f, t));
  }
  if (pol != SC_FUSE_DEAR && pol != SC_FUSE_SINGLE && bl != b0) {
    MR_OK(sc_fusion_wait(f, last));
    check(&ts, last, 1, never, what);
    for (int t = 0; t < NT; t++) {
      int bt;
      MR_OK(sc_fusion_bucket_of(f, t, &bt));
      if (bt == bl) {
        fill(&ts, t, 2);
        MR_OK(sc_fusion_ready(f, t));
      }
    }
    snprintf(what, sizeof(what), "%s: wait(%d) behind bucket 0's undelivered round",
             policy_name(pol), last);
    expect_self_blocked(timed_wait(f, last, &ms), ms, 0, what);
    mr_checks++;
    if (!strstr(sc_last_error(), "previous round"))
      mr_fail("%s: \"%s\" does not say \"previous round\"", what, sc_last_error());
    /* Deliver and refill the rest in bucket order; bucket bl then launches
     * in its turn. */
    for (int t = 0; t < NT; t++) {
      int bt;
      MR_OK(sc_fusion_bucket_of(f, t, &bt));
      if (bt != bl) {
        MR_OK(sc_fusion_wait(f, t));
        check(&ts, t, 1, never, what);
        fill(&ts, t, 2);
        MR_OK(sc_fusion_ready(f, t));
      }
    }
    MR_OK(sc_fusion_wait_all(f));
    for (int t = 0; t < NT; t++) check(&ts, t, 2, never, what);
  } else {
    MR_OK(sc_fusion_wait_all(f));
    for (int t = 0; t < NT; t++) check(&ts, t, 1, never, what);
  }
  MR_OK(sc_fusion_destroy(f));
  tensors_free(&ts);
}

static void expect_in_flight(sc_result_t r, int id, const char *what) {
  char want[48];
  snprintf(want, sizeof(want), "tensor %d is already ready", id);
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG || !strstr(sc_last_error(), want))
    mr_fail("%s: %s (%s), want SC_ERR_INVALID_ARG naming \"%s\"", what, sc_strerror(r),
            sc_last_error(), want);
}

/* A second ready or skip while the round is in flight (launched, or still
 * filling) is refused, and the round's result is still delivered. */
static void run_double_ready(sc_fusion_policy_t pol, int contiguous) {
  char what[64];
  snprintf(what, sizeof(what), "double ready %s%s", policy_name(pol),
           contiguous ? " contiguous" : "");
  tensors_t ts;
  tensors_alloc(&ts, contiguous);
  sc_fusion_t *f = make(pol, 4096, &ts);
  for (int round = 0; round < 2; round++) {
    fill(&ts, 0, round);
    MR_OK(sc_fusion_ready(f, 0));
    if (pol != SC_FUSE_NONE) expect_in_flight(sc_fusion_ready(f, 0), 0, what); /* filling */
    for (int t = 1; t < NT; t++) {
      fill(&ts, t, round);
      MR_OK(sc_fusion_ready(f, t));
    }
    for (int t = 0; t < NT; t++) /* all launched (DeAR: all reduce-scatters) */
      expect_in_flight(t % 2 ? sc_fusion_skip(f, t) : sc_fusion_ready(f, t), t, what);
    if (round == 0)
      MR_OK(sc_fusion_wait_all(f));
    else
      for (int t = NT - 1; t >= 0; t--) MR_OK(sc_fusion_wait(f, t));
    for (int t = 0; t < NT; t++) check(&ts, t, round, never, what);
    MR_OK(sc_fusion_wait(f, 3)); /* delivered: a no-op keeping the result */
    check(&ts, 3, round, never, what);
  }
  MR_OK(sc_fusion_destroy(f));
  tensors_free(&ts);
}

static void run_config_init(void) {
  sc_fusion_config_t cfg;
  memset(&cfg, 0xab, sizeof(cfg));
  sc_fusion_config_init(&cfg);
  sc_fusion_config_init(NULL); /* harmless */
  mr_checks++;
  if (cfg.policy != SC_FUSE_SIZE || cfg.bucket_bytes != 0 || cfg.alpha_us != 0 ||
      cfg.beta_us_per_byte != 0 || cfg.density != 0 || cfg.select != SC_SELECT_EXACT ||
      cfg.slice_bytes != 0)
    mr_fail("config_init: policy %d bucket_bytes %zu alpha %g beta %g density %g select %d "
            "slice_bytes %zu",
            (int)cfg.policy, cfg.bucket_bytes, cfg.alpha_us, cfg.beta_us_per_byte, cfg.density,
            (int)cfg.select, cfg.slice_bytes);
  /* The defaults make a working engine (model measured at plan time). */
  tensors_t ts;
  tensors_alloc(&ts, 0);
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  int id;
  for (int t = 0; t < NT && f; t++)
    MR_OK(sc_fusion_add_tensor(f, ts.buf[t], counts[t], SC_FLOAT32, 0, &id));
  MR_OK(sc_fusion_plan(f));
  int nb = 0;
  MR_OK(sc_fusion_num_buckets(f, &nb));
  mr_checks++;
  if (nb != 1) mr_fail("config_init: %d buckets, want 1 under the 25 MiB default", nb);
  for (int t = 0; t < NT; t++) {
    fill(&ts, t, 0);
    MR_OK(sc_fusion_ready(f, t));
  }
  MR_OK(sc_fusion_wait_all(f));
  for (int t = 0; t < NT; t++) check(&ts, t, 0, never, "config_init");
  MR_OK(sc_fusion_destroy(f));
  tensors_free(&ts);
  cfg.select = (sc_select_t)7;
  f = NULL;
  mr_checks++;
  if (sc_fusion_create(comm, &cfg, &f) != SC_ERR_INVALID_ARG || f)
    mr_fail("select 7: want SC_ERR_INVALID_ARG");
}

/* Irwin-Hall (4 uniforms): near normal, so the Gaussian threshold selects
 * about k entries, rarely exactly the exact top-k. */
static float gauss_input(int round, int t, size_t i) {
  unsigned h = (unsigned)((i + 1) * 2654435761u ^ (unsigned)(t * 977 + round * 131 + mr_rank * 7));
  float s = 0;
  for (int k = 0; k < 4; k++) {
    h = h * 1103515245u + 12345u;
    s += (float)((h >> 8) % 1000) / 1000.0f - 0.5f;
  }
  return s;
}

/* sel: GAUSSIAN or MSTOPK; a bucket must equal a direct gTop-k with sel. */
static void run_gaussian(sc_select_t sel) {
  const char *name = sel == SC_SELECT_GAUSSIAN ? "gaussian" : "mstopk";
  enum { GN = 3 };
  static const size_t gc[GN] = {2000, 500, 3000};
  sc_ef_t *probe = NULL;
  if (sc_ef_create(16, SC_FLOAT32, &probe) != SC_SUCCESS) {
    if (mr_rank == 0) printf("%s fusion not tested: sc_ef_create: %s\n", name, sc_last_error());
    return;
  }
  sc_ef_destroy(probe);
  sc_fusion_config_t cfg;
  sc_fusion_config_init(&cfg);
  cfg.bucket_bytes = 10000; /* tensors {0, 1} and {2} */
  cfg.alpha_us = 30;
  cfg.beta_us_per_byte = 0.001;
  cfg.density = 0.05;
  cfg.select = sel;
  float *buf[GN], *rg = malloc(5500 * sizeof(float)), *re = malloc(5500 * sizeof(float));
  for (int t = 0; t < GN; t++) buf[t] = malloc(gc[t] * sizeof(float));
  sc_fusion_t *f = NULL;
  MR_OK(sc_fusion_create(comm, &cfg, &f));
  int id;
  for (int t = 0; t < GN; t++) MR_OK(sc_fusion_add_tensor(f, buf[t], gc[t], SC_FLOAT32, 5, &id));
  MR_OK(sc_fusion_plan(f));
  int nb = 0;
  MR_OK(sc_fusion_num_buckets(f, &nb));
  mr_checks++;
  if (nb != 2) mr_fail("%s: %d buckets, want 2", name, nb);
  const size_t bn[2] = {2500, 3000};
  sc_ef_t *efg[2] = {0}, *efe[2] = {0};
  for (int b = 0; b < 2; b++) {
    MR_OK(sc_ef_create(bn[b], SC_FLOAT32, &efg[b]));
    MR_OK(sc_ef_create(bn[b], SC_FLOAT32, &efe[b]));
  }
  int differs = 0;
  for (int round = 0; round < 3 && nb == 2; round++) {
    size_t off = 0;
    for (int t = 0; t < GN; t++) {
      for (size_t i = 0; i < gc[t]; i++)
        buf[t][i] = rg[off + i] = re[off + i] = gauss_input(round, t, i);
      off += gc[t];
    }
    for (int t = GN - 1; t >= 0; t--) MR_OK(sc_fusion_ready(f, t));
    MR_OK(sc_fusion_wait_all(f));
    for (int b = 0, o = 0; b < 2; o += (int)bn[b], b++) {
      size_t k = (size_t)(0.05 * (double)bn[b]);
      MR_OK(sc_gtopk_allreduce(rg + o, bn[b], SC_FLOAT32, k, sel, efg[b], comm));
      MR_OK(sc_gtopk_allreduce(re + o, bn[b], SC_FLOAT32, k, SC_SELECT_EXACT, efe[b], comm));
      differs |= memcmp(rg + o, re + o, bn[b] * sizeof(float)) != 0;
    }
    off = 0;
    for (int t = 0; t < GN; t++) {
      mr_checks++;
      if (memcmp(buf[t], rg + off, gc[t] * sizeof(float)))
        mr_fail("%s: round %d tensor %d differs from a direct gTop-k", name, round, t);
      off += gc[t];
    }
  }
  /* MSTopK may well pick the exact top k here: only Gaussian-k must differ. */
  mr_checks++;
  if (!differs && sel == SC_SELECT_GAUSSIAN)
    mr_fail("gaussian: exact and Gaussian agree on every bucket: the test proves nothing");
  for (int b = 0; b < 2; b++) {
    sc_ef_destroy(efg[b]);
    sc_ef_destroy(efe[b]);
  }
  MR_OK(sc_fusion_destroy(f));
  /* select is part of the configuration every rank must share. */
  if (mr_nranks > 1) {
    cfg.select = mr_rank == mr_nranks - 1 ? SC_SELECT_EXACT : sel;
    MR_OK(sc_fusion_create(comm, &cfg, &f));
    for (int t = 0; t < GN; t++) MR_OK(sc_fusion_add_tensor(f, buf[t], gc[t], SC_FLOAT32, 5, &id));
    sc_result_t r = sc_fusion_plan(f);
    mr_checks++;
    if (r != SC_ERR_MISMATCH || !strstr(sc_last_error(), "select"))
      mr_fail("%s: select differing between ranks: %s (%s), want SC_ERR_MISMATCH", name,
              sc_strerror(r), sc_last_error());
    MR_OK(sc_fusion_destroy(f));
  }
  for (int t = 0; t < GN; t++) free(buf[t]);
  free(rg);
  free(re);
}

int main(void) {
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  run_config_init();
  for (int pol = SC_FUSE_NONE; pol <= SC_FUSE_SINGLE; pol++) {
    for (int fw = 0; fw < 2; fw++) run_dear_loop((sc_fusion_policy_t)pol, fw, fw);
    run_skip((sc_fusion_policy_t)pol, pol % 2);
    run_self_block((sc_fusion_policy_t)pol);
    run_double_ready((sc_fusion_policy_t)pol, pol % 2);
  }
  run_gaussian(SC_SELECT_GAUSSIAN);
  run_gaussian(SC_SELECT_MSTOPK);
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
