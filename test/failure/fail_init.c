/* SPDX-License-Identifier: BSD-3-Clause */
/* Failure table rows at init, ranks started by hand (no sc-run): this program
 * forks NRANKS children with SC_RANK/SC_WORLD_SIZE/SC_ROOT_ADDR/SC_AUTH_TOKEN
 * and one of them wrong, and checks what each child's sc_comm_init_env
 * returns, how fast, and what sc_last_error() says.
 *   auth:        rank 1 has a different SC_AUTH_TOKEN. Rank 1 fails at once
 *                (SC_ERR_REMOTE, the root dropped it: wrong secret); the others
 *                cannot tell a wrong rank 1 from a missing one and fail at
 *                SC_TIMEOUT_MS with SC_ERR_TIMEOUT naming rank 1 as missing.
 *   auth-root:   rank 0, which hosts the root, has the different token: every
 *                other rank is dropped at once; rank 0 times out naming them.
 *   nranks:      rank 1 has SC_WORLD_SIZE one larger: every rank fails at once
 *                with SC_ERR_INVALID_ARG naming rank 1's nranks.
 *   nranks-root: the same with rank 0 holding the larger size.
 *   late:        rank 2 starts 2.5 s after the others, past SC_TIMEOUT_MS=1000
 *                but within SC_BOOTSTRAP_TIMEOUT_MS=8000: every rank's init
 *                succeeds and an all-reduce gives the sum.
 * Usage: fail_init MODE (SC_TIMEOUT_MS from the environment, default 4000). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/failure/fail_common.h"

#define NRANKS 3

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &al) != 0)
    return -1;
  close(fd);
  return ntohs(a.sin_port);
}

typedef struct expect {
  sc_result_t code;
  double min_s, max_s;
  const char *kw[4];
} expect_t;

/* Mode late: init must succeed on every rank, then a 3-rank all-reduce of
 * (rank + 1) must give 1 + 2 + 3 in every element. */
static int run_late_rank(int rank) {
  char v[16];
  snprintf(v, sizeof(v), "%d", rank);
  setenv("SC_RANK", v, 1);
  snprintf(v, sizeof(v), "%d", NRANKS);
  setenv("SC_WORLD_SIZE", v, 1);
  if (rank == NRANKS - 1) usleep(2500 * 1000);
  sc_comm_t *comm = NULL;
  double t0 = fail_now();
  sc_result_t r = sc_comm_init_env(&comm);
  if (r != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL late: init after %.2f s: %s\n", rank, fail_now() - t0,
            sc_last_error());
    return 1;
  }
  float x[1000];
  for (int i = 0; i < 1000; i++) x[i] = (float)(rank + 1);
  r = sc_allreduce(x, x, 1000, SC_FLOAT32, SC_SUM, comm);
  int bad = r != SC_SUCCESS;
  for (int i = 0; !bad && i < 1000; i++) bad = x[i] != (float)(NRANKS * (NRANKS + 1) / 2);
  if (bad)
    fprintf(stderr, "rank %d FAIL late: all-reduce %s\n", rank,
            r == SC_SUCCESS ? "gave a wrong sum" : sc_last_error());
  else
    fprintf(stderr, "rank %d RESULT late: init in %.2f s, sum correct\n", rank, fail_now() - t0);
  sc_comm_destroy(comm);
  return bad;
}

