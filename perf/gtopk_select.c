/* SPDX-License-Identifier: BSD-3-Clause */
/* `sc_gtopk_perf --select`: times sc_topk's exact selection against its
 * Gaussian-k and MSTopK selections on normal (default), Laplace, Student-t(3) or skewed
 * data (--dist), and reports the count Gaussian-k returns against k and the
 * fraction of MSTopK's k entries among the exact top k. With --sort it also
 * times the baseline both replace: a full qsort by magnitude. With --mem
 * device it also times both selectors on a device copy of the same vector
 * (sc_topk on device memory) and checks the device's exact selection
 * against the host's. Only the public API selects; the device copy is made
 * through perf/perf_mem.h. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf/gtopk_select.h"
#include "perf/perf_mem.h"
#include "sparsecoll.h"

typedef struct sel_opts {
  size_t n, k;
  double density;
  sc_dtype_t dtype;
  const char *dtype_name;
  const char *dist; /* normal | laplace | student-t3 | skewed */
  int iters, sort;
  uint64_t seed;
  const char *json;
  perf_mem_t mem;
} sel_opts_t;

static void sel_usage(FILE *f) {
  fprintf(f, "usage: sc_gtopk_perf --select [-n N] [-k K | --density D] [--dtype T] [--iters I]\n"
             "                     [--dist D] [--seed S] [--sort] [--mem host|device] [-J FILE]\n"
             "  -n         elements (default 26214400 = 25*2^20)\n"
             "  -k         entries to select (default density * n)\n"
             "  --density  k / n (default 0.001)\n"
             "  --dtype    float | half | bfloat16 | double (default float)\n"
             "  --iters    timed runs of each selector, median reported (default 10, max 1000)\n"
             "  --dist     normal | laplace | student-t3 | skewed (half the entries\n"
             "             folded non-negative) | ef (error feedback's residual: a constant\n"
             "             Laplace gradient accumulated over 50 steps, each zeroing the\n"
             "             exact top k) (default normal)\n"
             "  --seed     data seed (default 1)\n"
             "  --sort     also time a full qsort by magnitude (slow: seconds at the default n)\n"
             "  --mem      device: also time both selectors on a device copy of the vector\n"
             "             (and check the device's exact result against the host's)\n"
             "  -J FILE    also write the results as JSON\n");
}

static int sel_parse(int argc, char **argv, sel_opts_t *o) {
  *o = (sel_opts_t){.n = 25u << 20,
                    .density = 0.001,
                    .dtype = SC_FLOAT32,
                    .dtype_name = "float",
                    .dist = "normal",
                    .iters = 10,
                    .seed = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--select")) continue;
    if (!strcmp(a, "--sort")) {
      o->sort = 1;
      continue;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      sel_usage(stdout);
      return 1;
    }
    const char *v = i + 1 < argc ? argv[++i] : NULL;
    char *end = NULL;
    if (!v) {
      fprintf(stderr, "sc_gtopk_perf --select: %s needs a value\n", a);
      return -1;
    }
    errno = 0;
    if (!strcmp(a, "-n")) {
      o->n = strtoull(v, &end, 10);
    } else if (!strcmp(a, "-k")) {
      o->k = strtoull(v, &end, 10);
    } else if (!strcmp(a, "--density")) {
      o->density = strtod(v, &end);
    } else if (!strcmp(a, "--iters")) {
      o->iters = (int)strtol(v, &end, 10);
    } else if (!strcmp(a, "--dist")) {
      if (strcmp(v, "normal") && strcmp(v, "laplace") && strcmp(v, "student-t3") &&
          strcmp(v, "skewed") && strcmp(v, "ef")) {
        fprintf(stderr, "sc_gtopk_perf --select: unknown --dist %s\n", v);
        return -1;
      }
      o->dist = v;
      continue;
    } else if (!strcmp(a, "--mem")) {
      if (perf_mem_parse(v, &o->mem)) {
        fprintf(stderr, "sc_gtopk_perf --select: --mem: '%s' is neither host nor device\n", v);
        return -1;
      }
      continue;
    } else if (!strcmp(a, "--seed")) {
      o->seed = strtoull(v, &end, 10);
    } else if (!strcmp(a, "-J") || !strcmp(a, "--json")) {
      o->json = v;
      end = (char *)v + strlen(v);
    } else if (!strcmp(a, "--dtype") || !strcmp(a, "-d")) {
      static const char *const names[] = {"float", "half", "bfloat16", "double"};
      static const sc_dtype_t types[] = {SC_FLOAT32, SC_FLOAT16, SC_BFLOAT16, SC_FLOAT64};
      int found = 0;
      for (int j = 0; j < 4; j++)
        if (!strcmp(v, names[j])) {
          o->dtype = types[j];
          o->dtype_name = names[j];
          found = 1;
        }
      if (!found) {
        fprintf(stderr, "sc_gtopk_perf --select: unknown dtype %s\n", v);
        return -1;
      }
      end = (char *)v + strlen(v);
    } else {
      fprintf(stderr, "sc_gtopk_perf --select: unknown option %s\n", a);
      sel_usage(stderr);
      return -1;
    }
    if (errno || !end || *end) {
      fprintf(stderr, "sc_gtopk_perf --select: bad value %s for %s\n", v, a);
      return -1;
    }
  }
  if (o->n == 0 || o->n > UINT32_MAX) {
    fprintf(stderr, "sc_gtopk_perf --select: -n must be in [1, %u]\n", (unsigned)UINT32_MAX);
    return -1;
  }
  if (o->k == 0) {
    if (!(o->density > 0 && o->density <= 1)) {
      fprintf(stderr, "sc_gtopk_perf --select: --density must be in (0, 1]\n");
      return -1;
    }
    o->k = (size_t)(o->density * (double)o->n);
    if (o->k == 0) o->k = 1;
  }
  if (o->k > o->n) o->k = o->n;
  if (o->iters < 1 || o->iters > 1000) {
    fprintf(stderr, "sc_gtopk_perf --select: --iters must be in [1, 1000]\n");
    return -1;
  }
  return 0;
}

