/* SPDX-License-Identifier: BSD-3-Clause */
/* The device runtime table (kernels/devrt.h) over the CUDA runtime: thin
 * wrappers, one CUDA call each, errors as SC_ERR_SYSTEM naming the call and
 * cudaGetErrorString. Three driver calls the runtime API lacks (a stream wait
 * on a host flag, an allocation's range, a dma-buf of a range for GPUDirect
 * RDMA) come from cudaGetDriverEntryPoint-
 * ByVersion, so the library still links only the static runtime and loads
 * where no driver is installed.
 *
 * Host functions: cudaLaunchHostFunc passes one pointer, so the copied
 * arguments live in a fixed pool of slots (no allocation per call); a slot
 * is released when its function has run. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/devrt_cuda.h"
#include "lib/base/clock.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

static sc_result_t cuda_fail(const char *what, cudaError_t e) {
  (void)cudaGetLastError(); /* clear the per-thread error of a non-sticky failure */
  return SC_ERR(SC_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e));
}

#define CU_TRY(what, call)                                                                         \
  do {                                                                                             \
    cudaError_t cu_try_e_ = (call);                                                                \
    if (cu_try_e_ != cudaSuccess) return cuda_fail((what), cu_try_e_);                             \
  } while (0)

/* ---- driver entry points ---- */

typedef CUresult (*wait_value_fn_t)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*addr_range_fn_t)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*range_handle_fn_t)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
                                      unsigned long long);

static wait_value_fn_t g_wait_value;
static addr_range_fn_t g_addr_range;
static range_handle_fn_t g_range_handle; /* NULL before CUDA 11.7 */
static atomic_int g_wait_value_broken;   /* the device refused stream memory ops once */

void *sc_cuda_driver_entry(const char *name, unsigned version) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult st;
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &st) != cudaSuccess ||
      st != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return fn;
}

/* ---- devices and pointers ---- */

static int g_ndev;

static int c_device_count(void) {
  return g_ndev;
}

static int c_current_device(void) {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return d;
}

static sc_result_t c_set_device(int device) {
  CU_TRY("cudaSetDevice", cudaSetDevice(device));
  return SC_SUCCESS;
}

static int c_pointer_device(const void *p, int *device) {
  struct cudaPointerAttributes a;
  if (!p) return 0;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* an unknown pointer is host memory */
    return 0;
  }
  if (a.type != cudaMemoryTypeDevice) return 0; /* managed memory is host-readable */
  if (device) *device = a.device;
  return 1;
}

/* Driver calls need a current context, and a thread that has made no
 * runtime call that binds one (the progress thread before its first copy)
 * has none: CUDA_ERROR_INVALID_CONTEXT. cudaSetDevice makes the primary
 * context of p's device current, as the runtime does for its own calls. */
