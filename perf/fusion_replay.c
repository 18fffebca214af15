/* sc_fusion_replay: replays a model's gradient trace (perf/traces/NAME.trace)
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sparsecoll.h"

typedef struct layer {
  char name[96];
  size_t count;
  double fwd_us, bwd_us;
  float *grad;
} layer_t;

static struct {
  const char *trace, *json, *policies;
  double iter_ms, scale, density, alpha, beta, bucket_mb;
  int iters, warmup, busy, contiguous, repeat;
} opt = {.policies = "none,size,mgwfbp,dear,single",
         .iter_ms = 100,
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
    unsigned long long n;
    double a, b;
    if (sscanf(line, "%95s %llu %lf %lf", name, &n, &a, &b) != 4 || n == 0 || a < 0 || b < 0) {
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
    for (size_t i = 0; i < layers[j].count; i++)
      layers[j].grad[i] = (float)(((i + j) * 2654435761u + (unsigned)rank) % 1000) * 1e-3f - 0.5f;
    off += layers[j].count;
  }
}

typedef struct result {
  const char *policy;
  int buckets;
  double plan_ms, iter_ms, compute_ms, comm_ms, nonoverlap_ms, bound_ms;
} result_t;

static double max_over_ranks(double v) {
  CHECK(sc_allreduce(&v, &v, 1, SC_FLOAT64, SC_MAX, comm));
  return v;
}

/* Layer j is tensor nl-1-j: tensors register in backward (ready) order. */
static int tid(size_t j) {
  return (int)(nl - 1 - j);
}

static void iteration(sc_fusion_t *f, int dear, int with_compute, int with_comm) {
  for (size_t j = 0; j < nl; j++) {
    if (dear && with_comm) CHECK(sc_fusion_wait(f, tid(j)));
    if (with_compute) compute(layers[j].fwd_us);
  }
  for (size_t j = nl; j-- > 0;) {
    if (with_compute) compute(layers[j].bwd_us);
    if (with_comm) CHECK(sc_fusion_ready(f, tid(j)));
  }
  if (!dear && with_comm) CHECK(sc_fusion_wait_all(f));
}

static double compute_only(void) {
  CHECK(sc_barrier(comm));
  double t0 = now_us();
  pending = 0;
  for (int i = 0; i < opt.iters; i++) iteration(NULL, 0, 1, 0);
  return max_over_ranks((now_us() - t0) / opt.iters) / 1e3;
}

static result_t run_policy(sc_fusion_policy_t pol, const char *name, double compute_ms) {
  result_t res = {.policy = name, .compute_ms = compute_ms};
  sc_fusion_config_t cfg = {.policy = pol,
                            .bucket_bytes = (size_t)(opt.bucket_mb * 1024 * 1024),
                            .alpha_us = opt.alpha,
                            .beta_us_per_byte = opt.beta,
                            .density = opt.density};
  sc_fusion_t *f;
  int dear = pol == SC_FUSE_DEAR;
  CHECK(sc_fusion_create(comm, &cfg, &f));
  for (size_t k = 0; k < nl; k++) {
    const layer_t *l = &layers[nl - 1 - k];
    int id;
    CHECK(sc_fusion_add_tensor(f, l->grad, l->count, SC_FLOAT32, l->bwd_us, &id));
  }
  double t0 = now_us();
  CHECK(sc_fusion_plan(f));
  res.plan_ms = max_over_ranks(now_us() - t0) / 1e3;
  CHECK(sc_fusion_num_buckets(f, &res.buckets));
  /* Communication alone: every tensor ready at once, then wait for all. */
  iteration(f, 0, 0, 1);
  CHECK(sc_barrier(comm));
  t0 = now_us();
  for (int i = 0; i < opt.iters; i++) iteration(f, 0, 0, 1);
  res.comm_ms = max_over_ranks((now_us() - t0) / opt.iters) / 1e3;
  /* The training loop. */
  for (int i = 0; i < opt.warmup; i++) iteration(f, dear, 1, 1);
  if (dear) CHECK(sc_fusion_wait_all(f));
  CHECK(sc_barrier(comm));
  t0 = now_us();
  pending = 0;
  for (int i = 0; i < opt.iters; i++) iteration(f, dear, 1, 1);
  if (dear) CHECK(sc_fusion_wait_all(f)); /* the last all-gathers belong to these iterations */
  res.iter_ms = max_over_ranks((now_us() - t0) / opt.iters) / 1e3;
  CHECK(sc_fusion_destroy(f));
  res.nonoverlap_ms = res.iter_ms - res.compute_ms;
  if (res.nonoverlap_ms < 0) res.nonoverlap_ms = 0;
  res.bound_ms = res.compute_ms > res.comm_ms ? res.compute_ms : res.comm_ms;
  return res;
}

