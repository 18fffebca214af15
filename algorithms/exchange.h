/* SPDX-License-Identifier: BSD-3-Clause */
/* Pairwise exchanges shared by recursive doubling and Rabenseifner: the
 * chunked, forwarded send/receive pattern, and the fold that maps any rank
 * count onto a power-of-two group (MPICH's rule). Private to algorithms/. */
#ifndef SC_ALGORITHMS_EXCHANGE_H
#define SC_ALGORITHMS_EXCHANGE_H

#include <stddef.h>

#include "lib/schedule/sched.h"

/* One exchange with one peer: send a range, receive (and maybe reduce into)
 * a range. Offsets are logical (in the collective's vector); a buffer offset
 * is the logical one minus the buffer's base. Empty ranges emit nothing. */
typedef struct sc_exchange {
  int peer;
  sc_buf_t send_buf, recv_buf, operand_buf;
  size_t send_off, send_len, send_base;
  size_t recv_off, recv_len, recv_base;
  size_t operand_base;
  int reduce;
} sc_exchange_t;

/* The first exchange's sends; callers may add local steps before the rest. */
void sc_exchange_start(sc_sched_t *s, const sc_exchange_t *x, size_t chunk);
/* Receives of every exchange, the next exchange's sends interleaved: those
 * that do not wait for this exchange first, the others as their data
 * arrives (the ring's forwarding rule, so exchange k+1 overlaps k). */
void sc_exchange_finish(sc_sched_t *s, const sc_exchange_t *x, int nx, size_t chunk);
/* start + finish. */
void sc_exchange_run(sc_sched_t *s, const sc_exchange_t *x, int nx, size_t chunk);

/* Largest power of two <= p (p >= 1). */
int sc_fold_pow2_floor(int p);
/* With rem = p - pow2_floor(p): ranks 2i, 2i+1 (i < rem) fold, 2i+1 taking
 * group rank i; ranks >= 2 rem take rank - rem. -1 for a rank that folds
 * into rank + 1. */
int sc_fold_group_rank(int rank, int rem);
int sc_fold_group_to_rank(int g, int rem);
/* The whole all-reduce of a rank that folds into rank + 1: its n elements
 * there, the result back. */
void sc_fold_leaf_allreduce(sc_sched_t *s, int rank, size_t n, size_t chunk);

#endif
