/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared-memory transport: the SPSC ring (wrap-around, padding, bogus
 * counters, the rewind to its start, a producer and a consumer thread
 * streaming a checked sequence), the same-host verdict, and whole transports
 * in one process (several ranks as threads): small, ring-streamed and
 * single-copy messages arrive exactly, a length mismatch and a closed peer
 * fail with SC_ERR_REMOTE, wake() ends a blocked progress, and no segment
 * name survives connect_all. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/base/clock.h"
#include "lib/base/error.h"
#include "lib/base/socket.h"
#include "test/unit/shm_nodes.h"
#include "transport/shm/shm_internal.h"
#include "transport/transport.h"

/* ---- ring ---- */

typedef struct ring_mem {
  sc_shm_chan_ctl_t *ctl;
  uint8_t *data;
} ring_mem_t;

static ring_mem_t ring_mem(uint64_t size) {
  ring_mem_t m;
  void *p = NULL;
  assert_int_equal(posix_memalign(&p, 64, SC_SHM_CTL_BYTES + size), 0);
  memset(p, 0, SC_SHM_CTL_BYTES + size);
  m.ctl = p;
  m.data = (uint8_t *)p + SC_SHM_CTL_BYTES;
  return m;
}

/* A ring of `size` bytes with its producer and consumer ends. */
static ring_mem_t ring_pair(uint64_t size, sc_shm_ring_t *tx, sc_shm_ring_t *rx) {
  ring_mem_t m = ring_mem(size);
  sc_shm_ring_init(tx, m.ctl, m.data, size, 1);
  sc_shm_ring_init(rx, m.ctl, m.data, size, 0);
  return m;
}

static void test_ring_basic(void **state) {
  (void)state;
  sc_shm_ring_t tx, rx;
  ring_mem_t m = ring_pair(64, &tx, &rx);
  assert_int_equal(sc_shm_ring_space(&tx, 1), 64);
  assert_int_equal(sc_shm_ring_avail(&rx, 1), 0);
  uint8_t a[48], b[48];
  for (int i = 0; i < 48; i++) a[i] = (uint8_t)(i + 1);
  sc_shm_ring_put(&tx, a, 40);
  sc_shm_ring_put_pad(&tx, 0);
  /* Nothing visible before publish. */
  assert_int_equal(sc_shm_ring_avail(&rx, 1), 0);
  assert_int_equal(sc_shm_ring_publish(&tx), 1);
  assert_int_equal(sc_shm_ring_publish(&tx), 0);
  assert_int_equal(sc_shm_ring_avail(&rx, 1), 40);
  assert_int_equal(sc_shm_ring_space(&tx, 64), 24);
  sc_shm_ring_get(&rx, b, 40);
  assert_memory_equal(a, b, 40);
  /* Until the consumer publishes, the producer still sees the ring full. */
  assert_int_equal(sc_shm_ring_space(&tx, 64), 24);
  sc_shm_ring_publish(&rx);
  assert_int_equal(sc_shm_ring_space(&tx, 64), 64);
  /* Wraps: 40 + 48 > 64. */
  sc_shm_ring_put(&tx, a, 48);
  sc_shm_ring_publish(&tx);
  memset(b, 0, sizeof(b));
  assert_int_equal(sc_shm_ring_avail(&rx, 48), 48);
  sc_shm_ring_get(&rx, b, 48);
  assert_memory_equal(a, b, 48);
  /* Padding advances without data. */
  sc_shm_ring_publish(&rx);
  sc_shm_ring_put(&tx, a, 3);
  sc_shm_ring_put_pad(&tx, 5);
  sc_shm_ring_publish(&tx);
  assert_int_equal(sc_shm_ring_avail(&rx, 8), 8);
  sc_shm_ring_get(&rx, b, 3);
  sc_shm_ring_skip(&rx, 5);
  assert_memory_equal(a, b, 3);
  assert_int_equal(sc_shm_ring_avail(&rx, 1), 0);
  assert_int_equal(sc_shm_pad8(0), 0);
  assert_int_equal(sc_shm_pad8(1), 8);
  assert_int_equal(sc_shm_pad8(16), 16);
  free(m.ctl);
}

static void test_ring_bogus_counters(void **state) {
  (void)state;
  sc_shm_ring_t tx, rx;
  ring_mem_t m = ring_pair(64, &tx, &rx);
  /* A consumer head ahead of the tail, a producer tail more than a ring
   * ahead: neither may be used to index the ring. */
  m.ctl->head = 1000;
  assert_true(sc_shm_ring_space(&tx, 65) == (uint64_t)-1);
  m.ctl->head = 0;
  m.ctl->tail = 65;
  assert_true(sc_shm_ring_avail(&rx, 1) == (uint64_t)-1);
  m.ctl->tail = 64;
  assert_int_equal(sc_shm_ring_avail(&rx, 1), 64);
  free(m.ctl);
}

