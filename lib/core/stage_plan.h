/* SPDX-License-Identifier: BSD-3-Clause */
/* How a device buffer crosses a transport that moves host memory only: the
 * message is cut into chunks that travel through a ring of pinned host
 * slots, so that copying chunk k+1 between the device and its slot overlaps
 * the transfer of chunk k. Pure functions: the executor (lib/core/exec_device.c)
 * runs them, test/unit/test_stage_plan.c checks them against a simulation.
 *
 * Both ends of a message compute the same plan from its length and the
 * chunk setting alone, so the transport still matches every chunk by its
 * exact length. */
#ifndef SC_CORE_STAGE_PLAN_H
#define SC_CORE_STAGE_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* Defaults of SC_STAGE_CHUNK_BYTES and SC_STAGE_SLOTS. */
#define SC_STAGE_CHUNK_DEFAULT ((size_t)1 << 20)
#define SC_STAGE_SLOTS_DEFAULT 4
#define SC_STAGE_SLOTS_MAX     64

typedef struct sc_stage_plan {
  size_t len;     /* bytes of the message */
  size_t chunk;   /* bytes of every chunk but the last (>= 1) */
  size_t nchunks; /* >= 1: an empty message is still one (empty) transport message */
} sc_stage_plan_t;

/* The plan of a message of len bytes in chunks of at most chunk bytes
 * (0 is taken as 1). */
sc_stage_plan_t sc_stage_plan(size_t len, size_t chunk);

static inline size_t sc_stage_chunk_off(const sc_stage_plan_t *p, size_t k) {
  return k * p->chunk;
}

/* Bytes of chunk k (k < nchunks). */
static inline size_t sc_stage_chunk_len(const sc_stage_plan_t *p, size_t k) {
  size_t off = k * p->chunk;
  return off >= p->len ? 0 : (p->len - off < p->chunk ? p->len - off : p->chunk);
}

/* The bytes of one slot: a chunk, but no more than the largest message
 * (rounded up to a power of two, at least 64) needs, so that communicators
 * moving only small messages pin little memory. */
size_t sc_stage_slot_bytes(size_t chunk, size_t max_len);

/* A ring of nslots slots handed to chunks in issue order: chunk q (the
 * q-th chunk given a slot) uses slot q % nslots, and gets it only once
 * chunk q - nslots has released it. Chunks may finish in any order; a slot
 * comes back once its chunk and every chunk issued before it finished, so
 * that the ring stays one contiguous window [released, issued). */
typedef struct sc_stage_ring {
  uint32_t nslots;
  uint64_t issued;   /* chunks given a slot so far */
  uint64_t released; /* chunks whose slot came back */
} sc_stage_ring_t;

void sc_stage_ring_init(sc_stage_ring_t *r, uint32_t nslots);

static inline uint32_t sc_stage_ring_slot(const sc_stage_ring_t *r, uint64_t q) {
  return (uint32_t)(q % r->nslots);
}

/* 1 and *slot when the next chunk can have a slot now (the ring is not
 * full); 0 otherwise. */
int sc_stage_ring_acquire(sc_stage_ring_t *r, uint32_t *slot);

/* Gives back, in issue order, the slots whose chunks finished: done[s] is
 * set by the caller when the chunk in slot s finished; each released slot's
 * flag is cleared. Returns how many slots came back. */
uint32_t sc_stage_ring_release(sc_stage_ring_t *r, uint8_t *done);

/* Chunks holding a slot now. */
static inline uint32_t sc_stage_ring_busy(const sc_stage_ring_t *r) {
  return (uint32_t)(r->issued - r->released);
}

#endif