static int run_rank(int rank, const char *mode, double timeout_s) {
  if (!strcmp(mode, "late")) return run_late_rank(rank);
  int bad = !strcmp(mode, "auth") || !strcmp(mode, "nranks") ? 1 : 0;
  int auth = !strncmp(mode, "auth", 4);
  char v[64];
  snprintf(v, sizeof(v), "%d", rank);
  setenv("SC_RANK", v, 1);
  snprintf(v, sizeof(v), "%d", NRANKS + (!auth && rank == bad ? 1 : 0));
  setenv("SC_WORLD_SIZE", v, 1);
  setenv("SC_AUTH_TOKEN", auth && rank == bad ? "the-wrong-secret" : "the-job-secret", 1);
  double t0 = fail_now();
  sc_comm_t *comm = NULL;
  sc_result_t r = sc_comm_init_env(&comm);
  double dt = fail_now() - t0;
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", sc_last_error());
  expect_t e;
  if (!auth) {
    /* The root fails the whole job as soon as the two sizes meet. */
    e = (expect_t){SC_ERR_INVALID_ARG, 0, timeout_s / 4, {"says nranks=", NULL}};
    /* Rank 0 hosts the root and lingers up to 1 s so that it can tell the others. */
    if (rank == 0) e.max_s += 1.0;
  } else if (rank == bad) {
    e = (expect_t){SC_ERR_REMOTE, 0, timeout_s / 4, {"wrong secret", "dropped rank", NULL}};
  } else if (bad == 1) {
    /* Cannot be told from a rank that never started. */
    e = (expect_t){SC_ERR_TIMEOUT, timeout_s * 0.9, timeout_s + 3, {"timeout", "1", NULL}};
  } else {
    e = (expect_t){SC_ERR_REMOTE, 0, timeout_s / 4, {"wrong secret", "dropped rank", NULL}};
  }
  if (auth && bad == 0 && rank == 0)
    e = (expect_t){SC_ERR_TIMEOUT, timeout_s * 0.9, timeout_s + 3, {"timeout", "1-2", NULL}};
  if (!auth) /* rank 0 checks in first: its size is the job's */
    e.kw[1] = bad ? "rank 1 says nranks=4, rank 0 said 3" : "says nranks=3, rank 0 said 4";
  int ok = fail_expect(rank, mode, r, e.code, dt, e.max_s, msg, e.kw);
  if (dt < e.min_s) {
    fprintf(stderr, "rank %d FAIL %s: returned after %.3f s, before %.1f s\n", rank, mode, dt,
            e.min_s);
    ok = 0;
  }
  if (comm) {
    fprintf(stderr, "rank %d FAIL %s: init succeeded\n", rank, mode);
    sc_comm_destroy(comm);
    ok = 0;
  }
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "auth";
  if (strcmp(mode, "auth") && strcmp(mode, "auth-root") && strcmp(mode, "nranks") &&
      strcmp(mode, "nranks-root") && strcmp(mode, "late")) {
    fprintf(stderr, "usage: fail_init auth|auth-root|nranks|nranks-root|late\n");
    return 2;
  }
  if (!strcmp(mode, "late")) {
    setenv("SC_TIMEOUT_MS", "1000", 1);
    setenv("SC_BOOTSTRAP_TIMEOUT_MS", "8000", 1);
    setenv("SC_AUTH_TOKEN", "the-job-secret", 1);
  }
  const char *t = getenv("SC_TIMEOUT_MS");
  if (!t || !*t) setenv("SC_TIMEOUT_MS", t = "4000", 1);
  double timeout_s = atof(t) / 1000.0;
  int port = free_port();
  if (port < 0) {
    perror("free port");
    return 1;
  }
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
  setenv("SC_ROOT_ADDR", addr, 1);
  setenv("SC_TRANSPORT", "tcp", 1);
  fflush(stdout);
  pid_t pids[NRANKS];
  for (int i = 0; i < NRANKS; i++) {
    pids[i] = fork();
    if (pids[i] < 0) {
      perror("fork");
      return 1;
    }
    if (pids[i] == 0) {
      /* The root (rank 0) must listen before the others give up connecting;
       * they retry within the timeout, so a short head start suffices. */
      if (i) usleep(100 * 1000);
      _exit(run_rank(i, mode, timeout_s));
    }
  }
  int fails = 0;
  double deadline = fail_now() + timeout_s + 20;
  for (int left = NRANKS; left > 0;) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      left--;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fails++;
      continue;
    }
    if (fail_now() > deadline) {
      fprintf(stderr, "FAIL: ranks still running %.0f s after the timeout\n", timeout_s + 20);
      for (int i = 0; i < NRANKS; i++) kill(pids[i], SIGKILL);
      while (waitpid(-1, &st, 0) > 0) {
      }
      return 1;
    }
    usleep(20 * 1000);
  }
  printf("%s: %d of %d ranks as expected\n", mode, NRANKS - fails, NRANKS);
  return fails ? 1 : 0;
}
