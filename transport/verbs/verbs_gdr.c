/* SPDX-License-Identifier: BSD-3-Clause */
/* GPUDirect RDMA for the verbs transport: device buffers registered with the
 * HCA so that RDMA writes go from one GPU's memory to another's, as NCCL's
 * net_ib does. Preferred: dma-buf (the device runtime's dma-buf fd of the
 * range, ibv_reg_dmabuf_mr: upstream kernels, no extra module); else peer
 * memory (ibv_reg_mr on the device pointer, which only nvidia-peermem makes
 * work); else the executor stages device buffers through pinned host memory.
 *
 * Which of them works is found at communicator creation by registering a
 * small device allocation each way, since neither a module's presence nor a
 * device attribute proves that the driver, the kernel and the HCA agree; the
 * choice itself is sc_vb_gdr_plan (pure, unit-tested). Each rank publishes
 * its mode in its address blob, and a pair moves device buffers directly only
 * when both of its ranks register device memory (sc_vb_gdr_direct), so both
 * ends of every pair agree on whether a message is staged. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/verbs/verbs_internal.h"

#define GDR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* A device registration: a dma-buf MR keeps its fd until it is deregistered
 * (the fd is what the MR imported; closing it first would leave the MR's
 * lifetime to the driver's reference counting alone). */
typedef struct sc_vb_dev_mr {
  struct ibv_mr *mr;
  int fd; /* -1 for peer memory */
} sc_vb_dev_mr_t;

static sc_result_t reg_device(const sc_vb_api_t *api, struct ibv_pd *pd, sc_vb_gdr_mode_t mode,
                              uintptr_t addr, size_t len, sc_vb_dev_mr_t **out) {
  const sc_devrt_t *rt = sc_devrt();
  if (!rt) return SC_ERR(SC_ERR_INTERNAL, "verbs: a device buffer without a device runtime");
  sc_vb_dev_mr_t *h = calloc(1, sizeof(*h));
  if (!h) return SC_ERR(SC_ERR_NOMEM, "verbs: device registration");
  h->fd = -1;
  if (mode == SC_VB_GDR_DMABUF) {
    if (!api->reg_dmabuf_mr || !rt->dmabuf_fd) {
      free(h);
      return SC_ERR(SC_ERR_UNSUPPORTED, "verbs: no ibv_reg_dmabuf_mr or no dma-buf export in %s",
                    rt->name);
    }
    uintptr_t start;
    size_t size, off;
    sc_vb_dmabuf_range(addr, len, (size_t)sysconf(_SC_PAGESIZE), &start, &size, &off);
    uint64_t foff = 0;
    sc_result_t r = rt->dmabuf_fd((const void *)start, size, &h->fd, &foff);
    if (r != SC_SUCCESS) {
      free(h);
      return r;
    }
    h->mr = api->reg_dmabuf_mr(pd, foff, size, (uint64_t)start, h->fd, GDR_ACCESS);
    if (!h->mr) {
      int e = errno;
      close(h->fd);
      free(h);
      return SC_ERR(SC_ERR_SYSTEM, "verbs: ibv_reg_dmabuf_mr of %zu device bytes at %p: %s", size,
                    (void *)start, strerror(e));
    }
  } else if (mode == SC_VB_GDR_PEERMEM) {
    h->mr = api->reg_mr(pd, (void *)addr, len, GDR_ACCESS);
    if (!h->mr) {
      int e = errno;
      free(h);
      return SC_ERR(SC_ERR_SYSTEM,
                    "verbs: ibv_reg_mr of %zu device bytes at %p: %s (is nvidia-peermem loaded?)",
                    len, (void *)addr, strerror(e));
    }
  } else {
    free(h);
    return SC_ERR(SC_ERR_INTERNAL, "verbs: device registration in mode %s", sc_vb_gdr_name(mode));
  }
  *out = h;
  return SC_SUCCESS;
}

static void dereg_device(const sc_vb_api_t *api, sc_vb_dev_mr_t *h) {
  if (!h) return;
  if (h->mr) api->dereg_mr(h->mr);
  if (h->fd >= 0) close(h->fd);
  free(h);
}

