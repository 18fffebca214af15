/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's set-up and teardown: device, protection domain, one
 * completion queue with its channel, the FIFO, the address blob (create);
 * per peer SC_IB_QPS_PER_PEER RC queue pairs whose numbers travel over a
 * TCP side channel, since per-pair data does not fit a per-rank blob, then
 * INIT -> RTR -> RTS and a last round on the side channel so that no rank
 * writes to a queue pair its peer has not readied (connect_all). Every wait
 * is bounded by the configuration's timeout. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wire.h"
#include "transport/verbs/verbs_internal.h"

#define HELLO_MAGIC 0x53435648u /* "SCVH" */
#define HELLO_LEN   (16 + SC_SECRET_LEN + 4 * SC_VB_QPS_MAX)

static uint64_t host_id(void) {
  char buf[320] = "";
  if (gethostname(buf, 256) != 0) buf[0] = '\0';
  size_t n = strlen(buf);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(buf + n, (int)(sizeof(buf) - n), f)) buf[n] = '\0';
    fclose(f);
  }
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char *p = buf; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  return h;
}

static sc_result_t rc_reg(void *ctx, sc_vb_mem_kind_t kind, uintptr_t addr, size_t len, void **mr,
                          uint32_t *lkey, uint32_t *rkey) {
  sc_vb_transport_t *tp = ctx;
  if (kind == SC_VB_MEM_DEVICE) return sc_vb_gdr_reg(tp, addr, len, mr, lkey, rkey);
  struct ibv_mr *m =
      tp->api->reg_mr(tp->pd, (void *)addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!m)
    return SC_ERR(SC_ERR_SYSTEM, "verbs: ibv_reg_mr of %zu bytes at %p on %s: %s", len,
                  (void *)addr, tp->dev.name, strerror(errno));
  *mr = m;
  *lkey = m->lkey;
  *rkey = m->rkey;
  return SC_SUCCESS;
}

static void rc_dereg(void *ctx, sc_vb_mem_kind_t kind, void *mr) {
  sc_vb_transport_t *tp = ctx;
  if (kind == SC_VB_MEM_DEVICE)
    sc_vb_gdr_dereg(tp, mr);
  else
    tp->api->dereg_mr(mr);
}

static sc_result_t alloc_registered(sc_vb_transport_t *tp, size_t bytes, int access,
                                    sc_vb_cts_t **mem, struct ibv_mr **mr) {
  void *p = NULL;
  if (posix_memalign(&p, 4096, bytes) != 0) return SC_ERR(SC_ERR_NOMEM, "verbs: FIFO");
  memset(p, 0, bytes);
  *mem = p;
  *mr = tp->api->reg_mr(tp->pd, p, bytes, access);
  if (!*mr)
    return SC_ERR(SC_ERR_SYSTEM, "verbs: ibv_reg_mr of the FIFO on %s: %s", tp->dev.name,
                  strerror(errno));
  return SC_SUCCESS;
}

