/* SPDX-License-Identifier: BSD-3-Clause */
/* libsparsecoll: collective communication for distributed deep learning.
 * The public API contract is docs/API.md; every name here is fixed. */
#ifndef SPARSECOLL_H
#define SPARSECOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH */
#include "sparsecoll_version.h"

/* MAJOR*10000 + MINOR*100 + PATCH */
int sc_get_version(void);

typedef enum sc_result {
  SC_SUCCESS = 0,
  SC_IN_PROGRESS,     /* only from sc_test: not finished yet */
  SC_ERR_INVALID_ARG, /* the caller passed something wrong; nothing was sent */
  SC_ERR_NOMEM,
  SC_ERR_SYSTEM,      /* a local OS / network call failed */
  SC_ERR_REMOTE,      /* a peer closed, died, or sent a malformed message */
  SC_ERR_TIMEOUT,     /* no progress within the communicator's timeout */
  SC_ERR_MISMATCH,    /* ranks called different collectives / counts / dtypes / roots */
  SC_ERR_ABORTED,     /* the communicator was aborted */
  SC_ERR_UNSUPPORTED, /* not built in or not available here (no CUDA, no UCX...) */
  SC_ERR_INTERNAL
} sc_result_t;

/* Static string, never NULL. */
const char *sc_strerror(sc_result_t r);
/* Thread-local detail of this thread's last failure: what, where, which peer;
 * "" if none. Valid until this thread's next failing call. */
const char *sc_last_error(void);

typedef enum sc_dtype {
  SC_INT8,
  SC_UINT8,
  SC_INT32,
  SC_UINT32,
  SC_INT64,
  SC_UINT64,
  SC_FLOAT16,
  SC_BFLOAT16,
  SC_FLOAT32,
  SC_FLOAT64
} sc_dtype_t;

/* 0 for an invalid value. */
size_t sc_dtype_size(sc_dtype_t t);

/* FLOAT16 / BFLOAT16 reduce by converting to float32, reducing, rounding back
 * (round-to-nearest-even). SC_AVG divides the sum by nranks (integer types:
 * truncation toward zero). MIN/MAX propagate NaN. */
typedef enum sc_redop { SC_SUM, SC_PROD, SC_MIN, SC_MAX, SC_AVG } sc_redop_t;

/* Root address + secret. Produced by sc_get_unique_id, shipped by the user. */
typedef struct sc_unique_id {
  char internal[128];
} sc_unique_id_t;

typedef struct sc_comm sc_comm_t;       /* opaque */
typedef struct sc_request sc_request_t; /* opaque */

/* ---- Communicators (no MPI needed) ---- */

/* On one process; ship the id to every rank. Starts a bootstrap root service
 * in this process that lives until all ranks checked in or the timeout. */
sc_result_t sc_get_unique_id(sc_unique_id_t *id);
sc_result_t sc_comm_init_rank(sc_comm_t **comm, int nranks, sc_unique_id_t id, int rank);
/* SC_RANK/SC_WORLD_SIZE/SC_ROOT_ADDR; else torchrun's RANK/WORLD_SIZE/
 * MASTER_ADDR/MASTER_PORT; else SLURM_PROCID/SLURM_NTASKS or
 * OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE with SC_ROOT_ADDR. */
sc_result_t sc_comm_init_env(sc_comm_t **comm);
/* Collective over comm, as MPI_Comm_split; negative color gets *newcomm = NULL. */
sc_result_t sc_comm_split(sc_comm_t *comm, int color, int key, sc_comm_t **newcomm);
/* Finishes outstanding work, frees. */
sc_result_t sc_comm_destroy(sc_comm_t *comm);
/* Any thread, any time: pending and later ops fail with SC_ERR_ABORTED, frees. */
sc_result_t sc_comm_abort(sc_comm_t *comm);
sc_result_t sc_comm_rank(const sc_comm_t *comm, int *rank);
sc_result_t sc_comm_size(const sc_comm_t *comm, int *size);
/* SC_SUCCESS in *err while healthy; the first failure's code afterwards. */
sc_result_t sc_comm_get_async_error(sc_comm_t *comm, sc_result_t *err);

/* ---- Topology ---- */
/* This rank's place among the ranks of its host ("host" = the transport's own notion of
   locality: ranks that can use shared memory with each other). Hosts are numbered in the
   order of their lowest rank; every rank sees the same map. Any output may be NULL (not
   wanted); a NULL comm is SC_ERR_INVALID_ARG. Communicates nothing. */
sc_result_t sc_comm_local(const sc_comm_t *comm, int *local_rank, int *local_size, int *host_index,
                          int *nhosts);

/* ---- Dense collectives; sendbuf == recvbuf means in place ---- */