/* The model of the rewind rule, written from shm_internal.h: a producer at
 * offset HOT or beyond in a ring larger than two windows, whose record would
 * not wrap (where a rewind record may stand), whose consumer took
 * everything, goes back to the ring's start. */
static int rewind_allowed(uint64_t pos, uint64_t size) {
  uint64_t off = pos % size;
  return off >= SC_SHM_RING_HOT && size > 2 * SC_SHM_RING_HOT && off + SC_SHM_REC_LEN <= size;
}

static int rewind_expected(uint64_t pos, uint64_t head, uint64_t size) {
  return rewind_allowed(pos, size) && head == pos;
}

static uint32_t rec_type(const sc_shm_ring_t *rx) {
  uint8_t rec[SC_SHM_REC_LEN];
  sc_shm_ring_peek(rx, rec, SC_SHM_REC_LEN);
  uint32_t t;
  memcpy(&t, rec, sizeof(t));
  return t;
}

/* Moves both sides to stream position `to` (consumer drained). */
static void ring_advance(sc_shm_ring_t *tx, sc_shm_ring_t *rx, uint64_t to) {
  static uint8_t junk[4096];
  while (tx->pos < to) {
    uint64_t n = to - tx->pos < sizeof(junk) ? to - tx->pos : sizeof(junk);
    sc_shm_ring_put(tx, junk, n);
    sc_shm_ring_publish(tx);
    assert_int_equal(sc_shm_ring_avail(rx, n), n);
    sc_shm_ring_skip(rx, n);
    sc_shm_ring_publish(rx);
  }
}

static void test_ring_rewind_rule(void **state) {
  (void)state;
  const uint64_t size = 4 * SC_SHM_RING_HOT;
  sc_shm_ring_t tx, rx;
  ring_mem_t m = ring_pair(size, &tx, &rx);
  /* Inside the window: no rewind. */
  ring_advance(&tx, &rx, SC_SHM_RING_HOT - 8);
  assert_int_equal(sc_shm_ring_rewind(&tx), 0);
  /* Past it with the consumer behind: none, and no second look at the
   * consumer's counter for a quarter window even once it caught up. */
  uint8_t a[64] = {1};
  sc_shm_ring_put(&tx, a, 16);
  sc_shm_ring_publish(&tx);
  assert_int_equal(sc_shm_ring_rewind(&tx), 0);
  sc_shm_ring_skip(&rx, 16);
  sc_shm_ring_publish(&rx);
  assert_true(rewind_expected(tx.pos, m.ctl->head, size));
  assert_int_equal(sc_shm_ring_rewind(&tx), 0);
  ring_advance(&tx, &rx, SC_SHM_RING_HOT + 8 + SC_SHM_RING_HOT / 4);
  /* Now it goes back: a rewind record, then the ring's start. */
  uint64_t before = tx.pos;
  assert_int_equal(sc_shm_ring_rewind(&tx), 1);
  assert_int_equal(tx.pos, size);
  assert_true(sc_shm_ring_space(&tx, 1) >= before % size);
  for (int i = 0; i < 64; i++) a[i] = (uint8_t)(3 * i + 1);
  sc_shm_ring_put(&tx, a, 64);
  sc_shm_ring_publish(&tx);
  assert_memory_equal(m.data, a, 64);
  assert_int_equal(sc_shm_ring_avail(&rx, SC_SHM_REC_LEN), size - before + 64);
  assert_int_equal(rec_type(&rx), SC_SHM_REC_REWIND);
  assert_int_equal(sc_shm_ring_rewound(&rx), 1);
  assert_int_equal(rx.pos, size);
  uint8_t b[64];
  assert_int_equal(sc_shm_ring_avail(&rx, 64), 64);
  sc_shm_ring_get(&rx, b, 64);
  assert_memory_equal(a, b, 64);
  sc_shm_ring_publish(&rx);
  assert_int_equal(sc_shm_ring_space(&tx, size), size);
  /* A record that would wrap: the ring's end comes next anyway. */
  ring_advance(&tx, &rx, 2 * size - SC_SHM_REC_LEN + 8);
  assert_false(rewind_expected(tx.pos, m.ctl->head, size));
  assert_int_equal(sc_shm_ring_rewind(&tx), 0);
  /* One that just fits: the record ends the ring. */
  ring_advance(&tx, &rx, 3 * size - SC_SHM_REC_LEN);
  assert_int_equal(sc_shm_ring_rewind(&tx), 1);
  assert_int_equal(tx.pos, 3 * size);
  sc_shm_ring_publish(&tx);
  assert_int_equal(rec_type(&rx), SC_SHM_REC_REWIND);
  assert_int_equal(sc_shm_ring_rewound(&rx), 1);
  assert_int_equal(rx.pos, 3 * size);
  /* A consumer refuses a rewind record where none could have been written. */
  rx.pos = 4 * size - 8;
  assert_int_equal(sc_shm_ring_rewound(&rx), 0);
  assert_int_equal(rx.pos, 4 * size - 8);
  rx.pos = 4 * size + SC_SHM_RING_HOT - 8; /* inside the window */
  assert_int_equal(sc_shm_ring_rewound(&rx), 0);
  assert_int_equal(rx.pos, 4 * size + SC_SHM_RING_HOT - 8);
  free(m.ctl);
  /* A ring of two windows never rewinds. */
  m = ring_pair(2 * SC_SHM_RING_HOT, &tx, &rx);
  ring_advance(&tx, &rx, SC_SHM_RING_HOT + SC_SHM_RING_HOT / 2);
  assert_int_equal(sc_shm_ring_rewind(&tx), 0);
  assert_int_equal(sc_shm_ring_rewound(&rx), 0);
  free(m.ctl);
}

