/* SPDX-License-Identifier: BSD-3-Clause */
/* From the props of every pair to the cost model (see lib/core/links.h). */
#include <string.h>

#include "lib/core/links.h"

void sc_links_init(sc_links_t *l) {
  memset(l, 0, sizeof(*l));
  l->all_spin = 1;
}

void sc_links_add(sc_links_t *l, const sc_tp_props_t *p) {
  l->npairs++;
  if (p->locality == SC_TP_OTHER_HOST)
    l->other_host++;
  else if (p->kind == SC_TP_KIND_NET)
    l->host_net++;
  else
    l->host_mem++;
  if (!p->receiver_spins) l->all_spin = 0;
  if (p->locality != SC_TP_OTHER_HOST && p->costs_unfitted) l->unfitted++;
  if (p->locality != SC_TP_OTHER_HOST && p->kind != SC_TP_KIND_NET) {
    if (p->single_copy_min == 0) l->copy_never = 1;
    if (p->single_copy_min > l->single_copy_min) l->single_copy_min = p->single_copy_min;
  }
  if (p->latency_s > 0) {
    if (p->latency_s > l->latency_s) l->latency_s = p->latency_s;
  } else {
    l->lat_unknown = 1;
  }
  if (p->bandwidth_bps > 0) {
    if (l->bandwidth_bps == 0 || p->bandwidth_bps < l->bandwidth_bps)
      l->bandwidth_bps = p->bandwidth_bps;
  } else {
    l->bw_unknown = 1;
  }
}

int sc_links_settled(const sc_links_t *l) {
  return l->other_host > 0 && l->lat_unknown && l->bw_unknown;
}

sc_tune_kind_t sc_links_kind(const sc_links_t *l) {
  if (l->other_host) return SC_TUNE_NET;
  return l->host_net ? SC_TUNE_HOST_TCP : SC_TUNE_HOST_MEM;
}

void sc_links_model(const sc_links_t *l, int host_cores, int spin_us, sc_link_model_t *m) {
  sc_tune_kind_t kind = sc_links_kind(l);
  size_t copy_min = l->copy_never ? 0 : l->single_copy_min;
  sc_tune_default_model(kind, kind == SC_TUNE_NET ? 0 : host_cores, copy_min, m);
  sc_tune_host_waiting(l->all_spin, spin_us, m);
  if (kind != SC_TUNE_NET) return;
  if (!l->lat_unknown && l->latency_s > 0) m->alpha_s = l->latency_s;
  if (!l->bw_unknown && l->bandwidth_bps > 0)
    m->beta_s_per_b = m->host_s_per_b = 1.0 / l->bandwidth_bps;
}

void sc_links_local(const sc_tp_props_t *p, int host_cores, sc_link_model_t *m) {
  if (m->host_cores > 0) return; /* one host: lib/tune/tune_host.c prices it all */
  sc_link_model_t local;
  size_t copy_min = p->kind == SC_TP_KIND_NET ? 0 : p->single_copy_min;
  sc_tune_default_model(p->kind == SC_TP_KIND_NET ? SC_TUNE_HOST_TCP : SC_TUNE_HOST_MEM, host_cores,
                        copy_min, &local);
  m->local_alpha_s = local.alpha_s;
  m->local_beta_s_per_b = local.beta_s_per_b;
}
