/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_sparse_allreduce: checks at the API boundary, then one operation on the
 * communicator's queue whose schedule comes from algorithms/sparse_*.c. */
#include "lib/sparse/sparse.h"

#include <stdint.h>

#include "algorithms/sparse_registry.h"
#include "kernels/cpu/sparse_merge.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/core/device.h"
#include "lib/sparse/devctx.h"

sc_result_t sc_gtopk_algo(sc_comm_t *comm, size_t k, sc_dtype_t dtype, sc_sparse_algo_t *algo) {
  return sc_tune_gtopk_algo(comm, k, sc_dtype_size(dtype), algo);
}

static sc_result_t check_input(const char *fn, const uint32_t *idx, size_t nnz, size_t dense_len) {
  for (size_t i = 0; i < nnz; i++) {
    if (idx[i] >= dense_len)
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: index %u at position %zu is not below dense_len %zu",
                    fn, idx[i], i, dense_len);
    if (i && idx[i] <= idx[i - 1])
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "%s: indices must be sorted and unique (%u after %u at position %zu)", fn,
                    idx[i], idx[i - 1], i);
  }
  return SC_SUCCESS;
}

sc_result_t sc_sparse_allreduce_track(const char *fn, const uint32_t *indices, const void *values,
                                      size_t nnz, size_t dense_len, size_t k, sc_dtype_t dtype,
                                      sc_sparse_algo_t algo, uint32_t *out_indices,
                                      void *out_values, size_t *out_nnz, uint8_t *survived,
                                      sc_comm_t *comm) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (!out_nnz) return SC_ERR(SC_ERR_INVALID_ARG, "%s: out_nnz is NULL", fn);
  if (!sc_sparse_dtype_ok(dtype))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not float32, float64, float16 or bfloat16",
                  fn, (int)dtype);
  const sc_sparse_algo_entry_t *row = sc_sparse_algo_get(algo);
  if (!row) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid algorithm %d", fn, (int)algo);
  if (!row->gen)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "%s: algorithm %s is one of sc_gtopk_allreduce's (it starts from dense "
                  "gradients), not of the sparse all-reduce",
                  fn, row->name);
  if (dense_len > (size_t)UINT32_MAX + 1)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dense_len %zu needs indices wider than 32 bits", fn,
                  dense_len);
  /* Every rank's set must fit the bound its peers check it against. */
  if (nnz > k) return SC_ERR(SC_ERR_INVALID_ARG, "%s: nnz %zu is larger than k %zu", fn, nnz, k);
  const size_t w = sc_dtype_size(dtype), p = (size_t)comm->nranks;
  const size_t out_cap = row->out_all ? p * k : k;
  if (k > SIZE_MAX / (4 + w) / p)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: k %zu on %zu ranks overflows", fn, k, p);
  if (nnz && (!indices || !values))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: indices or values is NULL with nnz %zu", fn, nnz);
  if (out_cap && (!out_indices || !out_values))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: out_indices or out_values is NULL with k %zu", fn, k);
  SC_CHECK(check_input(fn, indices, nnz, dense_len));

  sc_sparse_op_t sp = {.io = {.idx = indices,
                              .val = values,
                              .nnz = nnz,
                              .out_idx = out_indices,
                              .out_val = out_values,
                              .out_cap = out_cap,
                              .track = survived != NULL},
                       .k = k,
                       .dense_len = dense_len,
                       .out_nnz = out_nnz,
                       .survived = survived};
  sc_op_t op = {.coll = SC_COLL_ALLREDUCE,
                .count = k,
                .dtype = dtype,
                .op = SC_SUM,
                .root = 0,
                .sparse = &sp,
                .gen = row->gen};
  SC_TRACE(SC_SUBSYS_COLL, "%s: %s of nnz %zu, k %zu, dense_len %zu", fn, row->name, nnz, k,
           dense_len);
  return sc_op_run_blocking(comm, &op);
}

/* Device buffers: the sets (nnz and at most out_cap entries) are staged
 * through pinned host memory and the exchange runs as on host buffers; the
 * merges of gTop-k are on sets this small, and its messages cross the host's
 * transports anyway. */
