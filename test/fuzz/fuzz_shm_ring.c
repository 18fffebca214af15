/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target: the shared-memory ring (shm_ring.c) and its record check, with
 * the peer's counters under the fuzzer's control. The input is
 *   u8 ring size code | ops...
 * where each op is a byte (low 3 bits: which) and its arguments:
 *   0 put n | 1 put n padding | 2 publish tail | 3 get n | 4 skip n |
 *   5 publish head | 6 peer writes u64 tail | 7 peer writes u64 head, or
 *   (bit 4 set, bit 3 clear) a rewind: the producer's when bit 0 is clear,
 *   the consumer's (as at a rewind record) when set, or
 *   (bit 3 set) a record: u8 flags, u16 posted length, 40 record bytes,
 *   16 bytes of the posted print (all zero: the receive checks none).
 * Record flags: bit 0 this side accepts single copy; bit 1 starts from the
 * record a sender writes (the fuzzer's non-zero bytes stay), of type CMA
 * (bit 2), DEV (bit 6) or EAGER, carrying the posted print (bit 3) or none;
 * bit 4 judges it with sc_shm_rec_check_dev, for a receive into device
 * memory where bit 5 is set and into host memory otherwise.
 * Producer and consumer share one control block and an exact-size data
 * buffer (a byte outside it is caught by ASan). While nobody forged a counter
 * the stream must deliver exactly what was put (byte q of the stream has a
 * value computed from q), and room and data are never overstated nor hidden
 * when asked for; after a forged counter, every answer must be "corrupted"
 * ((uint64_t)-1) or at most the ring size. A rewind must happen exactly when
 * the rule in shm_internal.h says (then the stream's bytes are no longer
 * checked). Records are compared with a model written from the format in
 * shm_internal.h. */
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_common.h"
#include "transport/shm/shm_internal.h"

const char *const fuzz_target_name = "shm_ring";

typedef struct in_stream {
  const uint8_t *p;
  size_t n;
} in_stream_t;

static uint64_t take(in_stream_t *s, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) {
    v = v << 8 | (s->n ? *s->p : 0);
    if (s->n) {
      s->p++;
      s->n--;
    }
  }
  return v;
}

static uint8_t stream_byte(uint64_t q) {
  return (uint8_t)(q * 131 + (q >> 8) * 7 + 5);
}

#define REC_EAGER 0x53434d45u /* 'SCME' */
#define REC_CMA   0x53434d43u /* 'SCMC' */
#define REC_DEV   0x53434d44u /* 'SCMD' */

static void check_record(in_stream_t *s) {
  uint8_t flags = (uint8_t)take(s, 1);
  size_t len = (size_t)take(s, 2);
  uint8_t *rec = malloc(SC_SHM_REC_LEN), *fp = malloc(SC_TP_FP_LEN); /* exact sizes */
  if (!rec || !fp) {
    free(rec);
    free(fp);
    return;
  }
  for (int i = 0; i < SC_SHM_REC_LEN; i++) rec[i] = (uint8_t)take(s, 1);
  for (int i = 0; i < SC_TP_FP_LEN; i++) fp[i] = (uint8_t)take(s, 1);
  int cma_ok = flags & 1, by_dev = flags & 16, device = (flags & 32) != 0;
  if (flags & 2) {
    /* Start from what a sender writes; the fuzzer's non-zero bytes stay. */
    uint8_t good[SC_SHM_REC_LEN];
    uint32_t ty = flags & 64 ? SC_SHM_REC_DEV : flags & 4 ? SC_SHM_REC_CMA : SC_SHM_REC_EAGER;
    sc_shm_rec_encode(good, ty, len, 0x1000, flags & 8 ? fp : NULL);
    for (int i = 0; i < SC_SHM_REC_LEN; i++) rec[i] = rec[i] ? rec[i] : good[i];
  }
  /* The model, from the layout: u32 type, u32 0, u64 length, u64 address,
   * 16-byte print at 24 (native byte order). */
  uint32_t type;
  uint64_t rlen, addr;
  memcpy(&type, rec, 4);
  memcpy(&rlen, rec + 8, 8);
  memcpy(&addr, rec + 16, 8);
  int fp_set = 0;
  for (int i = 0; i < SC_TP_FP_LEN; i++) fp_set |= fp[i] != 0;
  int msg_fp_set = 0; /* a record without a print is judged by its length alone */
  for (int i = 0; i < SC_TP_FP_LEN; i++) msg_fp_set |= rec[24 + i] != 0;
  int fp_differs = fp_set && msg_fp_set && memcmp(rec + 24, fp, SC_TP_FP_LEN) != 0;
  sc_shm_rec_verdict_t want = type != REC_EAGER && type != REC_CMA ? SC_SHM_REC_BAD_TYPE
                              : fp_differs                         ? SC_SHM_REC_BAD_PRINT
                              : rlen != len                        ? SC_SHM_REC_BAD_LEN
                              : type == REC_CMA && !cma_ok         ? SC_SHM_REC_CMA_REFUSED
                                                                   : SC_SHM_REC_OK;
  if (by_dev && type == REC_DEV)
    want = fp_differs    ? SC_SHM_REC_BAD_PRINT
           : !device     ? SC_SHM_REC_HOST_WANTED
           : rlen != len ? SC_SHM_REC_BAD_LEN
                         : SC_SHM_REC_OK;
  else if (by_dev && want == SC_SHM_REC_OK && device)
    want = SC_SHM_REC_DEV_WANTED;
  sc_shm_rec_t h;
  memset(&h, 0xa5, sizeof(h));
  sc_shm_rec_verdict_t v = by_dev ? sc_shm_rec_check_dev(rec, len, fp, cma_ok, device, &h)
                                  : sc_shm_rec_check(rec, len, fp, cma_ok, &h);
  FUZZ_REQUIRE(v == want, "record verdict %d, model %d", (int)v, (int)want);
  FUZZ_REQUIRE(h.type == type && h.len == rlen && h.addr == addr &&
                   memcmp(h.fp, rec + 24, SC_TP_FP_LEN) == 0,
               "record fields differ");
  /* A receive posted without a print judges the record as one with a NULL print. */
  if (!fp_set) {
    sc_shm_rec_t h2;
    sc_shm_rec_verdict_t v2 = by_dev ? sc_shm_rec_check_dev(rec, len, NULL, cma_ok, device, &h2)
                                     : sc_shm_rec_check(rec, len, NULL, cma_ok, &h2);
    FUZZ_REQUIRE(v2 == v, "NULL print judged otherwise");
  }
  free(rec);
  free(fp);
}

