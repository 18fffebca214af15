/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport: connecting pairs, eagerly at connect_all or on
 * first use (see shm_internal.h for the scheme). A pair is connected when
 * this rank has the peer's header page and its own channel in the peer's
 * segment mapped, both channels of the pair reserved and sized, and a
 * pidfd of the peer for the liveness checks. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/shm/shm_internal.h"

int sc_shm_test_no_procfd;

/* Doorbell messages of setup: the sender's descriptor (FD, SCM_RIGHTS), or
 * a request for the receiver's (ASK). Wake-ups are one byte. */
#define SC_SHM_FD_MAGIC  0x53435346u /* 'SCSF' */
#define SC_SHM_ASK_MAGIC 0x53435341u /* 'SCSA' */
typedef struct sc_shm_fd_msg {
  uint32_t magic;
  int32_t rank;
  uint64_t nonce;
  uint8_t tag[16];
} sc_shm_fd_msg_t;

static size_t chan_off(int idx) {
  return SC_SHM_HDR_BYTES + (size_t)idx * sc_shm_chan_stride(SC_SHM_RING_BYTES);
}

static int pid_gone(pid_t pid) {
  return kill(pid, 0) != 0 && errno == ESRCH;
}

/* Map the peer's header and this rank's channel in its segment from fd and
 * check it is the segment its address announced. */
