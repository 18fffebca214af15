/* SPDX-License-Identifier: BSD-3-Clause */
/* The collective parts of sc_fusion_plan: every rank must have registered
 * the same tensors (else SC_ERR_MISMATCH on every rank, naming the first
 * difference), plan with the same backward times, and use the same
 * alpha-beta model (rank 0's calibration). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/fusion/fusion.h"
#include "lib/fusion/plan.h"

static uint64_t sc_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

static uint64_t sc_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof(u));
  return u;
}

/* MIN over ranks of (x, ~x) gives min and max in one all-reduce. */
static sc_result_t sc_minmax(sc_comm_t *comm, uint64_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[n + i] = ~v[i];
  SC_CHECK(sc_allreduce(v, v, 2 * n, SC_UINT64, SC_MIN, comm));
  for (size_t i = 0; i < n; i++) v[n + i] = ~v[n + i];
  return SC_SUCCESS;
}

sc_result_t sc_fusion_check_same(sc_fusion_t *f) {
  const char *fn = "sc_fusion_plan";
  const sc_fusion_config_t *c = &f->cfg;
  uint64_t cfg = sc_mix(
      sc_mix(sc_mix(sc_mix(sc_mix(0, (uint64_t)c->policy), c->bucket_bytes), sc_bits(c->alpha_us)),
             sc_bits(c->beta_us_per_byte)),
      sc_bits(c->density));
  cfg = sc_mix(cfg, (uint64_t)c->select);
  cfg = sc_mix(cfg, (uint64_t)c->slice_bytes);
  cfg = sc_mix(sc_mix(sc_mix(cfg, (uint64_t)c->compress), (uint64_t)c->lowrank), c->seed);
  uint64_t hdr[4] = {f->nt, cfg};
  SC_CHECK(sc_minmax(f->comm, hdr, 2));
  if (hdr[1] != hdr[3])
    return SC_ERR(
        SC_ERR_MISMATCH,
        "%s: rank %d: the fusion config (policy, bucket_bytes, alpha, beta, density, select, "
        "slice_bytes, compress, lowrank, seed) differs between ranks",
        fn, f->rank);
  size_t nmin = (size_t)hdr[0];
  uint64_t *fp = malloc((2 * nmin + 1) * sizeof(*fp));
  if (!fp) return SC_ERR(SC_ERR_NOMEM, "%s: fingerprints of %zu tensors", fn, nmin);
  for (size_t l = 0; l < nmin; l++)
    fp[l] = sc_mix(sc_mix(sc_mix(0x5c, (uint64_t)f->t[l].count), (uint64_t)f->t[l].dtype),
                   (uint64_t)f->t[l].rows);
  sc_result_t r = sc_minmax(f->comm, fp, nmin);
  if (r == SC_SUCCESS) {
    for (size_t l = 0; l < nmin; l++) {
      if (fp[l] != fp[nmin + l]) {
        r = SC_ERR(SC_ERR_MISMATCH,
                   "%s: rank %d: tensor %zu differs between ranks (here: %zu elements of %s)", fn,
                   f->rank, l, f->t[l].count, sc_dtype_name(f->t[l].dtype));
        break;
      }
    }
  }
  free(fp);
  if (r == SC_SUCCESS && hdr[0] != hdr[2])
    r = SC_ERR(SC_ERR_MISMATCH,
               "%s: rank %d: ranks registered between %llu and %llu tensors (here %zu): tensor %zu "
               "is the first missing on some rank",
               fn, f->rank, (unsigned long long)hdr[0], (unsigned long long)hdr[2], f->nt, nmin);
  return r;
}

sc_result_t sc_fusion_agree_times(sc_fusion_t *f) {
  double *bw = malloc(f->nt * sizeof(*bw));
  if (!bw) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: %zu backward times", f->nt);
  for (size_t l = 0; l < f->nt; l++) bw[l] = f->t[l].bw_us;
  /* Each rank measured its own times: the plan uses the mean, which the
   * all-reduce delivers bit-identical everywhere. */
  sc_result_t r = sc_allreduce(bw, bw, f->nt, SC_FLOAT64, SC_AVG, f->comm);
  if (r == SC_SUCCESS)
    for (size_t l = 0; l < f->nt; l++) f->t[l].bw_us = bw[l];
  free(bw);
  return r;
}

typedef sc_result_t (*sc_timed_fn)(sc_fusion_t *f, void *buf, size_t n);

static sc_result_t sc_time_allreduce(sc_fusion_t *f, void *buf, size_t n) {
  return sc_allreduce(buf, buf, n, SC_FLOAT32, SC_AVG, f->comm);
}

static sc_result_t sc_time_gtopk(sc_fusion_t *f, void *buf, size_t n) {
  double k = floor(f->cfg.density * (double)n);
  return sc_gtopk_allreduce(buf, n, SC_FLOAT32, k < 1 ? 1 : (size_t)k, f->cfg.select, NULL,
                            f->comm);
}

/* Fits T(bytes) = a + b*bytes for op (best of a few runs per size, aligned
 * by a barrier); rank 0's fit is broadcast. */
