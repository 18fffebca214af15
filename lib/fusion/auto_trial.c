/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_COMPRESS_AUTO's trial. The model prices each mode from runs timed
 * alone, the best of a few: the all-reduce (dense, and fp16's wire), gTop-k
 * without its residual, ACP-SGD's product. In a step they run as they
 * really do: top-k with its residual, ACP-SGD with its orthogonalisation,
 * reconstruction, residual and the copies of its factors, small all-reduces
 * on ranks that share cores. On 8 ranks of 2 cores the model alone took
 * ACP-SGD for many of ResNet-50's weight buckets and ran at 1.17x top-k's
 * time (docs/REPRODUCTION.md, part (f)). So, with a calibrated model, every
 * candidate runs for real on scratch copies of some of its buckets (every
 * rank at once, the slowest rank's time), and each mode's modelled cost is
 * corrected through its measured points (sc_fplan_trial_cost). Top-k and
 * ACP-SGD on their smallest, median and largest buckets: their real cost
 * outgrows the model's with the bucket, and not alike (measured over
 * modelled there, ResNet-50: top-k 1.5, 2.3, 4.5; ACP-SGD 1.4, 5.1, 8.3).
 * Dense and fp16, priced by the all-reduce model they run, on the smallest
 * and the median float32 bucket (the largest would cost seconds at plan
 * time, and far more than any compressed mode anyway). The gradients are
 * not touched; the scratch state is freed at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/dtype.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/fusion/fusion.h"
#include "lib/fusion/plan.h"

/* Timed samples of each mode, the best taken; ACP-SGD alternates its two
 * factors, so its sample is two consecutive calls. */
#define SC_AUTO_TRIAL_SAMPLES 2

/* A float32 bucket in size order: element count, ties by index (the same
 * order on every rank). */
typedef struct {
  size_t count, index;
} sc_trial_key_t;

static int by_count(const void *a, const void *b) {
  const sc_trial_key_t *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Mean time of one call of mode m on bucket i's scratch copy, best of the
 * samples (collective); 0 when the bucket does not travel as m. */
static sc_result_t time_mode(sc_fusion_t *f, size_t i, sc_compress_t m, char *scratch, double *us) {
  const sc_fbucket_t *b = &f->b[i];
  const int calls = m == SC_COMPRESS_ACPSGD ? 2 : 1;
  sc_fbucket_t t;
  memset(&t, 0, sizeof(t));
  t.first = b->first;
  t.last = b->last;
  t.dtype = b->dtype;
  t.count = b->count;
  t.padded = b->padded;
  t.buf = scratch;
  *us = 0.0;
  sc_result_t r = sc_fusion_compress_setup_as(f, &t, i, m);
  if (r == SC_SUCCESS && t.comp == m) {
    r = sc_fusion_reduce_at(f, &t, scratch); /* the first call's own setup */
    for (int s = 0; s < SC_AUTO_TRIAL_SAMPLES && r == SC_SUCCESS; s++) {
      if ((r = sc_barrier(f->comm)) != SC_SUCCESS) break;
      const double t0 = sc_fusion_now_us();
      for (int c = 0; c < calls && r == SC_SUCCESS; c++) r = sc_fusion_reduce_at(f, &t, scratch);
      const double el = (sc_fusion_now_us() - t0) / calls;
      if (s == 0 || el < *us) *us = el;
    }
  }
  sc_fusion_compress_free(f, &t);
  return r;
}

/* Bucket i's scratch copy, and on it each mode m with run[m] set timed
 * into meas[m] (not yet agreed); the same modes in the same order on every
 * rank. */
static sc_result_t time_bucket(sc_fusion_t *f, size_t i, const int run[4], double meas[4]) {
  const sc_fbucket_t *b = &f->b[i];
  float *x = malloc(b->padded * sizeof(float));
  if (!x)
    return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: auto's trial bucket of %zu floats", b->count);
  const uint32_t salt = (uint32_t)f->rank * 7919u;
  sc_result_t r = SC_SUCCESS;
  for (int m = 0; m < 4 && r == SC_SUCCESS; m++) {
    if (!run[m]) continue;
    for (size_t k = 0; k < b->padded; k++)
      x[k] = (float)(((uint32_t)k * 2654435761u + salt) % 2001u) / 1000.0f - 1.0f;
    r = time_mode(f, i, sc_fusion_auto_modes[m], (char *)x, &meas[m]);
  }
  free(x);
  return r;
}

sc_result_t sc_fusion_auto_trial(sc_fusion_t *f) {
  /* A model the caller gave is the caller's network, not this one's; device
   * buckets run other code than the host scratch would time. Every rank
   * decides alike: the config is checked the same everywhere, and whether
   * any rank has device tensors was agreed in sc_fusion_auto_costs (which
   * also cleared auto_pts, so that the choice below is the model's). */
  if (f->cfg.alpha_us != 0.0 || f->cfg.beta_us_per_byte != 0.0 || f->nranks < 2 ||
      f->auto_any_device)
    return SC_SUCCESS;
  enum { NP = SC_AUTO_TRIAL_POINTS };
  /* The float32 buckets by size, each with its modelled costs. */
  sc_trial_key_t *order = malloc((f->nb ? f->nb : 1) * sizeof(*order));
  double(*cost)[4] = malloc((f->nb ? f->nb : 1) * sizeof(*cost));
  if (!order || !cost) {
    free(order);
    free(cost);
    return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: auto's trial: %zu buckets", f->nb);
  }
  size_t n = 0;
  for (size_t i = 0; i < f->nb; i++) {
    if (f->b[i].dtype != SC_FLOAT32) continue;
    sc_fusion_auto_choose(f, &f->b[i], cost[i]);
    order[n++] = (sc_trial_key_t){f->b[i].count, i};
  }
  qsort(order, n, sizeof(*order), by_count);
  /* at[m]: mode m's buckets (-1: none): of those where it is a candidate,
   * the smallest, the median and (top-k, ACP-SGD) the largest. meas and
   * model: its time and cost there. */
  long at[4][NP];
  double meas[4][NP] = {{0}}, model[4][NP];
  for (int m = 0; m < 4; m++) {
    size_t c = 0, first = 0, mid = 0, last = 0;
    for (size_t k = 0; k < n; k++) c += cost[order[k].index][m] >= 0;
    for (size_t k = 0, seen = 0; k < n; k++) {
      const size_t i = order[k].index;
      if (cost[i][m] < 0) continue;
      if (seen == 0) first = i;
      if (seen == c / 2) mid = i;
      last = i;
      seen++;
    }
    const long pick[NP] = {c ? (long)first : -1, c > 1 ? (long)mid : -1,
                           m >= 2 && c > 2 ? (long)last : -1};
    for (int k = 0; k < NP; k++) {
      at[m][k] = pick[k];
      model[m][k] = pick[k] >= 0 ? cost[pick[k]][m] : -1;
    }
  }
  free(order);
  free(cost);
  /* Each bucket once, in index order, with the modes that use it. */
  for (size_t i = 0; i < f->nb; i++) {
    int run[4] = {0}, any = 0;
    double t[4] = {0};
    for (int m = 0; m < 4; m++)
      for (int k = 0; k < NP; k++)
        if (at[m][k] == (long)i) any = run[m] = 1;
    if (!any) continue;
    SC_CHECK(time_bucket(f, i, run, t));
    for (int m = 0; m < 4; m++)
      for (int k = 0; k < NP; k++)
        if (at[m][k] == (long)i) meas[m][k] = t[m];
  }
  SC_CHECK(sc_allreduce(meas, meas, 4 * NP, SC_FLOAT64, SC_MAX, f->comm));
  for (int m = 0; m < 4; m++)
    for (int k = 0; k < NP; k++) {
      f->auto_pts[m][2 * k] = model[m][k] > 0.0 ? model[m][k] : 0.0;
      f->auto_pts[m][2 * k + 1] = meas[m][k];
    }
  if (f->rank == 0) {
    char line[512];
    size_t len = 0;
    static const char *const names[4] = {"dense", "fp16", "top-k", "ACP-SGD"};
    for (int m = 0; m < 4 && len < sizeof(line); m++) {
      len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s", m ? "; " : "", names[m]);
      for (int k = 0; k < NP && len < sizeof(line); k++)
        if (at[m][k] >= 0)
          len += (size_t)snprintf(line + len, sizeof(line) - len, " %.0f/%.0f (bucket %ld)",
                                  meas[m][k], model[m][k], at[m][k]);
    }
    SC_INFO(SC_SUBSYS_COLL, "fusion: auto's trial, us measured/modelled: %s", line);
  }
  return SC_SUCCESS;
}
