/* SPDX-License-Identifier: BSD-3-Clause */
/* A stack of spare blocks of one size (spares.h). In the shared stack the
 * link to the next spare lives in the block's first bytes. A thread's cache
 * takes what it gives back first and serves what it takes first: the usual
 * pattern, one thread making and freeing, then touches no lock (a pair of
 * lock operations costs about as much as an 8-byte message's copy). Under
 * AddressSanitizer a spare is poisoned, so that a use after sc_spares_put
 * is reported as a use after free would be. */
#include "lib/base/spares.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/sanitize.h"

#if SC_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(b, n)   ASAN_POISON_MEMORY_REGION((b), (n))
#define UNPOISON(b, n) ASAN_UNPOISON_MEMORY_REGION((b), (n))
#else
#define POISON(b, n)   ((void)(b), (void)(n))
#define UNPOISON(b, n) ((void)(b), (void)(n))
#endif

typedef struct local_cache {
  void *blk[SC_SPARES_KINDS][SC_SPARES_LOCAL];
  int n[SC_SPARES_KINDS];
  int armed; /* the thread's exit hands the blocks back */
} local_cache_t;

static _Thread_local local_cache_t local;
static sc_spares_t *kinds[SC_SPARES_KINDS];
static atomic_int nkinds;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_ok;

static void shared_put(sc_spares_t *s, void *b) {
  pthread_mutex_lock(&s->lock);
  const int keep = s->n < s->max;
  if (keep) {
    UNPOISON(b, sizeof(void *));
    *(void **)b = s->head;
    s->head = b;
    s->n++;
    POISON((char *)b + sizeof(void *), s->bytes - sizeof(void *));
  }
  pthread_mutex_unlock(&s->lock);
  if (!keep) {
    UNPOISON(b, s->bytes);
    free(b);
  }
}

static void thread_exit(void *arg) {
  local_cache_t *c = arg;
  for (int k = 0; k < SC_SPARES_KINDS; k++) {
    while (c->n[k] > 0) shared_put(kinds[k], c->blk[k][--c->n[k]]);
  }
  c->armed = 0;
}

static void make_exit_key(void) {
  exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

/* At s's first use: gives it the next slot in the caches, if one is left;
 * returns s->kind. */
static int kind_register(sc_spares_t *s) {
  pthread_mutex_lock(&s->lock);
  int k = atomic_load_explicit(&s->kind, memory_order_relaxed);
  if (k == 0) {
    const int slot = atomic_fetch_add(&nkinds, 1);
    if (slot < SC_SPARES_KINDS) kinds[slot] = s;
    k = slot < SC_SPARES_KINDS ? slot + 1 : -1;
    atomic_store_explicit(&s->kind, k, memory_order_release);
  }
  pthread_mutex_unlock(&s->lock);
  return k;
}

/* s's slot in the caches, or -1: none (more stacks than slots). */
static int kind_of(sc_spares_t *s) {
  int k = atomic_load_explicit(&s->kind, memory_order_acquire);
  if (k == 0) k = kind_register(s);
  return k > 0 ? k - 1 : -1;
}

void *sc_spares_get(sc_spares_t *s) {
  const int k = kind_of(s);
  if (k >= 0 && local.n[k] > 0) {
    void *b = local.blk[k][--local.n[k]];
    UNPOISON(b, s->bytes);
    return b;
  }
  pthread_mutex_lock(&s->lock);
  void *b = s->head;
  if (b) {
    UNPOISON(b, sizeof(void *));
    s->head = *(void **)b;
    s->n--;
  }
  pthread_mutex_unlock(&s->lock);
  if (!b) return malloc(s->bytes);
  UNPOISON(b, s->bytes);
  return b;
}

void *sc_spares_get_zeroed(sc_spares_t *s) {
  void *b = sc_spares_get(s);
  if (b) memset(b, 0, s->bytes);
  return b;
}

void sc_spares_put(sc_spares_t *s, void *b) {
  if (!b) return;
  const int k = kind_of(s);
  if (k >= 0 && local.n[k] < SC_SPARES_LOCAL) {
    if (!local.armed) {
      pthread_once(&exit_once, make_exit_key);
      /* Without the key the blocks would be lost at the thread's exit. */
      if (!exit_key_ok || pthread_setspecific(exit_key, &local) != 0) {
        shared_put(s, b);
        return;
      }
      local.armed = 1;
    }
    POISON(b, s->bytes);
    local.blk[k][local.n[k]++] = b;
    return;
  }
  shared_put(s, b);
}
