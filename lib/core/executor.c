/* SPDX-License-Identifier: BSD-3-Clause */
/* The executor: runs one rank's schedule over the communicator's transport.
 * Steps run in order. A SEND is posted and left in flight; before any later
 * step writes memory that an in-flight SEND still reads, the executor waits
 * for that SEND (so schedules may reuse buffers freely). Receives complete
 * before the next step, but the next receive may be posted early (the
 * lookahead below). Every wait is bounded by the no-progress timeout and
 * interrupted by abort. Operations on device buffers take their own path
 * (lib/core/exec_device.c): one branch here, nothing else on the host path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/core/dev_allreduce.h"
#include "lib/core/exec_device.h"
#include "lib/core/fingerprint.h"
#include "lib/schedule/step.h"

/* Send slots are sized at the start of each schedule to every send it can
 * post, so a SEND never waits for an earlier one to free a slot: such a wait
 * deadlocks when both ends of a link post more sends than the slots before
 * their receives (a ring step of a 400 MB bucket). Slots only move between
 * schedules, when the transport holds none of them. */
#define SC_EXEC_MIN_SENDS 256
/* Transport messages one step can send: a sparse set is a count, indices,
 * values and, when folding, a survival mask. */
#define SC_EXEC_SPARSE_SEND_MSGS (1 + SC_SPARSE_PARTS)
/* Receive lookahead. The transport can only match a receive once it is
 * posted, and a rendezvous transport (UCX above its eager limit) answers a
 * sender's request-to-send only then: with one receive posted at a time,
 * every chunk of a pipelined ring waited for a round trip and the sender's
 * next wake-up after the previous chunk, the link idle meanwhile (10-20% of
 * a 16 MiB all-reduce over UCX on the 1 Gbit/s bed, perf/README.md). So
 * while a receive step waits, the next receive step is posted too, when
 * that needs no wait for anything:
 *   - only SEND steps lie between the two (no COPY, no sparse step), so
 *     receives are still posted in schedule order (per-peer matching);
 *   - a RECV_REDUCE lands in the staging buffer the current receive does
 *     not use (the second one holds at most SC_EXEC_LOOKAHEAD_MAX bytes;
 *     larger receives are posted at their step, as before);
 *   - a RECV lands in place, so nothing that runs before its step (the
 *     current step's destination and operand, the SENDs between) and no
 *     send still in flight may touch its destination;
 *   - its peer is on another host (lib/core/locality.c's map). On one host the
 *     handshake is cheap, and early posts, tried there for every receive,
 *     cost more than they saved (P = 4 on 2 cores, 1 MiB: 1.8x the context
 *     switches, 15-20% slower over shm and UCX alike);
 *   - it comes from the peer the current receive comes from and is at
 *     least a pipelining chunk (SC_CHUNK_BYTES): the next chunk of one
 *     stream, announced while the current one flows. An early receive
 *     from another peer (Rabenseifner's doubling, 4 hosts, 1 MiB) measured
 *     18-28 ms against 13-17 ms without on the bed: the two peers' data
 *     then share this host's link, and the one the rank waits for comes
 *     later. */
#define SC_EXEC_LOOKAHEAD_MAX ((size_t)4 << 20)

static sc_result_t sc_exec_reserve(void **buf, size_t *have, size_t need, const char *what) {
  if (need <= *have) return SC_SUCCESS;
  void *p = NULL;
  if (posix_memalign(&p, 64, need) != 0) return SC_ERR(SC_ERR_NOMEM, "%s of %zu bytes", what, need);
  free(*buf);
  *buf = p;
  *have = need;
  return SC_SUCCESS;
}

void sc_exec_state_free(sc_exec_state_t *ex) {
  sc_sched_free(&ex->sched);
  free(ex->scratch);
  free(ex->staging);
  free(ex->staging2);
  free(ex->sends);
  free(ex->send_lo);
  free(ex->send_hi);
  if (ex->sparse) sc_sparse_state_free(ex->sparse);
  free(ex->sparse);
  sc_exec_dev_free(ex->dev);
  sc_devar_free(ex->devar);
  free(ex->board_parts);
  memset(ex, 0, sizeof(*ex));
}

