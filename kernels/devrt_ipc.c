/* SPDX-License-Identifier: BSD-3-Clause */
/* Peer allocations mapped once per process (kernels/devrt.h,
 * sc_dev_ipc_open). Two rules of CUDA's IPC shape this table:
 * - An allocation is mapped once per process: several communicators of one
 *   process (a split, fusion's and P3's own) each keep a cache of the same
 *   peers' allocations, so the first open maps, later opens of the same
 *   handle share the mapping, and the last close unmaps.
 * - A mapping of an allocation the owner has since freed stays until it is
 *   closed, and a new allocation at the same place in the owner (another
 *   handle) cannot be opened while it stays: cudaIpcOpenMemHandle fails with
 *   "resource already mapped" (seen on an H100 when fusion's buffers were
 *   freed and made again). Owners never have two live allocations that
 *   overlap, so when an open fails, the open mappings whose owner range
 *   overlaps the new one are stale: they are unmapped and the open is tried
 *   again (their holders' later closes only count down).
 * And one rule of ours: an unmap may wait for every stream of the context
 * (as a free does; on an H100 a close during a stream form hung), so none
 * happens while a stream form's stream may wait on the library
 * (sc_dev_stream_wait_begin/end): the last close of an allocation then
 * leaves its mapping open and unreferenced, and the first moment with no
 * such wait closes it; an open that needs a freed allocation's mapping gone
 * fails instead of hanging.
 * Opens are rare (the shm transport caches them), so a small array under a
 * mutex is enough. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/devrt.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

typedef struct ipc_map {
  const sc_devrt_t *rt;
  sc_dev_ipc_handle_t h;
  void *base;
  long refs; /* 0: unreferenced, closed at the first moment no stream waits */
  int64_t owner;
  uint64_t obase, osize; /* the allocation in its owner's address space */
  int stale;             /* unmapped already: closes only count down */
} ipc_map_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ipc_map_t *g_maps;
static size_t g_n, g_cap;
static long g_stream_waits; /* under g_lock */

static void remove_at(size_t i) {
  g_maps[i] = g_maps[--g_n];
  if (g_n == 0) {
    free(g_maps);
    g_maps = NULL;
    g_cap = 0;
  }
}

/* Closes the unreferenced mappings, when no stream waits. Caller holds g_lock. */
static void close_unreferenced(void) {
  if (g_stream_waits > 0) return;
  for (size_t i = 0; i < g_n;) {
    if (g_maps[i].refs > 0) {
      i++;
      continue;
    }
    if (!g_maps[i].stale && g_maps[i].rt->ipc_close(g_maps[i].base) != SC_SUCCESS)
      SC_WARN(SC_SUBSYS_INIT, "device IPC: closing a peer allocation mapped at %p failed",
              g_maps[i].base);
    remove_at(i);
  }
}

void sc_dev_stream_wait_begin(void) {
  pthread_mutex_lock(&g_lock);
  g_stream_waits++;
  pthread_mutex_unlock(&g_lock);
}

void sc_dev_stream_wait_end(void) {
  pthread_mutex_lock(&g_lock);
  if (g_stream_waits > 0) g_stream_waits--;
  close_unreferenced();
  pthread_mutex_unlock(&g_lock);
}

static int overlaps(const ipc_map_t *m, int64_t owner, uint64_t obase, uint64_t osize) {
  return !m->stale && m->owner == owner && m->obase < obase + osize && obase < m->obase + m->osize;
}

/* Unmaps the open mappings of owner's allocations that overlap [obase,
 * obase + osize): the owner freed them. Only once an open has failed: a
 * close may wait for every stream (as a free does), which a stream form's
 * stream waiting on this very operation would never let end. Caller holds
 * g_lock. The number unmapped; -1 when one is in the way while a stream
 * waits (nothing unmapped). */
