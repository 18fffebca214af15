/* SPDX-License-Identifier: BSD-3-Clause */
#include "lib/base/dtype.h"

int sc_get_version(void) {
  return SC_VERSION_MAJOR * 10000 + SC_VERSION_MINOR * 100 + SC_VERSION_PATCH;
}

size_t sc_dtype_size(sc_dtype_t t) {
  switch (t) {
  case SC_INT8:
  case SC_UINT8:
    return 1;
  case SC_FLOAT16:
  case SC_BFLOAT16:
    return 2;
  case SC_INT32:
  case SC_UINT32:
  case SC_FLOAT32:
    return 4;
  case SC_INT64:
  case SC_UINT64:
  case SC_FLOAT64:
    return 8;
  }
  return 0;
}

const char *sc_dtype_name(sc_dtype_t t) {
  static const char *const names[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                      "uint64", "float16", "bfloat16", "float32", "float64"};
  return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "invalid-dtype";
}

const char *sc_redop_name(sc_redop_t o) {
  static const char *const names[] = {"sum", "prod", "min", "max", "avg"};
  return (unsigned)o < sizeof(names) / sizeof(names[0]) ? names[o] : "invalid-op";
}
