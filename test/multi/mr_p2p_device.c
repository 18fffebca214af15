/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point calls on device buffers through the device stand-in (or
 * CUDA) (SC_DEVRT_STANDIN, test/devfake/): each rank sends to the next rank
 * of a ring and receives from the previous one, at an eager (100 B) and a
 * rendezvous (1 MiB) size, in two dtypes, with
 *   - sc_send and sc_recv inside a group,
 *   - sc_isend and sc_irecv (and a self-send of device memory),
 *   - sc_send_on_stream and sc_recv_on_stream, the input written and the
 *     output read back on the same stream with no host synchronization
 *     between (a slow host function first, so that the calls return before
 *     their input exists), alone and inside a group (there every rank sends
 *     first: the group is what keeps the rendezvous size from deadlocking);
 * the payloads checked against the sender's pattern after copying back; the
 * stream forms' refusals (host memory; two streams on one communicator in
 * one group, after which the group's first call still runs) checked too.
 *
 * Usage: mr_p2p_device (under sc_run, any number of ranks) */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/devrt.h"
#include "sparsecoll.h"

static const sc_devrt_t *rt;
static int rank, nranks, fails;

#define FAILF(...)                                                                                 \
  do {                                                                                             \
    fprintf(stderr, "rank %d FAIL: ", rank);                                                       \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    fails++;                                                                                       \
  } while (0)

