/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_kernel_perf: the element-wise reduction kernels (dst = a op b, and AVG's
 * sum then division) against a plain copy of the same bytes on the same
 * memory, for every dtype and op: on the device (--mem device, the CUDA
 * kernels, or the stand-in under SC_DEVRT_STANDIN) a device-to-device copy,
 * on the host (--mem host) the CPU kernels against memcpy. One process, no
 * communicator.
 *
 * Bandwidth counts the bytes each moves: a reduction reads two buffers and
 * writes one (3 x bytes; AVG's division reads and writes once more: 5 x),
 * a copy reads one and writes one (2 x). "of copy" is the reduction's
 * bandwidth over the copy's, the fraction of the memory system the kernel
 * reaches. After the timed runs every result is compared bit for bit with
 * the CPU kernels (kernels/cpu/reduce.h) on the same inputs: a difference
 * is reported and the exit status is 1. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kernels/cpu/reduce.h"
#include "kernels/devrt.h"
#include "lib/base/clock.h"
#include "lib/base/dtype.h"
#include "perf/perf_mem.h"
#include "sparsecoll.h"

#define N_DTYPES  10
#define N_OPS     5
#define WAIT_MS   60000
#define AVG_RANKS 2 /* AVG's divisor: the sum of two buffers, as a 2-rank all-reduce */

typedef struct args {
  size_t min_bytes, max_bytes;
  unsigned factor, iters, warmup;
  int dtype; /* -1: every dtype */
  int op;    /* -1: every op */
  perf_mem_t mem;
} args_t;

/* The measured buffers: a and b the inputs, dst the result; on the device
 * or the host. */
typedef struct bufs {
  void *a, *b, *dst;
  const sc_devrt_t *rt; /* NULL on the host */
  void *stream, *event;
} bufs_t;

static void usage(FILE *f) {
  fprintf(f, "usage: sc_kernel_perf [--mem host|device] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS]\n"
             "                      [-w WARMUP] [-d DTYPE|all] [-o OP|all]\n"
             "  sizes are bytes per buffer (K, M, G suffixes), MIN..MAX by FACTOR\n"
             "  (default 1M..256M by 4); ITERS timed runs (default 20) after WARMUP (3).\n"
             "  Prints per size, dtype and op the reduction's and the copy's bandwidth (bytes\n"
             "  read and written per second) and their ratio; checks every result against\n"
             "  the CPU kernels bit for bit.\n");
}

static int parse_bytes(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  unsigned long long m = 1;
  if (*end == 'K' || *end == 'k')
    m = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm')
    m = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g')
    m = 1ull << 30, end++;
  if (*end || v > SIZE_MAX / m) return -1;
  *out = (size_t)(v * m);
  return 0;
}

static int parse_uint(const char *s, unsigned lo, unsigned *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > 1000000) return -1;
  *out = (unsigned)v;
  return 0;
}

static int parse_args(int argc, char **argv, args_t *a) {
  *a = (args_t){1u << 20, 256u << 20, 4, 20, 3, -1, -1, PERF_MEM_HOST};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (!v) {
      fprintf(stderr, "sc_kernel_perf: %s needs a value\n", o);
      return -1;
    }
    i++;
    int bad = 0;
    if (!strcmp(o, "--mem"))
      bad = perf_mem_parse(v, &a->mem);
    else if (!strcmp(o, "-b"))
      bad = parse_bytes(v, &a->min_bytes);
    else if (!strcmp(o, "-e"))
      bad = parse_bytes(v, &a->max_bytes);
    else if (!strcmp(o, "-f"))
      bad = parse_uint(v, 2, &a->factor);
    else if (!strcmp(o, "-n"))
      bad = parse_uint(v, 1, &a->iters);
    else if (!strcmp(o, "-w"))
      bad = parse_uint(v, 0, &a->warmup);
    else if (!strcmp(o, "-d") || !strcmp(o, "-o")) {
      int want_dtype = o[1] == 'd', found = !strcmp(v, "all");
      int *slot = want_dtype ? &a->dtype : &a->op;
      *slot = -1;
      for (int t = 0; !found && t < (want_dtype ? N_DTYPES : N_OPS); t++)
        if (!strcmp(v, want_dtype ? sc_dtype_name((sc_dtype_t)t) : sc_redop_name((sc_redop_t)t)))
          *slot = t, found = 1;
      bad = !found;
    } else {
      fprintf(stderr, "sc_kernel_perf: unknown option %s\n", o);
      usage(stderr);
      return -1;
    }
    if (bad) {
      fprintf(stderr, "sc_kernel_perf: bad value for %s: %s\n", o, v);
      return -1;
    }
  }
  if (a->min_bytes == 0 || a->max_bytes < a->min_bytes) {
    fprintf(stderr, "sc_kernel_perf: need 0 < MIN <= MAX\n");
    return -1;
  }
  return 0;
}

