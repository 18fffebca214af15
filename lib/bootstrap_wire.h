/* Bootstrap wire format, shared by the root service (bootstrap_root.c) and the
 * client (bootstrap.c). Multi-byte fields are big-endian:
 *   hello  client -> root : u32 magic 'SCBH', u16 version, u16 0, u8 secret[32],
 *                           u32 rank, u32 nranks, u32 bloblen, blob[bloblen]
 *   reply  root -> client : u32 magic 'SCBR', u32 status (sc_result_t), u32 len,
 *                           then the table (status 0, len = nranks*bloblen) or an
 *                           error text (len <= SC_BOOT_ERRTEXT_MAX) */
#ifndef SC_BOOTSTRAP_WIRE_H
#define SC_BOOTSTRAP_WIRE_H

#include <stdint.h>

#include "lib/bootstrap.h"

#define SC_BOOT_HELLO_MAGIC 0x53434248u /* 'SCBH' */
#define SC_BOOT_REPLY_MAGIC 0x53434252u /* 'SCBR' */
#define SC_BOOT_VERSION     1
#define SC_BOOT_HELLO_LEN   (4 + 2 + 2 + SC_SECRET_LEN + 4 + 4 + 4)
#define SC_BOOT_REPLY_LEN   12
#define SC_BOOT_ERRTEXT_MAX 1024

static inline void sc_boot_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static inline uint32_t sc_boot_get32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

#endif
