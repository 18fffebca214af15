/* SPDX-License-Identifier: BSD-3-Clause */
/* Creation, registration and the plan step of the fusion engine. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base/clock.h"
#include "lib/base/config.h"
#include "lib/base/log.h"
#include "lib/core/device.h"
#include "lib/fusion/fusion.h"
#include "lib/fusion/plan.h"
#include "lib/fusion/policy.h"

double sc_fusion_now_us(void) {
  return (double)sc_clock_ns() * 1e-3;
}

void sc_fusion_config_init(sc_fusion_config_t *cfg) {
  if (!cfg) return;
  /* Every byte, padding included, so a binding that hashes or copies the
   * struct sees the same thing on every rank. */
  memset(cfg, 0, sizeof(*cfg));
  cfg->policy = SC_FUSE_SIZE;
  cfg->bucket_bytes = 0; /* the library default, SC_FUSION_DEFAULT_BUCKET_BYTES */
  cfg->alpha_us = 0.0;   /* both 0: measured at plan time */
  cfg->beta_us_per_byte = 0.0;
  cfg->density = 0.0;
  cfg->select = SC_SELECT_EXACT;
  cfg->slice_bytes = 0;
  cfg->compress = SC_COMPRESS_NONE;
  cfg->lowrank = 4;
  cfg->seed = 0;
}

sc_result_t sc_fusion_create(sc_comm_t *comm, const sc_fusion_config_t *cfg, sc_fusion_t **out) {
  const char *fn = "sc_fusion_create";
  if (out) *out = NULL;
  if (!comm || !cfg || !out) return SC_ERR(SC_ERR_INVALID_ARG, "%s: NULL argument", fn);
  const sc_fusion_policy_entry_t *row = sc_fusion_policy_get(cfg->policy);
  if (!row) return SC_ERR(SC_ERR_INVALID_ARG, "%s: unknown policy %d", fn, (int)cfg->policy);
  if (!(cfg->density >= 0.0 && cfg->density < 1.0))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: density %g outside [0, 1)", fn, cfg->density);
  if (!(cfg->alpha_us >= 0.0) || !(cfg->beta_us_per_byte >= 0.0) || isinf(cfg->alpha_us) ||
      isinf(cfg->beta_us_per_byte))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: alpha %g us / beta %g us/B must be finite and >= 0", fn,
                  cfg->alpha_us, cfg->beta_us_per_byte);
  if ((unsigned)cfg->select > SC_SELECT_MSTOPK)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: unknown select %d", fn, (int)cfg->select);
  SC_CHECK(sc_fusion_compress_check(cfg, fn));
  if (row->dense_only && sc_fusion_mode(cfg) != SC_COMPRESS_NONE) {
    char alt[128] = "";
    size_t used = 0;
    int n;
    const sc_fusion_policy_entry_t *c = sc_fusion_policies(&n);
    for (int i = 0; i < n && used < sizeof(alt); i++)
      if (!c[i].dense_only)
        used +=
            (size_t)snprintf(alt + used, sizeof(alt) - used, "%s%s", used ? ", " : "", c[i].name);
    return SC_ERR(SC_ERR_UNSUPPORTED,
                  "%s: policy %s takes no density or compression (density %g, compress %d): %s; "
                  "with them use %s",
                  fn, row->name, cfg->density, (int)cfg->compress, row->dense_only, alt);
  }
  SC_CHECK(sc_comm_check_usable(comm));
  sc_fusion_t *f = calloc(1, sizeof(*f));
  if (!f) return SC_ERR(SC_ERR_NOMEM, "%s: state", fn);
  f->comm = comm;
  f->cfg = *cfg;
  if (f->cfg.bucket_bytes == 0) f->cfg.bucket_bytes = SC_FUSION_DEFAULT_BUCKET_BYTES;
  f->rank = comm->rank;
  f->nranks = comm->nranks;
  f->timeout_ms = comm->cfg.timeout_ms;
  f->worker_mode = sc_fusion_mode(cfg) != SC_COMPRESS_NONE;
  pthread_mutex_init(&f->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  /* The clock of sc_clock_deadline_ts, which the timed waits take. */
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&f->cv, &ca);
  pthread_cond_init(&f->wcv, &ca);
  pthread_condattr_destroy(&ca);
  *out = f;
  return SC_SUCCESS;
}

