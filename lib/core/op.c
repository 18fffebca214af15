/* SPDX-License-Identifier: BSD-3-Clause */
/* Requests and the ordered operation queue (user side). The progress thread
 * (lib/core/progress.c) drains the queue; a request is completed exactly once, and
 * a waiting thread sleeps on the request's own futex word, so nothing here
 * touches the communicator once a request is done (the communicator may be
 * gone by then). */
#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/log.h"
#include "lib/base/spares.h"
#include "lib/base/yield.h"
#include "lib/core/comm.h"
#include "lib/core/p2p.h"

/* How long a waiter spins before it sleeps: long enough to catch a small
 * collective finishing, short enough not to steal the core from the progress
 * thread when ranks outnumber cores. */
#define SC_WAIT_SPIN_ITERS 0

static void sc_futex_wait(_Atomic uint32_t *word, uint32_t expected, long timeout_ms) {
  struct timespec ts = {.tv_sec = timeout_ms / 1000, .tv_nsec = (timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

static void sc_futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

void sc_request_complete(sc_request_t *req, sc_result_t res) {
  req->result = res;
  if (res != SC_SUCCESS) sc_error_get_detail(req->errmsg, sizeof(req->errmsg));
  /* The wake system call only for a waiter asleep: it cost every small
   * operation one. Afterwards req may be freed at once; the wake touches
   * only the address. */
  if (atomic_exchange_explicit(&req->done, 1, memory_order_acq_rel) == 2)
    sc_futex_wake_all(&req->done);
}

/* The common case, read from the atomic flags with or without the lock:
 * neither aborted nor failed, and (for a call not yet queued) not being
 * destroyed. */
static int comm_usable(sc_comm_t *comm, int queued) {
  return !atomic_load(&comm->aborted) && atomic_load(&comm->error) == SC_SUCCESS &&
         (queued || !atomic_load(&comm->stopping));
}

/* SC_SUCCESS while the communicator accepts work; otherwise the reason, with
 * the first failure's detail and the refused operation (op may be NULL).
 * Every path that refuses a call (at submission, or when the queued call's
 * turn comes) words it here, so the text does not depend on which one won
 * the race with the failure. A call already queued (numbered) is named by
 * its number too; a destroy in progress refuses new calls only, the calls
 * queued before it still run. Caller holds comm->lock. */
static sc_result_t sc_comm_refusal_locked(sc_comm_t *comm, const sc_op_t *op, int queued) {
  /* The common case words nothing: formatting the call's name cost a small
   * all-reduce about 40% of its instructions. */
  if (comm_usable(comm, queued)) return SC_SUCCESS;
  char what[128] = "", seq[32] = "";
  if (op && queued) snprintf(seq, sizeof(seq), " #%llu", (unsigned long long)op->seq);
  if (op)
    snprintf(what, sizeof(what), "%s%s (count %zu, %s) not started: ", sc_coll_name(op->coll), seq,
             op->count, sc_dtype_name(op->dtype));
  if (atomic_load(&comm->aborted))
    return SC_ERR(SC_ERR_ABORTED, "rank %d: %sthe communicator was aborted", comm->rank, what);
  int err = atomic_load(&comm->error);
  if (err != SC_SUCCESS)
    return SC_ERR((sc_result_t)err, "rank %d: %sthe communicator failed earlier: %s", comm->rank,
                  what, comm->errmsg);
  if (!queued && comm->stopping)
    return SC_ERR(SC_ERR_INVALID_ARG, "rank %d: %sthe communicator is being destroyed", comm->rank,
                  what);
  return SC_SUCCESS;
}

static sc_result_t sc_comm_check_usable_locked(sc_comm_t *comm, const sc_op_t *op) {
  return sc_comm_refusal_locked(comm, op, 0);
}

sc_result_t sc_op_check_runnable(sc_comm_t *comm, const sc_op_t *op) {
  if (comm_usable(comm, 1)) return SC_SUCCESS;
  pthread_mutex_lock(&comm->lock);
  sc_result_t r = sc_comm_refusal_locked(comm, op, 1);
  pthread_mutex_unlock(&comm->lock);
  return r;
}

sc_result_t sc_comm_check_usable(sc_comm_t *comm) {
  /* Every point-to-point call asks: the usable case takes no lock. */
  if (comm_usable(comm, 0)) return SC_SUCCESS;
  pthread_mutex_lock(&comm->lock);
  sc_result_t r = sc_comm_check_usable_locked(comm, NULL);
  pthread_mutex_unlock(&comm->lock);
  return r;
}

sc_result_t sc_op_enqueue(sc_comm_t *comm, sc_request_t *req) {
  pthread_mutex_lock(&comm->lock);
  sc_result_t r = sc_comm_check_usable_locked(comm, &req->op);
  if (r != SC_SUCCESS) {
    pthread_mutex_unlock(&comm->lock);
    return r;
  }
  if (req->op.local) {
    req->op.seq = comm->next_seq; /* only named in messages: the next collective's */
  } else {
    req->op.seq = comm->next_seq++;
    if (req->op.job) comm->next_seq += SC_JOB_SEQ_SPAN; /* the job's own calls */
  }
  /* Tickets follow queue order, so releasing them in order releases each
   * stream exactly when its own operations are done. */
  if (req->stream) req->ticket = ++comm->stream_tickets;
  req->next = NULL;
  if (comm->qtail)
    comm->qtail->next = req;
  else
    comm->qhead = req;
  comm->qtail = req;
  pthread_cond_signal(&comm->queue_cv);
  pthread_mutex_unlock(&comm->lock);
  return SC_SUCCESS;
}

/* A request's memory: a collective's comes from req_spares unless it
 * carries v arrays (a calloc of over 1 KiB per call is the allocator's slow
 * path); a point-to-point call's is its operation (lib/core/p2p_pool.c). */
static sc_spares_t req_spares = SC_SPARES_INIT(sizeof(sc_request_t), 64);

static void request_free(sc_request_t *req) {
  if (req->p2p_comm)
    sc_p2p_request_free(req);
  else if (req->spare)
    sc_spares_put(&req_spares, req);
  else
    free(req);
}

sc_result_t sc_op_submit(sc_comm_t *comm, const sc_op_t *op, sc_request_t **out) {
  /* A v collective's arrays travel with the request, in the same allocation:
   * the caller may reuse them once the call returns. */
  const size_t nv = sc_op_v_len(op, comm->nranks);
  sc_request_t *req = nv ? malloc(sizeof(*req) + nv * sizeof(size_t)) : sc_spares_get(&req_spares);
  if (!req) return SC_ERR(SC_ERR_NOMEM, "request for %s", sc_coll_name(op->coll));
  memset(req, 0, sizeof(*req));
  req->spare = nv == 0;
  req->op = *op;
  if (nv) sc_op_v_own(&req->op, comm->nranks, (size_t *)(req + 1));
  sc_result_t r = sc_op_enqueue(comm, req);
  if (r != SC_SUCCESS) {
    request_free(req);
    return r;
  }
  *out = req;
  return SC_SUCCESS;
}

/* The job this thread runs (sc_op_run_job), whose blocking calls run inline:
 * queueing them would wait for this very thread. */
static _Thread_local struct {
  sc_comm_t *comm;
  uint64_t next_seq, end_seq;
} sc_job_here;

sc_result_t sc_op_run_job(sc_comm_t *comm, const sc_op_t *op) {
  sc_job_here.comm = comm;
  sc_job_here.next_seq = op->seq + 1;
  sc_job_here.end_seq = op->seq + 1 + SC_JOB_SEQ_SPAN;
  sc_result_t r = op->job(comm, op);
  sc_job_here.comm = NULL;
  return r;
}

sc_result_t sc_op_run_blocking(sc_comm_t *comm, const sc_op_t *op) {
  if (sc_job_here.comm == comm) {
    sc_op_t mine = *op;
    if (sc_job_here.next_seq == sc_job_here.end_seq)
      return SC_ERR(SC_ERR_INTERNAL, "a queued job made more than %d calls", SC_JOB_SEQ_SPAN);
    mine.seq = sc_job_here.next_seq++;
    SC_CHECK(sc_op_check_runnable(comm, &mine));
    return sc_op_run(comm, &mine);
  }
  pthread_mutex_lock(&comm->lock);
  sc_result_t r = sc_comm_check_usable_locked(comm, op);
  if (r != SC_SUCCESS || comm->qhead || comm->busy) {
    pthread_mutex_unlock(&comm->lock);
    if (r != SC_SUCCESS) return r;
    sc_request_t *req;
    SC_CHECK(sc_op_submit(comm, op, &req));
    return sc_wait(&req);
  }
  sc_op_t mine = *op;
  mine.seq = comm->next_seq++;
  comm->busy = 1;
  pthread_mutex_unlock(&comm->lock);
  r = sc_op_run(comm, &mine);
  pthread_mutex_lock(&comm->lock);
  comm->busy = 0;
  /* Wake only someone waiting for the transport: queued work, or a destroy
   * or an abort: a needless wake-up costs the progress thread a context switch. */
  if (comm->qhead || comm->stopping || atomic_load(&comm->aborted))
    pthread_cond_broadcast(&comm->queue_cv);
  pthread_mutex_unlock(&comm->lock);
  return r;
}

static sc_result_t sc_request_finish(sc_request_t **reqp) {
  sc_request_t *req = *reqp;
  sc_result_t r = req->result;
  if (r != SC_SUCCESS) sc_error_set_detail(req->errmsg);
  request_free(req);
  *reqp = NULL;
  return r;
}

sc_result_t sc_test(sc_request_t **req, int *done) {
  if (!req || !*req || !done) return SC_ERR(SC_ERR_INVALID_ARG, "sc_test: NULL request or done");
  if (!sc_request_done(*req)) {
    sc_comm_t *pc = (*req)->p2p_comm;
    if (pc) sc_p2p_poll(pc);
    if (!pc || !sc_request_done(*req)) {
      *done = 0;
      return SC_IN_PROGRESS;
    }
  }
  *done = 1;
  return sc_request_finish(req);
}

sc_result_t sc_wait(sc_request_t **req) {
  if (!req || !*req) return SC_ERR(SC_ERR_INVALID_ARG, "sc_wait: NULL request");
  sc_request_t *r = *req;
  /* The progress thread bounds every operation by the no-progress timeout and
   * completes the request with SC_ERR_TIMEOUT, so this loop ends. */
  for (int i = 0; i < SC_WAIT_SPIN_ITERS; i++) {
    if (sc_request_done(r)) return sc_request_finish(req);
    sc_cpu_relax();
  }
  if (r->p2p_comm && !sc_request_done(r)) sc_p2p_drive(r->p2p_comm, req, 1);
  for (;;) {
    uint32_t v = atomic_load_explicit(&r->done, memory_order_acquire);
    if (v == 1) break;
    /* Marked asleep first: the completer's exchange then sees the 2 and wakes. */
    if (v == 0 && !atomic_compare_exchange_strong_explicit(&r->done, &v, 2, memory_order_acq_rel,
                                                           memory_order_acquire))
      continue;
    sc_futex_wait(&r->done, 2, 100);
  }
  return sc_request_finish(req);
}
