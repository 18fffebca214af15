/* SPDX-License-Identifier: BSD-3-Clause */
/* MSTopK on a CUDA device vector (sc_dev_topk with SC_SELECT_MSTOPK): the
 * statistics and every counting round on the device, the decisions of
 * kernels/topk_mstopk.h on the host between them (a 8-byte count comes back
 * per round). The band's lower end then lists, in index order, every entry
 * the selection can take (sc_cuda_topk_above into the caller's indices,
 * whose 2 min(k, n) entries usually hold it: the band of 20 rounds is thin);
 * their values come back, the band rule picks on the host, and the chosen
 * indices go back and are gathered. When the list does not fit (few rounds,
 * a wide band) or values is NULL, the vector is staged through host memory
 * and the CPU kernel selects. The loop runs over a table of primitives
 * (kernels/devrt_mstopk.h), CUDA's here; the stand-in runs the CPU kernel
 * directly (kernels/devrt_emu.c). */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kernels/cpu/topk.h"
#include "kernels/devrt.h"
#include "kernels/devrt_mstopk.h"
#include "kernels/topk_mstopk.h"
#include "lib/base/error.h"

/* The whole vector through host memory and the CPU kernel. */
static sc_result_t staged(const sc_mstopk_prims_t *p, const void *x, size_t n, sc_dtype_t dtype,
                          size_t k, int iters, uint32_t *indices, void *values, size_t *nnz) {
  size_t es = sc_dtype_size(dtype), m = k < n ? k : n;
  void *hx = malloc(n * es), *hv = malloc(m * es + 1);
  uint32_t *hi = malloc(2 * m * sizeof *hi + 1);
  sc_result_t r = SC_SUCCESS;
  if (!hx || !hv || !hi) {
    r = SC_ERR(SC_ERR_NOMEM, "sc_dev_topk: %zu bytes to stage MSTopK's vector", n * es);
    goto out;
  }
  r = p->copy(hx, x, n * es, p->ctx);
  if (r == SC_SUCCESS) r = sc_topk_mstopk_run(hx, n, dtype, k, iters, -1, hi, nnz, NULL);
  if (r != SC_SUCCESS) goto out;
  sc_topk_gather_values(hx, dtype, hi, *nnz, hv);
  r = p->copy(indices, hi, *nnz * sizeof *hi, p->ctx);
  if (r == SC_SUCCESS && values) r = p->copy(values, hv, *nnz * es, p->ctx);
out:
  free(hx);
  free(hv);
  free(hi);
  if (r != SC_SUCCESS) *nnz = 0;
  return r;
}

static uint64_t key_of(const void *v, size_t es, size_t j) {
  uint16_t h;
  uint32_t w;
  uint64_t d;
  switch (es) {
  case 2:
    memcpy(&h, (const char *)v + 2 * j, 2);
    return h & 0x7fffu;
  case 4:
    memcpy(&w, (const char *)v + 4 * j, 4);
    return w & 0x7fffffffu;
  default:
    memcpy(&d, (const char *)v + 8 * j, 8);
    return d & 0x7fffffffffffffffull;
  }
}

/* The band rule over the listed entries (got of them, index order, at
 * indices with their values at values), the chosen indices back to
 * indices and gathered. */
static sc_result_t pick(const sc_mstopk_prims_t *p, const sc_mstopk_t *s, const void *x,
                        sc_dtype_t dtype, size_t got, uint32_t *indices, void *values,
                        size_t *nnz) {
  size_t es = sc_dtype_size(dtype), c = 0;
  uint32_t *hi = malloc(got * sizeof *hi + 1);
  void *hv = malloc(got * es + 1);
  sc_result_t r =
      hi && hv ? SC_SUCCESS : SC_ERR(SC_ERR_NOMEM, "sc_dev_topk: MSTopK's list of %zu", got);
  if (r == SC_SUCCESS) r = p->gather(values, x, indices, got, dtype, p->ctx);
  if (r == SC_SUCCESS) r = p->copy(hi, indices, got * sizeof *hi, p->ctx);
  if (r == SC_SUCCESS) r = p->copy(hv, values, got * es, p->ctx);
  uint64_t fill = sc_mstopk_fill(s);
  if (r == SC_SUCCESS)
    for (size_t j = 0; j < got; j++)
      if (sc_mstopk_take(s, key_of(hv, es, j), &fill)) hi[c++] = hi[j];
  if (r == SC_SUCCESS) r = p->copy(indices, hi, c * sizeof *hi, p->ctx);
  if (r == SC_SUCCESS && c) r = p->gather(values, x, indices, c, dtype, p->ctx);
  if (r == SC_SUCCESS) r = p->copy(NULL, NULL, 0, p->ctx);
  free(hi);
  free(hv);
  if (r == SC_SUCCESS) *nnz = c;
  return r;
}

