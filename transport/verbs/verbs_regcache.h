/* SPDX-License-Identifier: BSD-3-Clause */
/* The registration cache: address range -> memory region, reference counted,
 * least recently used entries evicted once the registered bytes pass a bound
 * (SC_IB_REG_CACHE_BYTES). Pure: registering and deregistering are callbacks,
 * so that tests drive it with fakes and the transport with ibv_reg_mr.
 *
 * Entries cover whole pages. A miss registers the union of the asked range
 * and every entry it overlaps or touches (all of it is mapped), so that the
 * chunks of one buffer converge on one registration. An entry in use (refs > 0) is never evicted,
 * so the bound can be exceeded by the buffers of the operations in flight; with bound 0 nothing is
 * kept once released. The table has a fixed number of entries, allocated once: a lookup scans it (a
 * few hundred entries at most).
 *
 * Entries have a kind, host or device memory, and a lookup matches only its
 * own kind: a device range is registered another way (dma-buf or peer
 * memory) and its key must never serve a host buffer, whatever the
 * addresses. Device entries are never merged either: neighbouring device
 * allocations are separate dma-bufs, so the transport asks for one whole
 * allocation per entry instead (verbs_gdr.c).
 *
 * The hazard every such cache has: memory freed and mapped again at the same
 * address keeps the old entry and its old pages. The transport keeps the
 * bound small by default and docs/VERBS.md says to set 0 where an
 * application frees and reallocates communication buffers. */
#ifndef SC_VERBS_REGCACHE_H
#define SC_VERBS_REGCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

#define SC_VB_RC_ENTRIES 1024

typedef enum sc_vb_mem_kind {
  SC_VB_MEM_HOST = 0,
  SC_VB_MEM_DEVICE = 1 /* GPU memory: GPUDirect registration */
} sc_vb_mem_kind_t;

typedef struct sc_vb_rc_ops {
  /* Register [addr, addr + len); the handle and the keys in *mr, *lkey, *rkey. */
  sc_result_t (*reg)(void *ctx, sc_vb_mem_kind_t kind, uintptr_t addr, size_t len, void **mr,
                     uint32_t *lkey, uint32_t *rkey);
  void (*dereg)(void *ctx, sc_vb_mem_kind_t kind, void *mr);
  void *ctx;
} sc_vb_rc_ops_t;

typedef struct sc_vb_rc_entry {
  uintptr_t start, end; /* page-aligned; end == 0: unused entry */
  sc_vb_mem_kind_t kind;
  void *mr;
  uint32_t lkey, rkey;
  uint32_t refs;
  uint64_t last_use; /* the cache's clock at the last acquire */
} sc_vb_rc_entry_t;

typedef struct sc_vb_regcache {
  sc_vb_rc_ops_t ops;
  size_t limit; /* bytes kept registered while unused */
  size_t bytes; /* bytes of all live entries */
  size_t page;
  uint64_t clock;
  uint64_t hits, misses, evictions;
  sc_vb_rc_entry_t e[SC_VB_RC_ENTRIES];
} sc_vb_regcache_t;

void sc_vb_rc_init(sc_vb_regcache_t *rc, const sc_vb_rc_ops_t *ops, size_t limit, size_t page);
/* An entry covering [addr, addr + len) with one more reference: a cached one or a
 * new registration (evicting unused entries, oldest first, to stay within the
 * bound). SC_ERR_NOMEM when every entry is in use. */
sc_result_t sc_vb_rc_acquire(sc_vb_regcache_t *rc, const void *addr, size_t len,
                             sc_vb_rc_entry_t **out);
/* The same for memory of the given kind (sc_vb_rc_acquire is SC_VB_MEM_HOST). */
sc_result_t sc_vb_rc_acquire_kind(sc_vb_regcache_t *rc, sc_vb_mem_kind_t kind, const void *addr,
                                  size_t len, sc_vb_rc_entry_t **out);
/* Drops one reference; an unused entry over the bound is deregistered at once. */
void sc_vb_rc_release(sc_vb_regcache_t *rc, sc_vb_rc_entry_t *e);
/* Deregisters every entry (in use or not). */
void sc_vb_rc_fini(sc_vb_regcache_t *rc);

#endif
