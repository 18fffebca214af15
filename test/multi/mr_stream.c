/* SPDX-License-Identifier: BSD-3-Clause */
/* The stream-ordered forms (sc_*_on_stream) on the device stand-in (or CUDA)
 * (SC_DEVRT_STANDIN, test/devfake/): the collectives run in stream order with
 * no host synchronization between the work that makes their input, the
 * call, and the work that reads their output; results against references
 * computed on the host from each rank's known inputs.
 *
 * Usage: mr_stream MODE
 *   order   every dense stream form, each behind a slow host function and a
 *           copy that write its input, its output copied back in stream
 *           order; the call returns before its input exists; host buffers
 *           refused; zero counts; a call still queued at sc_comm_destroy
 *           runs before the communicator goes
 *   chain   calls back to back on one stream, a stream kernel between them
 *           that mixes the last result with the rank's input; two streams
 *           interleaved (one the legacy default stream); a blocking
 *           host-buffer call among them
 *   abort   rank 0's stream waits on a call rank 1 never joins, with a
 *           second call queued behind it; sc_comm_abort from the host
 *           releases the stream (its next event completes) within a bound
 *   death   the last rank is killed; the survivors' stream calls fail the
 *           communicator (SC_ERR_REMOTE) and their stream is released
 *   gtopk   sc_gtopk_allreduce_on_stream against the blocking form on host
 *           copies, with and without error feedback */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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

/* ---- stream helpers ---- */

/* A host function that sleeps, then raises a flag: the stream's work before
 * the call ends well after the call returned. */
typedef struct {
  int ms;
  atomic_int *done;
} sleeper_t;

static void sleeper(void *arg) {
  const sleeper_t *s = arg;
  usleep((useconds_t)s->ms * 1000);
  atomic_store(s->done, 1);
}

/* Wait from the host for everything enqueued on stream so far. */
static sc_result_t stream_drain(void *stream, int timeout_ms, double *waited) {
  void *ev;
  double t0 = now_s();
  SC_CHECK(rt->event_create(&ev));
  sc_result_t r = rt->event_record(ev, stream);
  if (r == SC_SUCCESS) r = sc_dev_event_wait(rt, ev, timeout_ms, "the test's stream");
  rt->event_destroy(ev);
  if (waited) *waited = now_s() - t0;
  return r;
}

/* Rank r's input element i for call c: small integers, exact in float. */
static float in_val(int r, size_t i, int c) {
  return (float)((r + 1) * (int)(i % 13) - 3 * c + r);
}

/* ---- order ---- */

typedef struct {
  float *h_in, *h_out; /* pinned */
  float *d_in, *d_out; /* device */
  size_t in_n, out_n;  /* elements */
} bufs_t;

static sc_result_t bufs_alloc(bufs_t *b, size_t in_n, size_t out_n) {
  memset(b, 0, sizeof(*b));
  b->in_n = in_n;
  b->out_n = out_n;
  SC_CHECK(rt->malloc_pinned((void **)&b->h_in, in_n * sizeof(float) + 4));
  SC_CHECK(rt->malloc_pinned((void **)&b->h_out, out_n * sizeof(float) + 4));
  SC_CHECK(rt->malloc_device((void **)&b->d_in, in_n * sizeof(float) + 4));
  SC_CHECK(rt->malloc_device((void **)&b->d_out, out_n * sizeof(float) + 4));
  return SC_SUCCESS;
}

static void bufs_free(bufs_t *b) {
  rt->free_pinned(b->h_in);
  rt->free_pinned(b->h_out);
  rt->free_device(b->d_in);
  rt->free_device(b->d_out);
}

enum { C_ALLREDUCE, C_BROADCAST, C_REDUCE_SCATTER, C_ALLGATHER, C_REDUCE, C_COUNT };
static const char *const cname[C_COUNT] = {"allreduce", "broadcast", "reduce_scatter", "allgather",
                                           "reduce"};

