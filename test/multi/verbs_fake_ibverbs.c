/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in libibverbs.so.1 for testing the verbs transport's data path on
 * machines without RDMA (test/multi/verbs_fake.sh puts it first on
 * LD_LIBRARY_PATH, which dlopen honours). Not an emulator of the hardware's
 * timing or of every verb: one device "fake0" whose single port is RoCE, RC
 * queue pairs whose RDMA writes are process_vm_writev into the peer process
 * at post time, and whose immediates travel as datagrams to the peer
 * context's unix socket (abstract name from the pid and context number
 * carried in the GID), turning into receive completions when the peer
 * polls. A write to a process that is gone completes with "transport retry
 * counter exceeded", as a real QP would after its retries; a datagram with
 * no receive posted aborts the process (the protocol promises one).
 *
 * GPUDirect RDMA against the device stand-in (test/devfake/, whose device
 * pointers are PROT_NONE reservations with the bytes elsewhere): an MR on
 * device memory, by ibv_reg_dmabuf_mr (the stand-in's dma-buf is its memfd,
 * mapped here at the given offset) or by ibv_reg_mr on the device pointer
 * (peer memory: the stand-in's host_view), goes into a table of device MRs
 * whose keys carry DEVKEY. The table's address travels in bytes 8-15 of the
 * GID, so a writer reads the target's entry with process_vm_readv and writes
 * the bytes where they really are, as an HCA reaches a GPU's BAR. Host code
 * touching a device pointer would fault instead, so a transport that passed
 * device pointers without a device registration fails here.
 * FAKEIBV_DMABUF=0 makes ibv_reg_dmabuf_mr fail (EOPNOTSUPP, a provider
 * without dma-buf) and FAKEIBV_PEERMEM=0 makes ibv_reg_mr of device memory
 * fail (EFAULT, no nvidia-peermem). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kernels/devrt.h"

#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_get_device_list

#define RING 8192

typedef struct fake_cq {
  struct ibv_cq cq;
  struct ibv_wc wc[RING];
  unsigned head, tail;
} fake_cq_t;

typedef struct fake_ctx {
  struct ibv_context ctx;
  int sock;
  int id;
} fake_ctx_t;

/* A device MR as a peer reads it (process_vm_readv of mrtab[key & ~DEVKEY]). */
typedef struct dev_mr {
  uint32_t key; /* 0: free */
  uint32_t pad;
  uint64_t iova, len;   /* the addresses the MR answers to: device pointers */
  uint64_t host;        /* where the bytes of iova are in this process */
  uint64_t map, maplen; /* this process's mapping of a dma-buf, to unmap */
} dev_mr_t;

#define DEVKEY 0x80000000u
#define MRTAB  4096
static dev_mr_t mrtab[MRTAB];

typedef struct fake_qp {
  struct ibv_qp qp;
  uint64_t dest_tab; /* the peer's mrtab */
  uint32_t dest_qpn;
  pid_t dest_pid;
  int dest_ctx;
  uint64_t rq[RING];
  unsigned rq_head, rq_tail;
  struct fake_qp *next;
} fake_qp_t;

typedef struct imm_msg {
  uint32_t magic, qpn, imm, len;
} imm_msg_t;

static struct ibv_device dev0;
static struct ibv_device *devlist[2];
static fake_qp_t *qps;
static uint32_t next_qpn = 1, next_key = 1;
static int next_ctx;

static void sock_name(struct sockaddr_un *a, socklen_t *len, pid_t pid, int ctx) {
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "fakeibv-%d-%d", (int)pid, ctx);
  *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void cq_push(struct ibv_cq *cq, const struct ibv_wc *wc) {
  fake_cq_t *c = (fake_cq_t *)cq;
  if (c->tail - c->head >= RING) {
    fprintf(stderr, "fake ibverbs: CQ overflow\n");
    abort();
  }
  c->wc[c->tail++ % RING] = *wc;
}

/* Where [addr, addr + len) of device MR e really is; 0 when outside it. */
static uint64_t dev_host(const dev_mr_t *e, uint32_t key, uint64_t addr, size_t len) {
  if (e->key != key || addr < e->iova || addr + len > e->iova + e->len) return 0;
  return e->host + (addr - e->iova);
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  fake_qp_t *q = (fake_qp_t *)qp;
  for (; wr; wr = wr->next) {
    if (qp->state != IBV_QPS_RTS) {
      *bad = wr;
      return EINVAL;
    }
    enum ibv_wc_status st = IBV_WC_SUCCESS;
    size_t len = 0;
    for (int i = 0; i < wr->num_sge; i++) len += wr->sg_list[i].length;
    if (len) {
      struct iovec l[8], r = {(void *)(uintptr_t)wr->wr.rdma.remote_addr, len};
      for (int i = 0; i < wr->num_sge && i < 8; i++) {
        const struct ibv_sge *g = &wr->sg_list[i];
        uint64_t a = g->addr;
        if (g->lkey & DEVKEY) {
          a = dev_host(&mrtab[(g->lkey & ~DEVKEY) % MRTAB], g->lkey, g->addr, g->length);
          if (!a) st = IBV_WC_LOC_PROT_ERR;
        }
        l[i] = (struct iovec){(void *)(uintptr_t)a, g->length};
      }
      uint32_t rkey = wr->wr.rdma.rkey;
      if (st == IBV_WC_SUCCESS && (rkey & DEVKEY)) {
        dev_mr_t e;
        struct iovec le = {&e, sizeof(e)},
                     re = {
                         (void *)(uintptr_t)(q->dest_tab + ((rkey & ~DEVKEY) % MRTAB) * sizeof(e)),
                         sizeof(e)};
        uint64_t a = 0;
        if (process_vm_readv(q->dest_pid, &le, 1, &re, 1, 0) == (ssize_t)sizeof(e))
          a = dev_host(&e, rkey, wr->wr.rdma.remote_addr, len);
        else if (errno == ESRCH)
          st = IBV_WC_RETRY_EXC_ERR;
        if (!a && st == IBV_WC_SUCCESS) st = IBV_WC_REM_ACCESS_ERR;
        r.iov_base = (void *)(uintptr_t)a;
      }
      if (st == IBV_WC_SUCCESS) {
        ssize_t n = process_vm_writev(q->dest_pid, l, (unsigned long)wr->num_sge, &r, 1, 0);
        if (n != (ssize_t)len) st = errno == ESRCH ? IBV_WC_RETRY_EXC_ERR : IBV_WC_REM_ACCESS_ERR;
      }
    }
    if (st == IBV_WC_SUCCESS && wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      imm_msg_t m = {0x46414b45u, q->dest_qpn, wr->imm_data, (uint32_t)len};
      struct sockaddr_un a;
      socklen_t al;
      sock_name(&a, &al, q->dest_pid, q->dest_ctx);
      int fd = ((fake_ctx_t *)qp->context)->sock;
      if (sendto(fd, &m, sizeof(m), 0, (struct sockaddr *)&a, al) != sizeof(m))
        st = IBV_WC_RETRY_EXC_ERR;
    }
    if (st != IBV_WC_SUCCESS || (wr->send_flags & IBV_SEND_SIGNALED)) {
      struct ibv_wc wc = {
          .wr_id = wr->wr_id, .status = st, .opcode = IBV_WC_RDMA_WRITE, .qp_num = qp->qp_num};
      cq_push(qp->send_cq, &wc);
    }
    if (st != IBV_WC_SUCCESS) qp->state = IBV_QPS_ERR;
  }
  return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  fake_qp_t *q = (fake_qp_t *)qp;
  for (; wr; wr = wr->next) {
    if (q->rq_tail - q->rq_head >= RING) {
      *bad = wr;
      return ENOMEM;
    }
    q->rq[q->rq_tail++ % RING] = wr->wr_id;
  }
  return 0;
}

static void drain(fake_ctx_t *c) {
  imm_msg_t m;
  while (recv(c->sock, &m, sizeof(m), MSG_DONTWAIT) == sizeof(m)) {
    fake_qp_t *q = qps;
    while (q && (q->qp.qp_num != m.qpn || q->qp.context != &c->ctx)) q = q->next;
    if (!q || q->qp.state == IBV_QPS_ERR || q->qp.state == IBV_QPS_RESET) continue;
    if (q->rq_head == q->rq_tail) {
      fprintf(stderr, "fake ibverbs: immediate for qp %u with no receive posted\n", m.qpn);
      abort();
    }
    struct ibv_wc wc = {.wr_id = q->rq[q->rq_head++ % RING],
                        .status = IBV_WC_SUCCESS,
                        .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
                        .wc_flags = IBV_WC_WITH_IMM,
                        .imm_data = m.imm,
                        .byte_len = m.len,
                        .qp_num = m.qpn};
    cq_push(q->qp.recv_cq, &wc);
  }
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  drain((fake_ctx_t *)cq->context);
  fake_cq_t *c = (fake_cq_t *)cq;
  int got = 0;
  while (got < n && c->head != c->tail) wc[got++] = c->wc[c->head++ % RING];
  return got;
}

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited) {
  return 0;
}

