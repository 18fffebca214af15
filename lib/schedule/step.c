/* SPDX-License-Identifier: BSD-3-Clause */
/* See step.h. */
#include "lib/schedule/step.h"

#include <string.h>

#include "kernels/cpu/reduce.h"

void sc_step_apply(const sc_step_mem_t *m, const sc_step_t *st, const void *in) {
  uint8_t *dst;
  size_t len = sc_step_dst(m, st, &dst);
  if (len == 0) return;
  switch (st->kind) {
  case SC_STEP_RECV:
    if (in != dst) memmove(dst, in, len);
    break;
  case SC_STEP_RECV_REDUCE:
    sc_reduce_kernel(m->dtype, m->op, dst, sc_step_ptr(m, st->src_buf, st->src_off), in, st->count);
    break;
  case SC_STEP_COPY:
    memmove(dst, sc_step_ptr(m, st->src_buf, st->src_off), len);
    break;
  default:
    break;
  }
}

void sc_sched_finish(const sc_step_mem_t *m, const sc_sched_t *s, int nranks) {
  if (s->avg_count == 0 || m->op != SC_AVG) return;
  sc_avg_finalize(m->dtype, sc_step_ptr(m, s->avg_buf, s->avg_off), s->avg_count, nranks);
}