/* The reference of collective c on count elements (per rank's block for
 * reduce_scatter and allgather) with root: what rank `rank` must hold. */
static float ref_val(int c, size_t i, size_t count, int root, int call) {
  float acc = 0;
  switch (c) {
  case C_ALLREDUCE:
    for (int r = 0; r < nranks; r++) acc += in_val(r, i, call);
    return acc;
  case C_BROADCAST:
    return in_val(root, i, call);
  case C_REDUCE_SCATTER:
    for (int r = 0; r < nranks; r++) acc += in_val(r, (size_t)rank * count + i, call);
    return acc;
  case C_ALLGATHER:
    return in_val((int)(i / count), i % count, call);
  default: /* C_REDUCE, MAX */
    acc = in_val(0, i, call);
    for (int r = 1; r < nranks; r++)
      if (in_val(r, i, call) > acc) acc = in_val(r, i, call);
    return acc;
  }
}

/* The call left queued when the communicator is destroyed. */
static struct {
  bufs_t b;
  void *stream;
  int call;
} tail;

static sc_result_t issue(int c, bufs_t *b, size_t count, int root, sc_comm_t *comm, void *s) {
  switch (c) {
  case C_ALLREDUCE:
    return sc_allreduce_on_stream(b->d_in, b->d_out, count, SC_FLOAT32, SC_SUM, comm, s);
  case C_BROADCAST:
    return sc_broadcast_on_stream(b->d_in, b->d_out, count, SC_FLOAT32, root, comm, s);
  case C_REDUCE_SCATTER:
    return sc_reduce_scatter_on_stream(b->d_in, b->d_out, count, SC_FLOAT32, SC_SUM, comm, s);
  case C_ALLGATHER:
    return sc_allgather_on_stream(b->d_in, b->d_out, count, SC_FLOAT32, comm, s);
  default:
    return sc_reduce_on_stream(b->d_in, b->d_out, count, SC_FLOAT32, SC_MAX, root, comm, s);
  }
}

