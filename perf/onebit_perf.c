/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_onebit_perf: the 1-bit compressed all-reduce (sc_onebit_allreduce,
 * scaled signs, and the majority vote) against the dense all-reduce of the
 * same float32 vector and against an all-gather of every rank's packed signs
 * and scale (each rank then decodes the P sign vectors itself: bytes that
 * grow with P). The rows run side by side in one run on one communicator;
 * per row: the median over iterations of the slowest rank's time, and the
 * bytes this rank's schedules posted per call (max and mean over ranks).
 * With -c 1 each row's result of one call on fresh inputs (and fresh 1-bit
 * states) is checked on rank 0 against a reference computed here from every
 * rank's inputs (regenerated from the seeds), and every rank's result is
 * compared with rank 0's through a checksum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sparse/sparse.h"
#include "perf/perf_internal.h"

enum { R_DENSE, R_ALLGATHER, R_ONEBIT, R_MAJORITY, R_COUNT };
static const char *const row_names[R_COUNT] = {"dense", "allgather", "onebit", "majority"};

typedef struct opts {
  size_t n;
  int rows; /* bit mask of R_* */
  int iters, warmup, check;
  const char *json;
} opts_t;

static void usage(FILE *f) {
  fprintf(f, "usage: sc_onebit_perf [-n N] [-a ROWS] [-w WARMUP] [-i ITERS] [-c 0|1] [-J FILE]\n"
             "  -n   float32 elements per rank (default 16777216 = 64 MiB)\n"
             "  -a   comma-separated rows among dense, allgather, onebit, majority, or all\n"
             "       (default dense,allgather,onebit):\n"
             "       dense      sc_allreduce of the float32 vector (SC_ALGO picks the algorithm)\n"
             "       allgather  packed signs and an 8-byte scale per rank through sc_allgather,\n"
             "                  then x = (1/P) sum of every rank's scale * signs\n"
             "       onebit     sc_onebit_allreduce, SC_ONEBIT_SCALED\n"
             "       majority   sc_onebit_allreduce, SC_ONEBIT_MAJORITY\n"
             "  -w, -i  warm-up and timed iterations (default 1, 5; at most 64)\n"
             "  -c   check one call of every row against the reference (default 1)\n"
             "  -J   also write the results as JSON to FILE (rank 0)\n"
             "Run under sc-run, e.g. sc-run -n 4 -x SC_ALGO=ring sc_onebit_perf.\n");
}

static int parse(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.n = (size_t)16 << 20,
                .rows = 1 << R_DENSE | 1 << R_ALLGATHER | 1 << R_ONEBIT,
                .iters = 5,
                .warmup = 1,
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
    } else if (!strcmp(a, "-a")) {
      o->rows = 0;
      char buf[128];
      snprintf(buf, sizeof(buf), "%s", v);
      for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int hit = !strcmp(t, "all");
        if (hit) o->rows = (1 << R_COUNT) - 1;
        for (int r = 0; r < R_COUNT; r++)
          if (!strcmp(t, row_names[r])) o->rows |= 1 << r, hit = 1;
        if (!hit) goto bad;
      }
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
  if (o->n == 0 || o->n > ((size_t)1 << 32) || o->iters < 1 || o->iters > 64 || o->warmup < 0 ||
      !o->rows)
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

/* Rank r's input: integers in [-8, 8], so that the dense sums are exact. */
static void gen(float *x, size_t n, int r) {
  for (size_t i = 0; i < n; i++) x[i] = (float)((int)(mix((uint64_t)r << 40 ^ i) % 17) - 8);
}

/* sqrt(sum of squares in index order) / sqrt(n), as the 1-bit scale. */
static double rms_f32(const float *x, size_t n) {
  double sq = 0.0;
  for (size_t i = 0; i < n; i++) sq += (double)x[i] * (double)x[i];
  return n ? sqrt(sq) / sqrt((double)n) : 0.0;
}

