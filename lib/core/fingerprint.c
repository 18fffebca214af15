/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_CHECK_MISMATCH: operation fingerprints (see lib/core/fingerprint.h). */
#include "lib/core/fingerprint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "algorithms/sparse_registry.h"
#include "lib/base/wire.h"
#include "lib/core/comm.h"

/* 'SCFP', then a format version: a peer that sends anything else is not
 * running the same check. Version 1 was little-endian; 2 is the library's
 * one wire byte order (lib/base/wire.h). */
#define SC_FP_MAGIC   0x53434650u
#define SC_FP_VERSION 2

typedef struct sc_fp_state {
  sc_sched_t sched; /* the prints' exchange (SC_CHECK_MISMATCH), with wire */
  uint8_t mine[SC_FP_WIRE_BYTES];
  uint8_t *wire;         /* nranks prints, rank-major; NULL until the first exchange */
  sc_fingerprint_t *all; /* decoded, only on a difference */
  sc_sched_t counts;     /* the sparse all-to-allv's count check, once counts_built */
  int counts_built;
} sc_fp_state_t;

static int sc_fp_has_root(int coll) {
  return coll == SC_COLL_BROADCAST || coll == SC_COLL_REDUCE || coll == SC_COLL_GATHER ||
         coll == SC_COLL_SCATTER;
}

static int sc_fp_has_redop(int coll) {
  return coll == SC_COLL_ALLREDUCE || coll == SC_COLL_REDUCE_SCATTER || coll == SC_COLL_REDUCE;
}

void sc_fp_from_op(const sc_op_t *op, sc_fingerprint_t *fp) {
  memset(fp, 0, sizeof(*fp));
  fp->seq = op->seq;
  /* An all-to-allv's count is what this rank receives, which differs between
   * ranks that agree; its pairs' counts are checked by sc_fp_check_pairs. */
  fp->count = op->coll == SC_COLL_ALLTOALLV ? 0 : op->count;
  fp->coll = (uint8_t)op->coll;
  fp->root = sc_fp_has_root(op->coll) ? op->root : -1;
  fp->dtype = op->coll == SC_COLL_BARRIER ? SC_FP_NONE : (uint8_t)op->dtype;
  fp->redop = sc_fp_has_redop(op->coll) ? (uint8_t)op->op : SC_FP_NONE;
  if (op->sparse) {
    fp->dense_len = op->sparse->dense_len;
    const sc_sparse_algo_entry_t *row = sc_sparse_algo_of_gen(op->gen);
    fp->variant = row ? row->fp_code : SC_FP_SPARSE_OTHER;
  } else {
    fp->variant = op->gen ? SC_FP_INTERNAL : SC_FP_DENSE;
  }
}

/* Layout: magic u32 | version, coll, dtype, redop, variant, 3 zero bytes |
 * root i32 | seq u64 | count u64 | dense_len u64; big-endian. */
void sc_fp_encode(const sc_fingerprint_t *fp, uint8_t out[SC_FP_WIRE_BYTES]) {
  memset(out, 0, SC_FP_WIRE_BYTES);
  sc_wire_put_u32(out, SC_FP_MAGIC);
  out[4] = SC_FP_VERSION;
  out[5] = fp->coll;
  out[6] = fp->dtype;
  out[7] = fp->redop;
  out[8] = fp->variant;
  sc_wire_put_u32(out + 12, (uint32_t)fp->root);
  sc_wire_put_u64(out + 16, fp->seq);
  sc_wire_put_u64(out + 24, fp->count);
  sc_wire_put_u64(out + 32, fp->dense_len);
}

