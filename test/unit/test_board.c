/* SPDX-License-Identifier: BSD-3-Clause */
/* Which calls take the board and what each rank posts (lib/core/board.c's
 * sc_board_payload), and the post's call description, against the rules
 * written out here case by case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "lib/core/board.h"

#define NONE ((size_t)-1)

static sc_op_t op_of(sc_coll_t coll, size_t count, sc_dtype_t dt, int root) {
  sc_op_t o;
  memset(&o, 0, sizeof(o));
  o.coll = coll;
  o.count = count;
  o.dtype = dt;
  o.op = SC_SUM;
  o.root = root;
  return o;
}

static void test_payload_sizes(void **state) {
  (void)state;
  const size_t max = 1024;
  /* float32: 256 elements fit, 257 do not; the same bytes for every
   * collective whose part is count elements. */
  const sc_coll_t per_rank[] = {SC_COLL_ALLREDUCE, SC_COLL_REDUCE, SC_COLL_ALLGATHER};
  for (size_t c = 0; c < 3; c++) {
    sc_op_t o = op_of(per_rank[c], 256, SC_FLOAT32, 0);
    assert_int_equal(sc_board_payload(&o, 1, 4, 0, max), 1024);
    o.count = 257;
    assert_int_equal(sc_board_payload(&o, 1, 4, 0, max), NONE);
    o.count = 0;
    assert_int_equal(sc_board_payload(&o, 1, 4, 0, max), 0);
  }
  /* Every dtype at its own limit. */
  for (int dt = 0; dt <= SC_FLOAT64; dt++) {
    size_t es = dt == SC_INT8 || dt == SC_UINT8                         ? 1
                : dt == SC_FLOAT16 || dt == SC_BFLOAT16                 ? 2
                : dt == SC_INT32 || dt == SC_UINT32 || dt == SC_FLOAT32 ? 4
                                                                        : 8;
    sc_op_t o = op_of(SC_COLL_ALLREDUCE, max / es, (sc_dtype_t)dt, 0);
    assert_int_equal(sc_board_payload(&o, 0, 2, 0, max), max);
    o.count++;
    assert_int_equal(sc_board_payload(&o, 0, 2, 0, max), NONE);
  }
  /* Broadcast: the root posts its buffer, the others nothing. */
  sc_op_t b = op_of(SC_COLL_BROADCAST, 10, SC_FLOAT64, 2);
  assert_int_equal(sc_board_payload(&b, 2, 3, 0, max), 80);
  assert_int_equal(sc_board_payload(&b, 0, 3, 0, max), 0);
  b.count = 129; /* 1032 bytes: too large for the root, so for everyone */
  assert_int_equal(sc_board_payload(&b, 0, 3, 0, max), NONE);
  /* Reduce-scatter posts all nranks blocks. */
  sc_op_t rs = op_of(SC_COLL_REDUCE_SCATTER, 32, SC_FLOAT32, 0);
  assert_int_equal(sc_board_payload(&rs, 0, 8, 0, max), 1024);
  rs.count = 33;
  assert_int_equal(sc_board_payload(&rs, 0, 8, 0, max), NONE);
  assert_int_equal(sc_board_payload(&rs, 0, 7, 0, max), 7 * 33 * 4);
  /* The all-to-all posts all nranks blocks, as the reduce-scatter. */
  sc_op_t a2a = op_of(SC_COLL_ALLTOALL, 16, SC_FLOAT64, 0);
  assert_int_equal(sc_board_payload(&a2a, 3, 8, 0, max), 1024);
  a2a.count = 17;
  assert_int_equal(sc_board_payload(&a2a, 3, 8, 0, max), NONE);
  assert_int_equal(sc_board_payload(&a2a, 3, 7, 0, max), 7 * 17 * 8);
  /* Gather: every rank posts its block; scatter: the root all nranks blocks,
   * the others nothing, and all refuse alike when the root's would not fit. */
  sc_op_t g = op_of(SC_COLL_GATHER, 5, SC_FLOAT16, 1);
  assert_int_equal(sc_board_payload(&g, 0, 4, 0, max), 10);
  assert_int_equal(sc_board_payload(&g, 1, 4, 0, max), 10);
  sc_op_t sct = op_of(SC_COLL_SCATTER, 32, SC_INT32, 1);
  assert_int_equal(sc_board_payload(&sct, 1, 8, 0, max), 1024);
  assert_int_equal(sc_board_payload(&sct, 0, 8, 0, max), 0);
  sct.count = 33;
  assert_int_equal(sc_board_payload(&sct, 1, 8, 0, max), NONE);
  assert_int_equal(sc_board_payload(&sct, 0, 8, 0, max), NONE);
  /* The uneven forms keep their schedules. */
  sc_op_t v = op_of(SC_COLL_ALLTOALLV, 1, SC_UINT8, 0);
  assert_int_equal(sc_board_payload(&v, 0, 2, 0, max), NONE);
  sc_op_t agv = op_of(SC_COLL_ALLGATHERV, 1, SC_UINT8, 0);
  assert_int_equal(sc_board_payload(&agv, 0, 2, 0, max), NONE);
  /* A barrier posts nothing but takes the board. */
  sc_op_t bar = op_of(SC_COLL_BARRIER, 0, SC_UINT8, 0);
  assert_int_equal(sc_board_payload(&bar, 0, 5, 0, max), 0);
}