static sc_result_t sc_exec_prepare(sc_comm_t *comm, const sc_exec_args_t *a) {
  sc_exec_state_t *ex = &comm->ex;
  const sc_sched_t *s = a->sched;
  size_t max_rr = 0;
  for (size_t i = 0; i < s->nsteps; i++)
    if (s->steps[i].kind == SC_STEP_RECV_REDUCE && s->steps[i].count > max_rr)
      max_rr = s->steps[i].count;
  SC_CHECK(sc_exec_reserve(&ex->scratch, &ex->scratch_bytes, s->scratch_count * a->elem_size,
                           "scratch buffer"));
  SC_CHECK(
      sc_exec_reserve(&ex->staging, &ex->staging_bytes, max_rr * a->elem_size, "staging buffer"));
  /* Only a communicator spanning hosts posts early (below). */
  size_t ahead = comm->tune.host_of && comm->tune.nhosts > 1 ? max_rr * a->elem_size : 0;
  SC_CHECK(sc_exec_reserve(&ex->staging2, &ex->staging2_bytes,
                           ahead < SC_EXEC_LOOKAHEAD_MAX ? ahead : SC_EXEC_LOOKAHEAD_MAX,
                           "lookahead staging buffer"));
  ex->pre_posted = 0;
  size_t nsends = 0;
  for (size_t i = 0; i < s->nsteps; i++)
    nsends += s->steps[i].kind == SC_STEP_SEND          ? 1
              : s->steps[i].kind == SC_STEP_SPARSE_SEND ? SC_EXEC_SPARSE_SEND_MSGS
                                                        : 0;
  if (nsends < SC_EXEC_MIN_SENDS) nsends = SC_EXEC_MIN_SENDS;
  if (nsends > ex->send_cap) {
    free(ex->sends);
    free(ex->send_lo);
    free(ex->send_hi);
    ex->sends = calloc(nsends, sizeof(*ex->sends));
    ex->send_lo = calloc(nsends, sizeof(*ex->send_lo));
    ex->send_hi = calloc(nsends, sizeof(*ex->send_hi));
    ex->send_cap = nsends;
    if (!ex->sends || !ex->send_lo || !ex->send_hi) {
      free(ex->sends);
      free(ex->send_lo);
      free(ex->send_hi);
      ex->sends = NULL;
      ex->send_lo = ex->send_hi = NULL;
      ex->send_cap = 0;
      return SC_ERR(SC_ERR_NOMEM, "send tracking of %zu entries", nsends);
    }
  }
  ex->send_head = ex->send_count = 0;
  if (a->op->sparse) {
    const sc_sparse_op_t *sp = a->op->sparse;
    if (!ex->sparse && !(ex->sparse = calloc(1, sizeof(*ex->sparse))))
      return SC_ERR(SC_ERR_NOMEM, "sparse executor state");
    SC_CHECK(sc_sparse_state_prepare(ex->sparse, s, a->op->dtype, sp->k, sp->dense_len, &sp->io));
  }
  return SC_SUCCESS;
}