sc_result_t sc_fp_decode(const uint8_t in[SC_FP_WIRE_BYTES], int peer, sc_fingerprint_t *fp) {
  if (sc_wire_get_u32(in) != SC_FP_MAGIC || in[4] != SC_FP_VERSION || in[9] || in[10] || in[11])
    return SC_ERR(SC_ERR_REMOTE,
                  "rank %d sent %d bytes that are not an operation fingerprint of version %d "
                  "(does it run with SC_CHECK_MISMATCH=1 and the same release?)",
                  peer, SC_FP_WIRE_BYTES, SC_FP_VERSION);
  memset(fp, 0, sizeof(*fp));
  fp->coll = in[5];
  fp->dtype = in[6];
  fp->redop = in[7];
  fp->variant = in[8];
  fp->root = (int32_t)sc_wire_get_u32(in + 12);
  fp->seq = sc_wire_get_u64(in + 16);
  fp->count = sc_wire_get_u64(in + 24);
  fp->dense_len = sc_wire_get_u64(in + 32);
  return SC_SUCCESS;
}

#define SC_FP_MSG_VERSION 1 /* the high nibble of byte 0 */

/* Layout: version << 4 | variant, coll, dtype, redop | seq u16 | root + 1 u24 |
 * count u56; big-endian. */
void sc_fp_msg_encode(const sc_fingerprint_t *fp, uint8_t out[SC_FP_MSG_BYTES]) {
  out[0] = (uint8_t)(SC_FP_MSG_VERSION << 4 | (fp->variant & 0x0f));
  out[1] = fp->coll;
  out[2] = fp->dtype;
  out[3] = fp->redop;
  out[4] = (uint8_t)(fp->seq >> 8);
  out[5] = (uint8_t)fp->seq;
  uint32_t root = fp->root < 0 ? 0 : (uint32_t)fp->root + 1;
  out[6] = (uint8_t)(root >> 16);
  out[7] = (uint8_t)(root >> 8);
  out[8] = (uint8_t)root;
  sc_fp_msg_set_count(out, fp->count);
}

void sc_fp_msg_set_count(uint8_t out[SC_FP_MSG_BYTES], uint64_t count) {
  for (int i = 0; i < 7; i++) out[9 + i] = (uint8_t)(count >> (8 * (6 - i)));
}

sc_result_t sc_fp_msg_decode(const uint8_t in[SC_FP_MSG_BYTES], uint64_t near_seq, int peer,
                             sc_fingerprint_t *fp) {
  if (in[0] >> 4 != SC_FP_MSG_VERSION)
    return SC_ERR(SC_ERR_REMOTE,
                  "rank %d sent a message whose operation print is not of version %d (another "
                  "release?)",
                  peer, SC_FP_MSG_VERSION);
  memset(fp, 0, sizeof(*fp));
  fp->variant = in[0] & 0x0f;
  fp->coll = in[1];
  fp->dtype = in[2];
  fp->redop = in[3];
  uint16_t low = (uint16_t)(in[4] << 8 | in[5]);
  /* The number nearest near_seq with these low bits: the difference taken
   * as a signed 16-bit value. */
  fp->seq = near_seq + (uint64_t)(int64_t)(int16_t)(uint16_t)(low - (uint16_t)near_seq);
  uint32_t root = (uint32_t)in[6] << 16 | (uint32_t)in[7] << 8 | in[8];
  fp->root = (int32_t)root - 1;
  for (int i = 0; i < 7; i++) fp->count = fp->count << 8 | in[9 + i];
  return SC_SUCCESS;
}

static const char *sc_fp_describe_as(const sc_fingerprint_t *fp, int dense_len, char *out,
                                     size_t len);

const char *sc_fp_msg_describe(const uint8_t in[SC_FP_MSG_BYTES], uint64_t near_seq, char *out,
                               size_t len) {
  int zero = 1;
  for (int i = 0; i < SC_FP_MSG_BYTES && zero; i++) zero = in[i] == 0;
  if (zero) {
    /* A transport that carries only part of the print (UCX's tag) or a
     * message of SC_CHECK_MISMATCH's exchange. */
    snprintf(out, len, "another operation (its messages carry no print of it)");
    return out;
  }
  if (in[0] >> 4 != SC_FP_MSG_VERSION) {
    snprintf(out, len, "another operation (its print is of version %d, not %d: another release?)",
             in[0] >> 4, SC_FP_MSG_VERSION);
    return out;
  }
  sc_fingerprint_t fp;
  sc_fp_msg_decode(in, near_seq, 0, &fp); /* cannot fail: the version is this one */
  return sc_fp_describe_as(&fp, 0, out, len);
}

