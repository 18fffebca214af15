/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP transport: the connection setup's messages on the wire (the hello a
 * connecting rank sends on each socket, the ack or refusal it gets back;
 * format in tcp_internal.h). Every field of a hello is checked before the
 * listener trusts it. */
#include <stdio.h>
#include <string.h>

#include "transport/tcp/tcp_internal.h"

void sc_tcp_encode_hello(uint8_t out[SC_TCP_HELLO_LEN], const uint8_t secret[SC_SECRET_LEN],
                         int from, int to, int nranks, int sock, int nsocks) {
  sc_wire_put_u32(out, SC_TCP_HELLO_MAGIC);
  sc_wire_put_u32(out + 4, SC_TCP_VERSION);
  memcpy(out + 8, secret, SC_SECRET_LEN);
  sc_wire_put_u32(out + 8 + SC_SECRET_LEN, (uint32_t)from);
  sc_wire_put_u32(out + 12 + SC_SECRET_LEN, (uint32_t)to);
  sc_wire_put_u32(out + 16 + SC_SECRET_LEN, (uint32_t)nranks);
  sc_wire_put_u32(out + 20 + SC_SECRET_LEN, (uint32_t)sock);
  sc_wire_put_u32(out + 24 + SC_SECRET_LEN, (uint32_t)nsocks);
}

const char *sc_tcp_hello_parse(const uint8_t buf[SC_TCP_HELLO_LEN],
                               const uint8_t secret[SC_SECRET_LEN], int rank, int nranks,
                               sc_tcp_hello_t *out, char *why, size_t whylen) {
  const uint8_t *h = buf;
  sc_tcp_hello_t m = {
      .magic = sc_wire_get_u32(h),
      .version = sc_wire_get_u32(h + 4),
      .from = sc_wire_get_u32(h + 8 + SC_SECRET_LEN),
      .to = sc_wire_get_u32(h + 12 + SC_SECRET_LEN),
      .nranks = sc_wire_get_u32(h + 16 + SC_SECRET_LEN),
      .sock = sc_wire_get_u32(h + 20 + SC_SECRET_LEN),
      .nsocks = sc_wire_get_u32(h + 24 + SC_SECRET_LEN),
  };
  *out = m;
  if (m.magic != SC_TCP_HELLO_MAGIC || m.version != SC_TCP_VERSION) {
    snprintf(why, whylen, "not a libsparsecoll tcp version %d hello (magic 0x%08x, version %u)",
             SC_TCP_VERSION, m.magic, m.version);
    return why;
  }
  if (!sc_secret_equal(h + 8, secret, SC_SECRET_LEN)) return "wrong secret";
  if (m.nranks != (uint32_t)nranks || m.to != (uint32_t)rank || m.from == (uint32_t)rank ||
      m.from >= (uint32_t)nranks) {
    snprintf(why, whylen, "hello from rank %u to rank %u with nranks=%u does not fit rank %d of %d",
             m.from, m.to, m.nranks, rank, nranks);
    return why;
  }
  if (m.nsocks < 1 || m.nsocks > SC_TCP_MAX_SOCKS || m.sock >= m.nsocks) {
    snprintf(why, whylen, "hello from rank %u for socket %u of %u does not fit (1..%d sockets)",
             m.from, m.sock, m.nsocks, SC_TCP_MAX_SOCKS);
    return why;
  }
  return NULL;
}

static void encode_answer(uint8_t out[SC_TCP_ACK_LEN], uint32_t magic, int from, int to, int sock) {
  sc_wire_put_u32(out, magic);
  sc_wire_put_u32(out + 4, (uint32_t)from);
  sc_wire_put_u32(out + 8, (uint32_t)to);
  sc_wire_put_u32(out + 12, (uint32_t)sock);
}

static int answer_is(const uint8_t buf[SC_TCP_ACK_LEN], uint32_t magic, int peer, int rank,
                     int sock) {
  return sc_wire_get_u32(buf) == magic && sc_wire_get_u32(buf + 4) == (uint32_t)peer &&
         sc_wire_get_u32(buf + 8) == (uint32_t)rank && sc_wire_get_u32(buf + 12) == (uint32_t)sock;
}

void sc_tcp_encode_ack(uint8_t out[SC_TCP_ACK_LEN], int from, int to, int sock) {
  encode_answer(out, SC_TCP_ACK_MAGIC, from, to, sock);
}

int sc_tcp_ack_valid(const uint8_t buf[SC_TCP_ACK_LEN], int peer, int rank, int sock) {
  return answer_is(buf, SC_TCP_ACK_MAGIC, peer, rank, sock);
}

void sc_tcp_encode_nack(uint8_t out[SC_TCP_ACK_LEN], int from, int to, int sock) {
  encode_answer(out, SC_TCP_NACK_MAGIC, from, to, sock);
}

int sc_tcp_nack_valid(const uint8_t buf[SC_TCP_ACK_LEN], int peer, int rank, int sock) {
  return answer_is(buf, SC_TCP_NACK_MAGIC, peer, rank, sock);
}
