/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/compress/: the compressed all-reduces (low-rank, half-precision wire,
 * 1-bit). They sit above lib/sparse and lib/core and below lib/fusion: each is
 * a public call built from the dense and sparse collectives. */
#ifndef SC_COMPRESS_H
#define SC_COMPRESS_H

#include "sparsecoll.h"

/* sc_lowrank_allreduce in phases, for a caller that sums the factors of
 * several states in one all-reduce (fusion's low-rank buckets). A call is:
 * for k < sc_lowrank_rounds(lr) (PowerSGD 2, ACP-SGD 1, 0 for an empty
 * matrix): sc_lowrank_before(lr, g, k, ...) does the local work and names
 * the factor to sum over every rank (in place: count elements of *dtype);
 * then sc_lowrank_finish(lr, g, nranks) writes the result into g. g: the
 * gradient in host memory, the same for every phase of the call. The same
 * bits as sc_lowrank_allreduce when the sums are. */
int sc_lowrank_rounds(const sc_lowrank_t *lr);
void sc_lowrank_before(sc_lowrank_t *lr, void *g, int k, void **factor, size_t *count,
                       sc_dtype_t *dtype);
void sc_lowrank_finish(sc_lowrank_t *lr, void *g, int nranks);
/* Round k's factor of the call in progress, as sc_lowrank_before named it. */
void sc_lowrank_factor(const sc_lowrank_t *lr, int k, void **factor, size_t *count,
                       sc_dtype_t *dtype);

#endif