static sc_result_t map_peer(sc_shm_transport_t *tp, int i, int fd) {
  sc_shm_peer_t *p = &tp->peers[i];
  if (p->hdr) return SC_SUCCESS;
  struct stat st;
  size_t want = sc_shm_seg_bytes(tp->base.nranks, SC_SHM_RING_BYTES);
  if (fstat(fd, &st) != 0 || (size_t)st.st_size != want)
    return SC_ERR(SC_ERR_REMOTE, "shm: %s's segment has %lld bytes, expected %zu", p->name,
                  (long long)st.st_size, want);
  /* Only the header and our own channel: a peer's whole segment is a ring
   * per rank of the job. (With pages larger than the layout's alignment,
   * map it all.) */
  size_t stride = sc_shm_chan_stride(SC_SHM_RING_BYTES);
  size_t off = chan_off(tp->base.rank);
  long page = sysconf(_SC_PAGESIZE);
  int whole = page <= 0 || off % (size_t)page != 0 || SC_SHM_HDR_BYTES % page != 0;
  size_t hlen = whole ? want : SC_SHM_HDR_BYTES;
  void *m = mmap(NULL, hlen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  void *c = MAP_FAILED;
  if (m != MAP_FAILED && !whole)
    c = mmap(NULL, stride, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
  int err = errno;
  if (m == MAP_FAILED || (!whole && c == MAP_FAILED)) {
    if (m != MAP_FAILED) munmap(m, hlen);
    return SC_ERR(SC_ERR_SYSTEM, "shm: mmap of %s's segment: %s", p->name, strerror(err));
  }
  p->hdr = m;
  p->hdr_len = hlen;
  p->chan = whole ? (uint8_t *)m + off : c;
  p->chan_len = whole ? 0 : stride;
  if (__atomic_load_n(&p->hdr->magic, __ATOMIC_ACQUIRE) != SC_SHM_SEG_MAGIC ||
      memcmp(p->hdr->tag, tp->tag, sizeof(tp->tag)) != 0 || p->hdr->owner_rank != i ||
      p->hdr->owner_pid != p->blob.pid || p->hdr->nranks != tp->base.nranks ||
      p->hdr->ring_bytes != SC_SHM_RING_BYTES)
    return SC_ERR(SC_ERR_REMOTE, "shm: the segment received as %s's does not belong to it",
                  p->name);
  return SC_SUCCESS;
}

/* ---- ring sizes ---- */

uint64_t sc_shm_default_budget(int local) {
  return sc_tp_shm_default_budget(sc_tp_host_mem_bytes(), local);
}

/* A full ring while the segment's claimed ring bytes stay within its
 * owner's budget, else the largest power of two that does, at least
 * SC_SHM_RING_MIN whatever the budget says. */
static uint64_t pick_size(sc_shm_seg_hdr_t *h) {
  uint64_t budget = __atomic_load_n(&h->ring_budget, __ATOMIC_RELAXED);
  for (uint64_t sz = SC_SHM_RING_BYTES; sz > SC_SHM_RING_MIN; sz >>= 1) {
    if (__atomic_add_fetch(&h->ring_used, sz, __ATOMIC_ACQ_REL) <= budget) return sz;
    __atomic_fetch_sub(&h->ring_used, sz, __ATOMIC_ACQ_REL);
  }
  __atomic_fetch_add(&h->ring_used, SC_SHM_RING_MIN, __ATOMIC_ACQ_REL);
  return SC_SHM_RING_MIN;
}

/* Channel at `off` of the segment whose owner's header is h, mapped at chan:
 * its control page and ring reserved through fd (-1: its owner reserved it
 * already, eager), its size decided by whichever side comes first. */
static sc_result_t claim(sc_shm_peer_t *p, int fd, sc_shm_seg_hdr_t *h, uint8_t *chan, size_t off,
                         uint64_t *out) {
  sc_shm_chan_ctl_t *ctl = (sc_shm_chan_ctl_t *)chan;
  int e = fd >= 0 ? posix_fallocate(fd, (off_t)off, SC_SHM_CTL_BYTES) : 0;
  if (e != 0)
    return SC_ERR(SC_ERR_SYSTEM, "shm: cannot reserve the channel with %s in shared memory: %s",
                  p->name, strerror(e));
  uint64_t sz = __atomic_load_n(&ctl->ring_bytes, __ATOMIC_ACQUIRE);
  if (sz == 0 && fd >= 0) {
    uint64_t want = pick_size(h), expect = 0;
    if (__atomic_compare_exchange_n(&ctl->ring_bytes, &expect, want, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      sz = want;
    } else {
      __atomic_fetch_sub(&h->ring_used, want, __ATOMIC_ACQ_REL);
      sz = expect;
    }
  }
  if (sz < SC_SHM_RING_MIN || sz > SC_SHM_RING_BYTES || (sz & (sz - 1)) != 0)
    return SC_ERR(SC_ERR_REMOTE, "shm: the channel with %s has a ring of %llu bytes", p->name,
                  (unsigned long long)sz);
  /* The other side may have sized it: reserve before the first write all
   * the same (a page that cannot exist would be a SIGBUS, not an error). */
  e = fd >= 0 ? posix_fallocate(fd, (off_t)(off + SC_SHM_CTL_BYTES), (off_t)sz) : 0;
  if (e != 0)
    return SC_ERR(SC_ERR_SYSTEM,
                  "shm: cannot reserve the %llu-byte ring with %s in shared memory: %s",
                  (unsigned long long)sz, p->name, strerror(e));
  *out = sz;
  return SC_SUCCESS;
}

/* Can this process read the peer's memory with process_vm_readv? (Yama,
 * seccomp or capabilities may forbid it; then the ring carries everything.) */
static int probe_cma(sc_shm_peer_t *p, int *err) {
  uint64_t v = 0;
  struct iovec l = {.iov_base = &v, .iov_len = sizeof(v)};
  struct iovec r = {.iov_base = (void *)(uintptr_t)p->hdr->probe_addr, .iov_len = sizeof(v)};
  ssize_t n = process_vm_readv(p->pid, &l, 1, &r, 1, 0);
  *err = n < 0 ? errno : 0;
  return n == (ssize_t)sizeof(v) && v == p->hdr->probe_value;
}

/* Both channels of the pair (p's segment mapped; fd: its descriptor, -1
 * when every channel was reserved at connect_all). Returns whether
 * single-copy reads of the peer work (in *cma_ok) for the log. */
static sc_result_t open_channels(sc_shm_transport_t *tp, sc_shm_peer_t *p, int fd, int *cma_ok,
                                 int *cma_err) {
  int i = (int)(p - tp->peers);
  uint64_t rx_sz = 0, tx_sz = 0;
  uint8_t *mine = tp->seg + chan_off(i);
  SC_CHECK(claim(p, fd >= 0 ? tp->seg_fd : -1, tp->hdr, mine, chan_off(i), &rx_sz));
  SC_CHECK(claim(p, fd, p->hdr, p->chan, chan_off(tp->base.rank), &tx_sz));
  sc_shm_ring_init(&p->rx, (sc_shm_chan_ctl_t *)mine, mine + SC_SHM_CTL_BYTES, rx_sz, 0);
  sc_shm_ring_init(&p->tx, (sc_shm_chan_ctl_t *)p->chan, p->chan + SC_SHM_CTL_BYTES, tx_sz, 1);
  *cma_ok = probe_cma(p, cma_err);
  /* The sender reads this verdict before each large send. */
  __atomic_store_n(&p->rx.ctl->cma_ok, *cma_ok ? 1u : 2u, __ATOMIC_RELEASE);
  p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
  p->next_check_ms = sc_now_ms() + SC_SHM_CHECK_MS;
  /* Release: sc_shm_wait, on another thread, reads rx once it sees this. */
  __atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
  tp->nready++;
  SC_TRACE(SC_SUBSYS_SHM, "shm: rank %d connected to %s (rings %llu KiB in, %llu KiB out%s)",
           tp->base.rank, p->name, (unsigned long long)(rx_sz >> 10),
           (unsigned long long)(tx_sz >> 10), *cma_ok ? ", single copy" : "");
  return SC_SUCCESS;
}

/* ---- eager ---- */

static int send_msg(sc_shm_transport_t *tp, sc_shm_peer_t *p, uint32_t magic, int fd) {
  sc_shm_fd_msg_t msg = {.magic = magic, .rank = tp->base.rank, .nonce = tp->me.nonce};
  memcpy(msg.tag, tp->tag, sizeof(msg.tag));
  struct iovec iov = {.iov_base = &msg, .iov_len = sizeof(msg)};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  memset(&ctl, 0, sizeof(ctl));
  struct msghdr mh = {
      .msg_name = &p->db_addr, .msg_namelen = p->db_len, .msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof(ctl.buf);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  ssize_t n;
  while ((n = sendmsg(tp->db_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == (ssize_t)sizeof(msg) ? 0 : errno;
}

/* One doorbell message, if any: returns its sender's rank with *magic and
 * *fd set (the caller owns fd, -1 without one), -1 when nothing (valid)
 * was there. Anything that is not a setup message of this job (a wake-up,
 * a forgery) is dropped. */
static int recv_msg(sc_shm_transport_t *tp, uint32_t *magic, int *fd, int *again) {
  sc_shm_fd_msg_t msg;
  struct iovec iov = {.iov_base = &msg, .iov_len = sizeof(msg)};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int) * 4)];
  } ctl;
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
  *fd = -1;
  *again = 0;
  ssize_t n = recvmsg(tp->db_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) {
    *again = errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    return -1;
  }
  int got = -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t j = 0; j < k; j++) {
      int f;
      memcpy(&f, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
      if (got < 0)
        got = f;
      else
        close(f);
    }
  }
  int ok = n == (ssize_t)sizeof(msg) && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
           (msg.magic == SC_SHM_FD_MAGIC ? got >= 0 : msg.magic == SC_SHM_ASK_MAGIC) &&
           memcmp(msg.tag, tp->tag, sizeof(tp->tag)) == 0 && msg.rank >= 0 &&
           msg.rank < tp->base.nranks && tp->peers[msg.rank].local &&
           tp->peers[msg.rank].blob.nonce == msg.nonce;
  if (!ok) {
    if (got >= 0) close(got);
    return -1;
  }
  *magic = msg.magic;
  *fd = got;
  return msg.rank;
}

/* Every local peer gets our segment's descriptor and we get each of theirs,
 * over the doorbells (bound before the bootstrap exchange, so a message sent
 * early waits in the queue). A full queue (EAGAIN) is retried. */
static sc_result_t exchange_fds(sc_shm_transport_t *tp, int64_t deadline) {
  int to_send = tp->nlocal, to_map = tp->nlocal;
  char *sent = calloc((size_t)tp->base.nranks, 2);
  if (!sent) return SC_ERR(SC_ERR_NOMEM, "shm setup table of %d ranks", tp->base.nranks);
  char *mapped = sent + tp->base.nranks;
  sc_result_t r = SC_SUCCESS;
  while (to_send > 0 || to_map > 0) {
    for (int i = 0; i < tp->base.nranks && to_send > 0; i++) {
      sc_shm_peer_t *p = &tp->peers[i];
      if (!p->local || sent[i]) continue;
      int e = send_msg(tp, p, SC_SHM_FD_MAGIC, tp->seg_fd);
      if (e == 0) {
        sent[i] = 1;
        to_send--;
      } else if (e != EAGAIN && e != EWOULDBLOCK && e != ECONNREFUSED && e != ENOENT) {
        r = SC_ERR(SC_ERR_SYSTEM, "shm: cannot pass the segment to %s: %s", p->name, strerror(e));
        goto out;
      }
    }
    int fd, again;
    uint32_t magic;
    int from = recv_msg(tp, &magic, &fd, &again);
    if (from >= 0) {
      if (fd >= 0 && !mapped[from]) {
        r = map_peer(tp, from, fd);
        mapped[from] = 1;
        to_map--;
      }
      if (fd >= 0) close(fd);
      if (r != SC_SUCCESS) goto out;
      continue;
    }
    if (!again) continue; /* a dropped message: look again */
    for (int i = 0; i < tp->base.nranks; i++) {
      sc_shm_peer_t *p = &tp->peers[i];
      if (p->local && (!mapped[i] || !sent[i]) && pid_gone(p->pid)) {
        r = SC_ERR(SC_ERR_REMOTE, "shm: %s exited during connection setup (seen by rank %d)",
                   p->name, tp->base.rank);
        goto out;
      }
    }
    if (sc_now_ms() > deadline) {
      int left = to_map > to_send ? to_map : to_send;
      r = SC_ERR(SC_ERR_TIMEOUT,
                 "shm: rank %d: %d local peer%s did not complete the shared-memory setup within "
                 "%d ms (SC_TIMEOUT_MS)",
                 tp->base.rank, left, left == 1 ? "" : "s", tp->timeout_ms);
      goto out;
    }
    struct pollfd q = {.fd = tp->db_fd, .events = POLLIN};
    poll(&q, 1, 1);
  }
out:
  free(sent);
  return r;
}

sc_result_t sc_shm_connect_eager(sc_shm_transport_t *tp, int64_t deadline) {
  /* Reserve and size the channel of every local peer: a peer never writes a
   * page that could fail to exist. */
  for (int i = 0; i < tp->base.nranks; i++) {
    if (!tp->peers[i].local) continue;
    size_t off = chan_off(i);
    int e = posix_fallocate(tp->seg_fd, (off_t)off, (off_t)sc_shm_chan_stride(SC_SHM_RING_BYTES));
    if (e != 0)
      return SC_ERR(SC_ERR_SYSTEM,
                    "shm: cannot reserve %zu bytes in /dev/shm for the channel from %s: %s",
                    sc_shm_chan_stride(SC_SHM_RING_BYTES), tp->peers[i].name, strerror(e));
    __atomic_store_n(&((sc_shm_chan_ctl_t *)(tp->seg + off))->ring_bytes, SC_SHM_RING_BYTES,
                     __ATOMIC_RELEASE);
    __atomic_fetch_add(&tp->hdr->ring_used, SC_SHM_RING_BYTES, __ATOMIC_ACQ_REL);
  }
  /* Sent only now, after the reservation. */
  SC_CHECK(exchange_fds(tp, deadline));
  int cma_ok = 0, cma_err = 0;
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_shm_peer_t *p = &tp->peers[i];
    if (!p->local) continue;
    int ok = 0, err = 0;
    SC_CHECK(open_channels(tp, p, -1, &ok, &err));
    cma_ok += ok;
    if (!ok) cma_err = err;
  }
  if (tp->nlocal > 0) {
    if (cma_ok == tp->nlocal)
      SC_INFO(SC_SUBSYS_SHM,
              "shm: single-copy path (process_vm_readv) works with all %d local peers; "
              "messages of %zu B and more use it",
              tp->nlocal, SC_SHM_SINGLE_COPY_MIN);
    else
      SC_INFO(SC_SUBSYS_SHM,
              "shm: single-copy path (process_vm_readv) works with %d of %d local peers (%s); "
              "the others get every message through the ring",
              cma_ok, tp->nlocal, cma_err ? strerror(cma_err) : "wrong probe value");
  }
  return SC_SUCCESS;
}

/* ---- lazy ---- */

/* The peer's descriptor arrived (or was opened): map, and connect the pair
 * when a post waits for it. Failures are the peer's (its later posts fail
 * with the same text). */
static sc_result_t complete(sc_shm_transport_t *tp, sc_shm_peer_t *p, int fd, int channels) {
  sc_result_t r = map_peer(tp, (int)(p - tp->peers), fd);
  int ok = 0, err = 0;
  if (r == SC_SUCCESS && channels && !p->ready) r = open_channels(tp, p, fd, &ok, &err);
  close(fd);
  if (r == SC_SUCCESS) return SC_SUCCESS;
  char detail[SC_ERRMSG_MAX];
  sc_error_get_detail(detail, sizeof(detail));
  return sc_shm_peer_fail(tp, p, "could not be connected: %.200s", detail);
}

static void ask(sc_shm_transport_t *tp, sc_shm_peer_t *p) {
  if (!p->asked) {
    p->asked = 1;
    tp->nasked++;
    p->ask_deadline_ms = sc_now_ms() + tp->timeout_ms;
    SC_TRACE(SC_SUBSYS_SHM, "shm: rank %d cannot open %s's segment through /proc; asking for it",
             tp->base.rank, p->name);
  }
  /* A full queue: sc_shm_db_service asks again. */
  if (send_msg(tp, p, SC_SHM_ASK_MAGIC, -1) == 0) p->asked = 2;
}

/* The peer connected the pair (its channel in this segment is sized) and
 * then left, exited or destroyed its transport, before this rank connected
 * back: its segment is gone, but what it wrote is in this rank's own
 * segment, and a clean goodbye after a completed send must not lose it. The
 * pair is connected for receiving only: the ring from this segment, the
 * send side a closed channel of the transport's own; the peer counts as
 * gone, so sends fail at their post and the liveness check drains the ring,
 * then fails the receives it could not satisfy. */
static sc_result_t drain_only(sc_shm_transport_t *tp, sc_shm_peer_t *p, const char *how) {
  int i = (int)(p - tp->peers);
  uint8_t *mine = tp->seg + chan_off(i);
  uint64_t rx_sz = 0;
  SC_CHECK(claim(p, -1, tp->hdr, mine, chan_off(i), &rx_sz));
  sc_shm_ring_init(&p->rx, (sc_shm_chan_ctl_t *)mine, mine + SC_SHM_CTL_BYTES, rx_sz, 0);
  __atomic_store_n(&tp->left_tx.closed, 1u, __ATOMIC_RELEASE);
  sc_shm_ring_init(&p->tx, &tp->left_tx, NULL, 0, 1);
  p->gone = 1;
  p->gone_how = how;
  __atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
  tp->nready++;
  SC_TRACE(SC_SUBSYS_SHM, "shm: rank %d drains what %s left in its ring (%s)", tp->base.rank,
           p->name, how);
  return SC_SUCCESS;
}

static sc_result_t get_peer(sc_shm_transport_t *tp, sc_shm_peer_t *p, int channels) {
  if (p->dead) return SC_ERR(SC_ERR_REMOTE, "%s", sc_shm_peer_err(p));
  if (p->asked) return SC_SUCCESS; /* the answer connects it */
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)p->pid, (int)p->blob.seg_fd);
  int fd = -1, err = EACCES;
  if (!sc_shm_test_no_procfd) {
    fd = open(path, O_RDWR | O_CLOEXEC);
    err = errno;
  }
  if (fd >= 0) return complete(tp, p, fd, channels);
  /* No such descriptor: the process exited (or is a zombie) or destroyed
   * its transport. Refused (EACCES, EPERM: ptrace rules): ask for it. */
  const int exited = pid_gone(p->pid);
  if (err == ENOENT || exited) {
    if (channels && !p->ready && sc_shm_peer_came(tp, p))
      return drain_only(tp, p, exited ? "exited" : "closed its transport");
    return sc_shm_peer_fail(tp, p,
                            "exited or closed its transport before its shared-memory "
                            "channel was set up");
  }
  ask(tp, p);
  return SC_SUCCESS;
}