sc_result_t sc_vb_gdr_reg(sc_vb_transport_t *tp, uintptr_t addr, size_t len, void **mr,
                          uint32_t *lkey, uint32_t *rkey) {
  sc_vb_dev_mr_t *h;
  SC_CHECK(reg_device(tp->api, tp->pd, tp->gdr, addr, len, &h));
  *mr = h;
  *lkey = h->mr->lkey;
  *rkey = h->mr->rkey;
  return SC_SUCCESS;
}

void sc_vb_gdr_dereg(sc_vb_transport_t *tp, void *mr) {
  dereg_device(tp->api, mr);
}

/* Whether registering a one-page device allocation in `mode` works. */
static int try_mode(const sc_vb_api_t *api, struct ibv_pd *pd, void *p, size_t len,
                    sc_vb_gdr_mode_t mode, char *why, size_t whylen) {
  sc_vb_dev_mr_t *h = NULL;
  if (reg_device(api, pd, mode, (uintptr_t)p, len, &h) != SC_SUCCESS) {
    char d[SC_ERRMSG_MAX];
    sc_error_get_detail(d, sizeof(d));
    size_t used = strlen(why);
    if (used < whylen)
      snprintf(why + used, whylen - used, "%s%s: %s", used ? "; " : "", sc_vb_gdr_name(mode), d);
    return 0;
  }
  dereg_device(api, h);
  return 1;
}

sc_vb_gdr_mode_t sc_vb_gdr_probe(const sc_vb_api_t *api, struct ibv_pd *pd, int want, char *why,
                                 size_t whylen) {
  sc_vb_gdr_caps_t caps = {0};
  why[0] = '\0';
  /* A failed way is an answer, not an error: the caller's last error stays. */
  char saved[SC_ERRMSG_MAX];
  sc_error_get_detail(saved, sizeof(saved));
  const sc_devrt_t *rt = sc_devrt();
  caps.have_device = rt && rt->device_count() > 0 && rt->current_device() >= 0;
  if (!caps.have_device) {
    snprintf(why, whylen, "no device runtime or no current device");
  } else if (want == SC_VB_GDR_WANT_STAGE) {
    snprintf(why, whylen, "SC_IB_GDR=staging");
  } else {
    /* 2 MiB: CUDA aligns allocations that large to 2 MiB, so the probed page
     * lies inside the allocation as every dma-buf range must. */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = NULL;
    if (rt->malloc_device(&p, (size_t)2 << 20) != SC_SUCCESS || !p) {
      snprintf(why, whylen, "no device memory for the probe");
    } else {
      if (want != SC_VB_GDR_WANT_PEERMEM)
        caps.dmabuf_ok = try_mode(api, pd, p, page, SC_VB_GDR_DMABUF, why, whylen);
      if (want == SC_VB_GDR_WANT_PEERMEM || (want == SC_VB_GDR_WANT_AUTO && !caps.dmabuf_ok))
        caps.peermem_ok = try_mode(api, pd, p, page, SC_VB_GDR_PEERMEM, why, whylen);
      rt->free_device(p);
    }
  }
  sc_error_set_detail(saved);
  sc_vb_gdr_mode_t m = sc_vb_gdr_plan(&caps, (sc_vb_gdr_want_t)want);
  if (m == SC_VB_GDR_DMABUF || m == SC_VB_GDR_PEERMEM) why[0] = '\0';
  return m;
}

/* The probe's answers in this process, by (HCA, GPU, SC_IB_GDR): whether a
 * registration works does not change while the process runs, and without
 * this every communicator (sc_comm_split, the fusion and P3 communicators)
 * would allocate device memory and register it again at creation. */
enum { GDR_CACHE = 8 };
static struct {
  char dev[SC_VB_NAME_MAX];
  int gpu, want;
  sc_vb_gdr_mode_t mode;
  char why[SC_ERRMSG_MAX];
} gdr_cache[GDR_CACHE];
static int gdr_cached;
static pthread_mutex_t gdr_lock = PTHREAD_MUTEX_INITIALIZER;

