/* SPDX-License-Identifier: BSD-3-Clause */
/* The device runtime on the stand-in (kernels/devrt.h, test/devfake/):
 * memory round trips, host access to device memory faulting, stream order
 * against a sequential model of the same ops, events, stream waits on a
 * flag, host functions in order, IPC between processes, and the memory-kind
 * verdicts of lib/core/device.c. Every op runs with a delay on the stream's
 * thread, so a result read too early shows. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "lib/core/device.h"
#include "sparsecoll.h"
#include "test/unit/devrt_standin.h"

static const sc_devrt_t *rt;
/* 0: built as test_devrt_cuda, on the CUDA runtime (stand-in-only checks
 * are left out). */
static int standin = 1;

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill_random(void *p, size_t n) {
  unsigned char *c = p;
  for (size_t i = 0; i < n; i++) c[i] = (unsigned char)rng_next();
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Copies device memory to the host through a stream and waits. */
static void to_host(void *dst, const void *src, size_t n, void *stream) {
  void *ev;
  assert_int_equal(rt->event_create(&ev), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(dst, src, n, stream), SC_SUCCESS);
  assert_int_equal(rt->event_record(ev, stream), SC_SUCCESS);
  assert_int_equal(sc_dev_event_wait(rt, ev, 10000, "to_host"), SC_SUCCESS);
  assert_int_equal(rt->event_destroy(ev), SC_SUCCESS);
}

static void test_runtime(void **state) {
  (void)state;
  assert_non_null(rt);
  assert_int_equal(sc_cuda_available(), 1);
  assert_int_equal(sc_device_count(), rt->device_count());
  assert_int_equal(sc_current_device(), rt->current_device());
  if (!standin) {
    assert_string_equal(rt->name, "cuda");
    assert_true(rt->device_count() >= 1);
    assert_null(rt->host_view);
    assert_int_not_equal(rt->set_device(rt->device_count()), SC_SUCCESS);
    return;
  }
  assert_string_equal(rt->name, "devfake");
  assert_int_equal(rt->device_count(), 2);
  assert_int_equal(rt->current_device(), 0);
  assert_null(rt->host_view(&state)); /* stack memory: not the stand-in's */
  assert_int_equal(rt->set_device(2), SC_ERR_INVALID_ARG);
  char detail[256];
  sc_error_get_detail(detail, sizeof detail);
  assert_non_null(strstr(detail, "devfake"));
}

static void test_memory_round_trip(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 7, 4096, 4097, 100003};
  void *s;
  assert_int_equal(rt->stream_create(&s), SC_SUCCESS);
  for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
    size_t n = sizes[z];
    unsigned char *src = malloc(n), *back = malloc(n), *fresh = malloc(n);
    fill_random(src, n);
    void *d1, *d2;
    assert_int_equal(rt->malloc_device(&d1, n), SC_SUCCESS);
    assert_int_equal(rt->malloc_device(&d2, n), SC_SUCCESS);
    int dev = -1;
    assert_int_equal(rt->pointer_device(d1, &dev), 1);
    assert_int_equal(dev, 0);
    assert_int_equal(rt->pointer_device((char *)d1 + n - 1, &dev), 1);
    assert_int_equal(rt->pointer_device(src, &dev), 0);
    void *base;
    size_t size;
    assert_int_equal(rt->mem_range((char *)d1 + n / 2, &base, &size), SC_SUCCESS);
    assert_ptr_equal(base, d1);
    assert_true(standin ? size == n : size >= n);
    assert_int_not_equal(rt->mem_range(src, &base, &size), SC_SUCCESS);
    if (standin) {
      /* Unwritten device memory is poisoned (all ones), not zero. */
      to_host(fresh, d1, n, s);
      for (size_t i = 0; i < n; i++) assert_int_equal(fresh[i], 0xff);
    }
    /* host -> device -> device -> host */
    assert_int_equal(rt->memcpy_async(d1, src, n, s), SC_SUCCESS);
    assert_int_equal(rt->memcpy_async(d2, d1, n, s), SC_SUCCESS);
    to_host(back, d2, n, s);
    assert_memory_equal(back, src, n);
    /* memset of a middle part */
    size_t off = n / 3, len = n - n / 3 - n / 4;
    memset(src + off, 0x5a, len);
    assert_int_equal(rt->memset_async((char *)d2 + off, 0x5a, len, s), SC_SUCCESS);
    to_host(back, d2, n, s);
    assert_memory_equal(back, src, n);
    if (standin) {
      /* A copy past the end of an allocation is refused before it runs. */
      assert_int_equal(rt->memcpy_async((char *)d1 + 1, src, n, s), SC_ERR_INVALID_ARG);
      assert_int_equal(rt->memcpy_async(back, (char *)d1 + n - 1, 2, s), SC_ERR_INVALID_ARG);
    }
    assert_int_equal(rt->free_device(d1), SC_SUCCESS);
    assert_int_equal(rt->free_device(d2), SC_SUCCESS);
    assert_int_equal(rt->pointer_device(d1, &dev), 0);
    free(src);
    free(back);
    free(fresh);
  }
  void *zero = (void *)1;
  assert_int_equal(rt->malloc_device(&zero, 0), SC_SUCCESS);
  assert_null(zero);
  assert_int_equal(rt->free_device(NULL), SC_SUCCESS);
  int local;
  assert_int_not_equal(rt->free_device(&local), SC_SUCCESS);
  /* Pinned memory is host memory the device reaches: host_view is itself. */
  void *pin;
  assert_int_equal(rt->malloc_pinned(&pin, 100), SC_SUCCESS);
  assert_int_equal(rt->pointer_device(pin, NULL), 0);
  if (standin) assert_ptr_equal(rt->host_view((char *)pin + 10), (char *)pin + 10);
  assert_int_equal(rt->memset_async(pin, 7, 100, s), SC_SUCCESS);
  /* The device cannot write pageable memory. */
  if (standin) assert_int_equal(rt->memset_async(&local, 0, sizeof local, s), SC_ERR_INVALID_ARG);
  void *ev;
  assert_int_equal(rt->event_create(&ev), SC_SUCCESS);
  assert_int_equal(rt->event_record(ev, s), SC_SUCCESS);
  assert_int_equal(sc_dev_event_wait(rt, ev, 10000, "memset"), SC_SUCCESS);
  for (int i = 0; i < 100; i++) assert_int_equal(((unsigned char *)pin)[i], 7);
  assert_int_not_equal(rt->free_pinned(&local), SC_SUCCESS);
  assert_int_equal(rt->free_pinned(pin), SC_SUCCESS);
  assert_int_equal(rt->event_destroy(ev), SC_SUCCESS);
  assert_int_equal(rt->stream_destroy(s), SC_SUCCESS);
}