static int bind_context_of(const void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess || a.type != cudaMemoryTypeDevice ||
      cudaSetDevice(a.device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return 1;
}

static sc_result_t c_mem_range(const void *p, void **base, size_t *size) {
  if (!g_addr_range)
    return SC_ERR(SC_ERR_SYSTEM, "mem_range: the driver has no cuMemGetAddressRange");
  CUdeviceptr b = 0;
  CUresult r = g_addr_range(&b, size, (CUdeviceptr)(uintptr_t)p);
  if (r == CUDA_ERROR_INVALID_CONTEXT && bind_context_of(p))
    r = g_addr_range(&b, size, (CUdeviceptr)(uintptr_t)p);
  if (r != CUDA_SUCCESS)
    return SC_ERR(SC_ERR_SYSTEM, "cuMemGetAddressRange(%p): CUresult %d", p, (int)r);
  *base = (void *)(uintptr_t)b;
  return SC_SUCCESS;
}

/* ---- RDMA and affinity ---- */

static sc_result_t c_dmabuf_fd(const void *p, size_t len, int *fd, uint64_t *offset) {
  *fd = -1;
  if (!g_range_handle)
    return SC_ERR(SC_ERR_UNSUPPORTED, "dmabuf_fd: the driver has no cuMemGetHandleForAddressRange");
  int h = -1;
  CUresult r =
      g_range_handle(&h, (CUdeviceptr)(uintptr_t)p, len, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r == CUDA_ERROR_INVALID_CONTEXT && bind_context_of(p))
    r = g_range_handle(&h, (CUdeviceptr)(uintptr_t)p, len, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r != CUDA_SUCCESS || h < 0)
    return SC_ERR(SC_ERR_UNSUPPORTED,
                  "cuMemGetHandleForAddressRange(%p, %zu, DMA_BUF_FD): CUresult %d", p, len,
                  (int)r);
  *fd = h;
  *offset = 0; /* the dma-buf starts at p */
  return SC_SUCCESS;
}

static sc_result_t c_pci_bus_id(int device, char *buf, size_t len) {
  char id[32];
  CU_TRY("cudaDeviceGetPCIBusId", cudaDeviceGetPCIBusId(id, (int)sizeof id, device));
  /* CUDA writes upper case and sometimes an 8-digit domain; sysfs wants 0000:3b:00.0 */
  unsigned dom, bus, dev, fn;
  if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
    return SC_ERR(SC_ERR_SYSTEM, "cudaDeviceGetPCIBusId(%d): unexpected '%s'", device, id);
  snprintf(buf, len, "%04x:%02x:%02x.%x", dom & 0xffffu, bus, dev, fn);
  return SC_SUCCESS;
}

/* ---- memory ---- */

static sc_result_t c_malloc_device(void **p, size_t bytes) {
  *p = NULL;
  CU_TRY("cudaMalloc", cudaMalloc(p, bytes));
  return SC_SUCCESS;
}

static sc_result_t c_free_device(void *p) {
  CU_TRY("cudaFree", cudaFree(p));
  return SC_SUCCESS;
}

static sc_result_t c_malloc_pinned(void **p, size_t bytes) {
  *p = NULL;
  CU_TRY("cudaMallocHost", cudaMallocHost(p, bytes));
  return SC_SUCCESS;
}

static sc_result_t c_free_pinned(void *p) {
  CU_TRY("cudaFreeHost", cudaFreeHost(p));
  return SC_SUCCESS;
}

/* ---- streams and events ---- */

static sc_result_t c_stream_create(void **stream) {
  cudaStream_t s = NULL;
  CU_TRY("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  *stream = s;
  return SC_SUCCESS;
}

static sc_result_t c_stream_destroy(void *stream) {
  CU_TRY("cudaStreamDestroy", cudaStreamDestroy((cudaStream_t)stream));
  return SC_SUCCESS;
}

static sc_result_t c_memcpy_async(void *dst, const void *src, size_t bytes, void *stream) {
  CU_TRY("cudaMemcpyAsync",
         cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream));
  return SC_SUCCESS;
}

static sc_result_t c_memset_async(void *dst, int value, size_t bytes, void *stream) {
  CU_TRY("cudaMemsetAsync", cudaMemsetAsync(dst, value, bytes, (cudaStream_t)stream));
  return SC_SUCCESS;
}

static sc_result_t c_event_create(void **event) {
  cudaEvent_t e = NULL;
  CU_TRY("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  *event = e;
  return SC_SUCCESS;
}

static sc_result_t c_event_destroy(void *event) {
  CU_TRY("cudaEventDestroy", cudaEventDestroy((cudaEvent_t)event));
  return SC_SUCCESS;
}

static sc_result_t c_event_record(void *event, void *stream) {
  CU_TRY("cudaEventRecord", cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
  return SC_SUCCESS;
}

static sc_result_t c_event_query(void *event, int *done) {
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  *done = e == cudaSuccess;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return SC_SUCCESS;
  }
  if (e != cudaSuccess) return cuda_fail("cudaEventQuery", e);
  return SC_SUCCESS;
}

static sc_result_t c_stream_wait_event(void *stream, void *event) {
  CU_TRY("cudaStreamWaitEvent", cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
  return SC_SUCCESS;
}

/* ---- host functions ---- */

/* Slots in flight at once; a call finding none free fails (no unbounded
 * allocation): SC_ERR_NOMEM names the limit. */
#define SLOTS 1024

typedef struct host_slot {
  atomic_int busy;
  sc_dev_host_fn_t fn;
  _Alignas(16) unsigned char args[SC_DEV_HOST_ARGS_MAX];
} host_slot_t;

static host_slot_t g_slots[SLOTS];
static atomic_uint g_slot_hint;

static void CUDART_CB trampoline(void *p) {
  host_slot_t *s = p;
  s->fn(s->args);
  atomic_store_explicit(&s->busy, 0, memory_order_release);
}

static sc_result_t c_launch_host(void *stream, sc_dev_host_fn_t fn, const void *args,
                                 size_t args_len) {
  if (!fn || args_len > SC_DEV_HOST_ARGS_MAX || (args_len && !args))
    return SC_ERR(SC_ERR_INVALID_ARG, "launch_host: %zu bytes of args (at most %d)", args_len,
                  SC_DEV_HOST_ARGS_MAX);
  unsigned start = atomic_fetch_add(&g_slot_hint, 1);
  for (unsigned i = 0; i < SLOTS; i++) {
    host_slot_t *s = &g_slots[(start + i) % SLOTS];
    int idle = 0;
    if (!atomic_compare_exchange_strong(&s->busy, &idle, 1)) continue;
    s->fn = fn;
    if (args_len) memcpy(s->args, args, args_len);
    cudaError_t e = cudaLaunchHostFunc((cudaStream_t)stream, trampoline, s);
    if (e != cudaSuccess) {
      atomic_store(&s->busy, 0);
      return cuda_fail("cudaLaunchHostFunc", e);
    }
    return SC_SUCCESS;
  }
  return SC_ERR(SC_ERR_NOMEM, "launch_host: %d host functions already in flight", SLOTS);
}

/* The fallback of stream_wait_value where the device refuses stream memory
 * ops: a host function polls the flag, bounded by SC_TIMEOUT_MS. It holds
 * CUDA's host-function thread meanwhile (host functions of all streams wait). */
typedef struct poll_args {
  volatile uint32_t *flag;
  uint32_t value;
  long timeout_ms;
} poll_args_t;

static void poll_flag(void *p) {
  const poll_args_t *a = p;
  int64_t deadline = sc_now_ms() + a->timeout_ms;
  while ((int32_t)(*a->flag - a->value) < 0) {
    if (sc_now_ms() >= deadline) {
      SC_WARN(SC_SUBSYS_COLL,
              "stream_wait_value: flag not raised to %u within %ld ms; the "
              "stream goes on",
              a->value, a->timeout_ms);
      return;
    }
    struct timespec ts = {0, 5000};
    nanosleep(&ts, NULL);
  }
}

static sc_result_t c_stream_wait_value(void *stream, volatile uint32_t *flag, uint32_t value) {
  if (g_wait_value && !atomic_load(&g_wait_value_broken)) {
    void *d = NULL;
    CU_TRY("cudaHostGetDevicePointer", cudaHostGetDevicePointer(&d, (void *)flag, 0));
    CUresult r =
        g_wait_value((CUstream)stream, (CUdeviceptr)(uintptr_t)d, value, CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) return SC_SUCCESS;
    if (r != CUDA_ERROR_NOT_SUPPORTED)
      return SC_ERR(SC_ERR_SYSTEM, "cuStreamWaitValue32: CUresult %d", (int)r);
    atomic_store(&g_wait_value_broken, 1);
    SC_WARN(SC_SUBSYS_INIT, "cuStreamWaitValue32 is not supported on this device: stream waits "
                            "on flags poll in a host function instead (docs/CUDA.md)");
  }
  long timeout = 300000;
  if (sc_config_long("SC_TIMEOUT_MS", 1, 24L * 3600 * 1000, &timeout) != SC_SUCCESS)
    timeout = 300000;
  poll_args_t a = {flag, value, timeout};
  return c_launch_host(stream, poll_flag, &a, sizeof a);
}

/* ---- MPS ---- */

static int c_mps_enabled(int device) {
  int v = 0;
  /* An older driver does not know the attribute: taken as no MPS. */
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return v != 0;
}

/* ---- IPC ---- */

_Static_assert(sizeof(cudaIpcMemHandle_t) <= SC_DEV_IPC_HANDLE_BYTES, "handle fits");

static sc_result_t c_ipc_get(void *p, sc_dev_ipc_handle_t *h) {
  cudaIpcMemHandle_t c;
  CU_TRY("cudaIpcGetMemHandle", cudaIpcGetMemHandle(&c, p));
  memset(h, 0, sizeof *h);
  memcpy(h->bytes, &c, sizeof c);
  return SC_SUCCESS;
}

static sc_result_t c_ipc_open(const sc_dev_ipc_handle_t *h, void **base) {
  cudaIpcMemHandle_t c;
  memcpy(&c, h->bytes, sizeof c);
  *base = NULL;
  CU_TRY("cudaIpcOpenMemHandle", cudaIpcOpenMemHandle(base, c, cudaIpcMemLazyEnablePeerAccess));
  return SC_SUCCESS;
}

static sc_result_t c_ipc_close(void *base) {
  CU_TRY("cudaIpcCloseMemHandle", cudaIpcCloseMemHandle(base));
  return SC_SUCCESS;
}

static const sc_devrt_t g_cuda = {
    .name = "cuda",
    .device_count = c_device_count,
    .current_device = c_current_device,
    .set_device = c_set_device,
    .pointer_device = c_pointer_device,
    .mem_range = c_mem_range,
    .malloc_device = c_malloc_device,
    .free_device = c_free_device,
    .malloc_pinned = c_malloc_pinned,
    .free_pinned = c_free_pinned,
    .stream_create = c_stream_create,
    .stream_destroy = c_stream_destroy,
    .memcpy_async = c_memcpy_async,
    .memset_async = c_memset_async,
    .event_create = c_event_create,
    .event_destroy = c_event_destroy,
    .event_record = c_event_record,
    .event_query = c_event_query,
    .stream_wait_event = c_stream_wait_event,
    .stream_wait_value = c_stream_wait_value,
    .launch_host = c_launch_host,
    .ipc_get = c_ipc_get,
    .ipc_open = c_ipc_open,
    .ipc_close = c_ipc_close,
    .dmabuf_fd = c_dmabuf_fd,
    .pci_bus_id = c_pci_bus_id,
    .host_view = NULL,
    .preload_kernels = sc_cuda_preload_kernels,
    .mps_enabled = c_mps_enabled,
};

static const sc_devrt_t *g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void probe(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    (void)cudaGetLastError(); /* no driver or no GPU */
    return;
  }
  g_ndev = n;
  void *w = sc_cuda_driver_entry("cuStreamWaitValue32", 12000);
  void *r = sc_cuda_driver_entry("cuMemGetAddressRange", 12000);
  void *h = sc_cuda_driver_entry("cuMemGetHandleForAddressRange", 12000);
  /* POSIX: an object pointer from a symbol lookup converts to a function. */
  memcpy(&g_wait_value, &w, sizeof w);
  memcpy(&g_addr_range, &r, sizeof r);
  memcpy(&g_range_handle, &h, sizeof h);
  if (!g_wait_value)
    SC_INFO(SC_SUBSYS_INIT, "the driver has no cuStreamWaitValue32: stream waits on flags poll "
                            "in a host function");
  g_table = &g_cuda;
}

const sc_devrt_t *sc_devrt_cuda(void) {
  pthread_once(&g_once, probe);
  return g_table;
}
