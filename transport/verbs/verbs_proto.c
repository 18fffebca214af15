/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's pure protocol functions (see verbs_proto.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/wire.h"
#include "transport/verbs/verbs_proto.h"

/* ---- settings ---- */

sc_result_t sc_vb_parse_hca(const char *s, sc_vb_hca_spec_t *out) {
  memset(out, 0, sizeof(*out));
  if (!s) return SC_SUCCESS;
  while (isspace((unsigned char)*s)) s++;
  if (*s == '^') {
    out->exclude = 1;
    s++;
  }
  if (*s == '=') {
    out->exact = 1;
    s++;
  }
  while (*s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    while (len && isspace((unsigned char)*s)) s++, len--;
    while (len && isspace((unsigned char)s[len - 1])) len--;
    if (len == 0) return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_HCA: empty entry");
    if (out->n == SC_VB_HCA_MAX)
      return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_HCA: more than %d entries", SC_VB_HCA_MAX);
    sc_vb_hca_entry_t *e = &out->e[out->n];
    const char *colon = memchr(s, ':', len);
    size_t nlen = colon ? (size_t)(colon - s) : len;
    if (nlen == 0 || nlen >= sizeof(e->name))
      return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_HCA: '%.*s' has an empty or too long name", (int)len,
                    s);
    memcpy(e->name, s, nlen);
    e->name[nlen] = '\0';
    if (colon) {
      char port[16];
      size_t plen = len - nlen - 1;
      if (plen == 0 || plen >= sizeof(port))
        return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_HCA: '%.*s' has a bad port", (int)len, s);
      memcpy(port, colon + 1, plen);
      port[plen] = '\0';
      long p;
      SC_CHECK(sc_parse_long("SC_IB_HCA port", port, 1, 255, &p));
      e->port = (int)p;
    }
    out->n++;
    if (!end) break;
    s = end + 1;
    if (!*s) return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_HCA: empty entry after ','");
  }
  if ((out->exclude || out->exact) && out->n == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_HCA: '^' or '=' without a device name");
  return SC_SUCCESS;
}

static int entry_match(const sc_vb_hca_spec_t *spec, const sc_vb_hca_entry_t *e, const char *name,
                       int port) {
  int named = spec->exact ? !strcmp(e->name, name) : !strncmp(e->name, name, strlen(e->name));
  return named && (e->port == 0 || port == 0 || e->port == port);
}

int sc_vb_hca_match(const sc_vb_hca_spec_t *spec, const char *name, int port) {
  if (spec->n == 0) return 1;
  int hit = 0;
  for (int i = 0; i < spec->n && !hit; i++) hit = entry_match(spec, &spec->e[i], name, port);
  return spec->exclude ? !hit : hit;
}

sc_result_t sc_vb_read_env(sc_vb_env_t *out) {
  memset(out, 0, sizeof(*out));
  SC_CHECK(sc_vb_parse_hca(sc_config_get("SC_IB_HCA"), &out->hca));
  long v;
  SC_CHECK(sc_config_long("SC_IB_GID_INDEX", -1, 255, &v));
  out->gid_index = (int)v;
  SC_CHECK(sc_config_long("SC_IB_TIMEOUT", 1, 31, &v));
  out->timeout = (int)v;
  SC_CHECK(sc_config_long("SC_IB_RETRY_CNT", 0, 7, &v));
  out->retry_cnt = (int)v;
  SC_CHECK(sc_config_long("SC_IB_QPS_PER_PEER", 1, SC_VB_QPS_MAX, &v));
  out->qps_per_peer = (int)v;
  SC_CHECK(sc_config_size("SC_IB_REG_CACHE_BYTES", 0, (size_t)1 << 40, &out->reg_cache_bytes));
  const char *g = sc_config_get("SC_IB_GDR");
  static const char *const gdr_names[] = {"auto", "dmabuf", "peermem", "staging"};
  out->gdr = -1;
  for (int i = 0; i < 4 && g; i++)
    if (!strcasecmp(g, gdr_names[i])) out->gdr = i;
  if (out->gdr < 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_GDR=%s: expected auto, dmabuf, peermem or staging",
                  g ? g : "");
  return SC_SUCCESS;
}