static sc_result_t sparse_device(const uint32_t *indices, const void *values, size_t nnz,
                                 size_t dense_len, size_t k, sc_dtype_t dtype,
                                 sc_sparse_algo_t algo, uint32_t *out_indices, void *out_values,
                                 size_t *out_nnz, sc_comm_t *comm) {
  const char *fn = "sc_sparse_allreduce";
  /* The checks of _track that size the staging, before it is sized. */
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (!out_nnz) return SC_ERR(SC_ERR_INVALID_ARG, "%s: out_nnz is NULL", fn);
  if (!sc_sparse_dtype_ok(dtype))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not float32, float64, float16 or bfloat16",
                  fn, (int)dtype);
  if (nnz > k) return SC_ERR(SC_ERR_INVALID_ARG, "%s: nnz %zu is larger than k %zu", fn, nnz, k);
  const size_t w = sc_dtype_size(dtype), p = (size_t)comm->nranks;
  if (k > SIZE_MAX / (4 + w) / p / 2)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: k %zu on %zu ranks overflows", fn, k, p);
  /* An invalid algo is refused by _track, before any transfer. */
  const sc_sparse_algo_entry_t *row = sc_sparse_algo_get(algo);
  const size_t out_cap = row && row->out_all ? p * k : k;
  if (nnz && (!indices || !values))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: indices or values is NULL with nnz %zu", fn, nnz);
  if (out_cap && (!out_indices || !out_values))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: out_indices or out_values is NULL with k %zu", fn, k);
  sc_spdev_t *d;
  SC_CHECK(sc_spdev_acquire(fn, &d));
  size_t hbytes = 0;
  (void)sc_spdev_carve(NULL, &hbytes, nnz * w);
  (void)sc_spdev_carve(NULL, &hbytes, out_cap * w);
  (void)sc_spdev_carve(NULL, &hbytes, nnz * 4);
  (void)sc_spdev_carve(NULL, &hbytes, out_cap * 4);
  /* Never empty: the staging pointers are passed even for empty sets (a
   * NULL buffer of 0 bytes still reaches memcpy in the schedule's steps). */
  sc_result_t r = sc_spdev_reserve(d, fn, 0, 0, hbytes > 256 ? hbytes : 256);
  size_t o = 0;
  void *h_val = sc_spdev_carve(d->hbuf, &o, nnz * w);
  void *h_out_val = sc_spdev_carve(d->hbuf, &o, out_cap * w);
  uint32_t *h_idx = sc_spdev_carve(d->hbuf, &o, nnz * 4);
  uint32_t *h_out_idx = sc_spdev_carve(d->hbuf, &o, out_cap * 4);
  const sc_devrt_t *rt = d->rt;
  const int tmo = comm->cfg.timeout_ms;
  if (r == SC_SUCCESS && nnz) r = rt->memcpy_async(h_idx, indices, nnz * 4, d->stream);
  if (r == SC_SUCCESS && nnz) r = rt->memcpy_async(h_val, values, nnz * w, d->stream);
  int synced = 0;
  if (r == SC_SUCCESS) {
    r = sc_spdev_sync(d, tmo, "sc_sparse_allreduce: the input set to the host");
    synced = r == SC_SUCCESS;
  }
  size_t got = 0;
  if (r == SC_SUCCESS)
    r = sc_sparse_allreduce_track(fn, h_idx, h_val, nnz, dense_len, k, dtype, algo, h_out_idx,
                                  h_out_val, &got, NULL, comm);
  if (r == SC_SUCCESS && got) {
    synced = 0;
    r = rt->memcpy_async(out_indices, h_out_idx, got * 4, d->stream);
    if (r == SC_SUCCESS) r = rt->memcpy_async(out_values, h_out_val, got * w, d->stream);
  }
  if (!synced) {
    char msg[SC_ERRMSG_MAX];
    sc_error_get_detail(msg, sizeof(msg));
    sc_result_t rs = sc_spdev_sync(d, tmo, "sc_sparse_allreduce: the result to the device");
    synced = rs == SC_SUCCESS;
    if (r == SC_SUCCESS)
      r = rs;
    else
      sc_error_set_detail(msg);
  }
  sc_spdev_release(d, synced);
  if (r == SC_SUCCESS) *out_nnz = got;
  return r;
}

sc_result_t sc_sparse_allreduce(const uint32_t *indices, const void *values, size_t nnz,
                                size_t dense_len, size_t k, sc_dtype_t dtype, sc_sparse_algo_t algo,
                                uint32_t *out_indices, void *out_values, size_t *out_nnz,
                                sc_comm_t *comm) {
  /* Here and not in _track: sc_gtopk_allreduce passes its own host buffers. */
  const void *bufs[4] = {indices, values, out_indices, out_values};
  static const char *const names[4] = {"indices", "values", "out_indices", "out_values"};
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_buffers_kind("sc_sparse_allreduce", 4, bufs, names, &kind));
  if (kind == SC_MEM_DEVICE)
    return sparse_device(indices, values, nnz, dense_len, k, dtype, algo, out_indices, out_values,
                         out_nnz, comm);
  return sc_sparse_allreduce_track("sc_sparse_allreduce", indices, values, nnz, dense_len, k, dtype,
                                   algo, out_indices, out_values, out_nnz, NULL, comm);
}

sc_result_t sc_sparse_algo_name(sc_sparse_algo_t algo, const char **name) {
  if (!name) return SC_ERR(SC_ERR_INVALID_ARG, "sc_sparse_algo_name: name is NULL");
  const sc_sparse_algo_entry_t *row = sc_sparse_algo_get(algo);
  if (!row)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_sparse_algo_name: invalid algorithm %d", (int)algo);
  *name = row->name;
  return SC_SUCCESS;
}

uint64_t sc_comm_bytes_sent(const sc_comm_t *comm) {
  return comm->ex.bytes_sent;
}
