/* SPDX-License-Identifier: BSD-3-Clause */
/* Multi-rank test of the sparse calls on device buffers (run under sc-run
 * with the device stand-in, SC_DEVRT_STANDIN; test/multi/dev_sparse.sh).
 * The reference of each device call is the same call on host copies of the
 * same data (the host path, itself checked against independent references
 * by mr_sparse and the unit tests); results must agree bit for bit:
 *  - sc_topk: indices, values and nnz, EXACT (ties included) and GAUSSIAN,
 *    whose contract (k/2 <= nnz <= 2k, sorted, every selected magnitude >=
 *    every unselected one) is checked on the device result too;
 *  - sc_gtopk_allreduce with and without error feedback, several steps:
 *    the gradient after each step and the residual (read back);
 *  - sc_sparse_allreduce, every algorithm;
 *  - refusals: mixed host and device buffers, an sc_ef_t used with both
 *    host and device gradients.
 * Every float dtype; k = 0, 1, small, n - 1, n and beyond n. --quick: a
 * subset, for the run with slow streams. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "lib/sparse/ef.h"
#include "sparsecoll.h"
#include "test/multi/mr_common.h"

static sc_comm_t *comm;
static const sc_devrt_t *rt;
static void *ev;
static int quick; /* --quick: a few sizes and dtypes (the slow-stream run) */

static const sc_dtype_t dtypes[4] = {SC_FLOAT32, SC_FLOAT64, SC_FLOAT16, SC_BFLOAT16};

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void die(const char *what) {
  fprintf(stderr, "rank %d: %s: %s\n", mr_rank, what, sc_last_error());
  exit(1);
}

static void *dalloc(size_t bytes) {
  void *p = NULL;
  if (rt->malloc_device(&p, bytes ? bytes : 1) != SC_SUCCESS) die("malloc_device");
  return p;
}

/* Copies on the legacy default stream, then waits: the library's blocking
 * calls order themselves after it. */
static void dcopy(void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  if (rt->memcpy_async(dst, src, bytes, NULL) != SC_SUCCESS) die("memcpy_async");
  if (rt->event_record(ev, NULL) != SC_SUCCESS) die("event_record");
  if (sc_dev_event_wait(rt, ev, 60000, "test copy") != SC_SUCCESS) die("event wait");
}

/* Integers in [-128, 128]: exact in every float dtype (mr_set encodes them).
 * ties: only five distinct values, so that the selection breaks ties. */
static void fill(void *buf, size_t n, sc_dtype_t dt, uint64_t seed, int ties) {
  for (size_t i = 0; i < n; i++) {
    uint64_t z = mix(seed * 1000003u + i);
    double v = ties ? (double)((int)(z % 5) - 2) : (double)((int)(z % 257) - 128);
    mr_set(buf, i, dt, v);
  }
}

/* ---- sc_topk ---- */

static int topk_contract(const void *x, size_t n, sc_dtype_t dt, size_t k, const uint32_t *idx,
                         size_t nnz) {
  for (size_t j = 1; j < nnz; j++)
    if (idx[j] <= idx[j - 1]) return 0;
  if (k < n && (nnz < k / 2 || nnz > 2 * k)) return 0;
  double minsel = INFINITY, maxun = 0;
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    double m = fabs(mr_get(x, i, dt));
    if (j < nnz && idx[j] == i) {
      j++;
      if (m < minsel) minsel = m;
    } else if (m > maxun) {
      maxun = m;
    }
  }
  return j == nnz && (nnz == 0 || minsel >= maxun);
}

