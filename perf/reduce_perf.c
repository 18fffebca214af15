/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_reduce_perf: nccl-tests' reduce_perf for libsparsecoll. Only the root's
 * receive buffer is defined afterwards, so only the root checks. */
#include "perf/perf_common.h"

static void place(perf_case_t *c) {
  c->recvbuf = c->recv_alloc;
  c->sendbuf = c->in_place ? c->recv_alloc : c->send_alloc;
}

static sc_result_t run(const perf_case_t *c) {
  return sc_reduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->root, c->comm);
}

static void fill(const perf_case_t *c) {
  if (!c->in_place) perf_poison(c->recvbuf, c->count * c->elem_size);
  for (size_t i = 0; i < c->count; i++) perf_store_input(c, c->sendbuf, i, c->rank, i);
}

static int64_t check(const perf_case_t *c) {
  if (c->rank != c->root) return 0;
  int64_t wrong = 0;
  for (size_t i = 0; i < c->count; i++) wrong += !perf_is_reduced(c, c->recvbuf, i, i);
  return wrong;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {
      .binary = "sc_reduce_perf",
      .name = "reduce",
      .has_op = 1,
      .has_root = 1,
      .algo_env = "SC_BCAST_ALGO",
      .busbw = PERF_BUSBW_ONE,
      .place = place,
      .run = run,
      .fill = fill,
      .check = check,
  };
  return perf_main(&coll, argc, argv);
}
