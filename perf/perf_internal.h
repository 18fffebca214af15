/* SPDX-License-Identifier: BSD-3-Clause */
/* What the harness's files share among themselves: perf_common.c runs the
 * sweep, perf_compare.c the -a compare sweep, perf_args.c reads the flags,
 * perf_check.c makes and checks the data, perf_output.c prints the tables and
 * writes the JSON. The benchmarks see only perf_common.h. */
#ifndef SC_PERF_INTERNAL_H
#define SC_PERF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "perf/perf_common.h"
#include "perf/perf_mem.h"
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
  const char *algo; /* -a ALGO; NULL when not given or in compare mode */
  int compare;      /* -a compare */
  perf_mem_t mem;   /* --mem: where the buffers handed to the library live */
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
  int32_t device; /* --mem device: the device the rank uses; else -1 */
  char host[PERF_HOST_NAME_LEN];
} perf_rank_desc_t;

/* What a sweep works with, set up by perf_main. */
typedef struct perf_world {
  const perf_coll_t *coll;
  const perf_args_t *a;
  sc_comm_t *comm; /* from sc_comm_init_env */
  int rank, nranks;
  const perf_rank_desc_t *ranks;
  void *send_alloc, *recv_alloc; /* a->maxbytes and recv_max, pages touched */
  size_t recv_max;               /* a->maxbytes, or more (perf_case_t.recv_bytes) */
  void *dev_send, *dev_recv;     /* --mem device: as large as those; else NULL */
} perf_world_t;

/* --mem device. The benchmarks' place, fill and check work on the host
 * allocations; the library is called with `call`, whose buffers sit at the
 * same offsets of the device allocations (with host memory, a copy of c). */
void perf_call_case(const perf_world_t *w, const perf_case_t *c, perf_case_t *call);
/* Copies what fill wrote (the bytes c uses of both allocations) to the
 * device; nothing with host memory. */
void perf_upload_case(const perf_world_t *w, const perf_case_t *c);
/* Copies the device results back before check; nothing with host memory. */
void perf_download_case(const perf_world_t *w, const perf_case_t *c);

/* Fails the process (exit 3, the detail on stderr) unless r is SC_SUCCESS. */
void perf_check_sc(sc_result_t r, const char *call);
double perf_now_s(void);
/* Median of v[0..n) (n <= 64); -1 for n <= 0. */
double perf_median(const double *v, int n);
/* The tools that time whole steps (sc_gtopk_perf, sc_onebit_perf,
 * sc_kfac_perf). Collective: the largest v over comm's ranks (a step's
 * slowest rank). */
double perf_max_over(sc_comm_t *comm, double v);
/* Collective: the bytes the ranks sent in a step, the most and the mean. */
void perf_sent_over(sc_comm_t *comm, uint64_t sent, int nranks, double *max, double *mean);
/* A check's count of wrong values (< 0: not checked) as a table cell, "n/a"
 * when not checked, and as a JSON value, null when not checked. */
const char *perf_wrong_text(int64_t wrong, char buf[32]);
void perf_json_wrong(FILE *f, int64_t wrong);
const char *perf_op_name_of(sc_redop_t op);
/* Every size of the -b/-e/-f/-i sweep in order; returns 0 after the last. */
int perf_next_size(const perf_args_t *a, size_t *size);
/* Sets c->count and c->total for the sweep size `size` (bytes). */
void perf_set_count(const perf_coll_t *coll, perf_case_t *c, size_t size);

/* -a compare: the whole run after init; returns the exit status. */
int perf_compare(const perf_world_t *w);

void perf_print_header(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                       const perf_rank_desc_t *ranks);
void perf_print_row(const perf_row_t *row);
/* Returns -1 (after saying why on stderr) if the file could not be written. */
int perf_write_json(const perf_coll_t *coll, const perf_args_t *a, int nranks,
                    const perf_rank_desc_t *ranks, const perf_row_t *rows, size_t nrows,
                    int64_t total_wrong, double avg_busbw);

/* -a compare: the forced algorithms, then "auto" last. */
#define PERF_MAX_ALGOS 8
#define PERF_NOTE_LEN  512

typedef struct perf_compare_row {
  size_t bytes, count;
  double time_us[PERF_MAX_ALGOS]; /* < 0: n/a */
  int64_t wrong[PERF_MAX_ALGOS];  /* -1: not checked (or n/a) */
  int best;                       /* fastest correct forced algorithm; -1: none */
  const char *auto_pick;          /* sc_allreduce_algo's answer; NULL: n/a */
  double auto_ratio;              /* auto / best; < 0: n/a */
} perf_compare_row_t;

/* Why an algorithm was n/a: the first failure of each kind, as printed. */
typedef struct perf_compare_note {
  int algo;     /* index into names */
  long long at; /* size in bytes; -1: creating the communicator */
  sc_result_t code;
  char text[PERF_NOTE_LEN];
} perf_compare_note_t;

typedef struct perf_compare_run {
  int nalgos; /* names[nalgos - 1] is "auto" */
  const char *names[PERF_MAX_ALGOS];
  const char *type, *redop;
  const perf_compare_row_t *rows;
  size_t nrows;
  const perf_compare_note_t *notes;
  size_t nnotes;
  int64_t total_wrong;
  int failed;           /* a failure other than SC_ERR_UNSUPPORTED */
  int within, compared; /* sizes with auto/best <= 1.10, sizes with both measured */
} perf_compare_run_t;

void perf_print_compare_header(const perf_world_t *w, const perf_compare_run_t *run);
/* The column header, after the notes of communicators that failed. */
void perf_print_compare_columns(const perf_compare_run_t *run);
void perf_print_compare_note(const perf_compare_run_t *run, const perf_compare_note_t *note);
void perf_print_compare_row(const perf_compare_run_t *run, const perf_compare_row_t *row);
void perf_print_compare_footer(const perf_compare_run_t *run);
/* Returns -1 (after saying why on stderr) if the file could not be written. */
int perf_write_compare_json(const perf_world_t *w, const perf_compare_run_t *run);

#endif
