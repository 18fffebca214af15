/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_gtopk_allreduce with SC_GTOPK_ALGO=hitopk on an emulated host layout
 * (SC_RANKS_PER_HOST = L consecutive ranks per host, set by hitopk.sh):
 * against a reference that simulates the four steps from every rank's
 * deterministic input (small integers, so every sum is exact in any order
 * and the result must match bit for bit), residual included; the result
 * bit-identical on every rank; error feedback conserving the mass over
 * several calls for every selection method; ef NULL; and, with
 * --expect-unsupported (hosts of unequal size), SC_ERR_UNSUPPORTED. With
 * --device (the device stand-in, or CUDA), a sample of the same cases where
 * every step runs twice, on a device copy of the gradient with a device
 * residual and on the host gradient: the device results and residuals must
 * be the host's bit for bit (the host's are checked as above); and the
 * stream form refused with SC_ERR_UNSUPPORTED. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "lib/sparse/ef.h"
#include "test/multi/mr_common.h"

static sc_comm_t *comm;
static int L, H;
static const sc_devrt_t *rt; /* --device */
static void *ev;

static void dcopy(void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  MR_OK(rt->memcpy_async(dst, src, bytes, NULL));
  MR_OK(rt->event_record(ev, NULL));
  MR_OK(sc_dev_event_wait(rt, ev, 60000, "test copy"));
}

/* The step on g (host memory) with ef; under --device first on a device
 * copy of g with def, whose result and residual must be the same bits. */
static void gtopk(void *g, size_t n, sc_dtype_t dt, size_t k, sc_select_t m, sc_ef_t *ef,
                  sc_ef_t *def, const char *what) {
  if (!rt) {
    MR_OK(sc_gtopk_allreduce(n ? g : NULL, n, dt, k, m, ef, comm));
    return;
  }
  const size_t bytes = n * sc_dtype_size(dt);
  void *d = NULL, *back = malloc(bytes + 1), *hr = malloc(bytes + 1), *dr = malloc(bytes + 1);
  MR_OK(rt->malloc_device(&d, bytes + 1));
  dcopy(d, g, bytes);
  MR_OK(sc_gtopk_allreduce(d, n, dt, k, m, def, comm));
  MR_OK(sc_gtopk_allreduce(n ? g : NULL, n, dt, k, m, ef, comm));
  dcopy(back, d, bytes);
  mr_checks++;
  if (memcmp(back, g, bytes)) mr_fail("%s: device result differs from the host's", what);
  if (ef) {
    MR_OK(sc_ef_residual_read(ef, hr));
    MR_OK(sc_ef_residual_read(def, dr));
    mr_checks++;
    if (memcmp(hr, dr, bytes)) mr_fail("%s: device residual differs from the host's", what);
  }
  rt->free_device(d);
  free(back);
  free(hr);
  free(dr);
}

/* Rank r's gradient at call c, element i: integers in [-11, 11], many ties. */
static double input(int r, int c, size_t i) {
  return (double)((long)((i * 7 + (size_t)r * 13 + (size_t)c * 5 + i * i % 5) % 23) - 11);
}

typedef struct {
  size_t n, k;
  double *res;   /* [nranks][n] */
  double *total; /* [n], this call's sum of the selections */
} ref_t;

/* Top-kk of v[0..len) by magnitude, ties toward the lower index: sel[] = 1. */
static void ref_topk(const double *v, size_t len, size_t kk, unsigned char *sel) {
  memset(sel, 0, len ? len : 1);
  for (size_t t = 0; t < kk && t < len; t++) {
    size_t best = len;
    for (size_t i = 0; i < len; i++)
      if (!sel[i] && (best == len || fabs(v[i]) > fabs(v[best]))) best = i;
    sel[best] = 1;
  }
}

static void ref_step(ref_t *R, int c, int with_ef) {
  const size_t n = R->n, p = (size_t)mr_nranks;
  const size_t shard = (n + (size_t)L - 1) / (size_t)L;
  size_t kk = R->k > n ? n : R->k;
  size_t kl = (kk + (size_t)L - 1) / (size_t)L;
  double *hs = calloc(n ? n : 1, sizeof(double));
  unsigned char *sel = malloc(shard ? shard : 1);
  memset(R->total, 0, (n ? n : 1) * sizeof(double));
  for (int h = 0; h < H; h++) {
    memset(hs, 0, (n ? n : 1) * sizeof(double));
    for (int l = 0; l < L; l++) {
      const int r = h * L + l;
      for (size_t i = 0; i < n; i++) hs[i] += input(r, c, i) + (with_ef ? R->res[r * n + i] : 0);
    }
    for (int l = 0; l < L; l++) {
      const int r = h * L + l;
      size_t off = (size_t)l * shard < n ? (size_t)l * shard : n;
      size_t len = n - off < shard ? n - off : shard;
      ref_topk(hs + off, len, kl, sel);
      for (size_t i = 0; i < n; i++) R->res[r * n + i] = 0;
      for (size_t i = 0; i < len; i++) {
        if (sel[i])
          R->total[off + i] += hs[off + i];
        else
          R->res[r * n + off + i] = hs[off + i];
      }
    }
  }
  (void)p;
  free(hs);
  free(sel);
}

