/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_kfac_perf: one step of distributed K-FAC's factor traffic for a model's
 * layer shapes (ResNet-50 by default, or --dims), float32, two schemes side
 * by side in one run:
 *   full:   sc_allreduce of every full d x d factor, then sc_broadcast of
 *           every full inverse from its owner;
 *   packed: sc_reduce_sym of every factor to its owner, then
 *           sc_broadcast_sym of every inverse from its owner (upper
 *           triangles only, d(d+1)/2 elements each way).
 * Owners come from sc_place_factors (SC_PLACE_LPT, nothing computed locally).
 * The inversion itself is not run: the owner broadcasts the matrix it
 * reduced, so the bytes are those of the inverses. Per scheme: the median
 * over steps of the slowest rank's time for the step and for each of its two
 * phases, and the bytes this rank's schedules posted per step (max and mean
 * over ranks). With -c 1 one untimed step per scheme checks every factor:
 * rank inputs are small integers symmetric in (i, j), so the reduced factor
 * is exact; the owner's reduced matrix and every rank's broadcast result are
 * compared with the sum computed here, at every entry up to 2^16 entries per
 * factor and at a stride beyond. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sparse/sparse.h"
#include "perf/perf_internal.h"

enum { S_FULL, S_PACKED, S_COUNT };
static const char *const scheme_names[S_COUNT] = {"full", "packed"};

typedef struct opts {
  size_t *dims;
  int nf; /* factors */
  const char *model;
  int schemes; /* bit mask of S_* */
  int iters, warmup, check;
  const char *json;
} opts_t;

/* ResNet-50 (torchvision's, bottleneck v1.5): per conv or fc layer, A (the
 * input-side factor, C_in k^2, +1 for the fc's bias; the convolutions have
 * none) and G (C_out), in forward order; conv1 and the first `stages` of the
 * 4 stages (the fc with all 4). */
static int resnet50_dims(size_t *d, int stages) {
  int n = 0;
  d[n++] = 3 * 7 * 7, d[n++] = 64; /* conv1 */
  size_t cin = 64;
  const size_t width[4] = {64, 128, 256, 512}, blocks[4] = {3, 4, 6, 3};
  for (int s = 0; s < stages; s++)
    for (size_t b = 0; b < blocks[s]; b++) {
      const size_t w = width[s];
      d[n++] = cin, d[n++] = w;                 /* 1x1 reduce */
      d[n++] = 9 * w, d[n++] = w;               /* 3x3 */
      d[n++] = w, d[n++] = 4 * w;               /* 1x1 expand */
      if (b == 0) d[n++] = cin, d[n++] = 4 * w; /* downsample */
      cin = 4 * w;
    }
  if (stages == 4) d[n++] = 2048 + 1, d[n++] = 1000; /* fc */
  return n;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: sc_kfac_perf [--dims D1,D2,... | --stages S] [-a full|packed|all] [-w WARMUP]\n"
          "                    [-i ITERS] [-c 0|1] [-J FILE]\n"
          "  --dims  factor sizes (default: ResNet-50's 108 factors, A = C_in k^2 (+1 for\n"
          "          the fc's bias) and G = C_out of each of its 54 conv and fc layers)\n"
          "  --stages  ResNet-50's conv1 and its first S of 4 stages only (S = 4: all)\n"
          "  -a      full: sc_allreduce of every d x d factor + sc_broadcast of every inverse\n"
          "          from its owner; packed: sc_reduce_sym to the owner + sc_broadcast_sym;\n"
          "          all (default): both, side by side\n"
          "  -w, -i  warm-up and timed steps (default 1, 3; at most 64)\n"
          "  -c      check one step of each scheme against the exact sums (default 1)\n"
          "  -J      also write the results as JSON to FILE (rank 0)\n"
          "Owners: sc_place_factors(SC_PLACE_LPT). float32. Run under sc-run, e.g.\n"
          "sc-run -n 4 sc_kfac_perf.\n");
}

