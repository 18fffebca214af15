/* SPDX-License-Identifier: BSD-3-Clause */
/* What a fusion bucket travels as (sc_fusion_config_t.compress): the bytes
 * the policies plan over, each bucket's state (gTop-k's residual, the 1-bit
 * residuals, a low-rank state per matrix), and the one blocking call the
 * worker thread makes per bucket and round. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/dtype.h"
#include "lib/base/log.h"
#include "lib/compress/compress.h"
#include "lib/fusion/fusion.h"

#define SC_FUSION_LOWRANK_MAX 64

sc_compress_t sc_fusion_mode(const sc_fusion_config_t *cfg) {
  if (cfg->compress == SC_COMPRESS_NONE && cfg->density > 0.0) return SC_COMPRESS_TOPK;
  return cfg->compress;
}

sc_result_t sc_fusion_compress_check(const sc_fusion_config_t *cfg, const char *fn) {
  if ((unsigned)cfg->compress > SC_COMPRESS_AUTO)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: unknown compress %d", fn, (int)cfg->compress);
  if (cfg->compress == SC_COMPRESS_TOPK && !(cfg->density > 0.0))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: SC_COMPRESS_TOPK needs a density in (0, 1)", fn);
  if (cfg->compress != SC_COMPRESS_NONE && cfg->compress != SC_COMPRESS_TOPK &&
      cfg->compress != SC_COMPRESS_AUTO && cfg->density > 0.0)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: density %g is gTop-k's; compress %d takes none", fn,
                  cfg->density, (int)cfg->compress);
  if ((cfg->compress == SC_COMPRESS_POWERSGD || cfg->compress == SC_COMPRESS_ACPSGD ||
       cfg->compress == SC_COMPRESS_AUTO) &&
      (cfg->lowrank < 1 || cfg->lowrank > SC_FUSION_LOWRANK_MAX))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: lowrank %d outside [1, %d]", fn, cfg->lowrank,
                  SC_FUSION_LOWRANK_MAX);
  return SC_SUCCESS;
}

const char *sc_fusion_mode_suffix(sc_compress_t m) {
  static const char *const names[] = {"",           " + gTop-k",    " + PowerSGD",
                                      " + ACP-SGD", " + fp16 wire", " + bf16 wire",
                                      " + 1-bit",   " + auto"};
  return (unsigned)m < sizeof(names) / sizeof(names[0]) ? names[m] : "";
}

static int is_lowrank(sc_compress_t m) {
  return m == SC_COMPRESS_POWERSGD || m == SC_COMPRESS_ACPSGD;
}

/* A matrix that low rank reduces: both sides above 1. */
size_t sc_fusion_matrix_rank(const sc_fusion_t *f, const sc_ftensor_t *t) {
  if (t->rows < 2 || t->cols < 2) return 0;
  size_t r = (size_t)f->cfg.lowrank;
  if (r > t->rows) r = t->rows;
  return r > t->cols ? t->cols : r;
}

size_t sc_fusion_wire_bytes(const sc_fusion_t *f, const sc_ftensor_t *t) {
  const sc_compress_t m = sc_fusion_mode(&f->cfg);
  const size_t es = sc_dtype_size(t->dtype);
  const size_t r = sc_fusion_matrix_rank(f, t);
  if (is_lowrank(m) && r) {
    /* PowerSGD sends both factors every step; ACP-SGD one, alternating. */
    size_t w = (t->rows + t->cols) * r * es;
    if (m == SC_COMPRESS_ACPSGD) w = (w + 1) / 2;
    return w < t->bytes ? w : t->bytes;
  }
  if (t->dtype == SC_FLOAT32 && (m == SC_COMPRESS_FP16 || m == SC_COMPRESS_BF16))
    return t->bytes / 2;
  if (t->dtype == SC_FLOAT32 && m == SC_COMPRESS_ONEBIT) return t->count / 8 + 1;
  return t->bytes;
}

