/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch: a peer's death or stop is noticed by every rank,
 * not only by the ranks that happen to be exchanging data with it.
 *
 * Each communicator has its own watch (communicators from sc_comm_split too:
 * a rank outside a communicator cannot break it). The watch connections form
 * a k-ary tree (k = SC_WATCH_FANOUT, the same on every rank): rank r > 0
 * keeps one TCP connection to its parent (r-1)/k, authenticated with the job
 * secret, and every rank with children listens on a watch socket whose
 * address travels in its bootstrap blob. A small thread per rank sends a
 * heartbeat every SC_HEARTBEAT_MS on each of its links and reads the other
 * sides. Rank 0 alone decides, and relays the first event down the tree,
 * every parent passing it on to its children:
 *   - a rank's connection to its parent closes without a goodbye (it died):
 *     SC_ERR_REMOTE
 *   - no heartbeat from a rank for SC_TIMEOUT_MS (stopped): SC_ERR_TIMEOUT
 *   - a rank's communicator failed (e.g. its neighbour timed out): the same
 *     code it failed with, and its reason
 *   - a rank called sc_comm_abort: SC_ERR_REMOTE
 *   - two ranks execute calls of the same number that differ (SC_ERR_MISMATCH):
 *     each heartbeat up carries the print of the call its rank is executing,
 *     every parent forwards its children's (and their subtrees') up, and rank
 *     0 compares the latest of every rank with its own. This catches
 *     mismatched calls that exchange no message (a rank waiting on the board
 *     while its peer runs a schedule, both ranks waiting to receive), within
 *     a heartbeat period.
 * A parent watches its children: their deaths and silences, their own
 * failures and whatever their subtrees report go up with the rank they are
 * about, so rank 0 sees every rank as if it were linked to it; a child
 * quiet for half the timeout is reported too, so that rank 0 names a
 * stopped rank where another rank's call times out waiting on it. A child
 * watches its parent the same way: when the parent is rank 0, a death or
 * silence is recorded and sent down the child's subtree (every rank lies
 * below a child of rank 0); any other parent's is reported to rank 0, to
 * which the child connects directly and which is its parent from then on.
 * A notice is recorded as the communicator's error and the transport is
 * woken, so a blocked call returns it at once and later calls fail at once.
 * sc_comm_destroy sends a goodbye up and down, so a clean exit is never a
 * death; below a parent that left, no notice will come.
 * Cost: per operation, two writes of the call's print where the watch reads
 * it; one thread per communicator; rank 0 and every parent hold at most k+1
 * watch sockets (a listener and one per child), a leaf one; a frame of 16
 * bytes (40 while a call runs) per heartbeat period on each link, and up
 * every link the reports of the subtree below it. */
#ifndef SC_WATCH_H
#define SC_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "lib/control/bootstrap.h"
#include "sparsecoll.h"

#define SC_WATCH_ADDR_LEN 24 /* == SC_SOCKET_ADDR_WIRE_LEN; checked in watch.c */

/* Wire format (multi-byte fields big-endian):
 *   hello  child -> parent: u32 magic 'SCWH', u16 version, u16 0, u8 secret[32],
 *                           u32 rank, u32 nranks
 *   frame  either way    : u32 magic 'SCWF', u8 version, u8 type, u16 len,
 *                          u32 subject rank, u32 code, then len bytes of text;
 *                          a heartbeat's len bytes are 0 (idle) or a call:
 *                          u64 sequence number, u8 print[SC_WATCH_FP_LEN]; a
 *                          forwarded call's the same; a quiet report's a u32 of ms */
#define SC_WATCH_HELLO_MAGIC 0x53435748u /* 'SCWH' */
#define SC_WATCH_FRAME_MAGIC 0x53435746u /* 'SCWF' */
#define SC_WATCH_VERSION     1
#define SC_WATCH_HELLO_LEN   (4 + 2 + 2 + 32 + 4 + 4)
#define SC_WATCH_HDR_LEN     16
#define SC_WATCH_TEXT_MAX    600
/* An operation's print (lib/core/fingerprint.h's sc_fp_msg_encode, the bytes
 * every message carries: transport.h's SC_TP_FP_LEN), and a heartbeat's
 * report of the call its rank executes. */
