/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_allreduce_perf: nccl-tests' all_reduce_perf for libsparsecoll. */
#include "algorithms/registry.h"
#include "perf/perf_common.h"

static void place(perf_case_t *c) {
  c->recvbuf = c->recv_alloc;
  c->sendbuf = c->in_place ? c->recv_alloc : c->send_alloc;
}

static sc_result_t run(const perf_case_t *c) {
  return sc_allreduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->comm);
}

static void fill(const perf_case_t *c) {
  if (!c->in_place) perf_poison(c->recvbuf, c->count * c->elem_size);
  for (size_t i = 0; i < c->count; i++) perf_store_input(c, c->sendbuf, i, c->rank, i);
}

static int64_t check(const perf_case_t *c) {
  int64_t wrong = 0;
  for (size_t i = 0; i < c->count; i++) wrong += !perf_is_reduced(c, c->recvbuf, i, i);
  return wrong;
}

static sc_result_t auto_pick(const perf_case_t *c, const char **name) {
  return sc_allreduce_algo(c->comm, c->count, c->dtype, name);
}

int main(int argc, char **argv) {
  /* -a compare runs every all-reduce algorithm of the registry. */
  const perf_coll_t coll = {
      .binary = "sc_allreduce_perf",
      .name = "allreduce",
      .has_op = 1,
      .algo_env = "SC_ALGO",
      .compare_algos = perf_registry_algos(SC_COLL_ALLREDUCE),
      .auto_pick = auto_pick,
      .busbw = PERF_BUSBW_ALLREDUCE,
      .place = place,
      .run = run,
      .fill = fill,
      .check = check,
  };
  return perf_main(&coll, argc, argv);
}