/* The child touches device memory from the host: it must die by SIGSEGV. */
static void expect_segv(volatile char *p, int write) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL); /* cmocka's handler would catch it */
    if (write)
      p[0] = 1;
    else
      (void)p[0];
    _exit(0);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGSEGV);
}

static void test_host_access_faults(void **state) {
  (void)state;
  if (!standin) skip(); /* the stand-in's behaviour, or fork/two devices */
  void *d;
  assert_int_equal(rt->malloc_device(&d, 64), SC_SUCCESS);
  expect_segv(d, 0);
  expect_segv((char *)d + 63, 1);
  /* The host view holds the bytes the device pointer names. */
  void *s;
  assert_int_equal(rt->stream_create(&s), SC_SUCCESS);
  assert_int_equal(rt->memset_async(d, 0x33, 64, s), SC_SUCCESS);
  unsigned char back[64];
  to_host(back, d, 64, s);
  assert_int_equal(((unsigned char *)rt->host_view(d))[17], 0x33);
  assert_int_equal(rt->stream_destroy(s), SC_SUCCESS);
  assert_int_equal(rt->free_device(d), SC_SUCCESS);
}

/* Many asynchronous ops on two streams joined by events, against the same
 * ops applied in order to host arrays. */
static void test_stream_order(void **state) {
  (void)state;
  enum { N = 4096, OPS = 300 };
  unsigned char *model = calloc(2 * N, 1), *back = malloc(2 * N);
  unsigned char *srcs = malloc((size_t)OPS * N); /* one source per copy: copies read later */
  void *d, *sa, *sb, *ev;
  assert_int_equal(rt->malloc_device(&d, 2 * N), SC_SUCCESS);
  assert_int_equal(rt->stream_create(&sa), SC_SUCCESS);
  assert_int_equal(rt->stream_create(&sb), SC_SUCCESS);
  assert_int_equal(rt->event_create(&ev), SC_SUCCESS);
  assert_int_equal(rt->memset_async(d, 0, 2 * N, sa), SC_SUCCESS);
  void *cur = sa;
  for (int i = 0; i < OPS; i++) {
    size_t off = rng_next() % N, len = 1 + rng_next() % (N / 2);
    unsigned kind = (unsigned)(rng_next() % 4);
    char *dp = (char *)d;
    if (kind == 0) {
      unsigned char *src = srcs + (size_t)i * N;
      fill_random(src, len);
      memcpy(model + off, src, len);
      assert_int_equal(rt->memcpy_async(dp + off, src, len, cur), SC_SUCCESS);
    } else if (kind == 1) {
      int v = (int)(rng_next() & 0xff);
      memset(model + off, v, len);
      assert_int_equal(rt->memset_async(dp + off, v, len, cur), SC_SUCCESS);
    } else if (kind == 2) {
      size_t to = rng_next() % N;
      if (to + len <= off || off + len <= to) { /* CUDA leaves overlapping copies undefined */
        memcpy(model + to, model + off, len);
        assert_int_equal(rt->memcpy_async(dp + to, dp + off, len, cur), SC_SUCCESS);
      }
    } else {
      /* Hand over to the other stream: it waits for everything so far. */
      void *next = cur == sa ? sb : sa;
      assert_int_equal(rt->event_record(ev, cur), SC_SUCCESS);
      assert_int_equal(rt->stream_wait_event(next, ev), SC_SUCCESS);
      cur = next;
    }
  }
  to_host(back, d, 2 * N, cur);
  assert_memory_equal(back, model, 2 * N);
  assert_int_equal(rt->event_destroy(ev), SC_SUCCESS);
  assert_int_equal(rt->stream_destroy(sa), SC_SUCCESS);
  assert_int_equal(rt->stream_destroy(sb), SC_SUCCESS);
  assert_int_equal(rt->free_device(d), SC_SUCCESS);
  free(model);
  free(back);
  free(srcs);
}

