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

/* sc_buffers_verdict on the n (at most SC_CHECK_BUFFERS_MAX) buffers of a
 * call, named by names; NULL pointers are not looked at. With no device
 * visible it returns at once, asking nothing. Every API entry that hands a
 * buffer to host code calls this (or sc_check_buffers) first. */
#define SC_CHECK_BUFFERS_MAX 4
sc_result_t sc_check_buffer_list(const char *fn, int n, const void *const *ptrs,
                                 const char *const *names);

/* The memory kind of the n (<= SC_CHECK_BUFFERS_MAX) buffers of a call
 * whose data path takes device memory: SC_MEM_HOST when no device runtime
 * is in use (kernels/devrt.h) or every buffer is host memory; SC_MEM_DEVICE
 * when every non-NULL buffer is memory of the communicator's device; else
 * sc_buffers_verdict's errors. NULL pointers are not looked at. */
sc_result_t sc_buffers_kind(const char *fn, int n, const void *const *ptrs,
                            const char *const *names, sc_mem_kind_t *kind);

/* sc_check_buffer_list on a collective's send and receive buffers. */
sc_result_t sc_check_buffers(const char *fn, const void *sendbuf, const void *recvbuf);

#endif
