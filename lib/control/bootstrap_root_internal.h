/* SPDX-License-Identifier: BSD-3-Clause */
/* The bootstrap root service's state, shared by its check-in side
 * (bootstrap_root.c: accepting hellos and blobs, the deadline, the thread)
 * and its answering side (bootstrap_answer.c: the table down the answer's
 * tree, or a failed job's reason to every rank). One thread owns it all. */
#ifndef SC_BOOTSTRAP_ROOT_INTERNAL_H
#define SC_BOOTSTRAP_ROOT_INTERNAL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/socket.h"
#include "lib/control/bootstrap_wire.h"

typedef enum sc_bconn_state {
  SC_BCONN_HELLO, /* reading the fixed header; not yet authenticated */
  SC_BCONN_BLOB,  /* header valid; reading the blob (into the table, or discarded) */
  SC_BCONN_DIAL,  /* connecting to a rank's listener to answer it */
  SC_BCONN_REPLY, /* writing the ack, the table or an error, then closing */
  SC_BCONN_CLOSED
} sc_bconn_state_t;

typedef struct sc_bconn {
  int fd;
  sc_bconn_state_t state;
  char name[64]; /* peer address for logs */
  uint8_t hdr[SC_BOOT_HELLO_LEN];
  size_t hdr_done;
  int rank;                              /* rank named in a valid header, -1 before */
  int claimed;                           /* this connection holds rank's slot */
  int discard;                           /* blob is read and thrown away (job already failed) */
  uint8_t addr[SC_SOCKET_ADDR_WIRE_LEN]; /* from the hello: where the rank listens */
  size_t blob_len;
  size_t blob_off; /* in the table, from sc_boot_blob_offset */
  size_t blob_done;
  int answer; /* a connection the root opened to rank's listener */
  uint8_t head[SC_BOOT_ANSWER_LEN + SC_BOOT_REPLY_LEN]; /* [answer header] reply header */
  size_t head_len;
  const uint8_t *payload;
  size_t payload_len;
  size_t out_done; /* of head_len + payload_len */
  int64_t since;   /* accept time, to drop the oldest unauthenticated one */
} sc_bconn_t;

typedef struct sc_broot {
  int listen_fd;
  uint8_t secret[SC_SECRET_LEN];
  int timeout_ms;
  int64_t deadline;
  char addr[64];
  sc_bconn_t conns[SC_BOOT_CONN_MAX];
  size_t nconns;               /* open, and closed ones until broot_compact */
  int64_t accept_paused_until; /* after accept failed (e.g. EMFILE): do not spin on it */
  struct pollfd pfds[SC_BOOT_CONN_MAX + 1];
  /* Fixed by the first valid hello. */
  int nranks;
  size_t bloblen;
  int first_rank;
  uint8_t *table;                            /* the answer's payload: blobs, then raddr */
  size_t payload_len;                        /* sc_boot_payload_len */
  uint8_t *slot;                             /* per rank: 0 free, 1 blob arriving, 2 checked in */
  uint8_t *told;                             /* per rank: the final answer was delivered */
  uint8_t (*raddr)[SC_SOCKET_ADDR_WIRE_LEN]; /* per checked-in rank: where to answer (in table) */
  int checked_in;
  int complete;  /* everyone checked in; table is being sent */
  int dial_next; /* failed: the next rank to tell */
  int *treeq;    /* complete: ranks of the answer's tree to answer, [treeq_head, treeq_len) */
  int treeq_head, treeq_len;
  sc_result_t fail_code;
  char fail_text[SC_BOOT_ERRTEXT_MAX];
  size_t fail_len;
  uint8_t discard[SC_BOOT_BLOB_MAX];
} sc_broot_t;

/* Closes c (its rank's slot is freed if its blob had not arrived whole) and
 * logs why; an answer of the tree that failed has its rank's children
 * answered instead. */
void sc_broot_drop(sc_broot_t *r, sc_bconn_t *c, const char *why);

/* Starts writing a reply (the ack, the table or an error text) on c; the
 * answer header goes first on a connection the root opened (c->answer). */
void sc_broot_start_reply(sc_broot_t *r, sc_bconn_t *c, sc_result_t status, const uint8_t *payload,
                          size_t len);
/* The failed job's reason as c's reply. */
void sc_broot_reply_error(sc_broot_t *r, sc_bconn_t *c);
/* Queues the children of rank in the answer's tree: the root's own (-1), or
 * those of a rank the root could not answer. */
void sc_broot_adopt(sc_broot_t *r, int rank);
/* Answering: opens connections to the next ranks to answer, up to the limit. */
void sc_broot_dial(sc_broot_t *r);
/* A connection sc_broot_dial opened completed (or failed): its answer starts. */
void sc_broot_dialed(sc_broot_t *r, sc_bconn_t *c);
/* Writes what the socket takes of c's reply; closes c once it is all out. */
void sc_broot_write(sc_broot_t *r, sc_bconn_t *c);
/* Drops the answers that took longer than SC_BOOT_ANSWER_MS; returns when to
 * look again (0: none). */
int64_t sc_broot_expire_answers(sc_broot_t *r, int64_t now);
/* Failed: whether every rank was told. */
int sc_broot_all_told(const sc_broot_t *r);

#endif