/* The legacy NULL stream works too (one process-wide stream). */
static void test_null_stream(void **state) {
  (void)state;
  void *d;
  uint32_t in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = (uint32_t)rng_next();
  assert_int_equal(rt->malloc_device(&d, sizeof in), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(d, in, sizeof in, NULL), SC_SUCCESS);
  to_host(out, d, sizeof out, NULL);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(rt->free_device(d), SC_SUCCESS);
}

typedef struct setter {
  volatile uint32_t *flag;
  uint32_t value;
  long after_ms;
} setter_t;

static void *set_later(void *p) {
  setter_t *s = p;
  sleep_ms(s->after_ms);
  __atomic_store_n(s->flag, s->value, __ATOMIC_RELEASE);
  return NULL;
}

static void test_events_and_wait_value(void **state) {
  (void)state;
  void *s, *s2, *ev, *ev2;
  volatile uint32_t *flag;
  uint32_t *out;
  assert_int_equal(rt->stream_create(&s), SC_SUCCESS);
  assert_int_equal(rt->stream_create(&s2), SC_SUCCESS);
  assert_int_equal(rt->event_create(&ev), SC_SUCCESS);
  assert_int_equal(rt->event_create(&ev2), SC_SUCCESS);
  assert_int_equal(rt->malloc_pinned((void **)&flag, 64), SC_SUCCESS);
  assert_int_equal(rt->malloc_pinned((void **)&out, 64), SC_SUCCESS);
  /* The held streams copy from device memory to pinned memory: a copy from
   * pageable memory would make CUDA wait for the stream in the call itself,
   * and the flag is raised only after it returns. */
  static const uint32_t vals[2] = {1, 2};
  uint32_t *dv;
  assert_int_equal(rt->malloc_device((void **)&dv, sizeof vals), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(dv, vals, sizeof vals, s), SC_SUCCESS);
  assert_int_equal(rt->event_record(ev2, s), SC_SUCCESS);
  assert_int_equal(sc_dev_event_wait(rt, ev2, 10000, "upload"), SC_SUCCESS);
  /* Never recorded: done, as in CUDA; waiting on it is a no-op. */
  int done = 0;
  assert_int_equal(rt->event_query(ev, &done), SC_SUCCESS);
  assert_int_equal(done, 1);
  assert_int_equal(rt->stream_wait_event(s2, ev), SC_SUCCESS);

  /* Wrap-around compare: 0xfffffff0 is "before" 0x10. */
  *flag = 0xfffffff0u;
  out[0] = 0;
  assert_int_equal(rt->stream_wait_value(s, flag, 0x10), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(out, dv, sizeof *dv, s), SC_SUCCESS);
  assert_int_equal(rt->event_record(ev, s), SC_SUCCESS);
  /* s2 waits for ev: it too is held by the flag. */
  assert_int_equal(rt->stream_wait_event(s2, ev), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(out + 1, dv + 1, sizeof *dv, s2), SC_SUCCESS);
  assert_int_equal(rt->event_record(ev2, s2), SC_SUCCESS);
  /* Bounded wait while the flag is low. */
  assert_int_equal(sc_dev_event_wait(rt, ev, 50, "held"), SC_ERR_TIMEOUT);
  /* A value still below: the stream stays held. */
  pthread_t t;
  setter_t low = {flag, 0x0fu, 0};
  assert_int_equal(pthread_create(&t, NULL, set_later, &low), 0);
  pthread_join(t, NULL);
  sleep_ms(50);
  assert_int_equal(rt->event_query(ev, &done), SC_SUCCESS);
  assert_int_equal(done, 0);
  assert_int_equal(rt->event_query(ev2, &done), SC_SUCCESS);
  assert_int_equal(done, 0);
  assert_int_equal(__atomic_load_n(&out[0], __ATOMIC_ACQUIRE), 0);
  /* The release comes from another thread. */
  setter_t high = {flag, 0x10u, 30};
  assert_int_equal(pthread_create(&t, NULL, set_later, &high), 0);
  assert_int_equal(sc_dev_event_wait(rt, ev2, 10000, "released"), SC_SUCCESS);
  pthread_join(t, NULL);
  assert_int_equal(out[0], 1);
  assert_int_equal(out[1], 2);
  assert_int_equal(rt->event_query(ev, &done), SC_SUCCESS);
  assert_int_equal(done, 1);
  /* A flag that is not pinned memory is refused. */
  uint32_t plain = 0;
  if (standin) assert_int_equal(rt->stream_wait_value(s, &plain, 1), SC_ERR_INVALID_ARG);
  /* Re-recording: the query follows the latest record. */
  __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
  assert_int_equal(rt->stream_wait_value(s, flag, 1), SC_SUCCESS);
  assert_int_equal(rt->event_record(ev, s), SC_SUCCESS);
  assert_int_equal(rt->event_query(ev, &done), SC_SUCCESS);
  assert_int_equal(done, 0);
  /* Destroying an event with a record pending is allowed (CUDA too). */
  assert_int_equal(rt->event_destroy(ev), SC_SUCCESS);
  __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
  assert_int_equal(rt->event_destroy(ev2), SC_SUCCESS);
  assert_int_equal(rt->stream_destroy(s), SC_SUCCESS);
  assert_int_equal(rt->stream_destroy(s2), SC_SUCCESS);
  assert_int_equal(rt->free_pinned((void *)flag), SC_SUCCESS);
  assert_int_equal(rt->free_pinned(out), SC_SUCCESS);
  assert_int_equal(rt->free_device(dv), SC_SUCCESS);
}

