/* SPDX-License-Identifier: BSD-3-Clause */
/* Algorithms are pure functions: (collective, nranks, rank, count, ...) ->
 * schedule. They never touch memory or the network. Buffer meaning per
 * collective (offsets/counts in elements):
 *   ALLREDUCE       SEND: count in,              RECV: count out
 *   REDUCE_SCATTER  SEND: nranks*count in,       RECV: count out (block `rank`)
 *   ALLGATHER       SEND: count in,              RECV: nranks*count out
 *   BROADCAST       SEND: count in (root only),  RECV: count out (every rank)
 *   REDUCE          SEND: count in,              RECV: count out (root only)
 *   BARRIER         no data; zero-count messages
 *   ALLTOALL        SEND: nranks*count in (block j to rank j),
 *                   RECV: nranks*count out (block i from rank i)
 *   ALLTOALLV       SEND: block j = sendcounts[j] elements at sdispls[j] (to rank j),
 *                   RECV: block i = recvcounts[i] elements at rdispls[i] (from rank i)
 *   GATHER          SEND: count in,                RECV: nranks*count out (root only)
 *   SCATTER         SEND: nranks*count in (root),  RECV: count out (every rank)
 *   ALLGATHERV      SEND: recvcounts[rank] in,
 *                   RECV: block i = recvcounts[i] elements at rdispls[i]
 * SEND and RECV may be the same memory (in place); the executor skips a COPY
 * whose source and destination are the same address and waits for an
 * outstanding SEND before anything writes over the memory it reads.
 * SC_AVG is reduced as SC_SUM; the algorithm marks the output region with
 * sc_sched_set_avg and the executor divides it at the end. */
#ifndef SC_ALGORITHMS_H
#define SC_ALGORITHMS_H

#include <stddef.h>

#include "lib/schedule/sched.h"

typedef enum sc_coll {
  SC_COLL_ALLREDUCE,
  SC_COLL_REDUCE_SCATTER,
  SC_COLL_ALLGATHER,
  SC_COLL_BROADCAST,
  SC_COLL_REDUCE,
  SC_COLL_BARRIER,
  SC_COLL_ALLTOALL,
  SC_COLL_ALLTOALLV,
  SC_COLL_GATHER,
  SC_COLL_SCATTER,
  SC_COLL_ALLGATHERV,
  SC_COLL_COUNT_
} sc_coll_t;

typedef struct sc_coll_args {
  sc_coll_t coll;
  int nranks;
  int rank;
  int root;           /* BROADCAST, REDUCE, GATHER, SCATTER */
  size_t count;       /* ALLREDUCE/BCAST/REDUCE: count; RS: recvcount; AG: sendcount;
                         ALLTOALL, GATHER, SCATTER: elements of one rank's block;
                         ALLTOALLV, ALLGATHERV: elements this rank receives in all */
  size_t elem_size;   /* bytes per element */
  size_t chunk_elems; /* pipelining granularity, >= 1 */
  int avg;            /* op is SC_AVG: mark the output region for division */
  /* "hier" only (the other generators ignore both): host_of[r] is rank r's host index,
   * hosts numbered 0.. in the order of their lowest rank; NULL: one host. The cost model
   * also reads it (a host's ranks share its network link). */
  const int *host_of;
  int rail_algo; /* ALLREDUCE "hier": the all-reduce candidate each rail runs (0: ring) */
  /* ALLTOALLV: this rank's send blocks (sendcounts, sdispls) and receive blocks (recvcounts,
   * rdispls), nranks each, in elements; they differ between ranks, so the cost model cannot
   * replay other ranks' schedules and never prices ALLTOALLV's candidates. ALLGATHERV: recvcounts
   * and rdispls only, the same on every rank. NULL for the other collectives. */
  const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
  /* ALLTOALLV "hier": mates[t * nhosts + y] = the elements local rank t of this rank's host
   * sends rank (y, this rank's local rank), from the count exchange inside the host
   * (lib/core/a2av_mates.c); NULL: none was made (the generator runs the pairwise one). */
  const uint64_t *a2av_mates;
  /* ALLTOALL: SEND and RECV are one buffer (in place): the generator must not overwrite a
   * block before it has been sent. Other collectives are in-place safe by construction. */
  int in_place;
} sc_coll_args_t;

