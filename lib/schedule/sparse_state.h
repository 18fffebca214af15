/* SPDX-License-Identifier: BSD-3-Clause */
/* The memory and local semantics of the sparse schedule steps, without any
 * I/O: the executor (lib/core/executor.c) moves the bytes over the transport,
 * the simulator (test/sim) through its mailboxes, and both hand what arrived
 * to the same functions here. Sets: id 0 the caller's input (read only), 1
 * the caller's output, 2.. scratch. */
#ifndef SC_SPARSE_STATE_H
#define SC_SPARSE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/sparse_merge.h"
#include "lib/schedule/sched.h"
#include "sparsecoll.h"

typedef struct sc_spset {
  uint32_t *idx;
  void *val;
  size_t n, cap;
  uint64_t wire_n; /* the count as sent: stays put while a send is in flight */
} sc_spset_t;

/* What the caller of a sparse operation provides. */
typedef struct sc_sparse_io {
  const uint32_t *idx;
  const void *val;
  size_t nnz;
  uint32_t *out_idx;
  void *out_val;
  size_t out_cap;
  /* Track survival (the caller wants its survival bits): without it the
   * masks still travel, every entry marked surviving, and no merge pays for
   * the tracking. Every rank must pass the same. */
  int track;
} sc_sparse_io_t;

typedef struct sc_sparse_state {
  sc_dtype_t dtype;
  size_t w, k, dense_len;
  sc_spset_t *sets;
  size_t nsets;
  sc_spset_t in; /* the incoming set of a receive */
  /* Survival (docs/ALGORITHMS.md): one sticky byte per input entry, and per
   * set merged in from a peer that sent its set up to this rank
   * (SC_SPF_FOLD_IN) a slot with that set's indices and their bytes, which
   * this rank tracks for the peer and sends back with the result. up_mask
   * receives the mask over the set this rank itself sent up. */
  uint8_t *alive;
  uint32_t *slot_idx; /* slot j: slot_idx + j * slot_stride */
  uint8_t *slot_alive;
  size_t *slot_n;
  size_t nslots, slots_cap, slot_stride;
  uint8_t *up_mask;
  int track; /* sc_sparse_io_t.track */
  sc_merge_work_t work;
  uint32_t *acc_idx[2];
  void *acc_val[2];
  /* Owned allocations, reused across operations (grow only). */
  void *mem[16];
  size_t mem_bytes[16];
  size_t sets_cap;
} sc_sparse_state_t;

/* Sizes every buffer for schedule s and points sets 0 and 1 at io.
 * Allocates only when something grew since the last operation. */
sc_result_t sc_sparse_state_prepare(sc_sparse_state_t *st, const sc_sched_t *s, sc_dtype_t dtype,
                                    size_t k, size_t dense_len, const sc_sparse_io_t *io);
void sc_sparse_state_free(sc_sparse_state_t *st);

/* Set `id`, or NULL (with SC_ERR_INTERNAL recorded) when the schedule names
 * one that does not exist. */
sc_spset_t *sc_sparse_set(sc_sparse_state_t *st, size_t id);

/* The receive-side checks of a peer's data: SC_ERR_REMOTE naming the peer. */
sc_result_t sc_sparse_check_count(const sc_sparse_state_t *st, int peer, uint64_t n, size_t bound);
sc_result_t sc_sparse_check_indices(const sc_sparse_state_t *st, int peer, const uint32_t *idx,
                                    size_t n);

/* A set on the wire after its fixed 8-byte count (sched.h): the indices and
 * the values (only when the count is not 0), then with SC_SPF_MASK the
 * survival mask when it is not empty. Send side: set `set` and the mask of
 * slot step->src_off; receive side (st->in.n holds the checked count): where
 * each part lands, the mask (over set step->src_off, the one this rank sent
 * up) into up_mask. The executor posts one message per part, the simulator
 * carries them in one; both take the layout from here. Returns the number of
 * parts (<= SC_SPARSE_PARTS). */
#define SC_SPARSE_PARTS 3
typedef struct sc_sparse_part {
  uint8_t *p;
  size_t len;
} sc_sparse_part_t;
int sc_sparse_send_parts(const sc_sparse_state_t *st, const sc_step_t *step, const sc_spset_t *set,
                         sc_sparse_part_t parts[SC_SPARSE_PARTS]);
int sc_sparse_recv_parts(sc_sparse_state_t *st, const sc_step_t *step,
                         sc_sparse_part_t parts[SC_SPARSE_PARTS]);

/* After a SPARSE_RECV / RECV_MERGE's data is in st->in (count already
 * checked, mask already in st->alive): validates the indices and stores or
 * merges. SPARSE_SUM needs no incoming data. */
sc_result_t sc_sparse_apply(sc_sparse_state_t *st, const sc_step_t *step);

#endif
