/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messaging across ranks (run under sc-run), checked against
 * payloads every rank computes on its own from (sender, tag, message number,
 * byte index): every dtype, counts 0, 1, primes, both sides of the eager
 * threshold and multi-MiB (rendezvous); self-sends; ring shifts of blocking
 * calls inside a group in both call orders; an all-to-all of isend/irecv
 * posted in random order; tags received in another order than sent; a send
 * between two collectives on one rank only; mismatched counts and dtypes;
 * argument errors.
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

static int rank, nranks;
static long failures, checks;
static const size_t EAGER = 64 << 10; /* the library's eager threshold, in bytes */

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failures++;                                                                                    \
    fprintf(stderr, "rank %d FAIL %s:%d: ", rank, __FILE__, __LINE__);                             \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
  } while (0)

#define OK(call)                                                                                   \
  do {                                                                                             \
    sc_result_t r_ = (call);                                                                       \
    checks++;                                                                                      \
    if (r_ != SC_SUCCESS) FAIL("%s -> %s: %s", #call, sc_strerror(r_), sc_last_error());           \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Byte j of message `seq` from rank src with tag. */
static uint8_t pattern(int src, int tag, int seq, size_t j) {
  uint64_t x = (uint64_t)src * 0x9E3779B97F4A7C15ull ^ (uint64_t)tag * 0xBF58476D1CE4E5B9ull ^
               (uint64_t)seq * 0x94D049BB133111EBull ^ (uint64_t)j * 0x2545F4914F6CDD1Dull;
  return (uint8_t)(x >> 29);
}

static void fill(uint8_t *b, size_t bytes, int src, int tag, int seq) {
  for (size_t j = 0; j < bytes; j++) b[j] = pattern(src, tag, seq, j);
}

static void expect(const uint8_t *b, size_t bytes, int src, int tag, int seq, const char *what) {
  checks++;
  for (size_t j = 0; j < bytes; j++)
    if (b[j] != pattern(src, tag, seq, j)) {
      FAIL("%s: byte %zu of %zu from rank %d (tag %d, message %d): %u, want %u", what, j, bytes,
           src, tag, seq, b[j], pattern(src, tag, seq, j));
      return;
    }
}

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
  test_mismatch(comm);
  printf("rank %d: %ld checks, %ld failures, %.2f s\n", rank, checks, failures, now_s() - t0);
  return failures ? 1 : 0;
}

/* Rank 1 dies while rank 0 waits to receive from it and rank 2 (or 0, for
 * two ranks) sends it a large message. */
static int run_death(sc_comm_t *comm) {
  const int victim = 1;
  uint8_t small[64];
  fill(small, sizeof(small), victim, 600, 0);
  if (rank == victim) {
    OK(sc_send(small, sizeof(small), SC_UINT8, 0, 600, comm));
    usleep(200000);
    raise(SIGKILL);
  }
  if (rank == 0) {
    uint8_t got[64];
    OK(sc_recv(got, sizeof(got), SC_UINT8, victim, 600, comm));
    expect(got, sizeof(got), victim, 600, 0, "before the death");
  }
  size_t big = 8u << 20;
  uint8_t *buf = calloc(big, 1);
  double t0 = now_s();
  sc_result_t r;
  if (rank == 0)
    r = sc_recv(buf, 100, SC_UINT8, victim, 601, comm);
  else
    r = sc_send(buf, big, SC_UINT8, victim, 601, comm);
  double dt = now_s() - t0;
  const char *e = sc_last_error();
  checks++;
  if ((r != SC_ERR_REMOTE && r != SC_ERR_TIMEOUT) || (r == SC_ERR_REMOTE && !strstr(e, "rank 1")))
    FAIL("with rank 1 dead: %s: %s", sc_strerror(r), e);
  if (dt > 20) FAIL("took %.1f s to notice rank 1's death", dt);
  printf("rank %d: failed in %.3f s with %s: %s\n", rank, dt, sc_strerror(r), e);
  free(buf);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

static void *aborter(void *arg) {
  usleep(300000);
  sc_comm_abort(arg);
  return NULL;
}

static int run_abort(sc_comm_t *comm) {
  if (rank == 0) {
    int x;
    sc_request_t *q = NULL;
    OK(sc_irecv(&x, 1, SC_INT32, nranks - 1, 700, comm, &q));
    pthread_t t;
    pthread_create(&t, NULL, aborter, comm);
    double t0 = now_s();
    sc_result_t r = sc_recv(&x, 1, SC_INT32, nranks - 1, 701, comm);
    double dt = now_s() - t0;
    checks++;
    if (r != SC_ERR_ABORTED || dt > 5) FAIL("blocked receive: %s after %.2f s", sc_strerror(r), dt);
    r = q ? sc_wait(&q) : SC_ERR_INTERNAL;
    checks++;
    if (r != SC_ERR_ABORTED) FAIL("pending irecv: %s", sc_strerror(r));
    r = sc_send(&x, 1, SC_INT32, 0, 0, comm);
    checks++;
    if (r != SC_ERR_ABORTED) FAIL("send after abort: %s", sc_strerror(r));
    pthread_join(t, NULL);
    printf("rank 0: aborted after %.3f s\n", dt);
  } else {
    usleep(600000);
  }
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* Run with a short SC_TIMEOUT_MS: a receive nobody sends to and a large
 * send nobody receives both fail with SC_ERR_TIMEOUT within about that. */
static int run_timeout(sc_comm_t *comm) {
  if (nranks >= 2 && rank < 2) {
    size_t n = rank == 1 ? 1u << 20 : 4;
    uint8_t *buf = calloc(n, 1);
    double t0 = now_s();
    sc_result_t r = rank == 0 ? sc_recv(buf, n, SC_UINT8, 1, 800, comm)
                              : sc_send(buf, n, SC_UINT8, 0, 801, comm);
    double dt = now_s() - t0;
    checks++;
    if (r != SC_ERR_TIMEOUT || dt > 10 || !strstr(sc_last_error(), "SC_TIMEOUT_MS"))
      FAIL("unmatched %s: %s after %.2f s: %s", rank ? "send" : "receive", sc_strerror(r), dt,
           sc_last_error());
    printf("rank %d: timed out after %.2f s\n", rank, dt);
    free(buf);
  }
  OK(sc_barrier(comm));
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* Rank 0 sends rank 1 twenty eager messages of 60 KiB (1.2 MiB) that rank 1
 * receives none of. Rank 1 must fail every operation with rank 0 with
 * SC_ERR_NOMEM naming SC_P2P_UNEXPECTED_BYTES once they pass its 1 MiB, and
 * keep running: its collectives still work. It watches for that with empty
 * sends to rank 0, which succeed while rank 0 is still its peer. */
static int run_flood(sc_comm_t *comm) {
  enum { NMSG = 20, BYTES = 60 << 10 };
  if (nranks >= 2 && rank == 0) {
    uint8_t *buf = calloc(BYTES, 1);
    sc_request_t *q[NMSG];
    for (int i = 0; i < NMSG; i++) OK(sc_isend(buf, BYTES, SC_UINT8, 1, 900, comm, &q[i]));
    /* The last ones may stay unread in the transport once rank 1 stops
     * reading from this rank: they end with an error by the timeout. */
    for (int i = 0; i < NMSG; i++)
      if (q[i]) (void)sc_wait(&q[i]);
    free(buf);
  } else if (rank == 1) {
    double t0 = now_s();
    sc_result_t r = SC_SUCCESS;
    while (r == SC_SUCCESS && now_s() - t0 < 30) {
      r = sc_send(NULL, 0, SC_UINT8, 0, 901, comm);
      if (r == SC_SUCCESS) usleep(10000);
    }
    checks++;
    if (r != SC_ERR_NOMEM || !strstr(sc_last_error(), "SC_P2P_UNEXPECTED_BYTES=1048576"))
      FAIL("flooded: send to rank 0 gave %s: %s", sc_strerror(r), sc_last_error());
    uint8_t one[BYTES];
    r = sc_recv(one, BYTES, SC_UINT8, 0, 900, comm);
    checks++;
    if (r != SC_ERR_NOMEM) FAIL("flooded: receive from rank 0 gave %s", sc_strerror(r));
    printf("rank 1: flooded after %.2f s: %s\n", now_s() - t0, sc_last_error());
  }
  OK(sc_barrier(comm));
  int x = rank + 1, sum = 0;
  OK(sc_allreduce(&x, &sum, 1, SC_INT32, SC_SUM, comm));
  checks++;
  if (sum != nranks * (nranks + 1) / 2) FAIL("all-reduce after the flood: %d", sum);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* A sender's destroy says goodbye after its messages: what it sent before is
 * still received, in any order, eager ones taken from the unexpected list
 * after the goodbye; a receive nothing was sent for fails naming the reason. */
static int run_leave(sc_comm_t *comm) {
  enum { SMALL = 100, MID = 1000, BIG = 4 << 20 };
  uint8_t *big = malloc(BIG), small[SMALL], mid[MID], x;
  if (!big) return 1;
  if (nranks >= 2 && rank == 0) {
    fill(small, SMALL, 0, 1, 0);
    fill(big, BIG, 0, 2, 0);
    fill(mid, MID, 0, 3, 0);
    OK(sc_send(small, SMALL, SC_UINT8, 1, 1, comm));
    OK(sc_send(big, BIG, SC_UINT8, 1, 2, comm));
    OK(sc_send(mid, MID, SC_UINT8, 1, 3, comm));
  } else if (rank == 1) {
    OK(sc_recv(big, BIG, SC_UINT8, 0, 2, comm));
    expect(big, BIG, 0, 2, 0, "rendezvous message received as its sender left");
    /* Blocks until the goodbye: nothing was sent with tag 99. */
    sc_result_t r = sc_recv(&x, 1, SC_UINT8, 0, 99, comm);
    checks++;
    if (r != SC_ERR_REMOTE || !strstr(sc_last_error(), "closed its point-to-point lane"))
      FAIL("receive after rank 0 left: %s: %s", sc_strerror(r), sc_last_error());
    OK(sc_recv(mid, MID, SC_UINT8, 0, 3, comm));
    expect(mid, MID, 0, 3, 0, "eager message received after its sender left");
    OK(sc_recv(small, SMALL, SC_UINT8, 0, 1, comm));
    expect(small, SMALL, 0, 1, 0, "eager message received after its sender left");
    r = sc_recv(small, SMALL, SC_UINT8, 0, 1, comm);
    checks++;
    if (r != SC_ERR_REMOTE) FAIL("second receive of tag 1 after rank 0 left: %s", sc_strerror(r));
  }
  free(big);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* State of process pid as /proc/PID/stat tells it ('T': stopped), or '?'. */
static char proc_state(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return '?';
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *e = strrchr(buf, ')');
  return e && e[1] == ' ' ? e[2] : '?';
}

/* leave-stopped: rank 1 stops itself before it ever looks at its pair with
 * rank 0; rank 0 sends it two eager messages, destroys its communicator and
 * only then resumes it. Rank 1's first look at the pair comes after rank
 * 0's transport is gone, and it still receives both messages; a receive
 * nothing was sent for fails, and so does a send to rank 0, naming it. */
static int run_leave_stopped(sc_comm_t *comm) {
  enum { SMALL = 100, MID = 1000 };
  uint8_t small[SMALL], mid[MID], x = 0;
  int *pids = calloc((size_t)nranks, sizeof(int)), me = (int)getpid();
  if (!pids) return 1;
  OK(sc_allgather(&me, pids, 1, SC_INT32, comm));
  if (nranks >= 2 && rank == 1) {
    raise(SIGSTOP);
    OK(sc_recv(mid, MID, SC_UINT8, 0, 2, comm));
    expect(mid, MID, 0, 2, 0, "eager message received after its sender left, unconnected");
    OK(sc_recv(small, SMALL, SC_UINT8, 0, 1, comm));
    expect(small, SMALL, 0, 1, 0, "eager message received after its sender left, unconnected");
    sc_result_t r = sc_recv(&x, 1, SC_UINT8, 0, 99, comm);
    checks++;
    if (r != SC_ERR_REMOTE || !strstr(sc_last_error(), "rank 0"))
      FAIL("receive after rank 0 left: %s: %s", sc_strerror(r), sc_last_error());
    r = sc_send(&x, 1, SC_UINT8, 0, 5, comm);
    checks++;
    if (r != SC_ERR_REMOTE || !strstr(sc_last_error(), "rank 0"))
      FAIL("send after rank 0 left: %s: %s", sc_strerror(r), sc_last_error());
  } else if (nranks >= 2 && rank == 0) {
    double until = now_s() + 20;
    while (proc_state(pids[1]) != 'T' && now_s() < until) usleep(1000);
    checks++;
    if (proc_state(pids[1]) != 'T') FAIL("rank 1 (pid %d) did not stop", pids[1]);
    fill(small, SMALL, 0, 1, 0);
    fill(mid, MID, 0, 2, 0);
    sc_request_t *q[2] = {NULL, NULL};
    OK(sc_isend(small, SMALL, SC_UINT8, 1, 1, comm, &q[0]));
    OK(sc_isend(mid, MID, SC_UINT8, 1, 2, comm, &q[1]));
    /* A transport whose connection setup needs the receiver's answer (tcp)
     * cannot finish while rank 1 is stopped: it is resumed first. */
    int left = (q[0] != NULL) + (q[1] != NULL);
    for (until = now_s() + 2; left > 0 && now_s() < until; usleep(100))
      for (int i = 0; i < 2; i++) {
        int done = 0;
        if (!q[i]) continue;
        sc_result_t r = sc_test(&q[i], &done);
        if (r != SC_IN_PROGRESS) left--;
        if (r != SC_SUCCESS && r != SC_IN_PROGRESS) FAIL("send %d: %s", i, sc_last_error());
      }
    if (left) kill(pids[1], SIGCONT);
    for (int i = 0; i < 2; i++)
      if (q[i]) OK(sc_wait(&q[i]));
    sc_comm_destroy(comm);
    printf("rank 0: sends done %s rank 1 resumed\n", left ? "after" : "before");
    fflush(stdout);
    if (!left) kill(pids[1], SIGCONT);
    free(pids);
    return failures ? 1 : 0;
  }
  free(pids);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* SC_P2P=0: every call refused with SC_ERR_UNSUPPORTED saying why; the
 * collectives unaffected. */
static int run_off(sc_comm_t *comm) {
  int x = 0;
  sc_request_t *q = NULL;
  sc_result_t r = sc_isend(&x, 1, SC_INT32, 0, 0, comm, &q);
  checks++;
  if (r != SC_ERR_UNSUPPORTED || !strstr(sc_last_error(), "SC_P2P=0") || q)
    FAIL("SC_P2P=0: %s: %s", sc_strerror(r), sc_last_error());
  r = sc_recv(&x, 1, SC_INT32, 0, 0, comm);
  checks++;
  if (r != SC_ERR_UNSUPPORTED) FAIL("SC_P2P=0: sc_recv: %s", sc_strerror(r));
  OK(sc_barrier(comm));
  sc_comm_destroy(comm);
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
