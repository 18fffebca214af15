/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport setup: the segment and doorbell at create, mapping
 * the peers' segments at connect_all (the last mapper unlinks each name),
 * single-copy detection, teardown. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "transport/shm/shm_internal.h"

uint64_t sc_shm_fnv1a(const void *p, size_t n, uint64_t h) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

#define SC_FNV_SEED 0xcbf29ce484222325ull

void sc_shm_db_name(struct sockaddr_un *sa, socklen_t *len, int32_t pid, uint64_t nonce) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  /* Abstract namespace (leading NUL): nothing on disk, gone with the process. */
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "scshm-%" PRId32 "-%016" PRIx64, pid,
                   nonce);
  *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int sc_shm_blob_valid(const sc_shm_blob_t *b) {
  return b->magic == SC_SHM_BLOB_MAGIC && b->pid > 0;
}

int sc_shm_blob_same_host(const sc_shm_blob_t *a, const sc_shm_blob_t *b) {
  return sc_shm_blob_valid(a) && sc_shm_blob_valid(b) && a->host_hash == b->host_hash &&
         a->boot_hash == b->boot_hash && a->pidns == b->pidns && a->netns == b->netns;
}

static void fill_blob(sc_shm_blob_t *b, int rank) {
  memset(b, 0, sizeof(*b));
  b->magic = SC_SHM_BLOB_MAGIC;
  b->pid = (int32_t)getpid();
  b->rank = rank;
  char host[256];
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "?");
  host[sizeof(host) - 1] = '\0';
  b->host_hash = sc_shm_fnv1a(host, strlen(host), SC_FNV_SEED);
  snprintf(b->host, sizeof(b->host), "%s", host);
  char boot[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
    fclose(f);
  }
  b->boot_hash = sc_shm_fnv1a(boot, strcspn(boot, "\n"), SC_FNV_SEED);
  struct stat st;
  b->pidns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
  b->netns = stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static sc_result_t open_doorbell(sc_shm_transport_t *tp) {
  tp->db_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (tp->db_fd < 0) return SC_ERR(SC_ERR_SYSTEM, "shm: doorbell socket: %s", strerror(errno));
  sc_shm_db_name(&tp->db_addr, &tp->db_len, tp->me.pid, tp->me.nonce);
  if (bind(tp->db_fd, (struct sockaddr *)&tp->db_addr, tp->db_len) != 0)
    return SC_ERR(SC_ERR_SYSTEM, "shm: bind doorbell @%s: %s", tp->db_addr.sun_path + 1,
                  strerror(errno));
  return SC_SUCCESS;
}

static sc_result_t open_segment(sc_shm_transport_t *tp) {
  tp->seg_len = sc_shm_seg_bytes(tp->base.nranks, SC_SHM_RING_BYTES);
  /* Anonymous: nothing in /dev/shm that a killed job could leave behind;
   * peers get the descriptor over the doorbell socket (SCM_RIGHTS). */
  int fd = memfd_create("scshm", MFD_CLOEXEC);
  if (fd < 0) return SC_ERR(SC_ERR_SYSTEM, "shm: memfd_create: %s", strerror(errno));
  tp->seg_fd = fd;
  /* Sparse: only the channels of same-host peers get pages (connect_all
   * reserves them, so a full tmpfs is an error there, not a SIGBUS). */
  if (ftruncate(fd, (off_t)tp->seg_len) != 0)
    return SC_ERR(SC_ERR_SYSTEM, "shm: ftruncate of the %zu-byte segment: %s", tp->seg_len,
                  strerror(errno));
  int e = posix_fallocate(fd, 0, SC_SHM_HDR_BYTES);
  if (e != 0)
    return SC_ERR(SC_ERR_SYSTEM, "shm: cannot reserve the segment header: %s", strerror(e));
  void *m = mmap(NULL, tp->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED)
    return SC_ERR(SC_ERR_SYSTEM, "shm: mmap of the %zu-byte segment: %s", tp->seg_len,
                  strerror(errno));
  tp->seg = m;
  tp->hdr = m;
  tp->hdr->ring_bytes = SC_SHM_RING_BYTES;
  memcpy(tp->hdr->tag, tp->tag, sizeof(tp->tag));
  tp->hdr->owner_rank = tp->base.rank;
  tp->hdr->owner_pid = tp->me.pid;
  tp->hdr->nranks = tp->base.nranks;
  tp->hdr->probe_addr = (uint64_t)(uintptr_t)&tp->probe;
  tp->hdr->probe_value = tp->probe;
  sc_shm_mark_running(tp);
  __atomic_store_n(&tp->hdr->magic, SC_SHM_SEG_MAGIC, __ATOMIC_RELEASE);
  return SC_SUCCESS;
}

