/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_gtopk_perf: the gTop-k microbenchmark of the papers (n = 25 * 2^20,
 * density 0.001) for sc_sparse_allreduce's algorithms against the dense
 * all-reduce of the same vector. Per algorithm: the median over iterations of
 * the slowest rank's time, the dense-equivalent algbw (n * dtype size /
 * time), the bytes this rank's schedules actually posted (max and mean over
 * ranks), and with -c 1 a check of every rank's result against a reference
 * computed here from all ranks' inputs (regenerated from the seeds): its own
 * Merge and merge trees, the exact sum for allgather, n x P for dense.
 * Also the latency of an 8-byte all-reduce, which the time-vs-ranks figure
 * (perf/plot.py) turns into the alpha of the cost model; -J writes it all as
 * JSON, one file per rank count. --mem device puts every buffer of the
 * timed calls in device memory (inputs copied there once, results copied
 * back for the check).
 * `--select` runs the top-k selection benchmark instead (perf/gtopk_select.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/sparse_registry.h"
#include "kernels/cpu/sparse_merge.h"
#include "lib/sparse/sparse.h"
#include "perf/gtopk_select.h"
#include "perf/perf_internal.h"

typedef struct opts {
  size_t n, k;
  double density;
  sc_dtype_t dtype;
  const char *dtype_name;
  int algo; /* a row (below); -1: all */
  int iters, warmup, check;
  const char *json;
  perf_mem_t mem;
} opts_t;

/* The rows: the library's sparse algorithms (algorithms/sparse_registry.h)
 * in the registry's order, then the dense all-reduce of the same vector
 * (row a_dense). "all" leaves out the algorithms for hosts that hold several
 * ranks (hier): they run only when asked for. */
enum { A_MAX = SC_SPARSE_ALGO_COUNT + 1 };
/* -a auto: the algorithm sc_gtopk_allreduce would run for this k (decided
 * once the communicator exists). */
enum { A_AUTO = -3 };
static const sc_sparse_algo_entry_t *g_algos;
static int a_dense, a_count;

static void rows_init(void) {
  g_algos = sc_sparse_algos(&a_dense);
  a_count = a_dense + 1;
}

static const char *row_name(int al) {
  return al == a_dense ? "dense" : g_algos[al].name;
}

/* Every rank's host (sc_comm_local, all-gathered): hier's reference. */
static int *g_host_of;

static void *xmalloc(size_t n);

static void usage(FILE *f) {
  fprintf(f, "usage: sc_gtopk_perf [-n DENSE_LEN] [-k K | --density D] [-a ALGO] [-d DTYPE]\n"
             "                     [-w WARMUP] [-i ITERS] [-c 0|1] [--mem host|device] [-J FILE]\n"
             "       sc_gtopk_perf --select [selection benchmark options]\n"
             "  -n   dense length (default 26214400 = 25*2^20)\n"
             "  -k   entries per rank and kept by each merge (default density * n)\n"
             "  --density  k / n (default 0.001)\n"
             "  -a   ");
  for (int al = 0; al < a_count; al++)
    if (al == a_dense || g_algos[al].gen) fprintf(f, "%s | ", row_name(al));
  fprintf(f, "all | auto\n"
             "       (default all: all but");
  for (int al = 0; al < a_dense; al++)
    if (g_algos[al].hier) fprintf(f, " %s", g_algos[al].name);
  fprintf(f, "; auto: what sc_gtopk_allreduce runs for this k,\n"
             "       SC_GTOPK_ALGO, else the cost model's pick; hitopk starts from dense\n"
             "       gradients inside sc_gtopk_allreduce and is no row here)\n"
             "  -d   float | double | half | bfloat16 (default float)\n"
             "  -w, -i  warm-up and timed iterations (default 2, 10; at most 64)\n"
             "  -c   check every result against the reference (default 1)\n"
             "  --mem  host | device: where the buffers of the timed calls live (default host)\n"
             "  -J   also write the results as JSON to FILE (rank 0)\n"
             "Run under sc-run, e.g. sc-run -n 4 sc_gtopk_perf.\n");
}

static int parse(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.n = 25u << 20,
                .density = 0.001,
                .dtype = SC_FLOAT32,
                .dtype_name = "float",
                .algo = -1,
                .iters = 10,
                .warmup = 2,
                .check = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (!v) goto bad;
    i++;
    if (!strcmp(a, "-n")) {
      o->n = strtoull(v, NULL, 10);
    } else if (!strcmp(a, "-k")) {
      o->k = strtoull(v, NULL, 10);
    } else if (!strcmp(a, "--density")) {
      o->density = strtod(v, NULL);
    } else if (!strcmp(a, "-a")) {
      o->algo = -2;
      for (int j = 0; j < a_count; j++) /* rows without a schedule (hitopk): not here */
        if (!strcmp(v, row_name(j)) && (j == a_dense || g_algos[j].gen)) o->algo = j;
      if (!strcmp(v, "all")) o->algo = -1;
      if (!strcmp(v, "auto")) o->algo = A_AUTO;
      if (o->algo == -2) goto bad;
    } else if (!strcmp(a, "-d")) {
      o->dtype_name = v;
      if (!strcmp(v, "float"))
        o->dtype = SC_FLOAT32;
      else if (!strcmp(v, "double"))
        o->dtype = SC_FLOAT64;
      else if (!strcmp(v, "half"))
        o->dtype = SC_FLOAT16;
      else if (!strcmp(v, "bfloat16"))
        o->dtype = SC_BFLOAT16;
      else
        goto bad;
    } else if (!strcmp(a, "-w")) {
      o->warmup = atoi(v);
    } else if (!strcmp(a, "-i")) {
      o->iters = atoi(v);
    } else if (!strcmp(a, "-c")) {
      o->check = atoi(v);
    } else if (!strcmp(a, "-J")) {
      o->json = v;
    } else if (!strcmp(a, "--mem")) {
      if (perf_mem_parse(v, &o->mem)) goto bad;
    } else {
      goto bad;
    }
  }
  if (!o->k) o->k = (size_t)(o->density * (double)o->n + 0.5);
  if (o->n == 0 || o->n > ((size_t)1 << 32) || o->k == 0 || o->k > o->n || o->iters < 1 ||
      o->iters > 64 || o->warmup < 0)
    goto bad;
  return 0;
bad:
  usage(stderr);
  return 2;
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Rank r's k entries: one per stride of n/k at a rank-dependent offset (so
 * ranks overlap partly), integer values in [-16, 16] without 0, whose sums
 * over <= 16 ranks stay exact in every dtype (bf16 included). */
