/* SPDX-License-Identifier: BSD-3-Clause */
/* Schedule building and the shape of generated schedules, checked against
 * what each algorithm must do by hand (peers, step kinds, bytes). The data
 * semantics of every schedule are checked by the simulator (test/sim). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/algorithms.h"
#include "test/sim/sched_cost.h"

static sc_coll_args_t args(sc_coll_t coll, int p, int r, size_t count, size_t chunk) {
  sc_coll_args_t a = {.coll = coll,
                      .nranks = p,
                      .rank = r,
                      .root = 0,
                      .count = count,
                      .elem_size = 4,
                      .chunk_elems = chunk};
  return a;
}

static void test_builder(void **state) {
  sc_sched_t s;
  sc_sched_init(&s);
  for (int i = 0; i < 100; i++)
    assert_int_equal(sc_sched_send(&s, 1, SC_BUF_SEND, i, 3), SC_SUCCESS);
  assert_int_equal(sc_sched_recv_reduce(&s, 2, SC_BUF_RECV, 0, SC_BUF_SEND, 5, 7), SC_SUCCESS);
  assert_int_equal(sc_sched_copy(&s, SC_BUF_RECV, 1, SC_BUF_SCRATCH, 2, 9), SC_SUCCESS);
  assert_int_equal(s.nsteps, 102);
  assert_int_equal(s.steps[100].kind, SC_STEP_RECV_REDUCE);
  assert_int_equal(s.steps[100].src_off, 5);
  assert_int_equal(s.steps[101].src_buf, SC_BUF_SCRATCH);
  sc_sched_cost_t c;
  sc_sched_cost(&s, 4, &c);
  assert_int_equal(c.messages, 101);
  assert_int_equal(c.bytes_sent, 100 * 3 * 4);
  assert_int_equal(c.bytes_recv, 7 * 4);
  size_t cap = s.cap;
  sc_sched_need_scratch(&s, 10);
  sc_sched_need_scratch(&s, 4);
  assert_int_equal(s.scratch_count, 10);
  sc_sched_reset(&s);
  assert_int_equal(s.nsteps, 0);
  assert_int_equal(s.scratch_count, 0);
  assert_int_equal(s.cap, cap); /* reuse allocates nothing */
  sc_sched_free(&s);
}

static void test_block_range(void **state) {
  size_t off, len, next = 0;
  for (int b = 0; b < 4; b++) {
    sc_block_range(10, 4, b, &off, &len);
    assert_int_equal(off, next);
    assert_int_equal(len, b < 2 ? 3 : 2); /* 10 = 3+3+2+2 */
    next = off + len;
  }
  sc_block_range(2, 5, 4, &off, &len);
  assert_int_equal(len, 0); /* fewer elements than ranks: empty tail blocks */
}

/* Ring all-reduce: every send to the right neighbour, every receive from the
 * left; the first P-1 block steps reduce, the rest only receive; each rank
 * sends 2(P-1)/P of the data. */
static void test_ring_allreduce_shape(void **state) {
  for (int p = 2; p <= 9; p++) {
    for (int r = 0; r < p; r++) {
      size_t n = (size_t)p * 1000;
      sc_coll_args_t a = args(SC_COLL_ALLREDUCE, p, r, n, 250);
      sc_sched_t s;
      sc_sched_init(&s);
      assert_int_equal(sc_ring_allreduce_schedule(&a, &s), SC_SUCCESS);
      size_t sends = 0, reduces = 0, recvs = 0, reduced_elems = 0;
      for (size_t i = 0; i < s.nsteps; i++) {
        const sc_step_t *st = &s.steps[i];
        if (st->kind == SC_STEP_SEND) {
          sends++;
          assert_int_equal(st->peer, (r + 1) % p);
        } else if (st->kind == SC_STEP_RECV_REDUCE || st->kind == SC_STEP_RECV) {
          assert_int_equal(st->peer, (r + p - 1) % p);
          if (st->kind == SC_STEP_RECV_REDUCE) {
            reduces++;
            reduced_elems += st->count;
            assert_int_equal(recvs, 0); /* all reductions come before plain receives */
          } else {
            recvs++;
          }
        }
      }
      /* 1000 elements per block in chunks of 250: 4 chunks per block step. */
      assert_int_equal(sends, 2 * (size_t)(p - 1) * 4);
      assert_int_equal(reduces, (size_t)(p - 1) * 4);
      assert_int_equal(recvs, (size_t)(p - 1) * 4);
      assert_int_equal(reduced_elems, (size_t)(p - 1) * 1000);
      sc_sched_cost_t c;
      sc_sched_cost(&s, 4, &c);
      assert_int_equal(c.bytes_sent, 2 * (size_t)(p - 1) * 1000 * 4);
      sc_sched_free(&s);
    }
  }
}