static uint8_t msg_byte(uint64_t msg, uint64_t i) {
  return (uint8_t)(msg * 31 + i * 7 + (i >> 8));
}

/* Framed messages as the transport writes them (record, padded payload),
 * producer and consumer steps interleaved at random: every message arrives
 * exactly, rewinds happen, and while the consumer keeps up small traffic
 * stays in the window. */
static void test_ring_rewind_stream(void **state) {
  (void)state;
  const uint64_t size = 8 * SC_SHM_RING_HOT;
  sc_shm_ring_t tx, rx;
  ring_mem_t m = ring_pair(size, &tx, &rx);
  unsigned seed = 7;
  enum { MAXLEN = 3000, NMSG = 20000 };
  static uint8_t msg[MAXLEN], got[MAXLEN];
  uint64_t sent = 0, recvd = 0, rewinds = 0, max_off_lockstep = 0;
  /* The model's throttle: after finding the consumer behind, the producer
   * does not look again for a quarter window. */
  uint64_t quiet_until = 0;
  uint64_t lens[64]; /* lengths of the messages in flight, by index mod 64 */
  while (recvd < NMSG) {
    int lockstep = recvd < NMSG / 2; /* first half: the consumer drains after each message */
    int produce =
        sent < NMSG && sent - recvd < 64 && (lockstep ? sent == recvd : rand_r(&seed) % 2);
    if (produce) {
      uint64_t len = rand_r(&seed) % 8 == 0 ? 1 + rand_r(&seed) % MAXLEN : rand_r(&seed) % 64;
      uint64_t need = SC_SHM_REC_LEN + sc_shm_pad8(len);
      uint64_t head_before = m.ctl->head, pos_before = tx.pos;
      int looks = rewind_allowed(tx.pos, size) && tx.pos >= quiet_until;
      int want = looks && head_before == tx.pos;
      if (looks && !want) quiet_until = tx.pos + SC_SHM_RING_HOT / 4;
      int did = sc_shm_ring_rewind(&tx);
      assert_int_equal(did, want);
      if (did) {
        rewinds++;
        assert_int_equal(tx.pos % size, 0);
        assert_true(tx.pos > pos_before && tx.pos - pos_before <= size);
      }
      uint64_t room = sc_shm_ring_space(&tx, need);
      assert_true(room != (uint64_t)-1);
      if (room >= need) {
        uint8_t rec[SC_SHM_REC_LEN];
        sc_shm_rec_encode(rec, SC_SHM_REC_EAGER, len, 0, NULL);
        if (lockstep && tx.pos % size + need > max_off_lockstep)
          max_off_lockstep = tx.pos % size + need;
        sc_shm_ring_put(&tx, rec, SC_SHM_REC_LEN);
        for (uint64_t i = 0; i < len; i++) msg[i] = msg_byte(sent, i);
        sc_shm_ring_put(&tx, msg, len);
        sc_shm_ring_put_pad(&tx, sc_shm_pad8(len) - len);
        lens[sent % 64] = len;
        sent++;
      }
      sc_shm_ring_publish(&tx);
      if (!lockstep) continue;
    }
    /* Consumer: one record (and its payload), if there. */
    uint64_t have = sc_shm_ring_avail(&rx, SC_SHM_REC_LEN);
    assert_true(have != (uint64_t)-1);
    if (have < SC_SHM_REC_LEN) continue;
    if (rec_type(&rx) == SC_SHM_REC_REWIND) {
      assert_int_equal(sc_shm_ring_rewound(&rx), 1);
      sc_shm_ring_publish(&rx);
      continue;
    }
    sc_shm_rec_t h;
    uint8_t rec[SC_SHM_REC_LEN];
    sc_shm_ring_peek(&rx, rec, SC_SHM_REC_LEN);
    assert_int_equal(sc_shm_rec_check(rec, lens[recvd % 64], NULL, 0, &h), SC_SHM_REC_OK);
    /* The producer published the record with its payload. */
    assert_true(have >= SC_SHM_REC_LEN + sc_shm_pad8(h.len));
    sc_shm_ring_skip(&rx, SC_SHM_REC_LEN);
    sc_shm_ring_get(&rx, got, h.len);
    sc_shm_ring_skip(&rx, sc_shm_pad8(h.len) - h.len);
    for (uint64_t i = 0; i < h.len; i++)
      if (got[i] != msg_byte(recvd, i))
        fail_msg("message %llu byte %llu", (unsigned long long)recvd, (unsigned long long)i);
    recvd++;
    sc_shm_ring_publish(&rx);
  }
  assert_true(rewinds > 10);
  assert_true(max_off_lockstep <= SC_SHM_RING_HOT + SC_SHM_REC_LEN + sc_shm_pad8(MAXLEN));
  free(m.ctl);
}

