/* SPDX-License-Identifier: BSD-3-Clause */
/* UCX transport setup: the UCP contexts and workers of one communicator
 * (its lanes, ucx_internal.h), the address blob, one endpoint per peer with
 * peer error handling, and teardown.
 *
 * The workers run in UCS_THREAD_MODE_SINGLE: only the communicator's
 * progress thread calls into them; wake (any thread) only writes a worker's
 * wake-up event fd through ucp_worker_signal.
 *
 * The blob carries the whole worker address when it fits SC_TP_ADDR_MAX
 * (the usual case: ~215 bytes with TCP and shared memory). A host with many
 * devices can have a larger one: then the network-only address is
 * published (same-host peers then talk over UCX's network transports,
 * logged as a warning); if even that does not fit, create fails and says
 * which UCX variables narrow it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/devrt.h"
#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/ucx/ucx_auto.h"
#include "transport/ucx/ucx_internal.h"

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (uint8_t)s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* Whether UCX_TLS lets UCX use shared memory: unset means UCX's default
 * (all), a list names its transports, a "^" list excludes some. */
static int tls_allow_shm(const char *tls) {
  if (!tls || !*tls) return 1;
  int exclude = tls[0] == '^';
  if (exclude) tls++;
  static const char *const shm_tls[] = {"sm", "shm", "posix", "sysv", "cma", "knem", "xpmem"};
  int named = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", tls);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (!exclude && strcmp(t, "all") == 0) return 1;
    for (size_t i = 0; i < sizeof(shm_tls) / sizeof(shm_tls[0]); i++)
      if (strcmp(t, shm_tls[i]) == 0) named = 1;
  }
  return exclude ? !named : named;
}

static int32_t online_cpus(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 ? (int32_t)cpus : 0;
}

