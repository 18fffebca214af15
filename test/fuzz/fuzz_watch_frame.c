/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target: the liveness watch's frames as rank 0 reads them from a rank
 * (lib/control/watch_wire.c): sc_watch_frame_parse on the 16-byte header,
 * then, for a heartbeat whose bytes all arrived, sc_watch_hb_parse on its
 * report of the call the rank executes. The input is
 *   u8 flags | u8 nranks-1 | 16 header bytes | the bytes after the header
 * (zero-padded to the header); flags bit 0 writes the right magic, bit 1 the
 * version, bit 2 the type heartbeat, bit 3 a subject below nranks, so that
 * the fuzzer gets past each check. Both verdicts are compared with a model
 * written here from the wire format (watch.h: u32 'SCWF', u8 version 1, u8
 * type 1..7, u16 len <= 600 (a heartbeat's and a forwarded call's: 0 or 24;
 * a quiet report's 4), u32 subject < nranks,
 * u32 code <= SC_ERR_INTERNAL; a report: u64 number, 16-byte print not all
 * zero); a parsed report must encode back to the same bytes. Every buffer
 * is exactly as long as what arrived, so a read past it is caught. */
#include <stdlib.h>
#include <string.h>

#include "lib/control/watch.h"
#include "test/fuzz/fuzz_common.h"

const char *const fuzz_target_name = "watch_frame";

static uint64_t be(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

static void put_be(uint8_t *p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static int model_frame(const uint8_t *h, int nranks) {
  unsigned type = h[5], len = (unsigned)be(h + 6, 2);
  if (be(h, 4) != 0x53435746u || h[4] != 1) return 0;
  if (type < 1 || type > 7 || len > 600) return 0;
  if (be(h + 8, 4) >= (uint64_t)nranks || be(h + 12, 4) > SC_ERR_INTERNAL) return 0;
  if (type == 7) return len == 4;
  return (type != 1 && type != 6) || len == 0 || len == 24;
}

static int model_report(const uint8_t *p, size_t len) {
  if (len == 0) return 1;
  if (len != 24) return 0;
  for (int i = 8; i < 24; i++)
    if (p[i]) return 1;
  return 0;
}

/* The report parser alone, on len bytes at p (copied to an exact buffer). */
static void check_report(const uint8_t *p, size_t len) {
  uint8_t *b = malloc(len ? len : 1);
  if (!b) return;
  memcpy(b, p, len);
  sc_watch_op_t op;
  memset(&op, 0xa5, sizeof(op));
  char why[128];
  sc_result_t r = sc_watch_hb_parse(b, len, &op, why, sizeof(why));
  int want = model_report(b, len);
  FUZZ_REQUIRE((r == SC_SUCCESS) == want, "report of %zu bytes: parser %d, model %d", len, (int)r,
               want);
  if (r == SC_SUCCESS) {
    FUZZ_REQUIRE(op.busy == (len != 0), "busy %d for %zu bytes", op.busy, len);
    uint8_t back[SC_WATCH_HB_OP_LEN];
    size_t n = sc_watch_hb_put(&op, back);
    FUZZ_REQUIRE(n == len && memcmp(back, b, len) == 0, "report does not encode back (%zu, %zu)", n,
                 len);
    if (len) FUZZ_REQUIRE(op.seq == be(b, 8), "number differs from the bytes");
  } else {
    FUZZ_REQUIRE(why[0] != '\0', "a refusal without a reason");
  }
  free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint8_t flags = data[0];
  int nranks = 1 + data[1];
  uint8_t h[SC_WATCH_HDR_LEN];
  memset(h, 0, sizeof(h));
  size_t rest = size - 2;
  memcpy(h, data + 2, rest < sizeof(h) ? rest : sizeof(h));
  const uint8_t *body = rest > sizeof(h) ? data + 2 + sizeof(h) : NULL;
  size_t blen = body ? rest - sizeof(h) : 0;
  if (flags & 1) put_be(h, 0x53435746u, 4);
  if (flags & 2) h[4] = 1;
  if (flags & 4) h[5] = SC_WATCH_HEARTBEAT;
  if (flags & 8) put_be(h + 8, be(h + 8, 4) % (uint64_t)nranks, 4);

  sc_watch_frame_t f;
  memset(&f, 0x5a, sizeof(f));
  char why[160];
  sc_result_t r = sc_watch_frame_parse(h, sizeof(h), nranks, &f, why, sizeof(why));
  int want = model_frame(h, nranks);
  FUZZ_REQUIRE((r == SC_SUCCESS) == want, "frame verdict %d, model %d", (int)r, want);
  /* A header of another length is never a frame. */
  FUZZ_REQUIRE(sc_watch_frame_parse(h, sizeof(h) - 1, nranks, &f, why, sizeof(why)) != SC_SUCCESS,
               "a 15-byte header parsed");
  if (r == SC_SUCCESS) {
    FUZZ_REQUIRE(f.type == h[5] && f.len == be(h + 6, 2) && f.subject == be(h + 8, 4) &&
                     f.code == be(h + 12, 4),
                 "parsed fields differ from the bytes");
    /* The reader hands the report over once all of it arrived. */
    if ((f.type == SC_WATCH_HEARTBEAT || f.type == SC_WATCH_OP) && blen >= f.len)
      check_report(body ? body : h, f.len);
  }
  /* And the report parser on whatever follows, up to 64 bytes. */
  check_report(body ? body : h, blen < 64 ? blen : 64);
  return 0;
}
