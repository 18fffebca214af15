/* SPDX-License-Identifier: BSD-3-Clause */
/* The quick conformance suite of sc_scale_probe --suite: every collective and
 * a point-to-point ring shift once, at a few elements, on whatever the cost
 * model picks, each result checked against its closed form on every rank.
 * Small integers throughout, so that every sum is exact in any order and
 * every value fits int32 at 16,384 ranks.
 *
 * The all-to-allv is sparse as an MoE router's with top-2 routing: rank r
 * sends to itself, r + 1 and r + 2 only, so that a job of P ranks connects
 * O(1) peers for it, not P - 1 (a dense all-to-allv needs every pair). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/scale_suite.h"

#define SUITE_MAXC 8 /* elements per block, at most */

typedef struct {
  sc_comm_t *comm;
  int rank, p;
  int32_t *a, *b; /* p * SUITE_MAXC elements each */
  size_t *sc, *sd, *rc, *rd;
} suite_t;

static void fill(int32_t *x, size_t n, int32_t v) {
  for (size_t i = 0; i < n; i++) x[i] = v;
}

static int allreduce_sum(suite_t *s) {
  const int p = s->p, r = s->rank;
  for (int i = 0; i < 5; i++) s->a[i] = r + i;
  sc_result_t rc = sc_allreduce(s->a, s->b, 5, SC_INT32, SC_SUM, s->comm);
  for (int i = 0; rc == SC_SUCCESS && i < 5; i++)
    if (s->b[i] != p * (p - 1) / 2 + p * i) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int allreduce_max_inplace(suite_t *s) {
  double v[3];
  for (int i = 0; i < 3; i++) v[i] = (double)((s->rank * 7919) % s->p) * (i + 1);
  sc_result_t rc = sc_allreduce(v, v, 3, SC_FLOAT64, SC_MAX, s->comm);
  int most = 0; /* the largest of every rank's permuted index */
  for (int j = 0; j < s->p; j++)
    if ((j * 7919) % s->p > most) most = (j * 7919) % s->p;
  for (int i = 0; rc == SC_SUCCESS && i < 3; i++)
    if (v[i] != (double)most * (i + 1)) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int iallreduce(suite_t *s) {
  for (int i = 0; i < 2; i++) s->a[i] = 1 + i;
  sc_request_t *req = NULL;
  sc_result_t rc = sc_iallreduce(s->a, s->b, 2, SC_INT32, SC_SUM, s->comm, &req);
  if (rc == SC_SUCCESS) rc = sc_wait(&req);
  for (int i = 0; rc == SC_SUCCESS && i < 2; i++)
    if (s->b[i] != s->p * (1 + i)) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int reduce(suite_t *s) {
  const int p = s->p, root = p - 1;
  for (int i = 0; i < 4; i++) s->a[i] = s->rank * (i + 1);
  fill(s->b, 4, -1);
  sc_result_t rc = sc_reduce(s->a, s->b, 4, SC_INT32, SC_SUM, root, s->comm);
  for (int i = 0; rc == SC_SUCCESS && s->rank == root && i < 4; i++)
    if (s->b[i] != p * (p - 1) / 2 * (i + 1)) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int broadcast(suite_t *s) {
  const int root = s->p / 2;
  for (int i = 0; i < 7; i++) s->a[i] = s->rank == root ? root * 8 + i : -1;
  sc_result_t rc = sc_broadcast(s->a, s->a, 7, SC_INT32, root, s->comm);
  for (int i = 0; rc == SC_SUCCESS && i < 7; i++)
    if (s->a[i] != root * 8 + i) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int allgather(suite_t *s) {
  for (int i = 0; i < 2; i++) s->a[i] = s->rank * 2 + i;
  fill(s->b, (size_t)s->p * 2, -1);
  sc_result_t rc = sc_allgather(s->a, s->b, 2, SC_INT32, s->comm);
  for (int i = 0; rc == SC_SUCCESS && i < 2 * s->p; i++)
    if (s->b[i] != i) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int reduce_scatter(suite_t *s) {
  const int p = s->p, r = s->rank;
  for (int j = 0; j < p; j++)
    for (int i = 0; i < 2; i++) s->a[j * 2 + i] = r + j + i;
  sc_result_t rc = sc_reduce_scatter(s->a, s->b, 2, SC_INT32, SC_SUM, s->comm);
  for (int i = 0; rc == SC_SUCCESS && i < 2; i++)
    if (s->b[i] != p * (p - 1) / 2 + p * (r + i)) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int barrier(suite_t *s) {
  sc_result_t rc = sc_barrier(s->comm);
  return rc == SC_SUCCESS ? 0 : 2;
}

static int alltoall(suite_t *s) {
  const int p = s->p, r = s->rank;
  for (int j = 0; j < p; j++)
    for (int i = 0; i < 2; i++) s->a[j * 2 + i] = (r * p + j) * 2 + i;
  fill(s->b, (size_t)p * 2, -1);
  sc_result_t rc = sc_alltoall(s->a, s->b, 2, SC_INT32, s->comm);
  for (int j = 0; rc == SC_SUCCESS && j < p; j++)
    for (int i = 0; i < 2; i++)
      if (s->b[j * 2 + i] != (j * p + r) * 2 + i) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

/* Elements rank `from` sends to rank `to` in the sparse all-to-allv: 1 to
 * itself, 1 to the next rank and 2 to the one after (top-2 routing). */
static size_t a2av_count(int from, int to, int p) {
  const int d = ((to - from) % p + p) % p;
  return d == 0 || d == 1 ? 1 : d == 2 ? 2 : 0;
}

static int alltoallv(suite_t *s) {
  const int p = s->p, r = s->rank;
  size_t so = 0, ro = 0;
  for (int j = 0; j < p; j++) {
    s->sc[j] = a2av_count(r, j, p);
    s->sd[j] = so;
    so += s->sc[j];
    s->rc[j] = a2av_count(j, r, p);
    s->rd[j] = ro;
    ro += s->rc[j];
  }
  for (int j = 0; j < p; j++)
    for (size_t k = 0; k < s->sc[j]; k++) s->a[s->sd[j] + k] = (r * 3 + (int)k) * 4 + j % 4;
  fill(s->b, ro, -1);
  sc_result_t rc = sc_alltoallv(s->a, s->sc, s->sd, s->b, s->rc, s->rd, SC_INT32, s->comm);
  for (int j = 0; rc == SC_SUCCESS && j < p; j++)
    for (size_t k = 0; k < s->rc[j]; k++)
      if (s->b[s->rd[j] + k] != (j * 3 + (int)k) * 4 + r % 4) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int gather(suite_t *s) {
  for (int i = 0; i < 2; i++) s->a[i] = s->rank * 2 + i;
  fill(s->b, (size_t)s->p * 2, -1);
  sc_result_t rc = sc_gather(s->a, s->b, 2, SC_INT32, 0, s->comm);
  for (int i = 0; rc == SC_SUCCESS && s->rank == 0 && i < 2 * s->p; i++)
    if (s->b[i] != i) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

static int scatter(suite_t *s) {
  const int root = s->p - 1;
  for (int i = 0; i < 2 * s->p; i++) s->a[i] = s->rank == root ? i * 3 : -1;
  fill(s->b, 2, -1);
  sc_result_t rc = sc_scatter(s->a, s->b, 2, SC_INT32, root, s->comm);
  for (int i = 0; rc == SC_SUCCESS && i < 2; i++)
    if (s->b[i] != (s->rank * 2 + i) * 3) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

/* Rank i contributes i % 3 elements (zero included), rank i's k-th = i * 3 + k. */
static int allgatherv(suite_t *s) {
  const int p = s->p, r = s->rank;
  size_t off = 0;
  for (int j = 0; j < p; j++) {
    s->rc[j] = (size_t)(j % 3);
    s->rd[j] = off;
    off += s->rc[j];
  }
  for (int k = 0; k < r % 3; k++) s->a[k] = r * 3 + k;
  fill(s->b, off, -1);
  sc_result_t rc = sc_allgatherv(s->a, (size_t)(r % 3), s->b, s->rc, s->rd, SC_INT32, s->comm);
  for (int j = 0; rc == SC_SUCCESS && j < p; j++)
    for (size_t k = 0; k < s->rc[j]; k++)
      if (s->b[s->rd[j] + k] != j * 3 + (int)k) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

/* A ring shift as one group: send to r + 1, receive from r - 1. */
static int ring_shift(suite_t *s) {
  const int p = s->p, r = s->rank, from = (r - 1 + p) % p;
  for (int i = 0; i < 3; i++) s->a[i] = r * 3 + i;
  fill(s->b, 3, -1);
  sc_result_t rc = sc_group_start();
  if (rc == SC_SUCCESS) {
    sc_result_t a = sc_send(s->a, 3, SC_INT32, (r + 1) % p, 7, s->comm);
    sc_result_t b = sc_recv(s->b, 3, SC_INT32, from, 7, s->comm);
    rc = sc_group_end();
    if (rc == SC_SUCCESS) rc = a != SC_SUCCESS ? a : b;
  }
  for (int i = 0; rc == SC_SUCCESS && i < 3; i++)
    if (s->b[i] != from * 3 + i) return 1;
  return rc == SC_SUCCESS ? 0 : 2;
}

int scale_suite_run(sc_comm_t *comm, int rank, int nranks, char *what, size_t what_len) {
  suite_t s = {.comm = comm, .rank = rank, .p = nranks};
  const size_t n = (size_t)nranks * SUITE_MAXC;
  s.a = malloc(n * sizeof(int32_t));
  s.b = malloc(n * sizeof(int32_t));
  s.sc = malloc(4 * (size_t)nranks * sizeof(size_t));
  int st = 2;
  snprintf(what, what_len, "out of memory for %d ranks", nranks);
  if (s.a && s.b && s.sc) {
    s.sd = s.sc + nranks;
    s.rc = s.sd + nranks;
    s.rd = s.rc + nranks;
    /* Each returns 0, 1 (a wrong result) or 2 (the call failed: sc_last_error). */
    const struct {
      const char *name;
      int (*run)(suite_t *);
    } calls[] = {
        {"sc_allreduce (int32 sum)", allreduce_sum},
        {"sc_allreduce (float64 max, in place)", allreduce_max_inplace},
        {"sc_iallreduce + sc_wait", iallreduce},
        {"sc_reduce (root P-1)", reduce},
        {"sc_broadcast (root P/2, in place)", broadcast},
        {"sc_allgather", allgather},
        {"sc_reduce_scatter", reduce_scatter},
        {"sc_barrier", barrier},
        {"sc_alltoall", alltoall},
        {"sc_alltoallv (sparse, top-2)", alltoallv},
        {"sc_gather (root 0)", gather},
        {"sc_scatter (root P-1)", scatter},
        {"sc_allgatherv", allgatherv},
        {"sc_send/sc_recv ring shift (group)", ring_shift},
    };
    st = 0;
    what[0] = '\0';
    for (size_t i = 0; st == 0 && i < sizeof(calls) / sizeof(calls[0]); i++) {
      st = calls[i].run(&s);
      if (st)
        snprintf(what, what_len, "%s: %s", calls[i].name,
                 st == 2 ? sc_last_error() : "wrong result");
    }
  }
  free(s.a);
  free(s.b);
  free(s.sc);
  return st;
}
