/* SPDX-License-Identifier: BSD-3-Clause */
/* Bootstrap root service: a detached thread that collects every rank's blob
 * and then starts the table down the answer's tree (wire format in
 * bootstrap_wire.h; the answering side in bootstrap_answer.c). A rank's
 * connection carries its hello and blob and an ack, then closes; once every
 * rank checked in, the root answers its children in the tree and the ranks
 * pass the table on; when the job failed, the root tells every rank the
 * reason itself. At most SC_BOOT_CONN_MAX connections are open at once, so
 * the process hosting the root (rank 0 on the environment path) needs a
 * bounded number of descriptors however many ranks there are; the others
 * wait in the listener's backlog. One poll loop serves every connection, so
 * a silent or slow client cannot hold up the others; nothing is allocated
 * for a connection before its header has been checked. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/control/bootstrap.h"
#include "lib/control/bootstrap_root_internal.h"
#include "lib/control/bootstrap_wire.h"

/* At the connection limit, a connection that has not sent its hello within
 * this time is dropped to make room: idle connections cannot hold the root
 * off from the ranks behind them in the backlog. */
#define SC_BOOT_HELLO_MS 1000
/* Time the root keeps trying to deliver its final error replies. */
#define SC_BOOT_FLUSH_MS 500

/* Root services (detached threads) alive in this process. */
static _Atomic int sc_broot_running;

static void broot_close(sc_broot_t *r, sc_bconn_t *c) {
  if (c->state == SC_BCONN_CLOSED) return;
  if (c->claimed && r->slot) {
    r->slot[c->rank] = 0; /* its blob did not arrive whole */
    c->claimed = 0;
  }
  close(c->fd);
  c->fd = -1;
  c->state = SC_BCONN_CLOSED;
}

void sc_broot_drop(sc_broot_t *r, sc_bconn_t *c, const char *why) {
  SC_WARN(SC_SUBSYS_BOOT, "bootstrap root %s: dropping connection from %s%s: %s", r->addr, c->name,
          c->claimed ? " (rank gave up its slot)" : "", why);
  if (c->answer && r->complete) sc_broot_adopt(r, c->rank);
  broot_close(r, c);
}

