/* The nccl-tests-style harness: flags, sweep, timing, checking, output. */
#include "perf/perf_common.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define PAGE_BYTES    4096
#define HOST_NAME_LEN 56

/* ---- dtypes and ops ---- */

typedef struct dtype_info {
  const char *name; /* as nccl-tests spells it */
  sc_dtype_t dtype;
  int is_float;
  int bits;           /* integer types */
  int is_signed;      /* integer types */
  double exact_limit; /* float types: every integer up to this is exact */
  int max_pow2;       /* float types: largest finite power of two */
  int mant_bits;      /* float types: stored mantissa bits */
} dtype_info_t;

static const dtype_info_t dtype_infos[] = {
    {"int8", SC_INT8, 0, 8, 1, 0, 0, 0},
    {"uint8", SC_UINT8, 0, 8, 0, 0, 0, 0},
    {"int32", SC_INT32, 0, 32, 1, 0, 0, 0},
    {"uint32", SC_UINT32, 0, 32, 0, 0, 0, 0},
    {"int64", SC_INT64, 0, 64, 1, 0, 0, 0},
    {"uint64", SC_UINT64, 0, 64, 0, 0, 0, 0},
    {"half", SC_FLOAT16, 1, 0, 0, 2048.0, 15, 10},
    {"bfloat16", SC_BFLOAT16, 1, 0, 0, 256.0, 127, 7},
    {"float", SC_FLOAT32, 1, 0, 0, 16777216.0, 127, 23},
    {"double", SC_FLOAT64, 1, 0, 0, 9007199254740992.0, 1023, 52},
};
#define N_DTYPES ((int)(sizeof(dtype_infos) / sizeof(dtype_infos[0])))

static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};
static const sc_redop_t op_values[] = {SC_SUM, SC_PROD, SC_MIN, SC_MAX, SC_AVG};
#define N_OPS ((int)(sizeof(op_names) / sizeof(op_names[0])))

static const dtype_info_t *dtype_info_of(sc_dtype_t t) {
  for (int i = 0; i < N_DTYPES; i++)
    if (dtype_infos[i].dtype == t) return &dtype_infos[i];
  return &dtype_infos[0];
}

static const char *op_name_of(sc_redop_t op) {
  for (int i = 0; i < N_OPS; i++)
    if (op_values[i] == op) return op_names[i];
  return "?";
}

/* ---- 16-bit float conversions (exact for the small integers used here,
 * round-to-nearest-even in general) ---- */

static uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000u;
  int fexp = (int)((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffffu;
  if (fexp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  int exp = fexp - 127 + 15;
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - exp;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)h;
}

static double half_to_double(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = ldexp(mant + 1024, exp - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static double bf16_to_double(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, sizeof(f));
  return f;
}

/* ---- element access ---- */

static void store_small(const perf_case_t *c, void *buf, size_t pos, unsigned v) {
  void *p = perf_elem(buf, c->elem_size, pos);
  switch (c->dtype) {
  case SC_INT8:
    *(int8_t *)p = (int8_t)v;
    break;
  case SC_UINT8:
    *(uint8_t *)p = (uint8_t)v;
    break;
  case SC_INT32:
    *(int32_t *)p = (int32_t)v;
    break;
  case SC_UINT32:
    *(uint32_t *)p = (uint32_t)v;
    break;
  case SC_INT64:
    *(int64_t *)p = (int64_t)v;
    break;
  case SC_UINT64:
    *(uint64_t *)p = (uint64_t)v;
    break;
  case SC_FLOAT16:
    *(uint16_t *)p = float_to_half((float)v);
    break;
  case SC_BFLOAT16:
    *(uint16_t *)p = float_to_bf16((float)v);
    break;
  case SC_FLOAT32:
    *(float *)p = (float)v;
    break;
  case SC_FLOAT64:
    *(double *)p = (double)v;
    break;
  }
}

static uint64_t load_bits(const perf_case_t *c, const void *buf, size_t pos) {
  const void *p = (const char *)buf + c->elem_size * pos;
  switch (c->dtype) {
  case SC_INT8:
    return (uint64_t)(int64_t) * (const int8_t *)p;
  case SC_UINT8:
    return *(const uint8_t *)p;
  case SC_INT32:
    return (uint64_t)(int64_t) * (const int32_t *)p;
  case SC_UINT32:
    return *(const uint32_t *)p;
  case SC_INT64:
    return (uint64_t) * (const int64_t *)p;
  case SC_UINT64:
    return *(const uint64_t *)p;
  default:
    return 0;
  }
}

static double load_double(const perf_case_t *c, const void *buf, size_t pos) {
  const void *p = (const char *)buf + c->elem_size * pos;
  switch (c->dtype) {
  case SC_FLOAT16:
    return half_to_double(*(const uint16_t *)p);
  case SC_BFLOAT16:
    return bf16_to_double(*(const uint16_t *)p);
  case SC_FLOAT32:
    return *(const float *)p;
  case SC_FLOAT64:
    return *(const double *)p;
  default:
    return 0;
  }
}

/* ---- the input formula ---- */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Ranges that keep every partial and final result exact in the dtype and
 * keep signed integer arithmetic in the library free of overflow. */
static void setup_values(perf_case_t *c) {
  const dtype_info_t *di = dtype_info_of(c->dtype);
  double limit = di->is_float     ? di->exact_limit
                 : di->bits == 64 ? 9.2e18
                                  : ldexp(1.0, di->bits - (di->is_signed ? 1 : 0)) - 1;
  double per_rank = floor(limit / c->nranks);
  unsigned mod = 100;
  if (c->reduces && (c->op == SC_SUM || c->op == SC_AVG)) {
    mod = per_rank + 1 > 8 ? 8 : (unsigned)(per_rank + 1);
    if (mod < 2 && (di->is_float || c->op == SC_SUM)) mod = 2;
  }
  c->value_mod = mod;
  int twos = di->is_float ? di->max_pow2 : di->bits - (di->is_signed ? 2 : 1);
  c->prod_twos = twos < c->nranks ? twos : c->nranks;
}

static unsigned input_value(const perf_case_t *c, int rank, size_t index) {
  if (c->timing && c->reduces) {
    /* Values repeated in-place reduction leaves unchanged, so the timed loop
     * never overflows into Inf/NaN or wrapped integers. */
    if (c->op == SC_PROD) return 1;
    if (c->op == SC_SUM || c->op == SC_AVG) return 0;
  }
  uint64_t h =
      mix64((uint64_t)index * 0x9e3779b97f4a7c15ull ^ ((uint64_t)rank + 1) * 0xd1b54a32d192ed03ull);
  if (c->reduces && c->op == SC_PROD) return (rank < c->prod_twos && (h & 3) == 0) ? 2 : 1;
  return (unsigned)(h % c->value_mod);
}

void perf_store_input(const perf_case_t *c, void *buf, size_t pos, int rank, size_t index) {
  store_small(c, buf, pos, input_value(c, rank, index));
}

void perf_poison(void *buf, size_t bytes) {
  /* 0xa5 bytes are a negative or large number in every dtype, never an expected value. */
  memset(buf, 0xa5, bytes);
}

static int matches(const perf_case_t *c, const void *buf, size_t pos, uint64_t want_u,
                   double want_d, int inexact) {
  const dtype_info_t *di = dtype_info_of(c->dtype);
  if (!di->is_float) {
    uint64_t mask = di->bits == 64 ? ~0ull : (1ull << di->bits) - 1;
    return ((load_bits(c, buf, pos) ^ want_u) & mask) == 0;
  }
  double got = load_double(c, buf, pos);
  if (!inexact || want_d == 0) return got == want_d;
  /* AVG may divide or multiply by 1/P, rounding once more: allow 2 ulps. */
  int e;
  frexp(want_d, &e);
  return fabs(got - want_d) <= 2 * ldexp(1.0, e - 1 - di->mant_bits);
}

int perf_is_input(const perf_case_t *c, const void *buf, size_t pos, int rank, size_t index) {
  unsigned v = input_value(c, rank, index);
  return matches(c, buf, pos, v, v, 0);
}

int perf_is_reduced(const perf_case_t *c, const void *buf, size_t pos, size_t index) {
  uint64_t u = 0;
  double d = 0;
  for (int r = 0; r < c->nranks; r++) {
    unsigned v = input_value(c, r, index);
    if (r == 0) {
      u = v;
      d = v;
      continue;
    }
    switch (c->op) {
    case SC_SUM:
    case SC_AVG:
      u += v;
      d += v;
      break;
    case SC_PROD:
      u *= v;
      d *= v;
      break;
    case SC_MIN:
      if (v < u) {
        u = v;
        d = v;
      }
      break;
    case SC_MAX:
      if (v > u) {
        u = v;
        d = v;
      }
      break;
    }
  }
  int inexact = 0;
  if (c->op == SC_AVG) {
    u /= (uint64_t)c->nranks; /* integer types truncate */
    d /= c->nranks;
    inexact = d != floor(d);
  }
  return matches(c, buf, pos, u, d, inexact);
}

/* ---- options ---- */

typedef struct perf_args {
  size_t minbytes, maxbytes, stepbytes;
  long stepfactor; /* > 1: multiply; else add stepbytes */
  int iters, warmup, check;
  int dtypes[N_DTYPES], ndtypes;
  int ops[N_OPS], nops;
  int root;
  const char *json_path;
  const char *algo;
} perf_args_t;

static void usage(const perf_coll_t *coll, FILE *f) {
  fprintf(f,
          "Usage: sc-run -n NRANKS %s [options]\n"
          "nccl-tests-style benchmark of sc_%s; every rank calls sc_comm_init_env.\n"
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
          coll->binary, coll->name);
  if (coll->has_op)
    fprintf(f, "  -o, --op OP           sum prod min max avg, or all (default sum)\n");
  if (coll->has_root) fprintf(f, "  -r, --root R          root rank (default 0)\n");
  if (coll->algo_env)
    fprintf(f, "  -a, --algo ALGO       set %s=ALGO before init (e.g. ring; see sc-info --env)\n",
            coll->algo_env);
  fprintf(f, "  -J, --json FILE       also write every row and the run's settings as JSON\n"
             "  -t, -g 1              accepted for nccl-tests compatibility (1 thread, 1 device)\n"
             "  -h, --help            this text\n"
             "\n"
             "The size column is the whole array: for reduce-scatter and all-gather,\n"
             "nranks x count elements. time is the slowest rank's average per operation;\n"
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
             "2 on a usage error, 3 if a library call failed.\n");
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

static void parse_args(const perf_coll_t *coll, int argc, char **argv, perf_args_t *a) {
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
  static const struct option longopts[] = {
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
      {NULL, 0, NULL, 0},
  };
  int factor_given = 0, stepbytes_given = 0, opt;
  long v;
  while ((opt = getopt_long(argc, argv, "b:e:f:i:n:w:c:d:o:r:J:a:t:g:h", longopts, NULL)) != -1) {
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
      for (int i = 0; i < N_DTYPES; i++)
        if (!strcasecmp(optarg, "all") || !strcasecmp(optarg, dtype_infos[i].name))
          a->dtypes[a->ndtypes++] = i;
      if (!a->ndtypes) usage_error(coll, "-d: unknown datatype '%s'", optarg);
      break;
    case 'o':
      a->nops = 0;
      for (int i = 0; i < N_OPS; i++)
        if (!strcasecmp(optarg, "all") || !strcasecmp(optarg, op_names[i])) a->ops[a->nops++] = i;
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
      a->algo = optarg;
      break;
    case 't':
    case 'g':
      if (strcmp(optarg, "1") != 0)
        usage_error(coll, "-%c: only 1 is supported (one rank per process)", opt);
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
}

/* ---- failures ---- */

static const perf_coll_t *current_coll;
static int current_rank = -1;

static void check_sc(sc_result_t r, const char *call) {
  if (r == SC_SUCCESS) return;
  const char *detail = sc_last_error();
  char who[32];
  if (current_rank >= 0)
    snprintf(who, sizeof(who), "rank %d", current_rank);
  else /* before the communicator exists */
    snprintf(who, sizeof(who), "SC_RANK=%s", getenv("SC_RANK") ? getenv("SC_RANK") : "(unset)");
  fprintf(stderr, "%s: %s: %s failed: %s\n", current_coll->binary, who, call,
          (detail && *detail) ? detail : sc_strerror(r));
  fflush(NULL);
  exit(3);
}

/* ---- output ---- */

typedef struct perf_result {
  double time_us, algbw, busbw;
  int64_t wrong; /* -1: not checked */
} perf_result_t;

typedef struct perf_row {
  size_t bytes, count;
  const char *type, *redop;
  int root;
  perf_result_t res[2]; /* out of place, in place */
} perf_row_t;

typedef struct rank_desc {
  int32_t pid;
  char host[HOST_NAME_LEN];
  char pad[64 - 4 - HOST_NAME_LEN];
} rank_desc_t;

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void json_result(FILE *f, const perf_result_t *r) {
  fprintf(f,
          "{\"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, \"wrong\": ", r->time_us,
          r->algbw, r->busbw);
  if (r->wrong < 0)
    fprintf(f, "null}");
  else
    fprintf(f, "%lld}", (long long)r->wrong);
}

static int write_json(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                      const rank_desc_t *ranks, const perf_row_t *rows, size_t nrows,
                      int64_t total_wrong, double avg_busbw) {
  FILE *f = fopen(a->json_path, "w");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", coll->binary, a->json_path, strerror(errno));
    return -1;
  }
  int v = sc_get_version();
  fprintf(f, "{\n  \"binary\": ");
  json_string(f, coll->binary);
  fprintf(f, ",\n  \"collective\": ");
  json_string(f, coll->name);
  fprintf(f, ",\n  \"version\": \"%d.%d.%d\",\n  \"nranks\": %d,\n  \"dtype\": [", v / 10000,
          (v / 100) % 100, v % 100, nranks);
  for (int i = 0; i < a->ndtypes; i++)
    fprintf(f, "%s\"%s\"", i ? ", " : "", dtype_infos[a->dtypes[i]].name);
  fprintf(f, "],\n  \"op\": [");
  for (int i = 0; i < a->nops; i++)
    fprintf(f, "%s\"%s\"", i ? ", " : "", coll->has_op ? op_names[a->ops[i]] : "none");
  fprintf(f, "],\n  \"root\": %d,\n  \"algo\": ", coll->has_root ? a->root : -1);
  if (coll->algo_env) {
    const char *val = getenv(coll->algo_env);
    fprintf(f, "{\"variable\": ");
    json_string(f, coll->algo_env);
    fprintf(f, ", \"value\": ");
    json_string(f, val && *val ? val : "auto");
    fprintf(f, "}");
  } else {
    fprintf(f, "null");
  }
  fprintf(f,
          ",\n  \"minbytes\": %zu,\n  \"maxbytes\": %zu,\n  \"stepfactor\": %ld,\n"
          "  \"stepbytes\": %zu,\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"check\": %d,\n"
          "  \"ranks\": [",
          a->minbytes, a->maxbytes, a->stepfactor, a->stepbytes, a->iters, a->warmup, a->check);
  for (int r = 0; r < nranks; r++) {
    fprintf(f, "%s\n    {\"rank\": %d, \"pid\": %d, \"host\": ", r ? "," : "", r,
            (int)ranks[r].pid);
    json_string(f, ranks[r].host);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"rows\": [");
  for (size_t i = 0; i < nrows; i++) {
    const perf_row_t *row = &rows[i];
    fprintf(f,
            "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
            "\"root\": %d,\n     \"out_of_place\": ",
            i ? "," : "", row->bytes, row->count, row->type, row->redop, row->root);
    json_result(f, &row->res[0]);
    fprintf(f, ",\n     \"in_place\": ");
    json_result(f, &row->res[1]);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"out_of_bounds\": %lld,\n  \"avg_busbw_GBps\": %.6g\n}\n",
          (long long)total_wrong, avg_busbw);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "%s: error writing %s\n", coll->binary, a->json_path);
    return -1;
  }
  return 0;
}

static void print_header(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                         const rank_desc_t *ranks) {
  printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
         "agg iters: 1 validation: %d graph: 0\n",
         a->minbytes, a->maxbytes, a->stepfactor > 1 ? (size_t)a->stepfactor : a->stepbytes,
         a->stepfactor > 1 ? "factor" : "bytes", a->warmup, a->iters, a->check);
  int v = sc_get_version();
  printf("# libsparsecoll %d.%d.%d  %s  nranks %d", v / 10000, (v / 100) % 100, v % 100, coll->name,
         nranks);
  if (coll->algo_env) {
    const char *val = getenv(coll->algo_env);
    printf("  %s=%s", coll->algo_env, val && *val ? val : "auto");
  }
  printf("\n#\n# Using devices\n");
  for (int r = 0; r < nranks; r++)
    printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] CPU\n", r, 0, (int)ranks[r].pid,
           ranks[r].host, -1);
  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place      "
         "    \n",
         "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
         "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
         "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

