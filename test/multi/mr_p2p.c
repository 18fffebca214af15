/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messaging across ranks (run under sc-run), checked against
 * payloads every rank computes on its own from (sender, tag, message number,
 * byte index): every dtype, counts 0, 1, primes, both sides of the eager
 * threshold and multi-MiB (rendezvous); self-sends; ring shifts of blocking
 * calls inside a group in both call orders; an all-to-all of isend/irecv
 * posted in random order; tags received in another order than sent; a send
 * between two collectives on one rank only; a rendezvous message moved while
 * its sender, then its receiver, stays out of the library; mismatched counts
 * and dtypes; argument errors.
 * Usage: mr_p2p [all | death | abort]. death: rank 1 is killed while the
 * others exchange with it; they must fail with SC_ERR_REMOTE or
 * SC_ERR_TIMEOUT within seconds. abort: rank 0's pending receive is ended by
 * sc_comm_abort from another thread. off: run with SC_P2P=0. timeout: run
 * with a short SC_TIMEOUT_MS. flood: run with SC_P2P_UNEXPECTED_BYTES=1048576;
 * rank 0 sends rank 1 more than that in messages it does not receive.
 * leave: rank 0 sends rank 1 three messages and destroys its communicator at
 * once; rank 1 receives them all after the goodbye. leave-stopped: the same
 * with rank 1 stopped (SIGSTOP) until rank 0's communicator is gone. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sparsecoll.h"

#include "test/multi/mr_p2p_common.h"

static const sc_dtype_t dtypes[] = {SC_INT8,   SC_UINT8,   SC_INT32,    SC_UINT32,  SC_INT64,
                                    SC_UINT64, SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};

/* Ring shift by `shift` with isend/irecv: every dtype, many counts; the
 * multi-MiB count for every dtype at two ranks, for two beyond (this suite
 * runs on two shared cores). */
static void test_counts(sc_comm_t *comm, int shift, int big) {
  const int to = (rank + shift) % nranks, from = (rank - shift + nranks) % nranks;
  for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
    const sc_dtype_t dt = dtypes[d];
    const size_t es = sc_dtype_size(dt);
    size_t counts[] = {
        0, 1, 2, 13, 1021, EAGER / es - 1, EAGER / es, EAGER / es + 1, (3u << 20) / es + 7};
    size_t nc = sizeof(counts) / sizeof(counts[0]);
    if (!big || (nranks > 2 && dt != SC_UINT8 && dt != SC_FLOAT64)) nc--;
    for (size_t c = 0; c < nc; c++) {
      const size_t bytes = counts[c] * es;
      const int tag = (int)(d * 16 + c);
      uint8_t *s = malloc(bytes + 1), *r = malloc(bytes + 1);
      fill(s, bytes, rank, tag, shift);
      memset(r, 0xEE, bytes + 1);
      sc_request_t *rq = NULL, *sq = NULL;
      OK(sc_irecv(counts[c] ? r : NULL, counts[c], dt, from, tag, comm, &rq));
      OK(sc_isend(counts[c] ? s : NULL, counts[c], dt, to, tag, comm, &sq));
      if (sq) OK(sc_wait(&sq));
      if (rq) OK(sc_wait(&rq));
      char what[64];
      snprintf(what, sizeof(what), "count %zu of dtype %d", counts[c], (int)dt);
      expect(r, bytes, from, tag, shift, what);
      if (r[bytes] != 0xEE) FAIL("%s: written past the end", what);
      free(s);
      free(r);
    }
  }
}

