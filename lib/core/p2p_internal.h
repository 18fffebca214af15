/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point lane's state, shared by its three parts: the protocol
 * (lib/core/p2p.c: operations, peers, matching, the frames), the lane
 * thread and life cycle (p2p_lane.c) and the API with its groups
 * (p2p_api.c). The lane, the matching lists and the operations in flight
 * belong to whoever holds `drive`: the lane thread, or a user thread in a
 * blocking call that drives the engine itself while the lane thread waits
 * for the peers (sc_p2p_drive); operations reach it through the
 * locked queue. */
#ifndef SC_P2P_INTERNAL_H
#define SC_P2P_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "lib/core/p2p.h"
#include "lib/core/p2p_match.h"

/* How long the lane thread waits in the transport before it looks at its
 * queue and deadlines again without being woken. */
#define SC_P2P_POLL_MS 20
/* An operation's deadline before the lane's deadline check first sees it:
 * that check sets it to SC_TIMEOUT_MS from then (at most SC_P2P_POLL_MS
 * late, never early), so a message done sooner never reads the clock. */
#define SC_P2P_UNSTAMPED INT64_MAX
/* Rounds that moved something between two readings of the clock; a round
 * that moved nothing (it may have waited) reads it. */
#define SC_P2P_CLOCK_EVERY 16

enum { SC_TR_MAX = 3 };

typedef struct sc_p2p_op {
  sc_request_t req;        /* first: sc_test, sc_wait and their free work unchanged */
  struct sc_p2p_op *qnext; /* submission queue */
  struct sc_p2p_op *anext; /* the lane's list of operations with requests in flight */
  struct sc_p2p_op *wnext; /* the peer's list of sends waiting for CTS / receives for DATA */
  sc_p2p_entry_t ent;      /* the peer's posted receives */
  const char *fn;
  int is_send, peer, tag;
  sc_dtype_t dtype;
  uint64_t count, bytes, id;
  uint8_t *buf; /* the caller's, or for device memory the staging bytes after the op */
  /* A receive into device memory: its payload lands in buf (host staging)
   * and is copied to dev on device before the request completes. */
  uint8_t *dev;
  struct sc_p2p *lane; /* with dev: whose staging stream copies */
  int device;
  int64_t deadline_ms;
  int in_active, final, waiting;
  int offered;         /* its RTS offered buf for the receiver to read (lane set too) */
  int revoking;        /* it timed out waiting: REVOKE sent, the receiver's answer awaited */
  uint64_t offer;      /* a receive reading its sender's offered buffer: its address there */
  uint64_t offer_done; /* and the bytes read so far (on the lane's reads list by wnext) */
  sc_result_t fail;    /* decided while requests were still in flight */
  int ntr;
  sc_tp_req_t tr[SC_TR_MAX];
  uint8_t hdr[SC_P2P_FRAME_BYTES], hdr2[SC_P2P_FRAME_BYTES];
} sc_p2p_op_t;

/* A message that arrived before a receive wanted it (or one being dropped). */
typedef struct sc_p2p_unexp {
  sc_p2p_entry_t ent;
  struct sc_p2p_unexp *pnext; /* the lane's list of payloads in flight */
  sc_p2p_kind_t kind;
  uint64_t bytes, id;
  uint64_t offer; /* an RTS's offered buffer in its sender's memory (0: none) */
  int peer, arrived, drop;
  uint8_t *data;                      /* small, or allocated */
  uint8_t small[SC_P2P_INLINE_BYTES]; /* an inline payload: no allocation of its own */
  sc_p2p_op_t *recv;                  /* matched while its payload was still arriving */
  sc_p2p_op_t *self_send;             /* a send to this rank: its buffer, not a copy */
  sc_tp_req_t req;
  struct sc_p2p *lane;
  uint64_t charge; /* its share of the lane's unexp_bytes */
} sc_p2p_unexp_t;

typedef struct sc_p2p_ctl {
  struct sc_p2p_ctl *next;
  int peer;
  sc_tp_req_t req;
  uint8_t hdr[SC_P2P_FRAME_BYTES];
} sc_p2p_ctl_t;

typedef struct sc_p2p_peer {
  int dead, quiet; /* quiet: its end was said elsewhere (BYE, the communicator's failure) */
  int bye;         /* it said goodbye: what it sent before is on the wire, in full */
  int used;        /* a message went either way: the transport connected the pair, and a
                      destroy says goodbye over it (a pair never used stays unconnected) */
  sc_result_t dead_res;
  char *dead_msg; /* why it died (allocated then: every rank keeps one entry per rank) */
  sc_p2p_list_t posted, unexp;
  sc_p2p_op_t *wait_cts, *wait_data;
  uint64_t next_id;
  int hposted;
  sc_tp_req_t hreq;
  uint8_t hbuf[SC_P2P_FRAME_BYTES];
} sc_p2p_peer_t;

