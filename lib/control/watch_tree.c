/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness watch, the tree (watch.h): the links of a rank to its parent and
 * children, what a parent forwards up for its subtree and down for rank 0,
 * and the fallback of a rank whose parent died to rank 0. Rank 0 alone
 * decides (lib/control/watch_hub.c); the others only carry. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/base/wire.h"
#include "lib/control/bootstrap_wire.h"
#include "lib/control/watch_internal.h"

int sc_watch_parent_of(int fanout, int r) {
  return r > 0 && fanout > 0 ? (r - 1) / fanout : -1;
}

int sc_watch_in_subtree(int fanout, int s, int c) {
  if (s < 0 || c < 0 || fanout < 1) return 0;
  while (s > c) s = (s - 1) / fanout;
  return s == c;
}

int sc_watch_slot(const sc_watch_t *w, int r) {
  if (r < 0 || r >= w->nranks || r == w->rank) return -1;
  if (w->rank == 0) return r;
  if (r == w->parent) return 0;
  if (r >= w->kid0 && r < w->kid0 + w->nkids) return r - w->kid0 + 1;
  return -1;
}

int sc_watch_addr_listens(const uint8_t *addr) {
  return addr[0] != 0;
}

sc_result_t sc_watch_connect_up(sc_watch_t *w, int to, int64_t deadline) {
  const sc_watch_hooks_t *h = &w->hooks;
  sc_watch_peer_t p;
  h->peer(h->ctx, to, &p);
  uint8_t packed[SC_WATCH_ADDR_LEN];
  memcpy(packed, p.watch_addr, sizeof(packed));
  packed[1] = 0; /* the "will connect" flag is no part of the address */
  sc_sockaddr_t a;
  SC_CHECK(sc_socket_addr_unpack(packed, &a));
  char who[96], as[64];
  snprintf(who, sizeof(who), "rank %d's liveness watch at %s", to,
           sc_socket_addr_str(&a, as, sizeof(as)));
  int fd = -1;
  sc_result_t r = sc_socket_connect(&a, deadline, &fd);
  if (r != SC_SUCCESS)
    return SC_ERR(r, "rank %d cannot connect to %s: %s", w->rank, who, sc_last_error());
  uint8_t hello[SC_WATCH_HELLO_LEN];
  sc_wire_put_u32(hello, SC_WATCH_HELLO_MAGIC);
  sc_wire_put_u16(hello + 4, SC_WATCH_VERSION);
  hello[6] = hello[7] = 0;
  memcpy(hello + 8, w->secret, SC_SECRET_LEN);
  sc_wire_put_u32(hello + 8 + SC_SECRET_LEN, (uint32_t)w->rank);
  sc_wire_put_u32(hello + 12 + SC_SECRET_LEN, (uint32_t)w->nranks);
  r = sc_socket_write_all(fd, hello, sizeof(hello), deadline, who);
  memset(hello, 0, sizeof(hello));
  if (r != SC_SUCCESS) {
    close(fd);
    return r;
  }
  sc_wconn_t *c = &w->conn[0];
  sc_wconn_close(c);
  sc_wconn_reset(c);
  c->fd = fd;
  c->rank = to;
  c->state = SC_WC_LIVE;
  c->last_rx = sc_now_ms();
  w->parent = to;
  return SC_SUCCESS;
}

void sc_watch_report(sc_watch_t *w, int subject, sc_result_t code, const char *reason) {
  if (w->rank == 0) {
    sc_watch_event(w, subject, code, reason, 0);
  } else if (w->conn[0].state == SC_WC_LIVE) {
    sc_wconn_queue(&w->conn[0], SC_WATCH_EVENT, subject, (int)code, reason);
  } else {
    /* The link up left cleanly: nobody above decides any more. */
    SC_INFO(SC_SUBSYS_COLL, "liveness watch: rank %d %s (rank 0 no longer listens)", subject,
            reason);
  }
}

void sc_watch_flood(sc_watch_t *w, int type, int subject, sc_result_t code, const char *text) {
  for (int i = 1; i < w->nconn; i++) {
    sc_wconn_t *c = &w->conn[i];
    if (c->state == SC_WC_NONE) continue;
    sc_wconn_queue(c, type, subject, (int)code, text);
  }
  if (type == SC_WATCH_NOTICE && !w->sent_down) {
    w->sent_down = 1;
    w->down_subject = subject;
    w->down_code = code;
    snprintf(w->down_text, sizeof(w->down_text), "%s", text ? text : "");
  }
  int s = sc_watch_slot(w, subject);
  if (type == SC_WATCH_NOTICE && s >= 1 && w->conn[s].state == SC_WC_LIVE)
    w->conn[s].state = SC_WC_GONE; /* told: its close is no news */
}

