/* SPDX-License-Identifier: BSD-3-Clause */
/* A stack of spare heap blocks of one size, shared by the process's threads
 * under a mutex held for a few instructions. For objects made and freed per
 * call that are too large for the allocator's per-thread cache (glibc's
 * tcache stops at 1,032 bytes): a request carries a 1 KiB error text, a
 * point-to-point operation its frames besides. A block taken from it is
 * given back to it, or freed; it keeps at most `max` and frees the rest. The
 * blocks it holds stay reachable from it (no leak report) for the life of
 * the process. */
#ifndef SC_SPARES_H
#define SC_SPARES_H

#include <pthread.h>
#include <stddef.h>

typedef struct sc_spares {
  pthread_mutex_t lock;
  size_t bytes; /* every block's size, at least a pointer's */
  int max;
  int n;
  void *head;
} sc_spares_t;

#define SC_SPARES_INIT(block_bytes, max_blocks)                                                    \
  { PTHREAD_MUTEX_INITIALIZER, (block_bytes), (max_blocks), 0, NULL }

/* A block of s->bytes (not zeroed), a spare or a new one; NULL: no memory. */
void *sc_spares_get(sc_spares_t *s);
/* Gives b (from sc_spares_get on s; NULL is ignored) back. */
void sc_spares_put(sc_spares_t *s, void *b);

#endif
