/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared harness of the nccl-tests-style benchmarks (sc_*_perf). Each
 * binary describes one collective with a perf_coll_t; the harness parses the
 * nccl-tests flags, times, checks and prints in nccl-tests' format. */
#ifndef SC_PERF_COMMON_H
#define SC_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sparsecoll.h"

/* One operation of the sweep: what every rank passes and knows. */
typedef struct perf_case {
  sc_comm_t *comm;
  int rank, nranks;
  sc_dtype_t dtype;
  size_t elem_size;
  sc_redop_t op; /* ignored when the collective has no op */
  int root;
  size_t count; /* the count argument of the call (RS: recvcount, AG: sendcount) */
  size_t total; /* elements of the whole array (the size column / elem_size) */
  int in_place;
  void *sendbuf; /* as passed to the call (in place: derived from recvbuf) */
  void *recvbuf;
  /* The value of the collective's algo_env that comm was created under (-a,
   * or in -a compare the column's name, "auto" included); NULL: unset. For
   * a benchmark whose run() makes the choice itself (coll->algo_help). */
  const char *algo;
  void *send_alloc; /* the two max-size buffers the placements are carved from */
  void *recv_alloc;
  /* Bytes of recv_alloc the case uses when they exceed the whole array (an
   * uneven all-to-all's most loaded receiver); 0: total * elem_size. The
   * harness sizes recv_alloc by the largest over the sweep. */
  size_t recv_bytes;
  /* Set by place: the collective has no form for this placement (the
   * uneven all-to-all in place); the row shows n/a there. */
  int skip;
  /* Set by the harness for perf_store_input and the checks: */
  int reduces;        /* the collective applies op */
  int timing;         /* inputs for the timed loop, not for a check */
  unsigned value_mod; /* inputs are hash % value_mod */
  int prod_twos;      /* PROD: only ranks below this may contribute a factor 2 */
} perf_case_t;

typedef enum perf_busbw {
  PERF_BUSBW_ALLREDUCE, /* 2(P-1)/P */
  PERF_BUSBW_GATHER,    /* (P-1)/P, bytes = the whole P x count array */
  PERF_BUSBW_ONE        /* broadcast, reduce */
} perf_busbw_t;

/* An option of one benchmark beyond the harness's flags. */
typedef struct perf_opt {
  const char *name; /* long name, without the dashes */
  int letter;       /* short form; 0: none */
  int has_arg;
  const char *help; /* its --help lines, each starting with two spaces */
} perf_opt_t;

typedef struct perf_coll {
  const char *binary;   /* "sc_allreduce_perf" */
  const char *name;     /* "allreduce" */
  int has_op;           /* redop column and -o; else "none" */
  int has_root;         /* root column and -r; else -1 */
  int blocks_per_rank;  /* 1: count = total / P (RS, AG); 0: count = total */
  const char *algo_env; /* variable -a sets before init; NULL: -a unsupported */
  /* --help's line for -a ALGO where algo_env is the benchmark's own choice
   * (run() reads c->algo) rather than a library variable; NULL: the library's. */
  const char *algo_help;
  int host_only;     /* the calls take host buffers only: --mem device is a usage error */
  const char *timed; /* --help's name of what is timed; NULL: sc_<name> */
  /* -a compare: the algorithms algo_env can force (NULL-terminated; NULL: no
   * compare mode), and what algo_env=auto picks for c on c->comm (a
   * communicator created with algo_env=auto; the name is a static string). */
  const char *const *compare_algos;
  sc_result_t (*auto_pick)(const perf_case_t *c, const char **name);
  perf_busbw_t busbw;
  /* Points c->sendbuf / c->recvbuf into the allocations for c->in_place. */
  void (*place)(perf_case_t *c);
  sc_result_t (*run)(const perf_case_t *c);
  /* This rank's input for a checked (or just initialised) operation. */
  void (*fill)(const perf_case_t *c);
  /* Wrong elements of this rank's result. */
  int64_t (*check)(const perf_case_t *c);

  /* Optional; NULL or 0 where the harness's default serves. */
  /* Sets c->count and c->total (and c->recv_bytes) for the sweep size `size`
   * in bytes; the default rounds by blocks_per_rank. */
  void (*set_count)(perf_case_t *c, size_t size);
  const perf_opt_t *opts; /* its own flags, up to a NULL name */
  /* opts[index] was given (arg: its value, or NULL): NULL, or why the value
   * is wrong (a usage error). */
  const char *(*parse_opt)(int index, const char *arg);
  /* After every flag was read: NULL, or why the combination is refused. */
  const char *(*check_args)(int compare);
  /* What the size column means, for --help; NULL: the reduce-scatter's and
   * all-gather's sentence. */
  const char *size_help;
  /* Settings of the run beyond the harness's, after init: json 0 writes
   * '#' lines for the table's header, json 1 JSON members, each preceded
   * by ",\n  ". */
  void (*describe)(FILE *f, int json, int nranks);
} perf_coll_t;

int perf_main(const perf_coll_t *coll, int argc, char **argv);

/* For compare_algos: the names of the library's registered candidates of coll (an
 * sc_coll_t), in the registry's order, NULL-terminated (a static array). */
const char *const *perf_registry_algos(int coll);

/* Input and expected values, from one deterministic formula every rank can
 * evaluate for every other rank. Values are small non-negative integers
 * chosen so that every result is exact in the dtype (integer types wrap). */

/* Writes rank `rank`'s input element `index` (of the op's input array) at buf[pos]. */
void perf_store_input(const perf_case_t *c, void *buf, size_t pos, int rank, size_t index);
/* 1 if buf[pos] holds rank `rank`'s input element `index` (copy collectives). */
int perf_is_input(const perf_case_t *c, const void *buf, size_t pos, int rank, size_t index);
/* 1 if buf[pos] holds the reduction over all ranks of input element `index`. */
int perf_is_reduced(const perf_case_t *c, const void *buf, size_t pos, size_t index);
/* Byte pattern for output regions, so that an element the operation never
 * wrote is counted wrong. */
void perf_poison(void *buf, size_t bytes);

/* Element pointer arithmetic on untyped buffers. */
static inline void *perf_elem(void *buf, size_t elem_size, size_t i) {
  return (char *)buf + elem_size * i;
}

#endif