#define STREAM_BYTES (3u << 20)

typedef struct stream_arg {
  sc_shm_ring_t r;
  uint32_t seed;
  int bad;
} stream_arg_t;

static uint8_t seq_byte(uint64_t i) {
  return (uint8_t)((i * 2654435761u) >> 13);
}

static void *producer(void *p) {
  stream_arg_t *a = p;
  uint8_t chunk[700];
  uint64_t sent = 0;
  while (sent < STREAM_BYTES) {
    uint64_t n = 1 + rand_r(&a->seed) % sizeof(chunk);
    if (n > STREAM_BYTES - sent) n = STREAM_BYTES - sent;
    uint64_t room = sc_shm_ring_space(&a->r, n);
    if (room == (uint64_t)-1) {
      a->bad = 1;
      return NULL;
    }
    if (room < n) n = room;
    for (uint64_t i = 0; i < n; i++) chunk[i] = seq_byte(sent + i);
    sc_shm_ring_put(&a->r, chunk, n);
    sent += n;
    sc_shm_ring_publish(&a->r);
  }
  return NULL;
}

static void *consumer(void *p) {
  stream_arg_t *a = p;
  uint8_t chunk[900];
  uint64_t got = 0;
  while (got < STREAM_BYTES) {
    uint64_t have = sc_shm_ring_avail(&a->r, 1);
    if (have == (uint64_t)-1) {
      a->bad = 1;
      return NULL;
    }
    uint64_t n = 1 + rand_r(&a->seed) % sizeof(chunk);
    if (n > have) n = have;
    sc_shm_ring_get(&a->r, chunk, n);
    for (uint64_t i = 0; i < n; i++)
      if (chunk[i] != seq_byte(got + i)) a->bad = 2;
    got += n;
    sc_shm_ring_publish(&a->r);
  }
  return NULL;
}

static void test_ring_threads(void **state) {
  (void)state;
  ring_mem_t m = ring_mem(1024);
  stream_arg_t pa = {.seed = 1}, ca = {.seed = 2};
  sc_shm_ring_init(&pa.r, m.ctl, m.data, 1024, 1);
  sc_shm_ring_init(&ca.r, m.ctl, m.data, 1024, 0);
  pthread_t tp, tc;
  pthread_create(&tp, NULL, producer, &pa);
  pthread_create(&tc, NULL, consumer, &ca);
  pthread_join(tp, NULL);
  pthread_join(tc, NULL);
  assert_int_equal(pa.bad, 0);
  assert_int_equal(ca.bad, 0);
  assert_int_equal(m.ctl->tail, STREAM_BYTES);
  assert_int_equal(m.ctl->head, STREAM_BYTES);
  free(m.ctl);
}