static void run_order(sc_comm_t *comm) {
  void *s;
  CHECK_OK(rt->stream_create(&s));
  const size_t counts[] = {1, 1000, 70001};
  /* A warm-up of every form at every count and root (each may pick another
   * algorithm, with other peers): a stream call that needs more memory than
   * any before allocates it on the caller's thread before its stream waits,
   * and an allocation may wait for the stream's earlier work (CUDA's
   * implicit synchronization; the stand-in does the same). The calls below
   * then need nothing new and must return at once. Each warm-up call sits
   * behind a slow host function too, so that its operation runs while its
   * stream waits: an allocation the caller did not make before the wait
   * would then stall (on the stand-in, time out) and fail the call. */
  /* The buffers stay allocated until every call is over, as a caching
   * allocator keeps them: a peer's buffer freed and made again at the same
   * address cannot be mapped while a stream call waits (its old mapping
   * would have to be unmapped, which may wait for this stream; the call
   * fails then, kernels/devrt_ipc.c). */
  bufs_t warm[C_COUNT * 3], used[C_COUNT * 3];
  int nwarm = 0, nused = 0;
  for (int w = 0; w < C_COUNT * 3; w++) {
    int c = w % C_COUNT;
    size_t count = counts[w / C_COUNT];
    bufs_t b;
    CHECK_OK(bufs_alloc(&b, c == C_REDUCE_SCATTER ? count * (size_t)nranks : count,
                        c == C_ALLGATHER ? count * (size_t)nranks : count));
    warm[nwarm++] = b;
    atomic_int slept = 0;
    sleeper_t sl = {.ms = 30, .done = &slept};
    CHECK_OK(rt->launch_host(s, sleeper, &sl, sizeof(sl)));
    sc_result_t r = issue(c, &b, count, (w + 1) % nranks, comm, s); /* the roots below */
    if (r != SC_SUCCESS) FAILF("warm-up %s: %s: %s", cname[c], sc_strerror(r), sc_last_error());
    CHECK_OK(stream_drain(s, 60000, NULL));
  }
  int call = 0;
  for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
    for (int c = 0; c < C_COUNT; c++, call++) {
      size_t count = counts[ci];
      int root = (call + 1) % nranks;
      size_t in_n = c == C_REDUCE_SCATTER ? count * (size_t)nranks : count;
      size_t out_n = c == C_ALLGATHER ? count * (size_t)nranks : count;
      bufs_t b;
      CHECK_OK(bufs_alloc(&b, in_n, out_n));
      used[nused++] = b;
      for (size_t i = 0; i < in_n; i++) b.h_in[i] = in_val(rank, i, call);
      for (size_t i = 0; i < out_n; i++) b.h_out[i] = -12345.f;
      /* Before the call: a slow host function, then the input's upload. */
      atomic_int slept = 0;
      sleeper_t sl = {.ms = 150, .done = &slept};
      CHECK_OK(rt->launch_host(s, sleeper, &sl, sizeof(sl)));
      CHECK_OK(rt->memcpy_async(b.d_in, b.h_in, in_n * sizeof(float), s));
      double t0 = now_s();
      sc_result_t r = issue(c, &b, count, root, comm, s);
      double dt = now_s() - t0;
      if (r != SC_SUCCESS) {
        FAILF("%s count %zu: %s: %s", cname[c], count, sc_strerror(r), sc_last_error());
        return;
      }
      /* The call returned while its input did not exist yet. */
      if (atomic_load(&slept))
        FAILF("%s count %zu: the call returned after %.3f s, once the stream's earlier work "
              "had run",
              cname[c], count, dt);
      /* After the call: the output's download, then one host wait. */
      CHECK_OK(rt->memcpy_async(b.h_out, b.d_out, out_n * sizeof(float), s));
      CHECK_OK(stream_drain(s, 60000, NULL));
      int bad = 0;
      size_t checked = c == C_REDUCE && rank != root ? 0 : out_n;
      for (size_t i = 0; i < checked && bad < 3; i++) {
        float want = ref_val(c, i, count, root, call);
        if (b.h_out[i] != want) {
          FAILF("%s count %zu root %d: [%zu] = %g, want %g", cname[c], count, root, i,
                (double)b.h_out[i], (double)want);
          bad++;
        }
      }
    }
  }
  /* The call left queued at the end gets its buffers before those above go
   * (not at a freed buffer's address). */
  CHECK_OK(bufs_alloc(&tail.b, 1000, 1000));
  for (int i = 0; i < nwarm; i++) bufs_free(&warm[i]);
  for (int i = 0; i < nused; i++) bufs_free(&used[i]);

  /* Host buffers on a stream form: refused, nothing queued. */
  float h[4] = {1, 2, 3, 4};
  sc_result_t r = sc_allreduce_on_stream(h, h, 4, SC_FLOAT32, SC_SUM, comm, s);
  if (r != SC_ERR_INVALID_ARG || !strstr(sc_last_error(), "host memory"))
    FAILF("host buffers: %s: %s", sc_strerror(r), sc_last_error());
  float *d;
  CHECK_OK(rt->malloc_device((void **)&d, 64));
  r = sc_allgather_on_stream(d, h, 4, SC_FLOAT32, comm, s);
  if (r != SC_ERR_INVALID_ARG || !strstr(sc_last_error(), "recvbuf is host memory"))
    FAILF("host recvbuf: %s: %s", sc_strerror(r), sc_last_error());
  r = sc_gtopk_allreduce_on_stream(h, 4, SC_FLOAT32, 1, SC_SELECT_EXACT, NULL, comm, s);
  if (r != SC_ERR_INVALID_ARG) FAILF("host grad: %s: %s", sc_strerror(r), sc_last_error());
  /* Zero counts take no buffers and still keep the call order. */
  CHECK_OK(sc_allreduce_on_stream(NULL, NULL, 0, SC_FLOAT32, SC_SUM, comm, s));
  CHECK_OK(sc_broadcast_on_stream(NULL, NULL, 0, SC_FLOAT32, 0, comm, s));
  CHECK_OK(stream_drain(s, 60000, NULL));
  /* The communicator is still in order: a blocking call agrees. */
  int one = 1, sum = 0;
  CHECK_OK(sc_allreduce(&one, &sum, 1, SC_INT32, SC_SUM, comm));
  if (sum != nranks) FAILF("blocking allreduce after the stream calls: %d, want %d", sum, nranks);
  rt->free_device(d);
  /* One more call left queued behind a slow input: sc_comm_destroy (in main)
   * runs it before it frees anything; main checks the result afterwards. */
  for (size_t i = 0; i < 1000; i++) tail.b.h_in[i] = in_val(rank, i, call);
  static atomic_int slept_tail;
  sleeper_t sl = {.ms = 200, .done = &slept_tail};
  CHECK_OK(rt->launch_host(s, sleeper, &sl, sizeof(sl)));
  CHECK_OK(rt->memcpy_async(tail.b.d_in, tail.b.h_in, 1000 * sizeof(float), s));
  CHECK_OK(sc_allreduce_on_stream(tail.b.d_in, tail.b.d_out, 1000, SC_FLOAT32, SC_SUM, comm, s));
  CHECK_OK(rt->memcpy_async(tail.b.h_out, tail.b.d_out, 1000 * sizeof(float), s));
  tail.stream = s;
  tail.call = call;
}

