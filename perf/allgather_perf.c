/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_allgather_perf: nccl-tests' all_gather_perf for libsparsecoll. Rank r
 * contributes block r of one global array, so a block that lands in the wrong
 * place is counted wrong. */
#include "algorithms/registry.h"
#include "perf/perf_common.h"

static void place(perf_case_t *c) {
  c->recvbuf = c->recv_alloc;
  /* NCCL's in-place convention: the input already sits in this rank's block. */
  c->sendbuf = c->in_place ? perf_elem(c->recv_alloc, c->elem_size, (size_t)c->rank * c->count)
                           : c->send_alloc;
}

static sc_result_t run(const perf_case_t *c) {
  return sc_allgather(c->sendbuf, c->recvbuf, c->count, c->dtype, c->comm);
}

static void fill(const perf_case_t *c) {
  perf_poison(c->recvbuf, c->total * c->elem_size);
  size_t first = (size_t)c->rank * c->count;
  for (size_t i = 0; i < c->count; i++) perf_store_input(c, c->sendbuf, i, c->rank, first + i);
}

static int64_t check(const perf_case_t *c) {
  int64_t wrong = 0;
  for (size_t g = 0; g < c->total; g++)
    wrong += !perf_is_input(c, c->recvbuf, g, (int)(g / c->count), g);
  return wrong;
}

static sc_result_t auto_pick(const perf_case_t *c, const char **name) {
  return sc_allgather_algo(c->comm, c->count, c->dtype, name);
}

int main(int argc, char **argv) {
  const perf_coll_t coll = {
      .binary = "sc_allgather_perf",
      .name = "allgather",
      .algo_env = "SC_AG_ALGO",
      .blocks_per_rank = 1,
      .compare_algos = perf_registry_algos(SC_COLL_ALLGATHER),
      .auto_pick = auto_pick,
      .busbw = PERF_BUSBW_GATHER,
      .place = place,
      .run = run,
      .fill = fill,
      .check = check,
  };
  return perf_main(&coll, argc, argv);
}
