/* SPDX-License-Identifier: BSD-3-Clause */
/* Every kernel of the library loaded before a stream waits on us.
 *
 * CUDA loads kernels lazily by default since 12.2: a kernel is loaded at its
 * first launch, and loading may wait for the whole context. A stream form
 * (lib/core/stream.c) leaves the caller's stream waiting on a flag that only our
 * progress thread raises, after it has launched its kernels; a first launch
 * there, or of one of our kernels by the caller behind that wait, then waits
 * for a stream that waits for it. On an H100 (2026-11-27) the stream tests
 * hung so on 1 and 2 ranks. NCCL loads its kernels at init for the same
 * reason.
 *
 * The kernels are C++ templates over dtypes and operations, too many to list
 * by hand without forgetting one: instead each .cu file's module is found
 * through one kernel of it (sc_cuda_*_module_kernel) and every function in
 * it is loaded (cuModuleEnumerateFunctions and cuFuncLoad, CUDA 12.4). An
 * older driver loads only those three and says what to do. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/devrt_cuda.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

/* More than the modules hold (reduce.cu has about a hundred). */
#define SC_CUDA_MODULE_FUNCS_MAX 1024

typedef CUresult (*loading_mode_fn_t)(CUmoduleLoadingMode *);
typedef CUresult (*func_get_module_fn_t)(CUmodule *, CUfunction);
typedef CUresult (*module_count_fn_t)(unsigned int *, CUmodule);
typedef CUresult (*module_enum_fn_t)(CUfunction *, unsigned int, CUmodule);
typedef CUresult (*func_load_fn_t)(CUfunction);
typedef CUresult (*func_is_loaded_fn_t)(CUfunctionLoadingState *, CUfunction);

static struct {
  loading_mode_fn_t mode;
  func_get_module_fn_t get_module;
  module_count_fn_t count;
  module_enum_fn_t enumerate;
  func_load_fn_t load;
  func_is_loaded_fn_t is_loaded;
} g_fn;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t g_loaded_on; /* devices 0..63 whose kernels are loaded */
static atomic_int g_old_driver_said;

static void resolve(void) {
  void *p[6] = {sc_cuda_driver_entry("cuModuleGetLoadingMode", 11070),
                sc_cuda_driver_entry("cuFuncGetModule", 11000),
                sc_cuda_driver_entry("cuModuleGetFunctionCount", 12040),
                sc_cuda_driver_entry("cuModuleEnumerateFunctions", 12040),
                sc_cuda_driver_entry("cuFuncLoad", 12040),
                sc_cuda_driver_entry("cuFuncIsLoaded", 12040)};
  /* POSIX: an object pointer from a symbol lookup converts to a function. */
  memcpy(&g_fn.mode, &p[0], sizeof p[0]);
  memcpy(&g_fn.get_module, &p[1], sizeof p[1]);
  memcpy(&g_fn.count, &p[2], sizeof p[2]);
  memcpy(&g_fn.enumerate, &p[3], sizeof p[3]);
  memcpy(&g_fn.load, &p[4], sizeof p[4]);
  memcpy(&g_fn.is_loaded, &p[5], sizeof p[5]);
}

static int can_enumerate(void) {
  return g_fn.get_module && g_fn.count && g_fn.enumerate && g_fn.load && g_fn.is_loaded;
}

static const void *module_kernel(int i) {
  switch (i) {
  case 0:
    return sc_cuda_reduce_module_kernel();
  case 1:
    return sc_cuda_topk_module_kernel();
  case 2:
    return sc_cuda_sparse_module_kernel();
  case 3:
    return sc_cuda_ipcar_module_kernel();
  case 4:
    return sc_cuda_sym_module_kernel();
  default:
    return sc_cuda_mstopk_module_kernel();
  }
}
#define SC_CUDA_MODULES 6

