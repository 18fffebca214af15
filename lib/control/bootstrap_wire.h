/* SPDX-License-Identifier: BSD-3-Clause */
/* Bootstrap wire format, shared by the root service (bootstrap_root.c) and the
 * client (bootstrap.c); the pure parts are in bootstrap_wire.c. Multi-byte
 * fields are big-endian:
 *   hello  client -> root : u32 magic 'SCBH', u16 version, u16 0, u8 secret[32],
 *                           u32 rank, u32 nranks, u32 bloblen,
 *                           u8 addr[SC_SOCKET_ADDR_WIRE_LEN] (where the client
 *                           listens for the answer), blob[bloblen]
 *   ack    root -> client, on the hello's connection, which then closes: a
 *                           reply; status 0 with len 0 (checked in: the answer
 *                           comes later) or an error text
 *   answer root or parent -> client, over a connection opened to addr:
 *                           u32 magic 'SCBD', u16 version, u16 0, u8 secret[32],
 *                           then a reply carrying the payload or an error text
 *   reply                 : u32 magic 'SCBR', u32 status (sc_result_t), u32 len,
 *                           then the payload (status 0, len = nranks*(bloblen +
 *                           SC_SOCKET_ADDR_WIRE_LEN): the table, rank-major, then
 *                           every rank's listener address) or an error text
 *                           (len <= SC_BOOT_ERRTEXT_MAX)
 * The payload goes down a binomial tree (sc_boot_tree_children): the root
 * answers its own children, each rank passes what it got on to its children,
 * and a child that cannot be reached has its children answered in its place.
 * A failed job is answered by the root to every rank, each directly. No
 * connection stays open while the root waits for the other ranks, so the root
 * holds at most SC_BOOT_CONN_MAX descriptors (besides its listener) whatever
 * the number of ranks, and sends the table ceil(log2(nranks + 1)) times. */
#ifndef SC_BOOTSTRAP_WIRE_H
#define SC_BOOTSTRAP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/base/wire.h"
#include "lib/control/bootstrap.h"

#define SC_BOOT_HELLO_MAGIC  0x53434248u /* 'SCBH' */
#define SC_BOOT_REPLY_MAGIC  0x53434252u /* 'SCBR' */
#define SC_BOOT_ANSWER_MAGIC 0x53434244u /* 'SCBD' */
#define SC_BOOT_VERSION      3
#define SC_BOOT_HELLO_LEN    (4 + 2 + 2 + SC_SECRET_LEN + 4 + 4 + 4 + SC_SOCKET_ADDR_WIRE_LEN)
#define SC_BOOT_ANSWER_LEN   (4 + 2 + 2 + SC_SECRET_LEN)
#define SC_BOOT_REPLY_LEN    12
/* Connections the root has open at once (hellos being read, acks and answers
 * being written); more ranks wait in the listener's backlog or for their turn. */
#define SC_BOOT_CONN_MAX    64
#define SC_BOOT_ERRTEXT_MAX 1024
/* Longest a parent in the answer's tree (the root, or a rank passing the
 * table on) gives a child to take the connection and read the answer before
 * it answers the child's children in its place: a rank stopped after
 * checking in must not hold up its subtree to the deadline. */
#define SC_BOOT_ANSWER_MS 15000
/* Children a node of the answer's tree has at most (ranks < 2^31). */
#define SC_BOOT_TREE_MAX 32

/* The answer's payload for a job of nranks ranks of bloblen-byte blobs. */
static inline size_t sc_boot_payload_len(int nranks, size_t bloblen) {
  return (size_t)nranks * (bloblen + SC_SOCKET_ADDR_WIRE_LEN);
}

/* The answer's binomial tree over node 0 (the root service) and node r + 1
 * (rank r): the children of `rank` (-1: the root service) in a job of nranks
 * ranks, written to out[SC_BOOT_TREE_MAX] as ranks, the farthest first (the
 * largest subtree, unless nranks cuts it short); returns how many. Node v's children are v + 2^k
 * for every 2^k below v's lowest set bit (every 2^k for node 0) that stays under nranks + 1, so
 * every rank has one parent and lies within ceil(log2(nranks + 1)) hops of
 * the root. Out-of-range arguments have no children. */
int sc_boot_tree_children(int rank, int nranks, int out[SC_BOOT_TREE_MAX]);
/* The parent of rank in that tree (-1: the root service). */
int sc_boot_tree_parent(int rank);

