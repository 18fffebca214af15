/* SPDX-License-Identifier: BSD-3-Clause */
/* The registration cache (see verbs_regcache.h). */
#include <string.h>

#include "lib/base/error.h"
#include "transport/verbs/verbs_regcache.h"

void sc_vb_rc_init(sc_vb_regcache_t *rc, const sc_vb_rc_ops_t *ops, size_t limit, size_t page) {
  memset(rc, 0, sizeof(*rc));
  rc->ops = *ops;
  rc->limit = limit;
  rc->page = page ? page : 4096;
}

static void drop(sc_vb_regcache_t *rc, sc_vb_rc_entry_t *e) {
  rc->ops.dereg(rc->ops.ctx, e->kind, e->mr);
  rc->bytes -= e->end - e->start;
  memset(e, 0, sizeof(*e));
}

/* Deregisters the least recently used unused entry; 0 when none is unused. */
static int evict_one(sc_vb_regcache_t *rc) {
  sc_vb_rc_entry_t *victim = NULL;
  for (int i = 0; i < SC_VB_RC_ENTRIES; i++) {
    sc_vb_rc_entry_t *e = &rc->e[i];
    if (e->end && e->refs == 0 && (!victim || e->last_use < victim->last_use)) victim = e;
  }
  if (!victim) return 0;
  drop(rc, victim);
  rc->evictions++;
  return 1;
}

/* Evicts until `need` more bytes fit within the bound or nothing unused is left. */
static void evict(sc_vb_regcache_t *rc, size_t need) {
  while (rc->bytes + need > rc->limit && evict_one(rc)) {
  }
}

sc_result_t sc_vb_rc_acquire(sc_vb_regcache_t *rc, const void *addr, size_t len,
                             sc_vb_rc_entry_t **out) {
  return sc_vb_rc_acquire_kind(rc, SC_VB_MEM_HOST, addr, len, out);
}

sc_result_t sc_vb_rc_acquire_kind(sc_vb_regcache_t *rc, sc_vb_mem_kind_t kind, const void *addr,
                                  size_t len, sc_vb_rc_entry_t **out) {
  uintptr_t a = (uintptr_t)addr;
  uintptr_t start = a & ~(uintptr_t)(rc->page - 1);
  uintptr_t end = (a + len + rc->page - 1) & ~(uintptr_t)(rc->page - 1);
  if (end <= start) end = start + rc->page; /* an empty range still needs a key */
  rc->clock++;
  for (int i = 0; i < SC_VB_RC_ENTRIES; i++) {
    sc_vb_rc_entry_t *e = &rc->e[i];
    if (e->end && e->kind == kind && e->start <= start && end <= e->end) {
      e->refs++;
      e->last_use = rc->clock;
      rc->hits++;
      *out = e;
      return SC_SUCCESS;
    }
  }
  rc->misses++;
  /* Grow the new range over every entry it overlaps or touches: their union is
   * mapped memory too, and a pipelined operation's chunks of one buffer then
   * share one registration instead of taking an entry each. Host memory only:
   * two device allocations side by side are two dma-bufs. */
  for (int grown = kind == SC_VB_MEM_HOST; grown;) {
    grown = 0;
    for (int i = 0; i < SC_VB_RC_ENTRIES; i++) {
      sc_vb_rc_entry_t *e = &rc->e[i];
      if (!e->end || e->kind != kind || e->end < start || end < e->start) continue;
      if (e->start < start) start = e->start, grown = 1;
      if (e->end > end) end = e->end, grown = 1;
    }
  }
  /* The unused entries it covers are redundant now. */
  for (int i = 0; i < SC_VB_RC_ENTRIES; i++) {
    sc_vb_rc_entry_t *e = &rc->e[i];
    if (e->end && e->kind == kind && e->refs == 0 && start <= e->start && e->end <= end)
      drop(rc, e);
  }
  evict(rc, end - start);
  sc_vb_rc_entry_t *slot = NULL;
  for (int i = 0; i < SC_VB_RC_ENTRIES && !slot; i++)
    if (!rc->e[i].end) slot = &rc->e[i];
  if (!slot) {
    /* Every entry holds something: make room by the oldest unused one, bound or not. */
    evict_one(rc);
    for (int i = 0; i < SC_VB_RC_ENTRIES && !slot; i++)
      if (!rc->e[i].end) slot = &rc->e[i];
  }
  if (!slot)
    return SC_ERR(SC_ERR_NOMEM, "verbs: all %d registration cache entries are in use",
                  SC_VB_RC_ENTRIES);
  SC_CHECK(rc->ops.reg(rc->ops.ctx, kind, start, end - start, &slot->mr, &slot->lkey, &slot->rkey));
  slot->kind = kind;
  slot->start = start;
  slot->end = end;
  slot->refs = 1;
  slot->last_use = rc->clock;
  rc->bytes += end - start;
  *out = slot;
  return SC_SUCCESS;
}

void sc_vb_rc_release(sc_vb_regcache_t *rc, sc_vb_rc_entry_t *e) {
  if (!e || !e->end || e->refs == 0) return;
  if (--e->refs == 0 && rc->bytes > rc->limit) evict(rc, 0);
}

void sc_vb_rc_fini(sc_vb_regcache_t *rc) {
  for (int i = 0; i < SC_VB_RC_ENTRIES; i++)
    if (rc->e[i].end) drop(rc, &rc->e[i]);
}
