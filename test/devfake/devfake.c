/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for the CUDA runtime (the table of kernels/devrt.h) on machines
 * without a GPU, so that the device data path is tested everywhere. This
 * file: devices, memory, pointer queries, IPC and the exported table;
 * devfake_stream.c: streams and events.
 *
 * Device memory the host cannot touch: every allocation is a memfd segment
 * mapped twice. The device pointer handed out is an address in a PROT_NONE
 * reservation, so host code that dereferences it dies with SIGSEGV (a
 * library bug caught at its source); the bytes live in a second, read-write
 * mapping of the same segment (the "shadow"), where stream ops and the
 * library's emulated kernels (host_view) work.
 *
 * IPC without leftovers: a handle names (pid, fd, inode) of the creator's
 * memfd; the peer opens /proc/PID/fd/FD, which needs only the same user (no
 * ptrace attach, unlike pidfd_getfd under Yama), checks the inode (a reused
 * fd number cannot alias another segment) and maps it. A memfd has no name
 * in any file system, so a crashed process leaves nothing in /dev/shm; like
 * CUDA, a handle is valid only while its creator lives and has not freed
 * the allocation. Nothing is cached (the library caches opened handles). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test/devfake/devfake.h"

/* ---- errors and settings ---- */

static sc_devrt_error_fn_t g_err;

void sc_devrt_standin_errors(sc_devrt_error_fn_t fn) {
  g_err = fn;
}

sc_result_t df_fail(sc_result_t code, const char *file, int line, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (g_err) return g_err(code, file, line, "devfake: %s", buf);
  return code;
}

static long env_long(const char *name, long def, long min, long max) {
  const char *s = getenv(name);
  if (!s || !*s) return def;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < min || v > max) {
    fprintf(stderr, "devfake: %s=%s is not in [%ld, %ld]; using %ld\n", name, s, min, max, def);
    return def;
  }
  return v;
}

static df_settings_t g_set;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void forked_child(void);