void sc_fp_msg_mismatch_text(char *out, size_t len, int rank, const char *host,
                             const uint8_t mine[SC_FP_MSG_BYTES], int peer, const char *peer_host,
                             const uint8_t theirs[SC_FP_MSG_BYTES], uint64_t seq) {
  char a[160], b[160];
  snprintf(out, len, "rank %d (%s) called %s where rank %d (%s) called %s", peer, peer_host,
           sc_fp_msg_describe(theirs, seq, a, sizeof(a)), rank, host,
           sc_fp_msg_describe(mine, seq, b, sizeof(b)));
}

int sc_fp_equal(const sc_fingerprint_t *a, const sc_fingerprint_t *b) {
  return a->seq == b->seq && a->count == b->count && a->dense_len == b->dense_len &&
         a->root == b->root && a->coll == b->coll && a->dtype == b->dtype && a->redop == b->redop &&
         a->variant == b->variant;
}

/* dense_len: a message's print does not hold it. */
static const char *sc_fp_describe_as(const sc_fingerprint_t *fp, int dense_len, char *out,
                                     size_t len) {
  char variant[48] = "unknown-variant ";
  if (fp->variant == SC_FP_DENSE) {
    variant[0] = '\0';
  } else if (fp->variant == SC_FP_INTERNAL) {
    snprintf(variant, sizeof(variant), "internal ");
  } else if (fp->variant == SC_FP_SPARSE_OTHER) {
    snprintf(variant, sizeof(variant), "sparse ");
  } else {
    int n;
    const sc_sparse_algo_entry_t *c = sc_sparse_algos(&n);
    for (int i = 0; i < n; i++)
      if (c[i].fp_code == fp->variant) snprintf(variant, sizeof(variant), "sparse %s ", c[i].name);
  }
  const char *dtype = fp->dtype == SC_FP_NONE ? "no dtype" : sc_dtype_name(fp->dtype);
  const char *redop = fp->redop == SC_FP_NONE ? "no op" : sc_redop_name(fp->redop);
  char count[64];
  if (fp->variant >= SC_FP_SPARSE_MIN && dense_len)
    snprintf(count, sizeof(count), "k %llu of dense_len %llu", (unsigned long long)fp->count,
             (unsigned long long)fp->dense_len);
  else if (fp->variant >= SC_FP_SPARSE_MIN)
    snprintf(count, sizeof(count), "k %llu", (unsigned long long)fp->count);
  else
    snprintf(count, sizeof(count), "count %llu", (unsigned long long)fp->count);
  snprintf(out, len, "%s%s #%llu (%s, %s, %s, root %d)", variant, sc_coll_name(fp->coll),
           (unsigned long long)fp->seq, count, dtype, redop, (int)fp->root);
  return out;
}

const char *sc_fp_describe(const sc_fingerprint_t *fp, char *out, size_t len) {
  return sc_fp_describe_as(fp, 1, out, len);
}

void sc_fp_judge(const sc_fingerprint_t *all, int nranks, sc_fp_verdict_t *v) {
  memset(v, 0, sizeof(*v));
  int differs = 0;
  for (int i = 1; i < nranks && !differs; i++) differs = !sc_fp_equal(&all[0], &all[i]);
  if (!differs) return;
  v->mismatch = 1;
  /* Quadratic, but only on the failure path. The first rank holding a print
   * counts it; a later holder of the same print cannot beat it. */
  v->ref = 0;
  v->nref = 0;
  for (int i = 0; i < nranks; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = sc_fp_equal(&all[i], &all[j]);
    if (seen) continue;
    int n = 0;
    for (int j = i; j < nranks; j++) n += sc_fp_equal(&all[i], &all[j]);
    if (n > v->nref) {
      v->ref = i;
      v->nref = n;
    }
  }
  v->ndiff = nranks - v->nref;
  v->first_diff = -1;
  for (int i = 0; i < nranks && v->first_diff < 0; i++)
    if (!sc_fp_equal(&all[i], &all[v->ref])) v->first_diff = i;
}

