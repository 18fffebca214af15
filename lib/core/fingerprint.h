/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_CHECK_MISMATCH=1: before each operation every rank all-gathers a
 * fixed-size fingerprint of its call (sequence number, collective, count,
 * dtype, reduction, root, dense/sparse variant). Ranks that called
 * different operations then all fail with SC_ERR_MISMATCH naming both calls,
 * instead of reading each other's data with the wrong shape or hanging.
 *
 * The exchange is the same schedule for every operation (only the 40-byte
 * prints move), so ranks that disagree about the operation still meet in it,
 * and every rank sees all P prints and reaches the same verdict.
 *
 * The encode/compare/judge/format functions are pure (unit-tested); only
 * sc_fp_check touches the communicator. */
#ifndef SC_FINGERPRINT_H
#define SC_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#include "lib/schedule/sched.h"
#include "sparsecoll.h"
#include "transport/transport.h"

#define SC_FP_WIRE_BYTES 40
/* Field value for "this collective has no such argument" (barrier's dtype,
 * broadcast's reduction). */
#define SC_FP_NONE 0xff
/* Up to this many ranks the prints go directly to every peer (one message
 * round); above it, by recursive doubling (log2 P rounds). */
#define SC_FP_DIRECT_MAX 8

/* How the operation's schedule is chosen: ranks must agree on it too. A
 * sparse all-reduce (sc_sparse_allreduce, sc_gtopk_allreduce) carries its
 * algorithm's fp_code (algorithms/sparse_registry.h), SC_FP_SPARSE_MIN or
 * above. */
typedef enum sc_fp_variant {
  SC_FP_DENSE = 0,        /* dense, algorithm chosen by the tuner */
  SC_FP_INTERNAL = 1,     /* dense with a generator forced by the library */
  SC_FP_SPARSE_MIN = 2,   /* the lowest sparse code */
  SC_FP_SPARSE_OTHER = 5, /* sparse with a generator of no registered algorithm */
} sc_fp_variant_t;

typedef struct sc_fingerprint {
  uint64_t seq;
  uint64_t count;     /* per the collective's convention; sparse: k */
  uint64_t dense_len; /* sparse only, else 0 */
  int32_t root;       /* -1 for collectives without a root */
  uint8_t coll;       /* sc_coll_t */
  uint8_t dtype;      /* sc_dtype_t or SC_FP_NONE */
  uint8_t redop;      /* sc_redop_t or SC_FP_NONE */
  uint8_t variant;    /* sc_fp_variant_t */
} sc_fingerprint_t;

struct sc_op;
struct sc_comm;

/* The print of op, with the fields a collective ignores normalised (root of
 * an all-reduce, reduction of a broadcast) so they cannot cause a false
 * mismatch. */
void sc_fp_from_op(const struct sc_op *op, sc_fingerprint_t *fp);
void sc_fp_encode(const sc_fingerprint_t *fp, uint8_t out[SC_FP_WIRE_BYTES]);
/* SC_ERR_REMOTE (naming peer) when the bytes are not a print of this
 * version: a peer that runs without SC_CHECK_MISMATCH or another release. */
sc_result_t sc_fp_decode(const uint8_t in[SC_FP_WIRE_BYTES], int peer, sc_fingerprint_t *fp);
int sc_fp_equal(const sc_fingerprint_t *a, const sc_fingerprint_t *b);
/* "allreduce #7 (count 1000, float32, sum, root -1)"; returns out. */
const char *sc_fp_describe(const sc_fingerprint_t *fp, char *out, size_t len);

typedef struct sc_fp_verdict {
  int mismatch;   /* 0: every print equal (then nothing else is set) */
  int ref;        /* lowest rank holding the reference print: the one most ranks hold, ties
                     going to the print of the lowest rank */
  int nref;       /* ranks holding the reference print */
  int ndiff;      /* ranks that differ from it */
  int first_diff; /* lowest rank that differs from it */
} sc_fp_verdict_t;
void sc_fp_judge(const sc_fingerprint_t *all, int nranks, sc_fp_verdict_t *v);

/* The SC_ERR_MISMATCH text for `rank`: its own call against the reference
 * when it differs from it (this rank is a cause), else against the first rank
 * that differs (this rank is a victim). hosts(ctx, r) names rank r's host. */
