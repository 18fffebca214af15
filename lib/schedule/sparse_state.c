/* SPDX-License-Identifier: BSD-3-Clause */
/* See sparse_state.h. */
#include "lib/schedule/sparse_state.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"

enum {
  M_SETS,
  M_SCR_IDX,
  M_SCR_VAL,
  M_IN_IDX,
  M_IN_VAL,
  M_ALIVE,
  M_SLOT_IDX,
  M_SLOT_ALIVE,
  M_SLOT_N,
  M_UP_MASK,
  M_W_IDX,
  M_W_VAL,
  M_W_KEY,
  M_W_SRC,
  M_ACC,
  M_VIEWS,
  M_COUNT_
};

static sc_result_t reserve(sc_sparse_state_t *st, int m, size_t need) {
  if (need == 0) need = 1;
  if (need <= st->mem_bytes[m]) return SC_SUCCESS;
  void *p = NULL;
  if (posix_memalign(&p, 64, need) != 0)
    return SC_ERR(SC_ERR_NOMEM, "sparse all-reduce: %zu bytes of work space", need);
  free(st->mem[m]);
  st->mem[m] = p;
  st->mem_bytes[m] = need;
  return SC_SUCCESS;
}

static size_t set_cap(const sc_sched_t *s, const sc_sparse_io_t *io, size_t id) {
  return id == 0 ? io->nnz : id == 1 ? io->out_cap : s->sp_cap;
}

static int mul_ok(size_t a, size_t b, size_t *out) {
  if (b && a > SIZE_MAX / b) return 0;
  *out = a * b;
  return 1;
}

