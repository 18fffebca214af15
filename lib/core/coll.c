/* SPDX-License-Identifier: BSD-3-Clause */
/* The public dense collectives: argument checks at the API boundary, then an
 * operation on the communicator's queue. Blocking calls are the non-blocking
 * ones followed by sc_wait. */
#include <stdint.h>

#include "lib/core/comm.h"
#include "lib/core/device.h"

static sc_result_t sc_check_common(const char *fn, sc_comm_t *comm, sc_dtype_t dtype, int has_op,
                                   sc_redop_t op) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (sc_dtype_size(dtype) == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if (has_op && ((unsigned)op > SC_AVG))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, (int)op);
  return SC_SUCCESS;
}

static sc_result_t sc_check_size(const char *fn, size_t count, size_t mult, sc_dtype_t dtype) {
  size_t es = sc_dtype_size(dtype);
  if (count > SIZE_MAX / es / mult)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: count %zu x %zu overflows the address space", fn, count,
                  mult);
  return SC_SUCCESS;
}

static sc_result_t sc_check_root(const char *fn, sc_comm_t *comm, int root) {
  if (root < 0 || root >= comm->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: root %d outside [0, %d)", fn, root, comm->nranks);
  return SC_SUCCESS;
}

#define SC_NEED_BUF(fn, buf, name)                                                                 \
  do {                                                                                             \
    if (!(buf))                                                                                    \
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with a non-zero count", fn, name);         \
  } while (0)

/* req == NULL is the blocking form; the non-blocking entry points check
 * their req argument before getting here. */
#define SC_NEED_REQ(fn, req)                                                                       \
  do {                                                                                             \
    if (req) *(req) = NULL;                                                                        \
  } while (0)

static sc_result_t sc_submit(const char *fn, sc_comm_t *comm, sc_coll_t coll, const void *sendbuf,
                             void *recvbuf, size_t count, sc_dtype_t dtype, sc_redop_t op, int root,
                             sc_request_t **req) {
  /* Host or device buffers (lib/core/device.c; free when no device runtime is in
   * use). Only the buffers this rank's part uses count: off the root, a
   * broadcast's sendbuf and a reduce's recvbuf are never touched. */
  sc_mem_kind_t kind = SC_MEM_HOST;
  if (count) {
    int off_root = comm->rank != root;
    const void *p[2] = {coll == SC_COLL_BROADCAST && off_root ? NULL : sendbuf,
                        coll == SC_COLL_REDUCE && off_root ? NULL : recvbuf};
    static const char *const names[2] = {"sendbuf", "recvbuf"};
    SC_CHECK(sc_buffers_kind(fn, 2, p, names, &kind));
  }
  sc_op_t o = {.coll = coll,
               .sendbuf = sendbuf,
               .recvbuf = recvbuf,
               .count = count,
               .dtype = dtype,
               .op = op,
               .root = root,
               .device = kind == SC_MEM_DEVICE};
  return req ? sc_op_submit(comm, &o, req) : sc_op_run_blocking(comm, &o);
}

static sc_result_t sc_allreduce_post(const void *sendbuf, void *recvbuf, size_t count,
                                     sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                     sc_request_t **req) {
  const char *fn = "sc_allreduce";
  SC_NEED_REQ(fn, req);
  SC_CHECK(sc_check_common(fn, comm, dtype, 1, op));
  SC_CHECK(sc_check_size(fn, count, 1, dtype));
  if (count) {
    SC_NEED_BUF(fn, sendbuf, "sendbuf");
    SC_NEED_BUF(fn, recvbuf, "recvbuf");
  }
  return sc_submit(fn, comm, SC_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0, req);
}

static sc_result_t sc_reduce_scatter_post(const void *sendbuf, void *recvbuf, size_t recvcount,
                                          sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                          sc_request_t **req) {
  const char *fn = "sc_reduce_scatter";
  SC_NEED_REQ(fn, req);
  SC_CHECK(sc_check_common(fn, comm, dtype, 1, op));
  SC_CHECK(sc_check_size(fn, recvcount, (size_t)comm->nranks, dtype));
  if (recvcount) {
    SC_NEED_BUF(fn, sendbuf, "sendbuf");
    SC_NEED_BUF(fn, recvbuf, "recvbuf");
  }
  return sc_submit(fn, comm, SC_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0,
                   req);
}

static sc_result_t sc_allgather_post(const void *sendbuf, void *recvbuf, size_t sendcount,
                                     sc_dtype_t dtype, sc_comm_t *comm, sc_request_t **req) {
  const char *fn = "sc_allgather";
  SC_NEED_REQ(fn, req);
  SC_CHECK(sc_check_common(fn, comm, dtype, 0, SC_SUM));
  SC_CHECK(sc_check_size(fn, sendcount, (size_t)comm->nranks, dtype));
  if (sendcount) {
    SC_NEED_BUF(fn, sendbuf, "sendbuf");
    SC_NEED_BUF(fn, recvbuf, "recvbuf");
  }
  return sc_submit(fn, comm, SC_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, SC_SUM, 0, req);
}

static sc_result_t sc_broadcast_post(const void *sendbuf, void *recvbuf, size_t count,
                                     sc_dtype_t dtype, int root, sc_comm_t *comm,
                                     sc_request_t **req) {
  const char *fn = "sc_broadcast";
  SC_NEED_REQ(fn, req);
  SC_CHECK(sc_check_common(fn, comm, dtype, 0, SC_SUM));
  SC_CHECK(sc_check_root(fn, comm, root));
  SC_CHECK(sc_check_size(fn, count, 1, dtype));
  if (count) {
    if (comm->rank == root) SC_NEED_BUF(fn, sendbuf, "sendbuf (on the root)");
    SC_NEED_BUF(fn, recvbuf, "recvbuf");
  }
  return sc_submit(fn, comm, SC_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, SC_SUM, root, req);
}

static sc_result_t sc_reduce_post(const void *sendbuf, void *recvbuf, size_t count,
                                  sc_dtype_t dtype, sc_redop_t op, int root, sc_comm_t *comm,
                                  sc_request_t **req) {
  const char *fn = "sc_reduce";
  SC_NEED_REQ(fn, req);
  SC_CHECK(sc_check_common(fn, comm, dtype, 1, op));
  SC_CHECK(sc_check_root(fn, comm, root));
  SC_CHECK(sc_check_size(fn, count, 1, dtype));
  if (count) {
    SC_NEED_BUF(fn, sendbuf, "sendbuf");
    if (comm->rank == root) SC_NEED_BUF(fn, recvbuf, "recvbuf (on the root)");
  }
  return sc_submit(fn, comm, SC_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, req);
}

static sc_result_t sc_barrier_post(sc_comm_t *comm, sc_request_t **req) {
  const char *fn = "sc_barrier";
  SC_NEED_REQ(fn, req);
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  return sc_submit(fn, comm, SC_COLL_BARRIER, NULL, NULL, 0, SC_UINT8, SC_SUM, 0, req);
}

/* Public entry points: non-blocking ones need a request; blocking ones pass
 * none and may run on the calling thread. */
#define SC_REQ_ARG(fn, req)                                                                        \
  do {                                                                                             \
    if (!(req)) return SC_ERR(SC_ERR_INVALID_ARG, "%s: req is NULL", fn);                          \
  } while (0)

sc_result_t sc_iallreduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                          sc_redop_t op, sc_comm_t *comm, sc_request_t **req) {
  SC_REQ_ARG("sc_iallreduce", req);
  return sc_allreduce_post(sendbuf, recvbuf, count, dtype, op, comm, req);
}

sc_result_t sc_allreduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         sc_redop_t op, sc_comm_t *comm) {
  return sc_allreduce_post(sendbuf, recvbuf, count, dtype, op, comm, NULL);
}

