/* SPDX-License-Identifier: BSD-3-Clause */
/* sc-run: rank 0's bootstrap port and the job's token (sc_run_job.h). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/sc_run_job.h"
#ifdef HAVE_SYS_RANDOM_H
#include <sys/random.h>
#endif

void sc_run_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", SC_RUN_NAME);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

/* The kernel's range for the local ports of outgoing connections. */
static void ephemeral_range(int *lo, int *hi) {
  *lo = 32768;
  *hi = 60999;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (!f) return;
  if (fscanf(f, "%d %d", lo, hi) != 2) {
    *lo = 32768;
    *hi = 60999;
  }
  fclose(f);
}

static int port_is_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) sc_run_die("socket: %s", strerror(errno));
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
  close(fd);
  return ok;
}

/* A port rank 0 can bind a moment later. It is probed and released, so it
 * is taken from below the ephemeral range: there, any connect() on the host
 * could pick it as its local port in between (seen with tests running in
 * parallel). Another launcher could still race for it; --port avoids that. */
int sc_run_free_port(void) {
  int lo, hi;
  ephemeral_range(&lo, &hi);
  int first = 10000, last = lo - 1;
  if (last - first < 1000) {
    first = hi + 1; /* a range at the bottom: use the ports above it */
    last = 65535;
  }
  unsigned seed = 0;
  if (getentropy(&seed, sizeof(seed)) != 0) seed = (unsigned)getpid() * 2654435761u;
  int span = last - first + 1;
  for (int tries = 0; tries < 200 && span > 0; tries++) {
    int port = first + (int)((seed + (unsigned)tries * 7919u) % (unsigned)span);
    if (port_is_free(port)) return port;
  }
  sc_run_die("cannot find a free port in %d..%d (use --port)", first, last);
  return 0;
}

void sc_run_make_token(char hex[65]) {
  unsigned char raw[32];
  size_t got = 0;
#ifdef HAVE_SYS_RANDOM_H
  while (got < sizeof(raw)) {
    ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += (size_t)n;
  }
#endif
  if (got < sizeof(raw)) {
    /* getrandom missing (old kernel, seccomp): the same bytes from urandom. */
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) sc_run_die("no randomness for SC_AUTH_TOKEN: %s", strerror(errno));
    while (got < sizeof(raw)) {
      ssize_t n = read(fd, raw + got, sizeof(raw) - got);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        sc_run_die("reading /dev/urandom failed");
      }
      got += (size_t)n;
    }
    close(fd);
  }
  for (size_t i = 0; i < sizeof(raw); i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
}
