/* SPDX-License-Identifier: BSD-3-Clause */
/* kernels/devrt_ipc.c against a runtime table that refuses what CUDA
 * refuses: a second mapping of an allocation, and a mapping of a new
 * allocation of an owner while a mapping of an older one at the same place
 * (since freed by its owner) is still open ("resource already mapped").
 * The mock's handles carry (owner, base, size, generation); its mappings
 * are counted, so every open and close the table makes is checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/devrt.h"
#include "lib/base/error.h"

typedef struct mock_handle {
  int64_t owner;
  uint64_t base, size;
  int gen;
} mock_handle_t;

#define MAXMAP 16
static struct {
  mock_handle_t h;
  int open;
} g_map[MAXMAP];
static int g_opens, g_closes;
static char g_va[MAXMAP][64]; /* a distinct local address per mapping */

static sc_result_t mock_open(const sc_dev_ipc_handle_t *h, void **base) {
  mock_handle_t m;
  memcpy(&m, h->bytes, sizeof m);
  for (int i = 0; i < MAXMAP; i++)
    if (g_map[i].open && g_map[i].h.owner == m.owner && g_map[i].h.base < m.base + m.size &&
        m.base < g_map[i].h.base + g_map[i].h.size)
      return SC_ERR_SYSTEM; /* already mapped: the same handle, or a freed one in its place */
  for (int i = 0; i < MAXMAP; i++)
    if (!g_map[i].open) {
      g_map[i].h = m;
      g_map[i].open = 1;
      *base = g_va[i];
      g_opens++;
      return SC_SUCCESS;
    }
  return SC_ERR_NOMEM;
}

static sc_result_t mock_close(void *base) {
  for (int i = 0; i < MAXMAP; i++)
    if (g_map[i].open && (void *)g_va[i] == base) {
      g_map[i].open = 0;
      g_closes++;
      return SC_SUCCESS;
    }
  return SC_ERR_INVALID_ARG;
}

static sc_devrt_t g_rt = {.ipc_open = mock_open, .ipc_close = mock_close};

static sc_dev_ipc_handle_t handle(int64_t owner, uint64_t base, uint64_t size, int gen) {
  sc_dev_ipc_handle_t h;
  memset(&h, 0, sizeof h);
  mock_handle_t m = {owner, base, size, gen};
  memcpy(h.bytes, &m, sizeof m);
  return h;
}

static int mapped(void) {
  int n = 0;
  for (int i = 0; i < MAXMAP; i++) n += g_map[i].open;
  return n;
}

static void test_shared_and_counted(void **state) {
  (void)state;
  sc_dev_ipc_handle_t a = handle(7, 0x1000, 4000, 0);
  void *b1, *b2;
  assert_int_equal(sc_dev_ipc_open(&g_rt, &a, 7, 0x1000, 4000, &b1), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_open(&g_rt, &a, 7, 0x1000, 4000, &b2), SC_SUCCESS);
  assert_ptr_equal(b1, b2);
  assert_int_equal(g_opens, 1);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &a, b1), SC_SUCCESS);
  assert_int_equal(mapped(), 1);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &a, b2), SC_SUCCESS);
  assert_int_equal(mapped(), 0);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &a, b2), SC_ERR_INVALID_ARG);
}

static void test_freed_allocation_retired(void **state) {
  (void)state;
  g_opens = g_closes = 0;
  /* Two holders of the old allocation (two communicators' caches), one of
   * another owner at the same address, and an unrelated one of the owner. */
  sc_dev_ipc_handle_t old = handle(7, 0x1000, 4000, 0), other = handle(8, 0x1000, 4000, 0),
                      next = handle(7, 0x9000, 100, 0);
  void *o1, *o2, *x, *y;
  assert_int_equal(sc_dev_ipc_open(&g_rt, &old, 7, 0x1000, 4000, &o1), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_open(&g_rt, &old, 7, 0x1000, 4000, &o2), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_open(&g_rt, &other, 8, 0x1000, 4000, &x), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_open(&g_rt, &next, 7, 0x9000, 100, &y), SC_SUCCESS);
  assert_int_equal(mapped(), 3);
  /* Owner 7 freed it and allocated 8000 bytes at the same address. */
  sc_dev_ipc_handle_t fresh = handle(7, 0x1000, 8000, 1);
  void *f;
  assert_int_equal(mock_open(&fresh, &f), SC_ERR_SYSTEM); /* as CUDA, without the table */
  assert_int_equal(sc_dev_ipc_open(&g_rt, &fresh, 7, 0x1000, 8000, &f), SC_SUCCESS);
  assert_int_equal(mapped(), 3); /* old out, fresh in; the other owner's and next stay */
  assert_int_equal(g_closes, 1);
  /* The old holders close later: counted down, not closed twice. */
  assert_int_equal(sc_dev_ipc_close(&g_rt, &old, o1), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &old, o2), SC_SUCCESS);
  assert_int_equal(g_closes, 1);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &fresh, f), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &other, x), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &next, y), SC_SUCCESS);
  assert_int_equal(g_closes, 4);
  assert_int_equal(mapped(), 0);
}

