/* SPDX-License-Identifier: BSD-3-Clause */
/* Where a buffer lives (host or a CUDA device), and the checks at the API
 * boundary that keep device pointers out of the host data path until the
 * device path exists (docs/CUDA.md). The verdicts are pure functions of what
 * was found, so that tests reach every branch without a GPU. */
#ifndef SC_CORE_DEVICE_H
#define SC_CORE_DEVICE_H

#include "sparsecoll.h"

typedef enum sc_mem_kind { SC_MEM_HOST = 0, SC_MEM_DEVICE = 1 } sc_mem_kind_t;

typedef struct sc_mem_type {
  sc_mem_kind_t kind;
  int device; /* the CUDA device of device memory; -1 for host memory */
} sc_mem_type_t;

/* Visible devices of the device runtime (kernels/devrt.h: CUDA, or the test
 * stand-in when SC_DEVRT_STANDIN names it); 0 without a runtime (no CUDA,
 * no driver or no device). */
int sc_device_count(void);

/* Host for NULL, for every pointer when no device is visible (nothing is
 * asked then), and for memory the host can read (pinned, registered,
 * managed); device memory otherwise. */
sc_mem_type_t sc_mem_type_of(const void *ptr);

/* The device the calling thread works on (cudaGetDevice); -1 without one.
 * Until communicators carry a device, this is "the communicator's device". */
int sc_current_device(void);

/* The verdict on the n buffers of one call (NULL entries are ignored):
 * mixed host and device memory, or memory of a device other than
 * comm_device, is SC_ERR_INVALID_ARG naming the buffers; device buffers are
 * SC_ERR_UNSUPPORTED unless device_path is set; else SC_SUCCESS. */
sc_result_t sc_buffers_verdict(const char *fn, int n, const sc_mem_type_t *types,
                               const char *const *names, int comm_device, int device_path);

/* The verdict on a stream form's buffers: SC_ERR_UNSUPPORTED without a
 * device runtime (built == 0: neither CUDA nor the stand-in) or without a
 * device (ndevices == 0), SC_ERR_INVALID_ARG for a host buffer, then
 * sc_buffers_verdict's checks (device path taken); else SC_SUCCESS. */
sc_result_t sc_stream_verdict(const char *fn, int built, int ndevices, int n,
                              const sc_mem_type_t *types, const char *const *names,
                              int comm_device);

/* The memory a call's data path takes, which decides the verdict on its
 * buffers. */
typedef enum sc_buf_path {
  SC_PATH_HOST,  /* host code only: device buffers are SC_ERR_UNSUPPORTED */
  SC_PATH_ANY,   /* host or device memory, one kind for the whole call */
  SC_PATH_STREAM /* a stream form: device memory only (sc_stream_verdict) */
} sc_buf_path_t;

/* The one classification of a call's buffers, for every entry that takes
 * them: the memory kind of the n (<= SC_CHECK_BUFFERS_MAX) buffers named by
 * names (an entry with a NULL pointer or a NULL name is not looked at).
 * SC_MEM_HOST when every buffer is host memory, or, off the stream path, when
 * no device is visible (nothing is asked then); SC_MEM_DEVICE when every
 * buffer looked at is memory of the communicator's device (the current one)
 * and the path takes it. Otherwise sc_buffers_verdict's errors, or on the
 * stream path sc_stream_verdict's (no device runtime, no device, a host
 * buffer). */
#define SC_CHECK_BUFFERS_MAX 4
sc_result_t sc_buffers_classify(const char *fn, sc_buf_path_t path, int n, const void *const *ptrs,
                                const char *const *names, sc_mem_kind_t *kind);

/* The device of the first of the n buffers that is device memory; -1 when
 * none is (NULL entries are host memory). */
int sc_buffers_device(int n, const void *const *ptrs);

/* sc_buffers_classify on a call whose data path takes host or device
 * memory (SC_PATH_ANY). */
sc_result_t sc_buffers_kind(const char *fn, int n, const void *const *ptrs,
                            const char *const *names, sc_mem_kind_t *kind);

#endif