/* The functions of module i into fs (at most SC_CUDA_MODULE_FUNCS_MAX). */
static sc_result_t module_functions(int i, CUfunction *fs, unsigned *n) {
  cudaFunction_t f = NULL;
  cudaError_t e = cudaGetFuncBySymbol(&f, module_kernel(i));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return SC_ERR(SC_ERR_SYSTEM, "cudaGetFuncBySymbol (module %d of the library's kernels): %s", i,
                  cudaGetErrorString(e));
  }
  CUmodule m = NULL;
  CUresult r = g_fn.get_module(&m, (CUfunction)f);
  if (r == CUDA_SUCCESS) r = g_fn.count(n, m);
  if (r == CUDA_SUCCESS && *n > SC_CUDA_MODULE_FUNCS_MAX)
    return SC_ERR(SC_ERR_INTERNAL, "module %d of the library's kernels has %u functions (over %d)",
                  i, *n, SC_CUDA_MODULE_FUNCS_MAX);
  if (r == CUDA_SUCCESS) r = g_fn.enumerate(fs, *n, m);
  if (r != CUDA_SUCCESS)
    return SC_ERR(SC_ERR_SYSTEM, "enumerating module %d of the library's kernels: CUresult %d", i,
                  (int)r);
  return SC_SUCCESS;
}

/* load: cuFuncLoad each function; else count those not loaded. */
static sc_result_t each_function(int load, unsigned *nfunc, unsigned *unloaded) {
  static CUfunction fs[SC_CUDA_MODULE_FUNCS_MAX]; /* under g_lock */
  static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
  *nfunc = *unloaded = 0;
  pthread_mutex_lock(&g_lock);
  sc_result_t res = SC_SUCCESS;
  for (int i = 0; i < SC_CUDA_MODULES && res == SC_SUCCESS; i++) {
    unsigned n = 0;
    res = module_functions(i, fs, &n);
    for (unsigned j = 0; j < n && res == SC_SUCCESS; j++) {
      CUfunctionLoadingState st = CU_FUNCTION_LOADING_STATE_UNLOADED;
      CUresult r = load ? g_fn.load(fs[j]) : g_fn.is_loaded(&st, fs[j]);
      if (r != CUDA_SUCCESS)
        res = SC_ERR(SC_ERR_SYSTEM, "%s function %u of module %d: CUresult %d",
                     load ? "cuFuncLoad" : "cuFuncIsLoaded", j, i, (int)r);
      if (!load && st != CU_FUNCTION_LOADING_STATE_LOADED) ++*unloaded;
    }
    *nfunc += n;
  }
  pthread_mutex_unlock(&g_lock);
  return res;
}

sc_result_t sc_cuda_preload_kernels(void) {
  pthread_once(&g_once, resolve);
  int dev = -1;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return SC_ERR(SC_ERR_SYSTEM, "loading the library's kernels: cudaGetDevice: %s",
                  cudaGetErrorString(e));
  }
  uint64_t bit = dev >= 0 && dev < 64 ? (uint64_t)1 << dev : 0;
  if (bit && (atomic_load(&g_loaded_on) & bit)) return SC_SUCCESS;
  CUmoduleLoadingMode mode = CU_MODULE_LAZY_LOADING;
  if (g_fn.mode && g_fn.mode(&mode) == CUDA_SUCCESS && mode == CU_MODULE_EAGER_LOADING) {
    atomic_fetch_or(&g_loaded_on, bit);
    return SC_SUCCESS;
  }
  if (!can_enumerate()) {
    /* One kernel per module: better than none, not enough. */
    for (int i = 0; i < SC_CUDA_MODULES; i++) {
      struct cudaFuncAttributes a;
      if (cudaFuncGetAttributes(&a, module_kernel(i)) != cudaSuccess) (void)cudaGetLastError();
    }
    if (!atomic_exchange(&g_old_driver_said, 1))
      SC_WARN(SC_SUBSYS_INIT,
              "this CUDA driver cannot list a module's kernels (before 12.4), so the library's "
              "kernels load lazily at first launch, which can deadlock a stream form "
              "(sc_*_on_stream); set CUDA_MODULE_LOADING=EAGER (docs/CUDA.md)");
    atomic_fetch_or(&g_loaded_on, bit);
    return SC_SUCCESS;
  }
  unsigned n = 0, left = 0;
  SC_CHECK(each_function(1, &n, &left));
  atomic_fetch_or(&g_loaded_on, bit);
  SC_INFO(SC_SUBSYS_INIT, "CUDA loads kernels lazily: the library's %u kernels loaded on device %d",
          n, dev);
  return SC_SUCCESS;
}

sc_result_t sc_cuda_kernels_unloaded(unsigned *nfunc, unsigned *unloaded) {
  pthread_once(&g_once, resolve);
  *nfunc = *unloaded = 0;
  if (!can_enumerate())
    return SC_ERR(SC_ERR_UNSUPPORTED, "the CUDA driver cannot list a module's kernels");
  return each_function(0, nfunc, unloaded);
}