static void test_payload_refusals(void **state) {
  (void)state;
  sc_op_t o = op_of(SC_COLL_ALLREDUCE, 2, SC_FLOAT32, 0);
  assert_int_equal(sc_board_payload(&o, 0, 2, 0, 1024), 8);
  assert_int_equal(sc_board_payload(&o, 0, 2, 1, 1024), NONE); /* algorithm forced */
  assert_int_equal(sc_board_payload(&o, 0, 1, 0, 1024), NONE); /* one rank */
  assert_int_equal(sc_board_payload(&o, 0, 2, 0, 4), NONE);    /* over SC_BOARD_BYTES */
  sc_op_t d = o;
  d.device = 1;
  assert_int_equal(sc_board_payload(&d, 0, 2, 0, 1024), NONE);
  sc_op_t j = o;
  j.job = (sc_result_t(*)(struct sc_comm *, const struct sc_op *))1;
  assert_int_equal(sc_board_payload(&j, 0, 2, 0, 1024), NONE);
  sc_op_t sp = o;
  sp.sparse = (const sc_sparse_op_t *)&o;
  assert_int_equal(sc_board_payload(&sp, 0, 2, 0, 1024), NONE);
  /* count * size must not wrap into a small number */
  sc_op_t big = op_of(SC_COLL_ALLREDUCE, ((size_t)1 << 62) + 1, SC_FLOAT32, 0);
  assert_int_equal(sc_board_payload(&big, 0, 2, 0, 1024), NONE);
  sc_op_t rsbig = op_of(SC_COLL_REDUCE_SCATTER, ((size_t)1 << 61), SC_UINT8, 0);
  assert_int_equal(sc_board_payload(&rsbig, 0, 8, 0, 1024), NONE);
}

static void test_fp(void **state) {
  (void)state;
  char buf[128];
  uint64_t a = sc_board_fp(SC_COLL_ALLREDUCE, SC_FLOAT32, SC_MAX, 0, 3);
  assert_string_equal(sc_board_describe(a, buf, sizeof(buf)),
                      "allreduce (count 3, float32, max, root 0)");
  uint64_t b = sc_board_fp(SC_COLL_BROADCAST, SC_BFLOAT16, SC_SUM, 7, 1000);
  assert_string_equal(sc_board_describe(b, buf, sizeof(buf)),
                      "broadcast (count 1000, bfloat16, sum, root 7)");
  /* Each field alone changes it. */
  assert_true(a != sc_board_fp(SC_COLL_REDUCE, SC_FLOAT32, SC_MAX, 0, 3));
  assert_true(a != sc_board_fp(SC_COLL_ALLREDUCE, SC_INT32, SC_MAX, 0, 3));
  assert_true(a != sc_board_fp(SC_COLL_ALLREDUCE, SC_FLOAT32, SC_MIN, 0, 3));
  assert_true(a != sc_board_fp(SC_COLL_ALLREDUCE, SC_FLOAT32, SC_MAX, 1, 3));
  assert_true(a != sc_board_fp(SC_COLL_ALLREDUCE, SC_FLOAT32, SC_MAX, 0, 4));
  /* A peer's garbage describes without reading out of bounds. */
  assert_non_null(strstr(sc_board_describe(UINT64_MAX, buf, sizeof(buf)), "invalid"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_payload_sizes),
      cmocka_unit_test(test_payload_refusals),
      cmocka_unit_test(test_fp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