/* Host functions run in stream order, between the copies around them, on a
 * copy of their arguments. */
typedef struct order_log {
  int seen[64];
  uint32_t word[64];
  int n;
} order_log_t;

typedef struct order_args {
  order_log_t *log;
  const uint32_t *word; /* pinned: the copy before this function wrote it */
  int index;
} order_args_t;

static void record_order(void *p) {
  const order_args_t *a = p;
  a->log->seen[a->log->n] = a->index;
  a->log->word[a->log->n] = *a->word;
  a->log->n++;
}

static void test_launch_host_order(void **state) {
  (void)state;
  void *s;
  uint32_t *word;
  order_log_t log = {.n = 0};
  uint32_t vals[64];
  assert_int_equal(rt->stream_create(&s), SC_SUCCESS);
  assert_int_equal(rt->malloc_pinned((void **)&word, sizeof *word), SC_SUCCESS);
  for (int i = 0; i < 64; i++) {
    vals[i] = (uint32_t)rng_next();
    order_args_t a = {&log, word, i};
    assert_int_equal(rt->memcpy_async(word, &vals[i], sizeof *word, s), SC_SUCCESS);
    assert_int_equal(rt->launch_host(s, record_order, &a, sizeof a), SC_SUCCESS);
  }
  char big[SC_DEV_HOST_ARGS_MAX + 1] = {0};
  assert_int_equal(rt->launch_host(s, record_order, big, sizeof big), SC_ERR_INVALID_ARG);
  void *ev;
  assert_int_equal(rt->event_create(&ev), SC_SUCCESS);
  assert_int_equal(rt->event_record(ev, s), SC_SUCCESS);
  assert_int_equal(sc_dev_event_wait(rt, ev, 10000, "host functions"), SC_SUCCESS);
  assert_int_equal(log.n, 64);
  for (int i = 0; i < 64; i++) {
    assert_int_equal(log.seen[i], i);
    assert_int_equal(log.word[i], vals[i]);
  }
  assert_int_equal(rt->event_destroy(ev), SC_SUCCESS);
  assert_int_equal(rt->stream_destroy(s), SC_SUCCESS);
  assert_int_equal(rt->free_pinned(word), SC_SUCCESS);
}