typedef struct rset {
  uint32_t *idx;
  double *val;
  size_t n;
} rset_t;

static rset_t gen(int r, size_t n, size_t k) {
  rset_t s = {malloc(k * 4 + 4), malloc(k * 8 + 8), k};
  const size_t stride = n / k;
  for (size_t j = 0; j < k; j++) {
    uint64_t h = mix(((uint64_t)r << 40) ^ j);
    s.idx[j] = (uint32_t)(j * stride + (stride > 1 ? h % (stride < 4 ? stride : 4) : 0));
    int v = (int)((h >> 20) % 16) + 1;
    s.val[j] = (h >> 40) & 1 ? -v : v;
  }
  return s;
}

static void store(sc_dtype_t t, void *buf, size_t i, double v) {
  if (t == SC_FLOAT64) {
    ((double *)buf)[i] = v;
  } else if (t == SC_FLOAT32) {
    ((float *)buf)[i] = (float)v;
  } else {
    /* A non-zero integer of magnitude <= 256: exact in both formats. */
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t h;
    if (t == SC_BFLOAT16) {
      h = (uint16_t)(u >> 16);
    } else {
      int e = (int)((u >> 23) & 0xff) - 127;
      h = (uint16_t)(((u >> 16) & 0x8000) | (uint32_t)(e + 15) << 10 | ((u >> 13) & 0x3ff));
    }
    ((uint16_t *)buf)[i] = h;
  }
}

