/* SPDX-License-Identifier: BSD-3-Clause */
/* The collectives of symmetric matrices (K-FAC's Kronecker factors):
 * sc_allreduce_sym, sc_reduce_sym and sc_broadcast_sym pack the upper
 * triangle (kernels/sym_pack.h; on device buffers the device kernels),
 * run the dense collective on the d(d+1)/2 packed entries in place in a
 * scratch buffer, and unpack the result into the full d x d matrix. The
 * scratch is the communicator's, kept and grown (host and device apart);
 * one symmetric call at a time uses it. On device buffers the packing runs
 * on a stream of the scratch's and is waited for before the collective,
 * whose input must be complete when it is called (docs/CUDA.md). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "kernels/sym_pack.h"
#include "lib/base/dtype.h"
#include "lib/base/error.h"
#include "lib/core/comm.h"
#include "lib/core/device.h"

struct sc_sym {
  pthread_mutex_t lock;
  void *host;
  size_t host_bytes;
  const sc_devrt_t *rt;
  int device;
  void *dev, *stream, *event;
  size_t dev_bytes;
};

void sc_sym_free(struct sc_sym *s) {
  if (!s) return;
  free(s->host);
  if (s->rt) {
    if (s->dev) s->rt->free_device(s->dev);
    if (s->event) s->rt->event_destroy(s->event);
    if (s->stream) s->rt->stream_destroy(s->stream);
  }
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static sc_result_t sym_state(sc_comm_t *comm, struct sc_sym **out) {
  pthread_mutex_lock(&comm->lock);
  if (!comm->sym) {
    struct sc_sym *s = calloc(1, sizeof(*s));
    if (s) {
      pthread_mutex_init(&s->lock, NULL);
      s->device = -1;
    }
    comm->sym = s;
  }
  *out = comm->sym;
  pthread_mutex_unlock(&comm->lock);
  return *out ? SC_SUCCESS : SC_ERR(SC_ERR_NOMEM, "symmetric collectives' state");
}

/* The scratch of `bytes` for memory of `kind` (caller holds s->lock). */
static sc_result_t sym_scratch(struct sc_sym *s, sc_mem_kind_t kind, int device, size_t bytes,
                               void **out) {
  if (kind == SC_MEM_HOST) {
    if (s->host_bytes < bytes) {
      void *p = malloc(bytes);
      if (!p) return SC_ERR(SC_ERR_NOMEM, "symmetric scratch of %zu bytes", bytes);
      free(s->host);
      s->host = p;
      s->host_bytes = bytes;
    }
    *out = s->host;
    return SC_SUCCESS;
  }
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) return SC_ERR(SC_ERR_INTERNAL, "device buffers but no device runtime");
  if (s->rt && s->device != device) {
    if (s->dev) s->rt->free_device(s->dev);
    if (s->event) s->rt->event_destroy(s->event);
    if (s->stream) s->rt->stream_destroy(s->stream);
    s->dev = s->event = s->stream = NULL;
    s->dev_bytes = 0;
  }
  s->rt = rt;
  s->device = device;
  if (!s->stream) SC_CHECK(rt->stream_create(&s->stream));
  if (!s->event) SC_CHECK(rt->event_create(&s->event));
  if (s->dev_bytes < bytes) {
    void *p = NULL;
    SC_CHECK(rt->malloc_device(&p, bytes));
    if (s->dev) rt->free_device(s->dev);
    s->dev = p;
    s->dev_bytes = bytes;
  }
  *out = s->dev;
  return SC_SUCCESS;
}

/* Packs (unpack 0: dst packed from the full src) or unpacks (1), on the host
 * or on the scratch's stream, waited for. */
static sc_result_t sym_move(const sc_comm_t *comm, struct sc_sym *s, sc_mem_kind_t kind, int unpack,
                            void *dst, const void *src, size_t d, size_t es) {
  if (d == 0) return SC_SUCCESS;
  if (kind == SC_MEM_HOST) {
    if (unpack)
      sc_sym_unpack(dst, src, d, es);
    else
      sc_sym_pack(dst, src, d, es);
    return SC_SUCCESS;
  }
  SC_CHECK(unpack ? sc_dev_sym_unpack(s->rt, dst, src, d, es, s->stream)
                  : sc_dev_sym_pack(s->rt, dst, src, d, es, s->stream));
  SC_CHECK(s->rt->event_record(s->event, s->stream));
  return sc_dev_event_wait(s->rt, s->event, comm->cfg.timeout_ms, "symmetric packing");
}

