/* SPDX-License-Identifier: BSD-3-Clause */
/* The device runtime: everything the library asks of CUDA (memory, streams,
 * events, IPC, kernels) through one table, so that the device data path
 * (lib/core/, lib/sparse/, lib/fusion/) is written once and runs either on the CUDA
 * runtime (kernels/cuda/devrt_cuda.c, when built with CUDA and a device is
 * visible) or on a stand-in loaded for tests (SC_DEVRT_STANDIN=path of a
 * module exporting `sc_devrt_standin`; test/devfake/), which emulates
 * device memory that the host cannot touch, asynchronous streams, events,
 * stream waits on a flag and IPC between processes on a machine with no
 * GPU. The library never uses the stand-in unless that variable names it.
 *
 * Conventions: streams and events are opaque void *; NULL stream = the
 * legacy default stream. Every op returns sc_result_t (SC_ERR_SYSTEM naming
 * the runtime's error, detail set). Asynchronous ops enqueue on the stream
 * and return; nothing here blocks without a bound (waits are polled by the
 * caller through event_query with its own deadline). */
#ifndef SC_KERNELS_DEVRT_H
#define SC_KERNELS_DEVRT_H

#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "sparsecoll.h"

/* A handle another process of the same host opens to reach a device
 * allocation (cudaIpcMemHandle_t is 64 bytes). */
#define SC_DEV_IPC_HANDLE_BYTES 64
typedef struct sc_dev_ipc_handle {
  uint8_t bytes[SC_DEV_IPC_HANDLE_BYTES];
} sc_dev_ipc_handle_t;

/* A host function run in stream order; args are copied when enqueued. */
typedef void (*sc_dev_host_fn_t)(void *args);
#define SC_DEV_HOST_ARGS_MAX 128

