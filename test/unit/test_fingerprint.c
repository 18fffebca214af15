/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_CHECK_MISMATCH fingerprints as pure functions: wire encoding, which
 * arguments count, the verdict (reference print, cause/victim), the error
 * text, and the exchange schedule run in the simulator for 1..13 ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/sparse.h"
#include "lib/core/comm.h"
#include "lib/core/fingerprint.h"
#include "test/sim/simulator.h"

static sc_fingerprint_t fp_of(sc_coll_t coll, size_t count, sc_dtype_t dt, sc_redop_t op, int root,
                              uint64_t seq) {
  sc_op_t o = {.coll = coll, .count = count, .dtype = dt, .op = op, .root = root, .seq = seq};
  sc_fingerprint_t fp;
  sc_fp_from_op(&o, &fp);
  return fp;
}

static void test_roundtrip(void **state) {
  (void)state;
  sc_fingerprint_t a = {.seq = UINT64_MAX - 1,
                        .count = ((uint64_t)1 << 40) + 3,
                        .dense_len = 77,
                        .root = -1,
                        .coll = SC_COLL_REDUCE,
                        .dtype = SC_BFLOAT16,
                        .redop = SC_AVG,
                        .variant = 3 /* the tree's code */};
  uint8_t w[SC_FP_WIRE_BYTES];
  sc_fp_encode(&a, w);
  /* Big-endian layout, independent of the host. */
  assert_int_equal(w[0], 'S');
  assert_int_equal(w[3], 'P');
  assert_int_equal(w[12], 0xff); /* root -1 */
  assert_int_equal(w[16], 0xff); /* seq high byte */
  assert_int_equal(w[23], 0xfe); /* seq low byte */
  assert_int_equal(w[26], 1);    /* count bit 40 */
  sc_fingerprint_t b;
  assert_int_equal(sc_fp_decode(w, 3, &b), SC_SUCCESS);
  assert_true(sc_fp_equal(&a, &b));
  assert_int_equal(b.root, -1);
  assert_true(b.seq == UINT64_MAX - 1);
  assert_true(b.count == ((uint64_t)1 << 40) + 3);
}

static void test_decode_rejects(void **state) {
  (void)state;
  sc_fingerprint_t a = fp_of(SC_COLL_ALLREDUCE, 10, SC_FLOAT32, SC_SUM, 0, 1), b;
  uint8_t w[SC_FP_WIRE_BYTES];
  sc_fp_encode(&a, w);
  w[0] ^= 1; /* magic */
  assert_int_equal(sc_fp_decode(w, 5, &b), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "rank 5"));
  assert_non_null(strstr(sc_last_error(), "SC_CHECK_MISMATCH"));
  sc_fp_encode(&a, w);
  w[4] ^= 3; /* version */
  assert_int_equal(sc_fp_decode(w, 0, &b), SC_ERR_REMOTE);
  sc_fp_encode(&a, w);
  w[10] = 1; /* reserved */
  assert_int_equal(sc_fp_decode(w, 0, &b), SC_ERR_REMOTE);
  /* Data of another operation (all zero) is not a print either. */
  memset(w, 0, sizeof(w));
  assert_int_equal(sc_fp_decode(w, 0, &b), SC_ERR_REMOTE);
}

/* The 16-byte print of every message, against its layout written out byte
 * by byte. */