typedef struct bench {
  const opts_t *o;
  sc_comm_t *comm;
  int rank, nranks;
  float *x;     /* the vector every row reduces (in place) */
  uint8_t *pk;  /* allgather: this rank's packed signs + scale */
  uint8_t *all; /* allgather: every rank's */
  double *acc;  /* allgather: the decode's sums */
  size_t blk;   /* allgather: bytes per rank (signs + 8) */
  sc_onebit_t *ob[2];
  struct {
    double med_s, min_s, sent_max, sent_mean;
    int64_t wrong;
    int done;
  } res[R_COUNT];
} bench_t;

/* The all-gather of signs: pack, gather, decode. */
static sc_result_t allgather_signs(bench_t *b) {
  const size_t n = b->o->n, nb = (n + 7) / 8;
  const double a = rms_f32(b->x, n);
  memset(b->pk, 0, nb);
  for (size_t i = 0; i < n; i++)
    if (b->x[i] >= 0.0f) b->pk[i >> 3] |= (uint8_t)(0x80u >> (i & 7));
  memcpy(b->pk + nb, &a, 8);
  sc_result_t r = sc_allgather(b->pk, b->all, b->blk, SC_UINT8, b->comm);
  if (r != SC_SUCCESS) return r;
  memset(b->acc, 0, n * sizeof(double));
  for (int j = 0; j < b->nranks; j++) {
    const uint8_t *blk = b->all + (size_t)j * b->blk;
    double s;
    memcpy(&s, blk + nb, 8);
    const double pm[2] = {-s, s};
    for (size_t i = 0; i < n; i++) b->acc[i] += pm[blk[i >> 3] >> (7 - (i & 7)) & 1];
  }
  const double p = (double)b->nranks;
  for (size_t i = 0; i < n; i++) b->x[i] = (float)(b->acc[i] / p);
  return SC_SUCCESS;
}

static sc_result_t run_once(bench_t *b, int row) {
  switch (row) {
  case R_DENSE:
    return sc_allreduce(b->x, b->x, b->o->n, SC_FLOAT32, SC_SUM, b->comm);
  case R_ALLGATHER:
    return allgather_signs(b);
  default:
    return sc_onebit_allreduce(b->x, b->ob[row - R_ONEBIT], b->comm);
  }
}

/* Rank 0's wrong elements of one fresh call of `row` (b->x holds it): the
 * reference repeats the row's arithmetic from every rank's regenerated
 * input. The 1-bit rows start from zero residuals, so one call is: worker
 * scales and signs, each chunk's server sum and its scale, scale * sign. */
static int64_t reference_check(bench_t *b, int row) {
  const size_t n = b->o->n;
  const int p = b->nranks;
  float *in = malloc(n * sizeof(float));
  double *sum = calloc(n, sizeof(double)), *scale = malloc((size_t)p * sizeof(double));
  if (!in || !sum || !scale) {
    fprintf(stderr, "sc_onebit_perf: out of memory for the check\n");
    exit(3);
  }
  for (int r = 0; r < p; r++) {
    gen(in, n, r);
    const double a = row == R_ONEBIT || row == R_ALLGATHER ? rms_f32(in, n) : 1.0;
    scale[r] = a;
    for (size_t i = 0; i < n; i++) {
      if (row == R_DENSE)
        sum[i] += in[i];
      else
        sum[i] += in[i] >= 0.0f ? a : -a;
    }
  }
  int64_t wrong = 0;
  if (row == R_DENSE) {
    for (size_t i = 0; i < n; i++) wrong += b->x[i] != (float)sum[i];
  } else if (row == R_ALLGATHER) {
    for (size_t i = 0; i < n; i++) wrong += fabs(b->x[i] - sum[i] / p) > 1e-6 * fabs(sum[i] / p);
  } else if (row == R_MAJORITY) {
    for (size_t i = 0; i < n; i++)
      wrong += b->x[i] != (float)(sum[i] > 0 ? 1 : sum[i] < 0 ? -1 : 0);
  } else {
    /* Chunks of npad / P, npad = n padded to a multiple of 8P. */
    const size_t unit = 8 * (size_t)p, chunk = (n + unit - 1) / unit * unit / (size_t)p;
    for (size_t base = 0; base < n; base += chunk) {
      const size_t m = n - base < chunk ? n - base : chunk;
      double sq = 0.0;
      for (size_t i = 0; i < m; i++) sq += (sum[base + i] / p) * (sum[base + i] / p);
      const double bj = sqrt(sq) / sqrt((double)m);
      for (size_t i = 0; i < m; i++) {
        const double want = sum[base + i] / p >= 0 ? bj : -bj;
        wrong += fabs(b->x[base + i] - want) > 1e-6 * bj;
      }
    }
  }
  free(in);
  free(sum);
  free(scale);
  return wrong;
}