sc_result_t sc_shm_create_mode(const sc_tp_config_t *cfg, int partial, sc_transport_t **out,
                               void *addr, size_t *addrlen) {
  if (!cfg || !out || !addr || !addrlen)
    return SC_ERR(SC_ERR_INVALID_ARG, "shm create: NULL argument");
  *out = NULL;
  sc_shm_transport_t *tp = calloc(1, sizeof(*tp));
  if (!tp) return SC_ERR(SC_ERR_NOMEM, "shm transport");
  tp->db_fd = tp->seg_fd = -1;
  tp->base.ops = &sc_shm_transport;
  tp->base.rank = cfg->rank;
  tp->base.nranks = cfg->nranks;
  tp->partial = partial;
  tp->spin_us = cfg->spin_us;
  tp->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 1;
  uint64_t t0 = sc_shm_fnv1a(cfg->secret, SC_SECRET_LEN, SC_FNV_SEED);
  uint64_t t1 = sc_shm_fnv1a(cfg->secret, SC_SECRET_LEN, t0 ^ 0x5c5c5c5c5c5c5c5cull);
  memcpy(tp->tag, &t0, 8);
  memcpy(tp->tag + 8, &t1, 8);
  fill_blob(&tp->me, cfg->rank);
  /* Announced to every rank, so that each one derives the same device_mem
   * for every pair (props). */
  const sc_devrt_t *rt = sc_devrt();
  if (rt && rt->ipc_get && rt->ipc_open && rt->ipc_close && rt->mem_range)
    tp->me.caps |= SC_SHM_CAP_DEVICE;
  uint64_t rnd[2];
  sc_result_t r;
  SC_CHECK_GOTO(sc_random_bytes(rnd, sizeof(rnd)), r, fail);
  tp->me.nonce = rnd[0];
  tp->probe = rnd[1] | 1;
  tp->peers = calloc((size_t)tp->base.nranks, sizeof(*tp->peers));
  tp->pfds = calloc((size_t)tp->base.nranks + 1, sizeof(*tp->pfds));
  tp->pfd_peer = calloc((size_t)tp->base.nranks + 1, sizeof(*tp->pfd_peer));
  if (!tp->peers || !tp->pfds || !tp->pfd_peer) {
    r = SC_ERR(SC_ERR_NOMEM, "shm peer table of %d ranks", tp->base.nranks);
    goto fail;
  }
  for (int i = 0; i < tp->base.nranks; i++) tp->peers[i].pidfd = -1;
  SC_CHECK_GOTO(open_segment(tp), r, fail);
  SC_CHECK_GOTO(open_doorbell(tp), r, fail);
  memcpy(addr, &tp->me, SC_SHM_BLOB_LEN);
  *addrlen = SC_SHM_BLOB_LEN;
  *out = &tp->base;
  return SC_SUCCESS;
fail:
  sc_shm_destroy(&tp->base);
  return r;
}