static void fill_blob_hdr(sc_ucx_blob_hdr_t *b, int rank) {
  memset(b, 0, sizeof(*b));
  b->magic = SC_UCX_BLOB_MAGIC;
  b->rank = rank;
  b->pid = (int32_t)getpid();
  b->host_cpus = online_cpus();
  char host[256];
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "?");
  host[sizeof(host) - 1] = '\0';
  b->host_hash = fnv1a(host, strlen(host));
  char boot[64] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
    fclose(f);
  }
  b->boot_hash = fnv1a(boot, strcspn(boot, "\n"));
  struct stat st;
  b->netns = stat("/proc/self/ns/net", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The worker's address (flags: 0 or UCP_WORKER_ADDRESS_FLAG_NET_ONLY) in
 * *attr; the caller releases it. */
static sc_result_t query_address(ucp_worker_h w, unsigned flags, ucp_worker_attr_t *attr) {
  *attr = (ucp_worker_attr_t){.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS |
                                            UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS,
                              .address_flags = flags};
  ucs_status_t st = ucp_worker_query(w, attr);
  if (st != UCS_OK)
    return SC_ERR(SC_ERR_SYSTEM, "ucx: ucp_worker_query%s: %s", flags ? " (network only)" : "",
                  ucs_status_string(st));
  return SC_SUCCESS;
}

/* Writes the header, the host lane's worker address (full, else network
 * only) and, with a net lane, that lane's network-only address. */
static sc_result_t put_address(sc_ucx_transport_t *tp, uint8_t *blob, size_t room,
                               size_t *addrlen) {
  ucp_worker_h host_w = tp->lane[SC_UCX_LANE_HOST].worker;
  ucp_worker_attr_t net = {.address = NULL}, attr;
  size_t addr_room = room - sizeof(tp->me);
  if (tp->nlanes > 1) {
    SC_CHECK(
        query_address(tp->lane[SC_UCX_LANE_NET].worker, UCP_WORKER_ADDRESS_FLAG_NET_ONLY, &net));
    if (net.address_length >= addr_room) {
      size_t len = net.address_length;
      ucp_worker_release_address(tp->lane[SC_UCX_LANE_NET].worker, net.address);
      return SC_ERR(SC_ERR_UNSUPPORTED,
                    "ucx: the net lane's worker address has %zu bytes, room for %zu: narrow it "
                    "with UCX_NET_DEVICES",
                    len, addr_room);
    }
    addr_room -= net.address_length;
  }
  sc_result_t r = query_address(host_w, 0, &attr);
  int full = 1;
  if (r == SC_SUCCESS && attr.address_length > addr_room) {
    size_t full_len = attr.address_length;
    ucp_worker_release_address(host_w, attr.address);
    r = query_address(host_w, UCP_WORKER_ADDRESS_FLAG_NET_ONLY, &attr);
    if (r == SC_SUCCESS && attr.address_length > addr_room) {
      size_t len = attr.address_length;
      ucp_worker_release_address(host_w, attr.address);
      r = SC_ERR(SC_ERR_UNSUPPORTED,
                 "ucx: the UCP worker address has %zu bytes (%zu network only), room for %zu: "
                 "narrow it with UCX_TLS or UCX_NET_DEVICES",
                 full_len, len, addr_room);
    } else if (r == SC_SUCCESS) {
      SC_WARN(SC_SUBSYS_NET,
              "ucx: the UCP worker address has %zu bytes, room for %zu: publishing the "
              "network-only address (%zu bytes); peers on this host use UCX's network transports",
              full_len, addr_room, attr.address_length);
      full = 0;
    }
  }
  if (r == SC_SUCCESS) {
    tp->me.addr_len = (uint16_t)attr.address_length;
    tp->me.net_addr_len = (uint16_t)(net.address ? net.address_length : 0);
    if (full && tls_allow_shm(getenv("UCX_TLS"))) tp->me.flags |= SC_UCX_FLAG_SHM;
    memcpy(blob, &tp->me, sizeof(tp->me));
    memcpy(blob + sizeof(tp->me), attr.address, attr.address_length);
    if (net.address)
      memcpy(blob + sizeof(tp->me) + attr.address_length, net.address, net.address_length);
    *addrlen = sizeof(tp->me) + attr.address_length + tp->me.net_addr_len;
    ucp_worker_release_address(host_w, attr.address);
  }
  if (net.address) ucp_worker_release_address(tp->lane[SC_UCX_LANE_NET].worker, net.address);
  return r;
}

/* UCX may complete a request through its callback inside the posting call;
 * a request that comes out of UCX's pool then looks finished (no caller
 * request, on no list) and the callback ignores it. Completion restores
 * this state before the request goes back to the pool. */
static void op_init(void *request) {
  memset(request, 0, sizeof(sc_ucx_op_t));
}

sc_result_t sc_ucx_create(const sc_tp_config_t *cfg, sc_transport_t **out, void *addr,
                          size_t *addrlen) {
  return sc_ucx_create_in(cfg, out, addr, SC_TP_ADDR_MAX, addrlen);
}

/* Opens a UCP context (UCX_* settings, RNDV_THRESH = rndv unless NULL) and
 * its worker and event fd. */
static sc_result_t open_lane(sc_ucx_lane_t *l, const char *rndv, int nranks) {
  ucp_config_t *config = NULL;
  ucs_status_t st = ucp_config_read(NULL, NULL, &config);
  if (st != UCS_OK)
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx: reading UCX_* settings: %s", ucs_status_string(st));
  if (rndv && (st = ucp_config_modify(config, "RNDV_THRESH", rndv)) != UCS_OK) {
    ucp_config_release(config);
    return SC_ERR(SC_ERR_SYSTEM, "ucx: setting RNDV_THRESH=%s: %s", rndv, ucs_status_string(st));
  }
  ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                                       UCP_PARAM_FIELD_REQUEST_INIT |
                                       UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                                       UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                         .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
                         .request_size = sizeof(sc_ucx_op_t),
                         .request_init = op_init,
                         .estimated_num_eps = (size_t)nranks,
                         .mt_workers_shared = 0};
  st = ucp_init(&params, config, &l->ctx);
  ucp_config_release(config);
  if (st != UCS_OK) {
    l->ctx = NULL;
    return SC_ERR(SC_ERR_UNSUPPORTED, "ucx: ucp_init: %s (check UCX_TLS and UCX_NET_DEVICES)",
                  ucs_status_string(st));
  }
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  st = ucp_worker_create(l->ctx, &wp, &l->worker);
  if (st != UCS_OK) {
    l->worker = NULL;
    return SC_ERR(SC_ERR_SYSTEM, "ucx: ucp_worker_create: %s", ucs_status_string(st));
  }
  st = ucp_worker_get_efd(l->worker, &l->efd);
  if (st != UCS_OK)
    return SC_ERR(SC_ERR_SYSTEM, "ucx: ucp_worker_get_efd: %s", ucs_status_string(st));
  return SC_SUCCESS;
}

