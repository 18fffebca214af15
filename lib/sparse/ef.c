/* SPDX-License-Identifier: BSD-3-Clause */
/* Error feedback around the gTop-k sparse all-reduce (the gTop-k S-SGD step
 * of docs/ALGORITHMS.md): acc = grad + residual; local top-k of acc; the
 * residual keeps everything not selected; the sparse all-reduce reports which
 * selected entries survived every merge, and those that did not go back to
 * the residual; grad becomes the average of the global sparse result. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/sparse_merge.h"
#include "lib/core/comm.h"
#include "lib/core/device.h"
#include "lib/sparse/ef.h"
#include "lib/sparse/hitopk.h"
#include "lib/sparse/sparse.h"

static void ef_work_free(ef_work_t *w) {
  free(w->sel_idx);
  free(w->out_idx);
  free(w->w_idx);
  free(w->sel_val);
  free(w->out_val);
  free(w->w_val);
  free(w->w_key);
  free(w->w_src);
  free(w->surv);
}

/* Makes w hold a step with this k, reusing what it has when that is enough. */
static sc_result_t ef_work_reserve(ef_work_t *w, size_t k, size_t es) {
  const size_t c = 2 * k + 1; /* GAUSSIAN may return up to 2k */
  if (w->cap >= c) return SC_SUCCESS;
  ef_work_free(w);
  memset(w, 0, sizeof(*w));
  w->sel_idx = malloc(c * 4);
  w->out_idx = malloc(c * 4);
  w->w_idx = malloc(c * 4);
  w->sel_val = malloc(c * es);
  w->out_val = malloc(c * es);
  w->w_val = malloc(c * es);
  w->w_key = malloc(c * 8);
  w->w_src = malloc(c);
  w->surv = malloc(c);
  if (!w->sel_idx || !w->out_idx || !w->w_idx || !w->sel_val || !w->out_val || !w->w_val ||
      !w->w_key || !w->w_src || !w->surv) {
    ef_work_free(w);
    memset(w, 0, sizeof(*w));
    return SC_ERR(SC_ERR_NOMEM, "sc_gtopk_allreduce: work space for k = %zu", k);
  }
  w->cap = c;
  return SC_SUCCESS;
}

static double get(sc_dtype_t t, const void *v, size_t i) {
  return sc_sparse_value(t, v, i);
}

void sc_ef_put(sc_dtype_t t, void *v, size_t i, double x) {
  uint8_t *p = v;
  if (t == SC_FLOAT64) {
    memcpy(p + i * 8, &x, 8);
  } else if (t == SC_FLOAT32) {
    float f = (float)x;
    memcpy(p + i * 4, &f, 4);
  } else {
    uint16_t h = t == SC_FLOAT16 ? sc_float_to_half((float)x) : sc_float_to_bfloat16((float)x);
    memcpy(p + i * 2, &h, 2);
  }
}

sc_result_t sc_ef_create(size_t n, sc_dtype_t dtype, sc_ef_t **ef) {
  if (!ef) return SC_ERR(SC_ERR_INVALID_ARG, "sc_ef_create: ef is NULL");
  *ef = NULL;
  if (!sc_sparse_dtype_ok(dtype))
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_ef_create: dtype %d is not a float type", (int)dtype);
  if (n > UINT32_MAX) /* the local top-k's limit: sc_topk indexes with 32 bits */
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_ef_create: n %zu exceeds %u", n, (unsigned)UINT32_MAX);
  sc_ef_t *e = calloc(1, sizeof(*e));
  void *r = calloc(n ? n : 1, sc_dtype_size(dtype));
  if (!e || !r) {
    free(e);
    free(r);
    return SC_ERR(SC_ERR_NOMEM, "sc_ef_create: residual of %zu elements", n);
  }
  e->n = n;
  e->dtype = dtype;
  e->residual = r; /* all-zero bits are +0.0 in every float format */
  *ef = e;
  return SC_SUCCESS;
}