sc_result_t sc_vb_create(const sc_tp_config_t *cfg, sc_transport_t **out, void *addr,
                         size_t *addrlen) {
  if (!cfg || !out || !addr || !addrlen)
    return SC_ERR(SC_ERR_INVALID_ARG, "verbs create: NULL argument");
  *out = NULL;
  if (*addrlen < SC_VB_BLOB_LEN)
    return SC_ERR(SC_ERR_INTERNAL, "verbs create: address buffer of %zu < %d bytes", *addrlen,
                  SC_VB_BLOB_LEN);
  sc_vb_env_t env;
  SC_CHECK(sc_vb_read_env(&env));
  const sc_vb_api_t *api;
  SC_CHECK(sc_vb_api_get(&api));
  sc_vb_transport_t *tp = calloc(1, sizeof(*tp));
  if (!tp) return SC_ERR(SC_ERR_NOMEM, "verbs transport");
  tp->base.ops = &sc_verbs_transport;
  tp->base.rank = cfg->rank;
  tp->base.nranks = cfg->nranks;
  tp->api = api;
  tp->env = env;
  tp->listen_fd = tp->wake_fd = -1;
  tp->spin_us = cfg->spin_us;
  tp->timeout_ms = cfg->timeout_ms;
  memcpy(tp->secret, cfg->secret, SC_SECRET_LEN);
  sc_result_t r;
  SC_CHECK_GOTO(sc_vb_open(api, &env.hca, &tp->dev), r, fail);
  tp->pd = api->alloc_pd(tp->dev.ctx);
  tp->ch = tp->pd ? api->create_comp_channel(tp->dev.ctx) : NULL;
  int n = cfg->nranks;
  int cqe = n * env.qps_per_peer * (SC_VB_SQ_DEPTH + 2 * SC_VB_FIFO_DEPTH);
  if (cqe > tp->dev.dattr.max_cqe) cqe = tp->dev.dattr.max_cqe;
  tp->cq = tp->ch ? api->create_cq(tp->dev.ctx, cqe, tp, tp->ch, 0) : NULL;
  if (!tp->cq) {
    r = SC_ERR(SC_ERR_SYSTEM, "verbs: protection domain, channel or CQ of %d on %s: %s", cqe,
               tp->dev.name, strerror(errno));
    goto fail;
  }
  if (fcntl(tp->ch->fd, F_SETFL, fcntl(tp->ch->fd, F_GETFL) | O_NONBLOCK) < 0 ||
      fcntl(tp->dev.ctx->async_fd, F_SETFL, fcntl(tp->dev.ctx->async_fd, F_GETFL) | O_NONBLOCK) <
          0) {
    r = SC_ERR(SC_ERR_SYSTEM, "verbs: non-blocking event channels: %s", strerror(errno));
    goto fail;
  }
  tp->gid_index =
      sc_vb_pick_gid(tp->dev.name, tp->dev.port, env.gid_index, tp->dev.pattr.gid_tbl_len);
  if (tp->dev.pattr.gid_tbl_len > 0 &&
      api->query_gid(tp->dev.ctx, (uint8_t)tp->dev.port, tp->gid_index, &tp->gid) != 0) {
    r = SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_GID_INDEX: %s port %d has no GID %d (table of %d)",
               tp->dev.name, tp->dev.port, tp->gid_index, tp->dev.pattr.gid_tbl_len);
    goto fail;
  }
  /* The clear-to-send source has the FIFO's layout, by destination: its
   * refusal table is where a refused send's print is written from. */
  size_t fifo_bytes = sc_vb_fifo_bytes(n);
  SC_CHECK_GOTO(alloc_registered(tp, fifo_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                 &tp->fifo, &tp->fifo_mr),
                r, fail);
  SC_CHECK_GOTO(alloc_registered(tp, fifo_bytes, IBV_ACCESS_LOCAL_WRITE, &tp->ctsbuf, &tp->cts_mr),
                r, fail);
  tp->rc = calloc(1, sizeof(*tp->rc));
  tp->peers = calloc((size_t)n, sizeof(*tp->peers));
  tp->pfds = calloc((size_t)n + 3, sizeof(*tp->pfds));
  tp->pfd_peer = calloc((size_t)n + 3, sizeof(*tp->pfd_peer));
  if (tp->peers)
    for (int i = 0; i < n; i++) tp->peers[i].sock = -1;
  if (!tp->rc || !tp->peers || !tp->pfds || !tp->pfd_peer) {
    r = SC_ERR(SC_ERR_NOMEM, "verbs: peers of %d ranks", n);
    goto fail;
  }
  sc_vb_rc_ops_t ops = {rc_reg, rc_dereg, tp};
  sc_vb_rc_init(tp->rc, &ops, env.reg_cache_bytes, (size_t)sysconf(_SC_PAGESIZE));
  tp->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (tp->wake_fd < 0) {
    r = SC_ERR(SC_ERR_SYSTEM, "verbs: eventfd: %s", strerror(errno));
    goto fail;
  }
  /* route_hint is a struct sockaddr_storage: sc_socket_pick_addr takes an
   * sc_sockaddr_t, which carries its length after it. */
  sc_sockaddr_t la, hint, *hintp = NULL;
  if (cfg->route_hint && sc_socket_addr_from_storage(cfg->route_hint, &hint) == SC_SUCCESS)
    hintp = &hint;
  SC_CHECK_GOTO(sc_socket_pick_addr(cfg->ifname, hintp, &la), r, fail);
  SC_CHECK_GOTO(sc_socket_listen(&la, n < 4096 ? n + 1 : 4096, &tp->listen_fd), r, fail);
  sc_vb_gdr_setup(tp);

  sc_vb_blob_t b;
  memset(&b, 0, sizeof(b));
  SC_CHECK_GOTO(sc_socket_addr_pack(&la, b.sock), r, fail);
  memcpy(b.gid, tp->gid.raw, 16);
  b.host_id = host_id();
  b.fifo_addr = (uint64_t)(uintptr_t)tp->fifo;
  b.fifo_rkey = tp->fifo_mr->rkey;
  b.speed_mbps = sc_vb_port_mbps(tp->dev.pattr.active_width, tp->dev.pattr.active_speed);
  b.lid = tp->dev.pattr.lid;
  b.port = (uint8_t)tp->dev.port;
  b.mtu = (uint8_t)tp->dev.pattr.active_mtu;
  b.link_layer = tp->dev.pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? 2 : 1;
  b.qps = (uint8_t)env.qps_per_peer;
  b.gdr = (uint8_t)tp->gdr;
  b.gid_index = (uint8_t)tp->gid_index;
  sc_vb_blob_pack(&b, addr);
  *addrlen = SC_VB_BLOB_LEN;
  *out = &tp->base;
  return SC_SUCCESS;
