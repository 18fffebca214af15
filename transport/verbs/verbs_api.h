/* SPDX-License-Identifier: BSD-3-Clause */
/* libibverbs loaded at run time: the library never links it, so it loads
 * and runs where rdma-core is absent, and SC_TRANSPORT=verbs then says why.
 * Only the exported functions go through this table; the data-path calls
 * (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) are
 * inline in verbs.h and go through the provider's ops, needing no symbol. */
#ifndef SC_VERBS_API_H
#define SC_VERBS_API_H

#include <stdio.h>

#include <infiniband/verbs.h>

#include "sparsecoll.h"
#include "transport/verbs/verbs_proto.h"

typedef struct sc_vb_api {
  struct ibv_device **(*get_device_list)(int *n);
  void (*free_device_list)(struct ibv_device **list);
  const char *(*get_device_name)(struct ibv_device *dev);
  struct ibv_context *(*open_device)(struct ibv_device *dev);
  int (*close_device)(struct ibv_context *ctx);
  int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
  /* the exported (compat) entry; sc_vb_query_port prefers the provider's op */
  int (*query_port)(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr);
  int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
  /* NULL before rdma-core 34 */
  struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
                                  int fd, int access);
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
  int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
  struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_ctx,
                              struct ibv_comp_channel *ch, int vector);
  int (*destroy_cq)(struct ibv_cq *cq);
  struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
  int (*destroy_qp)(struct ibv_qp *qp);
  int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_ctx);
  void (*ack_cq_events)(struct ibv_cq *cq, unsigned int n);
  int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *ev);
  void (*ack_async_event)(struct ibv_async_event *ev);
  const char *(*wc_status_str)(enum ibv_wc_status st);
  const char *(*event_type_str)(enum ibv_event_type ev);
} sc_vb_api_t;

/* Loads libibverbs.so.1 once per process. SC_ERR_UNSUPPORTED "no RDMA device:
 * libibverbs.so.1 ..." when it or one of its functions is missing. */
sc_result_t sc_vb_api_get(const sc_vb_api_t **out);

int sc_vb_query_port(const sc_vb_api_t *api, struct ibv_context *ctx, uint8_t port,
                     struct ibv_port_attr *attr);

/* The device and port SC_IB_HCA selects: the first ACTIVE port of the first
 * matching device. Errors as sc_vb_check_devices, and SC_ERR_UNSUPPORTED
 * "no RDMA device: ..." when no selected port is active. */
typedef struct sc_vb_dev {
  struct ibv_context *ctx;
  char name[SC_VB_NAME_MAX];
  int port;
  struct ibv_port_attr pattr;
  struct ibv_device_attr dattr;
} sc_vb_dev_t;

sc_result_t sc_vb_open(const sc_vb_api_t *api, const sc_vb_hca_spec_t *spec, sc_vb_dev_t *out);

/* The GID index SC_IB_GID_INDEX asks for, or for -1 the port's RoCE v2 entry with an
 * IPv4-mapped address (from sysfs, as NCCL does), else 0. */
int sc_vb_pick_gid(const char *dev, int port, int want, int table_len);

/* Which registration of device memory works on pd (registering a small device
 * allocation each way SC_IB_GDR allows) and what sc_vb_gdr_plan makes of it;
 * why says what failed when the answer stages (verbs_gdr.c). */
sc_vb_gdr_mode_t sc_vb_gdr_probe(const sc_vb_api_t *api, struct ibv_pd *pd, int want, char *why,
                                 size_t whylen);

/* sc-info: every device and port with state, link layer, width, speed and MTU, or
 * "no RDMA devices" with the reason. */
void sc_vb_print_devices(FILE *f);

#endif