#define SC_WATCH_FP_LEN    16
#define SC_WATCH_HB_OP_LEN (8 + SC_WATCH_FP_LEN)
#define SC_WATCH_QUIET_LEN 4

typedef enum sc_watch_type {
  SC_WATCH_HEARTBEAT = 1, /* "still here" (both ways); up: the sender's call */
  /* Leaving cleanly (destroy): the close that follows is no death. Down the
   * tree with the subject that left: no notice will come from above. */
  SC_WATCH_GOODBYE = 2,
  SC_WATCH_FAILED = 3, /* up: subject's communicator failed (code, reason) */
  SC_WATCH_NOTICE = 4, /* down: subject rank failed (code, reason) */
  SC_WATCH_EVENT = 5,  /* up: a watch saw subject die or go silent (code, reason) */
  SC_WATCH_OP = 6,     /* up: the call subject's heartbeat reported */
  SC_WATCH_QUIET = 7   /* up: subject has sent its parent nothing for this long */
} sc_watch_type_t;

typedef struct sc_watch_frame {
  uint8_t type;
  uint16_t len;
  uint32_t subject, code;
} sc_watch_frame_t;

/* The call a rank executes, as its heartbeats report it. */
typedef struct sc_watch_op {
  int busy;                    /* 0: idle (seq and fp are then zero) */
  uint64_t seq;                /* the call's number */
  uint8_t fp[SC_WATCH_FP_LEN]; /* its print: never all zero */
} sc_watch_op_t;

/* Pure parsers of bytes from an untrusted peer (no socket, no thread-local
 * error): SC_SUCCESS, or SC_ERR_REMOTE with the reason in why. The hello
 * parser checks magic, version, secret, nranks == job_nranks and
 * 0 < rank < nranks; the frame parser magic, version, type, len <=
 * SC_WATCH_TEXT_MAX (a heartbeat's and a forwarded call's: 0 or
 * SC_WATCH_HB_OP_LEN; a quiet report's SC_WATCH_QUIET_LEN), subject <
 * nranks and code a valid sc_result_t; the heartbeat parser a report's
 * length and that a busy one's print is not all zero. */
sc_result_t sc_watch_hello_parse(const uint8_t *buf, size_t len, const uint8_t *secret,
                                 int job_nranks, int *rank, char *why, size_t whylen);
sc_result_t sc_watch_frame_parse(const uint8_t *buf, size_t len, int nranks, sc_watch_frame_t *out,
                                 char *why, size_t whylen);
sc_result_t sc_watch_hb_parse(const uint8_t *buf, size_t len, sc_watch_op_t *out, char *why,
                              size_t whylen);
/* A heartbeat's bytes after the header for op: returns their length (0 when
 * idle). */
size_t sc_watch_hb_put(const sc_watch_op_t *op, uint8_t out[SC_WATCH_HB_OP_LEN]);

/* Rank 0's comparison (pure): the lowest rank other than r whose report
 * names the same call number as r's with another print, or -1. Idle reports
 * match nothing. A rank reports a call only while it executes it, and every
 * rank numbers its calls alike, so the two made different calls. */
int sc_watch_op_conflict(const sc_watch_op_t *ops, int nranks, int r);
/* The reason rank 0 announces for rank a (the subject) against rank b:
 * "called <a's call> where rank B (HOST) called <b's call>", each call as
 * describe(ctx, op, ...) words it. */
void sc_watch_op_mismatch_reason(char *out, size_t len, const sc_watch_op_t *a,
                                 const sc_watch_op_t *b, int rb, const char *host_b,
                                 void (*describe)(void *ctx, const sc_watch_op_t *op, char *out,
                                                  size_t len),
                                 void *ctx);