sc_result_t sc_exec_progress(sc_exec_ctx_t *c, int peer, size_t bytes, const char *dir,
                             int max_slice_ms) {
  sc_comm_t *comm = c->comm;
  if (atomic_load(&comm->aborted))
    return SC_ERR(SC_ERR_ABORTED, "rank %d: aborted while waiting", comm->rank);
  /* Set mid-operation only by the liveness watch: a peer failed. */
  int failed = atomic_load(&comm->error);
  int64_t now = sc_now_ms();
  if (c->progress_unstamped) {
    c->last_progress_ms = now;
    c->progress_unstamped = 0;
  }
  if (failed != SC_SUCCESS && now - c->last_progress_ms >= SC_EXEC_NOTICE_GRACE_MS)
    return SC_ERR((sc_result_t)failed, "%s", comm->errmsg);
  int64_t left = c->last_progress_ms + comm->cfg.timeout_ms - now;
  if (left <= 0 && peer < 0)
    return SC_ERR(SC_ERR_TIMEOUT,
                  "no progress for %d ms (SC_TIMEOUT_MS) while waiting to %s, step %zu of %zu",
                  comm->cfg.timeout_ms, dir, c->step + 1, c->a->sched->nsteps);
  if (left <= 0) {
    const char *host = sc_comm_host(comm, peer);
    return SC_ERR(SC_ERR_TIMEOUT,
                  "no progress for %d ms (SC_TIMEOUT_MS) while waiting to %s %zu bytes %s rank "
                  "%d (%s), step %zu of %zu",
                  comm->cfg.timeout_ms, dir, bytes, dir[0] == 's' ? "to" : "from", peer, host,
                  c->step + 1, c->a->sched->nsteps);
  }
  /* The transport tries its I/O before it sleeps in poll. */
  int progressed = 0;
  int slice = left < max_slice_ms ? (int)left : max_slice_ms;
  if (failed != SC_SUCCESS) {
    int64_t grace = c->last_progress_ms + SC_EXEC_NOTICE_GRACE_MS - now;
    slice = grace < slice ? (grace > 1 ? (int)grace : 1) : slice;
  }
  sc_result_t r = comm->tpops->progress(comm->tp, slice, &progressed);
  if (progressed) c->progress_unstamped = 1;
  /* Reported once, perhaps while this rank waits for another request. */
  if (r == SC_ERR_MISMATCH) return sc_exec_req_failed(comm, NULL, peer);
  return r;
}

static int sc_exec_is_mismatch(const sc_tp_req_t *req) {
  return req->state == SC_TP_REQ_ERROR && req->status == SC_ERR_MISMATCH;
}

/* The request of this schedule the transport failed with SC_ERR_MISMATCH. */
static const sc_tp_req_t *sc_exec_mismatched(const sc_comm_t *comm) {
  const sc_exec_state_t *ex = &comm->ex;
  if (sc_exec_is_mismatch(&ex->recv_req)) return &ex->recv_req;
  if (sc_exec_is_mismatch(&ex->pre_req)) return &ex->pre_req;
  for (size_t i = 0; i < ex->send_count; i++) {
    const sc_tp_req_t *r = &ex->sends[(ex->send_head + i) % ex->send_cap];
    if (sc_exec_is_mismatch(r)) return r;
  }
  return ex->dev ? sc_exec_dev_mismatched(ex->dev) : NULL;
}

sc_result_t sc_exec_req_failed(const sc_comm_t *comm, const sc_tp_req_t *req, int peer) {
  if (req && req->status != SC_ERR_MISMATCH)
    return req->status != SC_SUCCESS ? req->status
                                     : SC_ERR(SC_ERR_REMOTE, "request to rank %d failed", peer);
  if (!req) req = sc_exec_mismatched(comm);
  const char *me = sc_comm_host(comm, comm->rank);
  char msg[SC_ERRMSG_MAX];
  if (req) {
    const char *host = sc_comm_host(comm, req->peer);
    sc_fp_msg_mismatch_text(msg, sizeof(msg), comm->rank, me, req->fp, req->peer, host,
                            req->peer_fp, comm->ex.fp_seq);
  } else {
    /* The transport named no request of this schedule: its own words. */
    char detail[SC_ERRMSG_MAX / 2], mine[160];
    sc_error_get_detail(detail, sizeof(detail));
    snprintf(msg, sizeof(msg), "rank %d (%s) called %s; a peer called another operation (%s)",
             comm->rank, me, sc_fp_msg_describe(comm->ex.fp, comm->ex.fp_seq, mine, sizeof(mine)),
             detail);
  }
  return SC_ERR(SC_ERR_MISMATCH, "%s", msg);
}