/* While a stream form's stream may wait on the library, nothing is
 * unmapped: a last close leaves the mapping (an open revives it), the end of
 * the wait closes it, and an open that needs a freed allocation's mapping
 * gone fails with SC_ERR_UNSUPPORTED instead of unmapping. */
static void test_no_unmap_while_a_stream_waits(void **state) {
  (void)state;
  g_opens = g_closes = 0;
  sc_dev_ipc_handle_t a = handle(7, 0x1000, 4000, 0), b = handle(7, 0x8000, 100, 0);
  void *pa, *pb, *again;
  assert_int_equal(sc_dev_ipc_open(&g_rt, &a, 7, 0x1000, 4000, &pa), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_open(&g_rt, &b, 7, 0x8000, 100, &pb), SC_SUCCESS);
  sc_dev_stream_wait_begin();
  sc_dev_stream_wait_begin(); /* two stream calls in flight */
  assert_int_equal(sc_dev_ipc_close(&g_rt, &b, pb), SC_SUCCESS);
  assert_int_equal(g_closes, 0);
  assert_int_equal(mapped(), 2);
  /* Opened again before the end: the same mapping, no new open. */
  assert_int_equal(sc_dev_ipc_open(&g_rt, &b, 7, 0x8000, 100, &again), SC_SUCCESS);
  assert_ptr_equal(again, pb);
  assert_int_equal(g_opens, 2);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &b, again), SC_SUCCESS);
  /* Owner 7 freed a and allocated anew at its place: refused, not unmapped. */
  sc_dev_ipc_handle_t fresh = handle(7, 0x1000, 8000, 1);
  void *f = NULL;
  assert_int_equal(sc_dev_ipc_open(&g_rt, &fresh, 7, 0x1000, 8000, &f), SC_ERR_UNSUPPORTED);
  assert_non_null(strstr(sc_last_error(), "stream-ordered call"));
  assert_null(f);
  assert_int_equal(g_closes, 0);
  sc_dev_stream_wait_end();
  assert_int_equal(g_closes, 0); /* one call still in flight */
  sc_dev_stream_wait_end();
  assert_int_equal(g_closes, 1); /* b, unreferenced */
  assert_int_equal(mapped(), 1);
  /* No wait now: the freed allocation's mapping is retired and fresh opens. */
  assert_int_equal(sc_dev_ipc_open(&g_rt, &fresh, 7, 0x1000, 8000, &f), SC_SUCCESS);
  assert_int_equal(g_closes, 2);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &a, pa), SC_SUCCESS);
  assert_int_equal(g_closes, 2); /* a was unmapped by the retire */
  assert_int_equal(sc_dev_ipc_close(&g_rt, &fresh, f), SC_SUCCESS);
  assert_int_equal(g_closes, 3);
  assert_int_equal(mapped(), 0);
  /* An unbalanced end does not go below zero. */
  sc_dev_stream_wait_end();
  assert_int_equal(sc_dev_ipc_open(&g_rt, &a, 7, 0x1000, 4000, &pa), SC_SUCCESS);
  assert_int_equal(sc_dev_ipc_close(&g_rt, &a, pa), SC_SUCCESS);
  assert_int_equal(mapped(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_and_counted),
      cmocka_unit_test(test_freed_allocation_retired),
      cmocka_unit_test(test_no_unmap_while_a_stream_waits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