static void read_settings(void) {
  g_set.devices = (int)env_long("SC_DEVFAKE_DEVICES", 1, 0, 64);
  g_set.delay_us = env_long("SC_DEVFAKE_DELAY_US", 0, 0, 1000000);
  g_set.poison = (int)env_long("SC_DEVFAKE_POISON", 1, 0, 1);
  g_set.drain_ms = env_long("SC_DEVFAKE_DRAIN_MS", 10000, 1, 3600000);
  g_set.alloc_sync = (int)env_long("SC_DEVFAKE_ALLOC_SYNC", 1, 0, 1);
  g_set.mps = (int)env_long("SC_DEVFAKE_MPS", 1, 0, 1);
  pthread_atfork(NULL, NULL, forked_child);
  /* Each device allocation holds a descriptor (its memfd, for IPC). */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

const df_settings_t *df_settings(void) {
  pthread_once(&g_once, read_settings);
  return &g_set;
}

/* ---- devices ---- */

static _Thread_local int t_device; /* CUDA's default: device 0 */

static int df_device_count(void) {
  return df_settings()->devices;
}

static int df_current_device(void) {
  return df_settings()->devices > 0 ? t_device : -1;
}

static sc_result_t df_set_device(int device) {
  if (device < 0 || device >= df_settings()->devices)
    return DF_ERR(SC_ERR_INVALID_ARG, "set_device(%d): %d devices visible", device,
                  df_settings()->devices);
  t_device = device;
  return SC_SUCCESS;
}

/* ---- the allocation tables ---- */

typedef struct df_alloc {
  char *dev;    /* the PROT_NONE reservation: the device address */
  char *shadow; /* the bytes */
  size_t size, map;
  int fd; /* the memfd of an own allocation; -1 for a peer's (IPC) */
  int device;
  uint64_t ino, stdev;
} df_alloc_t;

typedef struct df_pinned {
  char *p;
  size_t size;
} df_pinned_t;

static pthread_mutex_t g_mem = PTHREAD_MUTEX_INITIALIZER;
static df_alloc_t *g_allocs;
static size_t g_nallocs, g_alloc_cap;
static df_pinned_t *g_pinned;
static size_t g_npinned, g_pinned_cap;

static void forked_child(void) {
  /* Another thread may have held the lock at fork time. */
  pthread_mutex_init(&g_mem, NULL);
  df_streams_forked();
}

/* The entry whose reservation holds p, or -1 (g_mem held). The slack of the
 * reservation past the allocation's end counts as the allocation's, so that
 * a range running past the end is an error here rather than host memory. */
static long find_alloc(const void *p) {
  const char *c = p;
  for (size_t i = 0; i < g_nallocs; i++)
    if (c >= g_allocs[i].dev && c < g_allocs[i].dev + g_allocs[i].map) return (long)i;
  return -1;
}

static long find_pinned(const void *p) {
  const char *c = p;
  for (size_t i = 0; i < g_npinned; i++)
    if (c >= g_pinned[i].p && c < g_pinned[i].p + (g_pinned[i].size ? g_pinned[i].size : 1))
      return (long)i;
  return -1;
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return 0;
  size_t c = *cap ? 2 * *cap : 64;
  void *a = realloc(*arr, c * elem);
  if (!a) return -1;
  *arr = a;
  *cap = c;
  return 0;
}

sc_result_t df_translate(const void *p, size_t bytes, void **out, int *kind, const char *what) {
  pthread_mutex_lock(&g_mem);
  long i = find_alloc(p);
  if (i >= 0) {
    const df_alloc_t *a = &g_allocs[i];
    size_t off = (size_t)((const char *)p - a->dev);
    if (off > a->size || bytes > a->size - off) {
      size_t size = a->size;
      pthread_mutex_unlock(&g_mem);
      return DF_ERR(SC_ERR_INVALID_ARG,
                    "%s: %zu bytes at device pointer %p run past its allocation (%zu bytes left of "
                    "%zu)",
                    what, bytes, p, off > size ? 0 : size - off, size);
    }
    *out = a->shadow + off;
    *kind = DF_DEVICE;
  } else {
    *out = (void *)p;
    *kind = find_pinned(p) >= 0 ? DF_PINNED : DF_HOST;
  }
  pthread_mutex_unlock(&g_mem);
  return SC_SUCCESS;
}

static int df_pointer_device(const void *p, int *device) {
  pthread_mutex_lock(&g_mem);
  long i = find_alloc(p);
  if (i >= 0 && device) *device = g_allocs[i].device;
  pthread_mutex_unlock(&g_mem);
  return i >= 0;
}

static sc_result_t df_mem_range(const void *p, void **base, size_t *size) {
  pthread_mutex_lock(&g_mem);
  long i = find_alloc(p);
  if (i >= 0) {
    *base = g_allocs[i].dev;
    *size = g_allocs[i].size;
  }
  pthread_mutex_unlock(&g_mem);
  if (i < 0) return DF_ERR(SC_ERR_INVALID_ARG, "mem_range: %p is not device memory", p);
  return SC_SUCCESS;
}

static void *df_host_view(const void *p) {
  void *out = NULL;
  pthread_mutex_lock(&g_mem);
  long i = find_alloc(p);
  if (i >= 0)
    out = g_allocs[i].shadow + ((const char *)p - g_allocs[i].dev);
  else if (find_pinned(p) >= 0)
    out = (void *)p;
  pthread_mutex_unlock(&g_mem);
  return out;
}

/* ---- device memory ---- */

static sc_result_t map_segment(int fd, size_t size, df_alloc_t *a, const char *what) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  a->size = size;
  a->map = (size + page - 1) / page * page;
  a->shadow = mmap(NULL, a->map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (a->shadow == MAP_FAILED)
    return DF_ERR(SC_ERR_NOMEM, "%s: mapping %zu bytes: %s", what, size, strerror(errno));
  a->dev = mmap(NULL, a->map, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (a->dev == MAP_FAILED) {
    int e = errno;
    munmap(a->shadow, a->map);
    return DF_ERR(SC_ERR_NOMEM, "%s: reserving %zu bytes: %s", what, size, strerror(e));
  }
  return SC_SUCCESS;
}

static sc_result_t add_alloc(const df_alloc_t *a, const char *what) {
  pthread_mutex_lock(&g_mem);
  if (grow((void **)&g_allocs, &g_alloc_cap, g_nallocs, sizeof *g_allocs) != 0) {
    pthread_mutex_unlock(&g_mem);
    return DF_ERR(SC_ERR_NOMEM, "%s: allocation table", what);
  }
  g_allocs[g_nallocs++] = *a;
  pthread_mutex_unlock(&g_mem);
  return SC_SUCCESS;
}

static sc_result_t df_malloc_device(void **p, size_t bytes) {
  *p = NULL;
  if (df_settings()->devices == 0)
    return DF_ERR(SC_ERR_SYSTEM, "malloc_device: no device visible (SC_DEVFAKE_DEVICES=0)");
  if (bytes == 0) return SC_SUCCESS; /* cudaMalloc(0) gives NULL */
  /* A device allocation is one of CUDA's implicit synchronizations (the
   * programming guide's list): it may wait for work on every stream, so an
   * allocation made while a stream waits on a flag that only the caller's
   * later work raises never returns on a GPU. Here it is bounded. */
  if (df_settings()->alloc_sync) SC_CHECK(df_sync_all("malloc_device"));
  int fd = memfd_create("scdev", MFD_CLOEXEC);
  if (fd < 0)
    return DF_ERR(SC_ERR_NOMEM, "malloc_device: memfd_create: %s (one descriptor per allocation)",
                  strerror(errno));
  struct stat st;
  df_alloc_t a = {.fd = fd, .device = t_device};
  if (ftruncate(fd, (off_t)bytes) != 0 || fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return DF_ERR(SC_ERR_NOMEM, "malloc_device: %zu bytes: %s", bytes, strerror(e));
  }
  a.ino = (uint64_t)st.st_ino;
  a.stdev = (uint64_t)st.st_dev;
  sc_result_t r = map_segment(fd, bytes, &a, "malloc_device");
  if (r == SC_SUCCESS) {
    /* cudaMalloc does not clear: NaN bytes make reads of unwritten memory show. */
    if (df_settings()->poison) memset(a.shadow, 0xff, bytes);
    r = add_alloc(&a, "malloc_device");
    if (r != SC_SUCCESS) {
      munmap(a.shadow, a.map);
      munmap(a.dev, a.map);
    }
  }
  if (r != SC_SUCCESS) {
    close(fd);
    return r;
  }
  *p = a.dev;
  return SC_SUCCESS;
}

/* Removes the entry whose base is p and whose ownership matches ipc. */
static sc_result_t take_alloc(void *p, int ipc, df_alloc_t *out, const char *what) {
  pthread_mutex_lock(&g_mem);
  long i = find_alloc(p);
  int ok = i >= 0 && g_allocs[i].dev == (char *)p && (g_allocs[i].fd < 0) == ipc;
  if (ok) {
    *out = g_allocs[i];
    g_allocs[i] = g_allocs[--g_nallocs];
  }
  pthread_mutex_unlock(&g_mem);
  if (!ok)
    return DF_ERR(SC_ERR_INVALID_ARG, "%s(%p): not the base of %s", what, p,
                  ipc ? "an opened IPC allocation" : "a device allocation of this process");
  return SC_SUCCESS;
}

static sc_result_t df_free_device(void *p) {
  if (!p) return SC_SUCCESS;
  int dev;
  if (!df_pointer_device(p, &dev))
    return DF_ERR(SC_ERR_INVALID_ARG, "free_device(%p): not device memory", p);
  /* cudaFree waits for the device: ops in flight may still use the bytes. */
  SC_CHECK(df_sync_all("free_device"));
  df_alloc_t a;
  SC_CHECK(take_alloc(p, 0, &a, "free_device"));
  munmap(a.shadow, a.map);
  munmap(a.dev, a.map);
  close(a.fd);
  return SC_SUCCESS;
}

/* ---- pinned host memory ---- */

static sc_result_t df_malloc_pinned(void **p, size_t bytes) {
  *p = NULL;
  if (bytes == 0) return SC_SUCCESS;
  /* So is a page-locked host allocation (see df_malloc_device). */
  if (df_settings()->alloc_sync) SC_CHECK(df_sync_all("malloc_pinned"));
  void *m;
  if (posix_memalign(&m, 4096, bytes) != 0)
    return DF_ERR(SC_ERR_NOMEM, "malloc_pinned: %zu bytes", bytes);
  pthread_mutex_lock(&g_mem);
  if (grow((void **)&g_pinned, &g_pinned_cap, g_npinned, sizeof *g_pinned) != 0) {
    pthread_mutex_unlock(&g_mem);
    free(m);
    return DF_ERR(SC_ERR_NOMEM, "malloc_pinned: table");
  }
  g_pinned[g_npinned++] = (df_pinned_t){m, bytes};
  pthread_mutex_unlock(&g_mem);
  *p = m;
  return SC_SUCCESS;
}

static sc_result_t df_free_pinned(void *p) {
  if (!p) return SC_SUCCESS;
  SC_CHECK(df_sync_all("free_pinned"));
  pthread_mutex_lock(&g_mem);
  long i = find_pinned(p);
  int ok = i >= 0 && g_pinned[i].p == (char *)p;
  if (ok) g_pinned[i] = g_pinned[--g_npinned];
  pthread_mutex_unlock(&g_mem);
  if (!ok) return DF_ERR(SC_ERR_INVALID_ARG, "free_pinned(%p): not from malloc_pinned", p);
  free(p);
  return SC_SUCCESS;
}

/* ---- IPC ---- */

#define DF_IPC_MAGIC 0x53434446u /* "SCDF" */

typedef struct df_handle {
  uint32_t magic;
  int32_t pid, fd, device;
  uint64_t ino, stdev, size;
} df_handle_t;
_Static_assert(sizeof(df_handle_t) <= SC_DEV_IPC_HANDLE_BYTES, "handle fits");

static sc_result_t df_ipc_get(void *p, sc_dev_ipc_handle_t *h) {
  df_handle_t d = {.magic = DF_IPC_MAGIC, .pid = (int32_t)getpid()};
  pthread_mutex_lock(&g_mem);
  long i = find_alloc(p);
  int own = i >= 0 && g_allocs[i].fd >= 0;
  if (own) {
    d.fd = g_allocs[i].fd;
    d.device = g_allocs[i].device;
    d.ino = g_allocs[i].ino;
    d.stdev = g_allocs[i].stdev;
    d.size = g_allocs[i].size;
  }
  pthread_mutex_unlock(&g_mem);
  if (!own)
    return DF_ERR(SC_ERR_INVALID_ARG, "ipc_get(%p): not device memory allocated by this process",
                  p);
  memset(h, 0, sizeof *h);
  memcpy(h->bytes, &d, sizeof d);
  return SC_SUCCESS;
}

static sc_result_t df_ipc_open(const sc_dev_ipc_handle_t *h, void **base) {
  df_handle_t d;
  memcpy(&d, h->bytes, sizeof d);
  *base = NULL;
  if (d.magic != DF_IPC_MAGIC)
    return DF_ERR(SC_ERR_INVALID_ARG, "ipc_open: not a handle of the stand-in");
  if (d.pid == (int32_t)getpid())
    return DF_ERR(SC_ERR_SYSTEM, "ipc_open: the handle is of this process (CUDA refuses too)");
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)d.pid, (int)d.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return DF_ERR(SC_ERR_SYSTEM, "ipc_open: %s: %s (has process %d exited or freed it?)", path,
                  strerror(errno), (int)d.pid);
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != d.ino || (uint64_t)st.st_dev != d.stdev ||
      (uint64_t)st.st_size < d.size) {
    close(fd);
    return DF_ERR(SC_ERR_SYSTEM,
                  "ipc_open: %s is no longer the allocation of the handle (freed by process %d)",
                  path, (int)d.pid);
  }
  /* CUDA maps a peer's allocation once per process: a second open of it
   * fails with cudaErrorAlreadyMapped until the first is closed. */
  int mapped = 0;
  pthread_mutex_lock(&g_mem);
  for (size_t i = 0; i < g_nallocs && !mapped; i++)
    mapped = g_allocs[i].fd < 0 && g_allocs[i].ino == d.ino && g_allocs[i].stdev == d.stdev;
  pthread_mutex_unlock(&g_mem);
  if (mapped) {
    close(fd);
    return DF_ERR(SC_ERR_SYSTEM,
                  "ipc_open: resource already mapped (this process has the allocation open)");
  }
  df_alloc_t a = {.fd = -1, .device = t_device, .ino = d.ino, .stdev = d.stdev};
  sc_result_t r = map_segment(fd, (size_t)d.size, &a, "ipc_open");
  close(fd); /* the mappings keep the segment */
  if (r == SC_SUCCESS) r = add_alloc(&a, "ipc_open");
  if (r != SC_SUCCESS) return r;
  *base = a.dev;
  return SC_SUCCESS;
}