sc_result_t sc_shm_peer_listen(sc_shm_transport_t *tp, sc_shm_peer_t *p) {
  if (p->listening) return SC_SUCCESS;
  size_t off = chan_off((int)(p - tp->peers));
  int e = posix_fallocate(tp->seg_fd, (off_t)off, SC_SHM_CTL_BYTES);
  if (e != 0)
    return SC_ERR(SC_ERR_SYSTEM, "shm: cannot reserve the channel from %s in shared memory: %s",
                  p->name, strerror(e));
  p->listening = 1;
  return SC_SUCCESS;
}

int sc_shm_peer_came(const sc_shm_transport_t *tp, const sc_shm_peer_t *p) {
  if (!p->listening) return 0;
  const sc_shm_chan_ctl_t *ctl =
      (const sc_shm_chan_ctl_t *)(tp->seg + chan_off((int)(p - tp->peers)));
  return __atomic_load_n(&ctl->ring_bytes, __ATOMIC_ACQUIRE) != 0;
}

sc_result_t sc_shm_peer_connect(sc_shm_transport_t *tp, sc_shm_peer_t *p) {
  if (p->ready) return SC_SUCCESS;
  p->want_channels = 1;
  return get_peer(tp, p, 1);
}

sc_result_t sc_shm_peer_attach(sc_shm_transport_t *tp, sc_shm_peer_t *p) {
  if (p->hdr) return SC_SUCCESS;
  return get_peer(tp, p, p->want_channels);
}