static sc_vb_gdr_mode_t probe_cached(sc_vb_transport_t *tp, char *why, size_t whylen) {
  const sc_devrt_t *rt = sc_devrt();
  int gpu = rt && rt->device_count() > 0 ? rt->current_device() : -1;
  pthread_mutex_lock(&gdr_lock);
  for (int i = 0; i < gdr_cached; i++)
    if (gdr_cache[i].gpu == gpu && gdr_cache[i].want == tp->env.gdr &&
        !strcmp(gdr_cache[i].dev, tp->dev.name)) {
      snprintf(why, whylen, "%s", gdr_cache[i].why);
      sc_vb_gdr_mode_t m = gdr_cache[i].mode;
      pthread_mutex_unlock(&gdr_lock);
      return m;
    }
  sc_vb_gdr_mode_t m = sc_vb_gdr_probe(tp->api, tp->pd, tp->env.gdr, why, whylen);
  if (gdr_cached < GDR_CACHE) {
    snprintf(gdr_cache[gdr_cached].dev, sizeof(gdr_cache[gdr_cached].dev), "%s", tp->dev.name);
    gdr_cache[gdr_cached].gpu = gpu;
    gdr_cache[gdr_cached].want = tp->env.gdr;
    gdr_cache[gdr_cached].mode = m;
    snprintf(gdr_cache[gdr_cached].why, sizeof(gdr_cache[gdr_cached].why), "%s", why);
    gdr_cached++;
  }
  pthread_mutex_unlock(&gdr_lock);
  return m;
}

void sc_vb_gdr_setup(sc_vb_transport_t *tp) {
  static atomic_int staged_logged;
  char why[SC_ERRMSG_MAX];
  tp->gdr = probe_cached(tp, why, sizeof(why));
  if (tp->gdr == SC_VB_GDR_STAGE && tp->env.gdr != SC_VB_GDR_WANT_AUTO &&
      tp->env.gdr != SC_VB_GDR_WANT_STAGE)
    SC_WARN(SC_SUBSYS_NET,
            "verbs: SC_IB_GDR asks for a registration that does not work here (%s): "
            "device buffers are staged through pinned host memory",
            why);
  else if (tp->gdr == SC_VB_GDR_STAGE && !atomic_exchange(&staged_logged, 1))
    SC_INFO(SC_SUBSYS_NET,
            "verbs: no GPUDirect RDMA on %s (%s): device buffers are staged "
            "through pinned host memory",
            tp->dev.name, why);
  SC_INFO(SC_SUBSYS_NET, "verbs: device buffers: %s", sc_vb_gdr_name(tp->gdr));
}

sc_result_t sc_vb_acquire(sc_vb_transport_t *tp, int peer, const sc_tp_req_t *r,
                          sc_vb_rc_entry_t **out) {
  if (!r->device) return sc_vb_rc_acquire(tp->rc, r->buf, r->len, out);
  if (!sc_vb_gdr_direct(tp->gdr, tp->peers[peer].blob.gdr))
    return SC_ERR(SC_ERR_INTERNAL,
                  "verbs: a device buffer for peer %d, but the pair stages (this rank: %s, "
                  "peer: %s; props device_mem is 0)",
                  peer, sc_vb_gdr_name(tp->gdr), sc_vb_gdr_name(tp->peers[peer].blob.gdr));
  /* The whole allocation, once: the chunks of a pipelined operation then hit
   * one entry, and a dma-buf never spans two allocations. */
  const sc_devrt_t *rt = sc_devrt();
  void *base = NULL;
  size_t size = 0;
  SC_CHECK(rt->mem_range(r->buf, &base, &size));
  if ((const char *)r->buf + r->len > (const char *)base + size)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "verbs: %zu device bytes at %p run past their allocation (%p, %zu bytes)", r->len,
                  r->buf, base, size);
  return sc_vb_rc_acquire_kind(tp->rc, SC_VB_MEM_DEVICE, base, size, out);
}