sc_result_t sc_sparse_state_prepare(sc_sparse_state_t *st, const sc_sched_t *s, sc_dtype_t dtype,
                                    size_t k, size_t dense_len, const sc_sparse_io_t *io) {
  const size_t w = sc_dtype_size(dtype), nsets = s->sp_sets + 2;
  size_t bound = 0, merge_cap = 0, sum_cap = 0, max_sum = 0, slots = 0, up_cap = 0, bytes;
  for (size_t i = 0; i < s->nsteps; i++) {
    const sc_step_t *t = &s->steps[i];
    if (t->kind == SC_STEP_SPARSE_RECV_MERGE && (t->flags & SC_SPF_FOLD_IN)) slots++;
    if (t->kind == SC_STEP_SPARSE_RECV && (t->flags & SC_SPF_MASK)) {
      if (t->src_off >= nsets)
        return SC_ERR(SC_ERR_INTERNAL, "sparse step %zu: mask over set %zu of %zu", i, t->src_off,
                      nsets);
      if (set_cap(s, io, t->src_off) > up_cap) up_cap = set_cap(s, io, t->src_off);
    }
    if (t->kind == SC_STEP_SPARSE_RECV || t->kind == SC_STEP_SPARSE_RECV_MERGE) {
      if (t->off >= nsets || t->count > set_cap(s, io, t->off))
        return SC_ERR(SC_ERR_INTERNAL, "sparse step %zu: set %zu cannot hold %zu entries", i,
                      t->off, t->count);
      if (t->count > bound) bound = t->count;
    }
    if (t->kind == SC_STEP_SPARSE_RECV_MERGE && t->src_off < nsets) {
      size_t c = set_cap(s, io, t->src_off) + t->count;
      if (c > merge_cap) merge_cap = c;
    }
    if (t->kind == SC_STEP_SPARSE_SUM) {
      size_t c = 0;
      for (size_t j = 0; j < t->count && t->src_off + j < nsets; j++)
        c += set_cap(s, io, t->src_off + j);
      if (c > sum_cap) sum_cap = c;
      if (t->count > max_sum) max_sum = t->count;
    }
  }
  st->dtype = dtype;
  st->w = w;
  st->k = k;
  st->dense_len = dense_len;
  st->nsets = nsets;
  st->nslots = 0;
  st->track = io->track;
  st->slots_cap = slots;
  st->slot_stride = bound;
  if (!mul_ok(s->sp_sets, s->sp_cap, &bytes) || !mul_ok(bytes, 4 + w, &bytes))
    return SC_ERR(SC_ERR_NOMEM, "sparse all-reduce: %zu sets of %zu entries", s->sp_sets,
                  s->sp_cap);
  SC_CHECK(reserve(st, M_SETS, nsets * sizeof(sc_spset_t)));
  SC_CHECK(reserve(st, M_SCR_IDX, s->sp_sets * s->sp_cap * 4));
  SC_CHECK(reserve(st, M_SCR_VAL, s->sp_sets * s->sp_cap * w));
  SC_CHECK(reserve(st, M_IN_IDX, bound * 4));
  SC_CHECK(reserve(st, M_IN_VAL, bound * w));
  SC_CHECK(reserve(st, M_ALIVE, io->nnz));
  if (!mul_ok(slots, bound, &bytes) || !mul_ok(bytes, 4, &bytes))
    return SC_ERR(SC_ERR_NOMEM, "sparse all-reduce: %zu survival slots of %zu entries", slots,
                  bound);
  SC_CHECK(reserve(st, M_SLOT_IDX, slots * bound * 4));
  SC_CHECK(reserve(st, M_SLOT_ALIVE, slots * bound));
  SC_CHECK(reserve(st, M_SLOT_N, slots * sizeof(size_t)));
  SC_CHECK(reserve(st, M_UP_MASK, up_cap));
  SC_CHECK(reserve(st, M_W_IDX, merge_cap * 4));
  SC_CHECK(reserve(st, M_W_VAL, merge_cap * w));
  SC_CHECK(reserve(st, M_W_KEY, merge_cap * 8));
  SC_CHECK(reserve(st, M_W_SRC, merge_cap));
  /* Two accumulators of (index, 8-byte value). */
  SC_CHECK(reserve(st, M_ACC, sum_cap * 24));
  SC_CHECK(reserve(st, M_VIEWS, max_sum * sizeof(sc_spview_t)));
  st->sets = st->mem[M_SETS];
  st->sets[0] = (sc_spset_t){.idx = (uint32_t *)(uintptr_t)io->idx,
                             .val = (void *)(uintptr_t)io->val,
                             .n = io->nnz,
                             .cap = io->nnz};
  st->sets[1] = (sc_spset_t){.idx = io->out_idx, .val = io->out_val, .n = 0, .cap = io->out_cap};
  for (size_t j = 0; j < s->sp_sets; j++)
    st->sets[j + 2] = (sc_spset_t){.idx = (uint32_t *)st->mem[M_SCR_IDX] + j * s->sp_cap,
                                   .val = (uint8_t *)st->mem[M_SCR_VAL] + j * s->sp_cap * w,
                                   .n = 0,
                                   .cap = s->sp_cap};
  st->in = (sc_spset_t){.idx = st->mem[M_IN_IDX], .val = st->mem[M_IN_VAL], .cap = bound};
  st->alive = st->mem[M_ALIVE];
  memset(st->alive, 1, io->nnz);
  st->slot_idx = st->mem[M_SLOT_IDX];
  st->slot_alive = st->mem[M_SLOT_ALIVE];
  st->slot_n = st->mem[M_SLOT_N];
  st->up_mask = st->mem[M_UP_MASK];
  st->work = (sc_merge_work_t){.idx = st->mem[M_W_IDX],
                               .val = st->mem[M_W_VAL],
                               .key = st->mem[M_W_KEY],
                               .src = st->mem[M_W_SRC],
                               .cap = merge_cap};
  uint8_t *acc = st->mem[M_ACC];
  st->acc_idx[0] = (uint32_t *)acc;
  st->acc_idx[1] = (uint32_t *)(acc + sum_cap * 4);
  st->acc_val[0] = acc + sum_cap * 8;
  st->acc_val[1] = acc + sum_cap * 16;
  return SC_SUCCESS;
}

void sc_sparse_state_free(sc_sparse_state_t *st) {
  for (int m = 0; m < M_COUNT_; m++) free(st->mem[m]);
  memset(st, 0, sizeof(*st));
}

sc_spset_t *sc_sparse_set(sc_sparse_state_t *st, size_t id) {
  if (id >= st->nsets) {
    SC_ERR(SC_ERR_INTERNAL, "sparse schedule names set %zu of %zu", id, st->nsets);
    return NULL;
  }
  return &st->sets[id];
}

