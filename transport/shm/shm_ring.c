/* SPDX-License-Identifier: BSD-3-Clause */
/* Single-producer single-consumer byte ring in shared memory. Each side keeps
 * its own counter privately and publishes it with a release store; the other
 * side's counter is read (acquire) only when the cached copy says there is not
 * enough room or data, so a busy stream touches the shared lines rarely. The
 * peer's counter is untrusted: a value that cannot be right is reported, never
 * used to index the ring. */
#include <string.h>

#include "transport/shm/shm_internal.h"

void sc_shm_ring_init(sc_shm_ring_t *r, sc_shm_chan_ctl_t *ctl, uint8_t *data, uint64_t size,
                      int producer) {
  r->ctl = ctl;
  r->data = data;
  r->size = size;
  r->pos = producer ? __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE)
                    : __atomic_load_n(&ctl->head, __ATOMIC_ACQUIRE);
  r->seen = producer ? __atomic_load_n(&ctl->head, __ATOMIC_ACQUIRE)
                     : __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE);
  r->published = r->pos;
  r->next_rewind = 0;
  r->producer = producer;
}

uint64_t sc_shm_ring_space(sc_shm_ring_t *r, uint64_t need) {
  uint64_t used = r->pos - r->seen;
  /* The cached head may be a bogus one read last time: a second call must
   * not turn it into room (found by test/fuzz/fuzz_shm_ring.c). */
  if (used <= r->size && r->size - used >= need) return r->size - used;
  r->seen = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);
  used = r->pos - r->seen;
  if (used > r->size) return (uint64_t)-1;
  return r->size - used;
}

uint64_t sc_shm_ring_avail(sc_shm_ring_t *r, uint64_t need) {
  uint64_t have = r->seen - r->pos;
  if (have >= need && have <= r->size) return have;
  r->seen = __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE);
  have = r->seen - r->pos;
  if (have > r->size) return (uint64_t)-1;
  return have;
}

void sc_shm_ring_put(sc_shm_ring_t *r, const void *src, uint64_t n) {
  uint64_t off = r->pos & (r->size - 1);
  uint64_t first = r->size - off < n ? r->size - off : n;
  memcpy(r->data + off, src, first);
  if (n > first) memcpy(r->data, (const uint8_t *)src + first, n - first);
  r->pos += n;
}

void sc_shm_ring_put_pad(sc_shm_ring_t *r, uint64_t n) {
  r->pos += n;
}

void sc_shm_ring_get(sc_shm_ring_t *r, void *dst, uint64_t n) {
  uint64_t off = r->pos & (r->size - 1);
  uint64_t first = r->size - off < n ? r->size - off : n;
  memcpy(dst, r->data + off, first);
  if (n > first) memcpy((uint8_t *)dst + first, r->data, n - first);
  r->pos += n;
}

void sc_shm_ring_peek(const sc_shm_ring_t *r, void *dst, uint64_t n) {
  uint64_t off = r->pos & (r->size - 1);
  uint64_t first = r->size - off < n ? r->size - off : n;
  memcpy(dst, r->data + off, first);
  if (n > first) memcpy((uint8_t *)dst + first, r->data, n - first);
}

void sc_shm_ring_skip(sc_shm_ring_t *r, uint64_t n) {
  r->pos += n;
}

int sc_shm_ring_publish(sc_shm_ring_t *r) {
  if (r->pos == r->published) return 0;
  /* Release: the bytes written (or the slots freed) before are visible to
   * the other side before the counter that announces them. */
  if (r->producer)
    __atomic_store_n(&r->ctl->tail, r->pos, __ATOMIC_RELEASE);
  else
    __atomic_store_n(&r->ctl->head, r->pos, __ATOMIC_RELEASE);
  r->published = r->pos;
  return 1;
}

/* Where a rewind record may stand: a window or more into a ring larger than
 * two windows, with the record not wrapping (the ring's end comes next anyway). */
