/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_gtopk_allreduce on a device gradient (docs/CUDA.md, "Sparse
 * collectives on device buffers"). The dense work stays on the device: the
 * residual update, the top-k selection, the residual's clear and restore,
 * and the scatter of the result into the gradient. What crosses to the host
 * is the k selected entries and the k entries of the result: the gTop-k
 * exchange merges sets of at most k entries per round, and its messages go
 * through the host's transports anyway, so it runs there unchanged (the
 * same code, and so the same bits, as on host gradients). HiTopKComm is the
 * exception: its exchange is dense, so the whole step runs on the host, on
 * staged copies of the gradient and the device residual. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/sparse/devctx.h"
#include "lib/sparse/ef.h"
#include "lib/sparse/hitopk.h"
#include "lib/sparse/sparse.h"

/* The step's scratch: c = 2k + 1 entries (GAUSSIAN selects up to 2k). */
typedef struct dev_bufs {
  /* device */
  uint32_t *d_sel_idx, *d_out_idx;
  void *d_sel_val, *d_out_val;
  uint8_t *d_surv;
  /* pinned host */
  uint32_t *h_sel_idx, *h_out_idx, *h_w_idx, *h_m_idx;
  void *h_sel_val, *h_out_val, *h_w_val, *h_m_val;
  uint64_t *h_w_key;
  uint8_t *h_w_src, *h_surv;
} dev_bufs_t;

/* Lays the buffers out in d's scratch (base NULL: only sums the sizes). */
static void dev_layout(dev_bufs_t *b, void *dbase, void *hbase, size_t c, size_t es, size_t *dbytes,
                       size_t *hbytes) {
  size_t o = 0;
  b->d_sel_val = sc_spdev_carve(dbase, &o, c * es);
  b->d_out_val = sc_spdev_carve(dbase, &o, c * es);
  b->d_sel_idx = sc_spdev_carve(dbase, &o, c * 4);
  b->d_out_idx = sc_spdev_carve(dbase, &o, c * 4);
  b->d_surv = sc_spdev_carve(dbase, &o, c);
  *dbytes = o;
  o = 0;
  b->h_w_key = sc_spdev_carve(hbase, &o, c * 8);
  b->h_sel_val = sc_spdev_carve(hbase, &o, c * es);
  b->h_out_val = sc_spdev_carve(hbase, &o, c * es);
  b->h_w_val = sc_spdev_carve(hbase, &o, c * es);
  b->h_m_val = sc_spdev_carve(hbase, &o, c * es);
  b->h_sel_idx = sc_spdev_carve(hbase, &o, c * 4);
  b->h_out_idx = sc_spdev_carve(hbase, &o, c * 4);
  b->h_w_idx = sc_spdev_carve(hbase, &o, c * 4);
  b->h_m_idx = sc_spdev_carve(hbase, &o, c * 4);
  b->h_w_src = sc_spdev_carve(hbase, &o, c);
  b->h_surv = sc_spdev_carve(hbase, &o, c);
  *hbytes = o;
}

/* Fixes the residual on the device at the state's first use; a state bound
 * to host gradients, or to another device, is refused. */
static sc_result_t ef_bind_device(sc_ef_t *ef, sc_spdev_t *d, const char *fn) {
  if (ef->kind == SC_EF_DEVICE) {
    if (ef->device != d->device || ef->rt != d->rt)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "%s: this error-feedback state keeps its residual on device %d, but grad is "
                    "memory of device %d: use one sc_ef_t per device",
                    fn, ef->device, d->device);
    return SC_SUCCESS;
  }
  SC_CHECK(sc_ef_check_kind(fn, ef, SC_MEM_DEVICE));
  size_t bytes = (ef->n ? ef->n : 1) * sc_dtype_size(ef->dtype);
  void *res = NULL;
  if (d->rt->malloc_device(&res, bytes) != SC_SUCCESS)
    return SC_ERR(SC_ERR_NOMEM, "%s: error-feedback residual of %zu bytes on device %d: %s", fn,
                  bytes, d->device, sc_last_error());
  /* All-zero bits are +0.0 in every float format; the stream orders the
   * clear before the first accumulation. */
  sc_result_t r = d->rt->memset_async(res, 0, bytes, d->stream);
  if (r != SC_SUCCESS) {
    d->rt->free_device(res);
    return r;
  }
  free(ef->residual); /* the host residual, still all zero: never used */
  ef->residual = res;
  ef->kind = SC_EF_DEVICE;
  ef->device = d->device;
  ef->rt = d->rt;
  return SC_SUCCESS;
}

