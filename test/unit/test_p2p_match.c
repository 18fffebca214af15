/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point matching (lib/core/p2p_match.h) without a transport: a
 * model receiver drives the two lists exactly as the lane thread does (a
 * receive takes the first unexpected message with its tag, else waits on the
 * posted list; an arriving message takes the first posted receive with its
 * tag, else waits on the unexpected list) and every pairing is checked
 * against the reference rule: the k-th receive of tag t from a peer gets the
 * k-th message of tag t from that peer, whatever the interleaving. Also the
 * wire header and the mismatch text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/base/wire.h"
#include "lib/core/p2p_match.h"

enum { MAXE = 256 };

/* Message k of a peer: its tag, its number among that tag's messages. */
typedef struct model {
  sc_p2p_list_t posted, unexp;
  sc_p2p_entry_t recv[MAXE], msg[MAXE];
  int nrecv, nmsg;
  int paired[MAXE]; /* receive -> message index, -1 while unmatched */
  int seen_recv[8], seen_msg[8];
  int recv_ord[MAXE], msg_ord[MAXE]; /* k-th of its tag */
} model_t;

static void model_init(model_t *m) {
  memset(m, 0, sizeof(*m));
  for (int i = 0; i < MAXE; i++) m->paired[i] = -1;
}

static void post_recv(model_t *m, int tag) {
  int r = m->nrecv++;
  m->recv[r] = (sc_p2p_entry_t){.tag = tag, .owner = (void *)(intptr_t)r};
  m->recv_ord[r] = m->seen_recv[tag]++;
  sc_p2p_entry_t *e = sc_p2p_list_take(&m->unexp, tag);
  if (e)
    m->paired[r] = (int)(intptr_t)e->owner;
  else
    sc_p2p_list_push(&m->posted, &m->recv[r]);
}

static void arrive(model_t *m, int tag) {
  int k = m->nmsg++;
  m->msg[k] = (sc_p2p_entry_t){.tag = tag, .owner = (void *)(intptr_t)k};
  m->msg_ord[k] = m->seen_msg[tag]++;
  sc_p2p_entry_t *e = sc_p2p_list_take(&m->posted, tag);
  if (e)
    m->paired[(int)(intptr_t)e->owner] = k;
  else
    sc_p2p_list_push(&m->unexp, &m->msg[k]);
}

/* Every receive with a message got the one of its tag with its own rank. */
static void check_pairs(const model_t *m) {
  for (int r = 0; r < m->nrecv; r++) {
    int k = m->paired[r];
    if (k < 0) continue;
    assert_int_equal(m->recv[r].tag, m->msg[k].tag);
    assert_int_equal(m->recv_ord[r], m->msg_ord[k]);
  }
}

static void test_order_per_tag(void **state) {
  (void)state;
  model_t m;
  model_init(&m);
  for (int i = 0; i < 5; i++) arrive(&m, 3);
  for (int i = 0; i < 5; i++) post_recv(&m, 3);
  check_pairs(&m);
  for (int r = 0; r < 5; r++) assert_int_equal(m.paired[r], r);
  assert_null(m.posted.head);
  assert_null(m.unexp.head);
}

static void test_interleaved_tags(void **state) {
  (void)state;
  model_t m;
  model_init(&m);
  const int sent[] = {1, 2, 1, 0, 2, 2, 1, 0};
  for (size_t i = 0; i < 8; i++) arrive(&m, sent[i]);
  /* received in another tag order than sent */
  const int got[] = {2, 2, 0, 1, 2, 1, 0, 1};
  for (size_t i = 0; i < 8; i++) post_recv(&m, got[i]);
  check_pairs(&m);
  for (int r = 0; r < 8; r++) assert_true(m.paired[r] >= 0);
  assert_null(m.unexp.head);
}

