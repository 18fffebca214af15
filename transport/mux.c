/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_TRANSPORT=auto: shared memory for same-host peers, TCP for the others,
 * in one communicator. The address blob carries both transports' blobs at
 * fixed offsets:
 *   u32 'SCMX', u8 tcp length, u8 shm length, u16 0, tcp blob (<= 64 B) at
 *   8, shm blob at 72.
 * Same-host is an equivalence (same hostname, boot id, pid and network
 * namespace), so "every rank is on this host" is the same verdict on every
 * rank; then TCP is closed before it connects anything. Otherwise TCP
 * connects to every peer (its setup is all-to-all) and carries only the
 * remote ones. Each pair's props come from the child that carries it.
 *
 * Waiting on both at once: TCP's poll set is private to it, so while
 * shared-memory requests are pending the mux waits on the shm side (spin,
 * then doorbell) in slices of SC_MUX_SLICE_MS and polls TCP in between; with
 * only TCP requests pending, TCP's own poll sleeps for the whole timeout. */
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/registry.h"
#include "transport/shm/shm_internal.h"

#define SC_MUX_MAGIC    0x53434d58u /* 'SCMX' */
#define SC_MUX_TCP_OFF  8
#define SC_MUX_TCP_MAX  64
#define SC_MUX_SHM_OFF  (SC_MUX_TCP_OFF + SC_MUX_TCP_MAX)
#define SC_MUX_SLICE_MS 1

/* Under auto, the switch transport's address follows the mux's (transport/registry.h). */
_Static_assert(SC_MUX_SHM_OFF + SC_SHM_BLOB_LEN <= SC_TP_AUTO_ALT_OFF,
               "mux address blob too large");

typedef struct sc_mux_transport {
  sc_transport_t base;
  sc_transport_t *tcp; /* NULL when every peer is on this host */
  sc_transport_t *shm;
} sc_mux_transport_t;

static inline sc_mux_transport_t *mux_of(sc_transport_t *tp) {
  return (sc_mux_transport_t *)tp;
}

static void mux_destroy(sc_transport_t *tp) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return;
  if (m->tcp) m->tcp->ops->destroy(m->tcp);
  if (m->shm) m->shm->ops->destroy(m->shm);
  free(m);
}

static sc_result_t mux_create(const sc_tp_config_t *cfg, sc_transport_t **out, void *addr,
                              size_t *addrlen) {
  if (!cfg || !out || !addr || !addrlen)
    return SC_ERR(SC_ERR_INVALID_ARG, "mux create: NULL argument");
  *out = NULL;
  sc_mux_transport_t *m = calloc(1, sizeof(*m));
  if (!m) return SC_ERR(SC_ERR_NOMEM, "transport mux");
  m->base.ops = &sc_mux_transport;
  m->base.rank = cfg->rank;
  m->base.nranks = cfg->nranks;
  uint8_t *blob = addr;
  memset(blob, 0, SC_TP_ADDR_MAX);
  uint8_t tmp[SC_TP_ADDR_MAX];
  size_t tlen = 0, slen = 0;
  sc_result_t r;
  SC_CHECK_GOTO(sc_tcp_transport.create(cfg, &m->tcp, tmp, &tlen), r, fail);
  if (tlen > SC_MUX_TCP_MAX) {
    r = SC_ERR(SC_ERR_INTERNAL, "mux: the tcp address blob has %zu bytes, room for %d", tlen,
               SC_MUX_TCP_MAX);
    goto fail;
  }
  memcpy(blob + SC_MUX_TCP_OFF, tmp, tlen);
  SC_CHECK_GOTO(sc_shm_create_mode(cfg, 1, &m->shm, tmp, &slen), r, fail);
  memcpy(blob + SC_MUX_SHM_OFF, tmp, slen);
  uint32_t magic = SC_MUX_MAGIC;
  memcpy(blob, &magic, 4);
  blob[4] = (uint8_t)tlen;
  blob[5] = (uint8_t)slen;
  *addrlen = SC_MUX_SHM_OFF + slen;
  *out = &m->base;
  return SC_SUCCESS;
fail:
  mux_destroy(&m->base);
  return r;
}