/* d's buffers for one step on (n, dtype, k): the top-k workspace and the
 * layout above, on the device and in pinned memory. */
static sc_result_t reserve_step(sc_spdev_t *d, const char *fn, size_t n, sc_dtype_t dtype,
                                size_t k) {
  dev_bufs_t b;
  size_t dbytes, hbytes;
  dev_layout(&b, NULL, NULL, 2 * k + 1, sc_dtype_size(dtype), &dbytes, &hbytes);
  size_t ws = n && k ? sc_dev_topk_workspace_size(d->rt, n, dtype) : 0;
  return sc_spdev_reserve(d, fn, ws, dbytes, hbytes);
}

/* Copies the nnz device entries (idx, val) into host buffers and waits. */
static sc_result_t fetch(sc_spdev_t *d, uint32_t *h_idx, void *h_val, const uint32_t *d_idx,
                         const void *d_val, size_t nnz, size_t es, int timeout_ms,
                         const char *what) {
  if (!nnz) return SC_SUCCESS;
  SC_CHECK(d->rt->memcpy_async(h_idx, d_idx, nnz * 4, d->stream));
  SC_CHECK(d->rt->memcpy_async(h_val, d_val, nnz * es, d->stream));
  return sc_spdev_sync(d, timeout_ms, what);
}

static sc_result_t put(sc_spdev_t *d, uint32_t *d_idx, void *d_val, const uint32_t *h_idx,
                       const void *h_val, size_t nnz, size_t es) {
  if (!nnz) return SC_SUCCESS;
  SC_CHECK(d->rt->memcpy_async(d_idx, h_idx, nnz * 4, d->stream));
  return d->rt->memcpy_async(d_val, h_val, nnz * es, d->stream);
}

/* HiTopKComm moves the dense gradient through the host's transports (its
 * reduce-scatter and all-gather inside the host), so it runs on host images
 * of grad and of the device residual in d's pinned staging: the host step's
 * code, and so its bits. The residual goes back whatever the outcome (a
 * failed step leaves acc in it); grad only on success. */
static sc_result_t hitopk_staged(sc_spdev_t *d, void *grad, size_t n, sc_dtype_t dtype, size_t k,
                                 sc_select_t method, sc_ef_t *ef, sc_comm_t *comm, int *synced) {
  const char *fn = "sc_gtopk_allreduce";
  const int tmo = comm->cfg.timeout_ms;
  const size_t bytes = n * sc_dtype_size(dtype);
  SC_CHECK(sc_spdev_reserve(d, fn, 0, 0, 2 * sc_spdev_span(bytes ? bytes : 1)));
  size_t o = 0;
  void *hg = sc_spdev_carve(d->hbuf, &o, bytes ? bytes : 1);
  void *hr = ef ? sc_spdev_carve(d->hbuf, &o, bytes ? bytes : 1) : NULL;
  if (ef) SC_CHECK(ef_bind_device(ef, d, fn));
  if (bytes) {
    SC_CHECK(d->rt->memcpy_async(hg, grad, bytes, d->stream));
    if (ef) SC_CHECK(d->rt->memcpy_async(hr, ef->residual, bytes, d->stream));
  }
  SC_CHECK(sc_spdev_sync(d, tmo, "sc_gtopk_allreduce: hitopk's gradient and residual to the host"));
  *synced = 1;
  sc_result_t r = sc_hitopk_step_at(hg, hr, n, dtype, k, method, ef, comm);
  if (!bytes) return r;
  char msg[SC_ERRMSG_MAX];
  if (r != SC_SUCCESS) sc_error_get_detail(msg, sizeof(msg));
  *synced = 0;
  sc_result_t rc = ef ? d->rt->memcpy_async(ef->residual, hr, bytes, d->stream) : SC_SUCCESS;
  if (rc == SC_SUCCESS && r == SC_SUCCESS) rc = d->rt->memcpy_async(grad, hg, bytes, d->stream);
  if (rc == SC_SUCCESS)
    rc = sc_spdev_sync(d, tmo, "sc_gtopk_allreduce: hitopk's result and residual to the device");
  if (rc == SC_SUCCESS) *synced = 1;
  if (r != SC_SUCCESS) {
    sc_error_set_detail(msg);
    return r;
  }
  return rc;
}