static void test_posted_before_and_after(void **state) {
  (void)state;
  model_t m;
  model_init(&m);
  post_recv(&m, 4); /* waits */
  post_recv(&m, 5);
  arrive(&m, 5); /* takes the second receive, not the first */
  assert_int_equal(m.paired[1], 0);
  assert_int_equal(m.paired[0], -1);
  arrive(&m, 4);
  arrive(&m, 4); /* unexpected */
  assert_int_equal(m.paired[0], 1);
  post_recv(&m, 4);
  assert_int_equal(m.paired[2], 2);
  check_pairs(&m);
}

/* Random interleavings of posts and arrivals over few tags. */
static void test_random_interleavings(void **state) {
  (void)state;
  srand(7);
  for (int round = 0; round < 200; round++) {
    model_t m;
    model_init(&m);
    int n = 1 + rand() % 60;
    int tags[64], order[128], no = 0;
    for (int i = 0; i < n; i++) tags[i] = rand() % 4;
    /* the receives: the same multiset of tags, shuffled */
    int rtags[64];
    memcpy(rtags, tags, sizeof(int) * (size_t)n);
    for (int i = n - 1; i > 0; i--) {
      int j = rand() % (i + 1), t = rtags[i];
      rtags[i] = rtags[j];
      rtags[j] = t;
    }
    int si = 0, ri = 0;
    while (si < n || ri < n) {
      int send = si < n && (ri >= n || rand() % 2);
      order[no++] = !send;
      if (send)
        si++;
      else
        ri++;
    }
    si = ri = 0;
    for (int i = 0; i < no; i++) {
      if (order[i] == 0)
        arrive(&m, tags[si++]);
      else
        post_recv(&m, rtags[ri++]);
    }
    check_pairs(&m);
    for (int r = 0; r < n; r++) assert_true(m.paired[r] >= 0);
    assert_null(m.posted.head);
    assert_null(m.unexp.head);
  }
}

/* A send to one's own rank uses the same two lists: posted either first. */
static void test_self_send(void **state) {
  (void)state;
  model_t m;
  model_init(&m);
  arrive(&m, 0); /* the send first */
  post_recv(&m, 0);
  post_recv(&m, 0); /* the receive first */
  arrive(&m, 0);
  assert_int_equal(m.paired[0], 0);
  assert_int_equal(m.paired[1], 1);
  check_pairs(&m);
}

static void test_remove(void **state) {
  (void)state;
  sc_p2p_list_t l = {0};
  sc_p2p_entry_t e[3] = {{.tag = 1}, {.tag = 2}, {.tag = 3}};
  for (int i = 0; i < 3; i++) sc_p2p_list_push(&l, &e[i]);
  assert_int_equal(sc_p2p_list_remove(&l, &e[2]), 1);
  assert_int_equal(sc_p2p_list_remove(&l, &e[2]), 0);
  assert_ptr_equal(l.tail, &e[1]);
  sc_p2p_list_push(&l, &e[2]);
  assert_ptr_equal(sc_p2p_list_take(&l, 3), &e[2]);
  assert_ptr_equal(sc_p2p_list_take(&l, 1), &e[0]);
  assert_ptr_equal(sc_p2p_list_take(&l, 2), &e[1]);
  assert_null(l.head);
  assert_null(l.tail);
  assert_null(sc_p2p_list_take(&l, 2));
}

static void test_mismatch_text(void **state) {
  (void)state;
  assert_int_equal(sc_p2p_mismatch(1, 0, 7, 10, SC_FLOAT32, 10, SC_FLOAT32), 0);
  assert_int_equal(sc_p2p_mismatch(1, 0, 7, 10, SC_FLOAT32, 12, SC_INT64), 1);
  const char *e = sc_last_error();
  assert_non_null(strstr(e, "count 10 of float32"));
  assert_non_null(strstr(e, "count 12 of int64"));
  assert_non_null(strstr(e, "rank 0"));
  assert_non_null(strstr(e, "tag 7"));
}

