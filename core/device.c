/* Device support at the API boundary: whether CUDA is usable, where a
 * pointer lives, the checks that refuse device buffers clearly (the device
 * data path through the transports is not built yet), and the stream-ordered
 * forms, which validate their arguments and then say what is missing.
 *
 * Cost for host buffers: the device count is asked once per process; with no
 * device visible (every machine without a GPU) the buffer check is one
 * relaxed atomic load. With a device, each buffer costs one
 * cudaPointerGetAttributes (about a microsecond). */
#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "core/comm.h"
#include "core/device.h"

#ifdef SC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int sc_device_count(void) {
#ifdef SC_HAVE_CUDA
  static atomic_int cached = -1;
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    /* Without a driver (or a GPU) this fails quickly; threads racing here
     * store the same answer. */
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      c = 0;
      (void)cudaGetLastError(); /* clear the sticky per-thread error */
    }
    v = c;
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v;
#else
  return 0;
#endif
}

int sc_cuda_available(void) {
  return sc_device_count() > 0;
}

int sc_current_device(void) {
#ifdef SC_HAVE_CUDA
  int d = -1;
  if (sc_device_count() > 0 && cudaGetDevice(&d) == cudaSuccess) return d;
  (void)cudaGetLastError();
#endif
  return -1;
}

sc_mem_type_t sc_mem_type_of(const void *ptr) {
  sc_mem_type_t t = {SC_MEM_HOST, -1};
#ifdef SC_HAVE_CUDA
  if (!ptr || sc_device_count() == 0) return t;
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    (void)cudaGetLastError(); /* an unknown pointer is host memory */
    return t;
  }
  /* Managed memory is readable by the host: the host path works on it. */
  if (a.type == cudaMemoryTypeDevice) {
    t.kind = SC_MEM_DEVICE;
    t.device = a.device;
  }
#else
  (void)ptr;
#endif
  return t;
}

static const char *kind_name(sc_mem_kind_t k) {
  return k == SC_MEM_DEVICE ? "CUDA device" : "host";
}

sc_result_t sc_buffers_verdict(const char *fn, int n, const sc_mem_type_t *types,
                               const char *const *names, int comm_device, int device_path) {
  int first = -1, device = -1;
  for (int i = 0; i < n; i++) {
    if (!names[i]) continue; /* absent buffer */
    if (first < 0) first = i;
    if (types[i].kind != types[first].kind)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "%s: %s is %s memory but %s is %s memory: one call's buffers must all be "
                    "host memory or all on the communicator's device",
                    fn, names[first], kind_name(types[first].kind), names[i],
                    kind_name(types[i].kind));
    if (types[i].kind == SC_MEM_DEVICE && types[i].device != comm_device)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "%s: %s is memory of CUDA device %d, not of the communicator's device %d", fn,
                    names[i], types[i].device, comm_device);
    if (types[i].kind == SC_MEM_DEVICE && device < 0) device = i;
  }
  if (device >= 0 && !device_path)
    return SC_ERR(SC_ERR_UNSUPPORTED,
                  "%s: %s is CUDA device memory: device buffers are not implemented yet in "
                  "libsparsecoll %d.%d.%d (pass host buffers)",
                  fn, names[device], SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH);
  return SC_SUCCESS;
}

sc_result_t sc_stream_verdict(const char *fn, int built, int ndevices, int n,
                              const sc_mem_type_t *types, const char *const *names,
                              int comm_device) {
  if (!built)
    return SC_ERR(SC_ERR_UNSUPPORTED, "%s: built without CUDA: stream forms need CUDA", fn);
  if (ndevices <= 0)
    return SC_ERR(SC_ERR_UNSUPPORTED, "%s: no CUDA device visible: stream forms need one", fn);
  for (int i = 0; i < n; i++)
    if (names[i] && types[i].kind != SC_MEM_DEVICE)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "%s: %s is host memory: stream forms take device buffers only", fn, names[i]);
  SC_CHECK(sc_buffers_verdict(fn, n, types, names, comm_device, 1));
  return SC_ERR(SC_ERR_UNSUPPORTED,
                "%s: stream-ordered execution is not implemented yet in libsparsecoll %d.%d.%d", fn,
                SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH);
}

sc_result_t sc_check_buffer_list(const char *fn, int n, const void *const *ptrs,
                                 const char *const *names) {
  if (sc_device_count() == 0) return SC_SUCCESS;
  if (n < 0 || n > SC_CHECK_BUFFERS_MAX)
    return SC_ERR(SC_ERR_INTERNAL, "%s: %d buffers to check, at most %d", fn, n,
                  SC_CHECK_BUFFERS_MAX);
  const char *used[SC_CHECK_BUFFERS_MAX];
  sc_mem_type_t t[SC_CHECK_BUFFERS_MAX];
  for (int i = 0; i < n; i++) {
    used[i] = ptrs[i] ? names[i] : NULL;
    t[i] = sc_mem_type_of(ptrs[i]);
  }
  return sc_buffers_verdict(fn, n, t, used, sc_current_device(), 0);
}

