/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's protocol core, which needs no RDMA device: SC_IB_*
 * settings and SC_IB_HCA matching, the device-absent decision, FIFO slots
 * and credits, striping, immediate data, the clear-to-send entry and the
 * refusal table, the sender's verdict on a clear-to-send, work-request ids,
 * the address blob, pair props and the GPUDirect plan. Each is checked against a
 * reference written here another way (string tokenising, a list of every
 * message's state, byte coverage maps, decimal arithmetic, the IB spec's
 * rate table). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/base/error.h"
#include "transport/verbs/verbs_near.h"
#include "transport/verbs/verbs_proto.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int detail_has(const char *needle) {
  char d[SC_ERRMSG_MAX];
  sc_error_get_detail(d, sizeof(d));
  return strstr(d, needle) != NULL;
}

/* ---- SC_IB_HCA ---- */

/* Reference matcher: split a copy of the string with strtok_r and compare each token
 * by hand, no shared parsing code. */
static int ref_match(const char *spec, const char *dev, int port) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", spec);
  char *s = buf;
  int excl = 0, exact = 0;
  if (*s == '^') excl = 1, s++;
  if (*s == '=') exact = 1, s++;
  if (!*s) return 1;
  int hit = 0;
  char *save = NULL;
  for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int tport = 0;
    char *c = strchr(tok, ':');
    if (c) {
      *c = '\0';
      tport = atoi(c + 1);
    }
    size_t tl = strlen(tok);
    int named = exact ? strcmp(tok, dev) == 0 : (strlen(dev) >= tl && memcmp(tok, dev, tl) == 0);
    if (named && (tport == 0 || tport == port)) hit = 1;
  }
  return excl ? !hit : hit;
}

static void test_hca_parse_and_match(void **state) {
  (void)state;
  const char *specs[] = {"",        "mlx5",       "mlx5_0:1,mlx5_1",  "=mlx5_1",
                         "^mlx5_0", "^=mlx5_0:2", "=mlx5_0,mlx4_0:1", "rxe0:1"};
  const char *devs[] = {"mlx5_0", "mlx5_1", "mlx5_10", "mlx4_0", "rxe0", "bnxt_re0"};
  for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
    sc_vb_hca_spec_t sp;
    assert_int_equal(sc_vb_parse_hca(specs[i], &sp), SC_SUCCESS);
    for (size_t d = 0; d < sizeof(devs) / sizeof(devs[0]); d++)
      for (int port = 1; port <= 2; port++)
        assert_int_equal(sc_vb_hca_match(&sp, devs[d], port), ref_match(specs[i], devs[d], port));
  }
  sc_vb_hca_spec_t sp;
  assert_int_equal(sc_vb_parse_hca(" mlx5_0:1 , mlx5_1 ", &sp), SC_SUCCESS);
  assert_int_equal(sp.n, 2);
  assert_string_equal(sp.e[0].name, "mlx5_0");
  assert_int_equal(sp.e[0].port, 1);
  assert_string_equal(sp.e[1].name, "mlx5_1");
  assert_int_equal(sp.e[1].port, 0);
  const char *bad[] = {"mlx5_0:", "mlx5_0:0", "mlx5_0:x", ",",  "a,,b",
                       "a,",      "^",        "=",        ":1", "mlx5_0:256"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(sc_vb_parse_hca(bad[i], &sp), SC_ERR_INVALID_ARG);
    assert_true(detail_has("SC_IB_HCA"));
  }
}

/* Zero devices: UNSUPPORTED "no RDMA device" wins over any SC_IB_HCA; with devices a
 * name that matches none is INVALID_ARG naming it; excluding all is INVALID_ARG. */
