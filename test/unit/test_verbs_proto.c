/* The verbs transport's protocol core, which needs no RDMA device: SC_IB_*
 * settings and SC_IB_HCA matching, the device-absent decision, FIFO slots
 * and credits, striping, immediate data, work-request ids, the address
 * blob, pair props and the GPUDirect plan. Each is checked against a
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

#include "base/error.h"
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
                        "SC_IB_RETRY_CNT", "SC_IB_QPS_PER_PEER", "SC_IB_REG_CACHE_BYTES"};
  for (size_t i = 0; i < 6; i++) unsetenv(vars[i]);
  sc_vb_env_t env;
  assert_int_equal(sc_vb_read_env(&env), SC_SUCCESS);
  assert_int_equal(env.gid_index, -1);
  assert_int_equal(env.qps_per_peer, 1);
  assert_int_equal(env.retry_cnt, 7);
  assert_int_equal(env.timeout, 20);
  assert_int_equal(env.reg_cache_bytes, (size_t)256 << 20);
  assert_int_equal(env.hca.n, 0);
  setenv("SC_IB_QPS_PER_PEER", "4", 1);
  setenv("SC_IB_REG_CACHE_BYTES", "0", 1);
  setenv("SC_IB_GID_INDEX", "3", 1);
  setenv("SC_IB_HCA", "^mlx5_0", 1);
  assert_int_equal(sc_vb_read_env(&env), SC_SUCCESS);
  assert_int_equal(env.qps_per_peer, 4);
  assert_int_equal(env.reg_cache_bytes, 0);
  assert_int_equal(env.gid_index, 3);
  assert_int_equal(env.hca.exclude, 1);
  for (size_t i = 0; i < 6; i++) unsetenv(vars[i]);
  /* Every variable out of range or malformed fails naming itself. */
  const char *bad[][2] = {{"SC_IB_GID_INDEX", "-2"},       {"SC_IB_GID_INDEX", "x"},
                          {"SC_IB_TIMEOUT", "0"},          {"SC_IB_TIMEOUT", "32"},
                          {"SC_IB_RETRY_CNT", "8"},        {"SC_IB_QPS_PER_PEER", "0"},
                          {"SC_IB_QPS_PER_PEER", "17"},    {"SC_IB_REG_CACHE_BYTES", "-1"},
                          {"SC_IB_REG_CACHE_BYTES", "2T"}, {"SC_IB_HCA", "mlx5_0:0"}};
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
      for (int flags = 0; flags < 4; flags++) {
        uint64_t msg = next_rand();
        int err = flags & 1, cts = flags >> 1;
        sc_vb_imm_t in = {slot, k, err, cts, (uint32_t)(msg % 16384)};
        uint32_t imm = sc_vb_imm_encode(&in);
        /* reference: the layout in decimal arithmetic */
        uint64_t ref = (uint64_t)slot + 256u * (uint64_t)k + 65536u * (uint64_t)err +
                       131072u * (uint64_t)cts + 262144u * (msg % 16384);
        assert_int_equal(imm, (uint32_t)ref);
        sc_vb_imm_t out;
        sc_vb_imm_decode(imm, &out);
        assert_int_equal(out.slot, slot);
        assert_int_equal(out.nstripes, k);
        assert_int_equal(out.error, err);
        assert_int_equal(out.cts, cts);
        assert_int_equal(out.seq14, msg % 16384);
      }
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

static void test_gdr_plan(void **state) {
  (void)state;
  for (int m = 0; m < 16; m++) {
    sc_vb_gdr_caps_t c = {m & 1, (m >> 1) & 1, (m >> 2) & 1, (m >> 3) & 1};
    sc_vb_gdr_mode_t want = !c.have_cuda                           ? SC_VB_GDR_NONE
                            : (c.have_reg_dmabuf && c.cuda_dmabuf) ? SC_VB_GDR_DMABUF
                            : c.peermem_loaded                     ? SC_VB_GDR_PEERMEM
                                                                   : SC_VB_GDR_STAGE;
    assert_int_equal(sc_vb_gdr_plan(&c), want);
    assert_non_null(sc_vb_gdr_name(want));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hca_parse_and_match),
      cmocka_unit_test(test_check_devices),
      cmocka_unit_test(test_read_env),
      cmocka_unit_test(test_fifo_credits),
      cmocka_unit_test(test_stripes_tile),
      cmocka_unit_test(test_imm),
      cmocka_unit_test(test_wrid),
      cmocka_unit_test(test_blob),
      cmocka_unit_test(test_pair_props),
      cmocka_unit_test(test_port_rate),
      cmocka_unit_test(test_gdr_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