static int parse(int argc, char **argv, opts_t *o) {
  static size_t r50[128];
  *o = (opts_t){.dims = r50,
                .model = "resnet50",
                .schemes = (1 << S_COUNT) - 1,
                .iters = 3,
                .warmup = 1,
                .check = 1};
  o->nf = resnet50_dims(r50, 4);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (!v) goto bad;
    i++;
    if (!strcmp(a, "--stages")) {
      const int st = atoi(v);
      if (st < 1 || st > 4 || strcmp(o->model, "custom") == 0) goto bad;
      o->nf = resnet50_dims(r50, st);
      o->model = st == 4   ? "resnet50"
                 : st == 1 ? "resnet50-stage1"
                 : st == 2 ? "resnet50-stages1-2"
                           : "resnet50-stages1-3";
    } else if (!strcmp(a, "--dims")) {
      int n = 1;
      for (const char *c = v; *c; c++) n += *c == ',';
      o->dims = malloc((size_t)n * sizeof(size_t));
      if (!o->dims) goto bad;
      o->nf = 0;
      for (const char *c = v; *c;) {
        char *end;
        unsigned long long d = strtoull(c, &end, 10);
        if (end == c || d == 0 || d > 65536) goto bad;
        o->dims[o->nf++] = (size_t)d;
        c = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') goto bad;
      }
      o->model = "custom";
    } else if (!strcmp(a, "-a")) {
      if (!strcmp(v, "full"))
        o->schemes = 1 << S_FULL;
      else if (!strcmp(v, "packed"))
        o->schemes = 1 << S_PACKED;
      else if (!strcmp(v, "all"))
        o->schemes = (1 << S_COUNT) - 1;
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
    } else {
      goto bad;
    }
  }
  if (o->nf < 1 || o->iters < 1 || o->iters > 64 || o->warmup < 0) goto bad;
  return 0;
bad:
  usage(stderr);
  return 2;
}

/* Rank r's entry (i, j) of factor f: an integer in [-8, 8], symmetric. */
static float entry(int r, int f, size_t i, size_t j) {
  if (i > j) {
    size_t t = i;
    i = j, j = t;
  }
  uint64_t z = ((uint64_t)r << 56) ^ ((uint64_t)f << 44) ^ ((uint64_t)i << 22) ^ j;
  z = (z ^ (z >> 31)) * 0x9e3779b97f4a7c15ull;
  z ^= z >> 29;
  return (float)((int)(z % 17) - 8);
}

typedef struct bench {
  const opts_t *o;
  sc_comm_t *comm;
  int rank, nranks;
  int *owner;
  size_t maxd;
  float *a, *b; /* maxd^2 each: the factor sent and the result */
  struct {
    double step_s, red_s, bc_s, sent_max, sent_mean;
    int64_t wrong;
    int done;
  } res[S_COUNT];
} bench_t;

static sc_result_t reduce_one(bench_t *b, int s, int f) {
  const size_t d = b->o->dims[f];
  if (s == S_FULL) return sc_allreduce(b->a, b->b, d * d, SC_FLOAT32, SC_SUM, b->comm);
  return sc_reduce_sym(b->a, b->rank == b->owner[f] ? b->b : NULL, d, SC_FLOAT32, SC_SUM,
                       b->owner[f], b->comm);
}

/* The owner sends b (its reduced factor, standing in for the inverse). */
static sc_result_t broadcast_one(bench_t *b, int s, int f) {
  const size_t d = b->o->dims[f];
  const int root = b->owner[f];
  if (s == S_FULL) return sc_broadcast(b->b, b->b, d * d, SC_FLOAT32, root, b->comm);
  return sc_broadcast_sym(b->rank == root ? b->b : NULL, b->b, d, SC_FLOAT32, root, b->comm);
}

/* Wrong sampled entries of b against the sum over ranks of factor f. */
static int64_t wrong_entries(const bench_t *b, int f) {
  const size_t d = b->o->dims[f], total = d * d;
  const size_t stride = total <= ((size_t)1 << 16) ? 1 : total / ((size_t)1 << 16) + 1;
  int64_t wrong = 0;
  for (size_t e = 0; e < total; e += stride) {
    const size_t i = e / d, j = e % d;
    float want = 0;
    for (int r = 0; r < b->nranks; r++) want += entry(r, f, i, j);
    wrong += b->b[e] != want;
  }
  return wrong;
}