sc_result_t sc_check_buffers(const char *fn, const void *sendbuf, const void *recvbuf) {
  const void *p[2] = {sendbuf, recvbuf};
  static const char *const names[2] = {"sendbuf", "recvbuf"};
  return sc_check_buffer_list(fn, 2, p, names);
}

/* ---- the stream forms ---- */

/* The argument checks of the blocking forms that need no buffer access. */
static sc_result_t stream_args(const char *fn, sc_comm_t *comm, sc_dtype_t dtype, int has_op,
                               sc_redop_t op, int root) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
  if (sc_dtype_size(dtype) == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid dtype %d", fn, (int)dtype);
  if (has_op && (unsigned)op > SC_AVG)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid reduction op %d", fn, (int)op);
  if (root < 0 || root >= comm->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: root %d outside [0, %d)", fn, root, comm->nranks);
  return SC_SUCCESS;
}

/* The buffers' verdict: names[i] NULL marks a buffer the call does not use. */
static sc_result_t stream_buffers(const char *fn, size_t count, int n, const void *const *ptrs,
                                  const char *const *names) {
  const char *used[2];
  sc_mem_type_t t[2];
  for (int i = 0; i < n; i++) {
    used[i] = count ? names[i] : NULL;
    if (used[i] && !ptrs[i])
      return SC_ERR(SC_ERR_INVALID_ARG, "%s: %s is NULL with a non-zero count", fn, names[i]);
    t[i] = sc_mem_type_of(ptrs[i]);
  }
#ifdef SC_HAVE_CUDA
  const int built = 1;
#else
  const int built = 0;
#endif
  return sc_stream_verdict(fn, built, sc_device_count(), n, t, used, sc_current_device());
}

sc_result_t sc_allreduce_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                   sc_stream_t stream) {
  const char *fn = "sc_allreduce_on_stream";
  (void)stream;
  SC_CHECK(stream_args(fn, comm, dtype, 1, op, 0));
  const void *p[2] = {sendbuf, recvbuf};
  const char *names[2] = {"sendbuf", "recvbuf"};
  return stream_buffers(fn, count, 2, p, names);
}

sc_result_t sc_reduce_scatter_on_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                        sc_stream_t stream) {
  const char *fn = "sc_reduce_scatter_on_stream";
  (void)stream;
  SC_CHECK(stream_args(fn, comm, dtype, 1, op, 0));
  const void *p[2] = {sendbuf, recvbuf};
  const char *names[2] = {"sendbuf", "recvbuf"};
  return stream_buffers(fn, recvcount, 2, p, names);
}

sc_result_t sc_allgather_on_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   sc_dtype_t dtype, sc_comm_t *comm, sc_stream_t stream) {
  const char *fn = "sc_allgather_on_stream";
  (void)stream;
  SC_CHECK(stream_args(fn, comm, dtype, 0, SC_SUM, 0));
  const void *p[2] = {sendbuf, recvbuf};
  const char *names[2] = {"sendbuf", "recvbuf"};
  return stream_buffers(fn, sendcount, 2, p, names);
}

sc_result_t sc_broadcast_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   sc_dtype_t dtype, int root, sc_comm_t *comm,
                                   sc_stream_t stream) {
  const char *fn = "sc_broadcast_on_stream";
  (void)stream;
  SC_CHECK(stream_args(fn, comm, dtype, 0, SC_SUM, root));
  const void *p[2] = {sendbuf, recvbuf};
  /* Only the root's sendbuf is read. */
  const char *names[2] = {comm->rank == root ? "sendbuf (on the root)" : NULL, "recvbuf"};
  return stream_buffers(fn, count, 2, p, names);
}

sc_result_t sc_reduce_on_stream(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                                sc_redop_t op, int root, sc_comm_t *comm, sc_stream_t stream) {
  const char *fn = "sc_reduce_on_stream";
  (void)stream;
  SC_CHECK(stream_args(fn, comm, dtype, 1, op, root));
  const void *p[2] = {sendbuf, recvbuf};
  /* Only the root's recvbuf is written. */
  const char *names[2] = {"sendbuf", comm->rank == root ? "recvbuf (on the root)" : NULL};
  return stream_buffers(fn, count, 2, p, names);
}

sc_result_t sc_gtopk_allreduce_on_stream(void *grad, size_t n, sc_dtype_t dtype, size_t k,
                                         sc_select_t method, sc_ef_t *ef, sc_comm_t *comm,
                                         sc_stream_t stream) {
  const char *fn = "sc_gtopk_allreduce_on_stream";
  (void)stream;
  (void)k;
  (void)ef;
  SC_CHECK(stream_args(fn, comm, dtype, 0, SC_SUM, 0));
  if (dtype != SC_FLOAT16 && dtype != SC_BFLOAT16 && dtype != SC_FLOAT32 && dtype != SC_FLOAT64)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: dtype %d is not a float type", fn, (int)dtype);
  if (method != SC_SELECT_EXACT && method != SC_SELECT_GAUSSIAN)
    return SC_ERR(SC_ERR_INVALID_ARG, "%s: invalid selection method %d", fn, (int)method);
  const void *p[1] = {grad};
  const char *names[1] = {"grad"};
  return stream_buffers(fn, n, 1, p, names);
}
