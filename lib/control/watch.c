/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch: see watch.h for the design. One thread per communicator;
 * the watch connections form a tree whose root, rank 0, relays the first
 * failure it learns of to every rank. Everything the thread waits for is
 * bounded by the heartbeat period; every length read off the wire is
 * checked against SC_WATCH_TEXT_MAX before a byte of text is read. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/base/wire.h"
#include "lib/control/bootstrap_wire.h"
#include "lib/control/watch.h"
#include "lib/control/watch_internal.h"

_Static_assert(SC_WATCH_ADDR_LEN == SC_SOCKET_ADDR_WIRE_LEN, "watch address size");
_Static_assert(SC_WATCH_HELLO_LEN <= SC_WATCH_HDR_LEN + SC_WATCH_TEXT_MAX, "hello fits in[]");

/* Makes subject's failure this communicator's error and wakes a blocked call. */
void sc_watch_record(sc_watch_t *w, int subject, sc_result_t code, const char *reason) {
  const sc_watch_hooks_t *h = &w->hooks;
  sc_watch_peer_t p, me;
  h->peer(h->ctx, subject, &p);
  h->peer(h->ctx, w->rank, &me);
  char msg[SC_ERRMSG_MAX];
  /* Rank 0's own comparison of the calls (its reason is the calls, not a
   * failure): of two mismatched calls neither is the cause, the subject is
   * only the rank whose report showed it. */
  int compared = code == SC_ERR_MISMATCH && strncmp(reason, "failed: ", 8) != 0;
  if (compared)
    snprintf(msg, sizeof(msg),
             "rank %d (%s, pid %d%s) %s; rank %d of %d (%s) learned of it from rank 0's liveness "
             "watch, which compared the calls the ranks were executing",
             subject, p.host, p.pid, subject == w->rank ? "; this rank" : "", reason, w->rank,
             w->nranks, me.host);
  else if (subject == w->rank)
    snprintf(msg, sizeof(msg),
             "rank %d (%s, pid %d; this rank) %s; rank 0's liveness watch told every rank (this "
             "rank is the cause)",
             subject, p.host, p.pid, reason);
  else /* a relayed failure may name this very rank as its cause: no verdict then */
    snprintf(msg, sizeof(msg), "rank %d (%s, pid %d) %s; rank %d of %d (%s) %s the liveness watch",
             subject, p.host, p.pid, reason, w->rank, w->nranks, me.host,
             strncmp(reason, "failed: ", 8) ? "is a victim, told by" : "learned of it from");
  int recorded = 0;
  h->lock(h->ctx);
  if (!atomic_load(&w->notice_seen)) {
    snprintf(w->notice_msg, sizeof(w->notice_msg), "%s", msg);
    /* News to this rank unless it is about this rank's own failure, which
     * it knows; rank 0's comparison of the calls is news to every rank. */
    w->notice_news = subject != w->rank || compared;
    w->notice_code = code;
    atomic_store(&w->notice_seen, 1);
  }
  if (!h->aborted(h->ctx) && h->error(h->ctx, NULL, 0) == SC_SUCCESS) {
    h->set_error(h->ctx, code, msg);
    recorded = 1;
    w->from_watch = 1;
  }
  h->unlock(h->ctx);
  w->failed = 1;
  if (!recorded) return;
  SC_WARN(SC_SUBSYS_COLL, "communicator of %d ranks failed: %s", w->nranks, msg);
  h->wake(h->ctx);
}

/* The connection to `c->rank` closed or broke. */
void sc_watch_on_close(sc_watch_t *w, sc_wconn_t *c, const char *how) {
  sc_wc_state_t st = c->state;
  c->eof = 1;
  c->out_off = c->out_len = c->in_done = 0;
  c->state = SC_WC_GONE;
  if (st != SC_WC_LIVE) return;
  char reason[256];
  if (w->rank != 0 && c == &w->conn[0]) {
    snprintf(reason, sizeof(reason),
             "died: the watch connection to it closed without a goodbye (%s)", how);
    sc_watch_lost_parent(w, SC_ERR_REMOTE, reason);
  } else {
    snprintf(reason, sizeof(reason),
             "died: its watch connection to rank %d closed without a goodbye (%s)", w->rank, how);
    sc_watch_report(w, c->rank, SC_ERR_REMOTE, reason);
  }
}

