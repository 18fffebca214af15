/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messages around the frame's inline payload and the eager
 * threshold (run under sc-run): sizes 0, 1, the inline maximum (88 bytes),
 * one past it, the eager maximum and one past it, in uint8, float64 and
 * float16; with the receive posted first and with the message arriving
 * first; mismatched counts at those sizes, each followed by a message of the
 * same tag that must still arrive intact; and several user threads that
 * each run non-blocking ring shifts of their own tag at once (started in
 * the caller's thread when the lane's engine is free, queued otherwise),
 * completed by sc_wait or by polling sc_test, with bursts of one tag whose
 * k-th receive must get the k-th send. Every payload is checked against a
 * pattern each rank computes from (sender, tag, message number, byte).
 * Usage: mr_p2p_inline. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparsecoll.h"

static int rank, nranks;
static long failures, checks;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

enum { INLINE = 88, EAGER = 64 << 10 }; /* the library's limits, in bytes */

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    pthread_mutex_lock(&count_lock);                                                               \
    failures++;                                                                                    \
    pthread_mutex_unlock(&count_lock);                                                             \
    fprintf(stderr, "rank %d FAIL %s:%d: ", rank, __FILE__, __LINE__);                             \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
  } while (0)

#define COUNT()                                                                                    \
  do {                                                                                             \
    pthread_mutex_lock(&count_lock);                                                               \
    checks++;                                                                                      \
    pthread_mutex_unlock(&count_lock);                                                             \
  } while (0)

