/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport's pure helpers (transport/ucx/ucx_internal.h): the tag
 * that makes a receive match exactly the send posted in the same position
 * and carries a hash of the operation's print, the receive masks, the
 * print's hash, and the props of a pair from two address blobs (device_mem
 * included). References are written independently: the tag as bytes
 * (sender big-endian in the first two, the count in the next four, the
 * hash in the last two), UCX's matching rule as (tag & mask) equality, the
 * hash as FNV-1a values computed elsewhere, the props from the rules in
 * docs/UCX.md. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "transport/ucx/ucx_internal.h"

/* The tag as the 8 bytes of a big-endian number: sender, count, hash. */
static uint64_t ref_tag(int sender, uint64_t seq, unsigned hash) {
  uint8_t b[8];
  b[0] = (uint8_t)(sender >> 8);
  b[1] = (uint8_t)sender;
  for (int i = 0; i < 4; i++) b[2 + i] = (uint8_t)(seq >> (8 * (3 - i)));
  b[6] = (uint8_t)(hash >> 8);
  b[7] = (uint8_t)hash;
  uint64_t t = 0;
  for (int i = 0; i < 8; i++) t = t * 256 + b[i];
  return t;
}

static void test_tag_layout(void **state) {
  (void)state;
  const int senders[] = {0, 1, 2, 255, 256, 4097, 65535};
  const uint64_t seqs[] = {
      0, 1, 2, 1000, UINT64_C(0xffff), UINT64_C(0x10000), UINT64_C(0xffffffff)};
  const unsigned hashes[] = {0, 1, 0x80, 0x100, 0x6ec0, 0xffff};
  for (size_t i = 0; i < sizeof(senders) / sizeof(senders[0]); i++)
    for (size_t j = 0; j < sizeof(seqs) / sizeof(seqs[0]); j++)
      for (size_t k = 0; k < sizeof(hashes) / sizeof(hashes[0]); k++) {
        uint64_t t = sc_ucx_tag(senders[i], seqs[j], hashes[k]);
        assert_true(t == ref_tag(senders[i], seqs[j], hashes[k]));
        assert_int_equal(sc_ucx_tag_sender(t), senders[i]);
        assert_true(sc_ucx_tag_seq(t) == seqs[j]);
        assert_int_equal(sc_ucx_tag_hash(t), hashes[k]);
      }
}

/* The count wraps inside its field and never reaches the sender's or the
 * hash's. */
