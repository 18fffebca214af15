/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target: the TCP connection setup parsers (tcp_setup.c): the hello a
 * connecting rank sends on each socket, checked by sc_tcp_hello_parse before the
 * listener trusts any field, and the ack it gets back (sc_tcp_ack_valid). The
 * input is
 *   u8 flags | u8 nranks-1 | u8 rank | u8 why size | 60 hello bytes |
 *   u8 ack peer | u8 ack sock | 16 ack bytes
 * (zero-padded). Flags bit 0 writes the right magic and version, bit 1 the
 * job's secret, bit 2 nranks, bit 3 this rank as `to`, bit 4 a valid ack, so
 * that the fuzzer gets past each check. Verdicts are compared with a model
 * written here from the wire format (tcp_internal.h); an accepted hello's
 * fields must be the bytes', a rejected one must come with a terminated text
 * that fits the caller's buffer. */
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_common.h"
#include "transport/tcp/tcp_internal.h"

const char *const fuzz_target_name = "tcp_hello";

#define OFF_HELLO 4
#define OFF_ACK   (OFF_HELLO + SC_TCP_HELLO_LEN)
#define IN_LEN    (OFF_ACK + 2 + SC_TCP_ACK_LEN)

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static void check_hello(const uint8_t *in, uint8_t flags) {
  uint8_t secret[SC_SECRET_LEN];
  for (int i = 0; i < SC_SECRET_LEN; i++) secret[i] = (uint8_t)(i * 37 + 11);
  int nranks = 1 + in[1];
  int rank = in[2] % nranks;
  size_t whylen = in[3] ? in[3] : 200;
  uint8_t *h = malloc(SC_TCP_HELLO_LEN); /* exact sizes: a read or write past them is caught */
  char *why = malloc(whylen);
  if (!h || !why) {
    free(h);
    free(why);
    return;
  }
  memcpy(h, in + OFF_HELLO, SC_TCP_HELLO_LEN);
  if (flags & 1) {
    put32(h, 0x53435448u);
    put32(h + 4, 4); /* wire version 4: the print in every segment header */
  }
  if (flags & 2) memcpy(h + 8, secret, SC_SECRET_LEN);
  const size_t f = 8 + SC_SECRET_LEN; /* from, to, nranks, sock, nsocks */
  if (flags & 4) put32(h + f + 8, (uint32_t)nranks);
  if (flags & 8) put32(h + f + 4, (uint32_t)rank);
  uint32_t from = be32(h + f), to = be32(h + f + 4), nr = be32(h + f + 8);
  uint32_t sock = be32(h + f + 12), nsocks = be32(h + f + 16);
  int valid = be32(h) == 0x53435448u && be32(h + 4) == 5 &&
              memcmp(h + 8, secret, SC_SECRET_LEN) == 0 && nr == (uint32_t)nranks &&
              to == (uint32_t)rank && from != (uint32_t)rank && from < (uint32_t)nranks &&
              nsocks >= 1 && nsocks <= 64 && sock < nsocks;

  sc_tcp_hello_t m;
  memset(why, 'X', whylen);
  const char *bad = sc_tcp_hello_parse(h, secret, rank, nranks, &m, why, whylen);
  FUZZ_REQUIRE((bad == NULL) == valid, "parse says %s, model says valid=%d", bad ? bad : "ok",
               valid);
  if (bad) {
    FUZZ_REQUIRE(bad != why || memchr(why, '\0', whylen) != NULL, "text not terminated");
    FUZZ_REQUIRE(bad[0] != '\0' || whylen == 1, "empty reason");
  } else {
    FUZZ_REQUIRE(m.from == from && m.to == to && m.nranks == nr && m.sock == sock &&
                     m.nsocks == nsocks,
                 "fields differ from the bytes");
    /* What the sender encodes for these fields is what was accepted. */
    uint8_t again[SC_TCP_HELLO_LEN];
    sc_tcp_encode_hello(again, secret, (int)from, rank, nranks, (int)sock, (int)nsocks);
    FUZZ_REQUIRE(memcmp(again, h, SC_TCP_HELLO_LEN) == 0, "encoding differs from the hello");
  }
  free(h);
  free(why);
}

static void check_ack(const uint8_t *in, uint8_t flags) {
  int rank = in[2];
  int peer = in[OFF_ACK], sock = in[OFF_ACK + 1] % SC_TCP_MAX_SOCKS;
  uint8_t *a = malloc(SC_TCP_ACK_LEN);
  if (!a) return;
  memcpy(a, in + OFF_ACK + 2, SC_TCP_ACK_LEN);
  if (flags & 16) {
    uint8_t mine[SC_TCP_ACK_LEN];
    sc_tcp_encode_ack(mine, peer, rank, sock);
    /* The fuzzer's bytes stay where they are non-zero: one-byte corruptions. */
    for (int i = 0; i < SC_TCP_ACK_LEN; i++) a[i] = a[i] ? a[i] : mine[i];
  }
  int valid = be32(a) == 0x5343544bu && be32(a + 4) == (uint32_t)peer &&
              be32(a + 8) == (uint32_t)rank && be32(a + 12) == (uint32_t)sock;
  FUZZ_REQUIRE(sc_tcp_ack_valid(a, peer, rank, sock) == valid, "ack verdict differs, model %d",
               valid);
  free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t in[IN_LEN];
  memset(in, 0, sizeof(in));
  memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
  check_hello(in, in[0]);
  check_ack(in, in[0]);
  return 0;
}