static double load(sc_dtype_t t, const void *buf, size_t i) {
  if (t == SC_FLOAT64) return ((const double *)buf)[i];
  if (t == SC_FLOAT32) return ((const float *)buf)[i];
  uint16_t h = ((const uint16_t *)buf)[i];
  uint32_t u;
  if (t == SC_BFLOAT16) {
    u = (uint32_t)h << 16;
  } else {
    int e = (h >> 10) & 0x1f;
    if (e == 0) return 0.0; /* only exact zeros appear here */
    u = (uint32_t)(h & 0x8000) << 16 | (uint32_t)(e - 15 + 127) << 23 | (uint32_t)(h & 0x3ff) << 13;
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

typedef struct ent {
  uint32_t idx;
  double v;
} ent_t;
static int cmp_mag(const void *x, const void *y) {
  const ent_t *a = x, *b = y;
  if (fabs(a->v) != fabs(b->v)) return fabs(a->v) > fabs(b->v) ? -1 : 1;
  return (a->idx > b->idx) - (a->idx < b->idx);
}
static int cmp_idx(const void *x, const void *y) {
  const ent_t *a = x, *b = y;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Merge(A, B) from its definition; keep < 0: no top-k (exact sum). */
static rset_t merge(const rset_t *a, const rset_t *b, long long keep) {
  ent_t *e = malloc((a->n + b->n + 1) * sizeof(*e));
  size_t n = 0, i = 0, j = 0;
  while (i < a->n || j < b->n) {
    if (j == b->n || (i < a->n && a->idx[i] < b->idx[j]))
      e[n++] = (ent_t){a->idx[i], a->val[i]}, i++;
    else if (i == a->n || b->idx[j] < a->idx[i])
      e[n++] = (ent_t){b->idx[j], b->val[j]}, j++;
    else
      e[n++] = (ent_t){a->idx[i], a->val[i] + b->val[j]}, i++, j++;
  }
  if (keep >= 0 && n > (size_t)keep) {
    qsort(e, n, sizeof(*e), cmp_mag);
    n = (size_t)keep;
    qsort(e, n, sizeof(*e), cmp_idx);
  }
  rset_t o = {malloc(n * 4 + 4), malloc(n * 8 + 8), n};
  for (size_t m = 0; m < n; m++) o.idx[m] = e[m].idx, o.val[m] = e[m].v;
  free(e);
  return o;
}

static void take(rset_t *d, rset_t s) {
  free(d->idx);
  free(d->val);
  *d = s;
}

/* The papers' tree over s[0..p): the result in s[0]. */
static void tree_merge(rset_t *s, int p, size_t k) {
  for (int bit = 1; bit < p; bit <<= 1)
    for (int r = 0; r + bit < p; r += 2 * bit) take(&s[r], merge(&s[r], &s[r + bit], (long long)k));
}

/* The butterfly over s[0..p), ranks P'.. folded first: the result in s[0]. */
static void butterfly_merge(rset_t *s, int p, size_t k) {
  int pp = 1;
  while (pp * 2 <= p) pp *= 2;
  for (int r = 0; r + pp < p; r++) take(&s[r], merge(&s[r], &s[r + pp], (long long)k));
  for (int bit = 1; bit < pp; bit <<= 1)
    for (int r = 0; r < pp; r++)
      if (!(r & bit)) {
        take(&s[r], merge(&s[r], &s[r | bit], (long long)k));
        rset_t none = {NULL, NULL, 0};
        take(&s[r | bit], merge(&s[r], &none, -1));
      }
}

/* hier: the tree over each host's sets (ranks ascending) onto its
 * lowest rank, then the butterfly over the hosts' sets (hosts numbered by
 * their lowest rank); the result in s[0]. */
static void hier_merge(rset_t *s, int p, size_t k) {
  int nh = 0;
  for (int r = 0; r < p; r++)
    if (g_host_of[r] + 1 > nh) nh = g_host_of[r] + 1;
  rset_t *hs = xmalloc((size_t)nh * sizeof(*hs)), *mine = xmalloc((size_t)p * sizeof(*mine));
  for (int h = 0; h < nh; h++) {
    int cnt = 0;
    for (int r = 0; r < p; r++)
      if (g_host_of[r] == h) {
        mine[cnt++] = s[r];
        s[r] = (rset_t){NULL, NULL, 0};
      }
    tree_merge(mine, cnt, k);
    hs[h] = mine[0];
    for (int l = 1; l < cnt; l++) take(&mine[l], (rset_t){NULL, NULL, 0});
  }
  butterfly_merge(hs, nh, k);
  take(&s[0], hs[0]);
  for (int h = 1; h < nh; h++) take(&hs[h], (rset_t){NULL, NULL, 0});
  free(hs);
  free(mine);
}

/* The expected result of sparse algorithm `sa` (values exact: integer sums). */
static rset_t reference(sc_sparse_algo_t sa, int p, size_t n, size_t k) {
  rset_t *s = malloc((size_t)p * sizeof(*s));
  for (int r = 0; r < p; r++) s[r] = gen(r, n, k);
  switch (sa) { /* no default: a new algorithm is a compile error here */
  case SC_SPARSE_ALLGATHER:
    for (int r = 1; r < p; r++) take(&s[0], merge(&s[0], &s[r], -1));
    break;
  case SC_SPARSE_GTOPK_HIER:
    hier_merge(s, p, k);
    break;
  case SC_SPARSE_GTOPK_TREE:
    tree_merge(s, p, k);
    break;
  case SC_SPARSE_GTOPK:
    butterfly_merge(s, p, k);
    break;
  case SC_SPARSE_HITOPK: /* never benched: no sparse all-reduce schedule */
    break;
  }
  for (int r = 1; r < p; r++) take(&s[r], (rset_t){NULL, NULL, 0});
  rset_t o = s[0];
  free(s);
  return o;
}

typedef struct row {
  double med_s, min_s, sent_max, sent_mean;
  size_t out_nnz;
  int64_t wrong;
  int done;
} row_t;

typedef struct bench {
  const opts_t *o;
  sc_comm_t *comm;
  int rank, nranks;
  size_t es, out_cap;
  uint32_t *idx, *oidx;
  void *val, *oval, *dense_in, *dense_out;
  /* What the timed calls get: the buffers above, or their device copies. */
  uint32_t *c_idx, *c_oidx;
  void *c_val, *c_oval, *c_dense_in, *c_dense_out;
  size_t out_nnz;
  row_t rows[A_MAX];
  double lat_s;
  double merge_ns; /* one Merge(A, B) of two k-sets, per input entry, rank 0 alone */
  const char *lat_algo;
} bench_t;

static sc_result_t run_once(bench_t *b, int al) {
  const opts_t *o = b->o;
  if (al == a_dense)
    return sc_allreduce(b->c_dense_in, b->c_dense_out, o->n, o->dtype, SC_SUM, b->comm);
  return sc_sparse_allreduce(b->c_idx, b->c_val, o->k, o->n, o->k, o->dtype, g_algos[al].algo,
                             b->c_oidx, b->c_oval, &b->out_nnz, b->comm);
}

/* --mem device: the last result back into the host buffers check reads. */
static void download_result(bench_t *b, int al) {
  if (b->o->mem != PERF_MEM_DEVICE) return;
  if (al == a_dense) {
    perf_dev_download(b->dense_out, b->c_dense_out, b->o->n * b->es);
    return;
  }
  size_t nnz = b->out_nnz < b->out_cap ? b->out_nnz : b->out_cap;
  perf_dev_download(b->oidx, b->c_oidx, nnz * sizeof(*b->oidx));
  perf_dev_download(b->oval, b->c_oval, nnz * b->es);
}

/* Wrong entries of this rank's result. */
static int64_t check(bench_t *b, int al) {
  const opts_t *o = b->o;
  int64_t wrong = 0;
  if (al == a_dense) {
    rset_t *s = malloc((size_t)b->nranks * sizeof(*s));
    double *want = calloc(o->n, 8);
    for (int r = 0; r < b->nranks; r++) {
      s[r] = gen(r, o->n, o->k);
      for (size_t j = 0; j < s[r].n; j++) want[s[r].idx[j]] += s[r].val[j];
      take(&s[r], (rset_t){NULL, NULL, 0});
    }
    for (size_t i = 0; i < o->n; i++) wrong += load(o->dtype, b->dense_out, i) != want[i];
    free(want);
    free(s);
    return wrong;
  }
  rset_t ref = reference(g_algos[al].algo, b->nranks, o->n, o->k);
  if (b->out_nnz != ref.n)
    wrong += (int64_t)(ref.n > b->out_nnz ? ref.n - b->out_nnz : b->out_nnz - ref.n);
  for (size_t i = 0; i < ref.n && i < b->out_nnz; i++)
    wrong += b->oidx[i] != ref.idx[i] || load(o->dtype, b->oval, i) != ref.val[i];
  take(&ref, (rset_t){NULL, NULL, 0});
  return wrong;
}

static void bench_algo(bench_t *b, int al) {
  const opts_t *o = b->o;
  const int p = b->nranks;
  double t[64];
  uint64_t sent = 0;
  for (int it = 0; it < o->warmup + o->iters; it++) {
    perf_check_sc(sc_barrier(b->comm), "sc_barrier");
    uint64_t before = sc_comm_bytes_sent(b->comm);
    double t0 = perf_now_s();
    perf_check_sc(run_once(b, al), row_name(al));
    double dt = perf_now_s() - t0;
    sent = sc_comm_bytes_sent(b->comm) - before;
    dt = perf_max_over(b->comm, dt);
    if (it >= o->warmup) t[it - o->warmup] = dt;
  }
  int64_t wrong = -1;
  if (o->check) {
    /* The timed inputs are the check inputs; the last run's result is checked. */
    download_result(b, al);
    int64_t mine = check(b, al);
    perf_check_sc(sc_allreduce(&mine, &wrong, 1, SC_INT64, SC_SUM, b->comm), "sc_allreduce");
  }
  double smax, smean;
  perf_sent_over(b->comm, sent, p, &smax, &smean);
  const double med = perf_median(t, o->iters);
  double tmin = t[0];
  for (int i = 1; i < o->iters; i++) tmin = t[i] < tmin ? t[i] : tmin;
  b->rows[al] = (row_t){med, tmin, smax, smean, al == a_dense ? o->n : b->out_nnz, wrong, 1};
  if (b->rank == 0) {
    char w[32];
    printf("%12s %12.1f %12.3f %16.0f %16.0f %10zu %8s\n", row_name(al), med * 1e6,
           (double)o->n * (double)b->es / med / 1e9, smax, smean, al == a_dense ? o->n : b->out_nnz,
           perf_wrong_text(wrong, w));
    fflush(stdout);
  }
}

/* The startup cost of one message, for the cost model: an 8-byte all-reduce
 * is all latency, whatever algorithm auto picks for it. */
static void measure_latency(bench_t *b) {
  enum { WARM = 20, ITERS = 200 };
  double x = 1, y = 0, dt = 0, slowest = 0;
  perf_check_sc(sc_allreduce_algo(b->comm, 1, SC_FLOAT64, &b->lat_algo), "sc_allreduce_algo");
  for (int i = 0; i < WARM; i++)
    perf_check_sc(sc_allreduce(&x, &y, 1, SC_FLOAT64, SC_SUM, b->comm), "sc_allreduce");
  perf_check_sc(sc_barrier(b->comm), "sc_barrier");
  double t0 = perf_now_s();
  for (int i = 0; i < ITERS; i++)
    perf_check_sc(sc_allreduce(&x, &y, 1, SC_FLOAT64, SC_SUM, b->comm), "sc_allreduce");
  dt = (perf_now_s() - t0) / ITERS;
  perf_check_sc(sc_allreduce(&dt, &slowest, 1, SC_FLOAT64, SC_MAX, b->comm), "sc_allreduce");
  b->lat_s = slowest;
}

/* The local work per butterfly step, for the cost model: Merge(A, B) of two
 * sets of k float32 entries at random indices of n, on rank 0 alone while the
 * others wait, so it is one core's rate, not what P ranks sharing cores get.
 * Median of a few, in ns per input entry; 0 when it cannot run. */
static void measure_merge(bench_t *b) {
  enum { REPS = 7 };
  const opts_t *o = b->o;
  double ns = 0;
  if (b->rank == 0 && o->k > 0 && o->n >= o->k && o->n <= UINT32_MAX) {
    size_t k = o->k;
    uint32_t *ia = malloc(2 * k * sizeof(uint32_t)), *oi = malloc(2 * k * sizeof(uint32_t));
    float *va = malloc(2 * k * sizeof(float)), *ov = malloc(2 * k * sizeof(float));
    sc_merge_work_t w = {malloc(2 * k * sizeof(uint32_t)), malloc(2 * k * sizeof(float)),
                         malloc(2 * k * sizeof(uint64_t)), malloc(2 * k), 2 * k};
    if (ia && oi && va && ov && w.idx && w.val && w.key && w.src) {
      uint64_t s = 0x9e3779b97f4a7c15ULL;
      for (int set = 0; set < 2; set++) {
        /* Strided with a random phase per entry: sorted, unique, spread over n. */
        size_t stride = o->n / k;
        for (size_t i = 0; i < k; i++) {
          s = s * 6364136223846793005ULL + 1442695040888963407ULL;
          ia[set * k + i] = (uint32_t)(i * stride + (stride > 1 ? (s >> 33) % stride : 0));
          va[set * k + i] = (float)((double)(s >> 40) / (double)(1 << 24) - 0.5);
        }
      }
      double t[REPS];
      for (int r = 0; r < REPS; r++) {
        double t0 = perf_now_s();
        sc_sparse_merge(SC_FLOAT32, k, (sc_spview_t){ia, va, k}, (sc_spview_t){ia + k, va + k, k},
                        oi, ov, NULL, NULL, &w);
        t[r] = perf_now_s() - t0;
      }
      for (int i = 1; i < REPS; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
          double x = t[j];
          t[j] = t[j - 1];
          t[j - 1] = x;
        }
      ns = t[REPS / 2] * 1e9 / (2.0 * (double)k);
    }
    free(ia), free(oi), free(va), free(ov), free(w.idx), free(w.val), free(w.key), free(w.src);
  }
  perf_check_sc(sc_broadcast(&ns, &ns, 1, SC_FLOAT64, 0, b->comm), "sc_broadcast");
  b->merge_ns = ns;
}

static int write_json(const bench_t *b) {
  const opts_t *o = b->o;
  FILE *f = fopen(o->json, "w");
  if (!f) {
    fprintf(stderr, "sc_gtopk_perf: cannot write %s\n", o->json);
    return 1;
  }
  fprintf(f,
          "{\n  \"benchmark\": \"sc_gtopk_perf\", \"nranks\": %d, \"n\": %zu, \"k\": %zu, "
          "\"density\": %.9g,\n  \"dtype\": \"%s\", \"dtype_bytes\": %zu, \"index_bytes\": 4, "
          "\"warmup\": %d, \"iters\": %d, \"check\": %d, \"mem\": \"%s\",\n"
          "  \"latency_8B_allreduce_us\": %.3f, \"latency_algo\": \"%s\",\n"
          "  \"merge_ns_per_entry\": %.4f,\n  \"rows\": [",
          b->nranks, o->n, o->k, (double)o->k / (double)o->n, o->dtype_name, b->es, o->warmup,
          o->iters, o->check, perf_mem_name(o->mem), b->lat_s * 1e6,
          b->lat_algo ? b->lat_algo : "?", b->merge_ns);
  const char *sep = "";
  for (int al = 0; al < a_count; al++) {
    const row_t *r = &b->rows[al];
    if (!r->done) continue;
    fprintf(f,
            "%s\n    {\"algo\": \"%s\", \"time_us\": %.3f, \"time_min_us\": %.3f, "
            "\"algbw_GBps\": %.6f, \"sent_bytes_max\": %.0f, \"sent_bytes_mean\": %.0f, "
            "\"out_nnz\": %zu, \"wrong\": ",
            sep, row_name(al), r->med_s * 1e6, r->min_s * 1e6,
            (double)o->n * (double)b->es / r->med_s / 1e9, r->sent_max, r->sent_mean, r->out_nnz);
    perf_json_wrong(f, r->wrong);
    fputc('}', f);
    sep = ",";
  }
  fprintf(f, "\n  ]\n}\n");
  return fclose(f) != 0;
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "sc_gtopk_perf: out of memory (%zu bytes)\n", bytes);
    exit(3);
  }
  return p;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--select")) return sc_gtopk_select_main(argc, argv);
  rows_init();
  opts_t o;
  if (parse(argc, argv, &o)) return 2;
  /* Before init: a run without a device ends on every rank alike. */
  if (o.mem == PERF_MEM_DEVICE && perf_mem_device_ready("sc_gtopk_perf") != 0) return 2;
  bench_t b = {.o = &o, .es = sc_dtype_size(o.dtype)};
  perf_check_sc(sc_comm_init_env(&b.comm), "sc_comm_init_env");
  perf_check_sc(sc_comm_rank(b.comm, &b.rank), "sc_comm_rank");
  perf_check_sc(sc_comm_size(b.comm, &b.nranks), "sc_comm_size");
  b.out_cap = (size_t)b.nranks * o.k;
  rset_t in = gen(b.rank, o.n, o.k);
  b.idx = in.idx;
  b.val = xmalloc(o.k * b.es);
  for (size_t j = 0; j < o.k; j++) store(o.dtype, b.val, j, in.val[j]);
  b.oidx = xmalloc(b.out_cap * 4);
  b.oval = xmalloc(b.out_cap * b.es);
  const int want_dense = o.algo < 0 || o.algo == a_dense;
  if (want_dense) {
    b.dense_in = calloc(o.n, b.es);
    b.dense_out = xmalloc(o.n * b.es);
    if (!b.dense_in) return 3;
    for (size_t j = 0; j < o.k; j++) store(o.dtype, b.dense_in, in.idx[j], in.val[j]);
  }
  b.c_idx = b.idx, b.c_val = b.val, b.c_oidx = b.oidx, b.c_oval = b.oval;
  b.c_dense_in = b.dense_in, b.c_dense_out = b.dense_out;
  int device = -1;
  if (o.mem == PERF_MEM_DEVICE) {
    int local_rank = 0, local_size = 1, host_index = 0, nhosts = 1;
    perf_check_sc(sc_comm_local(b.comm, &local_rank, &local_size, &host_index, &nhosts),
                  "sc_comm_local");
    device = perf_mem_pick_device(local_rank);
    b.c_idx = perf_dev_alloc(o.k * sizeof(*b.idx));
    b.c_val = perf_dev_alloc(o.k * b.es);
    b.c_oidx = perf_dev_alloc(b.out_cap * sizeof(*b.oidx));
    b.c_oval = perf_dev_alloc(b.out_cap * b.es);
    perf_dev_upload(b.c_idx, b.idx, o.k * sizeof(*b.idx));
    perf_dev_upload(b.c_val, b.val, o.k * b.es);
    if (want_dense) {
      b.c_dense_in = perf_dev_alloc(o.n * b.es);
      b.c_dense_out = perf_dev_alloc(o.n * b.es);
      perf_dev_upload(b.c_dense_in, b.dense_in, o.n * b.es);
    }
  }
  measure_latency(&b);
  measure_merge(&b);
  if (o.algo == A_AUTO) {
    sc_sparse_algo_t sa;
    perf_check_sc(sc_gtopk_algo(b.comm, o.k, o.dtype, &sa), "sc_gtopk_algo");
    o.algo = a_count; /* no row: hitopk, which has no sparse all-reduce schedule */
    for (int j = 0; j < a_dense; j++)
      if (g_algos[j].algo == sa && g_algos[j].gen) o.algo = j;
    if (b.rank == 0)
      printf("# -a auto: %s (what sc_gtopk_allreduce runs for this k)\n",
             o.algo < a_count ? row_name(o.algo) : sc_sparse_algo_label(sa));
  }
  if (b.rank == 0) {
    printf("# sc_gtopk_perf: %d ranks, n = %zu %s, k = %zu (density %.6g), %d warm-up + %d "
           "timed iterations (median of the slowest rank)\n",
           b.nranks, o.n, o.dtype_name, o.k, (double)o.k / (double)o.n, o.warmup, o.iters);
    printf("# algbw = n * sizeof(dtype) / time (dense equivalent); sent = bytes this rank's "
           "schedule posted per call (max and mean over ranks)\n");
    printf("# 8-byte all-reduce (%s): %.1f us\n", b.lat_algo ? b.lat_algo : "?", b.lat_s * 1e6);
    printf("# Merge(A, B) of two k-sets on rank 0 alone: %.2f ns per input entry\n", b.merge_ns);
    if (o.mem == PERF_MEM_DEVICE)
      printf("# buffers in device memory (%s, rank 0 on device %d); the 8-byte all-reduce on "
             "the host\n",
             perf_mem_runtime_name(), device);
    printf("%12s %12s %12s %16s %16s %10s %8s\n", "algo", "time_us", "algbw_GB/s", "sent_B_max",
           "sent_B_mean", "out_nnz", "wrong");
  }
  int host = 0;
  perf_check_sc(sc_comm_local(b.comm, NULL, NULL, &host, NULL), "sc_comm_local");
  g_host_of = xmalloc((size_t)b.nranks * sizeof(int));
  perf_check_sc(sc_allgather(&host, g_host_of, 1, SC_INT32, b.comm), "sc_allgather");
  for (int al = 0; al < a_count; al++)
    if ((o.algo < 0 && (al == a_dense || !g_algos[al].hier)) || o.algo == al) bench_algo(&b, al);
  free(g_host_of);
  int status = 0;
  if (o.json && b.rank == 0) status = write_json(&b);
  perf_check_sc(sc_comm_destroy(b.comm), "sc_comm_destroy");
  free(in.idx);
  free(in.val);
  free(b.val);
  free(b.oidx);
  free(b.oval);
  free(b.dense_in);
  free(b.dense_out);
  if (o.mem == PERF_MEM_DEVICE) {
    perf_dev_free(b.c_idx);
    perf_dev_free(b.c_val);
    perf_dev_free(b.c_oidx);
    perf_dev_free(b.c_oval);
    if (want_dense) {
      perf_dev_free(b.c_dense_in);
      perf_dev_free(b.c_dense_out);
    }
    perf_mem_finish();
  }
  return status;
}
