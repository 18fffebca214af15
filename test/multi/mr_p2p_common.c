/* SPDX-License-Identifier: BSD-3-Clause */
/* What mr_p2p's conformance tests (mr_p2p.c) and failure modes
 * (mr_p2p_fail.c) share: the rank, the counters and the payloads. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "sparsecoll.h"
#include "test/multi/mr_p2p_common.h"

int rank, nranks;
long failures, checks;

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Byte j of message `seq` from rank src with tag. */
uint8_t pattern(int src, int tag, int seq, size_t j) {
  uint64_t x = (uint64_t)src * 0x9E3779B97F4A7C15ull ^ (uint64_t)tag * 0xBF58476D1CE4E5B9ull ^
               (uint64_t)seq * 0x94D049BB133111EBull ^ (uint64_t)j * 0x2545F4914F6CDD1Dull;
  return (uint8_t)(x >> 29);
}

void fill(uint8_t *b, size_t bytes, int src, int tag, int seq) {
  for (size_t j = 0; j < bytes; j++) b[j] = pattern(src, tag, seq, j);
}

void expect(const uint8_t *b, size_t bytes, int src, int tag, int seq, const char *what) {
  checks++;
  for (size_t j = 0; j < bytes; j++)
    if (b[j] != pattern(src, tag, seq, j)) {
      FAIL("%s: byte %zu of %zu from rank %d (tag %d, message %d): %u, want %u", what, j, bytes,
           src, tag, seq, b[j], pattern(src, tag, seq, j));
      return;
    }
}