/* The tree (pure): rank r's parent, (r-1)/fanout, and -1 for rank 0; whether
 * s is c or lies below it. */
int sc_watch_parent_of(int fanout, int r);
int sc_watch_in_subtree(int fanout, int s, int c);

typedef struct sc_watch sc_watch_t;

/* What the watch knows of a rank, for its messages and to connect. */
typedef struct sc_watch_peer {
  const char *host;
  int pid;
  const uint8_t *watch_addr; /* SC_WATCH_ADDR_LEN bytes it published at bootstrap */
} sc_watch_peer_t;

/* What the watch needs of its communicator, which lives in a layer above
 * it: the watch records a notice as the communicator's error, reads the
 * error the communicator recorded itself, and wakes a call blocked in the
 * transport. A notice and the error change together under the
 * communicator's lock, so the watch takes that lock through the hooks. */
typedef struct sc_watch_hooks {
  void *ctx;
  int rank, nranks, timeout_ms;
  int fanout; /* children per rank in the tree (SC_WATCH_FANOUT), 2..64 */
  void (*lock)(void *ctx);
  void (*unlock)(void *ctx);
  /* Under the lock. error copies the message when msg is not NULL. */
  int (*aborted)(void *ctx);
  sc_result_t (*error)(void *ctx, char *msg, size_t len);
  void (*set_error)(void *ctx, sc_result_t code, const char *msg);
  /* Any thread: make a call blocked in the transport look at the error. */
  void (*wake)(void *ctx);
  /* Rank r as every rank published it (valid from sc_watch_start on). */
  void (*peer)(void *ctx, int r, sc_watch_peer_t *out);
  /* Under the lock: the recorded error is a verdict every rank reaches on
   * its own (SC_CHECK_MISMATCH's): not relayed. */
  int (*shared_verdict)(void *ctx);
  /* Any thread, lock-free: the call this rank executes now. */
  void (*op_now)(void *ctx, sc_watch_op_t *out);
  /* A reported call in words ("allreduce #7 (count 4, float32, sum, root -1)"). */
  void (*describe)(void *ctx, const sc_watch_op_t *op, char *out, size_t len);
} sc_watch_hooks_t;

/* Before the bootstrap exchange. Rank 0 opens the listener (on the address
 * that reaches route_hint, or on ifname) and writes its packed address to
 * addr; other ranks zero it. heartbeat_ms < 0: no watch (*out = NULL). The
 * hooks are copied. */
sc_result_t sc_watch_create(const sc_watch_hooks_t *hooks, const char *ifname,
                            const sc_sockaddr_t *route_hint, int heartbeat_ms,
                            const uint8_t *secret, sc_watch_t **out,
                            uint8_t addr[SC_WATCH_ADDR_LEN]);
/* After connect_all (every rank's blob is known): ranks > 0 connect to
 * rank 0's watch_addr and send their hello; every rank starts its thread. */
sc_result_t sc_watch_start(sc_watch_t *w);
/* Any thread, cheap: this rank's communicator recorded an error or was
 * aborted; the watch tells the others. */
void sc_watch_poke(sc_watch_t *w);
/* Called by a caller whose operation just failed with r (already recorded
 * and its requests cancelled): a transport error often shows only the
 * nearest symptom ("rank 2 closed the connection", when rank 2 merely gave
 * up because rank 3 died). Waits up to min(1 s, timeout/4) for rank 0's
 * notice of the first failure; if it names another rank, that becomes the
 * error (code and text, the call's own detail appended). Else returns r. */
sc_result_t sc_watch_explain(sc_watch_t *w, sc_result_t r);
/* Stop the watch: clean (a goodbye) or failed (the others are told). Joins the thread
 * and closes every descriptor; bounded by a short flush deadline. NULL ok. */
void sc_watch_stop(sc_watch_t *w, int clean);

#endif