static void test_self(sc_comm_t *comm) {
  size_t sizes[] = {0, 5, EAGER + 3, 2u << 20};
  for (int i = 0; i < 4; i++) {
    size_t n = sizes[i];
    uint8_t *s = malloc(n + 1), *r = malloc(n + 1);
    fill(s, n, rank, 100 + i, 0);
    /* send first (non-blocking: it completes once the receive is posted) */
    sc_request_t *sq = NULL;
    OK(sc_isend(s, n, SC_UINT8, rank, 100 + i, comm, &sq));
    OK(sc_recv(r, n, SC_UINT8, rank, 100 + i, comm));
    if (sq) OK(sc_wait(&sq));
    expect(r, n, rank, 100 + i, 0, "self-send, send first");
    /* receive first */
    memset(r, 0, n + 1);
    sc_request_t *rq = NULL;
    OK(sc_irecv(r, n, SC_UINT8, rank, 100 + i, comm, &rq));
    OK(sc_send(s, n, SC_UINT8, rank, 100 + i, comm));
    if (rq) OK(sc_wait(&rq));
    expect(r, n, rank, 100 + i, 0, "self-send, receive first");
    /* blocking both, in a group */
    memset(r, 0, n + 1);
    OK(sc_group_start());
    OK(sc_recv(r, n, SC_UINT8, rank, 100 + i, comm));
    OK(sc_send(s, n, SC_UINT8, rank, 100 + i, comm));
    OK(sc_group_end());
    expect(r, n, rank, 100 + i, 0, "self-send in a group");
    free(s);
    free(r);
  }
}

/* Blocking send and receive of a ring shift inside a (nested) group: both
 * call orders, eager and rendezvous sizes. Outside a group the receive-first
 * order would deadlock. */
static void test_group_ring(sc_comm_t *comm) {
  const int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  size_t sizes[] = {1, 1000, (4u << 20) + 4};
  for (int order = 0; order < 2; order++)
    for (int i = 0; i < 3; i++) {
      size_t n = sizes[i];
      int32_t *s = malloc(n * 4), *r = calloc(n, 4);
      fill((uint8_t *)s, n * 4, rank, 200 + i, order);
      OK(sc_group_start());
      OK(sc_group_start()); /* nested: only the outer end starts them */
      if (order == 0) {
        OK(sc_recv(r, n, SC_INT32, from, 200 + i, comm));
        OK(sc_send(s, n, SC_INT32, to, 200 + i, comm));
      } else {
        OK(sc_send(s, n, SC_INT32, to, 200 + i, comm));
        OK(sc_recv(r, n, SC_INT32, from, 200 + i, comm));
      }
      OK(sc_group_end());
      OK(sc_group_end());
      expect((uint8_t *)r, n * 4, from, 200 + i, order, "ring shift in a group");
      free(s);
      free(r);
    }
  /* a collective inside a group becomes non-blocking: the ring still flows */
  double v = rank + 1, sum = 0;
  int32_t a = rank, b = -1;
  OK(sc_group_start());
  OK(sc_recv(&b, 1, SC_INT32, from, 250, comm));
  OK(sc_allreduce(&v, &sum, 1, SC_FLOAT64, SC_SUM, comm));
  OK(sc_send(&a, 1, SC_INT32, to, 250, comm));
  OK(sc_group_end());
  checks++;
  if (b != from || sum != nranks * (nranks + 1) / 2.0)
    FAIL("group with a collective: got %d and %g, want %d and %g", b, sum, from,
         nranks * (nranks + 1) / 2.0);
}

/* An all-to-all of isend/irecv, every rank posting its 2n calls in its own
 * random order; pair (i, j) carries a count of its own. */