void sc_fp_mismatch_message(char *out, size_t len, const sc_fingerprint_t *all, int nranks,
                            int rank, const sc_fp_verdict_t *v,
                            const char *(*host)(const void *ctx, int r), const void *ctx) {
  int cause = !sc_fp_equal(&all[rank], &all[v->ref]);
  int other = cause ? v->ref : v->first_diff;
  char mine[160], theirs[160];
  sc_fp_describe(&all[rank], mine, sizeof(mine));
  sc_fp_describe(&all[other], theirs, sizeof(theirs));
  const char *why = 2 * v->nref > nranks
                        ? "the majority"
                        : "no majority: the lowest rank's of the most common calls";
  char role[64];
  if (cause)
    snprintf(role, sizeof(role), "a cause: the expected call is rank %d's", v->ref);
  else
    snprintf(role, sizeof(role), "a victim: its call is the expected one");
  snprintf(out, len,
           "rank %d of %d (%s): %s does not match rank %d (%s): %s; this rank is %s, made by %d "
           "of %d ranks (%s); %d rank%s differ%s, the first is rank %d",
           rank, nranks, host(ctx, rank), mine, other, host(ctx, other), theirs, role, v->nref,
           nranks, why, v->ndiff, v->ndiff == 1 ? "" : "s", v->ndiff == 1 ? "s" : "",
           v->first_diff);
}

sc_result_t sc_fp_schedule(int nranks, int rank, sc_sched_t *s) {
  return sc_small_allgather_schedule(nranks, rank, SC_FP_WIRE_BYTES, s);
}

sc_result_t sc_small_allgather_schedule(int nranks, int rank, size_t w, sc_sched_t *s) {
  if (nranks < 1 || rank < 0 || rank >= nranks || w == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "small all-gather schedule: rank %d of %d, %zu bytes", rank,
                  nranks, w);
  if (nranks > SC_FP_DIRECT_MAX) {
    sc_coll_args_t a = {.coll = SC_COLL_ALLGATHER,
                        .nranks = nranks,
                        .rank = rank,
                        .count = w,
                        .elem_size = 1,
                        .chunk_elems = w};
    return sc_rd_allgather_schedule(&a, s);
  }
  /* Every send is posted before the first receive, so the order of the
   * receives cannot deadlock; each peer's record lands in its own slot. */
  sc_sched_copy(s, SC_BUF_RECV, (size_t)rank * w, SC_BUF_SEND, 0, w);
  for (int d = 1; d < nranks; d++) sc_sched_send(s, (rank + d) % nranks, SC_BUF_SEND, 0, w);
  for (int d = 1; d < nranks; d++) {
    int from = (rank - d + nranks) % nranks;
    sc_sched_recv(s, from, SC_BUF_RECV, (size_t)from * w, w);
  }
  return s->status;
}

static const char *sc_fp_host(const void *ctx, int r) {
  const sc_comm_t *comm = ctx;
  return sc_comm_host(comm, r);
}

/* The checks' state, made at the first operation that needs one; NULL on
 * failure (with the error recorded). */
static sc_fp_state_t *sc_fp_state_get(sc_comm_t *comm) {
  if (comm->fp) return comm->fp;
  sc_fp_state_t *st = calloc(1, sizeof(*st));
  if (!st) {
    SC_ERR(SC_ERR_NOMEM, "fingerprint state");
    return NULL;
  }
  sc_sched_init(&st->sched);
  sc_sched_init(&st->counts);
  comm->fp = st;
  return st;
}

/* The prints' exchange: its buffers and schedule, at the first check. */
static sc_result_t sc_fp_prints_ready(sc_comm_t *comm, sc_fp_state_t *st) {
  if (st->wire) return SC_SUCCESS;
  size_t n = (size_t)comm->nranks;
  uint8_t *wire = malloc(n * SC_FP_WIRE_BYTES);
  sc_fingerprint_t *all = malloc(n * sizeof(*all));
  sc_sched_reset(&st->sched);
  sc_result_t r = wire && all ? sc_fp_schedule(comm->nranks, comm->rank, &st->sched)
                              : SC_ERR(SC_ERR_NOMEM, "fingerprints of %d ranks", comm->nranks);
  if (r != SC_SUCCESS) {
    free(wire);
    free(all);
    return r;
  }
  st->wire = wire;
  st->all = all;
  return SC_SUCCESS;
}