static sc_result_t mux_connect_all(sc_transport_t *tp, const void *addrs, size_t stride) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m || !addrs) return SC_ERR(SC_ERR_INVALID_ARG, "mux connect_all: NULL argument");
  const uint8_t *a = addrs;
  for (int i = 0; i < m->base.nranks; i++) {
    uint32_t magic;
    memcpy(&magic, a + (size_t)i * stride, 4);
    if (magic != SC_MUX_MAGIC)
      return SC_ERR(SC_ERR_INVALID_ARG,
                    "rank %d did not publish an SC_TRANSPORT=auto address (magic 0x%08x): every "
                    "rank must use the same SC_TRANSPORT",
                    i, magic);
  }
  SC_CHECK(m->shm->ops->connect_all(m->shm, a + SC_MUX_SHM_OFF, stride));
  int nlocal = sc_shm_of(m->shm)->nlocal;
  int nremote = m->base.nranks - 1 - nlocal;
  if (nremote == 0) {
    m->tcp->ops->destroy(m->tcp);
    m->tcp = NULL;
  } else {
    SC_CHECK(m->tcp->ops->connect_all(m->tcp, a + SC_MUX_TCP_OFF, stride));
  }
  SC_INFO(SC_SUBSYS_SHM, "rank %d: %d peer%s over shared memory, %d over tcp", m->base.rank, nlocal,
          nlocal == 1 ? "" : "s", nremote);
  return SC_SUCCESS;
}

static sc_transport_t *route(sc_mux_transport_t *m, int peer) {
  return !m->tcp || sc_shm_is_local(m->shm, peer) ? m->shm : m->tcp;
}

/* The child gets the caller's request itself, not a copy: the print (fp)
 * goes out in the child's header and the peer's (peer_fp) comes back in the
 * request the caller reads. */
static sc_result_t mux_isend(sc_transport_t *tp, int peer, const void *buf, size_t len,
                             sc_tp_req_t *req) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return SC_ERR(SC_ERR_INVALID_ARG, "mux isend: NULL transport");
  sc_transport_t *sub = route(m, peer);
  return sub->ops->isend(sub, peer, buf, len, req);
}

static sc_result_t mux_irecv(sc_transport_t *tp, int peer, void *buf, size_t len,
                             sc_tp_req_t *req) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return SC_ERR(SC_ERR_INVALID_ARG, "mux irecv: NULL transport");
  sc_transport_t *sub = route(m, peer);
  return sub->ops->irecv(sub, peer, buf, len, req);
}

/* r: what one child's progress returned. A mismatch the other child meets
 * now outranks r, as within each child: the executor must see it to name
 * both calls, and r is mostly its echo (a peer closing after its own
 * verdict). r's text is kept otherwise. */
static sc_result_t prefer_mismatch(sc_transport_t *other, sc_result_t r, int *moved) {
  if (r == SC_SUCCESS || r == SC_ERR_MISMATCH) return r;
  char err[SC_ERRMSG_MAX];
  sc_error_get_detail(err, sizeof(err));
  int p = 0;
  if (other->ops->progress(other, 0, &p) == SC_ERR_MISMATCH) return SC_ERR_MISMATCH;
  *moved = *moved || p;
  sc_error_set_detail(err);
  return r;
}