sc_result_t sc_allreduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         sc_redop_t op, sc_comm_t *comm);
/* sendbuf holds nranks*recvcount elements; rank r receives block r.
 * In place, either convention: recvbuf == sendbuf (the result lands in the
 * first recvcount elements) or NCCL's recvbuf == sendbuf + rank*recvcount. */
sc_result_t sc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                              sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm);
/* recvbuf holds nranks*sendcount elements, rank r's block at r*sendcount.
 * In place, either convention: NCCL's sendbuf == recvbuf + rank*sendcount, or
 * sendbuf == recvbuf (this rank's block in the first sendcount elements). */
sc_result_t sc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, sc_dtype_t dtype,
                         sc_comm_t *comm);
sc_result_t sc_broadcast(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         int root, sc_comm_t *comm);
sc_result_t sc_reduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                      sc_redop_t op, int root, sc_comm_t *comm);
sc_result_t sc_barrier(sc_comm_t *comm);

sc_result_t sc_iallreduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                          sc_redop_t op, sc_comm_t *comm, sc_request_t **req);
sc_result_t sc_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                               sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                               sc_request_t **req);
sc_result_t sc_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, sc_dtype_t dtype,
                          sc_comm_t *comm, sc_request_t **req);
sc_result_t sc_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                          int root, sc_comm_t *comm, sc_request_t **req);
sc_result_t sc_ireduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                       sc_redop_t op, int root, sc_comm_t *comm, sc_request_t **req);
sc_result_t sc_ibarrier(sc_comm_t *comm, sc_request_t **req);

/* The all-reduce algorithm SC_ALGO=auto (the cost model) uses on this
 * communicator for count elements of dtype: "ring", "tree", "rd",
 * "rabenseifner" or "hier" (a static string). Communicates nothing. */
sc_result_t sc_allreduce_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype, const char **name);
/* The same for the reduce-scatter ("ring", "recursive-halving" or "hier") and the
 * all-gather ("ring", "recursive-doubling" or "hier"), count elements per rank's block,
 * under SC_RS_ALGO / SC_AG_ALGO (a forced one is reported). */
sc_result_t sc_reduce_scatter_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype,
                                   const char **name);
sc_result_t sc_allgather_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype, const char **name);

/* done=1: finished and *req freed, set NULL; the op's result is returned. */
sc_result_t sc_test(sc_request_t **req, int *done);
/* Blocks (bounded by the communicator's timeout); frees *req and sets it NULL. */
sc_result_t sc_wait(sc_request_t **req);

/* ---- Sparse collectives (gTop-k family) ---- */

typedef enum sc_select { SC_SELECT_EXACT, SC_SELECT_GAUSSIAN } sc_select_t;

/* Top-k by magnitude of a dense vector of float16, bfloat16, float32 or
 * float64 (other dtypes: SC_ERR_INVALID_ARG); n <= UINT32_MAX. NaN is never
 * selected; -0.0 ties with +0.0; values are copied bit for bit.
 * EXACT: the min(k, m) entries of largest |v|, m = number of non-NaN entries;
 * ties broken toward the lower index.
 * GAUSSIAN: approximate: threshold t from a normal fit of the finite values,
 * adjusted at most 3 times, then every entry with |v| > t; at most 2k entries
 * (when more than 2k pass, the exact top-k). About k entries on normal data;
 * possibly far fewer on others (none on constant data).
 * k = 0 (or n = 0): *nnz = 0, and indices/values may be NULL. k >= n: every
 * non-NaN entry, with either method. Output sorted by index. indices/values
 * must hold 2*min(k, n) entries (the selection uses them as workspace). */
sc_result_t sc_topk(const void *dense, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                    uint32_t *indices, void *values, size_t *nnz);

typedef enum sc_sparse_algo {
  SC_SPARSE_GTOPK,      /* butterfly merge, no broadcast */
  SC_SPARSE_GTOPK_TREE, /* the papers' tree reduce + broadcast */
  SC_SPARSE_ALLGATHER,  /* TopK-SGD baseline */
  SC_SPARSE_GTOPK_HIER  /* merge inside each host, butterfly among hosts, broadcast in the host */
} sc_sparse_algo_t;

sc_result_t sc_sparse_allreduce(const uint32_t *indices, const void *values, size_t nnz,
                                size_t dense_len, size_t k, sc_dtype_t dtype, sc_sparse_algo_t algo,
                                uint32_t *out_indices, void *out_values, size_t *out_nnz,
                                sc_comm_t *comm);

typedef struct sc_ef sc_ef_t;
sc_result_t sc_ef_create(size_t n, sc_dtype_t dtype, sc_ef_t **ef);
sc_result_t sc_ef_destroy(sc_ef_t *ef);
sc_result_t sc_gtopk_allreduce(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                               sc_ef_t *ef, sc_comm_t *comm);

/* ---- Bucket fusion for frameworks ---- */

