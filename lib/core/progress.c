/* SPDX-License-Identifier: BSD-3-Clause */
/* The progress thread: one per communicator, executing queued operations in
 * order. It alone drives the transport. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/log.h"
#include "lib/control/watch.h"
#include "lib/core/a2av_mates.h"
#include "lib/core/board.h"
#include "lib/core/comm.h"
#include "lib/core/dev_allreduce.h"
#include "lib/core/fingerprint.h"
#include "lib/core/stream.h"

static void sc_comm_fail_as(sc_comm_t *comm, sc_result_t res, int shared) {
  if (res == SC_SUCCESS) return;
  pthread_mutex_lock(&comm->lock);
  if (atomic_load(&comm->error) == SC_SUCCESS) {
    sc_error_get_detail(comm->errmsg, sizeof(comm->errmsg));
    comm->error_shared = shared;
    atomic_store(&comm->error, res);
    SC_WARN(SC_SUBSYS_COLL, "communicator of %d ranks failed: %s", comm->nranks, comm->errmsg);
  }
  pthread_mutex_unlock(&comm->lock);
  sc_watch_poke(comm->watch); /* the other ranks learn of it through rank 0 */
}

void sc_comm_record_error(sc_comm_t *comm, sc_result_t res) {
  if (res == SC_ERR_INVALID_ARG) return; /* the caller was told; the others are not involved */
  sc_comm_fail_as(comm, res, 0);
}

void sc_comm_record_verdict(sc_comm_t *comm, sc_result_t res) {
  sc_comm_fail_as(comm, res, 1);
}

void sc_comm_fail(sc_comm_t *comm, sc_result_t res) {
  sc_comm_fail_as(comm, res, 0);
}

/* Publishes the call this thread executes (fp all zero: none) for the
 * liveness watch's heartbeats: comm->now's sequence lock, whose only writer
 * is the thread that owns the transport. */
static void sc_op_now_set(sc_comm_t *comm, uint64_t seq, const uint8_t fp[SC_TP_FP_LEN]) {
  sc_op_now_t *n = &comm->now;
  uint64_t w[SC_TP_FP_LEN / 8];
  memcpy(w, fp, sizeof(w));
  uint64_t g = atomic_load_explicit(&n->gen, memory_order_relaxed);
  atomic_store_explicit(&n->gen, g + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&n->seq, seq, memory_order_relaxed);
  for (size_t i = 0; i < SC_TP_FP_LEN / 8; i++)
    atomic_store_explicit(&n->fp[i], w[i], memory_order_relaxed);
  atomic_store_explicit(&n->gen, g + 2, memory_order_release);
}

/* Prefix the detail of an error with the operation it interrupted (and the
 * stage: the fingerprint exchange or the operation itself). */
static void sc_op_prefix_error(sc_comm_t *comm, const sc_op_t *op, const char *stage) {
  char detail[SC_ERRMSG_MAX];
  sc_error_get_detail(detail, sizeof(detail));
  char full[SC_ERRMSG_MAX];
  snprintf(full, sizeof(full), "rank %d of %d (%s), %s #%llu (count %zu, %s, %s, root %d)%s: %s",
           comm->rank, comm->nranks, sc_comm_host(comm, comm->rank), sc_coll_name(op->coll),
           (unsigned long long)op->seq, op->count, sc_dtype_name(op->dtype), sc_redop_name(op->op),
           op->root, stage, detail);
  sc_error_set_detail(full);
}

