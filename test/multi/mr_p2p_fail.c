/* SPDX-License-Identifier: BSD-3-Clause */
/* mr_p2p's failure modes (test/multi/p2p.sh runs each): a peer killed, an
 * abort from another thread, a timeout, a flood of unexpected messages, a
 * sender that leaves (also while its receiver is stopped), SC_P2P=0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sparsecoll.h"
#include "test/multi/mr_p2p_common.h"

/* Rank 1 dies while rank 0 waits to receive from it and rank 2 (or 0, for
 * two ranks) sends it a large message. */
int run_death(sc_comm_t *comm) {
  const int victim = 1;
  uint8_t small[64];
  fill(small, sizeof(small), victim, 600, 0);
  if (rank == victim) {
    OK(sc_send(small, sizeof(small), SC_UINT8, 0, 600, comm));
    usleep(200000);
    raise(SIGKILL);
  }
  if (rank == 0) {
    uint8_t got[64];
    OK(sc_recv(got, sizeof(got), SC_UINT8, victim, 600, comm));
    expect(got, sizeof(got), victim, 600, 0, "before the death");
  }
  size_t big = 8u << 20;
  uint8_t *buf = calloc(big, 1);
  double t0 = now_s();
  sc_result_t r;
  if (rank == 0)
    r = sc_recv(buf, 100, SC_UINT8, victim, 601, comm);
  else
    r = sc_send(buf, big, SC_UINT8, victim, 601, comm);
  double dt = now_s() - t0;
  const char *e = sc_last_error();
  checks++;
  if ((r != SC_ERR_REMOTE && r != SC_ERR_TIMEOUT) || (r == SC_ERR_REMOTE && !strstr(e, "rank 1")))
    FAIL("with rank 1 dead: %s: %s", sc_strerror(r), e);
  if (dt > 20) FAIL("took %.1f s to notice rank 1's death", dt);
  printf("rank %d: failed in %.3f s with %s: %s\n", rank, dt, sc_strerror(r), e);
  free(buf);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

static void *aborter(void *arg) {
  usleep(300000);
  sc_comm_abort(arg);
  return NULL;
}

int run_abort(sc_comm_t *comm) {
  if (rank == 0) {
    int x;
    sc_request_t *q = NULL;
    OK(sc_irecv(&x, 1, SC_INT32, nranks - 1, 700, comm, &q));
    pthread_t t;
    pthread_create(&t, NULL, aborter, comm);
    double t0 = now_s();
    sc_result_t r = sc_recv(&x, 1, SC_INT32, nranks - 1, 701, comm);
    double dt = now_s() - t0;
    checks++;
    if (r != SC_ERR_ABORTED || dt > 5) FAIL("blocked receive: %s after %.2f s", sc_strerror(r), dt);
    r = q ? sc_wait(&q) : SC_ERR_INTERNAL;
    checks++;
    if (r != SC_ERR_ABORTED) FAIL("pending irecv: %s", sc_strerror(r));
    r = sc_send(&x, 1, SC_INT32, 0, 0, comm);
    checks++;
    if (r != SC_ERR_ABORTED) FAIL("send after abort: %s", sc_strerror(r));
    pthread_join(t, NULL);
    printf("rank 0: aborted after %.3f s\n", dt);
  } else {
    usleep(600000);
  }
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* Run with a short SC_TIMEOUT_MS: a receive nobody sends to and a large
 * send nobody receives both fail with SC_ERR_TIMEOUT within about that. */
int run_timeout(sc_comm_t *comm) {
  if (nranks >= 2 && rank < 2) {
    size_t n = rank == 1 ? 1u << 20 : 4;
    uint8_t *buf = calloc(n, 1);
    double t0 = now_s();
    sc_result_t r = rank == 0 ? sc_recv(buf, n, SC_UINT8, 1, 800, comm)
                              : sc_send(buf, n, SC_UINT8, 0, 801, comm);
    double dt = now_s() - t0;
    checks++;
    if (r != SC_ERR_TIMEOUT || dt > 10 || !strstr(sc_last_error(), "SC_TIMEOUT_MS"))
      FAIL("unmatched %s: %s after %.2f s: %s", rank ? "send" : "receive", sc_strerror(r), dt,
           sc_last_error());
    printf("rank %d: timed out after %.2f s\n", rank, dt);
    free(buf);
    /* The pair still carries messages, also by rendezvous (whose timed-out
     * send's buffer was offered over shm and is now withdrawn, not the
     * pair closed), and the dropped message does not come with them. */
    enum { BIG = 1 << 20 };
    uint8_t *big = malloc(BIG);
    for (size_t i = 0; i < BIG; i++) big[i] = rank == 1 ? (uint8_t)(i * 7 + 3) : 0;
    r = rank == 0 ? sc_recv(big, BIG, SC_UINT8, 1, 802, comm)
                  : sc_send(big, BIG, SC_UINT8, 0, 802, comm);
    checks++;
    if (r != SC_SUCCESS) FAIL("1 MiB after the timeouts: %s: %s", sc_strerror(r), sc_last_error());
    for (size_t i = 0; r == SC_SUCCESS && rank == 0 && i < BIG; i++)
      if (big[i] != (uint8_t)(i * 7 + 3)) {
        FAIL("1 MiB after the timeouts: byte %zu is %u", i, big[i]);
        break;
      }
    free(big);
  }
  OK(sc_barrier(comm));
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* Rank 0 sends rank 1 twenty eager messages of 60 KiB (1.2 MiB) that rank 1
 * receives none of. Rank 1 must fail every operation with rank 0 with
 * SC_ERR_NOMEM naming SC_P2P_UNEXPECTED_BYTES once they pass its 1 MiB, and
 * keep running: its collectives still work. It watches for that with empty
 * sends to rank 0, which succeed while rank 0 is still its peer. */
int run_flood(sc_comm_t *comm) {
  enum { NMSG = 20, BYTES = 60 << 10 };
  if (nranks >= 2 && rank == 0) {
    uint8_t *buf = calloc(BYTES, 1);
    sc_request_t *q[NMSG];
    for (int i = 0; i < NMSG; i++) OK(sc_isend(buf, BYTES, SC_UINT8, 1, 900, comm, &q[i]));
    /* The last ones may stay unread in the transport once rank 1 stops
     * reading from this rank: they end with an error by the timeout. */
    for (int i = 0; i < NMSG; i++)
      if (q[i]) (void)sc_wait(&q[i]);
    free(buf);
  } else if (rank == 1) {
    double t0 = now_s();
    sc_result_t r = SC_SUCCESS;
    while (r == SC_SUCCESS && now_s() - t0 < 30) {
      r = sc_send(NULL, 0, SC_UINT8, 0, 901, comm);
      if (r == SC_SUCCESS) usleep(10000);
    }
    checks++;
    if (r != SC_ERR_NOMEM || !strstr(sc_last_error(), "SC_P2P_UNEXPECTED_BYTES=1048576"))
      FAIL("flooded: send to rank 0 gave %s: %s", sc_strerror(r), sc_last_error());
    uint8_t one[BYTES];
    r = sc_recv(one, BYTES, SC_UINT8, 0, 900, comm);
    checks++;
    if (r != SC_ERR_NOMEM) FAIL("flooded: receive from rank 0 gave %s", sc_strerror(r));
    printf("rank 1: flooded after %.2f s: %s\n", now_s() - t0, sc_last_error());
  }
  OK(sc_barrier(comm));
  int x = rank + 1, sum = 0;
  OK(sc_allreduce(&x, &sum, 1, SC_INT32, SC_SUM, comm));
  checks++;
  if (sum != nranks * (nranks + 1) / 2) FAIL("all-reduce after the flood: %d", sum);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* A sender's destroy says goodbye after its messages: what it sent before is
 * still received, in any order, eager ones taken from the unexpected list
 * after the goodbye; a receive nothing was sent for fails naming the reason. */
int run_leave(sc_comm_t *comm) {
  enum { SMALL = 100, MID = 1000, BIG = 4 << 20 };
  uint8_t *big = malloc(BIG), small[SMALL], mid[MID], x;
  if (!big) return 1;
  if (nranks >= 2 && rank == 0) {
    fill(small, SMALL, 0, 1, 0);
    fill(big, BIG, 0, 2, 0);
    fill(mid, MID, 0, 3, 0);
    OK(sc_send(small, SMALL, SC_UINT8, 1, 1, comm));
    OK(sc_send(big, BIG, SC_UINT8, 1, 2, comm));
    OK(sc_send(mid, MID, SC_UINT8, 1, 3, comm));
  } else if (rank == 1) {
    OK(sc_recv(big, BIG, SC_UINT8, 0, 2, comm));
    expect(big, BIG, 0, 2, 0, "rendezvous message received as its sender left");
    /* Blocks until the goodbye: nothing was sent with tag 99. */
    sc_result_t r = sc_recv(&x, 1, SC_UINT8, 0, 99, comm);
    checks++;
    if (r != SC_ERR_REMOTE || !strstr(sc_last_error(), "closed its point-to-point lane"))
      FAIL("receive after rank 0 left: %s: %s", sc_strerror(r), sc_last_error());
    OK(sc_recv(mid, MID, SC_UINT8, 0, 3, comm));
    expect(mid, MID, 0, 3, 0, "eager message received after its sender left");
    OK(sc_recv(small, SMALL, SC_UINT8, 0, 1, comm));
    expect(small, SMALL, 0, 1, 0, "eager message received after its sender left");
    r = sc_recv(small, SMALL, SC_UINT8, 0, 1, comm);
    checks++;
    if (r != SC_ERR_REMOTE) FAIL("second receive of tag 1 after rank 0 left: %s", sc_strerror(r));
  }
  free(big);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* State of process pid as /proc/PID/stat tells it ('T': stopped), or '?'. */
static char proc_state(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return '?';
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *e = strrchr(buf, ')');
  return e && e[1] == ' ' ? e[2] : '?';
}

/* leave-stopped: rank 1 stops itself before it ever looks at its pair with
 * rank 0; rank 0 sends it two eager messages, destroys its communicator and
 * only then resumes it. Rank 1's first look at the pair comes after rank
 * 0's transport is gone, and it still receives both messages; a receive
 * nothing was sent for fails, and so does a send to rank 0, naming it. */
int run_leave_stopped(sc_comm_t *comm) {
  enum { SMALL = 100, MID = 1000 };
  uint8_t small[SMALL], mid[MID], x = 0;
  int *pids = calloc((size_t)nranks, sizeof(int)), me = (int)getpid();
  if (!pids) return 1;
  OK(sc_allgather(&me, pids, 1, SC_INT32, comm));
  if (nranks >= 2 && rank == 1) {
    raise(SIGSTOP);
    OK(sc_recv(mid, MID, SC_UINT8, 0, 2, comm));
    expect(mid, MID, 0, 2, 0, "eager message received after its sender left, unconnected");
    OK(sc_recv(small, SMALL, SC_UINT8, 0, 1, comm));
    expect(small, SMALL, 0, 1, 0, "eager message received after its sender left, unconnected");
    sc_result_t r = sc_recv(&x, 1, SC_UINT8, 0, 99, comm);
    checks++;
    if (r != SC_ERR_REMOTE || !strstr(sc_last_error(), "rank 0"))
      FAIL("receive after rank 0 left: %s: %s", sc_strerror(r), sc_last_error());
    r = sc_send(&x, 1, SC_UINT8, 0, 5, comm);
    checks++;
    if (r != SC_ERR_REMOTE || !strstr(sc_last_error(), "rank 0"))
      FAIL("send after rank 0 left: %s: %s", sc_strerror(r), sc_last_error());
  } else if (nranks >= 2 && rank == 0) {
    double until = now_s() + 20;
    while (proc_state(pids[1]) != 'T' && now_s() < until) usleep(1000);
    checks++;
    if (proc_state(pids[1]) != 'T') FAIL("rank 1 (pid %d) did not stop", pids[1]);
    fill(small, SMALL, 0, 1, 0);
    fill(mid, MID, 0, 2, 0);
    sc_request_t *q[2] = {NULL, NULL};
    OK(sc_isend(small, SMALL, SC_UINT8, 1, 1, comm, &q[0]));
    OK(sc_isend(mid, MID, SC_UINT8, 1, 2, comm, &q[1]));
    /* A transport whose connection setup needs the receiver's answer (tcp)
     * cannot finish while rank 1 is stopped: it is resumed first. */
    int left = (q[0] != NULL) + (q[1] != NULL);
    for (until = now_s() + 2; left > 0 && now_s() < until; usleep(100))
      for (int i = 0; i < 2; i++) {
        int done = 0;
        if (!q[i]) continue;
        sc_result_t r = sc_test(&q[i], &done);
        if (r != SC_IN_PROGRESS) left--;
        if (r != SC_SUCCESS && r != SC_IN_PROGRESS) FAIL("send %d: %s", i, sc_last_error());
      }
    if (left) kill(pids[1], SIGCONT);
    for (int i = 0; i < 2; i++)
      if (q[i]) OK(sc_wait(&q[i]));
    sc_comm_destroy(comm);
    printf("rank 0: sends done %s rank 1 resumed\n", left ? "after" : "before");
    fflush(stdout);
    if (!left) kill(pids[1], SIGCONT);
    free(pids);
    return failures ? 1 : 0;
  }
  free(pids);
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}

/* SC_P2P=0: every call refused with SC_ERR_UNSUPPORTED saying why; the
 * collectives unaffected. */
int run_off(sc_comm_t *comm) {
  int x = 0;
  sc_request_t *q = NULL;
  sc_result_t r = sc_isend(&x, 1, SC_INT32, 0, 0, comm, &q);
  checks++;
  if (r != SC_ERR_UNSUPPORTED || !strstr(sc_last_error(), "SC_P2P=0") || q)
    FAIL("SC_P2P=0: %s: %s", sc_strerror(r), sc_last_error());
  r = sc_recv(&x, 1, SC_INT32, 0, 0, comm);
  checks++;
  if (r != SC_ERR_UNSUPPORTED) FAIL("SC_P2P=0: sc_recv: %s", sc_strerror(r));
  OK(sc_barrier(comm));
  sc_comm_destroy(comm);
  return failures ? 1 : 0;
}
