/* What the harness's files share among themselves: perf_common.c runs the
 * sweep, perf_args.c reads the flags, perf_check.c makes and checks the data,
 * perf_output.c prints the table and writes the JSON. The benchmarks see only
 * perf_common.h. */
#ifndef SC_PERF_INTERNAL_H
#define SC_PERF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "perf/perf_common.h"
#include "sparsecoll.h"

#define PERF_N_DTYPES      10
#define PERF_N_OPS         5
#define PERF_HOST_NAME_LEN 56

typedef struct perf_dtype_info {
  const char *name; /* as nccl-tests spells it */
  sc_dtype_t dtype;
  int is_float;
  int bits;           /* integer types */
  int is_signed;      /* integer types */
  double exact_limit; /* float types: every integer up to this is exact */
  int max_pow2;       /* float types: largest finite power of two */
  int mant_bits;      /* float types: stored mantissa bits */
} perf_dtype_info_t;

/* In the order -d all and -o all sweep them. */
extern const perf_dtype_info_t perf_dtype_infos[];
extern const char *const perf_op_names[];
extern const sc_redop_t perf_op_values[];

typedef struct perf_args {
  size_t minbytes, maxbytes, stepbytes;
  long stepfactor; /* > 1: multiply; else add stepbytes */
  int iters, warmup, check;
  int dtypes[PERF_N_DTYPES], ndtypes; /* indices into perf_dtype_infos */
  int ops[PERF_N_OPS], nops;          /* indices into perf_op_names */
  int root;
  const char *json_path;
  const char *algo;
} perf_args_t;

/* Exits with status 0 after --help and 2 on a usage error. */
void perf_parse_args(const perf_coll_t *coll, int argc, char **argv, perf_args_t *a);

/* Picks the input value range for c's dtype, op and nranks (c->value_mod,
 * c->prod_twos) so that every result stays exact. */
void perf_setup_values(perf_case_t *c);

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

typedef struct perf_rank_desc {
  int32_t pid;
  char host[PERF_HOST_NAME_LEN];
  char pad[64 - 4 - PERF_HOST_NAME_LEN];
} perf_rank_desc_t;

void perf_print_header(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                       const perf_rank_desc_t *ranks);
void perf_print_row(const perf_row_t *row);
/* Returns -1 (after saying why on stderr) if the file could not be written. */
int perf_write_json(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                    const perf_rank_desc_t *ranks, const perf_row_t *rows, size_t nrows,
                    int64_t total_wrong, double avg_busbw);

#endif