static void test_check_devices(void **state) {
  (void)state;
  sc_vb_hca_spec_t sp;
  assert_int_equal(sc_vb_parse_hca("nosuch0", &sp), SC_SUCCESS);
  assert_int_equal(sc_vb_check_devices(&sp, NULL, 0, "test: zero"), SC_ERR_UNSUPPORTED);
  assert_true(detail_has("no RDMA device: test: zero"));
  const char *devs[] = {"mlx5_0", "mlx5_1"};
  assert_int_equal(sc_vb_check_devices(&sp, devs, 2, "x"), SC_ERR_INVALID_ARG);
  assert_true(detail_has("'nosuch0'"));
  assert_true(detail_has("mlx5_0, mlx5_1"));
  assert_int_equal(sc_vb_parse_hca("mlx5_1,nosuch0:1", &sp), SC_SUCCESS);
  assert_int_equal(sc_vb_check_devices(&sp, devs, 2, "x"), SC_ERR_INVALID_ARG);
  assert_true(detail_has("'nosuch0'"));
  assert_int_equal(sc_vb_parse_hca("^mlx5", &sp), SC_SUCCESS);
  assert_int_equal(sc_vb_check_devices(&sp, devs, 2, "x"), SC_ERR_INVALID_ARG);
  assert_true(detail_has("excludes every"));
  assert_int_equal(sc_vb_parse_hca("^mlx5_0", &sp), SC_SUCCESS);
  assert_int_equal(sc_vb_check_devices(&sp, devs, 2, "x"), SC_SUCCESS);
  assert_int_equal(sc_vb_parse_hca("mlx5_1:1", &sp), SC_SUCCESS);
  assert_int_equal(sc_vb_check_devices(&sp, devs, 2, "x"), SC_SUCCESS);
  assert_int_equal(sc_vb_parse_hca("", &sp), SC_SUCCESS);
  assert_int_equal(sc_vb_check_devices(&sp, devs, 2, "x"), SC_SUCCESS);
}