static sc_result_t mux_progress(sc_transport_t *tp, int timeout_ms, int *progressed) {
  sc_mux_transport_t *m = mux_of(tp);
  if (progressed) *progressed = 0;
  if (!m) return SC_ERR(SC_ERR_INVALID_ARG, "mux progress: NULL transport");
  sc_transport_t *tcp = m->tcp, *shm = m->shm;
  if (!tcp) return shm->ops->progress(shm, timeout_ms, progressed);
  if (!sc_shm_pending(shm)) return tcp->ops->progress(tcp, timeout_ms, progressed);
  int p1 = 0, p2 = 0;
  int slice = timeout_ms < SC_MUX_SLICE_MS ? timeout_ms : SC_MUX_SLICE_MS;
  SC_CHECK(prefer_mismatch(shm, tcp->ops->progress(tcp, 0, &p1), &p1));
  SC_CHECK(prefer_mismatch(tcp, shm->ops->progress(shm, p1 ? 0 : slice, &p2), &p2));
  if (!p1 && !p2) SC_CHECK(prefer_mismatch(shm, tcp->ops->progress(tcp, 0, &p1), &p1));
  if (progressed) *progressed = p1 || p2;
  return SC_SUCCESS;
}

static void mux_cancel_all(sc_transport_t *tp, sc_result_t why) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return;
  if (m->tcp) m->tcp->ops->cancel_all(m->tcp, why);
  if (m->shm) m->shm->ops->cancel_all(m->shm, why);
}

static sc_result_t mux_reg(sc_transport_t *tp, void *buf, size_t len, void **handle) {
  (void)tp, (void)buf, (void)len;
  if (handle) *handle = NULL;
  return SC_SUCCESS;
}

static sc_result_t mux_dereg(sc_transport_t *tp, void *handle) {
  (void)tp, (void)handle;
  return SC_SUCCESS;
}

static void mux_wake(sc_transport_t *tp) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return;
  if (m->tcp) m->tcp->ops->wake(m->tcp);
  if (m->shm) m->shm->ops->wake(m->shm);
}

/* With both children, the doorbell for a slice, then a look at the sockets:
 * a wait may return early, and the lane's thread comes back within a slice
 * for what arrives over tcp meanwhile. */
static void mux_wait(sc_transport_t *tp, int timeout_ms) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return;
  if (!m->tcp) {
    m->shm->ops->wait(m->shm, timeout_ms);
    return;
  }
  m->shm->ops->wait(m->shm, timeout_ms < SC_MUX_SLICE_MS ? timeout_ms : SC_MUX_SLICE_MS);
  m->tcp->ops->wait(m->tcp, 0);
}

/* A pair is the child's that carries it: shm's same-host test reads only
 * the two ranks' blobs, so every rank routes every pair alike. */
static sc_result_t mux_props(sc_transport_t *tp, int a, int b, sc_tp_props_t *out) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return SC_ERR(SC_ERR_INVALID_ARG, "mux props: NULL transport");
  sc_transport_t *sub = !m->tcp || sc_shm_pair_local(m->shm, a, b) ? m->shm : m->tcp;
  return sub->ops->props(sub, a, b, out);
}

/* The board is shared memory's, where no peer is on another host. */
static size_t mux_board_max(sc_transport_t *tp) {
  sc_mux_transport_t *m = mux_of(tp);
  return m->tcp ? 0 : m->shm->ops->board_max(m->shm);
}

static void mux_board_post(sc_transport_t *tp, uint64_t seq, uint64_t fp, const void *data,
                           size_t len) {
  sc_transport_t *shm = mux_of(tp)->shm;
  shm->ops->board_post(shm, seq, fp, data, len);
}

static sc_result_t mux_board_peek(sc_transport_t *tp, int peer, uint64_t seq, int64_t now_ms,
                                  const void **data, uint64_t *fp) {
  sc_transport_t *shm = mux_of(tp)->shm;
  return shm->ops->board_peek(shm, peer, seq, now_ms, data, fp);
}

const sc_transport_ops_t sc_mux_transport = {
    .name = "auto",
    .create = mux_create,
    .connect_all = mux_connect_all,
    .isend = mux_isend,
    .irecv = mux_irecv,
    .progress = mux_progress,
    .cancel_all = mux_cancel_all,
    .reg = mux_reg,
    .dereg = mux_dereg,
    .wake = mux_wake,
    .wait = mux_wait,
    .destroy = mux_destroy,
    .props = mux_props,
    .board_max = mux_board_max,
    .board_post = mux_board_post,
    .board_peek = mux_board_peek,
};