/* Every rank's result against rank 0's: a checksum of the bits. */
static int64_t checksum_mismatch(bench_t *b) {
  uint64_t h = 0;
  const uint32_t *u = (const uint32_t *)b->x;
  for (size_t i = 0; i < b->o->n; i++) h = mix(h ^ u[i]);
  uint64_t lo, hi;
  perf_check_sc(sc_allreduce(&h, &lo, 1, SC_UINT64, SC_MIN, b->comm), "sc_allreduce");
  perf_check_sc(sc_allreduce(&h, &hi, 1, SC_UINT64, SC_MAX, b->comm), "sc_allreduce");
  return lo != hi;
}

static int64_t check_row(bench_t *b, int row) {
  gen(b->x, b->o->n, b->rank);
  sc_onebit_t *fresh = NULL;
  if (row >= R_ONEBIT)
    perf_check_sc(sc_onebit_create(b->o->n, SC_FLOAT32,
                                   row == R_ONEBIT ? SC_ONEBIT_SCALED : SC_ONEBIT_MAJORITY, b->comm,
                                   &fresh),
                  "sc_onebit_create");
  sc_onebit_t *timed = row >= R_ONEBIT ? b->ob[row - R_ONEBIT] : NULL;
  if (fresh) b->ob[row - R_ONEBIT] = fresh;
  perf_check_sc(run_once(b, row), row_names[row]);
  if (fresh) {
    b->ob[row - R_ONEBIT] = timed;
    sc_onebit_destroy(fresh);
  }
  int64_t mine = b->rank == 0 ? reference_check(b, row) : 0, wrong = 0;
  mine += checksum_mismatch(b);
  perf_check_sc(sc_allreduce(&mine, &wrong, 1, SC_INT64, SC_SUM, b->comm), "sc_allreduce");
  return wrong;
}

static void bench_row(bench_t *b, int row) {
  const opts_t *o = b->o;
  double t[64];
  uint64_t sent = 0;
  gen(b->x, o->n, b->rank);
  for (int it = 0; it < o->warmup + o->iters; it++) {
    /* The dense sum grows by P each call; start every call from the input. */
    if (row == R_DENSE && it) gen(b->x, o->n, b->rank);
    perf_check_sc(sc_barrier(b->comm), "sc_barrier");
    uint64_t before = sc_comm_bytes_sent(b->comm);
    double t0 = perf_now_s();
    perf_check_sc(run_once(b, row), row_names[row]);
    double dt = perf_now_s() - t0;
    sent = sc_comm_bytes_sent(b->comm) - before;
    dt = perf_max_over(b->comm, dt);
    if (it >= o->warmup) t[it - o->warmup] = dt;
  }
  double smax, smean;
  perf_sent_over(b->comm, sent, b->nranks, &smax, &smean);
  int64_t wrong = o->check ? check_row(b, row) : -1;
  double tmin = t[0];
  for (int i = 1; i < o->iters; i++) tmin = t[i] < tmin ? t[i] : tmin;
  b->res[row].med_s = perf_median(t, o->iters);
  b->res[row].min_s = tmin;
  b->res[row].sent_max = smax;
  b->res[row].sent_mean = smean;
  b->res[row].wrong = wrong;
  b->res[row].done = 1;
  if (b->rank == 0) {
    char w[32];
    printf("%10s %12.1f %12.1f %16.0f %16.0f %8s\n", row_names[row], b->res[row].med_s * 1e6,
           tmin * 1e6, smax, smean, perf_wrong_text(wrong, w));
    fflush(stdout);
  }
}

