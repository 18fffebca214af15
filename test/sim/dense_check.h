/* SPDX-License-Identifier: BSD-3-Clause */
/* One simulated run of a dense collective checked against a reference
 * computed from the inputs (never by the simulator), for the simulator test
 * programs. Inputs are chosen so that every reduction order gives exact
 * results: random integers (wraparound sums) and small integers in floats. */
#ifndef SC_TEST_SIM_DENSE_CHECK_H
#define SC_TEST_SIM_DENSE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/algorithms.h"
#include "test/sim/simulator.h"

typedef sc_result_t (*dense_gen_fn)(const sc_coll_args_t *, sc_sched_t *);

typedef struct dense_gen {
  const char *name;
  sc_coll_t coll;
  dense_gen_fn fn;
} dense_gen_t;

/* PLACE_OUT: separate buffers. PLACE_IN_SAME: SEND and RECV start at the
 * same address. PLACE_IN_RANK (RS, AG only): NCCL's convention, the rank's
 * slice of the big buffer is the small one (RS: RECV == SEND + r*count; AG:
 * SEND == RECV + r*count). */
typedef enum dense_place { PLACE_OUT, PLACE_IN_SAME, PLACE_IN_RANK } dense_place_t;

typedef struct dense_case {
  const dense_gen_t *gen;
  int nranks, root;
  size_t count, chunk;
  sc_dtype_t dtype;
  sc_redop_t op;
  dense_place_t place;
  sc_sim_model_t model;
  uint64_t seed;
} dense_case_t;

/* Results so far; a program prints them as "N passed, N failed". */
extern int dense_passed, dense_failed;

/* Runs one case; counts it and prints one FAIL line if it fails. */
void dense_run_case(const dense_case_t *tc);

/* Counts a check without data; prints "FAIL <what>" if cond is false. */
void dense_expect(int cond, const char *what, ...) __attribute__((format(printf, 2, 3)));

/* The pieces of dense_run_case, for a program that runs the same case
 * elsewhere (sim_executor.c: the real executor): rank r's input element j,
 * the sizes of its input and output (elements), the output every rank's
 * result is a slice of (malloc'd; NULL when out of memory), and the check of
 * rank r's output against it (0, or -1 after printing a FAIL line). */
void dense_input(const dense_case_t *tc, int r, size_t j, void *out);
void dense_io_counts(const dense_case_t *tc, int r, size_t *in, size_t *out);
unsigned char *dense_expected(const dense_case_t *tc);
int dense_check_output(const dense_case_t *tc, int r, const unsigned char *recv,
                       const unsigned char *want);

uint64_t dense_mix(uint64_t x);
size_t dense_dtype_bytes(sc_dtype_t t);

#endif
