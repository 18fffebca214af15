/* SPDX-License-Identifier: BSD-3-Clause */
/* --mem host|device for the perf programs: where the buffers handed to the
 * library live. Device memory comes from the library's device runtime
 * (kernels/devrt.h: the CUDA runtime, or the stand-in named by
 * SC_DEVRT_STANDIN in tests), so the programs measure exactly the path a
 * caller with device buffers takes, and the tests run it without a GPU.
 *
 * The programs keep making and checking their data on the host: inputs are
 * written to host memory and copied to the device before an operation, and
 * results are copied back before a check. These copies are outside the
 * timed loops. Every failure here ends the process with a message (exit 3;
 * exit 2 for "no device"), as the perf programs do for library failures. */
#ifndef SC_PERF_PERF_MEM_H
#define SC_PERF_PERF_MEM_H

#include <stddef.h>

typedef enum perf_mem { PERF_MEM_HOST = 0, PERF_MEM_DEVICE = 1 } perf_mem_t;

/* "host" or "device"; -1 for anything else. */
int perf_mem_parse(const char *s, perf_mem_t *mem);
const char *perf_mem_name(perf_mem_t mem);

/* 0 when device memory can be used; else says on stderr
 * "BINARY: --mem device: no CUDA device (built with CUDA: yes|no)" and
 * returns 2, the usage-error status. Asks nothing of any communicator, so
 * every rank of a run reaches the same answer on its own. */
int perf_mem_device_ready(const char *binary);
/* The runtime's name ("cuda" or the stand-in's) once ready; else "none". */
const char *perf_mem_runtime_name(void);
/* Picks the device of a rank: local_rank modulo the visible devices.
 * Returns the device chosen. */
int perf_mem_pick_device(int local_rank);

/* Device memory, zeroed (bytes may be 0: one byte is allocated). */
void *perf_dev_alloc(size_t bytes);
void perf_dev_free(void *p);
/* Copies that have finished when they return (a bounded wait). */
void perf_dev_upload(void *dev_dst, const void *host_src, size_t bytes);
void perf_dev_download(void *host_dst, const void *dev_src, size_t bytes);
/* Releases the stream and event the copies use (at exit). */
void perf_mem_finish(void);

#endif