#define CHECK_OK(call)                                                                             \
  do {                                                                                             \
    sc_result_t r_ = (call);                                                                       \
    if (r_ != SC_SUCCESS) {                                                                        \
      FAILF("%s: %s: %s", #call, sc_strerror(r_), sc_last_error());                                \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static sc_result_t stream_drain(void *stream) {
  void *ev;
  SC_CHECK(rt->event_create(&ev));
  sc_result_t r = rt->event_record(ev, stream);
  if (r == SC_SUCCESS) r = sc_dev_event_wait(rt, ev, 60000, "the test's stream");
  rt->event_destroy(ev);
  return r;
}

/* Byte i of the message from rank src in round c. */
static uint8_t pat(int src, size_t i, int c) {
  return (uint8_t)(src * 37 + (int)(i % 251) + c * 11 + 1);
}

static void fill(uint8_t *h, size_t bytes, int src, int c) {
  for (size_t i = 0; i < bytes; i++) h[i] = pat(src, i, c);
}

static void expect(const char *what, const uint8_t *h, size_t bytes, int src, int c) {
  for (size_t i = 0; i < bytes; i++)
    if (h[i] != pat(src, i, c)) {
      FAILF("%s: byte %zu of %zu from rank %d is %u, not %u", what, i, bytes, src, h[i],
            pat(src, i, c));
      return;
    }
}

typedef struct {
  uint8_t *h_in, *h_out, *d_in, *d_out;
  void *stream;
} bufs_t;

/* Host to device (or back) and wait. */
static sc_result_t copy(bufs_t *b, void *dst, const void *src, size_t bytes) {
  SC_CHECK(rt->memcpy_async(dst, src, bytes, b->stream));
  return stream_drain(b->stream);
}

/* Round c's input into h_in and d_in, zeros into h_out and d_out. */
static void stage_round(bufs_t *b, size_t bytes, int c) {
  fill(b->h_in, bytes, rank, c);
  memset(b->h_out, 0, bytes);
  CHECK_OK(copy(b, b->d_in, b->h_in, bytes));
  CHECK_OK(copy(b, b->d_out, b->h_out, bytes));
}

/* d_out back to the host, checked against rank src's round c input. */
static void check_round(bufs_t *b, const char *how, size_t bytes, int src, int c) {
  char what[96];
  CHECK_OK(copy(b, b->h_out, b->d_out, bytes));
  snprintf(what, sizeof(what), "%s %zu B", how, bytes);
  expect(what, b->h_out, bytes, src, c);
}

/* One round: count elements of dtype to the next rank, from the previous. */
static void round_blocking(bufs_t *b, size_t count, sc_dtype_t dt, size_t es, sc_comm_t *comm,
                           int c) {
  const size_t bytes = count * es;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  stage_round(b, bytes, c);
  CHECK_OK(sc_group_start());
  CHECK_OK(sc_send(b->d_in, count, dt, next, 5, comm));
  CHECK_OK(sc_recv(b->d_out, count, dt, prev, 5, comm));
  CHECK_OK(sc_group_end());
  check_round(b, "group send/recv", bytes, prev, c);
}

static void round_nonblocking(bufs_t *b, size_t count, sc_dtype_t dt, size_t es, sc_comm_t *comm,
                              int c) {
  const size_t bytes = count * es;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  stage_round(b, bytes, c);
  sc_request_t *rq = NULL, *sq = NULL;
  CHECK_OK(sc_irecv(b->d_out, count, dt, prev, 6, comm, &rq));
  CHECK_OK(sc_isend(b->d_in, count, dt, next, 6, comm, &sq));
  CHECK_OK(sc_wait(&sq));
  CHECK_OK(sc_wait(&rq));
  check_round(b, "isend/irecv", bytes, prev, c);
  /* to this rank itself: the receive posted after the send */
  memset(b->h_out, 0, bytes);
  CHECK_OK(copy(b, b->d_out, b->h_out, bytes));
  CHECK_OK(sc_isend(b->d_in, count, dt, rank, 7, comm, &sq));
  CHECK_OK(sc_irecv(b->d_out, count, dt, rank, 7, comm, &rq));
  CHECK_OK(sc_wait(&rq));
  CHECK_OK(sc_wait(&sq));
  check_round(b, "self isend/irecv", bytes, rank, c);
}

typedef struct {
  int ms;
  atomic_int *done;
} sleeper_t;

static void sleeper(void *arg) {
  const sleeper_t *s = arg;
  usleep((useconds_t)s->ms * 1000);
  atomic_store(s->done, 1);
}

/* The stream forms: a slow host function, the input's copy, the send and
 * the receive (even ranks send first, odd ones receive first: one call at a
 * time runs per rank), the output's copy; one drain at the end. */
static void round_stream(bufs_t *b, size_t count, sc_dtype_t dt, size_t es, sc_comm_t *comm, int c,
                         int grouped) {
  const size_t bytes = count * es;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  char what[96];
  fill(b->h_in, bytes, rank, c);
  memset(b->h_out, 0, bytes);
  CHECK_OK(copy(b, b->d_out, b->h_out, bytes));
  atomic_int done = 0;
  sleeper_t sl = {50, &done};
  CHECK_OK(rt->launch_host(b->stream, sleeper, &sl, sizeof(sl)));
  CHECK_OK(rt->memcpy_async(b->d_in, b->h_in, bytes, b->stream));
  if (grouped) {
    CHECK_OK(sc_group_start());
    CHECK_OK(sc_send_on_stream(b->d_in, count, dt, next, 8, comm, b->stream));
    CHECK_OK(sc_recv_on_stream(b->d_out, count, dt, prev, 8, comm, b->stream));
    CHECK_OK(sc_group_end());
  } else if (rank % 2 == 0) {
    CHECK_OK(sc_send_on_stream(b->d_in, count, dt, next, 8, comm, b->stream));
    CHECK_OK(sc_recv_on_stream(b->d_out, count, dt, prev, 8, comm, b->stream));
  } else {
    CHECK_OK(sc_recv_on_stream(b->d_out, count, dt, prev, 8, comm, b->stream));
    CHECK_OK(sc_send_on_stream(b->d_in, count, dt, next, 8, comm, b->stream));
  }
  /* The first call on comm makes its stream state (pinned memory), which may
   * wait for the device. */
  static int warm;
  if (warm++ && atomic_load(&done))
    FAILF("stream forms: the calls waited for the stream's earlier work");
  CHECK_OK(rt->memcpy_async(b->h_out, b->d_out, bytes, b->stream));
  CHECK_OK(stream_drain(b->stream));
  sc_result_t ae = SC_SUCCESS;
  CHECK_OK(sc_comm_get_async_error(comm, &ae));
  if (ae != SC_SUCCESS) FAILF("stream forms: async error %s: %s", sc_strerror(ae), sc_last_error());
  snprintf(what, sizeof(what), "send/recv_on_stream %zu B%s", bytes, grouped ? " in a group" : "");
  expect(what, b->h_out, bytes, prev, c);
}

static void refusals(bufs_t *b, sc_comm_t *comm) {
  sc_result_t r = sc_send_on_stream(b->h_in, 4, SC_UINT8, 0, 1, comm, b->stream);
  if (r != SC_ERR_INVALID_ARG)
    FAILF("sc_send_on_stream of host memory: %s, not SC_ERR_INVALID_ARG", sc_strerror(r));
  r = sc_recv_on_stream(b->h_out, 4, SC_UINT8, 0, 1, comm, b->stream);
  if (r != SC_ERR_INVALID_ARG)
    FAILF("sc_recv_on_stream of host memory: %s, not SC_ERR_INVALID_ARG", sc_strerror(r));
  /* Two streams in one group: the second call is refused, the first runs. */
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  sc_stream_t other = NULL;
  CHECK_OK(rt->stream_create(&other));
  fill(b->h_in, 4, rank, 99);
  CHECK_OK(copy(b, b->d_in, b->h_in, 4));
  CHECK_OK(sc_group_start());
  CHECK_OK(sc_send_on_stream(b->d_in, 4, SC_UINT8, next, 9, comm, b->stream));
  r = sc_recv_on_stream(b->d_out, 4, SC_UINT8, prev, 9, comm, other);
  CHECK_OK(sc_group_end());
  if (r != SC_ERR_INVALID_ARG)
    FAILF("a second stream in one group: %s, not SC_ERR_INVALID_ARG", sc_strerror(r));
  CHECK_OK(sc_recv(b->d_out, 4, SC_UINT8, prev, 9, comm));
  CHECK_OK(stream_drain(b->stream));
  CHECK_OK(rt->memcpy_async(b->h_out, b->d_out, 4, b->stream));
  CHECK_OK(stream_drain(b->stream));
  expect("the group's first stream-form call", b->h_out, 4, prev, 99);
  rt->stream_destroy(other);
}

int main(void) {
  rt = sc_devrt();
  if (!rt) {
    printf("skipped: no device runtime (the stand-in, SC_DEVRT_STANDIN, or a GPU)\n");
    return 77;
  }
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &nranks);
  double t0 = now_s();
  const size_t max = (size_t)1 << 20;
  bufs_t b = {0};
  if (rt->malloc_pinned((void **)&b.h_in, max) != SC_SUCCESS ||
      rt->malloc_pinned((void **)&b.h_out, max) != SC_SUCCESS ||
      rt->malloc_device((void **)&b.d_in, max) != SC_SUCCESS ||
      rt->malloc_device((void **)&b.d_out, max) != SC_SUCCESS ||
      rt->stream_create(&b.stream) != SC_SUCCESS) {
    fprintf(stderr, "device buffers: %s\n", sc_last_error());
    return 1;
  }
  static const struct {
    sc_dtype_t dt;
    size_t es;
  } dts[2] = {{SC_UINT8, 1}, {SC_FLOAT32, 4}};
  static const size_t sizes[2] = {100, (size_t)1 << 20};
  int c = 0;
  for (int d = 0; d < 2; d++)
    for (int s = 0; s < 2; s++) {
      const size_t count = sizes[s] / dts[d].es;
      round_blocking(&b, count, dts[d].dt, dts[d].es, comm, c++);
      round_nonblocking(&b, count, dts[d].dt, dts[d].es, comm, c++);
      round_stream(&b, count, dts[d].dt, dts[d].es, comm, c++, 0);
      round_stream(&b, count, dts[d].dt, dts[d].es, comm, c++, 1);
    }
  refusals(&b, comm);
  if (sc_comm_destroy(comm) != SC_SUCCESS) FAILF("destroy: %s", sc_last_error());
  rt->stream_destroy(b.stream);
  rt->free_pinned(b.h_in);
  rt->free_pinned(b.h_out);
  rt->free_device(b.d_in);
  rt->free_device(b.d_out);
  printf("rank %d of %d: p2p on device buffers: %d failures (%.2f s)\n", rank, nranks, fails,
         now_s() - t0);
  return fails ? 1 : 0;
}