/* Block b of a count split into nranks nearly equal blocks (the first
 * count % nranks blocks are one element longer). Used by ring all-reduce. */
void sc_block_range(size_t count, int nranks, int b, size_t *off, size_t *len);

/* len elements at buf[off] sent to peer in chunk-element pieces: a pipeline
 * whose receiver can forward or reduce a piece while the next one is on the
 * wire. */
void sc_send_chunks(sc_sched_t *s, int peer, sc_buf_t buf, size_t off, size_t len, size_t chunk);

/* The ring's block index that rank handles `hop` hops after the start: the
 * one rank - hop started with, modulo nranks. */
static inline int sc_ring_block(int rank, int hop, int nranks) {
  return ((rank - hop) % nranks + nranks) % nranks;
}

/* Rooted collectives (broadcast, reduce) number ranks relative to the root,
 * so that the root is always 0: this rank's number, and back to a rank. */
static inline int sc_root_rel_rank(const sc_coll_args_t *a) {
  return (a->rank - a->root + a->nranks) % a->nranks;
}

static inline int sc_root_abs_rank(const sc_coll_args_t *a, int v) {
  return (v + a->root) % a->nranks;
}

/* SC_ERR_INVALID_ARG unless 1 <= nranks <= 2^30, 0 <= rank < nranks, chunk_elems >= 1,
 * root valid (BROADCAST/REDUCE) and nranks*count fits (RS/AG). Every
 * generator calls it first.
 * Generators append to the schedule they are given (callers pass a fresh or
 * reset one) and return its sticky status. */
sc_result_t sc_coll_args_check(const sc_coll_args_t *a);

/* The prologue of generators whose output is RECV[0..count): marks it for
 * avg, and for count 0 or a single rank emits the whole schedule (nothing,
 * or one local copy). 1 when the schedule is complete. */
int sc_coll_trivial(const sc_coll_args_t *a, sc_sched_t *s);

sc_result_t sc_ring_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_ring_reduce_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_ring_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_chain_broadcast_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_binomial_broadcast_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_chain_reduce_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_binomial_reduce_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_dissemination_barrier_schedule(const sc_coll_args_t *a, sc_sched_t *s);

/* All-to-all (alltoall.c): pairwise exchange, P-1 steps, in step s send block (r+s) mod P
 * to rank (r+s) mod P and receive block (r-s) mod P from rank (r-s) mod P. In place, steps
 * s and P-s run together, through one block of SCRATCH. */
sc_result_t sc_pairwise_alltoall_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Bruck (alltoall_bruck.c): ceil(log2 P) steps, each sending the blocks whose
 * rotated index has bit k set to rank r + 2^k; for small blocks. SCRATCH: about 2P
 * blocks. */
sc_result_t sc_bruck_alltoall_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Hierarchical (alltoall_hier.c, DeepSpeed-MoE's and Tutel's two-dimensional
 * exchange): blocks regrouped inside each host so that each rank then sends one
 * aggregated message per other host to the rank of equal local rank there (uneven hosts:
 * see the file), which delivers or forwards them inside its host. Any host map gives a
 * correct schedule (one host: the pairwise one); worth it when sc_hier_useful. */
sc_result_t sc_hier_alltoall_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* All-to-all with a count per pair (alltoallv.c): pairwise exchange of the v blocks, one
 * message per pair even when empty, so that counts the two ends disagree on fail the
 * receive. */