static int rewind_allowed_at(const sc_shm_ring_t *r, uint64_t off) {
  return off >= SC_SHM_RING_HOT && r->size > 2 * SC_SHM_RING_HOT && off <= r->size - SC_SHM_REC_LEN;
}

int sc_shm_ring_rewind(sc_shm_ring_t *r) {
  const uint64_t off = r->pos & (r->size - 1);
  if (r->pos < r->next_rewind || !rewind_allowed_at(r, off)) return 0;
  /* Everything written was consumed (nothing unpublished can be). */
  uint64_t head = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);
  if (head != r->pos) {
    r->next_rewind = r->pos + SC_SHM_RING_HOT / 4;
    return 0;
  }
  r->seen = head;
  const uint64_t start = r->pos + r->size - off;
  uint8_t rec[SC_SHM_REC_LEN];
  sc_shm_rec_encode(rec, SC_SHM_REC_REWIND, 0, 0, NULL);
  sc_shm_ring_put(r, rec, SC_SHM_REC_LEN);
  r->pos = start;
  return 1;
}

int sc_shm_ring_rewound(sc_shm_ring_t *r) {
  const uint64_t off = r->pos & (r->size - 1);
  if (!rewind_allowed_at(r, off)) return 0;
  r->pos += r->size - off;
  return 1;
}

void sc_shm_rec_encode(uint8_t rec[SC_SHM_REC_LEN], uint32_t type, uint64_t len, uint64_t addr,
                       const uint8_t *fp) {
  uint32_t zero = 0;
  memcpy(rec, &type, 4);
  memcpy(rec + 4, &zero, 4);
  memcpy(rec + 8, &len, 8);
  memcpy(rec + 16, &addr, 8);
  if (fp)
    memcpy(rec + SC_SHM_REC_FP, fp, SC_TP_FP_LEN);
  else
    memset(rec + SC_SHM_REC_FP, 0, SC_TP_FP_LEN);
}

static void rec_fields(const uint8_t rec[SC_SHM_REC_LEN], sc_shm_rec_t *out) {
  memcpy(&out->type, rec, 4);
  memcpy(&out->len, rec + 8, 8);
  memcpy(&out->addr, rec + 16, 8);
  memcpy(out->fp, rec + SC_SHM_REC_FP, SC_TP_FP_LEN);
}

sc_shm_rec_verdict_t sc_shm_rec_check(const uint8_t rec[SC_SHM_REC_LEN], size_t len,
                                      const uint8_t *fp, int cma_ok, sc_shm_rec_t *out) {
  rec_fields(rec, out);
  if (out->type != SC_SHM_REC_EAGER && out->type != SC_SHM_REC_CMA) return SC_SHM_REC_BAD_TYPE;
  if (sc_tp_prints_differ(fp, out->fp)) return SC_SHM_REC_BAD_PRINT;
  if (out->len != (uint64_t)len) return SC_SHM_REC_BAD_LEN;
  if (out->type == SC_SHM_REC_CMA && !cma_ok) return SC_SHM_REC_CMA_REFUSED;
  return SC_SHM_REC_OK;
}

sc_shm_rec_verdict_t sc_shm_rec_check_dev(const uint8_t rec[SC_SHM_REC_LEN], size_t len,
                                          const uint8_t *fp, int cma_ok, int device,
                                          sc_shm_rec_t *out) {
  uint32_t type;
  memcpy(&type, rec, 4);
  if (type != SC_SHM_REC_DEV) {
    sc_shm_rec_verdict_t v = sc_shm_rec_check(rec, len, fp, cma_ok, out);
    return v == SC_SHM_REC_OK && device ? SC_SHM_REC_DEV_WANTED : v;
  }
  rec_fields(rec, out);
  if (sc_tp_prints_differ(fp, out->fp)) return SC_SHM_REC_BAD_PRINT;
  if (!device) return SC_SHM_REC_HOST_WANTED;
  if (out->len != (uint64_t)len) return SC_SHM_REC_BAD_LEN;
  return SC_SHM_REC_OK;
}
