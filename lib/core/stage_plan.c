/* SPDX-License-Identifier: BSD-3-Clause */
/* See stage_plan.h. */
#include "lib/core/stage_plan.h"

#include <stdint.h>

sc_stage_plan_t sc_stage_plan(size_t len, size_t chunk) {
  if (chunk == 0) chunk = 1;
  sc_stage_plan_t p = {.len = len, .chunk = chunk, .nchunks = 1};
  /* Written so that len near SIZE_MAX cannot overflow. */
  if (len > 0) p.nchunks = len / chunk + (len % chunk != 0);
  return p;
}

size_t sc_stage_slot_bytes(size_t chunk, size_t max_len) {
  size_t need = 64;
  while (need < max_len && need < chunk && need <= SIZE_MAX / 2) need <<= 1;
  return need < chunk ? need : (chunk < 64 ? 64 : chunk);
}

void sc_stage_ring_init(sc_stage_ring_t *r, uint32_t nslots) {
  r->nslots = nslots ? nslots : 1;
  r->issued = r->released = 0;
}

int sc_stage_ring_acquire(sc_stage_ring_t *r, uint32_t *slot) {
  if (r->issued - r->released >= r->nslots) return 0;
  *slot = sc_stage_ring_slot(r, r->issued);
  r->issued++;
  return 1;
}

uint32_t sc_stage_ring_release(sc_stage_ring_t *r, uint8_t *done) {
  uint32_t n = 0;
  while (r->released < r->issued) {
    uint32_t s = sc_stage_ring_slot(r, r->released);
    if (!done[s]) break;
    done[s] = 0;
    r->released++;
    n++;
  }
  return n;
}
