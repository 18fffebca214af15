/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target: the client's handling of the root's reply. The input is
 *   u16 nranks-1 | u16 bloblen (mod 1025) | u8 text buffer size | reply header | payload
 * (big-endian); the header goes through sc_boot_reply_parse for a table of
 * nranks*bloblen bytes, an error text through sc_boot_errtext_clean into an
 * exact-size buffer, and each result is compared with a model written here
 * from the wire format (bootstrap_wire.h). */
#include <stdlib.h>
#include <string.h>

#include "lib/control/bootstrap_wire.h"
#include "test/fuzz/fuzz_common.h"

const char *const fuzz_target_name = "reply";

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void check_text(const uint8_t *text, size_t len, size_t outlen) {
  char *out = malloc(outlen);
  if (!out) return;
  memset(out, 'X', outlen);
  sc_boot_errtext_clean(text, len, out, outlen);
  size_t want = 0; /* up to the first NUL, the payload and the buffer */
  while (want < len && want + 1 < outlen && text[want] != 0) want++;
  FUZZ_REQUIRE(memchr(out, '\0', outlen) != NULL, "cleaned text not terminated");
  FUZZ_REQUIRE(strlen(out) == want, "cleaned text is %zu chars, want %zu", strlen(out), want);
  for (size_t i = 0; i < want; i++) {
    char c = (text[i] >= 0x20 && text[i] <= 0x7e) ? (char)text[i] : '?';
    FUZZ_REQUIRE(out[i] == c, "char %zu is 0x%02x, want 0x%02x", i, (unsigned char)out[i],
                 (unsigned char)c);
  }
  free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5) return 0;
  size_t nranks = (((size_t)data[0] << 8) | data[1]) + 1;
  size_t bloblen = (((size_t)data[2] << 8) | data[3]) % (SC_BOOT_BLOB_MAX + 1);
  size_t outlen = data[4] ? data[4] : SC_BOOT_ERRTEXT_MAX + 1;
  size_t table_len = nranks * bloblen;
  data += 5;
  size -= 5;
  size_t hlen = size < SC_BOOT_REPLY_LEN ? size : SC_BOOT_REPLY_LEN;
  uint8_t *hdr = calloc(hlen ? hlen : 1, 1); /* exact size: a read past it is caught */
  if (!hdr) return 0;
  memcpy(hdr, data, hlen);

  char why[128];
  sc_boot_reply_t rep;
  memset(&rep, 0xa5, sizeof(rep));
  sc_result_t r = sc_boot_reply_parse(hdr, hlen, table_len, &rep, why, sizeof(why));
  int valid = hlen == 12 && be32(hdr) == 0x53434252u &&
              (be32(hdr + 4) == 0 ? be32(hdr + 8) == table_len : be32(hdr + 8) <= 1024);
  FUZZ_REQUIRE((r == SC_SUCCESS) == valid, "parse says %d, model says valid=%d", (int)r, valid);
  if (r != SC_SUCCESS) {
    FUZZ_REQUIRE(r == SC_ERR_REMOTE && memchr(why, '\0', sizeof(why)), "bad error report");
    free(hdr);
    return 0;
  }
  FUZZ_REQUIRE(rep.status == be32(hdr + 4) && rep.len == be32(hdr + 8), "fields differ");
  sc_result_t code = sc_boot_reply_code(rep.status);
  sc_result_t want_code = rep.status == 2 || rep.status == 3 || rep.status == 6
                              ? (sc_result_t)rep.status
                              : SC_ERR_REMOTE; /* INVALID_ARG, NOMEM, TIMEOUT pass through */
  FUZZ_REQUIRE(rep.status == 0 || code == want_code, "status %u maps to %d", rep.status, (int)code);
  if (rep.status != 0) {
    size_t avail = size - hlen < rep.len ? size - hlen : rep.len;
    check_text(data + hlen, avail, outlen);
  }
  free(hdr);
  return 0;
}
