/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_comm_local against an independent reference: every rank's hostname
 * (its UTS namespace: one per sc-netbed host, one for all of loopback),
 * gathered with sc_allgather. Ranks with one hostname must form one host,
 * hosts numbered by their lowest rank, local ranks in rank order. Also the
 * argument rules (NULL comm refused, NULL outputs allowed) and, with
 * --algo NAME [COUNT], which all-reduce sc_allreduce_algo reports for COUNT
 * float32 (default 262144: 1 MiB): NAME, or "hier-if-hierarchy": hier
 * exactly when there are several hosts and one holds several ranks (under
 * SC_ALGO=hier). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sparsecoll.h"

#define NAME_LEN 64

int main(int argc, char **argv) {
  const char *algo = argc > 2 && !strcmp(argv[1], "--algo") ? argv[2] : NULL;
  const size_t count = algo && argc > 3 ? strtoul(argv[3], NULL, 10) : (size_t)1 << 18;
  sc_comm_t *comm;
  sc_result_t r = sc_comm_init_env(&comm);
  if (r != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s: %s\n", sc_strerror(r), sc_last_error());
    return 1;
  }
  int rank, n, fails = 0;
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &n);
  char me[NAME_LEN] = {0}, all[64 * NAME_LEN];
  if (gethostname(me, NAME_LEN - 1) != 0) strcpy(me, "?");
  if (n > 64 || sc_allgather(me, all, NAME_LEN, SC_INT8, comm) != SC_SUCCESS) {
    fprintf(stderr, "rank %d: allgather of hostnames failed: %s\n", rank, sc_last_error());
    return 1;
  }
  /* The reference map. */
  int host[64], nh = 0, lr = 0, ls = 0;
  for (int i = 0; i < n; i++) {
    host[i] = -1;
    for (int j = 0; j < i && host[i] < 0; j++)
      if (!strcmp(all + i * NAME_LEN, all + j * NAME_LEN)) host[i] = host[j];
    if (host[i] < 0) host[i] = nh++;
  }
  int several = 0;
  for (int i = 0; i < n; i++) {
    if (host[i] == host[rank]) {
      ls++;
      if (i < rank) lr++;
    }
    for (int j = 0; j < i; j++) several |= host[j] == host[i];
  }
  int got_lr = -1, got_ls = -1, got_hi = -1, got_nh = -1;
  r = sc_comm_local(comm, &got_lr, &got_ls, &got_hi, &got_nh);
  if (r != SC_SUCCESS || got_lr != lr || got_ls != ls || got_hi != host[rank] || got_nh != nh) {
    fprintf(stderr,
            "rank %d (%s): sc_comm_local -> %s local %d of %d, host %d of %d; want local %d of "
            "%d, host %d of %d\n",
            rank, me, sc_strerror(r), got_lr, got_ls, got_hi, got_nh, lr, ls, host[rank], nh);
    fails++;
  }
  int only_nh = -1;
  if (sc_comm_local(comm, NULL, NULL, NULL, &only_nh) != SC_SUCCESS || only_nh != nh) {
    fprintf(stderr, "rank %d: sc_comm_local with NULL outputs: %d hosts\n", rank, only_nh);
    fails++;
  }
  if (sc_comm_local(NULL, &got_lr, NULL, NULL, NULL) != SC_ERR_INVALID_ARG) {
    fprintf(stderr, "rank %d: sc_comm_local(NULL comm) not refused\n", rank);
    fails++;
  }
  if (algo) {
    const char *name = NULL;
    sc_allreduce_algo(comm, count, SC_FLOAT32, &name);
    int is_hier = name && !strcmp(name, "hier");
    int want = !strcmp(algo, "hier-if-hierarchy") ? nh > 1 && several : !strcmp(algo, "hier");
    if (is_hier != want) {
      fprintf(stderr, "rank %d: all-reduce algorithm %s on %d hosts (several ranks on one: %d)\n",
              rank, name ? name : "(none)", nh, several);
      fails++;
    }
  }
  if (rank == 0)
    printf("%d ranks on %d host%s: sc_comm_local %s\n", n, nh, nh == 1 ? "" : "s",
           fails ? "FAILED" : "ok");
  sc_comm_destroy(comm);
  return fails ? 1 : 0;
}
