/* SPDX-License-Identifier: BSD-3-Clause */
/* The sparse layer's device contexts (lib/sparse/devctx.h) on the stand-in
 * device: the scratch layout helper (pure), reuse from the free list,
 * growth only when a call needs more (a warm call allocates nothing),
 * and a bounded sync. Skipped (77) when the stand-in is not built. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "lib/sparse/devctx.h"
#include "test/unit/devrt_standin.h"

static const sc_devrt_t *rt;

/* Regions start at multiples of 256 bytes from the base, in order, never
 * overlap, and a NULL base only sums the sizes: the same total. */
static void test_carve(void **state) {
  (void)state;
  const size_t sizes[] = {0, 1, 255, 256, 257, 4096, 3};
  enum { N = sizeof(sizes) / sizeof(sizes[0]) };
  size_t total = 0;
  for (size_t i = 0; i < N; i++) assert_null(sc_spdev_carve(NULL, &total, sizes[i]));
  static char base[16384] __attribute__((aligned(256)));
  size_t off = 0, end_prev = 0;
  for (size_t i = 0; i < N; i++) {
    char *p = sc_spdev_carve(base, &off, sizes[i]);
    size_t at = (size_t)(p - base);
    assert_int_equal(at % 256, 0);
    assert_true(at >= end_prev); /* no overlap with the previous region */
    end_prev = at + sizes[i];
    assert_int_equal(off - at, sc_spdev_span(sizes[i]));
    assert_true(off - at >= sizes[i] && off - at < sizes[i] + 256);
  }
  assert_int_equal(off, total);
}

/* Held contexts are distinct; a released one is handed out again, with the
 * buffers it grew; a smaller or equal request keeps them. */
static void test_pool(void **state) {
  (void)state;
  sc_spdev_t *a = NULL, *b = NULL, *c = NULL;
  assert_int_equal(sc_spdev_acquire("test", &a), SC_SUCCESS);
  assert_int_equal(sc_spdev_acquire("test", &b), SC_SUCCESS);
  assert_ptr_not_equal(a, b);
  assert_ptr_equal(a->rt, rt);
  assert_int_equal(sc_spdev_reserve(a, "test", 64, 1000, 3000), SC_SUCCESS);
  assert_true(a->ws_bytes >= 64 && a->dbuf_bytes >= 1000 && a->hbuf_bytes >= 3000);
  void *ws = a->ws, *dbuf = a->dbuf, *hbuf = a->hbuf;
  int dev = -1;
  assert_int_equal(rt->pointer_device(a->dbuf, &dev), 1);
  assert_int_equal(rt->pointer_device(a->hbuf, &dev), 0); /* pinned: host-readable */
  /* Warm: the same or smaller sizes allocate nothing. */
  assert_int_equal(sc_spdev_reserve(a, "test", 64, 1000, 3000), SC_SUCCESS);
  assert_int_equal(sc_spdev_reserve(a, "test", 1, 10, 0), SC_SUCCESS);
  assert_ptr_equal(a->ws, ws);
  assert_ptr_equal(a->dbuf, dbuf);
  assert_ptr_equal(a->hbuf, hbuf);
  assert_int_equal(sc_spdev_sync(a, 10000, "test"), SC_SUCCESS);
  sc_spdev_release(a, 1);
  sc_spdev_release(b, 1);
  /* The free list hands back one of them, buffers included. */
  assert_int_equal(sc_spdev_acquire("test", &c), SC_SUCCESS);
  assert_true(c == a || c == b);
  if (c == a) assert_ptr_equal(c->dbuf, dbuf);
  /* Growth: at least the request, with room to spare for the next one. */
  assert_int_equal(sc_spdev_reserve(c, "test", 64, 100000, 5000), SC_SUCCESS);
  assert_true(c->dbuf_bytes >= 100000 && c->hbuf_bytes >= 5000);
  /* Work on the stream, then a bounded sync sees it done. */
  assert_int_equal(rt->memset_async(c->dbuf, 0, 100000, c->stream), SC_SUCCESS);
  assert_int_equal(rt->memcpy_async(c->hbuf, c->dbuf, 5000, c->stream), SC_SUCCESS);
  assert_int_equal(sc_spdev_sync(c, 10000, "test"), SC_SUCCESS);
  for (size_t i = 0; i < 5000; i++) assert_int_equal(((unsigned char *)c->hbuf)[i], 0);
  sc_spdev_release(c, 1);
}

int main(void) {
  setenv("SC_DEVFAKE_DELAY_US", "5", 1);
  rt = standin_load();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_carve),
      cmocka_unit_test(test_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
