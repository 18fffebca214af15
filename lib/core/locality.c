/* SPDX-License-Identifier: BSD-3-Clause */
/* Which ranks share a host, from the one notion the library has of it: the
 * transport's props (transport.h). Two ranks are on one host when the
 * transport says SC_TP_SAME_HOST or SC_TP_SAME_PROCESS for the pair; the
 * props answer alike on every rank, so every rank computes the same map.
 * Hosts are numbered in the order of their lowest rank. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/config.h"
#include "lib/base/socket.h"

#include "lib/base/log.h"
#include "lib/core/comm.h"

/* Reads the pairs (r, first rank of each known host) only: a host is a class
 * of ranks, so one member stands for all of it. O(nranks * nhosts) props. */
sc_result_t sc_locality_init(sc_comm_t *comm) {
  sc_tune_state_t *t = &comm->tune;
  const int p = comm->nranks;
  sc_transport_t *tp = comm->tp;
  if (p > 1 && !tp->ops->props)
    return SC_ERR(SC_ERR_INTERNAL, "transport %s describes no links (props)", tp->ops->name);
  int *host_of = malloc((size_t)p * sizeof(int));
  int *first = malloc((size_t)p * sizeof(int)); /* lowest rank of each host */
  int *size = calloc((size_t)p, sizeof(int));
  if (!host_of || !first || !size) {
    free(host_of);
    free(first);
    free(size);
    return SC_ERR(SC_ERR_NOMEM, "host map of %d ranks", p);
  }
  int nh = 0;
  sc_result_t r = SC_SUCCESS;
  for (int a = 0; a < p && r == SC_SUCCESS; a++) {
    host_of[a] = -1;
    for (int h = 0; h < nh && host_of[a] < 0; h++) {
      sc_tp_props_t pr;
      r = tp->ops->props(tp, a, first[h], &pr);
      if (r != SC_SUCCESS) break;
      if (pr.locality != SC_TP_OTHER_HOST) host_of[a] = h;
    }
    if (r == SC_SUCCESS && host_of[a] < 0) {
      first[nh] = a;
      host_of[a] = nh++;
    }
    if (r == SC_SUCCESS) size[host_of[a]]++;
  }
  long rph = 0;
  if (r == SC_SUCCESS) r = sc_config_long("SC_RANKS_PER_HOST", 0, SC_RANKS_MAX, &rph);
  if (r == SC_SUCCESS && rph > 0) { /* emulated hosts: numbered by their lowest rank too */
    memset(size, 0, (size_t)p * sizeof(int));
    for (int a = 0; a < p; a++) size[host_of[a] = a / (int)rph]++;
    nh = (p + (int)rph - 1) / (int)rph;
  }
  if (r == SC_SUCCESS) {
    t->host_of = host_of;
    t->nhosts = nh;
    t->host_index = host_of[comm->rank];
    t->local_size = size[t->host_index];
    t->local_rank = 0;
    for (int a = 0; a < comm->rank; a++) t->local_rank += host_of[a] == t->host_index;
    SC_INFO(SC_SUBSYS_TUNE, "locality: %d host%s; this rank is local rank %d of %d on host %d", nh,
            nh == 1 ? "" : "s", t->local_rank, t->local_size, t->host_index);
  } else {
    free(host_of);
  }
  free(first);
  free(size);
  return r;
}

sc_result_t sc_comm_local(const sc_comm_t *comm, int *local_rank, int *local_size, int *host_index,
                          int *nhosts) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_local: NULL communicator");
  /* The map lives until sc_comm_destroy, so an aborted communicator still
   * answers, as sc_comm_rank does. */
  if (!comm->tune_ready || !comm->tune.host_of)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_local: communicator not initialised");
  if (local_rank) *local_rank = comm->tune.local_rank;
  if (local_size) *local_size = comm->tune.local_size;
  if (host_index) *host_index = comm->tune.host_index;
  if (nhosts) *nhosts = comm->tune.nhosts;
  return SC_SUCCESS;
}
