/* SPDX-License-Identifier: BSD-3-Clause */
/* libibverbs through dlopen, device and port selection, sc-info's listing. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_near.h"

static sc_vb_api_t api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static char api_err[256];
static int api_ok;

#define LOAD(field, sym)                                                                           \
  do {                                                                                             \
    *(void **)(&api.field) = dlsym(lib, sym);                                                      \
    if (!api.field) {                                                                              \
      snprintf(api_err, sizeof(api_err), "libibverbs.so.1 lacks %s", sym);                         \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

static void api_load(void) {
  void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(api_err, sizeof(api_err), "libibverbs.so.1 cannot be loaded (%s; install rdma-core)",
             e ? e : "?");
    return;
  }
  LOAD(get_device_list, "ibv_get_device_list");
  LOAD(free_device_list, "ibv_free_device_list");
  LOAD(get_device_name, "ibv_get_device_name");
  LOAD(open_device, "ibv_open_device");
  LOAD(close_device, "ibv_close_device");
  LOAD(query_device, "ibv_query_device");
  LOAD(query_port, "ibv_query_port");
  LOAD(query_gid, "ibv_query_gid");
  LOAD(alloc_pd, "ibv_alloc_pd");
  LOAD(dealloc_pd, "ibv_dealloc_pd");
  LOAD(reg_mr, "ibv_reg_mr");
  LOAD(dereg_mr, "ibv_dereg_mr");
  LOAD(create_comp_channel, "ibv_create_comp_channel");
  LOAD(destroy_comp_channel, "ibv_destroy_comp_channel");
  LOAD(create_cq, "ibv_create_cq");
  LOAD(destroy_cq, "ibv_destroy_cq");
  LOAD(create_qp, "ibv_create_qp");
  LOAD(modify_qp, "ibv_modify_qp");
  LOAD(destroy_qp, "ibv_destroy_qp");
  LOAD(get_cq_event, "ibv_get_cq_event");
  LOAD(ack_cq_events, "ibv_ack_cq_events");
  LOAD(get_async_event, "ibv_get_async_event");
  LOAD(ack_async_event, "ibv_ack_async_event");
  LOAD(wc_status_str, "ibv_wc_status_str");
  LOAD(event_type_str, "ibv_event_type_str");
  *(void **)(&api.reg_dmabuf_mr) = dlsym(lib, "ibv_reg_dmabuf_mr"); /* optional */
  api_ok = 1;                                                       /* lib stays loaded */
}

sc_result_t sc_vb_api_get(const sc_vb_api_t **out) {
  pthread_once(&api_once, api_load);
  if (!api_ok) return SC_ERR(SC_ERR_UNSUPPORTED, "no RDMA device: %s", api_err);
  *out = &api;
  return SC_SUCCESS;
}

int sc_vb_query_port(const sc_vb_api_t *a, struct ibv_context *ctx, uint8_t port,
                     struct ibv_port_attr *attr) {
  /* As verbs.h's inline wrapper does, without naming the exported symbol. */
  struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
  memset(attr, 0, sizeof(*attr));
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  return a->query_port(ctx, port, (struct _compat_ibv_port_attr *)attr);
}

/* The device list, or SC_ERR_UNSUPPORTED "no RDMA device: ..." naming the cause. */
static sc_result_t device_list(const sc_vb_api_t *a, struct ibv_device ***list, int *n, char *why,
                               size_t whylen) {
  errno = 0;
  *list = a->get_device_list(n);
  if (!*list) {
    *n = 0;
    snprintf(why, whylen, "ibv_get_device_list failed (%s; is the kernel's RDMA support loaded?)",
             strerror(errno ? errno : ENODEV));
    return SC_SUCCESS;
  }
  if (*n == 0) snprintf(why, whylen, "libibverbs lists no device (/sys/class/infiniband is empty)");
  return SC_SUCCESS;
}

/* With SC_IB_HCA unset, a rank that uses a GPU tries the RDMA devices nearest
 * it first (verbs_near.h): order[] and score[] (by device index, for the log)
 * and 0, or -1 (list order) without a GPU. */
static int near_order(const char *const *names, int n, int *order, int *score) {
  char gpu[512], link[128], path[64][256];
  const char *paths[64];
  int gnuma, numa[64];
  if (sc_vb_gpu_pci(-1, gpu, sizeof(gpu), &gnuma) != 0) return -1;
  for (int i = 0; i < n; i++) {
    snprintf(link, sizeof(link), "/sys/class/infiniband/%.64s/device", names[i]);
    if (sc_vb_sysfs_pci(link, path[i], sizeof(path[i]), &numa[i]) != 0) numa[i] = -1;
    paths[i] = path[i];
    score[i] = sc_vb_near_score(gpu, gnuma, paths[i], numa[i]);
  }
  sc_vb_near_order(gpu, gnuma, paths, numa, n, order);
  return 0;
}