/* Dissemination: round i sends to rank+2^i and receives from rank-2^i. */
static void test_barrier_shape(void **state) {
  int p = 5, r = 3;
  sc_coll_args_t a = args(SC_COLL_BARRIER, p, r, 0, 1);
  sc_sched_t s;
  sc_sched_init(&s);
  assert_int_equal(sc_dissemination_barrier_schedule(&a, &s), SC_SUCCESS);
  int want_to[] = {4, 0, 2}, want_from[] = {2, 1, 4}, round = 0;
  for (size_t i = 0; i < s.nsteps; i++) {
    const sc_step_t *st = &s.steps[i];
    assert_int_equal(st->count, 0);
    if (st->kind == SC_STEP_SEND)
      assert_int_equal(st->peer, want_to[round]);
    else {
      assert_int_equal(st->kind, SC_STEP_RECV);
      assert_int_equal(st->peer, want_from[round]);
      round++;
    }
  }
  assert_int_equal(round, 3); /* ceil(log2 5) */
  sc_sched_free(&s);
}

/* Binomial broadcast from root 0 on 8 ranks: 0 -> 4, 2, 1; 4 -> 6, 5; 5 is a
 * leaf fed by 4. Whole message per step. */
static void test_binomial_broadcast_shape(void **state) {
  int parent_of[8] = {-1, 0, 0, 2, 0, 4, 4, 6};
  int nchildren[8] = {3, 0, 1, 0, 2, 0, 1, 0};
  for (int r = 0; r < 8; r++) {
    sc_coll_args_t a = args(SC_COLL_BROADCAST, 8, r, 100, 1000);
    sc_sched_t s;
    sc_sched_init(&s);
    assert_int_equal(sc_binomial_broadcast_schedule(&a, &s), SC_SUCCESS);
    int got_parent = -1, sends = 0;
    for (size_t i = 0; i < s.nsteps; i++) {
      const sc_step_t *st = &s.steps[i];
      if (st->kind == SC_STEP_RECV) got_parent = st->peer;
      if (st->kind == SC_STEP_SEND) {
        sends++;
        assert_int_equal(parent_of[st->peer], r);
        assert_int_equal(st->count, 100);
      }
    }
    assert_int_equal(got_parent, parent_of[r]);
    assert_int_equal(sends, nchildren[r]);
    sc_sched_free(&s);
  }
}

/* Chain broadcast from root 2 on 4 ranks: 2 -> 3 -> 0 -> 1, chunked. */
static void test_chain_broadcast_shape(void **state) {
  int next[4] = {1, -1, 3, 0}, prev[4] = {3, 0, -1, 2};
  for (int r = 0; r < 4; r++) {
    sc_coll_args_t a = args(SC_COLL_BROADCAST, 4, r, 1000, 100);
    a.root = 2;
    sc_sched_t s;
    sc_sched_init(&s);
    assert_int_equal(sc_chain_broadcast_schedule(&a, &s), SC_SUCCESS);
    int sends = 0, recvs = 0;
    for (size_t i = 0; i < s.nsteps; i++) {
      const sc_step_t *st = &s.steps[i];
      if (st->kind == SC_STEP_SEND) {
        sends++;
        assert_int_equal(st->peer, next[r]);
      } else if (st->kind == SC_STEP_RECV) {
        recvs++;
        assert_int_equal(st->peer, prev[r]);
      }
    }
    assert_int_equal(sends, next[r] < 0 ? 0 : 10);
    assert_int_equal(recvs, prev[r] < 0 ? 0 : 10);
    sc_sched_free(&s);
  }
}

static void test_zero_count_is_empty(void **state) {
  sc_coll_args_t a = args(SC_COLL_ALLREDUCE, 4, 1, 0, 100);
  sc_sched_t s;
  sc_sched_init(&s);
  assert_int_equal(sc_ring_allreduce_schedule(&a, &s), SC_SUCCESS);
  sc_sched_cost_t c;
  sc_sched_cost(&s, 4, &c);
  assert_int_equal(c.messages, 0);
  sc_sched_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builder),
      cmocka_unit_test(test_block_range),
      cmocka_unit_test(test_ring_allreduce_shape),
      cmocka_unit_test(test_barrier_shape),
      cmocka_unit_test(test_binomial_broadcast_shape),
      cmocka_unit_test(test_chain_broadcast_shape),
      cmocka_unit_test(test_zero_count_is_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
