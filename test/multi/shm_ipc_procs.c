/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory transport's device path between real processes: N
 * forked ranks, each with its own shm transport, all on the one device of
 * the stand-in runtime (SC_DEVRT_STANDIN; several processes per device).
 * Device buffers travel device to device over IPC; every rank checks what
 * it received against the pattern the sender must have written, computed
 * here independently.
 *
 *   shm_ipc_procs N data      every pair at once, several messages (0 B to
 *                             1 MiB, at offsets in shared allocations) in
 *                             flight; a ring of 100 messages from distinct
 *                             allocations (more than the receiver's cache);
 *                             a buffer freed and reallocated between sends;
 *                             the sender overwrites a buffer as soon as its
 *                             send completed (the receiver's copy ended)
 *   shm_ipc_procs 2 mismatch  device send, host receive: SC_ERR_REMOTE
 *                             naming the peer on both sides
 *   shm_ipc_procs 2 mismatch2 host send, device receive: the same on the
 *                             receiver
 *   shm_ipc_procs 2 garbage   a forged record whose span runs past the
 *                             allocation: SC_ERR_REMOTE "garbage"
 *   shm_ipc_procs 2 badhandle a forged handle: SC_ERR_REMOTE "cannot open"
 *   shm_ipc_procs 2 cancel    cancel_all during a (slow) device copy waits
 *                             for it; the sender fails, naming the receiver
 *   shm_ipc_procs N nodev     without a device runtime: props say
 *                             device_mem 0 and a device request is refused
 * Exit 0 when every rank passed. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/devrt.h"
#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "transport/shm/shm_internal.h"
#include "transport/transport.h"

#define MAXN       8
#define TIMEOUT_MS 30000

typedef struct shared {
  volatile int arrived, gen;
  uint8_t addrs[MAXN][SC_TP_ADDR_MAX];
} shared_t;

static shared_t *sh;
static int N, me;
static sc_transport_t *tp;
static const sc_devrt_t *rt;
static void *stream;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "rank %d: FAIL %s:%d: ", me, __FILE__, __LINE__);                              \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, " (%s)\n", sc_last_error());                                                   \
    exit(1);                                                                                       \
  } while (0)
#define OK(x)                                                                                      \
  do {                                                                                             \
    sc_result_t r_ = (x);                                                                          \
    if (r_ != SC_SUCCESS) FAIL("%s -> %s", #x, sc_strerror(r_));                                   \
  } while (0)

static void barrier(void) {
  int gen = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&sh->arrived, 1, __ATOMIC_ACQ_REL) == N) {
    __atomic_store_n(&sh->arrived, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->gen, gen + 1, __ATOMIC_RELEASE);
    return;
  }
  int64_t end = sc_now_ms() + TIMEOUT_MS;
  while (__atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE) == gen) {
    if (sc_now_ms() > end) FAIL("barrier timed out");
    sched_yield();
  }
}

static uint8_t pat(int sender, int tag, size_t i) {
  return (uint8_t)(sender * 131 + tag * 17 + i * 7 + (i >> 9));
}

/* Every request done; the first error is returned with its text. */
static sc_result_t drive(sc_tp_req_t *reqs, int n) {
  int64_t end = sc_now_ms() + TIMEOUT_MS;
  for (;;) {
    int left = 0;
    for (int i = 0; i < n; i++) {
      int s = __atomic_load_n(&reqs[i].state, __ATOMIC_ACQUIRE);
      if (s == SC_TP_REQ_ERROR) return reqs[i].status;
      left += s == SC_TP_REQ_PENDING;
    }
    if (!left) return SC_SUCCESS;
    if (sc_now_ms() > end) return SC_ERR(SC_ERR_TIMEOUT, "test: %d requests left", left);
    sc_result_t r = tp->ops->progress(tp, 50, NULL);
    if (r != SC_SUCCESS) return r;
  }
}

static void dev_sync(void) {
  void *ev;
  OK(rt->event_create(&ev));
  OK(rt->event_record(ev, stream));
  OK(sc_dev_event_wait(rt, ev, TIMEOUT_MS, "test stream"));
  OK(rt->event_destroy(ev));
}

