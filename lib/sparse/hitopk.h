/* SPDX-License-Identifier: BSD-3-Clause */
/* HiTopKComm (docs/ALGORITHMS.md, "Hierarchical top-k"): sc_gtopk_allreduce's
 * step when SC_GTOPK_ALGO or the cost model names SC_SPARSE_HITOPK. */
#ifndef SC_LIB_SPARSE_HITOPK_H
#define SC_LIB_SPARSE_HITOPK_H

#include <stddef.h>

#include "algorithms/hitopk_plan.h"
#include "sparsecoll.h"

/* Frees the buffers a step kept in an sc_ef_t (NULL allowed). */
struct sc_hitopk_buf;
void sc_hitopk_buf_free(struct sc_hitopk_buf *b);

struct sc_ef;
/* One step (ef may be NULL): grad becomes the average of the selection, the
 * residual (when ef) what this rank's shard of its host sum kept. */
sc_result_t sc_hitopk_step(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                           struct sc_ef *ef, sc_comm_t *comm);
/* As sc_hitopk_step with the residual at res (host memory; NULL: no error
 * feedback) instead of ef's, ef only keeping the step's buffers (NULL: made
 * for this call): the device step (ef_dev.c) runs it on host images of its
 * gradient and device residual. */
sc_result_t sc_hitopk_step_at(void *grad, void *res, size_t n, sc_dtype_t dtype, size_t k,
                              sc_select_t method, struct sc_ef *ef, sc_comm_t *comm);

#endif