/* A post's result: a transport may refuse a request to a peer whose channel
 * a mismatch put out of step, reporting that mismatch. */
static sc_result_t sc_exec_posted(const sc_comm_t *comm, sc_result_t r, int peer) {
  return r == SC_ERR_MISMATCH ? sc_exec_req_failed(comm, NULL, peer) : r;
}

/* The print a message of len bytes carries: the call's, with the message's
 * own count for a v collective. */
static void sc_exec_req_print(const sc_exec_state_t *ex, size_t len, sc_tp_req_t *req) {
  memcpy(req->fp, ex->fp, SC_TP_FP_LEN);
  if (ex->fp_count_es) sc_fp_msg_set_count(req->fp, len / ex->fp_count_es);
}

sc_result_t sc_exec_isend(sc_comm_t *comm, int peer, const void *buf, size_t len,
                          sc_tp_req_t *req) {
  sc_exec_req_print(&comm->ex, len, req);
  return sc_exec_posted(comm, comm->tpops->isend(comm->tp, peer, buf, len, req), peer);
}

sc_result_t sc_exec_irecv(sc_comm_t *comm, int peer, void *buf, size_t len, sc_tp_req_t *req) {
  sc_exec_req_print(&comm->ex, len, req);
  return sc_exec_posted(comm, comm->tpops->irecv(comm->tp, peer, buf, len, req), peer);
}

static sc_result_t sc_exec_req_status(const sc_comm_t *comm, const sc_tp_req_t *req, int peer) {
  if (req->state == SC_TP_REQ_ERROR) return sc_exec_req_failed(comm, req, peer);
  return SC_SUCCESS;
}

static sc_result_t sc_exec_wait_req(sc_exec_ctx_t *c, sc_tp_req_t *req, const char *dir) {
  while (req->state == SC_TP_REQ_PENDING)
    SC_CHECK(sc_exec_progress(c, req->peer, req->len, dir, SC_EXEC_POLL_SLICE_MS));
  return sc_exec_req_status(c->comm, req, req->peer);
}

/* Drop completed sends from the front of the ring. */
static sc_result_t sc_exec_reap_sends(sc_comm_t *comm) {
  sc_exec_state_t *ex = &comm->ex;
  while (ex->send_count) {
    sc_tp_req_t *r = &ex->sends[ex->send_head];
    if (r->state == SC_TP_REQ_PENDING) break;
    SC_CHECK(sc_exec_req_status(comm, r, r->peer));
    ex->send_head = (ex->send_head + 1) % ex->send_cap;
    ex->send_count--;
  }
  return SC_SUCCESS;
}

/* Wait until no in-flight send reads [lo, hi). */
static sc_result_t sc_exec_wait_sends_over(sc_exec_ctx_t *c, const uint8_t *lo, const uint8_t *hi) {
  sc_exec_state_t *ex = &c->comm->ex;
  if (lo == hi) return SC_SUCCESS;
  for (size_t i = 0; i < ex->send_count; i++) {
    size_t k = (ex->send_head + i) % ex->send_cap;
    if (ex->send_lo[k] < hi && lo < ex->send_hi[k])
      SC_CHECK(sc_exec_wait_req(c, &ex->sends[k], "send"));
  }
  return sc_exec_reap_sends(c->comm);
}

static sc_result_t sc_exec_send(sc_exec_ctx_t *c, int peer, const uint8_t *p, size_t len) {
  sc_exec_state_t *ex = &c->comm->ex;
  SC_CHECK(sc_exec_reap_sends(c->comm));
  if (ex->send_count == ex->send_cap)
    return SC_ERR(SC_ERR_INTERNAL, "step %zu posts more sends than its schedule declared (%zu)",
                  c->step + 1, ex->send_cap);
  size_t k = (ex->send_head + ex->send_count) % ex->send_cap;
  sc_tp_req_t *req = &ex->sends[k];
  memset(req, 0, sizeof(*req));
  ex->send_lo[k] = p;
  ex->send_hi[k] = p + len;
  ex->send_count++;
  ex->bytes_sent += len;
  return sc_exec_isend(c->comm, peer, p, len, req);
}

