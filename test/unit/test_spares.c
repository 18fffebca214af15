/* SPDX-License-Identifier: BSD-3-Clause */
/* The stack of spare blocks (lib/base/spares.c): a block given back is the
 * next one taken (last in, first out), at most `max` are kept, NULL is
 * ignored, a block taken is whole and writable, threads taking and giving
 * back at once never hold one block together, and (built with
 * AddressSanitizer) a read of a block after it was given back is reported
 * like a use after free. */
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

#include "lib/base/spares.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif

enum { BLOCK = 200 };

/* Gives every kept block back to the allocator (the stacks are meant to
 * live as long as the process; each test makes its own). */
static void drain(sc_spares_t *s) {
  while (s->n > 0) free(sc_spares_get(s));
}

static void test_last_in_first_out(void **state) {
  (void)state;
  sc_spares_t s = SC_SPARES_INIT(BLOCK, 8);
  void *a = sc_spares_get(&s), *b = sc_spares_get(&s);
  assert_non_null(a);
  assert_non_null(b);
  assert_ptr_not_equal(a, b);
  assert_int_equal(s.n, 0);
  sc_spares_put(&s, a);
  sc_spares_put(&s, b);
  assert_int_equal(s.n, 2);
  assert_ptr_equal(sc_spares_get(&s), b);
  assert_ptr_equal(sc_spares_get(&s), a);
  assert_int_equal(s.n, 0);
  /* Taken again, each is whole: every byte can be written and read back. */
  memset(a, 0x5A, BLOCK);
  memset(b, 0xA5, BLOCK);
  for (int i = 0; i < BLOCK; i++) {
    assert_int_equal(((unsigned char *)a)[i], 0x5A);
    assert_int_equal(((unsigned char *)b)[i], 0xA5);
  }
  free(a);
  free(b);
}

static void test_keeps_at_most_max(void **state) {
  (void)state;
  enum { MAX = 3, MADE = 7 };
  sc_spares_t s = SC_SPARES_INIT(BLOCK, MAX);
  void *blk[MADE];
  for (int i = 0; i < MADE; i++) blk[i] = sc_spares_get(&s);
  for (int i = 0; i < MADE; i++) {
    sc_spares_put(&s, blk[i]);
    assert_int_equal(s.n, i + 1 < MAX ? i + 1 : MAX);
  }
  sc_spares_put(&s, NULL);
  assert_int_equal(s.n, MAX);
  /* The first MAX given back are the ones kept, newest first. */
  for (int i = MAX - 1; i >= 0; i--) {
    void *b = sc_spares_get(&s);
    assert_ptr_equal(b, blk[i]);
    free(b);
  }
  assert_int_equal(s.n, 0);
  assert_null(s.head);
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
  sc_spares_t s = SC_SPARES_INIT(BLOCK, MAX);
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
  assert_true(s.n > 0 && s.n <= MAX);
  /* The kept blocks are distinct and as many as counted. */
  void *seen[MAX];
  int n = 0;
  for (void *b = s.head; b; b = *(void **)b) {
    assert_true(n < MAX);
    for (int i = 0; i < n; i++) assert_ptr_not_equal(seen[i], b);
    seen[n++] = b;
  }
  assert_int_equal(n, s.n);
  drain(&s);
}

static void test_use_after_put_reported(void **state) {
  (void)state;
#ifndef ASAN_BUILD
  skip(); /* only AddressSanitizer can see it */
#else
  sc_spares_t s = SC_SPARES_INIT(BLOCK, 4);
  unsigned char *b = sc_spares_get(&s);
  memset(b, 1, BLOCK);
  sc_spares_put(&s, b);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* The child reads the block it gave back: AddressSanitizer stops it. */
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    volatile unsigned char v = b[BLOCK / 2];
    (void)v;
    _exit(0);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* Taken again, the block is usable in full. */
  unsigned char *again = sc_spares_get(&s);
  assert_ptr_equal(again, b);
  memset(again, 2, BLOCK);
  assert_int_equal(again[BLOCK - 1], 2);
  free(again);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_last_in_first_out),
      cmocka_unit_test(test_keeps_at_most_max),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_use_after_put_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