static sc_result_t setup(sc_fusion_t *f, sc_fbucket_t *b, size_t i) {
  sc_compress_t m = sc_fusion_mode(&f->cfg);
  if (m == SC_COMPRESS_AUTO) {
    double cost[4];
    m = sc_fusion_auto_choose(f, b, cost);
    if (f->rank == 0)
      SC_INFO(SC_SUBSYS_COLL,
              "fusion bucket %zu: auto chose%s (modelled: dense %.0f us, fp16 %.0f, top-k %.0f, "
              "ACP-SGD %.0f; -1: not a candidate)",
              i, m == SC_COMPRESS_NONE ? " dense" : sc_fusion_mode_suffix(m) + 2, cost[0], cost[1],
              cost[2], cost[3]);
  }
  return sc_fusion_compress_setup_as(f, b, i, m);
}

sc_result_t sc_fusion_compress_setup_as(sc_fusion_t *f, sc_fbucket_t *b, size_t i,
                                        sc_compress_t m) {
  b->comp = m;
  /* Every bucket the worker runs (a dense one too) keeps its failure's detail. */
  if (f->worker_mode && !(b->errmsg = calloc(1, SC_ERRMSG_MAX)))
    return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: bucket %zu", i);
  if (m == SC_COMPRESS_NONE) return SC_SUCCESS;
  switch (m) {
  case SC_COMPRESS_TOPK: {
    double k = f->cfg.density * (double)b->count;
    b->k = k < 1.0 ? 1 : (size_t)k;
    return sc_ef_create(b->count, b->dtype, &b->ef);
  }
  case SC_COMPRESS_FP16:
  case SC_COMPRESS_BF16:
    if (b->dtype != SC_FLOAT32) b->comp = SC_COMPRESS_NONE;
    return SC_SUCCESS;
  case SC_COMPRESS_ONEBIT:
    if (b->dtype != SC_FLOAT32) {
      b->comp = SC_COMPRESS_NONE;
      return SC_SUCCESS;
    }
    return sc_onebit_create(b->count, b->dtype, SC_ONEBIT_SCALED, f->comm, &b->ob);
  default:
    break;
  }
  /* Low rank: a state per matrix, the vectors gathered into one run. */
  const size_t nt = b->last - b->first, es = sc_dtype_size(b->dtype);
  b->lr = calloc(nt, sizeof(*b->lr));
  if (!b->lr) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: bucket %zu", i);
  int any = 0;
  size_t fbytes = 0;
  const size_t cs = b->dtype == SC_FLOAT64 ? sizeof(double) : sizeof(float);
  for (size_t l = b->first; l < b->last; l++) {
    const sc_ftensor_t *t = &f->t[l];
    const size_t r = sc_fusion_matrix_rank(f, t);
    if (!r) {
      b->dense_count += t->count;
      continue;
    }
    any = 1;
    fbytes += r * (t->rows > t->cols ? t->rows : t->cols) * cs;
    SC_CHECK(sc_lowrank_create(t->rows, t->cols, t->dtype, f->cfg.lowrank,
                               m == SC_COMPRESS_POWERSGD ? SC_LOWRANK_POWERSGD : SC_LOWRANK_ACPSGD,
                               1, f->cfg.seed, &b->lr[l - b->first]));
  }
  if (!any) {
    b->comp = SC_COMPRESS_NONE;
    return SC_SUCCESS;
  }
  if (b->dense_count) {
    b->dense = malloc(b->dense_count * es);
    if (!b->dense) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: bucket %zu's vectors", i);
  }
  b->fbuf = malloc(fbytes);
  if (!b->fbuf) return SC_ERR(SC_ERR_NOMEM, "sc_fusion_plan: bucket %zu's factors", i);
  return SC_SUCCESS;
}

/* Device tensors: a bucket the compressed calls reduce travels through the
 * fusion's host image (device.c), sized here for the largest. */
static int staged(const sc_fusion_t *f, const sc_fbucket_t *b) {
  return f->device && b->comp != SC_COMPRESS_NONE && b->comp != SC_COMPRESS_TOPK;
}

/* PowerSGD only: its second round is what a next bucket's first can hide
 * behind. ACP-SGD's one round leaves only its reconstruction to overlap,
 * and on CPU-bound ranks moving the next bucket's product ahead of it
 * measured slower (docs/REPRODUCTION.md, part (f)). */
