/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs registration cache with fake register/deregister callbacks: every
 * acquired entry covers the asked range; an entry in use is never
 * deregistered; unused bytes stay within the bound; eviction takes the least
 * recently used unused entry. The reference is a list of the live fake
 * registrations kept by the callbacks themselves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "transport/verbs/verbs_regcache.h"

#define PAGE    4096u
#define MAXLIVE 65536

typedef struct fake_mr {
  uintptr_t start, end;
  int kind;
  int live;
  uint32_t key;
} fake_mr_t;

static fake_mr_t mrs[MAXLIVE];
static int nmrs, nlive, fail_next;
static size_t live_bytes;

static sc_result_t fake_reg(void *ctx, sc_vb_mem_kind_t kind, uintptr_t addr, size_t len, void **mr,
                            uint32_t *lkey, uint32_t *rkey) {
  (void)ctx;
  if (fail_next) {
    fail_next = 0;
    return SC_ERR_SYSTEM;
  }
  assert_true(nmrs < MAXLIVE);
  assert_int_equal(addr % PAGE, 0);
  assert_int_equal(len % PAGE, 0);
  fake_mr_t *m = &mrs[nmrs];
  *m = (fake_mr_t){addr, addr + len, (int)kind, 1, (uint32_t)(0x1000 + nmrs)};
  nmrs++;
  nlive++;
  live_bytes += len;
  *mr = m;
  *lkey = m->key;
  *rkey = m->key ^ 0xffffu;
  return SC_SUCCESS;
}

static void fake_dereg(void *ctx, sc_vb_mem_kind_t kind, void *mr) {
  (void)ctx;
  fake_mr_t *m = mr;
  assert_int_equal(m->live, 1);         /* never twice */
  assert_int_equal(m->kind, (int)kind); /* deregistered the way it was registered */
  m->live = 0;
  nlive--;
  live_bytes -= m->end - m->start;
}

static const sc_vb_rc_ops_t ops = {fake_reg, fake_dereg, NULL};

static void reset(void) {
  memset(mrs, 0, sizeof(mrs));
  nmrs = nlive = fail_next = 0;
  live_bytes = 0;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* A random workload over a 1 MiB arena with a bound of 64 KiB. */
static void test_random_workload(void **state) {
  (void)state;
  static sc_vb_regcache_t rc;
  reset();
  const size_t limit = 16 * PAGE;
  sc_vb_rc_init(&rc, &ops, limit, PAGE);
  enum { HELD = 64 };
  sc_vb_rc_entry_t *held[HELD] = {0};
  fake_mr_t *held_mr[HELD] = {0};
  const uintptr_t base = (uintptr_t)1 << 32;
  for (int it = 0; it < 50000; it++) {
    int h = (int)(next_rand() % HELD);
    if (held[h]) {
      sc_vb_rc_release(&rc, held[h]);
      held[h] = NULL;
    } else {
      uintptr_t a = base + next_rand() % (1u << 20);
      size_t len = next_rand() % 3 ? next_rand() % 8192 : next_rand() % (64 * PAGE);
      sc_vb_rc_entry_t *e;
      assert_int_equal(sc_vb_rc_acquire(&rc, (void *)a, len, &e), SC_SUCCESS);
      assert_true(e->start <= a && a + len <= e->end);
      fake_mr_t *m = e->mr;
      assert_int_equal(m->live, 1);
      assert_int_equal(e->lkey, m->key);
      held[h] = e;
      held_mr[h] = m;
    }
    /* every held entry's registration is alive; unused bytes within the bound */
    size_t in_use = 0;
    for (int i = 0; i < SC_VB_RC_ENTRIES; i++)
      if (rc.e[i].end && rc.e[i].refs) in_use += rc.e[i].end - rc.e[i].start;
    for (int i = 0; i < HELD; i++)
      if (held[i]) assert_int_equal(held_mr[i]->live, 1);
    assert_int_equal(rc.bytes, live_bytes);
    assert_true(live_bytes <= limit + in_use || live_bytes == in_use);
  }
  for (int i = 0; i < HELD; i++)
    if (held[i]) sc_vb_rc_release(&rc, held[i]);
  assert_true(rc.hits > 0 && rc.misses > 0 && rc.evictions > 0);
  sc_vb_rc_fini(&rc);
  assert_int_equal(nlive, 0);
  assert_int_equal(live_bytes, 0);
}

/* Bound of three pages: A, B, C released, A touched again, D evicts B (the oldest
 * unused), then a hit on C and A registers nothing new. */
static void test_lru_order(void **state) {
  (void)state;
  static sc_vb_regcache_t rc;
  reset();
  sc_vb_rc_init(&rc, &ops, 3 * PAGE, PAGE);
  uintptr_t A = 0x100000, B = 0x200000, C = 0x300000, D = 0x400000;
  sc_vb_rc_entry_t *e;
  uintptr_t order[] = {A, B, C};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(sc_vb_rc_acquire(&rc, (void *)order[i], 100, &e), SC_SUCCESS);
    sc_vb_rc_release(&rc, e);
  }
  assert_int_equal(nlive, 3);
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)(A + 8), 8, &e), SC_SUCCESS);
  sc_vb_rc_release(&rc, e);
  assert_int_equal(nmrs, 3); /* a hit */
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)D, 10, &e), SC_SUCCESS);
  sc_vb_rc_release(&rc, e);
  assert_int_equal(nlive, 3);
  assert_int_equal(mrs[1].live, 0); /* B */
  assert_int_equal(mrs[0].live, 1);
  assert_int_equal(mrs[2].live, 1);
  int before = nmrs;
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)C, 10, &e), SC_SUCCESS);
  sc_vb_rc_release(&rc, e);
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)A, 10, &e), SC_SUCCESS);
  sc_vb_rc_release(&rc, e);
  assert_int_equal(nmrs, before);
  /* a range crossing a page boundary covers both pages */
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)(B + PAGE - 1), 2, &e), SC_SUCCESS);
  assert_int_equal(e->start, B);
  assert_int_equal(e->end, B + 2 * PAGE);
  sc_vb_rc_release(&rc, e);
  /* a failed registration is reported and leaves no entry */
  fail_next = 1;
  assert_int_not_equal(sc_vb_rc_acquire(&rc, (void *)0x900000, 10, &e), SC_SUCCESS);
  assert_int_equal(rc.bytes, live_bytes);
  for (int i = 0; i < SC_VB_RC_ENTRIES; i++) assert_false(rc.e[i].start == 0x900000);
  sc_vb_rc_fini(&rc);
  assert_int_equal(nlive, 0);
}

