/* SPDX-License-Identifier: BSD-3-Clause */
/* The device kernels of kernels/devrt.h on the stand-in runtime: each
 * checks its device ranges (an overrun is an error here, where a GPU would
 * fault), then enqueues a launch_host function that runs the CPU kernel
 * (kernels/cpu/) on the stand-in's host views, so that the results equal the
 * CPU's bit for bit and come in stream order. */
#ifndef SC_KERNELS_DEVRT_EMU_H
#define SC_KERNELS_DEVRT_EMU_H

#include "kernels/devrt.h"

/* The host view of [p, p + bytes): device memory of the stand-in (checked
 * against its allocation) or pinned memory; bytes == 0 needs nothing. */
sc_result_t sc_emu_view(const sc_devrt_t *rt, const void *p, size_t bytes, const char *fn,
                        const char *name, void **out);

/* The stand-in's top-k workspace: the count and a completion token. */
#define SC_EMU_TOPK_WORKSPACE 64

sc_result_t sc_emu_reduce(const sc_devrt_t *rt, void *dst, const void *a, const void *b,
                          size_t count, sc_dtype_t dtype, sc_redop_t op, void *stream);
sc_result_t sc_emu_avg_finalize(const sc_devrt_t *rt, void *buf, size_t count, sc_dtype_t dtype,
                                int nranks, void *stream);
sc_result_t sc_emu_topk(const sc_devrt_t *rt, const void *x, size_t n, sc_dtype_t dtype, size_t k,
                        sc_select_t method, uint32_t *indices, void *values, size_t *nnz,
                        void *workspace, size_t workspace_bytes, void *stream);
sc_result_t sc_emu_sparse_gather(const sc_devrt_t *rt, void *values, const void *x,
                                 const uint32_t *indices, size_t nnz, sc_dtype_t dtype,
                                 void *stream);
sc_result_t sc_emu_sparse_scatter(const sc_devrt_t *rt, void *dst, size_t n,
                                  const uint32_t *indices, const void *values, size_t nnz,
                                  sc_dtype_t dtype, int zero_first, int divisor, void *stream);
sc_result_t sc_emu_ef_accumulate(const sc_devrt_t *rt, void *residual, const void *grad, size_t n,
                                 sc_dtype_t dtype, void *stream);
sc_result_t sc_emu_ef_clear(const sc_devrt_t *rt, void *residual, const uint32_t *indices,
                            size_t nnz, sc_dtype_t dtype, void *stream);
sc_result_t sc_emu_ef_restore(const sc_devrt_t *rt, void *residual, const uint32_t *indices,
                              const void *values, const uint8_t *survived, size_t nnz,
                              sc_dtype_t dtype, void *stream);

/* Symmetric packing (unpack 0: dst packed from the full src; 1: dst full
 * from the packed src). */
sc_result_t sc_emu_sym(const sc_devrt_t *rt, int unpack, void *dst, const void *src, size_t d,
                       size_t es, void *stream);
/* kernels/devrt_emu_ipcar.c: the kernel-driven all-reduce's launch. */
sc_result_t sc_emu_ipc_allreduce(const sc_devrt_t *rt, const struct sc_ipcar_args *a, void *stream);

#endif
