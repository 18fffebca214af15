/* SPDX-License-Identifier: BSD-3-Clause */
/* The stand-in device runtime's parts (test/devfake/devfake.c: memory,
 * pointers, IPC and the table; devfake_stream.c: streams and events). Not
 * part of the library: a test module loaded by kernels/devrt.c when
 * SC_DEVRT_STANDIN names it (docs/CUDA.md, "The device stand-in"). */
#ifndef SC_TEST_DEVFAKE_H
#define SC_TEST_DEVFAKE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/devrt.h"

/* The library's sc_error_set, handed over by kernels/devrt.c after loading
 * (the module does not link the library, whose symbols a test binary does
 * not export): errors then carry a detail like the library's own. */
typedef sc_result_t (*sc_devrt_error_fn_t)(sc_result_t code, const char *file, int line,
                                           const char *fmt, ...);
void sc_devrt_standin_errors(sc_devrt_error_fn_t fn);

sc_result_t df_fail(sc_result_t code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define DF_ERR(code, ...) df_fail((code), __FILE__, __LINE__, __VA_ARGS__)

/* Settings read once from the environment. */
typedef struct df_settings {
  int devices;    /* SC_DEVFAKE_DEVICES, default 1 */
  long delay_us;  /* SC_DEVFAKE_DELAY_US: sleep before each stream op, default 0 */
  int poison;     /* SC_DEVFAKE_POISON: fill new device memory with 0xff, default 1 */
  long drain_ms;  /* SC_DEVFAKE_DRAIN_MS: bound of the implicit synchronizations */
  int alloc_sync; /* SC_DEVFAKE_ALLOC_SYNC: allocations wait for every stream too, default 1 */
  int mps;        /* SC_DEVFAKE_MPS: mps_enabled's answer, default 1 */
} df_settings_t;
const df_settings_t *df_settings(void);

/* Where the bytes of [p, p + bytes) are: device memory -> its shadow (the
 * range must lie inside one allocation), pinned memory and other host
 * memory -> p itself. *kind: DF_HOST, DF_PINNED or DF_DEVICE. */
enum { DF_HOST = 0, DF_PINNED = 1, DF_DEVICE = 2 };
sc_result_t df_translate(const void *p, size_t bytes, void **out, int *kind, const char *what);

/* ---- streams and events (devfake_stream.c) ---- */
sc_result_t df_stream_create(void **stream);
sc_result_t df_stream_destroy(void *stream);
sc_result_t df_memcpy_async(void *dst, const void *src, size_t bytes, void *stream);
sc_result_t df_memset_async(void *dst, int value, size_t bytes, void *stream);
sc_result_t df_event_create(void **event);
sc_result_t df_event_destroy(void *event);
sc_result_t df_event_record(void *event, void *stream);
sc_result_t df_event_query(void *event, int *done);
sc_result_t df_stream_wait_event(void *stream, void *event);
sc_result_t df_stream_wait_value(void *stream, volatile uint32_t *flag, uint32_t value);
sc_result_t df_launch_host(void *stream, sc_dev_host_fn_t fn, const void *args, size_t args_len);
/* Waits (at most the drain bound) until every op enqueued on any stream
 * so far has run, as cudaFree and cudaFreeHost synchronize the device. */
sc_result_t df_sync_all(const char *what);
/* After fork: the parent's worker threads do not exist in the child. */
void df_streams_forked(void);
/* At unload: drain and join every stream's worker. */
void df_streams_shutdown(void);

#endif
