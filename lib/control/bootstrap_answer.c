/* SPDX-License-Identifier: BSD-3-Clause */
/* The bootstrap root service's answering side: once every rank checked in,
 * the table and every rank's listener address go to the root's children in
 * the answer's tree (sc_boot_tree_children), and a child that cannot be
 * reached or does not take it within SC_BOOT_ANSWER_MS has its children
 * answered in its place; once the job failed, every rank that checked in is
 * told the reason. Connections the root opens to the ranks' listeners share
 * the SC_BOOT_CONN_MAX slots with the check-ins (bootstrap_root.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/control/bootstrap_root_internal.h"
#include "lib/control/bootstrap_wire.h"

/* Queues the children of rank in the answer's tree: the root's own (rank
 * -1), or those of a rank the root could not answer, in its place. Each rank
 * enters the queue once, from its parent. */
void sc_broot_adopt(sc_broot_t *r, int rank) {
  int kids[SC_BOOT_TREE_MAX];
  int n = sc_boot_tree_children(rank, r->nranks, kids);
  if (n && rank >= 0)
    SC_WARN(SC_SUBSYS_BOOT, "bootstrap root %s: answering the %d children of rank %d instead",
            r->addr, n, rank);
  for (int i = 0; i < n && r->treeq_len < r->nranks; i++) r->treeq[r->treeq_len++] = kids[i];
}

void sc_broot_start_reply(sc_broot_t *r, sc_bconn_t *c, sc_result_t status, const uint8_t *payload,
                          size_t len) {
  size_t h = 0;
  if (c->answer) {
    sc_boot_answer_build(c->head, r->secret);
    h = SC_BOOT_ANSWER_LEN;
  }
  sc_boot_reply_build(c->head + h, (uint32_t)status, (uint32_t)len);
  c->head_len = h + SC_BOOT_REPLY_LEN;
  c->payload = payload;
  c->payload_len = len;
  c->out_done = 0;
  c->state = SC_BCONN_REPLY;
}

void sc_broot_reply_error(sc_broot_t *r, sc_bconn_t *c) {
  sc_broot_start_reply(r, c, r->fail_code, (const uint8_t *)r->fail_text, r->fail_len);
}

/* The rank to answer next: complete, the next of the answer's tree; failed,
 * the next rank that checked in and was not told yet. -1: none. */
static int broot_next_to_answer(sc_broot_t *r) {
  if (r->complete) return r->treeq_head < r->treeq_len ? r->treeq[r->treeq_head++] : -1;
  while (r->dial_next < r->nranks) {
    int k = r->dial_next++;
    if (r->slot[k] == 2 && !r->told[k]) return k;
  }
  return -1;
}

/* Answering (the job is complete or failed): opens connections to the
 * listeners of the ranks to answer, as many as the limit allows. A rank that
 * cannot be reached (it died after checking in) is skipped with a warning: it
 * is not waiting any more; complete, its children are answered instead. */
void sc_broot_dial(sc_broot_t *r) {
  if (!r->complete && r->fail_code == SC_SUCCESS) return;
  while (r->nconns < SC_BOOT_CONN_MAX) {
    int k = broot_next_to_answer(r);
    if (k < 0) break;
    sc_sockaddr_t a;
    char name[64] = "?";
    int fd = -1, err = 0;
    if (sc_socket_addr_unpack(r->raddr[k], &a) != SC_SUCCESS) {
      err = EINVAL;
    } else {
      sc_socket_addr_str(&a, name, sizeof(name));
      fd = socket(a.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0 || (connect(fd, (const struct sockaddr *)&a.sa, a.len) != 0 &&
                     errno != EINPROGRESS && errno != EINTR))
        err = errno;
    }
    if (err) {
      SC_WARN(SC_SUBSYS_BOOT, "bootstrap root %s: cannot answer rank %d at %s: %s", r->addr, k,
              name, strerror(err));
      if (fd >= 0) close(fd);
      if (r->complete) sc_broot_adopt(r, k);
      continue;
    }
    sc_bconn_t *c = &r->conns[r->nconns++];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->state = SC_BCONN_DIAL;
    c->rank = k;
    c->answer = 1;
    c->since = sc_now_ms();
    snprintf(c->name, sizeof(c->name), "%s", name);
  }
}

/* A connection to a rank's listener completed (or failed): send the answer. */
void sc_broot_dialed(sc_broot_t *r, sc_bconn_t *c) {
  int err = 0;
  socklen_t el = sizeof(err);
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
  if (err) {
    char why[160];
    snprintf(why, sizeof(why), "cannot answer rank %d: %s", c->rank, strerror(err));
    sc_broot_drop(r, c, why);
    return;
  }
  sc_socket_set_nodelay(c->fd);
  if (r->complete)
    sc_broot_start_reply(r, c, SC_SUCCESS, r->table, r->payload_len);
  else
    sc_broot_reply_error(r, c);
}

void sc_broot_write(sc_broot_t *r, sc_bconn_t *c) {
  size_t total = c->head_len + c->payload_len;
  while (c->out_done < total) {
    struct iovec iov[2];
    int n = 0;
    if (c->out_done < c->head_len) {
      iov[n].iov_base = c->head + c->out_done;
      iov[n++].iov_len = c->head_len - c->out_done;
      iov[n].iov_base = (void *)c->payload;
      iov[n++].iov_len = c->payload_len;
    } else {
      size_t off = c->out_done - c->head_len;
      iov[n].iov_base = (void *)(c->payload + off);
      iov[n++].iov_len = c->payload_len - off;
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (w <= 0) {
      sc_broot_drop(r, c, w < 0 ? strerror(errno) : "send made no progress");
      return;
    }
    c->out_done += (size_t)w;
  }
  /* The final word reached the rank: its answer, or the error in place of an
   * ack (unless the rank is checked in from another connection: a duplicate). */
  if (c->rank >= 0 && c->rank < r->nranks && r->told &&
      (c->answer || (c->payload_len && r->slot[c->rank] != 2)))
    r->told[c->rank] = 1;
  close(c->fd);
  c->fd = -1;
  c->state = SC_BCONN_CLOSED;
}

/* Complete: drops the answers to the tree's ranks that took longer than
 * SC_BOOT_ANSWER_MS (their children are answered instead). Returns the time
 * to look again (0: none). */
int64_t sc_broot_expire_answers(sc_broot_t *r, int64_t now) {
  if (!r->complete) return 0;
  int64_t next = 0;
  for (size_t k = 0; k < r->nconns; k++) {
    sc_bconn_t *c = &r->conns[k];
    if (!c->answer || c->state == SC_BCONN_CLOSED) continue;
    int64_t due = c->since + SC_BOOT_ANSWER_MS;
    if (now >= due) {
      char why[96];
      snprintf(why, sizeof(why), "rank %d took no answer within %d ms", c->rank, SC_BOOT_ANSWER_MS);
      sc_broot_drop(r, c, why);
    } else if (!next || due < next) {
      next = due;
    }
  }
  return next;
}

int sc_broot_all_told(const sc_broot_t *r) {
  if (r->nranks == 0) return 0;
  for (int i = 0; i < r->nranks; i++)
    if (!r->told[i]) return 0;
  return 1;
}