fail:
  sc_vb_destroy(&tp->base);
  return r;
}

sc_result_t sc_vb_post_recv(sc_vb_transport_t *tp, int peer, int q) {
  sc_vb_wrid_t id = {SC_VB_WR_RECV, peer, q, 0, 0};
  struct ibv_recv_wr wr = {.wr_id = sc_vb_wrid_encode(&id), .sg_list = NULL, .num_sge = 0};
  struct ibv_recv_wr *bad;
  int rc = ibv_post_recv(tp->peers[peer].qp[q], &wr, &bad);
  if (rc != 0)
    return SC_ERR(SC_ERR_SYSTEM, "verbs: ibv_post_recv to peer %d qp %d: %s", peer, q,
                  strerror(rc));
  return SC_SUCCESS;
}

static sc_result_t create_qps(sc_vb_transport_t *tp, int peer) {
  sc_vb_peer_t *p = &tp->peers[peer];
  for (int q = 0; q < p->nqps; q++) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = ia.recv_cq = tp->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = SC_VB_SQ_DEPTH;
    /* data immediates and, on qp 0, clear-to-send immediates: each bounded by DEPTH */
    ia.cap.max_recv_wr = 2 * SC_VB_FIFO_DEPTH;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = sizeof(sc_vb_cts_t);
    p->qp[q] = tp->api->create_qp(tp->pd, &ia);
    if (!p->qp[q]) {
      ia.cap.max_inline_data = 0; /* some providers have none */
      p->qp[q] = tp->api->create_qp(tp->pd, &ia);
    }
    if (!p->qp[q])
      return SC_ERR(SC_ERR_SYSTEM, "verbs: ibv_create_qp for peer %d on %s: %s", peer, tp->dev.name,
                    strerror(errno));
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)tp->dev.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    int rc = tp->api->modify_qp(
        p->qp[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0)
      return SC_ERR(SC_ERR_SYSTEM, "verbs: QP to INIT for peer %d: %s", peer, strerror(rc));
    for (int i = 0; i < 2 * SC_VB_FIFO_DEPTH; i++) SC_CHECK(sc_vb_post_recv(tp, peer, q));
  }
  return SC_SUCCESS;
}

static sc_result_t qp_ready(sc_vb_transport_t *tp, int peer, const uint32_t *rqpn) {
  sc_vb_peer_t *p = &tp->peers[peer];
  for (int q = 0; q < p->nqps; q++) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)sc_vb_path_mtu(tp->dev.pattr.active_mtu, p->blob.mtu);
    a.dest_qp_num = rqpn[q];
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = p->blob.lid;
    a.ah_attr.port_num = (uint8_t)tp->dev.port;
    if (p->blob.link_layer == 2 || tp->dev.pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, p->blob.gid, 16);
      a.ah_attr.grh.sgid_index = (uint8_t)tp->gid_index;
      a.ah_attr.grh.hop_limit = 255;
    }
    int rc =
        tp->api->modify_qp(p->qp[q], &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0)
      return SC_ERR(SC_ERR_SYSTEM, "verbs: QP %d to RTR for peer %d: %s", q, peer, strerror(rc));
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)tp->env.timeout;
    a.retry_cnt = (uint8_t)tp->env.retry_cnt;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    rc = tp->api->modify_qp(p->qp[q], &a,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0)
      return SC_ERR(SC_ERR_SYSTEM, "verbs: QP %d to RTS for peer %d: %s", q, peer, strerror(rc));
  }
  return SC_SUCCESS;
}