void sc_fp_free(sc_comm_t *comm) {
  sc_fp_state_t *st = comm->fp;
  if (!st) return;
  sc_sched_free(&st->sched);
  sc_sched_free(&st->counts);
  free(st->wire);
  free(st->all);
  free(st);
  comm->fp = NULL;
}

sc_result_t sc_fp_check(sc_comm_t *comm, const sc_op_t *op) {
  if (comm->nranks < 2) return SC_SUCCESS;
  sc_fp_state_t *st = sc_fp_state_get(comm);
  if (!st) return SC_ERR_NOMEM;
  SC_CHECK(sc_fp_prints_ready(comm, st));
  sc_fingerprint_t fp;
  sc_fp_from_op(op, &fp);
  sc_fp_encode(&fp, st->mine);
  sc_op_t xop = {.coll = SC_COLL_ALLGATHER,
                 .sendbuf = st->mine,
                 .recvbuf = st->wire,
                 .count = SC_FP_WIRE_BYTES,
                 .dtype = SC_UINT8,
                 .op = SC_SUM,
                 .root = 0,
                 .seq = op->seq};
  sc_exec_args_t a = {.op = &xop, .sched = &st->sched, .elem_size = 1};
  SC_CHECK(sc_sched_execute(comm, &a));
  const int n = comm->nranks;
  int same = 1;
  for (int i = 0; i < n && same; i++)
    same = !memcmp(st->wire + (size_t)i * SC_FP_WIRE_BYTES, st->mine, SC_FP_WIRE_BYTES);
  if (same) return SC_SUCCESS;
  for (int i = 0; i < n; i++)
    SC_CHECK(sc_fp_decode(st->wire + (size_t)i * SC_FP_WIRE_BYTES, i, &st->all[i]));
  sc_fp_verdict_t v;
  sc_fp_judge(st->all, n, &v);
  if (!v.mismatch) return SC_SUCCESS; /* not reached: equal prints encode to equal bytes */
  char msg[SC_ERRMSG_MAX - 128];
  sc_fp_mismatch_message(msg, sizeof(msg), st->all, n, comm->rank, &v, sc_fp_host, comm);
  return SC_ERR(SC_ERR_MISMATCH, "%s", msg);
}

/* Both ranks of a pair see its disagreement: each sends a peer the count it
 * sends it and the count it expects from it. */
sc_result_t sc_fp_check_pairs(sc_comm_t *comm, const sc_op_t *op) {
  const int n = comm->nranks;
  if (op->coll != SC_COLL_ALLTOALLV || n < 2) return SC_SUCCESS;
  const size_t *sendcounts = op->v[0], *recvcounts = op->v[2];
  uint8_t *mem = malloc((size_t)n * 32);
  if (!mem) return SC_ERR(SC_ERR_NOMEM, "all-to-allv count check of %d ranks", n);
  uint8_t *mine = mem, *theirs = mem + (size_t)n * 16;
  for (int j = 0; j < n; j++) {
    sc_wire_put_u64(mine + (size_t)j * 16, sendcounts[j]);
    sc_wire_put_u64(mine + (size_t)j * 16 + 8, recvcounts[j]);
  }
  sc_sched_t s;
  sc_sched_init(&s);
  sc_coll_args_t a = {.coll = SC_COLL_ALLTOALL,
                      .nranks = n,
                      .rank = comm->rank,
                      .count = 16,
                      .elem_size = 1,
                      .chunk_elems = 16};
  sc_result_t r = sc_pairwise_alltoall_schedule(&a, &s);
  if (r == SC_SUCCESS) {
    sc_op_t xop = {.coll = SC_COLL_ALLTOALL,
                   .sendbuf = mine,
                   .recvbuf = theirs,
                   .count = 16,
                   .dtype = SC_UINT8,
                   .op = SC_SUM,
                   .seq = op->seq};
    sc_exec_args_t x = {.op = &xop, .sched = &s, .elem_size = 1};
    r = sc_sched_execute(comm, &x);
  }
  sc_sched_free(&s);
  for (int i = 0; i < n && r == SC_SUCCESS; i++) {
    uint64_t sends = sc_wire_get_u64(theirs + (size_t)i * 16);
    uint64_t expects = sc_wire_get_u64(theirs + (size_t)i * 16 + 8);
    if (sends != recvcounts[i] || expects != sendcounts[i])
      r = SC_ERR(SC_ERR_MISMATCH,
                 "rank %d: alltoallv #%llu: the counts of the pair (rank %d, rank %d) disagree: "
                 "rank %d sends %zu element(s) to rank %d, which expects %llu; rank %d sends %llu "
                 "element(s) to rank %d, which expects %zu",
                 comm->rank, (unsigned long long)op->seq, comm->rank, i, comm->rank, sendcounts[i],
                 i, (unsigned long long)expects, i, (unsigned long long)sends, comm->rank,
                 recvcounts[i]);
  }
  free(mem);
  return r;
}