sc_result_t sc_vb_check_devices(const sc_vb_hca_spec_t *spec, const char *const *names, int n,
                                const char *why) {
  if (n <= 0) return SC_ERR(SC_ERR_UNSUPPORTED, "no RDMA device: %s", why);
  if (!spec->exclude) {
    for (int i = 0; i < spec->n; i++) {
      int found = 0;
      for (int d = 0; d < n && !found; d++) found = entry_match(spec, &spec->e[i], names[d], 0);
      if (!found) {
        char list[256] = "";
        size_t used = 0;
        for (int d = 0; d < n && used < sizeof(list); d++)
          used +=
              (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", d ? ", " : "", names[d]);
        return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_HCA: no RDMA device named '%s' (devices: %s)",
                      spec->e[i].name, list);
      }
    }
  }
  int any = 0;
  for (int d = 0; d < n && !any; d++) any = sc_vb_hca_match(spec, names[d], 0);
  if (!any) return SC_ERR(SC_ERR_INVALID_ARG, "SC_IB_HCA excludes every RDMA device");
  return SC_SUCCESS;
}

/* ---- FIFO and credits ---- */

int sc_vb_fifo_can_take(const sc_vb_fifo_t *f) {
  return f->busy[sc_vb_slot_of(f->next)] == 0;
}

int sc_vb_fifo_take(sc_vb_fifo_t *f, int outstanding) {
  int s = sc_vb_slot_of(f->next);
  if (f->busy[s] || outstanding < 1 || outstanding > 255) return -1;
  f->busy[s] = (uint8_t)outstanding;
  f->inflight++;
  f->next++;
  return s;
}

int sc_vb_fifo_complete(sc_vb_fifo_t *f, int slot) {
  if (slot < 0 || slot >= SC_VB_FIFO_DEPTH || f->busy[slot] == 0) return -1;
  if (--f->busy[slot]) return 0;
  f->inflight--;
  return 1;
}

size_t sc_vb_fifo_bytes(int nranks) {
  return (size_t)nranks * (SC_VB_FIFO_DEPTH * sizeof(sc_vb_cts_t) + SC_TP_FP_LEN);
}

size_t sc_vb_refusal_offset(int nranks, int writer) {
  return (size_t)nranks * SC_VB_FIFO_DEPTH * sizeof(sc_vb_cts_t) + (size_t)writer * SC_TP_FP_LEN;
}

sc_vb_refuse_t sc_vb_send_verdict(const uint8_t cts_fp[SC_TP_FP_LEN], uint64_t cts_size,
                                  const uint8_t send_fp[SC_TP_FP_LEN], size_t len) {
  if (sc_tp_prints_differ(cts_fp, send_fp)) return SC_VB_REFUSE_PRINT;
  return cts_size != (uint64_t)len ? SC_VB_REFUSE_LENGTH : SC_VB_REFUSE_NONE;
}

/* ---- striping and slicing ---- */

int sc_vb_nstripes(size_t len, int nqps) {
  if (nqps < 1) nqps = 1;
  size_t k = len / SC_VB_STRIPE_MIN;
  if (k < 1) k = 1;
  return k < (size_t)nqps ? (int)k : nqps;
}

void sc_vb_stripe(size_t len, int k, int i, size_t *off, size_t *n) {
  size_t per = (len + (size_t)k - 1) / (size_t)k;
  per = (per + 63) & ~(size_t)63;
  size_t o = per * (size_t)i;
  if (o > len) o = len;
  size_t rest = len - o;
  *off = o;
  *n = i == k - 1 ? rest : (rest < per ? rest : per);
}

int sc_vb_stripe_wrs(size_t n) {
  return n == 0 ? 1 : (int)((n + SC_VB_WR_MAX - 1) / SC_VB_WR_MAX);
}

/* ---- immediate data and work-request ids ---- */

uint32_t sc_vb_imm_encode(const sc_vb_imm_t *in) {
  int mid = in->error ? in->error : in->nstripes;
  return (uint32_t)(in->slot & 0xff) | (uint32_t)(mid & 0xff) << 8 |
         (uint32_t)(in->error ? 1 : 0) << 16 | (uint32_t)(in->cts ? 1 : 0) << 17 |
         (in->seq14 & 0x3fffu) << 18;
}

