/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_tune_fit: fits the one-host cost model (lib/tune/tune_host.c) to measured
 * all-reduce and all-to-all times, and shows how its choices fare against
 * them.
 *
 *   sc-run -n P -x SC_TRANSPORT=T sc_allreduce_perf -a compare -J run.json ...
 *   sc-run -n P -x SC_TRANSPORT=T sc_alltoall_perf -a compare -J a2a.json ...
 *   sc_tune_fit -t T run*.json a2a*.json
 *
 * The all-to-all's points matter for the price of a message itself
 * (host_s_per_msg): the all-reduce's candidates send about as many messages
 * as each other, so their picks hardly depend on it, while pairwise sends
 * P - 1 per rank against Bruck's log2 P.
 *
 * The input is any number of -a compare JSON files of one transport (rank
 * counts and sizes mixed freely; repeated runs of the same point are
 * combined by their median). For each (ranks, size) point the model predicts
 * every algorithm; the point's regret is the measured time of the algorithm
 * the model picks over the measured time of the fastest. The fit searches
 * the model's parameters (random starts, then one parameter at a time) for
 * the least mean log regret plus a weight times the mean log error of every
 * prediction: the second term keeps the parameters physical (times, not only
 * orderings), the first makes the choices right where the times are close.
 * It prints every point, the totals, and the parameters as lib/tune/tune_model.c
 * writes them. */
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tune/tune.h"
#include "transport/shm/shm_internal.h"
#include "transport/tcp/tcp_internal.h"

#define NALG   4 /* at most: ring, tree, rd, rabenseifner (sc_tune_best's order) */
#define MAXREP 64

typedef struct point {
  sc_coll_t coll; /* SC_COLL_ALLREDUCE, or SC_COLL_ALLTOALL (pairwise, bruck) */
  int nalg;       /* the candidates timed: 4, or 2 */
  int p;
  size_t size;
  double t[NALG][MAXREP]; /* us */
  int n[NALG];
  double med[NALG];
} point_t;

typedef struct fit {
  point_t *pts;
  int npts, cap;
  const char *transport;
  sc_tune_kind_t kind;    /* the model the transport's runs get on one host */
  size_t single_copy_min; /* its single-copy threshold (shm), else 0 */
  int cores;
  int spin_us;        /* SC_SPIN_US of the runs */
  size_t chunk_bytes; /* SC_CHUNK_BYTES of the runs */
  double weight;      /* of the log error next to the log regret */
} fit_t;

typedef struct param {
  const char *name;
  size_t off; /* in sc_link_model_t */
  double lo, hi;
  int fixed;
} param_t;