void sc_fp_mismatch_message(char *out, size_t len, const sc_fingerprint_t *all, int nranks,
                            int rank, const sc_fp_verdict_t *v,
                            const char *(*host)(const void *ctx, int r), const void *ctx);

/* ---- The print every message carries (transport.h's sc_tp_req_t fp) ----
 * Sixteen bytes, so that each transport's header grows by no more: a
 * version nibble (never all zero) and the variant, the collective, dtype
 * and reduction, the low 16 bits of the sequence number, root + 1 (24 bits,
 * 0 for none) and the low 56 bits of the count. Ranks that made the same
 * call write the same bytes; ranks that called different operations differ
 * in some field (a count that differs only above 2^56 elements is left to
 * the length check). */
#define SC_FP_MSG_BYTES SC_TP_FP_LEN
void sc_fp_msg_encode(const sc_fingerprint_t *fp, uint8_t out[SC_FP_MSG_BYTES]);
/* Sets a message print's count (the low 56 bits of count). */
void sc_fp_msg_set_count(uint8_t out[SC_FP_MSG_BYTES], uint64_t count);
/* The fields a print holds; seq becomes the number nearest near_seq whose
 * low 16 bits are the print's (the receiver's own call's number), count the
 * low 56 bits, dense_len 0. SC_ERR_REMOTE naming peer when the bytes are not
 * a print of this version. */
sc_result_t sc_fp_msg_decode(const uint8_t in[SC_FP_MSG_BYTES], uint64_t near_seq, int peer,
                             sc_fingerprint_t *fp);
/* A print as "allreduce #7 (count 1000, float32, sum, root -1)" (a sparse
 * one without its dense_len, which it does not hold), read against
 * near_seq; all zero: "another operation (its messages carry no
 * print of it)", a print of another version: "another operation (...)".
 * Returns out. */
const char *sc_fp_msg_describe(const uint8_t in[SC_FP_MSG_BYTES], uint64_t near_seq, char *out,
                               size_t len);
/* The SC_ERR_MISMATCH text of a message between this rank and peer whose
 * print is not the one the other end expected: "rank 1 (host1) called
 * allreduce #7 (count 999999, ...) where rank 0 (host0) called allreduce #7
 * (count 1000000, ...)". mine: this rank's print, theirs: the peer's
 * (transport.h's peer_fp), both read against seq, this rank's call's number. */
void sc_fp_msg_mismatch_text(char *out, size_t len, int rank, const char *host,
                             const uint8_t mine[SC_FP_MSG_BYTES], int peer, const char *peer_host,
                             const uint8_t theirs[SC_FP_MSG_BYTES], uint64_t seq);

/* The exchange's schedule for one rank: a pure function of (nranks, rank).
 * SEND holds the own print, RECV nranks prints in rank order. */
sc_result_t sc_fp_schedule(int nranks, int rank, sc_sched_t *s);
/* The same for records of w bytes (the p2p lane's addresses too): direct up to
 * SC_FP_DIRECT_MAX ranks, recursive doubling beyond. */
sc_result_t sc_small_allgather_schedule(int nranks, int rank, size_t w, sc_sched_t *s);

/* Exchange op's print with every rank and compare (the communicator owns the
 * transport, as in sc_op_run). SC_ERR_MISMATCH on every rank when any print
 * differs; a transport error when the exchange itself fails. */
sc_result_t sc_fp_check(struct sc_comm *comm, const struct sc_op *op);
/* An all-to-allv's counts, pair by pair (nothing for other operations):
 * SC_ERR_MISMATCH on both ranks of a pair whose counts disagree, naming the
 * pair and the four counts. */
sc_result_t sc_fp_check_pairs(struct sc_comm *comm, const struct sc_op *op);
/* The sparse all-to-allv's count check: one all-reduce of a 64-bit sum over
 * the pairs (a pair's term hashes its two ranks and the count, added by the
 * sender and taken away by the receiver), zero when every pair agrees but
 * for a chance of 2^-64. On a difference every rank fails with
 * SC_ERR_MISMATCH: the pair's two ranks name it (sc_fp_check_pairs, unless
 * its connections to every peer would not fit the descriptor limit), the
 * others say that some pair disagrees. */
sc_result_t sc_fp_check_counts(struct sc_comm *comm, const struct sc_op *op);
void sc_fp_free(struct sc_comm *comm);

#endif
