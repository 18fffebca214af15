/* SPDX-License-Identifier: BSD-3-Clause */
/* Sparse all-reduce entry point shared by the public API (lib/sparse/sparse.c) and
 * error feedback (lib/sparse/ef.c). */
#ifndef SC_LIB_SPARSE_H
#define SC_LIB_SPARSE_H

#include <stdint.h>

#include "sparsecoll.h"

/* The sparse all-reduce sc_gtopk_allreduce runs for k entries of dtype on
 * comm: SC_GTOPK_ALGO's, else the cost model's pick (lib/core/select.c). */
sc_result_t sc_gtopk_algo(sc_comm_t *comm, size_t k, sc_dtype_t dtype, sc_sparse_algo_t *algo);

/* sc_sparse_allreduce plus survival: survived (nnz bytes, may be NULL) gets 1
 * for each input entry that survived every Merge it took part in, on this rank
 * or above it (every gTop-k schedule; ALLGATHER keeps everything). Without
 * survived nothing is tracked. fn names the caller in error messages. */
sc_result_t sc_sparse_allreduce_track(const char *fn, const uint32_t *indices, const void *values,
                                      size_t nnz, size_t dense_len, size_t k, sc_dtype_t dtype,
                                      sc_sparse_algo_t algo, uint32_t *out_indices,
                                      void *out_values, size_t *out_nnz, uint8_t *survived,
                                      sc_comm_t *comm);

/* Bytes this rank's schedules have posted on comm since it was created
 * (internal: sc_gtopk_perf's "bytes sent" column). Read it between
 * operations. */
uint64_t sc_comm_bytes_sent(const sc_comm_t *comm);

#endif