static sc_result_t sc_fit_op(sc_fusion_t *f, sc_timed_fn op, const char *what, double *a,
                             double *b) {
  enum { NS = 5, REPS = 3 };
  /* The largest is SC_FUSION_OMGS_MAX_BYTES: OMGS trusts the model up to it. */
  const size_t sizes[NS] = {1024, 16384, 131072, 524288, SC_FUSION_OMGS_MAX_BYTES}; /* bytes */
  double x[NS], y[NS];
  float *buf = malloc(sizes[NS - 1]);
  if (!buf) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: calibration buffer");
  sc_result_t r = SC_SUCCESS;
  for (size_t i = 0; i < sizes[NS - 1] / sizeof(float); i++)
    buf[i] = (float)((i * 2654435761u) % 1000) - 500.0f;
  for (int s = 0; s < NS && r == SC_SUCCESS; s++) {
    size_t n = sizes[s] / sizeof(float);
    double best = INFINITY;
    SC_CHECK_GOTO(op(f, buf, n), r, out); /* warm-up */
    for (int k = 0; k < REPS; k++) {
      SC_CHECK_GOTO(sc_barrier(f->comm), r, out);
      double t0 = sc_fusion_now_us();
      SC_CHECK_GOTO(op(f, buf, n), r, out);
      double t = sc_fusion_now_us() - t0;
      if (t < best) best = t;
    }
    x[s] = (double)sizes[s];
    y[s] = best;
  }
  double fit[2];
  sc_fplan_fit_line(x, y, NS, &fit[0], &fit[1]);
  for (int s = 0; s < NS && f->rank == 0; s++)
    SC_TRACE(SC_SUBSYS_COLL, "fusion: %s calibration point: %.0f B in %.1f us (best of %d)", what,
             x[s], y[s], REPS);
  SC_CHECK_GOTO(sc_broadcast(fit, fit, 2, SC_FLOAT64, 0, f->comm), r, out);
  *a = fit[0];
  *b = fit[1];
  SC_INFO(SC_SUBSYS_COLL,
          "fusion: calibrated %s on %d ranks (rank 0's fit): alpha %.1f us, beta %.3g us/B "
          "(%.2f GB/s)",
          what, f->nranks, *a, *b, 1e-3 / *b);
out:
  free(buf);
  return r;
}

sc_result_t sc_fusion_calibrate(sc_fusion_t *f, double *alpha_us, double *beta_us_per_byte) {
  if (f->nranks == 1) {
    /* Nothing to send: any positive model gives the same (trivial) plan. */
    *alpha_us = 1.0;
    *beta_us_per_byte = 1e-6;
    return SC_SUCCESS;
  }
  return sc_fit_op(f, sc_time_allreduce, "all-reduce", alpha_us, beta_us_per_byte);
}

/* OMGS: a sparse bucket costs the gTop-k collective plus the selection.
 * Calibrated: measure exactly that (sc_gtopk_allreduce on float32). From a
 * given dense model: the butterfly's log2(P) rounds of 2k (index + value)
 * bytes, plus a selection rate measured on every rank at once (the slowest). */
sc_result_t sc_fusion_sparse_model(sc_fusion_t *f, double alpha_us, double beta_us_per_byte,
                                   double *sp_alpha, double *sp_beta) {
  if (f->cfg.alpha_us == 0.0 && f->cfg.beta_us_per_byte == 0.0 && f->nranks > 1)
    return sc_fit_op(f, sc_time_gtopk, "gTop-k all-reduce", sp_alpha, sp_beta);
  double rounds = f->nranks > 1 ? ceil(log2((double)f->nranks)) : 0.0;
  /* The selection's time on every rank at once, the slowest's (as
   * sc_fusion_auto_costs: ranks that share cores select side by side). */
  double sel[1] = {0};
  enum { N = 1 << 18 };
  float *v = malloc(N * sizeof(float));
  uint32_t *idx = malloc(2 * N * sizeof(uint32_t));
  float *val = malloc(2 * N * sizeof(float));
  if (v && idx && val) {
    for (size_t i = 0; i < N; i++) v[i] = (float)((i * 2654435761u) % 1000) - 500.0f;
    double k = floor(f->cfg.density * N);
    size_t nnz;
    double t0 = sc_fusion_now_us();
    if (sc_topk(v, N, SC_FLOAT32, k < 1 ? 1 : (size_t)k, f->cfg.select, idx, val, &nnz) ==
        SC_SUCCESS)
      sel[0] = (sc_fusion_now_us() - t0) / (N * sizeof(float));
  }
  free(v);
  free(idx);
  free(val);
  SC_CHECK(sc_allreduce(sel, sel, 1, SC_FLOAT64, SC_MAX, f->comm));
  /* Per byte of float32 gradient, each round sends density entries of 4 + 4
   * bytes per 4-byte element; what it receives meanwhile is free (links are
   * full duplex: docs/ALGORITHMS.md, "The formulas perf/plot.py draws"). */
  *sp_alpha = rounds * alpha_us;
  *sp_beta = rounds * f->cfg.density * 2.0 * beta_us_per_byte + sel[0];
  return SC_SUCCESS;
}