/* A child opens the parent's allocation: it reads the parent's bytes and
 * its writes reach the parent. */
static int child_ipc(const sc_dev_ipc_handle_t *h, const uint8_t *expect, size_t n, size_t off) {
  void *base, *s, *ev;
  uint8_t *back = malloc(n), *mine = malloc(n);
  if (rt->ipc_open(h, &base) != SC_SUCCESS) return 10;
  if (rt->stream_create(&s) != SC_SUCCESS || rt->event_create(&ev) != SC_SUCCESS) return 11;
  if (rt->pointer_device(base, NULL) != 1) return 12;
  rt->memcpy_async(back, base, n, s);
  for (size_t i = 0; i < n; i++) mine[i] = (uint8_t)(expect[i] ^ 0xa5);
  rt->memcpy_async((char *)base + off, mine, n - off, s);
  rt->event_record(ev, s);
  if (sc_dev_event_wait(rt, ev, 10000, "child") != SC_SUCCESS) return 13;
  if (memcmp(back, expect, n) != 0) return 14;
  /* As CUDA: a second open of an allocation this process has open fails. */
  void *again;
  if (rt->ipc_open(h, &again) != SC_ERR_SYSTEM) return 17;
  if (rt->ipc_close(base) != SC_SUCCESS) return 15;
  if (rt->ipc_close(base) != SC_ERR_INVALID_ARG) return 16;
  /* Counted opens (several communicators of one process) share one mapping
   * until the last close. */
  void *b1, *b2;
  int64_t owner = (int64_t)getppid();
  if (sc_dev_ipc_open(rt, h, owner, 0x10000, n, &b1) != SC_SUCCESS ||
      sc_dev_ipc_open(rt, h, owner, 0x10000, n, &b2) != SC_SUCCESS)
    return 18;
  if (b1 != b2) return 19;
  if (sc_dev_ipc_close(rt, h, b1) != SC_SUCCESS || rt->pointer_device(b1, NULL) != 1) return 20;
  if (sc_dev_ipc_close(rt, h, b2) != SC_SUCCESS || rt->pointer_device(b2, NULL) != 0) return 21;
  if (sc_dev_ipc_close(rt, h, b2) != SC_ERR_INVALID_ARG) return 22;
  rt->event_destroy(ev);
  rt->stream_destroy(s);
  return 0;
}