static int retire_stale(const sc_devrt_t *rt, int64_t owner, uint64_t obase, uint64_t osize) {
  int n = 0;
  if (g_stream_waits > 0) {
    for (size_t i = 0; i < g_n; i++)
      if (overlaps(&g_maps[i], owner, obase, osize)) return -1;
    return 0;
  }
  for (size_t i = 0; i < g_n; i++)
    if (overlaps(&g_maps[i], owner, obase, osize)) {
      SC_INFO(SC_SUBSYS_INIT,
              "device IPC: process %lld freed its allocation at 0x%llx (%llu bytes); its "
              "mapping here is closed so that the new one can open",
              (long long)owner, (unsigned long long)g_maps[i].obase,
              (unsigned long long)g_maps[i].osize);
      (void)rt->ipc_close(g_maps[i].base);
      g_maps[i].stale = 1;
      n++;
    }
  return n;
}

sc_result_t sc_dev_ipc_open(const sc_devrt_t *rt, const sc_dev_ipc_handle_t *h, int64_t owner,
                            uint64_t obase, uint64_t osize, void **base) {
  *base = NULL;
  pthread_mutex_lock(&g_lock);
  close_unreferenced();
  for (size_t i = 0; i < g_n; i++)
    if (!g_maps[i].stale && !memcmp(g_maps[i].h.bytes, h->bytes, sizeof h->bytes)) {
      g_maps[i].refs++;
      *base = g_maps[i].base;
      pthread_mutex_unlock(&g_lock);
      return SC_SUCCESS;
    }
  if (g_n == g_cap) {
    size_t cap = g_cap ? 2 * g_cap : 16;
    ipc_map_t *m = realloc(g_maps, cap * sizeof *m);
    if (!m) {
      pthread_mutex_unlock(&g_lock);
      return SC_ERR(SC_ERR_NOMEM, "ipc_open: the table of %zu mapped peer allocations", cap);
    }
    g_maps = m;
    g_cap = cap;
  }
  /* Under the lock, so that two threads opening one handle map it once. */
  sc_result_t r = rt->ipc_open(h, base);
  if (r != SC_SUCCESS) {
    int retired = retire_stale(rt, owner, obase, osize);
    if (retired > 0) r = rt->ipc_open(h, base);
    if (retired < 0)
      r = SC_ERR(SC_ERR_UNSUPPORTED,
                 "process %lld freed a device buffer and allocated another at 0x%llx while a "
                 "stream-ordered call (sc_*_on_stream) is in flight in this process; unmapping "
                 "the freed one would wait for that call's stream, so the call fails instead "
                 "of hanging: keep the buffers of stream-ordered calls allocated between calls "
                 "(a caching allocator does), or use the blocking calls",
                 (long long)owner, (unsigned long long)obase);
  }
  if (r == SC_SUCCESS) g_maps[g_n++] = (ipc_map_t){rt, *h, *base, 1, owner, obase, osize, 0};
  pthread_mutex_unlock(&g_lock);
  return r;
}

sc_result_t sc_dev_ipc_close(const sc_devrt_t *rt, const sc_dev_ipc_handle_t *h, void *base) {
  pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < g_n; i++)
    if (g_maps[i].base == base && !memcmp(g_maps[i].h.bytes, h->bytes, sizeof h->bytes)) {
      if (g_maps[i].refs <= 0) break; /* closed already by its holders */
      if (--g_maps[i].refs > 0 || g_stream_waits > 0) {
        pthread_mutex_unlock(&g_lock);
        return SC_SUCCESS;
      }
      int stale = g_maps[i].stale;
      remove_at(i);
      sc_result_t r = stale ? SC_SUCCESS : rt->ipc_close(base);
      pthread_mutex_unlock(&g_lock);
      return r;
    }
  pthread_mutex_unlock(&g_lock);
  return SC_ERR(SC_ERR_INVALID_ARG, "ipc_close(%p): not a peer allocation this process opened",
                base);
}
