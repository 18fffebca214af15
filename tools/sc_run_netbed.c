/* SPDX-License-Identifier: BSD-3-Clause */
/* sc-run --netbed: the state file of an sc-netbed bed, and entering its hosts. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/sc_run_job.h"
#include "tools/sc_run_netbed.h"

#define NETBED_MAX_HOSTS 4096

static int nb_count(const char *key, const char *s) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < 1 || v > NETBED_MAX_HOSTS)
    sc_run_die("netbed state: %s='%s' is not an integer in [1, %d]", key, s, NETBED_MAX_HOSTS);
  return (int)v;
}

static int netbed_key_index(const char *key, const char *prefix, int hosts) {
  size_t n = strlen(prefix);
  if (strncmp(key, prefix, n) != 0) return -1;
  char *end = NULL;
  errno = 0;
  long i = strtol(key + n, &end, 10);
  if (errno || end == key + n || *end || i < 0 || i >= hosts) return -2;
  return (int)i;
}

static void netbed_copy(const netbed_t *netbed, char *dst, size_t len, const char *val,
                        const char *key) {
  size_t n = strlen(val);
  if (n == 0 || n >= len || strchr(val, '/'))
    sc_run_die("netbed state %s: bad value for %s: '%s'", netbed->path, key, val);
  memcpy(dst, val, n + 1);
}

/* Reads the KEY=VALUE state file `sc-netbed up` wrote. NETBED_HOSTS comes
 * before the per-host keys there, which sizes the tables. */
netbed_t *netbed_load(const char *spec, int ranks_per_host) {
  netbed_t *netbed = calloc(1, sizeof(*netbed));
  if (!netbed) sc_run_die("out of memory");
  if (strchr(spec, '/'))
    snprintf(netbed->path, sizeof(netbed->path), "%s", spec);
  else {
    const char *dir = getenv("SC_NETBED_STATE_DIR");
    snprintf(netbed->path, sizeof(netbed->path), "%s/%s.env", dir && *dir ? dir : NETBED_DIR, spec);
  }
  FILE *f = fopen(netbed->path, "r");
  if (!f)
    sc_run_die(
        "--netbed: cannot read %s: %s (is the bed up? sc-netbed --id ID up N RATE writes it)",
        netbed->path, strerror(errno));
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    line[strcspn(line, "\r\n")] = '\0';
    char *eq = strchr(line, '=');
    if (line[0] == '#' || !eq) continue;
    *eq = '\0';
    const char *key = line, *val = eq + 1;
    int i;
    if (!strcmp(key, "NETBED_HOSTS")) {
      if (netbed->hosts) sc_run_die("netbed state %s: NETBED_HOSTS twice", netbed->path);
      netbed->hosts = nb_count("NETBED_HOSTS", val);
      netbed->ns = calloc((size_t)netbed->hosts, sizeof(*netbed->ns));
      netbed->addr = calloc((size_t)netbed->hosts, sizeof(*netbed->addr));
      netbed->ns_fd = malloc(sizeof(int) * (size_t)netbed->hosts);
      if (!netbed->ns || !netbed->addr || !netbed->ns_fd) sc_run_die("out of memory");
      for (int h = 0; h < netbed->hosts; h++) netbed->ns_fd[h] = -1;
    } else if (!strcmp(key, "NETBED_RANKS_PER_HOST")) {
      netbed->ranks_per_host = nb_count("NETBED_RANKS_PER_HOST", val);
    } else if (!strcmp(key, "NETBED_IFNAME")) {
      netbed_copy(netbed, netbed->ifname, sizeof(netbed->ifname), val, key);
    } else if ((i = netbed_key_index(key, "NETBED_NS_", netbed->hosts)) != -1) {
      if (i < 0)
        sc_run_die("netbed state %s: %s before NETBED_HOSTS or out of range", netbed->path, key);
      netbed_copy(netbed, netbed->ns[i], sizeof(netbed->ns[i]), val, key);
    } else if ((i = netbed_key_index(key, "NETBED_ADDR_", netbed->hosts)) != -1) {
      if (i < 0)
        sc_run_die("netbed state %s: %s before NETBED_HOSTS or out of range", netbed->path, key);
      netbed_copy(netbed, netbed->addr[i], sizeof(netbed->addr[i]), val, key);
    }
  }
  fclose(f);
  if (!netbed->hosts || !netbed->ifname[0])
    sc_run_die("netbed state %s: NETBED_HOSTS or NETBED_IFNAME missing", netbed->path);
  if (ranks_per_host > 0) netbed->ranks_per_host = ranks_per_host;
  if (netbed->ranks_per_host <= 0) netbed->ranks_per_host = 1;
  for (int h = 0; h < netbed->hosts; h++) {
    if (!netbed->ns[h][0] || !netbed->addr[h][0])
      sc_run_die("netbed state %s: host %d has no NETBED_NS_%d or NETBED_ADDR_%d", netbed->path, h,
                 h, h);
    char nspath[PATH_MAX];
    snprintf(nspath, sizeof(nspath), "/run/netns/%s", netbed->ns[h]);
    netbed->ns_fd[h] = open(nspath, O_RDONLY | O_CLOEXEC);
    if (netbed->ns_fd[h] < 0)
      sc_run_die("--netbed: cannot open host %d's namespace %s: %s (bed gone? sc-netbed status)", h,
                 nspath, strerror(errno));
  }
  return netbed;
}

int netbed_host_of(const netbed_t *nb, int rank) {
  return rank / nb->ranks_per_host;
}

int netbed_call_in_host0(const netbed_t *netbed, int (*fn)(void)) {
  int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0) sc_run_die("--netbed: /proc/self/ns/net: %s", strerror(errno));
  if (setns(netbed->ns_fd[0], CLONE_NEWNET) != 0)
    sc_run_die("--netbed: cannot enter %s: %s (needs root)", netbed->ns[0], strerror(errno));
  int v = fn();
  if (setns(self, CLONE_NEWNET) != 0) sc_run_die("--netbed: cannot return to the own namespace");
  close(self);
  return v;
}

/* In the child: the host's network namespace and a hostname of its own, as
 * ranks tell hosts apart by hostname (shared memory only within one). */
void netbed_enter(const netbed_t *netbed, int rank) {
  int h = netbed_host_of(netbed, rank);
  if (setns(netbed->ns_fd[h], CLONE_NEWNET) != 0) {
    fprintf(stderr, "sc-run: rank %d: cannot enter namespace %s: %s\n", rank, netbed->ns[h],
            strerror(errno));
    _exit(127);
  }
  if (unshare(CLONE_NEWUTS) != 0 || sethostname(netbed->ns[h], strlen(netbed->ns[h])) != 0) {
    fprintf(stderr, "sc-run: rank %d: cannot set hostname %s in a new UTS namespace: %s\n", rank,
            netbed->ns[h], strerror(errno));
    _exit(127);
  }
}

void netbed_free(netbed_t *nb) {
  if (!nb) return;
  for (int h = 0; h < nb->hosts; h++)
    if (nb->ns_fd[h] >= 0) close(nb->ns_fd[h]);
  free(nb->ns);
  free(nb->addr);
  free(nb->ns_fd);
  free(nb);
}