static void test_msg_layout(void **state) {
  (void)state;
  sc_fingerprint_t a = {.seq = 0x123456789abcULL,
                        .count = 0x0102030405060708ULL,
                        .dense_len = 99,
                        .root = 0x10203,
                        .coll = 4,
                        .dtype = 9,
                        .redop = 2,
                        .variant = 3};
  uint8_t w[SC_FP_MSG_BYTES];
  sc_fp_msg_encode(&a, w);
  const uint8_t want[SC_FP_MSG_BYTES] = {0x13, 4,    9,    2,    0x9a, 0xbc, 0x01, 0x02,
                                         0x04, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
  assert_memory_equal(w, want, sizeof(want));
  sc_fingerprint_t b;
  assert_int_equal(sc_fp_msg_decode(w, 0x123456789abcULL, 1, &b), SC_SUCCESS);
  assert_true(b.seq == 0x123456789abcULL);
  assert_true(b.count == 0x0002030405060708ULL); /* the low 56 bits */
  assert_int_equal(b.root, 0x10203);
  assert_int_equal(b.coll, 4);
  assert_int_equal(b.dtype, 9);
  assert_int_equal(b.redop, 2);
  assert_int_equal(b.variant, 3);
  assert_true(b.dense_len == 0);
  /* No root: 0 on the wire, -1 back. */
  a.root = -1;
  sc_fp_msg_encode(&a, w);
  assert_int_equal(w[6] | w[7] | w[8], 0);
  assert_int_equal(sc_fp_msg_decode(w, a.seq, 1, &b), SC_SUCCESS);
  assert_int_equal(b.root, -1);
}

/* The receiver's own number anchors the print's 16 bits, across a wrap. */
static void test_msg_seq_near(void **state) {
  (void)state;
  const uint64_t cases[][2] = {
      /* sender's seq, receiver's seq */
      {1, 1},
      {7, 5},
      {5, 7},
      {0x10001, 0xffff},
      {0xffff, 0x10001},
      {0x28000, 0x20001},
      {0x20001, 0x27fff},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    sc_fingerprint_t a = fp_of(SC_COLL_ALLREDUCE, 8, SC_FLOAT32, SC_SUM, 0, cases[i][0]), b;
    uint8_t w[SC_FP_MSG_BYTES];
    sc_fp_msg_encode(&a, w);
    assert_int_equal(sc_fp_msg_decode(w, cases[i][1], 0, &b), SC_SUCCESS);
    assert_true(b.seq == cases[i][0]); /* all within 2^15 of each other */
  }
}

/* Equal calls give equal bytes; each field that differs changes them; a
 * print is never all zero (the transports' "no print"); another version is
 * refused naming the peer. */
static void test_msg_differs(void **state) {
  (void)state;
  sc_fingerprint_t base = fp_of(SC_COLL_ALLREDUCE, 1000, SC_FLOAT32, SC_SUM, 0, 42);
  uint8_t w0[SC_FP_MSG_BYTES], w1[SC_FP_MSG_BYTES];
  sc_fp_msg_encode(&base, w0);
  sc_fingerprint_t same = fp_of(SC_COLL_ALLREDUCE, 1000, SC_FLOAT32, SC_SUM, 3, 42);
  sc_fp_msg_encode(&same, w1); /* an all-reduce's root does not count */
  assert_memory_equal(w0, w1, SC_FP_MSG_BYTES);
  const sc_fingerprint_t other[] = {
      fp_of(SC_COLL_ALLREDUCE, 999, SC_FLOAT32, SC_SUM, 0, 42),
      fp_of(SC_COLL_ALLREDUCE, 1000, SC_FLOAT64, SC_SUM, 0, 42),
      fp_of(SC_COLL_ALLREDUCE, 1000, SC_FLOAT32, SC_MAX, 0, 42),
      fp_of(SC_COLL_ALLREDUCE, 1000, SC_FLOAT32, SC_SUM, 0, 43),
      fp_of(SC_COLL_REDUCE, 1000, SC_FLOAT32, SC_SUM, 0, 42),
      fp_of(SC_COLL_BROADCAST, 1000, SC_FLOAT32, SC_SUM, 1, 42),
      fp_of(SC_COLL_BARRIER, 0, SC_FLOAT32, SC_SUM, 0, 42),
  };
  for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
    sc_fp_msg_encode(&other[i], w1);
    assert_memory_not_equal(w0, w1, SC_FP_MSG_BYTES);
  }
  sc_fingerprint_t zero;
  memset(&zero, 0, sizeof(zero));
  sc_fp_msg_encode(&zero, w1);
  assert_int_not_equal(w1[0], 0);
  w1[0] = 0x20; /* version 2 */
  sc_fingerprint_t b;
  assert_int_equal(sc_fp_msg_decode(w1, 0, 6, &b), SC_ERR_REMOTE);
  assert_non_null(strstr(sc_last_error(), "rank 6"));
}