static uint8_t *host_tmp;
static size_t host_tmp_len;

static void dev_fill(uint8_t *d, size_t n, int sender, int tag) {
  if (!n) return;
  for (size_t i = 0; i < n; i++) host_tmp[i] = pat(sender, tag, i);
  OK(rt->memcpy_async(d, host_tmp, n, stream));
  dev_sync();
}

static void dev_check(const uint8_t *d, size_t n, int sender, int tag, const char *what) {
  if (!n) return;
  memset(host_tmp, 0, n);
  OK(rt->memcpy_async(host_tmp, d, n, stream));
  dev_sync();
  for (size_t i = 0; i < n; i++)
    if (host_tmp[i] != pat(sender, tag, i))
      FAIL("%s: byte %zu of %zu from rank %d (tag %d) is 0x%02x, expected 0x%02x", what, i, n,
           sender, tag, host_tmp[i], pat(sender, tag, i));
}

static void setup(void) {
  sc_tp_config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.rank = me;
  cfg.nranks = N;
  memset(cfg.secret, 0x5a, sizeof(cfg.secret));
  cfg.timeout_ms = TIMEOUT_MS;
  cfg.nsocks = 1;
  cfg.spin_us = 20;
  size_t len = 0;
  OK(sc_shm_transport.create(&cfg, &tp, sh->addrs[me], &len));
  barrier();
  OK(tp->ops->connect_all(tp, sh->addrs, SC_TP_ADDR_MAX));
}

/* ---- data ---- */

static const size_t sizes[] = {0, 1, 1000, (64 << 10) + 3, 1 << 20};
#define NSIZES 5

static void all_pairs(int round) {
  /* One send allocation and one receive allocation, messages at offsets. */
  size_t per = 0, offs[NSIZES];
  for (int k = 0; k < NSIZES; k++) {
    offs[k] = per;
    per += sizes[k] + 40; /* odd offsets inside the allocation */
  }
  uint8_t *sbuf, *rbuf;
  OK(rt->malloc_device((void **)&sbuf, per));
  OK(rt->malloc_device((void **)&rbuf, per * (size_t)N));
  for (int k = 0; k < NSIZES; k++) dev_fill(sbuf + offs[k] + 5, sizes[k], me, round * 10 + k);
  sc_tp_req_t reqs[2 * MAXN * NSIZES];
  memset(reqs, 0, sizeof(reqs));
  int n = 0;
  for (int q = 0; q < N; q++) {
    if (q == me) continue;
    for (int k = 0; k < NSIZES; k++) {
      sc_tp_req_t *r = &reqs[n++];
      r->device = 1;
      OK(tp->ops->irecv(tp, q, rbuf + (size_t)q * per + offs[k] + 5, sizes[k], r));
      r = &reqs[n++];
      r->device = 1;
      OK(tp->ops->isend(tp, q, sbuf + offs[k] + 5, sizes[k], r));
    }
  }
  OK(drive(reqs, n));
  for (int q = 0; q < N; q++)
    for (int k = 0; q != me && k < NSIZES; k++)
      dev_check(rbuf + (size_t)q * per + offs[k] + 5, sizes[k], q, round * 10 + k, "all pairs");
  OK(rt->free_device(sbuf));
  OK(rt->free_device(rbuf));
}

/* 100 messages to the next rank, each from its own allocation: the
 * receiver's cache of opened allocations overflows and evicts. */
