/* SPDX-License-Identifier: BSD-3-Clause */
/* The stream-ordered forms' machinery. A call (lib/core/coll.c's dense
 * collectives, lib/sparse/gtopk_stream.c's gTop-k), once its arguments have
 * passed the check its blocking form uses too, records an event on the
 * caller's stream, queues the operation with a ticket, and enqueues on the
 * stream a wait until the communicator's pinned flag reaches that ticket; it
 * returns at once. When
 * the operation's turn comes, the progress thread waits for the event (the
 * stream's earlier work, which makes the input), runs the operation, and
 * writes the ticket into the flag, which lets the stream go on. Why a flag
 * and not a host function on the stream: docs/CUDA.md.
 *
 * Once warm a call allocates nothing: requests and their two events come
 * from a per-communicator pool of slots that grows rarely (doubling, up to
 * SC_STREAM_SLOTS_MAX). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/devrt.h"
#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/core/exec_device.h"
#include "lib/core/stream.h"

typedef struct sc_stream_state sc_stream_state_t;

typedef struct sc_stream_slot {
  sc_request_t req; /* req.stream points back here */
  sc_stream_state_t *ss;
  void *ready;  /* recorded on the caller's stream before its wait: the input is there */
  void *passed; /* recorded after the wait: the stream no longer reads the flag */
  int passed_recorded;
  /* The caller (until its stream's wait is enqueued) and the progress thread
   * (until the release): the last to let go returns the slot to the pool, so
   * that the caller may still use the events after the operation ran. */
  atomic_int holders;
  /* A v collective's count arrays, copied at the call (req.op.v points here);
   * grown, never shrunk, so that a warm slot allocates nothing. */
  size_t *v;
  size_t vcap;
} sc_stream_slot_t;

struct sc_stream_state {
  const sc_devrt_t *rt;
  volatile uint32_t *flag; /* pinned: the last released ticket */
  pthread_mutex_t lock;    /* the pool */
  sc_stream_slot_t **all;  /* every slot made, [SC_STREAM_SLOTS_MAX] */
  int nall;
  sc_stream_slot_t **ring; /* free slots, oldest first, [SC_STREAM_SLOTS_MAX] */
  size_t head, nfree;
};

/* ---- the flag ---- */

/* Several threads may release (the progress thread, abort, destroy); the
 * flag only moves forward. */