static int run_child(const sc_dev_ipc_handle_t *h, const uint8_t *expect, size_t n, size_t off) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(child_ipc(h, expect, n, off));
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  return WEXITSTATUS(st);
}

static void test_ipc(void **state) {
  (void)state;
  if (!standin) skip(); /* the stand-in's behaviour, or fork/two devices */
  enum { N = 20000, OFF = 1000 };
  uint8_t *src = malloc(N), *back = malloc(N), *expect = malloc(N);
  fill_random(src, N);
  void *d, *s;
  assert_int_equal(rt->malloc_device(&d, N), SC_SUCCESS);
  assert_int_equal(rt->stream_create(&s), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(d, src, N, s), SC_SUCCESS);
  to_host(back, d, N, s); /* also: the bytes are there before the child looks */
  sc_dev_ipc_handle_t h;
  /* A pointer inside the allocation gives the allocation's handle. */
  assert_int_equal(rt->ipc_get((char *)d + 77, &h), SC_SUCCESS);
  void *base;
  assert_int_equal(rt->ipc_open(&h, &base), SC_ERR_SYSTEM); /* own handle, as CUDA */
  assert_int_equal(run_child(&h, src, N, OFF), 0);
  to_host(back, d, N, s);
  memcpy(expect, src, OFF);
  for (size_t i = OFF; i < N; i++) expect[i] = (uint8_t)(src[i - OFF] ^ 0xa5);
  assert_memory_equal(back, expect, N);
  /* Host memory has no handle; a freed allocation's handle does not open. */
  assert_int_equal(rt->ipc_get(src, &h), SC_ERR_INVALID_ARG);
  assert_int_equal(rt->ipc_get(d, &h), SC_SUCCESS);
  assert_int_equal(rt->free_device(d), SC_SUCCESS);
  assert_int_equal(run_child(&h, src, N, OFF), 10);
  assert_int_equal(rt->stream_destroy(s), SC_SUCCESS);
  free(src);
  free(back);
  free(expect);
}