/* Deterministic inputs that stay finite under every op: small integers
 * for the integer types, values in [-2, 2] for the float types. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void fill(void *buf, size_t count, sc_dtype_t dt) {
  for (size_t i = 0; i < count; i++) {
    uint64_t r = next_rand();
    double f = ((double)(r >> 11) / (double)(1ull << 53)) * 4.0 - 2.0;
    int64_t s = (int64_t)(r % 7) - 3;
    switch (dt) {
    case SC_INT8:
      ((int8_t *)buf)[i] = (int8_t)s;
      break;
    case SC_UINT8:
      ((uint8_t *)buf)[i] = (uint8_t)(r % 4);
      break;
    case SC_INT32:
      ((int32_t *)buf)[i] = (int32_t)s;
      break;
    case SC_UINT32:
      ((uint32_t *)buf)[i] = (uint32_t)(r % 4);
      break;
    case SC_INT64:
      ((int64_t *)buf)[i] = s;
      break;
    case SC_UINT64:
      ((uint64_t *)buf)[i] = r % 4;
      break;
    case SC_FLOAT16:
      ((uint16_t *)buf)[i] = sc_float_to_half((float)f);
      break;
    case SC_BFLOAT16:
      ((uint16_t *)buf)[i] = sc_float_to_bfloat16((float)f);
      break;
    case SC_FLOAT32:
      ((float *)buf)[i] = (float)f;
      break;
    case SC_FLOAT64:
      ((double *)buf)[i] = f;
      break;
    }
  }
}

static int fail(sc_result_t r, const char *what) {
  const char *d = sc_last_error();
  fprintf(stderr, "sc_kernel_perf: %s failed: %s\n", what, d && *d ? d : sc_strerror(r));
  return -1;
}

static int wait_done(const bufs_t *b) {
  if (!b->rt) return 0;
  sc_result_t r = b->rt->event_record(b->event, b->stream);
  if (r == SC_SUCCESS) r = sc_dev_event_wait(b->rt, b->event, WAIT_MS, "sc_kernel_perf");
  return r == SC_SUCCESS ? 0 : fail(r, "waiting for the device");
}

/* One run of the measured thing: op < 0 is the copy of `bytes`. */
static int run_once(const bufs_t *b, sc_dtype_t dt, int op, size_t count, size_t bytes) {
  sc_result_t r = SC_SUCCESS;
  if (!b->rt) {
    if (op < 0) {
      memcpy(b->dst, b->a, bytes);
    } else {
      sc_reduce_kernel(dt, op == SC_AVG ? SC_SUM : (sc_redop_t)op, b->dst, b->a, b->b, count);
      if (op == SC_AVG) sc_avg_finalize(dt, b->dst, count, AVG_RANKS);
    }
    return 0;
  }
  if (op < 0) {
    r = b->rt->memcpy_async(b->dst, b->a, bytes, b->stream);
  } else {
    r = sc_dev_reduce(b->rt, b->dst, b->a, b->b, count, dt, (sc_redop_t)op, b->stream);
    if (r == SC_SUCCESS && op == SC_AVG)
      r = sc_dev_avg_finalize(b->rt, b->dst, count, dt, AVG_RANKS, b->stream);
  }
  return r == SC_SUCCESS ? 0 : fail(r, op < 0 ? "the copy" : "the reduction");
}

/* Seconds per run: warmup runs, then iters back to back, timed to the
 * end of the last. */
static double time_runs(const bufs_t *b, const args_t *a, sc_dtype_t dt, int op, size_t count,
                        size_t bytes) {
  for (unsigned i = 0; i < a->warmup; i++)
    if (run_once(b, dt, op, count, bytes)) return -1;
  if (wait_done(b)) return -1;
  int64_t t0 = sc_now_us();
  for (unsigned i = 0; i < a->iters; i++)
    if (run_once(b, dt, op, count, bytes)) return -1;
  if (wait_done(b)) return -1;
  return (double)(sc_now_us() - t0) * 1e-6 / a->iters;
}

/* Host or device buffers, and the copies between them and the host: on the
 * device perf_mem.c's (zeroed allocations, copies that finish before they
 * return, exit status 3 on a runtime failure). */
static void *buf_alloc(const bufs_t *b, size_t bytes) {
  return b->rt ? perf_dev_alloc(bytes) : calloc(1, bytes);
}

static void buf_free(const bufs_t *b, void *p) {
  if (b->rt)
    perf_dev_free(p);
  else
    free(p);
}

static void to_bufs(const bufs_t *b, void *dst, const void *host, size_t bytes) {
  if (b->rt)
    perf_dev_upload(dst, host, bytes);
  else
    memcpy(dst, host, bytes);
}

static void from_bufs(const bufs_t *b, void *host, const void *src, size_t bytes) {
  if (b->rt)
    perf_dev_download(host, src, bytes);
  else
    memcpy(host, src, bytes);
}

