/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch, rank 0's side: the root of the tree, it decides on the
 * failures its subtrees report and relays the first one to every rank. The
 * accepting of children is every parent's (rank 0: any rank, for the ranks
 * whose parent died). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/control/watch_internal.h"

/* A rank whose operation timed out often waits, through others, on a
 * stopped rank: that one has been silent for most of the timeout. Rank 0
 * sees its own links; a deeper rank's quiet its parent reports (each
 * heartbeat period while it lasts). */
static int silent_rank(sc_watch_t *w, int except, int64_t *silence) {
  int best = -1;
  int64_t most = w->timeout_ms / 2, now = sc_now_ms();
  for (int r = 1; r < w->nconn; r++) {
    sc_wconn_t *c = &w->conn[r];
    int64_t quiet = -1;
    if (r != except && c->state == SC_WC_LIVE) {
      sc_watch_read(w, c); /* a frame may wait unread */
      if (c->state == SC_WC_LIVE) quiet = sc_now_ms() - c->last_rx;
    }
    if (r != except && w->quiet_told && w->quiet_told[r] &&
        now - w->quiet_told[r] <= 2 * w->hb_ms && now - w->quiet_since[r] > quiet)
      quiet = now - w->quiet_since[r];
    if (quiet > most) {
      best = r;
      most = quiet;
    }
  }
  *silence = most;
  return best;
}

static void watch_relay(sc_watch_t *w, int subject, sc_result_t code, const char *reason,
                        int may_blame);

/* Rank 0: the first failure of any rank goes to every rank. may_blame: a
 * rank's own failure, which a silent rank, or a death whose close still
 * waits unread, explains better. A rank's own SC_ERR_REMOTE (a connection
 * that closed under it) is held for w->hold_ms first: it is often the
 * symptom of what its peer found at the same moment, a mismatch (the peer
 * closed that connection) or the peer's death, and the cause, arriving
 * meanwhile, is relayed in its place. */
void sc_watch_event(sc_watch_t *w, int subject, sc_result_t code, const char *reason,
                    int may_blame) {
  if (w->failed) {
    SC_INFO(SC_SUBSYS_COLL, "liveness watch: rank %d %s (after the job failed)", subject, reason);
    return;
  }
  if (may_blame && code == SC_ERR_REMOTE) {
    if (w->held) {
      SC_INFO(SC_SUBSYS_COLL, "liveness watch: rank %d %s (after rank %d's failure)", subject,
              reason, w->held_subject);
      return;
    }
    w->held = 1;
    w->held_until = sc_now_ms() + w->hold_ms;
    w->held_subject = subject;
    snprintf(w->held_reason, sizeof(w->held_reason), "%s", reason);
    return;
  }
  w->held = 0; /* this one goes first */
  watch_relay(w, subject, code, reason, may_blame);
}

void sc_watch_release_held(sc_watch_t *w, int force) {
  if (!w->held || (!force && sc_now_ms() < w->held_until)) return;
  w->held = 0;
  if (!w->failed) watch_relay(w, w->held_subject, SC_ERR_REMOTE, w->held_reason, 1);
}

static void watch_relay(sc_watch_t *w, int subject, sc_result_t code, const char *reason,
                        int may_blame) {
  if (code == SC_ERR_ABORTED || code == SC_SUCCESS || code == SC_ERR_INVALID_ARG)
    code = SC_ERR_REMOTE;
  if (may_blame) {
    /* A rank reporting its failure is often the neighbour of a rank that
     * died: that death is the cause, and its close may already wait unread. */
    for (int r = 1; r < w->nconn && !w->failed; r++)
      if (r != subject && w->conn[r].state == SC_WC_LIVE) sc_watch_read(w, &w->conn[r]);
    if (w->failed) return;
  }
  char blamed[SC_WATCH_TEXT_MAX + 1];
  int64_t quiet;
  int silent = may_blame && code == SC_ERR_TIMEOUT ? silent_rank(w, subject, &quiet) : -1;
  if (silent > 0) {
    snprintf(blamed, sizeof(blamed),
             "stopped responding: no heartbeat for %lld ms, and rank %d timed out (%s)",
             (long long)quiet, subject, reason);
    subject = silent;
    reason = blamed;
  } else if (may_blame && code == SC_ERR_TIMEOUT && subject != 0 && w->stalled_at &&
             sc_now_ms() - w->stalled_at < w->timeout_ms) {
    snprintf(blamed, sizeof(blamed),
             "stopped responding: this process did not run for %lld ms (stopped or starved), "
             "and rank %d timed out (%s)",
             (long long)w->stalled_ms, subject, reason);
    subject = 0;
    reason = blamed;
  }
  if (w->failed) return; /* sc_watch_read above may have relayed a death */
  /* Our own record first: a victim told below may close its connections to
   * us at once, and our blocked call must report this cause, not that close. */
  sc_watch_record(w, subject, code, reason);
  sc_watch_flood(w, SC_WATCH_NOTICE, subject, code, reason);
}

