/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_COMPRESS_AUTO's trial. The model prices top-k by gTop-k timed alone
 * and ACP-SGD by the all-reduce model plus a probe of its product, each
 * the best of a few runs. In a step the two run as they really do: top-k
 * with its residual, ACP-SGD with its orthogonalisation, reconstruction,
 * residual and the copies of its factors, on ranks that may share cores.
 * On 8 ranks of 2 cores the model put ACP-SGD below top-k on most weight
 * buckets of ResNet-50 while top-k alone ran 1.4x faster than auto's mix
 * (docs/REPRODUCTION.md, part (f)). So, with a calibrated model, each of
 * the two runs for real on a scratch copy of one bucket (every rank at
 * once, the slowest rank's time), and its modelled cost on every bucket is
 * scaled by measured over modelled on that one. The gradients are not
 * touched; the scratch state is freed at once. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/dtype.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/fusion/fusion.h"

/* ACP-SGD alternates its two factors: a sample is two consecutive calls. */
#define SC_AUTO_TRIAL_CALLS   2
#define SC_AUTO_TRIAL_SAMPLES 2

double sc_fusion_auto_scale(double measured_us, double modelled_us) {
  return measured_us > 0.0 && modelled_us > 0.0 ? measured_us / modelled_us : 1.0;
}

/* The bucket the trial runs: of the float32 buckets where ACP-SGD is a
 * candidate (else where top-k is), the one of median element count, as the
 * typical bucket (the largest may be one tensor far past the sizes the
 * top-k model is measured at); its modelled costs in cost. -1: none, -2:
 * no memory. */
static long trial_bucket(const sc_fusion_t *f, double cost[4]) {
  size_t *idx = malloc((f->nb ? f->nb : 1) * sizeof(*idx));
  if (!idx) return -2;
  long pick = -1;
  for (int want_acp = 1; want_acp >= 0 && pick < 0; want_acp--) {
    size_t n = 0;
    for (size_t i = 0; i < f->nb; i++) {
      const sc_fbucket_t *b = &f->b[i];
      if (b->dtype != SC_FLOAT32) continue;
      double c[4];
      sc_fusion_auto_choose(f, b, c);
      if ((want_acp ? c[3] : c[2]) < 0) continue;
      /* insertion by count, ties by index: the same order on every rank */
      size_t at = n++;
      while (at > 0 && f->b[idx[at - 1]].count > b->count) {
        idx[at] = idx[at - 1];
        at--;
      }
      idx[at] = i;
    }
    if (n) pick = (long)idx[n / 2];
  }
  free(idx);
  if (pick >= 0) sc_fusion_auto_choose(f, &f->b[(size_t)pick], cost);
  return pick;
}

/* Mean time of one call of mode m on bucket i's scratch copy, best of the
 * samples (collective); 0 when the bucket does not travel as m. */
static sc_result_t time_mode(sc_fusion_t *f, size_t i, sc_compress_t m, char *scratch, double *us) {
  const sc_fbucket_t *b = &f->b[i];
  sc_fbucket_t t;
  memset(&t, 0, sizeof(t));
  t.first = b->first;
  t.last = b->last;
  t.dtype = b->dtype;
  t.count = b->count;
  t.padded = b->padded;
  t.buf = scratch;
  *us = 0.0;
  sc_result_t r = sc_fusion_setup_as(f, &t, i, m);
  if (r == SC_SUCCESS && t.comp == m) {
    r = sc_fusion_reduce_at(f, &t, scratch); /* the first call's own setup */
    for (int s = 0; s < SC_AUTO_TRIAL_SAMPLES && r == SC_SUCCESS; s++) {
      if ((r = sc_barrier(f->comm)) != SC_SUCCESS) break;
      const double t0 = sc_fusion_now_us();
      for (int c = 0; c < SC_AUTO_TRIAL_CALLS && r == SC_SUCCESS; c++)
        r = sc_fusion_reduce_at(f, &t, scratch);
      const double el = (sc_fusion_now_us() - t0) / SC_AUTO_TRIAL_CALLS;
      if (s == 0 || el < *us) *us = el;
    }
  }
  sc_fusion_compress_free(f, &t);
  return r;
}

sc_result_t sc_fusion_auto_trial(sc_fusion_t *f) {
  f->auto_scale[0] = f->auto_scale[1] = 1.0;
  /* A model the caller gave is the caller's network, not this one's; device
   * buckets run other code than the host scratch would time. Every rank
   * decides alike: the config is checked the same everywhere, and whether
   * any rank has device tensors was agreed in sc_fusion_auto_costs. */
  if (f->cfg.alpha_us != 0.0 || f->cfg.beta_us_per_byte != 0.0 || f->nranks < 2 ||
      f->auto_any_device)
    return SC_SUCCESS;
  double cost[4] = {-1, -1, -1, -1};
  const long i = trial_bucket(f, cost);
  if (i == -2)
    return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: auto's trial: %zu bucket indices", f->nb);
  if (i < 0) return SC_SUCCESS;
  const sc_fbucket_t *b = &f->b[(size_t)i];
  float *x = malloc(b->padded * sizeof(float));
  if (!x)
    return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: auto's trial bucket of %zu floats", b->count);
  const uint32_t salt = (uint32_t)f->rank * 7919u;
  for (size_t k = 0; k < b->padded; k++)
    x[k] = (float)(((uint32_t)k * 2654435761u + salt) % 2001u) / 1000.0f - 1.0f;
  /* [0]: top-k, [1]: ACP-SGD; the slowest rank's. */
  double t[2] = {0.0, 0.0};
  sc_result_t r = SC_SUCCESS;
  if (cost[3] >= 0) r = time_mode(f, (size_t)i, SC_COMPRESS_ACPSGD, (char *)x, &t[1]);
  if (r == SC_SUCCESS && cost[2] >= 0)
    r = time_mode(f, (size_t)i, SC_COMPRESS_TOPK, (char *)x, &t[0]);
  if (r == SC_SUCCESS) r = sc_allreduce(t, t, 2, SC_FLOAT64, SC_MAX, f->comm);
  free(x);
  SC_CHECK(r);
  f->auto_scale[0] = sc_fusion_auto_scale(t[0], cost[2]);
  f->auto_scale[1] = sc_fusion_auto_scale(t[1], cost[3]);
  if (f->rank == 0)
    SC_INFO(SC_SUBSYS_COLL,
            "fusion: auto's trial on bucket %ld (%zu elements): top-k %.0f us against %.0f "
            "modelled (x%.2f), ACP-SGD %.0f us against %.0f (x%.2f); 0 and -1: not a candidate",
            i, b->count, t[0], cost[2], f->auto_scale[0], t[1], cost[3], f->auto_scale[1]);
  return SC_SUCCESS;
}