static void many_buffers(void) {
  enum { M = 100, LEN = 4096 + 8, BATCH = 10 };
  int next = (me + 1) % N, prev = (me + N - 1) % N;
  uint8_t *bufs[M], *rbuf;
  for (int i = 0; i < M; i++) {
    OK(rt->malloc_device((void **)&bufs[i], LEN));
    dev_fill(bufs[i], LEN, me, 1000 + i);
  }
  OK(rt->malloc_device((void **)&rbuf, (size_t)M * LEN));
  for (int b = 0; b < M; b += BATCH) {
    sc_tp_req_t reqs[2 * BATCH];
    memset(reqs, 0, sizeof(reqs));
    for (int i = 0; i < BATCH; i++) {
      reqs[2 * i].device = reqs[2 * i + 1].device = 1;
      OK(tp->ops->irecv(tp, prev, rbuf + (size_t)(b + i) * LEN, LEN, &reqs[2 * i]));
      OK(tp->ops->isend(tp, next, bufs[b + i], LEN, &reqs[2 * i + 1]));
    }
    OK(drive(reqs, 2 * BATCH));
  }
  for (int i = 0; i < M; i++)
    dev_check(rbuf + (size_t)i * LEN, LEN, prev, 1000 + i, "many buffers");
  /* The ring a second time, in reverse: entries evicted earlier are opened again. */
  for (int i = M - 1; i >= 0; i--) {
    sc_tp_req_t reqs[2];
    memset(reqs, 0, sizeof(reqs));
    reqs[0].device = reqs[1].device = 1;
    OK(tp->ops->irecv(tp, prev, rbuf + (size_t)i * LEN, LEN, &reqs[0]));
    OK(tp->ops->isend(tp, next, bufs[i], LEN, &reqs[1]));
    OK(drive(reqs, 2));
  }
  for (int i = 0; i < M; i++) dev_check(rbuf + (size_t)i * LEN, LEN, prev, 1000 + i, "reverse");
  for (int i = 0; i < M; i++) OK(rt->free_device(bufs[i]));
  OK(rt->free_device(rbuf));
  sc_shm_dev_t *d = sc_shm_of(tp)->dev;
  if (!d || d->evictions == 0) FAIL("the receiver's cache never evicted (%p)", (void *)d);
  printf("rank %d: %llu allocations opened, %llu evicted\n", me, (unsigned long long)d->opens,
         (unsigned long long)d->evictions);
}

/* Free a sent buffer and allocate the same size again: the new allocation
 * (often at the same address) must be what arrives, never the old one that
 * the receiver still has mapped. The sender also overwrites each buffer as
 * soon as its send completed: by then the receiver's copy has ended. */
static void realloc_same_size(void) {
  enum { LEN = 64 << 10, ROUNDS = 6 };
  int next = (me + 1) % N, prev = (me + N - 1) % N;
  uint8_t *rbuf, *sbuf, *old = NULL;
  int same = 0;
  OK(rt->malloc_device((void **)&rbuf, LEN));
  for (int round = 0; round < ROUNDS; round++) {
    OK(rt->malloc_device((void **)&sbuf, LEN));
    same += sbuf == old;
    dev_fill(sbuf, LEN, me, 2000 + round);
    sc_tp_req_t reqs[2];
    memset(reqs, 0, sizeof(reqs));
    reqs[0].device = reqs[1].device = 1;
    OK(tp->ops->irecv(tp, prev, rbuf, LEN, &reqs[0]));
    OK(tp->ops->isend(tp, next, sbuf, LEN, &reqs[1]));
    OK(drive(&reqs[1], 1));
    OK(rt->memset_async(sbuf, 0xee, LEN, stream));
    OK(drive(&reqs[0], 1));
    dev_check(rbuf, LEN, prev, 2000 + round, "reallocated");
    dev_sync();
    OK(rt->free_device(sbuf));
    old = sbuf;
    barrier(); /* every receive checked before any sender frees and reuses */
  }
  OK(rt->free_device(rbuf));
  printf("rank %d: %d of %d reallocations at the freed address\n", me, same, ROUNDS - 1);
}

static void check_props(int want) {
  for (int a = 0; a < N; a++)
    for (int b = 0; b < N; b++) {
      if (a == b) continue;
      sc_tp_props_t p;
      OK(tp->ops->props(tp, a, b, &p));
      if (p.device_mem != want) FAIL("props(%d, %d).device_mem = %d", a, b, p.device_mem);
    }
}

static void run_data(void) {
  check_props(1);
  for (int round = 0; round < 3; round++) all_pairs(round);
  barrier();
  many_buffers();
  barrier();
  realloc_same_size();
}

/* ---- failures ---- */