/* A message's mismatch in words: both calls, each print read against the
 * receiver's own number; a print that is none or of another version still
 * names the peer. */
static void test_msg_mismatch_text(void **state) {
  (void)state;
  sc_fingerprint_t mine = fp_of(SC_COLL_ALLREDUCE, 1000000, SC_FLOAT32, SC_SUM, 0, 0x10007),
                   theirs = fp_of(SC_COLL_ALLREDUCE, 999999, SC_FLOAT32, SC_SUM, 0, 0x10007);
  uint8_t a[SC_FP_MSG_BYTES], b[SC_FP_MSG_BYTES];
  sc_fp_msg_encode(&mine, a);
  sc_fp_msg_encode(&theirs, b);
  char out[512];
  sc_fp_msg_mismatch_text(out, sizeof(out), 0, "h0", a, 1, "h1", b, 0x10007);
  assert_string_equal(out, "rank 1 (h1) called allreduce #65543 (count 999999, float32, sum, root "
                           "-1) where rank 0 (h0) called allreduce #65543 (count 1000000, float32, "
                           "sum, root -1)");
  /* A skipped call: the peer's number is one ahead of this rank's. */
  sc_fingerprint_t next = fp_of(SC_COLL_BARRIER, 0, SC_FLOAT32, SC_SUM, 0, 0x10008);
  sc_fp_msg_encode(&next, b);
  sc_fp_msg_mismatch_text(out, sizeof(out), 2, "h2", a, 3, "h3", b, 0x10007);
  assert_string_equal(out, "rank 3 (h3) called barrier #65544 (count 0, no dtype, no op, root -1) "
                           "where rank 2 (h2) called allreduce #65543 (count 1000000, float32, "
                           "sum, root -1)");
  memset(b, 0, sizeof(b));
  sc_fp_msg_mismatch_text(out, sizeof(out), 0, "h0", a, 1, "h1", b, 0x10007);
  assert_string_equal(out, "rank 1 (h1) called another operation (its messages carry no print of "
                           "it) where rank 0 (h0) called allreduce #65543 (count 1000000, "
                           "float32, sum, root -1)");
  b[0] = 0x20;
  sc_fp_msg_mismatch_text(out, sizeof(out), 0, "h0", a, 1, "h1", b, 0x10007);
  assert_non_null(strstr(out, "rank 1 (h1) called another operation (its print is of version 2"));
}