sc_result_t sc_ef_destroy(sc_ef_t *ef) {
  if (!ef) return SC_SUCCESS;
  ef_work_free(&ef->work);
  sc_hitopk_buf_free(ef->hitopk);
  /* Every step waits for its device work: nothing is queued on the residual. */
  if (ef->kind == SC_EF_DEVICE)
    ef->rt->free_device(ef->residual);
  else
    free(ef->residual);
  free(ef);
  return SC_SUCCESS;
}

size_t sc_ef_trim(sc_dtype_t dtype, size_t k, uint32_t *sel_idx, void *sel_val, size_t nnz,
                  uint32_t *out_idx, void *out_val, sc_merge_work_t *mw) {
  /* The rest was never sent and simply stays in the residual. */
  sc_spview_t a = {sel_idx, sel_val, nnz}, none = {NULL, NULL, 0};
  nnz = sc_sparse_merge(dtype, k, a, none, out_idx, out_val, NULL, NULL, mw);
  memcpy(sel_idx, out_idx, nnz * 4);
  memcpy(sel_val, out_val, nnz * sc_dtype_size(dtype));
  return nnz;
}

/* acc = grad + residual into the residual (fp16/bf16 through float32). */
void sc_ef_accumulate(sc_dtype_t t, void *res, const void *grad, size_t n) {
  if (t == SC_FLOAT32) {
    float *r = res;
    const float *g = grad;
    for (size_t i = 0; i < n; i++) r[i] += g[i];
  } else if (t == SC_FLOAT64) {
    double *r = res;
    const double *g = grad;
    for (size_t i = 0; i < n; i++) r[i] += g[i];
  } else {
    sc_reduce_kernel(t, SC_SUM, res, res, grad, n);
  }
}

static sc_result_t ef_step(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                           sc_ef_t *ef, sc_comm_t *comm, ef_work_t *w) {
  const char *fn = "sc_gtopk_allreduce";
  sc_sparse_algo_t algo;
  SC_CHECK(sc_tune_gtopk_algo_n(comm, n, k, sc_dtype_size(dtype), &algo));
  if (algo == SC_SPARSE_HITOPK) return sc_hitopk_step(grad, n, dtype, k, method, ef, comm);
  const void *acc = grad;
  if (ef) {
    sc_ef_accumulate(dtype, ef->residual, grad, n);
    acc = ef->residual;
  }
  size_t nnz = 0;
  /* n == 0 still takes part in the collective (every rank must call it). */
  sc_result_t r = n ? sc_topk(acc, n, dtype, k, method, w->sel_idx, w->sel_val, &nnz) : SC_SUCCESS;
  /* On failure the gradient stays in the residual for the next step. */
  if (r != SC_SUCCESS) return r;
  if (nnz > 2 * k) return SC_ERR(SC_ERR_INTERNAL, "%s: sc_topk returned %zu > 2k", fn, nnz);
  if (nnz > k) { /* GAUSSIAN overshot: keep the exact top-k of what it picked */
    sc_merge_work_t mw = {w->w_idx, w->w_val, w->w_key, w->w_src, nnz};
    nnz = sc_ef_trim(dtype, k, w->sel_idx, w->sel_val, nnz, w->out_idx, w->out_val, &mw);
  }
  if (ef)
    for (size_t i = 0; i < nnz; i++) sc_ef_put(dtype, ef->residual, w->sel_idx[i], 0.0);
  size_t out_nnz = 0;
  r = sc_sparse_allreduce_track(fn, w->sel_idx, w->sel_val, nnz, n, k, dtype, algo, w->out_idx,
                                w->out_val, &out_nnz, w->surv, comm);
  if (r != SC_SUCCESS) {
    if (ef)
      for (size_t i = 0; i < nnz; i++)
        sc_ef_put(dtype, ef->residual, w->sel_idx[i], get(dtype, w->sel_val, i));
    return r;
  }
  if (ef)
    for (size_t i = 0; i < nnz; i++)
      if (!w->surv[i]) sc_ef_put(dtype, ef->residual, w->sel_idx[i], get(dtype, w->sel_val, i));
  if (n) memset(grad, 0, n * sc_dtype_size(dtype));
  const double p = comm->nranks;
  for (size_t i = 0; i < out_nnz; i++) {
    if (dtype == SC_FLOAT64)
      sc_ef_put(dtype, grad, w->out_idx[i], get(dtype, w->out_val, i) / p);
    else /* float32 arithmetic, as SC_AVG does */
      sc_ef_put(dtype, grad, w->out_idx[i], (double)((float)get(dtype, w->out_val, i) / (float)p));
  }
  return SC_SUCCESS;
}

