/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's print check (transport/verbs/verbs.c, transport.h's
 * sc_tp_req_t fp) over the stand-in libibverbs (test/multi/
 * verbs_fake_ibverbs.c): two forked ranks, each with its own transport,
 * rank 0 sending to rank 1. The receiver's clear-to-send carries its
 * print; a sender whose print differs refuses the message: both requests
 * fail with SC_ERR_MISMATCH, each holding the other side's print in
 * peer_fp, no byte reaches the receive's buffer, each rank's progress says
 * so once, and the pair is out of step. A print that differs wins over a
 * length that differs; a receive without a print takes any message.
 * References: the bytes and prints each side wrote, the contract's codes.
 *
 * The stand-in is found as libibverbs.so.1 through LD_LIBRARY_PATH, read
 * when the process starts: the program runs itself again with it set.
 * Exit 0 passed, 1 failed, 77 skipped (the stand-in is not built). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "transport/transport.h"

#ifndef SC_FAKE_IBV_LIB
#error "SC_FAKE_IBV_LIB names the stand-in library"
#endif

#define BIG (3 * 65536 + 100) /* striped when a pair has several QPs */

typedef struct shared {
  volatile int ready[2];
  volatile int done[2];
  uint8_t addrs[2][SC_TP_ADDR_MAX];
} shared_t;

static shared_t *sh;
static int me, failures;
static sc_transport_t *tp;
static int mismatches, remotes; /* this rank's progress returns */

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "rank %d: FAIL %s:%d: %s\n", me, __FILE__, __LINE__, #c);                    \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static void wait_flag(volatile int *f, int v) {
  int64_t end = sc_now_ms() + 20000;
  while (__atomic_load_n(f, __ATOMIC_ACQUIRE) < v && sc_now_ms() < end) usleep(100);
  CHECK(*f >= v);
}

static int open_rank(void) {
  static uint8_t secret[SC_SECRET_LEN] = {1, 2, 3, 4, 5, 6, 7, 8};
  struct sockaddr_storage hint;
  memset(&hint, 0, sizeof(hint));
  struct sockaddr_in *in = (struct sockaddr_in *)&hint;
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sc_tp_config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.rank = me;
  cfg.nranks = 2;
  memcpy(cfg.secret, secret, sizeof(secret));
  cfg.route_hint = &hint;
  cfg.timeout_ms = 20000;
  cfg.nsocks = 1;
  cfg.spin_us = me ? 20 : 0;
  size_t len = SC_TP_ADDR_MAX;
  sc_result_t r = sc_verbs_transport.create(&cfg, &tp, sh->addrs[me], &len);
  if (r != SC_SUCCESS) {
    fprintf(stderr, "rank %d: FAIL create: %s\n", me, sc_last_error());
    return -1;
  }
  __atomic_store_n(&sh->ready[me], 1, __ATOMIC_RELEASE);
  wait_flag(&sh->ready[1 - me], 1);
  r = sc_verbs_transport.connect_all(tp, sh->addrs, SC_TP_ADDR_MAX);
  if (r != SC_SUCCESS) {
    fprintf(stderr, "rank %d: FAIL connect_all: %s\n", me, sc_last_error());
    return -1;
  }
  return 0;
}

static void pump(void) {
  sc_result_t r = sc_verbs_transport.progress(tp, 1, NULL);
  if (r == SC_ERR_MISMATCH) mismatches++;
  if (r == SC_ERR_REMOTE) remotes++;
}

/* Progress until none of the requests is pending; then, once the peer got
 * as far (stage), some rounds more, so that a second report would show. */
static void run(sc_tp_req_t *const *reqs, int n, int stage) {
  int64_t end = sc_now_ms() + 15000;
  for (;;) {
    int pending = 0;
    for (int i = 0; i < n; i++) pending += reqs[i]->state == SC_TP_REQ_PENDING;
    if (!pending || sc_now_ms() > end) break;
    pump();
  }
  for (int i = 0; i < n; i++) CHECK(reqs[i]->state != SC_TP_REQ_PENDING);
  __atomic_store_n(&sh->done[me], stage, __ATOMIC_RELEASE);
  int64_t until = sc_now_ms() + 20000;
  while (__atomic_load_n(&sh->done[1 - me], __ATOMIC_ACQUIRE) < stage && sc_now_ms() < until)
    pump();
  for (int i = 0; i < 20; i++) pump();
}

static void print_of(uint8_t fp[SC_TP_FP_LEN], uint64_t count, int seq) {
  memset(fp, 0, SC_TP_FP_LEN);
  fp[0] = 0x10;
  fp[3] = (uint8_t)seq;
  for (int i = 0; i < 7; i++) fp[9 + i] = (uint8_t)(count >> (8 * i));
}

static int all_byte(const uint8_t *b, size_t n, uint8_t v) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return 0;
  return 1;
}

static int all_zero(const uint8_t *b, size_t n) {
  return all_byte(b, n, 0);
}

static void fill(uint8_t *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 131u + seed);
}