static void test_buffers_kind(void **state) {
  (void)state;
  if (!standin) skip(); /* the stand-in's behaviour, or fork/two devices */
  void *d0, *d0b, *d1, *pin;
  char host[16];
  assert_int_equal(rt->malloc_device(&d0, 64), SC_SUCCESS);
  assert_int_equal(rt->malloc_device(&d0b, 64), SC_SUCCESS);
  assert_int_equal(rt->set_device(1), SC_SUCCESS);
  assert_int_equal(rt->malloc_device(&d1, 64), SC_SUCCESS);
  assert_int_equal(rt->set_device(0), SC_SUCCESS);
  assert_int_equal(rt->malloc_pinned(&pin, 64), SC_SUCCESS);
  const char *names[3] = {"sendbuf", "recvbuf", "extra"};
  sc_mem_kind_t kind;

  sc_mem_type_t t = sc_mem_type_of(d1);
  assert_int_equal(t.kind, SC_MEM_DEVICE);
  assert_int_equal(t.device, 1);
  assert_int_equal(sc_mem_type_of(pin).kind, SC_MEM_HOST);
  assert_int_equal(sc_mem_type_of(NULL).kind, SC_MEM_HOST);

  const void *hh[2] = {host, pin};
  assert_int_equal(sc_buffers_kind("t", 2, hh, names, &kind), SC_SUCCESS);
  assert_int_equal(kind, SC_MEM_HOST);
  const void *dd[3] = {d0, (char *)d0b + 8, NULL};
  kind = SC_MEM_HOST;
  assert_int_equal(sc_buffers_kind("t", 3, dd, names, &kind), SC_SUCCESS);
  assert_int_equal(kind, SC_MEM_DEVICE);
  const void *mixed[2] = {d0, host};
  assert_int_equal(sc_buffers_kind("t", 2, mixed, names, &kind), SC_ERR_INVALID_ARG);
  const void *mixed_pin[2] = {pin, d0};
  assert_int_equal(sc_buffers_kind("t", 2, mixed_pin, names, &kind), SC_ERR_INVALID_ARG);
  /* Memory of another device than the calling thread's. */
  const void *other[2] = {d0, d1};
  assert_int_equal(sc_buffers_kind("t", 2, other, names, &kind), SC_ERR_INVALID_ARG);
  assert_int_equal(rt->set_device(1), SC_SUCCESS);
  const void *only1[1] = {d1};
  assert_int_equal(sc_buffers_kind("t", 1, only1, names, &kind), SC_SUCCESS);
  assert_int_equal(kind, SC_MEM_DEVICE);
  assert_int_equal(sc_buffers_kind("t", 1, dd, names, &kind), SC_ERR_INVALID_ARG);
  assert_int_equal(rt->set_device(0), SC_SUCCESS);
  /* Callers without a device path still refuse device memory clearly. */
  assert_int_equal(sc_buffers_classify("t", SC_PATH_HOST, 2, dd, names, &kind), SC_ERR_UNSUPPORTED);
  assert_int_equal(sc_buffers_classify("t", SC_PATH_HOST, 2, hh, names, &kind), SC_SUCCESS);
  const void *d0_host[2] = {d0, host};
  assert_int_equal(sc_buffers_classify("t", SC_PATH_HOST, 2, d0_host, names, &kind),
                   SC_ERR_INVALID_ARG);
  assert_int_equal(sc_buffers_kind("t", SC_CHECK_BUFFERS_MAX + 1, dd, names, &kind),
                   SC_ERR_INTERNAL);

  assert_int_equal(rt->free_device(d0), SC_SUCCESS);
  assert_int_equal(rt->free_device(d0b), SC_SUCCESS);
  assert_int_equal(rt->free_device(d1), SC_SUCCESS);
  assert_int_equal(rt->free_pinned(pin), SC_SUCCESS);
}

/* A stream destroyed while it waits on a flag nobody raises is stopped
 * after the drain bound, with an error, instead of hanging. */
static void test_destroy_bounded(void **state) {
  (void)state;
  if (!standin) skip(); /* the stand-in's behaviour, or fork/two devices */
  void *s;
  volatile uint32_t *flag;
  assert_int_equal(rt->malloc_pinned((void **)&flag, 4), SC_SUCCESS);
  *flag = 0;
  void *d, *d2 = NULL, *h2 = NULL;
  assert_int_equal(rt->malloc_device(&d, 8), SC_SUCCESS);
  assert_int_equal(rt->stream_create(&s), SC_SUCCESS);
  assert_int_equal(rt->stream_wait_value(s, flag, 1), SC_SUCCESS);
  /* Allocations wait for all streams too (CUDA's implicit synchronization),
   * bounded: they refuse and allocate nothing. */
  assert_int_equal(rt->malloc_device(&d2, 8), SC_ERR_TIMEOUT);
  assert_null(d2);
  assert_int_equal(rt->malloc_pinned(&h2, 8), SC_ERR_TIMEOUT);
  assert_null(h2);
  /* free_device waits for all streams, bounded: it refuses, frees nothing. */
  assert_int_equal(rt->free_device(d), SC_ERR_TIMEOUT);
  assert_int_equal(rt->pointer_device(d, NULL), 1);
  assert_int_equal(rt->stream_destroy(s), SC_ERR_TIMEOUT);
  assert_int_equal(rt->free_device(d), SC_SUCCESS);
  assert_int_equal(rt->free_pinned((void *)flag), SC_SUCCESS);
}

