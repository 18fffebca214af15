/* SPDX-License-Identifier: BSD-3-Clause */
/* What SC_TRANSPORT=auto does with UCX. The verdict is a pure function of
 * facts every rank holds identically after the bootstrap exchange (each
 * rank's capability bits, whether any pair spans two hosts) plus the build
 * and the request, so every rank picks the same transport for every pair;
 * a split verdict would leave ranks waiting on transports their peers never
 * opened. Verbs is never picked by auto: it is opt-in (SC_TRANSPORT=verbs). */
#ifndef SC_UCX_AUTO_H
#define SC_UCX_AUTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "transport/transport.h"

/* SC_TRANSPORT's choices, in lib/base/config.c's order. */
enum { SC_TP_AUTO = 0, SC_TP_TCP = 1, SC_TP_SHM = 2, SC_TP_UCX = 3, SC_TP_VERBS = 4 };

/* Capability bits a rank publishes in the bootstrap record. */
#define SC_TP_CAP_UCX_RDMA 0x1u /* a UCP context here opens an RDMA transport (rc, ud, dc) */

/* Under auto, a rank that probed RDMA publishes its UCX address after the
 * auto (mux) address, at this fixed offset of the record's address field
 * (the mux blob is 176 bytes; the rest is the UCX blob's room). */
#define SC_TP_AUTO_UCX_OFF 192
_Static_assert(SC_TP_AUTO_UCX_OFF < SC_TP_ADDR_MAX, "no room for a second address");

/* The transport index to run. requested: SC_TRANSPORT's index; ucx_built: this
 * build has UCX; caps: nranks capability words `stride` bytes apart;
 * cross_host: some pair of ranks is on two hosts. UCX only pays where it
 * reaches RDMA between hosts: same-host pairs are ours (shm) and TCP is ours
 * too, so auto takes UCX only when every rank reported RDMA. */
static inline int sc_tp_auto_choose(int requested, int ucx_built, int nranks, const void *caps,
                                    size_t stride, int cross_host) {
  if (requested != SC_TP_AUTO) return requested;
  if (!ucx_built || !cross_host || nranks < 2 || !caps) return SC_TP_AUTO;
  for (int i = 0; i < nranks; i++) {
    uint32_t c;
    const uint8_t *p = (const uint8_t *)caps + (size_t)i * stride;
    memcpy(&c, p, sizeof(c));
    if (!(c & SC_TP_CAP_UCX_RDMA)) return SC_TP_AUTO;
  }
  return SC_TP_UCX;
}

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
#endif

#endif