static double avg_of(double sum, sc_dtype_t dt) {
  if (dt == SC_FLOAT64) return sum / mr_nranks;
  return (double)((float)sum / (float)mr_nranks);
}

/* The result's bytes are the same on every rank. */
static void check_identical(const void *g, size_t bytes, const char *what) {
  uint8_t *all = malloc(bytes * (size_t)mr_nranks + 1);
  MR_OK(sc_allgather(g, all, bytes, SC_UINT8, comm));
  for (int r = 0; r < mr_nranks; r++) {
    mr_checks++;
    if (memcmp(all + (size_t)r * bytes, g, bytes)) {
      mr_fail("%s: rank %d's result differs from rank %d's", what, r, mr_rank);
      break;
    }
  }
  free(all);
}

/* Exact reference, method EXACT, ef on (3 calls) and off (1 call). */
static void exact_case(size_t n, size_t k, sc_dtype_t dt) {
  const size_t es = dt == SC_FLOAT64 ? 8 : 4, p = (size_t)mr_nranks;
  ref_t R = {n, k, calloc(p * (n ? n : 1), sizeof(double)), calloc(n ? n : 1, sizeof(double))};
  void *g = malloc((n ? n : 1) * es), *res = malloc((n ? n : 1) * es);
  char what[128];
  sc_ef_t *ef = NULL, *def = NULL;
  MR_OK(sc_ef_create(n, dt, &ef));
  if (rt) MR_OK(sc_ef_create(n, dt, &def));
  for (int c = 0; c < 3; c++) {
    for (size_t i = 0; i < n; i++) mr_set(g, i, dt, input(mr_rank, c, i));
    snprintf(what, sizeof what, "%dx%d n=%zu k=%zu %s call %d", H, L, n, k,
             dt == SC_FLOAT64 ? "float64" : "float32", c);
    gtopk(g, n, dt, k, SC_SELECT_EXACT, ef, def, what);
    ref_step(&R, c, 1);
    MR_OK(sc_ef_residual_read(ef, res));
    for (size_t i = 0; i < n; i++) {
      mr_checks += 2;
      double want = avg_of(R.total[i], dt), got = mr_get(g, i, dt);
      if (memcmp(&want, &got, 8)) {
        mr_fail("%s: grad[%zu] = %.9g, want %.9g", what, i, got, want);
        break;
      }
      if (mr_get(res, i, dt) != R.res[(size_t)mr_rank * n + i]) {
        mr_fail("%s: residual[%zu] = %.9g, want %.9g", what, i, mr_get(res, i, dt),
                R.res[(size_t)mr_rank * n + i]);
        break;
      }
    }
    check_identical(g, n * es, what);
  }
  MR_OK(sc_ef_destroy(ef));
  MR_OK(sc_ef_destroy(def));
  /* No error feedback: one step on the call-0 input. */
  for (size_t i = 0; i < p * n; i++) R.res[i] = 0;
  for (size_t i = 0; i < n; i++) mr_set(g, i, dt, input(mr_rank, 0, i));
  snprintf(what, sizeof what, "%dx%d n=%zu k=%zu no ef", H, L, n, k);
  gtopk(g, n, dt, k, SC_SELECT_EXACT, NULL, NULL, what);
  ref_step(&R, 0, 0);
  for (size_t i = 0; i < n; i++) {
    mr_checks++;
    if (mr_get(g, i, dt) != avg_of(R.total[i], dt)) {
      mr_fail("%dx%d n=%zu k=%zu no ef: grad[%zu] = %.9g, want %.9g", H, L, n, k, i,
              mr_get(g, i, dt), avg_of(R.total[i], dt));
      break;
    }
  }
  free(R.res);
  free(R.total);
  free(g);
  free(res);
}

/* Every method, non-integer inputs, 4 calls: identical results and
 * sum(inputs) = sum(residuals) + nranks * sum(results), within rounding. */