static sc_result_t fusion_add(const char *fn, sc_fusion_t *f, void *buf, size_t count, size_t rows,
                              size_t cols, sc_dtype_t dtype, double backward_us, int *tensor_id) {
  if (!f || !tensor_id) return SC_ERR(SC_ERR_INVALID_ARG, "%s: NULL argument", fn);
  *tensor_id = -1;
  if (f->planned) return SC_ERR(SC_ERR_INVALID_ARG, "%s: the plan is already made", fn);
  size_t es = sc_dtype_size(dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if (count == 0 || !buf)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: tensor %zu: empty (count %zu, buf %p)", fn, f->nt, count,
                  buf);
  if (count > SIZE_MAX / 4 / es)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: tensor %zu: count %zu too large", fn, f->nt, count);
  SC_CHECK(sc_fusion_dev_kind(f, buf, fn));
  if (!(backward_us >= 0.0) || isinf(backward_us))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: tensor %zu: backward_us %g", fn, f->nt, backward_us);
  if (f->nt >= (size_t)INT32_MAX) return SC_ERR(SC_ERR_INVALID_ARG, "%s: too many tensors", fn);
  if (sc_fusion_mode(&f->cfg) == SC_COMPRESS_TOPK && dtype != SC_FLOAT32 && dtype != SC_FLOAT64 &&
      dtype != SC_FLOAT16 && dtype != SC_BFLOAT16)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: tensor %zu: gTop-k (density %g) needs a float dtype", fn,
                  f->nt, f->cfg.density);
  if (f->nt == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 64;
    sc_ftensor_t *t = realloc(f->t, cap * sizeof(*t));
    if (!t) return SC_ERR(SC_ERR_NOMEM, "%s: %zu tensors", fn, cap);
    f->t = t;
    f->cap = cap;
  }
  sc_ftensor_t *t = &f->t[f->nt];
  memset(t, 0, sizeof(*t));
  t->buf = buf;
  t->count = count;
  t->bytes = count * es;
  t->dtype = dtype;
  t->bw_us = backward_us;
  t->bucket = -1;
  t->rows = rows;
  t->cols = cols;
  *tensor_id = (int)f->nt++;
  return SC_SUCCESS;
}

sc_result_t sc_fusion_add_tensor(sc_fusion_t *f, void *buf, size_t count, sc_dtype_t dtype,
                                 double backward_us, int *tensor_id) {
  return fusion_add("sc_fusion_add_tensor", f, buf, count, 0, 0, dtype, backward_us, tensor_id);
}

sc_result_t sc_fusion_add_matrix(sc_fusion_t *f, void *buf, size_t rows, size_t cols,
                                 sc_dtype_t dtype, double backward_us, int *tensor_id) {
  const char *fn = "sc_fusion_add_matrix";
  if (tensor_id) *tensor_id = -1;
  if (rows == 0 || cols == 0 || rows > SIZE_MAX / cols)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: a %zu x %zu matrix", fn, rows, cols);
  return fusion_add(fn, f, buf, rows * cols, rows, cols, dtype, backward_us, tensor_id);
}

/* The tensors of b form one run in memory (either direction: frameworks
 * often lay parameters out in forward order, the reverse of ready order). */
static char *sc_contiguous_base(const sc_fusion_t *f, const sc_fbucket_t *b) {
  int up = 1, down = 1;
  for (size_t l = b->first; l + 1 < b->last; l++) {
    const sc_ftensor_t *t = &f->t[l], *u = &f->t[l + 1];
    if ((char *)t->buf + t->bytes != (char *)u->buf) up = 0;
    if ((char *)u->buf + u->bytes != (char *)t->buf) down = 0;
  }
  if (up) return f->t[b->first].buf;
  if (down) return f->t[b->last - 1].buf;
  return NULL;
}

static sc_result_t sc_fusion_make_buckets(sc_fusion_t *f, const size_t *first, size_t nb) {
  f->b = calloc(nb, sizeof(*f->b));
  if (!f->b) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: %zu buckets", nb);
  f->nb = nb;
  for (size_t i = 0; i < nb; i++) {
    sc_fbucket_t *b = &f->b[i];
    b->first = first[i];
    b->last = first[i + 1];
    b->dtype = f->t[b->first].dtype;
    size_t es = sc_dtype_size(b->dtype);
    for (size_t l = b->first; l < b->last; l++) {
      f->t[l].bucket = (int)i;
      b->count += f->t[l].count;
    }
    b->padded = b->count;
    if (f->cfg.policy == SC_FUSE_DEAR) {
      size_t p = (size_t)f->nranks;
      b->padded = (b->count + p - 1) / p * p;
    }
    char *base = b->padded == b->count ? sc_contiguous_base(f, b) : NULL;
    if (base) {
      b->zero_copy = 1;
      b->buf = base;
    } else if (f->device) {
      SC_CHECK(sc_fusion_dev_alloc(f, b->padded * es, &b->buf));
    } else {
      b->buf = calloc(b->padded, es); /* padding stays zero: it adds nothing */
      if (!b->buf)
        return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: bucket %zu of %zu bytes", i, b->padded * es);
    }
    for (size_t l = b->first; l < b->last; l++) {
      sc_ftensor_t *t = &f->t[l];
      if (b->zero_copy)
        t->offset = (size_t)((char *)t->buf - b->buf);
      else
        t->offset = l == b->first ? 0 : f->t[l - 1].offset + f->t[l - 1].bytes;
    }
  }
  /* Every bucket formed, none chosen yet: AUTO's trial runs on some of them. */
  if (sc_fusion_mode(&f->cfg) == SC_COMPRESS_AUTO) SC_CHECK(sc_fusion_auto_trial(f));
  for (size_t i = 0; i < nb; i++) SC_CHECK(sc_fusion_compress_setup(f, &f->b[i], i));
  return SC_SUCCESS;
}

