/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI-free rendezvous: the unique id and the client side of the exchange. The
 * root service is in bootstrap_root.c, the wire format in bootstrap_wire.h. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* Longest wait for an answer's header once a connection to the rank's
 * listener was accepted: a stray connection that says nothing must not keep
 * the root's answer waiting in the backlog for the whole timeout. Long
 * enough for a root that shares its cores with many ranks: at 1,024 ranks
 * on 2 cores the root's header took over 2 s after the connection, the
 * ranks dropped it, and the root had no second try. */
#define SC_BOOT_ANSWER_HDR_MS 15000
/* Passing the table on: the longest wait for a child's listener to take the
 * connection (it listens before it checks in, so a refusal means it is
 * gone); the answer then has SC_BOOT_ANSWER_MS. */
#define SC_BOOT_FORWARD_CONNECT_MS 2000
/* Answer header and reply header in front of the payload, so that the same
 * buffer goes on to the children in one write. */
#define SC_BOOT_FORWARD_HEAD (SC_BOOT_ANSWER_LEN + SC_BOOT_REPLY_LEN)

/* Reads a reply (header, then the table or the error text) from fd;
 * table_len 0: the ack. *final: the error is complete as it is (garbage, or
 * the root's own answer); else it is an I/O failure the caller words. */
static sc_result_t boot_read_reply(int fd, const char *who, int rank, void *table, size_t table_len,
                                   int64_t deadline, int *final) {
  *final = 0;
  uint8_t rep[SC_BOOT_REPLY_LEN];
  sc_result_t r = sc_socket_read_all(fd, rep, sizeof(rep), deadline, who);
  if (r != SC_SUCCESS) return r;
  sc_boot_reply_t reply;
  char why[128];
  *final = 1;
  if (sc_boot_reply_parse(rep, sizeof(rep), table_len, &reply, why, sizeof(why)) != SC_SUCCESS)
    return SC_ERR(SC_ERR_REMOTE, "bootstrap: %s %s to rank %d", who, why, rank);
  *final = 0;
  if (reply.status == SC_SUCCESS)
    return table_len ? sc_socket_read_all(fd, table, table_len, deadline, who) : SC_SUCCESS;
  uint8_t raw[SC_BOOT_ERRTEXT_MAX];
  char text[SC_BOOT_ERRTEXT_MAX + 1];
  r = sc_socket_read_all(fd, raw, reply.len, deadline, who);
  if (r != SC_SUCCESS) return r;
  *final = 1;
  sc_boot_errtext_clean(raw, reply.len, text, sizeof(text));
  return SC_ERR(sc_boot_reply_code(reply.status), "%s: %s", who, text);
}

/* Waits on the rank's listener for the root's answer and reads it. A
 * connection that does not start with the root's answer header (wrong secret,
 * garbage, silence) is dropped with a warning and the wait goes on. */
static sc_result_t boot_await_answer(int lfd, const uint8_t secret[SC_SECRET_LEN], const char *who,
                                     int rank, void *table, size_t table_len, int64_t deadline,
                                     int *final) {
  *final = 0;
  for (;;) {
    int ms = sc_ms_until(deadline);
    if (ms <= 0) return SC_ERR(SC_ERR_TIMEOUT, "no answer from the root before the deadline");
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno != EINTR)
      return SC_ERR(SC_ERR_SYSTEM, "bootstrap: poll on rank %d's listener: %s", rank,
                    strerror(errno));
    if (rc <= 0) continue;
    int fd;
    sc_sockaddr_t peer;
    SC_CHECK(sc_socket_accept(lfd, &fd, &peer));
    if (fd < 0) continue;
    char pname[64];
    sc_socket_addr_str(&peer, pname, sizeof(pname));
    int64_t hdr_deadline = sc_now_ms() + SC_BOOT_ANSWER_HDR_MS;
    uint8_t hdr[SC_BOOT_ANSWER_LEN];
    char why[128];
    sc_result_t r = sc_socket_read_all(fd, hdr, sizeof(hdr),
                                       hdr_deadline < deadline ? hdr_deadline : deadline, pname);
    if (r == SC_SUCCESS &&
        sc_boot_answer_parse(hdr, sizeof(hdr), secret, why, sizeof(why)) != SC_SUCCESS)
      r = SC_ERR(SC_ERR_REMOTE, "%s", why);
    if (r != SC_SUCCESS) {
      SC_WARN(SC_SUBSYS_BOOT, "bootstrap: rank %d drops a connection from %s: %s", rank, pname,
              sc_last_error());
      close(fd);
      continue;
    }
    r = boot_read_reply(fd, who, rank, table, table_len, deadline, final);
    close(fd);
    return r;
  }
}

