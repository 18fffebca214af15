/* SPDX-License-Identifier: BSD-3-Clause */
/* The public dense collectives in their three forms: blocking, non-blocking
 * (sc_i*) and stream-ordered (sc_*_on_stream). Each entry point describes its
 * call in one sc_coll_info_t (as NCCL's ncclInfo) and hands it to
 * sc_coll_enqueue, so that a collective's arguments are checked by one
 * function whatever the form. What the forms differ in is a field of the
 * description: the memory the data path takes (host or device for the
 * first two, device only on a stream: sc_buffers_classify's path) and where
 * the operation goes (run now, returned as a request, or queued behind the
 * caller's stream, lib/core/stream.c). */
#include <stdint.h>

#include "lib/core/comm.h"
#include "lib/core/device.h"
#include "lib/core/stream.h"

typedef enum sc_coll_form { SC_FORM_BLOCKING, SC_FORM_NONBLOCKING, SC_FORM_STREAM } sc_coll_form_t;

typedef struct sc_coll_info {
  const char *fn; /* the entry point, for error details */
  sc_coll_form_t form;
  sc_coll_t coll;
  const void *sendbuf;
  void *recvbuf;
  size_t count; /* the call's count: per rank's block for reduce-scatter and all-gather */
  sc_dtype_t dtype;
  sc_redop_t op; /* reducing collectives only */
  int root;      /* broadcast and reduce only */
  sc_comm_t *comm;
  sc_request_t **req; /* SC_FORM_NONBLOCKING */
  sc_stream_t stream; /* SC_FORM_STREAM */
} sc_coll_info_t;

static int coll_has_op(sc_coll_t c) {
  return c == SC_COLL_ALLREDUCE || c == SC_COLL_REDUCE_SCATTER || c == SC_COLL_REDUCE;
}

static int coll_has_root(sc_coll_t c) {
  return c == SC_COLL_BROADCAST || c == SC_COLL_REDUCE;
}

/* The arguments of one call, every form alike; on success *kind is the
 * memory of its buffers. */
static sc_result_t sc_coll_check(const sc_coll_info_t *in, sc_mem_kind_t *kind) {
  const char *fn = in->fn;
  const sc_comm_t *comm = in->comm;
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  const size_t es = sc_dtype_size(in->dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)in->dtype);
  if (coll_has_op(in->coll) && (unsigned)in->op > SC_AVG)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, (int)in->op);
  const int rooted = coll_has_root(in->coll);
  if (rooted && (in->root < 0 || in->root >= comm->nranks))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: root %d outside [0, %d)", fn, in->root, comm->nranks);
  /* The larger buffer holds count elements per rank for these two. */
  const size_t mult = in->coll == SC_COLL_REDUCE_SCATTER || in->coll == SC_COLL_ALLGATHER
                          ? (size_t)comm->nranks
                          : 1;
  if (in->count > SIZE_MAX / es / mult)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: count %zu x %zu overflows the address space", fn,
                  in->count, mult);
  /* Only the buffers this rank's part uses: off the root, a broadcast's
   * sendbuf and a reduce's recvbuf are never touched; with a zero count,
   * none is. */
  const int off_root = rooted && comm->rank != in->root;
  const char *names[2] = {NULL, NULL};
  if (in->count) {
    names[0] = in->coll != SC_COLL_BROADCAST ? "sendbuf"
               : off_root                    ? NULL
                                             : "sendbuf (on the root)";
    names[1] = in->coll != SC_COLL_REDUCE ? "recvbuf" : off_root ? NULL : "recvbuf (on the root)";
  }
  const void *bufs[2] = {in->sendbuf, in->recvbuf};
  for (int i = 0; i < 2; i++)
    if (names[i] && !bufs[i])
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with a non-zero count", fn, names[i]);
  /* In place (sendbuf == recvbuf, or one inside the other by the
   * conventions of include/sparsecoll.h) is one allocation: one kind. */
  return sc_buffers_classify(fn, in->form == SC_FORM_STREAM ? SC_PATH_STREAM : SC_PATH_ANY, 2, bufs,
                             names, kind);
}

/* The one path of every call: its description checked, then the operation
 * run, returned as a request or queued behind the stream, by its form. */
static sc_result_t sc_coll_enqueue(const sc_coll_info_t *in) {
  if (in->form == SC_FORM_NONBLOCKING) {
    if (!in->req) return SC_ERR(SC_ERR_INVALID_ARG, "%s: req is NULL", in->fn);
    *in->req = NULL;
  }
  sc_mem_kind_t kind = SC_MEM_HOST;
  SC_CHECK(sc_coll_check(in, &kind));
  sc_op_t o = {.coll = in->coll,
               .sendbuf = in->sendbuf,
               .recvbuf = in->recvbuf,
               .count = in->count,
               .dtype = in->dtype,
               .op = coll_has_op(in->coll) ? in->op : SC_SUM,
               .root = coll_has_root(in->coll) ? in->root : 0,
               .device = kind == SC_MEM_DEVICE};
  switch (in->form) {
  case SC_FORM_NONBLOCKING:
    return sc_op_submit(in->comm, &o, in->req);
  case SC_FORM_STREAM:
    return sc_stream_submit(in->fn, in->comm, &o, in->stream);
  default:
    return sc_op_run_blocking(in->comm, &o);
  }
}

/* Fills the description of one call (op and root where the collective has
 * none are ignored). */
static sc_result_t coll_post(const char *fn, sc_coll_form_t form, sc_coll_t coll,
                             const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                             sc_redop_t op, int root, sc_comm_t *comm, sc_request_t **req,
                             sc_stream_t stream) {
  const sc_coll_info_t in = {.fn = fn,
                             .form = form,
                             .coll = coll,
                             .sendbuf = sendbuf,
                             .recvbuf = recvbuf,
                             .count = count,
                             .dtype = dtype,
                             .op = op,
                             .root = root,
                             .comm = comm,
                             .req = req,
                             .stream = stream};
  return sc_coll_enqueue(&in);
}