sc_result_t sc_ucx_create_in(const sc_tp_config_t *cfg, sc_transport_t **out, void *addr,
                             size_t room, size_t *addrlen) {
  if (!cfg || !out || !addr || !addrlen)
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx create: NULL argument");
  if (room <= sizeof(sc_ucx_blob_hdr_t) || room > SC_TP_ADDR_MAX)
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx create: %zu bytes of address room", room);
  if (cfg->nranks < 1 || cfg->rank < 0 || cfg->rank >= cfg->nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx create: rank %d of %d", cfg->rank, cfg->nranks);
  *out = NULL;
  sc_ucx_transport_t *tp = calloc(1, sizeof(*tp));
  if (!tp) return SC_ERR(SC_ERR_NOMEM, "ucx transport");
  tp->base.ops = &sc_ucx_transport;
  tp->base.rank = cfg->rank;
  tp->base.nranks = cfg->nranks;
  tp->spin_us = cfg->spin_us;
  tp->timeout_ms = cfg->timeout_ms;
  for (int l = 0; l < SC_UCX_LANES; l++) tp->lane[l].efd = -1;
  sc_result_t r = SC_SUCCESS;
  tp->peers = calloc((size_t)cfg->nranks, sizeof(*tp->peers));
  if (!tp->peers) {
    r = SC_ERR(SC_ERR_NOMEM, "ucx: peer table of %d ranks", cfg->nranks);
    goto fail;
  }
  /* UCX_* variables are read here: they are the user's to set. */
  const char *user_rndv = getenv("UCX_RNDV_THRESH");
  int one_host = sc_ucx_root_is_loopback(cfg->route_hint);
  /* The host lane's threshold does not depend on RDMA. */
  int host_cpus = online_cpus();
  sc_ucx_rndv_plan_t plan = sc_ucx_rndv_plan(user_rndv, 0, one_host, cfg->nranks, host_cpus);
  SC_CHECK_GOTO(open_lane(&tp->lane[0], plan.host, cfg->nranks), r, fail);
  tp->nlanes = 1;
  /* RDMA or not is known once a context has opened UCX's resources. It
   * matters only where a net lane could open: elsewhere the query (a print
   * of the context's resources, parsed) is skipped, and the plan is the
   * same either way. */
  int rdma = user_rndv || one_host || sc_ucx_context_has_rdma(tp->lane[0].ctx);
  plan = sc_ucx_rndv_plan(user_rndv, rdma, one_host, cfg->nranks, host_cpus);
  if (plan.net) {
    SC_CHECK_GOTO(open_lane(&tp->lane[SC_UCX_LANE_NET], plan.net, cfg->nranks), r, fail);
    tp->nlanes = 2;
  }
  if (plan.host)
    SC_INFO(SC_SUBSYS_NET,
            "ucx: rendezvous from %s bytes between ranks of one host, %s between hosts (the "
            "library's defaults: %s, %d ranks %s %d CPUs; UCX_RNDV_THRESH sets both)",
            plan.host, plan.net ? plan.net : plan.host,
            plan.net   ? "no RDMA, UCX's network is TCP"
            : one_host ? "the bootstrap root is on loopback, so all ranks are on this host"
                       : "RDMA",
            cfg->nranks, cfg->nranks <= host_cpus ? "within" : "may share", host_cpus);
  fill_blob_hdr(&tp->me, cfg->rank);
  /* Announced, so that every rank derives the same device_mem for every
   * pair (props). The stand-in runtime is named otherwise and has host
   * views: UCX could not read its device memory. */
  const sc_devrt_t *rt = sc_devrt();
  int ucx_cuda = sc_ucx_context_has_cuda(tp->lane[0].ctx);
  int rt_cuda = rt && rt->name && strcmp(rt->name, "cuda") == 0 && !rt->host_view;
  tp->me.flags |= (uint8_t)sc_ucx_cuda_flag(ucx_cuda, rt_cuda);
  SC_INFO(SC_SUBSYS_NET, "ucx: CUDA memory %s by UCX, device runtime %s: device buffers %s",
          ucx_cuda ? "supported" : "not supported", rt ? rt->name : "none",
          tp->me.flags & SC_UCX_FLAG_CUDA ? "go to UCX directly where the peer's UCX takes them too"
                                          : "are staged through pinned host memory");
  memset(addr, 0, room);
  SC_CHECK_GOTO(put_address(tp, addr, room, addrlen), r, fail);
  *out = &tp->base;
  return SC_SUCCESS;
fail:
  sc_ucx_destroy(&tp->base);
  return r;
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t st) {
  (void)ep;
  sc_ucx_peer_t *p = arg;
  const char *what = st == UCS_ERR_CONNECTION_RESET   ? "closed or reset the connection"
                     : st == UCS_ERR_ENDPOINT_TIMEOUT ? "stopped answering (endpoint timeout)"
                     : st == UCS_ERR_UNREACHABLE      ? "is unreachable"
                     : st == UCS_ERR_REJECTED         ? "rejected the connection"
                                                      : "failed";
  sc_ucx_peer_fail(p->tp, p, "%s: %s", what, ucs_status_string(st));
}

sc_result_t sc_ucx_connect_all(sc_transport_t *base, const void *addrs, size_t stride) {
  sc_ucx_transport_t *tp = sc_ucx_of(base);
  if (!tp || !addrs) return SC_ERR(SC_ERR_INVALID_ARG, "ucx connect_all: NULL argument");
  if (stride < sizeof(sc_ucx_blob_hdr_t))
    return SC_ERR(SC_ERR_INVALID_ARG, "ucx connect_all: address stride %zu", stride);
  const int n = base->nranks;
  const uint8_t *a = addrs;
  for (int i = 0; i < n; i++) {
    sc_ucx_peer_t *p = &tp->peers[i];
    memcpy(&p->blob, a + (size_t)i * stride, sizeof(p->blob));
    if (p->blob.magic != SC_UCX_BLOB_MAGIC)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "ucx: rank %d did not publish a UCX address (magic 0x%08x): every rank must "
                    "use SC_TRANSPORT=ucx",
                    i, p->blob.magic);
    size_t len;
    if (p->blob.rank != i ||
        !sc_ucx_blob_address(&p->blob, stride < SC_TP_ADDR_MAX ? stride : SC_TP_ADDR_MAX,
                             SC_UCX_LANE_HOST, &len))
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "ucx: rank %d's address blob is malformed (rank %d, %u + %u bytes)", i,
                    p->blob.rank, (unsigned)p->blob.addr_len, (unsigned)p->blob.net_addr_len);
    p->rank = i;
    p->tp = tp;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (sc_ucx_blob_same_host(&tp->peers[i].blob, &tp->peers[j].blob)) tp->peers[i].host_ranks++;
  for (int i = 0; i < n; i++) {
    if (i == base->rank) continue;
    sc_ucx_peer_t *p = &tp->peers[i];
    /* UCX 1.13's shared-memory transports (posix, sysv, self) have no peer
     * failure handler: with UCP_ERR_HANDLING_MODE_PEER, UCX would carry a
     * same-host pair over TCP loopback (measured 3-5x slower). Such a pair
     * gets no error handling, and a dead or stopped same-host peer is
     * reported by the liveness watch (lib/control/watch.c), as for shm; both
     * ends decide alike, from the two blobs. */
    p->peer_errors = !sc_ucx_blob_same_host(&tp->peers[base->rank].blob, &p->blob) ||
                     !(tp->peers[base->rank].blob.flags & p->blob.flags & SC_UCX_FLAG_SHM);
    /* This end's worker of the pair's lane, the peer's address for it. */
    int lane = sc_ucx_pair_lane(&tp->peers[base->rank].blob, &p->blob);
    p->worker = tp->lane[lane < tp->nlanes ? lane : 0].worker;
    size_t len, off = sc_ucx_blob_address(&p->blob, stride, lane, &len);
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)(a + (size_t)i * stride + off),
        .err_mode = p->peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
        .err_handler = {.cb = ep_error_cb, .arg = p}};
    ucs_status_t st = ucp_ep_create(p->worker, &ep, &p->ep);
    if (st != UCS_OK) {
      p->ep = NULL;
      return SC_ERR(SC_ERR_REMOTE, "ucx: rank %d cannot reach rank %d: ucp_ep_create: %s",
                    base->rank, i, ucs_status_string(st));
    }
  }
  int local = tp->peers[base->rank].host_ranks;
  sc_yield_init(&tp->yield, local, tp->me.host_cpus);
  if (tp->spin_us > 0 && !sc_ucx_spins(local, tp->me.host_cpus, tp->me.flags)) {
    SC_INFO(SC_SUBSYS_NET,
            "ucx: %d ranks on this host share %d CPUs and UCX has no shared memory here: waiting "
            "without spinning (SC_SPIN_US=%d ignored)",
            local, tp->me.host_cpus, tp->spin_us);
    tp->spin_us = 0;
  }
  int via_net = 0;
  for (int i = 0; i < n; i++)
    via_net += tp->nlanes > 1 && tp->peers[i].worker == tp->lane[SC_UCX_LANE_NET].worker;
  /* A lane without peers (the host lane of a rank alone on its host) is
   * neither progressed nor waited on; the host lane stays when no lane has
   * one (a single rank), so that wake has a worker to signal. */
  tp->nbusy = 0;
  if (via_net < n - 1 || via_net == 0) tp->busy[tp->nbusy++] = SC_UCX_LANE_HOST;
  if (via_net > 0) tp->busy[tp->nbusy++] = SC_UCX_LANE_NET;
  tp->connected = 1;
  SC_INFO(SC_SUBSYS_NET,
          "ucx: rank %d has endpoints to all %d peers (%s): %d on this host, %d on other hosts; "
          "%d through the net lane's own context",
          base->rank, n - 1, ucp_get_version_string(), local - 1, n - local, via_net);
  return SC_SUCCESS;
}

