/* SPDX-License-Identifier: BSD-3-Clause */
/* A binary min-heap of (time, rank), ties to the lower rank: the order both
 * timing simulations take events in, so that equal times resolve the same
 * way on every rank. */
#ifndef SC_TUNE_HEAP_H
#define SC_TUNE_HEAP_H

typedef struct sc_ready {
  double key;
  int rank;
} sc_ready_t;

static inline int sc_ready_before(const sc_ready_t *x, const sc_ready_t *y) {
  return x->key < y->key || (x->key == y->key && x->rank < y->rank);
}

static inline void sc_ready_push(sc_ready_t *h, int *n, sc_ready_t e) {
  int i = (*n)++;
  while (i > 0 && sc_ready_before(&e, &h[(i - 1) / 2])) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = e;
}

static inline sc_ready_t sc_ready_pop(sc_ready_t *h, int *n) {
  sc_ready_t top = h[0], e = h[--*n];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && sc_ready_before(&h[c + 1], &h[c])) c++;
    if (!sc_ready_before(&h[c], &e)) break;
    h[i] = h[c];
    i = c;
  }
  if (*n > 0) h[i] = e;
  return top;
}

#endif