/* Bound 0: nothing is kept once released; in-use entries survive any pressure. */
static void test_bound_zero_and_full(void **state) {
  (void)state;
  static sc_vb_regcache_t rc;
  reset();
  sc_vb_rc_init(&rc, &ops, 0, PAGE);
  sc_vb_rc_entry_t *a, *b;
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)0x10000, 10, &a), SC_SUCCESS);
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)0x10000, 10, &b), SC_SUCCESS);
  assert_ptr_equal(a, b);
  assert_int_equal(a->refs, 2);
  sc_vb_rc_release(&rc, a);
  assert_int_equal(nlive, 1);
  sc_vb_rc_release(&rc, b);
  assert_int_equal(nlive, 0);
  /* every entry in use: the next acquire fails with NOMEM, nothing is dropped */
  static sc_vb_rc_entry_t *hold[SC_VB_RC_ENTRIES];
  for (int i = 0; i < SC_VB_RC_ENTRIES; i++)
    assert_int_equal(
        sc_vb_rc_acquire(&rc, (void *)(uintptr_t)(0x100000 + i * 2 * PAGE), 1, &hold[i]),
        SC_SUCCESS);
  sc_vb_rc_entry_t *e;
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)0x90000000, 1, &e), SC_ERR_NOMEM);
  assert_int_equal(nlive, SC_VB_RC_ENTRIES);
  sc_vb_rc_release(&rc, hold[7]);
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)0x90000000, 1, &e), SC_SUCCESS);
  sc_vb_rc_fini(&rc);
  assert_int_equal(nlive, 0);
}

/* Overlapping and touching ranges merge: the chunks of one buffer end on one
 * registration, the unused pieces it covers are dropped, a piece in use stays. */