static void check_tail(void) {
  if (!tail.stream) return;
  CHECK_OK(stream_drain(tail.stream, 60000, NULL));
  int bad = 0;
  for (size_t i = 0; i < 1000 && bad < 3; i++) {
    float want = ref_val(C_ALLREDUCE, i, 1000, 0, tail.call);
    if (tail.b.h_out[i] != want) {
      FAILF("the call left queued at destroy: [%zu] = %g, want %g", i, (double)tail.b.h_out[i],
            (double)want);
      bad++;
    }
  }
  bufs_free(&tail.b);
  rt->stream_destroy(tail.stream);
}

/* ---- chain ---- */

static void run_chain(sc_comm_t *comm) {
  enum { N = 4099, CALLS = 12 };
  /* A stream of ours and the legacy default stream (NULL): nothing in the
   * library may wait for the default stream while a call holds it. */
  void *s[2] = {NULL, NULL};
  CHECK_OK(rt->stream_create(&s[0]));
  float *h_x[2], *h_out[2], *d_x[2], *d_a[2], *d_b[2];
  double *ref[2], *x[2];
  for (int k = 0; k < 2; k++) {
    CHECK_OK(rt->malloc_pinned((void **)&h_x[k], N * sizeof(float)));
    CHECK_OK(rt->malloc_pinned((void **)&h_out[k], N * sizeof(float)));
    CHECK_OK(rt->malloc_device((void **)&d_x[k], N * sizeof(float)));
    CHECK_OK(rt->malloc_device((void **)&d_a[k], N * sizeof(float)));
    CHECK_OK(rt->malloc_device((void **)&d_b[k], N * sizeof(float)));
    ref[k] = calloc(N, sizeof(double));
    x[k] = calloc(N, sizeof(double));
    /* Each stream its own input: stream k's values are offset by 100 k. */
    for (size_t i = 0; i < N; i++) h_x[k][i] = in_val(rank, i, 0) + 100.f * (float)k;
    CHECK_OK(rt->memcpy_async(d_x[k], h_x[k], N * sizeof(float), s[k]));
    CHECK_OK(rt->memcpy_async(d_b[k], d_x[k], N * sizeof(float), s[k]));
  }
  /* The reference: b = x; a = allreduce(b); b = a + x; ... per stream, with
   * the sums over ranks of x known on the host. Values stay below 2^24. */
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < N; i++) {
      double sx = 0;
      for (int r = 0; r < nranks; r++) sx += in_val(r, i, 0) + 100.0 * k;
      x[k][i] = sx;  /* sum over ranks of x */
      ref[k][i] = 0; /* a before the first call */
    }
  int blocking_sum_ok = 1;
  for (int c = 0; c < CALLS; c++) {
    int k = c % 2; /* alternate the streams */
    /* a = allreduce(b) on the stream, then b = a + x by a stream kernel. */
    CHECK_OK(sc_allreduce_on_stream(d_b[k], d_a[k], N, SC_FLOAT32, SC_SUM, comm, s[k]));
    CHECK_OK(sc_dev_reduce(rt, d_b[k], d_a[k], d_x[k], N, SC_FLOAT32, SC_SUM, s[k]));
    /* allreduce over ranks of (a + x) = P a + sum x; a is the same on all ranks. */
    for (size_t i = 0; i < N; i++) ref[k][i] = c < 2 ? x[k][i] : nranks * ref[k][i] + x[k][i];
    if (c == 5) {
      /* A blocking host call among the stream calls: queued in order. */
      int v = rank + 1, got = 0;
      if (sc_allreduce(&v, &got, 1, SC_INT32, SC_SUM, comm) != SC_SUCCESS ||
          got != nranks * (nranks + 1) / 2)
        blocking_sum_ok = 0;
    }
  }
  if (!blocking_sum_ok) FAILF("the blocking call among the stream calls: %s", sc_last_error());
  for (int k = 0; k < 2; k++) {
    CHECK_OK(rt->memcpy_async(h_out[k], d_a[k], N * sizeof(float), s[k]));
    CHECK_OK(stream_drain(s[k], 60000, NULL));
    int bad = 0;
    for (size_t i = 0; i < N && bad < 3; i++)
      if ((double)h_out[k][i] != ref[k][i]) {
        FAILF("chain, stream %d: [%zu] = %.1f, want %.1f", k, i, (double)h_out[k][i], ref[k][i]);
        bad++;
      }
  }
  for (int k = 0; k < 2; k++) {
    rt->free_pinned(h_x[k]);
    rt->free_pinned(h_out[k]);
    rt->free_device(d_x[k]);
    rt->free_device(d_a[k]);
    rt->free_device(d_b[k]);
    free(ref[k]);
    free(x[k]);
    if (s[k]) rt->stream_destroy(s[k]);
  }
}