static void test_read_env(void **state) {
  (void)state;
  const char *vars[] = {"SC_IB_HCA",       "SC_IB_GID_INDEX",    "SC_IB_TIMEOUT",
                        "SC_IB_RETRY_CNT", "SC_IB_QPS_PER_PEER", "SC_IB_REG_CACHE_BYTES",
                        "SC_IB_GDR"};
  const size_t nvars = sizeof(vars) / sizeof(vars[0]);
  for (size_t i = 0; i < nvars; i++) unsetenv(vars[i]);
  sc_vb_env_t env;
  assert_int_equal(sc_vb_read_env(&env), SC_SUCCESS);
  assert_int_equal(env.gid_index, -1);
  assert_int_equal(env.qps_per_peer, 1);
  assert_int_equal(env.retry_cnt, 7);
  assert_int_equal(env.timeout, 20);
  assert_int_equal(env.reg_cache_bytes, (size_t)256 << 20);
  assert_int_equal(env.hca.n, 0);
  assert_int_equal(env.gdr, SC_VB_GDR_WANT_AUTO);
  setenv("SC_IB_QPS_PER_PEER", "4", 1);
  setenv("SC_IB_GDR", "PeerMem", 1);
  setenv("SC_IB_REG_CACHE_BYTES", "0", 1);
  setenv("SC_IB_GID_INDEX", "3", 1);
  setenv("SC_IB_HCA", "^mlx5_0", 1);
  assert_int_equal(sc_vb_read_env(&env), SC_SUCCESS);
  assert_int_equal(env.qps_per_peer, 4);
  assert_int_equal(env.reg_cache_bytes, 0);
  assert_int_equal(env.gid_index, 3);
  assert_int_equal(env.hca.exclude, 1);
  assert_int_equal(env.gdr, SC_VB_GDR_WANT_PEERMEM);
  const char *gdr[][2] = {{"dmabuf", "1"}, {"staging", "3"}, {"auto", "0"}};
  for (size_t i = 0; i < 3; i++) {
    setenv("SC_IB_GDR", gdr[i][0], 1);
    assert_int_equal(sc_vb_read_env(&env), SC_SUCCESS);
    assert_int_equal(env.gdr, gdr[i][1][0] - '0');
  }
  for (size_t i = 0; i < nvars; i++) unsetenv(vars[i]);
  /* Every variable out of range or malformed fails naming itself. */
  const char *bad[][2] = {{"SC_IB_GID_INDEX", "-2"},
                          {"SC_IB_GID_INDEX", "x"},
                          {"SC_IB_TIMEOUT", "0"},
                          {"SC_IB_TIMEOUT", "32"},
                          {"SC_IB_RETRY_CNT", "8"},
                          {"SC_IB_QPS_PER_PEER", "0"},
                          {"SC_IB_QPS_PER_PEER", "17"},
                          {"SC_IB_REG_CACHE_BYTES", "-1"},
                          {"SC_IB_REG_CACHE_BYTES", "2T"},
                          {"SC_IB_HCA", "mlx5_0:0"},
                          {"SC_IB_GDR", "gpu"},
                          {"SC_IB_GDR", "dmabuf2"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    setenv(bad[i][0], bad[i][1], 1);
    assert_int_equal(sc_vb_read_env(&env), SC_ERR_INVALID_ARG);
    assert_true(detail_has(bad[i][0]));
    unsetenv(bad[i][0]);
  }
}

/* ---- FIFO and credits ---- */

/* Random posting and out-of-order completion against a list of every message with
 * its outstanding count: a message may take its slot exactly when the message
 * DEPTH before it is complete; a slot completes exactly when its last piece does. */
static void test_fifo_credits(void **state) {
  (void)state;
  enum { N = 20000 };
  static int left[N]; /* reference: outstanding pieces of message n, -1 = not posted */
  for (int i = 0; i < N; i++) left[i] = -1;
  sc_vb_fifo_t f;
  memset(&f, 0, sizeof(f));
  int posted = 0;
  while (posted < N) {
    if (next_rand() % 2) {
      int ref_ok = posted < SC_VB_FIFO_DEPTH || left[posted - SC_VB_FIFO_DEPTH] == 0;
      assert_int_equal(sc_vb_fifo_can_take(&f), ref_ok);
      int pieces = 1 + (int)(next_rand() % 4);
      int s = sc_vb_fifo_take(&f, pieces);
      if (ref_ok) {
        assert_int_equal(s, posted % SC_VB_FIFO_DEPTH);
        left[posted++] = pieces;
      } else {
        assert_int_equal(s, -1);
      }
    } else {
      /* complete one piece of a random incomplete message among the last DEPTH */
      int lo = posted > SC_VB_FIFO_DEPTH ? posted - SC_VB_FIFO_DEPTH : 0;
      if (posted == lo) continue;
      int m = lo + (int)(next_rand() % (uint64_t)(posted - lo));
      int r = sc_vb_fifo_complete(&f, m % SC_VB_FIFO_DEPTH);
      if (left[m] == 0) {
        assert_int_equal(r, -1);
      } else {
        left[m]--;
        assert_int_equal(r, left[m] == 0);
      }
    }
    uint32_t busy = 0;
    for (int m = posted > SC_VB_FIFO_DEPTH ? posted - SC_VB_FIFO_DEPTH : 0; m < posted; m++)
      busy += left[m] > 0;
    assert_int_equal(f.inflight, busy);
    assert_true(f.inflight <= SC_VB_FIFO_DEPTH);
  }
  /* entries announce message n as seq n + 1, never 0 */
  sc_vb_cts_t e = {0};
  assert_false(sc_vb_cts_ready(&e, 0));
  e.seq = 1;
  assert_true(sc_vb_cts_ready(&e, 0));
  assert_false(sc_vb_cts_ready(&e, 1));
  assert_int_equal(sc_vb_fifo_take(&f, 0), -1);
  assert_int_equal(sc_vb_fifo_complete(&f, SC_VB_FIFO_DEPTH), -1);
}

/* ---- striping ---- */

static void test_stripes_tile(void **state) {
  (void)state;
  const size_t m = SC_VB_STRIPE_MIN;
  size_t lens[64] = {0, 1, 63, 64, m - 1, m, m + 1, 2 * m - 1, 2 * m, 2 * m + 1, 16 * m + 7};
  int nl = 11;
  while (nl < 64) lens[nl++] = next_rand() % (64 * m);
  static uint8_t cover[64 * 65536 + 16];
  for (int q = 1; q <= SC_VB_QPS_MAX; q++)
    for (int i = 0; i < nl; i++) {
      size_t len = lens[i];
      int k = sc_vb_nstripes(len, q);
      size_t ref_k = len / m < 1 ? 1 : len / m;
      if (ref_k > (size_t)q) ref_k = (size_t)q;
      assert_int_equal(k, (int)ref_k);
      memset(cover, 0, len);
      size_t total = 0;
      for (int j = 0; j < k; j++) {
        size_t off, n;
        sc_vb_stripe(len, k, j, &off, &n);
        if (j < k - 1) assert_int_equal(n % 64, 0);
        if (k > 1) assert_true(n > 0);
        for (size_t b = off; b < off + n; b++) {
          assert_int_equal(cover[b], 0);
          cover[b] = 1;
        }
        total += n;
      }
      assert_int_equal(total, len);
    }
  /* WRs per stripe: ceil(n / WR_MAX), 1 for an empty stripe */
  const size_t ns[] = {
      0, 1, SC_VB_WR_MAX - 1, SC_VB_WR_MAX, (size_t)SC_VB_WR_MAX + 1, (size_t)5 * SC_VB_WR_MAX};
  const int want[] = {1, 1, 1, 1, 2, 5};
  for (int i = 0; i < 6; i++) assert_int_equal(sc_vb_stripe_wrs(ns[i]), want[i]);
}

/* ---- immediate data and wr ids ---- */

static void test_imm(void **state) {
  (void)state;
  for (int slot = 0; slot < SC_VB_FIFO_DEPTH; slot++)
    for (int k = 1; k <= SC_VB_QPS_MAX; k++)
      for (int err = 0; err <= SC_VB_REFUSE_PRINT; err++)
        for (int cts = 0; cts < 2; cts++) {
          uint64_t msg = next_rand();
          sc_vb_imm_t in = {slot, err ? 1 : k, err, cts, (uint32_t)(msg % 16384)};
          uint32_t imm = sc_vb_imm_encode(&in);
          /* reference: the layout in decimal arithmetic; a refusal's reason
           * takes the stripe count's byte */
          uint64_t mid = err ? (uint64_t)err : (uint64_t)k;
          uint64_t ref = (uint64_t)slot + 256u * mid + 65536u * (uint64_t)(err != 0) +
                         131072u * (uint64_t)cts + 262144u * (msg % 16384);
          assert_int_equal(imm, (uint32_t)ref);
          sc_vb_imm_t out;
          sc_vb_imm_decode(imm, &out);
          assert_int_equal(out.slot, slot);
          assert_int_equal(out.nstripes, err ? 1 : k);
          assert_int_equal(out.error, err);
          assert_int_equal(out.cts, cts);
          assert_int_equal(out.seq14, msg % 16384);
        }
  /* a length refusal is the error bit over a one-stripe message's bits */
  sc_vb_imm_t len_ref = {5, 1, SC_VB_REFUSE_LENGTH, 0, 77};
  sc_vb_imm_t one = {5, 1, 0, 0, 77};
  assert_int_equal(sc_vb_imm_encode(&len_ref), sc_vb_imm_encode(&one) | 65536u);
  /* the error bit without a reason counts as a length refusal */
  sc_vb_imm_t out;
  sc_vb_imm_decode(65536u + 3u, &out);
  assert_int_equal(out.error, SC_VB_REFUSE_LENGTH);
  assert_int_equal(out.nstripes, 1);
  assert_int_equal(out.slot, 3);
}

/* ---- clear-to-send entry, refusal table, the sender's verdict ---- */

/* The entry as the receiver writes it: seq in its last four bytes (a reader
 * that sees it sees the rest), the print whole before it. */
static void test_cts_layout(void **state) {
  (void)state;
  assert_int_equal(sizeof(sc_vb_cts_t), 40);
  assert_int_equal(offsetof(sc_vb_cts_t, seq), 36);
  assert_true(offsetof(sc_vb_cts_t, fp) + SC_TP_FP_LEN <= offsetof(sc_vb_cts_t, seq));
  assert_int_equal(sizeof(((sc_vb_cts_t *)0)->fp), SC_TP_FP_LEN);
  assert_int_equal(sizeof(sc_vb_cts_t) % 8, 0); /* entries stay 8-byte aligned */
}

/* Every byte of a FIFO belongs to one entry or one refusal print, none past
 * the end: a map of owners, filled from the offsets. */
static void test_fifo_layout(void **state) {
  (void)state;
  const int ns[] = {1, 2, 3, 8, 33, 512};
  for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
    int n = ns[t];
    size_t bytes = sc_vb_fifo_bytes(n);
    size_t want = (size_t)n * SC_VB_FIFO_DEPTH * 40 + (size_t)n * 16;
    assert_int_equal(bytes, want);
    int *owner = calloc(bytes, sizeof(*owner));
    assert_non_null(owner);
    for (size_t e = 0; e < (size_t)n * SC_VB_FIFO_DEPTH; e++)
      for (size_t b = 0; b < sizeof(sc_vb_cts_t); b++) {
        size_t at = e * sizeof(sc_vb_cts_t) + b;
        assert_true(at < bytes);
        assert_int_equal(owner[at], 0);
        owner[at] = 1;
      }
    for (int w = 0; w < n; w++) {
      size_t off = sc_vb_refusal_offset(n, w);
      for (size_t b = 0; b < SC_TP_FP_LEN; b++) {
        assert_true(off + b < bytes);
        assert_int_equal(owner[off + b], 0);
        owner[off + b] = 2 + w;
      }
    }
    for (size_t i = 0; i < bytes; i++) assert_int_not_equal(owner[i], 0);
    free(owner);
  }
}