static void print_row(const result_t *r, const char *tag) {
  printf("  %-7s %8d %10.2f %11.2f %10.2f %14.2f %12.2f %7.2f %s\n", r->policy, r->buckets,
         r->iter_ms, r->compute_ms, r->comm_ms, r->nonoverlap_ms, r->bound_ms,
         r->bound_ms / r->iter_ms, tag);
  fflush(stdout);
}

static void usage(FILE *f) {
  fprintf(f,
          "Usage: sc-run -n N sc_fusion_replay --trace NAME|FILE [options]\n"
          "  -t, --trace T        resnet50, vgg16, bert_base (perf/traces) or a trace file\n"
          "  -p, --policies LIST  comma list of none,size,mgwfbp,dear,single (default all)\n"
          "  -T, --iter-ms MS     compute per iteration, forward + backward (default 100)\n"
          "  -i, --iters N        timed iterations per policy (default 3)\n"
          "  -w, --warmup N       untimed iterations first (default 1)\n"
          "  -r, --repeat N       sweeps over the policies, rotated; report medians (default 1)\n"
          "      --compute MODE   sleep (default) or busy (spin on the CPU)\n"
          "      --scale S        multiply every tensor's size by S (default 1)\n"
          "      --density D      gTop-k with error feedback per bucket (default 0: dense)\n"
          "      --bucket-mb MB   SIZE / DEAR bucket size (default: the library's 25 MiB)\n"
          "      --alpha US --beta US_PER_BYTE   the all-reduce model (default 0 0: "
          "calibrate)\n"
          "      --contiguous     all gradients in one allocation (zero-copy buckets)\n"
          "  -J, --json FILE      also write the results as JSON\n");
}