sc_result_t sc_allreduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         sc_redop_t op, sc_comm_t *comm) {
  return coll_post("sc_allreduce", SC_FORM_BLOCKING, SC_COLL_ALLREDUCE, sendbuf, recvbuf, count,
                   dtype, op, 0, comm, NULL, NULL);
}

sc_result_t sc_iallreduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                          sc_redop_t op, sc_comm_t *comm, sc_request_t **req) {
  return coll_post("sc_iallreduce", SC_FORM_NONBLOCKING, SC_COLL_ALLREDUCE, sendbuf, recvbuf, count,
                   dtype, op, 0, comm, req, NULL);
}

sc_result_t sc_allreduce_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                   sc_stream_t stream) {
  return coll_post("sc_allreduce_on_stream", SC_FORM_STREAM, SC_COLL_ALLREDUCE, sendbuf, recvbuf,
                   count, dtype, op, 0, comm, NULL, stream);
}

sc_result_t sc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                              sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm) {
  return coll_post("sc_reduce_scatter", SC_FORM_BLOCKING, SC_COLL_REDUCE_SCATTER, sendbuf, recvbuf,
                   recvcount, dtype, op, 0, comm, NULL, NULL);
}

sc_result_t sc_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                               sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                               sc_request_t **req) {
  return coll_post("sc_ireduce_scatter", SC_FORM_NONBLOCKING, SC_COLL_REDUCE_SCATTER, sendbuf,
                   recvbuf, recvcount, dtype, op, 0, comm, req, NULL);
}

sc_result_t sc_reduce_scatter_on_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                        sc_stream_t stream) {
  return coll_post("sc_reduce_scatter_on_stream", SC_FORM_STREAM, SC_COLL_REDUCE_SCATTER, sendbuf,
                   recvbuf, recvcount, dtype, op, 0, comm, NULL, stream);
}

sc_result_t sc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, sc_dtype_t dtype,
                         sc_comm_t *comm) {
  return coll_post("sc_allgather", SC_FORM_BLOCKING, SC_COLL_ALLGATHER, sendbuf, recvbuf, sendcount,
                   dtype, SC_SUM, 0, comm, NULL, NULL);
}

sc_result_t sc_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, sc_dtype_t dtype,
                          sc_comm_t *comm, sc_request_t **req) {
  return coll_post("sc_iallgather", SC_FORM_NONBLOCKING, SC_COLL_ALLGATHER, sendbuf, recvbuf,
                   sendcount, dtype, SC_SUM, 0, comm, req, NULL);
}

sc_result_t sc_allgather_on_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   sc_dtype_t dtype, sc_comm_t *comm, sc_stream_t stream) {
  return coll_post("sc_allgather_on_stream", SC_FORM_STREAM, SC_COLL_ALLGATHER, sendbuf, recvbuf,
                   sendcount, dtype, SC_SUM, 0, comm, NULL, stream);
}

sc_result_t sc_broadcast(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         int root, sc_comm_t *comm) {
  return coll_post("sc_broadcast", SC_FORM_BLOCKING, SC_COLL_BROADCAST, sendbuf, recvbuf, count,
                   dtype, SC_SUM, root, comm, NULL, NULL);
}

sc_result_t sc_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                          int root, sc_comm_t *comm, sc_request_t **req) {
  return coll_post("sc_ibroadcast", SC_FORM_NONBLOCKING, SC_COLL_BROADCAST, sendbuf, recvbuf, count,
                   dtype, SC_SUM, root, comm, req, NULL);
}

sc_result_t sc_broadcast_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   sc_dtype_t dtype, int root, sc_comm_t *comm,
                                   sc_stream_t stream) {
  return coll_post("sc_broadcast_on_stream", SC_FORM_STREAM, SC_COLL_BROADCAST, sendbuf, recvbuf,
                   count, dtype, SC_SUM, root, comm, NULL, stream);
}

sc_result_t sc_reduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                      sc_redop_t op, int root, sc_comm_t *comm) {
  return coll_post("sc_reduce", SC_FORM_BLOCKING, SC_COLL_REDUCE, sendbuf, recvbuf, count, dtype,
                   op, root, comm, NULL, NULL);
}

sc_result_t sc_ireduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                       sc_redop_t op, int root, sc_comm_t *comm, sc_request_t **req) {
  return coll_post("sc_ireduce", SC_FORM_NONBLOCKING, SC_COLL_REDUCE, sendbuf, recvbuf, count,
                   dtype, op, root, comm, req, NULL);
}

sc_result_t sc_reduce_on_stream(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                                sc_redop_t op, int root, sc_comm_t *comm, sc_stream_t stream) {
  return coll_post("sc_reduce_on_stream", SC_FORM_STREAM, SC_COLL_REDUCE, sendbuf, recvbuf, count,
                   dtype, op, root, comm, NULL, stream);
}

/* No stream form: a barrier has no device work to order. */
sc_result_t sc_barrier(sc_comm_t *comm) {
  return coll_post("sc_barrier", SC_FORM_BLOCKING, SC_COLL_BARRIER, NULL, NULL, 0, SC_UINT8, SC_SUM,
                   0, comm, NULL, NULL);
}

sc_result_t sc_ibarrier(sc_comm_t *comm, sc_request_t **req) {
  return coll_post("sc_ibarrier", SC_FORM_NONBLOCKING, SC_COLL_BARRIER, NULL, NULL, 0, SC_UINT8,
                   SC_SUM, 0, comm, req, NULL);
}
