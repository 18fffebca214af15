/* SPDX-License-Identifier: BSD-3-Clause */
/* Failure table rows on TCP data connections (run under sc-run with
 * SC_TRANSPORT=tcp). Rank 1, the culprit, damages its own data connections
 * while every other rank is already blocked in an all-reduce waiting for it:
 *   sockclose: shutdown(SHUT_RDWR) of each data socket;
 *   garbage:   64 junk bytes written into each data socket;
 *   hugehdr:   a forged segment header (right magic, length 2^62).
 * Every rank's next all-reduce must fail with SC_ERR_REMOTE well before
 * SC_TIMEOUT_MS, with a message naming the operation (kind, sequence number,
 * count, dtype), this rank and its host, and the peer; the victims' message
 * names rank 1. Usage: fail_tcp MODE [bound_seconds [hold_seconds]] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test/failure/fail_common.h"

#define COUNT   65536
#define CULPRIT 1

static void sabotage(const char *mode, int rank) {
  int fds[64];
  int n = fail_data_sockets(fds, 64);
  printf("rank %d: %s on %d data sockets\n", rank, mode, n);
  uint8_t junk[64];
  uint32_t x = 12345;
  for (size_t i = 0; i < sizeof(junk); i++) {
    x = x * 1103515245u + 12345u;
    junk[i] = (uint8_t)(x >> 16);
  }
  junk[0] = 0xA5; /* never the first byte of the real magic 'SCTM' */
  /* magic 'SCTM', sequence number 0x7fffffff, length 2^62, no print (16 zero bytes) */
  static const uint8_t forged[32] = {'S',  'C', 'T', 'M', 0x7f, 0xff, 0xff, 0xff,
                                     0x40, 0,   0,   0,   0,    0,    0,    0};
  for (int i = 0; i < n; i++) {
    ssize_t w = 0;
    if (!strcmp(mode, "sockclose"))
      shutdown(fds[i], SHUT_RDWR);
    else if (!strcmp(mode, "garbage"))
      w = send(fds[i], junk, sizeof(junk), MSG_NOSIGNAL);
    else
      w = send(fds[i], forged, sizeof(forged), MSG_NOSIGNAL);
    if (w < 0) perror("send");
  }
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "sockclose";
  double bound = argc > 2 ? atof(argv[2]) : 5.0;
  /* Seconds a failed rank keeps its communicator before destroying it: a
   * rank waiting on a failed (not dead) peer must not depend on that. */
  double hold = argc > 3 ? atof(argv[3]) : 0.0;
  if (strcmp(mode, "sockclose") && strcmp(mode, "garbage") && strcmp(mode, "hugehdr")) {
    fprintf(stderr, "usage: fail_tcp sockclose|garbage|hugehdr [bound_s]\n");
    return 2;
  }
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  int rank, n;
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &n);
  float *buf = calloc(COUNT, sizeof(float));
  if (sc_allreduce(buf, buf, COUNT, SC_FLOAT32, SC_SUM, comm) != SC_SUCCESS ||
      sc_barrier(comm) != SC_SUCCESS) {
    fprintf(stderr, "rank %d: warm-up failed: %s\n", rank, sc_last_error());
    return 1;
  }
  if (rank == CULPRIT) {
    usleep(300 * 1000); /* the others are blocked on us by now */
    sabotage(mode, rank);
  }
  double t0 = fail_now();
  sc_result_t r = SC_SUCCESS;
  for (int i = 0; i < 20 && r == SC_SUCCESS; i++)
    r = sc_allreduce(buf, buf, COUNT, SC_FLOAT32, SC_SUM, comm);
  double dt = fail_now() - t0;
  char msg[1024], host[64];
  snprintf(msg, sizeof(msg), "%s", sc_last_error());
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "?");
  host[sizeof(host) - 1] = '\0';
  char self[32];
  snprintf(self, sizeof(self), "rank %d of %d (", rank, n);
  char seen[32];
  snprintf(seen, sizeof(seen), "seen by rank %d)", rank);
  /* The ring's next rank receives from the culprit and sees the damage
   * itself; the others see a neighbour that failed close its connections. */
  int direct = rank == (CULPRIT + 1) % n;
  const char *cause = !strcmp(mode, "sockclose") ? "closed the connection"
                      : !strcmp(mode, "garbage") ? "sent a malformed message header"
                                                 : "sent part of its message #2147483647";
  const char *direct_kw[] = {"allreduce #", "count 65536", "float32", self, host,
                             "rank 1 (",    cause,         seen,      NULL};
  const char *other_kw[] = {"allreduce #", "count 65536", "float32", self, host, NULL};
  const char *what = rank == CULPRIT ? "culprit" : direct ? "direct-victim" : "victim";
  int ok = fail_expect(rank, what, r, SC_ERR_REMOTE, dt, bound, msg, direct ? direct_kw : other_kw);
  /* The others blame the peer they were exchanging with: it closed its
   * connections when its communicator failed, or the liveness watch relayed
   * its failure (with its reason) first. */
  if (!direct && !strstr(msg, "closed the connection") && !strstr(msg, "reset the connection") &&
      !strstr(msg, ") failed: ")) {
    fprintf(stderr, "rank %d FAIL: message names no peer that closed or failed\n", rank);
    ok = 0;
  }
  sc_result_t async = SC_SUCCESS;
  sc_comm_get_async_error(comm, &async);
  if (async != SC_ERR_REMOTE) {
    fprintf(stderr, "rank %d FAIL: async error %s\n", rank, sc_strerror(async));
    ok = 0;
  }
  if (hold > 0) usleep((useconds_t)(hold * 1e6));
  sc_comm_destroy(comm);
  free(buf);
  return ok ? 0 : 1;
}
