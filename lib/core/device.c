/* SPDX-License-Identifier: BSD-3-Clause */
/* Device support at the API boundary: whether a device is usable, where a
 * pointer lives (both through the device runtime, kernels/devrt.h), and the
 * one classification of a call's buffers (sc_buffers_classify) that every
 * entry taking buffers goes through: host or device, which device, mixed,
 * and whether the call's data path takes that memory.
 *
 * Cost for host buffers: the device runtime is chosen once per process; with
 * none (every machine without a GPU) the buffer check asks nothing. With a
 * device, each buffer costs one pointer query (cudaPointerGetAttributes,
 * about a microsecond). */
#include <stdint.h>

#include "config.h"
#include "kernels/devrt.h"
#include "lib/core/comm.h"
#include "lib/core/device.h"

/* Through the device runtime (kernels/devrt.h): CUDA's answers, the test
 * stand-in's when SC_DEVRT_STANDIN names one (a test device: it counts as a
 * device here and for sc_cuda_available), none without either. */
int sc_device_count(void) {
  const sc_devrt_t *rt = sc_devrt();
  return rt ? rt->device_count() : 0;
}

int sc_cuda_available(void) {
  return sc_device_count() > 0;
}

int sc_current_device(void) {
  const sc_devrt_t *rt = sc_devrt();
  return rt && rt->device_count() > 0 ? rt->current_device() : -1;
}

/* Pinned and managed memory are readable by the host: host memory here. */
static sc_mem_type_t type_of(const sc_devrt_t *rt, int ndev, const void *ptr) {
  sc_mem_type_t t = {SC_MEM_HOST, -1};
  int device = -1;
  if (ptr && ndev > 0 && rt->pointer_device(ptr, &device)) {
    t.kind = SC_MEM_DEVICE;
    t.device = device;
  }
  return t;
}

sc_mem_type_t sc_mem_type_of(const void *ptr) {
  const sc_devrt_t *rt = sc_devrt();
  return type_of(rt, rt ? rt->device_count() : 0, ptr);
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
  return sc_buffers_verdict(fn, n, types, names, comm_device, 1);
}

sc_result_t sc_buffers_classify(const char *fn, sc_buf_path_t path, int n, const void *const *ptrs,
                                const char *const *names, sc_mem_kind_t *kind) {
  *kind = SC_MEM_HOST;
  const sc_devrt_t *rt = sc_devrt();
  const int ndev = rt ? rt->device_count() : 0;
  if (ndev == 0 && path != SC_PATH_STREAM) return SC_SUCCESS;
  if (n < 0 || n > SC_CHECK_BUFFERS_MAX)
    return SC_ERR(SC_ERR_INTERNAL, "%s: %d buffers to check, at most %d", fn, n,
                  SC_CHECK_BUFFERS_MAX);
  const char *used[SC_CHECK_BUFFERS_MAX];
  sc_mem_type_t t[SC_CHECK_BUFFERS_MAX];
  int device = 0;
  for (int i = 0; i < n; i++) {
    used[i] = ptrs[i] ? names[i] : NULL;
    t[i] = type_of(rt, ndev, ptrs[i]);
    if (used[i] && t[i].kind == SC_MEM_DEVICE) device = 1;
  }
  const int current = ndev > 0 ? rt->current_device() : -1;
  if (path == SC_PATH_STREAM) {
#ifdef SC_HAVE_CUDA
    const int built = 1;
#else
    const int built = rt != NULL; /* the stand-in (kernels/devrt.h) */
#endif
    SC_CHECK(sc_stream_verdict(fn, built, ndev, n, t, used, current));
  } else {
    SC_CHECK(sc_buffers_verdict(fn, n, t, used, current, path == SC_PATH_ANY));
  }
  if (device) *kind = SC_MEM_DEVICE;
  return SC_SUCCESS;
}

int sc_buffers_device(int n, const void *const *ptrs) {
  const sc_devrt_t *rt = sc_devrt();
  const int ndev = rt ? rt->device_count() : 0;
  for (int i = 0; i < n; i++) {
    sc_mem_type_t t = type_of(rt, ndev, ptrs[i]);
    if (t.kind == SC_MEM_DEVICE) return t.device;
  }
  return -1;
}

sc_result_t sc_buffers_kind(const char *fn, int n, const void *const *ptrs,
                            const char *const *names, sc_mem_kind_t *kind) {
  return sc_buffers_classify(fn, SC_PATH_ANY, n, ptrs, names, kind);
}