int sc_watch_op_conflict(const sc_watch_op_t *ops, int nranks, int r) {
  if (r < 0 || r >= nranks || !ops[r].busy) return -1;
  for (int s = 0; s < nranks; s++)
    if (s != r && ops[s].busy && ops[s].seq == ops[r].seq &&
        memcmp(ops[s].fp, ops[r].fp, SC_WATCH_FP_LEN) != 0)
      return s;
  return -1;
}

void sc_watch_op_mismatch_reason(char *out, size_t len, const sc_watch_op_t *a,
                                 const sc_watch_op_t *b, int rb, const char *host_b,
                                 void (*describe)(void *ctx, const sc_watch_op_t *op, char *out,
                                                  size_t len),
                                 void *ctx) {
  char da[192], db[192];
  describe(ctx, a, da, sizeof(da));
  describe(ctx, b, db, sizeof(db));
  snprintf(out, len, "called %s where rank %d (%s) called %s", da, rb, host_b, db);
}

void sc_watch_compare(sc_watch_t *w, int r) {
  const sc_watch_hooks_t *h = &w->hooks;
  if (w->failed || !w->ops || !h->op_now || !h->describe) return;
  h->op_now(h->ctx, &w->ops[0]);
  int s = sc_watch_op_conflict(w->ops, w->nranks, r);
  if (s < 0) return;
  if (r == 0) { /* named the other way: "rank 1 called ... where rank 0 called ..." */
    r = s;
    s = 0;
  }
  sc_watch_peer_t p;
  h->peer(h->ctx, s, &p);
  char reason[SC_WATCH_TEXT_MAX + 1];
  sc_watch_op_mismatch_reason(reason, sizeof(reason), &w->ops[r], &w->ops[s], s, p.host,
                              h->describe, h->ctx);
  sc_watch_event(w, r, SC_ERR_MISMATCH, reason, 0);
}

void sc_watch_read_hello(sc_watch_t *w, sc_wconn_t *c) {
  if (!sc_wconn_buf(c)) {
    sc_wconn_close(c);
    c->state = SC_WC_NONE;
    return;
  }
  for (;;) {
    ssize_t n = recv(c->fd, c->b->in + c->in_done, SC_WATCH_HELLO_LEN - c->in_done, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      sc_wconn_close(c);
      c->state = SC_WC_NONE;
      return;
    }
    c->in_done += (size_t)n;
    if (c->in_done < SC_WATCH_HELLO_LEN) continue;
    int r = 0, slot = -1;
    char why[128];
    if (sc_watch_hello_parse(c->b->in, c->in_done, w->secret, w->nranks, &r, why, sizeof(why)) !=
        SC_SUCCESS)
      r = 0;
    else if ((slot = sc_watch_slot(w, r)) < 1)
      snprintf(why, sizeof(why), "rank %d is no child of rank %d in the watch tree", r, w->rank);
    else if (w->conn[slot].state != SC_WC_NONE)
      snprintf(why, sizeof(why), "rank %d connected a second time", r);
    else
      why[0] = '\0';
    if (why[0]) {
      SC_WARN(SC_SUBSYS_BOOT, "liveness watch: dropping a connection: %s", why);
      sc_wconn_close(c);
      c->state = SC_WC_NONE;
      return;
    }
    sc_wconn_t *s = &w->conn[slot];
    s->fd = c->fd;
    s->rank = r;
    s->state = SC_WC_LIVE;
    s->last_rx = sc_now_ms();
    c->fd = -1;
    c->state = SC_WC_NONE;
    SC_TRACE(SC_SUBSYS_COLL, "liveness watch: rank %d connected", r);
    if (w->sent_down) /* it connected after the notice went down */
      sc_wconn_queue(s, SC_WATCH_NOTICE, w->down_subject, (int)w->down_code, w->down_text);
    return;
  }
}

void sc_watch_accept(sc_watch_t *w) {
  for (;;) {
    int slot = -1;
    for (int i = 0; i < SC_WATCH_UNAUTH_MAX && slot < 0; i++)
      if (w->pend[i].state == SC_WC_NONE) slot = i;
    if (slot < 0) return; /* the others wait in the backlog (sc_watch_accept_wait) */
    int fd;
    if (sc_socket_accept(w->listen_fd, &fd, NULL) != SC_SUCCESS || fd < 0) return;
    sc_wconn_reset(&w->pend[slot]);
    w->pend[slot].fd = fd;
    w->pend[slot].state = SC_WC_HELLO;
    w->pend_since[slot] = sc_now_ms();
  }
}

int64_t sc_watch_accept_wait(sc_watch_t *w, int64_t now) {
  int oldest = -1;
  for (int i = 0; i < SC_WATCH_UNAUTH_MAX; i++) {
    if (w->pend[i].state == SC_WC_NONE) return 0;
    if (oldest < 0 || w->pend_since[i] < w->pend_since[oldest]) oldest = i;
  }
  if (now - w->pend_since[oldest] < SC_WATCH_HELLO_MS)
    return w->pend_since[oldest] + SC_WATCH_HELLO_MS;
  SC_WARN(SC_SUBSYS_BOOT, "liveness watch: dropping a connection that sent no hello in %d ms",
          SC_WATCH_HELLO_MS);
  sc_wconn_close(&w->pend[oldest]);
  w->pend[oldest].state = SC_WC_NONE;
  return 0;
}
