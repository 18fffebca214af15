/* SPDX-License-Identifier: BSD-3-Clause */
/* The bootstrap's wire format (bootstrap_wire.h): building and parsing the
 * bytes, no socket and no thread-local error, so that a fuzzer can call every
 * parser directly. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/socket.h"
#include "lib/control/bootstrap_wire.h"

/* The head a hello and an answer share: u32 magic, u16 version, u16 0, the
 * secret. */
static void head_build(uint8_t *out, uint32_t magic, const uint8_t secret[SC_SECRET_LEN]) {
  sc_wire_put_u32(out, magic);
  sc_wire_put_u16(out + 4, SC_BOOT_VERSION);
  out[6] = out[7] = 0;
  memcpy(out + 8, secret, SC_SECRET_LEN);
}

static sc_result_t head_check(const uint8_t *buf, uint32_t magic, const char *what,
                              const uint8_t secret[SC_SECRET_LEN], char *why, size_t whylen) {
  if (sc_wire_get_u32(buf) != magic) {
    snprintf(why, whylen, "not a bootstrap %s (bad magic)", what);
    return SC_ERR_REMOTE;
  }
  unsigned ver = sc_wire_get_u16(buf + 4);
  if (ver != SC_BOOT_VERSION) {
    snprintf(why, whylen, "protocol version %u, expected %u", ver, SC_BOOT_VERSION);
    return SC_ERR_REMOTE;
  }
  if (!sc_secret_equal(buf + 8, secret, SC_SECRET_LEN)) {
    snprintf(why, whylen, "wrong secret");
    return SC_ERR_REMOTE;
  }
  return SC_SUCCESS;
}

void sc_boot_hello_build(uint8_t out[SC_BOOT_HELLO_LEN], const uint8_t secret[SC_SECRET_LEN],
                         uint32_t rank, uint32_t nranks, uint32_t bloblen,
                         const uint8_t addr[SC_SOCKET_ADDR_WIRE_LEN]) {
  head_build(out, SC_BOOT_HELLO_MAGIC, secret);
  sc_wire_put_u32(out + 8 + SC_SECRET_LEN, rank);
  sc_wire_put_u32(out + 12 + SC_SECRET_LEN, nranks);
  sc_wire_put_u32(out + 16 + SC_SECRET_LEN, bloblen);
  memcpy(out + 20 + SC_SECRET_LEN, addr, SC_SOCKET_ADDR_WIRE_LEN);
}

void sc_boot_answer_build(uint8_t out[SC_BOOT_ANSWER_LEN], const uint8_t secret[SC_SECRET_LEN]) {
  head_build(out, SC_BOOT_ANSWER_MAGIC, secret);
}

void sc_boot_reply_build(uint8_t out[SC_BOOT_REPLY_LEN], uint32_t status, uint32_t len) {
  sc_wire_put_u32(out, SC_BOOT_REPLY_MAGIC);
  sc_wire_put_u32(out + 4, status);
  sc_wire_put_u32(out + 8, len);
}

sc_result_t sc_boot_answer_parse(const uint8_t *buf, size_t len,
                                 const uint8_t secret[SC_SECRET_LEN], char *why, size_t whylen) {
  if (len != SC_BOOT_ANSWER_LEN) {
    snprintf(why, whylen, "answer header of %zu bytes, expected %d", len, SC_BOOT_ANSWER_LEN);
    return SC_ERR_REMOTE;
  }
  return head_check(buf, SC_BOOT_ANSWER_MAGIC, "answer", secret, why, whylen);
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

sc_result_t sc_boot_hello_parse(const uint8_t *h, size_t len, const uint8_t secret[SC_SECRET_LEN],
                                sc_boot_hello_t *out, char *why, size_t whylen) {
  if (len != SC_BOOT_HELLO_LEN) {
    snprintf(why, whylen, "hello of %zu bytes, expected %d", len, SC_BOOT_HELLO_LEN);
    return SC_ERR_REMOTE;
  }
  sc_result_t r = head_check(h, SC_BOOT_HELLO_MAGIC, "hello", secret, why, whylen);
  if (r != SC_SUCCESS) return r;
  uint32_t rank = sc_wire_get_u32(h + 8 + SC_SECRET_LEN);
  uint32_t nranks = sc_wire_get_u32(h + 12 + SC_SECRET_LEN);
  uint32_t bloblen = sc_wire_get_u32(h + 16 + SC_SECRET_LEN);
  if (nranks < 1 || nranks > SC_RANKS_MAX || rank >= nranks || bloblen > SC_BOOT_BLOB_MAX) {
    snprintf(why, whylen, "invalid hello (rank %u, nranks %u, blob %u bytes)", rank, nranks,
             bloblen);
    return SC_ERR_REMOTE;
  }
  sc_sockaddr_t a;
  if (sc_socket_addr_unpack(h + 20 + SC_SECRET_LEN, &a) != SC_SUCCESS) {
    snprintf(why, whylen, "hello of rank %u names no valid address to answer", rank);
    return SC_ERR_REMOTE;
  }
  *out = (sc_boot_hello_t){.rank = rank, .nranks = nranks, .bloblen = bloblen};
  memcpy(out->addr, h + 20 + SC_SECRET_LEN, SC_SOCKET_ADDR_WIRE_LEN);
  return SC_SUCCESS;
}

sc_boot_admit_t sc_boot_hello_admit(const sc_boot_hello_t *h, int job_nranks, size_t job_bloblen,
                                    const uint8_t *slot) {
  if (h->nranks != (uint32_t)job_nranks) return SC_BOOT_ADMIT_NRANKS;
  if (h->bloblen != job_bloblen) return SC_BOOT_ADMIT_BLOBLEN;
  if (job_nranks < 1 || h->rank >= (uint32_t)job_nranks) return SC_BOOT_ADMIT_INVALID;
  if (slot[h->rank] != 0) return SC_BOOT_ADMIT_DUPLICATE;
  return SC_BOOT_ADMIT_OK;
}

sc_result_t sc_boot_blob_offset(const sc_boot_hello_t *h, size_t table_len, size_t *off, char *why,
                                size_t whylen) {
  /* Both factors are bounded by the parser, so the product cannot wrap. */
  size_t o = (size_t)h->rank * h->bloblen;
  if (h->bloblen > SC_BOOT_BLOB_MAX || h->rank >= SC_RANKS_MAX || o > table_len ||
      table_len - o < h->bloblen) {
    snprintf(why, whylen, "blob of rank %u (%u bytes) outside the %zu-byte table", h->rank,
             h->bloblen, table_len);
    return SC_ERR_REMOTE;
  }
  *off = o;
  return SC_SUCCESS;
}

int sc_boot_tree_children(int rank, int nranks, int out[SC_BOOT_TREE_MAX]) {
  if (nranks < 1 || nranks > SC_RANKS_MAX || rank < -1 || rank >= nranks) return 0;
  int64_t v = (int64_t)rank + 1, nodes = (int64_t)nranks + 1;
  int64_t below = v ? (v & -v) : ((int64_t)1 << 40);
  int n = 0;
  /* The largest subtree first: it has the most hops still to go. */
  for (int k = SC_BOOT_TREE_MAX - 1; k >= 0; k--) {
    int64_t step = (int64_t)1 << k;
    if (step < below && v + step < nodes) out[n++] = (int)(v + step - 1);
  }
  return n;
}

int sc_boot_tree_parent(int rank) {
  if (rank < 0) return -1;
  int64_t v = (int64_t)rank + 1;
  return (int)(v - (v & -v)) - 1;
}
