/* SPDX-License-Identifier: BSD-3-Clause */
/* Low-rank compression's kernels (kernels/cpu/lowrank.h), float and double
 * from one body (kernels/cpu/lowrank_tmpl.h). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/lowrank.h"

/* The projection P = M Q (the pass over the gradient that compression
 * adds) has an AVX2 build, taken where the CPU has it: the portable
 * version's operations in the same order (no FMA), so the same bits, on
 * twice the lanes per instruction. */
#if defined(__GNUC__) && defined(__x86_64__)
#define LR_AVX2 1
static int lr_has_avx2(void) {
  return __builtin_cpu_supports("avx2");
}
#else
#define LR_AVX2 0
#endif

/* Elements per constant-length chunk of an axpy. */
#define LR_CHUNK 64

/* splitmix64 (Steele, Lea, Flood): a full-period generator whose outputs
 * pass BigCrush, state advanced by a constant. */
static uint64_t lr_splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#define LR_T   float
#define LR_SFX f32
#define LR_EPS FLT_EPSILON
#include "kernels/cpu/lowrank_tmpl.h"
#undef LR_T
#undef LR_SFX
#undef LR_EPS

#define LR_T   double
#define LR_SFX f64
#define LR_EPS DBL_EPSILON
#include "kernels/cpu/lowrank_tmpl.h"
#undef LR_T
#undef LR_SFX
#undef LR_EPS
