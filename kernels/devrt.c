/* SPDX-License-Identifier: BSD-3-Clause */
/* Which device runtime the library uses (kernels/devrt.h), and the device
 * kernels dispatched to it: CUDA's (kernels/cuda/cuda_kernels.h) or, with
 * the stand-in, the CPU kernels run on its host views (kernels/devrt_emu.c).
 *
 * The stand-in is a test module (test/devfake/) loaded only when
 * SC_DEVRT_STANDIN names it; a library user never gets it by accident. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "kernels/cpu/topk_gaussian.h"
#include "kernels/cpu/topk_keys.h"
#include "kernels/devrt.h"
#include "kernels/devrt_emu.h"
#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#ifdef SC_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/devrt_cuda.h"
#endif

static const sc_devrt_t *g_rt;
static pthread_once_t g_rt_once = PTHREAD_ONCE_INIT;

/* The module's optional hook that takes the library's sc_error_set (a test
 * binary does not export it, so the module cannot find it by itself). */
typedef sc_result_t (*error_fn_t)(sc_result_t, const char *, int, const char *, ...);
typedef void (*set_error_fn_t)(error_fn_t);

static const sc_devrt_t *load_standin(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    SC_WARN(SC_SUBSYS_INIT, "SC_DEVRT_STANDIN=%s: cannot load it (%s): no device runtime", path,
            dlerror());
    return NULL;
  }
  const sc_devrt_t *rt = dlsym(h, "sc_devrt_standin");
  if (!rt) {
    SC_WARN(SC_SUBSYS_INIT,
            "SC_DEVRT_STANDIN=%s: the module has no sc_devrt_standin table: no device runtime",
            path);
    dlclose(h);
    return NULL;
  }
  void *hook = dlsym(h, "sc_devrt_standin_errors");
  if (hook) {
    set_error_fn_t set;
    /* POSIX guarantees that dlsym's object pointer converts to a function. */
    memcpy(&set, &hook, sizeof set);
    set(sc_error_set);
  }
  /* Never unloaded: the table lives as long as the process. */
  if (rt->device_count() <= 0) {
    /* As CUDA without a GPU: no device, no runtime. */
    SC_INFO(SC_SUBSYS_INIT, "device runtime: none (the stand-in from %s shows no device)", path);
    return NULL;
  }
  SC_INFO(SC_SUBSYS_INIT,
          "device runtime: the stand-in \"%s\" from %s (%d emulated devices; a test device, "
          "not a GPU)",
          rt->name, path, rt->device_count());
  return rt;
}

static void pick_runtime(void) {
  const char *path = getenv("SC_DEVRT_STANDIN");
  if (path && *path) {
    g_rt = load_standin(path);
    return;
  }
#ifdef SC_HAVE_CUDA
  g_rt = sc_devrt_cuda();
  if (g_rt) SC_INFO(SC_SUBSYS_INIT, "device runtime: CUDA (%d devices)", g_rt->device_count());
#endif
}

const sc_devrt_t *sc_devrt(void) {
  pthread_once(&g_rt_once, pick_runtime);
  return g_rt;
}