struct ibv_device **ibv_get_device_list(int *n) {
  snprintf(dev0.name, sizeof(dev0.name), "fake0");
  dev0.node_type = IBV_NODE_CA;
  dev0.transport_type = IBV_TRANSPORT_IB;
  devlist[0] = &dev0;
  if (n) *n = 1;
  return devlist;
}

void ibv_free_device_list(struct ibv_device **l) {}

const char *ibv_get_device_name(struct ibv_device *d) {
  return d->name;
}

struct ibv_context *ibv_open_device(struct ibv_device *d) {
  fake_ctx_t *c = calloc(1, sizeof(*c));
  c->ctx.device = d;
  c->ctx.ops.post_send = fake_post_send;
  c->ctx.ops.post_recv = fake_post_recv;
  c->ctx.ops.poll_cq = fake_poll_cq;
  c->ctx.ops.req_notify_cq = fake_req_notify_cq;
  c->ctx.async_fd = eventfd(0, EFD_NONBLOCK);
  c->ctx.cmd_fd = -1;
  c->ctx.num_comp_vectors = 1;
  c->id = next_ctx++;
  c->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un a;
  socklen_t al;
  sock_name(&a, &al, getpid(), c->id);
  if (bind(c->sock, (struct sockaddr *)&a, al) != 0) {
    perror("fake ibverbs: bind");
    abort();
  }
  int big = 4 << 20;
  setsockopt(c->sock, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  return &c->ctx;
}

int ibv_close_device(struct ibv_context *ctx) {
  fake_ctx_t *c = (fake_ctx_t *)ctx;
  close(c->sock);
  close(ctx->async_fd);
  free(c);
  return 0;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a) {
  memset(a, 0, sizeof(*a));
  a->max_cqe = RING;
  a->max_qp_wr = RING;
  a->phys_port_cnt = 1;
  return 0;
}

/* The compat entry's struct is a prefix of ibv_port_attr, which the transport passes. */
int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *compat) {
  struct ibv_port_attr *a = (struct ibv_port_attr *)compat;
  if (port != 1) return EINVAL;
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = 1;
  a->lid = 0;
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  a->active_width = 2;  /* 4x */
  a->active_speed = 32; /* EDR: 100 Gbit/s */
  return 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid) {
  if (index != 0) return EINVAL;
  memset(gid, 0, sizeof(*gid));
  uint32_t pid = (uint32_t)getpid(), id = (uint32_t)((fake_ctx_t *)ctx)->id;
  memcpy(gid->raw, &pid, 4);
  memcpy(gid->raw + 4, &id, 4);
  uint64_t tab = (uint64_t)(uintptr_t)mrtab;
  memcpy(gid->raw + 8, &tab, 8);
  return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx) {
  struct ibv_pd *pd = calloc(1, sizeof(*pd));
  pd->context = ctx;
  return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd) {
  free(pd);
  return 0;
}