static void watch_on_frame(sc_watch_t *w, sc_wconn_t *c, const sc_watch_frame_t *f,
                           const uint8_t *text) {
  if (w->rank == 0 || c != &w->conn[0]) {
    sc_watch_from_child(w, c, f, text);
    return;
  }
  char clean[SC_WATCH_TEXT_MAX + 1];
  switch (f->type) {
  case SC_WATCH_HEARTBEAT:
    return;
  case SC_WATCH_GOODBYE:
    /* The parent, or a rank above it, left: no notice will come from there. */
    if ((int)f->subject == c->rank && c->state == SC_WC_LIVE) c->state = SC_WC_GONE;
    if (!atomic_exchange(&w->hub_gone, 1))
      sc_watch_flood(w, SC_WATCH_GOODBYE, (int)f->subject, SC_SUCCESS, NULL);
    SC_INFO(SC_SUBSYS_COLL, "liveness watch: rank %u left cleanly", f->subject);
    return;
  case SC_WATCH_NOTICE:
    sc_boot_errtext_clean(text, f->len, clean, sizeof(clean));
    sc_watch_record(w, (int)f->subject, (sc_result_t)f->code, clean);
    sc_watch_flood(w, SC_WATCH_NOTICE, (int)f->subject, (sc_result_t)f->code, clean);
    return;
  }
  char why[96];
  snprintf(why, sizeof(why), "sent an unexpected watch frame (type %u)", f->type);
  sc_watch_on_close(w, c, why);
}

/* Reads everything available on a live connection. */
void sc_watch_read(sc_watch_t *w, sc_wconn_t *c) {
  if (c->fd >= 0 && !c->eof && !sc_wconn_buf(c)) {
    sc_watch_on_close(w, c, "no memory for its buffers");
    return;
  }
  while (c->fd >= 0 && !c->eof) {
    size_t want =
        SC_WATCH_HDR_LEN - (c->in_done < SC_WATCH_HDR_LEN ? c->in_done : SC_WATCH_HDR_LEN);
    sc_watch_frame_t f = {0};
    char why[160];
    if (c->in_done >= SC_WATCH_HDR_LEN) {
      if (sc_watch_frame_parse(c->b->in, SC_WATCH_HDR_LEN, w->nranks, &f, why, sizeof(why)) !=
          SC_SUCCESS) {
        sc_watch_on_close(w, c, why);
        return;
      }
      want = SC_WATCH_HDR_LEN + f.len - c->in_done;
      if (want == 0) {
        c->in_done = 0;
        watch_on_frame(w, c, &f, c->b->in + SC_WATCH_HDR_LEN);
        continue;
      }
    }
    ssize_t n = recv(c->fd, c->b->in + c->in_done, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      sc_watch_on_close(w, c, n == 0 ? "EOF" : strerror(errno));
      return;
    }
    c->in_done += (size_t)n;
    c->last_rx = sc_now_ms();
  }
}

