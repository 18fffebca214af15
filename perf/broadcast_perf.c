/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_broadcast_perf: nccl-tests' broadcast_perf for libsparsecoll. Every
 * rank fills its send buffer with its own values, so a rank that sends its
 * own data instead of the root's is caught. */
#include "perf/perf_common.h"

static void place(perf_case_t *c) {
  c->recvbuf = c->recv_alloc;
  c->sendbuf = c->in_place ? c->recv_alloc : c->send_alloc;
}

static sc_result_t run(const perf_case_t *c) {
  return sc_broadcast(c->sendbuf, c->recvbuf, c->count, c->dtype, c->root, c->comm);
}

static void fill(const perf_case_t *c) {
  perf_poison(c->recvbuf, c->count * c->elem_size);
  if (c->in_place && c->rank != c->root) return;
  for (size_t i = 0; i < c->count; i++) perf_store_input(c, c->sendbuf, i, c->rank, i);
}

static int64_t check(const perf_case_t *c) {
  int64_t wrong = 0;
  for (size_t i = 0; i < c->count; i++) wrong += !perf_is_input(c, c->recvbuf, i, c->root, i);
  return wrong;
}

int main(int argc, char **argv) {
  static const perf_coll_t coll = {
      .binary = "sc_broadcast_perf",
      .name = "broadcast",
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
