/* SPDX-License-Identifier: BSD-3-Clause */
/* The board: every rank posts its part once (transport.h's board_post) and
 * reads every rank's part where it lies, then computes the result itself,
 * folding the parts in rank order, so every rank gets the same bits. A
 * collective of a few cache lines then costs one post and P - 1 reads
 * instead of a schedule's steps through the transport's queues (what a
 * 2-rank all-reduce of 8 B needs to keep up with Open MPI's shared memory). Posts are
 * numbered per communicator: every rank makes the same calls in the same
 * order and decides alike which take the board (sc_board_takes reads only
 * the call and the settings), so their numbers agree. Each post carries
 * what the call is, so a rank that called something else fails every
 * reader with SC_ERR_MISMATCH instead of handing it the wrong bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/registry.h"
#include "kernels/cpu/reduce.h"
#include "lib/base/clock.h"
#include "lib/base/dtype.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/core/board.h"

/* A waiter that has yielded this long stops yielding and sleeps in slices:
 * a peer that late is not on the latency path, and a yield loop would hold
 * a core. */
#define SC_BOARD_YIELD_US 2000
#define SC_BOARD_SLEEP_US 50

const char *sc_board_describe(uint64_t fp, char *out, size_t len) {
  snprintf(out, len, "%s (count %llu, %s, %s, root %d)", sc_coll_name((sc_coll_t)(fp & 0xff)),
           (unsigned long long)(fp >> 40 & 0xffffff), sc_dtype_name((sc_dtype_t)(fp >> 8 & 0xff)),
           sc_redop_name((sc_redop_t)(fp >> 16 & 0xff)), (int)(fp >> 24 & 0xffff));
  return out;
}

size_t sc_board_payload(const sc_op_t *op, int rank, int nranks, int forced, size_t max) {
  const size_t none = (size_t)-1;
  if (forced || op->gen || op->sparse || op->device || op->job || nranks < 2) return none;
  size_t es = sc_dtype_size(op->dtype);
  if (es == 0 || op->count > max / es) return none;
  size_t bytes = op->count * es;
  switch (op->coll) {
  case SC_COLL_ALLREDUCE:
  case SC_COLL_REDUCE:
  case SC_COLL_ALLGATHER:
    return bytes;
  case SC_COLL_BROADCAST:
    return rank == op->root ? bytes : 0;
  case SC_COLL_REDUCE_SCATTER:
  case SC_COLL_ALLTOALL:
    return bytes <= max / (size_t)nranks ? bytes * (size_t)nranks : none;
  case SC_COLL_GATHER:
    return bytes;
  case SC_COLL_SCATTER:
    /* Decided on the root's size, so that every rank decides alike. */
    if (bytes > max / (size_t)nranks) return none;
    return rank == op->root ? bytes * (size_t)nranks : 0;
  case SC_COLL_BARRIER:
    return 0;
  default:
    return none;
  }
}

/* The parts' table and the waits' pacing, made once. */
static sc_result_t board_prepare(sc_comm_t *comm) {
  sc_exec_state_t *ex = &comm->ex;
  if (ex->board_parts) return SC_SUCCESS;
  ex->board_parts = calloc((size_t)comm->nranks, sizeof(*ex->board_parts));
  if (!ex->board_parts) return SC_ERR(SC_ERR_NOMEM, "board parts of %d ranks", comm->nranks);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  ex->board_shared_cores = cpus > 0 && comm->nranks > cpus;
  sc_yield_init(&ex->board_yield, comm->nranks, cpus > 0 ? (int)cpus : 0);
  return SC_SUCCESS;
}

size_t sc_board_room(const sc_comm_t *comm) {
  return comm->ex.board_room;
}

sc_result_t sc_board_init(sc_comm_t *comm) {
  sc_exec_state_t *ex = &comm->ex;
  ex->board_max = 0;
  ex->board_room = 0;
  if (comm->tpops->board_max && comm->nranks >= 2)
    ex->board_room = comm->tpops->board_max(comm->tp);
  const size_t want = comm->cfg.board_bytes;
  size_t have = ex->board_room;
  if (have == 0 || want == 0) return SC_SUCCESS;
  SC_CHECK(board_prepare(comm));
  ex->board_max = want < have ? want : have;
  SC_INFO(SC_SUBSYS_COLL,
          "board: collectives of up to %zu bytes per rank through shared memory (all %d ranks on "
          "this host; SC_BOARD_BYTES=%zu, the transport's limit %zu)",
          ex->board_max, comm->nranks, want, have);
  return SC_SUCCESS;
}