sc_result_t sc_dev_event_wait(const sc_devrt_t *rt, void *event, int timeout_ms, const char *what) {
  int64_t deadline = sc_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  for (unsigned polls = 0;; polls++) {
    int done = 0;
    SC_CHECK(rt->event_query(event, &done));
    if (done) return SC_SUCCESS;
    if (sc_now_ms() >= deadline)
      return SC_ERR(SC_ERR_TIMEOUT, "%s: device work not finished after %d ms", what, timeout_ms);
    /* Short waits are the common case: yield first, then sleep so that a
     * long wait does not burn a core. */
    if (polls < 64) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
}

/* ---- kernels ---- */

#define IS_STANDIN(rt) ((rt)->host_view != NULL)

#ifdef SC_HAVE_CUDA
#define CUDA_OR_NONE(call) return (call)
#else
#define CUDA_OR_NONE(call)                                                                         \
  return SC_ERR(SC_ERR_UNSUPPORTED, "%s: built without CUDA and the runtime is not the stand-in",  \
                __func__)
#endif

sc_result_t sc_dev_reduce(const sc_devrt_t *rt, void *dst, const void *a, const void *b,
                          size_t count, sc_dtype_t dtype, sc_redop_t op, void *stream) {
  if (IS_STANDIN(rt)) return sc_emu_reduce(rt, dst, a, b, count, dtype, op, stream);
  CUDA_OR_NONE(sc_cuda_reduce(dst, a, b, count, dtype, op, stream));
}

sc_result_t sc_dev_sym_pack(const sc_devrt_t *rt, void *packed, const void *full, size_t d,
                            size_t es, void *stream) {
  if (IS_STANDIN(rt)) return sc_emu_sym(rt, 0, packed, full, d, es, stream);
  CUDA_OR_NONE(sc_cuda_sym_pack(packed, full, d, es, stream));
}

sc_result_t sc_dev_sym_unpack(const sc_devrt_t *rt, void *full, const void *packed, size_t d,
                              size_t es, void *stream) {
  if (IS_STANDIN(rt)) return sc_emu_sym(rt, 1, full, packed, d, es, stream);
  CUDA_OR_NONE(sc_cuda_sym_unpack(full, packed, d, es, stream));
}

sc_result_t sc_dev_ipc_allreduce(const sc_devrt_t *rt, const struct sc_ipcar_args *a,
                                 void *stream) {
  if (IS_STANDIN(rt)) return sc_emu_ipc_allreduce(rt, a, stream);
  CUDA_OR_NONE(sc_cuda_ipc_allreduce(a, stream));
}

sc_result_t sc_dev_ipcar_geometry(const sc_devrt_t *rt, int *sms, int *blocks_per_sm) {
  *sms = *blocks_per_sm = 0;
  if (IS_STANDIN(rt)) return SC_SUCCESS;
  CUDA_OR_NONE(sc_cuda_ipcar_geometry(sms, blocks_per_sm));
}

sc_result_t sc_dev_avg_finalize(const sc_devrt_t *rt, void *buf, size_t count, sc_dtype_t dtype,
                                int nranks, void *stream) {
  if (IS_STANDIN(rt)) return sc_emu_avg_finalize(rt, buf, count, dtype, nranks, stream);
  CUDA_OR_NONE(sc_cuda_avg_finalize(buf, count, dtype, nranks, stream));
}

size_t sc_dev_topk_workspace_size(const sc_devrt_t *rt, size_t n, sc_dtype_t dtype) {
  if (!sc_topk_ops(dtype)) return 0;
  if (IS_STANDIN(rt)) return SC_EMU_TOPK_WORKSPACE;
#ifdef SC_HAVE_CUDA
  return sc_cuda_topk_workspace_size(n, dtype);
#else
  (void)n;
  return 0;
#endif
}

#ifdef SC_HAVE_CUDA
/* The Gaussian selector of kernels/cpu/topk_gaussian.c with its counting
 * passes on the device: the same decisions on the same counts, so the same
 * indices as the CPU selector (the loop cuda_kernels.h describes). */
static sc_result_t cuda_topk_gaussian(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                      uint32_t *indices, void *values, size_t *nnz, void *ws,
                                      size_t wsb, void *stream) {
  const sc_topk_ops_t *ops = sc_topk_ops(dtype);
  double top[SC_CUDA_TOPK_TOP];
  size_t h = 0, taken = 0;
  SC_CHECK(sc_cuda_topk_sample(x, n, dtype, k, top, &h, &taken, ws, wsb, stream));
  double slope;
  double t = sc_topk_sample_threshold(top, h, taken, n, k, &slope);
  sc_topk_search_t s;
  sc_topk_search_init(&s, k, slope);
  size_t cap = k <= SIZE_MAX / 2 ? 2 * k : SIZE_MAX;
  for (int round = 0; round < SC_TOPK_ROUNDS && h > 0; round++) {
    uint64_t key;
    if (isnan(t) || !sc_topk_search_key(&s, sc_cuda_topk_threshold_key(dtype, t), &key)) break;
    size_t count = 0;
    SC_CHECK(sc_cuda_topk_above(x, n, dtype, key, indices, cap, &count, ws, wsb, stream));
    if (sc_topk_search_record(&s, key, ops->key_value(key), count)) {
      *nnz = count;
      if (values && count)
        SC_CHECK(sc_cuda_sparse_gather(values, x, indices, count, dtype, stream));
      return SC_SUCCESS;
    }
    t = sc_topk_search_next(&s);
  }
  return sc_cuda_topk_exact(x, n, dtype, k, indices, values, nnz, ws, wsb, stream);
}
#endif

sc_result_t sc_dev_topk(const sc_devrt_t *rt, const void *x, size_t n, sc_dtype_t dtype, size_t k,
                        sc_select_t method, uint32_t *indices, void *values, size_t *nnz,
                        void *workspace, size_t workspace_bytes, void *stream) {
  *nnz = 0;
  if (!sc_topk_ops(dtype))
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_dev_topk: dtype %d is not floating point", (int)dtype);
  if (method != SC_SELECT_EXACT && method != SC_SELECT_GAUSSIAN && method != SC_SELECT_MSTOPK)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_dev_topk: invalid selection method %d", (int)method);
  if (n > UINT32_MAX) return SC_ERR(SC_ERR_INVALID_ARG, "sc_dev_topk: n %zu > UINT32_MAX", n);
  if (k == 0 || n == 0) return SC_SUCCESS;
  if (IS_STANDIN(rt))
    return sc_emu_topk(rt, x, n, dtype, k, method, indices, values, nnz, workspace, workspace_bytes,
                       stream);
#ifdef SC_HAVE_CUDA
  if (method == SC_SELECT_MSTOPK)
    return sc_dev_topk_mstopk_cuda(x, n, dtype, k, indices, values, nnz, workspace, workspace_bytes,
                                   stream);
  if (method == SC_SELECT_GAUSSIAN && k < n)
    return cuda_topk_gaussian(x, n, dtype, k, indices, values, nnz, workspace, workspace_bytes,
                              stream);
#endif
  CUDA_OR_NONE(
      sc_cuda_topk_exact(x, n, dtype, k, indices, values, nnz, workspace, workspace_bytes, stream));
}

sc_result_t sc_dev_sparse_gather(const sc_devrt_t *rt, void *values, const void *x,
                                 const uint32_t *indices, size_t nnz, sc_dtype_t dtype,
                                 void *stream) {
  if (IS_STANDIN(rt)) return sc_emu_sparse_gather(rt, values, x, indices, nnz, dtype, stream);
  CUDA_OR_NONE(sc_cuda_sparse_gather(values, x, indices, nnz, dtype, stream));
}

sc_result_t sc_dev_sparse_scatter(const sc_devrt_t *rt, void *dst, size_t n,
                                  const uint32_t *indices, const void *values, size_t nnz,
                                  sc_dtype_t dtype, int zero_first, int divisor, void *stream) {
  if (IS_STANDIN(rt))
    return sc_emu_sparse_scatter(rt, dst, n, indices, values, nnz, dtype, zero_first, divisor,
                                 stream);
  CUDA_OR_NONE(
      sc_cuda_sparse_scatter(dst, n, indices, values, nnz, dtype, zero_first, divisor, stream));
}

sc_result_t sc_dev_ef_accumulate(const sc_devrt_t *rt, void *residual, const void *grad, size_t n,
                                 sc_dtype_t dtype, void *stream) {
  if (IS_STANDIN(rt)) return sc_emu_ef_accumulate(rt, residual, grad, n, dtype, stream);
  CUDA_OR_NONE(sc_cuda_ef_accumulate(residual, grad, n, dtype, stream));
}

sc_result_t sc_dev_ef_clear(const sc_devrt_t *rt, void *residual, const uint32_t *indices,
                            size_t nnz, sc_dtype_t dtype, void *stream) {
  if (IS_STANDIN(rt)) return sc_emu_ef_clear(rt, residual, indices, nnz, dtype, stream);
  CUDA_OR_NONE(sc_cuda_ef_clear(residual, indices, nnz, dtype, stream));
}

sc_result_t sc_dev_ef_restore(const sc_devrt_t *rt, void *residual, const uint32_t *indices,
                              const void *values, const uint8_t *survived, size_t nnz,
                              sc_dtype_t dtype, void *stream) {
  if (IS_STANDIN(rt))
    return sc_emu_ef_restore(rt, residual, indices, values, survived, nnz, dtype, stream);
  CUDA_OR_NONE(sc_cuda_ef_restore(residual, indices, values, survived, nnz, dtype, stream));
}