static void test_same_host(void **state) {
  (void)state;
  sc_shm_blob_t a = {.magic = SC_SHM_BLOB_MAGIC,
                     .pid = 10,
                     .host_hash = 1,
                     .boot_hash = 2,
                     .pidns = 3,
                     .netns = 4};
  sc_shm_blob_t b = a;
  b.pid = 11;
  assert_true(sc_shm_blob_same_host(&a, &b));
  b.host_hash = 9;
  assert_false(sc_shm_blob_same_host(&a, &b));
  b = a;
  b.boot_hash = 9;
  assert_false(sc_shm_blob_same_host(&a, &b));
  b = a;
  b.pidns = 9;
  assert_false(sc_shm_blob_same_host(&a, &b));
  b = a;
  b.netns = 9;
  assert_false(sc_shm_blob_same_host(&a, &b));
  b = a;
  b.magic = 0;
  assert_false(sc_shm_blob_same_host(&a, &b));
  struct sockaddr_un sa;
  socklen_t len;
  sc_shm_db_name(&sa, &len, 1234, 0xabcull);
  assert_int_equal(sa.sun_path[0], 0); /* abstract: nothing on disk */
  assert_string_equal(sa.sun_path + 1, "scshm-1234-0000000000000abc");
  assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1));
}

/* ---- whole transports (test/unit/shm_nodes.h) ---- */

/* 0 -> 1 and 1 -> 0 at once, several sizes queued back to back. */
static void exchange_sizes(int force_ring) {
  static const size_t sizes[] = {0, 8, 1000, 4096, 20000, (size_t)600 << 10, (size_t)1 << 20};
  enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
  setup_n(2);
  if (force_ring) {
    /* Both receivers refuse single-copy: large messages stream through the ring. */
    for (int i = 0; i < 2; i++) sc_shm_of(nodes[i].tp)->peers[1 - i].rx.ctl->cma_ok = 2;
  } else {
    assert_int_equal(sc_shm_of(nodes[0].tp)->peers[1].tx.ctl->cma_ok, 1);
  }
  uint8_t *sb[2][NS], *rb[2][NS];
  sc_tp_req_t sreq[2][NS], rreq[2][NS];
  sc_tp_req_t *all[4 * NS];
  int na = 0;
  memset(sreq, 0, sizeof(sreq));
  memset(rreq, 0, sizeof(rreq));
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < NS; k++) {
      sb[i][k] = malloc(sizes[k] + 1);
      rb[i][k] = calloc(1, sizes[k] + 1);
      fill(sb[i][k], sizes[k], (uint32_t)(i * 100 + k));
      /* Every message carries a print (record kinds eager and single-copy
       * alike); every other receive checks it, the others post none. */
      for (int b = 0; b < SC_TP_FP_LEN; b++)
        sreq[1 - i][k].fp[b] = (uint8_t)(i * 64 + k * 8 + b + 1);
      if (k % 2 == 0) memcpy(rreq[i][k].fp, sreq[1 - i][k].fp, SC_TP_FP_LEN);
      assert_int_equal(ops->irecv(nodes[i].tp, 1 - i, rb[i][k], sizes[k], &rreq[i][k]), SC_SUCCESS);
      all[na++] = &rreq[i][k];
    }
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < NS; k++) {
      assert_int_equal(ops->isend(nodes[i].tp, 1 - i, sb[i][k], sizes[k], &sreq[i][k]), SC_SUCCESS);
      all[na++] = &sreq[i][k];
    }
  assert_int_equal(drive(2, all, na), SC_SUCCESS);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < NS; k++) {
      assert_int_equal(rreq[i][k].state, SC_TP_REQ_DONE);
      assert_int_equal(sreq[i][k].state, SC_TP_REQ_DONE);
      assert_memory_equal(rb[i][k], sb[1 - i][k], sizes[k]);
    }
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < NS; k++) {
      free(sb[i][k]);
      free(rb[i][k]);
    }
  size_t single = 0; /* the sizes at or above the threshold went single-copy */
  for (int k = 0; k < NS; k++) single += sizes[k] >= SC_SHM_SINGLE_COPY_MIN;
  assert_true(single > 0 && single < NS); /* both paths were taken */
  if (!force_ring)
    assert_int_equal(sc_shm_of(nodes[0].tp)->peers[1].cma_sent, single);
  else
    assert_int_equal(sc_shm_of(nodes[0].tp)->peers[1].cma_sent, 0);
  teardown_n(2);
}

static void test_exchange_cma(void **state) {
  (void)state;
  exchange_sizes(0);
}

static void test_exchange_ring_only(void **state) {
  (void)state;
  exchange_sizes(1);
}