static void conservation_case(size_t n, size_t k, sc_dtype_t dt, sc_select_t m) {
  const size_t es = dt == SC_FLOAT64 ? 8 : 4;
  void *g = malloc(n * es), *res = malloc(n * es);
  double *sent = calloc(n, sizeof(double)), *got = calloc(n, sizeof(double));
  sc_ef_t *ef = NULL, *def = NULL;
  MR_OK(sc_ef_create(n, dt, &ef));
  if (rt) MR_OK(sc_ef_create(n, dt, &def));
  for (int c = 0; c < 4; c++) {
    for (size_t i = 0; i < n; i++) {
      double v = sin((double)(i + 1) * 0.37 + mr_rank * 1.3 + c * 0.11) * (1 + (double)(i % 7));
      mr_set(g, i, dt, v);
      sent[i] += mr_get(g, i, dt);
    }
    gtopk(g, n, dt, k, m, ef, def, "conservation");
    check_identical(g, n * es, "conservation");
    for (size_t i = 0; i < n; i++) got[i] += mr_get(g, i, dt) * mr_nranks;
  }
  MR_OK(sc_ef_residual_read(ef, res));
  /* Per element: sum over ranks of (sent - residual) = nranks * the results. */
  double *mine = malloc(n * sizeof(double)), *sum = malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++) mine[i] = sent[i] - mr_get(res, i, dt);
  MR_OK(sc_allreduce(mine, sum, n, SC_FLOAT64, SC_SUM, comm));
  const double tol = dt == SC_FLOAT64 ? 1e-9 : 1e-3;
  for (size_t i = 0; i < n; i++) {
    mr_checks++;
    if (fabs(sum[i] - got[i]) > tol * (1 + fabs(got[i]))) {
      mr_fail("conservation %dx%d n=%zu k=%zu method %d: element %zu moved %.9g, delivered %.9g", H,
              L, n, k, (int)m, i, sum[i], got[i]);
      break;
    }
  }
  MR_OK(sc_ef_destroy(ef));
  MR_OK(sc_ef_destroy(def));
  free(g);
  free(res);
  free(sent);
  free(got);
  free(mine);
  free(sum);
}

int main(int argc, char **argv) {
  int unsupported = 0, device = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--expect-unsupported")) unsupported = 1;
    if (!strcmp(argv[i], "--device")) device = 1;
  }
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  const char *rph = getenv("SC_RANKS_PER_HOST");
  L = rph && atoi(rph) > 0 ? atoi(rph) : mr_nranks;
  if (L > mr_nranks) L = mr_nranks;
  H = (mr_nranks + L - 1) / L;
  int lr, ls, hi, nh;
  MR_OK(sc_comm_local(comm, &lr, &ls, &hi, &nh));
  mr_checks++;
  if (!unsupported && (nh != H || ls != L || lr != mr_rank % L || hi != mr_rank / L))
    mr_fail("layout: local rank %d of %d on host %d of %d, want %d of %d on %d of %d", lr, ls, hi,
            nh, mr_rank % L, L, mr_rank / L, H);
  if (device) {
    rt = sc_devrt();
    void *d = NULL, *s = NULL;
    if (!rt || rt->device_count() < 1 || rt->malloc_device(&d, 64) != SC_SUCCESS) {
      printf("skipped: no device runtime\n");
      sc_comm_destroy(comm);
      return 77;
    }
    MR_OK(rt->event_create(&ev));
    MR_OK(rt->stream_create(&s));
    mr_checks++;
    sc_result_t r = sc_gtopk_allreduce_on_stream(d, 16, SC_FLOAT32, 2, SC_SELECT_EXACT, NULL, comm,
                                                 (sc_stream_t)s);
    if (r != SC_ERR_UNSUPPORTED || !strstr(sc_last_error(), "stream form"))
      mr_fail("hitopk stream form: %s (%s), want SC_ERR_UNSUPPORTED", sc_strerror(r),
              sc_last_error());
    rt->stream_destroy(s);
    rt->free_device(d);
    const size_t ns[] = {0, 1, 13, 100};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
      exact_case(ns[a], 3, a % 2 ? SC_FLOAT64 : SC_FLOAT32);
      exact_case(ns[a], ns[a] + 5, a % 2 ? SC_FLOAT32 : SC_FLOAT64);
    }
    exact_case(101, 7, SC_FLOAT32);
    for (int m = SC_SELECT_EXACT; m <= SC_SELECT_MSTOPK; m++)
      conservation_case(211, 17, m % 2 ? SC_FLOAT64 : SC_FLOAT32, (sc_select_t)m);
    rt->event_destroy(ev);
  } else if (unsupported) {
    float g[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    mr_checks++;
    sc_result_t r = sc_gtopk_allreduce(g, 8, SC_FLOAT32, 2, SC_SELECT_EXACT, NULL, comm);
    if (r != SC_ERR_UNSUPPORTED || !strstr(sc_last_error(), "same number of ranks"))
      mr_fail("hosts of unequal size: %s (%s), want SC_ERR_UNSUPPORTED", sc_strerror(r),
              sc_last_error());
  } else {
    const size_t ns[] = {0, 1, 2, 13, 100, 257};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
      const size_t n = ns[a];
      const size_t ks[] = {1, 3, n / 2, n, n + 5};
      for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
        if (b && ks[b] == ks[b - 1]) continue;
        exact_case(n, ks[b], (a + b) % 2 ? SC_FLOAT64 : SC_FLOAT32);
      }
    }
    exact_case(101, 7, SC_FLOAT32);
    exact_case(101, 7, SC_FLOAT64);
    for (int m = SC_SELECT_EXACT; m <= SC_SELECT_MSTOPK; m++) {
      conservation_case(211, 17, SC_FLOAT32, (sc_select_t)m);
      conservation_case(211, 60, SC_FLOAT64, (sc_select_t)m);
    }
  }
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
