/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch internals shared by lib/control/watch.c (thread, life cycle, the
 * per-rank side), lib/control/watch_tree.c (the tree: links, forwarding, the
 * fallback to rank 0), lib/control/watch_hub.c (rank 0's relay) and
 * lib/control/watch_wire.c (parsers and framed, non-blocking I/O). */
#ifndef SC_WATCH_INTERNAL_H
#define SC_WATCH_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "lib/control/watch.h"

/* Accepted connections that have not yet sent a valid hello (a parent); while
 * they are all taken the others wait in the listener's backlog, and the
 * oldest is dropped once it has been silent for SC_WATCH_HELLO_MS (a flood
 * of idle connections cannot hold the ranks off). */
#define SC_WATCH_UNAUTH_MAX 64
#define SC_WATCH_HELLO_MS   1000
/* How long destroy/abort keep trying to deliver the last frames. */
#define SC_WATCH_FLUSH_MS  300
#define SC_WATCH_FRAME_MAX (SC_WATCH_HDR_LEN + SC_WATCH_TEXT_MAX)

typedef enum sc_wc_state {
  SC_WC_NONE,  /* not connected (yet) */
  SC_WC_HELLO, /* a parent: accepted, hello not read yet */
  SC_WC_LIVE,  /* watched: a close or silence is a failure */
  SC_WC_GONE   /* said goodbye or already declared failed: a close is expected */
} sc_wc_state_t;

/* A connection's buffers, allocated at its first read or write: rank 0 has a
 * slot for every rank, of which only its children and the ranks that fall
 * back to it ever connect (inline, the slots took 2.6 KiB per rank). */
typedef struct sc_wconn_buf {
  uint8_t in[SC_WATCH_FRAME_MAX];
  /* A few frames with text (a parent forwards its children's), a goodbye and
   * a report: a report (heartbeat, forwarded call, quiet) is queued only
   * when nothing waits, so only the peer not reading fills this. */
  uint8_t out[3 * SC_WATCH_FRAME_MAX + 2 * SC_WATCH_HDR_LEN + SC_WATCH_HB_OP_LEN];
} sc_wconn_buf_t;

typedef struct sc_wconn {
  int fd;
  sc_wc_state_t state;
  int rank;          /* the other side; -1 before its hello */
  sc_wconn_buf_t *b; /* NULL until used (sc_wconn_buf) */
  size_t in_done;
  size_t out_off, out_len;
  int64_t last_rx; /* monotonic ms of the last byte received (or of connecting) */
  /* The other side closed. The descriptor stays until this rank's own
   * destroy, so a peer leaving does not change this process's descriptors. */
  int eof;
} sc_wconn_t;

struct sc_watch {
  sc_watch_hooks_t hooks;
  int rank, nranks, timeout_ms, hb_ms;
  uint8_t secret[SC_SECRET_LEN];
  int listen_fd, wake_fd;
  pthread_t thread;
  int started;
  _Atomic int stop; /* 0 run, 1 destroy, 2 abort */
  /* Rank 0: nranks slots by rank ([0] unused): its children and the ranks
   * that fell back to it. Others: [0] is the parent (rank 0 after a
   * fallback), [i] the child kid0 + i - 1. */
  sc_wconn_t *conn;
  int nconn;
  int fanout, parent, kid0, nkids; /* parent: -1 on rank 0 */
  uint8_t *expect;                 /* by slot: that rank announced it will connect here */
  sc_wconn_t pend[SC_WATCH_UNAUTH_MAX];
  int64_t pend_since[SC_WATCH_UNAUTH_MAX];
  int failed; /* rank 0: an event was relayed; others: a failure is known */
  /* The notice this rank sent down, for a child that connects later (a rank
   * whose parent died falls back to rank 0 after rank 0 relayed). */
  int sent_down, down_subject;
  sc_result_t down_code;
  char down_text[SC_WATCH_TEXT_MAX + 1];
  int told;       /* this rank's own failure went out */
  int from_watch; /* the communicator's error is a notice recorded here (comm->lock) */
  /* The first notice (comm->lock), for sc_watch_explain on a caller's thread. */
  int notice_news, explain_ms;
  sc_result_t notice_code;
  char notice_msg[SC_ERRMSG_MAX];
  _Atomic int notice_seen;
  _Atomic int hub_gone; /* rank 0 or an ancestor said goodbye: no notice will come */
  int conn_checked;     /* every expected child connected, or was declared */
  int64_t start_ms;
  int64_t stalled_ms, stalled_at; /* rank 0: its thread last ran this late, then */
  struct pollfd *pfds;
  sc_wconn_t **pconn;
  sc_watch_op_t *ops; /* rank 0: each rank's latest report ([0]: its own call) */
  /* rank 0: when rank r's parent last said r had been quiet, and since when */
  int64_t *quiet_told, *quiet_since;
  /* rank 0: a rank's SC_ERR_REMOTE waiting hold_ms for its cause
   * (sc_watch_event) */
  int held, held_subject, hold_ms;
  int64_t held_until;
  char held_reason[SC_ERRMSG_MAX + 16];
};

/* lib/control/watch_wire.c: one connection's buffered I/O. flush: -1 when broken.
 * reset frees the buffers (a connection's memory is zero before its first reset). */
void sc_wconn_reset(sc_wconn_t *c);
/* The connection's buffers, allocated on first use; NULL when out of memory. */
sc_wconn_buf_t *sc_wconn_buf(sc_wconn_t *c);
void sc_wconn_close(sc_wconn_t *c);
int sc_wconn_flush(sc_wconn_t *c);
void sc_wconn_queue(sc_wconn_t *c, int type, int subject, int code, const char *text);
void sc_wconn_queue_bytes(sc_wconn_t *c, int type, int subject, int code, const void *data,
                          size_t len);

/* lib/control/watch.c */
void sc_watch_record(sc_watch_t *w, int subject, sc_result_t code, const char *reason);
void sc_watch_read(sc_watch_t *w, sc_wconn_t *c);
void sc_watch_on_close(sc_watch_t *w, sc_wconn_t *c, const char *how);

/* lib/control/watch_tree.c */
/* The connection slot of rank r here, or -1. */
int sc_watch_slot(const sc_watch_t *w, int r);
/* A packed watch address as published ([1] is the "will connect" flag). */
int sc_watch_addr_listens(const uint8_t *addr);
/* Connects to rank `to` and sends the hello; on success conn[0] is that link. */
sc_result_t sc_watch_connect_up(sc_watch_t *w, int to, int64_t deadline);
/* A failure of subject this rank's watch saw itself (a death or silence of a
 * rank linked to it), with today's reason text: rank 0 decides on it, others
 * send it up. */
void sc_watch_report(sc_watch_t *w, int subject, sc_result_t code, const char *reason);
/* Down the tree: to every child (the notice's subject too, which then
 * closes without being a death). */
void sc_watch_flood(sc_watch_t *w, int type, int subject, sc_result_t code, const char *text);
/* The link up (conn[0]) died or went silent: rank 0's death is recorded and
 * sent down; another parent's is reported to rank 0, which becomes the parent. */
void sc_watch_lost_parent(sc_watch_t *w, sc_result_t code, const char *reason);
/* A frame from a child about its subtree: rank 0 decides, others forward it. */
void sc_watch_from_child(sc_watch_t *w, sc_wconn_t *c, const sc_watch_frame_t *f,
                         const uint8_t *text);

/* lib/control/watch_hub.c (rank 0) */
void sc_watch_event(sc_watch_t *w, int subject, sc_result_t code, const char *reason,
                    int may_blame);
/* The held failure goes out once its time is up, or at once (force). */
void sc_watch_release_held(sc_watch_t *w, int force);
/* A parent: a pending connection's hello; a valid one (rank 0: any rank; others:
 * a child) takes its rank's slot. */
void sc_watch_read_hello(sc_watch_t *w, sc_wconn_t *c);
void sc_watch_accept(sc_watch_t *w);
/* 0: the listener may be polled (a pending slot is free, or the oldest
 * silent one was just dropped); else the time to look again. */
int64_t sc_watch_accept_wait(sc_watch_t *w, int64_t now);
/* Rank r's report (rank 0's own: refreshed here) against the others' latest:
 * a conflict is announced as SC_ERR_MISMATCH. */
void sc_watch_compare(sc_watch_t *w, int r);

#endif