/* The job cannot succeed: every authenticated client, now and later, is told why. */
static void broot_fail(sc_broot_t *r, sc_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void broot_fail(sc_broot_t *r, sc_result_t code, const char *fmt, ...) {
  if (r->fail_code != SC_SUCCESS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->fail_text, sizeof(r->fail_text), fmt, ap);
  va_end(ap);
  r->fail_len = strlen(r->fail_text);
  r->fail_code = code;
  SC_WARN(SC_SUBSYS_BOOT, "bootstrap root %s: failing the job: %s", r->addr, r->fail_text);
  /* The ranks that checked in are answered by sc_broot_dial; a blob still
   * arriving is read to its end and answered with the error. */
  for (size_t i = 0; i < r->nconns; i++)
    if (r->conns[i].state == SC_BCONN_BLOB) r->conns[i].discard = 1;
}

/* "2,5,7-9", cut short with a count so that 65536 missing ranks still fit. */
static void broot_missing_list(const sc_broot_t *r, char *out, size_t len) {
  size_t used = 0;
  int listed = 0, total = 0;
  out[0] = '\0';
  for (int i = 0; i < r->nranks; i++) {
    if (r->slot[i] == 2) continue;
    int j = i;
    while (j + 1 < r->nranks && r->slot[j + 1] != 2) j++;
    total += j - i + 1;
    if (used + 32 < len) {
      if (j == i)
        used += (size_t)snprintf(out + used, len - used, "%s%d", listed ? "," : "", i);
      else
        used += (size_t)snprintf(out + used, len - used, "%s%d-%d", listed ? "," : "", i, j);
      listed += j - i + 1;
    }
    i = j;
  }
  if (listed < total) snprintf(out + used, len - used, ",... (%d in all)", total);
}

static void broot_on_timeout(sc_broot_t *r) {
  if (r->complete) {
    SC_WARN(SC_SUBSYS_BOOT, "bootstrap root %s: timeout while the table was still going out",
            r->addr);
    return;
  }
  if (r->fail_code != SC_SUCCESS) return;
  if (r->nranks == 0) {
    broot_fail(r, SC_ERR_TIMEOUT, "bootstrap timeout after %d ms: no rank checked in",
               r->timeout_ms);
    return;
  }
  char list[700];
  broot_missing_list(r, list, sizeof(list));
  int missing = r->nranks - r->checked_in;
  broot_fail(r, SC_ERR_TIMEOUT,
             "bootstrap timeout after %d ms: rank%s %s never checked in (%d of %d did)",
             r->timeout_ms, missing == 1 ? "" : "s", list, r->checked_in, r->nranks);
}

/* Checks a complete header; on success the connection moves to BLOB. */
static void broot_on_header(sc_broot_t *r, sc_bconn_t *c) {
  sc_boot_hello_t h;
  char why[128];
  if (sc_boot_hello_parse(c->hdr, c->hdr_done, r->secret, &h, why, sizeof(why)) != SC_SUCCESS) {
    sc_broot_drop(r, c, why);
    return;
  }
  uint32_t rank = h.rank, nranks = h.nranks, bloblen = h.bloblen;
  c->rank = (int)rank;
  c->blob_done = 0;
  c->state = SC_BCONN_BLOB;
  memcpy(c->addr, h.addr, sizeof(c->addr));
  if (r->fail_code == SC_SUCCESS && r->nranks == 0) {
    /* First valid hello: its nranks/bloblen are the job's; everything is bounded above. */
    r->payload_len = sc_boot_payload_len((int)nranks, bloblen);
    r->table = calloc(r->payload_len, 1);
    r->slot = calloc(nranks, 1);
    r->told = calloc(nranks, 1);
    r->treeq = calloc(nranks, sizeof(*r->treeq));
    if (!r->table || !r->slot || !r->told || !r->treeq) {
      free(r->table);
      free(r->slot);
      free(r->told);
      free(r->treeq);
      r->table = r->slot = r->told = NULL;
      r->treeq = NULL;
      broot_fail(r, SC_ERR_NOMEM, "bootstrap root out of memory for %u ranks", nranks);
    } else {
      r->raddr = (uint8_t(*)[SC_SOCKET_ADDR_WIRE_LEN])(r->table + (size_t)nranks * bloblen);
      r->nranks = (int)nranks;
      r->bloblen = bloblen;
      r->first_rank = (int)rank;
    }
  }
  if (r->fail_code == SC_SUCCESS) {
    switch (sc_boot_hello_admit(&h, r->nranks, r->bloblen, r->slot)) {
    case SC_BOOT_ADMIT_OK:
      if (sc_boot_blob_offset(&h, (size_t)r->nranks * r->bloblen, &c->blob_off, why, sizeof(why)) !=
          SC_SUCCESS)
        broot_fail(r, SC_ERR_INTERNAL, "bootstrap root: %s", why);
      break;
    case SC_BOOT_ADMIT_NRANKS:
    case SC_BOOT_ADMIT_INVALID:
      broot_fail(r, SC_ERR_INVALID_ARG, "rank %u says nranks=%u, rank %d said %d", rank, nranks,
                 r->first_rank, r->nranks);
      break;
    case SC_BOOT_ADMIT_BLOBLEN:
      broot_fail(r, SC_ERR_INVALID_ARG,
                 "rank %u sends a %u-byte address blob, rank %d sent %zu bytes", rank, bloblen,
                 r->first_rank, r->bloblen);
      break;
    case SC_BOOT_ADMIT_DUPLICATE: {
      char first[64] = "a rank whose blob is still arriving";
      sc_sockaddr_t a;
      if (r->slot[rank] == 2 && sc_socket_addr_unpack(r->raddr[rank], &a) == SC_SUCCESS)
        sc_socket_addr_str(&a, first, sizeof(first));
      broot_fail(r, SC_ERR_INVALID_ARG, "rank %u checked in twice (from %s, again from %s)", rank,
                 first, c->name);
      break;
    }
    }
  }
  if (r->fail_code != SC_SUCCESS) {
    c->discard = 1;
  } else {
    r->slot[rank] = 1;
    c->claimed = 1;
  }
  c->blob_len = bloblen;
}

static void broot_on_blob_done(sc_broot_t *r, sc_bconn_t *c) {
  if (c->discard || r->fail_code != SC_SUCCESS) {
    sc_broot_reply_error(r, c);
    return;
  }
  r->slot[c->rank] = 2;
  memcpy(r->raddr[c->rank], c->addr, sizeof(c->addr));
  c->claimed = 0; /* the slot stays filled after this connection closes */
  r->checked_in++;
  sc_broot_start_reply(r, c, SC_SUCCESS, NULL, 0); /* the ack */
  SC_TRACE(SC_SUBSYS_BOOT, "bootstrap root %s: rank %d checked in from %s (%d of %d)", r->addr,
           c->rank, c->name, r->checked_in, r->nranks);
  if (r->checked_in < r->nranks) return;
  r->complete = 1;
  sc_broot_adopt(r, -1); /* the root's own children: the tree's first level */
  SC_INFO(SC_SUBSYS_BOOT,
          "bootstrap root %s: all %d ranks checked in, sending the table down a tree (%d "
          "children)",
          r->addr, r->nranks, r->treeq_len);
  for (size_t i = 0; i < r->nconns; i++) {
    sc_bconn_t *o = &r->conns[i];
    if (o->state == SC_BCONN_HELLO || o->state == SC_BCONN_BLOB)
      sc_broot_drop(r, o, "rendezvous already complete");
  }
  close(r->listen_fd);
  r->listen_fd = -1;
}

/* Reads what is available; returns 0 when the connection was closed. */
static int broot_read(sc_broot_t *r, sc_bconn_t *c) {
  for (;;) {
    uint8_t *dst;
    size_t want;
    if (c->state == SC_BCONN_HELLO) {
      dst = c->hdr + c->hdr_done;
      want = SC_BOOT_HELLO_LEN - c->hdr_done;
    } else if (c->state == SC_BCONN_BLOB) {
      want = c->blob_len - c->blob_done;
      dst = c->discard ? r->discard : r->table + c->blob_off + c->blob_done;
      if (want == 0) {
        broot_on_blob_done(r, c);
        return c->state != SC_BCONN_CLOSED;
      }
    } else {
      return 1;
    }
    ssize_t n = recv(c->fd, dst, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
    if (n <= 0) {
      char why[96];
      snprintf(why, sizeof(why), "%s",
               n == 0 ? "closed before the rendezvous ended" : strerror(errno));
      sc_broot_drop(r, c, why);
      return 0;
    }
    if (c->state == SC_BCONN_HELLO) {
      c->hdr_done += (size_t)n;
      if (c->hdr_done == SC_BOOT_HELLO_LEN) {
        broot_on_header(r, c);
        if (c->state == SC_BCONN_CLOSED) return 0;
      }
    } else {
      c->blob_done += (size_t)n;
    }
  }
}

/* At the connection limit: drops the oldest connection that has not sent its
 * hello within SC_BOOT_HELLO_MS. Returns the time to look again (0: none). */
static int64_t broot_evict_idle(sc_broot_t *r, int64_t now) {
  if (r->nconns < SC_BOOT_CONN_MAX || r->listen_fd < 0) return 0;
  size_t oldest = SIZE_MAX;
  for (size_t k = 0; k < r->nconns; k++)
    if (r->conns[k].state == SC_BCONN_HELLO &&
        (oldest == SIZE_MAX || r->conns[k].since < r->conns[oldest].since))
      oldest = k;
  if (oldest == SIZE_MAX) return 0;
  if (now - r->conns[oldest].since < SC_BOOT_HELLO_MS)
    return r->conns[oldest].since + SC_BOOT_HELLO_MS;
  sc_broot_drop(r, &r->conns[oldest], "no hello while the root is at its connection limit");
  return 0;
}

static void broot_accept(sc_broot_t *r) {
  while (r->nconns < SC_BOOT_CONN_MAX) {
    sc_sockaddr_t peer;
    int fd;
    if (sc_socket_accept(r->listen_fd, &fd, &peer) != SC_SUCCESS) {
      SC_WARN(SC_SUBSYS_BOOT, "bootstrap root %s: %s; pausing accept for 100 ms", r->addr,
              sc_last_error());
      r->accept_paused_until = sc_now_ms() + 100;
      return;
    }
    if (fd < 0) return;
    sc_bconn_t *c = &r->conns[r->nconns++];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->state = SC_BCONN_HELLO;
    c->rank = -1;
    c->since = sc_now_ms();
    sc_socket_addr_str(&peer, c->name, sizeof(c->name));
  }
}

static void broot_compact(sc_broot_t *r) {
  size_t k = 0;
  for (size_t i = 0; i < r->nconns; i++)
    if (r->conns[i].state != SC_BCONN_CLOSED) r->conns[k++] = r->conns[i];
  r->nconns = k;
}

static void broot_free(sc_broot_t *r) {
  for (size_t i = 0; i < r->nconns; i++)
    if (r->conns[i].state != SC_BCONN_CLOSED) close(r->conns[i].fd);
  if (r->listen_fd >= 0) close(r->listen_fd);
  free(r->table);
  free(r->slot);
  free(r->told);
  free(r->treeq);
  memset(r->secret, 0, sizeof(r->secret));
  free(r);
}

static void *broot_main(void *arg) {
  sc_broot_t *r = arg;
  int64_t flush_deadline = 0;
  for (;;) {
    int64_t now = sc_now_ms();
    if (!flush_deadline && now >= r->deadline) {
      broot_on_timeout(r); /* the ranks that checked in are answered below */
      flush_deadline = now + SC_BOOT_FLUSH_MS;
      for (size_t i = 0; i < r->nconns; i++)
        if (r->conns[i].state == SC_BCONN_HELLO || r->conns[i].state == SC_BCONN_BLOB)
          sc_broot_drop(r, &r->conns[i], "bootstrap timed out");
      if (r->listen_fd >= 0) close(r->listen_fd);
      r->listen_fd = -1;
    }
    int64_t evict_at = broot_evict_idle(r, now);
    int64_t expire_at = sc_broot_expire_answers(r, now);
    broot_compact(r);
    sc_broot_dial(r);
    int answered =
        r->nconns == 0 && (r->complete ? r->treeq_head >= r->treeq_len : r->dial_next >= r->nranks);
    if (flush_deadline && (answered || now >= flush_deadline)) break;
    if (r->complete && answered) break;
    if (r->fail_code != SC_SUCCESS && answered && sc_broot_all_told(r)) break;

    size_t np = 0;
    int64_t wake_at = flush_deadline ? flush_deadline : r->deadline;
    if (evict_at && evict_at < wake_at) wake_at = evict_at;
    if (expire_at && expire_at < wake_at) wake_at = expire_at;
    int accepting =
        r->listen_fd >= 0 && now >= r->accept_paused_until && r->nconns < SC_BOOT_CONN_MAX;
    if (r->listen_fd >= 0 && now < r->accept_paused_until && r->accept_paused_until < wake_at)
      wake_at = r->accept_paused_until;
    if (accepting) r->pfds[np++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
    size_t first_conn = np;
    for (size_t i = 0; i < r->nconns; i++) {
      sc_bconn_state_t st = r->conns[i].state;
      r->pfds[np++] =
          (struct pollfd){.fd = st == SC_BCONN_CLOSED ? -1 : r->conns[i].fd,
                          .events = st == SC_BCONN_REPLY || st == SC_BCONN_DIAL ? POLLOUT : POLLIN};
    }
    int rc = poll(r->pfds, np, sc_ms_until(wake_at));
    if (rc < 0 && errno != EINTR) {
      SC_WARN(SC_SUBSYS_BOOT, "bootstrap root %s: poll: %s", r->addr, strerror(errno));
      break;
    }
    if (rc <= 0) continue;
    /* Accepting appends to conns, so handle existing connections first. */
    size_t nold = r->nconns;
    for (size_t i = 0; i < nold; i++) {
      sc_bconn_t *c = &r->conns[i];
      short ev = r->pfds[first_conn + i].revents;
      if (!ev || c->state == SC_BCONN_CLOSED) continue;
      if (c->state == SC_BCONN_DIAL) sc_broot_dialed(r, c);
      if (c->state == SC_BCONN_REPLY)
        sc_broot_write(r, c);
      else if (c->state == SC_BCONN_HELLO || c->state == SC_BCONN_BLOB)
        broot_read(r, c);
    }
    if (first_conn == 1 && (r->pfds[0].revents & POLLIN) && r->listen_fd >= 0) broot_accept(r);
  }
  SC_INFO(SC_SUBSYS_BOOT, "bootstrap root %s: service ends (%s)", r->addr,
          r->complete    ? "table delivered"
          : r->fail_code ? r->fail_text
                         : "stopped");
  broot_free(r);
  atomic_fetch_sub(&sc_broot_running, 1);
  return NULL;
}

void sc_bootstrap_root_drain(int max_ms) {
  int64_t end = sc_now_ms() + max_ms;
  while (atomic_load(&sc_broot_running) > 0 && sc_now_ms() < end) usleep(5000);
}

sc_result_t sc_bootstrap_root_start(const sc_sockaddr_t *bind, const uint8_t secret[SC_SECRET_LEN],
                                    int timeout_ms, sc_sockaddr_t *bound) {
  if (!secret || !bound) return SC_ERR(SC_ERR_INVALID_ARG, "bootstrap root: NULL argument");
  if (timeout_ms <= 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "bootstrap root: timeout %d ms must be positive", timeout_ms);
  sc_sockaddr_t addr;
  if (bind)
    addr = *bind;
  else
    SC_CHECK(sc_socket_pick_addr(NULL, NULL, &addr));
  sc_broot_t *r = calloc(1, sizeof(*r));
  if (!r) return SC_ERR(SC_ERR_NOMEM, "bootstrap root: out of memory");
  r->listen_fd = -1;
  sc_result_t res = sc_socket_listen(&addr, 0, &r->listen_fd);
  if (res != SC_SUCCESS) {
    free(r);
    return res;
  }
  memcpy(r->secret, secret, SC_SECRET_LEN);
  r->timeout_ms = timeout_ms;
  r->deadline = sc_now_ms() + timeout_ms;
  sc_socket_addr_str(&addr, r->addr, sizeof(r->addr));
  pthread_attr_t attr;
  pthread_t tid;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  atomic_fetch_add(&sc_broot_running, 1);
  int e = pthread_create(&tid, &attr, broot_main, r);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    atomic_fetch_sub(&sc_broot_running, 1);
    broot_free(r);
    return SC_ERR(SC_ERR_SYSTEM, "bootstrap root: pthread_create: %s", strerror(e));
  }
  SC_INFO(SC_SUBSYS_BOOT, "bootstrap root listening on %s (timeout %d ms)", r->addr, timeout_ms);
  *bound = addr;
  return SC_SUCCESS;
}