static void topk_case(sc_dtype_t dt, size_t n, size_t k, sc_select_t m, int ties) {
  size_t es = sc_dtype_size(dt), cap = 2 * (k < n ? k : n) + 1;
  void *x = malloc(n * es), *hval = malloc(cap * es), *gval = malloc(cap * es);
  uint32_t *hidx = malloc(cap * 4), *gidx = malloc(cap * 4);
  fill(x, n, dt, (uint64_t)mr_rank * 7919 + n * 31 + k, ties);
  void *dx = dalloc(n * es), *dval = dalloc(cap * es);
  uint32_t *didx = dalloc(cap * 4);
  dcopy(dx, x, n * es);
  size_t hn = 0, dn = 0;
  MR_OK(sc_topk(x, n, dt, k, m, hidx, hval, &hn));
  MR_OK(sc_topk(dx, n, dt, k, m, didx, dval, &dn));
  dcopy(gidx, didx, dn * 4);
  dcopy(gval, dval, dn * es);
  mr_checks++;
  if (hn != dn || memcmp(hidx, gidx, hn * 4) || memcmp(hval, gval, hn * es))
    mr_fail("sc_topk %s n=%zu k=%zu %s ties=%d: device nnz %zu, host nnz %zu, or their "
            "entries differ",
            mr_dtype_names[dt], n, k, m == SC_SELECT_EXACT ? "exact" : "gaussian", ties, dn, hn);
  else if (!topk_contract(x, n, dt, k, gidx, dn))
    mr_fail("sc_topk %s n=%zu k=%zu: the device result breaks the contract (nnz %zu)",
            mr_dtype_names[dt], n, k, dn);
  else if (m == SC_SELECT_EXACT && dn != (k < n ? k : n))
    mr_fail("sc_topk exact %s n=%zu k=%zu: nnz %zu", mr_dtype_names[dt], n, k, dn);
  rt->free_device(dx);
  rt->free_device(dval);
  rt->free_device(didx);
  free(x);
  free(hval);
  free(gval);
  free(hidx);
  free(gidx);
}

static void topk_cases(void) {
  const size_t ns[] = {1, 5, 100, 3000, 70000};
  for (int d = 0; d < 4; d += quick ? 2 : 1)
    for (size_t a = quick ? 1 : 0; a < sizeof(ns) / sizeof(ns[0]); a += quick ? 2 : 1) {
      size_t n = ns[a];
      const size_t ks[] = {0, 1, 2, n / 3, n > 1 ? n - 1 : 1, n, n + 5};
      for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
        for (int m = 0; m < 2; m++)
          for (int ties = 0; ties < 2; ties++)
            topk_case(dtypes[d], n, ks[b], m ? SC_SELECT_GAUSSIAN : SC_SELECT_EXACT, ties);
    }
}

/* ---- sc_gtopk_allreduce ---- */

static void gtopk_case(sc_dtype_t dt, size_t n, size_t k, sc_select_t m, int use_ef, int steps) {
  size_t es = sc_dtype_size(dt);
  void *g = malloc(n * es), *back = malloc(n * es), *rh = malloc(n * es), *rd = malloc(n * es);
  void *dg = dalloc(n * es);
  sc_ef_t *efh = NULL, *efd = NULL;
  if (use_ef) {
    MR_OK(sc_ef_create(n, dt, &efh));
    MR_OK(sc_ef_create(n, dt, &efd));
  }
  for (int s = 0; s < steps; s++) {
    fill(g, n, dt, (uint64_t)mr_rank * 104729 + (uint64_t)s * 13 + n + k, s == 1);
    dcopy(dg, g, n * es);
    sc_result_t r1 = sc_gtopk_allreduce(g, n, dt, k, m, efh, comm);
    sc_result_t r2 = sc_gtopk_allreduce(dg, n, dt, k, m, efd, comm);
    mr_checks++;
    if (r1 != SC_SUCCESS || r2 != SC_SUCCESS) {
      mr_fail("sc_gtopk_allreduce %s n=%zu k=%zu: host %s, device %s: %s", mr_dtype_names[dt], n, k,
              sc_strerror(r1), sc_strerror(r2), sc_last_error());
      break;
    }
    dcopy(back, dg, n * es);
    mr_checks++;
    if (memcmp(g, back, n * es)) {
      size_t i = 0;
      while (!memcmp((char *)g + i * es, (char *)back + i * es, es)) i++;
      mr_fail("sc_gtopk_allreduce %s n=%zu k=%zu %s ef=%d step %d: element %zu: host %g, "
              "device %g",
              mr_dtype_names[dt], n, k, m == SC_SELECT_EXACT ? "exact" : "gaussian", use_ef, s, i,
              mr_get(g, i, dt), mr_get(back, i, dt));
      break;
    }
    if (use_ef) {
      MR_OK(sc_ef_residual_read(efh, rh));
      MR_OK(sc_ef_residual_read(efd, rd));
      mr_checks++;
      if (memcmp(rh, rd, n * es)) {
        mr_fail("sc_gtopk_allreduce %s n=%zu k=%zu ef step %d: the residuals differ",
                mr_dtype_names[dt], n, k, s);
        break;
      }
    }
  }
  sc_ef_destroy(efh);
  sc_ef_destroy(efd);
  rt->free_device(dg);
  free(g);
  free(back);
  free(rh);
  free(rd);
}

