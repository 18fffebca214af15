/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_scatter_perf: nccl-tests' scatter_perf for libsparsecoll. The root's
 * array holds its own values at their global positions, and every other rank
 * fills its unused send buffer with its own, so a block from the wrong place
 * or from the wrong rank is counted wrong. */
#include "algorithms/registry.h"
#include "lib/core/comm.h"
#include "perf/perf_common.h"

static void place(perf_case_t *c) {
  /* In place as NCCL: this rank's block of the array is its result (on the
   * root the library's in-place form; elsewhere sendbuf is not read). */
  c->sendbuf = c->in_place ? c->recv_alloc : c->send_alloc;
  c->recvbuf = c->in_place ? perf_elem(c->recv_alloc, c->elem_size, (size_t)c->rank * c->count)
                           : c->recv_alloc;
}

static sc_result_t run(const perf_case_t *c) {
  return sc_scatter(c->sendbuf, c->recvbuf, c->count, c->dtype, c->root, c->comm);
}

static void fill(const perf_case_t *c) {
  perf_poison(c->recvbuf, c->count * c->elem_size);
  if (c->in_place && c->rank != c->root) return; /* its send buffer is its result's */
  for (size_t g = 0; g < c->total; g++) perf_store_input(c, c->sendbuf, g, c->rank, g);
}

static int64_t check(const perf_case_t *c) {
  int64_t wrong = 0;
  size_t first = (size_t)c->rank * c->count;
  for (size_t i = 0; i < c->count; i++)
    wrong += !perf_is_input(c, c->recvbuf, i, c->root, first + i);
  return wrong;
}

/* Scatter has no public query; the library's own answers what auto runs. */
static sc_result_t auto_pick(const perf_case_t *c, const char **name) {
  return sc_tune_algo_name(c->comm, SC_COLL_SCATTER, c->count, c->dtype, name);
}

int main(int argc, char **argv) {
  const perf_coll_t coll = {
      .binary = "sc_scatter_perf",
      .name = "scatter",
      .has_root = 1,
      .algo_env = "SC_GATHER_ALGO",
      .blocks_per_rank = 1,
      .compare_algos = perf_registry_algos(SC_COLL_SCATTER),
      .auto_pick = auto_pick,
      .busbw = PERF_BUSBW_GATHER,
      .place = place,
      .run = run,
      .fill = fill,
      .check = check,
      .size_help = "The size column is the root's whole array, nranks x count elements.\n",
  };
  return perf_main(&coll, argc, argv);
}
