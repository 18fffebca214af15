/* SPDX-License-Identifier: BSD-3-Clause */
/* Element types and reduction operations: sizes and names. */
#ifndef SC_BASE_DTYPE_H
#define SC_BASE_DTYPE_H

#include "sparsecoll.h"

const char *sc_dtype_name(sc_dtype_t t);
const char *sc_redop_name(sc_redop_t o);

#endif
