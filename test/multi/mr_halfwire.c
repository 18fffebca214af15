/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_allreduce_compressed (float32 buffers, float16 or bfloat16 on the wire)
 * on every op, both wires, counts 0, 1, primes, counts not divisible by the
 * rank count and multi-MiB ones, in place and not. Rank r's input is a
 * deterministic function of (r, i) with magnitudes from 2^-20 to 2^8 (fp16
 * subnormals included), so every rank computes the exact float64 reference.
 * Each result must be
 *   - a value of the wire format (the result is rounded to the wire once);
 *   - within the bound the documented roundings give: each input rounded
 *     once to the wire (half an ulp of the wire at its magnitude), the float32
 *     reductions, and one rounding of the result (half an ulp at its
 *     magnitude);
 *   - the same bits on every rank (a hash of recvbuf, all-gathered), and the
 *     same bits when the call is repeated;
 * with the guard elements past recvbuf untouched. Bad arguments (dtype,
 * wire, op, NULL buffers) are SC_ERR_INVALID_ARG naming the function.
 * --device: device buffers (the stand-in's or CUDA's); --quick: fewer
 * counts. Run under sc-run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "test/multi/mr_common.h"

#define GUARD 8

static sc_comm_t *comm;
static const sc_devrt_t *rt; /* --device */
static void *stream, *event;

static void dev_sync(void) {
  if (rt->event_record(event, stream) != SC_SUCCESS ||
      sc_dev_event_wait(rt, event, 60000, "test copy") != SC_SUCCESS)
    mr_fail("a device copy failed: %s", sc_last_error());
}

static void *buf_new(size_t bytes) {
  void *p = NULL;
  if (rt) {
    if (rt->malloc_device(&p, bytes) != SC_SUCCESS) p = NULL;
  } else {
    p = malloc(bytes);
  }
  if (!p) {
    fprintf(stderr, "rank %d: no memory for %zu bytes\n", mr_rank, bytes);
    exit(1);
  }
  return p;
}

static void buf_free(void *p) {
  if (rt)
    rt->free_device(p);
  else
    free(p);
}

static void put(void *dst, const void *host, size_t bytes) {
  if (!rt) {
    memcpy(dst, host, bytes);
    return;
  }
  if (rt->memcpy_async(dst, host, bytes, stream) != SC_SUCCESS) mr_fail("upload failed");
  dev_sync();
}

