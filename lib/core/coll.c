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
#include <stdlib.h>

#include "lib/core/comm.h"
#include "lib/core/device.h"
#include "lib/core/p2p.h"
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
  int root;      /* broadcast, reduce, gather and scatter only */
  /* alltoallv: sendcounts, sdispls, recvcounts, rdispls; allgatherv: recvcounts, displs */
  const size_t *vc[4];
  sc_comm_t *comm;
  sc_request_t **req; /* SC_FORM_NONBLOCKING */
  sc_stream_t stream; /* SC_FORM_STREAM */
} sc_coll_info_t;

static int coll_has_op(sc_coll_t c) {
  return c == SC_COLL_ALLREDUCE || c == SC_COLL_REDUCE_SCATTER || c == SC_COLL_REDUCE;
}

static int coll_has_root(sc_coll_t c) {
  return c == SC_COLL_BROADCAST || c == SC_COLL_REDUCE || c == SC_COLL_GATHER ||
         c == SC_COLL_SCATTER;
}

/* The collectives whose larger buffer holds count elements per rank. */
static int coll_per_rank(sc_coll_t c) {
  return c == SC_COLL_REDUCE_SCATTER || c == SC_COLL_ALLGATHER || c == SC_COLL_ALLTOALL ||
         c == SC_COLL_GATHER || c == SC_COLL_SCATTER;
}

/* The elements a v collective's array pair (counts, displacements) spans,
 * the end of its furthest block, into *end; its total count into *total. */
static sc_result_t coll_v_extent(const char *fn, const char *what, const size_t *counts,
                                 const size_t *displs, int n, size_t es, size_t *end,
                                 size_t *total) {
  *end = 0;
  *total = 0;
  for (int i = 0; i < n; i++) {
    if (counts[i] > SIZE_MAX / es || displs[i] > SIZE_MAX / es - counts[i] ||
        counts[i] > SIZE_MAX - *total)
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s block %d (%zu elements at %zu) overflows", fn, what,
                    i, counts[i], displs[i]);
    *total += counts[i];
    if (counts[i] && displs[i] + counts[i] > *end) *end = displs[i] + counts[i];
  }
  return SC_SUCCESS;
}

typedef struct coll_block {
  size_t displ, count;
  int rank;
} coll_block_t;

static int coll_by_displ(const void *a, const void *b) {
  size_t x = ((const coll_block_t *)a)->displ, y = ((const coll_block_t *)b)->displ;
  return x < y ? -1 : x > y;
}

/* The receive blocks (nonzero counts) of a v collective, none overlapping
 * another: ranks would otherwise write one place in an order that differs
 * between transports and runs. Blocks in rank order are checked in one
 * pass; any other order is sorted first (the only allocation, off the
 * common path). */
static sc_result_t coll_v_disjoint(const char *fn, const size_t *counts, const size_t *displs,
                                   int n) {
  int prev = -1, sorted = 1;
  for (int i = 0; i < n && sorted; i++) {
    if (!counts[i]) continue;
    if (prev >= 0 && displs[i] < displs[prev] + counts[prev])
      sorted = 0;
    else
      prev = i;
  }
  if (sorted) return SC_SUCCESS;
  coll_block_t *b = malloc((size_t)n * sizeof(*b));
  if (!b) return SC_ERR(SC_ERR_NOMEM, "%s: the order of %d receive blocks", fn, n);
  int m = 0;
  for (int i = 0; i < n; i++)
    if (counts[i]) b[m++] = (coll_block_t){displs[i], counts[i], i};
  qsort(b, (size_t)m, sizeof(*b), coll_by_displ);
  sc_result_t r = SC_SUCCESS;
  for (int k = 1; k < m && r == SC_SUCCESS; k++)
    if (b[k].displ < b[k - 1].displ + b[k - 1].count)
      r = SC_ERR(SC_ERR_INVALID_ARG,
                 "%s: the receive blocks of ranks %d (%zu elements at %zu) and %d (%zu at %zu) "
                 "overlap",
                 fn, b[k - 1].rank, b[k - 1].count, b[k - 1].displ, b[k].rank, b[k].count,
                 b[k].displ);
  free(b);
  return r;
}