static void test_tag_wrap(void **state) {
  (void)state;
  uint64_t top = UINT64_C(0xffffffff);
  assert_true(sc_ucx_tag(7, top + 1, 0x1234) == sc_ucx_tag(7, 0, 0x1234));
  assert_true(sc_ucx_tag(7, (UINT64_C(1) << 48) + 3, 9) == ref_tag(7, 3, 9));
  assert_int_equal(sc_ucx_tag_sender(sc_ucx_tag(7, top + 5, 0xffff)), 7);
  assert_true(sc_ucx_tag_seq(sc_ucx_tag(7, top + 5, 0xffff)) == 4);
  assert_int_equal(sc_ucx_tag_hash(sc_ucx_tag(7, top + 5, 0xffff)), 0xffff);
  assert_true(sc_ucx_tag(7, top, 0xffff) != sc_ucx_tag(8, 0, 0));
  assert_true(sc_ucx_tag(7, top, 0xffff) == ref_tag(7, top, 0xffff));
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Distinct (sender, count, hash), count below 2^32, give distinct tags. */
static void test_tag_distinct(void **state) {
  (void)state;
  enum { N = 64 * 64 * 4 };
  uint64_t *t = malloc(N * sizeof(*t));
  assert_non_null(t);
  size_t n = 0;
  const unsigned hashes[] = {0, 1, 0x8000, 0xffff};
  for (int s = 0; s < 64; s++)
    for (int k = 0; k < 64; k++)
      for (int h = 0; h < 4; h++) {
        /* counts near the low end, the 16-bit boundary and the top */
        uint64_t seq =
            k < 32 ? (uint64_t)k
                   : (k < 48 ? UINT64_C(0xfff0) + (uint64_t)k : UINT64_C(0xffffffff) - (uint64_t)k);
        t[n++] = sc_ucx_tag(s * 1021 % 65536, seq, hashes[h]);
      }
  qsort(t, n, sizeof(*t), cmp_u64);
  for (size_t i = 1; i < n; i++) assert_true(t[i] != t[i - 1]);
  free(t);
}

/* UCX matches a message to a receive when (message tag & mask) equals
 * (receive tag & mask): a receive with a print takes only its sender's
 * message of its count and hash; one without takes any hash. */
static int ucx_matches(uint64_t msg, uint64_t recv_tag, uint64_t mask) {
  return (msg & mask) == (recv_tag & mask);
}

static void test_recv_mask(void **state) {
  (void)state;
  assert_true(sc_ucx_recv_mask(0) == UINT64_C(0xffffffffffff0000));
  assert_true(sc_ucx_recv_mask(1) == UINT64_MAX);
  assert_true(sc_ucx_recv_mask(0xffff) == UINT64_MAX);
  const unsigned recv_hash[] = {0, 0x6ec0};
  for (int i = 0; i < 2; i++) {
    uint64_t rt = sc_ucx_tag(3, 41, recv_hash[i]), m = sc_ucx_recv_mask(recv_hash[i]);
    /* same sender and count: the same hash always matches, another only
     * without a print */
    assert_true(ucx_matches(sc_ucx_tag(3, 41, recv_hash[i]), rt, m));
    assert_int_equal(ucx_matches(sc_ucx_tag(3, 41, 0x4ff2), rt, m), recv_hash[i] == 0);
    assert_int_equal(ucx_matches(sc_ucx_tag(3, 41, 0), rt, m), recv_hash[i] == 0);
    /* another sender or count never matches, whatever the hash */
    for (unsigned h = 0; h < 0x10000; h += 0x1111) {
      assert_false(ucx_matches(sc_ucx_tag(2, 41, h), rt, m));
      assert_false(ucx_matches(sc_ucx_tag(3, 40, h), rt, m));
      assert_false(ucx_matches(sc_ucx_tag(3, 42, h), rt, m));
    }
  }
}

/* The print's hash: FNV-1a (32 bits) over the 16 bytes, the halves xored;
 * the values were computed by an independent implementation. */
static void test_fp_hash(void **state) {
  (void)state;
  uint8_t fp[SC_TP_FP_LEN] = {0};
  assert_int_equal(sc_ucx_fp_hash(fp), 0); /* no print */
  const uint8_t v1[SC_TP_FP_LEN] = {0x10, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  assert_int_equal(sc_ucx_fp_hash(v1), 0x6ec0);
  memset(fp, 0xff, sizeof(fp));
  assert_int_equal(sc_ucx_fp_hash(fp), 0x4ff2);
  memset(fp, 0, sizeof(fp));
  fp[15] = 1;
  assert_int_equal(sc_ucx_fp_hash(fp), 0x7f1b);
  /* these bytes fold to 0, which means "no print": they hash to 1 instead */
  const uint8_t z[SC_TP_FP_LEN] = {0x63, 0x53, 0,    0,    0,    0,    0,    0,
                                   0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
  assert_int_equal(sc_ucx_fp_hash(z), 1);
  /* any single byte set, anywhere, gives a print (hash not 0) */
  for (int i = 0; i < SC_TP_FP_LEN; i++)
    for (int b = 1; b < 256; b++) {
      memset(fp, 0, sizeof(fp));
      fp[i] = (uint8_t)b;
      assert_int_not_equal(sc_ucx_fp_hash(fp), 0);
    }
  /* prints that differ by one in the count's lowest byte (the commonest
   * mismatch, ranks off by one element) differ in hash */
  uint8_t a[SC_TP_FP_LEN], c[SC_TP_FP_LEN];
  memcpy(a, v1, sizeof(a));
  for (int n = 0; n < 255; n++) {
    a[15] = (uint8_t)n;
    memcpy(c, a, sizeof(c));
    c[15] = (uint8_t)(n + 1);
    assert_int_not_equal(sc_ucx_fp_hash(a), sc_ucx_fp_hash(c));
  }
}

static sc_ucx_blob_hdr_t blob(int rank, int pid, uint64_t host, uint64_t boot, uint64_t netns,
                              int flags, int cpus) {
  sc_ucx_blob_hdr_t b;
  memset(&b, 0, sizeof(b));
  b.magic = SC_UCX_BLOB_MAGIC;
  b.rank = rank;
  b.pid = pid;
  b.host_hash = host;
  b.boot_hash = boot;
  b.netns = netns;
  b.flags = (uint8_t)flags;
  b.host_cpus = cpus;
  return b;
}

static void test_props_locality(void **state) {
  (void)state;
  sc_tp_props_t p;
  sc_ucx_blob_hdr_t a = blob(0, 100, 1, 2, 3, SC_UCX_FLAG_SHM, 8);
  /* same host, shared memory on both: memory, same host */
  sc_ucx_blob_hdr_t b = blob(1, 101, 1, 2, 3, SC_UCX_FLAG_SHM, 8);
  sc_ucx_pair_props(&a, &b, 2, &p);
  assert_int_equal(p.kind, SC_TP_KIND_SHM);
  assert_int_equal(p.locality, SC_TP_SAME_HOST);
  assert_int_equal(p.receiver_spins, 1);
  assert_int_equal(p.single_copy_min, 0);
  /* no one-host defaults were fitted to UCX: SC_TUNE=auto calibrates */
  assert_int_equal(p.costs_unfitted, 1);
  /* one side without shared memory (UCX_TLS=tcp): a network on one host */
  sc_ucx_blob_hdr_t c = blob(2, 102, 1, 2, 3, 0, 8);
  sc_ucx_pair_props(&a, &c, 2, &p);
  assert_int_equal(p.kind, SC_TP_KIND_NET);
  assert_int_equal(p.locality, SC_TP_SAME_HOST);
  assert_int_equal(p.costs_unfitted, 1);
  /* another network namespace, boot or hostname: another host */
  sc_ucx_blob_hdr_t d[] = {blob(3, 103, 1, 2, 4, SC_UCX_FLAG_SHM, 8),
                           blob(3, 103, 1, 5, 3, SC_UCX_FLAG_SHM, 8),
                           blob(3, 103, 6, 2, 3, SC_UCX_FLAG_SHM, 8)};
  for (int i = 0; i < 3; i++) {
    sc_ucx_pair_props(&a, &d[i], 1, &p);
    assert_int_equal(p.kind, SC_TP_KIND_NET);
    assert_int_equal(p.locality, SC_TP_OTHER_HOST);
    assert_true(p.latency_s == 0 && p.bandwidth_bps == 0);
    assert_int_equal(p.costs_unfitted, 0); /* across hosts auto calibrates anyway */
    /* the same verdict seen from the other end */
    sc_ucx_pair_props(&d[i], &a, 1, &p);
    assert_int_equal(p.locality, SC_TP_OTHER_HOST);
  }
  /* one process */
  sc_ucx_blob_hdr_t e = blob(4, 100, 1, 2, 3, SC_UCX_FLAG_SHM, 8);
  sc_ucx_pair_props(&a, &e, 2, &p);
  assert_int_equal(p.locality, SC_TP_SAME_PROCESS);
}

/* Over shared memory the receiver always spins; without it, unless its host
 * has more ranks than CPUs. */
static void test_props_spin(void **state) {
  (void)state;
  sc_tp_props_t p;
  sc_ucx_blob_hdr_t a = blob(0, 100, 1, 2, 3, SC_UCX_FLAG_SHM, 4);
  for (int ranks = 1; ranks <= 8; ranks++) {
    sc_ucx_blob_hdr_t b = blob(1, 101, 1, 2, 3, SC_UCX_FLAG_SHM, 4);
    sc_ucx_pair_props(&a, &b, ranks, &p);
    assert_int_equal(p.receiver_spins, 1);
    sc_ucx_blob_hdr_t tcp_only = blob(1, 101, 1, 2, 3, 0, 4);
    sc_ucx_pair_props(&a, &tcp_only, ranks, &p);
    assert_int_equal(p.receiver_spins, ranks <= 4);
  }
  sc_ucx_blob_hdr_t unknown = blob(1, 101, 1, 2, 3, SC_UCX_FLAG_SHM, 0);
  sc_ucx_pair_props(&a, &unknown, 64, &p);
  assert_int_equal(p.receiver_spins, 1);
}

/* device_mem: device pointers go to UCX for a pair only when, on both
 * ranks, UCX reports CUDA memory AND the device runtime is CUDA; otherwise
 * the executor stages. Reference: the rule spelled out over every
 * combination of the four facts, on one host and on two, with and without
 * shared memory (which must not matter to it, nor it to the kind). */
static void test_props_device(void **state) {
  (void)state;
  for (int m = 0; m < 16; m++) {
    int ucx_a = m & 1, rt_a = (m >> 1) & 1, ucx_b = (m >> 2) & 1, rt_b = (m >> 3) & 1;
    int want = ucx_a == 1 && rt_a == 1 && ucx_b == 1 && rt_b == 1;
    assert_int_equal(sc_ucx_cuda_flag(ucx_a, rt_a) != 0, ucx_a == 1 && rt_a == 1);
    for (int shm = 0; shm < 2; shm++)
      for (int other_host = 0; other_host < 2; other_host++) {
        int base = shm ? SC_UCX_FLAG_SHM : 0;
        sc_ucx_blob_hdr_t a = blob(0, 100, 1, 2, 3, base | (int)sc_ucx_cuda_flag(ucx_a, rt_a), 8);
        sc_ucx_blob_hdr_t b =
            blob(1, 101, other_host ? 9 : 1, 2, 3, base | (int)sc_ucx_cuda_flag(ucx_b, rt_b), 8);
        sc_tp_props_t p, q;
        sc_ucx_pair_props(&a, &b, 1, &p);
        sc_ucx_pair_props(&b, &a, 1, &q);
        assert_int_equal(p.device_mem, want);
        assert_int_equal(q.device_mem, want);
        assert_int_equal(sc_ucx_pair_device(&a, &b), want);
        sc_tp_kind_t kind = !other_host && shm ? SC_TP_KIND_SHM : SC_TP_KIND_NET;
        assert_int_equal(p.kind, kind);
      }
  }
  /* The flag is its own bit: a shm-only blob never claims CUDA. */
  sc_ucx_blob_hdr_t s1 = blob(0, 100, 1, 2, 3, SC_UCX_FLAG_SHM, 8);
  sc_ucx_blob_hdr_t s2 = blob(1, 101, 1, 2, 3, SC_UCX_FLAG_SHM, 8);
  assert_int_equal(sc_ucx_pair_device(&s1, &s2), 0);
}

/* The library's rendezvous defaults apply only where the user set none;
 * any value of theirs (even an empty one, which UCX then rejects) stands
 * for both lanes, which then share one context. Without RDMA the net lane
 * is a context of its own that sends eagerly; with RDMA there is one. The
 * host lane sends eagerly up to 256 KiB only where no two ranks can share a
 * core (nranks at most the CPUs), from 64 KiB otherwise. */
static void test_rndv_plan(void **state) {
  (void)state;
  const struct {
    int nranks, cpus;
    const char *host;
  } sizes[] = {{1, 1, "256k"},  {2, 2, "256k"},   {3, 2, "64k"},   {4, 2, "64k"},
               {8, 64, "256k"}, {64, 64, "256k"}, {65, 64, "64k"}, {2, 1, "64k"}};
  for (int rdma = 0; rdma <= 1; rdma++) {
    for (int one_host = 0; one_host <= 1; one_host++) {
      for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        const char *user[] = {"inf", "8k", ""};
        for (size_t i = 0; i < sizeof(user) / sizeof(user[0]); i++) {
          sc_ucx_rndv_plan_t p =
              sc_ucx_rndv_plan(user[i], rdma, one_host, sizes[s].nranks, sizes[s].cpus);
          assert_null(p.host);
          assert_null(p.net);
        }
        sc_ucx_rndv_plan_t p =
            sc_ucx_rndv_plan(NULL, rdma, one_host, sizes[s].nranks, sizes[s].cpus);
        assert_string_equal(p.host, sizes[s].host);
        if (rdma || one_host)
          assert_null(p.net);
        else
          assert_string_equal(p.net, "inf");
      }
    }
  }
}

/* One host for certain only when the root was reached over loopback. */
static void test_root_loopback(void **state) {
  (void)state;
  struct sockaddr_storage ss;
  struct sockaddr_in *in = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
  const struct {
    int family;
    const char *addr;
    int loopback;
  } cases[] = {{AF_INET, "127.0.0.1", 1},         {AF_INET, "127.7.8.9", 1},
               {AF_INET, "10.77.0.1", 0},         {AF_INET, "128.0.0.1", 0},
               {AF_INET, "0.0.0.0", 0},           {AF_INET6, "::1", 1},
               {AF_INET6, "::ffff:127.0.0.1", 1}, {AF_INET6, "::ffff:10.0.0.1", 0},
               {AF_INET6, "fe80::1", 0}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    memset(&ss, 0, sizeof(ss));
    ss.ss_family = (sa_family_t)cases[i].family;
    void *dst = cases[i].family == AF_INET ? (void *)&in->sin_addr : (void *)&in6->sin6_addr;
    assert_int_equal(inet_pton(cases[i].family, cases[i].addr, dst), 1);
    assert_int_equal(sc_ucx_root_is_loopback(&ss), cases[i].loopback);
  }
  assert_int_equal(sc_ucx_root_is_loopback(NULL), 0);
  memset(&ss, 0, sizeof(ss));
  ss.ss_family = AF_UNIX;
  assert_int_equal(sc_ucx_root_is_loopback(&ss), 0);
}

/* A pair's lane is decided alike on both ends: the host lane on one host,
 * the net lane across hosts (another name, boot or network namespace). */
static void test_pair_lane(void **state) {
  (void)state;
  sc_ucx_blob_hdr_t a = blob(0, 100, 1, 2, 3, SC_UCX_FLAG_SHM, 8);
  sc_ucx_blob_hdr_t same = blob(1, 101, 1, 2, 3, 0, 8);
  sc_ucx_blob_hdr_t other[] = {blob(2, 102, 9, 2, 3, SC_UCX_FLAG_SHM, 8),
                               blob(2, 102, 1, 9, 3, SC_UCX_FLAG_SHM, 8),
                               blob(2, 102, 1, 2, 9, SC_UCX_FLAG_SHM, 8)};
  assert_int_equal(sc_ucx_pair_lane(&a, &same), SC_UCX_LANE_HOST);
  assert_int_equal(sc_ucx_pair_lane(&same, &a), SC_UCX_LANE_HOST);
  for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
    assert_int_equal(sc_ucx_pair_lane(&a, &other[i]), SC_UCX_LANE_NET);
    assert_int_equal(sc_ucx_pair_lane(&other[i], &a), SC_UCX_LANE_NET);
  }
}

/* The worker address a pair's lane uses, checked against the blob's layout
 * written out (header, host lane's address, net lane's address). */
static void test_blob_address(void **state) {
  (void)state;
  const size_t hdr = sizeof(sc_ucx_blob_hdr_t);
  sc_ucx_blob_hdr_t b = blob(0, 100, 1, 2, 3, 0, 8);
  size_t len = 99;
  b.addr_len = 200;
  b.net_addr_len = 60;
  assert_int_equal(sc_ucx_blob_address(&b, SC_TP_ADDR_MAX, SC_UCX_LANE_HOST, &len), hdr);
  assert_int_equal(len, 200);
  assert_int_equal(sc_ucx_blob_address(&b, SC_TP_ADDR_MAX, SC_UCX_LANE_NET, &len), hdr + 200);
  assert_int_equal(len, 60);
  /* Exactly full, one byte over. */
  assert_int_equal(sc_ucx_blob_address(&b, hdr + 260, SC_UCX_LANE_NET, &len), hdr + 200);
  assert_int_equal(sc_ucx_blob_address(&b, hdr + 259, SC_UCX_LANE_HOST, &len), 0);
  assert_int_equal(len, 0);
  assert_int_equal(sc_ucx_blob_address(&b, hdr + 259, SC_UCX_LANE_NET, &len), 0);
  /* No net lane of its own: a net pair uses the one address. */
  b.net_addr_len = 0;
  assert_int_equal(sc_ucx_blob_address(&b, SC_TP_ADDR_MAX, SC_UCX_LANE_NET, &len), hdr);
  assert_int_equal(len, 200);
  /* Lengths that overflow the record, and an empty host address. */
  b.addr_len = 0xffff;
  b.net_addr_len = 0xffff;
  assert_int_equal(sc_ucx_blob_address(&b, SC_TP_ADDR_MAX, SC_UCX_LANE_NET, &len), 0);
  b.addr_len = 0;
  b.net_addr_len = 60;
  assert_int_equal(sc_ucx_blob_address(&b, SC_TP_ADDR_MAX, SC_UCX_LANE_NET, &len), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tag_layout),   cmocka_unit_test(test_tag_wrap),
      cmocka_unit_test(test_tag_distinct), cmocka_unit_test(test_recv_mask),
      cmocka_unit_test(test_fp_hash),      cmocka_unit_test(test_props_locality),
      cmocka_unit_test(test_props_spin),   cmocka_unit_test(test_props_device),
      cmocka_unit_test(test_rndv_plan),    cmocka_unit_test(test_pair_lane),
      cmocka_unit_test(test_blob_address), cmocka_unit_test(test_root_loopback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