/* Progresses worker w until UCX completes h or the deadline passes; frees h. */
static void wait_request(ucp_worker_h w, ucs_status_ptr_t h, int64_t end_us) {
  if (h == NULL || UCS_PTR_IS_ERR(h)) return;
  while (ucp_request_check_status(h) == UCS_INPROGRESS && sc_now_us() < end_us)
    ucp_worker_progress(w);
  ucp_request_free(h);
}

/* First flush what was sent (a send completes when UCX has buffered it; a
 * peer may still wait for our last message, a fingerprint or a barrier's):
 * a worker flush needs no answer from idle peers, unlike a flushing
 * endpoint close, which waits for each peer's acknowledgement (an idle
 * communicator does not progress its worker). After a failure or an abort
 * with requests pending (abandon), a rendezvous send whose receiver will
 * never come would hold the flush: it gets 100 ms. Then the endpoints close
 * at once; the peers see the connection close as for tcp. */
static void close_endpoints(sc_ucx_transport_t *tp) {
  int64_t bound_ms = tp->timeout_ms > 0 && tp->timeout_ms < 2000 ? tp->timeout_ms : 2000;
  if (tp->abandon) bound_ms = 100;
  int64_t end = sc_now_us() + bound_ms * 1000;
  ucp_request_param_t flush = {.op_attr_mask = 0};
  for (int l = 0; l < tp->nlanes; l++)
    wait_request(tp->lane[l].worker, ucp_worker_flush_nbx(tp->lane[l].worker, &flush), end);
  for (int i = 0; i < tp->base.nranks; i++) {
    sc_ucx_peer_t *p = &tp->peers[i];
    if (!p->ep) continue;
    /* UCX defines forcing between endpoints with peer error handling; a
     * same-host endpoint without it is forced only after a failure or an
     * abort with requests pending (its requests then complete as
     * cancelled, rather than stay with UCX for a peer that may be dead;
     * the peer, if alive, fails too, through the watch). */
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags =
                                   p->peer_errors || tp->abandon ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t h = ucp_ep_close_nbx(p->ep, &prm);
    p->ep = NULL;
    wait_request(p->worker, h, end);
  }
}

void sc_ucx_destroy(sc_transport_t *base) {
  sc_ucx_transport_t *tp = sc_ucx_of(base);
  if (!tp) return;
  if (tp->peers && tp->lane[0].worker) close_endpoints(tp);
  for (int l = 0; l < SC_UCX_LANES; l++) {
    if (tp->lane[l].worker) ucp_worker_destroy(tp->lane[l].worker);
    if (tp->lane[l].ctx) ucp_cleanup(tp->lane[l].ctx);
  }
  free(tp->peers);
  free(tp);
}
