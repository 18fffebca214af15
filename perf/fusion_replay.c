/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_fusion_replay: replays a model's gradient trace (perf/traces/<name>.trace)
 * through the fusion engine on N ranks (run it under sc-run) and reports, per
 * policy: iteration time, non-overlapped communication, buckets, and the
 * lower bound max(compute, communication of the chosen collectives).
 * Compute is emulated (sleep, or --compute=busy spinning) with per-layer
 * times proportional to the trace's FLOPs, scaled to --iter-ms; ready / wait
 * are called where a framework calls them: ready after each layer's backward,
 * then wait_all before the optimizer step (DeAR: wait(layer) before each
 * layer's forward instead). Every figure is the slowest rank's. */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sparsecoll.h"

typedef struct layer {
  char name[96];
  size_t count;
  size_t rows, cols; /* a weight's matrix (the trace's last two columns), else 0 */
  double fwd_us, bwd_us;
  float *grad;
  float *fresh; /* --density, --compress: the gradient backward produces, every iteration */
} layer_t;

static struct {
  const char *trace, *json, *policies;
  double iter_ms, scale, density, alpha, beta, bucket_mb, slice_kb;
  int iters, warmup, busy, contiguous, repeat, interleave, gaussian;
  int compress, lowrank; /* sc_compress_t, the low-rank modes' rank */
} opt = {.iter_ms = 100, /* policies NULL: every one */
         .lowrank = 4,
         .scale = 1.0,
         .iters = 3,
         .warmup = 1,
         .repeat = 1,
         .bucket_mb = 0};

static sc_comm_t *comm;
static int rank, nranks;
static layer_t *layers;
static size_t nl;
static float *block; /* --contiguous */

/* --compress's names, in sc_compress_t's order. */
static const char *const compress_names[] = {"none", "topk", "powersgd", "acpsgd",
                                             "fp16", "bf16", "onebit",   "auto"};

/* -p's entries: a policy, and what its buckets travel as and at which
 * density. "POLICY+MODE" sets the mode of that entry alone (+topk and +auto
 * at --density, the others dense), so that one interleaved run can pair
 * compression modes round by round; a plain entry takes --compress and
 * --density. */
typedef struct entry {
  int pol, compress, plus;
  int seq; /* "+powersgd-seq": PowerSGD buckets one at a time */
  double density;
} entry_t;
static int any_rewrites; /* some entry compresses or sparsifies */

/* A step that changes the gradient (gTop-k, every compression) needs it
 * written afresh every iteration (produce_gradient); every entry then pays
 * the same copy, so the copies do not favour one. */
static int rewrites(void) {
  return any_rewrites || opt.density > 0 || opt.compress != 0;
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    sc_result_t r_ = (call);                                                                       \
    if (r_ != SC_SUCCESS) {                                                                        \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, #call, sc_strerror(r_),                \
              sc_last_error());                                                                    \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Emulated compute. Layers shorter than a sleep's overshoot would stretch
 * the total, so short layers are deferred until 100 us have built up, and a
 * sleep's overshoot is credited against the next layers. Time blocked in the
 * library is not credited: it is not compute. */
static double pending;
static volatile double sink;

static void compute(double us) {
  pending += us;
  if (pending < 100) return;
  double t = now_us(), target = t + pending;
  if (opt.busy) {
    double x = 1.0;
    while (now_us() < target) {
      for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1e-9;
    }
    sink = x;
    pending = 0;
    return;
  }
  struct timespec ts;
  ts.tv_sec = (time_t)(target / 1e6);
  ts.tv_nsec = (long)((target - (double)ts.tv_sec * 1e6) * 1e3);
  if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
  pending = target - now_us(); /* <= 0: the overshoot */
}

/* Gradient entry i of layer j on this rank: Laplace-distributed with scale
 * 0.1, from a hash (splitmix64's finalizer), so that values are continuous:
 * real gradients are peaked with heavy tails and rarely tie, and the sparse
 * selectors' work depends on both (a pattern of few distinct values makes
 * ties at every threshold). */
static float gradient_value(size_t i, size_t j) {
  uint64_t z = ((uint64_t)i << 20) ^ ((uint64_t)j << 8) ^ (uint64_t)rank;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  double u = ((double)(z >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
  return (float)(z & 1 ? 0.1 * log(u) : -0.1 * log(u));
}

static FILE *open_trace(const char *name) {
  FILE *f = fopen(name, "r");
  if (f || strchr(name, '/')) return f;
  const char *dirs[] = {SC_TRACE_DIR, SC_TRACE_INSTALL_DIR};
  char path[1024];
  for (int i = 0; i < 2 && !f; i++) {
    snprintf(path, sizeof(path), "%s/%s.trace", dirs[i], name);
    f = fopen(path, "r");
  }
  return f;
}

static void load_trace(void) {
  FILE *f = open_trace(opt.trace);
  if (!f) {
    fprintf(stderr, "cannot open trace %s\n", opt.trace);
    exit(2);
  }
  char line[512];
  size_t cap = 0;
  double flops = 0, *fw = NULL, *bw = NULL;
  while (fgets(line, sizeof(line), f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char name[96];
    unsigned long long n, mr = 0, mc = 0;
    double a, b;
    int got = sscanf(line, "%95s %llu %lf %lf %llu %llu", name, &n, &a, &b, &mr, &mc);
    if ((got != 4 && got != 6) || n == 0 || a < 0 || b < 0 || (got == 6 && mr * mc != n)) {
      fprintf(stderr, "%s: bad line: %s", opt.trace, line);
      exit(2);
    }
    if (nl == cap) {
      cap = cap ? 2 * cap : 256;
      layers = realloc(layers, cap * sizeof(*layers));
      fw = realloc(fw, cap * sizeof(*fw));
      bw = realloc(bw, cap * sizeof(*bw));
      if (!layers || !fw || !bw) exit(3);
    }
    layer_t *l = &layers[nl];
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", name);
    double c = llround((double)n * opt.scale);
    l->count = c < 1 ? 1 : (size_t)c;
    if (mr > 0) {
      /* --scale shrinks both sides of a matrix alike. */
      double sr = llround((double)mr * sqrt(opt.scale)), sc = llround((double)mc * sqrt(opt.scale));
      l->rows = sr < 1 ? 1 : (size_t)sr;
      l->cols = sc < 1 ? 1 : (size_t)sc;
      l->count = l->rows * l->cols;
    }
    fw[nl] = a;
    bw[nl] = b;
    flops += a + b;
    nl++;
  }
  fclose(f);
  if (nl == 0 || flops <= 0) {
    fprintf(stderr, "%s: no layers\n", opt.trace);
    exit(2);
  }
  size_t total = 0;
  for (size_t j = 0; j < nl; j++) {
    layers[j].fwd_us = fw[j] / flops * opt.iter_ms * 1e3;
    layers[j].bwd_us = bw[j] / flops * opt.iter_ms * 1e3;
    total += layers[j].count;
  }
  free(fw);
  free(bw);
  if (opt.contiguous) block = malloc(total * sizeof(float));
  size_t off = 0;
  for (size_t j = 0; j < nl; j++) {
    layers[j].grad = opt.contiguous ? block + off : malloc(layers[j].count * sizeof(float));
    if (!layers[j].grad) {
      fprintf(stderr, "rank %d: out of memory for gradients\n", rank);
      exit(3);
    }
    for (size_t i = 0; i < layers[j].count; i++) layers[j].grad[i] = gradient_value(i, j);
    if (rewrites()) {
      layers[j].fresh = malloc(layers[j].count * sizeof(float));
      if (!layers[j].fresh) {
        fprintf(stderr, "rank %d: out of memory for gradients\n", rank);
        exit(3);
      }
      memcpy(layers[j].fresh, layers[j].grad, layers[j].count * sizeof(float));
    }
    off += layers[j].count;
  }
}

typedef struct result {
  const char *policy;
  int buckets;
  double plan_ms, iter_ms, compute_ms, comm_ms, nonoverlap_ms, bound_ms;
  double fwd_wait_ms, bwd_block_ms, end_wait_ms; /* per iteration, slowest rank */
  double *samples; /* --interleave: the iteration times of rounds 0..nsamples-1, in order */
  int nsamples;
} result_t;

/* Where the training loop blocks in the library (us, summed over the timed
 * iterations): waits before forward layers (DeAR's all-gathers), inside
 * ready during backward (launches, copies, a previous round still in
 * flight), and the final wait_all. */
static double blk_fwd, blk_bwd, blk_end;

static double max_over_ranks(double v) {
  CHECK(sc_allreduce(&v, &v, 1, SC_FLOAT64, SC_MAX, comm));
  return v;
}

/* Layer j is tensor nl-1-j: tensors register in backward (ready) order. */
static int tid(size_t j) {
  return (int)(nl - 1 - j);
}

static sc_result_t add_layer(sc_fusion_t *f, const layer_t *l, int *id) {
  if (l->rows) return sc_fusion_add_matrix(f, l->grad, l->rows, l->cols, SC_FLOAT32, l->bwd_us, id);
  return sc_fusion_add_tensor(f, l->grad, l->count, SC_FLOAT32, l->bwd_us, id);
}

/* The library's policies, named as sc_fusion_policy_name names them: the
 * values 0, 1, ... of sc_fusion_policy_t up to the first it refuses. */
enum { MAX_POLICIES = 16 };
static const char *pol_names[MAX_POLICIES];
static int npol;

static void policies_init(void) {
  const char *nm;
  while (npol < MAX_POLICIES && sc_fusion_policy_name((sc_fusion_policy_t)npol, &nm) == SC_SUCCESS)
    pol_names[npol++] = nm;
}

/* With --density every bucket is a gTop-k step: the sparse papers' names of
 * the schemes that have one (NULL: none), which the rows show and -p takes
 * as well. */
static const char *sparse_alias(int pol) {
  switch (pol) {
  case SC_FUSE_NONE:
    return "lags";
  case SC_FUSE_MGWFBP:
    return "omgs";
  case SC_FUSE_SINGLE:
    return "gtopk";
  default:
    return NULL;
  }
}

/* The name entry k's rows show. */
static const char *shown_name(const entry_t *e, int k) {
  static char shown[MAX_POLICIES][48];
  if (e->plus) { /* as -p spelt it */
    snprintf(shown[k], sizeof(shown[k]), "%s+%s%s", pol_names[e->pol], compress_names[e->compress],
             e->seq ? "-seq" : "");
    return shown[k];
  }
  const char *alias = e->density > 0 ? sparse_alias(e->pol) : NULL;
  const char *base = alias ? alias : pol_names[e->pol];
  if (e->compress == 0 || e->compress == 1) return base;
  /* "size+acpsgd": the policy and what its buckets travel as. */
  snprintf(shown[k], sizeof(shown[k]), "%s+%s", base, compress_names[e->compress]);
  return shown[k];
}

/* DeAR and P3 finish a round during the next forward pass: wait for each
 * layer just before its forward, not for everything before the step. */
static int waits_in_forward(int pol) {
  return pol == SC_FUSE_DEAR || pol == SC_FUSE_P3;
}

/* A sparse step leaves only the few selected entries in the gradient, and
 * the selectors' work depends on the data: without a fresh gradient every
 * iteration each policy would select from what the previous step left, and
 * the policies would see different data. So with --density backward writes
 * the gradient again before it is ready. The copy is backward's work: in a
 * training iteration it counts against the layer's compute time; before a
 * communication-only iteration the caller writes them all, untimed. */
static void produce_gradient(size_t j) {
  if (rewrites()) memcpy(layers[j].grad, layers[j].fresh, layers[j].count * sizeof(float));
}

static void produce_gradients(void) {
  for (size_t j = 0; j < nl; j++) produce_gradient(j);
}

static void iteration(sc_fusion_t *f, int dear, int with_compute, int with_comm) {
  double t;
  for (size_t j = 0; j < nl; j++) {
    if (dear && with_comm) {
      t = now_us();
      CHECK(sc_fusion_wait(f, tid(j)));
      blk_fwd += now_us() - t;
    }
    if (with_compute) compute(layers[j].fwd_us);
  }
  for (size_t j = nl; j-- > 0;) {
    if (rewrites() && with_comm && with_compute) {
      t = now_us();
      produce_gradient(j);
      pending -= now_us() - t;
    }
    if (with_compute) compute(layers[j].bwd_us);
    if (with_comm) {
      t = now_us();
      CHECK(sc_fusion_ready(f, tid(j)));
      blk_bwd += now_us() - t;
    }
  }
  if (!dear && with_comm) {
    t = now_us();
    CHECK(sc_fusion_wait_all(f));
    blk_end += now_us() - t;
  }
}

static double compute_only(void) {
  CHECK(sc_barrier(comm));
  double t0 = now_us();
  pending = 0;
  for (int i = 0; i < opt.iters; i++) iteration(NULL, 0, 1, 0);
  return max_over_ranks((now_us() - t0) / opt.iters) / 1e3;
}

/* The fusion configuration every run of entry e uses. */
static sc_fusion_config_t replay_config(const entry_t *e) {
  sc_fusion_config_t cfg = {.policy = (sc_fusion_policy_t)e->pol,
                            .bucket_bytes = (size_t)(opt.bucket_mb * 1024 * 1024),
                            .alpha_us = opt.alpha,
                            .beta_us_per_byte = opt.beta,
                            .density = e->density,
                            .select = opt.gaussian ? SC_SELECT_GAUSSIAN : SC_SELECT_EXACT,
                            .slice_bytes = (size_t)(opt.slice_kb * 1024),
                            .compress = (sc_compress_t)e->compress,
                            .lowrank = opt.lowrank,
                            .seed = 1};
  return cfg;
}

/* Plans f for entry e: a "-seq" entry with SC_FUSION_PIPELINE=0, which the
 * plan reads (the worker then runs low-rank buckets one at a time). */
static sc_result_t plan_entry(sc_fusion_t *f, const entry_t *e) {
  if (!e->seq) return sc_fusion_plan(f);
  const char *was = getenv("SC_FUSION_PIPELINE");
  char keep[16] = "";
  if (was) snprintf(keep, sizeof(keep), "%s", was);
  setenv("SC_FUSION_PIPELINE", "0", 1);
  sc_result_t r = sc_fusion_plan(f);
  if (was)
    setenv("SC_FUSION_PIPELINE", keep, 1);
  else
    unsetenv("SC_FUSION_PIPELINE");
  return r;
}

static result_t run_policy(const entry_t *e, const char *name, double compute_ms) {
  result_t res = {.policy = name, .compute_ms = compute_ms};
  sc_fusion_config_t cfg = replay_config(e);
  sc_fusion_t *f;
  int dear = waits_in_forward(e->pol);
  CHECK(sc_fusion_create(comm, &cfg, &f));
  for (size_t k = 0; k < nl; k++) {
    const layer_t *l = &layers[nl - 1 - k];
    int id;
    CHECK(add_layer(f, l, &id));
  }
  double t0 = now_us();
  CHECK(plan_entry(f, e));
  res.plan_ms = max_over_ranks(now_us() - t0) / 1e3;
  CHECK(sc_fusion_num_buckets(f, &res.buckets));
  /* Communication alone: every tensor ready at once, then wait for all. */
  produce_gradients();
  iteration(f, 0, 0, 1);
  double comm_us = 0;
  for (int i = 0; i < opt.iters; i++) {
    produce_gradients();
    CHECK(sc_barrier(comm));
    t0 = now_us();
    iteration(f, 0, 0, 1);
    comm_us += now_us() - t0;
  }
  res.comm_ms = max_over_ranks(comm_us / opt.iters) / 1e3;
  /* The training loop. An iteration is a period of the steady state: DeAR's
   * all-gathers of iteration i run under iteration i+1's forward, so its
   * timed window starts with the previous round's all-gathers in flight
   * (one more untimed iteration after the barrier) and ends after the last
   * backward, leaving that round's all-gathers to the untimed drain. The
   * other policies finish every round inside the iteration (wait_all). */
  for (int i = 0; i < opt.warmup; i++) iteration(f, dear, 1, 1);
  if (dear) CHECK(sc_fusion_wait_all(f));
  CHECK(sc_barrier(comm));
  if (dear) iteration(f, dear, 1, 1);
  t0 = now_us();
  pending = 0;
  blk_fwd = blk_bwd = blk_end = 0;
  for (int i = 0; i < opt.iters; i++) iteration(f, dear, 1, 1);
  double t1 = now_us();
  if (dear) CHECK(sc_fusion_wait_all(f));
  res.iter_ms = max_over_ranks((t1 - t0) / opt.iters) / 1e3;
  res.fwd_wait_ms = max_over_ranks(blk_fwd / opt.iters) / 1e3;
  res.bwd_block_ms = max_over_ranks(blk_bwd / opt.iters) / 1e3;
  res.end_wait_ms = max_over_ranks(blk_end / opt.iters) / 1e3;
  CHECK(sc_fusion_destroy(f));
  res.nonoverlap_ms = res.iter_ms - res.compute_ms;
  if (res.nonoverlap_ms < 0) res.nonoverlap_ms = 0;
  res.bound_ms = res.compute_ms > res.comm_ms ? res.compute_ms : res.comm_ms;
  return res;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(*v), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* --interleave: one sample per policy in turn (order rotated every round),
 * each sample one communication-only iteration and one training iteration,
 * both after a barrier. A DeAR sample runs an untimed iteration first, so
 * the timed one starts with that round's all-gathers in flight, and drains
 * its own afterwards (untimed), as in run_policy. */
static void run_interleaved(const entry_t *sel, int nsel, double compute_ms, result_t *res,
                            double *lo, double *hi) {
  int n = opt.iters * opt.repeat;
  sc_fusion_t *fs[MAX_POLICIES];
  double *smp = malloc((size_t)(5 * nsel * n) * sizeof(*smp));
  if (!smp) exit(3);
  double *s_it = smp, *s_cm = smp + nsel * n, *s_fw = s_cm + nsel * n, *s_bb = s_fw + nsel * n,
         *s_ew = s_bb + nsel * n;
  for (int k = 0; k < nsel; k++) {
    sc_fusion_config_t cfg = replay_config(&sel[k]);
    memset(&res[k], 0, sizeof(res[k]));
    res[k].policy = shown_name(&sel[k], k);
    res[k].compute_ms = compute_ms;
    CHECK(sc_fusion_create(comm, &cfg, &fs[k]));
    for (size_t j = 0; j < nl; j++) {
      const layer_t *l = &layers[nl - 1 - j];
      int id;
      CHECK(add_layer(fs[k], l, &id));
    }
    double t0 = now_us();
    CHECK(plan_entry(fs[k], &sel[k]));
    res[k].plan_ms = max_over_ranks(now_us() - t0) / 1e3;
    CHECK(sc_fusion_num_buckets(fs[k], &res[k].buckets));
    int dear = waits_in_forward(sel[k].pol);
    produce_gradients();
    iteration(fs[k], 0, 0, 1);
    for (int w = 0; w < opt.warmup; w++) iteration(fs[k], dear, 1, 1);
    if (dear) CHECK(sc_fusion_wait_all(fs[k]));
  }
  for (int smpl = 0; smpl < n; smpl++) {
    for (int kk = 0; kk < nsel; kk++) {
      int k = (kk + smpl) % nsel, dear = waits_in_forward(sel[k].pol);
      sc_fusion_t *f = fs[k];
      produce_gradients();
      CHECK(sc_barrier(comm));
      double t0 = now_us();
      iteration(f, 0, 0, 1);
      double v[5] = {now_us() - t0};
      CHECK(sc_barrier(comm));
      if (dear) iteration(f, 1, 1, 1);
      pending = 0;
      blk_fwd = blk_bwd = blk_end = 0;
      t0 = now_us();
      iteration(f, dear, 1, 1);
      v[1] = now_us() - t0;
      if (dear) CHECK(sc_fusion_wait_all(f));
      v[2] = blk_fwd;
      v[3] = blk_bwd;
      v[4] = blk_end;
      CHECK(sc_allreduce(v, v, 5, SC_FLOAT64, SC_MAX, comm));
      s_cm[k * n + smpl] = v[0] / 1e3;
      s_it[k * n + smpl] = v[1] / 1e3;
      s_fw[k * n + smpl] = v[2] / 1e3;
      s_bb[k * n + smpl] = v[3] / 1e3;
      s_ew[k * n + smpl] = v[4] / 1e3;
    }
  }
  for (int k = 0; k < nsel; k++) {
    result_t *r = &res[k];
    double *it = s_it + k * n;
    /* Kept in round order: samples of one round ran under the same load. */
    r->samples = malloc((size_t)n * sizeof(double));
    if (r->samples) {
      memcpy(r->samples, it, (size_t)n * sizeof(double));
      r->nsamples = n;
    }
    r->iter_ms = median(it, n);
    lo[k] = it[0];
    hi[k] = it[n - 1];
    r->comm_ms = median(s_cm + k * n, n);
    r->fwd_wait_ms = median(s_fw + k * n, n);
    r->bwd_block_ms = median(s_bb + k * n, n);
    r->end_wait_ms = median(s_ew + k * n, n);
    r->nonoverlap_ms = r->iter_ms > compute_ms ? r->iter_ms - compute_ms : 0;
    r->bound_ms = compute_ms > r->comm_ms ? compute_ms : r->comm_ms;
    CHECK(sc_fusion_destroy(fs[k]));
  }
  free(smp);
}

static void print_row(const result_t *r, const char *tag) {
  printf("  %-7s %8d %10.2f %11.2f %10.2f %14.2f %12.2f %7.2f %8.1f %8.1f %8.1f %s\n", r->policy,
         r->buckets, r->iter_ms, r->compute_ms, r->comm_ms, r->nonoverlap_ms, r->bound_ms,
         r->bound_ms / r->iter_ms, r->fwd_wait_ms, r->bwd_block_ms, r->end_wait_ms, tag);
  fflush(stdout);
}

static void usage(FILE *f) {
  fprintf(f, "Usage: sc-run -n N sc_fusion_replay --trace NAME|FILE [options]\n"
             "  -t, --trace T        resnet50, vgg16, bert_base (perf/traces) or a trace file\n"
             "  -p, --policies LIST  comma list of");
  for (int p = 0; p < npol; p++) fprintf(f, "%s%s", p ? "," : " ", pol_names[p]);
  fprintf(f, " (default all); an entry\n"
             "                       POLICY+MODE travels as --compress MODE (topk and auto at\n"
             "                       --density, the others dense), so modes pair in one run;\n"
             "                       +powersgd-seq: PowerSGD buckets one at a time\n"
             "                       (SC_FUSION_PIPELINE=0), not overlapped;\n"
             "                       with --density also");
  for (int p = 0, n = 0; p < npol; p++)
    if (sparse_alias(p)) fprintf(f, "%s %s (= %s)", n++ ? "," : "", sparse_alias(p), pol_names[p]);
  fprintf(f,
          "\n"
          "  -T, --iter-ms MS     compute per iteration, forward + backward (default 100)\n"
          "  -i, --iters N        timed iterations per policy (default 3)\n"
          "  -w, --warmup N       untimed iterations first (default 1)\n"
          "  -r, --repeat N       sweeps over the policies, rotated; report medians (default 1)\n"
          "      --compute MODE   sleep (default) or busy (spin on the CPU)\n"
          "      --scale S        multiply every tensor's size by S (default 1)\n"
          "      --density D      gTop-k with error feedback per bucket (default 0: dense)\n"
          "      --select SEL     with --density: exact (default) or gaussian selection\n"
          "      --compress MODE  what buckets travel as: none (default), topk (with\n"
          "                       --density), powersgd, acpsgd (weights of the trace's\n"
          "                       matrices in low rank), fp16, bf16, onebit or auto; the\n"
          "                       compression runs for real, its time included\n"
          "      --lowrank R      powersgd, acpsgd, auto: the rank (default 4)\n"
          "      --bucket-mb MB   SIZE / DEAR bucket size (default: the library's 25 MiB)\n"
          "      --slice-kb KB    P3 slice size (default: the library's, from the model)\n"
          "      --alpha US --beta US_PER_BYTE   the all-reduce model (default 0 0: "
          "calibrate)\n"
          "      --contiguous     all gradients in one allocation (zero-copy buckets)\n"
          "      --interleave     plan every policy first, then alternate single iterations\n"
          "                       between them (rotated), -i x -r samples each; report each\n"
          "                       policy's median sample and the range (load drift hits\n"
          "                       every policy alike; needs every policy's buffers at once)\n"
          "  -J, --json FILE      also write the results as JSON (iter_min_ms/iter_max_ms:\n"
          "                       the range of the samples, or of the --repeat runs)\n"
          "Columns (ms per iteration, slowest rank): iter (DeAR: steady-state period, its\n"
          "all-gathers overlap the next forward), compute alone, comm (every tensor ready at\n"
          "once, no compute), iter - compute, lower bound max(compute, comm) and its ratio,\n"
          "then where the loop blocks: fwd_wait (DeAR's all-gathers before forward layers),\n"
          "bwd_blk (inside ready: launches, fused-buffer copies), end_wait (wait_all).\n"
          "Regimes (perf/README.md, \"Fusion replay\"): overlap only pays where compute and\n"
          "communication are comparable: run once, then set -T to about the comm column\n"
          "(e.g. 1 Gbit/s x 4 ranks: resnet50 -T 1500, bert_base -T 6000). With -T well\n"
          "below comm the run is communication-bound: every policy is near comm and they\n"
          "differ by the forward time (DeAR) and by per-message startups (MG-WFBP) only.\n");
}

/* 0 for a, 1 for b; anything else is a usage error. */
static int either(const char *arg, const char *a, const char *b) {
  if (!strcmp(arg, a)) return 0;
  if (!strcmp(arg, b)) return 1;
  usage(stderr);
  exit(2);
}

/* The sc_compress_t named by the len characters at s; exits on a name
 * that is none. */
static int compress_mode(const char *s, size_t len) {
  for (int i = 0; i < (int)(sizeof(compress_names) / sizeof(compress_names[0])); i++)
    if (strlen(compress_names[i]) == len && strncmp(s, compress_names[i], len) == 0) return i;
  fprintf(stderr, "%.*s is none of none, topk, powersgd, acpsgd, fp16, bf16, onebit, auto\n",
          (int)len, s);
  exit(2);
}

/* The policy named by the len characters at s (with --density also its
 * sparse alias), or -1. */
static int policy_index(const char *s, size_t len) {
  for (int p = 0; p < npol; p++)
    for (int alias = 0; alias < 2; alias++) {
      const char *nm = alias ? sparse_alias(p) : pol_names[p];
      if (nm && strlen(nm) == len && strncmp(s, nm, len) == 0) return p;
    }
  return -1;
}

/* -p's entries into sel (every policy without -p; plain names in the
 * library's order, as before "+MODE" entries existed; with one, in -p's
 * order); returns how many. */
static int select_entries(entry_t *sel) {
  int n = 0, plus = opt.policies && strchr(opt.policies, '+');
  if (!plus) {
    for (int p = 0; p < npol; p++) {
      entry_t e = {.pol = p, .compress = opt.compress, .density = opt.density};
      if (opt.policies) {
        int hit = 0;
        for (const char *s = opt.policies; *s;) {
          size_t len = strcspn(s, ",");
          hit |= policy_index(s, len) == p;
          s += len + (s[len] == ',');
        }
        if (!hit) continue;
      }
      sel[n++] = e;
    }
    return n;
  }
  for (const char *s = opt.policies; *s && n < MAX_POLICIES;) {
    size_t len = strcspn(s, ","), nl_ = strcspn(s, "+");
    if (nl_ > len) nl_ = len;
    entry_t e = {.pol = policy_index(s, nl_), .compress = opt.compress, .density = opt.density};
    if (e.pol < 0) {
      fprintf(stderr, "-p: %.*s is no policy\n", (int)nl_, s);
      exit(2);
    }
    if (nl_ < len) {
      e.plus = 1;
      size_t ml = len - nl_ - 1;
      if (ml > 4 && strncmp(s + nl_ + 1 + ml - 4, "-seq", 4) == 0) {
        e.seq = 1;
        ml -= 4;
      }
      e.compress = compress_mode(s + nl_ + 1, ml);
      if (e.seq && e.compress != SC_COMPRESS_POWERSGD) {
        fprintf(stderr, "-p: %.*s: -seq is for powersgd\n", (int)len, s);
        exit(2);
      }
      if (e.compress != SC_COMPRESS_TOPK && e.compress != SC_COMPRESS_AUTO) e.density = 0;
      if (e.compress == SC_COMPRESS_TOPK && !(opt.density > 0)) {
        fprintf(stderr, "-p: %.*s needs --density\n", (int)len, s);
        exit(2);
      }
    }
    any_rewrites |= e.compress != 0 || e.density > 0;
    sel[n++] = e;
    s += len + (s[len] == ',');
  }
  return n;
}

static void parse(int argc, char **argv) {
  static const struct option lo[] = {
      {"trace", 1, 0, 't'},      {"policies", 1, 0, 'p'}, {"iter-ms", 1, 0, 'T'},
      {"iters", 1, 0, 'i'},      {"warmup", 1, 0, 'w'},   {"compute", 1, 0, 'c'},
      {"scale", 1, 0, 's'},      {"density", 1, 0, 'd'},  {"bucket-mb", 1, 0, 'b'},
      {"alpha", 1, 0, 'a'},      {"beta", 1, 0, 'B'},     {"contiguous", 0, 0, 'C'},
      {"json", 1, 0, 'J'},       {"repeat", 1, 0, 'r'},   {"help", 0, 0, 'h'},
      {"interleave", 0, 0, 'I'}, {"slice-kb", 1, 0, 'S'}, {"select", 1, 0, 'G'},
      {"compress", 1, 0, 'Z'},   {"lowrank", 1, 0, 'R'},  {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "t:p:T:i:w:J:r:Ih", lo, NULL)) != -1) {
    switch (c) {
    case 't':
      opt.trace = optarg;
      break;
    case 'p':
      opt.policies = optarg;
      break;
    case 'T':
      opt.iter_ms = atof(optarg);
      break;
    case 'i':
      opt.iters = atoi(optarg);
      break;
    case 'w':
      opt.warmup = atoi(optarg);
      break;
    case 'r':
      opt.repeat = atoi(optarg);
      break;
    case 'c':
      opt.busy = either(optarg, "sleep", "busy");
      break;
    case 's':
      opt.scale = atof(optarg);
      break;
    case 'd':
      opt.density = atof(optarg);
      break;
    case 'G':
      opt.gaussian = either(optarg, "exact", "gaussian");
      break;
    case 'Z':
      opt.compress = compress_mode(optarg, strlen(optarg));
      break;
    case 'R':
      opt.lowrank = atoi(optarg);
      break;
    case 'b':
      opt.bucket_mb = atof(optarg);
      break;
    case 'a':
      opt.alpha = atof(optarg);
      break;
    case 'B':
      opt.beta = atof(optarg);
      break;
    case 'C':
      opt.contiguous = 1;
      break;
    case 'I':
      opt.interleave = 1;
      break;
    case 'S':
      opt.slice_kb = atof(optarg);
      break;
    case 'J':
      opt.json = optarg;
      break;
    case 'h':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      exit(2);
    }
  }
  if (!opt.trace || opt.repeat < 1 || opt.iters < 1 || opt.warmup < 0 || !(opt.iter_ms >= 0) ||
      !(opt.scale > 0)) {
    usage(stderr);
    exit(2);
  }
}

int main(int argc, char **argv) {
  policies_init();
  parse(argc, argv);
  entry_t sel[MAX_POLICIES];
  int nsel = select_entries(sel);
  CHECK(sc_comm_init_env(&comm));
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &nranks);
  load_trace();
  size_t params = 0;
  for (size_t j = 0; j < nl; j++) params += layers[j].count;
  double compute_ms = compute_only();
  if (rank == 0) {
    char how[48] = "";
    if (opt.policies && strchr(opt.policies, '+'))
      snprintf(how, sizeof(how), ", modes per entry (density %g)", opt.density);
    else if (opt.compress > 1)
      snprintf(how, sizeof(how), ", %s", compress_names[opt.compress]);
    else if (opt.density > 0)
      snprintf(how, sizeof(how), ", gTop-k");
    printf("# sc_fusion_replay %s: %zu tensors, %zu parameters (%.1f MB fp32), %d ranks, "
           "compute %s %.1f ms/iter (measured %.1f), %d iters after %d warm-up%s%s\n",
           opt.trace, nl, params, params * 4e-6, nranks, opt.busy ? "busy" : "sleep", opt.iter_ms,
           compute_ms, opt.iters, opt.warmup, how, opt.contiguous ? ", contiguous" : "");
    printf("# %-7s %8s %10s %11s %10s %14s %12s %7s %8s %8s %8s\n", "policy", "buckets", "iter_ms",
           "compute_ms", "comm_ms", "nonoverlap_ms", "lowbound_ms", "lb/iter", "fwd_wait",
           "bwd_blk", "end_wait");
  }
  result_t res[MAX_POLICIES];
  /* The range of each policy's samples (interleaved iterations, or the
   * --repeat runs' iteration times), for error bars in the JSON. */
  double lo[MAX_POLICIES], hi[MAX_POLICIES];
  int nres = nsel;
  if (opt.interleave) {
    run_interleaved(sel, nsel, compute_ms, res, lo, hi);
    for (int q = 0; q < nsel && rank == 0; q++) {
      char tag[96];
      snprintf(tag, sizeof(tag), "median of %d, iter %.0f-%.0f", opt.iters * opt.repeat, lo[q],
               hi[q]);
      print_row(&res[q], tag);
    }
  } else {
    /* --repeat: whole sweeps, each starting one policy later, so drift on a
     * shared machine does not always favour the same policy; each policy
     * reports its median run (by iteration time). */
    result_t *runs = calloc((size_t)(nsel * opt.repeat) + 1, sizeof(*runs));
    for (int rep = 0; rep < opt.repeat; rep++)
      for (int k = 0; k < nsel; k++) {
        int q = (k + rep) % nsel;
        runs[q * opt.repeat + rep] = run_policy(&sel[q], shown_name(&sel[q], q), compute_ms);
        if (rank == 0) /* as it comes: a later policy may fail or hang */
          print_row(&runs[q * opt.repeat + rep], opt.repeat > 1 ? "run" : "");
      }
    for (int q = 0; q < nsel; q++) {
      result_t *rr = runs + q * opt.repeat;
      for (int a = 1; a < opt.repeat; a++) /* insertion sort by iteration time */
        for (int b = a; b > 0 && rr[b].iter_ms < rr[b - 1].iter_ms; b--) {
          result_t x = rr[b];
          rr[b] = rr[b - 1];
          rr[b - 1] = x;
        }
      res[q] = rr[opt.repeat / 2];
      lo[q] = rr[0].iter_ms;
      hi[q] = rr[opt.repeat - 1].iter_ms;
      const result_t *r = &res[q];
      if (rank == 0 && opt.repeat > 1) print_row(r, "median");
    }
    free(runs);
  }
  if (rank == 0 && opt.json) {
    FILE *j = fopen(opt.json, "w");
    if (!j) {
      fprintf(stderr, "cannot write %s\n", opt.json);
      exit(2);
    }
    fprintf(j,
            "{\"benchmark\": \"sc_fusion_replay\", \"trace\": \"%s\", \"tensors\": %zu, "
            "\"params\": %zu, \"ranks\": %d, \"compute\": \"%s\", \"iter_ms_target\": %g, "
            "\"compute_ms\": %.4f, \"iters\": %d, \"warmup\": %d, \"scale\": %g, \"density\": %g, "
            "\"select\": \"%s\", \"slice_kb\": %g, "
            "\"contiguous\": %d, \"repeat\": %d, \"interleave\": %d,\n \"results\": [",
            opt.trace, nl, params, nranks, opt.busy ? "busy" : "sleep", opt.iter_ms, compute_ms,
            opt.iters, opt.warmup, opt.scale, opt.density, opt.gaussian ? "gaussian" : "exact",
            opt.slice_kb, opt.contiguous, opt.repeat, opt.interleave);
    for (int i = 0; i < nres; i++)
      fprintf(j,
              "%s\n  {\"policy\": \"%s\", \"buckets\": %d, \"plan_ms\": %.3f, \"iter_ms\": %.4f, "
              "\"compute_ms\": %.4f, \"comm_ms\": %.4f, \"nonoverlap_ms\": %.4f, "
              "\"lower_bound_ms\": %.4f, \"fwd_wait_ms\": %.4f, \"bwd_block_ms\": %.4f, "
              "\"end_wait_ms\": %.4f, \"iter_min_ms\": %.4f, \"iter_max_ms\": %.4f}",
              i ? "," : "", res[i].policy, res[i].buckets, res[i].plan_ms, res[i].iter_ms,
              res[i].compute_ms, res[i].comm_ms, res[i].nonoverlap_ms, res[i].bound_ms,
              res[i].fwd_wait_ms, res[i].bwd_block_ms, res[i].end_wait_ms, lo[i], hi[i]);
    fprintf(j, "\n],\n \"iter_samples_ms\": {");
    for (int i = 0; i < nres; i++) {
      fprintf(j, "%s\n  \"%s\": [", i ? "," : "", res[i].policy);
      for (int s = 0; s < res[i].nsamples; s++)
        fprintf(j, "%s%.3f", s ? ", " : "", res[i].samples[s]);
      fprintf(j, "]");
    }
    fprintf(j, "\n}}\n");
    fclose(j);
  }
  for (int i = 0; i < nres; i++) free(res[i].samples);
  CHECK(sc_comm_destroy(comm));
  for (size_t j = 0; j < nl; j++) {
    if (!opt.contiguous) free(layers[j].grad);
    free(layers[j].fresh);
  }
  free(block);
  free(layers);
  return 0;
}