/* dma-buf export for GPUDirect RDMA. On the stand-in the fd is the
 * allocation's memfd: mapped at the returned offset it shows the device
 * bytes (both ways); ranges not page-aligned, past the allocation or in host
 * memory are refused. On CUDA: an fd or SC_ERR_UNSUPPORTED (no dma-buf). */
static void test_dmabuf(void **state) {
  (void)state;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t n = 3 * page + 100;
  void *d, *s;
  int fd = -1;
  uint64_t off = 0;
  if (!standin) {
    assert_int_equal(rt->malloc_device(&d, (size_t)2 << 20), SC_SUCCESS);
    sc_result_t r = rt->dmabuf_fd(d, (size_t)2 << 20, &fd, &off);
    print_message("dma-buf export of a 2 MiB cudaMalloc: %s\n",
                  r == SC_SUCCESS ? "yes" : sc_last_error());
    assert_true(r == SC_SUCCESS || r == SC_ERR_UNSUPPORTED);
    if (r == SC_SUCCESS) close(fd);
    assert_int_equal(rt->free_device(d), SC_SUCCESS);
    return;
  }
  uint8_t *src = malloc(n), *back = malloc(n);
  fill_random(src, n);
  assert_int_equal(rt->malloc_device(&d, n), SC_SUCCESS);
  assert_int_equal(rt->stream_create(&s), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(d, src, n, s), SC_SUCCESS);
  to_host(back, d, n, s);
  assert_int_equal(rt->dmabuf_fd((char *)d + page, 2 * page, &fd, &off), SC_SUCCESS);
  assert_true(fd >= 0);
  assert_int_equal(off, page);
  uint8_t *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
  assert_true(m != MAP_FAILED);
  assert_memory_equal(m, src + page, 2 * page);
  m[5] ^= 0x5a; /* what an importer writes, the device sees */
  to_host(back, d, n, s);
  src[page + 5] ^= 0x5a;
  assert_memory_equal(back, src, n);
  munmap(m, 2 * page);
  close(fd);
  /* refused: unaligned start or length, past the allocation's pages, host memory */
  assert_int_equal(rt->dmabuf_fd((char *)d + 1, page, &fd, &off), SC_ERR_INVALID_ARG);
  assert_int_equal(rt->dmabuf_fd(d, page + 1, &fd, &off), SC_ERR_INVALID_ARG);
  assert_int_equal(rt->dmabuf_fd(d, 5 * page, &fd, &off), SC_ERR_INVALID_ARG);
  void *h = NULL;
  assert_int_equal(posix_memalign(&h, page, page), 0);
  assert_int_equal(rt->dmabuf_fd(h, page, &fd, &off), SC_ERR_INVALID_ARG);
  assert_int_equal(fd, -1);
  free(h);
  assert_int_equal(rt->free_device(d), SC_SUCCESS);
  assert_int_equal(rt->stream_destroy(s), SC_SUCCESS);
  free(src);
  free(back);
}

int main(void) {
#ifdef DEVRT_TEST_CUDA
  standin = 0;
  rt = cuda_runtime_load();
#else
  setenv("SC_DEVFAKE_DEVICES", "2", 1);
  setenv("SC_DEVFAKE_DELAY_US", "20", 1);
  setenv("SC_DEVFAKE_DRAIN_MS", "1000", 1);
  rt = standin_load();
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runtime),
      cmocka_unit_test(test_memory_round_trip),
      cmocka_unit_test(test_host_access_faults),
      cmocka_unit_test(test_stream_order),
      cmocka_unit_test(test_null_stream),
      cmocka_unit_test(test_events_and_wait_value),
      cmocka_unit_test(test_launch_host_order),
      cmocka_unit_test(test_ipc),
      cmocka_unit_test(test_dmabuf),
      cmocka_unit_test(test_buffers_kind),
      cmocka_unit_test(test_destroy_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
