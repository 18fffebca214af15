/* SPDX-License-Identifier: BSD-3-Clause */
/* The transport table (transport/registry.h) and its look-ups. */
#include "transport/registry.h"

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#ifdef SC_HAVE_UCX
#include "transport/ucx/ucx_auto.h"
#endif

#ifdef SC_HAVE_UCX
#define SC_UCX_OPS       &sc_ucx_transport
#define SC_UCX_AUTO_OPEN sc_ucx_auto_open
#else
#define SC_UCX_OPS       NULL
#define SC_UCX_AUTO_OPEN NULL
#endif
#ifdef SC_HAVE_VERBS
#define SC_VERBS_OPS &sc_verbs_transport
#else
#define SC_VERBS_OPS NULL
#endif

static const sc_tp_entry_t sc_tp_rows[SC_TP_COUNT] = {
    [SC_TP_AUTO] = {.id = SC_TP_AUTO,
                    .name = "auto",
                    .ops = &sc_mux_transport,
                    .help = "shm for same-host peers, tcp otherwise",
                    .auto_role = SC_TP_AUTO_MUX},
    [SC_TP_TCP] = {.id = SC_TP_TCP,
                   .name = "tcp",
                   .ops = &sc_tcp_transport,
                   .auto_role = SC_TP_AUTO_MUXED},
    [SC_TP_SHM] = {.id = SC_TP_SHM,
                   .name = "shm",
                   .ops = &sc_shm_transport,
                   .auto_role = SC_TP_AUTO_MUXED},
    /* UCX only pays where it reaches RDMA between hosts: same-host pairs are
     * shm's and TCP is ours too. */
    [SC_TP_UCX] = {.id = SC_TP_UCX,
                   .name = "ucx",
                   .ops = SC_UCX_OPS,
                   .package = "libucx-dev",
                   .configure_opt = "--with-ucx",
                   .help = "when built with UCX",
                   .auto_role = SC_TP_AUTO_SWITCH,
                   .auto_cap = SC_TP_CAP_UCX_RDMA,
                   .auto_when = "every rank has RDMA through UCX",
                   .auto_open = SC_UCX_AUTO_OPEN},
    /* Opt-in: auto ignores it, and with it any bad SC_IB_* setting. */
    [SC_TP_VERBS] = {.id = SC_TP_VERBS,
                     .name = "verbs",
                     .ops = SC_VERBS_OPS,
                     .package = "libibverbs-dev",
                     .configure_opt = "--with-verbs",
                     .help = "when built with ibverbs headers; needs an RDMA device",
                     .auto_role = SC_TP_AUTO_NEVER},
};

const sc_tp_entry_t *sc_tp_registry(size_t *n) {
  if (n) *n = SC_TP_COUNT;
  return sc_tp_rows;
}

const sc_tp_entry_t *sc_tp_by_id(int id) {
  return id >= 0 && id < SC_TP_COUNT ? &sc_tp_rows[id] : NULL;
}

sc_result_t sc_tp_lookup(const char *var, const char *name, const sc_tp_entry_t **out) {
  const char *names[SC_TP_COUNT];
  for (int i = 0; i < SC_TP_COUNT; i++) names[i] = sc_tp_rows[i].name;
  int idx;
  SC_CHECK(sc_parse_choice(var, name, names, SC_TP_COUNT, &idx));
  *out = &sc_tp_rows[idx];
  return SC_SUCCESS;
}

sc_result_t sc_tp_require(const char *var, const sc_tp_entry_t *e) {
  if (e->ops) return SC_SUCCESS;
  return SC_ERR(SC_ERR_UNSUPPORTED,
                "%s=%s: this build has no %s transport (configure did not find %s: install it "
                "and run configure again, with %s to make its absence an error)",
                var, e->name, e->name, e->package ? e->package : "what provides it",
                e->configure_opt ? e->configure_opt : "the transport's option");
}

sc_result_t sc_tp_select(const char *var, const char *name, const sc_tp_entry_t **out) {
  const sc_tp_entry_t *e;
  SC_CHECK(sc_tp_lookup(var, name, &e));
  SC_CHECK(sc_tp_require(var, e));
  *out = e;
  return SC_SUCCESS;
}

const sc_tp_entry_t *sc_tp_auto_switch(void) {
  for (int i = 0; i < SC_TP_COUNT; i++)
    if (sc_tp_rows[i].auto_role == SC_TP_AUTO_SWITCH) return &sc_tp_rows[i];
  return NULL;
}

void sc_tp_muxed_names(char *buf, size_t len) {
  size_t used = 0;
  if (len) buf[0] = '\0';
  for (int i = 0; i < SC_TP_COUNT && used < len; i++)
    if (sc_tp_rows[i].auto_role == SC_TP_AUTO_MUXED)
      used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "/" : "", sc_tp_rows[i].name);
}

int sc_tp_auto_choose(const sc_tp_entry_t *rows, size_t nrows, int requested, int nranks,
                      const void *caps, size_t stride, int cross_host) {
  if (requested != SC_TP_AUTO) return requested;
  if (!rows || !cross_host || nranks < 2 || !caps) return SC_TP_AUTO;
  for (size_t t = 0; t < nrows; t++) {
    const sc_tp_entry_t *e = &rows[t];
    if (e->auto_role != SC_TP_AUTO_SWITCH || !e->ops || !e->auto_cap) continue;
    int every = 1;
    for (int i = 0; i < nranks && every; i++) {
      uint32_t c;
      memcpy(&c, (const uint8_t *)caps + (size_t)i * stride, sizeof(c));
      every = (c & e->auto_cap) == e->auto_cap;
    }
    if (every) return (int)e->id;
  }
  return SC_TP_AUTO;
}
