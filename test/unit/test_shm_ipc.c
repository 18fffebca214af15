/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport, device path (transport/shm/shm_ipc.c): the pure
 * decisions against independent references. The record layout, the record
 * verdict (print included) for device and host receives, the span check
 * against 128-bit arithmetic, the opened-allocation cache driven like the
 * transport drives it against a recency list (with entries pinned by copies
 * in flight), the pair's device capability, and peeking into the ring
 * across its wrap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "transport/shm/shm_internal.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* ---- record verdicts ---- */

/* The record layout of shm_internal.h, written here byte by byte (native
 * byte order): u32 type, u32 0, u64 length, u64 address, 16-byte print. */
static void test_rec_layout(void **state) {
  (void)state;
  assert_int_equal(SC_SHM_REC_LEN, 24 + 16); /* the record grows by the print, no more */
  assert_int_equal(SC_SHM_REC_LEN % 8, 0);   /* payloads after it stay 8-byte aligned */
  uint8_t fp[SC_TP_FP_LEN], rec[SC_SHM_REC_LEN], want[SC_SHM_REC_LEN];
  for (int i = 0; i < SC_TP_FP_LEN; i++) fp[i] = (uint8_t)(0xc0 + i);
  memset(rec, 0xee, sizeof(rec));
  sc_shm_rec_encode(rec, SC_SHM_REC_CMA, 0x0102030405060708ull, 0x1112131415161718ull, fp);
  uint32_t type = SC_SHM_REC_CMA, zero = 0;
  uint64_t len = 0x0102030405060708ull, addr = 0x1112131415161718ull;
  memcpy(want, &type, 4);
  memcpy(want + 4, &zero, 4);
  memcpy(want + 8, &len, 8);
  memcpy(want + 16, &addr, 8);
  memcpy(want + 24, fp, SC_TP_FP_LEN);
  assert_memory_equal(rec, want, SC_SHM_REC_LEN);
  /* No print: sixteen zero bytes. */
  sc_shm_rec_encode(rec, SC_SHM_REC_CMA, len, addr, NULL);
  memset(want + 24, 0, SC_TP_FP_LEN);
  assert_memory_equal(rec, want, SC_SHM_REC_LEN);
}

static void test_rec_check_dev(void **state) {
  (void)state;
  const uint32_t types[] = {SC_SHM_REC_EAGER, SC_SHM_REC_CMA, SC_SHM_REC_DEV, 0x12345678u, 0};
  const uint64_t lens[] = {0, 8, 1000};
  /* Prints: none, A, and B (A with one bit flipped). */
  uint8_t prints[3][SC_TP_FP_LEN];
  memset(prints, 0, sizeof(prints));
  for (int i = 0; i < SC_TP_FP_LEN; i++) prints[1][i] = prints[2][i] = (uint8_t)(3 * i + 1);
  prints[2][9] ^= 0x04;
  int cases = 0;
  for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
    for (size_t l = 0; l < 3; l++)
      for (size_t want = 0; want < 3; want++)
        for (int device = 0; device < 2; device++)
          for (int cma_ok = 0; cma_ok < 2; cma_ok++)
            for (int sent_fp = 0; sent_fp < 3; sent_fp++)
              for (int posted_fp = 0; posted_fp < 3; posted_fp++) {
                uint8_t rec[SC_SHM_REC_LEN];
                sc_shm_rec_encode(rec, types[t], lens[l], 0x4000 + l, prints[sent_fp]);
                uint32_t ty = types[t];
                int known = ty == SC_SHM_REC_EAGER || ty == SC_SHM_REC_CMA || ty == SC_SHM_REC_DEV;
                int is_dev = ty == SC_SHM_REC_DEV;
                int len_ok = lens[l] == lens[want];
                /* A receive without a print checks none, nor is a record
                 * without one checked (no operation sends one); else the
                 * two prints must be the same. */
                int fp_ok = posted_fp == 0 || sent_fp == 0 || sent_fp == posted_fp;
                sc_shm_rec_verdict_t expect;
                if (!known)
                  expect = SC_SHM_REC_BAD_TYPE;
                else if (!fp_ok)
                  expect = SC_SHM_REC_BAD_PRINT;
                else if (is_dev && !device)
                  expect = SC_SHM_REC_HOST_WANTED;
                else if (!len_ok)
                  expect = SC_SHM_REC_BAD_LEN;
                else if (ty == SC_SHM_REC_CMA && !cma_ok)
                  expect = SC_SHM_REC_CMA_REFUSED;
                else if (!is_dev && device)
                  expect = SC_SHM_REC_DEV_WANTED;
                else
                  expect = SC_SHM_REC_OK;
                sc_shm_rec_t h;
                memset(&h, 0xee, sizeof(h));
                sc_shm_rec_verdict_t v =
                    sc_shm_rec_check_dev(rec, (size_t)lens[want],
                                         posted_fp ? prints[posted_fp] : NULL, cma_ok, device, &h);
                assert_int_equal(v, expect);
                if (known) {
                  assert_int_equal(h.type, ty);
                  assert_int_equal(h.len, lens[l]);
                  assert_int_equal(h.addr, 0x4000 + l);
                  assert_memory_equal(h.fp, prints[sent_fp], SC_TP_FP_LEN);
                }
                /* The host-only check agrees where it applies. */
                if (!is_dev && !device) {
                  sc_shm_rec_t h2;
                  const uint8_t *pf = posted_fp ? prints[posted_fp] : prints[0];
                  assert_int_equal(sc_shm_rec_check(rec, (size_t)lens[want], pf, cma_ok, &h2),
                                   expect);
                }
                cases++;
              }
  assert_int_equal(cases, 5 * 3 * 3 * 2 * 2 * 3 * 3);
}