static int forced_for(const sc_comm_t *comm, sc_coll_t coll) {
  switch (coll) {
  case SC_COLL_ALLREDUCE:
    return comm->cfg.algo >= 0;
  case SC_COLL_BROADCAST:
  case SC_COLL_REDUCE:
    return comm->cfg.bcast_algo >= 0;
  case SC_COLL_REDUCE_SCATTER:
    return comm->cfg.rs_algo >= 0;
  case SC_COLL_ALLGATHER:
    return comm->cfg.ag_algo >= 0;
  case SC_COLL_ALLTOALL:
    return comm->cfg.a2a_algo >= 0;
  case SC_COLL_GATHER:
  case SC_COLL_SCATTER:
    return comm->cfg.gather_algo >= 0;
  default:
    return 0;
  }
}

size_t sc_board_takes(const sc_comm_t *comm, const sc_op_t *op) {
  if (!comm->ex.board_max) return (size_t)-1;
  return sc_board_payload(op, comm->rank, comm->nranks, forced_for(comm, op->coll),
                          comm->ex.board_max);
}

static void board_pause(sc_exec_state_t *ex, int64_t waited_us, int64_t spin_us, int64_t *now) {
  if (!ex->board_shared_cores && waited_us < spin_us) {
    sc_cpu_relax();
    return;
  }
  if (waited_us < SC_BOARD_YIELD_US && sc_yield_allowed(&ex->board_yield, *now)) {
    *now = sc_yield_core(&ex->board_yield, *now);
    return;
  }
  struct timespec ts = {0, SC_BOARD_SLEEP_US * 1000L};
  nanosleep(&ts, NULL);
}

/* Peer's post of call seq, waited for within SC_TIMEOUT_MS; an abort, the
 * peer's end or the communicator's failure (the liveness watch, heeded as
 * the executor does: after SC_EXEC_NOTICE_GRACE_MS without a post, since
 * the posts of a call that completes elsewhere may still be on their way)
 * stop it. */
static sc_result_t board_wait(sc_comm_t *comm, int peer, uint64_t seq, const void **data,
                              uint64_t *fp) {
  sc_exec_state_t *ex = &comm->ex;
  SC_CHECK(comm->tpops->board_peek(comm->tp, peer, seq, 0, data, fp));
  if (*data) return SC_SUCCESS;
  int64_t start = sc_now_us(), now = start;
  for (unsigned i = 1;; i++) {
    board_pause(ex, now - start, comm->cfg.spin_us, &now);
    int due = ex->board_shared_cores || (i & 31) == 0 || now - start >= comm->cfg.spin_us;
    if (due) now = sc_now_us();
    SC_CHECK(comm->tpops->board_peek(comm->tp, peer, seq, due ? now / 1000 : 0, data, fp));
    if (*data) return SC_SUCCESS;
    if (!due) continue;
    if (atomic_load(&comm->aborted))
      return SC_ERR(SC_ERR_ABORTED, "rank %d: aborted while waiting", comm->rank);
    int failed = atomic_load(&comm->error);
    if (failed != SC_SUCCESS && now - start >= SC_EXEC_NOTICE_GRACE_MS * 1000)
      return SC_ERR((sc_result_t)failed, "%s", comm->errmsg);
    if (now - start >= (int64_t)comm->cfg.timeout_ms * 1000) {
      const char *host = sc_comm_host(comm, peer);
      return SC_ERR(SC_ERR_TIMEOUT,
                    "no progress for %d ms (SC_TIMEOUT_MS) while waiting for rank %d (%s) to "
                    "post its part on the board (call #%llu)",
                    comm->cfg.timeout_ms, peer, host, (unsigned long long)seq);
    }
  }
}