static inline const char *sc_p2p_dead_msg(const sc_p2p_peer_t *pp) {
  return sc_errtext(pp->dead_msg);
}

struct sc_p2p {
  sc_comm_t *comm;
  const sc_transport_ops_t *ops;
  sc_transport_t *tp; /* NULL for one rank: only self-sends */
  pthread_mutex_t lock;
  pthread_cond_t cv;
  sc_p2p_op_t *qhead, *qtail;
  int started, closed;
  pthread_t thread;
  /* The engine: whoever holds drive owns everything below it. drivers: user
   * threads driving now (the lane thread then waits on cv, not the sockets). */
  pthread_mutex_t drive;
  _Atomic int drivers;
  /* A caller left the engine with operations pending (counted), or gave up
   * waiting for it and sleeps (grace_cut): the lane thread's grace below. */
  _Atomic unsigned left_seq;
  _Atomic int grace_cut;
  unsigned seen_seq;    /* (lane thread) left_seq when it last looked */
  int64_t grace_end_us; /* (lane thread) it leaves the engine to callers until then */
  int ready;            /* the lane thread posted the header receives */
  int parked;           /* (lock) the lane thread waits on cv, not in the transport: 1 for a
                           grace, 2 for longer */
  int kicked;           /* (lock) a caller left operations waiting for peers: do not park */
  int busy;             /* a header was handled: the next round must not block */
  int64_t next_check;
  int clock_skips; /* rounds left before the clock is read again */
  sc_p2p_peer_t *peers;
  sc_p2p_op_t *active;
  sc_p2p_unexp_t *pending;
  sc_p2p_ctl_t *ctls;
  sc_p2p_op_t *reads; /* receives reading offered buffers, oldest first (by wnext) */
  int comm_failed;
  uint64_t unexp_bytes;           /* held by messages from peers no receive has taken yet */
  char tp_msg[SC_ERRMSG_MAX / 2]; /* the transport's last failure */
  void *dstream;                  /* staging copies' device stream, made by the first (lock) */
  int dstream_device;
  struct sc_p2p_batch *batches; /* (lock) groups' stream-form calls queued, not yet run */
};

/* What an unmatched arrival costs against SC_P2P_UNEXPECTED_BYTES besides
 * its payload: its record and the allocator's share. */
#define SC_P2P_UNEXP_OVERHEAD 128

/* lib/core/p2p.c: the protocol, on the lane thread. */
/* "fn to/from rank peer (tag, count of dtype)": a call in an error's text. */
void sc_p2p_describe(const char *fn, int is_send, int peer, int tag, uint64_t count,
                     sc_dtype_t dtype, char *out, size_t len);
void sc_p2p_op_describe(const sc_p2p_op_t *op, char *out, size_t len);
/* The last thing done to op: it may be freed at once by its waiter. */
void sc_p2p_op_complete(sc_p2p_op_t *op, sc_result_t res);
/* Records res with op's description and the reason, then completes op. */
void sc_p2p_op_fail(sc_p2p_t *p, sc_p2p_op_t *op, sc_result_t res, const char *why);
/* op, off its wait list, fails with res: now, or, while its transport
 * requests are watched (in_active), once they settle. */
void sc_p2p_op_fail_later(sc_p2p_t *p, sc_p2p_op_t *op, sc_result_t res, const char *why);
/* "no progress for N ms (SC_TIMEOUT_MS)": why an operation timed out. */
void sc_p2p_timeout_why(const sc_p2p_t *p, char *out, size_t len);
/* Copies bytes between host and device memory of device, through the lane's
 * staging stream, and waits for it (bounded by SC_TIMEOUT_MS). */
sc_result_t sc_p2p_dev_copy(sc_p2p_t *p, int device, void *dst, const void *src, size_t bytes);
int sc_p2p_op_tr_pending(const sc_p2p_op_t *op);
void sc_p2p_wait_remove(sc_p2p_op_t **list, sc_p2p_op_t *op);
sc_result_t sc_p2p_tp_post(sc_p2p_t *p, int is_send, int peer, void *buf, size_t len,
                           sc_tp_req_t *req);
void sc_p2p_tp_failed(sc_p2p_t *p, int peer, sc_result_t st);
/* Every operation with peer fails, now or once its requests settle; the peer
 * refuses operations from now on. */