typedef struct sc_devrt {
  const char *name; /* "cuda", or the stand-in's name */

  /* ---- devices and pointers ---- */
  int (*device_count)(void);
  int (*current_device)(void); /* -1 when none */
  sc_result_t (*set_device)(int device);
  /* 1 and *device set when p is device memory (not host-readable); 0 for
   * host memory (pageable, pinned, managed) and unknown pointers. */
  int (*pointer_device)(const void *p, int *device);
  /* The allocation holding device pointer p: its base and size. */
  sc_result_t (*mem_range)(const void *p, void **base, size_t *size);

  /* ---- memory ---- */
  sc_result_t (*malloc_device)(void **p, size_t bytes);
  sc_result_t (*free_device)(void *p);
  sc_result_t (*malloc_pinned)(void **p, size_t bytes); /* page-locked host memory */
  sc_result_t (*free_pinned)(void *p);

  /* ---- streams and events ---- */
  sc_result_t (*stream_create)(void **stream); /* non-blocking w.r.t. the default stream */
  sc_result_t (*stream_destroy)(void *stream);
  /* Any direction (unified addressing): host<->device, device<->device. */
  sc_result_t (*memcpy_async)(void *dst, const void *src, size_t bytes, void *stream);
  sc_result_t (*memset_async)(void *dst, int value, size_t bytes, void *stream);
  sc_result_t (*event_create)(void **event); /* timing disabled */
  sc_result_t (*event_destroy)(void *event);
  sc_result_t (*event_record)(void *event, void *stream);
  /* *done = 1 when everything before the record has run; never blocks. */
  sc_result_t (*event_query)(void *event, int *done);
  sc_result_t (*stream_wait_event)(void *stream, void *event);
  /* The stream waits (on the device, no host thread) until *flag >= value
   * (wrap-around compare: (int32_t)(*flag - value) >= 0). flag is pinned
   * host memory from malloc_pinned. */
  sc_result_t (*stream_wait_value)(void *stream, volatile uint32_t *flag, uint32_t value);
  /* fn(copy of args) runs on a runtime thread in stream order; it must not
   * call this table. args_len <= SC_DEV_HOST_ARGS_MAX. */
  sc_result_t (*launch_host)(void *stream, sc_dev_host_fn_t fn, const void *args, size_t args_len);

  /* ---- IPC between processes of one host ---- */
  /* The handle of the allocation that contains p (its base: mem_range). */
  sc_result_t (*ipc_get)(void *p, sc_dev_ipc_handle_t *h);
  /* Map a peer's allocation; *base is its base address in this process.
   * As CUDA, a second open of an allocation this process has open fails:
   * callers use sc_dev_ipc_open/sc_dev_ipc_close, which count references. */
  sc_result_t (*ipc_open)(const sc_dev_ipc_handle_t *h, void **base);
  sc_result_t (*ipc_close)(void *base);

  /* ---- RDMA to device memory and NIC affinity (NULL where unsupported) ---- */
  /* A dma-buf fd for the device memory [p, p + len), for ibv_reg_dmabuf_mr:
   * p and len page-aligned (sc_vb_dmabuf_range), inside one allocation;
   * *offset is p's offset within the dma-buf. The caller closes *fd. */
  sc_result_t (*dmabuf_fd)(const void *p, size_t len, int *fd, uint64_t *offset);
  /* The device's PCI address as sysfs names it ("0000:3b:00.0", lower case). */
  sc_result_t (*pci_bus_id)(int device, char *buf, size_t len);

  /* ---- the stand-in only (NULL for CUDA) ---- */
  /* test/python/device_direct.py mirrors this table's layout up to here
   * (ctypes): a field added above must be added there too. */
  /* The host address where the stand-in keeps device pointer p's bytes:
   * the library's emulated kernels (kernels/devrt.c) run there, inside
   * launch_host functions. */
  void *(*host_view)(const void *p);

  /* ---- CUDA only (NULL for the stand-in) ---- */
  /* Loads every kernel of the library on the current device now. Under
   * CUDA's lazy loading (the default since CUDA 12.2) a kernel's first launch
   * may wait for the whole context, and so for a stream that waits on one of
   * our flags: the progress thread would then never raise it. Called on the
   * caller's thread before a stream form's first wait (docs/CUDA.md). */
  sc_result_t (*preload_kernels)(void);

  /* ---- both (NULL: unknown, taken as no) ---- */
  /* 1 when contexts on the device are clients of an MPS server, so that
   * kernels of several processes on it run at once (CUDA's
   * cudaDevAttrMpsEnabled; the stand-in: SC_DEVFAKE_MPS, default 1). Ranks
   * that share a device take the kernel-driven all-reduce only then. */
  int (*mps_enabled)(int device);
} sc_devrt_t;

/* The runtime in use: the stand-in when SC_DEVRT_STANDIN names one (loaded
 * once; a module that fails to load is logged once at WARN and then NULL),
 * else CUDA when built with it and a device is visible, else NULL. */
const sc_devrt_t *sc_devrt(void);

/* A peer's allocation mapped once per process however many communicators
 * (splits, fusion, P3) and caches open it: the first open maps it through
 * rt->ipc_open, later opens of the same handle return the same base and
 * count a reference, and the last close unmaps it. owner (a process id) and
 * [obase, obase + osize) (the allocation in the owner's address space) let
 * an open retire the mapping of an allocation the owner freed, which CUDA
 * would otherwise refuse to map again (kernels/devrt_ipc.c). Thread-safe. */
sc_result_t sc_dev_ipc_open(const sc_devrt_t *rt, const sc_dev_ipc_handle_t *h, int64_t owner,
                            uint64_t obase, uint64_t osize, void **base);
sc_result_t sc_dev_ipc_close(const sc_devrt_t *rt, const sc_dev_ipc_handle_t *h, void *base);

/* A stream form's stream may wait on the library from before its wait is
 * enqueued (begin) until its flag is raised (end): in between no mapping is
 * unmapped in this process, since an unmap may wait for that stream. A last
 * close then leaves the mapping for the first moment without such waits. */
void sc_dev_stream_wait_begin(void);
void sc_dev_stream_wait_end(void);

/* ---- kernels on device memory, in stream order ----
 * With CUDA these are kernels/cuda/cuda_kernels.h's; with the stand-in the
 * CPU kernels (kernels/cpu/) run on its host views through launch_host, so
 * results are the same bit for bit. rt is sc_devrt()'s answer (non-NULL). */
