/* SPDX-License-Identifier: BSD-3-Clause */
/* The local meaning of the dense steps, apart from moving bytes between
 * ranks: where a step writes, and what it computes from the data that
 * arrived. The executor (lib/core/executor.c) and the schedule simulator
 * (test/sim/simulator.c) both apply steps through these, so that a step has
 * one interpreter; the sparse steps' counterpart is sc_sparse_apply
 * (lib/schedule/sparse_state.h). */
#ifndef SC_SCHEDULE_STEP_H
#define SC_SCHEDULE_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/schedule/sched.h"
#include "sparsecoll.h"

/* One rank's three buffers (sc_buf_t order; NULL where the operation has
 * none) and the element type and operation they hold. */
typedef struct sc_step_mem {
  uint8_t *base[3];
  size_t elem_size;
  sc_dtype_t dtype;
  sc_redop_t op;
} sc_step_mem_t;

/* buf[off..] in memory; NULL for a NULL buffer (only empty ranges use one). */
static inline uint8_t *sc_step_ptr(const sc_step_mem_t *m, unsigned buf, size_t off) {
  uint8_t *b = m->base[buf <= SC_BUF_SCRATCH ? buf : SC_BUF_SCRATCH];
  return b ? b + off * m->elem_size : NULL;
}

/* The bytes a step writes locally, at *dst: 0 for a SEND, an empty step and
 * a COPY onto itself (which the schedules rely on being skipped: in place,
 * SEND and RECV are one buffer). Sparse steps: 0 (they write sets). */
static inline size_t sc_step_dst(const sc_step_mem_t *m, const sc_step_t *st, uint8_t **dst) {
  *dst = sc_step_ptr(m, st->buf, st->off);
  if (st->count == 0) return 0;
  switch (st->kind) {
  case SC_STEP_RECV:
  case SC_STEP_RECV_REDUCE:
    return st->count * m->elem_size;
  case SC_STEP_COPY:
    return sc_step_ptr(m, st->src_buf, st->src_off) == *dst ? 0 : st->count * m->elem_size;
  default:
    return 0;
  }
}

/* Applies a RECV, RECV_REDUCE or COPY once its incoming data (count
 * elements; none for COPY) is at `in`: RECV stores it (nothing to do when
 * the transport received it in place), RECV_REDUCE combines it with the
 * local operand (SC_AVG as SC_SUM), COPY moves src to dst as memmove. Other
 * kinds: nothing. The caller has made sure nothing still reads the
 * destination. */
void sc_step_apply(const sc_step_mem_t *m, const sc_step_t *st, const void *in);

/* The schedule's epilogue: with op SC_AVG, divides the region the
 * algorithm marked (sc_sched_set_avg) by nranks. */
void sc_sched_finish(const sc_step_mem_t *m, const sc_sched_t *s, int nranks);

#endif