static void test_header(void **state) {
  (void)state;
  uint8_t w[SC_P2P_HDR_BYTES];
  sc_p2p_hdr_t h = {.kind = SC_P2P_EAGER,
                    .dtype = SC_FLOAT64,
                    .tag = 123456,
                    .count = 9,
                    .bytes = 72,
                    .id = 0x0102030405060708ull},
               g;
  sc_p2p_hdr_encode(&h, w);
  assert_int_equal(w[0], 'S');
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_SUCCESS);
  assert_int_equal(g.kind, h.kind);
  assert_int_equal(g.dtype, h.dtype);
  assert_int_equal(g.tag, h.tag);
  assert_true(g.count == h.count && g.bytes == h.bytes && g.id == h.id);
  /* an eager payload past the bound, bytes that disagree with the count, a
   * bad magic, a negative tag, an unknown dtype: refused, naming the peer */
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 71, &g), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "rank 2"));
  h.bytes = 73;
  sc_p2p_hdr_encode(&h, w);
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_ERR_REMOTE);
  h.bytes = 72;
  sc_p2p_hdr_encode(&h, w);
  w[0] ^= 1;
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_ERR_REMOTE);
  w[0] ^= 1;
  w[12] = 0x80;
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_ERR_REMOTE);
  w[12] = 0;
  w[11] = 77;
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_ERR_REMOTE);
  /* a rendezvous request is not bounded by the eager limit; its count is */
  h = (sc_p2p_hdr_t){.kind = SC_P2P_RTS, .dtype = SC_UINT8, .count = 1 << 20, .bytes = 1 << 20};
  sc_p2p_hdr_encode(&h, w);
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_SUCCESS);
  h = (sc_p2p_hdr_t){.kind = SC_P2P_RTS, .dtype = SC_INT64, .count = UINT64_MAX / 4, .bytes = 0};
  sc_p2p_hdr_encode(&h, w);
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_ERR_REMOTE);
  /* the read's answer is a control frame like CTS; the kind after the last is unknown */
  h = (sc_p2p_hdr_t){.kind = SC_P2P_FIN, .dtype = SC_UINT8, .id = 42};
  sc_p2p_hdr_encode(&h, w);
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_SUCCESS);
  assert_int_equal(g.kind, SC_P2P_FIN);
  assert_true(g.id == 42);
  sc_wire_put_u32(w + 4, (uint32_t)SC_P2P_REVOKED + 1);
  assert_int_equal(sc_p2p_hdr_decode(w, 2, 1 << 16, &g), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "unknown kind"));
}

/* An RTS frame's offer: the address after the header, all 64 bits; a frame
 * of zeros offers nothing. */
static void test_offer(void **state) {
  (void)state;
  uint8_t f[SC_P2P_FRAME_BYTES] = {0};
  sc_p2p_hdr_t h = {.kind = SC_P2P_RTS, .dtype = SC_UINT8, .count = 1 << 20, .bytes = 1 << 20}, g;
  sc_p2p_hdr_encode(&h, f);
  assert_true(sc_p2p_offer_get(f) == 0);
  const uint64_t addr = 0xfedcba9876543210ull;
  sc_p2p_offer_put(f, addr);
  assert_true(sc_p2p_offer_get(f) == addr);
  /* it leaves the header as it was */
  assert_int_equal(sc_p2p_hdr_decode(f, 1, 1 << 16, &g), SC_SUCCESS);
  assert_true(g.kind == SC_P2P_RTS && g.bytes == h.bytes);
  for (int i = SC_P2P_HDR_BYTES + 8; i < SC_P2P_FRAME_BYTES; i++) assert_int_equal(f[i], 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_per_tag),
      cmocka_unit_test(test_interleaved_tags),
      cmocka_unit_test(test_posted_before_and_after),
      cmocka_unit_test(test_random_interleavings),
      cmocka_unit_test(test_self_send),
      cmocka_unit_test(test_remove),
      cmocka_unit_test(test_mismatch_text),
      cmocka_unit_test(test_header),
      cmocka_unit_test(test_offer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