static void sc_fusion_log_plan(sc_fusion_t *f, double bw_end) {
  if (f->rank != 0) return;
  size_t total = 0, copied = 0;
  for (size_t i = 0; i < f->nb; i++) {
    size_t bytes = f->b[i].padded * sc_dtype_size(f->b[i].dtype);
    total += bytes;
    if (!f->b[i].zero_copy) copied += bytes;
  }
  SC_INFO(SC_SUBSYS_COLL,
          "fusion plan: policy %s%s, %zu tensors, %zu buckets, %.2f MB (%.2f MB in fused "
          "buffers), model alpha %.1f us beta %.3g us/B; predicted: backward ends %.0f us, "
          "last %s ends %.0f us",
          sc_fusion_policy_get(f->cfg.policy)->name, sc_fusion_mode_suffix(sc_fusion_mode(&f->cfg)),
          f->nt, f->nb, total / 1e6, copied / 1e6, f->alpha_us, f->beta_us_per_byte, bw_end,
          f->cfg.policy == SC_FUSE_DEAR ? "reduce-scatter" : "collective",
          f->nb ? f->b[f->nb - 1].pred_end : 0.0);
  for (size_t i = 0; i < f->nb; i++) {
    const sc_fbucket_t *b = &f->b[i];
    if (i < 32 || sc_log_enabled(SC_LOG_TRACE, SC_SUBSYS_COLL))
      SC_INFO(SC_SUBSYS_COLL,
              "fusion bucket %zu: tensors %zu-%zu, %zu elements of %s%s, predicted %.0f-%.0f us", i,
              b->first, b->last - 1, b->padded, sc_dtype_name(b->dtype),
              b->zero_copy ? " (zero-copy)" : "", b->pred_start, b->pred_end);
    else if (i == 32)
      SC_INFO(SC_SUBSYS_COLL, "fusion: %zu more buckets (SC_DEBUG=TRACE lists them)", f->nb - 32);
  }
}