static void release_to(sc_stream_state_t *ss, uint32_t ticket) {
  uint32_t cur = __atomic_load_n(ss->flag, __ATOMIC_ACQUIRE);
  for (;;) {
    uint32_t want = sc_stream_flag_after(cur, ticket);
    if (want == cur) return;
    if (__atomic_compare_exchange_n(ss->flag, &cur, want, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
      return;
  }
}

void sc_stream_release_all(sc_comm_t *comm) {
  pthread_mutex_lock(&comm->lock);
  sc_stream_state_t *ss = comm->stream;
  uint32_t last = comm->stream_tickets;
  pthread_mutex_unlock(&comm->lock);
  if (ss) release_to(ss, last);
}

/* ---- the pool ---- */

static void state_destroy(sc_stream_state_t *ss) {
  for (int i = 0; i < ss->nall; i++) {
    sc_stream_slot_t *s = ss->all[i];
    if (s->ready) ss->rt->event_destroy(s->ready);
    if (s->passed) ss->rt->event_destroy(s->passed);
    free(s->v);
    free(s);
  }
  if (ss->flag) ss->rt->free_pinned((void *)ss->flag);
  pthread_mutex_destroy(&ss->lock);
  free(ss->all);
  free(ss->ring);
  free(ss);
}

/* The communicator's stream state, made by its first stream call. */
static sc_result_t state_get(const char *fn, sc_comm_t *comm, const sc_devrt_t *rt,
                             sc_stream_state_t **out) {
  pthread_mutex_lock(&comm->lock);
  sc_result_t r = SC_SUCCESS;
  if (!comm->stream) {
    sc_stream_state_t *ss = calloc(1, sizeof(*ss));
    if (!ss) {
      pthread_mutex_unlock(&comm->lock);
      return SC_ERR(SC_ERR_NOMEM, "%s: stream state", fn);
    }
    ss->rt = rt;
    pthread_mutex_init(&ss->lock, NULL);
    ss->all = calloc(SC_STREAM_SLOTS_MAX, sizeof(*ss->all));
    ss->ring = calloc(SC_STREAM_SLOTS_MAX, sizeof(*ss->ring));
    if (!ss->all || !ss->ring)
      r = SC_ERR(SC_ERR_NOMEM, "%s: stream slot tables", fn);
    else
      r = rt->malloc_pinned((void **)&ss->flag, sizeof(uint32_t));
    if (r != SC_SUCCESS) {
      pthread_mutex_unlock(&comm->lock);
      state_destroy(ss);
      return r;
    }
    *ss->flag = comm->stream_tickets;
    comm->stream = ss;
  }
  *out = comm->stream;
  pthread_mutex_unlock(&comm->lock);
  return r;
}

static sc_result_t slot_new(const char *fn, sc_stream_state_t *ss) {
  sc_stream_slot_t *s = calloc(1, sizeof(*s));
  if (!s) return SC_ERR(SC_ERR_NOMEM, "%s: stream slot", fn);
  sc_result_t r = ss->rt->event_create(&s->ready);
  if (r == SC_SUCCESS) r = ss->rt->event_create(&s->passed);
  if (r != SC_SUCCESS) {
    if (s->ready) ss->rt->event_destroy(s->ready);
    free(s);
    return r;
  }
  s->ss = ss;
  ss->all[ss->nall++] = s;
  ss->ring[(ss->head + ss->nfree++) % SC_STREAM_SLOTS_MAX] = s;
  return SC_SUCCESS;
}

/* A free slot whose stream has passed its last wait, found from the oldest;
 * caller holds ss->lock. 1: *out taken out of the ring. */
static sc_result_t slot_find(sc_stream_state_t *ss, sc_stream_slot_t **out, int *found) {
  *found = 0;
  for (size_t i = 0; i < ss->nfree; i++) {
    size_t at = (ss->head + i) % SC_STREAM_SLOTS_MAX;
    sc_stream_slot_t *s = ss->ring[at];
    int done = 1;
    if (s->passed_recorded) SC_CHECK(ss->rt->event_query(s->passed, &done));
    if (!done) continue;
    /* The head takes its place: the ring stays oldest first but for it. */
    ss->ring[at] = ss->ring[ss->head];
    ss->head = (ss->head + 1) % SC_STREAM_SLOTS_MAX;
    ss->nfree--;
    *out = s;
    *found = 1;
    return SC_SUCCESS;
  }
  return SC_SUCCESS;
}

/* A slot for a new call: a free one, else the pool doubles (rarely: its size
 * follows the most calls ever in flight), else, at SC_STREAM_SLOTS_MAX, the
 * call waits for one, bounded by SC_TIMEOUT_MS. */
static sc_result_t slot_take(const char *fn, sc_comm_t *comm, sc_stream_state_t *ss,
                             sc_stream_slot_t **out) {
  int64_t deadline = sc_now_ms() + comm->cfg.timeout_ms;
  for (;;) {
    pthread_mutex_lock(&ss->lock);
    int found = 0;
    sc_result_t r = slot_find(ss, out, &found);
    if (r == SC_SUCCESS && !found && ss->nall < SC_STREAM_SLOTS_MAX) {
      int grow = ss->nall ? ss->nall : SC_STREAM_SLOTS_FIRST;
      if (grow > SC_STREAM_SLOTS_MAX - ss->nall) grow = SC_STREAM_SLOTS_MAX - ss->nall;
      for (int i = 0; i < grow && r == SC_SUCCESS; i++) r = slot_new(fn, ss);
      SC_INFO(SC_SUBSYS_COLL, "rank %d: %s: %d stream slots", comm->rank, fn, ss->nall);
      if (r == SC_SUCCESS) r = slot_find(ss, out, &found);
    }
    pthread_mutex_unlock(&ss->lock);
    if (r != SC_SUCCESS || found) return r;
    SC_CHECK(sc_comm_check_usable(comm));
    if (sc_now_ms() >= deadline)
      return SC_ERR(SC_ERR_TIMEOUT,
                    "rank %d: %s: %d stream calls in flight on this communicator and none "
                    "finished within SC_TIMEOUT_MS=%d ms",
                    comm->rank, fn, SC_STREAM_SLOTS_MAX, comm->cfg.timeout_ms);
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

static void slot_drop(sc_stream_slot_t *s) {
  if (atomic_fetch_sub(&s->holders, 1) != 1) return;
  sc_stream_state_t *ss = s->ss;
  pthread_mutex_lock(&ss->lock);
  ss->ring[(ss->head + ss->nfree++) % SC_STREAM_SLOTS_MAX] = s;
  pthread_mutex_unlock(&ss->lock);
}

void sc_stream_state_free(sc_comm_t *comm) {
  sc_stream_state_t *ss = comm->stream;
  if (!ss) return;
  comm->stream = NULL;
  release_to(ss, comm->stream_tickets);
  /* A stream may not have reached its wait yet (work before it still runs):
   * the flag must outlive that read. */
  int64_t deadline = sc_now_ms() + comm->cfg.timeout_ms;
  for (int i = 0; i < ss->nall; i++) {
    sc_stream_slot_t *s = ss->all[i];
    if (!s->passed_recorded) continue;
    int left = sc_ms_until(deadline);
    if (sc_dev_event_wait(ss->rt, s->passed, left > 0 ? left : 1, "a stream's pass of its wait") !=
        SC_SUCCESS) {
      SC_WARN(SC_SUBSYS_COLL,
              "rank %d: a stream has not passed its wait on this communicator within "
              "SC_TIMEOUT_MS=%d ms; its flag and events are left allocated (%s)",
              comm->rank, comm->cfg.timeout_ms, sc_last_error());
      return;
    }
  }
  state_destroy(ss);
}

/* ---- running a stream form's operation (progress thread) ---- */

/* The stream's work before the call, polled with the communicator's deadline;
 * an abort or another failure ends the wait at once. */
static sc_result_t wait_ready(sc_comm_t *comm, sc_stream_slot_t *s) {
  const sc_op_t *op = &s->req.op;
  int64_t deadline = sc_now_ms() + comm->cfg.timeout_ms;
  for (unsigned i = 0;; i++) {
    int done = 0;
    SC_CHECK(s->ss->rt->event_query(s->ready, &done));
    if (done) return SC_SUCCESS;
    SC_CHECK(sc_op_check_runnable(comm, op));
    if (sc_now_ms() >= deadline)
      return SC_ERR(SC_ERR_TIMEOUT,
                    "rank %d: %s #%llu (count %zu, %s) on a stream: the work enqueued on the "
                    "stream before it did not finish within SC_TIMEOUT_MS=%d ms",
                    comm->rank, sc_coll_name(op->coll), (unsigned long long)op->seq, op->count,
                    sc_dtype_name(op->dtype), comm->cfg.timeout_ms);
    /* Yield first (the input is usually almost there), then sleep 1, 2, 4 ...
     * up to 50 us: the collective starts at most ~50 us late after a long
     * compute, and a core shared with the ranks' other threads is not burnt. */
    if (i < 64) {
      sched_yield();
    } else {
      long us = i < 70 ? 1L << (i - 64) : 50;
      struct timespec ts = {0, us * 1000};
      nanosleep(&ts, NULL);
    }
  }
}

void sc_stream_run(sc_comm_t *comm, sc_request_t *req) {
  sc_stream_slot_t *s = req->stream;
  const sc_op_t *op = &req->op;
  sc_result_t r = sc_op_check_runnable(comm, op);
  if (r == SC_SUCCESS) {
    r = wait_ready(comm, s);
    /* Its device work is done when it returns. */
    if (r == SC_SUCCESS) r = op->job ? sc_op_run_job(comm, op) : sc_op_run(comm, op);
    /* No one waits for this request: the failure is the communicator's. */
    if (r != SC_SUCCESS && r != SC_ERR_ABORTED) sc_comm_fail(comm, r);
  }
  if (r != SC_SUCCESS)
    SC_INFO(SC_SUBSYS_COLL, "rank %d: stream call %s #%llu failed; its stream is released: %s",
            comm->rank, sc_coll_name(op->coll), (unsigned long long)op->seq, sc_last_error());
  /* Released whatever happened, so that the stream never hangs; after a
   * failure the output is undefined and sc_comm_get_async_error says so. */
  release_to(s->ss, req->ticket);
  sc_dev_stream_wait_end();
  slot_drop(s);
}

/* ---- the calls ---- */

sc_result_t sc_stream_submit(const char *fn, sc_comm_t *comm, const sc_op_t *op,
                             sc_stream_t stream) {
  const sc_devrt_t *rt = sc_devrt();
  if (!rt)
    return SC_ERR(SC_ERR_UNSUPPORTED, "%s: no device runtime could be loaded for the stream", fn);
  sc_stream_state_t *ss = NULL;
  SC_CHECK(state_get(fn, comm, rt, &ss));
  /* Before the stream waits: a kernel's first launch may wait for it
   * (kernels/cuda/preload.c). */
  if (rt->preload_kernels) SC_CHECK(rt->preload_kernels());
  /* Before the stream waits: the progress thread must not allocate while it
   * does (lib/core/exec_device_mem.c). */
  SC_CHECK(sc_exec_device_reserve(comm, op));
  sc_stream_slot_t *s = NULL;
  SC_CHECK(slot_take(fn, comm, ss, &s));
  memset(&s->req, 0, sizeof(s->req));
  s->req.op = *op;
  const size_t nv = sc_op_v_len(op, comm->nranks);
  if (nv > s->vcap) {
    size_t *g = realloc(s->v, nv * sizeof(size_t));
    if (!g) {
      atomic_store(&s->holders, 1);
      slot_drop(s);
      return SC_ERR(SC_ERR_NOMEM, "%s: the count arrays of %d ranks", fn, comm->nranks);
    }
    s->v = g;
    s->vcap = nv;
  }
  if (nv) sc_op_v_own(&s->req.op, comm->nranks, s->v);
  s->req.stream = s;
  atomic_store(&s->holders, 2);
  sc_result_t r = rt->event_record(s->ready, stream);
  /* From here until sc_stream_run raises the flag nothing may unmap (an
   * unmap may wait for this stream): kernels/devrt_ipc.c. */
  sc_dev_stream_wait_begin();
  if (r == SC_SUCCESS) r = sc_op_enqueue(comm, &s->req);
  if (r != SC_SUCCESS) {
    sc_dev_stream_wait_end();
    atomic_store(&s->holders, 1);
    slot_drop(s);
    return r;
  }
  uint32_t ticket = s->req.ticket; /* ours to read: this thread still holds the slot */
  r = rt->stream_wait_value(stream, ss->flag, ticket);
  sc_result_t rp = rt->event_record(s->passed, stream);
  s->passed_recorded = rp == SC_SUCCESS;
  if (r == SC_SUCCESS) r = rp;
  slot_drop(s);
  if (r != SC_SUCCESS) {
    /* The operation is queued but the stream does not wait for it: nothing it
     * produces can be trusted, so the communicator fails. */
    sc_comm_record_error(comm, r);
    return r;
  }
  SC_TRACE(SC_SUBSYS_COLL, "rank %d: %s #%llu queued, stream %p waits for ticket %u", comm->rank,
           fn, (unsigned long long)s->req.op.seq, stream, (unsigned)ticket);
  return SC_SUCCESS;
}