static void gtopk_cases(void) {
  const size_t ns[] = {1, 10, 1000, 5000};
  for (int d = 0; d < 4; d += quick ? 2 : 1)
    for (size_t a = quick ? 1 : 0; a < sizeof(ns) / sizeof(ns[0]); a += quick ? 2 : 1) {
      size_t n = ns[a];
      const size_t ks[] = {0, 1, 3, n / 10, n, n + 3};
      for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
        for (int m = 0; m < 2; m++)
          for (int ef = 0; ef < 2; ef++)
            gtopk_case(dtypes[d], n, ks[b], m ? SC_SELECT_GAUSSIAN : SC_SELECT_EXACT, ef, 3);
    }
}

/* ---- sc_sparse_allreduce ---- */

static void sparse_case(sc_dtype_t dt, sc_sparse_algo_t algo, size_t dense_len, size_t k) {
  size_t es = sc_dtype_size(dt), p = (size_t)mr_nranks;
  size_t cap = algo == SC_SPARSE_ALLGATHER ? p * k : k;
  uint32_t *idx = malloc((k + 1) * 4), *oh = malloc((cap + 1) * 4), *og = malloc((cap + 1) * 4);
  void *val = malloc((k + 1) * es), *vh = malloc((cap + 1) * es), *vg = malloc((cap + 1) * es);
  size_t nnz = 0;
  for (size_t i = 0; i < dense_len && nnz < k; i++)
    if (mix((uint64_t)mr_rank * 31 + i * 7 + k) % 3 == 0) idx[nnz++] = (uint32_t)i;
  fill(val, nnz, dt, (uint64_t)mr_rank + 5 * k, 0);
  uint32_t *didx = dalloc((k + 1) * 4), *dout = dalloc((cap + 1) * 4);
  void *dval = dalloc((k + 1) * es), *dvout = dalloc((cap + 1) * es);
  dcopy(didx, idx, nnz * 4);
  dcopy(dval, val, nnz * es);
  size_t hn = 0, dn = 0;
  MR_OK(sc_sparse_allreduce(idx, val, nnz, dense_len, k, dt, algo, oh, vh, &hn, comm));
  MR_OK(sc_sparse_allreduce(didx, dval, nnz, dense_len, k, dt, algo, dout, dvout, &dn, comm));
  dcopy(og, dout, dn * 4);
  dcopy(vg, dvout, dn * es);
  mr_checks++;
  if (hn != dn || memcmp(oh, og, hn * 4) || memcmp(vh, vg, hn * es))
    mr_fail("sc_sparse_allreduce %s algo %d len %zu k %zu: device nnz %zu, host %zu, or their "
            "entries differ",
            mr_dtype_names[dt], (int)algo, dense_len, k, dn, hn);
  rt->free_device(didx);
  rt->free_device(dout);
  rt->free_device(dval);
  rt->free_device(dvout);
  free(idx);
  free(oh);
  free(og);
  free(val);
  free(vh);
  free(vg);
}

