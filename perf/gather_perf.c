/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_gather_perf: nccl-tests' gather_perf for libsparsecoll. Rank r
 * contributes block r of one global array, so a block that lands in the wrong
 * place on the root is counted wrong. */
#include "algorithms/registry.h"
#include "lib/core/comm.h"
#include "perf/perf_common.h"

static void place(perf_case_t *c) {
  c->recvbuf = c->recv_alloc;
  /* In place as NCCL: the input already sits in this rank's block (on the
   * root the library's in-place form; elsewhere recvbuf is not read). */
  c->sendbuf = c->in_place ? perf_elem(c->recv_alloc, c->elem_size, (size_t)c->rank * c->count)
                           : c->send_alloc;
}

static sc_result_t run(const perf_case_t *c) {
  return sc_gather(c->sendbuf, c->recvbuf, c->count, c->dtype, c->root, c->comm);
}

static void fill(const perf_case_t *c) {
  perf_poison(c->recvbuf, c->total * c->elem_size);
  size_t first = (size_t)c->rank * c->count;
  for (size_t i = 0; i < c->count; i++) perf_store_input(c, c->sendbuf, i, c->rank, first + i);
}

static int64_t check(const perf_case_t *c) {
  int64_t wrong = 0;
  if (c->rank != c->root) return 0;
  for (size_t g = 0; g < c->total; g++)
    wrong += !perf_is_input(c, c->recvbuf, g, (int)(g / c->count), g);
  return wrong;
}

/* Gather has no public query; the library's own answers what auto runs. */
static sc_result_t auto_pick(const perf_case_t *c, const char **name) {
  return sc_tune_algo_name(c->comm, SC_COLL_GATHER, c->count, c->dtype, name);
}

int main(int argc, char **argv) {
  const perf_coll_t coll = {
      .binary = "sc_gather_perf",
      .name = "gather",
      .has_root = 1,
      .algo_env = "SC_GATHER_ALGO",
      .blocks_per_rank = 1,
      .compare_algos = perf_registry_algos(SC_COLL_GATHER),
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