/* *verdict: the error is SC_CHECK_MISMATCH's, which every rank reaches. */
static sc_result_t sc_op_execute(sc_comm_t *comm, const sc_op_t *op, const uint8_t *fp,
                                 int *verdict) {
  if (comm->cfg.check_mismatch) {
    sc_result_t r = sc_fp_check(comm, op);
    /* A mismatch's text already names both calls. */
    if (r != SC_SUCCESS && r != SC_ERR_ABORTED && r != SC_ERR_MISMATCH)
      sc_op_prefix_error(comm, op, ", fingerprint exchange (SC_CHECK_MISMATCH)");
    *verdict = r == SC_ERR_MISMATCH;
    if (r != SC_SUCCESS) return r;
    /* Only the pair's two ranks see its counts differ: not a verdict. */
    r = sc_fp_check_pairs(comm, op);
    if (r != SC_SUCCESS && r != SC_ERR_ABORTED && r != SC_ERR_MISMATCH)
      sc_op_prefix_error(comm, op, ", count exchange (SC_CHECK_MISMATCH)");
    if (r != SC_SUCCESS) return r;
  } else if (op->coll == SC_COLL_ALLTOALLV && sc_tune_a2av_sparse(comm)) {
    /* Its empty blocks send nothing: no receive sees counts that disagree. */
    sc_result_t r = sc_fp_check_counts(comm, op);
    if (r != SC_SUCCESS && r != SC_ERR_ABORTED && r != SC_ERR_MISMATCH)
      sc_op_prefix_error(comm, op, ", count check (sparse all-to-allv)");
    *verdict = r == SC_ERR_MISMATCH;
    if (r != SC_SUCCESS) return r;
  }
  if (sc_devar_takes(comm, op)) {
    int ran = 0;
    sc_result_t r = sc_devar_run(comm, op, &ran);
    if (r != SC_SUCCESS && r != SC_ERR_ABORTED && r != SC_ERR_MISMATCH)
      sc_op_prefix_error(comm, op, "");
    if (ran || r != SC_SUCCESS) return r;
  }
  size_t board_len = sc_board_takes(comm, op);
  if (board_len != (size_t)-1) {
    sc_result_t r = sc_board_run(comm, op, board_len);
    /* A mismatch's text names both calls already. */
    if (r != SC_SUCCESS && r != SC_ERR_ABORTED && r != SC_ERR_MISMATCH)
      sc_op_prefix_error(comm, op, "");
    return r;
  }
  sc_sched_t *s = &comm->ex.sched;
  sc_sched_key_t *key = &comm->ex.sched_key;
  /* Only tuner-built dense schedules are a function of the key alone. */
  int cacheable = !op->gen && !op->sparse;
  sc_sched_key_t want = sc_sched_key_of(op);
  if (!(cacheable && sc_sched_key_matches(key, &want))) {
    key->valid = 0;
    sc_sched_reset(s);
    uint64_t *mates = NULL;
    sc_result_t r = SC_SUCCESS;
    if (op->coll == SC_COLL_ALLTOALLV && !op->gen && sc_tune_a2av_hier(comm)) {
      r = sc_a2av_mates_exchange(comm, op, &mates);
      if (r != SC_SUCCESS && r != SC_ERR_ABORTED)
        sc_op_prefix_error(comm, op, ", count exchange inside the host (hier all-to-allv)");
    }
    if (r == SC_SUCCESS) r = sc_tune_build_schedule(comm, op, mates, s);
    free(mates);
    SC_CHECK(r);
    SC_CHECK(s->status);
    *key = want;
    key->valid = cacheable;
  }
  sc_exec_args_t a = {.op = op, .sched = s, .elem_size = sc_dtype_size(op->dtype), .fp = fp};
  sc_result_t r = sc_sched_execute(comm, &a);
  /* A mismatch's text names both calls already. */
  if (r != SC_SUCCESS && r != SC_ERR_ABORTED && r != SC_ERR_MISMATCH)
    sc_op_prefix_error(comm, op, "");
  return r;
}