/* This rank's own communicator failed or was aborted: tell the others once. */
static void watch_tell_local(sc_watch_t *w, int aborting) {
  if (w->told) return;
  const sc_watch_hooks_t *h = &w->hooks;
  char msg[SC_ERRMSG_MAX];
  h->lock(h->ctx);
  sc_result_t code = h->error(h->ctx, msg, sizeof(msg));
  /* SC_CHECK_MISMATCH (lib/core/fingerprint.c): every rank reaches the same
   * verdict from the same prints; a relay would only race, and replace, a
   * rank's own view of it. A mismatch seen in a message's print is relayed:
   * ranks that exchanged no message with this one learn of it only so. */
  int shared = h->shared_verdict && h->shared_verdict(h->ctx);
  int mine = code != SC_SUCCESS && !shared && !w->from_watch;
  h->unlock(h->ctx);
  if (!mine && !aborting) return;
  if (!mine) {
    if (w->from_watch) return; /* the abort answers a notice everyone had */
    code = SC_ERR_ABORTED;
    snprintf(msg, sizeof(msg), "rank %d called sc_comm_abort", w->rank);
  }
  w->told = 1;
  if (w->rank == 0) {
    char reason[SC_ERRMSG_MAX + 16];
    snprintf(reason, sizeof(reason), code == SC_ERR_ABORTED ? "called sc_comm_abort" : "failed: %s",
             msg);
    sc_watch_event(w, 0, code, reason, 1);
  } else if (w->conn[0].state == SC_WC_LIVE) { /* up the tree to rank 0 */
    sc_wconn_queue(&w->conn[0], SC_WATCH_FAILED, w->rank, (int)code, msg);
  }
}

static void watch_check_silence(sc_watch_t *w, int64_t now) {
  for (int r = 0; r < w->nconn; r++) {
    sc_wconn_t *c = &w->conn[r];
    if (c->state != SC_WC_LIVE || now - c->last_rx <= w->timeout_ms / 2) continue;
    /* Frames may wait unread: this thread itself was stopped (SIGSTOP) or starved. */
    sc_watch_read(w, c);
    if (c->state != SC_WC_LIVE || now - c->last_rx <= w->timeout_ms / 2) continue;
    int up = w->rank != 0 && r == 0;
    if (now - c->last_rx <= w->timeout_ms) {
      /* Half the timeout quiet: rank 0, which sees only its own children,
       * learns it, to name this rank where another one's call times out
       * waiting on it. */
      if (!up && w->rank != 0 && w->conn[0].state == SC_WC_LIVE) {
        uint8_t ms[SC_WATCH_QUIET_LEN];
        sc_wire_put_u32(ms, (uint32_t)(now - c->last_rx));
        sc_wconn_queue_bytes(&w->conn[0], SC_WATCH_QUIET, c->rank, 0, ms, sizeof(ms));
      }
      continue;
    }
    char reason[200];
    snprintf(reason, sizeof(reason),
             "stopped responding: no heartbeat for %lld ms (SC_TIMEOUT_MS=%d; a stopped or hung "
             "process, or an unreachable host)",
             (long long)(now - c->last_rx), w->timeout_ms);
    c->state = SC_WC_GONE; /* keep the socket: a resumed rank reads why it was dropped */
    if (up)
      sc_watch_lost_parent(w, SC_ERR_TIMEOUT, reason);
    else
      sc_watch_report(w, c->rank, SC_ERR_TIMEOUT, reason);
  }
  if (w->listen_fd < 0) return;
  for (int i = 0; i < SC_WATCH_UNAUTH_MAX; i++)
    if (w->pend[i].state == SC_WC_HELLO && now - w->pend_since[i] > w->timeout_ms) {
      sc_wconn_close(&w->pend[i]);
      w->pend[i].state = SC_WC_NONE;
    }
  if (w->conn_checked || now - w->start_ms <= w->timeout_ms) return;
  w->conn_checked = 1;
  for (int i = 1; i < w->nconn; i++) {
    if (!w->expect[i] || w->conn[i].state != SC_WC_NONE) continue;
    char reason[128];
    snprintf(reason, sizeof(reason), "never opened its watch connection within %d ms",
             w->timeout_ms);
    w->conn[i].state = SC_WC_GONE;
    sc_watch_report(w, w->rank == 0 ? i : w->kid0 + i - 1, SC_ERR_TIMEOUT, reason);
  }
}