/* The rule, from shm_internal.h: a producer at least a window into a ring of
 * more than two windows, whose record would not wrap, who did not look at the
 * consumer's counter in the last quarter window, and whose consumer took
 * everything, writes a rewind record and goes on at the ring's start. A
 * consumer takes one only where such a producer could have written it. */
static void check_rewind(sc_shm_ring_t *prod, sc_shm_ring_t *cons, int consumer,
                         uint64_t *quiet_until, int *forged, int *padded) {
  sc_shm_ring_t *r = consumer ? cons : prod;
  const uint64_t size = r->size, pos = r->pos, off = pos & (size - 1);
  const int allowed =
      off >= SC_SHM_RING_HOT && size > 2 * SC_SHM_RING_HOT && off + SC_SHM_REC_LEN <= size;
  if (consumer) {
    int ok = sc_shm_ring_rewound(r);
    FUZZ_REQUIRE(ok == allowed, "consumer rewind at %llu answered %d", (unsigned long long)off, ok);
    FUZZ_REQUIRE(r->pos == (ok ? pos + size - off : pos), "consumer rewind moved to %llu",
                 (unsigned long long)r->pos);
    if (ok) *padded = 1;
    /* Past what the producer wrote, the counters no longer agree: as forged. */
    if ((int64_t)(r->pos - __atomic_load_n(&r->ctl->tail, __ATOMIC_RELAXED)) > 0) *forged = 1;
    return;
  }
  uint64_t head = __atomic_load_n(&prod->ctl->head, __ATOMIC_RELAXED);
  const int looks = allowed && pos >= *quiet_until;
  const int want = looks && head == pos;
  if (looks && !want) *quiet_until = pos + SC_SHM_RING_HOT / 4;
  int did = sc_shm_ring_rewind(r);
  FUZZ_REQUIRE(did == want, "rewind at %llu (head %llu) answered %d", (unsigned long long)pos,
               (unsigned long long)head, did);
  FUZZ_REQUIRE(r->pos == (did ? pos + size - off : pos), "rewind moved to %llu",
               (unsigned long long)r->pos);
  if (did) {
    *padded = 1;
    uint64_t room = sc_shm_ring_space(r, 1);
    FUZZ_REQUIRE(*forged || room == off, "room %llu after a rewind from %llu",
                 (unsigned long long)room, (unsigned long long)off);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  in_stream_t s = {data, size};
  /* 8 B .. 4 KiB, or 64 KiB (code 10: the smallest ring that rewinds, one
   * code in eleven, as its byte-wise checks are slow). */
  uint8_t code = (uint8_t)(take(&s, 1) % 11);
  uint64_t rsize = code == 10 ? (uint64_t)64 << 10 : (uint64_t)8 << code;
  sc_shm_chan_ctl_t *ctl = aligned_alloc(SC_SHM_CACHELINE, sizeof(*ctl));
  uint8_t *ring = malloc(rsize);
  uint8_t *buf = malloc(rsize);
  if (!ctl || !ring || !buf) goto out;
  memset(ctl, 0, sizeof(*ctl));
  memset(ring, 0, rsize);
  sc_shm_ring_t prod, cons;
  sc_shm_ring_init(&prod, ctl, ring, rsize, 1);
  sc_shm_ring_init(&cons, ctl, ring, rsize, 0);
  int forged = 0, padded = 0;
  uint64_t quiet_until = 0; /* the model of the producer's look-again position */
  for (int ops = 0; s.n && ops < 4096; ops++) {
    uint8_t op = (uint8_t)take(&s, 1);
    if (op & 8) {
      check_record(&s);
      continue;
    }
    if (op & 16) {
      check_rewind(&prod, &cons, op & 1, &quiet_until, &forged, &padded);
      continue;
    }
    switch (op & 7) {
    case 0:
    case 1: {
      uint64_t n = take(&s, 2) % (rsize + 1);
      uint64_t used = prod.pos - __atomic_load_n(&ctl->head, __ATOMIC_RELAXED);
      uint64_t room = sc_shm_ring_space(&prod, n);
      if (room == (uint64_t)-1) {
        FUZZ_REQUIRE(forged, "ring reported corrupted but no counter was forged");
        break;
      }
      FUZZ_REQUIRE(room <= rsize, "room %llu in a ring of %llu", (unsigned long long)room,
                   (unsigned long long)rsize);
      if (!forged) {
        FUZZ_REQUIRE(room <= rsize - used, "room %llu overstated (%llu used)",
                     (unsigned long long)room, (unsigned long long)used);
        FUZZ_REQUIRE(room >= n || rsize - used < n, "room %llu hidden (%llu needed, %llu used)",
                     (unsigned long long)room, (unsigned long long)n, (unsigned long long)used);
      }
      if (n > room) break;
      if ((op & 7) == 1) {
        sc_shm_ring_put_pad(&prod, n);
        padded = 1;
        break;
      }
      for (uint64_t i = 0; i < n; i++) buf[i] = stream_byte(prod.pos + i);
      sc_shm_ring_put(&prod, buf, n);
      break;
    }
    case 2:
      sc_shm_ring_publish(&prod);
      break;
    case 3:
    case 4: {
      uint64_t n = take(&s, 2) % (rsize + 1);
      uint64_t have_real = __atomic_load_n(&ctl->tail, __ATOMIC_RELAXED) - cons.pos;
      uint64_t have = sc_shm_ring_avail(&cons, n);
      if (have == (uint64_t)-1) {
        FUZZ_REQUIRE(forged, "ring reported corrupted but no counter was forged");
        break;
      }
      FUZZ_REQUIRE(have <= rsize, "%llu bytes readable in a ring of %llu", (unsigned long long)have,
                   (unsigned long long)rsize);
      if (!forged) {
        FUZZ_REQUIRE(have <= have_real, "data overstated: %llu of %llu", (unsigned long long)have,
                     (unsigned long long)have_real);
        FUZZ_REQUIRE(have >= n || have_real < n, "data hidden: %llu of %llu, %llu needed",
                     (unsigned long long)have, (unsigned long long)have_real,
                     (unsigned long long)n);
      }
      if (n > have) break;
      if ((op & 7) == 4) {
        sc_shm_ring_skip(&cons, n);
        break;
      }
      uint64_t at = cons.pos;
      uint8_t *out = malloc(n ? n : 1); /* exact size */
      if (!out) break;
      sc_shm_ring_get(&cons, out, n);
      /* Padding (op 1) leaves older bytes in place: only a stream without it
       * has known contents. */
      for (uint64_t i = 0; i < n && !forged && !padded; i++)
        FUZZ_REQUIRE(out[i] == stream_byte(at + i), "stream byte %llu is 0x%02x, want 0x%02x",
                     (unsigned long long)(at + i), out[i], stream_byte(at + i));
      free(out);
      break;
    }
    case 5:
      sc_shm_ring_publish(&cons);
      break;
    case 6:
      __atomic_store_n(&ctl->tail, take(&s, 8), __ATOMIC_RELAXED);
      forged = 1;
      break;
    default:
      __atomic_store_n(&ctl->head, take(&s, 8), __ATOMIC_RELAXED);
      forged = 1;
      break;
    }
  }
out:
  free(ctl);
  free(ring);
  free(buf);
  return 0;
}
