/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/compress/: the compressed all-reduces (low-rank, half-precision wire,
 * 1-bit). They sit above lib/sparse and lib/core and below lib/fusion: each is
 * a public call built from the dense and sparse collectives. */
#ifndef SC_COMPRESS_H
#define SC_COMPRESS_H

#include "sparsecoll.h"

#endif