#define PARAM(field, lo, hi)                                                                       \
  { #field, offsetof(sc_link_model_t, field), lo, hi, 0 }
static param_t params[] = {
    PARAM(alpha_s, 1e-7, 2e-4), PARAM(host_s_per_b, 2e-11, 4e-9), PARAM(host_s_per_msg, 1e-8, 1e-4),
    PARAM(turn_s, 0, 3e-5),     PARAM(wake_s, 0, 2e-4),           PARAM(wake_cpu_s, 0, 5e-5),
    PARAM(poll_cpu, 0, 1),      PARAM(pull_s_per_b, 2e-11, 4e-9), PARAM(cold_s_per_b, 0, 2e-9),
    PARAM(reuse_b, 6e4, 6e7),   PARAM(same_core_s, 0, 3e-5),      PARAM(gamma_s_per_b, 5e-12, 1e-9),
};
#define NPARAM (int)(sizeof(params) / sizeof(params[0]))

static double *field(sc_link_model_t *m, int k) {
  return (double *)((char *)m + params[k].off);
}

/* ---- reading -a compare JSON (the fields perf/perf_output.c writes) ---- */

static const char *after(const char *s, const char *key) {
  const char *k = strstr(s, key);
  return k ? k + strlen(key) : NULL;
}

static point_t *point_at(fit_t *f, sc_coll_t coll, int p, size_t size) {
  for (int i = 0; i < f->npts; i++)
    if (f->pts[i].coll == coll && f->pts[i].p == p && f->pts[i].size == size) return &f->pts[i];
  if (f->npts == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 64;
    point_t *n = realloc(f->pts, (size_t)f->cap * sizeof(*n));
    if (!n) return NULL;
    f->pts = n;
  }
  point_t *pt = &f->pts[f->npts++];
  memset(pt, 0, sizeof(*pt));
  pt->coll = coll;
  pt->nalg = coll == SC_COLL_ALLTOALL ? 2 : NALG;
  pt->p = p;
  pt->size = size;
  return pt;
}

static int read_json(fit_t *f, const char *path) {
  FILE *in = fopen(path, "r");
  if (!in) {
    perror(path);
    return -1;
  }
  static char buf[1 << 20];
  size_t len = fread(buf, 1, sizeof(buf) - 1, in);
  fclose(in);
  if (len == sizeof(buf) - 1) {
    fprintf(stderr, "%s: larger than %zu bytes\n", path, sizeof(buf) - 1);
    return -1;
  }
  buf[len] = 0;
  const char *s = after(buf, "\"nranks\":");
  const char *mode = after(buf, "\"mode\":");
  const char *coll = after(buf, "\"collective\":");
  /* The reduce-scatter's and all-gather's compare files look alike but time other
   * algorithms: the fit is of the all-reduce's and the all-to-all's (its hier
   * is the flat one on one host). */
  int a2a = coll && strncmp(coll, " \"alltoall\"", 11) == 0;
  if (!s || !mode || strncmp(mode, " \"compare\"", 10) != 0 || !coll ||
      (!a2a && strncmp(coll, " \"allreduce\"", 12) != 0) || after(buf, "\"uneven\": true")) {
    fprintf(stderr, "%s: not the JSON of sc_allreduce_perf or sc_alltoall_perf -a compare\n", path);
    return -1;
  }
  const char *dtype = after(buf, "\"dtype\":");
  if (!dtype || strncmp(dtype, " [\"float\"]", 10) != 0) {
    fprintf(stderr, "%s: sc_tune_fit reads float runs only (-d float, the default)\n", path);
    return -1;
  }
  int p = atoi(s);
  static const char *ar_names[NALG] = {"\"ring\":", "\"tree\":", "\"rd\":", "\"rabenseifner\":"};
  static const char *a2a_names[NALG] = {"\"pairwise\":", "\"bruck\":", NULL, NULL};
  const char *const *names = a2a ? a2a_names : ar_names;
  for (s = after(buf, "\"rows\":"); s && (s = after(s, "\"size\":"));) {
    size_t size = strtoull(s, NULL, 10);
    const char *t = after(s, "\"time_us\":"), *end = t ? strchr(t, '}') : NULL;
    if (!end) break;
    point_t *pt = point_at(f, a2a ? SC_COLL_ALLTOALL : SC_COLL_ALLREDUCE, p, size);
    if (!pt) return -1;
    for (int a = 0; a < pt->nalg; a++) {
      const char *v = after(t, names[a]);
      if (!v || v > end) continue;
      char *stop;
      double us = strtod(v, &stop);
      if (stop != v && us > 0 && pt->n[a] < MAXREP) pt->t[a][pt->n[a]++] = us;
    }
    s = end;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Medians; drops points where an algorithm was never measured. */
static void finish_points(fit_t *f) {
  int kept = 0;
  for (int i = 0; i < f->npts; i++) {
    point_t *pt = &f->pts[i];
    int ok = 1;
    for (int a = 0; a < pt->nalg; a++) {
      if (!pt->n[a]) {
        ok = 0;
        break;
      }
      qsort(pt->t[a], (size_t)pt->n[a], sizeof(double), cmp_double);
      int n = pt->n[a];
      pt->med[a] = n % 2 ? pt->t[a][n / 2] : 0.5 * (pt->t[a][n / 2 - 1] + pt->t[a][n / 2]);
    }
    if (ok) f->pts[kept++] = *pt;
  }
  f->npts = kept;
}

static int by_point(const void *a, const void *b) {
  const point_t *x = a, *y = b;
  if (x->coll != y->coll) return (int)x->coll - (int)y->coll;
  if (x->p != y->p) return x->p - y->p;
  return (x->size > y->size) - (x->size < y->size);
}

/* ---- evaluating a model ---- */

/* -t: the runs of tcp or shm (or auto, which is shm on one host) on one host. */
static int set_transport(fit_t *f) {
  if (!strcmp(f->transport, "tcp")) {
    f->kind = SC_TUNE_HOST_TCP;
    f->single_copy_min = 0;
    return 0;
  }
  if (!strcmp(f->transport, "shm") || !strcmp(f->transport, "auto")) {
    f->kind = SC_TUNE_HOST_MEM;
    f->single_copy_min = SC_SHM_SINGLE_COPY_MIN;
    return 0;
  }
  return -1;
}

static void model_for(const fit_t *f, const double *x, int p, sc_link_model_t *m) {
  sc_tune_default_model(f->kind, f->cores, f->single_copy_min, m);
  /* As the transports decide it (their props): TCP sleeps at once when its
   * ranks outnumber the cores, shm always polls first. */
  sc_tune_host_waiting(f->kind == SC_TUNE_HOST_TCP ? sc_tcp_spins(p, f->cores) : 1, f->spin_us, m);
  for (int k = 0; k < NPARAM; k++) *field(m, k) = x[k];
}

typedef struct score {
  double objective, worst;
  int misses; /* regret over 1.10 */
} score_t;

static score_t evaluate(const fit_t *f, const double *x, int print) {
  score_t sc = {0, 1, 0};
  double regret = 0, error = 0;
  for (int i = 0; i < f->npts; i++) {
    const point_t *pt = &f->pts[i];
    sc_link_model_t m;
    model_for(f, x, pt->p, &m);
    const int n = pt->nalg;
    /* An all-to-all's size is one rank's send buffer: P blocks. */
    size_t count = pt->coll == SC_COLL_ALLTOALL ? pt->size / 4 / (size_t)pt->p : pt->size / 4;
    sc_coll_args_t a = {.coll = pt->coll,
                        .nranks = pt->p,
                        .count = count,
                        .elem_size = 4,
                        .chunk_elems = f->chunk_bytes / 4 ? f->chunk_bytes / 4 : 1};
    int pick, fastest = 0;
    double est[SC_TUNE_MAX_CANDIDATES];
    if (sc_tune_best(&m, &a, &pick, est) != SC_SUCCESS || pick >= n) continue;
    for (int k = 1; k < n; k++)
      if (pt->med[k] < pt->med[fastest]) fastest = k;
    double r = pt->med[pick] / pt->med[fastest];
    regret += log(r);
    for (int k = 0; k < n; k++) error += fabs(log(est[k] * 1e6 / pt->med[k])) / n;
    if (r > 1.10) sc.misses++;
    if (r > sc.worst) sc.worst = r;
    if (!print) continue;
    printf("%3d %10zu ", pt->p, pt->size);
    for (int k = 0; k < NALG; k++)
      if (k < n)
        printf(" %9.1f", pt->med[k]);
      else
        printf(" %9s", "-");
    printf(" |");
    for (int k = 0; k < NALG; k++)
      if (k < n)
        printf(" %9.1f", est[k] * 1e6);
      else
        printf(" %9s", "-");
    printf(" | %-12s %-12s %5.2f%s\n", sc_tune_candidate_name(pt->coll, pick),
           sc_tune_candidate_name(pt->coll, fastest), r, r > 1.10 ? " over 10%" : "");
  }
  sc.objective = (regret + f->weight * error) / (f->npts ? f->npts : 1);
  return sc;
}

/* ---- the search ---- */

static double uniform(unsigned *seed) {
  return (double)rand_r(seed) / RAND_MAX;
}

/* Log-uniform between lo and hi; uniform from 0 when lo is 0. */
static double draw(const param_t *p, unsigned *seed) {
  if (p->lo <= 0) return uniform(seed) * p->hi;
  return exp(log(p->lo) + uniform(seed) * (log(p->hi) - log(p->lo)));
}

static void search(const fit_t *f, double *x, int starts, int iters) {
  unsigned seed = 1;
  double best[NPARAM];
  memcpy(best, x, sizeof(best));
  double best_obj = evaluate(f, best, 0).objective;
  for (int s = 0; s < starts; s++) {
    double cur[NPARAM];
    memcpy(cur, best, sizeof(cur));
    double cur_obj = best_obj;
    for (int it = 0; it < iters; it++) {
      double y[NPARAM];
      memcpy(y, cur, sizeof(y));
      if (it < iters / 2) { /* explore: every free parameter at random */
        for (int k = 0; k < NPARAM; k++)
          if (!params[k].fixed) y[k] = draw(&params[k], &seed);
      } else { /* refine: one parameter by up to a factor of 1.65 either way */
        int k = rand_r(&seed) % NPARAM;
        if (params[k].fixed) continue;
        y[k] = y[k] > 0 ? y[k] * exp(uniform(&seed) - 0.5) : 0.1 * draw(&params[k], &seed);
        if (y[k] > params[k].hi) y[k] = params[k].hi;
      }
      double o = evaluate(f, y, 0).objective;
      if (o < cur_obj) {
        cur_obj = o;
        memcpy(cur, y, sizeof(cur));
      }
    }
    if (cur_obj < best_obj) {
      best_obj = cur_obj;
      memcpy(best, cur, sizeof(best));
    }
  }
  memcpy(x, best, sizeof(best));
}

static void usage(FILE *o) {
  fprintf(o, "Usage: sc_tune_fit -t TRANSPORT [options] FILE.json...\n"
             "Fits the one-host cost model to sc_allreduce_perf and sc_alltoall_perf -a\n"
             "compare -J files of one transport (the all-to-all's: pairwise and bruck), or\n"
             "with -n only evaluates the model as it is.\n\n"
             "  -t, --transport T   tcp or shm: the defaults to start from (required)\n"
             "  -c, --cores N       cores of the host the files come from (default: this one's)\n"
             "  -n, --no-fit        evaluate the defaults only\n"
             "  -s, --starts N      search restarts (default 4)\n"
             "  -i, --iters N       trials per start (default 2000)\n"
             "  -w, --weight W      weight of the log error next to the log regret (default 0.15)\n"
             "  -x, --fix NAME=V    hold a parameter at V (repeatable; names as printed)\n"
             "  -h, --help          this text\n\n"
             "SC_SPIN_US and SC_CHUNK_BYTES, when set, are what the runs used (defaults 50\n"
             "and 524288). The runs must be of -d float.\n");
}

int main(int argc, char **argv) {
  /* The runs' settings, as sc_allreduce_perf saw them (defaults of lib/base/config.c). */
  const char *spin = getenv("SC_SPIN_US"), *chunk = getenv("SC_CHUNK_BYTES");
  fit_t f = {.weight = 0.15,
             .spin_us = spin ? atoi(spin) : 50,
             .chunk_bytes = chunk ? strtoull(chunk, NULL, 10) : 524288};
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  f.cores = online > 0 ? (int)online : 1;
  int fit = 1, starts = 4, iters = 2000;
  static const struct option opts[] = {
      {"transport", 1, 0, 't'}, {"cores", 1, 0, 'c'}, {"no-fit", 0, 0, 'n'},
      {"starts", 1, 0, 's'},    {"iters", 1, 0, 'i'}, {"weight", 1, 0, 'w'},
      {"fix", 1, 0, 'x'},       {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
  char *fixes[NPARAM];
  int nfix = 0, c;
  while ((c = getopt_long(argc, argv, "t:c:ns:i:w:x:h", opts, NULL)) != -1) {
    switch (c) {
    case 't':
      f.transport = optarg;
      break;
    case 'c':
      f.cores = atoi(optarg);
      break;
    case 'n':
      fit = 0;
      break;
    case 's':
      starts = atoi(optarg);
      break;
    case 'i':
      iters = atoi(optarg);
      break;
    case 'w':
      f.weight = atof(optarg);
      break;
    case 'x':
      if (nfix < NPARAM) fixes[nfix++] = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (!f.transport || optind == argc || f.cores < 1 || starts < 0 || iters < 0 ||
      set_transport(&f) != 0) {
    usage(stderr);
    return 2;
  }
  for (int i = optind; i < argc; i++)
    if (read_json(&f, argv[i]) != 0) return 1;
  finish_points(&f);
  if (!f.npts) {
    fprintf(stderr, "sc_tune_fit: no point has all its algorithms measured\n");
    return 1;
  }
  qsort(f.pts, (size_t)f.npts, sizeof(point_t), by_point);

  sc_link_model_t m0;
  sc_tune_default_model(f.kind, f.cores, f.single_copy_min, &m0);
  double x[NPARAM];
  for (int k = 0; k < NPARAM; k++) x[k] = *field(&m0, k);
  for (int i = 0; i < nfix; i++) {
    char *eq = strchr(fixes[i], '=');
    int k = 0;
    if (eq) *eq = 0;
    while (k < NPARAM && strcmp(params[k].name, fixes[i])) k++;
    if (!eq || k == NPARAM) {
      fprintf(stderr, "sc_tune_fit: --fix %s: expected NAME=VALUE with a parameter's name\n",
              fixes[i]);
      return 2;
    }
    x[k] = atof(eq + 1);
    params[k].fixed = 1;
  }
  if (fit) search(&f, x, starts, iters);

  printf("# %s, %d cores: measured (us, median of runs) | model (us) | pick, fastest, regret\n",
         f.transport, f.cores);
  printf(
      "#  P       size       ring      tree        rd  rabenseif |      ring      tree        rd "
      " rabenseif |   (all-to-all rows: pairwise, bruck)\n");
  score_t sc = evaluate(&f, x, 1);
  printf("# %d points: %d with regret over 1.10, worst %.2f, objective %.4f\n", f.npts, sc.misses,
         sc.worst, sc.objective);
  printf("# %s parameters:", fit ? "fitted" : "default");
  for (int k = 0; k < NPARAM; k++) printf(" %s=%.4g", params[k].name, x[k]);
  printf("\n");
  free(f.pts);
  return 0;
}
