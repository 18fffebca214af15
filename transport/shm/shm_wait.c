/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport: how a rank waits (progress). It looks at the
 * rings; when nothing moved, it looks again between pauses while a peer it
 * waits on runs on another core, yields the core for up to spin_us (not
 * while another program holds it: lib/base/yield.h), then announces `sleeping`
 * and polls its doorbell plus the pidfds of the peers it waits on (a dead
 * peer wakes it at once), at most SC_SHM_CHECK_MS per poll so that liveness
 * without pidfds and the peers' `closed` flags are checked regularly. Each
 * rank publishes in its segment header whether it runs, and where (`oncpu`),
 * for its peers' choice between looking again and yielding. The passes over
 * the rings are shm.c's. sc_shm_wait is the transport's `wait`: a second
 * thread sleeps on the doorbell without touching a request, while another
 * may drive progress. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/yield.h"
#include "transport/shm/shm_internal.h"

/* Looks at the rings, between pauses, before a yield (see sc_shm_progress). */
#define SC_SHM_POLLS_BEFORE_YIELD 32
/* hdr->oncpu of a rank that runs on a CPU sched_getcpu could not name. */
#define SC_SHM_ONCPU_UNKNOWN UINT32_MAX

void sc_shm_mark_running(sc_shm_transport_t *tp) {
  int cpu = sched_getcpu();
  uint32_t v = cpu >= 0 ? (uint32_t)cpu + 1 : SC_SHM_ONCPU_UNKNOWN;
  /* A store of an unchanged value would still take the line from the
   * peers that read it. */
  if (v == tp->oncpu) return;
  tp->oncpu = v;
  __atomic_store_n(&tp->hdr->oncpu, v, __ATOMIC_RELAXED);
}

static void mark_off_cpu(sc_shm_transport_t *tp) {
  tp->oncpu = 0;
  __atomic_store_n(&tp->hdr->oncpu, 0u, __ATOMIC_RELAXED);
}

static void drain_doorbell(sc_shm_transport_t *tp) {
  char buf[64];
  while (recv(tp->db_fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0 || errno == EINTR) {
  }
}

/* Counts this thread in `sleeping` (peers ring the doorbell for what they
 * put in a ring from now on; the fence pairs with theirs), then looks at the
 * rings for what came before: 1 with the count kept, to sleep; 0 with it
 * taken back when they moved (*moved) or failed (*res, first_err). */
static int sleep_announce(sc_shm_transport_t *tp, int *moved, sc_result_t *res, char *first_err,
                          size_t errlen) {
  __atomic_fetch_add(&tp->hdr->sleeping, 1u, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  *res = sc_shm_pass_all(tp, moved, SC_SHM_CHECK_NONE, first_err, errlen);
  if (!*moved && *res == SC_SUCCESS) return 1;
  __atomic_fetch_sub(&tp->hdr->sleeping, 1u, __ATOMIC_RELAXED);
  return 0;
}

/* Sleep until a peer rings, a waited-on peer exits, wake() or the slice ends. */
static sc_result_t sleep_once(sc_shm_transport_t *tp, int timeout_ms, int *moved, char *first_err,
                              size_t errlen) {
  sc_result_t res;
  if (!sleep_announce(tp, moved, &res, first_err, errlen)) return res;
  int n = 0;
  tp->pfds[n] = (struct pollfd){.fd = tp->db_fd, .events = POLLIN};
  tp->pfd_peer[n++] = -1;
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_shm_peer_t *p = &tp->peers[i];
    if (!p->local || p->dead || p->gone || p->pidfd < 0 || !sc_shm_peer_queued(p)) continue;
    tp->pfds[n] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
    tp->pfd_peer[n++] = i;
  }
  int slice = timeout_ms < SC_SHM_CHECK_MS ? timeout_ms : SC_SHM_CHECK_MS;
  struct timespec ts = {slice / 1000, (long)(slice % 1000) * 1000000L};
  /* A device copy's end rings no doorbell: look again soon (a copy of
   * megabytes takes tens to hundreds of microseconds). */
  if (sc_shm_dev_inflight(tp)) ts = (struct timespec){0, SC_SHM_DEV_POLL_US * 1000L};
  mark_off_cpu(tp);
  int rc = ppoll(tp->pfds, (nfds_t)n, &ts, NULL);
  int err = errno;
  sc_shm_mark_running(tp);
  __atomic_fetch_sub(&tp->hdr->sleeping, 1u, __ATOMIC_RELAXED);
  if (rc < 0 && err != EINTR) return SC_ERR(SC_ERR_SYSTEM, "shm progress: poll: %s", strerror(err));
  if (rc > 0 && tp->pfds[0].revents) {
    if (tp->lazy) {
      sc_result_t r = sc_shm_db_service(tp);
      if (r != SC_SUCCESS && res == SC_SUCCESS) {
        res = r;
        sc_error_get_detail(first_err, errlen);
      }
    } else {
      drain_doorbell(tp);
    }
  }
  int64_t now = sc_now_ms();
  for (int k = 1; rc > 0 && k < n; k++) {
    if (!tp->pfds[k].revents) continue;
    sc_result_t r = sc_shm_check_peer(tp, &tp->peers[tp->pfd_peer[k]], now, 1);
    if (r != SC_SUCCESS && res == SC_SUCCESS) {
      res = r;
      sc_error_get_detail(first_err, errlen);
    }
  }
  return res;
}

int sc_shm_sleep_enter(sc_transport_t *base, struct pollfd *db, int *moved, sc_result_t *res) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  char first_err[SC_ERRMSG_MAX];
  *moved = 0;
  *res = SC_SUCCESS;
  if (tp->db_fd < 0 || sc_shm_dev_inflight(tp) ||
      __atomic_load_n(&tp->db_pending, __ATOMIC_ACQUIRE))
    return 1;
  if (!sleep_announce(tp, moved, res, first_err, sizeof(first_err))) {
    if (*res != SC_SUCCESS) sc_error_set_detail(first_err);
    return 1;
  }
  *db = (struct pollfd){.fd = tp->db_fd, .events = POLLIN};
  mark_off_cpu(tp);
  return 0;
}