typedef enum sc_fusion_policy {
  SC_FUSE_NONE,   /* WFBP: one all-reduce per tensor, launched when it is ready */
  SC_FUSE_SIZE,   /* buckets of at most bucket_bytes in ready order */
  SC_FUSE_MGWFBP, /* the optimal merge from the alpha-beta model and backward times */
  SC_FUSE_DEAR,   /* reduce-scatter during backward, all-gather before next forward */
  SC_FUSE_SINGLE, /* everything in one all-reduce after the last tensor is ready */
  SC_FUSE_P3      /* P3: slices of slice_bytes sent by priority (the next forward's order) */
} sc_fusion_policy_t;
/* With density > 0 every bucket is its own gTop-k step (own k, own error
 * feedback): NONE = LAGS (layer-wise), MGWFBP = OMGS (optimal merge under the
 * sparse cost model), SINGLE = single-model gTop-k, SIZE = size buckets;
 * DEAR and P3 refuse density > 0. */

typedef struct sc_fusion_config {
  sc_fusion_policy_t policy;
  size_t bucket_bytes;     /* SIZE and DEAR; 0 = library default */
  double alpha_us;         /* all-reduce model T(m) = alpha + beta*m bytes; both 0 = */
  double beta_us_per_byte; /* measure on the communicator at plan time */
  double density;          /* 0 = dense; (0,1) = gTop-k with error feedback */
  sc_select_t select;      /* sparse buckets: SC_SELECT_EXACT (default) or SC_SELECT_GAUSSIAN */
  size_t slice_bytes;      /* SC_FUSE_P3: slice size; 0 = from the cost model */
} sc_fusion_config_t;

/* Defaults for every field (SC_FUSE_SIZE, library-default bucket size, a
 * measured model, dense, exact selection): call first, then set what you
 * need, so that code keeps working when fields are added. */
void sc_fusion_config_init(sc_fusion_config_t *cfg);

typedef struct sc_fusion sc_fusion_t;
sc_result_t sc_fusion_create(sc_comm_t *comm, const sc_fusion_config_t *cfg, sc_fusion_t **f);
sc_result_t sc_fusion_add_tensor(sc_fusion_t *f, void *buf, size_t count, sc_dtype_t dtype,
                                 double backward_us, int *tensor_id);
sc_result_t sc_fusion_plan(sc_fusion_t *f);
sc_result_t sc_fusion_num_buckets(const sc_fusion_t *f, int *n);
sc_result_t sc_fusion_bucket_of(const sc_fusion_t *f, int tensor_id, int *bucket);
sc_result_t sc_fusion_ready(sc_fusion_t *f, int tensor_id);
/* No gradient this round (an unused parameter): counts as ready and
 * contributes zeros; buf is not read, and receives the average. */
sc_result_t sc_fusion_skip(sc_fusion_t *f, int tensor_id);
sc_result_t sc_fusion_wait(sc_fusion_t *f, int tensor_id);
sc_result_t sc_fusion_wait_all(sc_fusion_t *f);
sc_result_t sc_fusion_destroy(sc_fusion_t *f);

/* ---- Device (CUDA) buffers and streams ---- */

/* 1: built with CUDA and a device is visible; else 0. Asks the CUDA runtime
 * once per process. */
int sc_cuda_available(void);
typedef void *sc_stream_t; /* a cudaStream_t; NULL = the legacy default stream */

/* Stream-ordered forms (NCCL semantics): the operation starts after all work
 * enqueued earlier on `stream`; work enqueued later on `stream` sees its
 * result. They return once the operation is enqueued; a failure during
 * execution is reported by sc_comm_get_async_error and by every later call on
 * the communicator. Device buffers only (host buffers: SC_ERR_INVALID_ARG).
 * Without CUDA or with no device visible: SC_ERR_UNSUPPORTED saying which.
 * This release validates the arguments and answers SC_ERR_UNSUPPORTED for
 * device buffers too (docs/CUDA.md: the device data path is not built yet). */
sc_result_t sc_allreduce_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                   sc_stream_t stream);
sc_result_t sc_reduce_scatter_on_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                        sc_stream_t stream);
sc_result_t sc_allgather_on_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   sc_dtype_t dtype, sc_comm_t *comm, sc_stream_t stream);
sc_result_t sc_broadcast_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   sc_dtype_t dtype, int root, sc_comm_t *comm, sc_stream_t stream);
sc_result_t sc_reduce_on_stream(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                                sc_redop_t op, int root, sc_comm_t *comm, sc_stream_t stream);
sc_result_t sc_gtopk_allreduce_on_stream(void *grad, size_t n, sc_dtype_t dtype, size_t k,
                                         sc_select_t method, sc_ef_t *ef, sc_comm_t *comm,
                                         sc_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SPARSECOLL_H */
