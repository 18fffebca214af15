/* SPDX-License-Identifier: BSD-3-Clause */
/* sc-run --netbed: placing ranks on the hosts of an sc-netbed emulated
 * cluster (tools/netbed). Needs only libc, like the rest of sc-run. */
#ifndef SC_RUN_NETBED_H
#define SC_RUN_NETBED_H

#include <limits.h>

/* sc-netbed up writes the bed's layout to NETBED_DIR/PREFIX.env. */
#define NETBED_DIR     "/run/sc-netbed"
#define NETBED_DEFAULT "scnb-0" /* sc-netbed's default --id 0 */

typedef struct netbed {
  char path[PATH_MAX];
  int hosts, ranks_per_host;
  char ifname[32];
  char (*ns)[64];   /* host i's network namespace name */
  char (*addr)[64]; /* host i's address */
  int *ns_fd;       /* /run/netns/<ns>, opened by the parent (O_CLOEXEC) */
} netbed_t;

/* spec: a bed prefix (state in $SC_NETBED_STATE_DIR or NETBED_DIR) or a path
 * with a '/'. ranks_per_host > 0 overrides the bed's. Exits 2 with a message
 * on any error, as sc-run's usage errors do. */
netbed_t *netbed_load(const char *spec, int ranks_per_host);
int netbed_host_of(const netbed_t *nb, int rank);
/* fn() run inside host 0's network namespace (where rank 0 will listen). */
int netbed_call_in_host0(const netbed_t *nb, int (*fn)(void));
/* In a rank's child process before exec: its host's namespace and hostname.
 * On failure it prints why and _exits 127. */
void netbed_enter(const netbed_t *nb, int rank);
void netbed_free(netbed_t *nb); /* NULL is fine */

#endif