static int64_t boot_min(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* Sends buf (SC_BOOT_FORWARD_HEAD bytes of room, then the payload) to the
 * listener of rank k, or, when k cannot be reached or does not take it, to
 * k's children in the answer's tree in its place. The rank itself already has
 * the table: a failure here is a warning, and k's subtree hears of it from
 * its own wait. Recursion depth is the tree's height (at most 17 levels). */
static void boot_forward_to(int rank, int k, int nranks, const uint8_t *addrs, const uint8_t *buf,
                            size_t len, int64_t deadline) {
  sc_sockaddr_t a;
  char name[64] = "?";
  int fd = -1;
  int64_t now = sc_now_ms();
  sc_result_t r = sc_socket_addr_unpack(addrs + (size_t)k * SC_SOCKET_ADDR_WIRE_LEN, &a);
  if (r == SC_SUCCESS) {
    sc_socket_addr_str(&a, name, sizeof(name));
    r = sc_socket_connect(&a, boot_min(deadline, now + SC_BOOT_FORWARD_CONNECT_MS), &fd);
  }
  if (r == SC_SUCCESS)
    r = sc_socket_write_all(fd, buf, len, boot_min(deadline, now + SC_BOOT_ANSWER_MS), name);
  if (fd >= 0) close(fd);
  if (r == SC_SUCCESS) {
    SC_TRACE(SC_SUBSYS_BOOT, "bootstrap: rank %d passed the table to rank %d", rank, k);
    return;
  }
  int kids[SC_BOOT_TREE_MAX];
  int n = sc_boot_tree_children(k, nranks, kids);
  SC_WARN(SC_SUBSYS_BOOT,
          "bootstrap: rank %d cannot pass the table to rank %d at %s (%s); passing it to its %d "
          "children instead",
          rank, k, name, sc_last_error(), n);
  for (int i = 0; i < n && sc_ms_until(deadline) > 0; i++)
    boot_forward_to(rank, kids[i], nranks, addrs, buf, len, deadline);
}

/* Passes the answer (payload at buf + SC_BOOT_FORWARD_HEAD) on to this
 * rank's children in the answer's tree. */
static void boot_forward(const uint8_t secret[SC_SECRET_LEN], int rank, int nranks, size_t bloblen,
                         uint8_t *buf, size_t payload_len, int64_t deadline) {
  int kids[SC_BOOT_TREE_MAX];
  int n = sc_boot_tree_children(rank, nranks, kids);
  if (n == 0) return;
  sc_boot_answer_build(buf, secret);
  sc_boot_reply_build(buf + SC_BOOT_ANSWER_LEN, SC_SUCCESS, (uint32_t)payload_len);
  const uint8_t *addrs = buf + SC_BOOT_FORWARD_HEAD + (size_t)nranks * bloblen;
  for (int i = 0; i < n; i++)
    boot_forward_to(rank, kids[i], nranks, addrs, buf, SC_BOOT_FORWARD_HEAD + payload_len,
                    deadline);
  memset(buf + 8, 0, SC_SECRET_LEN);
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
   * little longer for its answer lets its more precise error (which ranks are
   * missing) reach us instead of our own bare timeout. */
  int grace = timeout_ms / 8 < 1000 ? timeout_ms / 8 : 1000;
  int64_t reply_deadline = deadline + grace;
  int fd = -1, lfd = -1, final = 0;
  char inner[SC_ERRMSG_MAX];
  size_t payload_len = sc_boot_payload_len(nranks, bloblen);
  uint8_t *buf = malloc(SC_BOOT_FORWARD_HEAD + payload_len);
  if (!buf)
    return SC_ERR(SC_ERR_NOMEM, "bootstrap: no memory for the %zu-byte table of %d ranks",
                  payload_len, nranks);

  sc_result_t r = sc_socket_connect(root, deadline, &fd);
  if (r != SC_SUCCESS) {
    sc_error_get_detail(inner, sizeof(inner));
    free(buf);
    if (r == SC_ERR_TIMEOUT)
      return SC_ERR(SC_ERR_TIMEOUT,
                    "bootstrap timeout after %d ms: rank %d of %d could not reach the root at %s "
                    "(%s)",
                    timeout_ms, rank, nranks, raddr, inner);
    return SC_ERR(r, "bootstrap: rank %d cannot connect to the root at %s (%s)", rank, raddr,
                  inner);
  }
  /* The answer comes to a listener on the address this connection leaves
   * from: the root can reach it. */
  sc_sockaddr_t me;
  struct sockaddr_storage ss;
  socklen_t sslen = sizeof(ss);
  uint8_t hello[SC_BOOT_HELLO_LEN + SC_BOOT_BLOB_MAX], packed[SC_SOCKET_ADDR_WIRE_LEN];
  if (getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0) {
    r = SC_ERR(SC_ERR_SYSTEM, "bootstrap: getsockname: %s", strerror(errno));
    goto fail;
  }
  if ((r = sc_socket_addr_from_storage(&ss, &me)) != SC_SUCCESS) goto fail;
  if (me.sa.ss_family == AF_INET)
    ((struct sockaddr_in *)&me.sa)->sin_port = 0;
  else
    ((struct sockaddr_in6 *)&me.sa)->sin6_port = 0;
  if ((r = sc_socket_listen(&me, 0, &lfd)) != SC_SUCCESS) goto fail;
  if ((r = sc_socket_addr_pack(&me, packed)) != SC_SUCCESS) goto fail;

  sc_boot_hello_build(hello, secret, (uint32_t)rank, (uint32_t)nranks, (uint32_t)bloblen, packed);
  if (bloblen) memcpy(hello + SC_BOOT_HELLO_LEN, blob, bloblen);
  r = sc_socket_write_all(fd, hello, SC_BOOT_HELLO_LEN + bloblen, deadline, who);
  memset(hello + 8, 0, SC_SECRET_LEN);
  if (r != SC_SUCCESS) goto fail_io;
  r = boot_read_reply(fd, who, rank, NULL, 0, reply_deadline, &final);
  close(fd);
  fd = -1;
  if (r != SC_SUCCESS) goto fail_io;
  SC_TRACE(SC_SUBSYS_BOOT, "bootstrap: rank %d checked in with %s in %lld ms", rank, raddr,
           (long long)(sc_now_ms() - start));
  r = boot_await_answer(lfd, secret, who, rank, buf + SC_BOOT_FORWARD_HEAD, payload_len,
                        reply_deadline, &final);
  if (r != SC_SUCCESS) goto fail_io;
  close(lfd);
  lfd = -1;
  if (bloblen) memcpy(all, buf + SC_BOOT_FORWARD_HEAD, (size_t)nranks * bloblen);
  SC_TRACE(SC_SUBSYS_BOOT, "bootstrap: rank %d got the table in %lld ms", rank,
           (long long)(sc_now_ms() - start));
  boot_forward(secret, rank, nranks, bloblen, buf, payload_len, reply_deadline);
  free(buf);
  return SC_SUCCESS;

fail_io:
  if (final) goto fail;
  sc_error_get_detail(inner, sizeof(inner));
  if (r == SC_ERR_TIMEOUT) {
    char via[48] = "";
    if (sc_boot_tree_parent(rank) >= 0)
      snprintf(via, sizeof(via), " (it comes from the root through rank %d)",
               sc_boot_tree_parent(rank));
    r = SC_ERR(SC_ERR_TIMEOUT,
               "bootstrap timeout after %d ms: rank %d of %d checked in with the root at %s "
               "but got no table%s (%s)",
               timeout_ms, rank, nranks, raddr, via, inner);
  } else if (r == SC_ERR_REMOTE)
    r = SC_ERR(SC_ERR_REMOTE,
               "bootstrap: the root at %s dropped rank %d (wrong secret or not a "
               "libsparsecoll root?): %s",
               raddr, rank, inner);
  else
    r = SC_ERR(r, "bootstrap: rank %d talking to the root at %s: %s", rank, raddr, inner);
fail:
  if (fd >= 0) close(fd);
  if (lfd >= 0) close(lfd);
  free(buf);
  return r;
}