/* ---- span ---- */

static void test_span(void **state) {
  (void)state;
  const uint64_t edge[] = {0,         1, 7, 4096, UINT32_MAX, (uint64_t)1 << 62, UINT64_MAX - 1,
                           UINT64_MAX};
  size_t ne = sizeof(edge) / sizeof(edge[0]);
  for (size_t a = 0; a < ne; a++)
    for (size_t b = 0; b < ne; b++)
      for (size_t c = 0; c < ne; c++) {
        unsigned __int128 end = (unsigned __int128)edge[a] + edge[b];
        assert_int_equal(sc_shm_dev_span_ok(edge[a], edge[b], edge[c]), end <= edge[c]);
      }
  for (int i = 0; i < 100000; i++) {
    uint64_t off = rnd() >> (rnd() % 64), len = rnd() >> (rnd() % 64), size = rnd() >> (rnd() % 64);
    unsigned __int128 end = (unsigned __int128)off + len;
    assert_int_equal(sc_shm_dev_span_ok(off, len, size), end <= size);
  }
}

/* ---- cache ---- */

static sc_dev_ipc_handle_t handle_of(int id) {
  sc_dev_ipc_handle_t h;
  memset(&h, 0, sizeof(h));
  /* Handles differ in their last byte only for some ids: the whole handle is compared. */
  h.bytes[0] = 'H';
  h.bytes[SC_DEV_IPC_HANDLE_BYTES - 1] = (uint8_t)id;
  h.bytes[SC_DEV_IPC_HANDLE_BYTES / 2] = (uint8_t)(id >> 8);
  return h;
}

#define NC    8
#define NKEYS 24 /* (peer, id) pairs: 3 peers x 8 handles */

/* The reference: keys most recently used first, and pins per key. */
typedef struct ref {
  int order[NC];
  int n;
  int pins[NKEYS];
} ref_t;

static int ref_access(ref_t *r, int key, int *evicted) {
  *evicted = -1;
  int at = -1;
  for (int i = 0; i < r->n; i++)
    if (r->order[i] == key) at = i;
  if (at < 0) {
    if (r->n == NC) {
      int v = -1;
      for (int i = r->n - 1; i >= 0 && v < 0; i--)
        if (r->pins[r->order[i]] == 0) v = i;
      if (v < 0) return -1;
      *evicted = r->order[v];
      memmove(&r->order[v], &r->order[v + 1], (size_t)(r->n - v - 1) * sizeof(int));
      r->n--;
    }
    at = r->n++;
    r->order[at] = key;
  }
  int k = r->order[at];
  memmove(&r->order[1], &r->order[0], (size_t)at * sizeof(int));
  r->order[0] = k;
  return 0;
}

static void test_cache_lru(void **state) {
  (void)state;
  sc_shm_ipc_entry_t c[NC];
  for (int i = 0; i < NC; i++) c[i] = (sc_shm_ipc_entry_t){.peer = -1};
  ref_t ref = {.n = 0};
  uint64_t clock = 0;
  int opens = 0, evictions = 0;
  for (int step = 0; step < 20000; step++) {
    int key = (int)(rnd() % NKEYS);
    /* Mostly a small working set, sometimes a burst of distinct buffers. */
    if (step % 1000 > 900) key = (int)(rnd() % 3);
    int peer = key / 8, id = key % 8;
    sc_dev_ipc_handle_t h = handle_of(id);
    uint64_t k = sc_shm_ipc_key(&h);
    int evicted_ref;
    int rr = ref_access(&ref, key, &evicted_ref);
    int i = sc_shm_ipc_find(c, NC, peer, &h, k);
    if (i < 0) {
      i = sc_shm_ipc_victim(c, NC);
      if (rr < 0) {
        assert_int_equal(i, -1); /* everything pinned: both refuse */
        continue;
      }
      assert_true(i >= 0);
      if (c[i].peer >= 0) {
        int ek = c[i].peer * 8 + c[i].h.bytes[SC_DEV_IPC_HANDLE_BYTES - 1];
        assert_int_equal(ek, evicted_ref);
        assert_int_equal(c[i].refs, 0);
        evictions++;
      } else {
        assert_int_equal(evicted_ref, -1);
      }
      c[i] = (sc_shm_ipc_entry_t){.peer = peer, .key = k, .h = h};
      opens++;
    } else {
      assert_int_equal(evicted_ref, -1);
    }
    c[i].last_use = ++clock;
    /* Pin or unpin now and then, as copies start and end. */
    uint64_t x = rnd() % 10;
    if (x == 0 && c[i].refs < 3) {
      c[i].refs++;
      ref.pins[key]++;
    } else if (x < 4) {
      for (int j = 0; j < NC; j++)
        if (c[j].peer >= 0 && c[j].refs > 0) {
          int kj = c[j].peer * 8 + c[j].h.bytes[SC_DEV_IPC_HANDLE_BYTES - 1];
          c[j].refs--;
          ref.pins[kj]--;
          break;
        }
    }
    /* Same contents as the reference. */
    int seen = 0;
    for (int j = 0; j < NC; j++) {
      if (c[j].peer < 0) continue;
      int kj = c[j].peer * 8 + c[j].h.bytes[SC_DEV_IPC_HANDLE_BYTES - 1];
      int found = 0;
      for (int m = 0; m < ref.n; m++) found |= ref.order[m] == kj;
      assert_true(found);
      seen++;
    }
    assert_int_equal(seen, ref.n);
  }
  assert_true(evictions > 1000); /* the cache overflowed often */
  assert_true(opens > evictions);
}

