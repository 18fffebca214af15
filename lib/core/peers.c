/* SPDX-License-Identifier: BSD-3-Clause */
/* The peer table a rank keeps: of the records exchanged at bootstrap
 * (sc_peer_head_t after each transport address, which the transports copy
 * at connect_all), the pid and the watch address per rank and the host name
 * once per distinct host. Error texts, the watch and the
 * fingerprint name peers by host and pid from it. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/base/socket.h"
#include "lib/core/comm.h"

typedef struct host_key {
  const char *name;
  int rank;
} host_key_t;

static int host_key_cmp(const void *x, const void *y) {
  const host_key_t *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  return c ? c : (a->rank > b->rank) - (a->rank < b->rank);
}

void sc_comm_peers_free(sc_comm_t *comm) {
  free(comm->peers);
  free(comm->hosts);
  comm->peers = NULL;
  comm->hosts = NULL;
}

/* Descriptors a rank keeps apart from its peers' connections: the lanes'
 * listeners and doorbells, the liveness watch, what the application and the
 * launcher hold. */
#define SC_FD_RESERVE 128

sc_result_t sc_comm_peers_keep(sc_comm_t *comm, const sc_peer_head_t *head, size_t stride) {
  const int n = comm->nranks;
  /* Sorted by name, the distinct names are the runs: O(P log P) where
   * comparing every record with every host seen could be P^2. */
  host_key_t *k = malloc((size_t)n * sizeof(*k));
  sc_peer_t *peers = calloc((size_t)n, sizeof(*peers));
  if (!k || !peers) {
    free(k);
    free(peers);
    return SC_ERR(SC_ERR_NOMEM, "peer table of %d ranks", n);
  }
  for (int i = 0; i < n; i++)
    k[i] = (host_key_t){.name = sc_peer_head_at(head, stride, i)->hostname, .rank = i};
  qsort(k, (size_t)n, sizeof(*k), host_key_cmp);
  int nhosts = 0;
  for (int i = 0; i < n; i++) nhosts += i == 0 || strcmp(k[i].name, k[i - 1].name) != 0;
  char(*hosts)[SC_HOSTNAME_LEN] = calloc((size_t)(nhosts ? nhosts : 1), sizeof(*hosts));
  if (!hosts) {
    free(k);
    free(peers);
    return SC_ERR(SC_ERR_NOMEM, "host names of %d ranks", n);
  }
  /* The fewest peers any rank's descriptors hold, and the fewest channels any
   * rank's shared-memory budget holds: every rank computes the same from the
   * same records (lib/core/select.c). */
  const uint64_t pair = comm->tpops ? comm->tpops->pair_bytes : 0;
  sc_tune_state_t *t = &comm->tune;
  t->fd_peers = t->shm_pairs = INT32_MAX;
  t->local_max = 0;
  int h = -1;
  for (int i = 0, run = 0; i < n; i++) {
    if (i == 0 || strcmp(k[i].name, k[i - 1].name) != 0) {
      h++;
      memcpy(hosts[h], k[i].name, SC_HOSTNAME_LEN - 1);
      for (run = 1; i + run < n && !strcmp(k[i + run].name, k[i].name);) run++;
      if (run > t->local_max) t->local_max = run;
    }
    const sc_peer_head_t *p = sc_peer_head_at(head, stride, k[i].rank);
    sc_peer_t *q = &peers[k[i].rank];
    q->pid = p->pid;
    q->host = (uint32_t)h;
    memcpy(q->watch_addr, p->watch_addr, sizeof(q->watch_addr));
    /* A limit no job of SC_RANKS_MAX ranks reaches bounds nothing. */
    if (p->nofile > 0 && p->nofile < 4 * SC_RANKS_MAX) {
      const int per = p->fds_per_peer > 0 ? p->fds_per_peer : 1;
      int32_t held = (p->nofile - SC_FD_RESERVE) / per;
      if (held < 1) held = 1;
      if (held < t->fd_peers) t->fd_peers = held;
    }
    if (pair && run > 1) {
      const uint64_t budget =
          p->shm_budget ? p->shm_budget : sc_tp_shm_default_budget(p->mem_bytes, run);
      const uint64_t pairs = budget / pair;
      if (pairs < (uint64_t)t->shm_pairs) t->shm_pairs = (int32_t)pairs;
    }
  }
  free(k);
  sc_comm_peers_free(comm);
  comm->peers = peers;
  comm->hosts = hosts;
  return SC_SUCCESS;
}