sc_result_t sc_vb_open(const sc_vb_api_t *a, const sc_vb_hca_spec_t *spec, sc_vb_dev_t *out) {
  memset(out, 0, sizeof(*out));
  struct ibv_device **list;
  int n;
  char why[200] = "";
  SC_CHECK(device_list(a, &list, &n, why, sizeof(why)));
  const char *names[64];
  int nn = n < 64 ? n : 64;
  for (int i = 0; i < nn; i++) names[i] = a->get_device_name(list[i]);
  sc_result_t r = sc_vb_check_devices(spec, names, nn, why);
  if (r != SC_SUCCESS) {
    if (list) a->free_device_list(list);
    return r;
  }
  int order[64], score[64], chosen = -1;
  int near = spec->n == 0 ? near_order(names, nn, order, score) : -1;
  char seen[256] = "";
  size_t used = 0;
  for (int k = 0; k < nn && !out->ctx; k++) {
    int i = near >= 0 ? order[k] : k;
    if (!sc_vb_hca_match(spec, names[i], 0)) continue;
    struct ibv_context *ctx = a->open_device(list[i]);
    if (!ctx) {
      used += (size_t)snprintf(seen + used, used < sizeof(seen) ? sizeof(seen) - used : 0,
                               "%s: cannot open (%s); ", names[i], strerror(errno));
      continue;
    }
    struct ibv_device_attr dattr;
    if (a->query_device(ctx, &dattr) != 0) {
      a->close_device(ctx);
      continue;
    }
    for (int p = 1; p <= dattr.phys_port_cnt && !out->ctx; p++) {
      struct ibv_port_attr pa;
      if (!sc_vb_hca_match(spec, names[i], p) || sc_vb_query_port(a, ctx, (uint8_t)p, &pa) != 0)
        continue;
      if (pa.state != IBV_PORT_ACTIVE) {
        used += (size_t)snprintf(seen + used, used < sizeof(seen) ? sizeof(seen) - used : 0,
                                 "%s:%d is not active; ", names[i], p);
        continue;
      }
      out->ctx = ctx;
      out->port = p;
      out->pattr = pa;
      out->dattr = dattr;
      chosen = i;
      snprintf(out->name, sizeof(out->name), "%s", names[i]);
    }
    if (!out->ctx) a->close_device(ctx);
  }
  a->free_device_list(list);
  if (!out->ctx)
    return SC_ERR(SC_ERR_UNSUPPORTED, "no RDMA device: no active port among those selected (%s)",
                  seen[0] ? seen : "none matched");
  SC_INFO(SC_SUBSYS_NET, "verbs: using %s port %d (%s%s%s)", out->name, out->port,
          out->pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
          near >= 0 ? "; the device nearest this rank's GPU: " : "",
          near >= 0 ? sc_vb_near_level(score[chosen]) : "");
  return SC_SUCCESS;
}

static int read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

int sc_vb_pick_gid(const char *dev, int port, int want, int table_len) {
  if (want >= 0) return want;
  int v2 = -1;
  for (int i = 0; i < table_len && i < 256; i++) {
    char path[256], type[64], gid[64];
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port,
             i);
    if (read_line(path, type, sizeof(type)) != 0 || strcasecmp(type, "RoCE v2") != 0) continue;
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gids/%d", dev, port, i);
    if (read_line(path, gid, sizeof(gid)) != 0) continue;
    if (!strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30)) return i;
    if (v2 < 0) v2 = i;
  }
  return v2 >= 0 ? v2 : 0;
}

static const char *state_name(int s) {
  switch (s) {
  case IBV_PORT_DOWN:
    return "DOWN";
  case IBV_PORT_INIT:
    return "INIT";
  case IBV_PORT_ARMED:
    return "ARMED";
  case IBV_PORT_ACTIVE:
    return "ACTIVE";
  default:
    return "?";
  }
}

/* How device buffers would travel through this device (the probe a
 * communicator makes, with SC_IB_GDR as set). */
static void print_gdr(FILE *f, const sc_vb_api_t *a, struct ibv_context *ctx, const char *name) {
  sc_vb_env_t env;
  int want = sc_vb_read_env(&env) == SC_SUCCESS ? env.gdr : SC_VB_GDR_WANT_AUTO;
  struct ibv_pd *pd = a->alloc_pd(ctx);
  if (!pd) return;
  char why[SC_ERRMSG_MAX];
  sc_vb_gdr_mode_t m = sc_vb_gdr_probe(a, pd, want, why, sizeof(why));
  fprintf(f, "  %s GPUDirect RDMA: %s%s%s%s\n", name, sc_vb_gdr_name(m), why[0] ? " (" : "", why,
          why[0] ? ")" : "");
  a->dealloc_pd(pd);
}

void sc_vb_print_devices(FILE *f) {
  const sc_vb_api_t *a;
  if (sc_vb_api_get(&a) != SC_SUCCESS) {
    char d[SC_ERRMSG_MAX];
    sc_error_get_detail(d, sizeof(d));
    fprintf(f, "RDMA devices: no RDMA devices (%s)\n", d);
    return;
  }
  struct ibv_device **list;
  int n;
  char why[200] = "";
  device_list(a, &list, &n, why, sizeof(why));
  if (n == 0) {
    fprintf(f, "RDMA devices: no RDMA devices (%s)\n", why);
    if (list) a->free_device_list(list);
    return;
  }
  fprintf(f, "RDMA devices: %d\n", n);
  for (int i = 0; i < n; i++) {
    const char *name = a->get_device_name(list[i]);
    struct ibv_context *ctx = a->open_device(list[i]);
    struct ibv_device_attr da;
    if (!ctx || a->query_device(ctx, &da) != 0) {
      fprintf(f, "  %s: cannot open or query (%s)\n", name, strerror(errno));
      if (ctx) a->close_device(ctx);
      continue;
    }
    for (int p = 1; p <= da.phys_port_cnt; p++) {
      struct ibv_port_attr pa;
      if (sc_vb_query_port(a, ctx, (uint8_t)p, &pa) != 0) continue;
      uint32_t mbps = sc_vb_port_mbps(pa.active_width, pa.active_speed);
      fprintf(f, "  %s:%d %s, %s, %.1f Gbit/s, MTU %d, LID %u, %d GIDs\n", name, p,
              state_name(pa.state),
              pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand",
              mbps / 1000.0, 128 << pa.active_mtu, pa.lid, pa.gid_tbl_len);
    }
    print_gdr(f, a, ctx, name);
    a->close_device(ctx);
  }
  a->free_device_list(list);
}