/* One message from rank 0 to rank 1. count 0: no print. want: the status
 * both requests end with. */
typedef struct one {
  const char *name;
  uint64_t send_count, recv_count;
  size_t send_len, recv_len;
  sc_result_t want;
} one_t;

static void one_message(const one_t *o) {
  size_t len = me == 0 ? o->send_len : o->recv_len;
  uint8_t *buf = malloc(len ? len : 1), *ref = malloc(o->send_len ? o->send_len : 1);
  fill(ref, o->send_len, 5);
  sc_tp_req_t r;
  memset(&r, 0, sizeof(r));
  uint8_t mine[SC_TP_FP_LEN], theirs[SC_TP_FP_LEN];
  memset(mine, 0, sizeof(mine));
  memset(theirs, 0, sizeof(theirs));
  if (me == 0) {
    if (o->send_count) print_of(mine, o->send_count, 1);
    if (o->recv_count) print_of(theirs, o->recv_count, 1);
    memcpy(buf, ref, len);
    memcpy(r.fp, mine, sizeof(mine));
    CHECK(sc_verbs_transport.isend(tp, 1, buf, len, &r) == SC_SUCCESS);
  } else {
    if (o->recv_count) print_of(mine, o->recv_count, 1);
    if (o->send_count) print_of(theirs, o->send_count, 1);
    memset(buf, 0xa5, len);
    memcpy(r.fp, mine, sizeof(mine));
    CHECK(sc_verbs_transport.irecv(tp, 0, buf, len, &r) == SC_SUCCESS);
  }
  sc_tp_req_t *reqs[] = {&r};
  run(reqs, 1, 1);
  sc_result_t got = r.state == SC_TP_REQ_DONE ? SC_SUCCESS : r.status;
  if (got != o->want)
    fprintf(stderr, "rank %d: %s: status %s, want %s (%s)\n", me, o->name, sc_strerror(got),
            sc_strerror(o->want), sc_last_error());
  CHECK(got == o->want);
  if (o->want == SC_SUCCESS && me == 1) CHECK(memcmp(buf, ref, len) == 0);
  if (o->want != SC_SUCCESS && me == 1) CHECK(all_byte(buf, len, 0xa5));
  if (o->want == SC_ERR_MISMATCH) {
    /* each side holds the other's print: the receiver's came in its
     * clear-to-send, the sender's in its refusal */
    CHECK(memcmp(r.peer_fp, theirs, SC_TP_FP_LEN) == 0);
    CHECK(mismatches == 1);
    CHECK(remotes == 0);
    /* out of step: a later request to the peer fails at once */
    uint8_t b[8];
    sc_tp_req_t later;
    memset(&later, 0, sizeof(later));
    memcpy(later.fp, mine, sizeof(mine));
    sc_result_t lr = me == 0 ? sc_verbs_transport.isend(tp, 1, b, sizeof(b), &later)
                             : sc_verbs_transport.irecv(tp, 0, b, sizeof(b), &later);
    CHECK(lr == SC_ERR_REMOTE);
    CHECK(later.state == SC_TP_REQ_ERROR);
  } else {
    CHECK(all_zero(r.peer_fp, SC_TP_FP_LEN));
    CHECK(mismatches == 0);
    CHECK(remotes == (o->want == SC_ERR_REMOTE));
  }
  free(buf);
  free(ref);
}

/* A message of one operation matches, the next one's does not: the first
 * reaches the receiver, the second fails with the mismatch on both ranks; a
 * receive behind it fails as for a failed peer. */
static void two_messages(void) {
  uint8_t a[64], b[64], ref[64];
  fill(ref, sizeof(ref), 9);
  sc_tp_req_t r0, r1, r2;
  memset(&r0, 0, sizeof(r0));
  memset(&r1, 0, sizeof(r1));
  memset(&r2, 0, sizeof(r2));
  print_of(r0.fp, 16, 1);
  print_of(r1.fp, 16, me == 0 ? 2 : 3); /* the next call's sequence numbers differ */
  uint8_t c[64];
  if (me == 0) {
    memcpy(a, ref, sizeof(a));
    memcpy(b, ref, sizeof(b));
    CHECK(sc_verbs_transport.isend(tp, 1, a, sizeof(a), &r0) == SC_SUCCESS);
    CHECK(sc_verbs_transport.isend(tp, 1, b, sizeof(b), &r1) == SC_SUCCESS);
    sc_tp_req_t *reqs[] = {&r0, &r1};
    run(reqs, 2, 2);
  } else {
    memset(a, 0, sizeof(a));
    memset(b, 0xa5, sizeof(b));
    print_of(r2.fp, 16, 3);
    CHECK(sc_verbs_transport.irecv(tp, 0, a, sizeof(a), &r0) == SC_SUCCESS);
    CHECK(sc_verbs_transport.irecv(tp, 0, b, sizeof(b), &r1) == SC_SUCCESS);
    CHECK(sc_verbs_transport.irecv(tp, 0, c, sizeof(c), &r2) == SC_SUCCESS);
    sc_tp_req_t *reqs[] = {&r0, &r1, &r2};
    run(reqs, 3, 2);
    CHECK(memcmp(a, ref, sizeof(a)) == 0);
    CHECK(all_byte(b, sizeof(b), 0xa5));
    CHECK(r2.state == SC_TP_REQ_ERROR && r2.status == SC_ERR_REMOTE);
  }
  /* The receiver has the first message whole. The sender may not have
   * heard of its completion before the refusal failed the pair's requests:
   * then it fails as for a failed peer. */
  if (me == 1)
    CHECK(r0.state == SC_TP_REQ_DONE);
  else
    CHECK(r0.state == SC_TP_REQ_DONE ||
          (r0.state == SC_TP_REQ_ERROR && r0.status == SC_ERR_REMOTE));
  CHECK(r1.state == SC_TP_REQ_ERROR && r1.status == SC_ERR_MISMATCH);
  uint8_t other[SC_TP_FP_LEN];
  print_of(other, 16, me == 0 ? 3 : 2);
  CHECK(memcmp(r1.peer_fp, other, SC_TP_FP_LEN) == 0);
  CHECK(mismatches == 1);
  CHECK(remotes == 0);
}