static void test_from_op(void **state) {
  (void)state;
  /* Arguments a collective ignores do not count. */
  sc_fingerprint_t a = fp_of(SC_COLL_ALLREDUCE, 10, SC_FLOAT32, SC_SUM, 0, 4);
  sc_fingerprint_t b = fp_of(SC_COLL_ALLREDUCE, 10, SC_FLOAT32, SC_SUM, 3, 4);
  assert_true(sc_fp_equal(&a, &b));
  assert_int_equal(a.root, -1);
  a = fp_of(SC_COLL_BROADCAST, 10, SC_FLOAT32, SC_SUM, 1, 4);
  b = fp_of(SC_COLL_BROADCAST, 10, SC_FLOAT32, SC_MAX, 1, 4);
  assert_true(sc_fp_equal(&a, &b));
  assert_int_equal(a.redop, SC_FP_NONE);
  a = fp_of(SC_COLL_BARRIER, 0, SC_UINT8, SC_SUM, 0, 4);
  b = fp_of(SC_COLL_BARRIER, 0, SC_FLOAT64, SC_MIN, 2, 4);
  assert_true(sc_fp_equal(&a, &b));
  /* Those that count do, one at a time. */
  sc_fingerprint_t base = fp_of(SC_COLL_REDUCE, 10, SC_FLOAT32, SC_SUM, 1, 4);
  sc_fingerprint_t diff[] = {
      fp_of(SC_COLL_REDUCE, 11, SC_FLOAT32, SC_SUM, 1, 4),
      fp_of(SC_COLL_REDUCE, 10, SC_INT32, SC_SUM, 1, 4),
      fp_of(SC_COLL_REDUCE, 10, SC_FLOAT32, SC_PROD, 1, 4),
      fp_of(SC_COLL_REDUCE, 10, SC_FLOAT32, SC_SUM, 0, 4),
      fp_of(SC_COLL_REDUCE, 10, SC_FLOAT32, SC_SUM, 1, 5),
      fp_of(SC_COLL_ALLREDUCE, 10, SC_FLOAT32, SC_SUM, 1, 4),
  };
  for (size_t i = 0; i < sizeof(diff) / sizeof(diff[0]); i++)
    assert_false(sc_fp_equal(&base, &diff[i]));
  /* Dense vs sparse, and the sparse algorithm. */
  sc_sparse_op_t sp = {.k = 10, .dense_len = 1000};
  sc_op_t o = {.coll = SC_COLL_ALLREDUCE,
               .count = 10,
               .dtype = SC_FLOAT32,
               .op = SC_SUM,
               .seq = 4,
               .sparse = &sp,
               .gen = sc_sparse_gtopk_schedule};
  sc_fingerprint_t s1, s2;
  sc_fp_from_op(&o, &s1);
  /* The codes on the wire since version 2: gtopk 2, tree 3, allgather 4, hier 6. */
  assert_int_equal(s1.variant, 2);
  assert_int_equal(s1.dense_len, 1000);
  o.gen = sc_sparse_allgather_schedule;
  sc_fp_from_op(&o, &s2);
  assert_int_equal(s2.variant, 4);
  assert_false(sc_fp_equal(&s1, &s2));
  sc_fingerprint_t s3;
  o.gen = sc_sparse_tree_schedule;
  sc_fp_from_op(&o, &s3);
  assert_int_equal(s3.variant, 3);
  o.gen = sc_sparse_hier_schedule;
  sc_fp_from_op(&o, &s3);
  assert_int_equal(s3.variant, 6);
  o.gen = sc_ring_allreduce_schedule; /* a sparse op on no registered sparse generator */
  sc_fp_from_op(&o, &s3);
  assert_int_equal(s3.variant, SC_FP_SPARSE_OTHER);
  a = fp_of(SC_COLL_ALLREDUCE, 10, SC_FLOAT32, SC_SUM, 0, 4);
  assert_false(sc_fp_equal(&a, &s1));
}

static void test_describe(void **state) {
  (void)state;
  char buf[160];
  sc_fingerprint_t a = fp_of(SC_COLL_ALLREDUCE, 1000, SC_FLOAT32, SC_SUM, 0, 7);
  assert_string_equal(sc_fp_describe(&a, buf, sizeof(buf)),
                      "allreduce #7 (count 1000, float32, sum, root -1)");
  a = fp_of(SC_COLL_BROADCAST, 5, SC_INT8, SC_SUM, 2, 0);
  assert_string_equal(sc_fp_describe(&a, buf, sizeof(buf)),
                      "broadcast #0 (count 5, int8, no op, root 2)");
  a = fp_of(SC_COLL_BARRIER, 0, SC_UINT8, SC_SUM, 0, 3);
  assert_string_equal(sc_fp_describe(&a, buf, sizeof(buf)),
                      "barrier #3 (count 0, no dtype, no op, root -1)");
  a.variant = 2;
  a.coll = SC_COLL_ALLREDUCE;
  a.dtype = SC_FLOAT16;
  a.redop = SC_SUM;
  a.count = 8;
  a.dense_len = 4096;
  assert_string_equal(sc_fp_describe(&a, buf, sizeof(buf)),
                      "sparse gtopk allreduce #3 (k 8 of dense_len 4096, float16, sum, root -1)");
  a.variant = 6;
  assert_string_equal(sc_fp_describe(&a, buf, sizeof(buf)),
                      "sparse hier allreduce #3 (k 8 of dense_len 4096, float16, sum, root -1)");
  a.variant = SC_FP_SPARSE_OTHER;
  assert_string_equal(sc_fp_describe(&a, buf, sizeof(buf)),
                      "sparse allreduce #3 (k 8 of dense_len 4096, float16, sum, root -1)");
  a.variant = 200;
  a.coll = 99;
  sc_fp_describe(&a, buf, sizeof(buf)); /* a bad peer's print still formats */
  assert_non_null(strstr(buf, "invalid-collective"));
}