static void expect_remote(sc_result_t r, const char *who, const char *what) {
  const char *msg = sc_last_error();
  if (r != SC_ERR_REMOTE || !strstr(msg, who) || (what && !strstr(msg, what)))
    FAIL("expected SC_ERR_REMOTE naming %s (%s), got %s", who, what ? what : "", sc_strerror(r));
  printf("rank %d: failed as expected: %s\n", me, msg);
}

/* dev_sends 1: rank 0 sends device memory, rank 1 posts host memory; 0: the reverse. */
static void run_mismatch(int dev_sends) {
  uint8_t *d, host[256] = {0};
  OK(rt->malloc_device((void **)&d, sizeof(host)));
  sc_tp_req_t r;
  memset(&r, 0, sizeof(r));
  if (me == 0) {
    r.device = dev_sends;
    OK(tp->ops->isend(tp, 1, dev_sends ? (void *)d : (void *)host, sizeof(host), &r));
    sc_result_t res = drive(&r, 1);
    if (dev_sends || res != SC_SUCCESS) /* a host send may leave before the receiver looks */
      expect_remote(res, "rank 1", NULL);
  } else {
    r.device = !dev_sends;
    sc_result_t res = tp->ops->irecv(tp, 0, dev_sends ? (void *)host : (void *)d, sizeof(host), &r);
    expect_remote(res == SC_SUCCESS ? drive(&r, 1) : res, "rank 0",
                  dev_sends ? "device message where host memory"
                            : "host message where device memory");
  }
  OK(rt->free_device(d));
}

/* bad_handle 0: a span past the allocation; 1: a handle that opens nothing. */
static void run_garbage(int bad_handle) {
  enum { LEN = 4096 };
  uint8_t *d;
  OK(rt->malloc_device((void **)&d, LEN));
  sc_tp_req_t r;
  memset(&r, 0, sizeof(r));
  r.device = 1;
  if (me == 0) {
    /* A record as shm_ipc.c writes it, but for a span past the end. */
    sc_shm_transport_t *st = sc_shm_of(tp);
    OK(sc_shm_dev_init(st, "test"));
    uint8_t rec[SC_SHM_REC_LEN + SC_SHM_DEV_EXT_LEN];
    sc_tp_req_t fake = {.peer = 1, .is_send = 1, .buf = d, .len = LEN};
    OK(sc_shm_dev_encode(st, &fake, rec));
    if (bad_handle) {
      memset(rec + SC_SHM_REC_LEN, 0x77, SC_DEV_IPC_HANDLE_BYTES);
    } else {
      uint64_t off = 16; /* 16 + LEN > the allocation */
      memcpy(rec + 16, &off, 8);
    }
    sc_shm_peer_t *p = &st->peers[1];
    sc_shm_ring_put(&p->tx, rec, sizeof(rec));
    sc_shm_ring_publish(&p->tx);
    sc_shm_wake_peer(st, p);
    /* The receiver closes the channel: a receive from it fails. */
    uint8_t *d2;
    OK(rt->malloc_device((void **)&d2, 8));
    sc_result_t res = tp->ops->irecv(tp, 1, d2, 8, &r);
    expect_remote(res == SC_SUCCESS ? drive(&r, 1) : res, "rank 1", NULL);
    OK(rt->free_device(d2));
  } else {
    /* The record may be there already: irecv itself fails then. */
    sc_result_t res = tp->ops->irecv(tp, 0, d, LEN, &r);
    expect_remote(res == SC_SUCCESS ? drive(&r, 1) : res, "rank 0",
                  bad_handle ? "cannot open" : "garbage");
  }
  OK(rt->free_device(d));
}

/* cancel_all while a device copy runs (slow copies: SC_DEVFAKE_DELAY_US)
 * returns only after the copy ended: the bytes are in place at once (read
 * through the stand-in's own view, no stream), and the sender learns that
 * the channel closed. */
