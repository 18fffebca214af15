/* SPDX-License-Identifier: BSD-3-Clause */
/* The board: where every rank of the communicator is on this host, each rank
 * owns two slots in its segment's header page, which every peer has mapped,
 * and the core runs its smallest collectives through them (lib/core/board.c):
 * each rank writes its part once and reads every peer's where it lies, with
 * no message, queue or doorbell between. A post is the payload, then the
 * call's number stored with release order; a reader that loads that number
 * with acquire order sees the payload. */
#include <string.h>

#include "lib/base/error.h"
#include "transport/shm/shm_internal.h"

size_t sc_shm_board_max(sc_transport_t *base) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  /* Inside the mux with peers on other hosts, a board would not reach them. */
  if (!tp->connected || tp->nlocal != base->nranks - 1) return 0;
  return SC_SHM_BOARD_BYTES;
}

void sc_shm_board_post(sc_transport_t *base, uint64_t seq, uint64_t fp, const void *data,
                       size_t len) {
  sc_shm_board_slot_t *s = &sc_shm_of(base)->hdr->board[seq & 1];
  s->fp = fp;
  if (len) memcpy(s->data, data, len);
  __atomic_store_n(&s->seq, seq, __ATOMIC_RELEASE);
}

static const void *posted(const sc_shm_seg_hdr_t *h, uint64_t seq, uint64_t *fp) {
  const sc_shm_board_slot_t *s = &h->board[seq & 1];
  if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != seq) return NULL;
  *fp = s->fp;
  return s->data;
}

sc_result_t sc_shm_board_peek(sc_transport_t *base, int peer, uint64_t seq, int64_t now_ms,
                              const void **data, uint64_t *fp) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  if (peer == base->rank) { /* this rank's own post: its copy of its part */
    *data = posted(tp->hdr, seq, fp);
    return SC_SUCCESS;
  }
  sc_shm_peer_t *p = &tp->peers[peer];
  *data = NULL;
  if (p->dead) return SC_ERR(SC_ERR_REMOTE, "%s", sc_shm_peer_err(p));
  /* Lazy: the header page is mapped at the first look (or asked for). */
  if (!p->hdr) SC_CHECK(sc_shm_peer_attach(tp, p));
  if (!p->hdr && p->asked && now_ms && now_ms >= tp->next_service_ms) {
    tp->next_service_ms = now_ms + 1;
    SC_CHECK(sc_shm_db_service(tp));
  }
  if (p->hdr && (*data = posted(p->hdr, seq, fp))) return SC_SUCCESS;
  if (!now_ms || now_ms < p->next_check_ms) return SC_SUCCESS;
  p->next_check_ms = now_ms + SC_SHM_CHECK_MS;
  const char *how = sc_shm_peer_left(p);
  if (!how) return SC_SUCCESS;
  /* A peer posts before it leaves: look once more after seeing it gone. */
  if (p->hdr && (*data = posted(p->hdr, seq, fp))) return SC_SUCCESS;
  return sc_shm_peer_fail(tp, p, "%s before its part of board call #%llu", how,
                          (unsigned long long)seq);
}