/* ---- abort ---- */

static sc_comm_t *abort_comm;

static void *abort_later(void *arg) {
  (void)arg;
  usleep(500 * 1000);
  sc_comm_abort(abort_comm);
  return NULL;
}

static void run_abort(sc_comm_t *comm) {
  void *s;
  float *d;
  CHECK_OK(rt->stream_create(&s));
  CHECK_OK(rt->malloc_device((void **)&d, 1000 * sizeof(float)));
  CHECK_OK(rt->memset_async(d, 0, 1000 * sizeof(float), s));
  /* Both forms once on every rank first: the calls below then allocate
   * nothing (a call that allocates may wait for its stream's earlier work,
   * docs/CUDA.md, and rank 1 will never let that work end). */
  CHECK_OK(sc_allreduce_on_stream(d, d, 1000, SC_FLOAT32, SC_SUM, comm, s));
  CHECK_OK(sc_broadcast_on_stream(d, d, 1000, SC_FLOAT32, 0, comm, s));
  CHECK_OK(stream_drain(s, 60000, NULL));
  if (rank != 0) {
    sleep(4); /* never joins again; leaves through abort */
    sc_comm_abort(comm);
    return;
  }
  /* The first blocks in the transport (rank 1 is away), the second queues. */
  CHECK_OK(sc_allreduce_on_stream(d, d, 1000, SC_FLOAT32, SC_SUM, comm, s));
  CHECK_OK(sc_broadcast_on_stream(d, d, 1000, SC_FLOAT32, 0, comm, s));
  double waited = 0;
  /* Still waiting a moment later: nothing released it. */
  void *ev;
  CHECK_OK(rt->event_create(&ev));
  CHECK_OK(rt->event_record(ev, s));
  usleep(200 * 1000);
  int done = 1;
  CHECK_OK(rt->event_query(ev, &done));
  if (done) FAILF("the stream went on before its call ran");
  abort_comm = comm;
  pthread_t t;
  pthread_create(&t, NULL, abort_later, NULL);
  sc_result_t r = stream_drain(s, 5000, &waited);
  pthread_join(t, NULL);
  if (r != SC_SUCCESS) FAILF("the stream was not released by the abort: %s", sc_last_error());
  sc_result_t async = SC_SUCCESS;
  sc_comm_get_async_error(comm, &async);
  if (async != SC_ERR_ABORTED) FAILF("async error after abort: %s", sc_strerror(async));
  r = sc_allreduce_on_stream(d, d, 1000, SC_FLOAT32, SC_SUM, comm, s);
  if (r != SC_ERR_ABORTED) FAILF("a stream call after abort: %s", sc_strerror(r));
  printf("rank 0: the stream was released after %.3f s (abort at 0.5 s)\n", waited);
  rt->event_destroy(ev);
  rt->free_device(d);
  rt->stream_destroy(s);
}