/* One untimed step of scheme s, factor by factor, checked. */
static int64_t check_scheme(bench_t *b, int s) {
  int64_t mine = 0, wrong = 0;
  for (int f = 0; f < b->o->nf; f++) {
    const size_t d = b->o->dims[f];
    for (size_t i = 0; i < d; i++)
      for (size_t j = 0; j < d; j++) b->a[i * d + j] = entry(b->rank, f, i, j);
    memset(b->b, 0xff, d * d * sizeof(float)); /* NaN: an unwritten entry is wrong */
    perf_check_sc(reduce_one(b, s, f), scheme_names[s]);
    if (s == S_FULL || b->rank == b->owner[f]) mine += wrong_entries(b, f);
    if (b->rank != b->owner[f]) memset(b->b, 0xff, d * d * sizeof(float));
    perf_check_sc(broadcast_one(b, s, f), scheme_names[s]);
    mine += wrong_entries(b, f);
  }
  perf_check_sc(sc_allreduce(&mine, &wrong, 1, SC_INT64, SC_SUM, b->comm), "sc_allreduce");
  return wrong;
}

static void bench_scheme(bench_t *b, int s) {
  const opts_t *o = b->o;
  double ts[64], tr[64], tb[64];
  uint64_t sent = 0;
  for (int it = 0; it < o->warmup + o->iters; it++) {
    perf_check_sc(sc_barrier(b->comm), "sc_barrier");
    uint64_t before = sc_comm_bytes_sent(b->comm);
    double t0 = perf_now_s();
    for (int f = 0; f < o->nf; f++) perf_check_sc(reduce_one(b, s, f), scheme_names[s]);
    double t1 = perf_now_s();
    for (int f = 0; f < o->nf; f++) perf_check_sc(broadcast_one(b, s, f), scheme_names[s]);
    double t2 = perf_now_s();
    sent = sc_comm_bytes_sent(b->comm) - before;
    /* Each phase's slowest rank, and the step's: a phase ends with its last
     * collective on the slowest rank, so the sum of the two can exceed the step. */
    double st = perf_max_over(b->comm, t2 - t0), sr = perf_max_over(b->comm, t1 - t0),
           sb = perf_max_over(b->comm, t2 - t1);
    if (it >= o->warmup) {
      ts[it - o->warmup] = st;
      tr[it - o->warmup] = sr;
      tb[it - o->warmup] = sb;
    }
  }
  double smax, smean;
  perf_sent_over(b->comm, sent, b->nranks, &smax, &smean);
  int64_t wrong = o->check ? check_scheme(b, s) : -1;
  b->res[s].step_s = perf_median(ts, o->iters);
  b->res[s].red_s = perf_median(tr, o->iters);
  b->res[s].bc_s = perf_median(tb, o->iters);
  b->res[s].sent_max = smax;
  b->res[s].sent_mean = smean;
  b->res[s].wrong = wrong;
  b->res[s].done = 1;
  if (b->rank == 0) {
    char w[32];
    printf("%8s %12.1f %12.1f %12.1f %16.0f %16.0f %8s\n", scheme_names[s], b->res[s].step_s * 1e3,
           b->res[s].red_s * 1e3, b->res[s].bc_s * 1e3, smax, smean, perf_wrong_text(wrong, w));
    fflush(stdout);
  }
}