sc_result_t sc_mstopk_drive(const sc_mstopk_prims_t *p, const void *x, size_t n, sc_dtype_t dtype,
                            size_t k, int iters, uint32_t *indices, void *values, size_t *nnz) {
  *nnz = 0;
  double sum;
  uint64_t nfin, ninf, max_key;
  SC_CHECK(p->stats(x, n, dtype, &sum, &nfin, &ninf, &max_key, p->ctx));
  uint64_t m = nfin + ninf;
  /* Every non-NaN entry: the exact selector's k >= m answer. */
  if (k >= m) return p->exact(x, n, dtype, k, indices, values, nnz, p->ctx);
  sc_mstopk_t s;
  sc_mstopk_init(&s, dtype, k, m, ninf, nfin ? sum / (double)nfin : 0,
                 sc_mstopk_key_value(dtype, max_key));
  /* Tried keys are above lo (>= 0), so key - 1 never wraps: entries with
   * key >= t are the entries above t - 1. */
  for (int it = 0; it < iters && !sc_mstopk_done(&s); it++) {
    uint64_t key = sc_mstopk_key_ceil(dtype, sc_mstopk_next(&s)), c;
    if (!sc_mstopk_implied(&s, key, &c)) {
      size_t got = 0;
      SC_CHECK(p->above(x, n, dtype, key - 1, NULL, 0, &got, p->ctx));
      c = got;
    }
    sc_mstopk_record(&s, key, c);
  }
  size_t cap = 2 * (k < n ? k : n), got = 0;
  if (sc_mstopk_fill(&s) == 0) {
    /* hi's entries are the answer, in index order (hi >= 1 here: hi = 0
     * only when k >= m). */
    SC_CHECK(p->above(x, n, dtype, s.hi_key - 1, indices, cap, &got, p->ctx));
    if (got == s.k) {
      *nnz = got;
      if (values && got) SC_CHECK(p->gather(values, x, indices, got, dtype, p->ctx));
      return p->copy(NULL, NULL, 0, p->ctx);
    }
  } else if (values && s.lo_key > 0 && s.lo_count <= cap) {
    SC_CHECK(p->above(x, n, dtype, s.lo_key - 1, indices, cap, &got, p->ctx));
    if (got == s.lo_count) return pick(p, &s, x, dtype, got, indices, values, nnz);
  }
  return staged(p, x, n, dtype, k, iters, indices, values, nnz);
}

#ifdef SC_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"

static sc_result_t cu_stats(const void *x, size_t n, sc_dtype_t dtype, double *sum,
                            uint64_t *nfinite, uint64_t *ninf, uint64_t *max_key, void *ctx) {
  const sc_cuda_mstopk_ctx_t *c = ctx;
  sc_cuda_mstopk_stats_t st;
  SC_CHECK(sc_cuda_mstopk_stats(x, n, dtype, &st, c->ws, c->wsb, c->stream));
  *sum = st.sum;
  *nfinite = st.nfinite;
  *ninf = st.ninf;
  *max_key = st.max_key;
  return SC_SUCCESS;
}

static sc_result_t cu_above(const void *x, size_t n, sc_dtype_t dtype, uint64_t t, uint32_t *idx,
                            size_t cap, size_t *count, void *ctx) {
  const sc_cuda_mstopk_ctx_t *c = ctx;
  return sc_cuda_topk_above(x, n, dtype, t, idx, cap, count, c->ws, c->wsb, c->stream);
}

static sc_result_t cu_gather(void *values, const void *x, const uint32_t *idx, size_t nnz,
                             sc_dtype_t dtype, void *ctx) {
  const sc_cuda_mstopk_ctx_t *c = ctx;
  return sc_cuda_sparse_gather(values, x, idx, nnz, dtype, c->stream);
}

static sc_result_t cu_copy(void *dst, const void *src, size_t bytes, void *ctx) {
  const sc_cuda_mstopk_ctx_t *c = ctx;
  return sc_cuda_copy_wait(dst, src, bytes, c->stream);
}

static sc_result_t cu_exact(const void *x, size_t n, sc_dtype_t dtype, size_t k, uint32_t *idx,
                            void *values, size_t *nnz, void *ctx) {
  const sc_cuda_mstopk_ctx_t *c = ctx;
  return sc_cuda_topk_exact(x, n, dtype, k, idx, values, nnz, c->ws, c->wsb, c->stream);
}

sc_result_t sc_dev_topk_mstopk_cuda(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                    uint32_t *indices, void *values, size_t *nnz, void *ws,
                                    size_t wsb, void *stream) {
  int iters;
  *nnz = 0;
  SC_CHECK(sc_mstopk_iters(&iters));
  sc_cuda_mstopk_ctx_t c = {ws, wsb, stream};
  const sc_mstopk_prims_t p = {cu_stats, cu_above, cu_gather, cu_copy, cu_exact, &c};
  return sc_mstopk_drive(&p, x, n, dtype, k, iters, indices, values, nnz);
}
#endif