static sc_result_t sc_exec_recv(sc_exec_ctx_t *c, int peer, uint8_t *p, size_t len) {
  sc_tp_req_t *req = &c->comm->ex.recv_req;
  memset(req, 0, sizeof(*req));
  SC_CHECK(sc_exec_irecv(c->comm, peer, p, len, req));
  return sc_exec_wait_req(c, req, "receive");
}

static int sc_exec_overlap(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
  return alen && blen && a < b + blen && b < a + alen;
}

/* Whether a send still in flight reads [lo, lo + len); never waits. */
static int sc_exec_sending_from(const sc_exec_state_t *ex, const uint8_t *lo, size_t len) {
  for (size_t i = 0; i < ex->send_count; i++) {
    size_t k = (ex->send_head + i) % ex->send_cap;
    if (ex->sends[k].state == SC_TP_REQ_PENDING &&
        sc_exec_overlap(lo, len, ex->send_lo[k], (size_t)(ex->send_hi[k] - ex->send_lo[k])))
      return 1;
  }
  return 0;
}

/* Posts the receive step after the current one (whose data lands at `in`)
 * into request `slot` when the rules above allow it; else leaves it to its
 * step. */
static sc_result_t sc_exec_lookahead(sc_exec_ctx_t *c, const uint8_t *in, sc_tp_req_t *slot) {
  sc_exec_state_t *ex = &c->comm->ex;
  const sc_sched_t *s = c->a->sched;
  const sc_step_t *cur = &s->steps[c->step];
  const int *host_of = c->comm->tune.host_of;
  /* The next receive must come from this one's peer: on one host, done here
   * before any scan (the one-host hot path pays this test only). */
  if (!host_of || cur->peer < 0 || cur->peer >= c->comm->nranks ||
      host_of[cur->peer] == host_of[c->comm->rank])
    return SC_SUCCESS;
  size_t j = c->step + 1;
  while (j < s->nsteps && s->steps[j].kind == SC_STEP_SEND) j++;
  if (j >= s->nsteps) return SC_SUCCESS;
  const sc_step_t *nx = &s->steps[j];
  if (nx->peer != cur->peer || nx->count * c->a->elem_size < c->comm->cfg.chunk_bytes)
    return SC_SUCCESS;
  uint8_t *dst, *to;
  size_t len = sc_step_dst(&c->mem, nx, &dst);
  if (nx->kind == SC_STEP_RECV_REDUCE) {
    int second = in == ex->staging;
    if (len > (second ? ex->staging2_bytes : ex->staging_bytes)) return SC_SUCCESS;
    to = second ? ex->staging2 : ex->staging;
  } else if (nx->kind == SC_STEP_RECV) {
    if (sc_exec_sending_from(ex, dst, len)) return SC_SUCCESS;
    uint8_t *cd;
    size_t cl = sc_step_dst(&c->mem, cur, &cd);
    if (sc_exec_overlap(dst, len, cd, cl)) return SC_SUCCESS;
    if (cur->kind == SC_STEP_RECV_REDUCE &&
        sc_exec_overlap(dst, len, sc_step_ptr(&c->mem, cur->src_buf, cur->src_off),
                        cur->count * c->a->elem_size))
      return SC_SUCCESS;
    for (size_t k = c->step + 1; k < j; k++)
      if (sc_exec_overlap(dst, len, sc_step_ptr(&c->mem, s->steps[k].buf, s->steps[k].off),
                          s->steps[k].count * c->a->elem_size))
        return SC_SUCCESS;
    to = dst;
  } else {
    return SC_SUCCESS;
  }
  memset(slot, 0, sizeof(*slot));
  SC_CHECK(sc_exec_irecv(c->comm, nx->peer, to, len, slot));
  ex->pre_posted = 1;
  ex->early_posts++;
  ex->pre_slot = slot;
  ex->pre_step = j;
  ex->pre_in = to;
  return SC_SUCCESS;
}