static void get(void *host, const void *src, size_t bytes) {
  if (!rt) {
    memcpy(host, src, bytes);
    return;
  }
  if (rt->memcpy_async(host, src, bytes, stream) != SC_SUCCESS) mr_fail("download failed");
  dev_sync();
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

/* Rank r's input at i: PROD gets factors in [0.75, 1.25] (the product stays
 * near 1); the others a signed value of magnitude up to 2^(i % 29 - 20). */
static float input(int r, size_t i, sc_redop_t op) {
  uint64_t h = mix(((uint64_t)r << 40) ^ (uint64_t)i ^ 0x9e3779b97f4a7c15ULL);
  double u = (double)(h >> 11) / 9007199254740992.0; /* [0, 1) */
  if (op == SC_PROD) return (float)(0.75 + 0.5 * u);
  return (float)ldexp(u - 0.5, (int)(i % 29) - 19);
}

/* The wire's precision p (significand bits) and smallest normal exponent. */
static int wire_p(sc_dtype_t w) {
  return w == SC_FLOAT16 ? 11 : 8;
}
static int wire_emin(sc_dtype_t w) {
  return w == SC_FLOAT16 ? -14 : -126;
}

/* The spacing of the wire's values at magnitude a. */
static double ulp(sc_dtype_t w, double a) {
  int e = wire_emin(w);
  if (a > 0) {
    int k;
    frexp(a, &k); /* a = m 2^k, m in [0.5, 1) */
    if (k - 1 > e) e = k - 1;
  }
  return ldexp(1.0, e - (wire_p(w) - 1));
}

/* v is a value of the wire format. */
static int on_wire(sc_dtype_t w, double v) {
  if (isnan(v)) return 1;
  if (w == SC_FLOAT16 && fabs(v) > 65504) return 0;
  double q = v / ulp(w, fabs(v));
  return q == floor(q);
}

static uint64_t hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

static const char *wire_name(sc_dtype_t w) {
  return w == SC_FLOAT16 ? "fp16" : "bf16";
}

/* The documented error bound at element i against the exact result. */
static double bound(sc_dtype_t w, sc_redop_t op, size_t i, double exact) {
  const int n = mr_nranks;
  double in_err = 0, s = 0, m = 0;
  for (int r = 0; r < n; r++) {
    double a = fabs((double)input(r, i, op));
    in_err += 0.5 * ulp(w, a);
    s += a;
    if (a > m) m = a;
  }
  const double e32 = ldexp(1.0, -23); /* float32 unit roundoff, doubled */
  switch (op) {
  case SC_SUM:
    return in_err + n * e32 * s + 0.5 * ulp(w, 2 * s);
  case SC_AVG:
    return (in_err + n * e32 * s) / n + e32 * s / n + 0.5 * ulp(w, 2 * s / n);
  case SC_MIN:
  case SC_MAX:
    return ulp(w, 2 * m);
  default: { /* PROD: relative, inputs near 1 (normal in both wires) */
    double u = ldexp(1.0, -wire_p(w));
    return fabs(exact) * (pow(1 + u, n + 1) * pow(1 + e32, n) - 1) * 1.01;
  }
  }
}

static void one(size_t count, sc_dtype_t w, sc_redop_t op, int inplace) {
  const size_t bytes = (count + GUARD) * sizeof(float);
  float *host = malloc(bytes), *res = malloc(bytes), *again = malloc(bytes);
  if (!host || !res || !again) exit(1);
  for (size_t i = 0; i < count; i++) host[i] = input(mr_rank, i, op);
  for (size_t i = count; i < count + GUARD; i++) host[i] = -7.0f;
  float *send = buf_new(bytes), *recv = inplace ? send : buf_new(bytes);
  uint64_t h[2];
  for (int rep = 0; rep < 2; rep++) {
    put(send, host, bytes);
    if (!inplace) {
      float *guard = malloc(bytes);
      for (size_t i = 0; i < count + GUARD; i++) guard[i] = -7.0f;
      put(recv, guard, bytes);
      free(guard);
    }
    MR_OK(sc_allreduce_compressed(send, recv, count, SC_FLOAT32, op, w, comm));
    get(rep ? again : res, recv, bytes);
    h[rep] = hash_bytes(rep ? again : res, count * sizeof(float));
  }
  const char *ctx = mr_op_names[op];
  long bad = 0;
  mr_checks++;
  if (h[0] != h[1]) mr_fail("%s %s n=%zu: a second call gave other bits", wire_name(w), ctx, count);
  for (size_t i = 0; i < count + GUARD; i++) {
    if (i >= count) {
      if (res[i] != -7.0f && bad++ < 3)
        mr_fail("%s %s n=%zu%s: guard element %zu overwritten", wire_name(w), ctx, count,
                inplace ? " in place" : "", i - count);
      continue;
    }
    double exact = op == SC_PROD ? 1 : (op == SC_MIN ? INFINITY : (op == SC_MAX ? -INFINITY : 0));
    for (int r = 0; r < mr_nranks; r++) {
      double x = input(r, i, op);
      if (op == SC_SUM || op == SC_AVG) exact += x;
      if (op == SC_PROD) exact *= x;
      if (op == SC_MIN && x < exact) exact = x;
      if (op == SC_MAX && x > exact) exact = x;
    }
    if (op == SC_AVG) exact /= mr_nranks;
    const double v = res[i], b = bound(w, op, i, exact);
    if ((!on_wire(w, v) || !(fabs(v - exact) <= b)) && bad++ < 3)
      mr_fail("%s %s n=%zu%s [%zu]: got %.9g, exact %.9g, bound %.3g%s", wire_name(w), ctx, count,
              inplace ? " in place" : "", i, v, exact, b,
              on_wire(w, v) ? "" : " (not a wire value)");
  }
  mr_checks++;
  /* The same bits on every rank. */
  uint64_t *all = calloc((size_t)mr_nranks, sizeof(uint64_t));
  MR_OK(sc_allgather(&h[0], all, 1, SC_UINT64, comm));
  for (int r = 0; r < mr_nranks; r++)
    if (all[r] != h[0])
      mr_fail("%s %s n=%zu: rank %d's result differs from rank %d's", wire_name(w), ctx, count, r,
              mr_rank);
  free(all);
  if (!inplace) buf_free(recv);
  buf_free(send);
  free(host);
  free(res);
  free(again);
}

static void refused(sc_result_t got, const char *what) {
  mr_checks++;
  if (got != SC_ERR_INVALID_ARG)
    mr_fail("%s: expected SC_ERR_INVALID_ARG, got %s", what, sc_strerror(got));
  else if (!strstr(sc_last_error(), "sc_allreduce_compressed"))
    mr_fail("%s: the message does not name the function: %s", what, sc_last_error());
}

int main(int argc, char **argv) {
  int quick = 0, device = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    if (!strcmp(argv[i], "--device")) device = 1;
  }
  if (device) {
    rt = sc_devrt();
    if (!rt) {
      printf("skipped: no device runtime\n");
      return 77;
    }
    if (rt->stream_create(&stream) != SC_SUCCESS || rt->event_create(&event) != SC_SUCCESS)
      return 1;
  }
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  const size_t p = (size_t)mr_nranks;
  const size_t counts[] = {0, 1, 2, 7, 13, 3 * p + 1, 1009, 65537};
  const size_t nc = quick ? 6 : sizeof counts / sizeof counts[0];
  const sc_dtype_t wires[] = {SC_FLOAT16, SC_BFLOAT16};
  for (size_t k = 0; k < nc; k++)
    for (int w = 0; w < 2; w++)
      for (int op = 0; op <= SC_AVG; op++)
        one(counts[k], wires[w], (sc_redop_t)op, (int)((k + (size_t)op + (size_t)w) & 1));
  /* Multi-MiB ones (4 and 8 MiB of float32, not divisible by 2, 3, 5 or 8):
   * two and three of the call's pipelined segments of 2^20 elements, the
   * last one of a few elements (owners with empty blocks). */
  one(((size_t)1 << 20) + 3, SC_FLOAT16, SC_SUM, 0);
  one(((size_t)1 << 21) + 5, SC_BFLOAT16, SC_AVG, 1);

  float x[4] = {1, 2, 3, 4};
  refused(sc_allreduce_compressed(x, x, 4, SC_FLOAT16, SC_SUM, SC_FLOAT16, comm), "dtype FLOAT16");
  refused(sc_allreduce_compressed(x, x, 4, SC_FLOAT64, SC_SUM, SC_BFLOAT16, comm), "dtype FLOAT64");
  refused(sc_allreduce_compressed(x, x, 4, SC_FLOAT32, SC_SUM, SC_FLOAT32, comm), "wire FLOAT32");
  refused(sc_allreduce_compressed(x, x, 4, SC_FLOAT32, SC_SUM, SC_INT8, comm), "wire INT8");
  refused(sc_allreduce_compressed(x, x, 4, SC_FLOAT32, (sc_redop_t)9, SC_FLOAT16, comm), "op 9");
  refused(sc_allreduce_compressed(NULL, x, 4, SC_FLOAT32, SC_SUM, SC_FLOAT16, comm), "NULL send");
  refused(sc_allreduce_compressed(x, x, (size_t)-1 / 2, SC_FLOAT32, SC_SUM, SC_FLOAT16, comm),
          "count 2^63");
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  if (rt) {
    rt->event_destroy(event);
    rt->stream_destroy(stream);
  }
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
