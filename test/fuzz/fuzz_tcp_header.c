/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target: sc_tcp_hdr_check, the check of every TCP segment header
 * against the posted receive (tcp_io.c), and sc_tcp_stripes, the placement of
 * a message's segments that both sides compute from the length. The input is
 *   u8 flags | u8 nsocks-1 | u32 posted seq | u64 posted len | 32 header bytes |
 *   16 bytes of the posted print
 * (big-endian, zero-padded: an input of the format before the print has an
 * all-zero posted print, which checks none); flags bit 0 writes the right
 * magic, bit 1 the posted seq, bit 2 the posted length, bit 3 the posted
 * print into the header, so that the fuzzer gets past each check. The
 * verdict is compared with a model written here from the wire format
 * (tcp_internal.h: u32 'SCTM', u32 seq, u64 length, 16-byte print; the print
 * is checked after the magic, only against a posted print that is not all
 * zero); the placement must cut [0, len) into 1..nsocks aligned, non-empty
 * stripes. */
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_common.h"
#include "transport/tcp/tcp_internal.h"

const char *const fuzz_target_name = "tcp_header";

static uint64_t be(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

static void put_be(uint8_t *p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static void check_stripes(size_t len, int nsocks) {
  size_t stripe = 0;
  int k = sc_tcp_stripes(len, nsocks, &stripe);
  FUZZ_REQUIRE(k >= 1 && k <= nsocks, "%d stripes over %d sockets", k, nsocks);
  if (nsocks == 1 || len <= SC_TCP_STRIPE_MIN) {
    FUZZ_REQUIRE(k == 1 && stripe == len, "%zu bytes: %d stripes of %zu", len, k, stripe);
    return;
  }
  FUZZ_REQUIRE(stripe % SC_TCP_STRIPE_ALIGN == 0, "stripe %zu not aligned", stripe);
  /* The receiver posts segment j at j * stripe with the rest of len: each
   * must be non-empty and the last must end at len. */
  FUZZ_REQUIRE(stripe > 0 && (size_t)(k - 1) * stripe < len && len <= (size_t)k * stripe,
               "%zu bytes: %d stripes of %zu do not cover it", len, k, stripe);
  size_t want_k = (len + SC_TCP_STRIPE_MIN - 1) / SC_TCP_STRIPE_MIN;
  FUZZ_REQUIRE((size_t)k <= want_k, "%zu bytes cut into %d stripes, more than %zu", len, k, want_k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t in[2 + 4 + 8 + SC_TCP_HDR_LEN + SC_TP_FP_LEN];
  memset(in, 0, sizeof(in));
  memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
  uint8_t flags = in[0];
  int nsocks = 1 + in[1] % SC_TCP_MAX_SOCKS;
  uint32_t seq = (uint32_t)be(in + 2, 4);
  /* A posted length is a buffer this process holds: at most 2^48 bytes. */
  size_t len = (size_t)(be(in + 6, 8) & (((uint64_t)1 << 48) - 1));
  uint8_t *hdr = malloc(SC_TCP_HDR_LEN); /* exact sizes: a read past them is caught */
  uint8_t *fp = malloc(SC_TP_FP_LEN);
  if (!hdr || !fp) {
    free(hdr);
    free(fp);
    return 0;
  }
  memcpy(hdr, in + 14, SC_TCP_HDR_LEN);
  memcpy(fp, in + 14 + SC_TCP_HDR_LEN, SC_TP_FP_LEN);
  if (flags & 1) put_be(hdr, SC_TCP_MSG_MAGIC, 4);
  if (flags & 2) put_be(hdr + 4, seq, 4);
  if (flags & 4) put_be(hdr + 8, len, 8);
  if (flags & 8) memcpy(hdr + 16, fp, SC_TP_FP_LEN);

  int fp_set = 0;
  for (int i = 0; i < SC_TP_FP_LEN; i++) fp_set |= fp[i] != 0;
  int msg_fp_set = 0; /* a header without a print is judged by seq and length alone */
  for (int i = 0; i < SC_TP_FP_LEN; i++) msg_fp_set |= hdr[16 + i] != 0;
  int fp_differs = fp_set && msg_fp_set && memcmp(hdr + 16, fp, SC_TP_FP_LEN) != 0;
  sc_tcp_hdr_t h;
  memset(&h, 0xa5, sizeof(h));
  sc_tcp_hdr_verdict_t v = sc_tcp_hdr_check(hdr, seq, len, fp, &h);
  sc_tcp_hdr_verdict_t want = be(hdr, 4) != 0x5343544du ? SC_TCP_HDR_BAD_MAGIC
                              : fp_differs              ? SC_TCP_HDR_BAD_PRINT
                              : be(hdr + 4, 4) != seq   ? SC_TCP_HDR_BAD_SEQ
                              : be(hdr + 8, 8) != len   ? SC_TCP_HDR_BAD_LEN
                                                        : SC_TCP_HDR_OK;
  FUZZ_REQUIRE(v == want, "verdict %d, model %d", (int)v, (int)want);
  FUZZ_REQUIRE(h.magic == be(hdr, 4) && h.seq == be(hdr + 4, 4) && h.len == be(hdr + 8, 8) &&
                   memcmp(h.fp, hdr + 16, SC_TP_FP_LEN) == 0,
               "parsed fields differ from the bytes");
  /* A receive posted without a print judges the header as one with a NULL print. */
  if (!fp_set) {
    sc_tcp_hdr_t h2;
    FUZZ_REQUIRE(sc_tcp_hdr_check(hdr, seq, len, NULL, &h2) == v, "NULL print judged otherwise");
  }
  free(hdr);
  free(fp);
  check_stripes(len, nsocks);
  return 0;
}
