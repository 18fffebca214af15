/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point matching lists and the lane's header (see p2p_match.h). */
#include "lib/core/p2p_match.h"

#include "lib/base/dtype.h"
#include "lib/base/error.h"
#include "lib/base/wire.h"

void sc_p2p_hdr_encode(const sc_p2p_hdr_t *h, uint8_t out[SC_P2P_HDR_BYTES]) {
  sc_wire_put_u32(out, SC_P2P_MAGIC);
  sc_wire_put_u32(out + 4, (uint32_t)h->kind);
  sc_wire_put_u32(out + 8, (uint32_t)h->dtype);
  sc_wire_put_u32(out + 12, (uint32_t)h->tag);
  sc_wire_put_u64(out + 16, h->count);
  sc_wire_put_u64(out + 24, h->bytes);
  sc_wire_put_u64(out + 32, h->id);
}

void sc_p2p_offer_put(uint8_t frame[SC_P2P_FRAME_BYTES], uint64_t addr) {
  sc_wire_put_u64(frame + SC_P2P_HDR_BYTES, addr);
}

uint64_t sc_p2p_offer_get(const uint8_t frame[SC_P2P_FRAME_BYTES]) {
  return sc_wire_get_u64(frame + SC_P2P_HDR_BYTES);
}

sc_result_t sc_p2p_hdr_decode(const uint8_t in[SC_P2P_HDR_BYTES], int peer, uint64_t max_bytes,
                              sc_p2p_hdr_t *h) {
  uint32_t magic = sc_wire_get_u32(in), kind = sc_wire_get_u32(in + 4);
  uint32_t dtype = sc_wire_get_u32(in + 8), tag = sc_wire_get_u32(in + 12);
  h->count = sc_wire_get_u64(in + 16);
  h->bytes = sc_wire_get_u64(in + 24);
  h->id = sc_wire_get_u64(in + 32);
  if (magic != SC_P2P_MAGIC)
    return SC_ERR(SC_ERR_REMOTE, "point-to-point header from rank %d: bad magic 0x%08x", peer,
                  magic);
  if (kind < SC_P2P_EAGER || kind > SC_P2P_REVOKED)
    return SC_ERR(SC_ERR_REMOTE, "point-to-point header from rank %d: unknown kind %u", peer, kind);
  h->kind = (sc_p2p_kind_t)kind;
  if (tag > (uint32_t)INT32_MAX)
    return SC_ERR(SC_ERR_REMOTE, "point-to-point header from rank %d: negative tag", peer);
  h->tag = (int)tag;
  h->dtype = (sc_dtype_t)dtype;
  if (kind != SC_P2P_EAGER && kind != SC_P2P_RTS && kind != SC_P2P_DATA) return SC_SUCCESS;
  size_t es = dtype <= (uint32_t)SC_FLOAT64 ? sc_dtype_size((sc_dtype_t)dtype) : 0;
  if (es == 0)
    return SC_ERR(SC_ERR_REMOTE, "point-to-point header from rank %d: invalid dtype %u", peer,
                  dtype);
  if (h->count > UINT64_MAX / es || h->count * es != h->bytes)
    return SC_ERR(
        SC_ERR_REMOTE, "point-to-point header from rank %d: %llu bytes for count %llu of %s", peer,
        (unsigned long long)h->bytes, (unsigned long long)h->count, sc_dtype_name(h->dtype));
  if (kind == SC_P2P_EAGER && h->bytes > max_bytes)
    return SC_ERR(SC_ERR_REMOTE,
                  "point-to-point header from rank %d: %llu payload bytes, at most %llu allowed",
                  peer, (unsigned long long)h->bytes, (unsigned long long)max_bytes);
  return SC_SUCCESS;
}

void sc_p2p_list_push(sc_p2p_list_t *l, sc_p2p_entry_t *e) {
  e->next = NULL;
  if (l->tail)
    l->tail->next = e;
  else
    l->head = e;
  l->tail = e;
}

static void sc_p2p_list_unlink(sc_p2p_list_t *l, sc_p2p_entry_t *prev, sc_p2p_entry_t *e) {
  if (prev)
    prev->next = e->next;
  else
    l->head = e->next;
  if (l->tail == e) l->tail = prev;
  e->next = NULL;
}

sc_p2p_entry_t *sc_p2p_list_take(sc_p2p_list_t *l, int tag) {
  for (sc_p2p_entry_t *prev = NULL, *e = l->head; e; prev = e, e = e->next)
    if (e->tag == tag) {
      sc_p2p_list_unlink(l, prev, e);
      return e;
    }
  return NULL;
}

int sc_p2p_list_remove(sc_p2p_list_t *l, sc_p2p_entry_t *e) {
  for (sc_p2p_entry_t *prev = NULL, *x = l->head; x; prev = x, x = x->next)
    if (x == e) {
      sc_p2p_list_unlink(l, prev, e);
      return 1;
    }
  return 0;
}

int sc_p2p_mismatch(int rank, int peer, int tag, uint64_t recv_count, sc_dtype_t recv_dtype,
                    uint64_t send_count, sc_dtype_t send_dtype) {
  if (recv_count == send_count && recv_dtype == send_dtype) return 0;
  SC_ERR(SC_ERR_MISMATCH,
         "rank %d: sc_recv from rank %d (tag %d) posted count %llu of %s, but rank %d sent count "
         "%llu of %s; the message was dropped",
         rank, peer, tag, (unsigned long long)recv_count, sc_dtype_name(recv_dtype), peer,
         (unsigned long long)send_count, sc_dtype_name(send_dtype));
  return 1;
}