/* Destroy or abort: the last frames, then every descriptor closed. */
static void watch_finish(sc_watch_t *w, int aborting) {
  sc_watch_release_held(w, 1);
  watch_tell_local(w, aborting);
  for (int r = 0; r < w->nconn; r++)
    if (w->conn[r].fd >= 0 && !w->conn[r].eof)
      sc_wconn_queue(&w->conn[r], SC_WATCH_GOODBYE, w->rank, 0, NULL);
  int64_t deadline = sc_now_ms() + SC_WATCH_FLUSH_MS;
  for (;;) {
    nfds_t n = 0;
    for (int r = 0; r < w->nconn; r++)
      if (w->conn[r].fd >= 0 && !w->conn[r].eof && w->conn[r].out_len > w->conn[r].out_off) {
        w->pfds[n] = (struct pollfd){.fd = w->conn[r].fd, .events = POLLOUT};
        w->pconn[n++] = &w->conn[r];
      }
    if (n == 0 || sc_now_ms() >= deadline) break;
    if (poll(w->pfds, n, sc_ms_until(deadline)) <= 0) continue;
    for (nfds_t i = 0; i < n; i++)
      if (w->pfds[i].revents && sc_wconn_flush(w->pconn[i]) < 0) sc_wconn_close(w->pconn[i]);
  }
  for (int r = 0; r < w->nconn; r++) {
    sc_wconn_t *c = &w->conn[r];
    if (c->fd < 0) continue;
    /* Unread bytes at close would turn our FIN into a reset. */
    shutdown(c->fd, SHUT_WR);
    uint8_t sink[256];
    while (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
    }
    sc_wconn_close(c);
  }
  for (int i = 0; i < SC_WATCH_UNAUTH_MAX; i++) sc_wconn_close(&w->pend[i]);
}