static void test_cache_same_handle_two_peers(void **state) {
  (void)state;
  sc_shm_ipc_entry_t c[4];
  for (int i = 0; i < 4; i++) c[i] = (sc_shm_ipc_entry_t){.peer = -1};
  sc_dev_ipc_handle_t h = handle_of(5), g = handle_of(5 + 256);
  c[1] = (sc_shm_ipc_entry_t){.peer = 2, .key = sc_shm_ipc_key(&h), .h = h};
  assert_int_equal(sc_shm_ipc_find(c, 4, 2, &h, sc_shm_ipc_key(&h)), 1);
  assert_int_equal(sc_shm_ipc_find(c, 4, 3, &h, sc_shm_ipc_key(&h)), -1);
  assert_int_equal(sc_shm_ipc_find(c, 4, 2, &g, sc_shm_ipc_key(&g)), -1);
  /* A forged key does not make different bytes match. */
  assert_int_equal(sc_shm_ipc_find(c, 4, 2, &g, sc_shm_ipc_key(&h)), -1);
  assert_int_equal(sc_shm_ipc_victim(c, 4), 0);
}

/* ---- capability ---- */

static void test_pair_device(void **state) {
  (void)state;
  for (int ca = 0; ca < 2; ca++)
    for (int cb = 0; cb < 2; cb++)
      for (int same = 0; same < 2; same++) {
        sc_shm_blob_t a = {.magic = SC_SHM_BLOB_MAGIC, .pid = 100, .caps = ca ? 1u : 0u};
        sc_shm_blob_t b = {
            .magic = SC_SHM_BLOB_MAGIC, .pid = same ? 100 : 200, .caps = cb ? 1u : 0u};
        int want = ca && cb && !same;
        assert_int_equal(sc_shm_blob_pair_device(&a, &b), want);
        assert_int_equal(sc_shm_blob_pair_device(&b, &a), want);
      }
}

/* ---- ring peek ---- */

static void test_ring_peek(void **state) {
  (void)state;
  void *mem = NULL;
  assert_int_equal(posix_memalign(&mem, 64, SC_SHM_CTL_BYTES + 64), 0);
  memset(mem, 0, SC_SHM_CTL_BYTES + 64);
  sc_shm_ring_t tx, rx;
  sc_shm_ring_init(&tx, mem, (uint8_t *)mem + SC_SHM_CTL_BYTES, 64, 1);
  sc_shm_ring_init(&rx, mem, (uint8_t *)mem + SC_SHM_CTL_BYTES, 64, 0);
  uint8_t a[64], b[64], c[64];
  for (int round = 0; round < 50; round++) {
    size_t n = 1 + rnd() % 60;
    for (size_t i = 0; i < n; i++) a[i] = (uint8_t)rnd();
    sc_shm_ring_put(&tx, a, n);
    sc_shm_ring_publish(&tx);
    assert_true(sc_shm_ring_avail(&rx, n) >= n);
    size_t k = 1 + rnd() % n;
    sc_shm_ring_peek(&rx, b, k);
    assert_memory_equal(a, b, k); /* across the wrap too */
    sc_shm_ring_get(&rx, c, n);   /* nothing was consumed by the peek */
    assert_memory_equal(a, c, n);
    sc_shm_ring_publish(&rx);
  }
  free(mem);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rec_layout),
      cmocka_unit_test(test_rec_check_dev),
      cmocka_unit_test(test_span),
      cmocka_unit_test(test_cache_lru),
      cmocka_unit_test(test_cache_same_handle_two_peers),
      cmocka_unit_test(test_pair_device),
      cmocka_unit_test(test_ring_peek),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
