/* SPDX-License-Identifier: BSD-3-Clause */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "test/multi/mr_common.h"

int mr_rank, mr_nranks;
long mr_failures, mr_checks;

const char *const mr_dtype_names[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                      "uint64", "float16", "bfloat16", "float32", "float64"};
const char *const mr_op_names[] = {"sum", "prod", "min", "max", "avg"};

void mr_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rank %d FAIL: ", mr_rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  mr_failures++;
}

static int mr_is_unsigned(sc_dtype_t dt) {
  return dt == SC_UINT8 || dt == SC_UINT32 || dt == SC_UINT64;
}

static int mr_is_int(sc_dtype_t dt) {
  return dt <= SC_UINT64;
}

/* Values in [-8, 8] (unsigned: [0, 16]); PROD: one rank per element gives 2
 * (or -1 for signed every third element), the others 1; AVG on floats: a
 * multiple of nranks so the mean is an exact integer. */
double mr_input(int r, size_t i, sc_dtype_t dt, sc_redop_t op, int nranks) {
  if (op == SC_PROD) {
    if (!mr_is_unsigned(dt) && (i + (size_t)r) % 3 == 0 && (size_t)r == i % (size_t)nranks)
      return -1.0;
    return (size_t)r == i % (size_t)nranks ? 2.0 : 1.0;
  }
  long v = (long)((i * 7 + (size_t)r * 13) % 17);
  if (!mr_is_unsigned(dt)) v -= 8;
  if (op == SC_AVG && !mr_is_int(dt)) v *= nranks;
  return (double)v;
}

double mr_expected(size_t i, sc_dtype_t dt, sc_redop_t op, int nranks) {
  double acc = mr_input(0, i, dt, op, nranks);
  for (int r = 1; r < nranks; r++) {
    double v = mr_input(r, i, dt, op, nranks);
    switch (op) {
    case SC_SUM:
    case SC_AVG:
      acc += v;
      break;
    case SC_PROD:
      acc *= v;
      break;
    case SC_MIN:
      acc = v < acc ? v : acc;
      break;
    case SC_MAX:
      acc = v > acc ? v : acc;
      break;
    }
  }
  if (op == SC_AVG) acc = mr_is_int(dt) ? trunc(acc / nranks) : acc / nranks;
  return acc;
}

/* fp16/bf16 of small integers: exact, so a plain encoder suffices here. */
static uint16_t mr_small_int_to_half(double v) {
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  double a = fabs(v);
  int e = 0;
  while (a >= 2.0) {
    a /= 2;
    e++;
  }
  uint16_t mant = (uint16_t)((a - 1.0) * 1024.0);
  return (uint16_t)(sign | ((e + 15) << 10) | mant);
}

static double mr_half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t mr_small_int_to_bf16(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* small integers have no bits below the top 16 */
}

static double mr_bf16_to_double(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void mr_set(void *buf, size_t i, sc_dtype_t dt, double v) {
  switch (dt) {
  case SC_INT8:
    ((int8_t *)buf)[i] = (int8_t)v;
    break;
  case SC_UINT8:
    ((uint8_t *)buf)[i] = (uint8_t)v;
    break;
  case SC_INT32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case SC_UINT32:
    ((uint32_t *)buf)[i] = (uint32_t)v;
    break;
  case SC_INT64:
    ((int64_t *)buf)[i] = (int64_t)v;
    break;
  case SC_UINT64:
    ((uint64_t *)buf)[i] = (uint64_t)v;
    break;
  case SC_FLOAT16:
    ((uint16_t *)buf)[i] = mr_small_int_to_half(v);
    break;
  case SC_BFLOAT16:
    ((uint16_t *)buf)[i] = mr_small_int_to_bf16(v);
    break;
  case SC_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  case SC_FLOAT64:
    ((double *)buf)[i] = v;
    break;
  }
}

double mr_get(const void *buf, size_t i, sc_dtype_t dt) {
  switch (dt) {
  case SC_INT8:
    return ((const int8_t *)buf)[i];
  case SC_UINT8:
    return ((const uint8_t *)buf)[i];
  case SC_INT32:
    return ((const int32_t *)buf)[i];
  case SC_UINT32:
    return ((const uint32_t *)buf)[i];
  case SC_INT64:
    return (double)((const int64_t *)buf)[i];
  case SC_UINT64:
    return (double)((const uint64_t *)buf)[i];
  case SC_FLOAT16:
    return mr_half_to_double(((const uint16_t *)buf)[i]);
  case SC_BFLOAT16:
    return mr_bf16_to_double(((const uint16_t *)buf)[i]);
  case SC_FLOAT32:
    return ((const float *)buf)[i];
  case SC_FLOAT64:
    return ((const double *)buf)[i];
  }
  return NAN;
}

void mr_fill(void *buf, size_t n, int r, size_t base, sc_dtype_t dt, sc_redop_t op) {
  for (size_t i = 0; i < n; i++) mr_set(buf, i, dt, mr_input(r, base + i, dt, op, mr_nranks));
}