/* Map the segment the peer sent and check it is the one its blob announced. */
static sc_result_t map_peer(sc_shm_transport_t *tp, int i, int fd) {
  sc_shm_peer_t *p = &tp->peers[i];
  struct stat st;
  size_t want = sc_shm_seg_bytes(tp->base.nranks, SC_SHM_RING_BYTES);
  if (fstat(fd, &st) != 0 || (size_t)st.st_size != want)
    return SC_ERR(SC_ERR_REMOTE, "shm: %s's segment has %lld bytes, expected %zu", p->name,
                  (long long)st.st_size, want);
  /* Only the header and our own channel: a peer's whole segment is a ring
   * per rank of the job. (With pages larger than the layout's alignment,
   * map it all.) */
  size_t stride = sc_shm_chan_stride(SC_SHM_RING_BYTES);
  size_t off = SC_SHM_HDR_BYTES + (size_t)tp->base.rank * stride;
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

/* Setup message on the doorbell, carrying the sender's segment descriptor. */
#define SC_SHM_FD_MAGIC 0x53435346u /* 'SCSF' */
typedef struct sc_shm_fd_msg {
  uint32_t magic;
  int32_t rank;
  uint64_t nonce;
  uint8_t tag[16];
} sc_shm_fd_msg_t;

static int send_fd(sc_shm_transport_t *tp, sc_shm_peer_t *p) {
  sc_shm_fd_msg_t msg = {.magic = SC_SHM_FD_MAGIC, .rank = tp->base.rank, .nonce = tp->me.nonce};
  memcpy(msg.tag, tp->tag, sizeof(msg.tag));
  struct iovec iov = {.iov_base = &msg, .iov_len = sizeof(msg)};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  memset(&ctl, 0, sizeof(ctl));
  struct msghdr mh = {.msg_name = &p->db_addr,
                      .msg_namelen = p->db_len,
                      .msg_iov = &iov,
                      .msg_iovlen = 1,
                      .msg_control = ctl.buf,
                      .msg_controllen = sizeof(ctl.buf)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &tp->seg_fd, sizeof(int));
  ssize_t n;
  while ((n = sendmsg(tp->db_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == (ssize_t)sizeof(msg) ? 0 : errno;
}

/* One setup message, if any: returns the sender's rank with *fd set (the
 * caller owns it), -1 when nothing (valid) was there. Anything that is not
 * a setup message of this job (a stray wake-up, a forgery) is dropped. */
static int recv_fd(sc_shm_transport_t *tp, int *fd, int *again) {
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
           msg.magic == SC_SHM_FD_MAGIC && memcmp(msg.tag, tp->tag, sizeof(tp->tag)) == 0 &&
           msg.rank >= 0 && msg.rank < tp->base.nranks && tp->peers[msg.rank].local &&
           tp->peers[msg.rank].blob.nonce == msg.nonce && got >= 0;
  if (!ok) {
    if (got >= 0) close(got);
    return -1;
  }
  *fd = got;
  return msg.rank;
}

static int pid_gone(pid_t pid) {
  return kill(pid, 0) != 0 && errno == ESRCH;
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
      int e = send_fd(tp, p);
      if (e == 0) {
        sent[i] = 1;
        to_send--;
      } else if (e != EAGAIN && e != EWOULDBLOCK && e != ECONNREFUSED && e != ENOENT) {
        r = SC_ERR(SC_ERR_SYSTEM, "shm: cannot pass the segment to %s: %s", p->name, strerror(e));
        goto out;
      }
    }
    int fd, again;
    int from = recv_fd(tp, &fd, &again);
    if (from >= 0) {
      if (!mapped[from]) {
        r = map_peer(tp, from, fd);
        mapped[from] = 1;
        to_map--;
      }
      close(fd);
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
      r = SC_ERR(SC_ERR_TIMEOUT,
                 "shm: rank %d: %d local peer%s did not complete the shared-memory setup within "
                 "%d ms (SC_TIMEOUT_MS)",
                 tp->base.rank, to_map > to_send ? to_map : to_send,
                 (to_map > to_send ? to_map : to_send) == 1 ? "" : "s", tp->timeout_ms);
      goto out;
    }
    struct pollfd q = {.fd = tp->db_fd, .events = POLLIN};
    poll(&q, 1, 1);
  }
out:
  free(sent);
  return r;
}

/* Can this process read the peer's memory with process_vm_readv? (Yama,
 * seccomp or capabilities may forbid it; then the ring carries everything.) */
static int probe_cma(sc_shm_transport_t *tp, sc_shm_peer_t *p, int *err) {
  uint64_t v = 0;
  struct iovec l = {.iov_base = &v, .iov_len = sizeof(v)};
  struct iovec r = {.iov_base = (void *)(uintptr_t)p->hdr->probe_addr, .iov_len = sizeof(v)};
  ssize_t n = process_vm_readv(p->pid, &l, 1, &r, 1, 0);
  *err = n < 0 ? errno : 0;
  (void)tp;
  return n == (ssize_t)sizeof(v) && v == p->hdr->probe_value;
}

static sc_result_t connect_local(sc_shm_transport_t *tp, int64_t deadline) {
  /* Reserve the pages of every channel a local peer will write. */
  for (int i = 0; i < tp->base.nranks; i++) {
    if (!tp->peers[i].local) continue;
    off_t off = (off_t)(SC_SHM_HDR_BYTES + (size_t)i * sc_shm_chan_stride(SC_SHM_RING_BYTES));
    int e = posix_fallocate(tp->seg_fd, off, (off_t)sc_shm_chan_stride(SC_SHM_RING_BYTES));
    if (e != 0)
      return SC_ERR(SC_ERR_SYSTEM,
                    "shm: cannot reserve %zu bytes in /dev/shm for the channel from %s: %s",
                    sc_shm_chan_stride(SC_SHM_RING_BYTES), tp->peers[i].name, strerror(e));
  }
  for (int i = 0; i < tp->base.nranks; i++)
    if (tp->peers[i].local)
      sc_shm_db_name(&tp->peers[i].db_addr, &tp->peers[i].db_len, tp->peers[i].blob.pid,
                     tp->peers[i].blob.nonce);
  /* Sent only now, after the reservation: a peer never writes a page that
   * could fail to exist. */
  SC_CHECK(exchange_fds(tp, deadline));
  int cma_ok = 0, cma_err = 0;
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_shm_peer_t *p = &tp->peers[i];
    if (!p->local) continue;
    size_t stride = sc_shm_chan_stride(SC_SHM_RING_BYTES);
    uint8_t *mine = tp->seg + SC_SHM_HDR_BYTES + (size_t)i * stride;
    uint8_t *theirs = p->chan;
    sc_shm_ring_init(&p->rx, (sc_shm_chan_ctl_t *)mine, mine + SC_SHM_CTL_BYTES, SC_SHM_RING_BYTES,
                     0);
    sc_shm_ring_init(&p->tx, (sc_shm_chan_ctl_t *)theirs, theirs + SC_SHM_CTL_BYTES,
                     SC_SHM_RING_BYTES, 1);
    int err = 0;
    int ok = probe_cma(tp, p, &err);
    if (ok)
      cma_ok++;
    else
      cma_err = err;
    /* The sender reads this verdict before each large send. */
    __atomic_store_n(&p->rx.ctl->cma_ok, ok ? 1u : 2u, __ATOMIC_RELEASE);
    p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    p->next_check_ms = sc_now_ms() + SC_SHM_CHECK_MS;
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

sc_result_t sc_shm_connect_all(sc_transport_t *base, const void *addrs, size_t stride) {
  if (!base || !addrs) return SC_ERR(SC_ERR_INVALID_ARG, "shm connect_all: NULL argument");
  sc_shm_transport_t *tp = sc_shm_of(base);
  if (tp->connected) return SC_ERR(SC_ERR_INVALID_ARG, "shm connect_all: already connected");
  int64_t deadline = sc_now_ms() + tp->timeout_ms;
  tp->nlocal = 0;
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_shm_peer_t *p = &tp->peers[i];
    memcpy(&p->blob, (const uint8_t *)addrs + (size_t)i * stride, SC_SHM_BLOB_LEN);
    p->blob.host[sizeof(p->blob.host) - 1] = '\0';
    if (!sc_shm_blob_valid(&p->blob))
      return SC_ERR(SC_ERR_REMOTE, "shm: rank %d published a malformed address (magic 0x%08x)", i,
                    p->blob.magic);
    p->pid = p->blob.pid;
    snprintf(p->name, sizeof(p->name), "rank %d (%s, pid %d)", i, p->blob.host, (int)p->pid);
    if (i == tp->base.rank) continue;
    p->local = sc_shm_blob_same_host(&tp->me, &p->blob);
    if (!p->local && !tp->partial)
      return SC_ERR(SC_ERR_UNSUPPORTED,
                    "SC_TRANSPORT=shm, but %s is not on this host (rank %d on %s)%s; use "
                    "SC_TRANSPORT=auto (shm for same-host peers, tcp otherwise) or tcp",
                    p->name, tp->base.rank, tp->me.host,
                    p->blob.host_hash == tp->me.host_hash ? ": same name, other kernel boot or "
                                                            "pid/network namespace"
                                                          : "");
    tp->nlocal += p->local;
  }
  SC_CHECK(connect_local(tp, deadline));
  sc_yield_init(&tp->yield, tp->nlocal + 1, (int)sysconf(_SC_NPROCESSORS_ONLN));
  close(tp->seg_fd);
  tp->seg_fd = -1;
  tp->connected = 1;
  SC_INFO(SC_SUBSYS_SHM, "shm: rank %d connected to %d local peer%s (ring %llu KiB per pair)",
          tp->base.rank, tp->nlocal, tp->nlocal == 1 ? "" : "s",
          (unsigned long long)(SC_SHM_RING_BYTES >> 10));
  return SC_SUCCESS;
}

int sc_shm_pair_local(sc_transport_t *base, int a, int b) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  if (!tp || !tp->connected || a < 0 || b < 0 || a >= base->nranks || b >= base->nranks) return 0;
  return sc_shm_blob_same_host(&tp->peers[a].blob, &tp->peers[b].blob);
}

/* From the two ranks' blobs alone: every rank has them all. */
sc_result_t sc_shm_props(sc_transport_t *base, int a, int b, sc_tp_props_t *out) {
  if (!base || !out || a == b || !sc_shm_pair_local(base, a, b))
    return SC_ERR(SC_ERR_INVALID_ARG, "shm props: ranks %d and %d of %d share no memory", a, b,
                  base ? base->nranks : 0);
  const sc_shm_blob_t *ba = &sc_shm_of(base)->peers[a].blob, *bb = &sc_shm_of(base)->peers[b].blob;
  memset(out, 0, sizeof(*out));
  out->kind = SC_TP_KIND_SHM;
  out->locality = ba->pid == bb->pid ? SC_TP_SAME_PROCESS : SC_TP_SAME_HOST;
  out->single_copy_min = SC_SHM_SINGLE_COPY_MIN;
  out->receiver_spins = 1; /* shm.c spins SC_SPIN_US whatever the rank count */
  out->device_mem = sc_shm_blob_pair_device(ba, bb);
  return SC_SUCCESS;
}

void sc_shm_destroy(sc_transport_t *base) {
  if (!base) return;
  sc_shm_transport_t *tp = sc_shm_of(base);
  sc_shm_dev_destroy(tp); /* its copies may still acknowledge through the channels */
  if (tp->peers) {
    for (int i = 0; i < tp->base.nranks; i++) {
      sc_shm_peer_t *p = &tp->peers[i];
      if (p->hdr) {
        /* Like a closed socket: the peer drains what is in the ring, then
         * fails whatever it still waits for from us. */
        if (p->tx.ctl) __atomic_store_n(&p->tx.ctl->closed, 1u, __ATOMIC_RELEASE);
        if (p->rx.ctl) __atomic_store_n(&p->rx.ctl->closed, 1u, __ATOMIC_RELEASE);
        if (tp->db_fd >= 0) sc_shm_wake_peer(tp, p);
        if (p->chan_len) munmap(p->chan, p->chan_len);
        munmap(p->hdr, p->hdr_len);
      }
      if (p->pidfd >= 0) close(p->pidfd);
    }
  }
  if (tp->seg) munmap(tp->seg, tp->seg_len);
  if (tp->seg_fd >= 0) close(tp->seg_fd);
  if (tp->db_fd >= 0) close(tp->db_fd);
  free(tp->peers);
  free(tp->pfds);
  free(tp->pfd_peer);
  free(tp);
}
