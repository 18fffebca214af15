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
 * Waiting on both at once: while shared-memory requests are pending, the
 * mux tries both children's I/O; where shared memory's local ranks fit the
 * cores it then looks at both for up to SC_SPIN_US, yielding between
 * looks, and otherwise sleeps in one poll on TCP's descriptors and shared
 * memory's doorbell (announced to its peers as shm's own sleep is), so that
 * a message on either wakes it at once. With only TCP requests pending,
 * TCP's own poll sleeps for the whole timeout. A device copy, whose end
 * rings no doorbell, is waited for on the shm side in slices of
 * SC_MUX_SLICE_MS with TCP polled in between. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "transport/registry.h"
#include "transport/shm/shm_internal.h"
#include "transport/tcp/tcp_internal.h"

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
  /* The sleep's poll set: shm's doorbell, then TCP's descriptors; grown,
   * never per call. */
  struct pollfd *pfds;
  size_t pfds_cap;
} sc_mux_transport_t;

static inline sc_mux_transport_t *mux_of(sc_transport_t *tp) {
  return (sc_mux_transport_t *)tp;
}

static void mux_destroy(sc_transport_t *tp) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return;
  if (m->tcp) m->tcp->ops->destroy(m->tcp);
  if (m->shm) m->shm->ops->destroy(m->shm);
  free(m->pfds);
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

static sc_result_t mux_rget(sc_transport_t *tp, int peer, void *buf, uint64_t at, size_t len) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return SC_ERR(SC_ERR_INVALID_ARG, "mux rget: NULL transport");
  sc_transport_t *sub = route(m, peer);
  return sub->ops->rget ? sub->ops->rget(sub, peer, buf, at, len) : SC_ERR_UNSUPPORTED;
}

static int mux_peer_reads(sc_transport_t *tp, int peer) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return 0;
  sc_transport_t *sub = route(m, peer);
  return sub->ops->peer_reads && sub->ops->peer_reads(sub, peer);
}