sc_result_t sc_sparse_check_count(const sc_sparse_state_t *st, int peer, uint64_t n, size_t bound) {
  (void)st;
  if (n > bound)
    return SC_ERR(SC_ERR_REMOTE,
                  "sparse all-reduce: rank %d announced a set of %llu entries, more than the "
                  "bound of %zu",
                  peer, (unsigned long long)n, bound);
  return SC_SUCCESS;
}

sc_result_t sc_sparse_check_indices(const sc_sparse_state_t *st, int peer, const uint32_t *idx,
                                    size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (idx[i] >= st->dense_len)
      return SC_ERR(SC_ERR_REMOTE,
                    "sparse all-reduce: rank %d sent index %u at position %zu, outside the dense "
                    "length %zu",
                    peer, idx[i], i, st->dense_len);
    if (i && idx[i] <= idx[i - 1])
      return SC_ERR(SC_ERR_REMOTE,
                    "sparse all-reduce: rank %d sent indices out of order or repeated (%u after "
                    "%u at position %zu)",
                    peer, idx[i], idx[i - 1], i);
  }
  return SC_SUCCESS;
}

/* alive[i] &= (ids[i] is up->idx[j] with mask[j] set; mask NULL: with any
 * j), both sorted. One pass of the two lists without data-dependent
 * branches: the searches' branches, taken half the time at random, cost
 * more than the comparisons (a tracked list and a set of k entries each). */
static void track_in(uint8_t *alive, const uint32_t *ids, size_t n, const sc_spset_t *set,
                     const uint8_t *mask) {
  size_t i = 0, j = 0;
  const size_t m = set->n;
  while (i < n && j < m) {
    const uint32_t a = ids[i], b = set->idx[j];
    const uint8_t kept = mask ? (mask[j] != 0) : 1;
    /* a < b: not in the set; a == b: kept where the mask keeps it; a > b: not yet. */
    alive[i] &= (uint8_t)((a > b) | ((a == b) & kept));
    i += a <= b;
    j += a >= b;
  }
  for (; i < n; i++) alive[i] = 0;
}

/* Every entry this rank tracks: its own input's, then each slot's. */
static void track_all(sc_sparse_state_t *st, const sc_spset_t *set, const uint8_t *mask) {
  for (size_t s = 0; s <= st->nslots; s++) {
    uint8_t *alive = s ? st->slot_alive + (s - 1) * st->slot_stride : st->alive;
    const uint32_t *ids = s ? st->slot_idx + (s - 1) * st->slot_stride : st->sets[0].idx;
    const size_t n = s ? st->slot_n[s - 1] : st->sets[0].n;
    track_in(alive, ids, n, set, mask);
  }
}

static sc_result_t apply_merge(sc_sparse_state_t *st, const sc_step_t *step, sc_spset_t *dst) {
  sc_spset_t *local = sc_sparse_set(st, step->src_off);
  if (!local) return SC_ERR_INTERNAL;
  if (local == dst) return SC_ERR(SC_ERR_INTERNAL, "sparse merge into its own operand");
  if (step->flags & SC_SPF_FOLD_IN) {
    if (st->nslots >= st->slots_cap || st->in.n > st->slot_stride)
      return SC_ERR(SC_ERR_INTERNAL, "sparse merge: survival slot %zu of %zu", st->nslots,
                    st->slots_cap);
    const size_t j = st->nslots++;
    if (st->track) memcpy(st->slot_idx + j * st->slot_stride, st->in.idx, st->in.n * 4);
    memset(st->slot_alive + j * st->slot_stride, 1, st->in.n);
    st->slot_n[j] = st->in.n;
  }
  sc_spview_t l = {local->idx, local->val, local->n}, in = {st->in.idx, st->in.val, st->in.n};
  int a_local = (step->flags & SC_SPF_LOCAL_IS_A) != 0;
  size_t keep = st->k < dst->cap ? st->k : dst->cap;
  dst->n = sc_sparse_merge(st->dtype, keep, a_local ? l : in, a_local ? in : l, dst->idx, dst->val,
                           NULL, NULL, &st->work);
  if (st->track) track_all(st, dst, NULL);
  return SC_SUCCESS;
}