sc_result_t sc_fusion_plan(sc_fusion_t *f) {
  const char *fn = "sc_fusion_plan";
  if (!f) return SC_ERR(SC_ERR_INVALID_ARG, "%s: f is NULL", fn);
  if (f->planned) return SC_ERR(SC_ERR_INVALID_ARG, "%s: already planned", fn);
  if (f->b) return SC_ERR(SC_ERR_INVALID_ARG, "%s: an earlier plan failed: destroy and create", fn);
  /* Local (the collectives' order is the same either way), read before the
   * first collective so that a bad value fails here, not halfway. */
  long pipe = 1;
  SC_CHECK(sc_parse_long("SC_FUSION_PIPELINE", sc_config_get("SC_FUSION_PIPELINE"), 0, 1, &pipe));
  f->lr_pipeline = (int)pipe;
  SC_CHECK(sc_fusion_check_same(f));
  if (f->nt == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: no tensors registered (on any rank)", fn);
  SC_CHECK(sc_fusion_agree_times(f));
  double alpha = f->cfg.alpha_us, beta = f->cfg.beta_us_per_byte;
  if (sc_fusion_mode(&f->cfg) == SC_COMPRESS_TOPK)
    SC_CHECK(sc_fusion_sparse_model(f, alpha, beta, &alpha, &beta));
  else if (alpha == 0.0 && beta == 0.0)
    SC_CHECK(sc_fusion_calibrate(f, &alpha, &beta));
  f->alpha_us = alpha;
  f->beta_us_per_byte = beta;
  if (sc_fusion_mode(&f->cfg) == SC_COMPRESS_AUTO) SC_CHECK(sc_fusion_auto_costs(f, alpha, beta));

  size_t n = f->nt;
  size_t *bytes = malloc(n * sizeof(*bytes)), *first = malloc((n + 1) * sizeof(*first));
  int *group = malloc(n * sizeof(*group));
  double *bw = malloc(n * sizeof(*bw));
  double *ps = NULL, *pe = NULL;
  sc_result_t r = SC_SUCCESS;
  if (!bytes || !first || !group || !bw) {
    r = SC_ERR(SC_ERR_NOMEM, "%s: %zu tensors", fn, n);
    goto out;
  }
  for (size_t l = 0; l < n; l++) {
    bytes[l] = sc_fusion_wire_bytes(f, &f->t[l]);
    group[l] = (int)f->t[l].dtype;
    bw[l] = f->t[l].bw_us;
  }
  sc_fplan_in_t in = {.n = n, .bytes = bytes, .group = group, .bw_us = bw};
  const size_t nb = sc_fusion_policy_get(f->cfg.policy)->plan(&in, &f->cfg, alpha, beta, first);
  if (f->device) SC_CHECK_GOTO(sc_fusion_dev_start(f), r, out);
  SC_CHECK_GOTO(sc_fusion_make_buckets(f, first, nb), r, out);
  ps = malloc(nb * sizeof(*ps));
  pe = malloc(nb * sizeof(*pe));
  if (!ps || !pe) {
    r = SC_ERR(SC_ERR_NOMEM, "%s: %zu buckets", fn, nb);
    goto out;
  }
  /* DeAR's backward carries only the reduce-scatter: about half the bytes. */
  double pbeta = f->cfg.policy == SC_FUSE_DEAR ? beta / 2 : beta;
  sc_fplan_timeline(&in, first, nb, alpha, pbeta, ps, pe);
  double bw_end = 0;
  for (size_t l = 0; l < n; l++) bw_end += bw[l];
  for (size_t i = 0; i < nb; i++) {
    f->b[i].pred_start = ps[i];
    f->b[i].pred_end = pe[i];
  }
  if (f->worker_mode) SC_CHECK_GOTO(sc_fusion_worker_start(f), r, out);
  if (f->cfg.policy == SC_FUSE_P3) {
    SC_CHECK_GOTO(sc_fusion_p3_start(f, f->cfg.slice_bytes, alpha, beta), r, out);
  }
  f->planned = 1;
  sc_fusion_log_plan(f, bw_end);
out:
  free(bytes);
  free(first);
  free(group);
  free(bw);
  free(ps);
  free(pe);
  return r;
}

sc_result_t sc_fusion_num_buckets(const sc_fusion_t *f, int *n) {
  if (!f || !n) return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_num_buckets: NULL argument");
  if (!f->planned)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_num_buckets: call sc_fusion_plan first");
  *n = (int)f->nb;
  return SC_SUCCESS;
}

sc_result_t sc_fusion_bucket_of(const sc_fusion_t *f, int tensor_id, int *bucket) {
  if (!f || !bucket) return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_bucket_of: NULL argument");
  if (!f->planned)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_bucket_of: call sc_fusion_plan first");
  if (tensor_id < 0 || (size_t)tensor_id >= f->nt)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_bucket_of: tensor %d outside [0, %zu)", tensor_id,
                  f->nt);
  *bucket = f->t[tensor_id].bucket;
  return SC_SUCCESS;
}

sc_result_t sc_fusion_destroy(sc_fusion_t *f) {
  if (!f) return SC_SUCCESS;
  /* Outstanding collectives still use the buffers: finish them first (every
   * launched bucket was launched on every rank, so this matches). The worker
   * drains its queue before it stops. */
  sc_fusion_worker_stop(f);
  sc_result_t r = sc_fusion_p3_stop(f);
  for (size_t i = 0; i < f->nb; i++) {
    sc_fbucket_t *b = &f->b[i];
    sc_result_t ri = SC_SUCCESS;
    if (b->req) ri = sc_wait(&b->req);
    if (b->req2 && ri == SC_SUCCESS)
      ri = sc_wait(&b->req2);
    else if (b->req2)
      sc_wait(&b->req2);
    if (r == SC_SUCCESS) r = ri;
    if (!b->zero_copy && f->device)
      sc_fusion_dev_free(f, b->buf);
    else if (!b->zero_copy)
      free(b->buf);
    sc_fusion_compress_free(f, b);
  }
  sc_fusion_dev_stop(f);
  free(f->b);
  free(f->t);
  free(f->wq);
  pthread_cond_destroy(&f->cv);
  pthread_cond_destroy(&f->wcv);
  pthread_mutex_destroy(&f->lock);
  free(f);
  return r;
}
