/* SPDX-License-Identifier: BSD-3-Clause */
/* Device buffers for the perf programs, through the library's device
 * runtime table. One stream and one event serve every copy: the programs
 * copy between operations, never during one, so nothing needs more. */
#include "perf/perf_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kernels/devrt.h"

/* A copy of the largest buffers (a few GiB) over PCIe takes well under a
 * second; the stand-in copies with memcpy on its stream thread. A minute
 * means the runtime is stuck, not slow. */
#define PERF_COPY_TIMEOUT_MS 60000

static const char *mem_binary = "sc perf";
static const sc_devrt_t *mem_rt;
static void *mem_stream, *mem_event;

int perf_mem_parse(const char *s, perf_mem_t *mem) {
  if (!strcmp(s, "host"))
    *mem = PERF_MEM_HOST;
  else if (!strcmp(s, "device"))
    *mem = PERF_MEM_DEVICE;
  else
    return -1;
  return 0;
}

const char *perf_mem_name(perf_mem_t mem) {
  return mem == PERF_MEM_DEVICE ? "device" : "host";
}

int perf_mem_device_ready(const char *binary) {
  mem_binary = binary;
  const sc_devrt_t *rt = sc_devrt();
  if (!rt || rt->device_count() <= 0) {
#ifdef SC_HAVE_CUDA
    const char *built = "yes";
#else
    const char *built = "no";
#endif
    fprintf(stderr, "%s: --mem device: no CUDA device (built with CUDA: %s)\n", binary, built);
    return 2;
  }
  mem_rt = rt;
  return 0;
}

const char *perf_mem_runtime_name(void) {
  return mem_rt ? mem_rt->name : "none";
}

static void mem_fail(sc_result_t r, const char *what) {
  const char *detail = sc_last_error();
  fprintf(stderr, "%s: --mem device: %s failed: %s\n", mem_binary, what,
          detail && *detail ? detail : sc_strerror(r));
  fflush(NULL);
  exit(3);
}

static void mem_check(sc_result_t r, const char *what) {
  if (r != SC_SUCCESS) mem_fail(r, what);
}

static const sc_devrt_t *rt_or_die(void) {
  if (!mem_rt) {
    fprintf(stderr, "%s: device memory asked for before perf_mem_device_ready\n", mem_binary);
    exit(3);
  }
  return mem_rt;
}

int perf_mem_pick_device(int local_rank) {
  const sc_devrt_t *rt = rt_or_die();
  int n = rt->device_count();
  int d = n > 0 && local_rank >= 0 ? local_rank % n : 0;
  mem_check(rt->set_device(d), "set_device");
  return d;
}

static void ensure_stream(const sc_devrt_t *rt) {
  if (mem_stream) return;
  mem_check(rt->stream_create(&mem_stream), "stream_create");
  mem_check(rt->event_create(&mem_event), "event_create");
}

void *perf_dev_alloc(size_t bytes) {
  const sc_devrt_t *rt = rt_or_die();
  void *p = NULL;
  if (bytes == 0) bytes = 1;
  mem_check(rt->malloc_device(&p, bytes), "malloc_device");
  /* Zeroed like the host buffers, so that nothing reads garbage. */
  ensure_stream(rt);
  mem_check(rt->memset_async(p, 0, bytes, mem_stream), "memset_async");
  mem_check(rt->event_record(mem_event, mem_stream), "event_record");
  mem_check(sc_dev_event_wait(rt, mem_event, PERF_COPY_TIMEOUT_MS, "perf memset"), "memset wait");
  return p;
}

void perf_dev_free(void *p) {
  if (p) mem_check(rt_or_die()->free_device(p), "free_device");
}

static void copy(void *dst, const void *src, size_t bytes, const char *what) {
  const sc_devrt_t *rt = rt_or_die();
  if (bytes == 0) return;
  ensure_stream(rt);
  mem_check(rt->memcpy_async(dst, src, bytes, mem_stream), what);
  mem_check(rt->event_record(mem_event, mem_stream), "event_record");
  mem_check(sc_dev_event_wait(rt, mem_event, PERF_COPY_TIMEOUT_MS, what), what);
}

void perf_dev_upload(void *dev_dst, const void *host_src, size_t bytes) {
  copy(dev_dst, host_src, bytes, "copy to the device");
}

void perf_dev_download(void *host_dst, const void *dev_src, size_t bytes) {
  copy(host_dst, dev_src, bytes, "copy from the device");
}

void perf_mem_finish(void) {
  if (!mem_rt || !mem_stream) return;
  mem_rt->event_destroy(mem_event);
  mem_rt->stream_destroy(mem_stream);
  mem_stream = mem_event = NULL;
}