sc_result_t sc_board_exchange(sc_comm_t *comm, const void *mine, size_t len, void *all) {
  if (len > sc_board_room(comm))
    return SC_ERR(SC_ERR_INTERNAL, "board exchange of %zu bytes: the board holds %zu", len,
                  sc_board_room(comm));
  SC_CHECK(board_prepare(comm));
  /* An all-gather of bytes on the board, whatever SC_BOARD_BYTES says. */
  sc_op_t op;
  memset(&op, 0, sizeof(op));
  op.coll = SC_COLL_ALLGATHER;
  op.dtype = SC_UINT8;
  op.count = len;
  op.sendbuf = mine;
  op.recvbuf = all;
  return sc_board_run(comm, &op, len);
}

/* Fold the parts' element range [off, off + n) in rank order into dst. */
static void board_fold(const sc_comm_t *comm, const sc_op_t *op, void *dst, size_t off, size_t n) {
  size_t es = sc_dtype_size(op->dtype);
  const void *const *part = comm->ex.board_parts;
  memcpy(dst, (const uint8_t *)part[0] + off * es, n * es);
  for (int r = 1; r < comm->nranks; r++)
    sc_reduce_kernel(op->dtype, op->op, dst, dst, (const uint8_t *)part[r] + off * es, n);
  if (op->op == SC_AVG) sc_avg_finalize(op->dtype, dst, n, comm->nranks);
}

sc_result_t sc_board_run(sc_comm_t *comm, const sc_op_t *op, size_t len) {
  sc_exec_state_t *ex = &comm->ex;
  const int me = comm->rank, P = comm->nranks;
  uint64_t seq = ++ex->board_seq;
  uint64_t fp = sc_board_fp((int)op->coll, (int)op->dtype, (int)op->op, op->root, op->count);
  comm->tpops->board_post(comm->tp, seq, fp, op->sendbuf, len);
  for (int r = 0; r < P; r++) {
    uint64_t theirs = 0;
    SC_CHECK(board_wait(comm, r, seq, &ex->board_parts[r], &theirs));
    if (theirs != fp) {
      char a[96], b[96];
      return SC_ERR(SC_ERR_MISMATCH,
                    "rank %d (%s) called %s where rank %d called %s (board call #%llu)", r,
                    sc_comm_host(comm, r), sc_board_describe(theirs, a, sizeof(a)), me,
                    sc_board_describe(fp, b, sizeof(b)), (unsigned long long)seq);
    }
  }
  size_t es = sc_dtype_size(op->dtype), n = op->count;
  switch (op->coll) {
  case SC_COLL_ALLREDUCE:
    if (n) board_fold(comm, op, op->recvbuf, 0, n);
    break;
  case SC_COLL_REDUCE:
    if (n && me == op->root) board_fold(comm, op, op->recvbuf, 0, n);
    break;
  case SC_COLL_REDUCE_SCATTER:
    if (n) board_fold(comm, op, op->recvbuf, (size_t)me * n, n);
    break;
  case SC_COLL_BROADCAST:
    /* Off the root sendbuf means nothing; at the root in place is a no-op. */
    if (n && (me != op->root || op->recvbuf != op->sendbuf))
      memcpy(op->recvbuf, ex->board_parts[op->root], n * es);
    break;
  case SC_COLL_ALLGATHER:
    for (int r = 0; r < P && n; r++)
      memcpy((uint8_t *)op->recvbuf + (size_t)r * n * es, ex->board_parts[r], n * es);
    break;
  case SC_COLL_GATHER:
    /* In place the root's own block is copied over itself from its post. */
    for (int r = 0; r < P && n && me == op->root; r++)
      memcpy((uint8_t *)op->recvbuf + (size_t)r * n * es, ex->board_parts[r], n * es);
    break;
  case SC_COLL_ALLTOALL:
    /* The parts are the posts' copies, so in place reads no overwritten block. */
    for (int r = 0; r < P && n; r++)
      memcpy((uint8_t *)op->recvbuf + (size_t)r * n * es,
             (const uint8_t *)ex->board_parts[r] + (size_t)me * n * es, n * es);
    break;
  case SC_COLL_SCATTER:
    if (n)
      memcpy(op->recvbuf, (const uint8_t *)ex->board_parts[op->root] + (size_t)me * n * es, n * es);
    break;
  default:
    break;
  }
  return SC_SUCCESS;
}