static void parse(int argc, char **argv) {
  static const struct option lo[] = {
      {"trace", 1, 0, 't'}, {"policies", 1, 0, 'p'}, {"iter-ms", 1, 0, 'T'},
      {"iters", 1, 0, 'i'}, {"warmup", 1, 0, 'w'},   {"compute", 1, 0, 'c'},
      {"scale", 1, 0, 's'}, {"density", 1, 0, 'd'},  {"bucket-mb", 1, 0, 'b'},
      {"alpha", 1, 0, 'a'}, {"beta", 1, 0, 'B'},     {"contiguous", 0, 0, 'C'},
      {"json", 1, 0, 'J'},  {"repeat", 1, 0, 'r'},   {"help", 0, 0, 'h'},
      {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "t:p:T:i:w:J:r:h", lo, NULL)) != -1) {
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
      if (strcmp(optarg, "busy") && strcmp(optarg, "sleep")) {
        usage(stderr);
        exit(2);
      }
      opt.busy = !strcmp(optarg, "busy");
      break;
    case 's':
      opt.scale = atof(optarg);
      break;
    case 'd':
      opt.density = atof(optarg);
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
  parse(argc, argv);
  CHECK(sc_comm_init_env(&comm));
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &nranks);
  load_trace();
  static const char *const names[] = {"none", "size", "mgwfbp", "dear", "single"};
  size_t params = 0;
  for (size_t j = 0; j < nl; j++) params += layers[j].count;
  double compute_ms = compute_only();
  if (rank == 0) {
    printf("# sc_fusion_replay %s: %zu tensors, %zu parameters (%.1f MB fp32), %d ranks, "
           "compute %s %.1f ms/iter (measured %.1f), %d iters after %d warm-up%s%s\n",
           opt.trace, nl, params, params * 4e-6, nranks, opt.busy ? "busy" : "sleep", opt.iter_ms,
           compute_ms, opt.iters, opt.warmup, opt.density > 0 ? ", gTop-k" : "",
           opt.contiguous ? ", contiguous" : "");
    printf("# %-7s %8s %10s %11s %10s %14s %12s %7s\n", "policy", "buckets", "iter_ms",
           "compute_ms", "comm_ms", "nonoverlap_ms", "lowbound_ms", "lb/iter");
  }
  int sel[5], nsel = 0;
  for (int p = 0; p < 5; p++) {
    const char *s = strstr(opt.policies, names[p]);
    size_t len = strlen(names[p]);
    if (s && (s == opt.policies || s[-1] == ',') && (s[len] == ',' || s[len] == '\0'))
      sel[nsel++] = p;
  }
  /* --repeat: whole sweeps, each starting one policy later, so drift on a
   * shared machine does not always favour the same policy; each policy
   * reports its median run (by iteration time). */
  result_t *runs = calloc((size_t)(nsel * opt.repeat) + 1, sizeof(*runs)), res[5];
  for (int rep = 0; rep < opt.repeat; rep++)
    for (int k = 0; k < nsel; k++) {
      int q = (k + rep) % nsel;
      runs[q * opt.repeat + rep] =
          run_policy((sc_fusion_policy_t)sel[q], names[sel[q]], compute_ms);
      if (rank == 0) /* as it comes: a later policy may fail or hang */
        print_row(&runs[q * opt.repeat + rep], opt.repeat > 1 ? "run" : "");
    }
  int nres = nsel;
  for (int q = 0; q < nsel; q++) {
    result_t *rr = runs + q * opt.repeat;
    for (int a = 1; a < opt.repeat; a++) /* insertion sort by iteration time */
      for (int b = a; b > 0 && rr[b].iter_ms < rr[b - 1].iter_ms; b--) {
        result_t x = rr[b];
        rr[b] = rr[b - 1];
        rr[b - 1] = x;
      }
    res[q] = rr[opt.repeat / 2];
    const result_t *r = &res[q];
    if (rank == 0 && opt.repeat > 1) print_row(r, "median");
  }
  free(runs);
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
            "\"contiguous\": %d, \"repeat\": %d,\n \"results\": [",
            opt.trace, nl, params, nranks, opt.busy ? "busy" : "sleep", opt.iter_ms, compute_ms,
            opt.iters, opt.warmup, opt.scale, opt.density, opt.contiguous, opt.repeat);
    for (int i = 0; i < nres; i++)
      fprintf(j,
              "%s\n  {\"policy\": \"%s\", \"buckets\": %d, \"plan_ms\": %.3f, \"iter_ms\": %.4f, "
              "\"compute_ms\": %.4f, \"comm_ms\": %.4f, \"nonoverlap_ms\": %.4f, "
              "\"lower_bound_ms\": %.4f}",
              i ? "," : "", res[i].policy, res[i].buckets, res[i].plan_ms, res[i].iter_ms,
              res[i].compute_ms, res[i].comm_ms, res[i].nonoverlap_ms, res[i].bound_ms);
    fprintf(j, "\n]}\n");
    fclose(j);
  }
  CHECK(sc_comm_destroy(comm));
  for (size_t j = 0; j < nl && !opt.contiguous; j++) free(layers[j].grad);
  free(block);
  free(layers);
  return 0;
}
