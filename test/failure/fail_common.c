/* SPDX-License-Identifier: BSD-3-Clause */
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test/failure/fail_common.h"

double fail_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int port_of(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)ss)->sin_port);
  if (ss->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
  return -1;
}

static int root_port(void) {
  const char *a = getenv("SC_ROOT_ADDR");
  const char *colon = a ? strrchr(a, ':') : NULL;
  return colon ? atoi(colon + 1) : -1;
}

int fail_data_sockets(int *fds, int max) {
  enum { CAP = 1024 };
  int fd_of[CAP], lport[CAP], rport[CAP];
  int n = 0, root = root_port();
  DIR *d = opendir("/proc/self/fd");
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < CAP) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd == dirfd(d)) continue;
    int type = 0;
    socklen_t tl = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) continue;
    struct sockaddr_storage me, peer;
    socklen_t ml = sizeof(me), pl = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
      continue; /* listeners are not connected */
    if (me.ss_family != AF_INET && me.ss_family != AF_INET6) continue;
    if (port_of(&me) == root || port_of(&peer) == root) continue;
    fd_of[n] = fd;
    lport[n] = port_of(&me);
    rport[n] = port_of(&peer);
    n++;
  }
  closedir(d);
  /* The transport opens SC_NSOCKS (>= 2 in these tests) connections per
   * peer, all to or from one listening port; the liveness watch opens one per
   * rank pair. A connection sharing neither port with another is the watch's
   * (this holds on every rank but 0, where the watch listens). */
  int out = 0;
  for (int i = 0; i < n && out < max; i++) {
    int same = 0;
    for (int k = 0; k < n; k++) same += k != i && (lport[k] == lport[i] || rport[k] == rport[i]);
    if (same) fds[out++] = fd_of[i];
  }
  return out;
}

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

void fail_res_count(fail_res_t *r) {
  r->fds = count_dir("/proc/self/fd") - 1; /* the directory stream itself */
  r->threads = count_dir("/proc/self/task");
  r->shm_maps = 0;
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof(line), f))
    if (strstr(line, "memfd:") || strstr(line, "/dev/shm/")) r->shm_maps++;
  fclose(f);
}

int fail_expect(int rank, const char *what, sc_result_t got, sc_result_t want, double elapsed,
                double bound_s, const char *msg, const char *const *keywords) {
  int ok = 1;
  if (got != want) {
    fprintf(stderr, "rank %d FAIL %s: got %s, want %s\n", rank, what, sc_strerror(got),
            sc_strerror(want));
    ok = 0;
  }
  if (elapsed > bound_s) {
    fprintf(stderr, "rank %d FAIL %s: took %.3f s, bound %.1f s\n", rank, what, elapsed, bound_s);
    ok = 0;
  }
  for (int i = 0; keywords && keywords[i]; i++)
    if (!strstr(msg, keywords[i])) {
      fprintf(stderr, "rank %d FAIL %s: message lacks \"%s\"\n", rank, what, keywords[i]);
      ok = 0;
    }
  printf("RESULT rank %d %s: %s in %.3f s: %s\n", rank, what, sc_strerror(got), elapsed, msg);
  fflush(stdout);
  return ok;
}
