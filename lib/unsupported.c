/* Parts of API.md that later releases implement. Each answers
 * SC_ERR_UNSUPPORTED with a detail that says so, and touches nothing. */
#include "lib/error.h"

#define SC_NOT_YET(fn, what)                                                                       \
  SC_ERR(SC_ERR_UNSUPPORTED, "%s: %s is not implemented in libsparsecoll %d.%d.%d yet", fn, what,  \
         SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH)

sc_result_t sc_topk(const void *dense, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                    uint32_t *indices, void *values, size_t *nnz) {
  return SC_NOT_YET("sc_topk", "top-k selection");
}

sc_result_t sc_sparse_allreduce(const uint32_t *indices, const void *values, size_t nnz,
                                size_t dense_len, size_t k, sc_dtype_t dtype, sc_sparse_algo_t algo,
                                uint32_t *out_indices, void *out_values, size_t *out_nnz,
                                sc_comm_t *comm) {
  return SC_NOT_YET("sc_sparse_allreduce", "sparse all-reduce");
}

sc_result_t sc_ef_create(size_t n, sc_dtype_t dtype, sc_ef_t **ef) {
  if (ef) *ef = NULL;
  return SC_NOT_YET("sc_ef_create", "error feedback");
}

sc_result_t sc_ef_destroy(sc_ef_t *ef) {
  return SC_NOT_YET("sc_ef_destroy", "error feedback");
}

sc_result_t sc_gtopk_allreduce(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                               sc_ef_t *ef, sc_comm_t *comm) {
  return SC_NOT_YET("sc_gtopk_allreduce", "gTop-k all-reduce");
}

sc_result_t sc_fusion_create(sc_comm_t *comm, const sc_fusion_config_t *cfg, sc_fusion_t **f) {
  if (f) *f = NULL;
  return SC_NOT_YET("sc_fusion_create", "bucket fusion");
}

sc_result_t sc_fusion_add_tensor(sc_fusion_t *f, void *buf, size_t count, sc_dtype_t dtype,
                                 double backward_us, int *tensor_id) {
  return SC_NOT_YET("sc_fusion_add_tensor", "bucket fusion");
}

sc_result_t sc_fusion_plan(sc_fusion_t *f) {
  return SC_NOT_YET("sc_fusion_plan", "bucket fusion");
}

sc_result_t sc_fusion_num_buckets(const sc_fusion_t *f, int *n) {
  return SC_NOT_YET("sc_fusion_num_buckets", "bucket fusion");
}

sc_result_t sc_fusion_bucket_of(const sc_fusion_t *f, int tensor_id, int *bucket) {
  return SC_NOT_YET("sc_fusion_bucket_of", "bucket fusion");
}

sc_result_t sc_fusion_ready(sc_fusion_t *f, int tensor_id) {
  return SC_NOT_YET("sc_fusion_ready", "bucket fusion");
}

sc_result_t sc_fusion_wait(sc_fusion_t *f, int tensor_id) {
  return SC_NOT_YET("sc_fusion_wait", "bucket fusion");
}

sc_result_t sc_fusion_wait_all(sc_fusion_t *f) {
  return SC_NOT_YET("sc_fusion_wait_all", "bucket fusion");
}

sc_result_t sc_fusion_destroy(sc_fusion_t *f) {
  return SC_NOT_YET("sc_fusion_destroy", "bucket fusion");
}