/* ---- death ---- */

static void run_death(sc_comm_t *comm) {
  enum { N = 1 << 16 };
  int victim = nranks - 1;
  void *s;
  float *d;
  CHECK_OK(rt->stream_create(&s));
  CHECK_OK(rt->malloc_device((void **)&d, N * sizeof(float)));
  CHECK_OK(rt->memset_async(d, 0, N * sizeof(float), s));
  CHECK_OK(sc_allreduce_on_stream(d, d, N, SC_FLOAT32, SC_SUM, comm, s));
  CHECK_OK(stream_drain(s, 60000, NULL));
  if (rank == victim) raise(SIGKILL);
  sc_result_t r = SC_SUCCESS;
  for (int i = 0; i < 20 && r == SC_SUCCESS; i++)
    r = sc_allreduce_on_stream(d, d, N, SC_FLOAT32, SC_SUM, comm, s);
  /* Calls queued before the failure are released by it, later ones refused. */
  double waited = 0;
  sc_result_t rd = stream_drain(s, 30000, &waited);
  if (rd != SC_SUCCESS)
    FAILF("the stream was not released after the peer died: %s", sc_last_error());
  sc_result_t async = SC_SUCCESS;
  sc_comm_get_async_error(comm, &async);
  if (async != SC_ERR_REMOTE)
    FAILF("async error %s, want SC_ERR_REMOTE (last call: %s)", sc_strerror(async), sc_strerror(r));
  double t1 = now_s();
  r = sc_allreduce_on_stream(d, d, N, SC_FLOAT32, SC_SUM, comm, s);
  if (r != SC_ERR_REMOTE || now_s() - t1 > 1.0)
    FAILF("a stream call after the failure: %s after %.2f s", sc_strerror(r), now_s() - t1);
  else
    printf("rank %d: stream released %.3f s after the calls, failed with: %s\n", rank, waited,
           sc_last_error());
  rt->free_device(d);
  rt->stream_destroy(s);
}

/* ---- gtopk ---- */

/* The stream form of gTop-k against the blocking form on host copies of the
 * same gradients (an independent path: host selection, host residual),
 * bit for bit, three steps with error feedback and one without. The stream
 * writes each step's gradient just before the call (after a sleeping host
 * function) and copies the result out just after; the host waits once. */