static int write_json(const bench_t *b) {
  const opts_t *o = b->o;
  FILE *f = fopen(o->json, "w");
  if (!f) {
    fprintf(stderr, "sc_onebit_perf: cannot write %s\n", o->json);
    return 1;
  }
  const char *algo = getenv("SC_ALGO");
  fprintf(f,
          "{\n  \"benchmark\": \"sc_onebit_perf\", \"nranks\": %d, \"n\": %zu, "
          "\"dtype\": \"float\", \"dense_algo\": \"%s\",\n  \"warmup\": %d, \"iters\": %d, "
          "\"check\": %d,\n  \"rows\": [",
          b->nranks, o->n, algo ? algo : "auto", o->warmup, o->iters, o->check);
  const char *sep = "";
  for (int r = 0; r < R_COUNT; r++) {
    if (!b->res[r].done) continue;
    fprintf(f,
            "%s\n    {\"algo\": \"%s\", \"time_us\": %.3f, \"time_min_us\": %.3f, "
            "\"sent_bytes_max\": %.0f, \"sent_bytes_mean\": %.0f, \"wrong\": ",
            sep, row_names[r], b->res[r].med_s * 1e6, b->res[r].min_s * 1e6, b->res[r].sent_max,
            b->res[r].sent_mean);
    perf_json_wrong(f, b->res[r].wrong);
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
  b.x = malloc(o.n * sizeof(float));
  b.blk = (o.n + 7) / 8 + 8;
  if (o.rows & 1 << R_ALLGATHER) {
    b.pk = malloc(b.blk);
    b.all = malloc(b.blk * (size_t)b.nranks);
    b.acc = malloc(o.n * sizeof(double));
  }
  if (!b.x || ((o.rows & 1 << R_ALLGATHER) && (!b.pk || !b.all || !b.acc))) {
    fprintf(stderr, "sc_onebit_perf: out of memory (n = %zu)\n", o.n);
    return 3;
  }
  if (o.rows & 1 << R_ONEBIT)
    perf_check_sc(sc_onebit_create(o.n, SC_FLOAT32, SC_ONEBIT_SCALED, b.comm, &b.ob[0]),
                  "sc_onebit_create");
  if (o.rows & 1 << R_MAJORITY)
    perf_check_sc(sc_onebit_create(o.n, SC_FLOAT32, SC_ONEBIT_MAJORITY, b.comm, &b.ob[1]),
                  "sc_onebit_create");
  if (b.rank == 0) {
    const char *algo = getenv("SC_ALGO");
    printf("# sc_onebit_perf: %d ranks, n = %zu float32 (%.1f MiB), dense algorithm %s, %d "
           "warm-up + %d timed iterations (median of the slowest rank)\n",
           b.nranks, o.n, (double)o.n * 4 / 1048576.0, algo ? algo : "auto", o.warmup, o.iters);
    printf("# sent = bytes this rank's schedules posted per call (max and mean over ranks)\n");
    printf("%10s %12s %12s %16s %16s %8s\n", "algo", "time_us", "min_us", "sent_B_max",
           "sent_B_mean", "wrong");
  }
  for (int r = 0; r < R_COUNT; r++)
    if (o.rows & 1 << r) bench_row(&b, r);
  int status = 0;
  if (o.json && b.rank == 0) status = write_json(&b);
  for (int r = 0; r < R_COUNT; r++)
    if (b.res[r].done && b.res[r].wrong > 0) status = 1;
  sc_onebit_destroy(b.ob[0]);
  sc_onebit_destroy(b.ob[1]);
  perf_check_sc(sc_comm_destroy(b.comm), "sc_comm_destroy");
  free(b.x);
  free(b.pk);
  free(b.all);
  free(b.acc);
  return status;
}