sc_result_t sc_op_run(sc_comm_t *comm, const sc_op_t *op) {
  SC_CHECK(sc_op_check_runnable(comm, op));
  /* The call's print: in every message it sends and receives, and in the
   * liveness watch's heartbeats while it runs. */
  sc_fingerprint_t print;
  uint8_t fp[SC_TP_FP_LEN];
  sc_fp_from_op(op, &print);
  sc_fp_msg_encode(&print, fp);
  int shown = !comm->calibrating;
  if (shown) sc_op_now_set(comm, op->seq, fp);
  int verdict = 0;
  /* The print stays published after the call ends, until the next call
   * replaces it: a rank whose part only sent may finish before its peers
   * and must still be compared by rank 0 (same number, another call is a
   * mismatch whether or not the rank is still inside it). */
  sc_result_t r = sc_op_execute(comm, op, fp, &verdict);
  if (r == SC_SUCCESS) return r;
  if (r == SC_ERR_ABORTED)
    SC_ERR(SC_ERR_ABORTED,
           "rank %d: %s #%llu (count %zu, %s) interrupted: the communicator was aborted",
           comm->rank, sc_coll_name(op->coll), (unsigned long long)op->seq, op->count,
           sc_dtype_name(op->dtype));
  else if (verdict)
    sc_comm_record_verdict(comm, r);
  else
    sc_comm_record_error(comm, r);
  /* Nothing half-sent may linger into the next operation. */
  comm->tpops->cancel_all(comm->tp, r);
  if (r != SC_ERR_ABORTED) r = sc_watch_explain(comm->watch, r);
  return r;
}

/* A stream form's request has no waiter: lib/core/stream.c runs it behind its
 * stream's event, releases the stream and recycles the request. */
static void sc_progress_one(sc_comm_t *comm, sc_request_t *req) {
  if (req->stream)
    sc_stream_run(comm, req);
  else
    sc_request_complete(req, sc_op_run(comm, &req->op));
}

static void *sc_progress_main(void *arg) {
  sc_comm_t *comm = arg;
  sc_log_set_rank(comm->rank);
  pthread_mutex_lock(&comm->lock);
  for (;;) {
    /* An operation a blocking caller runs itself (busy) owns the transport. */
    while ((!comm->qhead || comm->busy) && !comm->stopping && !atomic_load(&comm->aborted))
      pthread_cond_wait(&comm->queue_cv, &comm->lock);
    while (comm->busy && !atomic_load(&comm->aborted))
      pthread_cond_wait(&comm->queue_cv, &comm->lock);
    if (!comm->qhead) break; /* stopping or aborted, nothing left */
    sc_request_t *req = comm->qhead;
    comm->qhead = req->next;
    if (!comm->qhead) comm->qtail = NULL;
    if (atomic_load(&comm->aborted)) {
      /* Fails at once without the transport, which a caller may still own. */
      pthread_mutex_unlock(&comm->lock);
      sc_progress_one(comm, req);
      pthread_mutex_lock(&comm->lock);
      continue;
    }
    comm->busy = 1;
    pthread_mutex_unlock(&comm->lock);
    sc_progress_one(comm, req);
    pthread_mutex_lock(&comm->lock);
    comm->busy = 0;
    pthread_cond_broadcast(&comm->queue_cv);
  }
  pthread_mutex_unlock(&comm->lock);
  return NULL;
}

sc_result_t sc_progress_start(sc_comm_t *comm) {
  int e = pthread_create(&comm->thread, NULL, sc_progress_main, comm);
  if (e) return SC_ERR(SC_ERR_SYSTEM, "pthread_create of the progress thread: %s", strerror(e));
  comm->thread_started = 1;
  return SC_SUCCESS;
}

void sc_progress_stop(sc_comm_t *comm) {
  if (!comm->thread_started) return;
  pthread_mutex_lock(&comm->lock);
  comm->stopping = 1;
  pthread_cond_broadcast(&comm->queue_cv);
  pthread_mutex_unlock(&comm->lock);
  if (atomic_load(&comm->aborted) && comm->tpops && comm->tp) comm->tpops->wake(comm->tp);
  pthread_join(comm->thread, NULL);
  comm->thread_started = 0;
  /* A caller may still be running an operation itself; abort has woken it. */
  pthread_mutex_lock(&comm->lock);
  while (comm->busy) pthread_cond_wait(&comm->queue_cv, &comm->lock);
  pthread_mutex_unlock(&comm->lock);
}