/* The device stand-in the library loaded (SC_DEVRT_STANDIN), if any. */
static const sc_devrt_t *standin(void) {
  const char *path = getenv("SC_DEVRT_STANDIN");
  void *h = path && *path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  return h ? (const sc_devrt_t *)dlsym(h, "sc_devrt_standin") : NULL;
}

static int env_off(const char *name) {
  const char *v = getenv(name);
  return v && !strcmp(v, "0");
}

static struct ibv_mr *new_mr(struct ibv_pd *pd, void *addr, size_t len, uint32_t key) {
  struct ibv_mr *mr = calloc(1, sizeof(*mr));
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = mr->rkey = key;
  return mr;
}

/* A free device-MR entry for [iova, iova + len) at host; its key, 0 when full. */
static uint32_t dev_add(uint64_t iova, size_t len, uint64_t host, uint64_t map, size_t maplen) {
  for (uint32_t i = 0; i < MRTAB; i++)
    if (!mrtab[i].key) {
      mrtab[i] = (dev_mr_t){DEVKEY | i, 0, iova, len, host, map, maplen};
      return DEVKEY | i;
    }
  return 0;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
  const sc_devrt_t *rt = standin();
  int device = 0;
  if (rt && len && rt->pointer_device(addr, &device)) {
    /* peer memory: pinned for the HCA only where nvidia-peermem is loaded */
    char *h = rt->host_view(addr);
    char *last = rt->host_view((char *)addr + len - 1);
    uint32_t key = 0;
    if (!env_off("FAKEIBV_PEERMEM") && h && last == h + len - 1)
      key = dev_add((uint64_t)(uintptr_t)addr, len, (uint64_t)(uintptr_t)h, 0, 0);
    if (!key) {
      errno = EFAULT;
      return NULL;
    }
    return new_mr(pd, addr, len, key);
  }
  return new_mr(pd, addr, len, next_key++ & ~DEVKEY);
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
                                 int fd, int access) {
  if (env_off("FAKEIBV_DMABUF")) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  struct stat st;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (fstat(fd, &st) != 0) return NULL; /* errno: EBADF */
  size_t fsize = ((size_t)st.st_size + page - 1) / page * page;
  if (!length || offset > fsize || length > fsize - offset) {
    errno = EINVAL;
    return NULL;
  }
  uint64_t aoff = offset / page * page;
  size_t maplen = length + (size_t)(offset - aoff);
  char *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)aoff);
  if (m == MAP_FAILED) return NULL;
  uint32_t key = dev_add(iova, length, (uint64_t)(uintptr_t)(m + (offset - aoff)),
                         (uint64_t)(uintptr_t)m, maplen);
  if (!key) {
    munmap(m, maplen);
    errno = ENOMEM;
    return NULL;
  }
  return new_mr(pd, (void *)(uintptr_t)iova, length, key);
}

