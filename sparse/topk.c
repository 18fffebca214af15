/* sc_topk: the public entry of the top-k selectors (kernels/cpu/topk*.c).
 * Arguments are checked here so that the kernels can trust them. */
#include "kernels/cpu/topk.h"
#include "base/error.h"
#include "core/device.h"

sc_result_t sc_topk(const void *dense, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                    uint32_t *indices, void *values, size_t *nnz) {
  if (!nnz) return SC_ERR(SC_ERR_INVALID_ARG, "sc_topk: nnz is NULL");
  *nnz = 0;
  if (dtype != SC_FLOAT16 && dtype != SC_BFLOAT16 && dtype != SC_FLOAT32 && dtype != SC_FLOAT64)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "sc_topk: dtype %d is not float16, bfloat16, float32 or float64", (int)dtype);
  if (method != SC_SELECT_EXACT && method != SC_SELECT_GAUSSIAN)
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
  SC_CHECK(sc_check_buffer_list("sc_topk", 3, bufs, names));
  return sc_topk_kernel(dense, n, dtype, k, method, indices, values, nnz);
}
