/* SPDX-License-Identifier: BSD-3-Clause */
/* The stack of spare blocks (lib/base/spares.c): a block given back is the
 * next one taken (last in, first out, through the thread's cache and the
 * shared stack alike; zeroed where asked), at most SC_SPARES_LOCAL are kept
 * in a thread's cache and `max` shared, NULL is ignored, a block taken is whole and writable,
 * threads taking and giving back at once never hold one block together,
 * what a thread kept goes to the shared stack when it exits, and (built with
 * AddressSanitizer) a read of a block after it was given back is reported
 * like a use after free. The stacks are static, as the library's are. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/base/sanitize.h"
#include "lib/base/spares.h"

enum { BLOCK = 200, LOCAL = SC_SPARES_LOCAL };

static void test_last_in_first_out(void **state) {
  (void)state;
  static sc_spares_t s = SC_SPARES_INIT(BLOCK, 8);
  void *a = sc_spares_get(&s), *b = sc_spares_get(&s);
  assert_non_null(a);
  assert_non_null(b);
  assert_ptr_not_equal(a, b);
  sc_spares_put(&s, a);
  sc_spares_put(&s, b);
  assert_int_equal(s.n, 0); /* both in this thread's cache */
  assert_ptr_equal(sc_spares_get(&s), b);
  assert_ptr_equal(sc_spares_get(&s), a);
  /* Taken again, each is whole: every byte can be written and read back. */
  memset(a, 0x5A, BLOCK);
  memset(b, 0xA5, BLOCK);
  for (int i = 0; i < BLOCK; i++) {
    assert_int_equal(((unsigned char *)a)[i], 0x5A);
    assert_int_equal(((unsigned char *)b)[i], 0xA5);
  }
  free(a);
  free(b);
  /* Past the cache's LOCAL the shared stack takes them; the cache is
   * served first, each last in first out. */
  void *x[LOCAL + 2];
  for (int i = 0; i < LOCAL + 2; i++) x[i] = sc_spares_get(&s);
  for (int i = 0; i < LOCAL + 2; i++) sc_spares_put(&s, x[i]);
  assert_int_equal(s.n, 2);
  for (int i = LOCAL - 1; i >= 0; i--) assert_ptr_equal(sc_spares_get(&s), x[i]);
  assert_ptr_equal(sc_spares_get(&s), x[LOCAL + 1]);
  assert_ptr_equal(sc_spares_get(&s), x[LOCAL]);
  assert_int_equal(s.n, 0);
  for (int i = 1; i < LOCAL + 2; i++) free(x[i]);
  /* A dirty block given back comes out of sc_spares_get_zeroed zeroed. */
  memset(x[0], 0xFF, BLOCK);
  sc_spares_put(&s, x[0]);
  unsigned char *z = sc_spares_get_zeroed(&s);
  assert_ptr_equal(z, x[0]);
  for (int i = 0; i < BLOCK; i++) assert_int_equal(z[i], 0);
  free(z);
}

static void test_keeps_at_most_max(void **state) {
  (void)state;
  enum { MAX = 3, MADE = LOCAL + MAX + 2 };
  static sc_spares_t s = SC_SPARES_INIT(BLOCK, MAX);
  void *blk[MADE];
  for (int i = 0; i < MADE; i++) blk[i] = sc_spares_get(&s);
  for (int i = 0; i < MADE; i++) {
    sc_spares_put(&s, blk[i]);
    const int shared = i + 1 - LOCAL;
    assert_int_equal(s.n, shared < 0 ? 0 : shared < MAX ? shared : MAX);
  }
  sc_spares_put(&s, NULL);
  assert_int_equal(s.n, MAX);
  /* Kept: the first LOCAL in the cache, the next MAX shared; the last two
   * were freed. */
  for (int i = LOCAL - 1; i >= 0; i--) {
    void *b = sc_spares_get(&s);
    assert_ptr_equal(b, blk[i]);
    free(b);
  }
  for (int i = LOCAL + MAX - 1; i >= LOCAL; i--) {
    void *b = sc_spares_get(&s);
    assert_ptr_equal(b, blk[i]);
    free(b);
  }
  assert_int_equal(s.n, 0);
  assert_null(s.head);
}

/* More stacks than the caches have slots: the later ones are shared only,
 * and still last in, first out. */
/* The stacks the tests before this one used: one each, and the use-after
 * test's only where it runs. */
enum { STACKS_BEFORE = 3 + SC_ASAN };

