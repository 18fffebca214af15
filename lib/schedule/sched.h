/* SPDX-License-Identifier: BSD-3-Clause */
/* A schedule: the list of point-to-point steps one rank performs for one
 * collective. Algorithms (algorithms/) produce them as pure functions; the
 * executor (lib/core/executor.c) runs them over a transport; the simulator (test/sim)
 * runs every rank's schedule in one process. */
#ifndef SC_SCHED_H
#define SC_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

/* The three buffers a step can name. Offsets and counts are in elements. */
typedef enum sc_buf { SC_BUF_SEND = 0, SC_BUF_RECV = 1, SC_BUF_SCRATCH = 2 } sc_buf_t;

typedef enum sc_step_kind {
  SC_STEP_SEND,        /* send buf[off..off+count) to peer */
  SC_STEP_RECV,        /* receive count elements from peer into buf[off..] */
  SC_STEP_RECV_REDUCE, /* buf[off+i] = src_buf[src_off+i] (op) incoming[i]; the destination
                          may be the local operand exactly, never a partial overlap of it */
  SC_STEP_COPY,        /* buf[off..] = src_buf[src_off..] (memmove; skipped if same address) */
  /* Sparse sets (lib/schedule/sparse_state.h): `off` and `src_off` name sets (0 the
   * caller's input, 1 the output, 2.. scratch), `count` bounds what a peer
   * may send. On the wire a set is three messages: a fixed 8-byte count,
   * the indices, the values (the last two only when the count is not 0), so
   * the receiver bounds the count before it posts the exact-length payload
   * receives. */
  SC_STEP_SPARSE_SEND,       /* send set off to peer (+ the folded peer's mask: SC_SPF_MASK) */
  SC_STEP_SPARSE_RECV,       /* set off = the set peer sends (<= count entries) */
  SC_STEP_SPARSE_RECV_MERGE, /* set off = Merge(set src_off, incoming from peer), top k */
  SC_STEP_SPARSE_SUM /* set off = exact sum by index of sets src_off..src_off+count-1 (one set:
                        a bit-exact copy) */
} sc_step_kind_t;

/* sc_step_t.flags of the sparse steps. */
enum {
  SC_SPF_LOCAL_IS_A = 1, /* RECV_MERGE: the local set is Merge's A (the lower-ranked side) */
  SC_SPF_FOLD_IN = 2,    /* RECV_MERGE: the incoming set is a peer's set sent up to this
                            rank: track its entries' survival for it in the next slot */
  SC_SPF_MASK = 4        /* SEND: also send slot src_off's survival mask; RECV: also receive
                            the mask over set src_off, the set this rank sent up, and apply
                            it to every entry this rank tracks */
};

typedef struct sc_step {
  uint8_t kind;    /* sc_step_kind_t */
  uint8_t buf;     /* SEND: source; others: destination */
  uint8_t src_buf; /* RECV_REDUCE: local operand; COPY: source */
  uint8_t flags;   /* sparse steps: SC_SPF_* */
  int32_t peer;    /* SEND, RECV, RECV_REDUCE */
  size_t off;
  size_t src_off;
  size_t count;
} sc_step_t;

typedef struct sc_sched {
  sc_step_t *steps;
  size_t nsteps, cap;
  size_t scratch_count; /* elements of scratch this rank needs */
  /* Region SC_AVG divides by nranks after the last step (count 0: none). */
  uint8_t avg_buf;
  size_t avg_off, avg_count;
  sc_result_t status; /* sticky: an append that failed to grow */
  /* Sparse schedules: scratch sets (ids 2..sp_sets+1) of sp_cap entries each. */
  size_t sp_sets, sp_cap;
} sc_sched_t;

void sc_sched_init(sc_sched_t *s);
/* Empties the schedule, keeping its capacity (no allocation on reuse). */
void sc_sched_reset(sc_sched_t *s);
void sc_sched_free(sc_sched_t *s);

/* Appends; on allocation failure they record s->status and return it. */
sc_result_t sc_sched_send(sc_sched_t *s, int peer, sc_buf_t buf, size_t off, size_t count);
sc_result_t sc_sched_recv(sc_sched_t *s, int peer, sc_buf_t buf, size_t off, size_t count);
sc_result_t sc_sched_recv_reduce(sc_sched_t *s, int peer, sc_buf_t dst, size_t off, sc_buf_t src,
                                 size_t src_off, size_t count);
sc_result_t sc_sched_copy(sc_sched_t *s, sc_buf_t dst, size_t off, sc_buf_t src, size_t src_off,
                          size_t count);
void sc_sched_need_scratch(sc_sched_t *s, size_t count);
sc_result_t sc_sched_sparse_send(sc_sched_t *s, int peer, size_t set, int flags);
sc_result_t sc_sched_sparse_recv(sc_sched_t *s, int peer, size_t set, size_t bound, int flags);
/* The survival masks' halves (SC_SPF_MASK): a send of `set` with the mask of
 * slot `slot` (the slot the peer's set took when this rank merged it in, the
 * FOLD_IN merges numbered from 0 in schedule order), and the receive of the
 * result with the mask over `up_set`, the set this rank sent that peer. */
sc_result_t sc_sched_sparse_send_mask(sc_sched_t *s, int peer, size_t set, size_t slot);
sc_result_t sc_sched_sparse_recv_mask(sc_sched_t *s, int peer, size_t set, size_t bound,
                                      size_t up_set);
sc_result_t sc_sched_sparse_recv_merge(sc_sched_t *s, int peer, size_t dst, size_t local,
                                       size_t bound, int flags);
sc_result_t sc_sched_sparse_sum(sc_sched_t *s, size_t dst, size_t first, size_t nsets);
/* Declares nsets scratch sets of cap entries (the largest request wins). */
void sc_sched_sparse_sets(sc_sched_t *s, size_t nsets, size_t cap);
void sc_sched_set_avg(sc_sched_t *s, sc_buf_t buf, size_t off, size_t count);

#endif