sc_result_t sc_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                               sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                               sc_request_t **req) {
  SC_REQ_ARG("sc_ireduce_scatter", req);
  return sc_reduce_scatter_post(sendbuf, recvbuf, recvcount, dtype, op, comm, req);
}

sc_result_t sc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                              sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm) {
  return sc_reduce_scatter_post(sendbuf, recvbuf, recvcount, dtype, op, comm, NULL);
}

sc_result_t sc_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, sc_dtype_t dtype,
                          sc_comm_t *comm, sc_request_t **req) {
  SC_REQ_ARG("sc_iallgather", req);
  return sc_allgather_post(sendbuf, recvbuf, sendcount, dtype, comm, req);
}

sc_result_t sc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, sc_dtype_t dtype,
                         sc_comm_t *comm) {
  return sc_allgather_post(sendbuf, recvbuf, sendcount, dtype, comm, NULL);
}

sc_result_t sc_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                          int root, sc_comm_t *comm, sc_request_t **req) {
  SC_REQ_ARG("sc_ibroadcast", req);
  return sc_broadcast_post(sendbuf, recvbuf, count, dtype, root, comm, req);
}

sc_result_t sc_broadcast(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         int root, sc_comm_t *comm) {
  return sc_broadcast_post(sendbuf, recvbuf, count, dtype, root, comm, NULL);
}

sc_result_t sc_ireduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                       sc_redop_t op, int root, sc_comm_t *comm, sc_request_t **req) {
  SC_REQ_ARG("sc_ireduce", req);
  return sc_reduce_post(sendbuf, recvbuf, count, dtype, op, root, comm, req);
}

sc_result_t sc_reduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                      sc_redop_t op, int root, sc_comm_t *comm) {
  return sc_reduce_post(sendbuf, recvbuf, count, dtype, op, root, comm, NULL);
}

sc_result_t sc_ibarrier(sc_comm_t *comm, sc_request_t **req) {
  SC_REQ_ARG("sc_ibarrier", req);
  return sc_barrier_post(comm, req);
}

sc_result_t sc_barrier(sc_comm_t *comm) {
  return sc_barrier_post(comm, NULL);
}
