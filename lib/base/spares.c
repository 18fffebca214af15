/* SPDX-License-Identifier: BSD-3-Clause */
/* A stack of spare heap blocks of one size (spares.h). The link to the
 * next spare lives in the block's first bytes. Under AddressSanitizer the
 * rest of a spare is poisoned, so that a use after sc_spares_put is
 * reported as a use after free would be. */
#include "lib/base/spares.h"

#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define SC_SPARES_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SC_SPARES_ASAN 1
#endif
#endif

#ifdef SC_SPARES_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(b, n)   ASAN_POISON_MEMORY_REGION((b), (n))
#define UNPOISON(b, n) ASAN_UNPOISON_MEMORY_REGION((b), (n))
#else
#define POISON(b, n)   ((void)(b), (void)(n))
#define UNPOISON(b, n) ((void)(b), (void)(n))
#endif

void *sc_spares_get(sc_spares_t *s) {
  pthread_mutex_lock(&s->lock);
  void *b = s->head;
  if (b) {
    s->head = *(void **)b;
    s->n--;
  }
  pthread_mutex_unlock(&s->lock);
  if (!b) return malloc(s->bytes);
  UNPOISON(b, s->bytes);
  return b;
}

void sc_spares_put(sc_spares_t *s, void *b) {
  if (!b) return;
  pthread_mutex_lock(&s->lock);
  const int keep = s->n < s->max;
  if (keep) {
    *(void **)b = s->head;
    s->head = b;
    s->n++;
    POISON((char *)b + sizeof(void *), s->bytes - sizeof(void *));
  }
  pthread_mutex_unlock(&s->lock);
  if (!keep) free(b);
}