/* Pure parsers of what arrives from an untrusted peer: bytes in, a parsed
 * struct or a reason out. They touch no socket, and their verdict is the
 * result and the reason alone (the root reports through its drop log, the
 * client wraps the reason with who and which rank; the hello's address check
 * may leave sc_socket_addr_unpack's text as the thread's last error, which
 * nobody reads), so a fuzzer can call them directly (test/fuzz/). */

typedef struct sc_boot_hello {
  uint32_t rank, nranks, bloblen;
  uint8_t addr[SC_SOCKET_ADDR_WIRE_LEN]; /* packed; unpacks (checked by the parser) */
} sc_boot_hello_t;

/* Client side: the SC_BOOT_HELLO_LEN-byte header in front of the blob. */
void sc_boot_hello_build(uint8_t out[SC_BOOT_HELLO_LEN], const uint8_t secret[SC_SECRET_LEN],
                         uint32_t rank, uint32_t nranks, uint32_t bloblen,
                         const uint8_t addr[SC_SOCKET_ADDR_WIRE_LEN]);

/* Root side: checks len == SC_BOOT_HELLO_LEN, magic, version, secret, then
 * nranks in [1, SC_RANKS_MAX], rank < nranks, bloblen <= SC_BOOT_BLOB_MAX and
 * that addr unpacks (sc_socket_addr_unpack).
 * SC_SUCCESS, or SC_ERR_REMOTE with the reason in why. */
sc_result_t sc_boot_hello_parse(const uint8_t *buf, size_t len, const uint8_t secret[SC_SECRET_LEN],
                                sc_boot_hello_t *out, char *why, size_t whylen);

/* Root side: whether a parsed hello fits the job fixed by the first one
 * (job_nranks ranks of job_bloblen-byte blobs; slot[rank] != 0: taken). */
typedef enum sc_boot_admit {
  SC_BOOT_ADMIT_OK,
  SC_BOOT_ADMIT_NRANKS,    /* different nranks */
  SC_BOOT_ADMIT_BLOBLEN,   /* different blob length */
  SC_BOOT_ADMIT_DUPLICATE, /* rank already checked in */
  SC_BOOT_ADMIT_INVALID    /* hello outside the job (not from sc_boot_hello_parse) */
} sc_boot_admit_t;
sc_boot_admit_t sc_boot_hello_admit(const sc_boot_hello_t *h, int job_nranks, size_t job_bloblen,
                                    const uint8_t *slot);

/* Root side: where an admitted hello's blob goes in the nranks*bloblen table;
 * SC_ERR_REMOTE (reason in why) if it would not lie wholly inside it. */
sc_result_t sc_boot_blob_offset(const sc_boot_hello_t *h, size_t table_len, size_t *off, char *why,
                                size_t whylen);

/* The header in front of the root's answer: root side builds it, client side
 * checks len == SC_BOOT_ANSWER_LEN, magic, version and secret (SC_SUCCESS, or
 * SC_ERR_REMOTE with the reason in why). */
void sc_boot_answer_build(uint8_t out[SC_BOOT_ANSWER_LEN], const uint8_t secret[SC_SECRET_LEN]);
/* The reply header: the root's ack, table or error text, and a rank's table
 * passed on to its children. */
void sc_boot_reply_build(uint8_t out[SC_BOOT_REPLY_LEN], uint32_t status, uint32_t len);
sc_result_t sc_boot_answer_parse(const uint8_t *buf, size_t len,
                                 const uint8_t secret[SC_SECRET_LEN], char *why, size_t whylen);

typedef struct sc_boot_reply {
  uint32_t status; /* sc_result_t of the rendezvous */
  uint32_t len;    /* bytes that follow: the table (status 0) or the error text */
} sc_boot_reply_t;

/* Client side: the SC_BOOT_REPLY_LEN-byte reply header. A success must
 * announce exactly table_len bytes (0 for the ack), an error text at most SC_BOOT_ERRTEXT_MAX.
 * SC_SUCCESS, or SC_ERR_REMOTE with the reason in why. */
sc_result_t sc_boot_reply_parse(const uint8_t *buf, size_t len, size_t table_len,
                                sc_boot_reply_t *out, char *why, size_t whylen);

/* Client side: the root's error text (len <= SC_BOOT_ERRTEXT_MAX bytes, not
 * terminated) as a printable C string in out[outlen]; and the code it maps to
 * (INVALID_ARG, TIMEOUT and NOMEM pass through, anything else is REMOTE). */
void sc_boot_errtext_clean(const uint8_t *text, size_t len, char *out, size_t outlen);
sc_result_t sc_boot_reply_code(uint32_t status);

#endif