static void print_row(const perf_row_t *row) {
  printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, row->type, row->redop, row->root);
  for (int p = 0; p < 2; p++) {
    const perf_result_t *r = &row->res[p];
    char time_str[32];
    if (r->time_us >= 10000.0)
      snprintf(time_str, sizeof(time_str), "%7.0f", r->time_us);
    else if (r->time_us >= 100.0)
      snprintf(time_str, sizeof(time_str), "%7.1f", r->time_us);
    else
      snprintf(time_str, sizeof(time_str), "%7.2f", r->time_us);
    if (r->wrong >= 0)
      printf("  %7s  %6.2f  %6.2f  %5lld", time_str, r->algbw, r->busbw, (long long)r->wrong);
    else
      printf("  %7s  %6.2f  %6.2f  %5s", time_str, r->algbw, r->busbw, "N/A");
  }
  printf("\n");
  fflush(stdout);
}

/* ---- the sweep ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double busbw_factor(perf_busbw_t kind, int nranks) {
  switch (kind) {
  case PERF_BUSBW_ALLREDUCE:
    return 2.0 * (nranks - 1) / nranks;
  case PERF_BUSBW_GATHER:
    return (double)(nranks - 1) / nranks;
  case PERF_BUSBW_ONE:
    return 1.0;
  }
  return 1.0;
}

static void run_placement(const perf_coll_t *coll, const perf_args_t *a, perf_case_t *c,
                          int in_place, perf_result_t *res) {
  c->in_place = in_place;
  coll->place(c);
  res->wrong = -1;
  if (a->check) {
    c->timing = 0;
    coll->fill(c);
    check_sc(coll->run(c), coll->name);
    int64_t wrong = coll->check(c);
    check_sc(sc_allreduce(&wrong, &wrong, 1, SC_INT64, SC_SUM, c->comm), "sc_allreduce(#wrong)");
    res->wrong = wrong;
  }
  c->timing = 1;
  coll->fill(c);
  check_sc(sc_barrier(c->comm), "sc_barrier");
  for (int i = 0; i < a->warmup; i++) check_sc(coll->run(c), coll->name);
  check_sc(sc_barrier(c->comm), "sc_barrier");
  double t0 = now_s();
  for (int i = 0; i < a->iters; i++) check_sc(coll->run(c), coll->name);
  double us = (now_s() - t0) * 1e6 / a->iters;
  /* The operation is done when the last rank is. */
  check_sc(sc_allreduce(&us, &us, 1, SC_FLOAT64, SC_MAX, c->comm), "sc_allreduce(time)");
  res->time_us = us;
  size_t bytes = c->total * c->elem_size;
  res->algbw = us > 0 ? (double)bytes / (us * 1e-6) / 1e9 : 0;
  res->busbw = res->algbw * busbw_factor(coll->busbw, c->nranks);
}