/* A RECV or RECV_REDUCE: its receive (posted now, or already by the
 * lookahead), the next one's early post, the wait, then the reduction. */
static sc_result_t sc_exec_recv_step(sc_exec_ctx_t *c, const sc_step_t *st, uint8_t *dst,
                                     size_t len) {
  sc_exec_state_t *ex = &c->comm->ex;
  sc_tp_req_t *req;
  uint8_t *in;
  if (ex->pre_posted && ex->pre_step == c->step) {
    ex->pre_posted = 0;
    req = ex->pre_slot;
    in = ex->pre_in;
  } else {
    in = st->kind == SC_STEP_RECV ? dst : ex->staging;
    if (st->kind == SC_STEP_RECV) SC_CHECK(sc_exec_wait_sends_over(c, dst, dst + len));
    req = &ex->recv_req;
    memset(req, 0, sizeof(*req));
    SC_CHECK(sc_exec_irecv(c->comm, st->peer, in, len, req));
  }
  SC_CHECK(sc_exec_lookahead(c, in, req == &ex->recv_req ? &ex->pre_req : &ex->recv_req));
  SC_CHECK(sc_exec_wait_req(c, req, "receive"));
  if (st->kind == SC_STEP_RECV_REDUCE) {
    SC_CHECK(sc_exec_wait_sends_over(c, dst, dst + len));
    sc_step_apply(&c->mem, st, in);
  }
  return SC_SUCCESS;
}

/* Wait until no in-flight send reads any part of set `set`. */
static sc_result_t sc_exec_wait_set(sc_exec_ctx_t *c, const sc_spset_t *set, size_t w) {
  const uint8_t *n = (const uint8_t *)&set->wire_n, *i = (const uint8_t *)set->idx,
                *v = (const uint8_t *)set->val;
  SC_CHECK(sc_exec_wait_sends_over(c, n, n + sizeof(set->wire_n)));
  SC_CHECK(sc_exec_wait_sends_over(c, i, i + set->cap * 4));
  return sc_exec_wait_sends_over(c, v, v + set->cap * w);
}

/* Count first (fixed size), so that the receiver can bound it and post the
 * payload receives with their exact lengths. */
static sc_result_t sc_exec_sparse_send(sc_exec_ctx_t *c, const sc_step_t *st) {
  sc_sparse_state_t *sp = c->comm->ex.sparse;
  sc_spset_t *set = sc_sparse_set(sp, st->off);
  if (!set) return SC_ERR_INTERNAL;
  SC_CHECK(sc_exec_wait_sends_over(c, (const uint8_t *)&set->wire_n,
                                   (const uint8_t *)(&set->wire_n + 1)));
  set->wire_n = set->n;
  SC_CHECK(sc_exec_send(c, st->peer, (const uint8_t *)&set->wire_n, sizeof(set->wire_n)));
  sc_sparse_part_t parts[SC_SPARSE_PARTS];
  int n = sc_sparse_send_parts(sp, st, set, parts);
  for (int i = 0; i < n; i++) SC_CHECK(sc_exec_send(c, st->peer, parts[i].p, parts[i].len));
  return SC_SUCCESS;
}

static sc_result_t sc_exec_sparse_recv(sc_exec_ctx_t *c, const sc_step_t *st) {
  sc_sparse_state_t *sp = c->comm->ex.sparse;
  sc_spset_t *dst = sc_sparse_set(sp, st->off);
  if (!dst) return SC_ERR_INTERNAL;
  SC_CHECK(sc_exec_recv(c, st->peer, (uint8_t *)&sp->in.wire_n, sizeof(sp->in.wire_n)));
  SC_CHECK(sc_sparse_check_count(sp, st->peer, sp->in.wire_n, st->count));
  sp->in.n = (size_t)sp->in.wire_n;
  sc_sparse_part_t parts[SC_SPARSE_PARTS];
  int n = sc_sparse_recv_parts(sp, st, parts);
  for (int i = 0; i < n; i++) SC_CHECK(sc_exec_recv(c, st->peer, parts[i].p, parts[i].len));
  SC_CHECK(sc_exec_wait_set(c, dst, sp->w));
  return sc_sparse_apply(sp, st);
}