static sc_result_t df_ipc_close(void *base) {
  df_alloc_t a;
  SC_CHECK(df_sync_all("ipc_close"));
  SC_CHECK(take_alloc(base, 1, &a, "ipc_close"));
  munmap(a.shadow, a.map);
  munmap(a.dev, a.map);
  return SC_SUCCESS;
}

/* ---- dma-buf ---- */

/* The allocation's own memfd stands in for the dma-buf: a fresh descriptor of
 * it, and the range's offset in it, so that an importer (the stand-in
 * libibverbs of test/multi/verbs_fake_ibverbs.c) maps the very bytes. As
 * CUDA, the range must be page-aligned and inside one allocation. */
static sc_result_t df_dmabuf_fd(const void *p, size_t len, int *fd, uint64_t *offset) {
  *fd = -1;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if ((uintptr_t)p % page || len % page || !len)
    return DF_ERR(SC_ERR_INVALID_ARG, "dmabuf_fd(%p, %zu): not page-aligned", p, len);
  pthread_mutex_lock(&g_mem);
  long i = find_alloc(p);
  int own = i >= 0 && g_allocs[i].fd >= 0;
  size_t off = own ? (size_t)((const char *)p - g_allocs[i].dev) : 0;
  int ok = own && off + len <= g_allocs[i].map;
  int d = ok ? fcntl(g_allocs[i].fd, F_DUPFD_CLOEXEC, 0) : -1;
  pthread_mutex_unlock(&g_mem);
  if (!ok)
    return DF_ERR(SC_ERR_INVALID_ARG,
                  "dmabuf_fd(%p, %zu): not inside one device allocation of this process", p, len);
  if (d < 0) return DF_ERR(SC_ERR_SYSTEM, "dmabuf_fd: dup: %s", strerror(errno));
  *fd = d;
  *offset = off;
  return SC_SUCCESS;
}