int ibv_dereg_mr(struct ibv_mr *mr) {
  if (mr->lkey & DEVKEY) {
    dev_mr_t *e = &mrtab[(mr->lkey & ~DEVKEY) % MRTAB];
    if (e->map) munmap((void *)(uintptr_t)e->map, e->maplen);
    memset(e, 0, sizeof(*e));
  }
  free(mr);
  return 0;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx) {
  struct ibv_comp_channel *ch = calloc(1, sizeof(*ch));
  ch->context = ctx;
  ch->fd = dup(((fake_ctx_t *)ctx)->sock);
  return ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch) {
  close(ch->fd);
  free(ch);
  return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_ctx,
                             struct ibv_comp_channel *ch, int vector) {
  fake_cq_t *c = calloc(1, sizeof(*c));
  c->cq.context = ctx;
  c->cq.channel = ch;
  c->cq.cq_context = cq_ctx;
  c->cq.cqe = cqe;
  return &c->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq) {
  free(cq);
  return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia) {
  fake_qp_t *q = calloc(1, sizeof(*q));
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = ia->send_cq;
  q->qp.recv_cq = ia->recv_cq;
  q->qp.qp_num = next_qpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = ia->qp_type;
  q->next = qps;
  qps = q;
  return &q->qp;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
  fake_qp_t *q = (fake_qp_t *)qp;
  if (!(mask & IBV_QP_STATE)) return 0;
  if (a->qp_state == IBV_QPS_RTR) {
    if (!(mask & IBV_QP_AV) || !a->ah_attr.is_global) return EINVAL;
    uint32_t pid, id;
    memcpy(&pid, a->ah_attr.grh.dgid.raw, 4);
    memcpy(&id, a->ah_attr.grh.dgid.raw + 4, 4);
    q->dest_pid = (pid_t)pid;
    q->dest_ctx = (int)id;
    q->dest_qpn = a->dest_qp_num;
    memcpy(&q->dest_tab, a->ah_attr.grh.dgid.raw + 8, 8);
  }
  if (a->qp_state == IBV_QPS_ERR) /* flush the posted receives */
    while (q->rq_head != q->rq_tail) {
      struct ibv_wc wc = {
          .wr_id = q->rq[q->rq_head++ % RING], .status = IBV_WC_WR_FLUSH_ERR, .qp_num = qp->qp_num};
      cq_push(qp->recv_cq, &wc);
    }
  qp->state = a->qp_state;
  return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp) {
  for (fake_qp_t **p = &qps; *p; p = &(*p)->next)
    if (&(*p)->qp == qp) {
      fake_qp_t *q = *p;
      *p = q->next;
      free(q);
      return 0;
    }
  return EINVAL;
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_ctx) {
  errno = EAGAIN;
  return -1; /* the transport polls the CQ after poll() on the channel fd anyway */
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n) {}

int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev) {
  errno = EAGAIN;
  return -1;
}

void ibv_ack_async_event(struct ibv_async_event *ev) {}

const char *ibv_wc_status_str(enum ibv_wc_status st) {
  switch (st) {
  case IBV_WC_SUCCESS:
    return "success";
  case IBV_WC_REM_ACCESS_ERR:
    return "remote access error";
  case IBV_WC_LOC_PROT_ERR:
    return "local protection error";
  case IBV_WC_RETRY_EXC_ERR:
    return "transport retry counter exceeded";
  case IBV_WC_WR_FLUSH_ERR:
    return "Work Request Flushed Error";
  default:
    return "other completion error";
  }
}

const char *ibv_event_type_str(enum ibv_event_type ev) {
  return "fake event";
}