/* Props of any pair, from the blobs: the threads here are one process. */
static void test_props(void **state) {
  (void)state;
  setup_n(3);
  for (int r = 0; r < 3; r++) {
    sc_tp_props_t p;
    assert_int_equal(ops->props(nodes[r].tp, 1, 2, &p), SC_SUCCESS);
    assert_int_equal(p.kind, SC_TP_KIND_SHM);
    assert_int_equal(p.locality, SC_TP_SAME_PROCESS);
    assert_int_equal(p.single_copy_min, SC_SHM_SINGLE_COPY_MIN);
    assert_int_equal(p.receiver_spins, 1);
    assert_int_equal(ops->props(nodes[r].tp, 2, 2, &p), SC_ERR_INVALID_ARG);
  }
  /* Another pid: another process of the host. */
  sc_shm_of(nodes[0].tp)->peers[2].blob.pid += 1;
  sc_tp_props_t p;
  assert_int_equal(ops->props(nodes[0].tp, 1, 2, &p), SC_SUCCESS);
  assert_int_equal(p.locality, SC_TP_SAME_HOST);
  sc_shm_of(nodes[0].tp)->peers[2].blob.pid -= 1;
  teardown_n(3);
}

static void test_three_ranks_all_pairs(void **state) {
  (void)state;
  setup_n(3);
  enum { LEN = 70000 };
  static uint8_t sb[3][3][LEN], rb[3][3][LEN];
  sc_tp_req_t req[3][3][2];
  sc_tp_req_t *all[18];
  int na = 0;
  memset(req, 0, sizeof(req));
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      if (i == j) continue;
      fill(sb[i][j], LEN, (uint32_t)(i * 3 + j));
      assert_int_equal(ops->irecv(nodes[i].tp, j, rb[i][j], LEN, &req[i][j][0]), SC_SUCCESS);
      assert_int_equal(ops->isend(nodes[i].tp, j, sb[i][j], LEN, &req[i][j][1]), SC_SUCCESS);
      all[na++] = &req[i][j][0];
      all[na++] = &req[i][j][1];
    }
  assert_int_equal(drive(3, all, na), SC_SUCCESS);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      if (i != j) assert_memory_equal(rb[i][j], sb[j][i], LEN);
  teardown_n(3);
}

static void test_length_mismatch(void **state) {
  (void)state;
  setup_n(2);
  uint8_t s[100] = {1}, r[50];
  sc_tp_req_t sr, rr;
  memset(&sr, 0, sizeof(sr));
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->isend(nodes[0].tp, 1, s, sizeof(s), &sr), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[1].tp, 0, r, sizeof(r), &rr), SC_ERR_REMOTE);
  assert_int_equal(rr.state, SC_TP_REQ_ERROR);
  assert_non_null(strstr(sc_last_error(), "100-byte message where 50 bytes"));
  assert_non_null(strstr(sc_last_error(), "rank 0 ("));
  /* Later requests to the failed peer fail at once with the same text. */
  sc_tp_req_t r2;
  memset(&r2, 0, sizeof(r2));
  assert_int_equal(ops->irecv(nodes[1].tp, 0, r, sizeof(r), &r2), SC_ERR_REMOTE);
  teardown_n(2);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *wake_now(void *p) {
  ops->wake(p);
  return NULL;
}

static void test_wake_from_other_thread(void **state) {
  (void)state;
  setup_n(2);
  uint8_t r[8];
  sc_tp_req_t rr;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, r, sizeof(r), &rr), SC_SUCCESS);
  /* Without a wake-up, a blocked progress sleeps a whole check slice. */
  int prog = 0;
  double t0 = now_s();
  assert_int_equal(ops->progress(nodes[0].tp, 5000, &prog), SC_SUCCESS);
  assert_true(now_s() - t0 >= 0.09);
  /* A wake-up from another thread ends the next sleep at once. */
  pthread_t th;
  pthread_create(&th, NULL, wake_now, nodes[0].tp);
  pthread_join(th, NULL);
  t0 = now_s();
  assert_int_equal(ops->progress(nodes[0].tp, 5000, &prog), SC_SUCCESS);
  assert_true(now_s() - t0 < 0.05);
  assert_int_equal(rr.state, SC_TP_REQ_PENDING);
  teardown_n(2);
}

