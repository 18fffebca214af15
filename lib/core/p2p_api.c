/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point API: argument checks, requests, the hand-off to the
 * lane thread, and the per-thread groups of sc_group_start / sc_group_end. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/dtype.h"
#include "lib/base/log.h"
#include "lib/base/spares.h"
#include "lib/core/device.h"
#include "lib/core/p2p_internal.h"
#include "lib/core/stream.h"

/* ---- the API ---- */

/* The arguments of one call, every form alike (path: the memory it takes,
 * lib/core/device.h); on success *kind is buf's memory. */
static sc_result_t p2p_check(const char *fn, sc_buf_path_t path, const void *buf, size_t count,
                             sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                             sc_mem_kind_t *kind) {
  *kind = SC_MEM_HOST;
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  const size_t es = sc_dtype_size(dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if (count > SIZE_MAX / es)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: count %zu of %s overflows the address space", fn, count,
                  sc_dtype_name(dtype));
  if (count && !buf) return SC_ERR(SC_ERR_INVALID_ARG, "%s: buf is NULL with count %zu", fn, count);
  if (tag < 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: tag %d is negative", fn, tag);
  if (peer < 0 || peer >= comm->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: peer %d outside [0, %d)", fn, peer, comm->nranks);
  SC_CHECK(sc_comm_check_usable(comm));
  if (!comm->p2p)
    return SC_ERR(SC_ERR_UNSUPPORTED,
                  "%s: point-to-point is off on this communicator (SC_P2P=0 when it was created)",
                  fn);
  const char *name = count ? "buf" : NULL;
  return sc_buffers_classify(fn, path, 1, &buf, &name, kind);
}

/* A device buffer is staged through host bytes allocated after the op (freed
 * with its request): a send's are copied from the device here, a receive's
 * are copied to the device when it completes (sc_p2p_op_complete). */
static sc_result_t p2p_new(const char *fn, int is_send, const void *buf, size_t count,
                           sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                           sc_p2p_op_t **out) {
  *out = NULL;
  sc_mem_kind_t kind;
  SC_CHECK(p2p_check(fn, SC_PATH_ANY, buf, count, dtype, peer, tag, comm, &kind));
  const size_t bytes = count * sc_dtype_size(dtype);
  const size_t stage = kind == SC_MEM_DEVICE ? bytes : 0;
  if (stage > SIZE_MAX - sizeof(sc_p2p_op_t))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: count %zu of %s is too large to stage", fn, count,
                  sc_dtype_name(dtype));
  sc_p2p_op_t *op = sc_p2p_op_alloc(stage);
  if (!op) return SC_ERR(SC_ERR_NOMEM, "%s: request (%zu bytes of host staging)", fn, stage);
  if (kind == SC_MEM_DEVICE) {
    op->lane = comm->p2p;
    op->device = sc_buffers_device(1, &buf);
    uint8_t *host = (uint8_t *)(op + 1);
    if (is_send && stage) {
      sc_result_t r = sc_p2p_dev_copy(comm->p2p, op->device, host, buf, stage);
      if (r != SC_SUCCESS) {
        char why[SC_ERRMSG_MAX / 2];
        sc_error_get_detail(why, sizeof(why));
        sc_p2p_op_free(op);
        return SC_ERR(r, "%s: copying buf from device memory: %s", fn, why);
      }
    }
    if (!is_send) op->dev = (uint8_t *)buf;
    buf = host;
  }
  op->fn = fn;
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->dtype = dtype;
  op->count = count;
  op->bytes = (uint64_t)count * sc_dtype_size(dtype);
  op->buf = (uint8_t *)buf;
  op->ent.tag = tag;
  op->ent.dtype = dtype;
  op->ent.count = count;
  op->ent.owner = op;
  *out = op;
  return SC_SUCCESS;
}

sc_result_t sc_p2p_closing_error(const sc_p2p_t *p, const char *fn) {
  return SC_ERR(SC_ERR_ABORTED, "rank %d: %s: the communicator was aborted or is being destroyed",
                p->comm->rank, fn);
}

/* (p->lock) SC_ERR_ABORTED once the lane is closing; else starts the lane
 * thread the first time. */
static sc_result_t lane_open_locked(sc_p2p_t *p, const char *fn) {
  if (p->closed) return sc_p2p_closing_error(p, fn);
  if (p->started) return SC_SUCCESS;
  int e = pthread_create(&p->thread, NULL, sc_p2p_main, p);
  if (e)
    return SC_ERR(SC_ERR_SYSTEM, "pthread_create of the point-to-point thread: %s", strerror(e));
  p->started = 1;
  return SC_SUCCESS;
}

/* Hands ops (a qnext chain) to the lane, starting its thread the first
 * time. wake: rouse the lane thread; a blocking caller leaves that to its
 * sc_wait, which may drive the ops itself (sc_p2p_drive). */
static sc_result_t p2p_submit(sc_comm_t *comm, sc_p2p_op_t *head, sc_p2p_op_t *tail, int wake) {
  sc_p2p_t *p = comm->p2p;
  pthread_mutex_lock(&p->lock);
  sc_result_t r = lane_open_locked(p, head->fn);
  if (r != SC_SUCCESS) {
    pthread_mutex_unlock(&p->lock);
    return r;
  }
  tail->qnext = NULL;
  if (p->qtail)
    p->qtail->qnext = head;
  else
    p->qhead = head;
  p->qtail = tail;
  if (wake || !p->tp || !p->ops->wait) {
    pthread_cond_signal(&p->cv);
    /* Under the lock: once it is released, an abort may close and free the lane. */
    if (p->tp) p->ops->wake(p->tp);
  }
  pthread_mutex_unlock(&p->lock);
  return SC_SUCCESS;
}

/* Starts the lane thread if it is not yet: the engine's owner when no
 * caller drives. SC_ERR_ABORTED once the lane is closing. */
static sc_result_t p2p_lane_up(sc_comm_t *comm, const char *fn) {
  sc_p2p_t *p = comm->p2p;
  pthread_mutex_lock(&p->lock);
  sc_result_t r = lane_open_locked(p, fn);
  pthread_mutex_unlock(&p->lock);
  return r;
}

/* ---- groups ---- */

/* A stream form's call, queued in a group: its arguments, checked. */
typedef struct sc_p2p_scall {
  void *buf;
  size_t count;
  sc_dtype_t dtype;
  int peer, tag, is_send;
} sc_p2p_scall_t;

/* The stream-form calls of one communicator in one group: enqueued on their
 * stream as one job that runs them as a group, so that their order among
 * themselves cannot deadlock either. Owned by the lane's list from
 * sc_group_end until the job has run (or the lane is freed). */
typedef struct sc_p2p_batch {
  struct sc_p2p_batch *next;
  int n;
  sc_p2p_scall_t call[];
} sc_p2p_batch_t;

/* What a group's call is, for sc_group_end's error text: formatted only
 * for a call that failed (a printf per call costs a small exchange a tenth
 * of its time). */
typedef struct sc_group_call {
  const char *fn;
  int dir; /* 1 a send (to peer), 0 a receive (from peer), -1 a collective */
  int peer, tag;
  uint64_t count;
  sc_dtype_t dtype;
} sc_group_call_t;

/* msg: "sc_group_end: call idx of n, <the call>: <the error>". */
static void group_error(char *msg, size_t len, int idx, int n, const sc_group_call_t *c) {
  char what[160];
  if (c->dir < 0)
    snprintf(what, sizeof(what), "%s (count %" PRIu64 " of %s)", c->fn, c->count,
             sc_dtype_name(c->dtype));
  else
    sc_p2p_describe(c->fn, c->dir, c->peer, c->tag, c->count, c->dtype, what, sizeof(what));
  snprintf(msg, len, "sc_group_end: call %d of %d, %s: %s", idx, n, what, sc_last_error());
}

typedef struct sc_group_item {
  struct sc_group_item *next;
  sc_comm_t *comm;
  sc_p2p_op_t *deferred; /* a blocking send or receive, not yet started */
  sc_request_t *req;     /* what sc_group_end waits for */
  int idx;               /* 1-based position in the group, for the error's text */
  int on_stream;         /* a stream form: scall on stream, enqueued at the end */
  sc_stream_t stream;
  sc_p2p_scall_t scall;
  sc_group_call_t call;
} sc_group_item_t;

static _Thread_local struct {
  int depth;
  sc_group_item_t *head, *tail;
  int n;
} sc_group;

/* A group's entries, one per call, are made and freed per call: from a stack
 * of spares, as the operations are (lib/core/p2p_pool.c). */
static sc_spares_t group_spares = SC_SPARES_INIT(sizeof(sc_group_item_t), 64);

static sc_result_t group_add(sc_comm_t *comm, sc_p2p_op_t *deferred, sc_request_t *req,
                             const sc_group_call_t *call, sc_group_item_t **out) {
  sc_group_item_t *it = sc_spares_get_zeroed(&group_spares);
  if (!it) return SC_ERR(SC_ERR_NOMEM, "group entry");
  it->comm = comm;
  it->deferred = deferred;
  it->req = req;
  it->idx = sc_group.n + 1;
  it->call = *call;
  if (sc_group.tail)
    sc_group.tail->next = it;
  else
    sc_group.head = it;
  sc_group.tail = it;
  sc_group.n++;
  if (out) *out = it;
  return SC_SUCCESS;
}

void sc_p2p_batches_free(sc_p2p_t *p) {
  pthread_mutex_lock(&p->lock);
  sc_p2p_batch_t *b = p->batches;
  p->batches = NULL;
  pthread_mutex_unlock(&p->lock);
  while (b) {
    sc_p2p_batch_t *next = b->next;
    free(b);
    b = next;
  }
}

/* Unlinks b from its lane's list and frees it. */
static void batch_drop(sc_p2p_t *p, sc_p2p_batch_t *b) {
  pthread_mutex_lock(&p->lock);
  for (sc_p2p_batch_t **q = &p->batches; *q; q = &(*q)->next)
    if (*q == b) {
      *q = b->next;
      break;
    }
  pthread_mutex_unlock(&p->lock);
  free(b);
}

static sc_result_t p2p_post(const char *fn, int is_send, const void *buf, size_t count,
                            sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                            sc_request_t **req);

/* job_args[0]: the batch. On the progress thread, once the stream's earlier
 * work is done: the calls as the blocking forms inside a group of this
 * thread's own; the stream waits until it ends. */
static sc_result_t p2p_batch_job(sc_comm_t *comm, const sc_op_t *op) {
  sc_p2p_batch_t *b = (sc_p2p_batch_t *)(uintptr_t)op->job_args[0];
  sc_result_t r = sc_group_start();
  for (int i = 0; i < b->n && r == SC_SUCCESS; i++) {
    const sc_p2p_scall_t *c = &b->call[i];
    r = p2p_post(c->is_send ? "sc_send_on_stream" : "sc_recv_on_stream", c->is_send, c->buf,
                 c->count, c->dtype, c->peer, c->tag, comm, NULL);
  }
  sc_result_t re = sc_group_end();
  batch_drop(comm->p2p, b);
  return r != SC_SUCCESS ? r : re;
}

static void stream_job_op(sc_op_t *o, const sc_comm_t *comm, const sc_p2p_scall_t *c) {
  *o = (sc_op_t){.coll = SC_COLL_BROADCAST,
                 .sendbuf = c->is_send ? c->buf : NULL,
                 .recvbuf = c->is_send ? NULL : c->buf,
                 .count = c->count,
                 .dtype = c->dtype,
                 .root = c->is_send ? comm->rank : c->peer,
                 .device = 1,
                 .local = 1};
}

/* Enqueues the group's stream-form calls of it->comm (it and the later ones
 * on the same communicator) as one batch; marks them done. */
static sc_result_t group_enqueue_stream(sc_group_item_t *it) {
  int n = 0;
  for (sc_group_item_t *x = it; x; x = x->next) n += x->on_stream && x->comm == it->comm;
  sc_p2p_batch_t *b = malloc(sizeof(*b) + (size_t)n * sizeof(sc_p2p_scall_t));
  if (!b) return SC_ERR(SC_ERR_NOMEM, "sc_group_end: a batch of %d stream-form calls", n);
  b->n = 0;
  for (sc_group_item_t *x = it; x; x = x->next)
    if (x->on_stream && x->comm == it->comm) {
      b->call[b->n++] = x->scall;
      if (x != it) x->on_stream = 0;
    }
  sc_p2p_t *p = it->comm->p2p;
  pthread_mutex_lock(&p->lock);
  b->next = p->batches;
  p->batches = b;
  pthread_mutex_unlock(&p->lock);
  sc_op_t o;
  stream_job_op(&o, it->comm, &it->scall);
  o.job = p2p_batch_job;
  o.job_args[0] = (uint64_t)(uintptr_t)b;
  it->on_stream = 0;
  sc_result_t r = sc_stream_submit("sc_group_end", it->comm, &o, it->stream);
  if (r != SC_SUCCESS) batch_drop(p, b);
  return r;
}

int sc_group_take_coll(const char *fn, sc_comm_t *comm, const sc_op_t *op, sc_result_t *out) {
  if (sc_group.depth == 0) return 0;
  sc_request_t *req = NULL;
  *out = sc_op_submit(comm, op, &req);
  if (*out != SC_SUCCESS) return 1;
  const sc_group_call_t call = {fn, -1, -1, -1, op->count, op->dtype};
  *out = group_add(comm, NULL, req, &call, NULL);
  if (*out != SC_SUCCESS) sc_wait(&req);
  return 1;
}

sc_result_t sc_group_start(void) {
  if (sc_group.depth == INT32_MAX)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_group_start: nested too deep");
  sc_group.depth++;
  return SC_SUCCESS;
}

sc_result_t sc_group_end(void) {
  if (sc_group.depth == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_group_end without sc_group_start on this thread");
  if (--sc_group.depth > 0) return SC_SUCCESS;
  sc_group_item_t *items = sc_group.head;
  const int n = sc_group.n;
  sc_group.head = sc_group.tail = NULL;
  sc_group.n = 0;
  sc_result_t first = SC_SUCCESS;
  char msg[SC_ERRMSG_MAX];
  /* One communicator's point-to-point calls only: the wait below drives its
   * lane, so its thread is not roused. Else every lane is, at once. */
  int one_lane = items != NULL;
  for (sc_group_item_t *it = items; it; it = it->next)
    if (!it->deferred || it->comm != items->comm) one_lane = 0;
  /* The stream forms first: they are enqueued, not waited for. */
  for (sc_group_item_t *it = items; it; it = it->next) {
    if (!it->on_stream) continue;
    sc_result_t r = group_enqueue_stream(it);
    if (r != SC_SUCCESS && first == SC_SUCCESS) {
      first = r;
      group_error(msg, sizeof(msg), it->idx, n, &it->call);
    }
  }
  /* Everything is started before anything is waited for: that is what makes
   * any call order deadlock-free. Consecutive calls on one communicator go
   * to its lane thread in one hand-off. */
  for (sc_group_item_t *it = items; it;) {
    if (!it->deferred) {
      it = it->next;
      continue;
    }
    sc_group_item_t *last = it;
    while (last->next && last->next->deferred && last->next->comm == it->comm) {
      last->deferred->qnext = last->next->deferred;
      last = last->next;
    }
    sc_result_t r = p2p_submit(it->comm, it->deferred, last->deferred, !one_lane);
    for (sc_group_item_t *x = it;; x = x->next) {
      if (r == SC_SUCCESS)
        x->req = &x->deferred->req;
      else
        sc_p2p_op_free(x->deferred);
      x->deferred = NULL;
      if (r != SC_SUCCESS && first == SC_SUCCESS) {
        first = r;
        group_error(msg, sizeof(msg), x->idx, n, &x->call);
      }
      if (x == last) break;
    }
    it = last->next;
  }
  if (one_lane && n <= 64) {
    /* One drive for the whole group: its calls finish in any order, and
     * driving them one sc_wait at a time hands the engine back and forth
     * with the lane thread in between (8 B group at P = 2: 25 us, 43 us
     * one by one). A larger group is driven by its waits below. */
    sc_request_t *reqs[64];
    int k = 0;
    for (sc_group_item_t *it = items; it; it = it->next) reqs[k++] = it->req;
    sc_p2p_drive(items->comm, reqs, k);
  }
  for (sc_group_item_t *it = items, *next; it; it = next) {
    next = it->next;
    if (it->req) {
      sc_result_t r = sc_wait(&it->req);
      if (r != SC_SUCCESS && first == SC_SUCCESS) {
        first = r;
        group_error(msg, sizeof(msg), it->idx, n, &it->call);
      }
    }
    sc_spares_put(&group_spares, it);
  }
  if (first != SC_SUCCESS) sc_error_set_detail(msg);
  return first;
}

static sc_result_t p2p_post(const char *fn, int is_send, const void *buf, size_t count,
                            sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                            sc_request_t **req) {
  sc_p2p_op_t *op;
  SC_CHECK(p2p_new(fn, is_send, buf, count, dtype, peer, tag, comm, &op));
  /* The wait (or sc_test) drives the lane itself when nobody else does. */
  op->req.p2p_comm = comm;
  if (!req && sc_group.depth > 0) {
    const sc_group_call_t call = {fn, is_send, peer, tag, count, dtype};
    sc_result_t r = group_add(comm, op, NULL, &call, NULL);
    if (r != SC_SUCCESS) sc_p2p_op_free(op);
    return r;
  }
  /* A non-blocking call starts its op in this thread when the engine is
   * free: no hand-off to the lane thread and back, which cost a small
   * isend/irecv/wait exchange several times the blocking group's time
   * (perf/README.md, "Send and receive on one host"). A blocking one leaves
   * that to its wait, which drives. */
  sc_result_t r = SC_SUCCESS;
  if (req && p2p_lane_up(comm, fn) == SC_SUCCESS && sc_p2p_start_inline(comm->p2p, op, &r)) {
    if (r != SC_SUCCESS) {
      sc_p2p_op_free(op);
      return r;
    }
    *req = &op->req;
    return SC_SUCCESS;
  }
  r = p2p_submit(comm, op, op, req != NULL);
  if (r != SC_SUCCESS) {
    sc_p2p_op_free(op);
    return r;
  }
  sc_request_t *mine = &op->req;
  if (req) {
    *req = mine;
    return SC_SUCCESS;
  }
  return sc_wait(&mine);
}

sc_result_t sc_send(const void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                    sc_comm_t *comm) {
  return p2p_post("sc_send", 1, buf, count, dtype, peer, tag, comm, NULL);
}

sc_result_t sc_recv(void *buf, size_t count, sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm) {
  return p2p_post("sc_recv", 0, buf, count, dtype, peer, tag, comm, NULL);
}

sc_result_t sc_isend(const void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                     sc_comm_t *comm, sc_request_t **req) {
  if (!req) return SC_ERR(SC_ERR_INVALID_ARG, "sc_isend: req is NULL");
  *req = NULL;
  return p2p_post("sc_isend", 1, buf, count, dtype, peer, tag, comm, req);
}

sc_result_t sc_irecv(void *buf, size_t count, sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                     sc_request_t **req) {
  if (!req) return SC_ERR(SC_ERR_INVALID_ARG, "sc_irecv: req is NULL");
  *req = NULL;
  return p2p_post("sc_irecv", 0, buf, count, dtype, peer, tag, comm, req);
}

/* ---- stream-ordered forms ---- */

/* job_args: buf, count, peer, tag, is_send. On the progress thread, once the
 * stream's earlier work is done: the blocking call, staged as any device
 * buffer is; the stream waits until it returns. */
static sc_result_t p2p_stream_job(sc_comm_t *comm, const sc_op_t *op) {
  void *buf = (void *)(uintptr_t)op->job_args[0];
  const size_t count = (size_t)op->job_args[1];
  const int peer = (int)op->job_args[2], tag = (int)op->job_args[3];
  const int is_send = op->job_args[4] != 0;
  return p2p_post(is_send ? "sc_send_on_stream" : "sc_recv_on_stream", is_send, buf, count,
                  op->dtype, peer, tag, comm, NULL);
}

static sc_result_t p2p_on_stream(const char *fn, int is_send, const void *buf, size_t count,
                                 sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                                 sc_stream_t stream) {
  sc_mem_kind_t kind;
  SC_CHECK(p2p_check(fn, SC_PATH_STREAM, buf, count, dtype, peer, tag, comm, &kind));
  const sc_p2p_scall_t call = {(void *)buf, count, dtype, peer, tag, is_send};
  if (sc_group.depth > 0) {
    for (const sc_group_item_t *x = sc_group.head; x; x = x->next)
      if (x->on_stream && x->comm == comm && x->stream != stream)
        return SC_ERR(SC_ERR_INVALID_ARG,
                      "%s: inside a group, every stream-form call on one communicator must use "
                      "one stream (call %d of this group used stream %p, this one %p)",
                      fn, x->idx, x->stream, stream);
    const sc_group_call_t gcall = {fn, is_send, peer, tag, count, dtype};
    sc_group_item_t *it;
    SC_CHECK(group_add(comm, NULL, NULL, &gcall, &it));
    it->on_stream = 1;
    it->stream = stream;
    it->scall = call;
    return SC_SUCCESS;
  }
  sc_op_t o;
  stream_job_op(&o, comm, &call);
  o.job = p2p_stream_job;
  o.job_args[0] = (uint64_t)(uintptr_t)buf;
  o.job_args[1] = count;
  o.job_args[2] = (uint64_t)peer;
  o.job_args[3] = (uint64_t)tag;
  o.job_args[4] = (uint64_t)is_send;
  return sc_stream_submit(fn, comm, &o, stream);
}

sc_result_t sc_send_on_stream(const void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                              sc_comm_t *comm, sc_stream_t stream) {
  return p2p_on_stream("sc_send_on_stream", 1, buf, count, dtype, peer, tag, comm, stream);
}

sc_result_t sc_recv_on_stream(void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                              sc_comm_t *comm, sc_stream_t stream) {
  return p2p_on_stream("sc_recv_on_stream", 0, buf, count, dtype, peer, tag, comm, stream);
}