static void mux_withdraw(sc_transport_t *tp, int peer) {
  sc_mux_transport_t *m = mux_of(tp);
  if (!m) return;
  sc_transport_t *sub = route(m, peer);
  if (sub->ops->withdraw) sub->ops->withdraw(sub, peer);
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

/* TCP's descriptors (*t, n of them) copied after room for the doorbell at
 * m->pfds[0]. */
static sc_result_t sleep_set(sc_mux_transport_t *m, struct pollfd **t, int *n) {
  SC_CHECK(sc_tcp_sleep_set(m->tcp, t, n));
  if ((size_t)*n + 1 > m->pfds_cap) {
    size_t cap = (size_t)*n + 1 + 16;
    struct pollfd *g = realloc(m->pfds, cap * sizeof(*g));
    if (!g) return SC_ERR(SC_ERR_NOMEM, "mux: a poll set of %zu descriptors", cap);
    m->pfds = g;
    m->pfds_cap = cap;
  }
  memcpy(m->pfds + 1, *t, (size_t)*n * sizeof(**t));
  return SC_SUCCESS;
}

/* Hands poll's results for TCP's n descriptors (m->pfds[1..n]) back to its
 * set t. */
static void tcp_polled(sc_mux_transport_t *m, struct pollfd *t, int n) {
  for (int i = 0; i < n; i++) t[i].revents = m->pfds[i + 1].revents;
  sc_tcp_slept(m->tcp);
}

/* The looks before a sleep (shm's own progress spins alike): shm's rings
 * and a poll(0) of TCP's n descriptors (sleep_set's, valid throughout: only
 * shm progresses here), yielding between rounds while yields keep the core
 * (lib/base/yield.h). 1: either has something (*moved: shm moved), or *res
 * failed. */
static int spin_both(sc_mux_transport_t *m, struct pollfd *t, int n, int timeout_ms, int *moved,
                     sc_result_t *res) {
  sc_shm_transport_t *s = sc_shm_of(m->shm);
  *res = SC_SUCCESS;
  if (s->spin_us <= 0 || !s->fits_cores) return 0;
  int64_t spin = (int64_t)timeout_ms * 1000 < s->spin_us ? (int64_t)timeout_ms * 1000 : s->spin_us;
  int64_t now = sc_now_us(), end = now + spin;
  do {
    *res = m->shm->ops->progress(m->shm, 0, moved);
    if (*moved || *res != SC_SUCCESS) return 1;
    if (poll(m->pfds + 1, (nfds_t)n, 0) > 0) {
      tcp_polled(m, t, n);
      return 1;
    }
    if (!sc_yield_allowed(&s->yield, now)) break;
    now = sc_yield_core(&s->yield, now);
  } while (now < end);
  return 0;
}

/* One poll on shm's doorbell and TCP's descriptors, at most timeout_ms and
 * SC_SHM_CHECK_MS (shm's liveness checks run between sleeps; a local peer's
 * exit is seen there, not by a pidfd in the poll). */
static sc_result_t sleep_both(sc_mux_transport_t *m, int timeout_ms, int *moved) {
  sc_result_t r = SC_SUCCESS;
  int n = 0;
  struct pollfd *t;
  SC_CHECK(sleep_set(m, &t, &n));
  if (spin_both(m, t, n, timeout_ms, moved, &r)) return r;
  if (sc_shm_sleep_enter(m->shm, &m->pfds[0], moved, &r)) {
    if (*moved || r != SC_SUCCESS) return r;
    /* The doorbell rang already, or a device copy runs: shm's own wait. */
    int p = 0;
    r = m->shm->ops->progress(m->shm, timeout_ms < SC_MUX_SLICE_MS ? timeout_ms : SC_MUX_SLICE_MS,
                              &p);
    *moved = p;
    return r;
  }
  int ms = timeout_ms < SC_SHM_CHECK_MS ? timeout_ms : SC_SHM_CHECK_MS;
  /* Connections being made have retries and deadlines that TCP's progress keeps. */
  if (sc_tcp_setup_busy(sc_tcp_of(m->tcp)) && ms > SC_MUX_SLICE_MS) ms = SC_MUX_SLICE_MS;
  int rc = poll(m->pfds, (nfds_t)n + 1, ms);
  int err = errno;
  sc_shm_sleep_leave(m->shm, rc > 0 && (m->pfds[0].revents & POLLIN));
  if (rc < 0 && err != EINTR) return SC_ERR(SC_ERR_SYSTEM, "mux progress: poll: %s", strerror(err));
  if (rc > 0) tcp_polled(m, t, n);
  return SC_SUCCESS;
}

static sc_result_t mux_progress(sc_transport_t *tp, int timeout_ms, int *progressed) {
  sc_mux_transport_t *m = mux_of(tp);
  if (progressed) *progressed = 0;
  if (!m) return SC_ERR(SC_ERR_INVALID_ARG, "mux progress: NULL transport");
  sc_transport_t *tcp = m->tcp, *shm = m->shm;
  if (!tcp) return shm->ops->progress(shm, timeout_ms, progressed);
  if (!sc_shm_pending(shm)) return tcp->ops->progress(tcp, timeout_ms, progressed);
  int p1 = 0, p2 = 0;
  SC_CHECK(prefer_mismatch(shm, tcp->ops->progress(tcp, 0, &p1), &p1));
  SC_CHECK(prefer_mismatch(tcp, shm->ops->progress(shm, 0, &p2), &p2));
  if (!p1 && !p2 && timeout_ms > 0) {
    SC_CHECK(prefer_mismatch(tcp, sleep_both(m, timeout_ms, &p2), &p2));
    SC_CHECK(prefer_mismatch(shm, tcp->ops->progress(tcp, 0, &p1), &p1));
    if (!p2) SC_CHECK(prefer_mismatch(tcp, shm->ops->progress(shm, 0, &p2), &p2));
  }
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
    .addr_max = SC_TP_AUTO_ALT_OFF,
    .pair_bytes = SC_SHM_PAIR_BYTES, /* same-host pairs are shm's */
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
    .rget = mux_rget,
    .peer_reads = mux_peer_reads,
    .withdraw = mux_withdraw,
};