/* The step on d's stream. *synced: the stream was drained at the end. */
static sc_result_t step(sc_spdev_t *d, void *grad, size_t n, sc_dtype_t dtype, size_t k,
                        sc_select_t method, sc_ef_t *ef, sc_comm_t *comm, int *synced) {
  const char *fn = "sc_gtopk_allreduce";
  const sc_devrt_t *rt = d->rt;
  const int tmo = comm->cfg.timeout_ms;
  const size_t es = sc_dtype_size(dtype), c = 2 * k + 1;
  dev_bufs_t b;
  size_t dbytes, hbytes;
  sc_sparse_algo_t algo;
  SC_CHECK(sc_tune_gtopk_algo(comm, k, es, &algo));
  if (algo == SC_SPARSE_HITOPK)
    return hitopk_staged(d, grad, n, dtype, k, method, ef, comm, synced);
  SC_CHECK(reserve_step(d, fn, n, dtype, k));
  dev_layout(&b, d->dbuf, d->hbuf, c, es, &dbytes, &hbytes);
  const void *acc = grad;
  if (ef) {
    SC_CHECK(ef_bind_device(ef, d, fn));
    if (n) SC_CHECK(sc_dev_ef_accumulate(rt, ef->residual, grad, n, dtype, d->stream));
    acc = ef->residual;
  }
  size_t nnz = 0;
  /* n == 0 or k == 0 still takes part in the collective (every rank must
   * call it). On failure the gradient stays in the residual. */
  if (n && k)
    SC_CHECK(sc_dev_topk(rt, acc, n, dtype, k, method, b.d_sel_idx, b.d_sel_val, &nnz, d->ws,
                         d->ws_bytes, d->stream));
  if (nnz > 2 * k) return SC_ERR(SC_ERR_INTERNAL, "%s: sc_dev_topk returned %zu > 2k", fn, nnz);
  SC_CHECK(fetch(d, b.h_sel_idx, b.h_sel_val, b.d_sel_idx, b.d_sel_val, nnz, es, tmo,
                 "sc_gtopk_allreduce: the selected entries to the host"));
  if (nnz > k) { /* GAUSSIAN overshot: the host path's trim, then the set back */
    sc_merge_work_t mw = {b.h_w_idx, b.h_w_val, b.h_w_key, b.h_w_src, nnz};
    nnz = sc_ef_trim(dtype, k, b.h_sel_idx, b.h_sel_val, nnz, b.h_m_idx, b.h_m_val, &mw);
    SC_CHECK(put(d, b.d_sel_idx, b.d_sel_val, b.h_sel_idx, b.h_sel_val, nnz, es));
  }
  if (ef && nnz) SC_CHECK(sc_dev_ef_clear(rt, ef->residual, b.d_sel_idx, nnz, dtype, d->stream));
  /* The exchange on the host, while the device clears the residual. */
  size_t out_nnz = 0;
  sc_result_t r = sc_sparse_allreduce_track(fn, b.h_sel_idx, b.h_sel_val, nnz, n, k, dtype, algo,
                                            b.h_out_idx, b.h_out_val, &out_nnz, b.h_surv, comm);
  if (r != SC_SUCCESS) {
    char msg[SC_ERRMSG_MAX];
    sc_error_get_detail(msg, sizeof(msg));
    /* Nothing was sent for good: everything selected goes back. */
    if (ef && nnz &&
        sc_dev_ef_restore(rt, ef->residual, b.d_sel_idx, b.d_sel_val, NULL, nnz, dtype,
                          d->stream) == SC_SUCCESS &&
        sc_spdev_sync(d, tmo, "sc_gtopk_allreduce: the residual's restore") == SC_SUCCESS)
      *synced = 1;
    sc_error_set_detail(msg);
    return r;
  }
  if (out_nnz > k)
    return SC_ERR(SC_ERR_INTERNAL, "%s: the exchange returned %zu > k = %zu", fn, out_nnz, k);
  if (ef && nnz) {
    SC_CHECK(rt->memcpy_async(b.d_surv, b.h_surv, nnz, d->stream));
    SC_CHECK(sc_dev_ef_restore(rt, ef->residual, b.d_sel_idx, b.d_sel_val, b.d_surv, nnz, dtype,
                               d->stream));
  }
  if (n && out_nnz) {
    SC_CHECK(put(d, b.d_out_idx, b.d_out_val, b.h_out_idx, b.h_out_val, out_nnz, es));
    SC_CHECK(sc_dev_sparse_scatter(rt, grad, n, b.d_out_idx, b.d_out_val, out_nnz, dtype, 1,
                                   comm->nranks, d->stream));
  } else if (n) {
    SC_CHECK(rt->memset_async(grad, 0, n * es, d->stream));
  }
  SC_CHECK(sc_spdev_sync(d, tmo, "sc_gtopk_allreduce: the result's scatter into grad"));
  *synced = 1;
  return SC_SUCCESS;
}

