/* SPDX-License-Identifier: BSD-3-Clause */
/* What a schedule sends and receives as one rank sees it: the simulator
 * tests and test_sched check the algorithms' message and byte counts against
 * their formulas with it. Test code only: the library costs an algorithm
 * with its model (lib/tune), not by walking a schedule. */
#ifndef SC_TEST_SCHED_COST_H
#define SC_TEST_SCHED_COST_H

#include <string.h>

#include "lib/schedule/sched.h"

typedef struct sc_sched_cost {
  size_t messages;   /* sends + receives */
  size_t bytes_sent; /* elements * elem_size */
  size_t bytes_recv;
} sc_sched_cost_t;

static inline void sc_sched_cost(const sc_sched_t *s, size_t elem_size, sc_sched_cost_t *cost) {
  memset(cost, 0, sizeof(*cost));
  for (size_t i = 0; i < s->nsteps; i++) {
    const sc_step_t *st = &s->steps[i];
    if (st->kind == SC_STEP_SEND) {
      cost->messages++;
      cost->bytes_sent += st->count * elem_size;
    } else if (st->kind == SC_STEP_RECV || st->kind == SC_STEP_RECV_REDUCE) {
      cost->messages++;
      cost->bytes_recv += st->count * elem_size;
    } else if (st->kind == SC_STEP_SPARSE_SEND) {
      /* Sizes are known only at run time: count a full set (the bound). */
      cost->messages += 3;
      cost->bytes_sent += 8 + s->sp_cap * (4 + elem_size);
    } else if (st->kind == SC_STEP_SPARSE_RECV || st->kind == SC_STEP_SPARSE_RECV_MERGE) {
      cost->messages += 3;
      cost->bytes_recv += 8 + st->count * (4 + elem_size);
    }
  }
}

#endif
