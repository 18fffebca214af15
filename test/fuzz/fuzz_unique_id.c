/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target: sc_unique_id_decode, which reads ids users copy through text
 * channels. The input is u8 flags | up to 128 id bytes (zero-padded); flags
 * bit 0 writes the right magic and version, bit 1 the right checksum, so that
 * the fuzzer gets past them. The verdict is compared with a model written here
 * from the id layout (lib/control/bootstrap.c): "SCUI", u16 version 1, the packed root
 * address (lib/base/socket.c: u8 family tag 4|6, u8 0, u16 port != 0, u32 scope,
 * 16 address bytes; bytes encode leaves zero must be zero), the 32-byte
 * secret, FNV-1a of all that, zeros. A decoded id must encode back to itself,
 * byte for byte. */
#include <string.h>

#include "lib/control/bootstrap.h"
#include "test/fuzz/fuzz_common.h"

const char *const fuzz_target_name = "unique_id";

#define OFF_ADDR   8
#define OFF_SECRET 32
#define OFF_CHECK  64

static uint32_t fnv(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int model_valid(const uint8_t *p) {
  if (memcmp(p, "SCUI", 4) != 0 || p[4] != 0 || p[5] != 1 || p[6] != 0 || p[7] != 0) return 0;
  if (be32(p + OFF_CHECK) != fnv(p, OFF_CHECK)) return 0;
  for (int i = OFF_CHECK + 4; i < 128; i++)
    if (p[i]) return 0;
  const uint8_t *a = p + OFF_ADDR;
  if (a[1] != 0) return 0;
  if (a[0] == 4)
    for (int i = 4; i < 24; i++)
      if ((i < 8 || i >= 12) && a[i] != 0) return 0;
  return (a[0] == 4 || a[0] == 6) && (a[2] | a[3]) != 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t flags = data[0];
  sc_unique_id_t id;
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, data + 1, size - 1 < sizeof(id) ? size - 1 : sizeof(id));
  uint8_t *p = (uint8_t *)id.internal;
  if (flags & 1) {
    memcpy(p, "SCUI\0\1", 6);
  }
  if (flags & 2) {
    uint32_t h = fnv(p, OFF_CHECK);
    for (int i = 0; i < 4; i++) p[OFF_CHECK + i] = (uint8_t)(h >> (24 - 8 * i));
  }
  sc_sockaddr_t root;
  uint8_t secret[SC_SECRET_LEN];
  sc_result_t r = sc_unique_id_decode(&id, &root, secret);
  int valid = model_valid(p);
  FUZZ_REQUIRE((r == SC_SUCCESS) == valid, "decode says %d, model says valid=%d", (int)r, valid);
  if (r != SC_SUCCESS) {
    FUZZ_REQUIRE(r == SC_ERR_INVALID_ARG, "decode error code %d", (int)r);
    return 0;
  }
  FUZZ_REQUIRE(memcmp(secret, p + OFF_SECRET, SC_SECRET_LEN) == 0, "secret differs");
  sc_unique_id_t again;
  FUZZ_REQUIRE(sc_unique_id_encode(&root, secret, &again) == SC_SUCCESS, "re-encode failed");
  /* Decode accepts exactly what encode writes. */
  FUZZ_REQUIRE(memcmp(p, again.internal, sizeof(id)) == 0, "encode(decode(id)) != id");
  return 0;
}