void sc_shm_sleep_leave(sc_transport_t *base, int rang) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  sc_shm_mark_running(tp);
  __atomic_fetch_sub(&tp->hdr->sleeping, 1u, __ATOMIC_RELAXED);
  if (rang) __atomic_store_n(&tp->db_pending, 1, __ATOMIC_RELEASE);
}

/* A peer this rank waits on runs now on another CPU, so it may answer
 * within a microsecond or so; one that gave its core up (or shares ours)
 * answers only after a context switch, which a yield brings sooner. */
int sc_shm_peer_runs_elsewhere(const sc_shm_transport_t *tp) {
  for (int i = 0; i < tp->base.nranks; i++) {
    const sc_shm_peer_t *p = &tp->peers[i];
    if (!p->local || p->dead || !p->hdr || !(p->rq_head || p->sq_head || p->cq_head || p->dq_head))
      continue;
    uint32_t v = __atomic_load_n(&p->hdr->oncpu, __ATOMIC_RELAXED);
    if (v && v != tp->oncpu) return 1;
  }
  return 0;
}

/* Looks between pauses, at most *budget of them: every one when `always`,
 * else while a peer waited on runs on another CPU. */
static sc_result_t spin_looks(sc_shm_transport_t *tp, int always, int *budget, int *moved,
                              char *first_err, size_t errlen) {
  sc_result_t res = SC_SUCCESS;
  while (*budget > 0 && !*moved && res == SC_SUCCESS &&
         (always || sc_shm_peer_runs_elsewhere(tp))) {
    --*budget;
    sc_cpu_relax();
    res = sc_shm_pass_all(tp, moved, SC_SHM_CHECK_NONE, first_err, errlen);
  }
  return res;
}

