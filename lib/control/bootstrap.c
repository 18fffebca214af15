/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI-free rendezvous: the unique id and the client side of the exchange. The
 * root service is in bootstrap_root.c, the wire format in bootstrap_wire.h. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/control/bootstrap.h"
#include "lib/control/bootstrap_wire.h"

#define SC_ID_MAGIC   "SCUI"
#define SC_ID_VERSION 1

/* Unique id layout inside the 128 bytes. */
#define SC_ID_OFF_VERSION 4
#define SC_ID_OFF_ADDR    8
#define SC_ID_OFF_SECRET  (SC_ID_OFF_ADDR + SC_SOCKET_ADDR_WIRE_LEN)
#define SC_ID_OFF_CHECK   (SC_ID_OFF_SECRET + SC_SECRET_LEN)
#define SC_ID_USED        (SC_ID_OFF_CHECK + 4)

_Static_assert(SC_ID_USED <= sizeof(((sc_unique_id_t *)0)->internal), "unique id too small");

/* FNV-1a: catches a truncated or mangled id (copied through a text channel)
 * that would otherwise decode into a plausible address. Not a security check:
 * the secret is. */
static uint32_t fnv1a(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

sc_result_t sc_unique_id_encode(const sc_sockaddr_t *root, const uint8_t secret[SC_SECRET_LEN],
                                sc_unique_id_t *id) {
  if (!root || !secret || !id) return SC_ERR(SC_ERR_INVALID_ARG, "unique id encode: NULL argument");
  uint8_t *p = (uint8_t *)id->internal;
  memset(id, 0, sizeof(*id));
  memcpy(p, SC_ID_MAGIC, 4);
  sc_wire_put_u16(p + SC_ID_OFF_VERSION, SC_ID_VERSION);
  SC_CHECK(sc_socket_addr_pack(root, p + SC_ID_OFF_ADDR));
  if (p[SC_ID_OFF_ADDR + 2] == 0 && p[SC_ID_OFF_ADDR + 3] == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "unique id encode: root address has port 0");
  memcpy(p + SC_ID_OFF_SECRET, secret, SC_SECRET_LEN);
  sc_wire_put_u32(p + SC_ID_OFF_CHECK, fnv1a(p, SC_ID_OFF_CHECK));
  return SC_SUCCESS;
}

sc_result_t sc_unique_id_decode(const sc_unique_id_t *id, sc_sockaddr_t *root,
                                uint8_t secret[SC_SECRET_LEN]) {
  if (!id || !root || !secret) return SC_ERR(SC_ERR_INVALID_ARG, "unique id decode: NULL argument");
  const uint8_t *p = (const uint8_t *)id->internal;
  if (memcmp(p, SC_ID_MAGIC, 4) != 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "not a libsparsecoll unique id (bad magic)");
  unsigned ver = sc_wire_get_u16(p + SC_ID_OFF_VERSION);
  if (ver != SC_ID_VERSION)
    return SC_ERR(SC_ERR_INVALID_ARG, "unique id version %u, this library speaks %u", ver,
                  SC_ID_VERSION);
  if (sc_wire_get_u32(p + SC_ID_OFF_CHECK) != fnv1a(p, SC_ID_OFF_CHECK))
    return SC_ERR(SC_ERR_INVALID_ARG, "unique id is corrupted (checksum mismatch)");
  /* Encode writes zeros there: one id, one encoding. */
  if (p[SC_ID_OFF_VERSION + 2] != 0 || p[SC_ID_OFF_VERSION + 3] != 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "unique id is corrupted (reserved bytes not zero)");
  for (size_t i = SC_ID_USED; i < sizeof(id->internal); i++)
    if (p[i] != 0) return SC_ERR(SC_ERR_INVALID_ARG, "unique id is corrupted (padding not zero)");
  sc_sockaddr_t a;
  sc_result_t r = sc_socket_addr_unpack(p + SC_ID_OFF_ADDR, &a);
  if (r != SC_SUCCESS)
    return SC_ERR(SC_ERR_INVALID_ARG, "unique id holds no valid root address (%s)",
                  sc_last_error());
  *root = a;
  memcpy(secret, p + SC_ID_OFF_SECRET, SC_SECRET_LEN);
  return SC_SUCCESS;
}

void sc_boot_hello_build(uint8_t out[SC_BOOT_HELLO_LEN], const uint8_t secret[SC_SECRET_LEN],
                         uint32_t rank, uint32_t nranks, uint32_t bloblen) {
  sc_wire_put_u32(out, SC_BOOT_HELLO_MAGIC);
  sc_wire_put_u16(out + 4, SC_BOOT_VERSION);
  out[6] = out[7] = 0;
  memcpy(out + 8, secret, SC_SECRET_LEN);
  sc_wire_put_u32(out + 8 + SC_SECRET_LEN, rank);
  sc_wire_put_u32(out + 12 + SC_SECRET_LEN, nranks);
  sc_wire_put_u32(out + 16 + SC_SECRET_LEN, bloblen);
}

sc_result_t sc_boot_reply_parse(const uint8_t *buf, size_t len, size_t table_len,
                                sc_boot_reply_t *out, char *why, size_t whylen) {
  if (len != SC_BOOT_REPLY_LEN) {
    snprintf(why, whylen, "sent a %zu-byte reply header, expected %d", len, SC_BOOT_REPLY_LEN);
    return SC_ERR_REMOTE;
  }
  uint32_t magic = sc_wire_get_u32(buf), status = sc_wire_get_u32(buf + 4),
           plen = sc_wire_get_u32(buf + 8);
  if (magic != SC_BOOT_REPLY_MAGIC) {
    snprintf(why, whylen, "sent garbage (magic 0x%08x)", magic);
    return SC_ERR_REMOTE;
  }
  if (status == SC_SUCCESS && plen != table_len) {
    snprintf(why, whylen, "sent a %u-byte table where %zu bytes were expected", plen, table_len);
    return SC_ERR_REMOTE;
  }
  if (status != SC_SUCCESS && plen > SC_BOOT_ERRTEXT_MAX) {
    snprintf(why, whylen, "sent a %u-byte error text (limit %d)", plen, SC_BOOT_ERRTEXT_MAX);
    return SC_ERR_REMOTE;
  }
  *out = (sc_boot_reply_t){.status = status, .len = plen};
  return SC_SUCCESS;
}

/* The root's error text is shown to users: keep it printable (it ends at the
 * first NUL, as a C string the root sent would). */
void sc_boot_errtext_clean(const uint8_t *text, size_t len, char *out, size_t outlen) {
  if (outlen == 0) return;
  size_t n = len < outlen - 1 ? len : outlen - 1;
  size_t i = 0;
  for (; i < n && text[i] != 0; i++)
    out[i] = (text[i] < 0x20 || text[i] > 0x7e) ? '?' : (char)text[i];
  out[i] = '\0';
}

sc_result_t sc_boot_reply_code(uint32_t status) {
  return (status == SC_ERR_INVALID_ARG || status == SC_ERR_TIMEOUT || status == SC_ERR_NOMEM)
             ? (sc_result_t)status
             : SC_ERR_REMOTE;
}

sc_result_t sc_bootstrap_exchange(const sc_sockaddr_t *root, const uint8_t secret[SC_SECRET_LEN],
                                  int rank, int nranks, const void *blob, size_t bloblen, void *all,
                                  int timeout_ms) {
  if (!root || !secret) return SC_ERR(SC_ERR_INVALID_ARG, "bootstrap: NULL root or secret");
  if (nranks < 1 || nranks > SC_RANKS_MAX)
    return SC_ERR(SC_ERR_INVALID_ARG, "bootstrap: nranks %d outside [1, %d]", nranks, SC_RANKS_MAX);
  if (rank < 0 || rank >= nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "bootstrap: rank %d outside [0, %d)", rank, nranks);
  if (bloblen > SC_BOOT_BLOB_MAX)
    return SC_ERR(SC_ERR_INVALID_ARG, "bootstrap: blob of %zu bytes exceeds %d", bloblen,
                  SC_BOOT_BLOB_MAX);
  if ((bloblen && !blob) || (bloblen && !all))
    return SC_ERR(SC_ERR_INVALID_ARG, "bootstrap: NULL blob or table buffer");
  if (timeout_ms <= 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "bootstrap: timeout %d ms must be positive", timeout_ms);

  char raddr[64], who[96];
  sc_socket_addr_str(root, raddr, sizeof(raddr));
  snprintf(who, sizeof(who), "bootstrap root %s", raddr);
  int64_t start = sc_now_ms();
  int64_t deadline = start + timeout_ms;
  /* The root usually runs with the same timeout but started earlier; waiting a
   * little longer for its reply lets its more precise error (which ranks are
   * missing) reach us instead of our own bare timeout. */
  int grace = timeout_ms / 8 < 1000 ? timeout_ms / 8 : 1000;
  int64_t reply_deadline = deadline + grace;
  int fd = -1;
  char inner[SC_ERRMSG_MAX];

  sc_result_t r = sc_socket_connect(root, deadline, &fd);
  if (r != SC_SUCCESS) {
    sc_error_get_detail(inner, sizeof(inner));
    if (r == SC_ERR_TIMEOUT)
      return SC_ERR(SC_ERR_TIMEOUT,
                    "bootstrap timeout after %d ms: rank %d of %d could not reach the root at %s "
                    "(%s)",
                    timeout_ms, rank, nranks, raddr, inner);
    return SC_ERR(r, "bootstrap: rank %d cannot connect to the root at %s (%s)", rank, raddr,
                  inner);
  }

  uint8_t hello[SC_BOOT_HELLO_LEN + SC_BOOT_BLOB_MAX];
  sc_boot_hello_build(hello, secret, (uint32_t)rank, (uint32_t)nranks, (uint32_t)bloblen);
  if (bloblen) memcpy(hello + SC_BOOT_HELLO_LEN, blob, bloblen);
  r = sc_socket_write_all(fd, hello, SC_BOOT_HELLO_LEN + bloblen, deadline, who);
  memset(hello + 8, 0, SC_SECRET_LEN);
  if (r != SC_SUCCESS) goto fail_io;

  uint8_t rep[SC_BOOT_REPLY_LEN];
  r = sc_socket_read_all(fd, rep, sizeof(rep), reply_deadline, who);
  if (r != SC_SUCCESS) goto fail_io;
  size_t table_len = (size_t)nranks * bloblen;
  sc_boot_reply_t reply;
  char why[128];
  if (sc_boot_reply_parse(rep, sizeof(rep), table_len, &reply, why, sizeof(why)) != SC_SUCCESS) {
    close(fd);
    return SC_ERR(SC_ERR_REMOTE, "bootstrap: %s %s to rank %d", who, why, rank);
  }
  if (reply.status == SC_SUCCESS) {
    r = sc_socket_read_all(fd, all, table_len, reply_deadline, who);
    if (r != SC_SUCCESS) goto fail_io;
    close(fd);
    SC_TRACE(SC_SUBSYS_BOOT, "bootstrap: rank %d got the table from %s in %lld ms", rank, raddr,
             (long long)(sc_now_ms() - start));
    return SC_SUCCESS;
  }
  uint8_t raw[SC_BOOT_ERRTEXT_MAX];
  char text[SC_BOOT_ERRTEXT_MAX + 1];
  r = sc_socket_read_all(fd, raw, reply.len, reply_deadline, who);
  if (r != SC_SUCCESS) goto fail_io;
  close(fd);
  sc_boot_errtext_clean(raw, reply.len, text, sizeof(text));
  return SC_ERR(sc_boot_reply_code(reply.status), "%s: %s", who, text);

fail_io:
  close(fd);
  sc_error_get_detail(inner, sizeof(inner));
  if (r == SC_ERR_TIMEOUT)
    return SC_ERR(SC_ERR_TIMEOUT,
                  "bootstrap timeout after %d ms: rank %d of %d checked in with the root at %s "
                  "but got no table (%s)",
                  timeout_ms, rank, nranks, raddr, inner);
  if (r == SC_ERR_REMOTE)
    return SC_ERR(SC_ERR_REMOTE,
                  "bootstrap: the root at %s dropped rank %d (wrong secret or not a "
                  "libsparsecoll root?): %s",
                  raddr, rank, inner);
  return SC_ERR(r, "bootstrap: rank %d talking to the root at %s: %s", rank, raddr, inner);
}