void sc_vb_imm_decode(uint32_t imm, sc_vb_imm_t *out) {
  int mid = (int)((imm >> 8) & 0xff);
  int error = (int)((imm >> 16) & 1);
  out->slot = (int)(imm & 0xff);
  out->nstripes = error ? 1 : mid;
  /* an error bit without a reason counts as a length refusal */
  out->error = error ? (mid ? mid : SC_VB_REFUSE_LENGTH) : 0;
  out->cts = (int)((imm >> 17) & 1);
  out->seq14 = imm >> 18;
}

/* bits 0-1 kind, 2-17 nwr, 18-25 slot, 26-33 qp, 34-57 peer, 58-63 a check tag. */
#define WRID_TAG 0x2bull

uint64_t sc_vb_wrid_encode(const sc_vb_wrid_t *in) {
  return (uint64_t)(in->kind & 3) | (uint64_t)(in->nwr & 0xffff) << 2 |
         (uint64_t)(in->slot & 0xff) << 18 | (uint64_t)(in->qp & 0xff) << 26 |
         (uint64_t)(in->peer & 0xffffff) << 34 | WRID_TAG << 58;
}

sc_result_t sc_vb_wrid_decode(uint64_t id, sc_vb_wrid_t *out) {
  out->kind = (int)(id & 3);
  out->nwr = (int)((id >> 2) & 0xffff);
  out->slot = (int)((id >> 18) & 0xff);
  out->qp = (int)((id >> 26) & 0xff);
  out->peer = (int)((id >> 34) & 0xffffff);
  if ((id >> 58) != WRID_TAG || out->kind == 0)
    return SC_ERR(SC_ERR_INTERNAL, "verbs: completion with a foreign wr_id 0x%llx",
                  (unsigned long long)id);
  return SC_SUCCESS;
}

/* ---- address blob ---- */

void sc_vb_blob_pack(const sc_vb_blob_t *in, uint8_t out[SC_VB_BLOB_LEN]) {
  memset(out, 0, SC_VB_BLOB_LEN);
  sc_wire_put_u32(out, SC_VB_BLOB_MAGIC);
  memcpy(out + 4, in->sock, 24);
  memcpy(out + 28, in->gid, 16);
  sc_wire_put_u64(out + 44, in->host_id);
  sc_wire_put_u64(out + 52, in->fifo_addr);
  sc_wire_put_u32(out + 60, in->fifo_rkey);
  sc_wire_put_u32(out + 64, in->speed_mbps);
  out[68] = (uint8_t)(in->lid >> 8);
  out[69] = (uint8_t)in->lid;
  out[70] = in->port;
  out[71] = in->mtu;
  out[72] = in->link_layer;
  out[73] = in->qps;
  out[74] = in->gdr;
  out[75] = in->gid_index;
}

sc_result_t sc_vb_blob_unpack(const uint8_t *in, size_t len, sc_vb_blob_t *out) {
  if (len < SC_VB_BLOB_LEN || sc_wire_get_u32(in) != SC_VB_BLOB_MAGIC)
    return SC_ERR(SC_ERR_INVALID_ARG,
                  "verbs: address blob is not a verbs blob (%zu bytes; every rank must use "
                  "SC_TRANSPORT=verbs)",
                  len);
  memset(out, 0, sizeof(*out));
  memcpy(out->sock, in + 4, 24);
  memcpy(out->gid, in + 28, 16);
  out->host_id = sc_wire_get_u64(in + 44);
  out->fifo_addr = sc_wire_get_u64(in + 52);
  out->fifo_rkey = sc_wire_get_u32(in + 60);
  out->speed_mbps = sc_wire_get_u32(in + 64);
  out->lid = (uint16_t)(in[68] << 8 | in[69]);
  out->port = in[70];
  out->mtu = in[71];
  out->link_layer = in[72];
  out->qps = in[73];
  out->gdr = in[74];
  out->gid_index = in[75];
  if (out->qps < 1 || out->qps > SC_VB_QPS_MAX || out->mtu < 1 || out->mtu > 5 ||
      (out->link_layer != 1 && out->link_layer != 2))
    return SC_ERR(SC_ERR_INVALID_ARG, "verbs: address blob out of range (qps %d, mtu %d, link %d)",
                  out->qps, out->mtu, out->link_layer);
  return SC_SUCCESS;
}