/* ---- data ---- */

static uint64_t sel_rng;

static uint64_t sel_next(void) {
  uint64_t z = (sel_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double sel_unit(void) {
  return ((double)(sel_next() >> 11) + 1.0) * 0x1p-53;
}

/* Nearest fp16 (ties to even via lrint); finite inputs only. */
static uint16_t sel_to_half(double v) {
  uint16_t s = signbit(v) ? 0x8000u : 0;
  v = fabs(v);
  if (v >= 65520.0) return s | 0x7c00u;
  if (v < 0x1p-14) return (uint16_t)(s | (uint16_t)lrint(v * 0x1p24));
  int e;
  double f = frexp(v, &e); /* v = 2f * 2^(e-1), 2f in [1, 2) */
  long m = lrint((2 * f - 1) * 1024);
  return (uint16_t)(s | (uint16_t)((((long)e - 1 + 15) << 10) + m));
}

static uint16_t sel_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static void sel_store(sc_dtype_t t, void *buf, size_t i, double v) {
  float f = (float)v;
  uint16_t h;
  switch (t) {
  case SC_FLOAT16:
    h = sel_to_half(v);
    memcpy((char *)buf + 2 * i, &h, 2);
    break;
  case SC_BFLOAT16:
    h = sel_to_bf16(f);
    memcpy((char *)buf + 2 * i, &h, 2);
    break;
  case SC_FLOAT32:
    memcpy((char *)buf + 4 * i, &f, 4);
    break;
  default:
    memcpy((char *)buf + 8 * i, &v, 8);
    break;
  }
}

/* N(0,1) by Marsaglia's polar method, one draw (the pair's second is
 * dropped: the other distributions need a variable number per entry). */
static double sel_normal(void) {
  double u, w, s;
  do {
    u = 2 * sel_unit() - 1;
    w = 2 * sel_unit() - 1;
    s = u * u + w * w;
  } while (s >= 1.0);
  return u * sqrt(-2.0 * log(s) / s);
}

static double sel_draw(const char *dist, size_t i) {
  if (!strcmp(dist, "laplace")) {
    double e = -log(sel_unit());
    return sel_unit() < 0.5 ? -e : e;
  }
  if (!strcmp(dist, "student-t3")) {
    double z = sel_normal(), a = sel_normal(), b = sel_normal(), c = sel_normal();
    return z / sqrt((a * a + b * b + c * c) / 3.0);
  }
  double z = sel_normal();
  return !strcmp(dist, "skewed") && i % 2 ? fabs(z) : z;
}

/* What sc_gtopk_allreduce selects from: acc = gradient + residual. With a
 * constant gradient, an entry of the residual grows until it is picked, so
 * the top of acc ends at a front rather than in a tail. */
enum { SEL_EF_STEPS = 50 };
static int sel_fill_ef(sc_dtype_t t, void *buf, size_t n, size_t k) {
  double *g = malloc(n * sizeof *g), *acc = calloc(n, sizeof *acc);
  /* sc_topk's outputs hold 2k (GAUSSIAN may return that many). */
  uint32_t *idx = malloc((2 * k + 1) * sizeof *idx);
  double *val = malloc((2 * k + 1) * sizeof *val);
  int rc = -1;
  if (!g || !acc || !idx || !val) goto out;
  for (size_t i = 0; i < n; i++) g[i] = 0.1 * sel_draw("laplace", i);
  for (int s = 0; s < SEL_EF_STEPS; s++) {
    for (size_t i = 0; i < n; i++) acc[i] += g[i];
    if (s + 1 == SEL_EF_STEPS) break; /* the last step's acc is what is selected from */
    size_t nnz = 0;
    if (sc_topk(acc, n, SC_FLOAT64, k, SC_SELECT_EXACT, idx, val, &nnz) != SC_SUCCESS) goto out;
    for (size_t j = 0; j < nnz; j++) acc[idx[j]] = 0;
  }
  for (size_t i = 0; i < n; i++) sel_store(t, buf, i, acc[i]);
  rc = 0;
out:
  free(g);
  free(acc);
  free(idx);
  free(val);
  return rc;
}

static int sel_fill(sc_dtype_t t, void *buf, size_t n, size_t k, const char *dist, uint64_t seed) {
  sel_rng = seed * 0x9e3779b97f4a7c15ull + 1;
  if (!strcmp(dist, "ef")) return sel_fill_ef(t, buf, n, k);
  for (size_t i = 0; i < n; i++) sel_store(t, buf, i, sel_draw(dist, i));
  return 0;
}

/* ---- timing ---- */

static double sel_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int sel_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double sel_median(double *v, int m) {
  qsort(v, (size_t)m, sizeof *v, sel_cmp_double);
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

typedef struct sel_ent {
  float mag;
  uint32_t idx;
} sel_ent_t;

static int sel_by_mag(const void *pa, const void *pb) {
  const sel_ent_t *a = pa, *b = pb;
  if (a->mag != b->mag) return a->mag > b->mag ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* The baseline: sort (|v|, index) pairs; the top k are the first k. float32
 * magnitudes suffice for timing on every dtype. */
static double sel_sort_ms(const void *buf, const sel_opts_t *o) {
  sel_ent_t *e = malloc(o->n * sizeof *e);
  if (!e) return -1;
  double t0 = sel_now_ms();
  for (size_t i = 0; i < o->n; i++) {
    double v;
    if (o->dtype == SC_FLOAT32)
      v = ((const float *)buf)[i];
    else if (o->dtype == SC_FLOAT64)
      v = ((const double *)buf)[i];
    else
      v = (double)(((const uint16_t *)buf)[i] & 0x7fffu); /* orders like |v| */
    e[i].mag = (float)fabs(v);
    e[i].idx = (uint32_t)i;
  }
  qsort(e, o->n, sizeof *e, sel_by_mag);
  double t = sel_now_ms() - t0;
  free(e);
  return t;
}

/* ---- --mem device ---- */

typedef struct sel_dev {
  double exact_ms, gauss_ms;
  size_t nnz_exact, nnz_gauss;
  int exact_same; /* the host's exact indices and values, bit for bit */
  int gauss_same; /* the host's Gaussian-k result (not promised: the
                     threshold may round differently on a GPU) */
} sel_dev_t;

static int sel_topk_or_say(const void *x, const sel_opts_t *o, sc_select_t m, uint32_t *idx,
                           void *vals, size_t *nnz, const char *where) {
  sc_result_t r = sc_topk(x, o->n, o->dtype, o->k, m, idx, vals, nnz);
  if (r == SC_SUCCESS) return 0;
  fprintf(stderr, "sc_gtopk_perf --select: sc_topk on %s memory failed: %s (%s)\n", where,
          sc_strerror(r), sc_last_error());
  return -1;
}

/* One selection on the host and on the device; 1 if both found the same. */
static int sel_same(const sel_opts_t *o, sc_select_t m, const void *buf, const void *dx,
                    uint32_t *didx, void *dval, uint32_t *hi, void *hv, uint32_t *gi, void *gv,
                    size_t *dev_nnz) {
  size_t es = sc_dtype_size(o->dtype), hn = 0;
  if (sel_topk_or_say(buf, o, m, hi, hv, &hn, "host") ||
      sel_topk_or_say(dx, o, m, didx, dval, dev_nnz, "device"))
    return -1;
  if (*dev_nnz != hn) return 0;
  perf_dev_download(gi, didx, hn * sizeof *gi);
  perf_dev_download(gv, dval, hn * es);
  return !memcmp(hi, gi, hn * sizeof *hi) && !memcmp(hv, gv, hn * es);
}

/* Both selectors on a device copy of buf, timed like the host's (te, tg:
 * scratch for iters times), then each checked against the host's. */
static int sel_device(const sel_opts_t *o, const void *buf, double *te, double *tg, sel_dev_t *d) {
  size_t es = sc_dtype_size(o->dtype), cap = 2 * o->k;
  void *dx = perf_dev_alloc(o->n * es);
  uint32_t *didx = perf_dev_alloc(cap * sizeof *didx);
  void *dval = perf_dev_alloc(cap * es);
  uint32_t *hi = malloc(cap * sizeof *hi), *gi = malloc(cap * sizeof *gi);
  void *hv = malloc(cap * es), *gv = malloc(cap * es);
  int rc = -1;
  if (!hi || !gi || !hv || !gv) {
    fprintf(stderr, "sc_gtopk_perf --select: out of memory for k = %zu\n", o->k);
    goto out;
  }
  perf_dev_upload(dx, buf, o->n * es);
  for (int it = -1; it < o->iters; it++) {
    double t0 = sel_now_ms();
    if (sel_topk_or_say(dx, o, SC_SELECT_EXACT, didx, dval, &d->nnz_exact, "device")) goto out;
    double t1 = sel_now_ms();
    if (sel_topk_or_say(dx, o, SC_SELECT_GAUSSIAN, didx, dval, &d->nnz_gauss, "device")) goto out;
    double t2 = sel_now_ms();
    if (it >= 0) {
      te[it] = t1 - t0;
      tg[it] = t2 - t1;
    }
  }
  d->exact_ms = sel_median(te, o->iters);
  d->gauss_ms = sel_median(tg, o->iters);
  d->exact_same = sel_same(o, SC_SELECT_EXACT, buf, dx, didx, dval, hi, hv, gi, gv, &d->nnz_exact);
  d->gauss_same =
      sel_same(o, SC_SELECT_GAUSSIAN, buf, dx, didx, dval, hi, hv, gi, gv, &d->nnz_gauss);
  if (d->exact_same >= 0 && d->gauss_same >= 0) rc = 0;
out:
  perf_dev_free(dx);
  perf_dev_free(didx);
  perf_dev_free(dval);
  free(hi);
  free(gi);
  free(hv);
  free(gv);
  return rc;
}

static void sel_json_device(FILE *f, const sel_dev_t *d) {
  if (!d) {
    fprintf(f, "null");
    return;
  }
  fprintf(f,
          "{\"runtime\": \"%s\", \"exact_ms\": %.6g, \"gaussian_ms\": %.6g, "
          "\"exact_count\": %zu, \"gaussian_count\": %zu, \"exact_same_as_host\": %s, "
          "\"gaussian_same_as_host\": %s}",
          perf_mem_runtime_name(), d->exact_ms, d->gauss_ms, d->nnz_exact, d->nnz_gauss,
          d->exact_same > 0 ? "true" : "false", d->gauss_same > 0 ? "true" : "false");
}

/* MSTopK's time, count and overlap with the exact selection (host). */
typedef struct sel_ms {
  double ms, overlap;
  size_t count;
} sel_ms_t;

/* |a and b| / k for two ascending index lists. */
static double sel_overlap(const uint32_t *a, size_t na, const uint32_t *b, size_t nb, size_t k) {
  size_t i = 0, j = 0, both = 0;
  while (i < na && j < nb) {
    if (a[i] == b[j]) {
      both++;
      i++;
      j++;
    } else if (a[i] < b[j]) {
      i++;
    } else {
      j++;
    }
  }
  return k ? (double)both / (double)k : 1.0;
}

static int sel_write_json(const sel_opts_t *o, double exact_ms, double gauss_ms, double sort_ms,
                          size_t count, const sel_ms_t *ms, const sel_dev_t *dev) {
  FILE *f = fopen(o->json, "w");
  if (!f) {
    fprintf(stderr, "sc_gtopk_perf --select: cannot write %s: %s\n", o->json, strerror(errno));
    return -1;
  }
  fprintf(f,
          "{\n  \"binary\": \"sc_gtopk_perf\",\n  \"mode\": \"select\",\n  \"n\": %zu,\n"
          "  \"k\": %zu,\n  \"density\": %.6g,\n  \"dtype\": \"%s\",\n  \"dist\": \"%s\",\n"
          "  \"iters\": %d,\n"
          "  \"seed\": %llu,\n  \"exact_ms\": %.6g,\n  \"gaussian_ms\": %.6g,\n"
          "  \"speedup\": %.6g,\n  \"gaussian_count\": %zu,\n  \"count_over_k\": %.6g,\n"
          "  \"mstopk_ms\": %.6g,\n  \"mstopk_speedup\": %.6g,\n  \"mstopk_count\": %zu,\n"
          "  \"mstopk_overlap\": %.6g,\n  \"sort_ms\": ",
          o->n, o->k, (double)o->k / (double)o->n, o->dtype_name, o->dist, o->iters,
          (unsigned long long)o->seed, exact_ms, gauss_ms, exact_ms / gauss_ms, count,
          (double)count / (double)o->k, ms->ms, exact_ms / ms->ms, ms->count, ms->overlap);
  if (sort_ms >= 0)
    fprintf(f, "%.6g,\n  \"device\": ", sort_ms);
  else
    fprintf(f, "null,\n  \"device\": ");
  sel_json_device(f, dev);
  fprintf(f, "\n}\n");
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "sc_gtopk_perf --select: error writing %s\n", o->json);
    return -1;
  }
  return 0;
}

int sc_gtopk_select_main(int argc, char **argv) {
  sel_opts_t o;
  int pr = sel_parse(argc, argv, &o);
  if (pr) return pr > 0 ? 0 : 2;
  if (o.mem == PERF_MEM_DEVICE) {
    if (perf_mem_device_ready("sc_gtopk_perf --select") != 0) return 2;
    perf_mem_pick_device(0);
  }
  size_t es = sc_dtype_size(o.dtype);
  void *buf = malloc(o.n * es);
  uint32_t *idx = malloc(2 * o.k * sizeof *idx);
  void *vals = malloc(2 * o.k * es);
  double *te = malloc((size_t)o.iters * sizeof *te);
  double *tg = malloc((size_t)o.iters * sizeof *tg);
  double *tm = malloc((size_t)o.iters * sizeof *tm);
  uint32_t *eidx = malloc(o.k * sizeof *eidx);
  sel_ms_t ms = {0};
  int rc = 1;
  if (!buf || !idx || !vals || !te || !tg || !tm || !eidx) {
    fprintf(stderr, "sc_gtopk_perf --select: out of memory for n = %zu\n", o.n);
    goto out;
  }
  if (sel_fill(o.dtype, buf, o.n, o.k, o.dist, o.seed)) {
    fprintf(stderr, "sc_gtopk_perf --select: out of memory for --dist %s at n = %zu\n", o.dist,
            o.n);
    goto out;
  }
  size_t nnz_exact = 0, nnz_gauss = 0;
  /* One untimed run of each first (page faults in the output arrays). */
  for (int it = -1; it < o.iters; it++) {
    double t0 = sel_now_ms();
    sc_result_t r = sc_topk(buf, o.n, o.dtype, o.k, SC_SELECT_EXACT, idx, vals, &nnz_exact);
    double t1 = sel_now_ms();
    if (r == SC_SUCCESS) memcpy(eidx, idx, nnz_exact * sizeof *eidx);
    if (r == SC_SUCCESS)
      r = sc_topk(buf, o.n, o.dtype, o.k, SC_SELECT_GAUSSIAN, idx, vals, &nnz_gauss);
    double t2 = sel_now_ms();
    if (r == SC_SUCCESS)
      r = sc_topk(buf, o.n, o.dtype, o.k, SC_SELECT_MSTOPK, idx, vals, &ms.count);
    double t3 = sel_now_ms();
    if (r != SC_SUCCESS) {
      fprintf(stderr, "sc_gtopk_perf --select: sc_topk failed: %s (%s)\n", sc_strerror(r),
              sc_last_error());
      goto out;
    }
    if (it >= 0) {
      te[it] = t1 - t0;
      tg[it] = t2 - t1;
      tm[it] = t3 - t2;
    }
  }
  double exact_ms = sel_median(te, o.iters), gauss_ms = sel_median(tg, o.iters);
  ms.ms = sel_median(tm, o.iters);
  ms.overlap = sel_overlap(eidx, nnz_exact, idx, ms.count, o.k);
  double sort_ms = o.sort ? sel_sort_ms(buf, &o) : -1;
  sel_dev_t dev = {0};
  if (o.mem == PERF_MEM_DEVICE && sel_device(&o, buf, te, tg, &dev) != 0) goto out;
  printf("# top-k selection on %s data: n %zu, k %zu (density %.6g), dtype %s, median of "
         "%d\n",
         o.dist, o.n, o.k, (double)o.k / (double)o.n, o.dtype_name, o.iters);
  printf("#  %12s %12s %9s %10s %8s %12s\n", "exact_ms", "gaussian_ms", "speedup", "count",
         "count/k", "sort_ms");
  printf("   %12.3f %12.3f %9.2f %10zu %8.3f ", exact_ms, gauss_ms, exact_ms / gauss_ms, nnz_gauss,
         (double)nnz_gauss / (double)o.k);
  if (sort_ms >= 0)
    printf("%12.3f\n", sort_ms);
  else
    printf("%12s\n", "-");
  printf("# MSTopK (SC_SELECT_MSTOPK): overlap = its entries among the exact top k, / k\n");
  printf("#  %12s %12s %9s %10s %8s\n", "exact_ms", "mstopk_ms", "speedup", "count", "overlap");
  printf("   %12.3f %12.3f %9.2f %10zu %8.4f\n", exact_ms, ms.ms, exact_ms / ms.ms, ms.count,
         ms.overlap);
  if (o.mem == PERF_MEM_DEVICE) {
    printf("# the same vector in device memory (%s): time ratios device / host\n",
           perf_mem_runtime_name());
    printf("#  %12s %12s %9s %10s %8s %12s %12s %11s %11s\n", "exact_ms", "gaussian_ms", "speedup",
           "count", "count/k", "exact/host", "gauss/host", "exact_same", "gauss_same");
    printf("   %12.3f %12.3f %9.2f %10zu %8.3f %12.3f %12.3f %11s %11s\n", dev.exact_ms,
           dev.gauss_ms, dev.exact_ms / dev.gauss_ms, dev.nnz_gauss,
           (double)dev.nnz_gauss / (double)o.k, dev.exact_ms / exact_ms, dev.gauss_ms / gauss_ms,
           dev.exact_same ? "yes" : "NO", dev.gauss_same ? "yes" : "no");
  }
  if (nnz_exact != o.k)
    fprintf(stderr, "sc_gtopk_perf --select: exact selection returned %zu, not k = %zu\n",
            nnz_exact, o.k);
  rc = nnz_exact == o.k ? 0 : 1;
  /* The exact selection is defined bit for bit: the device must agree. */
  if (o.mem == PERF_MEM_DEVICE && !dev.exact_same) {
    fprintf(stderr, "sc_gtopk_perf --select: the device's exact selection differs from the "
                    "host's\n");
    rc = 1;
  }
  if (ms.count != o.k) {
    fprintf(stderr, "sc_gtopk_perf --select: MSTopK returned %zu, not k = %zu\n", ms.count, o.k);
    rc = 1;
  }
  if (o.json && sel_write_json(&o, exact_ms, gauss_ms, sort_ms, nnz_gauss, &ms,
                               o.mem == PERF_MEM_DEVICE ? &dev : NULL) != 0)
    rc = 1;
out:
  free(buf);
  free(idx);
  free(vals);
  free(te);
  free(tg);
  free(tm);
  free(eidx);
  return rc;
}
