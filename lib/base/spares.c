/* SPDX-License-Identifier: BSD-3-Clause */
/* A stack of spare heap blocks of one size (spares.h). The link to the
 * next spare lives in the block's first bytes. */
#include "lib/base/spares.h"

#include <stdlib.h>

void *sc_spares_get(sc_spares_t *s) {
  pthread_mutex_lock(&s->lock);
  void *b = s->head;
  if (b) {
    s->head = *(void **)b;
    s->n--;
  }
  pthread_mutex_unlock(&s->lock);
  return b ? b : malloc(s->bytes);
}

void sc_spares_put(sc_spares_t *s, void *b) {
  if (!b) return;
  pthread_mutex_lock(&s->lock);
  const int keep = s->n < s->max;
  if (keep) {
    *(void **)b = s->head;
    s->head = b;
    s->n++;
  }
  pthread_mutex_unlock(&s->lock);
  if (!keep) free(b);
}