/* Whether [a, a + alen) and [b, b + blen) share a byte. */
static int coll_overlap(const void *a, size_t alen, const void *b, size_t blen) {
  const uint8_t *x = a, *y = b;
  return alen && blen && x < y + blen && y < x + alen;
}

/* A v collective's arrays: none NULL, no block past the address space,
 * receive blocks apart, the uneven all-gather's own block as long as its
 * sendcount, the buffers apart (but the all-gather's in-place form);
 * *count becomes the op's count (elements received, or sent when more: 0
 * means no data). */
static sc_result_t coll_check_v(const sc_coll_info_t *in, size_t es, size_t *count, int *sends,
                                int *recvs) {
  const char *fn = in->fn;
  const sc_comm_t *comm = in->comm;
  const int n = comm->nranks, agv = in->coll == SC_COLL_ALLGATHERV;
  static const char *const names[2][4] = {{"sendcounts", "sdispls", "recvcounts", "rdispls"},
                                          {"", "", "recvcounts", "displs"}};
  for (int i = agv ? 2 : 0; i < 4; i++)
    if (!in->vc[i]) return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL", fn, names[agv][i]);
  size_t send_end = 0, sent = 0, recv_end = 0, received = 0;
  if (!agv) SC_CHECK(coll_v_extent(fn, "send", in->vc[0], in->vc[1], n, es, &send_end, &sent));
  SC_CHECK(coll_v_extent(fn, "receive", in->vc[2], in->vc[3], n, es, &recv_end, &received));
  SC_CHECK(coll_v_disjoint(fn, in->vc[2], in->vc[3], n));
  const uint8_t *own = NULL;
  if (agv) {
    if (in->count != in->vc[2][comm->rank])
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: sendcount %zu differs from recvcounts[%d] = %zu", fn,
                    in->count, comm->rank, in->vc[2][comm->rank]);
    sent = in->count;
    send_end = in->count;
    own = in->recvbuf ? (const uint8_t *)in->recvbuf + in->vc[3][comm->rank] * es : NULL;
  }
  if (in->sendbuf != own && coll_overlap(in->sendbuf, send_end * es, in->recvbuf, recv_end * es))
    return SC_ERR(SC_ERR_INVALID_ARG,
                  agv ? "%s: sendbuf overlaps recvbuf but is not its own block (recvbuf + "
                        "displs[rank]), the in-place form"
                      : "%s: sendbuf and recvbuf overlap: the uneven all-to-all has no in-place "
                        "form",
                  fn);
  *sends = sent != 0;
  *recvs = received != 0;
  *count = received > sent ? received : sent;
  return SC_SUCCESS;
}

/* The arguments of one call, every form alike; on success *kind is the
 * memory of its buffers. */
