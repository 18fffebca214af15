/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_COMPRESS_AUTO: each bucket travels as the cheapest of dense, the fp16
 * wire, gTop-k (with density > 0) and ACP-SGD (a bucket holding a matrix)
 * under the plan's all-reduce model, with the compression's own work
 * measured at plan time. Every rank measures at once and all take the
 * slowest rank's figures (an all-reduce with SC_MAX), so that every rank
 * prices every bucket alike and chooses the same, and so that ranks sharing
 * cores (several on one host, or hosts that share a machine) are priced as
 * they will run: side by side, each slowed by the others, where one rank
 * timed alone would measure a core of its own. What each mode costs is
 * what the worker runs for it (compress.c): one call per bucket, and under
 * ACP-SGD one all-reduce of every matrix's factor plus one for the bucket's
 * other tensors. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/lowrank.h"
#include "kernels/cpu/reduce.h"
#include "lib/base/dtype.h"
#include "lib/base/log.h"
#include "lib/fusion/fusion.h"
#include "lib/fusion/plan.h"

_Static_assert(SC_AUTO_TRIAL_POINTS <= SC_FPLAN_TRIAL_MAX, "sc_fplan_trial_cost takes every point");

/* Elements of the scratch the work is timed on: past the caches, as
 * gradients are. */
#define SC_AUTO_PROBE_ELEMS ((size_t)1 << 20)
#define SC_AUTO_PROBE_COLS  ((size_t)1024)

/* Microseconds per element of one float32 -> fp16 -> float32 round trip. */
static double probe_half(float *x, uint16_t *h) {
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = sc_fusion_now_us();
    sc_float_to_half_array(h, x, SC_AUTO_PROBE_ELEMS);
    sc_half_to_float_array(x, h, SC_AUTO_PROBE_ELEMS);
    double t = (sc_fusion_now_us() - t0) / (double)SC_AUTO_PROBE_ELEMS;
    if (rep == 0 || t < best) best = t;
  }
  return best;
}

/* Microseconds per element and unit of rank of one pass of the low-rank
 * product (P = M Q), the step that reads the whole gradient. */
static double probe_lowrank(const float *m, int rank) {
  const size_t rows = SC_AUTO_PROBE_ELEMS / SC_AUTO_PROBE_COLS, r = (size_t)rank;
  float *qt = calloc(r * SC_AUTO_PROBE_COLS, sizeof(float));
  float *pt = malloc(r * rows * sizeof(float));
  double best = 0;
  if (qt && pt) {
    for (size_t i = 0; i < r * SC_AUTO_PROBE_COLS; i++) qt[i] = (float)(i % 7) - 3.0f;
    for (int rep = 0; rep < 3; rep++) {
      double t0 = sc_fusion_now_us();
      sc_lr_project_f32(pt, m, rows, SC_AUTO_PROBE_COLS, qt, r);
      double t = (sc_fusion_now_us() - t0) / (double)(SC_AUTO_PROBE_ELEMS * r);
      if (rep == 0 || t < best) best = t;
    }
  }
  free(qt);
  free(pt);
  return best;
}

sc_result_t sc_fusion_auto_costs(sc_fusion_t *f, double alpha_us, double beta_us_per_byte) {
  /* half, low rank, sparse alpha, sparse beta, device tensors on some rank */
  double c[5] = {0, 0, 0, 0, f->device ? 1.0 : 0.0};
  float *x = malloc(SC_AUTO_PROBE_ELEMS * sizeof(float));
  uint16_t *h = malloc(SC_AUTO_PROBE_ELEMS * sizeof(uint16_t));
  if (x && h) {
    for (size_t i = 0; i < SC_AUTO_PROBE_ELEMS; i++)
      x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    c[0] = probe_half(x, h);
    c[1] = probe_lowrank(x, f->cfg.lowrank);
  }
  free(x);
  free(h);
  if (f->cfg.density > 0.0)
    SC_CHECK(sc_fusion_sparse_model(f, alpha_us, beta_us_per_byte, &c[2], &c[3]));
  SC_CHECK(sc_allreduce(c, c, 5, SC_FLOAT64, SC_MAX, f->comm));
  /* The wire's path converts each element three times (to the wire, the
   * owner's widening, the result's widening) and rounds a share once more:
   * three round trips bound it. */
  f->auto_half_us = 3.0 * c[0];
  /* ACP-SGD's step reads the gradient for its product and writes the result
   * and the residual from the factors: three passes of r units each. */
  f->auto_lowrank_us = 3.0 * c[1];
  f->auto_sparse_alpha = c[2];
  f->auto_sparse_beta = c[3];
  memset(f->auto_pts, 0, sizeof(f->auto_pts));
  f->auto_any_device = c[4] > 0.0;
  return SC_SUCCESS;
}

const sc_compress_t sc_fusion_auto_modes[4] = {SC_COMPRESS_NONE, SC_COMPRESS_FP16, SC_COMPRESS_TOPK,
                                               SC_COMPRESS_ACPSGD};

sc_compress_t sc_fusion_auto_choose(const sc_fusion_t *f, const sc_fbucket_t *b, double cost[4]) {
  const double a = f->alpha_us, be = f->beta_us_per_byte;
  const size_t es = sc_dtype_size(b->dtype), bytes = b->count * es;
  const int is_float = b->dtype == SC_FLOAT32 || b->dtype == SC_FLOAT64 || b->dtype == SC_FLOAT16 ||
                       b->dtype == SC_BFLOAT16;
  /* dense, fp16, top-k, ACP-SGD; a negative cost: not a candidate */
  cost[0] = a + be * (double)bytes;
  cost[1] =
      b->dtype == SC_FLOAT32 ? a + be * (double)bytes / 2 + f->auto_half_us * (double)b->count : -1;
  cost[2] = f->cfg.density > 0.0 && is_float
                ? f->auto_sparse_alpha + f->auto_sparse_beta * (double)bytes
                : -1;
  cost[3] = -1;
  if (is_float) {
    double wire = 0, work = 0, rest = 0;
    int matrices = 0;
    for (size_t l = b->first; l < b->last; l++) {
      const sc_ftensor_t *t = &f->t[l];
      const size_t r = sc_fusion_matrix_rank(f, t);
      if (!r) {
        rest += (double)t->bytes;
        continue;
      }
      wire += (double)((t->rows + t->cols) * r * es) / 2;
      work += f->auto_lowrank_us * (double)(t->count * r);
      matrices++;
    }
    /* The matrices' factors in one all-reduce, the other tensors in one. */
    if (matrices) cost[3] = a + be * wire + work + (rest > 0 ? a + be * rest : 0);
  }
  for (int m = 0; m < 4; m++)
    if (cost[m] >= 0) cost[m] = sc_fplan_trial_cost(f->auto_pts[m], SC_AUTO_TRIAL_POINTS, cost[m]);
  int best = 0;
  for (int m = 1; m < 4; m++)
    if (cost[m] >= 0 && cost[m] < cost[best]) best = m;
  return sc_fusion_auto_modes[best];
}
