/* SPDX-License-Identifier: BSD-3-Clause */
/* The staging plan of device buffers (lib/core/stage_plan.c) against independent
 * references: chunk plans against a byte-by-byte walk, the slot ring against
 * a simulation that completes chunks in random order and tracks which slot
 * each chunk holds, and a whole transfer (sender ring, FIFO channel,
 * receiver ring) that must deliver every byte in order, for lengths, chunk
 * sizes and slot counts including 0, 1 and primes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/core/stage_plan.h"

static const size_t lens[] = {0,
                              1,
                              2,
                              3,
                              5,
                              7,
                              13,
                              63,
                              64,
                              65,
                              127,
                              128,
                              4095,
                              4096,
                              4097,
                              65521,
                              65536,
                              65537,
                              1000003,
                              (size_t)1 << 20,
                              ((size_t)1 << 20) + 1};
static const size_t chunks[] = {
    0, 1, 2, 3, 7, 64, 4093, 4096, 65521, 65536, 1 << 20, ((size_t)1 << 20) + 7, (size_t)1 << 30};
#define NLENS   (sizeof(lens) / sizeof(lens[0]))
#define NCHUNKS (sizeof(chunks) / sizeof(chunks[0]))

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)((rng_state >> 33) % n);
}

/* The reference walks the message, taking up to `chunk` bytes at a time
 * (an empty message is one empty message). */
static void test_plan_against_walk(void **state) {
  (void)state;
  for (size_t li = 0; li < NLENS; li++)
    for (size_t ci = 0; ci < NCHUNKS; ci++) {
      size_t len = lens[li], chunk = chunks[ci] ? chunks[ci] : 1;
      if (len / chunk > 200000) continue; /* the walk below stays quick */
      sc_stage_plan_t p = sc_stage_plan(len, chunks[ci]);
      size_t left = len, off = 0, k = 0;
      do {
        size_t take = left < chunk ? left : chunk;
        assert_true(k < p.nchunks);
        assert_int_equal(sc_stage_chunk_off(&p, k), off);
        assert_int_equal(sc_stage_chunk_len(&p, k), take);
        off += take;
        left -= take;
        k++;
      } while (left > 0);
      assert_int_equal(k, p.nchunks);
      assert_int_equal(off, len);
    }
}

/* Lengths near the top of size_t: the count must not overflow. */
static void test_plan_huge(void **state) {
  (void)state;
  size_t big[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX / 2 + 1};
  for (size_t i = 0; i < 3; i++)
    for (size_t ci = 1; ci < NCHUNKS; ci++) {
      sc_stage_plan_t p = sc_stage_plan(big[i], chunks[ci]);
      unsigned __int128 c = chunks[ci], n = p.nchunks;
      assert_true((n - 1) * c < big[i]);
      assert_true(n * c >= big[i]);
      assert_int_equal(sc_stage_chunk_len(&p, p.nchunks - 1), big[i] - (size_t)((n - 1) * c));
    }
}

/* A slot holds every chunk of every message up to max_len, and is never
 * bigger than a chunk (or 64 bytes) or than the power of two above max_len. */
static void test_slot_bytes(void **state) {
  (void)state;
  for (size_t li = 0; li < NLENS; li++)
    for (size_t ci = 1; ci < NCHUNKS; ci++) {
      size_t max_len = lens[li], chunk = chunks[ci];
      size_t s = sc_stage_slot_bytes(chunk, max_len);
      sc_stage_plan_t p = sc_stage_plan(max_len, chunk);
      for (size_t k = 0; k < p.nchunks && k < 4; k++) assert_true(sc_stage_chunk_len(&p, k) <= s);
      assert_true(s >= 64);
      assert_true(s <= (chunk > 64 ? chunk : 64));
      int pow2 = (s & (s - 1)) == 0;
      assert_true(pow2 || s == chunk);
      if (pow2 && s > 64) assert_true(s / 2 < max_len);
    }
}

/* Chunks acquire slots and finish in random order; the reference knows
 * which chunk occupies which slot and which prefix of chunks has finished. */
static void test_ring_simulation(void **state) {
  (void)state;
  const uint32_t slot_counts[] = {1, 2, 3, 4, 5, 7, 13, 64};
  const size_t totals[] = {0, 1, 2, 3, 7, 64, 101, 1009};
  rng_state = 12345;
  for (size_t si = 0; si < sizeof(slot_counts) / sizeof(slot_counts[0]); si++)
    for (size_t ti = 0; ti < sizeof(totals) / sizeof(totals[0]); ti++)
      for (int trial = 0; trial < 5; trial++) {
        uint32_t ns = slot_counts[si];
        size_t total = totals[ti];
        sc_stage_ring_t r;
        sc_stage_ring_init(&r, ns);
        uint8_t done[SC_STAGE_SLOTS_MAX] = {0};
        long occupant[SC_STAGE_SLOTS_MAX];
        for (uint32_t s = 0; s < ns; s++) occupant[s] = -1;
        uint8_t *finished = calloc(total + 1, 1);
        size_t issued = 0, prefix = 0, max_busy = 0;
        while (prefix < total) {
          /* Reference: the window is the chunks from the first unfinished one. */
          int can = issued < total && issued - prefix < ns;
          if (can && rnd(2)) {
            uint32_t slot = 99;
            assert_int_equal(sc_stage_ring_acquire(&r, &slot), 1);
            assert_int_equal(slot, issued % ns);
            assert_int_equal(occupant[slot], -1);
            occupant[slot] = (long)issued;
            issued++;
          } else if (issued > prefix) {
            if (issued - prefix == ns) {
              uint32_t slot;
              assert_int_equal(sc_stage_ring_acquire(&r, &slot), 0);
            }
            /* finish a random unfinished chunk among those holding slots */
            size_t q = prefix + rnd((uint32_t)(issued - prefix));
            if (finished[q]) continue;
            finished[q] = 1;
            done[q % ns] = 1;
            size_t before = prefix;
            while (prefix < issued && finished[prefix]) {
              occupant[prefix % ns] = -1;
              prefix++;
            }
            assert_int_equal(sc_stage_ring_release(&r, done), prefix - before);
          }
          assert_int_equal(r.issued, issued);
          assert_int_equal(r.released, prefix);
          if (sc_stage_ring_busy(&r) > max_busy) max_busy = sc_stage_ring_busy(&r);
          assert_true(sc_stage_ring_busy(&r) <= ns);
        }
        assert_int_equal(issued, total);
        for (uint32_t s = 0; s < ns; s++) assert_int_equal(done[s], 0);
        free(finished);
      }
}