static void test_send_verdict(void **state) {
  (void)state;
  uint8_t none[SC_TP_FP_LEN] = {0}, a[SC_TP_FP_LEN], b[SC_TP_FP_LEN];
  for (int i = 0; i < SC_TP_FP_LEN; i++) a[i] = (uint8_t)(0x10 + i);
  /* a receive without a print: only the length counts */
  assert_int_equal(sc_vb_send_verdict(none, 100, a, 100), SC_VB_REFUSE_NONE);
  assert_int_equal(sc_vb_send_verdict(none, 100, none, 100), SC_VB_REFUSE_NONE);
  assert_int_equal(sc_vb_send_verdict(none, 100, a, 99), SC_VB_REFUSE_LENGTH);
  /* A send without a print (none of the operations' sends) is judged by its length alone. */
  assert_int_equal(sc_vb_send_verdict(a, 100, none, 100), SC_VB_REFUSE_NONE);
  assert_int_equal(sc_vb_send_verdict(a, 100, none, 101), SC_VB_REFUSE_LENGTH);
  /* the same print: the length */
  assert_int_equal(sc_vb_send_verdict(a, 4096, a, 4096), SC_VB_REFUSE_NONE);
  assert_int_equal(sc_vb_send_verdict(a, 4096, a, 4100), SC_VB_REFUSE_LENGTH);
  assert_int_equal(sc_vb_send_verdict(a, 0, a, 0), SC_VB_REFUSE_NONE);
  /* prints that differ in any one byte: the print, whatever the lengths */
  for (int i = 0; i < SC_TP_FP_LEN; i++) {
    memcpy(b, a, sizeof(b));
    b[i] ^= 0x40;
    assert_int_equal(sc_vb_send_verdict(b, 4096, a, 4096), SC_VB_REFUSE_PRINT);
    assert_int_equal(sc_vb_send_verdict(b, 4096, a, 16), SC_VB_REFUSE_PRINT);
    assert_int_equal(sc_vb_send_verdict(b, 16, a, 4096), SC_VB_REFUSE_PRINT);
  }
  /* sizes past 32 bits compare whole */
  assert_int_equal(sc_vb_send_verdict(a, (UINT64_C(1) << 32) + 8, a, 8), SC_VB_REFUSE_LENGTH);
}

