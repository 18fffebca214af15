/* SPDX-License-Identifier: BSD-3-Clause */
/* See dense_check.h. */
#include "test/sim/dense_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"

int dense_passed, dense_failed;

static const char *const place_names[] = {"out", "in_same", "in_rank"};

static const char *dtype_name(sc_dtype_t t) {
  switch (t) {
  case SC_INT32:
    return "int32";
  case SC_INT64:
    return "int64";
  case SC_FLOAT16:
    return "fp16";
  case SC_BFLOAT16:
    return "bf16";
  case SC_FLOAT32:
    return "fp32";
  case SC_FLOAT64:
    return "fp64";
  default:
    return "?";
  }
}

size_t dense_dtype_bytes(sc_dtype_t t) {
  switch (t) {
  case SC_FLOAT16:
  case SC_BFLOAT16:
    return 2;
  case SC_INT32:
  case SC_FLOAT32:
    return 4;
  default:
    return 8;
  }
}

static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

static int is_float(sc_dtype_t t) {
  return t == SC_FLOAT16 || t == SC_BFLOAT16 || t == SC_FLOAT32 || t == SC_FLOAT64;
}

static void dense_report(const dense_case_t *tc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void dense_report(const dense_case_t *tc, const char *fmt, ...) {
  printf("FAIL %s P=%d count=%zu chunk=%zu root=%d %s %s %s %s: ", tc->gen->name, tc->nranks,
         tc->count, tc->chunk, tc->root, dtype_name(tc->dtype), op_names[tc->op],
         place_names[tc->place], tc->model == SC_SIM_EAGER ? "eager" : "rendezvous");
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
}

uint64_t dense_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Logical input of rank q at element j: random integers for integer types
 * (wraparound is exact), small integers for floats (exact in any order:
 * |partial sums| stay below 2^11 for fp16 and 2^8 for bf16 at 64 ranks),
 * and {1, 2, -1} for PROD (products are +-2^k, exact until both the
 * reference and the result overflow to the same infinity). */
static int64_t input_value(const dense_case_t *tc, int q, size_t j) {
  uint64_t h = dense_mix(tc->seed ^ ((uint64_t)q << 40) ^ (uint64_t)j);
  if (tc->op == SC_PROD) {
    unsigned k = (unsigned)(h % 8);
    return k == 0 ? 2 : k < 4 ? -1 : 1;
  }
  switch (tc->dtype) {
  case SC_INT32:
    return (int32_t)(uint32_t)h;
  case SC_INT64:
    return (int64_t)h;
  case SC_FLOAT16:
    return (int64_t)(h % 17) - 8;
  case SC_BFLOAT16:
    return (int64_t)(h % 5) - 2;
  default:
    return (int64_t)(h % 2001) - 1000;
  }
}

static void encode_int(sc_dtype_t t, int64_t v, void *out) {
  if (t == SC_INT32) {
    int32_t x = (int32_t)(uint32_t)(uint64_t)v;
    memcpy(out, &x, 4);
  } else {
    memcpy(out, &v, 8);
  }
}

static void encode_float(sc_dtype_t t, double v, void *out) {
  float f = (float)v;
  uint16_t h;
  switch (t) {
  case SC_FLOAT16:
    h = sc_float_to_half(f);
    memcpy(out, &h, 2);
    break;
  case SC_BFLOAT16:
    h = sc_float_to_bfloat16(f);
    memcpy(out, &h, 2);
    break;
  case SC_FLOAT32:
    memcpy(out, &f, 4);
    break;
  default:
    memcpy(out, &v, 8);
    break;
  }
}

static void encode_input(const dense_case_t *tc, int q, size_t j, void *out) {
  int64_t v = input_value(tc, q, j);
  if (is_float(tc->dtype))
    encode_float(tc->dtype, (double)v, out);
  else
    encode_int(tc->dtype, v, out);
}

/* The reduction over all ranks of input element j, encoded as dtype. */
static void reduce_ref(const dense_case_t *tc, size_t j, void *out) {
  const int p = tc->nranks;
  uint64_t acc = 0; /* SUM/AVG/PROD of integers, wrapping */
  int64_t ext = 0;  /* MIN/MAX, and exact sums of small integers */
  double prod = 1;
  for (int q = 0; q < p; q++) {
    int64_t v = input_value(tc, q, j);
    if (q == 0) {
      acc = (uint64_t)v;
      ext = v;
      prod = (double)v;
      continue;
    }
    switch (tc->op) {
    case SC_PROD:
      acc *= (uint64_t)v;
      prod *= (double)v;
      break;
    case SC_MIN:
      ext = v < ext ? v : ext;
      break;
    case SC_MAX:
      ext = v > ext ? v : ext;
      break;
    default:
      acc += (uint64_t)v;
      /* Only floats read ext for sums (their inputs are small); integers use
       * acc, so this may wrap without undefined behaviour. */
      ext = (int64_t)((uint64_t)ext + (uint64_t)v);
      break;
    }
  }
  if (!is_float(tc->dtype)) {
    int64_t r = tc->op == SC_MIN || tc->op == SC_MAX ? ext : (int64_t)acc;
    if (tc->dtype == SC_INT32) r = (int32_t)(uint32_t)(uint64_t)r;
    if (tc->op == SC_AVG) r /= p;
    encode_int(tc->dtype, r, out);
    return;
  }
  if (tc->op == SC_PROD) {
    encode_float(tc->dtype, prod, out);
  } else if (tc->op == SC_AVG && tc->dtype == SC_FLOAT64) {
    encode_float(tc->dtype, (double)ext / (double)p, out);
  } else if (tc->op == SC_AVG) {
    /* float32, and fp16/bf16 through float32: one IEEE float division. */
    float f = (float)ext / (float)p;
    encode_float(tc->dtype, (double)f, out);
  } else {
    encode_float(tc->dtype, (double)ext, out);
  }
}

/* ---- one case ---------------------------------------------------------- */

typedef struct rank_bufs {
  unsigned char *mem[2]; /* what to free */
  sc_sched_t sched;
} rank_bufs_t;

static unsigned char *alloc_bytes(size_t n, int poison) {
  unsigned char *p = malloc(n ? n : 1);
  if (p && poison) memset(p, 0xa5, n);
  return p;
}

/* Sizes (elements) of the input a rank holds and of the output it expects. */
static void io_counts(const dense_case_t *tc, int r, size_t *in, size_t *out) {
  const size_t n = tc->count, p = (size_t)tc->nranks;
  switch (tc->gen->coll) {
  case SC_COLL_REDUCE_SCATTER:
    *in = p * n;
    *out = n;
    break;
  case SC_COLL_ALLGATHER:
    *in = n;
    *out = p * n;
    break;
  case SC_COLL_BROADCAST:
    *in = r == tc->root ? n : 0;
    *out = n;
    break;
  case SC_COLL_REDUCE:
    *in = n;
    *out = r == tc->root ? n : 0;
    break;
  default:
    *in = n;
    *out = n;
    break;
  }
}

/* The output every rank's result is a slice of: the reduction (ALLREDUCE,
 * REDUCE: count; REDUCE_SCATTER: nranks*count, rank r owns block r) or the
 * concatenated inputs (ALLGATHER), or the root's input (BROADCAST). Computed
 * once per case: per rank it would cost nranks times the whole run. */
static unsigned char *expected_output(const dense_case_t *tc, size_t *len) {
  const size_t es = dense_dtype_bytes(tc->dtype), n = tc->count, p = (size_t)tc->nranks;
  const sc_coll_t coll = tc->gen->coll;
  *len = coll == SC_COLL_REDUCE_SCATTER || coll == SC_COLL_ALLGATHER ? p * n : n;
  unsigned char *want = malloc(*len * es + 1);
  if (!want) return NULL;
  for (size_t i = 0; i < *len; i++) {
    if (coll == SC_COLL_ALLGATHER)
      encode_input(tc, (int)(i / n), i % n, want + i * es);
    else if (coll == SC_COLL_BROADCAST)
      encode_input(tc, tc->root, i, want + i * es);
    else
      reduce_ref(tc, i, want + i * es);
  }
  return want;
}

static int check_output(const dense_case_t *tc, int r, const unsigned char *recv,
                        const unsigned char *want_all) {
  const size_t es = dense_dtype_bytes(tc->dtype);
  size_t in_c, out_c, bad = 0, first = 0;
  io_counts(tc, r, &in_c, &out_c);
  const unsigned char *want =
      want_all + (tc->gen->coll == SC_COLL_REDUCE_SCATTER ? (size_t)r * tc->count * es : 0);
  if (out_c == 0 || memcmp(recv, want, out_c * es) == 0) return 0;
  for (size_t i = 0; i < out_c; i++)
    if (memcmp(recv + i * es, want + i * es, es) != 0) {
      if (!bad) first = i;
      bad++;
    }
  uint64_t got = 0, exp = 0;
  memcpy(&got, recv + first * es, es);
  memcpy(&exp, want + first * es, es);
  dense_report(tc,
               "rank %d: %zu of %zu output elements wrong, first at %zu: got 0x%" PRIx64
               ", want 0x%" PRIx64,
               r, bad, out_c, first, got, exp);
  return -1;
}

static int check_input_intact(const dense_case_t *tc, int r, const unsigned char *send,
                              size_t in_c) {
  const size_t es = dense_dtype_bytes(tc->dtype);
  unsigned char want[8];
  for (size_t i = 0; i < in_c; i++) {
    encode_input(tc, r, i, want);
    if (memcmp(send + i * es, want, es) != 0) {
      dense_report(tc, "rank %d: out-of-place SEND modified at element %zu", r, i);
      return -1;
    }
  }
  return 0;
}

void dense_run_case(const dense_case_t *tc) {
  const int p = tc->nranks;
  const size_t es = dense_dtype_bytes(tc->dtype), n = tc->count;
  const sc_coll_t coll = tc->gen->coll;
  rank_bufs_t *rb = calloc((size_t)p, sizeof(*rb));
  sc_sim_rank_t *sr = calloc((size_t)p, sizeof(*sr));
  int ok = rb && sr;
  char err[1024];
  if (!ok) {
    dense_report(tc, "out of memory");
    goto done;
  }
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {.coll = coll,
                        .nranks = p,
                        .rank = r,
                        .root = tc->root,
                        .count = n,
                        .elem_size = es,
                        .chunk_elems = tc->chunk,
                        .avg = tc->op == SC_AVG};
    sc_sched_init(&rb[r].sched);
    sc_result_t res = tc->gen->fn(&a, &rb[r].sched);
    if (res != SC_SUCCESS) {
      dense_report(tc, "rank %d: generator returned %d", r, res);
      ok = 0;
      break;
    }
    size_t in_c, out_c;
    io_counts(tc, r, &in_c, &out_c);
    sr[r].sched = &rb[r].sched;
    unsigned char *in = NULL, *out = NULL;
    int in_place = tc->place != PLACE_OUT && in_c && out_c;
    if (in_place) {
      size_t big = in_c > out_c ? in_c : out_c;
      unsigned char *mem = rb[r].mem[0] = alloc_bytes(big * es, 1);
      if (!mem) ok = 0;
      in = out = mem;
      if (tc->place == PLACE_IN_RANK && coll == SC_COLL_REDUCE_SCATTER)
        out = mem + (size_t)r * n * es;
      if (tc->place == PLACE_IN_RANK && coll == SC_COLL_ALLGATHER) in = mem + (size_t)r * n * es;
    } else {
      if (in_c && !(in = rb[r].mem[0] = alloc_bytes(in_c * es, 0))) ok = 0;
      if (out_c && !(out = rb[r].mem[1] = alloc_bytes(out_c * es, 1))) ok = 0;
    }
    if (!ok) {
      dense_report(tc, "out of memory");
      break;
    }
    for (size_t i = 0; i < in_c; i++) encode_input(tc, r, i, in + i * es);
    sr[r] = (sc_sim_rank_t){
        .sched = &rb[r].sched, .send = in, .send_count = in_c, .recv = out, .recv_count = out_c};
  }
  if (!ok) goto done;
  sc_sim_config_t cfg = {
      .nranks = p, .dtype = tc->dtype, .elem_size = es, .op = tc->op, .model = tc->model};
  if (sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) != 0) {
    dense_report(tc, "%s", err);
    ok = 0;
    goto done;
  }
  size_t want_len;
  unsigned char *want = expected_output(tc, &want_len);
  if (!want) {
    dense_report(tc, "out of memory");
    ok = 0;
  }
  for (int r = 0; r < p && ok; r++) {
    if (check_output(tc, r, sr[r].recv, want) != 0) ok = 0;
    if (ok && tc->place == PLACE_OUT &&
        check_input_intact(tc, r, sr[r].send, sr[r].send_count) != 0)
      ok = 0;
  }
  free(want);
done:
  if (rb)
    for (int r = 0; r < p; r++) {
      free(rb[r].mem[0]);
      free(rb[r].mem[1]);
      sc_sched_free(&rb[r].sched);
    }
  free(rb);
  free(sr);
  if (ok)
    dense_passed++;
  else
    dense_failed++;
}

void dense_input(const dense_case_t *tc, int r, size_t j, void *out) {
  encode_input(tc, r, j, out);
}

void dense_io_counts(const dense_case_t *tc, int r, size_t *in, size_t *out) {
  io_counts(tc, r, in, out);
}

unsigned char *dense_expected(const dense_case_t *tc) {
  size_t len;
  return expected_output(tc, &len);
}

int dense_check_output(const dense_case_t *tc, int r, const unsigned char *recv,
                       const unsigned char *want) {
  return check_output(tc, r, recv, want);
}

void dense_expect(int cond, const char *what, ...) {
  if (cond) {
    dense_passed++;
    return;
  }
  va_list ap;
  va_start(ap, what);
  printf("FAIL ");
  vprintf(what, ap);
  printf("\n");
  va_end(ap);
  dense_failed++;
}