/* One size: every selected dtype and op. Returns the number of results
 * that differ from the CPU's, or -1 on an error. */
static int run_size(bufs_t *b, const args_t *a, size_t bytes, void *ha, void *hb, void *want,
                    void *got) {
  int bad = 0;
  for (int t = 0; t < N_DTYPES; t++) {
    if (a->dtype >= 0 && t != a->dtype) continue;
    sc_dtype_t dt = (sc_dtype_t)t;
    size_t es = sc_dtype_size(dt), count = bytes / es, nb = count * es;
    if (count == 0) continue;
    fill(ha, count, dt);
    fill(hb, count, dt);
    to_bufs(b, b->a, ha, nb);
    to_bufs(b, b->b, hb, nb);
    double copy_s = time_runs(b, a, dt, -1, count, nb);
    if (copy_s < 0) return -1;
    double copy_bw = 2.0 * (double)nb / copy_s * 1e-9;
    for (int op = 0; op < N_OPS; op++) {
      if (a->op >= 0 && op != a->op) continue;
      double s = time_runs(b, a, dt, op, count, nb);
      if (s < 0) return -1;
      double moved = (op == SC_AVG ? 5.0 : 3.0) * (double)nb;
      double bw = moved / s * 1e-9;
      sc_reduce_kernel(dt, op == SC_AVG ? SC_SUM : (sc_redop_t)op, want, ha, hb, count);
      if (op == SC_AVG) sc_avg_finalize(dt, want, count, AVG_RANKS);
      from_bufs(b, got, b->dst, nb);
      const char *check = "ok";
      if (memcmp(want, got, nb) != 0) {
        size_t i = 0;
        while (i < count && !memcmp((char *)want + i * es, (char *)got + i * es, es)) i++;
        fprintf(stderr, "sc_kernel_perf: %s %s %zu bytes: element %zu differs from the CPU's\n",
                sc_dtype_name(dt), sc_redop_name((sc_redop_t)op), nb, i);
        check = "DIFFERS";
        bad++;
      }
      printf("%12zu %9s %5s %10.1f %9.1f %9.1f %8.2f  %s\n", nb, sc_dtype_name(dt),
             sc_redop_name((sc_redop_t)op), s * 1e6, bw, copy_bw, bw / copy_bw, check);
      fflush(stdout);
    }
  }
  return bad;
}

int main(int argc, char **argv) {
  args_t a;
  if (parse_args(argc, argv, &a)) return 2;
  bufs_t b = {0};
  if (a.mem == PERF_MEM_DEVICE) {
    if (perf_mem_device_ready("sc_kernel_perf")) return 2;
    b.rt = sc_devrt();
    perf_mem_pick_device(0);
    sc_result_t r = b.rt->stream_create(&b.stream);
    if (r == SC_SUCCESS) r = b.rt->event_create(&b.event);
    if (r != SC_SUCCESS) {
      fail(r, "stream_create");
      return 3;
    }
  }
  void *ha = malloc(a.max_bytes), *hb = malloc(a.max_bytes), *want = malloc(a.max_bytes),
       *got = malloc(a.max_bytes);
  b.a = buf_alloc(&b, a.max_bytes);
  b.b = buf_alloc(&b, a.max_bytes);
  b.dst = buf_alloc(&b, a.max_bytes);
  int rc = 0;
  if (!ha || !hb || !want || !got || !b.a || !b.b || !b.dst) {
    fail(SC_ERR_NOMEM, "malloc");
    rc = 3;
  }
  if (!rc) {
    printf("# sc_kernel_perf: %s memory (%s), %u timed runs after %u\n", perf_mem_name(a.mem),
           b.rt ? b.rt->name : "CPU kernels", a.iters, a.warmup);
    printf("# GB/s: bytes read and written per second (reduction 3x its bytes, AVG 5x,"
           " copy 2x)\n");
    printf("#%11s %9s %5s %10s %9s %9s %8s  %s\n", "bytes", "dtype", "op", "time(us)", "GB/s",
           "copy GB/s", "of copy", "check");
    int bad = 0;
    for (size_t bytes = a.min_bytes; bytes <= a.max_bytes;) {
      int r = run_size(&b, &a, bytes, ha, hb, want, got);
      if (r < 0) {
        rc = 3;
        break;
      }
      bad += r;
      if (bytes > a.max_bytes / a.factor) break;
      bytes *= a.factor;
    }
    if (!rc && bad) {
      printf("# %d results differ from the CPU kernels\n", bad);
      rc = 1;
    }
  }
  buf_free(&b, b.a);
  buf_free(&b, b.b);
  buf_free(&b, b.dst);
  if (b.rt) {
    if (b.event) b.rt->event_destroy(b.event);
    if (b.stream) b.rt->stream_destroy(b.stream);
    perf_mem_finish();
  }
  free(ha);
  free(hb);
  free(want);
  free(got);
  return rc;
}
