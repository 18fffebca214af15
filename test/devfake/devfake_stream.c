/* SPDX-License-Identifier: BSD-3-Clause */
/* The stand-in's streams and events (test/devfake/devfake.h). Each stream
 * is a worker thread running a FIFO of ops in order, so work really runs
 * after the enqueueing call returns (SC_DEVFAKE_DELAY_US widens the gap):
 * a caller that reads a result before waiting for its event sees stale
 * bytes, as on a GPU. The NULL stream is one process-wide stream created on
 * first use. An event is a pair of counters: record bumps `recorded` and
 * enqueues a marker that raises `done` to its number when it runs; query
 * compares them (never recorded: done, as in CUDA). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test/devfake/devfake.h"

#define DF_STREAM_MAGIC 0x5354524du /* "STRM" */
#define DF_EVENT_MAGIC  0x45564e54u /* "EVNT" */
/* How often a stream polls a flag or another stream's event. */
#define DF_POLL_NS 20000

typedef struct df_event {
  uint32_t magic;
  atomic_uint_fast64_t recorded, done;
  atomic_int refs; /* the user's, plus one per queued op naming it */
} df_event_t;

typedef enum { OP_COPY, OP_SET, OP_MARK, OP_WAIT_EVENT, OP_WAIT_VALUE, OP_HOST } df_op_kind_t;

typedef struct df_op {
  struct df_op *next;
  df_op_kind_t kind;
  void *dst;
  const void *src;
  size_t bytes;
  int value;
  df_event_t *ev;
  uint64_t seq;
  volatile uint32_t *flag;
  sc_dev_host_fn_t fn;
  _Alignas(16) unsigned char args[SC_DEV_HOST_ARGS_MAX];
} df_op_t;

typedef struct df_stream {
  uint32_t magic;
  int dead; /* inherited through fork: no worker runs it */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work, idle;
  df_op_t *head, *tail, *spare;
  uint64_t enqueued, ran;
  int stop;
  atomic_int abort; /* a drain ran past its bound: drop the rest */
  int pins;         /* drains under way (g_streams_mu): destroy waits for them */
  struct df_stream *next_all;
} df_stream_t;

static pthread_mutex_t g_streams_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_unpinned = PTHREAD_COND_INITIALIZER;
static df_stream_t *g_streams;
static df_stream_t *_Atomic g_null;

static void nap(void) {
  struct timespec ts = {0, DF_POLL_NS};
  nanosleep(&ts, NULL);
}

static void event_unref(df_event_t *e) {
  if (atomic_fetch_sub(&e->refs, 1) == 1) {
    e->magic = 0;
    free(e);
  }
}

static void run_op(df_stream_t *s, df_op_t *op) {
  int drop = atomic_load(&s->abort);
  switch (op->kind) {
  case OP_COPY:
    if (!drop) memmove(op->dst, op->src, op->bytes);
    break;
  case OP_SET:
    if (!drop) memset(op->dst, op->value, op->bytes);
    break;
  case OP_MARK: {
    uint_fast64_t d = atomic_load(&op->ev->done);
    while (d < op->seq && !atomic_compare_exchange_weak(&op->ev->done, &d, op->seq)) {
    }
    event_unref(op->ev);
    break;
  }
  case OP_WAIT_EVENT:
    while (atomic_load(&op->ev->done) < op->seq && !atomic_load(&s->abort)) nap();
    event_unref(op->ev);
    break;
  case OP_WAIT_VALUE:
    /* Acquire: what the host wrote before raising the flag is seen after. */
    while ((int32_t)(__atomic_load_n(op->flag, __ATOMIC_ACQUIRE) - (uint32_t)op->value) < 0 &&
           !atomic_load(&s->abort))
      nap();
    break;
  case OP_HOST:
    if (!drop) op->fn(op->args);
    break;
  }
}