static void test_alltoall(sc_comm_t *comm, unsigned seed) {
  const int n = nranks;
  uint8_t **s = calloc((size_t)n, sizeof(*s)), **r = calloc((size_t)n, sizeof(*r));
  size_t *scount = calloc((size_t)n, sizeof(size_t)), *rcount = calloc((size_t)n, sizeof(size_t));
  for (int j = 0; j < n; j++) {
    scount[j] = ((size_t)(rank * 7 + j * 3) % 5) * (EAGER / 2) + (size_t)j + 1;
    rcount[j] = ((size_t)(j * 7 + rank * 3) % 5) * (EAGER / 2) + (size_t)rank + 1;
    s[j] = malloc(scount[j] * 2);
    r[j] = calloc(rcount[j], 2);
    fill(s[j], scount[j] * 2, rank, 300, (int)seed);
  }
  int *ord = malloc(sizeof(int) * 2 * (size_t)n);
  for (int i = 0; i < 2 * n; i++) ord[i] = i;
  srand(seed * 977u + (unsigned)rank);
  for (int i = 2 * n - 1; i > 0; i--) {
    int k = rand() % (i + 1), t = ord[i];
    ord[i] = ord[k];
    ord[k] = t;
  }
  sc_request_t **req = calloc(2 * (size_t)n, sizeof(*req));
  for (int i = 0; i < 2 * n; i++) {
    int j = ord[i] % n;
    if (ord[i] < n)
      OK(sc_isend(s[j], scount[j], SC_FLOAT16, j, 300, comm, &req[i]));
    else
      OK(sc_irecv(r[j], rcount[j], SC_FLOAT16, j, 300, comm, &req[i]));
  }
  for (int i = 2 * n - 1; i >= 0; i--)
    if (req[i]) OK(sc_wait(&req[i]));
  for (int j = 0; j < n; j++) {
    /* the pattern depends on the sender's rank alone for this tag */
    expect(r[j], rcount[j] * 2, j, 300, (int)seed, "all-to-all");
    free(s[j]);
    free(r[j]);
  }
  free(s);
  free(r);
  free(scount);
  free(rcount);
  free(ord);
  free(req);
}

/* Several tags in flight, received in another tag order than sent: the k-th
 * receive of a tag gets the k-th send of that tag. */
static void test_tags(sc_comm_t *comm) {
  if (nranks < 2) return;
  const int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  enum { M = 8 };
  const int stag[M] = {0, 1, 2, 3, 0, 1, 2, 3};
  const int rtag[M] = {3, 3, 1, 0, 2, 1, 0, 2};
  const size_t size_of_tag[4] = {17, EAGER + 5, 4, 3 * EAGER};
  uint8_t *s[M], *r[M];
  int rseq[M], seen[4] = {0};
  sc_request_t *sq[M], *rq[M];
  for (int i = 0; i < M; i++) {
    s[i] = malloc(size_of_tag[stag[i]]);
    fill(s[i], size_of_tag[stag[i]], rank, stag[i], i / 4);
    OK(sc_isend(s[i], size_of_tag[stag[i]], SC_UINT8, to, stag[i], comm, &sq[i]));
  }
  for (int i = 0; i < M; i++) {
    r[i] = malloc(size_of_tag[rtag[i]]);
    rseq[i] = seen[rtag[i]]++;
    OK(sc_irecv(r[i], size_of_tag[rtag[i]], SC_UINT8, from, rtag[i], comm, &rq[i]));
  }
  for (int i = M - 1; i >= 0; i--) {
    if (rq[i]) OK(sc_wait(&rq[i]));
    if (sq[i]) OK(sc_wait(&sq[i]));
  }
  for (int i = 0; i < M; i++) {
    expect(r[i], size_of_tag[rtag[i]], from, rtag[i], rseq[i], "interleaved tags");
    free(r[i]);
    free(s[i]);
  }
}

/* Rank 0 sends to rank 1 between two all-reduces; rank 1 receives after the
 * second. Neither the collectives nor the message may wait for the other. */
static void test_between_collectives(sc_comm_t *comm) {
  if (nranks < 2) return;
  double x = 1, y = 0;
  uint8_t msg[100], got[100];
  fill(msg, sizeof(msg), 0, 400, 0);
  OK(sc_allreduce(&x, &y, 1, SC_FLOAT64, SC_SUM, comm));
  if (rank == 0) OK(sc_send(msg, sizeof(msg), SC_UINT8, 1, 400, comm));
  OK(sc_allreduce(&x, &y, 1, SC_FLOAT64, SC_SUM, comm));
  checks++;
  if (y != nranks) FAIL("all-reduce around a send: %g, want %d", y, nranks);
  if (rank == 1) {
    OK(sc_recv(got, sizeof(got), SC_UINT8, 0, 400, comm));
    expect(got, sizeof(got), 0, 400, 0, "send between collectives");
  }
  OK(sc_barrier(comm));
}