sc_result_t sc_sparse_apply(sc_sparse_state_t *st, const sc_step_t *step) {
  sc_spset_t *dst = sc_sparse_set(st, step->off);
  if (!dst) return SC_ERR_INTERNAL;
  if (dst == &st->sets[0]) return SC_ERR(SC_ERR_INTERNAL, "sparse step writes the input set");
  switch (step->kind) {
  case SC_STEP_SPARSE_RECV:
    SC_CHECK(sc_sparse_check_indices(st, step->peer, st->in.idx, st->in.n));
    memcpy(dst->idx, st->in.idx, st->in.n * 4);
    memcpy(dst->val, st->in.val, st->in.n * st->w);
    dst->n = st->in.n;
    if ((step->flags & SC_SPF_MASK) && st->track) {
      const sc_spset_t *up = sc_sparse_set(st, step->src_off);
      if (!up) return SC_ERR_INTERNAL;
      track_all(st, up, st->up_mask);
    }
    return SC_SUCCESS;
  case SC_STEP_SPARSE_RECV_MERGE:
    SC_CHECK(sc_sparse_check_indices(st, step->peer, st->in.idx, st->in.n));
    return apply_merge(st, step, dst);
  case SC_STEP_SPARSE_SUM: {
    sc_spview_t *v = st->mem[M_VIEWS];
    size_t total = 0;
    for (size_t j = 0; j < step->count; j++) {
      sc_spset_t *src = sc_sparse_set(st, step->src_off + j);
      if (!src) return SC_ERR_INTERNAL;
      if (src == dst) return SC_ERR(SC_ERR_INTERNAL, "sparse sum into one of its operands");
      v[j] = (sc_spview_t){src->idx, src->val, src->n};
      total += src->n;
    }
    if (total > dst->cap)
      return SC_ERR(SC_ERR_INTERNAL, "sparse sum of %zu entries into a set of %zu", total,
                    dst->cap);
    if (step->count == 1) { /* a copy: keep the bits exactly */
      if (v[0].n) {         /* with k = 0 the sets may have no storage at all */
        memcpy(dst->idx, v[0].idx, v[0].n * 4);
        memcpy(dst->val, v[0].val, v[0].n * st->w);
      }
      dst->n = v[0].n;
      return SC_SUCCESS;
    }
    dst->n = sc_sparse_sum(st->dtype, v, step->count, dst->idx, dst->val, st->acc_idx, st->acc_val);
    return SC_SUCCESS;
  }
  default:
    return SC_ERR(SC_ERR_INTERNAL, "step kind %d is not a local sparse step", step->kind);
  }
}

int sc_sparse_send_parts(const sc_sparse_state_t *st, const sc_step_t *step, const sc_spset_t *set,
                         sc_sparse_part_t parts[SC_SPARSE_PARTS]) {
  int n = 0;
  if (set->n) {
    parts[n++] = (sc_sparse_part_t){(uint8_t *)set->idx, set->n * 4};
    parts[n++] = (sc_sparse_part_t){(uint8_t *)set->val, set->n * st->w};
  }
  /* A slot that was never filled (a schedule bug the prepare cannot see)
   * sends no mask; its peer then fails on the missing message. */
  if ((step->flags & SC_SPF_MASK) && step->src_off < st->nslots && st->slot_n[step->src_off])
    parts[n++] = (sc_sparse_part_t){st->slot_alive + step->src_off * st->slot_stride,
                                    st->slot_n[step->src_off]};
  return n;
}

int sc_sparse_recv_parts(sc_sparse_state_t *st, const sc_step_t *step,
                         sc_sparse_part_t parts[SC_SPARSE_PARTS]) {
  int n = 0;
  if (st->in.n) {
    parts[n++] = (sc_sparse_part_t){(uint8_t *)st->in.idx, st->in.n * 4};
    parts[n++] = (sc_sparse_part_t){(uint8_t *)st->in.val, st->in.n * st->w};
  }
  if ((step->flags & SC_SPF_MASK) && step->src_off < st->nsets && st->sets[step->src_off].n)
    parts[n++] = (sc_sparse_part_t){st->up_mask, st->sets[step->src_off].n};
  return n;
}
