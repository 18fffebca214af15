/* SPDX-License-Identifier: BSD-3-Clause */
/* The harness's command line: nccl-tests' flags, sizes with K/M/G suffixes. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "perf/perf_internal.h"

static void usage(const perf_coll_t *coll, FILE *f) {
  fprintf(f,
          "Usage: sc-run -n NRANKS %s [options]\n"
          "nccl-tests-style benchmark of %s%s; every rank calls sc_comm_init_env.\n"
          "\n"
          "  -b, --minbytes SIZE   smallest size (K/M/G suffixes; default 8)\n"
          "  -e, --maxbytes SIZE   largest size (default 32M)\n"
          "  -f, --stepfactor F    multiply the size by F each step (default 2)\n"
          "  -i, --stepbytes SIZE  add SIZE each step instead (used when -f is 1,\n"
          "                        or when -i is given without -f)\n"
          "  -n, --iters N         timed iterations per size (default 20)\n"
          "  -w, --warmup_iters N  untimed iterations before them (default 5)\n"
          "  -c, --check 0|1       check the result of one operation per size (default 1)\n"
          "  -d, --datatype T      int8 uint8 int32 uint32 int64 uint64 half bfloat16\n"
          "                        float double, or all (default float)\n",
          coll->binary, coll->timed ? "" : "sc_", coll->timed ? coll->timed : coll->name);
  if (coll->has_op)
    fprintf(f, "  -o, --op OP           sum prod min max avg, or all (default sum)\n");
  if (coll->has_root) fprintf(f, "  -r, --root R          root rank (default 0)\n");
  if (coll->algo_help)
    fputs(coll->algo_help, f);
  else if (coll->algo_env)
    fprintf(f, "  -a, --algo ALGO       set %s=ALGO before init (e.g. %s; see sc-info --env)\n",
            coll->algo_env,
            coll->compare_algos && coll->compare_algos[0] ? coll->compare_algos[0] : "ring");
  if (coll->compare_algos) {
    fprintf(f,
            "  -a, --algo compare    side by side: out-of-place %s on one extra\n"
            "                        communicator per %s value:",
            coll->name, coll->algo_env);
    for (int i = 0; coll->compare_algos[i]; i++) fprintf(f, " %s", coll->compare_algos[i]);
    fprintf(f, " auto;\n"
               "                        each size on all of them in one pass (same -w and -n,\n"
               "                        one checked operation each). Columns: time (us) per\n"
               "                        algorithm, best (the fastest correct forced one),\n"
               "                        auto-pick (what auto chooses), auto/best (median\n"
               "                        over rounds of the time ratio within a round);\n"
               "                        n/a: the algorithm failed there, a # line says why.\n"
               "                        One -d and one -o; no in-place columns.\n");
  }
  for (int i = 0; coll->opts && coll->opts[i].name; i++) fputs(coll->opts[i].help, f);
  fprintf(f, "      --mem host|device where the buffers live (default host); device: the\n"
             "                        device of this rank (local rank modulo the devices),\n"
             "                        inputs copied there and results back, outside the\n"
             "                        timing; without a device: exit status 2\n"
             "  -J, --json FILE       also write every row and the run's settings as JSON\n"
             "  -t, -g 1              accepted for nccl-tests compatibility (1 thread, 1 device)\n"
             "  -h, --help            this text\n"
             "\n");
  fputs(coll->size_help ? coll->size_help
                        : "The size column is the whole array: for reduce-scatter and all-gather,\n"
                          "nranks x count elements.\n",
        f);
  fprintf(f, "time is the slowest rank's average per operation;\n"
             "algbw = size / time (GB = 1e9 B); busbw = algbw x ");
  switch (coll->busbw) {
  case PERF_BUSBW_ALLREDUCE:
    fprintf(f, "2(P-1)/P");
    break;
  case PERF_BUSBW_GATHER:
    fprintf(f, "(P-1)/P");
    break;
  case PERF_BUSBW_ONE:
    fprintf(f, "1");
    break;
  }
  fprintf(f, ".\nExit status: 0 if all is well, 1 if a check found wrong elements,\n"
             "2 on a usage error, 3 if a library call failed (with -a compare: an\n"
             "algorithm that is n/a because it is unsupported does not count).\n");
}

static int parse_bytes(const char *s, size_t *out) {
  char *end = NULL;
  errno = 0;
  if (*s == '-') return -1;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s) return -1;
  unsigned shift = 0;
  switch (*end) {
  case 'k':
  case 'K':
    shift = 10;
    end++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    end++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    end++;
    break;
  default:
    break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end || (shift && v > (~0ull >> shift))) return -1;
  *out = (size_t)(v << shift);
  return 0;
}

static int parse_int(const char *s, long min, long max, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static void usage_error(const perf_coll_t *coll, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void usage_error(const perf_coll_t *coll, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", coll->binary);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see --help)\n");
  va_end(ap);
  exit(2);
}

void perf_parse_args(const perf_coll_t *coll, int argc, char **argv, perf_args_t *a) {
  *a = (perf_args_t){.minbytes = 8,
                     .maxbytes = 32u << 20,
                     .stepbytes = 1u << 20,
                     .stepfactor = 2,
                     .iters = 20,
                     .warmup = 5,
                     .check = 1,
                     .dtypes = {8},
                     .ndtypes = 1,
                     .ops = {0},
                     .nops = 1};
  static const struct option harness_opts[] = {
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"stepbytes", required_argument, NULL, 'i'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup_iters", required_argument, NULL, 'w'},
      {"check", required_argument, NULL, 'c'},
      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"root", required_argument, NULL, 'r'},
      {"json", required_argument, NULL, 'J'},
      {"algo", required_argument, NULL, 'a'},
      {"nthreads", required_argument, NULL, 't'},
      {"ngpus", required_argument, NULL, 'g'},
      {"help", no_argument, NULL, 'h'},
      {"mem", required_argument, NULL, 'M'},
  };
  /* The benchmark's own options after the harness's; one without a short
   * form is known to getopt by EXTRA_CODE + its index. */
  enum { N_HARNESS = sizeof(harness_opts) / sizeof(harness_opts[0]), MAX_EXTRA = 16 };
  const int EXTRA_CODE = 0x1000;
  struct option longopts[N_HARNESS + MAX_EXTRA + 1];
  char shortopts[64 + 2 * MAX_EXTRA] = "b:e:f:i:n:w:c:d:o:r:J:a:t:g:h";
  memcpy(longopts, harness_opts, sizeof(harness_opts));
  int nextra = 0;
  for (; coll->opts && coll->opts[nextra].name; nextra++) {
    const perf_opt_t *o = &coll->opts[nextra];
    if (nextra == MAX_EXTRA) {
      fprintf(stderr, "%s: more than %d options of its own\n", coll->binary, MAX_EXTRA);
      exit(2);
    }
    longopts[N_HARNESS + nextra] =
        (struct option){o->name, o->has_arg ? required_argument : no_argument, NULL,
                        o->letter ? o->letter : EXTRA_CODE + nextra};
    if (o->letter) {
      size_t len = strlen(shortopts);
      shortopts[len++] = (char)o->letter;
      if (o->has_arg) shortopts[len++] = ':';
      shortopts[len] = '\0';
    }
  }
  longopts[N_HARNESS + nextra] = (struct option){NULL, 0, NULL, 0};
  int factor_given = 0, stepbytes_given = 0, opt;
  long v;
  while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
    int extra = -1;
    for (int i = 0; i < nextra; i++)
      if (opt == (coll->opts[i].letter ? coll->opts[i].letter : EXTRA_CODE + i)) extra = i;
    if (extra >= 0) {
      const char *why = coll->parse_opt(extra, coll->opts[extra].has_arg ? optarg : NULL);
      if (why) usage_error(coll, "--%s: %s", coll->opts[extra].name, why);
      continue;
    }
    switch (opt) {
    case 'b':
      if (parse_bytes(optarg, &a->minbytes)) usage_error(coll, "-b: bad size '%s'", optarg);
      break;
    case 'e':
      if (parse_bytes(optarg, &a->maxbytes)) usage_error(coll, "-e: bad size '%s'", optarg);
      break;
    case 'f':
      if (parse_int(optarg, 1, 1 << 20, &a->stepfactor))
        usage_error(coll, "-f: '%s' is not an integer >= 1", optarg);
      factor_given = 1;
      break;
    case 'i':
      if (parse_bytes(optarg, &a->stepbytes) || a->stepbytes == 0)
        usage_error(coll, "-i: bad step '%s'", optarg);
      stepbytes_given = 1;
      break;
    case 'n':
      if (parse_int(optarg, 1, 1L << 30, &v)) usage_error(coll, "-n: bad count '%s'", optarg);
      a->iters = (int)v;
      break;
    case 'w':
      if (parse_int(optarg, 0, 1L << 30, &v)) usage_error(coll, "-w: bad count '%s'", optarg);
      a->warmup = (int)v;
      break;
    case 'c':
      if (parse_int(optarg, 0, 1, &v)) usage_error(coll, "-c: expected 0 or 1");
      a->check = (int)v;
      break;
    case 'd':
      a->ndtypes = 0;
      for (int i = 0; i < PERF_N_DTYPES; i++)
        if (!strcasecmp(optarg, "all") || !strcasecmp(optarg, perf_dtype_infos[i].name))
          a->dtypes[a->ndtypes++] = i;
      if (!a->ndtypes) usage_error(coll, "-d: unknown datatype '%s'", optarg);
      break;
    case 'o':
      a->nops = 0;
      for (int i = 0; i < PERF_N_OPS; i++)
        if (!strcasecmp(optarg, "all") || !strcasecmp(optarg, perf_op_names[i]))
          a->ops[a->nops++] = i;
      if (!a->nops) usage_error(coll, "-o: unknown op '%s'", optarg);
      break;
    case 'r':
      if (parse_int(optarg, 0, 1 << 30, &v)) usage_error(coll, "-r: bad root '%s'", optarg);
      a->root = (int)v;
      break;
    case 'J':
      a->json_path = optarg;
      break;
    case 'a':
      if (!coll->algo_env) usage_error(coll, "-a: %s has no algorithm choice", coll->name);
      a->compare = strcmp(optarg, "compare") == 0;
      if (a->compare && !coll->compare_algos)
        usage_error(coll, "-a compare: %s has no algorithm comparison", coll->name);
      a->algo = a->compare ? NULL : optarg;
      break;
    case 't':
    case 'g':
      if (strcmp(optarg, "1") != 0)
        usage_error(coll, "-%c: only 1 is supported (one rank per process)", opt);
      break;
    case 'M':
      if (perf_mem_parse(optarg, &a->mem))
        usage_error(coll, "--mem: '%s' is neither host nor device", optarg);
      break;
    case 'h':
      usage(coll, stdout);
      exit(0);
    default:
      usage(coll, stderr);
      exit(2);
    }
  }
  if (optind < argc) usage_error(coll, "unexpected argument '%s'", argv[optind]);
  if (a->minbytes > a->maxbytes) usage_error(coll, "-b is larger than -e");
  /* As nccl-tests: -i alone means additive steps. */
  if (!factor_given && stepbytes_given) a->stepfactor = 1;
  if (!coll->has_op) a->nops = 1;
  if (coll->host_only && a->mem == PERF_MEM_DEVICE)
    usage_error(coll, "--mem device: %s takes host buffers only", coll->name);
  if (a->compare && (a->ndtypes > 1 || a->nops > 1))
    usage_error(coll, "-a compare takes one datatype and one op, not all");
  const char *why = coll->check_args ? coll->check_args(a->compare) : NULL;
  if (why) usage_error(coll, "%s", why);
}