static void hello_encode(const sc_vb_transport_t *tp, int to, uint8_t *h) {
  const sc_vb_peer_t *p = &tp->peers[to];
  memset(h, 0, HELLO_LEN);
  sc_wire_put_u32(h, HELLO_MAGIC);
  sc_wire_put_u32(h + 4, (uint32_t)tp->base.rank);
  sc_wire_put_u32(h + 8, (uint32_t)to);
  sc_wire_put_u32(h + 12, (uint32_t)p->nqps);
  memcpy(h + 16, tp->secret, SC_SECRET_LEN);
  for (int q = 0; q < p->nqps; q++)
    sc_wire_put_u32(h + 16 + SC_SECRET_LEN + 4 * q, p->qp[q]->qp_num);
}

/* The sender's rank when h is a valid hello to this rank, else -1 with why. */
static int hello_check(const sc_vb_transport_t *tp, const uint8_t *h, uint32_t *qpn, char *why,
                       size_t whylen) {
  uint32_t from = sc_wire_get_u32(h + 4), to = sc_wire_get_u32(h + 8), nq = sc_wire_get_u32(h + 12);
  if (sc_wire_get_u32(h) != HELLO_MAGIC || !sc_secret_equal(h + 16, tp->secret, SC_SECRET_LEN)) {
    snprintf(why, whylen, "not a verbs hello of this job");
    return -1;
  }
  if (from >= (uint32_t)tp->base.nranks || (int)to != tp->base.rank || (int)from == tp->base.rank ||
      (int)nq != tp->peers[from].nqps) {
    snprintf(why, whylen, "hello from rank %u to %u with %u QPs does not fit", from, to, nq);
    return -1;
  }
  for (uint32_t q = 0; q < nq; q++) qpn[q] = sc_wire_get_u32(h + 16 + SC_SECRET_LEN + 4 * q);
  return (int)from;
}

static void close_all(int *fd, int n) {
  for (int i = 0; i < n; i++)
    if (fd[i] >= 0) close(fd[i]);
  free(fd);
}