static int doorbell_pending(sc_transport_t *tp) {
  char b;
  return recv(sc_shm_of(tp)->db_fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 1;
}

static void test_wakeup_only_when_sleeping(void **state) {
  (void)state;
  setup_n(2);
  uint8_t s[64] = {1}, r[64];
  sc_tp_req_t sr, rr;
  memset(&sr, 0, sizeof(sr));
  memset(&rr, 0, sizeof(rr));
  /* Receiver awake (not in poll): the sender makes no wake-up syscall. */
  assert_int_equal(ops->isend(nodes[0].tp, 1, s, sizeof(s), &sr), SC_SUCCESS);
  assert_int_equal(sr.state, SC_TP_REQ_DONE);
  assert_false(doorbell_pending(nodes[1].tp));
  assert_int_equal(ops->irecv(nodes[1].tp, 0, r, sizeof(r), &rr), SC_SUCCESS);
  assert_int_equal(rr.state, SC_TP_REQ_DONE);
  assert_false(doorbell_pending(nodes[0].tp)); /* freeing ring space woke nobody either */
  /* Receiver announced it sleeps: exactly then the sender rings. */
  sc_shm_of(nodes[1].tp)->hdr->sleeping = 1;
  memset(&sr, 0, sizeof(sr));
  assert_int_equal(ops->isend(nodes[0].tp, 1, s, sizeof(s), &sr), SC_SUCCESS);
  assert_true(doorbell_pending(nodes[1].tp));
  sc_shm_of(nodes[1].tp)->hdr->sleeping = 0;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[1].tp, 0, r, sizeof(r), &rr), SC_SUCCESS);
  assert_int_equal(rr.state, SC_TP_REQ_DONE);
  teardown_n(2);
}

/* Rounds of progress(timeout_ms) on tp until one fails or 2 s pass: the
 * failure (SC_SUCCESS: none) and the seconds until it. */
static sc_result_t progress_until_error(sc_transport_t *tp, int timeout_ms, double *secs) {
  double t0 = now_s();
  sc_result_t res = SC_SUCCESS;
  while (res == SC_SUCCESS && now_s() - t0 < 2.0) {
    int prog = 0;
    res = ops->progress(tp, timeout_ms, &prog);
  }
  *secs = now_s() - t0;
  return res;
}

static void test_peer_closed(void **state) {
  (void)state;
  setup_n(2);
  /* Rank 1 sends one message and leaves: that message is still delivered,
   * the second receive fails, naming rank 1. */
  uint8_t s[16] = {7, 7, 7}, r1[16], r2[16];
  sc_tp_req_t sr, rr1, rr2;
  memset(&sr, 0, sizeof(sr));
  memset(&rr1, 0, sizeof(rr1));
  memset(&rr2, 0, sizeof(rr2));
  assert_int_equal(ops->isend(nodes[1].tp, 0, s, sizeof(s), &sr), SC_SUCCESS);
  assert_int_equal(sr.state, SC_TP_REQ_DONE);
  ops->destroy(nodes[1].tp);
  nodes[1].tp = NULL;
  assert_int_equal(ops->irecv(nodes[0].tp, 1, r1, sizeof(r1), &rr1), SC_SUCCESS);
  assert_int_equal(ops->irecv(nodes[0].tp, 1, r2, sizeof(r2), &rr2), SC_SUCCESS);
  double secs;
  sc_result_t res = progress_until_error(nodes[0].tp, 50, &secs);
  assert_int_equal(rr1.state, SC_TP_REQ_DONE);
  assert_memory_equal(r1, s, sizeof(s));
  assert_int_equal(res, SC_ERR_REMOTE);
  assert_int_equal(rr2.state, SC_TP_REQ_ERROR);
  assert_non_null(strstr(sc_last_error(), "rank 1 ("));
  assert_non_null(strstr(sc_last_error(), "closed"));
  assert_true(secs < 0.5);
  teardown_n(2);
}

/* The same, noticed by a caller that only polls (timeout 0): such rounds
 * read the clock for the liveness check only every few calls, but they do. */
static void test_peer_closed_polled(void **state) {
  (void)state;
  setup_n(2);
  uint8_t r[16];
  sc_tp_req_t rr;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, r, sizeof(r), &rr), SC_SUCCESS);
  ops->destroy(nodes[1].tp);
  nodes[1].tp = NULL;
  double secs;
  sc_result_t res = progress_until_error(nodes[0].tp, 0, &secs);
  assert_int_equal(res, SC_ERR_REMOTE);
  assert_int_equal(rr.state, SC_TP_REQ_ERROR);
  assert_non_null(strstr(sc_last_error(), "closed"));
  assert_true(secs < 0.5);
  teardown_n(2);
}

/* The spin-or-yield hint: a peer counts as running elsewhere only while it
 * announces a CPU, other than ours, and we wait on it. */