static void judge(const sc_fingerprint_t *all, int n, int ref, int nref, int first) {
  sc_fp_verdict_t v;
  sc_fp_judge(all, n, &v);
  assert_int_equal(v.mismatch, 1);
  assert_int_equal(v.ref, ref);
  assert_int_equal(v.nref, nref);
  assert_int_equal(v.ndiff, n - nref);
  assert_int_equal(v.first_diff, first);
}

static void test_judge(void **state) {
  (void)state;
  sc_fingerprint_t A = fp_of(SC_COLL_ALLREDUCE, 10, SC_FLOAT32, SC_SUM, 0, 1);
  sc_fingerprint_t B = fp_of(SC_COLL_ALLREDUCE, 9, SC_FLOAT32, SC_SUM, 0, 1);
  sc_fingerprint_t C = fp_of(SC_COLL_BROADCAST, 10, SC_FLOAT32, SC_SUM, 0, 1);
  sc_fingerprint_t same[5] = {A, A, A, A, A};
  sc_fp_verdict_t v;
  sc_fp_judge(same, 5, &v);
  assert_int_equal(v.mismatch, 0);
  sc_fp_judge(same, 1, &v);
  assert_int_equal(v.mismatch, 0);
  judge((sc_fingerprint_t[]){A, A, B, A}, 4, 0, 3, 2);
  judge((sc_fingerprint_t[]){A, B}, 2, 0, 1, 1);       /* tie: the lowest rank's */
  judge((sc_fingerprint_t[]){B, A, A, A}, 4, 1, 3, 0); /* the majority need not hold rank 0 */
  judge((sc_fingerprint_t[]){A, B, C}, 3, 0, 1, 1);
  judge((sc_fingerprint_t[]){A, B, B, C, C, C}, 6, 3, 3, 0);
  judge((sc_fingerprint_t[]){A, B, B, A, C}, 5, 0, 2, 1); /* tie between A and B: A at rank 0 */
}

static const char *hosts(const void *ctx, int r) {
  (void)ctx;
  static const char *const h[] = {"node-a", "node-b", "node-c", "node-d"};
  return h[r];
}

static void test_message(void **state) {
  (void)state;
  sc_fingerprint_t A = fp_of(SC_COLL_ALLREDUCE, 1000, SC_FLOAT32, SC_SUM, 0, 7);
  sc_fingerprint_t B = fp_of(SC_COLL_ALLREDUCE, 999, SC_FLOAT32, SC_SUM, 0, 7);
  sc_fingerprint_t all[4] = {A, A, B, A};
  sc_fp_verdict_t v;
  sc_fp_judge(all, 4, &v);
  char msg[SC_ERRMSG_MAX];
  sc_fp_mismatch_message(msg, sizeof(msg), all, 4, 2, &v, hosts, NULL);
  assert_string_equal(msg, "rank 2 of 4 (node-c): allreduce #7 (count 999, float32, sum, root -1) "
                           "does not match rank 0 (node-a): allreduce #7 (count 1000, float32, "
                           "sum, root -1); this rank is a cause: the expected call is rank 0's, "
                           "made by 3 of 4 ranks (the majority); 1 rank differs, the first is "
                           "rank 2");
  sc_fp_mismatch_message(msg, sizeof(msg), all, 4, 3, &v, hosts, NULL);
  assert_non_null(strstr(msg, "rank 3 of 4 (node-d): allreduce #7 (count 1000, float32, sum, "
                              "root -1) does not match rank 2 (node-c): allreduce #7 (count 999"));
  assert_non_null(strstr(msg, "this rank is a victim"));
  /* Two ranks: no majority, rank 0's call is the expected one. */
  sc_fingerprint_t two[2] = {A, B};
  sc_fp_judge(two, 2, &v);
  sc_fp_mismatch_message(msg, sizeof(msg), two, 2, 0, &v, hosts, NULL);
  assert_non_null(strstr(msg, "this rank is a victim"));
  assert_non_null(strstr(msg, "no majority"));
  assert_non_null(strstr(msg, "does not match rank 1 (node-b)"));
  sc_fp_mismatch_message(msg, sizeof(msg), two, 2, 1, &v, hosts, NULL);
  assert_non_null(strstr(msg, "this rank is a cause"));
  assert_non_null(strstr(msg, "does not match rank 0 (node-a)"));
  /* A short buffer truncates, never overflows. */
  char tiny[16];
  memset(tiny, 'x', sizeof(tiny));
  sc_fp_mismatch_message(tiny, 10, two, 2, 1, &v, hosts, NULL);
  assert_int_equal(strlen(tiny), 9);
  assert_int_equal(tiny[10], 'x');
}

