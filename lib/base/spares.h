/* SPDX-License-Identifier: BSD-3-Clause */
/* A stack of spare heap blocks of one size, shared by the process's threads
 * under a mutex held for a few instructions, with a few blocks per thread in
 * front of it that need no lock. For objects made and freed per call that
 * are too large for the allocator's per-thread cache (glibc's tcache stops
 * at 1,032 bytes), or that one thread makes and another frees: a request
 * carries a 1 KiB error text, a point-to-point operation its frames besides.
 * A block taken from it is given back to it, or freed; it keeps at most
 * `max` shared and SC_SPARES_LOCAL per thread, and frees the rest. A
 * thread's blocks go to the shared stack when the thread exits. The blocks
 * it holds stay reachable from it (no leak report) for the life of the
 * process. A stack must have static storage (its threads' caches refer to
 * it until they exit); at most SC_SPARES_KINDS stacks get caches per
 * thread, later ones are shared only. */
#ifndef SC_SPARES_H
#define SC_SPARES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#define SC_SPARES_LOCAL 4
#define SC_SPARES_KINDS 8

typedef struct sc_spares {
  pthread_mutex_t lock;
  size_t bytes; /* every block's size, at least a pointer's */
  int max;
  int n; /* (lock) blocks in the shared stack */
  void *head;
  atomic_int kind; /* 0 until first used; then 1 + its slot in the caches, or -1: none */
} sc_spares_t;

#define SC_SPARES_INIT(block_bytes, max_blocks)                                                    \
  { PTHREAD_MUTEX_INITIALIZER, (block_bytes), (max_blocks), 0, NULL, 0 }

/* A block of s->bytes (not zeroed), a spare or a new one; NULL: no memory. */
void *sc_spares_get(sc_spares_t *s);
/* The same, zeroed. */
void *sc_spares_get_zeroed(sc_spares_t *s);
/* Gives b (from sc_spares_get on s; NULL is ignored) back. */
void sc_spares_put(sc_spares_t *s, void *b);

#endif