static void *worker(void *arg) {
  df_stream_t *s = arg;
  long delay = df_settings()->delay_us;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->work, &s->mu);
    df_op_t *op = s->head;
    if (!op) break;
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    if (delay) {
      struct timespec ts = {delay / 1000000, (delay % 1000000) * 1000};
      nanosleep(&ts, NULL);
    }
    run_op(s, op);
    pthread_mutex_lock(&s->mu);
    op->next = s->spare;
    s->spare = op;
    s->ran++;
    pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static sc_result_t stream_new(df_stream_t **out) {
  df_stream_t *s = calloc(1, sizeof *s);
  if (!s) return DF_ERR(SC_ERR_NOMEM, "stream_create");
  s->magic = DF_STREAM_MAGIC;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->idle, NULL);
  int e = pthread_create(&s->thread, NULL, worker, s);
  if (e != 0) {
    free(s);
    return DF_ERR(SC_ERR_SYSTEM, "stream_create: pthread_create: %s", strerror(e));
  }
  s->next_all = g_streams;
  g_streams = s;
  *out = s;
  return SC_SUCCESS;
}

sc_result_t df_stream_create(void **stream) {
  df_settings();
  df_stream_t *s = NULL;
  pthread_mutex_lock(&g_streams_mu);
  sc_result_t r = stream_new(&s);
  pthread_mutex_unlock(&g_streams_mu);
  *stream = s;
  return r;
}

static sc_result_t get_stream(void *stream, df_stream_t **out, const char *what) {
  if (!stream) {
    /* Without the list's lock once it exists. */
    df_stream_t *n = atomic_load(&g_null);
    if (n) {
      *out = n;
      return SC_SUCCESS;
    }
    df_settings();
    sc_result_t r = SC_SUCCESS;
    pthread_mutex_lock(&g_streams_mu);
    n = atomic_load(&g_null);
    if (!n && (r = stream_new(&n)) == SC_SUCCESS) atomic_store(&g_null, n);
    *out = n;
    pthread_mutex_unlock(&g_streams_mu);
    return r;
  }
  df_stream_t *s = stream;
  if (s->magic != DF_STREAM_MAGIC)
    return DF_ERR(SC_ERR_INVALID_ARG, "%s: %p is not a stream", what, stream);
  if (s->dead)
    return DF_ERR(SC_ERR_INVALID_ARG, "%s: stream %p was created before fork", what, stream);
  *out = s;
  return SC_SUCCESS;
}

static sc_result_t enqueue(void *stream, const df_op_t *tmpl, const char *what) {
  df_stream_t *s = NULL;
  SC_CHECK(get_stream(stream, &s, what));
  pthread_mutex_lock(&s->mu);
  df_op_t *op = s->spare;
  if (op)
    s->spare = op->next;
  else if (!(op = malloc(sizeof *op))) {
    pthread_mutex_unlock(&s->mu);
    return DF_ERR(SC_ERR_NOMEM, "%s: stream op", what);
  }
  *op = *tmpl;
  op->next = NULL;
  if (s->tail)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  s->enqueued++;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->mu);
  return SC_SUCCESS;
}