/* Pair (from, to) with count: one term of the count check's sum. */
static uint64_t sc_fp_pair_term(int from, int to, uint64_t count) {
  uint64_t x = ((uint64_t)(uint32_t)from << 32 | (uint32_t)to) * 0x9E3779B97F4A7C15ull;
  x ^= (count + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return x;
}

sc_result_t sc_fp_check_counts(sc_comm_t *comm, const sc_op_t *op) {
  const int n = comm->nranks, me = comm->rank;
  if (op->coll != SC_COLL_ALLTOALLV || n < 2) return SC_SUCCESS;
  const size_t *sendcounts = op->v[0], *recvcounts = op->v[2];
  sc_fp_state_t *st = sc_fp_state_get(comm);
  if (!st) return SC_ERR_NOMEM;
  if (!st->counts_built) {
    sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                        .nranks = n,
                        .rank = me,
                        .count = 1,
                        .elem_size = sizeof(uint64_t),
                        .chunk_elems = 1};
    sc_sched_reset(&st->counts);
    SC_CHECK(sc_rd_allreduce_schedule(&a, &st->counts));
    SC_CHECK(st->counts.status);
    st->counts_built = 1;
  }
  uint64_t mine = 0, sum = 0;
  for (int j = 0; j < n; j++)
    mine += sc_fp_pair_term(me, j, sendcounts[j]) - sc_fp_pair_term(j, me, recvcounts[j]);
  sc_op_t xop = {.coll = SC_COLL_ALLREDUCE,
                 .sendbuf = &mine,
                 .recvbuf = &sum,
                 .count = 1,
                 .dtype = SC_UINT64,
                 .op = SC_SUM,
                 .seq = op->seq};
  sc_exec_args_t x = {.op = &xop, .sched = &st->counts, .elem_size = sizeof(uint64_t)};
  sc_result_t r = sc_sched_execute(comm, &x);
  if (r != SC_SUCCESS || sum == 0) return r;
  /* Naming the pair takes a message between every two ranks: only where
   * those connections fit. */
  const int budget = comm->tune.model.peer_budget, named = budget <= 0 || n - 1 <= budget;
  if (named) {
    r = sc_fp_check_pairs(comm, op);
    if (r != SC_SUCCESS) return r;
  }
  return SC_ERR(SC_ERR_MISMATCH,
                "rank %d: alltoallv #%llu: the counts of a pair of ranks disagree (the sparse "
                "all-to-allv's count check; %s): sendcounts[j] on rank i must equal "
                "recvcounts[i] on rank j",
                me, (unsigned long long)op->seq,
                named ? "this rank's own pairs agree, the pair's ranks name it"
                      : "the pair is not named: that takes a connection between every two "
                        "ranks, more than the descriptor limit allows");
}