/* ---- props ---- */

void sc_vb_pair_props(const sc_vb_blob_t *a, const sc_vb_blob_t *b, sc_vb_pair_t *out) {
  out->same_host = a->host_id == b->host_id;
  uint32_t mbps = a->speed_mbps < b->speed_mbps ? a->speed_mbps : b->speed_mbps;
  /* Nominal: the data rate less packet headers, about 95% at 4 KiB MTU. */
  out->bandwidth_bps = (double)mbps * 1e6 / 8.0 * 0.95;
  /* Nominal one-way small-message latency of RC writes: InfiniBand ~2 us, RoCE ~3 us. */
  out->latency_s = (a->link_layer == 2 || b->link_layer == 2) ? 3e-6 : 2e-6;
  out->device_mem = sc_vb_gdr_direct(a->gdr, b->gdr);
}

uint32_t sc_vb_port_mbps(int active_width, int active_speed) {
  int lanes;
  switch (active_width) {
  case 1:
    lanes = 1;
    break;
  case 2:
    lanes = 4;
    break;
  case 4:
    lanes = 8;
    break;
  case 8:
    lanes = 12;
    break;
  case 16:
    lanes = 2;
    break;
  default:
    return 0;
  }
  uint32_t lane; /* Mbit/s of one lane's data after line coding */
  switch (active_speed) {
  case 1:
    lane = 2000; /* SDR 2.5 Gbaud, 8b/10b */
    break;
  case 2:
    lane = 4000; /* DDR */
    break;
  case 4:
    lane = 8000; /* QDR */
    break;
  case 8:
    lane = 10000; /* FDR10, 64b/66b */
    break;
  case 16:
    lane = 13636; /* FDR */
    break;
  case 32:
    lane = 25000; /* EDR */
    break;
  case 64:
    lane = 50000; /* HDR */
    break;
  case 128:
    lane = 100000; /* NDR */
    break;
  case 256:
    lane = 200000; /* XDR */
    break;
  default:
    return 0;
  }
  return lane * (uint32_t)lanes;
}

/* ---- GPUDirect registration plan ---- */

sc_vb_gdr_mode_t sc_vb_gdr_plan(const sc_vb_gdr_caps_t *caps, sc_vb_gdr_want_t want) {
  if (!caps->have_device) return SC_VB_GDR_NONE;
  switch (want) {
  case SC_VB_GDR_WANT_STAGE:
    return SC_VB_GDR_STAGE;
  case SC_VB_GDR_WANT_DMABUF:
    return caps->dmabuf_ok ? SC_VB_GDR_DMABUF : SC_VB_GDR_STAGE;
  case SC_VB_GDR_WANT_PEERMEM:
    return caps->peermem_ok ? SC_VB_GDR_PEERMEM : SC_VB_GDR_STAGE;
  default:
    if (caps->dmabuf_ok) return SC_VB_GDR_DMABUF;
    if (caps->peermem_ok) return SC_VB_GDR_PEERMEM;
    return SC_VB_GDR_STAGE;
  }
}

static int registers_device(int m) {
  return m == SC_VB_GDR_DMABUF || m == SC_VB_GDR_PEERMEM;
}

int sc_vb_gdr_direct(int mode_a, int mode_b) {
  return registers_device(mode_a) && registers_device(mode_b);
}

void sc_vb_dmabuf_range(uintptr_t addr, size_t len, size_t page, uintptr_t *start, size_t *size,
                        size_t *off) {
  uintptr_t s = addr & ~(uintptr_t)(page - 1);
  uintptr_t e = (addr + (len ? len : 1) + page - 1) & ~(uintptr_t)(page - 1);
  *start = s;
  *size = (size_t)(e - s);
  *off = (size_t)(addr - s);
}

const char *sc_vb_gdr_name(sc_vb_gdr_mode_t m) {
  switch (m) {
  case SC_VB_GDR_DMABUF:
    return "dma-buf";
  case SC_VB_GDR_PEERMEM:
    return "peer-memory";
  case SC_VB_GDR_STAGE:
    return "staging through pinned host memory";
  default:
    return "none (host memory only)";
  }
}