static sc_result_t sc_coll_check(const sc_coll_info_t *in, sc_mem_kind_t *kind, size_t *count) {
  const char *fn = in->fn;
  const sc_comm_t *comm = in->comm;
  *count = in->count;
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  const size_t es = sc_dtype_size(in->dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)in->dtype);
  if (coll_has_op(in->coll) && (unsigned)in->op > SC_AVG)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, (int)in->op);
  const int rooted = coll_has_root(in->coll);
  if (rooted && (in->root < 0 || in->root >= comm->nranks))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: root %d outside [0, %d)", fn, in->root, comm->nranks);
  /* The larger buffer holds count elements per rank for these. */
  const size_t mult = coll_per_rank(in->coll) ? (size_t)comm->nranks : 1;
  if (in->count > SIZE_MAX / es / mult)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: count %zu x %zu overflows the address space", fn,
                  in->count, mult);
  /* Only the buffers this rank's part uses: off the root, a broadcast's or
   * scatter's sendbuf and a reduce's or gather's recvbuf are never touched;
   * with a zero count, none is. */
  const int off_root = rooted && comm->rank != in->root;
  const int root_sends = in->coll == SC_COLL_BROADCAST || in->coll == SC_COLL_SCATTER;
  const int root_receives = in->coll == SC_COLL_REDUCE || in->coll == SC_COLL_GATHER;
  int sends = in->count != 0, recvs = in->count != 0;
  if (in->coll == SC_COLL_ALLTOALLV || in->coll == SC_COLL_ALLGATHERV) {
    size_t total = 0;
    SC_CHECK(coll_check_v(in, es, &total, &sends, &recvs));
    *count = total;
  }
  const char *names[2] = {NULL, NULL};
  if (sends) names[0] = !root_sends ? "sendbuf" : off_root ? NULL : "sendbuf (on the root)";
  if (recvs) names[1] = !root_receives ? "recvbuf" : off_root ? NULL : "recvbuf (on the root)";
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
  size_t count = in->count;
  SC_CHECK(sc_coll_check(in, &kind, &count));
  sc_op_t o = {.coll = in->coll,
               .sendbuf = in->sendbuf,
               .recvbuf = in->recvbuf,
               .count = count,
               .v = {in->vc[0], in->vc[1], in->vc[2], in->vc[3]},
               .dtype = in->dtype,
               .op = coll_has_op(in->coll) ? in->op : SC_SUM,
               .root = coll_has_root(in->coll) ? in->root : 0,
               .device = kind == SC_MEM_DEVICE};
  switch (in->form) {
  case SC_FORM_NONBLOCKING:
    return sc_op_submit(in->comm, &o, in->req);
  case SC_FORM_STREAM:
    return sc_stream_submit(in->fn, in->comm, &o, in->stream);
  default: {
    /* Inside sc_group_start/end: queued now, waited for by sc_group_end. */
    sc_result_t r;
    if (sc_group_take_coll(in->fn, in->comm, &o, &r)) return r;
    return sc_op_run_blocking(in->comm, &o);
  }
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

/* ---- all-to-all, gather, scatter, uneven all-gather ---- */

/* The description of a v collective's call: alltoallv's four arrays, or
 * allgatherv's two (sendcount in count). */
static sc_result_t coll_post_v(const char *fn, sc_coll_form_t form, sc_coll_t coll,
                               const void *sendbuf, void *recvbuf, size_t count,
                               const size_t *const vc[4], sc_dtype_t dtype, sc_comm_t *comm,
                               sc_request_t **req, sc_stream_t stream) {
  const sc_coll_info_t in = {.fn = fn,
                             .form = form,
                             .coll = coll,
                             .sendbuf = sendbuf,
                             .recvbuf = recvbuf,
                             .count = count,
                             .dtype = dtype,
                             .op = SC_SUM,
                             .vc = {vc[0], vc[1], vc[2], vc[3]},
                             .comm = comm,
                             .req = req,
                             .stream = stream};
  return sc_coll_enqueue(&in);
}

sc_result_t sc_alltoall(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                        sc_comm_t *comm) {
  return coll_post("sc_alltoall", SC_FORM_BLOCKING, SC_COLL_ALLTOALL, sendbuf, recvbuf, count,
                   dtype, SC_SUM, 0, comm, NULL, NULL);
}

sc_result_t sc_ialltoall(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         sc_comm_t *comm, sc_request_t **req) {
  return coll_post("sc_ialltoall", SC_FORM_NONBLOCKING, SC_COLL_ALLTOALL, sendbuf, recvbuf, count,
                   dtype, SC_SUM, 0, comm, req, NULL);
}

sc_result_t sc_alltoall_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                  sc_dtype_t dtype, sc_comm_t *comm, sc_stream_t stream) {
  return coll_post("sc_alltoall_on_stream", SC_FORM_STREAM, SC_COLL_ALLTOALL, sendbuf, recvbuf,
                   count, dtype, SC_SUM, 0, comm, NULL, stream);
}

sc_result_t sc_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                         void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                         sc_dtype_t dtype, sc_comm_t *comm) {
  const size_t *const vc[4] = {sendcounts, sdispls, recvcounts, rdispls};
  return coll_post_v("sc_alltoallv", SC_FORM_BLOCKING, SC_COLL_ALLTOALLV, sendbuf, recvbuf, 0, vc,
                     dtype, comm, NULL, NULL);
}