static void test_peer_runs_elsewhere(void **state) {
  (void)state;
  setup_n(2);
  sc_shm_transport_t *a = sc_shm_of(nodes[0].tp);
  volatile uint32_t *peer = &sc_shm_of(nodes[1].tp)->hdr->oncpu;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  /* Created by a running thread: both announce a CPU (1-based) or unknown. */
  assert_true((*peer >= 1 && *peer <= (uint32_t)cpus) || *peer == UINT32_MAX);
  assert_true(a->hdr->oncpu == a->oncpu && a->oncpu != 0);
  *peer = a->oncpu == 1 ? 2 : 1;
  assert_false(sc_shm_peer_runs_elsewhere(a)); /* nothing queued on it */
  uint8_t r[8];
  sc_tp_req_t rr;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, r, sizeof(r), &rr), SC_SUCCESS);
  assert_true(sc_shm_peer_runs_elsewhere(a));
  *peer = a->oncpu; /* shares our CPU: it cannot be running now */
  assert_false(sc_shm_peer_runs_elsewhere(a));
  *peer = 0; /* gave its core up */
  assert_false(sc_shm_peer_runs_elsewhere(a));
  teardown_n(2);
}

static void *progress_300ms(void *p) {
  int prog = 0;
  ops->progress(p, 300, &prog);
  return NULL;
}

/* A rank asleep in progress announces it is off its CPU, and on its CPU
 * again once it returns. */
static void test_oncpu_while_sleeping(void **state) {
  (void)state;
  setup_n(2);
  uint8_t r[8];
  sc_tp_req_t rr;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, r, sizeof(r), &rr), SC_SUCCESS);
  volatile uint32_t *oncpu = &sc_shm_of(nodes[0].tp)->hdr->oncpu;
  pthread_t th;
  pthread_create(&th, NULL, progress_300ms, nodes[0].tp);
  int seen_off = 0;
  /* Atomic, as the peers read it: the progress thread writes it meanwhile. */
  for (double t0 = now_s(); !seen_off && now_s() - t0 < 0.25;)
    seen_off = __atomic_load_n(oncpu, __ATOMIC_RELAXED) == 0;
  pthread_join(th, NULL);
  assert_true(seen_off);
  assert_int_not_equal(__atomic_load_n(oncpu, __ATOMIC_RELAXED), 0);
  assert_int_equal(rr.state, SC_TP_REQ_PENDING);
  teardown_n(2);
}

/* Whether progress, waiting with a long spin, reached its sleep (announced
 * in the header) within 200 ms. */
static int sleeps_within_200ms(sc_shm_transport_t *a) {
  pthread_t th;
  pthread_create(&th, NULL, progress_300ms, &a->base);
  int slept = 0;
  for (double t0 = now_s(); !slept && now_s() - t0 < 0.2;)
    slept = __atomic_load_n(&a->hdr->sleeping, __ATOMIC_RELAXED) != 0;
  pthread_join(th, NULL);
  return slept;
}

/* The spin yields the core between looks, but not while another program
 * holds it (lib/base/yield.h): with yields off the wait goes to sleep at once,
 * where a spin of 400 ms would still be yielding (checked first, so that
 * the second half cannot pass for another reason). */
static void test_contended_core_sleeps(void **state) {
  (void)state;
  setup_n(2);
  sc_shm_transport_t *a = sc_shm_of(nodes[0].tp);
  uint8_t r[8];
  sc_tp_req_t rr;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(ops->irecv(nodes[0].tp, 1, r, sizeof(r), &rr), SC_SUCCESS);
  a->spin_us = 400000;
  /* No yield counts as lost here, whatever else runs on the machine. */
  a->yield.lost_us = INT64_MAX / 2;
  assert_false(sleeps_within_200ms(a));
  a->yield.quiet_until_us = sc_now_us() + 10000000;
  assert_true(sleeps_within_200ms(a));
  assert_int_equal(rr.state, SC_TP_REQ_PENDING);
  teardown_n(2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_basic),
      cmocka_unit_test(test_ring_bogus_counters),
      cmocka_unit_test(test_ring_rewind_rule),
      cmocka_unit_test(test_ring_rewind_stream),
      cmocka_unit_test(test_ring_threads),
      cmocka_unit_test(test_same_host),
      cmocka_unit_test(test_exchange_cma),
      cmocka_unit_test(test_exchange_ring_only),
      cmocka_unit_test(test_props),
      cmocka_unit_test(test_three_ranks_all_pairs),
      cmocka_unit_test(test_length_mismatch),
      cmocka_unit_test(test_wake_from_other_thread),
      cmocka_unit_test(test_wakeup_only_when_sleeping),
      cmocka_unit_test(test_peer_closed),
      cmocka_unit_test(test_peer_closed_polled),
      cmocka_unit_test(test_contended_core_sleeps),
      cmocka_unit_test(test_peer_runs_elsewhere),
      cmocka_unit_test(test_oncpu_while_sleeping),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