typedef enum { SYM_ALLREDUCE, SYM_REDUCE, SYM_BROADCAST } sym_coll_t;

/* Checks one call; *kind and *device: the memory of its buffers. */
static sc_result_t sym_check(const char *fn, sym_coll_t c, const void *sendbuf, const void *recvbuf,
                             size_t d, sc_dtype_t dtype, sc_redop_t op, int root,
                             const sc_comm_t *comm, sc_mem_kind_t *kind, int *device) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  const size_t es = sc_dtype_size(dtype);
  if (es == 0) return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if (c != SYM_BROADCAST && (unsigned)op > SC_AVG)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, (int)op);
  if (c != SYM_ALLREDUCE && (root < 0 || root >= comm->nranks))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: root %d outside [0, %d)", fn, root, comm->nranks);
  if (d != 0 && (d > SIZE_MAX / d || d * d > SIZE_MAX / es))
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: a %zu x %zu matrix overflows the address space", fn, d,
                  d);
  const int off_root = c != SYM_ALLREDUCE && comm->rank != root;
  const char *names[2] = {NULL, NULL};
  if (d) {
    names[0] = c == SYM_BROADCAST && off_root ? NULL : "sendbuf";
    names[1] = c == SYM_REDUCE && off_root ? NULL : "recvbuf";
  }
  const void *bufs[2] = {names[0] ? sendbuf : NULL, names[1] ? recvbuf : NULL};
  for (int i = 0; i < 2; i++)
    if (names[i] && !bufs[i])
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with d = %zu", fn, names[i], d);
  SC_CHECK(sc_buffers_kind(fn, 2, bufs, names, kind));
  *device = *kind == SC_MEM_DEVICE ? sc_buffers_device(2, bufs) : -1;
  return SC_SUCCESS;
}

static sc_result_t sym_run(const char *fn, sym_coll_t c, const void *sendbuf, void *recvbuf,
                           size_t d, sc_dtype_t dtype, sc_redop_t op, int root, sc_comm_t *comm) {
  sc_mem_kind_t kind = SC_MEM_HOST;
  int device = -1;
  SC_CHECK(sym_check(fn, c, sendbuf, recvbuf, d, dtype, op, root, comm, &kind, &device));
  const size_t es = sc_dtype_size(dtype);
  const size_t count = (size_t)sc_sym_packed_count(d);
  struct sc_sym *s;
  SC_CHECK(sym_state(comm, &s));
  pthread_mutex_lock(&s->lock);
  void *packed = NULL;
  sc_result_t r = count ? sym_scratch(s, kind, device, count * es, &packed) : SC_SUCCESS;
  const int me_root = c == SYM_ALLREDUCE || comm->rank == root;
  /* Every rank's input but the broadcast's off the root. */
  if (r == SC_SUCCESS && (c != SYM_BROADCAST || me_root))
    r = sym_move(comm, s, kind, 0, packed, sendbuf, d, es);
  if (r == SC_SUCCESS) {
    switch (c) {
    case SYM_ALLREDUCE:
      r = sc_allreduce(packed, packed, count, dtype, op, comm);
      break;
    case SYM_REDUCE:
      r = sc_reduce(packed, me_root ? packed : NULL, count, dtype, op, root, comm);
      break;
    case SYM_BROADCAST:
      r = sc_broadcast(packed, packed, count, dtype, root, comm);
      break;
    }
  }
  if (r == SC_SUCCESS && (c != SYM_REDUCE || me_root))
    r = sym_move(comm, s, kind, 1, recvbuf, packed, d, es);
  pthread_mutex_unlock(&s->lock);
  return r;
}

sc_result_t sc_allreduce_sym(const void *sendbuf, void *recvbuf, size_t d, sc_dtype_t dtype,
                             sc_redop_t op, sc_comm_t *comm) {
  return sym_run("sc_allreduce_sym", SYM_ALLREDUCE, sendbuf, recvbuf, d, dtype, op, 0, comm);
}

sc_result_t sc_reduce_sym(const void *sendbuf, void *recvbuf, size_t d, sc_dtype_t dtype,
                          sc_redop_t op, int root, sc_comm_t *comm) {
  return sym_run("sc_reduce_sym", SYM_REDUCE, sendbuf, recvbuf, d, dtype, op, root, comm);
}

sc_result_t sc_broadcast_sym(const void *sendbuf, void *recvbuf, size_t d, sc_dtype_t dtype,
                             int root, sc_comm_t *comm) {
  return sym_run("sc_broadcast_sym", SYM_BROADCAST, sendbuf, recvbuf, d, dtype, SC_SUM, root, comm);
}
