/* SPDX-License-Identifier: BSD-3-Clause */
/* The symmetric collectives (sc_allreduce_sym, sc_reduce_sym,
 * sc_broadcast_sym) on every dtype and op, d = 0, 1, 2, 3, 7, 33 and 128,
 * every root position, in place and not: rank r's input has entry (i, j),
 * j >= i, = mr_input(r, k) for the packed index k and garbage below the
 * diagonal (never read); each result must be the symmetric matrix of
 * mr_expected(k) (the reference of test/multi/mr_common.c), equal bit for
 * bit to the dense collective of the same name on the full symmetric
 * matrix, with the guard elements past it untouched.
 * --device: the buffers are device memory (the stand-in's or CUDA's);
 * --quick: three dtypes. Run under sc-run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/devrt.h"
#include "test/multi/mr_common.h"

#define GUARD 16

static sc_comm_t *comm;
static const sc_devrt_t *rt; /* --device */
static void *stream, *event;

static void dev_sync(void) {
  if (rt->event_record(event, stream) != SC_SUCCESS ||
      sc_dev_event_wait(rt, event, 60000, "test copy") != SC_SUCCESS)
    mr_fail("a device copy failed: %s", sc_last_error());
}

/* A buffer of `bytes` of the kind under test, and its host image. */
static void *buf_new(size_t bytes) {
  void *p = NULL;
  if (rt) {
    if (rt->malloc_device(&p, bytes ? bytes : 1) != SC_SUCCESS) p = NULL;
  } else {
    p = malloc(bytes ? bytes : 1);
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
  if (bytes && rt->memcpy_async(dst, host, bytes, stream) != SC_SUCCESS) mr_fail("upload failed");
  dev_sync();
}

static void get(void *host, const void *src, size_t bytes) {
  if (!rt) {
    memcpy(host, src, bytes);
    return;
  }
  if (bytes && rt->memcpy_async(host, src, bytes, stream) != SC_SUCCESS) mr_fail("download failed");
  dev_sync();
}

static size_t packed_index(size_t d, size_t i, size_t j) {
  size_t lo = i < j ? i : j, hi = i < j ? j : i;
  return lo * d - lo * (lo - (lo > 0)) / 2 + (hi - lo);
}

typedef enum { ALLREDUCE, REDUCE, BROADCAST } kind_t;
static const char *const kind_names[] = {"allreduce_sym", "reduce_sym", "broadcast_sym"};

static void one(kind_t kind, size_t d, sc_dtype_t dt, sc_redop_t op, int root, int inplace) {
  const size_t es = sc_dtype_size(dt), n = d * d, bytes = (n + GUARD) * es;
  char what[160];
  snprintf(what, sizeof what, "%s d=%zu %s %s root %d%s (%s)", kind_names[kind], d,
           mr_dtype_names[dt], kind == BROADCAST ? "-" : mr_op_names[op], root,
           inplace ? " in place" : "", rt ? "device" : "host");
  unsigned char *in = malloc(bytes), *out = malloc(bytes), *full = malloc(bytes);
  if (!in || !out || !full) exit(1);
  /* The input: the upper triangle from mr_input, garbage below it; `full`
   * is its symmetric matrix, the dense collectives' input. */
  const int src_rank = kind == BROADCAST ? root : mr_rank;
  for (size_t i = 0; i < d; i++)
    for (size_t j = 0; j < d; j++) {
      double v = mr_input(src_rank, packed_index(d, i, j), dt, op, mr_nranks);
      mr_set(in, i * d + j, dt, j >= i ? v : 77.0);
      mr_set(full, i * d + j, dt, v);
    }
  for (size_t g = 0; g < GUARD; g++) {
    mr_set(in, n + g, dt, 55.0);
    mr_set(full, n + g, dt, 55.0);
  }
  void *ds = buf_new(bytes), *dr = inplace ? ds : buf_new(bytes), *df = buf_new(bytes);
  put(ds, in, bytes);
  if (!inplace) {
    for (size_t x = 0; x < n + GUARD; x++) mr_set(out, x, dt, 55.0);
    put(dr, out, bytes);
  }
  put(df, full, bytes);
  const int receives = kind != REDUCE || mr_rank == root;
  sc_result_t r = SC_SUCCESS, rf = SC_SUCCESS;
  switch (kind) {
  case ALLREDUCE:
    r = sc_allreduce_sym(ds, dr, d, dt, op, comm);
    rf = sc_allreduce(df, df, n, dt, op, comm);
    break;
  case REDUCE:
    r = sc_reduce_sym(ds, receives ? dr : NULL, d, dt, op, root, comm);
    rf = sc_reduce(df, mr_rank == root ? df : NULL, n, dt, op, root, comm);
    break;
  case BROADCAST:
    r = sc_broadcast_sym(mr_rank == root ? ds : NULL, dr, d, dt, root, comm);
    rf = sc_broadcast(df, df, n, dt, root, comm);
    break;
  }
  mr_checks++;
  if (r != SC_SUCCESS || rf != SC_SUCCESS) {
    mr_fail("%s: %s / %s: %s", what, sc_strerror(r), sc_strerror(rf), sc_last_error());
  } else if (receives) {
    get(out, dr, bytes);
    get(full, df, bytes);
    int shown = 0;
    for (size_t i = 0; i < d; i++)
      for (size_t j = 0; j < d; j++) {
        double e = kind == BROADCAST ? mr_input(root, packed_index(d, i, j), dt, op, mr_nranks)
                                     : mr_expected(packed_index(d, i, j), dt, op, mr_nranks);
        double got = mr_get(out, i * d + j, dt);
        if (got != e && shown++ < 3)
          mr_fail("%s: entry (%zu, %zu) is %g, expected %g", what, i, j, got, e);
      }
    if (!shown && memcmp(out, full, n * es) != 0)
      mr_fail("%s: differs from the dense collective on the full matrix", what);
    for (size_t g = 0; g < GUARD; g++)
      if (mr_get(out, n + g, dt) != 55.0 && shown++ < 3)
        mr_fail("%s: guard element %zu was written", what, g);
  }
  buf_free(df);
  if (!inplace) buf_free(dr);
  buf_free(ds);
  free(in);
  free(out);
  free(full);
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
  const size_t dims[] = {0, 1, 2, 3, 7, 33, 128};
  const sc_dtype_t some[] = {SC_INT32, SC_FLOAT16, SC_FLOAT64};
  int ndt = quick ? 3 : (int)SC_FLOAT64 + 1;
  for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
    size_t d = dims[k];
    for (int t = 0; t < ndt; t++) {
      sc_dtype_t dt = quick ? some[t] : (sc_dtype_t)t;
      for (int op = 0; op <= SC_AVG; op++)
        one(ALLREDUCE, d, dt, (sc_redop_t)op, 0, (int)((k + (size_t)op) & 1));
      one(REDUCE, d, dt, (sc_redop_t)((k + (size_t)t) % (SC_AVG + 1)), (int)(k % (size_t)mr_nranks),
          (int)(k & 1));
      one(BROADCAST, d, dt, SC_SUM, (int)((k + 1) % (size_t)mr_nranks), (int)((k + 1) & 1));
    }
  }
  /* Arguments refused at the call, before anything travels. */
  mr_checks++;
  if (sc_allreduce_sym(NULL, NULL, 3, SC_FLOAT32, SC_SUM, comm) != SC_ERR_INVALID_ARG)
    mr_fail("a NULL buffer with d = 3 was not refused");
  mr_checks++;
  if (sc_reduce_sym(NULL, NULL, 0, SC_FLOAT32, SC_SUM, mr_nranks, comm) != SC_ERR_INVALID_ARG)
    mr_fail("root %d was not refused", mr_nranks);
  mr_checks++;
  if (sc_broadcast_sym(NULL, NULL, 0, (sc_dtype_t)99, 0, comm) != SC_ERR_INVALID_ARG)
    mr_fail("dtype 99 was not refused");
  mr_checks++;
  if (sc_allreduce_sym(NULL, NULL, (size_t)1 << 40, SC_FLOAT32, SC_SUM, comm) != SC_ERR_INVALID_ARG)
    mr_fail("a 2^40 x 2^40 matrix was not refused");
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  if (rt) {
    rt->event_destroy(event);
    rt->stream_destroy(stream);
  }
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
