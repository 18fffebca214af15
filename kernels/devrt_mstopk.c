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
 * and the CPU kernel selects. The stand-in runs the CPU kernel directly
 * (kernels/devrt_emu.c). */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kernels/cpu/topk.h"
#include "kernels/devrt.h"
#include "kernels/topk_mstopk.h"
#include "lib/base/error.h"

#ifdef SC_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"

/* The whole vector through host memory and the CPU kernel. */
static sc_result_t staged(const void *x, size_t n, sc_dtype_t dtype, size_t k, int iters,
                          uint32_t *indices, void *values, size_t *nnz, void *stream) {
  size_t es = sc_dtype_size(dtype), m = k < n ? k : n;
  void *hx = malloc(n * es), *hv = malloc(m * es + 1);
  uint32_t *hi = malloc(2 * m * sizeof *hi + 1);
  sc_result_t r = SC_SUCCESS;
  if (!hx || !hv || !hi) {
    r = SC_ERR(SC_ERR_NOMEM, "sc_dev_topk: %zu bytes to stage MSTopK's vector", n * es);
    goto out;
  }
  r = sc_cuda_copy_wait(hx, x, n * es, stream);
  if (r == SC_SUCCESS) r = sc_topk_mstopk_run(hx, n, dtype, k, iters, -1, hi, nnz, NULL);
  if (r != SC_SUCCESS) goto out;
  sc_topk_gather_values(hx, dtype, hi, *nnz, hv);
  r = sc_cuda_copy_wait(indices, hi, *nnz * sizeof *hi, stream);
  if (r == SC_SUCCESS && values) r = sc_cuda_copy_wait(values, hv, *nnz * es, stream);
out:
  free(hx);
  free(hv);
  free(hi);
  if (r != SC_SUCCESS) *nnz = 0;
  return r;
}

/* Entries with key >= t (t >= 1): the entries above key t - 1. */
static sc_result_t count_from(const void *x, size_t n, sc_dtype_t dtype, uint64_t t, uint32_t *list,
                              size_t cap, size_t *count, void *ws, size_t wsb, void *stream) {
  return sc_cuda_topk_above(x, n, dtype, t - 1, list, cap, count, ws, wsb, stream);
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

sc_result_t sc_dev_topk_mstopk_cuda(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                    uint32_t *indices, void *values, size_t *nnz, void *ws,
                                    size_t wsb, void *stream) {
  int iters;
  SC_CHECK(sc_mstopk_iters(&iters));
  *nnz = 0;
  sc_cuda_mstopk_stats_t st;
  SC_CHECK(sc_cuda_mstopk_stats(x, n, dtype, &st, ws, wsb, stream));
  uint64_t m = st.nfinite + st.ninf;
  /* Every non-NaN entry: the exact selector's k >= m answer. */
  if (k >= m) return sc_cuda_topk_exact(x, n, dtype, k, indices, values, nnz, ws, wsb, stream);
  sc_mstopk_t s;
  sc_mstopk_init(&s, dtype, k, m, st.ninf, st.nfinite ? st.sum / (double)st.nfinite : 0,
                 sc_mstopk_key_value(dtype, st.max_key));
  for (int it = 0; it < iters && !sc_mstopk_done(&s); it++) {
    uint64_t key = sc_mstopk_key_ceil(dtype, sc_mstopk_next(&s)), c;
    if (!sc_mstopk_implied(&s, key, &c)) {
      size_t got = 0;
      SC_CHECK(count_from(x, n, dtype, key, NULL, 0, &got, ws, wsb, stream));
      c = got;
    }
    sc_mstopk_record(&s, key, c);
  }
  size_t cap = 2 * (k < n ? k : n), es = sc_dtype_size(dtype), got = 0;
  if (sc_mstopk_fill(&s) == 0) {
    /* hi's entries are the answer, in index order. */
    SC_CHECK(count_from(x, n, dtype, s.hi_key, indices, cap, &got, ws, wsb, stream));
    if (got == s.k) {
      *nnz = got;
      if (values && got) SC_CHECK(sc_cuda_sparse_gather(values, x, indices, got, dtype, stream));
      return sc_cuda_copy_wait(NULL, NULL, 0, stream);
    }
  } else if (values && s.lo_key > 0 && s.lo_count <= cap) {
    SC_CHECK(count_from(x, n, dtype, s.lo_key, indices, cap, &got, ws, wsb, stream));
    if (got <= cap && got == s.lo_count) {
      uint32_t *hi = malloc(got * sizeof *hi + 1);
      void *hv = malloc(got * es + 1);
      sc_result_t r =
          hi && hv ? SC_SUCCESS : SC_ERR(SC_ERR_NOMEM, "sc_dev_topk: MSTopK's list of %zu", got);
      if (r == SC_SUCCESS) r = sc_cuda_sparse_gather(values, x, indices, got, dtype, stream);
      if (r == SC_SUCCESS) r = sc_cuda_copy_wait(hi, indices, got * sizeof *hi, stream);
      if (r == SC_SUCCESS) r = sc_cuda_copy_wait(hv, values, got * es, stream);
      size_t c = 0;
      uint64_t fill = sc_mstopk_fill(&s);
      if (r == SC_SUCCESS)
        for (size_t j = 0; j < got; j++)
          if (sc_mstopk_take(&s, key_of(hv, es, j), &fill)) hi[c++] = hi[j];
      if (r == SC_SUCCESS) r = sc_cuda_copy_wait(indices, hi, c * sizeof *hi, stream);
      if (r == SC_SUCCESS && c) r = sc_cuda_sparse_gather(values, x, indices, c, dtype, stream);
      if (r == SC_SUCCESS) r = sc_cuda_copy_wait(NULL, NULL, 0, stream);
      free(hi);
      free(hv);
      if (r == SC_SUCCESS) *nnz = c;
      return r;
    }
  }
  return staged(x, n, dtype, k, iters, indices, values, nnz, stream);
}
#endif
