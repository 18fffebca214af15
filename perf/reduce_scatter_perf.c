/* sc_reduce_scatter_perf: nccl-tests' reduce_scatter_perf for libsparsecoll.
 * The input is the whole nranks x count array; rank r keeps block r. */
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

int main(int argc, char **argv) {
  static const perf_coll_t coll = {
      .binary = "sc_reduce_scatter_perf",
      .name = "reduce_scatter",
      .has_op = 1,
      .algo_env = "SC_RS_ALGO",
      .blocks_per_rank = 1,
      .busbw = PERF_BUSBW_GATHER,
      .place = place,
      .run = run,
      .fill = fill,
      .check = check,
  };
  return perf_main(&coll, argc, argv);
}