static void test_wrid(void **state) {
  (void)state;
  for (int i = 0; i < 100000; i++) {
    sc_vb_wrid_t in = {1 + (int)(next_rand() % 3), (int)(next_rand() % (1u << 24)),
                       (int)(next_rand() % 256), (int)(next_rand() % 256),
                       (int)(next_rand() % 65536)};
    uint64_t id = sc_vb_wrid_encode(&in);
    sc_vb_wrid_t out;
    assert_int_equal(sc_vb_wrid_decode(id, &out), SC_SUCCESS);
    assert_memory_equal(&in, &out, sizeof(in));
  }
  sc_vb_wrid_t out;
  assert_int_equal(sc_vb_wrid_decode(0, &out), SC_ERR_INTERNAL);
  assert_int_equal(sc_vb_wrid_decode(0x1234, &out), SC_ERR_INTERNAL);
  sc_vb_wrid_t zero_kind = {0, 1, 1, 1, 1};
  assert_int_equal(sc_vb_wrid_decode(sc_vb_wrid_encode(&zero_kind), &out), SC_ERR_INTERNAL);
}

/* ---- blob and props ---- */

static void random_blob(sc_vb_blob_t *b) {
  memset(b, 0, sizeof(*b));
  for (int i = 0; i < 24; i++) b->sock[i] = (uint8_t)next_rand();
  for (int i = 0; i < 16; i++) b->gid[i] = (uint8_t)next_rand();
  b->host_id = next_rand() % 3;
  b->fifo_addr = next_rand();
  b->fifo_rkey = (uint32_t)next_rand();
  b->speed_mbps = (uint32_t)(next_rand() % 400000);
  b->lid = (uint16_t)next_rand();
  b->port = (uint8_t)(1 + next_rand() % 2);
  b->mtu = (uint8_t)(1 + next_rand() % 5);
  b->link_layer = (uint8_t)(1 + next_rand() % 2);
  b->qps = (uint8_t)(1 + next_rand() % SC_VB_QPS_MAX);
  b->gdr = (uint8_t)(next_rand() % 4);
  b->gid_index = (uint8_t)next_rand();
}

