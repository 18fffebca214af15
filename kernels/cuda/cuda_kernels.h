/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA kernels' C API (built when configure finds nvcc; docs/CUDA.md).
 *
 * Every pointer named "device" is device memory of the current device (the
 * caller sets it); `stream` is a cudaStream_t passed as void * (NULL: the
 * legacy default stream). Functions enqueue their work on the stream and
 * return without waiting, except where a result comes back to the host (the
 * top-k counts): those wait for the stream. Failures are SC_ERR_INVALID_ARG
 * for arguments and SC_ERR_SYSTEM naming the CUDA error. The functions exist
 * only when SC_HAVE_CUDA is defined (config.h): callers test it, and
 * sc_cuda_available() for a device, first. Nothing allocates: the top-k functions
 * take a caller's workspace of sc_cuda_topk_workspace_size bytes (pooled by
 * the caller), the rest need none.
 *
 * Results equal the CPU kernels' bit for bit: sc_cuda_reduce and
 * sc_cuda_avg_finalize those of kernels/cpu/reduce.h, sc_cuda_topk_exact the
 * indices of the CPU exact selector (same ties), the Gaussian primitives the
 * CPU Gaussian selector's samples and counts. */
#ifndef SC_KERNELS_CUDA_CUDA_KERNELS_H
#define SC_KERNELS_CUDA_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the kernels' modules ---- */

/* One kernel of each .cu file's module (a host stub's address, as
 * cudaGetFuncBySymbol takes it): kernels/cuda/preload.c finds every other
 * kernel of that module through it. */
const void *sc_cuda_reduce_module_kernel(void);
const void *sc_cuda_topk_module_kernel(void);
const void *sc_cuda_sparse_module_kernel(void);
const void *sc_cuda_ipcar_module_kernel(void);
const void *sc_cuda_sym_module_kernel(void);
const void *sc_cuda_mstopk_module_kernel(void);

/* ---- element-wise reduction ---- */

/* device dst[i] = a[i] (op) b[i], i < count; dst may alias a or b exactly.
 * Every dtype and op, semantics of sc_reduce_kernel (AVG reduces as SUM;
 * sc_cuda_avg_finalize divides). Any alignment: 16-byte vector loads when
 * the three pointers share their offset modulo 16, scalar loads otherwise. */
sc_result_t sc_cuda_reduce(void *dst, const void *a, const void *b, size_t count, sc_dtype_t dtype,
                           sc_redop_t op, void *stream);

/* device buf[i] /= nranks as sc_avg_finalize does (nranks <= 1: nothing). */
sc_result_t sc_cuda_avg_finalize(void *buf, size_t count, sc_dtype_t dtype, int nranks,
                                 void *stream);

/* ---- top-k by magnitude (float16, bfloat16, float32, float64; n <= UINT32_MAX) ---- */

/* The Gaussian selector's sample, as the CPU one takes it (SC_TOPK_SAMPLE
 * and SC_TOPK_TOP of kernels/cpu/topk_gaussian.h; the unit tests check that
 * they agree): at most this many strided positions, and the largest this
 * many magnitudes kept. */
#define SC_CUDA_TOPK_SAMPLE 16384
#define SC_CUDA_TOPK_TOP    256

/* Bytes of device workspace the top-k functions below need for n elements
 * (0 for a dtype that is not floating point). */
size_t sc_cuda_topk_workspace_size(size_t n, sc_dtype_t dtype);

/* Exact top-k: radix select on the magnitude keys (11-bit digits, one
 * fused filter-and-histogram pass per digit; once the superset of the
 * selection fits a list, the next pass writes it and later passes read
 * only it), then one index-ordered compaction (of the list through two
 * bitmaps, else of the vector). Writes, sorted by
 * index, the indices (device, room for min(k, n)) and, when values is not
 * NULL, the values bit for bit (device); *nnz (host) = min(k, non-NaN
 * entries). The same indices as the CPU exact selector. Waits for stream. */
sc_result_t sc_cuda_topk_exact(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                               uint32_t *indices, void *values, size_t *nnz, void *workspace,
                               size_t workspace_bytes, void *stream);

/* Gaussian-k primitives. The selector (the decisions of
 * kernels/cpu/topk_gaussian.h, run on the host by the caller) is:
 *   sc_cuda_topk_sample -> sc_topk_sample_threshold -> loop { key =
 *   sc_cuda_topk_threshold_key(t) -> sc_cuda_topk_above(key) ->
 *   sc_topk_search_record / _next / _key } -> else sc_cuda_topk_exact.
 * Given the same decisions, it returns the CPU Gaussian selector's indices. */

/* The CPU selector's strided sample (0 < k < n): top[0..*h) (host, room for
 * SC_CUDA_TOPK_TOP = 256) gets the largest finite sampled magnitudes, sorted
 * descending; *taken = positions sampled. Waits for stream. */
sc_result_t sc_cuda_topk_sample(const void *x, size_t n, sc_dtype_t dtype, size_t k, double *top,
                                size_t *h, size_t *taken, void *workspace, size_t workspace_bytes,
                                void *stream);