static void *watch_main(void *arg) {
  sc_watch_t *w = arg;
  sc_log_set_rank(w->rank);
  int64_t next_hb = sc_now_ms();
  int st;
  while ((st = atomic_load(&w->stop)) == 0) {
    int64_t now = sc_now_ms();
    watch_tell_local(w, 0);
    sc_watch_release_held(w, 0);
    if (now >= next_hb) {
      /* The call this rank executes goes up to rank 0, which compares. */
      sc_watch_op_t op = {0};
      uint8_t rep[SC_WATCH_HB_OP_LEN];
      size_t rlen = 0;
      if (w->rank != 0 && w->hooks.op_now) {
        w->hooks.op_now(w->hooks.ctx, &op);
        rlen = sc_watch_hb_put(&op, rep);
      }
      for (int r = 0; r < w->nconn; r++)
        if (w->conn[r].state == SC_WC_LIVE)
          sc_wconn_queue_bytes(&w->conn[r], SC_WATCH_HEARTBEAT, w->rank, 0, rep,
                               w->rank != 0 && r == 0 ? rlen : 0);
      if (w->rank == 0) sc_watch_compare(w, 0);
      next_hb = now + w->hb_ms;
      watch_check_silence(w, now);
    }
    nfds_t n = 0;
    w->pfds[n] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
    w->pconn[n++] = NULL;
    int64_t accept_at = w->listen_fd >= 0 ? sc_watch_accept_wait(w, now) : 0;
    if (w->listen_fd >= 0 && !accept_at) {
      w->pfds[n] = (struct pollfd){.fd = w->listen_fd, .events = POLLIN};
      w->pconn[n++] = NULL;
    }
    for (int i = 0; w->listen_fd >= 0 && i < SC_WATCH_UNAUTH_MAX; i++)
      if (w->pend[i].state == SC_WC_HELLO) {
        w->pfds[n] = (struct pollfd){.fd = w->pend[i].fd, .events = POLLIN};
        w->pconn[n++] = &w->pend[i];
      }
    for (int r = 0; r < w->nconn; r++)
      if (w->conn[r].fd >= 0 && !w->conn[r].eof) {
        short ev = POLLIN;
        if (w->conn[r].out_len > w->conn[r].out_off) ev |= POLLOUT;
        w->pfds[n] = (struct pollfd){.fd = w->conn[r].fd, .events = ev};
        w->pconn[n++] = &w->conn[r];
      }
    int64_t due = next_hb > now ? next_hb : now;
    int64_t wake = w->held && w->held_until < next_hb ? w->held_until : next_hb;
    if (accept_at && accept_at < wake) wake = accept_at;
    int rc = poll(w->pfds, n, sc_ms_until(wake));
    /* Woken this late, this process itself did not run (SIGSTOP, starved):
     * a timeout reported now is more likely ours than a peer's. */
    int64_t late = sc_now_ms() - due;
    if (late > w->timeout_ms / 2) {
      w->stalled_ms = late;
      w->stalled_at = sc_now_ms();
    }
    if (rc <= 0) continue;
    if (w->pfds[0].revents) {
      uint64_t v;
      while (read(w->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR) {
      }
    }
    for (nfds_t i = 1; i < n; i++) {
      sc_wconn_t *c = w->pconn[i];
      short ev = w->pfds[i].revents;
      if (!ev) continue;
      if (!c) {
        sc_watch_accept(w);
      } else if (c->state == SC_WC_HELLO) {
        sc_watch_read_hello(w, c);
      } else if (c->fd >= 0) {
        if ((ev & POLLOUT) && sc_wconn_flush(c) < 0) c->out_off = c->out_len = 0;
        if (ev & (POLLIN | POLLHUP | POLLERR)) sc_watch_read(w, c);
      }
    }
  }
  watch_finish(w, st == 2);
  return NULL;
}

static void watch_free(sc_watch_t *w) {
  if (!w) return;
  for (int r = 0; w->conn && r < w->nconn; r++) {
    sc_wconn_close(&w->conn[r]);
    sc_wconn_reset(&w->conn[r]);
  }
  for (int i = 0; i < SC_WATCH_UNAUTH_MAX; i++) {
    sc_wconn_close(&w->pend[i]);
    sc_wconn_reset(&w->pend[i]);
  }
  if (w->listen_fd >= 0) close(w->listen_fd);
  if (w->wake_fd >= 0) close(w->wake_fd);
  memset(w->secret, 0, sizeof(w->secret));
  free(w->conn);
  free(w->expect);
  free(w->pfds);
  free(w->pconn);
  free(w->ops);
  free(w->quiet_told);
  free(w->quiet_since);
  free(w);
}

sc_result_t sc_watch_create(const sc_watch_hooks_t *hooks, const char *ifname,
                            const sc_sockaddr_t *route_hint, int heartbeat_ms,
                            const uint8_t *secret, sc_watch_t **out,
                            uint8_t addr[SC_WATCH_ADDR_LEN]) {
  *out = NULL;
  memset(addr, 0, SC_WATCH_ADDR_LEN);
  if (heartbeat_ms < 0 || hooks->nranks < 2) return SC_SUCCESS;
  sc_watch_t *w = calloc(1, sizeof(*w));
  if (!w) return SC_ERR(SC_ERR_NOMEM, "liveness watch");
  w->hooks = *hooks;
  w->rank = hooks->rank;
  w->nranks = hooks->nranks;
  w->timeout_ms = hooks->timeout_ms;
  int hb = heartbeat_ms > 0 ? heartbeat_ms : (w->timeout_ms / 8 < 1000 ? w->timeout_ms / 8 : 1000);
  /* At least two heartbeats per timeout, so one late frame is no death. */
  if (hb > w->timeout_ms / 2) hb = w->timeout_ms / 2;
  w->hb_ms = hb > 0 ? hb : 1;
  w->explain_ms = w->timeout_ms / 4 < 1000 ? w->timeout_ms / 4 : 1000;
  /* Well inside the victims' wait for an explanation (sc_watch_explain). */
  w->hold_ms = w->explain_ms / 2 < 200 ? w->explain_ms / 2 : 200;
  memcpy(w->secret, secret, SC_SECRET_LEN);
  w->listen_fd = -1;
  w->fanout = hooks->fanout < 2 ? 2 : hooks->fanout > 64 ? 64 : hooks->fanout;
  w->parent = sc_watch_parent_of(w->fanout, w->rank);
  /* Computed in 64 bits: rank * fanout may pass INT_MAX. */
  long long kid0 = (long long)w->rank * w->fanout + 1;
  long long nkids = kid0 >= w->nranks ? 0 : w->nranks - kid0;
  w->kid0 = kid0 < w->nranks ? (int)kid0 : w->nranks;
  w->nkids = (int)(nkids < w->fanout ? nkids : w->fanout);
  w->nconn = w->rank == 0 ? w->nranks : 1 + w->nkids;
  size_t maxfds = (size_t)w->nconn + SC_WATCH_UNAUTH_MAX + 2;
  w->conn = calloc((size_t)w->nconn, sizeof(*w->conn));
  w->pfds = calloc(maxfds, sizeof(*w->pfds));
  w->pconn = calloc(maxfds, sizeof(*w->pconn));
  w->expect = calloc((size_t)w->nconn, 1);
  if (w->rank == 0) {
    w->ops = calloc((size_t)w->nranks, sizeof(*w->ops));
    w->quiet_told = calloc((size_t)w->nranks, sizeof(*w->quiet_told));
    w->quiet_since = calloc((size_t)w->nranks, sizeof(*w->quiet_since));
  }
  for (int i = 0; i < SC_WATCH_UNAUTH_MAX; i++) sc_wconn_reset(&w->pend[i]);
  for (int r = 0; w->conn && r < w->nconn; r++) sc_wconn_reset(&w->conn[r]);
  w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  sc_result_t res = SC_SUCCESS;
  if (!w->conn || !w->pfds || !w->pconn || !w->expect ||
      (w->rank == 0 && (!w->ops || !w->quiet_told || !w->quiet_since))) {
    res = SC_ERR(SC_ERR_NOMEM, "liveness watch tables for %d ranks", w->nranks);
  } else if (w->wake_fd < 0) {
    res = SC_ERR(SC_ERR_SYSTEM, "liveness watch: eventfd: %s", strerror(errno));
  } else if (w->rank == 0 || w->nkids > 0) { /* a parent: its children connect here */
    sc_sockaddr_t a;
    res = sc_socket_pick_addr(ifname, (ifname && *ifname) ? NULL : route_hint, &a);
    if (res == SC_SUCCESS) res = sc_socket_listen(&a, 0, &w->listen_fd);
    if (res == SC_SUCCESS) res = sc_socket_addr_pack(&a, addr);
  }
  /* "I will connect" (a byte the packed address leaves zero): the parent waits for this rank. */
  if (res == SC_SUCCESS && w->rank != 0) addr[1] = 1;
  if (res != SC_SUCCESS) {
    watch_free(w);
    memset(addr, 0, SC_WATCH_ADDR_LEN);
    return res;
  }
  *out = w;
  return SC_SUCCESS;
}

/* A parent: every child connects right after its connect_all, so waiting
 * for them here costs little, and the communicator is complete (descriptors
 * included) when creation returns. Whoever is missing at the deadline is
 * left to the thread, which declares it. */
static void watch_accept_all(sc_watch_t *w, int64_t deadline) {
  for (;;) {
    int missing = 0;
    for (int i = 1; i < w->nconn; i++)
      if (w->expect[i] && w->conn[i].state == SC_WC_NONE) missing = 1;
    if (!missing || sc_now_ms() >= deadline) return;
    nfds_t n = 0;
    int64_t accept_at = sc_watch_accept_wait(w, sc_now_ms());
    if (!accept_at) {
      w->pfds[n] = (struct pollfd){.fd = w->listen_fd, .events = POLLIN};
      w->pconn[n++] = NULL;
    }
    for (int i = 0; i < SC_WATCH_UNAUTH_MAX; i++)
      if (w->pend[i].state == SC_WC_HELLO) {
        w->pfds[n] = (struct pollfd){.fd = w->pend[i].fd, .events = POLLIN};
        w->pconn[n++] = &w->pend[i];
      }
    int64_t until = accept_at && accept_at < deadline ? accept_at : deadline;
    if (poll(w->pfds, n, sc_ms_until(until)) <= 0) continue;
    for (nfds_t i = 0; i < n; i++) {
      if (!w->pfds[i].revents) continue;
      if (w->pconn[i])
        sc_watch_read_hello(w, w->pconn[i]);
      else
        sc_watch_accept(w);
    }
  }
}

sc_result_t sc_watch_start(sc_watch_t *w) {
  if (!w) return SC_SUCCESS;
  const sc_watch_hooks_t *h = &w->hooks;
  w->start_ms = sc_now_ms();
  sc_watch_peer_t p, up;
  if (w->rank != 0) {
    h->peer(h->ctx, 0, &p);
    if (!sc_watch_addr_listens(p.watch_addr)) {
      SC_INFO(SC_SUBSYS_INIT, "rank 0 runs no liveness watch (SC_HEARTBEAT_MS=-1 there)");
      return SC_SUCCESS;
    }
    /* A parent that runs no watch (SC_HEARTBEAT_MS=-1 there): rank 0 instead. */
    h->peer(h->ctx, w->parent, &up);
    SC_CHECK(sc_watch_connect_up(w, sc_watch_addr_listens(up.watch_addr) ? w->parent : 0,
                                 w->start_ms + w->timeout_ms));
  }
  if (w->listen_fd >= 0) {
    for (int i = 1; i < w->nconn; i++) {
      int r = w->rank == 0 ? i : w->kid0 + i - 1, via = sc_watch_parent_of(w->fanout, r);
      h->peer(h->ctx, r, &p);
      h->peer(h->ctx, via, &up);
      w->expect[i] =
          p.watch_addr[1] &&
          (via == w->rank || (w->rank == 0 && via > 0 && !sc_watch_addr_listens(up.watch_addr)));
    }
    watch_accept_all(w, w->start_ms + w->timeout_ms);
  }
  int e = pthread_create(&w->thread, NULL, watch_main, w);
  if (e) return SC_ERR(SC_ERR_SYSTEM, "liveness watch: pthread_create: %s", strerror(e));
  w->started = 1;
  SC_INFO(SC_SUBSYS_INIT, "liveness watch: heartbeat every %d ms, silence limit %d ms", w->hb_ms,
          w->timeout_ms);
  return SC_SUCCESS;
}

sc_result_t sc_watch_explain(sc_watch_t *w, sc_result_t r) {
  if (!w || !w->started || (r != SC_ERR_REMOTE && r != SC_ERR_TIMEOUT)) return r;
  int64_t deadline = sc_now_ms() + w->explain_ms;
  while (!atomic_load(&w->notice_seen) && !atomic_load(&w->hub_gone) && sc_now_ms() < deadline) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  if (!atomic_load(&w->notice_seen)) return r;
  const sc_watch_hooks_t *h = &w->hooks;
  char detail[SC_ERRMSG_MAX];
  sc_error_get_detail(detail, sizeof(detail));
  h->lock(h->ctx);
  int use = w->notice_news && !h->aborted(h->ctx);
  if (use && !w->from_watch) {
    h->set_error(h->ctx, w->notice_code, w->notice_msg);
    w->from_watch = 1;
  }
  h->unlock(h->ctx);
  /* The call may have ended on the notice itself, or on a symptom of it. */
  if (!use || strstr(detail, w->notice_msg)) return r;
  return SC_ERR(w->notice_code, "%s (this rank's own call saw: %s)", w->notice_msg, detail);
}

void sc_watch_poke(sc_watch_t *w) {
  if (!w || w->wake_fd < 0) return;
  uint64_t one = 1;
  while (write(w->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void sc_watch_stop(sc_watch_t *w, int clean) {
  if (!w) return;
  if (w->started) {
    atomic_store(&w->stop, clean ? 1 : 2);
    sc_watch_poke(w);
    pthread_join(w->thread, NULL);
  }
  watch_free(w);
}