sc_result_t sc_ef_check_kind(const char *fn, const sc_ef_t *ef, sc_mem_kind_t kind) {
  if (!ef) return SC_SUCCESS;
  if (kind == SC_MEM_DEVICE && ef->kind == SC_EF_HOST)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: grad is device memory, but this error-feedback state keeps its residual "
                  "in host memory (its first use was with host gradients): use one sc_ef_t per "
                  "memory kind",
                  fn);
  if (kind == SC_MEM_HOST && ef->kind == SC_EF_DEVICE)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: grad is host memory, but this error-feedback state keeps its residual on "
                  "device %d (its first use was with device gradients): use one sc_ef_t per "
                  "memory kind",
                  fn, ef->device);
  return SC_SUCCESS;
}

sc_result_t sc_gtopk_check(const char *fn, sc_buf_path_t path, const void *grad, size_t n,
                           sc_dtype_t dtype, size_t *k, sc_select_t method, const sc_ef_t *ef,
                           const sc_comm_t *comm, sc_mem_kind_t *kind) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (!sc_sparse_dtype_ok(dtype))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not a float type", fn, (int)dtype);
  if (method != SC_SELECT_EXACT && method != SC_SELECT_GAUSSIAN && method != SC_SELECT_MSTOPK)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid selection method %d", fn, (int)method);
  if (n && !grad) return SC_ERR(SC_ERR_INVALID_ARG, "%s: grad is NULL with n %zu", fn, n);
  if (n > UINT32_MAX) /* the local top-k's limit: sc_topk indexes with 32 bits */
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: n %zu exceeds %u", fn, n, (unsigned)UINT32_MAX);
  if (ef && (ef->n != n || ef->dtype != dtype))
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: the error-feedback state is for %zu elements of dtype %d, not %zu of %d", fn,
                  ef->n, (int)ef->dtype, n, (int)dtype);
  if (*k > n) *k = n;
  if (*k > SIZE_MAX / 16 / (size_t)comm->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: k %zu overflows", fn, *k);
  /* grad's kind decides the step and binds ef, so it is asked even when n
   * is 0 (a NULL grad is host memory). */
  const void *bufs[1] = {grad};
  static const char *const names[1] = {"grad"};
  SC_CHECK(sc_buffers_classify(fn, path, 1, bufs, names, kind));
  return sc_ef_check_kind(fn, ef, *kind);
}

sc_result_t sc_gtopk_allreduce(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                               sc_ef_t *ef, sc_comm_t *comm) {
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_gtopk_check("sc_gtopk_allreduce", SC_PATH_ANY, grad, n, dtype, &k, method, ef, comm,
                          &kind));
  if (kind == SC_MEM_DEVICE) return sc_ef_step_device(grad, n, dtype, k, method, ef, comm);
  if (ef) {
    ef->kind = SC_EF_HOST;
    SC_CHECK(ef_work_reserve(&ef->work, k, sc_dtype_size(dtype)));
    return ef_step(grad, n, dtype, k, method, ef, comm, &ef->work);
  }
  ef_work_t w = {0};
  SC_CHECK(ef_work_reserve(&w, k, sc_dtype_size(dtype)));
  sc_result_t r = ef_step(grad, n, dtype, k, method, NULL, comm, &w);
  ef_work_free(&w);
  return r;
}