int sc_fusion_bucket_pipelined(const sc_fusion_t *f, const sc_fbucket_t *b) {
  return f->lr_pipeline && b->comp == SC_COMPRESS_POWERSGD && !staged(f, b);
}

sc_result_t sc_fusion_compress_setup(sc_fusion_t *f, sc_fbucket_t *b, size_t i) {
  SC_CHECK(setup(f, b, i));
  if (!staged(f, b)) return SC_SUCCESS;
  return sc_fusion_dev_stage(f, b->count * sc_dtype_size(b->dtype));
}

void sc_fusion_compress_free(sc_fusion_t *f, sc_fbucket_t *b) {
  if (b->ef) sc_ef_destroy(b->ef);
  if (b->ob) sc_onebit_destroy(b->ob);
  if (b->lr)
    for (size_t l = 0; l < b->last - b->first; l++)
      if (b->lr[l]) sc_lowrank_destroy(b->lr[l]);
  free(b->lr);
  free(b->dense);
  free(b->fbuf);
  free(b->errmsg);
  b->ef = NULL;
  b->ob = NULL;
  b->lr = NULL;
  b->dense = b->fbuf = b->errmsg = NULL;
  (void)f;
}

/* Low rank: each round's factors of every matrix summed in one all-reduce
 * (ACP-SGD's fused bucket; PowerSGD's two rounds), the vectors averaged in
 * one more; the steps of lowrank.c back to back. */
static sc_result_t reduce_lowrank(sc_fusion_t *f, sc_fbucket_t *b, char *buf) {
  SC_CHECK(sc_fusion_lr_issue(f, b, buf));
  SC_CHECK(sc_fusion_lr_next(f, b, buf));
  return sc_fusion_lr_finish(f, b, buf);
}

sc_result_t sc_fusion_reduce_at(sc_fusion_t *f, sc_fbucket_t *b, char *buf) {
  switch (b->comp) {
  case SC_COMPRESS_TOPK:
    return sc_gtopk_allreduce(buf, b->count, b->dtype, b->k, f->cfg.select, b->ef, f->comm);
  case SC_COMPRESS_FP16:
  case SC_COMPRESS_BF16:
    return sc_allreduce_compressed(buf, buf, b->count, b->dtype, SC_AVG,
                                   b->comp == SC_COMPRESS_FP16 ? SC_FLOAT16 : SC_BFLOAT16, f->comm);
  case SC_COMPRESS_ONEBIT:
    return sc_onebit_allreduce(buf, b->ob, f->comm);
  case SC_COMPRESS_POWERSGD:
  case SC_COMPRESS_ACPSGD:
    return reduce_lowrank(f, b, buf);
  default:
    return sc_allreduce(buf, buf, b->count, b->dtype, SC_AVG, f->comm);
  }
}

/* A staged bucket runs the host code on a copy of the same bytes, so device
 * tensors get the host tensors' results bit for bit (low rank gathers its
 * factors with host memcpy, so it could not take the device buffer itself). */
sc_result_t sc_fusion_bucket_reduce(sc_fusion_t *f, sc_fbucket_t *b) {
  if (!staged(f, b)) return sc_fusion_reduce_at(f, b, b->buf);
  const size_t bytes = b->count * sc_dtype_size(b->dtype);
  SC_CHECK(sc_fusion_dev_copy(f, f->hstage, b->buf, bytes, "fusion: a bucket to its host image"));
  SC_CHECK(sc_fusion_reduce_at(f, b, f->hstage));
  return sc_fusion_dev_copy(f, b->buf, f->hstage, bytes, "fusion: a bucket's result to the device");
}

sc_result_t sc_fusion_bucket_compress(const sc_fusion_t *f, int bucket, sc_compress_t *what) {
  if (!f || !what) return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_bucket_compress: NULL argument");
  if (!f->planned)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_bucket_compress: call sc_fusion_plan first");
  if (bucket < 0 || (size_t)bucket >= f->nb)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_fusion_bucket_compress: bucket %d outside [0, %zu)",
                  bucket, f->nb);
  *what = f->b[bucket].comp;
  return SC_SUCCESS;
}
