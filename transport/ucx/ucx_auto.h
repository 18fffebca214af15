/* SPDX-License-Identifier: BSD-3-Clause */
/* What UCX offers SC_TRANSPORT=auto and sc-info: whether RDMA is here for it
 * and the opener of its row in transport/registry.c (the policy itself,
 * the capability bit and the address offset are the registry's). */
#ifndef SC_UCX_AUTO_H
#define SC_UCX_AUTO_H

#include <stddef.h>

#include "config.h"
#include "transport/transport.h"

#ifdef SC_HAVE_UCX
/* 1 when /sys/class/infiniband lists a device (RDMA hardware: IB, RoCE,
 * iWARP). Costs a directory read, unlike a UCP context (milliseconds), so
 * auto opens UCX only where this says it could find RDMA. */
int sc_ucx_rdma_devices_listed(void);

/* 1 when a resource line of ucp_context_print_info's text names an RDMA
 * transport (rc_*, ud_*, dc_*); pure, for sc-info and auto alike. */
int sc_ucx_info_has_rdma(const char *info);

/* 1 when the UCX transport tp (created by sc_ucx_transport) opened an RDMA
 * transport (after UCX_TLS / UCX_NET_DEVICES); 0 otherwise or on error. */
int sc_ucx_tp_has_rdma(sc_transport_t *tp);

/* sc_ucx_transport.create writing its address blob into `room` bytes of addr
 * (create itself uses SC_TP_ADDR_MAX): how auto fits it after the mux blob. */
sc_result_t sc_ucx_create_in(const sc_tp_config_t *cfg, sc_transport_t **out, void *addr,
                             size_t room, size_t *addrlen);

/* The UCX row's auto opener (sc_tp_auto_open_fn): where sysfs lists an RDMA
 * device, a UCX transport in `room` bytes of addr, kept (*tp) only when its
 * context found an RDMA transport (else an error saying which step failed).
 * Where no device is listed nothing is opened: a UCP context and worker
 * cost milliseconds per communicator (3-20 ms). */
sc_result_t sc_ucx_auto_open(const sc_tp_config_t *cfg, sc_transport_t **tp, void *addr,
                             size_t room, size_t *addrlen);
#endif

#endif