sc_result_t sc_pairwise_alltoallv_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* What the uneven all-to-all's generators share: an empty block's displacement may point
 * anywhere (past the buffer, into a NULL one), so its message names offset 0 instead; and
 * SC_ERR_MISMATCH when this rank's count to itself differs from its count from itself. */
size_t sc_v_at(const size_t *displs, const size_t *counts, int i);
sc_result_t sc_alltoallv_self_check(const sc_coll_args_t *a);
/* The same exchange without the empty blocks: a pair with no data in either
 * direction is never connected. Only after the counts were found to agree
 * (lib/core/fingerprint.c, sc_fp_check_counts): an empty block is then no
 * message on either side. */
sc_result_t sc_sparse_alltoallv_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Hierarchical (alltoallv_hier.c): the uneven form of sc_hier_alltoall_schedule on hosts
 * of equal rank counts, H - 1 messages across hosts per rank; needs the host-mates'
 * counts (a->a2av_mates), else, and on uneven hosts, the pairwise one. */
sc_result_t sc_hier_alltoallv_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Whether it runs as such on a->host_of (several hosts of equal rank counts, several
 * each), so that its count exchange is needed: the same answer on every rank. */
int sc_hier_alltoallv_applies(const sc_coll_args_t *a);
/* The count exchange it needs, in 8-byte elements: fills rows (L x H: row q = this rank's
 * sendcounts for the ranks (y, q), y = 0..H-1) and appends steps that send row q to
 * host-mate q, receive host-mate t's row for this rank into RECV row t and copy this
 * rank's own row there: RECV is then a2av_mates. Only where it applies. */
sc_result_t sc_hier_alltoallv_counts_schedule(const sc_coll_args_t *a, uint64_t *rows,
                                              sc_sched_t *s);
/* Gather and scatter (gather_scatter.c): binomial tree (log P steps, subtrees'
 * blocks forwarded together) or linear (the root exchanges with every rank). */
sc_result_t sc_binomial_gather_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_linear_gather_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_binomial_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_linear_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* All-gather with a count per rank (allgatherv.c): ring, one block per step, or direct
 * (every rank sends its block to every other rank at once). */
sc_result_t sc_ring_allgatherv_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_direct_allgatherv_schedule(const sc_coll_args_t *a, sc_sched_t *s);

/* All-reduce by recursive doubling: ceil(log2 P) exchanges of the whole
 * vector; non-powers of two fold the first 2r ranks (r = P - P') first and
 * send the result back at the end. */
sc_result_t sc_rd_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Rabenseifner: recursive-halving reduce-scatter + recursive-doubling
 * all-gather over the P' group, with the same folding. */
sc_result_t sc_rabenseifner_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Rabenseifner's halves on their own, with the API's block layout (rank r
 * gets / contributes block r of count elements), any P. */
sc_result_t sc_rh_reduce_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_rd_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Pipelined double binary tree (NCCL): two complementary trees each reduce
 * then broadcast half of the data, in chunks. */
sc_result_t sc_tree_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Hierarchical all-reduce (allreduce_hier.c): reduce-scatter inside each host, all-reduce
 * across hosts among ranks of equal local rank, all-gather inside each host. Any host map
 * (host_of) gives a correct schedule; it is only worth it when sc_hier_useful. */
sc_result_t sc_hier_allreduce_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* Hierarchical reduce-scatter (reduce_scatter_hier.c): reduce-scatter inside each host to
 * the members of the blocks' rails, ring reduce-scatter across hosts on each rail. And
 * all-gather (allgather_hier.c): ring all-gather across hosts on each rail, all-gather
 * inside each host. Same host maps as the all-reduce; rails always run a ring. */
sc_result_t sc_hier_reduce_scatter_schedule(const sc_coll_args_t *a, sc_sched_t *s);
sc_result_t sc_hier_allgather_schedule(const sc_coll_args_t *a, sc_sched_t *s);
/* 1 when a's host map has more than one host and some host holds more than one rank. */
int sc_hier_useful(const sc_coll_args_t *a);

#endif