/* Peers whose answer is overdue, or who exited before it came, fail. */
static sc_result_t overdue(sc_shm_transport_t *tp) {
  sc_result_t res = SC_SUCCESS;
  int64_t now = sc_now_ms();
  for (int i = 0; i < tp->base.nranks && tp->nasked > 0; i++) {
    sc_shm_peer_t *p = &tp->peers[i];
    if (!p->asked) continue;
    sc_result_t r = SC_SUCCESS;
    if (p->asked == 1) ask(tp, p);
    if (pid_gone(p->pid)) {
      p->asked = 0;
      tp->nasked--;
      r = sc_shm_peer_fail(tp, p, "exited before its shared-memory channel was set up");
    } else if (now > p->ask_deadline_ms) {
      p->asked = 0;
      tp->nasked--;
      r = sc_shm_peer_fail(tp, p,
                           "did not answer the request for its shared-memory segment within %d ms "
                           "(SC_TIMEOUT_MS)",
                           tp->timeout_ms);
    }
    if (res == SC_SUCCESS) res = r;
  }
  return res;
}

sc_result_t sc_shm_db_service(sc_shm_transport_t *tp) {
  sc_result_t res = SC_SUCCESS;
  for (;;) {
    int fd, again;
    uint32_t magic;
    int from = recv_msg(tp, &magic, &fd, &again);
    if (from < 0) {
      if (again) break;
      continue; /* a wake-up or a dropped message */
    }
    sc_shm_peer_t *p = &tp->peers[from];
    if (magic == SC_SHM_ASK_MAGIC) {
      /* A full queue or a peer gone: it asks again, or its pair never
       * mattered. */
      (void)send_msg(tp, p, SC_SHM_FD_MAGIC, tp->seg_fd);
      continue;
    }
    if (!p->asked || p->dead) {
      close(fd);
      continue;
    }
    p->asked = 0;
    tp->nasked--;
    /* The caller's next pass moves what waited for the pair. */
    sc_result_t r = complete(tp, p, fd, p->want_channels);
    if (res == SC_SUCCESS) res = r;
  }
  if (tp->nasked > 0) {
    sc_result_t r = overdue(tp);
    if (res == SC_SUCCESS) res = r;
  }
  return res;
}