#define OK(call)                                                                                   \
  do {                                                                                             \
    sc_result_t r_ = (call);                                                                       \
    COUNT();                                                                                       \
    if (r_ != SC_SUCCESS) FAIL("%s -> %s: %s", #call, sc_strerror(r_), sc_last_error());           \
  } while (0)

static uint8_t pattern(int src, int tag, int seq, size_t j) {
  uint64_t x = (uint64_t)(src + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)tag * 0xBF58476D1CE4E5B9ull ^
               (uint64_t)(seq + 7) * 0x94D049BB133111EBull ^ (uint64_t)j * 0x2545F4914F6CDD1Dull;
  return (uint8_t)(x >> 31);
}

static void fill(uint8_t *b, size_t bytes, int src, int tag, int seq) {
  for (size_t j = 0; j < bytes; j++) b[j] = pattern(src, tag, seq, j);
}

static void expect(const uint8_t *b, size_t bytes, int src, int tag, int seq, const char *what) {
  COUNT();
  for (size_t j = 0; j < bytes; j++)
    if (b[j] != pattern(src, tag, seq, j)) {
      FAIL("%s: byte %zu of %zu from rank %d (tag %d, message %d): %u, want %u", what, j, bytes,
           src, tag, seq, b[j], pattern(src, tag, seq, j));
      return;
    }
}

typedef struct {
  sc_dtype_t dt;
  size_t es, count;
} size_case_t;

/* Byte sizes 0, 1, INLINE, INLINE + 1, EAGER, EAGER + 1 as element counts. */
static const size_case_t cases[] = {
    {SC_UINT8, 1, 0},
    {SC_UINT8, 1, 1},
    {SC_UINT8, 1, INLINE},
    {SC_UINT8, 1, INLINE + 1},
    {SC_UINT8, 1, EAGER},
    {SC_UINT8, 1, EAGER + 1},
    {SC_FLOAT64, 8, 1},
    {SC_FLOAT64, 8, INLINE / 8},
    {SC_FLOAT64, 8, INLINE / 8 + 1},
    {SC_FLOAT64, 8, EAGER / 8},
    {SC_FLOAT64, 8, EAGER / 8 + 1},
    {SC_FLOAT16, 2, INLINE / 2},
    {SC_FLOAT16, 2, INLINE / 2 + 1},
};
enum { NCASES = sizeof(cases) / sizeof(cases[0]) };

/* Ring shift of every case; recv_first: the receive is posted before the
 * barrier that precedes the send, else the message is sent before it. */
static void test_sizes(sc_comm_t *comm, int recv_first) {
  const int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  for (int c = 0; c < NCASES; c++) {
    const size_case_t *k = &cases[c];
    const size_t bytes = k->count * k->es;
    const int tag = 10 + c + 100 * recv_first;
    uint8_t *s = malloc(bytes + 1), *r = malloc(bytes + 1);
    fill(s, bytes, rank, tag, 0);
    memset(r, 0xEE, bytes + 1);
    sc_request_t *rq = NULL, *sq = NULL;
    if (recv_first) OK(sc_irecv(r, k->count, k->dt, from, tag, comm, &rq));
    OK(sc_barrier(comm));
    OK(sc_isend(s, k->count, k->dt, to, tag, comm, &sq));
    if (!recv_first) {
      OK(sc_barrier(comm)); /* the message is on its way before the receive */
      OK(sc_irecv(r, k->count, k->dt, from, tag, comm, &rq));
    }
    if (rq) OK(sc_wait(&rq));
    if (sq) OK(sc_wait(&sq));
    char what[96];
    snprintf(what, sizeof(what), "%s, %zu bytes", recv_first ? "receive first" : "send first",
             bytes);
    expect(r, bytes, from, tag, 0, what);
    if (r[bytes] != 0xEE) FAIL("%s: written past the end", what);
    free(s);
    free(r);
  }
}

/* A receive one element longer than the message fails with SC_ERR_MISMATCH
 * (its sender succeeds); the next message of the same tag arrives intact. */
static void test_mismatch(sc_comm_t *comm, int recv_first) {
  const int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  for (int c = 0; c < NCASES; c++) {
    const size_case_t *k = &cases[c];
    if (k->count * k->es > EAGER + 1) continue;
    const size_t bytes = k->count * k->es, big = (k->count + 1) * k->es;
    const int tag = 300 + c;
    uint8_t *s = malloc(bytes + 1), *r = malloc(big + 1), *s2 = malloc(bytes + 1);
    fill(s, bytes, rank, tag, 1);
    fill(s2, bytes, rank, tag, 2);
    sc_request_t *rq = NULL, *sq = NULL;
    sc_result_t rr = SC_SUCCESS;
    if (recv_first) OK(sc_irecv(r, k->count + 1, k->dt, from, tag, comm, &rq));
    OK(sc_isend(s, k->count, k->dt, to, tag, comm, &sq));
    OK(sc_barrier(comm)); /* send first: the message is on its way before the receive */
    if (!recv_first) OK(sc_irecv(r, k->count + 1, k->dt, from, tag, comm, &rq));
    if (rq) rr = sc_wait(&rq);
    COUNT();
    if (rr != SC_ERR_MISMATCH)
      FAIL("mismatch at %zu bytes (%s): %s, want SC_ERR_MISMATCH", bytes,
           recv_first ? "receive first" : "send first", sc_strerror(rr));
    if (sq) OK(sc_wait(&sq));
    memset(r, 0xEE, big + 1);
    OK(sc_isend(s2, k->count, k->dt, to, tag, comm, &sq));
    OK(sc_recv(r, k->count, k->dt, from, tag, comm));
    if (sq) OK(sc_wait(&sq));
    expect(r, bytes, from, tag, 2, "the message after a mismatch");
    if (r[bytes] != 0xEE) FAIL("after a mismatch at %zu bytes: written past the end", bytes);
    free(s);
    free(s2);
    free(r);
  }
}

enum { NTHREADS = 3, ROUNDS = 60, BURST = 4 };
static const size_t tsizes[] = {1, 8, INLINE, INLINE + 1, 1000, EAGER + 1};

typedef struct {
  sc_comm_t *comm;
  int id;
} targ_t;

/* Completes req by polling sc_test (odd rounds) or by sc_wait. */
static void finish(sc_request_t **req, int poll) {
  if (!*req) return;
  if (!poll) {
    OK(sc_wait(req));
    return;
  }
  int done = 0;
  sc_result_t r;
  do r = sc_test(req, &done);
  while (!done && r == SC_IN_PROGRESS);
  COUNT();
  if (r != SC_SUCCESS) FAIL("sc_test -> %s: %s", sc_strerror(r), sc_last_error());
}

static void *thread_main(void *arg) {
  const targ_t *a = arg;
  const int to = (rank + 1 + a->id) % nranks, from = (rank - 1 - a->id + 2 * nranks) % nranks;
  const int tag = 1000 + a->id;
  const size_t nsz = sizeof(tsizes) / sizeof(tsizes[0]);
  uint8_t *s[BURST], *r[BURST];
  for (int b = 0; b < BURST; b++) {
    s[b] = malloc(EAGER + 2);
    r[b] = malloc(EAGER + 2);
  }
  for (int round = 0; round < ROUNDS; round++) {
    /* One size per round, alike on every rank; a burst of BURST messages of
     * one tag, received in order: the k-th receive gets the k-th send. */
    const size_t bytes = tsizes[(size_t)(round + a->id) % nsz];
    const int recv_first = (round + a->id) % 2;
    sc_request_t *sq[BURST] = {0}, *rq[BURST] = {0};
    for (int b = 0; b < BURST; b++) {
      fill(s[b], bytes, rank, tag, round * BURST + b);
      memset(r[b], 0xEE, bytes + 1);
    }
    for (int b = 0; b < BURST && recv_first; b++)
      OK(sc_irecv(r[b], bytes, SC_UINT8, from, tag, a->comm, &rq[b]));
    for (int b = 0; b < BURST; b++) OK(sc_isend(s[b], bytes, SC_UINT8, to, tag, a->comm, &sq[b]));
    for (int b = 0; b < BURST && !recv_first; b++)
      OK(sc_irecv(r[b], bytes, SC_UINT8, from, tag, a->comm, &rq[b]));
    for (int b = BURST - 1; b >= 0; b--) finish(&rq[b], round % 2);
    for (int b = 0; b < BURST; b++) finish(&sq[b], round % 3 == 0);
    for (int b = 0; b < BURST; b++) {
      char what[96];
      snprintf(what, sizeof(what), "thread %d, round %d, message %d of a burst", a->id, round, b);
      expect(r[b], bytes, from, tag, round * BURST + b, what);
      if (r[b][bytes] != 0xEE) FAIL("%s: written past the end", what);
    }
  }
  for (int b = 0; b < BURST; b++) {
    free(s[b]);
    free(r[b]);
  }
  return NULL;
}

static void test_threads(sc_comm_t *comm) {
  pthread_t th[NTHREADS];
  targ_t a[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    a[i] = (targ_t){comm, i};
    if (pthread_create(&th[i], NULL, thread_main, &a[i]) != 0) FAIL("pthread_create");
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
}

int main(void) {
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &nranks);
  test_sizes(comm, 1);
  test_sizes(comm, 0);
  test_mismatch(comm, 1);
  test_mismatch(comm, 0);
  test_threads(comm);
  printf("rank %d: %ld checks, %ld failures\n", rank, checks, failures);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}