static void test_more_stacks_than_slots(void **state) {
  (void)state;
  static sc_spares_t extra[SC_SPARES_KINDS] = {SC_SPARES_INIT(BLOCK, 4), SC_SPARES_INIT(BLOCK, 4),
                                               SC_SPARES_INIT(BLOCK, 4), SC_SPARES_INIT(BLOCK, 4),
                                               SC_SPARES_INIT(BLOCK, 4), SC_SPARES_INIT(BLOCK, 4),
                                               SC_SPARES_INIT(BLOCK, 4), SC_SPARES_INIT(BLOCK, 4)};
  for (int e = 0; e < SC_SPARES_KINDS; e++) {
    void *a = sc_spares_get(&extra[e]), *b = sc_spares_get(&extra[e]);
    sc_spares_put(&extra[e], a);
    sc_spares_put(&extra[e], b);
    /* Slots run out on the way (the stacks of the tests before took
     * STACKS_BEFORE): from then on both go to the shared stack. */
    const int cached = e < SC_SPARES_KINDS - STACKS_BEFORE;
    assert_int_equal(extra[e].n, cached ? 0 : 2);
    assert_ptr_equal(sc_spares_get(&extra[e]), b);
    assert_ptr_equal(sc_spares_get(&extra[e]), a);
    free(a);
    free(b);
  }
  assert_int_equal(atomic_load(&extra[SC_SPARES_KINDS - 1].kind), -1);
}

typedef struct {
  sc_spares_t *s;
  unsigned char mark;
  int rounds;
  int bad;
} worker_t;

/* Takes up to four blocks, stamps them with its mark, checks the stamp is
 * still whole (no other thread had the block meanwhile), gives them back. */
static void *worker(void *arg) {
  worker_t *w = arg;
  for (int r = 0; r < w->rounds; r++) {
    void *held[4];
    const int k = 1 + r % 4;
    for (int i = 0; i < k; i++) {
      held[i] = sc_spares_get(w->s);
      if (!held[i]) {
        w->bad++;
        return NULL;
      }
      memset(held[i], w->mark, BLOCK);
    }
    for (int i = 0; i < k; i++) {
      for (int j = 0; j < BLOCK; j++)
        if (((unsigned char *)held[i])[j] != w->mark) {
          w->bad++;
          break;
        }
      sc_spares_put(w->s, held[i]);
    }
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  enum { NT = 4, MAX = 6 };
  static sc_spares_t s = SC_SPARES_INIT(BLOCK, MAX);
  pthread_t th[NT];
  worker_t w[NT];
  for (int i = 0; i < NT; i++) {
    w[i] = (worker_t){&s, (unsigned char)(0x11 * (i + 1)), 20000, 0};
    assert_int_equal(pthread_create(&th[i], NULL, worker, &w[i]), 0);
  }
  for (int i = 0; i < NT; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(w[i].bad, 0);
  }
  /* Each worker's last round gave four blocks back into its cache, and its
   * exit handed them on: NT * 4 offered, MAX kept. */
  assert_int_equal(s.n, MAX);
  /* The kept blocks are distinct and as many as counted. */
  void *seen[MAX];
  int n = 0;
  for (void *b = s.head; b; b = *(void **)b) {
    assert_true(n < MAX);
    for (int i = 0; i < n; i++) assert_ptr_not_equal(seen[i], b);
    seen[n++] = b;
  }
  assert_int_equal(n, s.n);
  /* This thread never used s: its cache is empty, every get is shared. */
  while (s.n > 0) free(sc_spares_get(&s));
}

#if SC_ASAN
/* Reads byte BLOCK / 2 of b in a child; whether the child was stopped. */
static int child_read_stopped(const unsigned char *b) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    volatile unsigned char v = b[BLOCK / 2];
    (void)v;
    _exit(0);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return 0;
  return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
#endif

static void test_use_after_put_reported(void **state) {
  (void)state;
#if !SC_ASAN
  skip(); /* only AddressSanitizer can see it */
#else
  static sc_spares_t s = SC_SPARES_INIT(BLOCK, 4);
  unsigned char *b[LOCAL + 1];
  for (int i = 0; i <= LOCAL; i++) {
    b[i] = sc_spares_get(&s);
    memset(b[i], 1, BLOCK);
  }
  for (int i = 0; i <= LOCAL; i++) sc_spares_put(&s, b[i]);
  assert_int_equal(s.n, 1);
  assert_true(child_read_stopped(b[0]));     /* in this thread's cache */
  assert_true(child_read_stopped(b[LOCAL])); /* in the shared stack */
  /* Taken again, the blocks are usable in full. */
  for (int i = LOCAL - 1; i >= 0; i--) assert_ptr_equal(sc_spares_get(&s), b[i]);
  assert_ptr_equal(sc_spares_get(&s), b[LOCAL]);
  for (int i = 0; i <= LOCAL; i++) {
    memset(b[i], 2, BLOCK);
    assert_int_equal(b[i][BLOCK - 1], 2);
    free(b[i]);
  }
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_last_in_first_out),
      cmocka_unit_test(test_keeps_at_most_max),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_use_after_put_reported),
      /* Last: it uses up the caches' slots. */
      cmocka_unit_test(test_more_stacks_than_slots),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
