/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target: the bootstrap root's handling of untrusted hellos. The input is
 * a sequence of connections, each
 *   u8 flags | header (up to SC_BOOT_HELLO_LEN bytes) | blob (bloblen bytes)
 * flags bit 0 writes the job's secret into the header and bit 1 the right
 * magic and version, so that the fuzzer gets past them; bits 4-7 size the
 * reason buffer (1..16 bytes). Each header goes through sc_boot_hello_parse,
 * sc_boot_hello_admit and sc_boot_blob_offset as the root's state machine
 * calls them, and every verdict is compared with a model written here from the
 * wire format (bootstrap_wire.h). Blobs are copied into an exact-size table. */
#include <stdlib.h>
#include <string.h>

#include "lib/control/bootstrap_wire.h"
#include "test/fuzz/fuzz_common.h"

const char *const fuzz_target_name = "bootstrap";

#define TABLE_COPY_MAX (1u << 20) /* larger tables are checked by offsets only */

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static const uint8_t *job_secret(void) {
  static uint8_t s[SC_SECRET_LEN];
  for (int i = 0; i < SC_SECRET_LEN; i++) s[i] = (uint8_t)(i * 37 + 11);
  return s;
}

/* The model: what the wire format says about one header. */
static int model_valid(const uint8_t *h, size_t len) {
  if (len != SC_BOOT_HELLO_LEN) return 0;
  if (be32(h) != 0x53434248u || h[4] != 0 || h[5] != 3) return 0;
  if (memcmp(h + 8, job_secret(), SC_SECRET_LEN) != 0) return 0;
  uint32_t rank = be32(h + 40), nranks = be32(h + 44), bloblen = be32(h + 48);
  if (!(nranks >= 1 && nranks <= 65536 && rank < nranks && bloblen <= 1024)) return 0;
  /* The answer address (socket.h's packed form): family 4 or 6, byte 1 zero,
   * port not 0; IPv4: the scope id and the bytes after the 4-byte address zero. */
  const uint8_t *a = h + 52;
  if ((a[0] != 4 && a[0] != 6) || a[1] != 0 || (a[2] == 0 && a[3] == 0)) return 0;
  if (a[0] == 4)
    for (int i = 4; i < 24; i++)
      if ((i < 8 || i >= 12) && a[i] != 0) return 0;
  return 1;
}

typedef struct job {
  int nranks; /* 0 until the first valid hello */
  size_t bloblen, table_len;
  uint8_t *slot, *table;
  int failed;
} job_t;

static void one_hello(job_t *j, uint8_t flags, const uint8_t *hdr, size_t hlen, const uint8_t *blob,
                      size_t avail, size_t *used) {
  size_t whylen = (size_t)(flags >> 4) + 1;
  char *why = malloc(whylen);
  if (!why) return;
  sc_boot_hello_t h;
  memset(&h, 0xa5, sizeof(h));
  sc_result_t r = sc_boot_hello_parse(hdr, hlen, job_secret(), &h, why, whylen);
  int want = model_valid(hdr, hlen);
  FUZZ_REQUIRE((r == SC_SUCCESS) == want, "parse says %d, model says valid=%d", (int)r, want);
  if (r != SC_SUCCESS) {
    FUZZ_REQUIRE(r == SC_ERR_REMOTE, "parse error code %d", (int)r);
    FUZZ_REQUIRE(memchr(why, '\0', whylen) != NULL, "reason not terminated");
    free(why);
    return;
  }
  FUZZ_REQUIRE(h.rank == be32(hdr + 40) && h.nranks == be32(hdr + 44) &&
                   h.bloblen == be32(hdr + 48),
               "parsed fields differ from the header");
  uint8_t again[SC_BOOT_HELLO_LEN];
  sc_boot_hello_build(again, job_secret(), h.rank, h.nranks, h.bloblen, h.addr);
  /* Bytes 6-7 are reserved: the client writes 0, the root ignores them. */
  FUZZ_REQUIRE(memcmp(again, hdr, 6) == 0 && memcmp(again + 8, hdr + 8, SC_BOOT_HELLO_LEN - 8) == 0,
               "build(parse(h)) != h");
  *used = h.bloblen < avail ? h.bloblen : avail;

  if (j->failed) {
    free(why);
    return;
  }
  if (j->nranks == 0) {
    j->nranks = (int)h.nranks;
    j->bloblen = h.bloblen;
    j->table_len = (size_t)h.nranks * h.bloblen;
    j->slot = calloc(h.nranks, 1);
    if (j->table_len <= TABLE_COPY_MAX) j->table = malloc(j->table_len ? j->table_len : 1);
  }
  sc_boot_admit_t a = sc_boot_hello_admit(&h, j->nranks, j->bloblen, j->slot);
  sc_boot_admit_t model = h.nranks != (uint32_t)j->nranks ? SC_BOOT_ADMIT_NRANKS
                          : h.bloblen != j->bloblen       ? SC_BOOT_ADMIT_BLOBLEN
                          : j->slot[h.rank]               ? SC_BOOT_ADMIT_DUPLICATE
                                                          : SC_BOOT_ADMIT_OK;
  FUZZ_REQUIRE(a == model, "admit says %d, model %d", (int)a, (int)model);
  if (a != SC_BOOT_ADMIT_OK) {
    j->failed = 1; /* the root fails the whole job */
    free(why);
    return;
  }
  size_t off = (size_t)-1;
  r = sc_boot_blob_offset(&h, j->table_len, &off, why, whylen);
  FUZZ_REQUIRE(r == SC_SUCCESS && off == (size_t)h.rank * h.bloblen, "blob offset %zu for rank %u",
               off, h.rank);
  j->slot[h.rank] = 1;
  if (j->table) memcpy(j->table + off, blob, *used);
  free(why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  job_t j;
  memset(&j, 0, sizeof(j));
  size_t pos = 0;
  while (pos < size) {
    uint8_t flags = data[pos++];
    size_t hlen = size - pos < SC_BOOT_HELLO_LEN ? size - pos : SC_BOOT_HELLO_LEN;
    uint8_t *hdr = calloc(hlen ? hlen : 1, 1); /* exact size: a read past it is caught */
    if (!hdr) break;
    memcpy(hdr, data + pos, hlen);
    pos += hlen;
    if ((flags & 1) && hlen >= 8 + SC_SECRET_LEN) memcpy(hdr + 8, job_secret(), SC_SECRET_LEN);
    if ((flags & 2) && hlen >= 6) {
      sc_wire_put_u32(hdr, SC_BOOT_HELLO_MAGIC);
      hdr[4] = 0;
      hdr[5] = SC_BOOT_VERSION;
    }
    size_t used = 0;
    one_hello(&j, flags, hdr, hlen, data + pos, size - pos, &used);
    pos += used;
    free(hdr);
  }
  /* A parse with a wrong length must fail whatever the bytes (the root only
   * ever passes a whole header, but the function must not rely on it). */
  if (size > 0 && size < SC_BOOT_HELLO_LEN) {
    sc_boot_hello_t h;
    char why[64];
    FUZZ_REQUIRE(sc_boot_hello_parse(data, size, job_secret(), &h, why, sizeof(why)) != SC_SUCCESS,
                 "short header accepted");
  }
  free(j.slot);
  free(j.table);
  return 0;
}