static void test_blob(void **state) {
  (void)state;
  assert_true(SC_VB_BLOB_LEN <= 192); /* SC_TP_ADDR_MAX */
  for (int i = 0; i < 1000; i++) {
    sc_vb_blob_t a, b;
    random_blob(&a);
    uint8_t w[SC_VB_BLOB_LEN];
    sc_vb_blob_pack(&a, w);
    assert_int_equal(sc_vb_blob_unpack(w, sizeof(w), &b), SC_SUCCESS);
    assert_memory_equal(&a, &b, sizeof(a));
    /* big-endian on the wire: the magic's first byte is 'S' */
    assert_int_equal(w[0], 'S');
    assert_int_equal(sc_vb_blob_unpack(w, sizeof(w) - 1, &b), SC_ERR_INVALID_ARG);
    w[73] = 0; /* qps */
    assert_int_equal(sc_vb_blob_unpack(w, sizeof(w), &b), SC_ERR_INVALID_ARG);
  }
  uint8_t tcp_like[SC_VB_BLOB_LEN] = {2, 0, 0x1f, 0x90};
  sc_vb_blob_t b;
  assert_int_equal(sc_vb_blob_unpack(tcp_like, sizeof(tcp_like), &b), SC_ERR_INVALID_ARG);
  assert_true(detail_has("SC_TRANSPORT=verbs"));
}

static void test_pair_props(void **state) {
  (void)state;
  for (int i = 0; i < 1000; i++) {
    sc_vb_blob_t a, b;
    random_blob(&a);
    random_blob(&b);
    sc_vb_pair_t ab, ba;
    sc_vb_pair_props(&a, &b, &ab);
    sc_vb_pair_props(&b, &a, &ba);
    /* every rank, either order */
    assert_int_equal(ab.same_host, ba.same_host);
    assert_true(ab.bandwidth_bps == ba.bandwidth_bps && ab.latency_s == ba.latency_s);
    assert_int_equal(ab.same_host, a.host_id == b.host_id);
    double slow = a.speed_mbps < b.speed_mbps ? a.speed_mbps : b.speed_mbps;
    assert_true(ab.bandwidth_bps <= slow * 1e6 / 8 + 1e-9);
    assert_true(ab.bandwidth_bps >= slow * 1e6 / 8 * 0.8);
    assert_true(ab.latency_s > 0 && ab.latency_s < 1e-4);
    assert_int_equal(sc_vb_path_mtu(a.mtu, b.mtu), a.mtu < b.mtu ? a.mtu : b.mtu);
    /* direct device buffers: both sides register device memory (modes 1, 2) */
    assert_int_equal(ab.device_mem, ba.device_mem);
    assert_int_equal(ab.device_mem, a.gdr % 3 != 0 && b.gdr % 3 != 0);
  }
}