/* Waits until s has run its first `target` ops, at most until deadline. */
static int drain_to(df_stream_t *s, uint64_t target, const struct timespec *deadline) {
  int ok = 1;
  pthread_mutex_lock(&s->mu);
  while (s->ran < target && ok)
    if (pthread_cond_timedwait(&s->idle, &s->mu, deadline) == ETIMEDOUT) ok = s->ran >= target;
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static void deadline_in(long ms, struct timespec *ts) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

/* Without the list's lock while it waits (only pins on the streams it
 * waits for): another thread may create, use or destroy other streams
 * meanwhile, as CUDA lets it. */
sc_result_t df_sync_all(const char *what) {
  struct timespec dl;
  deadline_in(df_settings()->drain_ms, &dl);
  pthread_mutex_lock(&g_streams_mu);
  size_t n = 0;
  for (df_stream_t *s = g_streams; s; s = s->next_all) n += !s->dead;
  df_stream_t **ss = calloc(n ? n : 1, sizeof(*ss));
  uint64_t *target = calloc(n ? n : 1, sizeof(*target));
  if (!ss || !target) {
    pthread_mutex_unlock(&g_streams_mu);
    free(ss);
    free(target);
    return DF_ERR(SC_ERR_NOMEM, "%s: the list of streams to wait for", what);
  }
  size_t k = 0;
  for (df_stream_t *s = g_streams; s; s = s->next_all) {
    if (s->dead) continue;
    s->pins++;
    pthread_mutex_lock(&s->mu);
    target[k] = s->enqueued;
    pthread_mutex_unlock(&s->mu);
    ss[k++] = s;
  }
  pthread_mutex_unlock(&g_streams_mu);
  int ok = 1;
  for (size_t i = 0; i < k && ok; i++) ok = drain_to(ss[i], target[i], &dl);
  pthread_mutex_lock(&g_streams_mu);
  for (size_t i = 0; i < k; i++) ss[i]->pins--;
  pthread_cond_broadcast(&g_unpinned);
  pthread_mutex_unlock(&g_streams_mu);
  free(ss);
  free(target);
  if (!ok)
    return DF_ERR(SC_ERR_TIMEOUT,
                  "%s: streams still busy after %ld ms (a stream waits on a flag or an event "
                  "that nobody sets?); nothing was freed",
                  what, df_settings()->drain_ms);
  return SC_SUCCESS;
}

/* Stops s's worker after its queue (dropping what is left past the drain
 * bound) and frees s; s is already unlinked. Returns 0 when ops were dropped. */
static int stream_stop(df_stream_t *s, long bound_ms) {
  struct timespec dl;
  deadline_in(bound_ms, &dl);
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->mu);
  int ok = pthread_timedjoin_np(s->thread, NULL, &dl) == 0;
  if (!ok) {
    atomic_store(&s->abort, 1);
    pthread_join(s->thread, NULL);
  }
  while (s->spare) {
    df_op_t *op = s->spare;
    s->spare = op->next;
    free(op);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  s->magic = 0;
  free(s);
  return ok;
}

static void unlink_stream(df_stream_t *s) {
  for (df_stream_t **p = &g_streams; *p; p = &(*p)->next_all)
    if (*p == s) {
      *p = s->next_all;
      return;
    }
}

sc_result_t df_stream_destroy(void *stream) {
  df_stream_t *s = stream;
  if (!s || s->magic != DF_STREAM_MAGIC)
    return DF_ERR(SC_ERR_INVALID_ARG, "stream_destroy: %p is not a stream", stream);
  pthread_mutex_lock(&g_streams_mu);
  unlink_stream(s);
  while (s->pins > 0) pthread_cond_wait(&g_unpinned, &g_streams_mu);
  pthread_mutex_unlock(&g_streams_mu);
  if (s->dead) {
    s->magic = 0; /* the parent's: its worker and locks are not ours */
    return SC_SUCCESS;
  }
  long bound = df_settings()->drain_ms;
  if (!stream_stop(s, bound))
    return DF_ERR(SC_ERR_TIMEOUT,
                  "stream_destroy: ops still waiting after %ld ms were dropped (a flag or an "
                  "event that nobody sets?)",
                  bound);
  return SC_SUCCESS;
}

void df_streams_forked(void) {
  pthread_mutex_init(&g_streams_mu, NULL);
  pthread_cond_init(&g_unpinned, NULL);
  for (df_stream_t *s = g_streams; s; s = s->next_all) s->dead = 1;
  g_streams = NULL;
  atomic_store(&g_null, NULL);
}

void df_streams_shutdown(void) {
  pthread_mutex_lock(&g_streams_mu);
  df_stream_t *all = g_streams;
  g_streams = NULL;
  atomic_store(&g_null, NULL);
  pthread_mutex_unlock(&g_streams_mu);
  while (all) {
    df_stream_t *s = all;
    all = s->next_all;
    if (!stream_stop(s, 2000))
      fprintf(stderr, "devfake: a stream still waiting at exit was stopped, ops dropped\n");
  }
}

/* ---- ops ---- */

sc_result_t df_memcpy_async(void *dst, const void *src, size_t bytes, void *stream) {
  df_op_t op = {.kind = OP_COPY, .bytes = bytes};
  int kd, ks;
  if (bytes == 0) return SC_SUCCESS;
  SC_CHECK(df_translate(dst, bytes, &op.dst, &kd, "memcpy_async dst"));
  void *s;
  SC_CHECK(df_translate(src, bytes, &s, &ks, "memcpy_async src"));
  op.src = s;
  return enqueue(stream, &op, "memcpy_async");
}

sc_result_t df_memset_async(void *dst, int value, size_t bytes, void *stream) {
  df_op_t op = {.kind = OP_SET, .bytes = bytes, .value = value};
  int kind;
  if (bytes == 0) return SC_SUCCESS;
  SC_CHECK(df_translate(dst, bytes, &op.dst, &kind, "memset_async"));
  if (kind == DF_HOST)
    return DF_ERR(SC_ERR_INVALID_ARG,
                  "memset_async: %p is pageable host memory (the device cannot write it)", dst);
  return enqueue(stream, &op, "memset_async");
}

sc_result_t df_launch_host(void *stream, sc_dev_host_fn_t fn, const void *args, size_t args_len) {
  if (!fn || args_len > SC_DEV_HOST_ARGS_MAX || (args_len && !args))
    return DF_ERR(SC_ERR_INVALID_ARG, "launch_host: fn %p, %zu bytes of args (at most %d)",
                  (void *)(uintptr_t)fn, args_len, SC_DEV_HOST_ARGS_MAX);
  df_op_t op = {.kind = OP_HOST, .fn = fn};
  if (args_len) memcpy(op.args, args, args_len);
  return enqueue(stream, &op, "launch_host");
}

sc_result_t df_stream_wait_value(void *stream, volatile uint32_t *flag, uint32_t value) {
  void *v;
  int kind;
  SC_CHECK(df_translate((const void *)flag, sizeof *flag, &v, &kind, "stream_wait_value"));
  if (kind != DF_PINNED)
    return DF_ERR(SC_ERR_INVALID_ARG, "stream_wait_value: flag %p is not from malloc_pinned",
                  (const void *)flag);
  df_op_t op = {.kind = OP_WAIT_VALUE, .flag = flag, .value = (int)value};
  return enqueue(stream, &op, "stream_wait_value");
}

static sc_result_t get_event(void *event, df_event_t **out, const char *what) {
  df_event_t *e = event;
  if (!e || e->magic != DF_EVENT_MAGIC)
    return DF_ERR(SC_ERR_INVALID_ARG, "%s: %p is not an event", what, event);
  *out = e;
  return SC_SUCCESS;
}

sc_result_t df_event_create(void **event) {
  df_event_t *e = calloc(1, sizeof *e);
  *event = e;
  if (!e) return DF_ERR(SC_ERR_NOMEM, "event_create");
  e->magic = DF_EVENT_MAGIC;
  atomic_init(&e->recorded, 0);
  atomic_init(&e->done, 0);
  atomic_init(&e->refs, 1);
  return SC_SUCCESS;
}

sc_result_t df_event_destroy(void *event) {
  df_event_t *e = NULL;
  SC_CHECK(get_event(event, &e, "event_destroy"));
  /* Like CUDA, ops still queued that name the event keep it alive. */
  event_unref(e);
  return SC_SUCCESS;
}

sc_result_t df_event_record(void *event, void *stream) {
  df_event_t *e = NULL;
  df_stream_t *s = NULL;
  SC_CHECK(get_event(event, &e, "event_record"));
  /* A record that cannot be queued must not leave the event pending. */
  SC_CHECK(get_stream(stream, &s, "event_record"));
  atomic_fetch_add(&e->refs, 1);
  df_op_t op = {.kind = OP_MARK, .ev = e, .seq = atomic_fetch_add(&e->recorded, 1) + 1};
  sc_result_t r = enqueue(stream, &op, "event_record");
  if (r != SC_SUCCESS) event_unref(e);
  return r;
}

sc_result_t df_event_query(void *event, int *done) {
  df_event_t *e = NULL;
  SC_CHECK(get_event(event, &e, "event_query"));
  *done = atomic_load(&e->done) >= atomic_load(&e->recorded);
  return SC_SUCCESS;
}

sc_result_t df_stream_wait_event(void *stream, void *event) {
  df_event_t *e = NULL;
  SC_CHECK(get_event(event, &e, "stream_wait_event"));
  uint64_t seq = atomic_load(&e->recorded);
  if (seq == 0) return SC_SUCCESS; /* never recorded: nothing to wait for */
  atomic_fetch_add(&e->refs, 1);
  df_op_t op = {.kind = OP_WAIT_EVENT, .ev = e, .seq = seq};
  sc_result_t r = enqueue(stream, &op, "stream_wait_event");
  if (r != SC_SUCCESS) event_unref(e);
  return r;
}
