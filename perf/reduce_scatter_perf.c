/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_reduce_scatter_perf: nccl-tests' reduce_scatter_perf for libsparsecoll.
 * The input is the whole nranks x count array; rank r keeps block r. */
#include "algorithms/registry.h"
#include "perf/perf_common.h"

static void place(perf_case_t *c) {
  c->sendbuf = c->send_alloc;
  /* NCCL's in-place convention: the result lands on this rank's own block. */
  c->recvbuf = c->in_place ? perf_elem(c->send_alloc, c->elem_size, (size_t)c->rank * c->count)
                           : c->recv_alloc;
}

static sc_result_t run(const perf_case_t *c) {
  return sc_reduce_scatter(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->comm);
}

static void fill(const perf_case_t *c) {
  if (!c->in_place) perf_poison(c->recvbuf, c->count * c->elem_size);
  for (size_t g = 0; g < c->total; g++) perf_store_input(c, c->sendbuf, g, c->rank, g);
}

static int64_t check(const perf_case_t *c) {
  int64_t wrong = 0;
  size_t first = (size_t)c->rank * c->count;
  for (size_t i = 0; i < c->count; i++) wrong += !perf_is_reduced(c, c->recvbuf, i, first + i);
  return wrong;
}

static sc_result_t auto_pick(const perf_case_t *c, const char **name) {
  return sc_reduce_scatter_algo(c->comm, c->count, c->dtype, name);
}

int main(int argc, char **argv) {
  const perf_coll_t coll = {
      .binary = "sc_reduce_scatter_perf",
      .name = "reduce_scatter",
      .has_op = 1,
      .algo_env = "SC_RS_ALGO",
      .blocks_per_rank = 1,
      .compare_algos = perf_registry_algos(SC_COLL_REDUCE_SCATTER),
      .auto_pick = auto_pick,
      .busbw = PERF_BUSBW_GATHER,
      .place = place,
      .run = run,
      .fill = fill,
      .check = check,
  };
  return perf_main(&coll, argc, argv);
}