sc_result_t sc_vb_connect_all(sc_transport_t *base, const void *addrs, size_t stride) {
  sc_vb_transport_t *tp = sc_vb_of(base);
  if (!tp || !addrs) return SC_ERR(SC_ERR_INVALID_ARG, "verbs connect_all: NULL argument");
  int n = base->nranks, me = base->rank;
  for (int i = 0; i < n; i++) {
    sc_vb_peer_t *p = &tp->peers[i];
    SC_CHECK(sc_vb_blob_unpack((const uint8_t *)addrs + (size_t)i * stride, stride, &p->blob));
    p->nqps = p->blob.qps < tp->env.qps_per_peer ? p->blob.qps : tp->env.qps_per_peer;
  }
  for (int i = 0; i < n; i++)
    if (i != me) SC_CHECK(create_qps(tp, i));
  int64_t deadline = sc_now_ms() + tp->timeout_ms;
  if (n < 1 || n > SC_RANKS_MAX) return SC_ERR(SC_ERR_INVALID_ARG, "verbs: %d ranks", n);
  int *fd = malloc((size_t)n * sizeof(int));
  uint32_t(*rqpn)[SC_VB_QPS_MAX] = calloc((size_t)n, sizeof(*rqpn));
  if (!fd || !rqpn) {
    free(fd);
    free(rqpn);
    return SC_ERR(SC_ERR_NOMEM, "verbs connect_all");
  }
  for (int i = 0; i < n; i++) fd[i] = -1;
  sc_result_t r = SC_SUCCESS;
  uint8_t h[HELLO_LEN];
  char who[64], why[128];
  /* 1: hellos to every higher rank (small: they sit in the socket buffers) */
  for (int i = me + 1; i < n && r == SC_SUCCESS; i++) {
    sc_sockaddr_t a;
    snprintf(who, sizeof(who), "verbs peer %d", i);
    r = sc_socket_addr_unpack(tp->peers[i].blob.sock, &a);
    if (r == SC_SUCCESS) r = sc_socket_connect(&a, deadline, &fd[i]);
    hello_encode(tp, i, h);
    if (r == SC_SUCCESS) r = sc_socket_write_all(fd[i], h, HELLO_LEN, deadline, who);
  }
  /* 2: every lower rank's hello, answered */
  for (int got = 0; got < me && r == SC_SUCCESS;) {
    int c = -1;
    r = sc_socket_accept(tp->listen_fd, &c, NULL);
    if (r != SC_SUCCESS) break;
    if (c < 0) {
      int64_t left = deadline - sc_now_ms();
      if (left <= 0) {
        r = SC_ERR(SC_ERR_TIMEOUT, "verbs connect_all: rank %d heard from %d of %d lower ranks", me,
                   got, me);
        break;
      }
      struct pollfd pf = {.fd = tp->listen_fd, .events = POLLIN};
      poll(&pf, 1, (int)(left < 100 ? left : 100));
      continue;
    }
    uint32_t q[SC_VB_QPS_MAX];
    int from = -1;
    if (sc_socket_read_all(c, h, HELLO_LEN, deadline, "verbs hello") == SC_SUCCESS)
      from = hello_check(tp, h, q, why, sizeof(why));
    if (from < 0 || from > me || fd[from] >= 0) {
      SC_WARN(SC_SUBSYS_NET, "verbs: dropped a side-channel connection (%s)",
              from < 0 ? why : "duplicate or from a higher rank");
      close(c);
      continue;
    }
    fd[from] = c;
    memcpy(rqpn[from], q, sizeof(q));
    snprintf(who, sizeof(who), "verbs peer %d", from);
    hello_encode(tp, from, h);
    r = sc_socket_write_all(c, h, HELLO_LEN, deadline, who);
    got++;
  }
  /* 3: the higher ranks' answers */
  for (int i = me + 1; i < n && r == SC_SUCCESS; i++) {
    snprintf(who, sizeof(who), "verbs peer %d", i);
    r = sc_socket_read_all(fd[i], h, HELLO_LEN, deadline, who);
    if (r == SC_SUCCESS && hello_check(tp, h, rqpn[i], why, sizeof(why)) != i)
      r = SC_ERR(SC_ERR_REMOTE, "verbs connect_all: peer %d answered badly (%s)", i, why);
  }
  for (int i = 0; i < n && r == SC_SUCCESS; i++)
    if (i != me) r = qp_ready(tp, i, rqpn[i]);
  /* 4: everyone's queue pairs are ready before anyone writes */
  uint8_t one = 1;
  for (int i = 0; i < n && r == SC_SUCCESS; i++)
    if (i != me) {
      snprintf(who, sizeof(who), "verbs peer %d", i);
      r = sc_socket_write_all(fd[i], &one, 1, deadline, who);
    }
  for (int i = 0; i < n && r == SC_SUCCESS; i++)
    if (i != me) {
      snprintf(who, sizeof(who), "verbs peer %d", i);
      r = sc_socket_read_all(fd[i], &one, 1, deadline, who);
    }
  if (r == SC_SUCCESS) /* kept: see sc_vb_peer_t.sock */
    for (int i = 0; i < n; i++) {
      tp->peers[i].sock = fd[i];
      fd[i] = -1;
    }
  close_all(fd, n);
  free(rqpn);
  if (r == SC_SUCCESS) {
    int local = 0;
    for (int i = 0; i < n; i++) local += tp->peers[i].blob.host_id == tp->peers[me].blob.host_id;
    sc_yield_init(&tp->yield, local, (int)sysconf(_SC_NPROCESSORS_ONLN));
    tp->connected = 1;
    close(tp->listen_fd); /* the side channel served its purpose */
    tp->listen_fd = -1;
  }
  return r;
}

void sc_vb_destroy(sc_transport_t *base) {
  if (!base) return;
  sc_vb_transport_t *tp = sc_vb_of(base);
  const sc_vb_api_t *a = tp->api;
  if (tp->peers)
    for (int i = 0; i < base->nranks; i++) {
      for (int q = 0; q < SC_VB_QPS_MAX; q++)
        if (tp->peers[i].qp[q]) a->destroy_qp(tp->peers[i].qp[q]);
      if (tp->peers[i].sock >= 0) close(tp->peers[i].sock);
    }
  if (tp->rc && tp->pd) sc_vb_rc_fini(tp->rc);
  if (tp->fifo_mr) a->dereg_mr(tp->fifo_mr);
  if (tp->cts_mr) a->dereg_mr(tp->cts_mr);
  if (tp->cq) a->destroy_cq(tp->cq);
  if (tp->ch) a->destroy_comp_channel(tp->ch);
  if (tp->pd) a->dealloc_pd(tp->pd);
  if (tp->dev.ctx) a->close_device(tp->dev.ctx);
  if (tp->listen_fd >= 0) close(tp->listen_fd);
  if (tp->wake_fd >= 0) close(tp->wake_fd);
  free(tp->fifo);
  free(tp->ctsbuf);
  free(tp->rc);
  free(tp->peers);
  free(tp->pfds);
  free(tp->pfd_peer);
  free(tp);
}