static void sparse_cases(void) {
  const sc_sparse_algo_t algos[4] = {SC_SPARSE_GTOPK, SC_SPARSE_GTOPK_TREE, SC_SPARSE_ALLGATHER,
                                     SC_SPARSE_GTOPK_HIER};
  const size_t ks[] = {0, 1, 7, 64};
  for (int d = 0; d < 4; d += quick ? 3 : 1)
    for (int a = 0; a < 4; a++)
      for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
        sparse_case(dtypes[d], algos[a], 300, ks[b]);
}

/* ---- refusals ---- */

static void expect(sc_result_t got, sc_result_t want, const char *what, const char *detail) {
  mr_checks++;
  if (got != want)
    mr_fail("%s: %s, expected %s (%s)", what, sc_strerror(got), sc_strerror(want), sc_last_error());
  else if (detail && !strstr(sc_last_error(), detail))
    mr_fail("%s: the message \"%s\" does not say \"%s\"", what, sc_last_error(), detail);
}

static void refusals(void) {
  const size_t n = 64;
  float h[64];
  uint32_t hidx[16];
  float hval[16];
  fill(h, n, SC_FLOAT32, 1, 0);
  float *dg = dalloc(n * 4);
  uint32_t *didx = dalloc(16 * 4);
  dcopy(dg, h, n * 4);
  size_t nnz;
  /* Mixed: nothing runs, nothing is sent. */
  expect(sc_topk(dg, n, SC_FLOAT32, 4, SC_SELECT_EXACT, hidx, hval, &nnz), SC_ERR_INVALID_ARG,
         "sc_topk device dense, host indices", NULL);
  expect(
      sc_sparse_allreduce(didx, hval, 0, n, 4, SC_FLOAT32, SC_SPARSE_GTOPK, hidx, hval, &nnz, comm),
      SC_ERR_INVALID_ARG, "sc_sparse_allreduce mixed", NULL);
  /* An sc_ef_t is bound to the memory kind of its first gradient. */
  sc_ef_t *ef;
  MR_OK(sc_ef_create(n, SC_FLOAT32, &ef));
  MR_OK(sc_gtopk_allreduce(h, n, SC_FLOAT32, 4, SC_SELECT_EXACT, ef, comm));
  expect(sc_gtopk_allreduce(dg, n, SC_FLOAT32, 4, SC_SELECT_EXACT, ef, comm), SC_ERR_INVALID_ARG,
         "ef bound to host, device gradient", "host memory");
  sc_ef_destroy(ef);
  MR_OK(sc_ef_create(n, SC_FLOAT32, &ef));
  MR_OK(sc_gtopk_allreduce(dg, n, SC_FLOAT32, 4, SC_SELECT_EXACT, ef, comm));
  expect(sc_gtopk_allreduce(h, n, SC_FLOAT32, 4, SC_SELECT_EXACT, ef, comm), SC_ERR_INVALID_ARG,
         "ef bound to device, host gradient", "device 0");
  /* Still usable with its own kind. */
  MR_OK(sc_gtopk_allreduce(dg, n, SC_FLOAT32, 4, SC_SELECT_EXACT, ef, comm));
  sc_ef_destroy(ef);
  rt->free_device(dg);
  rt->free_device(didx);
}

int main(int argc, char **argv) {
  quick = argc > 1 && !strcmp(argv[1], "--quick");
  rt = sc_devrt();
  if (!rt || rt->device_count() < 1) {
    printf("skipped: no device runtime (set SC_DEVRT_STANDIN to the stand-in)\n");
    return 77;
  }
  if (rt->event_create(&ev) != SC_SUCCESS) die("event_create");
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  refusals();
  topk_cases();
  sparse_cases();
  gtopk_cases();
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  rt->event_destroy(ev);
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