/* A whole staged transfer of several messages: the sender copies chunks
 * into its slots (in order, as slots free), "sends" them through a FIFO
 * channel, the receiver posts receives into its own slots and copies each
 * arrival to its destination; each side's steps run in random order. The
 * destination must equal the source, byte for byte. */
static void test_transfer_simulation(void **state) {
  (void)state;
  const uint32_t slot_counts[] = {1, 2, 3, 5};
  const size_t chunk_sizes[] = {1, 3, 7, 64, 1000};
  const size_t msgs[][3] = {{0, 0, 0}, {1, 0, 2}, {97, 13, 0}, {1009, 1, 4096}, {5000, 7, 64}};
  rng_state = 777;
  for (size_t si = 0; si < 4; si++)
    for (size_t ci = 0; ci < 5; ci++)
      for (size_t mi = 0; mi < 5; mi++) {
        uint32_t ns = slot_counts[si];
        size_t chunk = chunk_sizes[ci];
        size_t total = msgs[mi][0] + msgs[mi][1] + msgs[mi][2];
        uint8_t *src = malloc(total + 1), *dst = malloc(total + 1);
        for (size_t i = 0; i < total; i++) src[i] = (uint8_t)(i * 31 + 7);
        memset(dst, 0xee, total + 1);
        /* every chunk of the three messages, in order */
        size_t nall = 0, off_of[20000], len_of[20000];
        size_t base = 0;
        for (int m = 0; m < 3; m++) {
          sc_stage_plan_t p = sc_stage_plan(msgs[mi][m], chunk);
          for (size_t k = 0; k < p.nchunks; k++) {
            assert_true(nall < 20000);
            off_of[nall] = base + sc_stage_chunk_off(&p, k);
            len_of[nall] = sc_stage_chunk_len(&p, k);
            nall++;
          }
          base += msgs[mi][m];
        }
        size_t slot_bytes = sc_stage_slot_bytes(chunk, total);
        uint8_t *sslots = malloc(ns * slot_bytes), *rslots = malloc(ns * slot_bytes);
        sc_stage_ring_t sr, rr;
        sc_stage_ring_init(&sr, ns);
        sc_stage_ring_init(&rr, ns);
        uint8_t sdone[SC_STAGE_SLOTS_MAX] = {0}, rdone[SC_STAGE_SLOTS_MAX] = {0};
        /* channel: chunk indices sent, not yet received (FIFO) */
        size_t sent = 0, recvd = 0, copied_in = 0, sposted = 0, rposted = 0, landed = 0;
        size_t rchunk_of_slot[SC_STAGE_SLOTS_MAX];
        int guard = 0;
        while (landed < nall) {
          assert_true(++guard < 10000000);
          switch (rnd(5)) {
          case 0: { /* sender copies the next chunk into a free slot */
            uint32_t s;
            if (copied_in < nall && sc_stage_ring_acquire(&sr, &s)) {
              assert_true(len_of[copied_in] <= slot_bytes);
              memcpy(sslots + s * slot_bytes, src + off_of[copied_in], len_of[copied_in]);
              copied_in++;
            }
            break;
          }
          case 1: /* the oldest copied chunk is posted; transfer happens when the receiver has a
                     receive posted for it */
            if (sposted < copied_in && sposted < rposted) {
              uint32_t s = sc_stage_ring_slot(&sr, sposted), d = sc_stage_ring_slot(&rr, sposted);
              assert_int_equal(rchunk_of_slot[d], sposted);
              memcpy(rslots + d * slot_bytes, sslots + s * slot_bytes, len_of[sposted]);
              sposted++;
              sent++;
            }
            break;
          case 2: /* the sender's transfer completes: its slot may come back */
            if (sent > 0) {
              uint32_t s = sc_stage_ring_slot(&sr, sposted - sent);
              sdone[s] = 1;
              sent--;
              sc_stage_ring_release(&sr, sdone);
            }
            break;
          case 3: { /* receiver posts the next receive */
            uint32_t d;
            if (rposted < nall && sc_stage_ring_acquire(&rr, &d)) rchunk_of_slot[d] = rposted++;
            break;
          }
          case 4: /* receiver copies an arrived chunk out, in order */
            if (recvd < sposted) {
              uint32_t d = sc_stage_ring_slot(&rr, recvd);
              memcpy(dst + off_of[recvd], rslots + d * slot_bytes, len_of[recvd]);
              rdone[d] = 1;
              recvd++;
              landed++;
              sc_stage_ring_release(&rr, rdone);
            }
            break;
          }
        }
        assert_memory_equal(dst, src, total);
        assert_int_equal(dst[total], 0xee);
        free(src);
        free(dst);
        free(sslots);
        free(rslots);
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_against_walk),   cmocka_unit_test(test_plan_huge),
      cmocka_unit_test(test_slot_bytes),          cmocka_unit_test(test_ring_simulation),
      cmocka_unit_test(test_transfer_simulation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
