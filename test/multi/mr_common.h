/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the multi-rank test programs (run under sc-run): deterministic
 * inputs every rank can compute for every other rank, exact references in
 * int64/double, and element comparison for every dtype. */
#ifndef SC_MR_COMMON_H
#define SC_MR_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

extern int mr_rank, mr_nranks;
extern long mr_failures, mr_checks;

/* Input element i of rank r for (dtype, op): small integers, so that every
 * result is exactly representable in every dtype (fp16 and int8 included). */
double mr_input(int r, size_t i, sc_dtype_t dt, sc_redop_t op, int nranks);
/* Expected reduction of mr_input over all ranks at element i. */
double mr_expected(size_t i, sc_dtype_t dt, sc_redop_t op, int nranks);
void mr_fill(void *buf, size_t n, int r, size_t base, sc_dtype_t dt, sc_redop_t op);
double mr_get(const void *buf, size_t i, sc_dtype_t dt);
void mr_set(void *buf, size_t i, sc_dtype_t dt, double v);

/* Records a failure with context (printed once per check). */
void mr_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Calls must succeed: prints sc_last_error() on failure. */
#define MR_OK(call)                                                                                \
  do {                                                                                             \
    sc_result_t mr_r_ = (call);                                                                    \
    mr_checks++;                                                                                   \
    if (mr_r_ != SC_SUCCESS)                                                                       \
      mr_fail("%s:%d %s -> %s: %s", __FILE__, __LINE__, #call, sc_strerror(mr_r_),                 \
              sc_last_error());                                                                    \
  } while (0)

extern const char *const mr_dtype_names[];
extern const char *const mr_op_names[];

#endif
