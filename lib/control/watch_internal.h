/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch internals shared by lib/control/watch.c (thread, life cycle, the
 * per-rank side), lib/control/watch_hub.c (rank 0's relay) and lib/control/watch_wire.c
 * (parsers and framed, non-blocking I/O). */
#ifndef SC_WATCH_INTERNAL_H
#define SC_WATCH_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "lib/control/watch.h"

/* Accepted connections that have not yet sent a valid hello (rank 0); while
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
  SC_WC_HELLO, /* rank 0: accepted, hello not read yet */
  SC_WC_LIVE,  /* watched: a close or silence is a failure */
  SC_WC_GONE   /* said goodbye or already declared failed: a close is expected */
} sc_wc_state_t;

typedef struct sc_wconn {
  int fd;
  sc_wc_state_t state;
  int rank; /* the other side; -1 before its hello */
  uint8_t in[SC_WATCH_FRAME_MAX];
  size_t in_done;
  /* One notice, a goodbye and a heartbeat at most are ever queued at once. */
  uint8_t out[SC_WATCH_FRAME_MAX + 2 * SC_WATCH_HDR_LEN + SC_WATCH_HB_OP_LEN];
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
  sc_wconn_t *conn; /* rank 0: nranks slots by rank ([0] unused); others: [0] is rank 0 */
  int nconn;
  uint8_t *expect; /* rank 0: rank r announced it will connect */
  sc_wconn_t pend[SC_WATCH_UNAUTH_MAX];
  int64_t pend_since[SC_WATCH_UNAUTH_MAX];
  int failed;     /* rank 0: an event was relayed; others: a failure is known */
  int told;       /* this rank's own failure went out */
  int from_watch; /* the communicator's error is a notice recorded here (comm->lock) */
  /* The first notice (comm->lock), for sc_watch_explain on a caller's thread. */
  int notice_news, explain_ms;
  sc_result_t notice_code;
  char notice_msg[SC_ERRMSG_MAX];
  _Atomic int notice_seen;
  _Atomic int hub_gone; /* rank 0 said goodbye: no notice will come */
  int conn_checked;     /* rank 0: every expected rank connected, or was declared */
  int64_t start_ms;
  int64_t stalled_ms, stalled_at; /* rank 0: its thread last ran this late, then */
  struct pollfd *pfds;
  sc_wconn_t **pconn;
  sc_watch_op_t *ops; /* rank 0: each rank's latest report ([0]: its own call) */
  /* rank 0: a rank's SC_ERR_REMOTE waiting hold_ms for its cause
   * (sc_watch_event) */
  int held, held_subject, hold_ms;
  int64_t held_until;
  char held_reason[SC_ERRMSG_MAX + 16];
};

/* lib/control/watch_wire.c: one connection's buffered I/O. flush: -1 when broken. */
void sc_wconn_reset(sc_wconn_t *c);
void sc_wconn_close(sc_wconn_t *c);
int sc_wconn_flush(sc_wconn_t *c);
void sc_wconn_queue(sc_wconn_t *c, int type, int subject, int code, const char *text);
void sc_wconn_queue_bytes(sc_wconn_t *c, int type, int subject, int code, const void *data,
                          size_t len);

/* lib/control/watch.c */
void sc_watch_record(sc_watch_t *w, int subject, sc_result_t code, const char *reason);
void sc_watch_read(sc_watch_t *w, sc_wconn_t *c);
void sc_watch_on_close(sc_watch_t *w, sc_wconn_t *c, const char *how);

/* lib/control/watch_hub.c (rank 0) */
void sc_watch_event(sc_watch_t *w, int subject, sc_result_t code, const char *reason,
                    int may_blame);
/* The held failure goes out once its time is up, or at once (force). */
void sc_watch_release_held(sc_watch_t *w, int force);
void sc_watch_read_hello(sc_watch_t *w, sc_wconn_t *c);
void sc_watch_accept(sc_watch_t *w);
/* 0: the listener may be polled (a pending slot is free, or the oldest
 * silent one was just dropped); else the time to look again. */
int64_t sc_watch_accept_wait(sc_watch_t *w, int64_t now);
/* Rank r's report (rank 0's own: refreshed here) against the others' latest:
 * a conflict is announced as SC_ERR_MISMATCH. */
void sc_watch_compare(sc_watch_t *w, int r);

#endif