/* The InfiniBand rates as the spec's table gives them (Gbit/s of data). */
static void test_port_rate(void **state) {
  (void)state;
  struct {
    int w, s;
    uint32_t mbps;
  } t[] = {{1, 1, 2000},     {2, 1, 8000},     {2, 4, 32000},   {8, 4, 96000},
           {2, 16, 54544},   {2, 32, 100000},  {2, 64, 200000}, {2, 128, 400000},
           {4, 128, 800000}, {16, 64, 100000}, {3, 32, 0},      {2, 3, 0}};
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    assert_int_equal(sc_vb_port_mbps(t[i].w, t[i].s), t[i].mbps);
}

/* Every combination against a table written out by hand. */
static void test_gdr_plan(void **state) {
  (void)state;
  enum { N = SC_VB_GDR_NONE, D = SC_VB_GDR_DMABUF, P = SC_VB_GDR_PEERMEM, S = SC_VB_GDR_STAGE };
  /* rows: (dmabuf works, peer memory works); columns: auto, dmabuf, peermem, staging */
  static const int expect[4][4] = {
      /* neither */ {S, S, S, S},
      /* dma-buf only */ {D, D, S, S},
      /* peer memory only */ {P, S, P, S},
      /* both */ {D, D, P, S},
  };
  for (int dev = 0; dev < 2; dev++)
    for (int row = 0; row < 4; row++)
      for (int want = 0; want < 4; want++) {
        sc_vb_gdr_caps_t c = {dev, row & 1, row >> 1};
        int got = sc_vb_gdr_plan(&c, (sc_vb_gdr_want_t)want);
        assert_int_equal(got, dev ? expect[row][want] : N);
        assert_non_null(sc_vb_gdr_name((sc_vb_gdr_mode_t)got));
      }
  /* direct between two ranks only when both register device memory */
  static const int direct[4][4] = {
      {0, 0, 0, 0}, /* none */
      {0, 1, 1, 0}, /* dma-buf */
      {0, 1, 1, 0}, /* peer memory */
      {0, 0, 0, 0}, /* staging */
  };
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) assert_int_equal(sc_vb_gdr_direct(a, b), direct[a][b]);
}

/* The dma-buf range: hand-computed cases, then the invariants on random ones. */
static void test_dmabuf_range(void **state) {
  (void)state;
  static const struct {
    uintptr_t addr;
    size_t len, page;
    uintptr_t start;
    size_t size, off;
  } t[] = {
      {0x10000, 4096, 4096, 0x10000, 4096, 0},     /* exactly one page */
      {0x10010, 100, 4096, 0x10000, 4096, 0x10},   /* inside one page */
      {0x10ff0, 0x20, 4096, 0x10000, 8192, 0xff0}, /* across a page boundary */
      {0x11000, 0, 4096, 0x11000, 4096, 0},        /* empty: one page */
      {0x10001, 0x2fff, 4096, 0x10000, 0x3000, 1}, /* ends on a boundary */
      {0x10001, 0x3000, 4096, 0x10000, 0x4000, 1}, /* one byte past it */
      {0x7f0000012345, 0x10000, 65536, 0x7f0000010000, 0x20000, 0x2345}, /* 64 KiB pages */
  };
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
    uintptr_t start;
    size_t size, off;
    sc_vb_dmabuf_range(t[i].addr, t[i].len, t[i].page, &start, &size, &off);
    assert_int_equal(start, t[i].start);
    assert_int_equal(size, t[i].size);
    assert_int_equal(off, t[i].off);
  }
  for (int i = 0; i < 10000; i++) {
    size_t page = (size_t)4096 << (next_rand() % 5);
    uintptr_t addr = (uintptr_t)(next_rand() % ((uint64_t)1 << 47));
    size_t len = (size_t)(next_rand() % ((uint64_t)1 << (next_rand() % 30)));
    uintptr_t start;
    size_t size, off;
    sc_vb_dmabuf_range(addr, len, page, &start, &size, &off);
    assert_int_equal(start % page, 0);
    assert_int_equal(size % page, 0);
    assert_true(start <= addr && addr - start < page);
    assert_int_equal(off, addr - start);
    assert_true(start + size >= addr + len && start + size - (addr + len) < page + (len == 0));
  }
}