sc_result_t sc_ialltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                          void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                          sc_dtype_t dtype, sc_comm_t *comm, sc_request_t **req) {
  const size_t *const vc[4] = {sendcounts, sdispls, recvcounts, rdispls};
  return coll_post_v("sc_ialltoallv", SC_FORM_NONBLOCKING, SC_COLL_ALLTOALLV, sendbuf, recvbuf, 0,
                     vc, dtype, comm, req, NULL);
}

sc_result_t sc_alltoallv_on_stream(const void *sendbuf, const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                   const size_t *rdispls, sc_dtype_t dtype, sc_comm_t *comm,
                                   sc_stream_t stream) {
  const size_t *const vc[4] = {sendcounts, sdispls, recvcounts, rdispls};
  return coll_post_v("sc_alltoallv_on_stream", SC_FORM_STREAM, SC_COLL_ALLTOALLV, sendbuf, recvbuf,
                     0, vc, dtype, comm, NULL, stream);
}

sc_result_t sc_gather(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype, int root,
                      sc_comm_t *comm) {
  return coll_post("sc_gather", SC_FORM_BLOCKING, SC_COLL_GATHER, sendbuf, recvbuf, count, dtype,
                   SC_SUM, root, comm, NULL, NULL);
}

sc_result_t sc_igather(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype, int root,
                       sc_comm_t *comm, sc_request_t **req) {
  return coll_post("sc_igather", SC_FORM_NONBLOCKING, SC_COLL_GATHER, sendbuf, recvbuf, count,
                   dtype, SC_SUM, root, comm, req, NULL);
}

sc_result_t sc_gather_on_stream(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                                int root, sc_comm_t *comm, sc_stream_t stream) {
  return coll_post("sc_gather_on_stream", SC_FORM_STREAM, SC_COLL_GATHER, sendbuf, recvbuf, count,
                   dtype, SC_SUM, root, comm, NULL, stream);
}

sc_result_t sc_scatter(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype, int root,
                       sc_comm_t *comm) {
  return coll_post("sc_scatter", SC_FORM_BLOCKING, SC_COLL_SCATTER, sendbuf, recvbuf, count, dtype,
                   SC_SUM, root, comm, NULL, NULL);
}

sc_result_t sc_iscatter(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                        int root, sc_comm_t *comm, sc_request_t **req) {
  return coll_post("sc_iscatter", SC_FORM_NONBLOCKING, SC_COLL_SCATTER, sendbuf, recvbuf, count,
                   dtype, SC_SUM, root, comm, req, NULL);
}

sc_result_t sc_scatter_on_stream(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                                 int root, sc_comm_t *comm, sc_stream_t stream) {
  return coll_post("sc_scatter_on_stream", SC_FORM_STREAM, SC_COLL_SCATTER, sendbuf, recvbuf, count,
                   dtype, SC_SUM, root, comm, NULL, stream);
}

sc_result_t sc_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                          const size_t *recvcounts, const size_t *displs, sc_dtype_t dtype,
                          sc_comm_t *comm) {
  const size_t *const vc[4] = {NULL, NULL, recvcounts, displs};
  return coll_post_v("sc_allgatherv", SC_FORM_BLOCKING, SC_COLL_ALLGATHERV, sendbuf, recvbuf,
                     sendcount, vc, dtype, comm, NULL, NULL);
}

sc_result_t sc_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                           const size_t *recvcounts, const size_t *displs, sc_dtype_t dtype,
                           sc_comm_t *comm, sc_request_t **req) {
  const size_t *const vc[4] = {NULL, NULL, recvcounts, displs};
  return coll_post_v("sc_iallgatherv", SC_FORM_NONBLOCKING, SC_COLL_ALLGATHERV, sendbuf, recvbuf,
                     sendcount, vc, dtype, comm, req, NULL);
}

sc_result_t sc_allgatherv_on_stream(const void *sendbuf, size_t sendcount, void *recvbuf,
                                    const size_t *recvcounts, const size_t *displs,
                                    sc_dtype_t dtype, sc_comm_t *comm, sc_stream_t stream) {
  const size_t *const vc[4] = {NULL, NULL, recvcounts, displs};
  return coll_post_v("sc_allgatherv_on_stream", SC_FORM_STREAM, SC_COLL_ALLGATHERV, sendbuf,
                     recvbuf, sendcount, vc, dtype, comm, NULL, stream);
}