/* Every stream has its own thread, so the work of processes sharing an
 * emulated device runs at once, as under MPS; SC_DEVFAKE_MPS=0 says it does
 * not, to test what the library does without MPS. */
static int df_mps_enabled(int device) {
  (void)device;
  return df_settings()->mps;
}

__attribute__((destructor)) static void df_unload(void) {
  df_streams_shutdown();
}

const sc_devrt_t sc_devrt_standin = {
    .name = "devfake",
    .device_count = df_device_count,
    .current_device = df_current_device,
    .set_device = df_set_device,
    .pointer_device = df_pointer_device,
    .mem_range = df_mem_range,
    .malloc_device = df_malloc_device,
    .free_device = df_free_device,
    .malloc_pinned = df_malloc_pinned,
    .free_pinned = df_free_pinned,
    .stream_create = df_stream_create,
    .stream_destroy = df_stream_destroy,
    .memcpy_async = df_memcpy_async,
    .memset_async = df_memset_async,
    .event_create = df_event_create,
    .event_destroy = df_event_destroy,
    .event_record = df_event_record,
    .event_query = df_event_query,
    .stream_wait_event = df_stream_wait_event,
    .stream_wait_value = df_stream_wait_value,
    .launch_host = df_launch_host,
    .ipc_get = df_ipc_get,
    .ipc_open = df_ipc_open,
    .ipc_close = df_ipc_close,
    .dmabuf_fd = df_dmabuf_fd,
    .pci_bus_id = NULL, /* no PCI device behind it */
    .host_view = df_host_view,
    .mps_enabled = df_mps_enabled,
};