sc_result_t sc_shm_progress(sc_transport_t *base, int timeout_ms, int *progressed) {
  if (progressed) *progressed = 0;
  sc_shm_transport_t *tp = sc_shm_of(base);
  if (!tp) return SC_ERR(SC_ERR_INVALID_ARG, "shm progress: NULL transport");
  char first_err[SC_ERRMSG_MAX];
  int moved = 0;
  sc_result_t res = SC_SUCCESS;
  /* The doorbell rang while sc_shm_wait's thread slept on it: read it here,
   * or that thread's next wait would return at once, and again. */
  if (__atomic_exchange_n(&tp->db_pending, 0, __ATOMIC_ACQ_REL)) {
    if (tp->lazy)
      res = sc_shm_db_service(tp);
    else
      drain_doorbell(tp);
    if (res != SC_SUCCESS) sc_error_get_detail(first_err, sizeof(first_err));
  }
  if (res == SC_SUCCESS)
    res = sc_shm_pass_all(tp, &moved, SC_SHM_CHECK_LAZY, first_err, sizeof(first_err));
  if (!moved && res == SC_SUCCESS && timeout_ms > 0) {
    if (tp->spin_us > 0 && tp->npending > 0) {
      /* Yielding between looks: with more ranks than cores (or other jobs
       * on them) the peer we wait for gets the core at once; on an idle
       * core sched_yield returns at once and this is a plain poll. */
      /* A peer that is running answers a small message within a
       * microsecond or so: look a few times before paying a sched_yield
       * system call (otherwise one per small all-reduce at P=2). With
       * more ranks than cores, only while that peer is seen running on
       * another core: a yield then hands our core to a rank that shares
       * it, which mostly finds nothing to do and hands it back (two
       * context switches for none of the work). At P=4 on 2 cores, 8 B,
       * 1.06-1.18 context switches per rank and operation before, 0.45-
       * 0.86 with this (perf/README.md). */
      const int fits = tp->fits_cores;
      /* One round of looks per wait, spent whenever the peer is seen
       * running: a peer busy with a long copy runs too, and looks after
       * every yield would take the core from the ranks that share it
       * and have work to do. */
      int budget = SC_SHM_POLLS_BEFORE_YIELD;
      res = spin_looks(tp, fits, &budget, &moved, first_err, sizeof(first_err));
      /* The clock only once the looks found nothing. While another program
       * holds the core, yields are off (lib/base/yield.h): sleep at once. */
      int64_t now = !moved && res == SC_SUCCESS ? sc_now_us() : 0, end = now + tp->spin_us;
      while (!moved && res == SC_SUCCESS && now < end && sc_yield_allowed(&tp->yield, now)) {
        mark_off_cpu(tp);
        now = sc_yield_core(&tp->yield, now);
        sc_shm_mark_running(tp);
        res = sc_shm_pass_all(tp, &moved, SC_SHM_CHECK_NONE, first_err, sizeof(first_err));
        if (!moved && res == SC_SUCCESS && !fits)
          res = spin_looks(tp, 0, &budget, &moved, first_err, sizeof(first_err));
      }
    }
    if (!moved && res == SC_SUCCESS) {
      res = sleep_once(tp, timeout_ms, &moved, first_err, sizeof(first_err));
      if (res == SC_SUCCESS)
        res = sc_shm_pass_all(tp, &moved, SC_SHM_CHECK_NOW, first_err, sizeof(first_err));
    }
  }
  if (progressed) *progressed = moved;
  if (res != SC_SUCCESS) sc_error_set_detail(first_err);
  return res;
}

/* Bytes in a ring of a connected peer that no earlier return announced:
 * read from the rings' shared counters only (the progress thread owns the
 * rest). A tail already announced is not announced again, so data that the
 * progress thread leaves in a ring (a dead peer's) does not make every wait
 * return at once. */
static int rings_news(sc_shm_transport_t *tp) {
  int news = 0;
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_shm_peer_t *p = &tp->peers[i];
    if (!p->local || !__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE)) continue;
    uint64_t tail = __atomic_load_n(&p->rx.ctl->tail, __ATOMIC_ACQUIRE);
    if (tail == __atomic_load_n(&p->rx.ctl->head, __ATOMIC_ACQUIRE) || tail == p->wait_tail)
      continue;
    p->wait_tail = tail;
    news = 1;
  }
  return news;
}

/* The transport's wait (transport.h): counted in `sleeping`, so that peers
 * ring the doorbell for what they put in a ring from now on (the fence pairs
 * with theirs, as in sleep_once); what came before is seen in the rings'
 * counters. The doorbell is left unread (it also carries the lazy pairs'
 * setup, which only the progress thread may act on): db_pending has the
 * next progress read it. */
void sc_shm_wait(sc_transport_t *base, int timeout_ms) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  if (!tp || !tp->connected || tp->db_fd < 0 || timeout_ms <= 0) return;
  if (__atomic_load_n(&tp->db_pending, __ATOMIC_ACQUIRE)) return;
  /* Where the local ranks fit the cores, look at the rings for spin_us first,
   * as progress does: a peer's answer then costs no doorbell (the peer rings
   * only a rank counted in `sleeping`) and no wake-up. */
  if (tp->spin_us > 0 && tp->fits_cores) {
    const int64_t end = sc_now_us() + tp->spin_us;
    do {
      for (int i = 0; i < SC_SHM_POLLS_BEFORE_YIELD; i++) {
        if (rings_news(tp) || __atomic_exchange_n(&tp->woken, 0, __ATOMIC_ACQ_REL)) return;
        sc_cpu_relax();
      }
      /* The threads that share the cores (this rank's caller, the peer's)
       * have the work the rings wait for. */
      sched_yield();
    } while (sc_now_us() < end);
  }
  __atomic_fetch_add(&tp->hdr->sleeping, 1u, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (!rings_news(tp)) {
    struct pollfd q = {.fd = tp->db_fd, .events = POLLIN};
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    if (ppoll(&q, 1, &ts, NULL) > 0 && (q.revents & POLLIN))
      __atomic_store_n(&tp->db_pending, 1, __ATOMIC_RELEASE);
  }
  __atomic_fetch_sub(&tp->hdr->sleeping, 1u, __ATOMIC_RELAXED);
}