/* Dense steps' local effects go through sc_step_apply (lib/schedule/step.h),
 * the one interpreter the simulator shares; a RECV lands in place. */
static sc_result_t sc_exec_step(sc_exec_ctx_t *c, const sc_step_t *st) {
  sc_comm_t *comm = c->comm;
  uint8_t *dst;
  size_t len = sc_step_dst(&c->mem, st, &dst);
  switch (st->kind) {
  case SC_STEP_SEND:
    return sc_exec_send(c, st->peer, dst, st->count * c->a->elem_size);
  case SC_STEP_RECV:
  case SC_STEP_RECV_REDUCE:
    return sc_exec_recv_step(c, st, dst, len);
  case SC_STEP_COPY:
    if (len == 0) return SC_SUCCESS;
    SC_CHECK(sc_exec_wait_sends_over(c, dst, dst + len));
    sc_step_apply(&c->mem, st, NULL);
    return SC_SUCCESS;
  case SC_STEP_SPARSE_SEND:
    return sc_exec_sparse_send(c, st);
  case SC_STEP_SPARSE_RECV:
  case SC_STEP_SPARSE_RECV_MERGE:
    return sc_exec_sparse_recv(c, st);
  case SC_STEP_SPARSE_SUM: {
    sc_spset_t *set = sc_sparse_set(comm->ex.sparse, st->off);
    if (!set) return SC_ERR_INTERNAL;
    SC_CHECK(sc_exec_wait_set(c, set, comm->ex.sparse->w));
    return sc_sparse_apply(comm->ex.sparse, st);
  }
  default:
    return SC_ERR(SC_ERR_INTERNAL, "schedule step %zu has unknown kind %d", c->step, st->kind);
  }
}

static void sc_exec_set_print(sc_exec_state_t *ex, const sc_exec_args_t *a) {
  if (a->fp)
    memcpy(ex->fp, a->fp, SC_TP_FP_LEN);
  else
    memset(ex->fp, 0, SC_TP_FP_LEN);
  ex->fp_seq = a->op->seq;
  ex->fp_count_es = a->fp && a->op->v[2] ? a->elem_size : 0;
}

sc_result_t sc_sched_execute(sc_comm_t *comm, const sc_exec_args_t *a) {
  sc_exec_set_print(&comm->ex, a);
  if (a->op->device) return sc_exec_device(comm, a);
  SC_CHECK(sc_exec_prepare(comm, a));
  sc_exec_ctx_t c = {.comm = comm,
                     .a = a,
                     .mem = {.base = {(uint8_t *)(uintptr_t)a->op->sendbuf,
                                      (uint8_t *)a->op->recvbuf, (uint8_t *)comm->ex.scratch},
                             .elem_size = a->elem_size,
                             .dtype = a->op->dtype,
                             .op = a->op->op},
                     .step = 0,
                     .progress_unstamped = 1};
  const sc_sched_t *s = a->sched;
  for (c.step = 0; c.step < s->nsteps; c.step++) SC_CHECK(sc_exec_step(&c, &s->steps[c.step]));
  sc_exec_state_t *ex = &comm->ex;
  while (ex->send_count) {
    SC_CHECK(sc_exec_wait_req(&c, &ex->sends[ex->send_head], "send"));
    SC_CHECK(sc_exec_reap_sends(comm));
  }
  if (a->op->sparse) {
    const sc_sparse_op_t *sp = a->op->sparse;
    *sp->out_nnz = ex->sparse->sets[1].n;
    if (sp->survived) memcpy(sp->survived, ex->sparse->alive, sp->io.nnz);
  }
  sc_sched_finish(&c.mem, s, comm->nranks);
  return SC_SUCCESS;
}