/* ---- the RDMA device nearest a GPU ---- */

#define GPU0 "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0"

/* NIC paths against GPU0 (node 0), the shared PCI devices counted by hand:
 * 00:01.0 root port, 01:00.0 switch upstream port, 02:08.0 downstream port. */
static const struct {
  const char *nic;
  int numa;
  int shared; /* by hand */
} near_tab[] = {
    /* 0: the other downstream port of GPU0's switch: 00:01.0, 01:00.0 */
    {"/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:06:00.0", 0, 2},
    /* 1: behind the same downstream port (a second function): all three */
    {"/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.1", 0, 3},
    /* 2: another root port of the same host bridge, node 0: none */
    {"/sys/devices/pci0000:00/0000:00:02.0/0000:07:00.0", 0, 0},
    /* 3: another host bridge, node 1 */
    {"/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 1, 0},
    /* 4: a look-alike prefix that differs in the function digit: none */
    {"/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:09:00.0", 0, 0},
    /* 5: under the same root port only: 00:01.0 */
    {"/sys/devices/pci0000:00/0000:00:01.0/0000:0a:00.0", 1, 1},
    /* 6: unknown (no sysfs entry), node unknown */
    {"", -1, 0},
    /* 7: another domain whose later components look alike: none */
    {"/sys/devices/pci0001:00/0001:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0", 1, 0},
};

static void test_near_nic(void **state) {
  (void)state;
  const int n = (int)(sizeof(near_tab) / sizeof(near_tab[0]));
  const char *paths[16];
  int numa[16], order[16];
  for (int i = 0; i < n; i++) {
    paths[i] = near_tab[i].nic;
    numa[i] = near_tab[i].numa;
    if (near_tab[i].nic[0])
      assert_int_equal(sc_vb_pci_shared(GPU0, near_tab[i].nic), near_tab[i].shared);
  }
  /* by hand: switch first (deepest first: 1, then 0, then 5 which is also on
   * node 1), then GPU0's node 0 (2, 4 in list order), then the rest in list
   * order (3, 6, 7) */
  static const int want[] = {1, 0, 5, 2, 4, 3, 6, 7};
  sc_vb_near_order(GPU0, 0, paths, numa, n, order);
  for (int i = 0; i < n; i++) assert_int_equal(order[i], want[i]);
  assert_string_equal(sc_vb_near_level(sc_vb_near_score(GPU0, 0, paths[0], 0)), "same PCI switch");
  assert_string_equal(sc_vb_near_level(sc_vb_near_score(GPU0, 0, paths[2], 0)), "same NUMA node");
  assert_string_equal(sc_vb_near_level(sc_vb_near_score(GPU0, 0, paths[3], 1)), "no affinity");
  /* an unknown GPU path or node: NUMA alone decides, unknown nodes never match */
  sc_vb_near_order("", 1, paths, numa, n, order);
  static const int want_numa1[] = {3, 5, 7, 0, 1, 2, 4, 6};
  for (int i = 0; i < n; i++) assert_int_equal(order[i], want_numa1[i]);
  sc_vb_near_order("", -1, paths, numa, n, order);
  for (int i = 0; i < n; i++) assert_int_equal(order[i], i);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hca_parse_and_match),
      cmocka_unit_test(test_check_devices),
      cmocka_unit_test(test_read_env),
      cmocka_unit_test(test_fifo_credits),
      cmocka_unit_test(test_stripes_tile),
      cmocka_unit_test(test_imm),
      cmocka_unit_test(test_cts_layout),
      cmocka_unit_test(test_fifo_layout),
      cmocka_unit_test(test_send_verdict),
      cmocka_unit_test(test_wrid),
      cmocka_unit_test(test_blob),
      cmocka_unit_test(test_pair_props),
      cmocka_unit_test(test_port_rate),
      cmocka_unit_test(test_gdr_plan),
      cmocka_unit_test(test_dmabuf_range),
      cmocka_unit_test(test_near_nic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