/* One scenario on two forked ranks; 0 when both passed. */
static int scenario(const one_t *o) {
  memset(sh, 0, sizeof(*sh));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 1;
  me = pid == 0 ? 1 : 0;
  failures = mismatches = remotes = 0;
  if (open_rank() == 0) {
    if (o)
      one_message(o);
    else
      two_messages();
  } else {
    failures++;
  }
  /* both ranks are done before either closes: a closed peer is a failure */
  __atomic_store_n(&sh->done[me], 100, __ATOMIC_RELEASE);
  wait_flag(&sh->done[1 - me], 100);
  if (tp) {
    sc_verbs_transport.cancel_all(tp, SC_ERR_ABORTED);
    sc_verbs_transport.destroy(tp);
    tp = NULL;
  }
  if (me == 1) _exit(failures ? 1 : 0);
  int st = 0;
  waitpid(pid, &st, 0);
  int ok = failures == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  printf("%s %s\n", ok ? "ok" : "FAIL", o ? o->name : "two messages, the second mismatched");
  return ok ? 0 : 1;
}

/* Runs this program again with the stand-in first on LD_LIBRARY_PATH. */
static int reexec(char **argv) {
  struct stat st;
  if (stat(SC_FAKE_IBV_LIB, &st) != 0) {
    printf("skipped: %s not built\n", SC_FAKE_IBV_LIB);
    return 77;
  }
  char dir[] = "/tmp/sc-fakeibv-XXXXXX", link[64];
  if (!mkdtemp(dir)) return 1;
  snprintf(link, sizeof(link), "%s/libibverbs.so.1", dir);
  if (symlink(SC_FAKE_IBV_LIB, link) != 0) {
    rmdir(dir);
    return 1;
  }
  const char *old = getenv("LD_LIBRARY_PATH");
  char *path = malloc(strlen(dir) + (old ? strlen(old) : 0) + 2);
  if (!path) return 1;
  sprintf(path, "%s%s%s", dir, old && *old ? ":" : "", old ? old : "");
  setenv("LD_LIBRARY_PATH", path, 1);
  setenv("SC_TEST_FAKEIBV", "1", 1);
  free(path);
  int status = 1;
  pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
    status = WEXITSTATUS(status);
  else
    status = 1;
  unlink(link);
  rmdir(dir);
  return status;
}

int main(int argc, char **argv) {
  (void)argc;
  if (!getenv("SC_TEST_FAKEIBV")) return reexec(argv);
  sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  const one_t cases[] = {
      {"same print", 1000, 1000, 4000, 4000, SC_SUCCESS},
      {"same print, striped", BIG, BIG, BIG, BIG, SC_SUCCESS},
      {"receive without a print", 1000, 0, 4000, 4000, SC_SUCCESS},
      {"neither has a print", 0, 0, 64, 64, SC_SUCCESS},
      {"prints differ", 1000, 999, 4000, 4000, SC_ERR_MISMATCH},
      {"prints differ, large", BIG, BIG - 1, BIG, BIG, SC_ERR_MISMATCH},
      {"prints and lengths differ: the print wins", 1000, 999, 4000, 3996, SC_ERR_MISMATCH},
      {"prints and lengths differ, 4 / 4000000", 4, 1000000, 16, 65536, SC_ERR_MISMATCH},
      {"send without a print, receive with one", 0, 64, 64, 64, SC_SUCCESS},
      {"send without a print, receive with one, lengths differ", 0, 64, 64, 60, SC_ERR_REMOTE},
      {"same print, lengths differ", 1000, 1000, 3996, 4000, SC_ERR_REMOTE},
      {"receive without a print, lengths differ", 1000, 0, 4000, 3996, SC_ERR_REMOTE},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) bad += scenario(&cases[i]);
  bad += scenario(NULL);
  return bad ? 1 : 0;
}