static void test_merge(void **state) {
  (void)state;
  static sc_vb_regcache_t rc;
  reset();
  sc_vb_rc_init(&rc, &ops, 1u << 20, PAGE);
  const uintptr_t B = 0x1000000;
  sc_vb_rc_entry_t *a, *b, *c, *d;
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)B, 2 * PAGE, &a), SC_SUCCESS);
  /* overlaps a (in use): the union, a stays */
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)(B + PAGE), 2 * PAGE, &b), SC_SUCCESS);
  assert_int_equal(b->start, B);
  assert_int_equal(b->end, B + 3 * PAGE);
  assert_int_equal(nlive, 2);
  sc_vb_rc_release(&rc, b);
  /* touches b's end (b unused now): the union, b dropped, a (in use) kept */
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)(B + 3 * PAGE), PAGE, &c), SC_SUCCESS);
  assert_int_equal(c->start, B);
  assert_int_equal(c->end, B + 4 * PAGE);
  assert_int_equal(nlive, 2);
  assert_int_equal(((fake_mr_t *)a->mr)->live, 1);
  /* anything inside is a hit now */
  int before = nmrs;
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)(B + 100), 3 * PAGE, &d), SC_SUCCESS);
  assert_int_equal(nmrs, before);
  sc_vb_rc_release(&rc, d);
  /* a range apart from them is its own entry */
  assert_int_equal(sc_vb_rc_acquire(&rc, (void *)(B + 6 * PAGE), 1, &d), SC_SUCCESS);
  assert_int_equal(d->start, B + 6 * PAGE);
  assert_int_equal(d->end, B + 7 * PAGE);
  sc_vb_rc_release(&rc, d);
  sc_vb_rc_release(&rc, c);
  sc_vb_rc_release(&rc, a);
  sc_vb_rc_fini(&rc);
  assert_int_equal(nlive, 0);
}

/* Device and host entries are keyed apart: the same addresses in the other
 * kind miss and register their own way; device entries never merge with
 * their neighbours (each allocation is its own dma-buf); each registration
 * is deregistered with the kind it was registered with (fake_dereg checks).
 * The reference: the fake registrations the callbacks recorded. */
static void test_kinds(void **state) {
  (void)state;
  static sc_vb_regcache_t rc;
  reset();
  sc_vb_rc_init(&rc, &ops, 1u << 20, PAGE);
  const uintptr_t B = 0x2000000;
  const sc_vb_mem_kind_t H = SC_VB_MEM_HOST, D = SC_VB_MEM_DEVICE;
  sc_vb_rc_entry_t *h, *d, *d2, *x;
  assert_int_equal(sc_vb_rc_acquire_kind(&rc, H, (void *)B, 2 * PAGE, &h), SC_SUCCESS);
  /* the same range as device memory: not the host entry */
  assert_int_equal(sc_vb_rc_acquire_kind(&rc, D, (void *)B, 2 * PAGE, &d), SC_SUCCESS);
  assert_int_equal(nmrs, 2);
  assert_ptr_not_equal(d, h);
  assert_ptr_equal(d->mr, &mrs[1]);
  assert_int_equal(mrs[0].kind, H);
  assert_int_equal(mrs[1].kind, D);
  assert_int_not_equal(d->lkey, h->lkey);
  /* inside the device entry: a hit on it, for the device kind only */
  assert_int_equal(sc_vb_rc_acquire_kind(&rc, D, (void *)(B + 10), PAGE, &x), SC_SUCCESS);
  assert_ptr_equal(x, d);
  assert_int_equal(nmrs, 2);
  sc_vb_rc_release(&rc, x);
  assert_int_equal(sc_vb_rc_acquire_kind(&rc, H, (void *)(B + 10), PAGE, &x), SC_SUCCESS);
  assert_ptr_equal(x, h);
  sc_vb_rc_release(&rc, x);
  /* a device range touching d: its own registration, exactly its pages */
  assert_int_equal(sc_vb_rc_acquire_kind(&rc, D, (void *)(B + 2 * PAGE), PAGE, &d2), SC_SUCCESS);
  assert_int_equal(nmrs, 3);
  assert_int_equal(d2->start, B + 2 * PAGE);
  assert_int_equal(d2->end, B + 3 * PAGE);
  assert_int_equal(mrs[2].kind, D);
  assert_int_equal(d->start, B); /* d untouched */
  assert_int_equal(d->end, B + 2 * PAGE);
  /* a host range touching h still merges with h, never with the device entries */
  assert_int_equal(sc_vb_rc_acquire_kind(&rc, H, (void *)(B + 2 * PAGE), PAGE, &x), SC_SUCCESS);
  assert_int_equal(mrs[3].kind, H);
  assert_int_equal(x->start, B);
  assert_int_equal(x->end, B + 3 * PAGE);
  assert_int_equal(((fake_mr_t *)d->mr)->live, 1);
  assert_int_equal(((fake_mr_t *)d2->mr)->live, 1);
  sc_vb_rc_release(&rc, x);
  sc_vb_rc_release(&rc, d2);
  sc_vb_rc_release(&rc, d);
  sc_vb_rc_release(&rc, h);
  sc_vb_rc_fini(&rc);
  assert_int_equal(nlive, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kinds),     cmocka_unit_test(test_random_workload),
      cmocka_unit_test(test_lru_order), cmocka_unit_test(test_bound_zero_and_full),
      cmocka_unit_test(test_merge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