sc_result_t sc_dev_reduce(const sc_devrt_t *rt, void *dst, const void *a, const void *b,
                          size_t count, sc_dtype_t dtype, sc_redop_t op, void *stream);
sc_result_t sc_dev_avg_finalize(const sc_devrt_t *rt, void *buf, size_t count, sc_dtype_t dtype,
                                int nranks, void *stream);
/* Top-k by magnitude of device x: indices (device, uint32, sorted by
 * index) and values (device, may be NULL); *nnz on the host. Waits for the
 * stream (the count comes back). method: SC_SELECT_EXACT,
 * SC_SELECT_GAUSSIAN or SC_SELECT_MSTOPK, with sc_topk's contracts.
 * workspace: device memory of sc_dev_topk_workspace_size bytes, pooled by
 * the caller. */
size_t sc_dev_topk_workspace_size(const sc_devrt_t *rt, size_t n, sc_dtype_t dtype);
sc_result_t sc_dev_topk(const sc_devrt_t *rt, const void *x, size_t n, sc_dtype_t dtype, size_t k,
                        sc_select_t method, uint32_t *indices, void *values, size_t *nnz,
                        void *workspace, size_t workspace_bytes, void *stream);
/* sc_dev_topk's MSTopK on CUDA (kernels/devrt_mstopk.c); 0 < k, 0 < n. */
sc_result_t sc_dev_topk_mstopk_cuda(const void *x, size_t n, sc_dtype_t dtype, size_t k,
                                    uint32_t *indices, void *values, size_t *nnz, void *ws,
                                    size_t wsb, void *stream);
sc_result_t sc_dev_sparse_gather(const sc_devrt_t *rt, void *values, const void *x,
                                 const uint32_t *indices, size_t nnz, sc_dtype_t dtype,
                                 void *stream);
sc_result_t sc_dev_sparse_scatter(const sc_devrt_t *rt, void *dst, size_t n,
                                  const uint32_t *indices, const void *values, size_t nnz,
                                  sc_dtype_t dtype, int zero_first, int divisor, void *stream);
sc_result_t sc_dev_ef_accumulate(const sc_devrt_t *rt, void *residual, const void *grad, size_t n,
                                 sc_dtype_t dtype, void *stream);
sc_result_t sc_dev_ef_clear(const sc_devrt_t *rt, void *residual, const uint32_t *indices,
                            size_t nnz, sc_dtype_t dtype, void *stream);
sc_result_t sc_dev_ef_restore(const sc_devrt_t *rt, void *residual, const uint32_t *indices,
                              const void *values, const uint8_t *survived, size_t nnz,
                              sc_dtype_t dtype, void *stream);

/* Symmetric d x d matrices of es-byte elements to their packed upper
 * triangle and back (kernels/sym_pack.h), device memory, in stream order. */
sc_result_t sc_dev_sym_pack(const sc_devrt_t *rt, void *packed, const void *full, size_t d,
                            size_t es, void *stream);
sc_result_t sc_dev_sym_unpack(const sc_devrt_t *rt, void *full, const void *packed, size_t d,
                              size_t es, void *stream);

/* The kernel-driven all-reduce's launch (kernels/ipc_allreduce_plan.h) on
 * the stream: a->region[] and a->out are device pointers of this process
 * (IPC mappings for the peers). CUDA runs kernels/cuda/ipc_allreduce.cu; the
 * stand-in runs the same protocol on its host views, one block. */
struct sc_ipcar_args;
sc_result_t sc_dev_ipc_allreduce(const sc_devrt_t *rt, const struct sc_ipcar_args *a, void *stream);
/* The launch geometry the current device gives the kernel: its SMs and the
 * kernel's resident blocks per SM (the stand-in: 0 and 0, one block). */
sc_result_t sc_dev_ipcar_geometry(const sc_devrt_t *rt, int *sms, int *blocks_per_sm);

/* Wait until event has run, polling event_query; SC_ERR_TIMEOUT after
 * timeout_ms (what names the wait in the message). */
sc_result_t sc_dev_event_wait(const sc_devrt_t *rt, void *event, int timeout_ms, const char *what);

#endif