/* A rendezvous message moves while one side is out of the library (the
 * lane thread answers for it): the side away posts its call and stays out
 * for AWAY_S; the other side's wait must end before that. The moment it
 * ended reaches the side away in a message after (CLOCK_MONOTONIC is one
 * clock for the host's processes: every transport's ranks here share it).
 * Rank 0 sends, rank 1 receives; first the receiver is away, then the
 * sender. */
#define AWAY_S 1.0
static void test_unattended(sc_comm_t *comm) {
  if (nranks < 2) return;
  const size_t bytes = (size_t)4 << 20;
  uint8_t *b = rank < 2 ? malloc(bytes) : NULL;
  for (int away = 1; away >= 0; away--) {
    OK(sc_barrier(comm)); /* the side away leaves once the other side is here */
    if (rank > 1) continue;
    const int tag = 500 + away, peer = 1 - rank;
    sc_request_t *req = NULL;
    if (rank == 0) {
      fill(b, bytes, 0, tag, 0);
      OK(sc_isend(b, bytes, SC_UINT8, 1, tag, comm, &req));
    } else {
      memset(b, 0xEE, bytes);
      OK(sc_irecv(b, bytes, SC_UINT8, 0, tag, comm, &req));
    }
    if (rank == away) {
      const double end = now_s() + AWAY_S;
      while (now_s() < end) usleep(10000);
      if (req) OK(sc_wait(&req));
      double done_at = 0;
      OK(sc_recv(&done_at, 1, SC_FLOAT64, peer, tag + 10, comm));
      checks++;
      if (done_at >= end)
        FAIL("rank %d's %s ended %.3f s after rank %d came back: nothing moved it meanwhile", peer,
             peer ? "receive" : "send", done_at - end, rank);
    } else {
      if (req) OK(sc_wait(&req));
      const double done_at = now_s();
      OK(sc_send(&done_at, 1, SC_FLOAT64, peer, tag + 10, comm));
    }
    if (rank == 1) expect(b, bytes, 0, tag, 0, "a message whose other side was away");
  }
  free(b);
  OK(sc_barrier(comm));
}

static void test_mismatch(sc_comm_t *comm) {
  if (nranks < 2) return;
  const size_t big = (1u << 20) + 1;
  float *buf = calloc(big, sizeof(float));
  if (rank == 0) {
    OK(sc_send(buf, 10, SC_FLOAT32, 1, 500, comm));  /* eager */
    OK(sc_send(buf, big, SC_FLOAT32, 1, 500, comm)); /* rendezvous */
    fill((uint8_t *)buf, 20, 0, 501, 0);
    OK(sc_send(buf, 5, SC_INT32, 1, 500, comm)); /* then a good one */
  } else if (rank == 1) {
    sc_result_t r = sc_recv(buf, 12, SC_FLOAT32, 0, 500, comm);
    const char *e = sc_last_error();
    checks++;
    if (r != SC_ERR_MISMATCH || !strstr(e, "count 12 of float32") ||
        !strstr(e, "count 10 of float32"))
      FAIL("eager mismatch: %s: %s", sc_strerror(r), e);
    r = sc_recv(buf, big, SC_INT32, 0, 500, comm);
    e = sc_last_error();
    checks++;
    if (r != SC_ERR_MISMATCH || !strstr(e, "of int32") || !strstr(e, "of float32"))
      FAIL("rendezvous mismatch: %s: %s", sc_strerror(r), e);
    memset(buf, 0, 20);
    OK(sc_recv(buf, 5, SC_INT32, 0, 500, comm));
    expect((uint8_t *)buf, 20, 0, 501, 0, "message after a mismatch");
  }
  /* Inside a group the error names the call that failed, its place in the
   * group and its arguments. */
  if (rank == 0) {
    OK(sc_send(buf, 4, SC_FLOAT32, 1, 502, comm));
    OK(sc_send(buf, 3, SC_FLOAT32, 1, 503, comm));
  } else if (rank == 1) {
    OK(sc_group_start());
    OK(sc_recv(buf, 4, SC_FLOAT32, 0, 502, comm));
    OK(sc_recv(buf + 4, 4, SC_FLOAT32, 0, 503, comm));
    sc_result_t r = sc_group_end();
    const char *e = sc_last_error();
    checks++;
    if (r != SC_ERR_MISMATCH ||
        !strstr(e, "sc_group_end: call 2 of 2, sc_recv from rank 0 (tag 503, count 4 of float32)"))
      FAIL("group mismatch: %s: %s", sc_strerror(r), e);
  }
  free(buf);
  OK(sc_barrier(comm));
}