void sc_watch_lost_parent(sc_watch_t *w, sc_result_t code, const char *reason) {
  sc_wconn_t *c = &w->conn[0];
  int lost = c->rank;
  if (lost != 0) {
    /* Rank 0 decides: its notice comes back down through this rank. */
    int64_t wait = w->timeout_ms / 4 < 1000 ? w->timeout_ms / 4 : 1000;
    sc_result_t r = sc_watch_connect_up(w, 0, sc_now_ms() + (wait > 0 ? wait : 1));
    if (r == SC_SUCCESS) {
      SC_INFO(SC_SUBSYS_COLL, "liveness watch: parent rank %d lost, rank 0 is the parent now",
              lost);
      sc_wconn_queue(&w->conn[0], SC_WATCH_EVENT, lost, (int)code, reason);
      return;
    }
    SC_WARN(SC_SUBSYS_COLL, "liveness watch: parent rank %d lost and rank 0 unreachable: %s", lost,
            sc_last_error());
    c->state = SC_WC_GONE;
  }
  /* Rank 0 itself (or no way to it): this rank tells its subtree. */
  sc_watch_record(w, lost, code, reason);
  sc_watch_flood(w, SC_WATCH_NOTICE, lost, code, reason);
}

/* A frame for rank 0, passed on to this rank's parent while that link lives. */
static void watch_pass_up(sc_watch_t *w, int type, int s, int code, const uint8_t *text,
                          size_t len) {
  if (w->conn[0].state == SC_WC_LIVE) sc_wconn_queue_bytes(&w->conn[0], type, s, code, text, len);
}

/* Rank 0 learns the call of rank s; others pass it up. */
static void watch_op_up(sc_watch_t *w, sc_wconn_t *c, int s, const uint8_t *text, size_t len) {
  sc_watch_op_t op;
  char why[128];
  if (sc_watch_hb_parse(text, len, &op, why, sizeof(why)) != SC_SUCCESS) {
    sc_watch_on_close(w, c, why);
    return;
  }
  if (w->rank != 0) {
    watch_pass_up(w, SC_WATCH_OP, s, 0, text, len);
    return;
  }
  if (!w->ops) return;
  w->ops[s] = op;
  sc_watch_compare(w, s);
}

void sc_watch_from_child(sc_watch_t *w, sc_wconn_t *c, const sc_watch_frame_t *f,
                         const uint8_t *text) {
  int from = c->rank, s = (int)f->subject;
  /* Bounded by the frame parser (s < nranks) and here: a child speaks only
   * for its own subtree. */
  int below = from > 0 && sc_watch_in_subtree(w->fanout, s, from);
  char clean[SC_WATCH_TEXT_MAX + 1], reason[SC_WATCH_TEXT_MAX + 64];
  if (f->type == SC_WATCH_FAILED || f->type == SC_WATCH_EVENT)
    sc_boot_errtext_clean(text, f->len, clean, sizeof(clean));
  switch (f->type) {
  case SC_WATCH_HEARTBEAT:
    watch_op_up(w, c, from, text, f->len);
    return;
  case SC_WATCH_OP:
    if (!below || s == from) break;
    watch_op_up(w, c, s, text, f->len);
    return;
  case SC_WATCH_QUIET:
    if (!below || s == from) break;
    if (w->rank != 0) {
      watch_pass_up(w, SC_WATCH_QUIET, s, 0, text, f->len);
    } else if (w->quiet_told) {
      int64_t now = sc_now_ms();
      w->quiet_told[s] = now;
      w->quiet_since[s] = now - (int64_t)sc_wire_get_u32(text);
    }
    return;
  case SC_WATCH_FAILED:
    if (!below) break;
    if (w->rank != 0) {
      watch_pass_up(w, SC_WATCH_FAILED, s, (int)f->code, text, f->len);
      return;
    }
    if (f->code == SC_ERR_ABORTED)
      snprintf(reason, sizeof(reason), "called sc_comm_abort");
    else
      snprintf(reason, sizeof(reason), "failed: %s", clean);
    sc_watch_event(w, s, (sc_result_t)f->code, reason, 1);
    return;
  case SC_WATCH_EVENT:
    /* A rank that fell back to rank 0 reports its lost parent. */
    if (!below && !(w->rank == 0 && s > 0 && s == sc_watch_parent_of(w->fanout, from))) break;
    if (w->rank != 0) {
      watch_pass_up(w, SC_WATCH_EVENT, s, (int)f->code, text, f->len);
      return;
    }
    sc_watch_event(w, s, (sc_result_t)f->code, clean, 0);
    return;
  case SC_WATCH_GOODBYE:
    if (c->state == SC_WC_LIVE) c->state = SC_WC_GONE;
    SC_INFO(SC_SUBSYS_COLL, "liveness watch: rank %d left cleanly", from);
    return;
  }
  char why[128];
  snprintf(why, sizeof(why), "sent an unexpected watch frame (type %u, rank %d)", f->type, s);
  sc_watch_on_close(w, c, why);
}