static void run_cancel(void) {
  enum { LEN = 1 << 20 };
  uint8_t *d;
  OK(rt->malloc_device((void **)&d, LEN));
  sc_tp_req_t r;
  memset(&r, 0, sizeof(r));
  r.device = 1;
  if (me == 0) {
    dev_fill(d, LEN, 0, 77);
    OK(tp->ops->isend(tp, 1, d, LEN, &r));
    expect_remote(drive(&r, 1), "rank 1", "closed its end");
  } else {
    if (!rt->host_view) FAIL("the stand-in has no host_view");
    OK(rt->memset_async(d, 0, LEN, stream));
    dev_sync();
    OK(tp->ops->irecv(tp, 0, d, LEN, &r));
    sc_shm_transport_t *st = sc_shm_of(tp);
    int64_t end = sc_now_ms() + TIMEOUT_MS;
    while (!sc_shm_dev_inflight(st)) {
      if (sc_now_ms() > end) FAIL("the copy never started");
      OK(tp->ops->progress(tp, 1, NULL));
    }
    tp->ops->cancel_all(tp, SC_ERR_ABORTED);
    if (r.state != SC_TP_REQ_ERROR || r.status != SC_ERR_ABORTED || sc_shm_dev_inflight(st))
      FAIL("after cancel_all: state %d status %d, %d copies", r.state, (int)r.status,
           sc_shm_dev_inflight(st));
    const uint8_t *v = rt->host_view(d);
    for (size_t i = 0; i < LEN; i++)
      if (v[i] != pat(0, 77, i)) FAIL("byte %zu not yet copied when cancel_all returned", i);
    printf("rank 1: the copy had ended when cancel_all returned\n");
  }
  barrier();
  OK(rt->free_device(d));
}

static void run_nodev(void) {
  check_props(0);
  uint8_t buf[8] = {0};
  sc_tp_req_t r;
  memset(&r, 0, sizeof(r));
  r.device = 1;
  sc_result_t res = tp->ops->isend(tp, (me + 1) % N, buf, sizeof(buf), &r);
  if (res != SC_ERR_INVALID_ARG || !strstr(sc_last_error(), "no device IPC"))
    FAIL("a device send without device IPC: %s", sc_strerror(res));
}

static int child(const char *mode) {
  setup();
  if (strcmp(mode, "nodev") != 0) {
    rt = sc_devrt();
    if (!rt) FAIL("no device runtime (SC_DEVRT_STANDIN)");
    OK(rt->stream_create(&stream));
    host_tmp_len = 1 << 20;
    host_tmp = malloc(host_tmp_len);
    if (!host_tmp) FAIL("malloc");
  }
  if (!strcmp(mode, "data"))
    run_data();
  else if (!strcmp(mode, "mismatch"))
    run_mismatch(1);
  else if (!strcmp(mode, "mismatch2"))
    run_mismatch(0);
  else if (!strcmp(mode, "garbage"))
    run_garbage(0);
  else if (!strcmp(mode, "badhandle"))
    run_garbage(1);
  else if (!strcmp(mode, "cancel"))
    run_cancel();
  else if (!strcmp(mode, "nodev"))
    run_nodev();
  else
    FAIL("unknown mode %s", mode);
  barrier();
  tp->ops->cancel_all(tp, SC_ERR_ABORTED);
  tp->ops->destroy(tp);
  if (stream) OK(rt->stream_destroy(stream));
  free(host_tmp);
  printf("rank %d: %s passed\n", me, mode);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3 || atoi(argv[1]) < 2 || atoi(argv[1]) > MAXN) {
    fprintf(stderr,
            "usage: %s NRANKS(2..%d) data|mismatch|mismatch2|garbage|badhandle|cancel|nodev\n",
            argv[0], MAXN);
    return 2;
  }
  N = atoi(argv[1]);
  sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 2;
  memset((void *)sh, 0, sizeof(*sh));
  pid_t pids[MAXN];
  for (int i = 0; i < N; i++) {
    pids[i] = fork();
    if (pids[i] < 0) return 2;
    if (pids[i] == 0) {
      me = i;
      exit(child(argv[2])); /* exit, not _exit: leak checkers run at exit */
    }
  }
  int bad = 0;
  for (int i = 0; i < N; i++) {
    int st = 0;
    while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d: %s %d\n", i, WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      bad++;
      /* The others would wait for it at a barrier: end them. */
      for (int j = 0; j < N; j++)
        if (j != i) kill(pids[j], SIGKILL);
    }
  }
  printf("%s on %d ranks: %s\n", argv[2], N, bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