/* The exchange in the simulator: every rank ends with all prints in rank
 * order, by the direct schedule (<= SC_FP_DIRECT_MAX ranks) and by recursive
 * doubling above, with eager and rendezvous sends. */
static void test_schedule_sim(void **state) {
  (void)state;
  const size_t w = SC_FP_WIRE_BYTES;
  for (int model = 0; model < 2; model++) {
    for (int p = 1; p <= 13; p++) {
      sc_sched_t *s = calloc((size_t)p, sizeof(*s));
      sc_sim_rank_t *rk = calloc((size_t)p, sizeof(*rk));
      uint8_t *send = malloc((size_t)p * w), *recv = malloc((size_t)p * p * w);
      memset(recv, 0xee, (size_t)p * p * w);
      for (int r = 0; r < p; r++) {
        sc_sched_init(&s[r]);
        assert_int_equal(sc_fp_schedule(p, r, &s[r]), SC_SUCCESS);
        for (size_t i = 0; i < w; i++) send[(size_t)r * w + i] = (uint8_t)(r * 31 + i);
        rk[r] = (sc_sim_rank_t){.sched = &s[r],
                                .send = send + (size_t)r * w,
                                .send_count = w,
                                .recv = recv + (size_t)r * p * w,
                                .recv_count = (size_t)p * w};
      }
      sc_sim_config_t cfg = {.nranks = p,
                             .dtype = SC_UINT8,
                             .elem_size = 1,
                             .op = SC_SUM,
                             .model = model ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER};
      char err[512] = "";
      sc_sim_stats_t st;
      int rc = sc_sim_run(&cfg, rk, &st, err, sizeof(err));
      if (rc != 0) fail_msg("p=%d model %d: %s", p, model, err);
      for (int r = 0; r < p; r++)
        assert_memory_equal(recv + (size_t)r * p * w, send, (size_t)p * w);
      if (p > 1 && p <= SC_FP_DIRECT_MAX)
        assert_int_equal(st.messages, (size_t)p * (p - 1)); /* one round, all pairs */
      for (int r = 0; r < p; r++) sc_sched_free(&s[r]);
      free(s);
      free(rk);
      free(send);
      free(recv);
    }
  }
  sc_sched_t s;
  sc_sched_init(&s);
  assert_int_equal(sc_fp_schedule(4, 4, &s), SC_ERR_INVALID_ARG);
  sc_sched_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_decode_rejects),
      cmocka_unit_test(test_from_op),
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_judge),
      cmocka_unit_test(test_message),
      cmocka_unit_test(test_schedule_sim),
      cmocka_unit_test(test_msg_layout),
      cmocka_unit_test(test_msg_seq_near),
      cmocka_unit_test(test_msg_differs),
      cmocka_unit_test(test_msg_mismatch_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
