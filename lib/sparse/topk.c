/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_topk: the public entry of the top-k selectors (kernels/cpu/topk*.c on
 * host vectors, sc_dev_topk on device vectors). Arguments are checked here
 * so that the kernels can trust them. */
#include "kernels/cpu/topk.h"
#include "lib/base/error.h"
#include "lib/core/device.h"
#include "lib/sparse/devctx.h"

/* Device vector: indices and values are written on the device, *nnz on the
 * host; the call returns when they are there. */
static sc_result_t topk_device(const void *dense, size_t n, sc_dtype_t dtype, size_t k,
                               sc_select_t method, uint32_t *indices, void *values, size_t *nnz) {
  sc_spdev_t *d;
  SC_CHECK(sc_spdev_acquire("sc_topk", &d));
  size_t ws = sc_dev_topk_workspace_size(d->rt, n, dtype);
  sc_result_t r = sc_spdev_reserve(d, "sc_topk", ws, 0, 0);
  if (r == SC_SUCCESS)
    r = sc_dev_topk(d->rt, dense, n, dtype, k, method, indices, values, nnz, d->ws, d->ws_bytes,
                    d->stream);
  if (r != SC_SUCCESS) *nnz = 0;
  char msg[SC_ERRMSG_MAX];
  sc_error_get_detail(msg, sizeof(msg));
  sc_result_t rs = sc_spdev_sync(d, d->timeout_ms, "sc_topk: the selection on the device");
  sc_spdev_release(d, rs == SC_SUCCESS);
  if (r != SC_SUCCESS) sc_error_set_detail(msg);
  return r != SC_SUCCESS ? r : rs;
}

sc_result_t sc_topk(const void *dense, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                    uint32_t *indices, void *values, size_t *nnz) {
  if (!nnz) return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: nnz is NULL");
  *nnz = 0;
  if (dtype != SC_FLOAT16 && dtype != SC_BFLOAT16 && dtype != SC_FLOAT32 && dtype != SC_FLOAT64)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "sc_topk: dtype %d is not float16, bfloat16, float32 or float64", (int)dtype);
  if (method != SC_SELECT_EXACT && method != SC_SELECT_GAUSSIAN && method != SC_SELECT_MSTOPK)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: unknown selection method %d", (int)method);
  if (n > UINT32_MAX)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "sc_topk: n = %zu exceeds the 32-bit index range (at most %u elements)", n,
                  (unsigned)UINT32_MAX);
  if (n == 0 || k == 0) return SC_SUCCESS;
  if (!dense) return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: dense is NULL with n = %zu", n);
  if (!indices || !values)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: %s is NULL with k = %zu",
                  !indices ? "indices" : "values", k);
  const void *bufs[3] = {dense, indices, values};
  static const char *const names[3] = {"dense", "indices", "values"};
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_buffers_kind("sc_topk", 3, bufs, names, &kind));
  if (kind == SC_MEM_DEVICE) return topk_device(dense, n, dtype, k, method, indices, values, nnz);
  return sc_topk_kernel(dense, n, dtype, k, method, indices, values, nnz);
}
