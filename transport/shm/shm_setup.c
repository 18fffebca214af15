/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport setup: the segment and doorbell at create, the
 * peers' addresses at connect_all (connecting the pairs is shm_connect.c's),
 * teardown. */
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

#include "lib/base/config.h"
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
  tp->hdr->ring_budget = tp->budget;
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
  size_t budget = 0;
  SC_CHECK_GOTO(sc_config_size("SC_SHM_BUDGET_BYTES", 0, SC_SHM_BUDGET_MAX, &budget), r, fail);
  tp->budget_set = budget > 0;
  /* Until connect_all knows the host's ranks: as if all were on it. */
  tp->budget = tp->budget_set ? budget : sc_shm_default_budget(tp->base.nranks);
  SC_CHECK_GOTO(open_segment(tp), r, fail);
  SC_CHECK_GOTO(open_doorbell(tp), r, fail);
  tp->me.seg_fd = tp->seg_fd;
  tp->me.lazy = cfg->connect_lazy != 0;
  memcpy(addr, &tp->me, SC_SHM_BLOB_LEN);
  *addrlen = SC_SHM_BLOB_LEN;
  *out = &tp->base;
  return SC_SUCCESS;
fail:
  sc_shm_destroy(&tp->base);
  return r;
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
  /* Lazy only where every rank of the host is: an eager one waits for
   * every local peer's descriptor. */
  tp->lazy = tp->me.lazy != 0;
  for (int i = 0; i < tp->base.nranks; i++)
    if (tp->peers[i].local && !tp->peers[i].blob.lazy) tp->lazy = 0;
  for (int i = 0; i < tp->base.nranks; i++)
    if (tp->peers[i].local)
      sc_shm_db_name(&tp->peers[i].db_addr, &tp->peers[i].db_len, tp->peers[i].blob.pid,
                     tp->peers[i].blob.nonce);
  if (!tp->budget_set) {
    /* Now that the ranks of the host are known. A peer that claimed a ring
     * before this store saw the budget of create. */
    __atomic_store_n(&tp->hdr->ring_budget, sc_shm_default_budget(tp->nlocal + 1),
                     __ATOMIC_RELAXED);
  }
  if (!tp->lazy) SC_CHECK(sc_shm_connect_eager(tp, deadline));
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  tp->fits_cores = cpus > 0 && tp->nlocal + 1 <= cpus;
  sc_yield_init(&tp->yield, tp->nlocal + 1, (int)cpus);
  if (!tp->lazy) {
    close(tp->seg_fd);
    tp->seg_fd = -1;
  }
  tp->connected = 1;
  SC_INFO(SC_SUBSYS_SHM,
          "shm: rank %d: %d local peer%s, %s (rings of %llu KiB, %llu KiB per rank of the host "
          "at most before they shrink, %llu KiB the least)",
          tp->base.rank, tp->nlocal, tp->nlocal == 1 ? "" : "s",
          tp->lazy ? "each connected on first use" : "all connected",
          (unsigned long long)(SC_SHM_RING_BYTES >> 10),
          (unsigned long long)(__atomic_load_n(&tp->hdr->ring_budget, __ATOMIC_RELAXED) >> 10),
          (unsigned long long)(SC_SHM_RING_MIN >> 10));
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
      free(p->err);
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