static int write_json(const bench_t *b) {
  const opts_t *o = b->o;
  FILE *f = fopen(o->json, "w");
  if (!f) {
    fprintf(stderr, "sc_kfac_perf: cannot write %s\n", o->json);
    return 1;
  }
  double full = 0, packed = 0;
  for (int i = 0; i < o->nf; i++) {
    full += (double)(o->dims[i] * o->dims[i]) * 4;
    packed += (double)(o->dims[i] * (o->dims[i] + 1) / 2) * 4;
  }
  fprintf(f,
          "{\n  \"benchmark\": \"sc_kfac_perf\", \"nranks\": %d, \"model\": \"%s\", "
          "\"factors\": %d, \"dtype\": \"float\",\n  \"factor_bytes_full\": %.0f, "
          "\"factor_bytes_packed\": %.0f, \"placement\": \"lpt\",\n  \"warmup\": %d, "
          "\"iters\": %d, \"check\": %d,\n  \"rows\": [",
          b->nranks, o->model, o->nf, full, packed, o->warmup, o->iters, o->check);
  const char *sep = "";
  for (int s = 0; s < S_COUNT; s++) {
    if (!b->res[s].done) continue;
    fprintf(f,
            "%s\n    {\"algo\": \"%s\", \"time_us\": %.3f, \"reduce_us\": %.3f, "
            "\"broadcast_us\": %.3f, \"sent_bytes_max\": %.0f, \"sent_bytes_mean\": %.0f, "
            "\"wrong\": ",
            sep, scheme_names[s], b->res[s].step_s * 1e6, b->res[s].red_s * 1e6,
            b->res[s].bc_s * 1e6, b->res[s].sent_max, b->res[s].sent_mean);
    perf_json_wrong(f, b->res[s].wrong);
    fputc('}', f);
    sep = ",";
  }
  fprintf(f, "\n  ]\n}\n");
  return fclose(f) != 0;
}

int main(int argc, char **argv) {
  opts_t o;
  if (parse(argc, argv, &o)) return 2;
  bench_t b = {.o = &o};
  perf_check_sc(sc_comm_init_env(&b.comm), "sc_comm_init_env");
  perf_check_sc(sc_comm_rank(b.comm, &b.rank), "sc_comm_rank");
  perf_check_sc(sc_comm_size(b.comm, &b.nranks), "sc_comm_size");
  b.owner = malloc((size_t)o.nf * sizeof(int));
  for (int f = 0; f < o.nf; f++) b.maxd = o.dims[f] > b.maxd ? o.dims[f] : b.maxd;
  b.a = malloc(b.maxd * b.maxd * sizeof(float));
  b.b = malloc(b.maxd * b.maxd * sizeof(float));
  if (!b.owner || !b.a || !b.b) {
    fprintf(stderr, "sc_kfac_perf: out of memory (largest factor %zu)\n", b.maxd);
    return 3;
  }
  perf_check_sc(sc_place_factors(o.dims, o.nf, b.nranks, SC_PLACE_LPT, 0, b.owner),
                "sc_place_factors");
  /* The timed steps reduce whatever the buffers hold; the check fills them. */
  for (size_t e = 0; e < b.maxd * b.maxd; e++) b.a[e] = (float)(e % 17) - 8, b.b[e] = 0;
  if (b.rank == 0) {
    double full = 0;
    for (int f = 0; f < o.nf; f++) full += (double)(o.dims[f] * o.dims[f]) * 4;
    printf("# sc_kfac_perf: %d ranks, %s, %d factors (largest %zu), %.1f MiB of full float32 "
           "factors, owners by sc_place_factors(LPT), %d warm-up + %d timed steps (median of "
           "the slowest rank)\n",
           b.nranks, o.model, o.nf, b.maxd, full / 1048576.0, o.warmup, o.iters);
    printf("%8s %12s %12s %12s %16s %16s %8s\n", "scheme", "step_ms", "reduce_ms", "bcast_ms",
           "sent_B_max", "sent_B_mean", "wrong");
  }
  int status = 0;
  for (int s = 0; s < S_COUNT; s++)
    if (o.schemes & 1 << s) {
      bench_scheme(&b, s);
      if (b.res[s].wrong > 0) status = 1;
    }
  if (o.json && b.rank == 0 && write_json(&b)) status = 1;
  perf_check_sc(sc_comm_destroy(b.comm), "sc_comm_destroy");
  free(b.owner);
  free(b.a);
  free(b.b);
  if (o.dims && strcmp(o.model, "custom") == 0) free(o.dims);
  return status;
}
