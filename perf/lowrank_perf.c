/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_lowrank_perf: low-rank compression's kernels (kernels/cpu/lowrank.h) on
 * one core against memcpy of the gradient's bytes: the projection P = M Q
 * (the compressor's pass over the gradient; also its portable SSE2 build
 * where the AVX2 one runs), Q = M^T P, the rebuild
 * M - P Q^T (error feedback's pass) and the orthonormalization of P. Each
 * figure is the best of ITERS runs after one warm-up; "x copy" is the
 * kernel's time over memcpy's (both read the gradient once; memcpy also
 * writes it). One process, no communicator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/lowrank.h"
#include "lib/base/clock.h"

static void usage(FILE *f) {
  fprintf(f, "usage: sc_lowrank_perf [-m ROWS] [-k COLS] [-r RANK] [-n ITERS]\n"
             "  float32 gradient of ROWS x COLS (default 4096 x 4096), factors of RANK\n"
             "  columns (default 4); prints each kernel's best time of ITERS (default 10)\n"
             "  and its ratio to memcpy of the gradient's bytes.\n");
}

static int parse(const char *s, size_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (!end || *end || v == 0) return -1;
  *out = (size_t)v;
  return 0;
}

int main(int argc, char **argv) {
  size_t rows = 4096, cols = 4096, r = 4, iters = 10;
  for (int i = 1; i < argc; i++) {
    size_t *dst = NULL;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "-m")) dst = &rows;
    if (!strcmp(argv[i], "-k")) dst = &cols;
    if (!strcmp(argv[i], "-r")) dst = &r;
    if (!strcmp(argv[i], "-n")) dst = &iters;
    if (!dst || i + 1 >= argc || parse(argv[++i], dst)) {
      usage(stderr);
      return 2;
    }
  }
  const size_t n = rows * cols, bytes = n * sizeof(float);
  float *m = malloc(bytes), *copy = malloc(bytes), *pt = malloc(r * rows * sizeof(float)),
        *qt = malloc(r * cols * sizeof(float));
  if (!m || !copy || !pt || !qt) {
    fprintf(stderr, "sc_lowrank_perf: no memory for %zu bytes\n", bytes);
    return 1;
  }
  sc_lr_normal_f32(m, n, 1);
  sc_lr_normal_f32(qt, r * cols, 2);
  sc_lr_normal_f32(pt, r * rows, 3);
  memcpy(copy, m, bytes);
  const char *names[] = {"memcpy", "P = M Q", "(portable)", "Q = M^T P", "M -= P Q^T", "orth(P)"};
  double best[6];
  for (int k = 0; k < 6; k++) {
    best[k] = 1e30;
    for (size_t it = 0; it <= iters; it++) {
      const int64_t t0 = sc_now_us();
      switch (k) {
      case 0:
        memcpy(copy, m, bytes);
        break;
      case 1:
        sc_lr_project_f32(pt, m, rows, cols, qt, r);
        break;
      case 2:
        sc_lr_project_portable_f32(pt, m, rows, cols, qt, r);
        break;
      case 3:
        sc_lr_project_t_f32(qt, m, rows, cols, pt, r);
        break;
      case 4:
        sc_lr_expand_f32(copy, rows, cols, pt, rows, qt, r, -1.0f, 1.0f);
        break;
      default:
        sc_lr_orth_f32(pt, rows, r);
      }
      const double us = (double)(sc_now_us() - t0);
      if (it > 0 && us < best[k]) best[k] = us; /* run 0 warms up */
    }
  }
  printf("# float32 %zu x %zu (%.1f MiB), rank %zu, one core, best of %zu\n", rows, cols,
         (double)bytes / (1 << 20), r, iters);
  printf("# %-12s %10s %10s %8s\n", "kernel", "ms", "GB/s", "x copy");
  for (int k = 0; k < 6; k++)
    printf("  %-12s %10.3f %10.2f %8.2f\n", names[k], best[k] / 1e3,
           (double)bytes / (best[k] > 0 ? best[k] : 1) / 1e3, best[k] / best[0]);
  free(m);
  free(copy);
  free(pt);
  free(qt);
  return 0;
}