/* A peer that connected to this rank while this rank never connected back
 * may wait on it: its channel in this segment is reserved (the pages hold
 * data, which lseek finds without touching the holes), and its `closed`
 * flag makes the peer fail at its next liveness check. */
void sc_shm_close_unconnected(sc_shm_transport_t *tp) {
  if (tp->seg_fd < 0) return;
  size_t stride = sc_shm_chan_stride(SC_SHM_RING_BYTES);
  off_t at = SC_SHM_HDR_BYTES;
  for (;;) {
    off_t d = lseek(tp->seg_fd, at, SEEK_DATA);
    if (d < 0 || (size_t)d >= tp->seg_len) break;
    size_t i = ((size_t)d - SC_SHM_HDR_BYTES) / stride;
    if ((int)i >= tp->base.nranks) break;
    size_t ctl = SC_SHM_HDR_BYTES + i * stride;
    sc_shm_peer_t *p = &tp->peers[i];
    if ((size_t)d < ctl + SC_SHM_CTL_BYTES && !p->ready && p->local) {
      __atomic_store_n(&((sc_shm_chan_ctl_t *)(tp->seg + ctl))->closed, 1u, __ATOMIC_RELEASE);
      char b = 1;
      (void)sendto(tp->db_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&p->db_addr,
                   p->db_len);
    }
    at = (off_t)(ctl + stride);
  }
}
