/* SPDX-License-Identifier: BSD-3-Clause */
/* Byte order of everything the library puts on a wire or into a blob that
 * another process reads (bootstrap and watch messages, unique ids, socket
 * addresses, TCP hellos and headers, operation fingerprints): big-endian,
 * byte by byte, so that the layout is independent of the host and of
 * alignment. */
#ifndef SC_WIRE_H
#define SC_WIRE_H

#include <stdint.h>

static inline void sc_wire_put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static inline void sc_wire_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static inline void sc_wire_put_u64(uint8_t *p, uint64_t v) {
  sc_wire_put_u32(p, (uint32_t)(v >> 32));
  sc_wire_put_u32(p + 4, (uint32_t)v);
}

static inline uint16_t sc_wire_get_u16(const uint8_t *p) {
  return (uint16_t)(((unsigned)p[0] << 8) | p[1]);
}

static inline uint32_t sc_wire_get_u32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t sc_wire_get_u64(const uint8_t *p) {
  return ((uint64_t)sc_wire_get_u32(p) << 32) | sc_wire_get_u32(p + 4);
}

#endif