sc_result_t sc_ef_step_device(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                              sc_ef_t *ef, sc_comm_t *comm) {
  sc_spdev_t *d;
  SC_CHECK(sc_spdev_acquire("sc_gtopk_allreduce", &d));
  int synced = 0;
  sc_result_t r = step(d, grad, n, dtype, k, method, ef, comm, &synced);
  if (!synced) {
    /* A failure left work queued: drain it before the context is reused. */
    char msg[SC_ERRMSG_MAX];
    sc_error_get_detail(msg, sizeof(msg));
    synced = sc_spdev_sync(d, comm->cfg.timeout_ms, "sc_gtopk_allreduce: cleanup") == SC_SUCCESS;
    sc_error_set_detail(msg);
  }
  sc_spdev_release(d, synced);
  return r;
}

sc_result_t sc_ef_device_prepare(const char *fn, size_t n, sc_dtype_t dtype, size_t k,
                                 sc_ef_t *ef) {
  if (k > n) k = n; /* as sc_gtopk_allreduce takes it */
  sc_spdev_t *d;
  SC_CHECK(sc_spdev_acquire(fn, &d));
  sc_result_t r = reserve_step(d, fn, n, dtype, k);
  if (r == SC_SUCCESS && ef) r = ef_bind_device(ef, d, fn);
  /* The residual's clear ends before another context's stream may use it. */
  sc_result_t rs = sc_spdev_sync(d, d->timeout_ms, "sc_gtopk_allreduce_on_stream: preparation");
  sc_spdev_release(d, rs == SC_SUCCESS);
  return r != SC_SUCCESS ? r : rs;
}

sc_result_t sc_ef_residual_read(const sc_ef_t *ef, void *out) {
  const char *fn = "sc_ef_residual_read";
  if (!ef || !out) return SC_ERR(SC_ERR_INVALID_ARG, "%s: NULL argument", fn);
  size_t bytes = ef->n * sc_dtype_size(ef->dtype);
  if (ef->kind != SC_EF_DEVICE) {
    memcpy(out, ef->residual, bytes);
    return SC_SUCCESS;
  }
  sc_spdev_t *d;
  SC_CHECK(sc_spdev_acquire(fn, &d));
  sc_result_t r = bytes ? ef->rt->memcpy_async(out, ef->residual, bytes, d->stream) : SC_SUCCESS;
  sc_result_t rs = sc_spdev_sync(d, d->timeout_ms, "sc_ef_residual_read: the copy to the host");
  sc_spdev_release(d, rs == SC_SUCCESS);
  return r != SC_SUCCESS ? r : rs;
}