static void test_args(sc_comm_t *comm) {
  int x = 0;
  sc_request_t *q = NULL;
  struct {
    sc_result_t r;
    const char *what, *word;
  } c[] = {
      {sc_send(&x, 1, SC_INT32, 0, -1, comm), "negative tag", "tag"},
      {sc_send(&x, 1, SC_INT32, nranks, 0, comm), "peer past the end", "peer"},
      {sc_recv(&x, 1, SC_INT32, -1, 0, comm), "negative peer", "peer"},
      {sc_recv(NULL, 1, SC_INT32, 0, 0, comm), "NULL buf", "buf"},
      {sc_send(&x, 1, (sc_dtype_t)99, 0, 0, comm), "bad dtype", "dtype"},
      {sc_send(&x, SIZE_MAX / 2, SC_INT32, 0, 0, comm), "overflowing count", "overflow"},
      {sc_send(&x, 1, SC_INT32, 0, 0, NULL), "NULL comm", "comm"},
      {sc_isend(&x, 1, SC_INT32, 0, 0, comm, NULL), "NULL req", "req"},
      {sc_irecv(&x, 1, SC_INT32, 0, -5, comm, &q), "irecv negative tag", "tag"},
      {sc_group_end(), "group end without start", "sc_group_start"},
  };
  for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
    checks++;
    if (c[i].r != SC_ERR_INVALID_ARG)
      FAIL("%s: %s, want SC_ERR_INVALID_ARG", c[i].what, sc_strerror(c[i].r));
  }
  /* the detail of the last one */
  checks++;
  if (q) FAIL("irecv left a request after refusing");
  /* An empty group, and one nested in another, are no-ops. */
  OK(sc_group_start());
  OK(sc_group_end());
  OK(sc_group_start());
  OK(sc_group_start());
  OK(sc_group_end());
  OK(sc_group_end());
}

static int run_all(sc_comm_t *comm) {
  double t0 = now_s();
  test_args(comm);
  test_counts(comm, 1, 1);
  if (nranks > 2) test_counts(comm, nranks - 1, 0);
  test_self(comm);
  test_group_ring(comm);
  for (unsigned seed = 1; seed <= 3; seed++) test_alltoall(comm, seed);
  test_tags(comm);
  test_between_collectives(comm);
  test_unattended(comm);
  test_mismatch(comm);
  printf("rank %d: %ld checks, %ld failures, %.2f s\n", rank, checks, failures, now_s() - t0);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &nranks);
  if (!strcmp(mode, "death")) return run_death(comm);
  if (!strcmp(mode, "abort")) return run_abort(comm);
  if (!strcmp(mode, "off")) return run_off(comm);
  if (!strcmp(mode, "timeout")) return run_timeout(comm);
  if (!strcmp(mode, "flood")) return run_flood(comm);
  if (!strcmp(mode, "leave")) return run_leave(comm);
  if (!strcmp(mode, "leave-stopped")) return run_leave_stopped(comm);
  int rc = run_all(comm);
  sc_comm_destroy(comm);
  return rc;
}