static void *alloc_pages(size_t bytes) {
  size_t rounded = (bytes + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES;
  if (rounded == 0) rounded = PAGE_BYTES;
  void *p = aligned_alloc(PAGE_BYTES, rounded);
  /* Touch every page now so that no page fault lands in a timed loop. */
  if (p) memset(p, 0, rounded);
  return p;
}

int perf_main(const perf_coll_t *coll, int argc, char **argv) {
  perf_args_t a;
  current_coll = coll;
  parse_args(coll, argc, argv, &a);
  if (a.algo) setenv(coll->algo_env, a.algo, 1);

  sc_comm_t *comm = NULL;
  check_sc(sc_comm_init_env(&comm), "sc_comm_init_env");
  int rank, nranks;
  check_sc(sc_comm_rank(comm, &rank), "sc_comm_rank");
  check_sc(sc_comm_size(comm, &nranks), "sc_comm_size");
  current_rank = rank;
  if (coll->has_root && a.root >= nranks) {
    fprintf(stderr, "%s: -r %d: root must be below nranks %d\n", coll->binary, a.root, nranks);
    sc_comm_destroy(comm);
    return 2;
  }

  rank_desc_t me;
  memset(&me, 0, sizeof(me));
  me.pid = (int32_t)getpid();
  gethostname(me.host, sizeof(me.host) - 1);
  rank_desc_t *ranks = calloc((size_t)nranks, sizeof(*ranks));
  void *send_alloc = alloc_pages(a.maxbytes);
  void *recv_alloc = alloc_pages(a.maxbytes);
  if (!ranks || !send_alloc || !recv_alloc) {
    fprintf(stderr, "%s: rank %d: cannot allocate 2 x %zu bytes\n", coll->binary, rank, a.maxbytes);
    return 3;
  }
  check_sc(sc_allgather(&me, ranks, sizeof(me), SC_UINT8, comm), "sc_allgather(rank info)");
  if (rank == 0) print_header(coll, &a, nranks, ranks);

  perf_row_t *rows = NULL;
  size_t nrows = 0, rows_cap = 0;
  int64_t total_wrong = 0;
  double busbw_sum = 0;
  int busbw_n = 0;

  for (int di = 0; di < a.ndtypes; di++) {
    const dtype_info_t *dt = &dtype_infos[a.dtypes[di]];
    for (int oi = 0; oi < a.nops; oi++) {
      perf_case_t c = {
          .comm = comm,
          .rank = rank,
          .nranks = nranks,
          .dtype = dt->dtype,
          .elem_size = sc_dtype_size(dt->dtype),
          .op = coll->has_op ? op_values[a.ops[oi]] : SC_SUM,
          .root = coll->has_root ? a.root : 0,
          .send_alloc = send_alloc,
          .recv_alloc = recv_alloc,
          .reduces = coll->has_op,
      };
      setup_values(&c);
      size_t size = a.minbytes;
      for (;;) {
        /* Rounded down like nccl-tests: whole elements, whole blocks per rank. */
        size_t elems = size / c.elem_size;
        if (coll->blocks_per_rank) {
          c.count = elems / (size_t)nranks;
          c.total = c.count * (size_t)nranks;
        } else {
          c.count = c.total = elems;
        }
        perf_row_t row = {
            .bytes = c.total * c.elem_size,
            .count = c.count,
            .type = dt->name,
            .redop = coll->has_op ? op_name_of(c.op) : "none",
            .root = coll->has_root ? c.root : -1,
        };
        run_placement(coll, &a, &c, 0, &row.res[0]);
        run_placement(coll, &a, &c, 1, &row.res[1]);
        for (int p = 0; p < 2; p++) {
          if (row.res[p].wrong > 0) total_wrong += row.res[p].wrong;
          busbw_sum += row.res[p].busbw;
          busbw_n++;
        }
        if (rank == 0) {
          print_row(&row);
          if (a.json_path) {
            if (nrows == rows_cap) {
              rows_cap = rows_cap ? 2 * rows_cap : 64;
              perf_row_t *grown = realloc(rows, rows_cap * sizeof(*rows));
              if (!grown) {
                fprintf(stderr, "%s: out of memory\n", coll->binary);
                return 3;
              }
              rows = grown;
            }
            rows[nrows++] = row;
          }
        }
        size_t next = a.stepfactor > 1 ? size * (size_t)a.stepfactor : size + a.stepbytes;
        if (next <= size) next = size + 1; /* 0 x factor, or overflow */
        if (next <= size || next > a.maxbytes) break;
        size = next;
      }
    }
  }

  double avg_busbw = busbw_n ? busbw_sum / busbw_n : 0;
  int status = total_wrong > 0 ? 1 : 0;
  if (rank == 0) {
    printf("# Out of bounds values : %lld %s\n", (long long)total_wrong,
           total_wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n", avg_busbw);
    printf("#\n");
    fflush(stdout);
    if (a.json_path &&
        write_json(coll, &a, nranks, ranks, rows, nrows, total_wrong, avg_busbw) != 0)
      status = status ? status : 3;
  }
  check_sc(sc_comm_destroy(comm), "sc_comm_destroy");
  free(rows);
  free(ranks);
  free(send_alloc);
  free(recv_alloc);
  return status;
}