static void run_gtopk(sc_comm_t *comm) {
  const size_t n = 10007, k = 97;
  void *s;
  float *h_grad, *h_out, *d_grad, *ref;
  CHECK_OK(rt->stream_create(&s));
  CHECK_OK(rt->malloc_pinned((void **)&h_grad, n * sizeof(float)));
  CHECK_OK(rt->malloc_pinned((void **)&h_out, n * sizeof(float)));
  CHECK_OK(rt->malloc_device((void **)&d_grad, n * sizeof(float)));
  ref = malloc(n * sizeof(float));
  sc_ef_t *ef_dev = NULL, *ef_host = NULL;
  CHECK_OK(sc_ef_create(n, SC_FLOAT32, &ef_dev));
  CHECK_OK(sc_ef_create(n, SC_FLOAT32, &ef_host));
  for (int step = 0; step < 4 && ref; step++) {
    int with_ef = step < 3;
    for (size_t i = 0; i < n; i++) {
      /* Distinct magnitudes per rank and step, a few shared ones (ties). */
      double v = (double)((i * 7919 + (size_t)rank * 104729 + (size_t)step * 31) % 10007) - 5003;
      h_grad[i] = (float)(v / 64.0);
      ref[i] = h_grad[i];
    }
    atomic_int slept = 0;
    sleeper_t sl = {.ms = 20, .done = &slept};
    CHECK_OK(rt->launch_host(s, sleeper, &sl, sizeof(sl)));
    CHECK_OK(rt->memcpy_async(d_grad, h_grad, n * sizeof(float), s));
    CHECK_OK(sc_gtopk_allreduce_on_stream(d_grad, n, SC_FLOAT32, k, SC_SELECT_EXACT,
                                          with_ef ? ef_dev : NULL, comm, s));
    CHECK_OK(rt->memcpy_async(h_out, d_grad, n * sizeof(float), s));
    CHECK_OK(
        sc_gtopk_allreduce(ref, n, SC_FLOAT32, k, SC_SELECT_EXACT, with_ef ? ef_host : NULL, comm));
    CHECK_OK(stream_drain(s, 60000, NULL));
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
      if (memcmp(&h_out[i], &ref[i], sizeof(float)) != 0) {
        if (first == n) first = i;
        bad++;
      }
    if (bad)
      FAILF("gtopk step %d (ef %d): %zu of %zu entries differ from the blocking host call, "
            "first at %zu: %g vs %g",
            step, with_ef, bad, n, first, (double)h_out[first], (double)ref[first]);
  }
  /* A host residual with the stream form: refused at the call. */
  if (sc_gtopk_allreduce_on_stream(d_grad, n, SC_FLOAT32, k, SC_SELECT_EXACT, ef_host, comm, s) !=
      SC_ERR_INVALID_ARG)
    FAILF("gtopk stream form with a host-bound sc_ef_t was not refused");
  (void)sc_ef_destroy(ef_dev);
  (void)sc_ef_destroy(ef_host);
  free(ref);
  rt->free_device(d_grad);
  rt->free_pinned(h_grad);
  rt->free_pinned(h_out);
  rt->stream_destroy(s);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "order";
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
  if (!strcmp(mode, "order"))
    run_order(comm);
  else if (!strcmp(mode, "chain"))
    run_chain(comm);
  else if (!strcmp(mode, "abort"))
    run_abort(comm);
  else if (!strcmp(mode, "death"))
    run_death(comm);
  else if (!strcmp(mode, "gtopk"))
    run_gtopk(comm);
  else
    FAILF("unknown mode %s", mode);
  if (sc_comm_destroy(comm) != SC_SUCCESS) FAILF("destroy: %s", sc_last_error());
  check_tail();
  printf("rank %d of %d: %s: %d failures (%.2f s)\n", rank, nranks, mode, fails, now_s() - t0);
  return fails ? 1 : 0;
}