void sc_p2p_peer_fail(sc_p2p_t *p, int peer, sc_result_t res, const char *why);
void sc_p2p_peer_post_header(sc_p2p_t *p, int peer);
void sc_p2p_unexp_free(sc_p2p_unexp_t *u);
/* A header arrived from peer: act on it, post its payload's receive, then
 * the next header's. */
void sc_p2p_on_header(sc_p2p_t *p, int peer);
void sc_p2p_start_op(sc_p2p_t *p, sc_p2p_op_t *op);
/* A control frame (CTS, DROP, FIN, REVOKE, REVOKED) of message id to peer. */
void sc_p2p_send_ctl(sc_p2p_t *p, int peer, sc_p2p_kind_t kind, uint64_t id);
/* Takes the operation of message id off a peer's wait list (NULL: none). */
sc_p2p_op_t *sc_p2p_wait_take_id(sc_p2p_op_t **list, uint64_t id);
/* op's transport requests are watched until they settle. */
void sc_p2p_active_add(sc_p2p_t *p, sc_p2p_op_t *op);

/* Receive op, matched to message id (a rendezvous), asks its sender for the
 * data (CTS) and waits for it. */
void sc_p2p_ask_data(sc_p2p_t *p, sc_p2p_op_t *op, uint64_t id);

/* p2p_life.c: a destroy (not an abort) says goodbye to every peer still
 * there that the lane exchanged messages with; bounded by a second. Called
 * by whoever owns the lane. */
void sc_p2p_say_bye(sc_p2p_t *p);

/* p2p_offer.c: offered buffers. A matched RTS whose sender offered its
 * buffer: op joins the lane's reads (1); 0: it cannot be read (no offer, a
 * device receive, a transport without rget): the caller asks for the data
 * with CTS. */
int sc_p2p_read_offer(sc_p2p_t *p, sc_p2p_op_t *op, const sc_p2p_unexp_t *u);
/* Reads the next SC_P2P_READ_CHUNK bytes of the oldest read; a read done
 * answers FIN and completes its receive, one the transport cannot do after
 * all asks for the data with CTS. Returns whether reads remain. */
int sc_p2p_reads_step(sc_p2p_t *p);
/* The reads from peer fail with res. */
void sc_p2p_reads_fail(sc_p2p_t *p, int peer, sc_result_t res, const char *why);
/* op, an offered send waiting for its receiver, timed out: asks the
 * receiver to drop its RTS unread. The answer (REVOKED, or a FIN, CTS or
 * DROP that left first) settles op; until then the buffer stays offered. */
void sc_p2p_revoke(sc_p2p_t *p, sc_p2p_op_t *op);
/* REVOKE of message id from peer: its RTS is dropped if no receive took it;
 * answered REVOKED either way. */
void sc_p2p_on_revoke(sc_p2p_t *p, int peer, uint64_t id);
/* REVOKED: the send still waiting fails with SC_ERR_TIMEOUT, its buffer
 * no longer offered. */
void sc_p2p_on_revoked(sc_p2p_t *p, int peer, uint64_t id);

/* p2p_pool.c: an operation with stage bytes of device staging after it,
 * zeroed (NULL: no memory), and its release (NULL is ignored). */
sc_p2p_op_t *sc_p2p_op_alloc(size_t stage);
void sc_p2p_op_free(sc_p2p_op_t *op);
/* An unexpected message's record and a control frame (CTS, DROP), zeroed;
 * NULL: no memory. Given back with the matching put. */
sc_p2p_unexp_t *sc_p2p_unexp_get(void);
void sc_p2p_unexp_put(sc_p2p_unexp_t *u);
sc_p2p_ctl_t *sc_p2p_ctl_get(void);
void sc_p2p_ctl_put(sc_p2p_ctl_t *c);

/* p2p_api.c: frees the stream-form batches that never ran (the
 * communicator failed or was destroyed before their turn). */
void sc_p2p_batches_free(sc_p2p_t *p);

/* p2p_api.c: a call refused because the lane is closing (SC_ERR_ABORTED). */
sc_result_t sc_p2p_closing_error(const sc_p2p_t *p, const char *fn);
/* p2p_lane.c: the lane thread's body (started by the first submission). */
void *sc_p2p_main(void *arg);
/* Starts op (after whatever is queued) on the calling thread when the
 * engine can be taken without waiting, and gives the engine back: 1 when
 * done so (op then belongs to the lane) or when the lane is closing (*err:
 * SC_ERR_ABORTED, recorded; op still the caller's), 0 when the caller must
 * queue op for whoever holds the engine. */
int sc_p2p_start_inline(sc_p2p_t *p, sc_p2p_op_t *op, sc_result_t *err);
#endif