/* The largest magnitude key <= t (a host computation): |v| > t exactly
 * when v's key exceeds it. */
uint64_t sc_cuda_topk_threshold_key(sc_dtype_t dtype, double t);

/* *count (host) = entries whose magnitude key exceeds key; when *count <=
 * cap their indices are written to indices (device) in index order, else
 * indices is left alone. Waits for stream. */
sc_result_t sc_cuda_topk_above(const void *x, size_t n, sc_dtype_t dtype, uint64_t key,
                               uint32_t *indices, size_t cap, size_t *count, void *workspace,
                               size_t workspace_bytes, void *stream);

/* MSTopK primitives (kernels/cuda/mstopk.cu). The selector (the decisions
 * of kernels/topk_mstopk.h, run on the host by kernels/devrt.c) is:
 *   sc_cuda_mstopk_stats -> sc_mstopk_init -> rounds of sc_cuda_topk_above
 *   (cap 0: a count) -> the band's entries listed by sc_cuda_topk_above,
 *   filtered on the host, gathered by sc_cuda_sparse_gather. */
typedef struct sc_cuda_mstopk_stats {
  double sum;                 /* of the finite magnitudes */
  unsigned long long nfinite; /* finite entries */
  unsigned long long ninf;    /* infinite entries */
  unsigned long long max_key; /* largest finite magnitude key */
} sc_cuda_mstopk_stats_t;

/* The statistics of x (device), through the first 32 bytes of workspace
 * (8-aligned). Waits for stream. */
sc_result_t sc_cuda_mstopk_stats(const void *x, size_t n, sc_dtype_t dtype,
                                 sc_cuda_mstopk_stats_t *out, void *workspace,
                                 size_t workspace_bytes, void *stream);

/* The workspace and stream kernels/devrt_mstopk.c's primitives share. */
typedef struct sc_cuda_mstopk_ctx {
  void *ws;
  size_t wsb;
  void *stream;
} sc_cuda_mstopk_ctx_t;

/* bytes from src to dst in any direction (unified addressing), then waits
 * for stream. */
sc_result_t sc_cuda_copy_wait(void *dst, const void *src, size_t bytes, void *stream);

/* ---- sparse (float dtypes) ---- */

/* device values[j] = x[indices[j]], j < nnz, bit for bit. */
sc_result_t sc_cuda_sparse_gather(void *values, const void *x, const uint32_t *indices, size_t nnz,
                                  sc_dtype_t dtype, void *stream);

/* device dst[indices[j]] = values[j] / divisor (divisor 1: bit for bit;
 * otherwise float32 arithmetic, float64 for float64, as sc_gtopk_allreduce
 * averages), after zeroing all n entries of dst when zero_first is set.
 * Indices must be distinct and < n. */
sc_result_t sc_cuda_sparse_scatter(void *dst, size_t n, const uint32_t *indices, const void *values,
                                   size_t nnz, sc_dtype_t dtype, int zero_first, int divisor,
                                   void *stream);

/* ---- error feedback (lib/sparse/ef.c's residual updates) ---- */

/* device residual += grad (sc_reduce_kernel's SUM). */
sc_result_t sc_cuda_ef_accumulate(void *residual, const void *grad, size_t n, sc_dtype_t dtype,
                                  void *stream);

/* device residual[indices[j]] = +0 for the nnz selected entries. */
sc_result_t sc_cuda_ef_clear(void *residual, const uint32_t *indices, size_t nnz, sc_dtype_t dtype,
                             void *stream);

/* device residual[indices[j]] = values[j] (bit for bit) for every j whose
 * survived[j] (device) is 0, or for every j when survived is NULL (a failed
 * exchange: nothing was sent). */
sc_result_t sc_cuda_ef_restore(void *residual, const uint32_t *indices, const void *values,
                               const uint8_t *survived, size_t nnz, sc_dtype_t dtype, void *stream);

/* ---- symmetric matrices (kernels/sym_pack.h's layout) ---- */

/* device packed = the upper triangle of the d x d device matrix full, and
 * back (unpack writes both halves); es is 1, 2, 4 or 8. */
sc_result_t sc_cuda_sym_pack(void *packed, const void *full, size_t d, size_t es, void *stream);
sc_result_t sc_cuda_sym_unpack(void *full, const void *packed, size_t d, size_t es, void *stream);

/* ---- the kernel-driven all-reduce between the ranks of one host ---- */

/* One launch of kernels/ipc_allreduce_plan.h's protocol on the stream: a
 * grid of a->nblocks blocks of SC_IPCAR_THREADS threads. The caller has
 * copied this launch's input into its own half on the same stream. */
struct sc_ipcar_args;
sc_result_t sc_cuda_ipc_allreduce(const struct sc_ipcar_args *a, void *stream);
/* The current device's SMs and the kernel's resident blocks per SM. */
sc_result_t sc_cuda_ipcar_geometry(int *sms, int *blocks_per_sm);

#ifdef __cplusplus
}
#endif

#endif
