/* SPDX-License-Identifier: BSD-3-Clause */
/* libsparsecoll: collective communication for distributed deep learning.
 *
 * This header is the reference for the API: the comment before each function
 * is its contract. docs/API.md is the guide to it by topic. Every name here
 * is fixed.
 *
 * Conventions; they hold for every function unless its comment says otherwise.
 *
 * Results. A function returns sc_result_t: SC_SUCCESS (0), or an error code.
 *   After an error, sc_last_error() on the same thread describes it.
 *
 * Argument errors. SC_ERR_INVALID_ARG means the call itself was wrong (a NULL
 *   pointer, an invalid dtype or op, a root outside [0, nranks), a size whose
 *   bytes overflow, host and device buffers in one call). It is decided on the
 *   calling rank before anything is queued: nothing was sent or changed, and
 *   the communicator stays usable. Peers that made the matching call go on
 *   waiting for this rank: they fail with SC_ERR_MISMATCH once it makes a
 *   call that differs from theirs, else by timeout.
 *
 * Failed communicators. A collective that fails while it runs (SC_ERR_REMOTE,
 *   SC_ERR_TIMEOUT, SC_ERR_MISMATCH, SC_ERR_SYSTEM, SC_ERR_NOMEM,
 *   SC_ERR_INTERNAL) fails its communicator: every later call on it fails at
 *   once with that first failure's code (SC_ERR_ABORTED after sc_comm_abort),
 *   and sc_comm_get_async_error reports it. What is left to do with it is
 *   sc_comm_destroy (or sc_comm_abort); sc_comm_rank, sc_comm_size and
 *   sc_comm_local still answer.
 *   The output buffers of a failed operation hold undefined contents.
 *
 * Collective or local. A collective must be called by every rank of the
 *   communicator, in the same order on every rank, with matching arguments
 *   (count, dtype, op, root: each function says which). Ranks that make
 *   different calls all fail with SC_ERR_MISMATCH, naming both calls: every
 *   message carries a print of its call (its number, collective, count,
 *   dtype, op and root), which the receiver checks, and the liveness watch
 *   compares the calls the ranks execute, so a mismatch is seen at once, or
 *   within a heartbeat period (SC_HEARTBEAT_MS) where no message flows
 *   between the two calls (with the watch off, SC_HEARTBEAT_MS=-1, only the
 *   messages' prints are checked). Calls that meet no other call's message
 *   and end before a heartbeat reports them (two ranks that both call
 *   themselves a broadcast's root) may still succeed with wrong results.
 *   SC_CHECK_MISMATCH=1 also compares every call across ranks before its
 *   data moves, at one small exchange per call. A local function
 *   communicates nothing.
 *
 * Time limits. No call waits forever: every wait for a peer, and a stream's
 *   wait for its own earlier work, is bounded by the communicator's
 *   no-progress limit SC_TIMEOUT_MS (default 300000 ms; SC_ERR_TIMEOUT when
 *   nothing moves for that long); a wait inside a call on a communicator is
 *   ended at once by sc_comm_abort of that communicator.
 *
 * Threads. Different communicators are independent. One communicator may be
 *   used from several threads at once: each call takes its place in the
 *   communicator's one queue when it is issued (operations run one at a
 *   time, in that order). Collectives issued by two threads at the same time
 *   are ordered by whichever got there first, which may differ between ranks:
 *   an application that issues collectives on one communicator from several
 *   threads must order them itself. sc_comm_abort may be called from any
 *   thread at any time; sc_comm_destroy from one thread, once no other
 *   thread uses the communicator. sc_last_error is per thread. A request
 *   belongs to the one thread that tests or waits for it.
 *
 * Buffers. Counts are in elements, not bytes. A collective's count may be 0,
 *   and its buffers may then be NULL. The library uses a caller's buffer only
 *   while the operation that got it is in flight, and keeps no pointer to it
 *   afterwards; it never frees memory it did not allocate. In flight means:
 *   - a blocking call: until it returns;
 *   - a non-blocking call (sc_i...): until sc_test reports done or sc_wait
 *     returns;
 *   - a stream form (..._on_stream): until the stream has passed the
 *     operation, i.e. until work enqueued on the stream after the call may
 *     run (an event recorded after the call tells);
 *   - a fusion tensor: from sc_fusion_ready or sc_fusion_skip until the
 *     sc_fusion_wait or sc_fusion_wait_all that delivers that round.
 *   Meanwhile an input buffer must stay valid and unchanged, and an output
 *   buffer valid and neither read nor written by the caller.
 *
 * Device buffers. With the library built with CUDA and a device visible
 *   (sc_cuda_available() == 1), the collectives, sc_topk, sc_sparse_allreduce,
 *   sc_gtopk_allreduce and the fusion calls take CUDA device pointers as well
 *   as host ones. The buffers one call uses must all be host memory or all
 *   memory of the calling thread's current device, else SC_ERR_INVALID_ARG
 *   naming them (pinned, registered and managed memory count as host memory).
 *   Every rank of one call passes the same kind. The blocking and
 *   non-blocking calls work on a stream of the library's own that does not
 *   wait for the caller's streams: their device input must be complete
 *   before the call (or use a stream form). The stream forms take device
 *   buffers only. Between ranks whose transport cannot move device memory,
 *   data is staged through pinned host memory in chunks of
 *   SC_STAGE_CHUNK_BYTES (the same on every rank). docs/CUDA.md has the
 *   details.
 *
 * Settings. SC_* environment variables change behaviour (`sc-info --env`
 *   lists them all with their defaults; the functions below name the ones
 *   that concern them). A communicator reads its settings when it is created
 *   and keeps them for its life; a malformed value fails the creation with
 *   SC_ERR_INVALID_ARG. */
#ifndef SPARSECOLL_H
#define SPARSECOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH */
#include "sparsecoll_version.h"

/* ---- Versions and errors ---- */

/* The version of the library linked at run time, MAJOR*10000 + MINOR*100 +
 * PATCH (SC_VERSION_* above: the header compiled against). Never fails.
 * Local; any thread. */
int sc_get_version(void);

typedef enum sc_result {
  SC_SUCCESS = 0,     /* done */
  SC_IN_PROGRESS,     /* only from sc_test: not finished yet */
  SC_ERR_INVALID_ARG, /* the caller passed something wrong; nothing was sent */
  SC_ERR_NOMEM,       /* a memory allocation failed */
  SC_ERR_SYSTEM,      /* a local OS / network call failed */
  SC_ERR_REMOTE,      /* a peer closed, died, or sent a malformed message */
  SC_ERR_TIMEOUT,     /* no progress within the communicator's timeout */
  SC_ERR_MISMATCH,    /* ranks called different collectives / counts / dtypes / roots */
  SC_ERR_ABORTED,     /* the communicator was aborted */
  SC_ERR_UNSUPPORTED, /* not built in or not available here (no CUDA, no UCX...) */
  SC_ERR_INTERNAL     /* a bug in the library: report it with sc_last_error's text */
} sc_result_t;

/* A short English phrase for r ("timed out"); "unknown result code" for a
 * value outside sc_result_t. A static string, never NULL. Never fails.
 * Local; any thread. */
const char *sc_strerror(sc_result_t r);
/* The detail of the last failure on the calling thread: the sc_strerror
 * phrase, what failed (for a collective: the rank, the operation and its
 * sequence number, the peer involved) and the library source file and line;
 * "" if this thread has had none. After sc_test or sc_wait returns an error,
 * it holds the detail recorded by the thread that ran the operation. The
 * buffer is thread-local: read it on the thread that got the error, before
 * that thread's next call into the library, which may replace it (a
 * successful call does not clear it). Never NULL, never fails. Local. */
const char *sc_last_error(void);

/* ---- Types ---- */

/* Element types. FLOAT16 is IEEE binary16; BFLOAT16 is the upper half of a
 * float32. Values outside the enum are refused with SC_ERR_INVALID_ARG. */
typedef enum sc_dtype {
  SC_INT8,
  SC_UINT8,
  SC_INT32,
  SC_UINT32,
  SC_INT64,
  SC_UINT64,
  SC_FLOAT16,
  SC_BFLOAT16,
  SC_FLOAT32,
  SC_FLOAT64
} sc_dtype_t;

/* Bytes of one element of t (1, 1, 4, 4, 8, 8, 2, 2, 4, 8 in enum order);
 * 0 for a value outside the enum. Never fails. Local; any thread. */
size_t sc_dtype_size(sc_dtype_t t);

/* Reduction operations, for every dtype. FLOAT16 / BFLOAT16 reduce by
 * converting to float32, reducing, rounding back (round-to-nearest-even).
 * SC_AVG divides the sum by nranks (integer types: truncation toward zero).
 * MIN/MAX propagate NaN. With one algorithm, rank count, count and
 * SC_CHUNK_BYTES, every rank gets bit-identical results, run after run;
 * different algorithms may round differently. */
typedef enum sc_redop { SC_SUM, SC_PROD, SC_MIN, SC_MAX, SC_AVG } sc_redop_t;

/* Root address + secret. Produced by sc_get_unique_id, shipped by the user
 * to every rank by any channel; anyone who has it can join the job. */
typedef struct sc_unique_id {
  char internal[128];
} sc_unique_id_t;

typedef struct sc_comm sc_comm_t;       /* opaque: a communicator */
typedef struct sc_request sc_request_t; /* opaque: one outstanding non-blocking operation */

/* ---- Communicators (no MPI needed) ---- */

/* Makes a unique id and starts, in this process, the bootstrap root service
 * the ranks check in with: a background thread listening on a free port of
 * the interface SC_SOCKET_IFNAME names (default: one the library picks),
 * that lives until it has handed the table of addresses to its children in
 * a binomial tree (each rank passes it on to its own) or the bootstrap's
 * limit passed (SC_BOOTSTRAP_TIMEOUT_MS, else SC_TIMEOUT_MS). Call it in
 * one process and ship *id to every rank before sc_comm_init_rank.
 * id: not NULL.
 * Errors: SC_ERR_INVALID_ARG (NULL id, a malformed SC_* setting);
 * SC_ERR_UNSUPPORTED (SC_TRANSPORT names a transport this build lacks);
 * SC_ERR_SYSTEM (no address to bind, no randomness, no thread).
 * Local; any thread. */
sc_result_t sc_get_unique_id(sc_unique_id_t *id);
/* Creates this process's member `rank` of a communicator of `nranks` ranks
 * and stores it in *comm (NULL first, the communicator on success). Blocks
 * until every rank checked in with the root of `id`, the ranks exchanged
 * addresses and connected; then starts the communicator's progress thread and
 * liveness watch. Reads the SC_* settings (SC_TRANSPORT, SC_TIMEOUT_MS,
 * SC_ALGO, SC_RS_ALGO, SC_AG_ALGO, SC_BCAST_ALGO, SC_GTOPK_ALGO, SC_TUNE,
 * SC_CHECK_MISMATCH, SC_HEARTBEAT_MS, ...). Where the ranks span hosts or run
 * over ucx/verbs (SC_TUNE=auto), or with SC_TUNE=measure, it also runs a
 * short calibration (a few barriers and all-gathers). If it fails in the
 * process hosting the root, it lingers up to 1 s so the root can tell the
 * other ranks why.
 * comm: not NULL. nranks in [1, 65536]; rank in [0, nranks), distinct per
 * process; id the same on every rank.
 * Errors: SC_ERR_INVALID_ARG (NULL comm, nranks or rank out of range, an
 * invalid id, ranks disagreeing on nranks or one rank checking in twice, a
 * malformed SC_* setting);
 * SC_ERR_UNSUPPORTED (SC_TRANSPORT names a transport this build lacks);
 * SC_ERR_TIMEOUT (not every rank checked in within SC_BOOTSTRAP_TIMEOUT_MS,
 * else SC_TIMEOUT_MS; or connection setup stalled for SC_TIMEOUT_MS);
 * SC_ERR_REMOTE (the root refused this rank, e.g. a wrong secret);
 * SC_ERR_SYSTEM; SC_ERR_NOMEM.
 * Collective over the nranks processes. Any thread. */
sc_result_t sc_comm_init_rank(sc_comm_t **comm, int nranks, sc_unique_id_t id, int rank);
/* sc_comm_init_rank with rank, size and root address from the environment;
 * the first source whose rank and size are both set wins:
 * SC_RANK/SC_WORLD_SIZE/SC_ROOT_ADDR (sc-run); else torchrun's RANK/WORLD_SIZE/
 * MASTER_ADDR/MASTER_PORT (SC_ROOT_ADDR, host:port, wins over MASTER_* when
 * set); else SLURM_PROCID/SLURM_NTASKS or
 * OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE with SC_ROOT_ADDR. Rank 0's
 * process starts the root service at the root address itself. The secret
 * comes from SC_AUTH_TOKEN (64 hex digits used as they are, anything else
 * hashed; unset: a fixed secret, i.e. no authentication).
 * comm: not NULL.
 * Errors: as sc_comm_init_rank; SC_ERR_INVALID_ARG also for no rank/size in
 * the environment, a malformed value, a rank not below the size, a missing
 * root address; rank 0 failing to bind the root port returns the bind's
 * error naming the variable the port came from.
 * Collective over the ranks. Any thread. */
sc_result_t sc_comm_init_env(sc_comm_t **comm);
/* Splits comm as MPI_Comm_split: ranks with the same non-negative color form
 * a new communicator, ordered by key, ties by rank in comm; a negative color
 * takes part and gets *newcomm = NULL. Runs two all-gathers on comm; the
 * lowest rank of each color hosts the new group's root. The new communicator
 * reads the SC_* settings again, has its own progress thread, and is
 * independent of comm (destroy each). Where it would calibrate (see
 * sc_comm_init_rank) it takes comm's calibration, if comm has one, instead
 * of measuring again.
 * comm, newcomm: not NULL (*newcomm is NULL first).
 * Errors: SC_ERR_INVALID_ARG (NULL argument); those of the all-gathers on
 * comm (which then fail comm); those of sc_get_unique_id and of creating the
 * new communicator (as sc_comm_init_rank).
 * Collective over comm (every rank, any color). */
sc_result_t sc_comm_split(sc_comm_t *comm, int color, int key, sc_comm_t **newcomm);
/* Finishes every operation still queued on comm (each bounded by the
 * timeout), waits (at most SC_TIMEOUT_MS) for streams still to pass their
 * waits on comm, then frees everything: threads, connections, shared memory,
 * device resources and the handle, which is invalid afterwards. Peers see a
 * clean goodbye, not a failure. Requests still outstanding complete; each
 * must still be freed by sc_test or sc_wait. Also the way to free a failed or
 * aborted communicator. Destroy fusion objects on comm first.
 * comm: not NULL. Returns SC_SUCCESS, or SC_ERR_INVALID_ARG for NULL.
 * Local (no agreement with the peers). One thread, once no other thread uses
 * comm. */
sc_result_t sc_comm_destroy(sc_comm_t *comm);
/* Stops comm at once: the operation in progress and every queued one fail
 * with SC_ERR_ABORTED, and so does every later call; streams waiting on comm
 * are released (their outputs undefined); connections close, so peers blocked
 * on this rank fail with SC_ERR_REMOTE; threads, connections and shared
 * memory are released. A small handle stays, so that late calls still answer
 * SC_ERR_ABORTED: free it with sc_comm_destroy once no thread uses it.
 * Calling it again (even from two threads at once) returns SC_SUCCESS and
 * does nothing.
 * comm: not NULL. Returns SC_SUCCESS, or SC_ERR_INVALID_ARG for NULL.
 * Local. Any thread, any time, even while other threads are blocked in calls
 * on comm (not after sc_comm_destroy). */
sc_result_t sc_comm_abort(sc_comm_t *comm);
/* Stores in *rank this process's rank in comm. Works on a failed or aborted
 * communicator too. comm, rank: not NULL (else SC_ERR_INVALID_ARG).
 * Local; any thread. */
sc_result_t sc_comm_rank(const sc_comm_t *comm, int *rank);
/* Stores in *size the number of ranks of comm. Works on a failed or aborted
 * communicator too. comm, size: not NULL (else SC_ERR_INVALID_ARG).
 * Local; any thread. */
sc_result_t sc_comm_size(const sc_comm_t *comm, int *size);
/* Stores SC_SUCCESS in *err while comm is healthy; the first failure's code
 * afterwards (SC_ERR_ABORTED after sc_comm_abort). Failures reach comm while
 * this rank is idle too (the liveness watch reports a peer that died or
 * failed), and failures of stream forms are reported only here and by later
 * calls. Does not block. comm, err: not NULL (else SC_ERR_INVALID_ARG).
 * Local; any thread. */
sc_result_t sc_comm_get_async_error(sc_comm_t *comm, sc_result_t *err);

/* ---- Topology ---- */
/* This rank's place among the ranks of its host ("host" = the transport's own notion of
   locality: ranks that can use shared memory with each other). Hosts are numbered in the
   order of their lowest rank; every rank sees the same map. Any output may be NULL (not
   wanted); a NULL comm is SC_ERR_INVALID_ARG. Computed at creation; works on a failed or
   aborted communicator too. Local (communicates nothing); any thread. */
sc_result_t sc_comm_local(const sc_comm_t *comm, int *local_rank, int *local_size, int *host_index,
                          int *nhosts);

/* ---- Dense collectives; sendbuf == recvbuf means in place ----
 *
 * All are collective over comm with the same count, dtype, op and root on
 * every rank. The algorithm is the cost model's choice for the size, unless
 * SC_ALGO (all-reduce), SC_RS_ALGO, SC_AG_ALGO or SC_BCAST_ALGO (broadcast
 * and reduce) forces one; collectives of at most SC_BOARD_BYTES per rank on
 * one host go through shared memory, unless an algorithm is forced; an
 * all-reduce on device buffers whose ranks are all on one host runs as
 * kernels over IPC (SC_DEVICE_ALLREDUCE, docs/CUDA.md). Any dtype; any op.
 *
 * Blocking forms return when this rank's part is done and its output holds
 * the result; they run on the calling thread when nothing else is queued on
 * comm, else they queue and wait. The sc_i... forms check their arguments,
 * queue the operation and return at once with *req set to a new request
 * (NULL on failure, when nothing was queued); complete it with sc_test or
 * sc_wait; the progress thread runs it in queue order.
 *
 * Errors at the call: SC_ERR_INVALID_ARG (NULL comm or req, invalid dtype or
 * op, root outside [0, nranks), a NULL buffer with a non-zero count (except
 * where a buffer is not used, as noted), a count whose bytes overflow, host
 * and device buffers mixed or memory of another device, comm being
 * destroyed); comm's first failure's code (SC_ERR_ABORTED once aborted);
 * SC_ERR_NOMEM. While running (returned by the blocking form, or by the
 * request): SC_ERR_REMOTE, SC_ERR_TIMEOUT, SC_ERR_MISMATCH (the ranks'
 * calls differ), SC_ERR_ABORTED, SC_ERR_SYSTEM, SC_ERR_NOMEM,
 * SC_ERR_INTERNAL; each fails comm.
 *
 * Any thread (see Threads); buffers as in Buffers. */

/* recvbuf (count elements) = the element-wise op over every rank's sendbuf
 * (count elements), on every rank. In place: sendbuf == recvbuf. */
sc_result_t sc_allreduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         sc_redop_t op, sc_comm_t *comm);
/* sendbuf holds nranks*recvcount elements; rank r receives block r.
 * In place, either convention: recvbuf == sendbuf (the result lands in the
 * first recvcount elements) or NCCL's recvbuf == sendbuf + rank*recvcount;
 * other parts of sendbuf may then be overwritten. */
sc_result_t sc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                              sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm);
/* recvbuf holds nranks*sendcount elements, rank r's block at r*sendcount.
 * In place, either convention: NCCL's sendbuf == recvbuf + rank*sendcount, or
 * sendbuf == recvbuf (this rank's block in the first sendcount elements). */
sc_result_t sc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, sc_dtype_t dtype,
                         sc_comm_t *comm);
/* Copies count elements of sendbuf on rank root into recvbuf on every rank,
 * the root included. sendbuf is read on the root only (NULL allowed
 * elsewhere). In place on the root: sendbuf == recvbuf. */
sc_result_t sc_broadcast(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         int root, sc_comm_t *comm);
/* As sc_allreduce, but only rank root receives the result. recvbuf is
 * written on the root only (NULL allowed elsewhere). In place on the root:
 * sendbuf == recvbuf. */
sc_result_t sc_reduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                      sc_redop_t op, int root, sc_comm_t *comm);
/* Returns on a rank only after every rank has entered the barrier. */
sc_result_t sc_barrier(sc_comm_t *comm);

/* Non-blocking sc_allreduce: req not NULL; the request completes as the
 * blocking form returns. */
sc_result_t sc_iallreduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                          sc_redop_t op, sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_reduce_scatter: req not NULL. */
sc_result_t sc_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                               sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                               sc_request_t **req);
/* Non-blocking sc_allgather: req not NULL. */
sc_result_t sc_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, sc_dtype_t dtype,
                          sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_broadcast: req not NULL. */
sc_result_t sc_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                          int root, sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_reduce: req not NULL. */
sc_result_t sc_ireduce(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                       sc_redop_t op, int root, sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_barrier: req not NULL; completes once every rank entered. */
sc_result_t sc_ibarrier(sc_comm_t *comm, sc_request_t **req);

/* ---- All-to-all, gather, scatter, uneven all-gather ----
 *
 * Collective over comm, in the communicator's one order like the collectives
 * above, with the same forms (blocking, sc_i... with a request, and with CUDA
 * an ..._on_stream form), the same errors at the call and while running, the
 * same threads and buffer rules. Any dtype; counts in elements. Every rank
 * passes the same count, dtype and root (for the v forms: counts that agree,
 * as each function says). The algorithm is the cost model's choice unless
 * SC_A2A_ALGO (all-to-all: pairwise, bruck, hier) or SC_GATHER_ALGO (gather
 * and scatter: binomial, linear) or SC_AGV_ALGO (ring, direct) forces one. */

/* sendbuf holds nranks blocks of count elements, block j for rank j; recvbuf
 * receives nranks blocks, block i from rank i. In place: sendbuf == recvbuf
 * (the library then holds one block per peer in flight at most). */
sc_result_t sc_alltoall(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                        sc_comm_t *comm);
/* All-to-all with a count per pair: sendcounts[j] elements at sendbuf +
 * sdispls[j] go to rank j; recvcounts[i] elements from rank i land at recvbuf +
 * rdispls[i]. Each array holds nranks entries (in elements); zero counts are
 * allowed, blocks may be in any order; receive blocks that overlap are
 * SC_ERR_INVALID_ARG.
 * sendcounts[j] on rank i must equal recvcounts[i] on rank j: otherwise the
 * receiving rank fails with SC_ERR_MISMATCH naming the pair and both counts
 * (with SC_CHECK_MISMATCH=1, checked before any data moves). The sparse form
 * (SC_A2AV_ALGO=sparse; auto where the pairwise exchange's connection to
 * every peer would not fit the job's descriptor limit) sends nothing for an
 * empty block and checks the counts first with one all-reduce: on a
 * difference every rank fails with SC_ERR_MISMATCH, the pair's ranks naming
 * it. The hierarchical form (SC_A2AV_ALGO=hier; auto on several hosts of
 * the same number of ranks, more than one each, where the cost model prices
 * it within 1.10 of the pairwise exchange at every size: docs/ALGORITHMS.md)
 * first exchanges counts inside each host, then sends one message per other
 * host. No in place:
 * sendbuf and recvbuf must not overlap (SC_ERR_INVALID_ARG). The arrays are
 * read during the call (copied by the sc_i and stream forms: they may be
 * reused once the call returns). */
sc_result_t sc_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                         void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                         sc_dtype_t dtype, sc_comm_t *comm);
/* Rank root receives every rank's count elements of sendbuf into recvbuf,
 * rank i's at i*count (nranks*count elements, root only: NULL allowed
 * elsewhere). In place on the root: sendbuf == recvbuf + root*count. */
sc_result_t sc_gather(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype, int root,
                      sc_comm_t *comm);
/* Rank root's sendbuf holds nranks blocks of count elements (root only: NULL
 * allowed elsewhere); rank i receives block i into recvbuf (count elements).
 * In place on the root: recvbuf == sendbuf + root*count. */
sc_result_t sc_scatter(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype, int root,
                       sc_comm_t *comm);
/* All-gather with a count per rank (FSDP's uneven shards): rank i's sendcount
 * elements land at recvbuf + displs[i] on every rank. recvcounts and displs
 * hold nranks entries, the same on every rank (SC_ERR_MISMATCH otherwise);
 * sendcount must equal recvcounts[rank] (SC_ERR_INVALID_ARG); blocks must not
 * overlap (SC_ERR_INVALID_ARG). In place: sendbuf == recvbuf + displs[rank]. The arrays are copied
 * by the sc_i and stream forms. */
sc_result_t sc_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                          const size_t *recvcounts, const size_t *displs, sc_dtype_t dtype,
                          sc_comm_t *comm);
/* Non-blocking sc_alltoall: req not NULL. */
sc_result_t sc_ialltoall(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                         sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_alltoallv: req not NULL; the count arrays are copied. */
sc_result_t sc_ialltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                          void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                          sc_dtype_t dtype, sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_gather: req not NULL. */
sc_result_t sc_igather(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype, int root,
                       sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_scatter: req not NULL. */
sc_result_t sc_iscatter(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                        int root, sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_allgatherv: req not NULL; the count arrays are copied. */
sc_result_t sc_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                           const size_t *recvcounts, const size_t *displs, sc_dtype_t dtype,
                           sc_comm_t *comm, sc_request_t **req);

/* ---- Point-to-point ---- */

/* Point-to-point messages go over a connection of their own (SC_P2P=1, the
 * default; with SC_P2P=0 every call below fails with SC_ERR_UNSUPPORTED) and
 * take no part in the collective sequence: a send or receive may be issued
 * between two collectives on one rank only, and completes independently of
 * the collectives queued around it. They are local calls in that sense (no
 * other rank must call anything collective), but a send completes only when
 * the peer's lane has taken it (small messages: handed to the transport;
 * above 64 KiB: once the peer posted the matching receive) and a receive
 * when its message is in.
 *
 * Sends from one rank to one peer with one tag are received in the order
 * they were sent (MPI's non-overtaking rule); messages of different tags or
 * peers may be received in any order. The receive's count and dtype must
 * equal the send's: otherwise the receive fails with SC_ERR_MISMATCH naming
 * both (the message is consumed and dropped; the sender completes normally).
 * peer may be the calling rank (a local copy once both sides are posted).
 * Failures here do not fail the communicator: a receive that saw a mismatch
 * leaves the pair usable; a peer found dead (SC_ERR_REMOTE naming it) fails
 * only the operations with that peer, as does SC_ERR_NOMEM when the messages
 * from it that no receive has taken would pass SC_P2P_UNEXPECTED_BYTES. A
 * wait is bounded by SC_TIMEOUT_MS (SC_ERR_TIMEOUT) and ended by
 * sc_comm_abort (SC_ERR_ABORTED). A sender may destroy its communicator
 * once its sends completed: the messages it sent are still received after
 * that; a receive nothing was sent for then fails with SC_ERR_REMOTE saying
 * the peer closed its lane.
 *
 * Sends count elements of dtype from buf to rank peer with tag and returns
 * when buf may be reused. count may be 0 (buf may then be NULL).
 * comm not NULL; buf not NULL when count > 0; dtype valid; the count's bytes
 * within the address space; peer in [0, nranks); tag >= 0: else
 * SC_ERR_INVALID_ARG. Errors also: SC_ERR_UNSUPPORTED (SC_P2P=0),
 * SC_ERR_REMOTE (the peer failed), SC_ERR_NOMEM (see above), SC_ERR_TIMEOUT, SC_ERR_ABORTED, comm's
 * first failure's code. buf may be device memory (CUDA, of the calling
 * thread's current device), as for the collectives: it is staged through
 * host memory the call allocates (a send copies buf at the call, a receive
 * copies into buf before it completes); without CUDA a device pointer is
 * taken for host memory as the collectives take it. Inside sc_group_start/sc_group_end it only
 * checks its arguments and queues: the send starts at sc_group_end, and buf is in flight until
 * then. Any thread. */
sc_result_t sc_send(const void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                    sc_comm_t *comm);
/* Receives count elements of dtype from rank peer with tag into buf, the
 * first message from peer with that tag not yet received. Arguments, errors
 * and groups as sc_send's; also SC_ERR_MISMATCH when the message's count or
 * dtype differ (buf unchanged). Any thread. */
sc_result_t sc_recv(void *buf, size_t count, sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm);
/* Non-blocking sc_send: starts the send at once (also inside a group) and
 * returns its request in *req (req not NULL; *req NULL on failure); buf is in
 * flight until sc_test or sc_wait report it done, which also report the
 * send's failure. Any thread; the request belongs to the caller. */
sc_result_t sc_isend(const void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                     sc_comm_t *comm, sc_request_t **req);
/* Non-blocking sc_recv: posts the receive at once (also inside a group), its
 * place in the order of this thread's receives from peer fixed now; *req and
 * buf as for sc_isend. Any thread. */
sc_result_t sc_irecv(void *buf, size_t count, sc_dtype_t dtype, int peer, int tag, sc_comm_t *comm,
                     sc_request_t **req);
/* Opens a group on the calling thread (NCCL's ncclGroupStart): until the
 * matching sc_group_end, the blocking sc_send and sc_recv, their stream
 * forms and the blocking dense collectives only check their arguments and
 * queue (a collective is queued on its communicator in call order). Groups nest: only the
 * outermost sc_group_end starts anything. Never fails (SC_ERR_INVALID_ARG past
 * INT32_MAX levels). Local; per thread. */
sc_result_t sc_group_start(void);
/* Closes the calling thread's innermost group; the outermost one starts
 * every queued call together and returns when all have completed (stream
 * forms: when they are enqueued on their stream), so that a
 * ring exchange or an all-to-all written as sends and receives cannot
 * deadlock whatever order the calls were made in. Returns the first failure
 * (by call order) with sc_last_error naming the call ("call K of N, sc_recv
 * from rank 3 ..."); the other calls still ran to their end. Errors:
 * SC_ERR_INVALID_ARG without an open group; any code of the queued calls.
 * Per thread. */
sc_result_t sc_group_end(void);

/* ---- Algorithm queries ---- */

/* The all-reduce algorithm SC_ALGO=auto (the cost model) uses on this
 * communicator for count elements of dtype: "ring", "tree", "rd",
 * "rabenseifner" or "hier" (a static string). Communicates nothing. A forced
 * SC_ALGO is reported, except a forced "hier" with no hierarchy (one host, or
 * one rank per host), which reports the flat algorithm that runs instead;
 * one rank: "ring". Every rank gets the same answer. It names the schedule,
 * not the shared-memory path of SC_BOARD_BYTES. The answer is cached, with
 * the one the collectives use.
 * comm, name: not NULL; dtype valid (else SC_ERR_INVALID_ARG). Errors also:
 * comm's first failure's code, SC_ERR_ABORTED.
 * Local; any thread. */
sc_result_t sc_allreduce_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype, const char **name);
/* The same for the reduce-scatter ("ring", "recursive-halving" or "hier") and the
 * all-gather ("ring", "recursive-doubling" or "hier"), count elements per rank's block,
 * under SC_RS_ALGO / SC_AG_ALGO (a forced one is reported). Same arguments,
 * errors, locality and threads as sc_allreduce_algo. */
sc_result_t sc_reduce_scatter_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype,
                                   const char **name);
/* The all-gather's algorithm: see sc_reduce_scatter_algo. */
sc_result_t sc_allgather_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype, const char **name);

/* The all-to-all's algorithm for count elements per block: "pairwise",
 * "bruck" or "hier", under SC_A2A_ALGO (a forced one is reported; a forced
 * "hier" with no hierarchy reports the flat one that runs). Same arguments,
 * errors, locality and threads as sc_allreduce_algo. */
sc_result_t sc_alltoall_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype, const char **name);

/* ---- Requests ---- */

/* Does not block. Not finished: *done = 0, returns SC_IN_PROGRESS, *req
 * stays valid. Finished: *done = 1, *req is freed and set NULL, and the
 * operation's result is returned (its detail in sc_last_error).
 * req, *req, done: not NULL (else SC_ERR_INVALID_ARG).
 * Local. The request's one thread only. Every request must be completed by
 * exactly one sc_test that reports done or one sc_wait, even after its
 * communicator failed, was aborted or destroyed; otherwise it leaks. */
sc_result_t sc_test(sc_request_t **req, int *done);
/* Blocks until the operation finishes (bounded: the progress thread ends
 * every operation within SC_TIMEOUT_MS of no progress, an abort at once);
 * frees *req and sets it NULL; returns the operation's result (its detail in
 * sc_last_error). req, *req: not NULL (else SC_ERR_INVALID_ARG).
 * Local. The request's one thread only. */
sc_result_t sc_wait(sc_request_t **req);

/* ---- Sparse collectives (gTop-k family) ----
 *
 * Values are SC_FLOAT16, SC_BFLOAT16, SC_FLOAT32 or SC_FLOAT64; indices are
 * uint32_t. A sparse vector is two arrays: indices ascending without
 * duplicates, values in the same order. The collective calls here are
 * blocking (sc_gtopk_allreduce also has a stream form) and take their turn in
 * the communicator's queue like every other operation. */

/* Selection methods of sc_topk, sc_gtopk_allreduce and the fusion's sparse
 * buckets: EXACT, the top-k by magnitude; GAUSSIAN, a faster approximation;
 * MSTopK, exactly k entries by threshold bisection (sc_topk states all three). */
typedef enum sc_select { SC_SELECT_EXACT, SC_SELECT_GAUSSIAN, SC_SELECT_MSTOPK } sc_select_t;

/* Top-k by magnitude of a dense vector of float16, bfloat16, float32 or
 * float64 (other dtypes: SC_ERR_INVALID_ARG); n <= UINT32_MAX. Writes the
 * selected positions to indices, sorted ascending, their values (copied bit
 * for bit) to values, and their number to *nnz. NaN is never selected;
 * -0.0 ties with +0.0; infinities are selected like any value. Let m = the
 * number of non-NaN entries.
 * EXACT: the min(k, m) entries of largest |v|; ties broken toward the lower
 * index.
 * GAUSSIAN: a threshold estimated from a strided sample, then every entry
 * with |v| above it; at most 4 counting passes try to land the count in
 * [ceil(k/2), 2k], and when none does, the EXACT answer is returned. So:
 * with m >= k, between ceil(k/2) and 2k entries, on any data (constant,
 * heavy ties, spikes included); with m < k, between min(m, ceil(k/2)) and m.
 * Every selected magnitude is >= every unselected non-NaN one.
 * MSTOPK (Shi et al., MLSys 2021): exactly min(k, m) entries, no sort. A
 * threshold is bisected SC_MSTOPK_ITERS times (default 20) between the mean
 * and the largest finite magnitude, counting the entries with |v| >= it; hi
 * is the lowest threshold tried whose count is <= k, lo the highest whose
 * count is > k. Every entry with |v| >= hi is selected, then the band
 * lo <= |v| < hi fills up to min(k, m), lowest index first. So every
 * selected magnitude is >= every unselected one outside that band.
 * k = 0 (or n = 0): *nnz = 0, and dense/indices/values may be NULL. k >= n:
 * every non-NaN entry, with every method.
 * indices and values must each hold 2*min(k, n) entries (GAUSSIAN may
 * return up to 2k, and the selection may use them as workspace).
 * A device vector (indices and values device memory too) is selected on the
 * device; *nnz is host memory, written when the call returns.
 * Errors: SC_ERR_INVALID_ARG (nnz NULL, dtype, unknown method, n >
 * UINT32_MAX, dense/indices/values NULL with n and k non-zero, mixed memory
 * kinds); SC_ERR_NOMEM; on a device, the device runtime's errors
 * (SC_ERR_TIMEOUT after SC_TIMEOUT_MS).
 * Local (no communicator). Any thread; concurrent calls on distinct output
 * buffers are safe. */
sc_result_t sc_topk(const void *dense, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                    uint32_t *indices, void *values, size_t *nnz);

/* Algorithms of sc_sparse_allreduce. A gTop-k merge keeps the k largest
 * magnitudes of the union of two sets (values at a shared index added). */
typedef enum sc_sparse_algo {
  SC_SPARSE_GTOPK,      /* butterfly merge, no broadcast */
  SC_SPARSE_GTOPK_TREE, /* the papers' tree reduce + broadcast */
  SC_SPARSE_ALLGATHER,  /* TopK-SGD baseline */
  SC_SPARSE_GTOPK_HIER, /* merge inside each host, butterfly among hosts, broadcast in the host */
  SC_SPARSE_HITOPK      /* sc_gtopk_allreduce only: HiTopKComm (see sc_gtopk_allreduce) */
} sc_sparse_algo_t;

/* Sparse all-reduce. Each rank passes a sparse vector of nnz <= k entries
 * over a dense length dense_len (indices < dense_len, ascending, unique).
 * The result, sorted by index and bit-identical on every rank, goes to
 * out_indices/out_values, its length to *out_nnz:
 * GTOPK, GTOPK_TREE, GTOPK_HIER: at most k entries, the gTop-k of the sum
 * (pairwise top-k merges, an approximation of the top k of the exact sum);
 * outputs hold k entries. GTOPK_HIER on one host runs the tree.
 * ALLGATHER: the exact sum over the union of all entries; outputs hold
 * nranks*k entries.
 * HITOPK is an algorithm of sc_gtopk_allreduce only (it starts from dense
 * gradients): here it is refused with SC_ERR_INVALID_ARG.
 * Every set received from a peer is checked against k and dense_len before
 * use: a peer announcing more than k entries fails the call with
 * SC_ERR_REMOTE.
 * k (the bound on every rank's nnz and on the result), dense_len, dtype and
 * algo: the same on every rank; nnz may differ.
 * dense_len <= 2^32. indices/values may be NULL when nnz = 0,
 * out_indices/out_values when the output capacity is 0. Host or device
 * buffers (a device call stages the sets through pinned host memory).
 * Errors: SC_ERR_INVALID_ARG (NULL comm or out_nnz, dtype, unknown algo,
 * dense_len > 2^32, nnz > k, unsorted / duplicate / out-of-range indices,
 * NULL arrays where entries are expected, k overflowing the buffer sizes);
 * otherwise as the dense collectives.
 * Collective over comm; any thread; buffers as a blocking call. */
sc_result_t sc_sparse_allreduce(const uint32_t *indices, const void *values, size_t nnz,
                                size_t dense_len, size_t k, sc_dtype_t dtype, sc_sparse_algo_t algo,
                                uint32_t *out_indices, void *out_values, size_t *out_nnz,
                                sc_comm_t *comm);

/* sc_sparse_algo_name: the name of a sparse all-reduce algorithm, as
 * SC_GTOPK_ALGO, sc_gtopk_perf -a, the logs and the Python package spell it:
 * "gtopk", "tree", "allgather", "hier" or "hitopk" for SC_SPARSE_GTOPK,
 * SC_SPARSE_GTOPK_TREE, SC_SPARSE_ALLGATHER, SC_SPARSE_GTOPK_HIER and
 * SC_SPARSE_HITOPK.
 * *name is set to a static string, valid for the life of the process; do
 * not free it.
 * Errors: SC_ERR_INVALID_ARG when algo is no value of sc_sparse_algo_t or
 * name is NULL (*name is then left as it was).
 * Not collective; thread-safe. */
sc_result_t sc_sparse_algo_name(sc_sparse_algo_t algo, const char **name);

typedef struct sc_ef sc_ef_t;
/* Makes in *ef an error-feedback state (sc_ef_t, opaque) for
 * sc_gtopk_allreduce: a residual of n elements of a float dtype, all zero,
 * plus work space kept between steps. One per gradient tensor. Its residual
 * lives where the gradients of its first use live (host or device memory);
 * gradients of the other kind are refused with SC_ERR_INVALID_ARG.
 * ef: not NULL (*ef is NULL first). n <= UINT32_MAX.
 * Errors: SC_ERR_INVALID_ARG (NULL ef, a non-float dtype, n > UINT32_MAX);
 * SC_ERR_NOMEM.
 * Local; any thread. A state must not be used by two calls at once. */
sc_result_t sc_ef_create(size_t n, sc_dtype_t dtype, sc_ef_t **ef);
/* Frees ef (NULL allowed). Always SC_SUCCESS. Local; not while a call
 * (a stream form included, until its stream passed it) uses ef. */
sc_result_t sc_ef_destroy(sc_ef_t *ef);
/* One gTop-k S-SGD step on the dense gradient grad (n elements of a float
 * dtype), in place:
 * acc = grad + residual (just grad when ef is NULL); the local top-k of acc
 * by method (a GAUSSIAN overshoot is cut to its exact top k); the sparse
 * all-reduce of that selection; grad = the global result / nranks at its
 * indices, zero elsewhere; the residual keeps what was not sent, plus every
 * sent entry that did not survive the merges. The sparse algorithm is
 * SC_GTOPK_ALGO's (gtopk, tree, hier, hitopk) when set, else the butterfly
 * on one host and the cost model's pick where the ranks span hosts (the
 * same on every rank).
 * hitopk (HiTopKComm; H hosts of L ranks each, local rank l): acc = grad +
 * residual; a dense reduce-scatter (SUM) of acc inside each host gives rank
 * l shard l of its host's sum (shards of ceil(n/L) elements, the last ones
 * shorter or empty); each rank selects the top ceil(k/L) entries (at most
 * its shard's length) of its shard by method; the H ranks of local rank l
 * all-gather their selections and sum them in host order (float64 in
 * float64, float32 arithmetic otherwise); a dense all-gather inside each host
 * assembles the n elements; grad = that sum / nranks, zero off the union of
 * the selections. Error feedback: after the step a rank's residual is zero
 * except on its own shard, where it holds its host-sum shard minus what it
 * selected (the host's mass of the other shards moved to the other local
 * ranks), so the sum over ranks of residual + nranks * grad equals the sum
 * of every acc, up to rounding. Needs the same number of ranks on every host:
 * forced on another layout it fails with SC_ERR_UNSUPPORTED (the cost model
 * never picks it there). On a device gradient it runs on host copies of the
 * gradient and of the device residual (the device context's pinned staging,
 * 2n elements), copied back after the step, so the bits are the host step's;
 * the cost model prices no such copies and picks it for host gradients only
 * (SC_GTOPK_ALGO=hitopk forces it for both). Its first call on a communicator
 * makes two sub-communicators (sc_comm_split: the host, and the ranks of
 * equal local rank), kept until sc_comm_destroy.
 * k: entries to select; k > n counts as n. n, k and dtype: the same on
 * every rank; method may differ. ef: NULL (no error feedback) or a state for
 * exactly n elements of dtype, of the same memory kind as grad. grad: NULL
 * only with n = 0; host or device memory.
 * On failure grad is unchanged and nothing is lost: the residual holds acc
 * (grad + the old residual), or its old value when the communicator had
 * failed before the step.
 * Errors: SC_ERR_INVALID_ARG (NULL comm, non-float dtype, unknown method,
 * NULL grad with n > 0, n > UINT32_MAX, ef for another n, dtype or memory kind);
 * SC_ERR_NOMEM; those of sc_sparse_allreduce.
 * Collective over comm; any thread, but one call at a time per ef; grad as
 * a blocking call's buffers. */
sc_result_t sc_gtopk_allreduce(void *grad, size_t n, sc_dtype_t dtype, size_t k, sc_select_t method,
                               sc_ef_t *ef, sc_comm_t *comm);

/* ---- Symmetric matrices and factor placement (distributed K-FAC) ----
 *
 * K-FAC all-reduces each layer's two symmetric Kronecker factors every step
 * and broadcasts their inverses from an owner. These calls move only the
 * upper triangle of a d x d row-major matrix, d(d+1)/2 elements instead of
 * d^2: the entries (i, j) with j >= i of sendbuf are packed, the dense
 * collective of the same name runs on the packed entries (its algorithm and
 * errors), and recvbuf receives the full symmetric matrix (both halves). The
 * lower triangle of sendbuf is not read. Any dtype; any op; host or device
 * buffers (one kind per call; on device buffers the packing and unpacking
 * run as kernels and the input must be complete before the call, as for
 * every blocking call). In place: sendbuf == recvbuf.
 *
 * Errors at the call: SC_ERR_INVALID_ARG (NULL comm, invalid dtype or op,
 * root outside [0, nranks), a NULL buffer with d > 0 where the call uses it,
 * d x d elements that overflow, host and device buffers mixed);
 * SC_ERR_NOMEM; then those of sc_allreduce, sc_reduce or sc_broadcast.
 * Collective over comm with the same d, dtype, op and root on every rank;
 * blocking; any thread. Each call holds the communicator's packing scratch
 * (d(d+1)/2 elements of host or device memory, kept and grown until
 * sc_comm_destroy), so symmetric calls on one communicator run one at a time. */

/* recvbuf = the element-wise op over every rank's symmetric sendbuf. */
sc_result_t sc_allreduce_sym(const void *sendbuf, void *recvbuf, size_t d, sc_dtype_t dtype,
                             sc_redop_t op, sc_comm_t *comm);
/* As sc_allreduce_sym, the result on rank root only (recvbuf NULL allowed
 * elsewhere). */
sc_result_t sc_reduce_sym(const void *sendbuf, void *recvbuf, size_t d, sc_dtype_t dtype,
                          sc_redop_t op, int root, sc_comm_t *comm);
/* recvbuf on every rank = root's symmetric sendbuf (sendbuf NULL allowed
 * off the root). */
sc_result_t sc_broadcast_sym(const void *sendbuf, void *recvbuf, size_t d, sc_dtype_t dtype,
                             int root, sc_comm_t *comm);

/* How sc_place_factors places factors. */
typedef enum sc_place { SC_PLACE_LPT, SC_PLACE_BLOCK } sc_place_t;

/* Which rank does the per-factor work (an inversion, cost d^3) of each of n
 * factors of dims[i] x dims[i]: owner[i] in [0, nranks), or -1 for a factor
 * with dims[i] < local_below, which every rank computes itself (nothing
 * travels). SC_PLACE_LPT: largest first onto the least loaded rank (equal
 * costs in index order, equal loads to the lowest rank), within 4/3 of the
 * best assignment. SC_PLACE_BLOCK: each rank a contiguous run of factors in
 * index order (rank 0 the first run), the runs minimising the largest load.
 * Not collective: a pure function, the same owners on every rank for the same
 * arguments; any thread.
 * Errors: SC_ERR_INVALID_ARG (n < 0, nranks < 1, an unknown how, dims or
 * owner NULL with n > 0), SC_ERR_NOMEM. */
sc_result_t sc_place_factors(const size_t *dims, int n, int nranks, sc_place_t how,
                             size_t local_below, int *owner);

/* ---- Low-rank compression (PowerSGD, ACP-SGD) ----
 *
 * A state compresses the all-reduce of one gradient matrix of rows x cols
 * elements (row-major; a conv weight viewed as out_channels x the rest) to
 * rank r = min(rank, rows, cols) factors: (rows + cols) r elements travel
 * per call instead of rows x cols. The first factor Q (cols x r) is drawn
 * from seed alone (splitmix64 -> Box-Muller), the same on every rank: create
 * every rank's state with the same arguments. float32 and float64 gradients
 * compute in their own type, float16 and bfloat16 in float32 (the residual
 * too); the factors travel as float32 (float64 for float64).
 *
 * With M = grad (+ the residual under error feedback) and N the
 * communicator's rank count, sc_lowrank_allreduce sets grad to a rank-r
 * estimate of the average over ranks of M:
 *   SC_LOWRANK_POWERSGD (Vogels et al., warm start): P = M Q; all-reduce P
 *     (sum); orthonormalize P; Q = M^T P; all-reduce Q; grad = P Q^T / N; Q
 *     is kept for the next call. Two dependent all-reduces per call. Without
 *     error feedback the first result is U U^T Mbar, U an orthonormal basis
 *     of the column space of Mbar Q (Mbar the average of the M's).
 *   SC_LOWRANK_ACPSGD: one all-reduce per call, alternating. Odd calls (the
 *     first, third, ...): P = M orth(Q), grad = (sum P) orth(Q)^T / N; even
 *     calls: Q = M^T orth(P), grad = orth(P) (sum Q)^T / N, where orth() of
 *     the previous call's reduced factor (the seed's Q on the first call) is
 *     the same on every rank.
 *   error_feedback != 0: after the call the residual holds M minus this
 *     rank's own contribution (its factor times the shared orthonormal one)
 *     and is added to the next call's grad.
 * orth() is modified Gram-Schmidt with re-orthogonalization; a column that
 * is zero or dependent on the earlier ones becomes zero (never NaN).
 * Every rank gets the same bits. */
typedef enum sc_lowrank_mode { SC_LOWRANK_POWERSGD, SC_LOWRANK_ACPSGD } sc_lowrank_mode_t;
typedef struct sc_lowrank sc_lowrank_t;

/* A state for rows x cols gradients of dtype (FLOAT16, BFLOAT16, FLOAT32,
 * FLOAT64) at rank `rank` (>= 1, capped at min(rows, cols); rows or cols 0
 * make every call a no-op). It owns r (rows + cols) factor elements, and
 * rows x cols elements of residual under error feedback or for a half type.
 * Errors: SC_ERR_INVALID_ARG (NULL lr, another dtype, rank < 1, an unknown
 * mode, a matrix that overflows the address space); SC_ERR_NOMEM.
 * Local; any thread. */
sc_result_t sc_lowrank_create(size_t rows, size_t cols, sc_dtype_t dtype, int rank,
                              sc_lowrank_mode_t mode, int error_feedback, uint64_t seed,
                              sc_lowrank_t **lr);
/* Frees the state (NULL: nothing). Never fails. Local. */
sc_result_t sc_lowrank_destroy(sc_lowrank_t *lr);
/* grad (rows x cols of the state's dtype, in place) := the rank-r estimate
 * above. grad is host or device memory; a device gradient is staged through
 * host memory (copied to the host, computed there, copied back; blocking).
 * On failure grad is unchanged; the state's factors, residual and ACP-SGD
 * parity are then unspecified (the communicator has failed: destroy both).
 * Errors: SC_ERR_INVALID_ARG (NULL lr or comm, NULL grad with rows x cols
 * > 0, device memory of another device); SC_ERR_NOMEM; those of sc_allreduce.
 * Collective over comm, every rank with a state of the same arguments and
 * the same number of earlier calls; blocking; any thread, one call at a
 * time per state. */
sc_result_t sc_lowrank_allreduce(void *grad, sc_lowrank_t *lr, sc_comm_t *comm);

/* ---- 1-bit compressed all-reduce (1-bit Adam, signSGD with majority) ----
 *
 * A state holds what one gradient buffer of n elements needs across calls on
 * a communicator of P ranks. The n elements are padded to a multiple of 8P
 * and cut into P equal chunks; rank j serves chunk j. Signs travel packed one
 * bit per element, most significant bit first; bit 1 is +1 (x >= 0, -0.0
 * included), bit 0 is -1 (x < 0, and NaN). Padding is never read, never
 * counted and never written. Arithmetic is in double whatever the dtype.
 *
 * SC_ONEBIT_SCALED (1-bit Adam's compressed all-reduce, error feedback on
 * both sides), per call on buf x:
 *   worker:  c = x + r_w; a = ||c||_2 / sqrt(n); r_w = c - a sign(c);
 *   phase 1: an all-to-all of bytes: chunk j's packed signs of c, and a, to
 *            rank j;
 *   server j: s = (1/P) sum_i a_i sign_i(chunk j) + r_s; b_j = ||s||_2 /
 *            sqrt(chunk j's real length); r_s = s - b_j sign(s);
 *   phase 2: an all-gather of bytes: every server's packed signs of s and b_j;
 *   x = b_j sign(s) on chunk j, bit-identical on every rank.
 *   About n/4 bytes sent per rank whatever P (n/8 per phase), plus 8P bytes
 *   of scales.
 * SC_ONEBIT_MAJORITY (signSGD with majority vote): phase 1 sends sign(x)
 *   (x >= 0 votes +1) with the same shape; server j counts the votes; phase 2
 *   all-gathers two bit planes (positive, negative); x = sign(sum over ranks
 *   of sign(x)) in {-1, 0, +1} (0 on a tie, which needs an even P). No
 *   residual; about 3n/8 bytes per rank.
 *
 * The residuals live in the state in host memory (n + n/P doubles). Device
 * buffers are accepted and staged through host memory of the state's (a copy
 * in, the computation on the host, a copy out): the input must be complete
 * before the call, as for every blocking call. */
typedef enum sc_onebit_mode { SC_ONEBIT_SCALED, SC_ONEBIT_MAJORITY } sc_onebit_mode_t;
typedef struct sc_onebit sc_onebit_t;

/* Makes *ob, a state for n elements of dtype (SC_FLOAT32, SC_FLOAT64,
 * SC_FLOAT16, SC_BFLOAT16) in `mode`, for comm's rank count; residuals
 * start at zero. Nothing travels.
 * Errors: SC_ERR_INVALID_ARG (NULL ob or comm, a non-float dtype, an unknown
 * mode, n too large to pad), SC_ERR_NOMEM; *ob is NULL on failure.
 * Local; any thread. */
sc_result_t sc_onebit_create(size_t n, sc_dtype_t dtype, sc_onebit_mode_t mode, sc_comm_t *comm,
                             sc_onebit_t **ob);
/* buf (n elements of the state's dtype, host or device memory) := the 1-bit
 * compressed all-reduce of every rank's buf, in place (see above); updates
 * the residuals. n == 0 returns at once.
 * Errors: SC_ERR_INVALID_ARG (NULL ob or comm, NULL buf with n > 0, comm
 * with a rank count other than the state's, buffers of another device);
 * those of sc_alltoall and sc_allgather. After a failure the residuals are
 * unspecified: destroy the state.
 * Collective over comm: every rank calls with a state of the same n, dtype
 * and mode; one call at a time per state; any thread. */
sc_result_t sc_onebit_allreduce(void *buf, sc_onebit_t *ob, sc_comm_t *comm);
/* Frees ob (NULL: nothing). Local; not while a call uses ob. */
sc_result_t sc_onebit_destroy(sc_onebit_t *ob);
/* ---- Compressed all-reduce: half-precision wire ----
 *
 * recvbuf (count float32) = the element-wise op over every rank's sendbuf
 * (count float32), with every message in float16 or bfloat16 (wire), half the
 * bytes of sc_allreduce on float32, as torch's fp16_compress_hook but with
 * the reductions done in float32 inside the collective. It runs as a
 * reduce-scatter and an all-gather made of sc_alltoall and sc_allgather on
 * wire data (their algorithms and errors): each rank rounds its input to the
 * wire, the owner of each 1/nranks block widens the blocks it receives and
 * reduces them in float32 in rank order (its own input unrounded; SC_AVG
 * divides the float32 sum by nranks), rounds the result once to the wire,
 * and the all-gather gives every rank that wire result, widened to float32.
 * Each element thus goes through two roundings to the wire (the other ranks'
 * inputs, the result), so |result - exact| <= (nranks - 1) half-ulps of the
 * wire at the inputs' magnitude + one half-ulp at the result's + the float32
 * roundings. Every rank gets the same bits, run after run. float16 saturates
 * to inf beyond 65504 (bfloat16 has float32's range). Any op (SUM, PROD, MIN,
 * MAX, AVG); count 0 allowed; in place: sendbuf == recvbuf. Host or device
 * buffers (one kind per call); device buffers are staged through host memory
 * (the conversions run on the CPU).
 *
 * Errors at the call: SC_ERR_INVALID_ARG (NULL comm, dtype other than
 * SC_FLOAT32, wire other than SC_FLOAT16 or SC_BFLOAT16, invalid op, a NULL
 * buffer with count > 0, a count whose bytes overflow, host and device
 * buffers mixed); comm's first failure's code; SC_ERR_NOMEM; then those of
 * sc_alltoall and sc_allgather. Collective over comm with the same count, op
 * and wire on every rank; blocking (inside sc_group_start/sc_group_end too:
 * it runs when called, not at sc_group_end); any thread. Each call holds the
 * communicator's wire buffers (2 bytes per element, plus 4 per element of
 * host staging for device buffers, kept and grown until sc_comm_destroy), so
 * these calls on one communicator run one at a time. */
sc_result_t sc_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count,
                                    sc_dtype_t dtype, sc_redop_t op, sc_dtype_t wire,
                                    sc_comm_t *comm);

/* ---- Bucket fusion for frameworks ----
 *
 * A fusion object all-reduces a model's gradients during backward: the
 * framework registers its tensors once (sc_fusion_add_tensor, then the
 * collective sc_fusion_plan), then each iteration ("round") marks every
 * tensor ready (or skipped) as its gradient is computed and waits for the
 * averaged (SC_AVG) result. Tensors are grouped into buckets (one collective
 * each) by the policy; buckets launch strictly in plan order, so every rank
 * issues the same collectives in the same order whatever the order of its
 * own ready calls.
 * Threads: calls on one fusion object are serialised by its mutex, which is
 * not held while a call blocks on a collective: sc_fusion_ready may come from
 * a backward-hook thread while another thread waits. create, add_tensor, plan
 * and destroy must not run concurrently with other calls on the object.
 * The fusion's collectives take their place in the communicator's queue like
 * the application's: collectives the application issues on the same
 * communicator while a round is in flight must be in the same order relative
 * to the fusion's launches on every rank (SC_FUSE_P3 uses a communicator of
 * its own). Sticky failure: once a collective of a fusion object fails, every
 * later ready, skip or wait on it returns that code. */

typedef enum sc_fusion_policy {
  SC_FUSE_NONE,   /* WFBP: one all-reduce per tensor, launched when it is ready */
  SC_FUSE_SIZE,   /* buckets of at most bucket_bytes in ready order */
  SC_FUSE_MGWFBP, /* the optimal merge from the alpha-beta model and backward times */
  SC_FUSE_DEAR,   /* reduce-scatter during backward, all-gather before next forward */
  SC_FUSE_SINGLE, /* everything in one all-reduce after the last tensor is ready */
  SC_FUSE_P3      /* P3: slices of slice_bytes sent by priority (the next forward's order) */
} sc_fusion_policy_t;
/* With density > 0 every bucket is its own gTop-k step (own k, own error
 * feedback): NONE = LAGS (layer-wise), MGWFBP = OMGS (optimal merge under the
 * sparse cost model), SINGLE = single-model gTop-k, SIZE = size buckets;
 * DEAR and P3 refuse density > 0. */

/* What a bucket's gradients travel as (sc_fusion_config_t.compress). Every
 * compressed bucket runs on the fusion's worker thread as one blocking call
 * of the compressed collective, in plan order; the policies plan over the
 * compressed bytes (a bucket holds up to bucket_bytes of what travels).
 *   NONE      dense average (default; with density > 0: TOPK)
 *   TOPK      gTop-k with error feedback at `density` (sc_gtopk_allreduce)
 *   POWERSGD, ACPSGD
 *             each tensor registered with sc_fusion_add_matrix with both sides
 *             > 1 is reduced as sc_lowrank_allreduce of rank `lowrank` does (its
 *             own state, factors from `seed`, error feedback on), the factors of
 *             all the bucket's matrices summed in one all-reduce per round
 *             (ACP-SGD: one per step; PowerSGD: two), so a result may differ in
 *             its last bits from one call per matrix; the bucket's other
 *             tensors are averaged densely in one more
 *   FP16, BF16
 *             float32 buckets through sc_allreduce_compressed (half-precision
 *             messages, float32 sums), averaged; other dtypes densely
 *   ONEBIT    float32 buckets through sc_onebit_allreduce (scaled signs, worker
 *             and server residuals per bucket); other dtypes densely
 *   AUTO      per bucket the cheapest of dense, FP16 (float32 buckets), TOPK
 *             (with density > 0) and ACPSGD (buckets holding a matrix) under the
 *             plan's all-reduce model T(m) = alpha + beta m, each mode priced as
 *             the worker runs it (ACP-SGD: one all-reduce of the factors, one of
 *             the other tensors) plus its own work, measured at plan time on
 *             every rank at once, the slowest rank's figures taken by all, so
 *             every rank chooses the same; with a calibrated model (alpha_us
 *             and beta_us_per_byte 0) and host tensors on every rank, each
 *             candidate also runs for real on scratch copies of some of its
 *             float32 buckets (TOPK and ACPSGD on their smallest, median and
 *             largest, dense and FP16 on the smallest and median; the
 *             gradients are not touched), and each mode's modelled cost is
 *             corrected through its measured points (between two the line
 *             through both, outside them the ratio at the nearer one); this
 *             adds the trial's runs to sc_fusion_plan (0.3 s for ResNet-50's
 *             buckets on 8 ranks of 1 Gbit/s); buckets are planned over the
 *             dense bytes; the choices: sc_fusion_bucket_compress and, at
 *             SC_DEBUG=INFO, the trial's line and a line per bucket with the
 *             costs
 * Device tensors: TOPK buckets run the device sc_gtopk_allreduce in place;
 * the other compressed buckets are staged through one host buffer (the size
 * of the largest such bucket, allocated at sc_fusion_plan): the worker copies
 * the bucket there, runs the same call on it and copies the result back, so
 * every mode gives the host tensors' results bit for bit. */
typedef enum sc_compress {
  SC_COMPRESS_NONE,
  SC_COMPRESS_TOPK,
  SC_COMPRESS_POWERSGD,
  SC_COMPRESS_ACPSGD,
  SC_COMPRESS_FP16,
  SC_COMPRESS_BF16,
  SC_COMPRESS_ONEBIT,
  SC_COMPRESS_AUTO
} sc_compress_t;

/* Every field must be the same on every rank (sc_fusion_plan checks). */
typedef struct sc_fusion_config {
  sc_fusion_policy_t policy;
  size_t bucket_bytes;     /* SIZE, MGWFBP, DEAR: bucket size limit; 0 = 25 MiB */
  double alpha_us;         /* all-reduce model T(m) = alpha + beta*m bytes; both 0 = */
  double beta_us_per_byte; /* measure on the communicator at plan time */
  double density;          /* 0 = dense; (0,1) = gTop-k with error feedback */
  sc_select_t select;      /* sparse buckets: SC_SELECT_EXACT (default), _GAUSSIAN or _MSTOPK */
  size_t slice_bytes;      /* SC_FUSE_P3: slice size; 0 = from the cost model */
  sc_compress_t compress;  /* what buckets travel as (above); default SC_COMPRESS_NONE */
  int lowrank;             /* POWERSGD, ACPSGD: the rank r, 1..64; default 4 */
  uint64_t seed;           /* POWERSGD, ACPSGD: the first factors' seed; default 0 */
} sc_fusion_config_t;

/* Defaults for every field (SC_FUSE_SIZE, library-default bucket size, a
 * measured model, dense, exact selection): call first, then set what you
 * need, so that code keeps working when fields are added. Sets every byte,
 * padding included. cfg NULL does nothing. Never fails; local; any thread. */
void sc_fusion_config_init(sc_fusion_config_t *cfg);

/* sc_fusion_policy_name: the name of a fusion policy, as the Python package
 * (Fusion, DistributedOptimizer's policy=) and sc_fusion_replay -p spell it:
 * "wfbp", "size", "mgwfbp", "dear", "single" or "p3" for SC_FUSE_NONE,
 * SC_FUSE_SIZE, SC_FUSE_MGWFBP, SC_FUSE_DEAR, SC_FUSE_SINGLE and SC_FUSE_P3.
 * *name is set to a static string, valid for the life of the process; do
 * not free it.
 * Errors: SC_ERR_INVALID_ARG when policy is no value of sc_fusion_policy_t
 * or name is NULL (*name is then left as it was).
 * Not collective; thread-safe. */
sc_result_t sc_fusion_policy_name(sc_fusion_policy_t policy, const char **name);

typedef struct sc_fusion sc_fusion_t;
/* Makes in *f (NULL first) an empty fusion object (sc_fusion_t, opaque) on
 * comm, with a copy of *cfg. comm must outlive it. Sends nothing.
 * comm, cfg, f: not NULL.
 * Errors: SC_ERR_INVALID_ARG (NULL argument, unknown policy or select,
 * density outside [0, 1), alpha or beta negative or not finite);
 * SC_ERR_UNSUPPORTED (SC_FUSE_DEAR or SC_FUSE_P3 with density > 0); comm's
 * first failure's code; SC_ERR_NOMEM.
 * Local; any thread. */
sc_result_t sc_fusion_create(sc_comm_t *comm, const sc_fusion_config_t *cfg, sc_fusion_t **f);
/* Registers a gradient tensor of count elements of dtype at buf, in the
 * order gradients become ready in backward, before sc_fusion_plan.
 * backward_us: that layer's backward time (0 if unknown; MGWFBP and DEAR
 * use it). *tensor_id = 0, 1, 2, ... in registration order (-1 on error).
 * The library keeps buf and uses it in every round (see Buffers).
 * f, tensor_id, buf: not NULL; count > 0; any dtype (a float one with
 * density > 0). All tensors of one object: host memory, or all device.
 * Errors: SC_ERR_INVALID_ARG (NULL argument, after the plan, invalid dtype,
 * count 0 or too large, backward_us negative or not finite, a non-float
 * dtype with density > 0, a memory kind unlike the earlier tensors');
 * SC_ERR_NOMEM.
 * Local; not concurrently with other calls on f. */
sc_result_t sc_fusion_add_tensor(sc_fusion_t *f, void *buf, size_t count, sc_dtype_t dtype,
                                 double backward_us, int *tensor_id);
/* sc_fusion_add_tensor of a rows x cols matrix (row major; a convolution's
 * weight as out_channels x the rest): under SC_COMPRESS_POWERSGD and
 * SC_COMPRESS_ACPSGD it is reduced in low rank when both sides exceed 1
 * (tensors added with sc_fusion_add_tensor travel uncompressed); under the
 * other modes it is the tensor of rows * cols elements. Arguments, errors
 * (also SC_ERR_INVALID_ARG for rows or cols 0, or rows * cols overflowing)
 * and locality as sc_fusion_add_tensor. */
sc_result_t sc_fusion_add_matrix(sc_fusion_t *f, void *buf, size_t rows, size_t cols,
                                 sc_dtype_t dtype, double backward_us, int *tensor_id);
/* Checks that every rank registered the same tensors (count and dtype) with
 * the same configuration, agrees on the backward times (their mean), measures
 * alpha and beta if both are 0 (rank 0's fit; with density > 0 the gTop-k
 * cost), and computes the buckets: the same on every rank. SC_FUSE_P3 also
 * splits off its own communicator and starts its scheduler thread
 * (SC_P3_STEP_SLICES is read here); density > 0 or a compress mode starts a
 * worker thread; with device tensors and a compressed mode other than TOPK
 * it also allocates the host buffer those buckets are staged through.
 * f: not NULL, not planned yet, at least one tensor.
 * Errors: SC_ERR_MISMATCH on every rank (lists or configurations differ,
 * naming the first difference); SC_ERR_INVALID_ARG (NULL f, planned already,
 * no tensors, an earlier plan failed: destroy and create again); the errors
 * of the collectives it runs; SC_ERR_NOMEM; SC_ERR_SYSTEM.
 * Collective over the fusion's communicator. */
sc_result_t sc_fusion_plan(sc_fusion_t *f);
/* Stores the number of buckets of the plan. f, n: not NULL; planned (else
 * SC_ERR_INVALID_ARG). Local; any thread. */
sc_result_t sc_fusion_num_buckets(const sc_fusion_t *f, int *n);
/* Stores the bucket (0-based, launch order) of tensor_id. f, bucket: not
 * NULL; planned; tensor_id registered (else SC_ERR_INVALID_ARG).
 * Local; any thread. */
sc_result_t sc_fusion_bucket_of(const sc_fusion_t *f, int tensor_id, int *bucket);
/* Stores what bucket travels as: the configured mode (SC_COMPRESS_TOPK for
 * density > 0 with SC_COMPRESS_NONE; AUTO's choice), or SC_COMPRESS_NONE for a low-rank
 * bucket without a matrix of both sides > 1 and for a half-precision or 1-bit
 * bucket that is not float32 (those go dense). f, what: not NULL; planned;
 * bucket in [0, number of buckets) (else SC_ERR_INVALID_ARG).
 * Local; any thread. */
sc_result_t sc_fusion_bucket_compress(const sc_fusion_t *f, int bucket, sc_compress_t *what);
/* The tensor's gradient for this round is in its buffer; from now until the
 * wait that delivers the round the buffer is the library's. Copies it into
 * the bucket's fused buffer unless the bucket is zero copy (its tensors one
 * contiguous run of memory, either direction). Launches, without waiting for
 * the network, every bucket that is complete and whose earlier buckets of the
 * round have launched (dense: a non-blocking collective; density > 0: the
 * worker thread's gTop-k; P3: the scheduler takes it).
 * Errors: SC_ERR_INVALID_ARG (NULL f, bad id, no plan, the tensor already
 * ready or skipped with its round not delivered yet: nothing changes, the
 * round goes on); the fusion's sticky failure; errors of the launch or the
 * device copy (which fail the fusion).
 * Local (the launched collectives match across ranks by plan order); any
 * thread, see the section comment. */
sc_result_t sc_fusion_ready(sc_fusion_t *f, int tensor_id);
/* No gradient this round (an unused parameter): counts as ready and
 * contributes zeros; buf is not read, and receives the average (skipping
 * ranks count as zeros; the divisor is still nranks). With density > 0 the
 * zeros go through the bucket's error feedback. Ranks may skip different
 * tensors. Arguments, errors, locality and threads as sc_fusion_ready. */
sc_result_t sc_fusion_skip(sc_fusion_t *f, int tensor_id);
/* Finishes the current round of the tensor's bucket: waits for its
 * collective (DeAR: its all-gather) and copies the averaged result into the
 * buffer of every tensor of that bucket, which is the caller's again. A
 * tensor with no round in flight (never made ready, or already delivered)
 * returns SC_SUCCESS at once, its buffer holding its last result. A wait that
 * only this rank could unblock (the bucket, or an earlier one, lacks a ready
 * or skip of this rank; DeAR: any tensor of the round) fails at once with
 * SC_ERR_INVALID_ARG naming the tensor, and delivers nothing. SC_FUSE_P3: a
 * tensor's slices depend on no other tensor; the wait ends when every rank
 * made it ready and its slices went through.
 * Errors: SC_ERR_INVALID_ARG (NULL f, bad id, no plan, a self-blocked wait
 * as above); SC_ERR_TIMEOUT (the launched collective did not finish within
 * SC_TIMEOUT_MS; P3: no slice of the fusion completed for that long); the
 * collectives' errors; the fusion's sticky failure.
 * Local; any thread, see the section comment. */
sc_result_t sc_fusion_wait(sc_fusion_t *f, int tensor_id);
/* sc_fusion_wait for every bucket, in launch order (DeAR: all-gather order;
 * P3: priority order). Checks first that no bucket is self-blocked, so a
 * tensor neither readied nor skipped is reported before anything is waited
 * for. Arguments and errors as sc_fusion_wait, without the id. Local; any
 * thread. */
sc_result_t sc_fusion_wait_all(sc_fusion_t *f);
/* Waits for every collective still in flight (launched on every rank, so
 * this matches), stops the worker or scheduler thread and frees the object
 * (fused buffers, error-feedback states). Results not waited for are not
 * copied out. f may be NULL. Returns the first error of the outstanding
 * collectives, else SC_SUCCESS. SC_FUSE_P3: collective (every rank must
 * destroy its object); a rank that does not within SC_TIMEOUT_MS makes this
 * return SC_ERR_TIMEOUT, and the object is freed anyway. Destroy fusion
 * objects before their communicator. One thread, once no other uses f. */
sc_result_t sc_fusion_destroy(sc_fusion_t *f);

/* ---- Device (CUDA) buffers and streams ---- */

/* 1: built with CUDA and a device is visible (or the test stand-in of
 * SC_DEVRT_STANDIN is loaded); else 0. Asks the CUDA runtime once per
 * process. Never fails; local; any thread. */
int sc_cuda_available(void);
typedef void *sc_stream_t; /* a cudaStream_t; NULL = the legacy default stream */

/* Stream-ordered forms (NCCL semantics): the operation starts after all work
 * enqueued earlier on `stream`; work enqueued later on `stream` sees its
 * result. They return once the operation is enqueued; the calling thread
 * never waits for the other ranks. The operation keeps its place in the
 * communicator's one queue with the blocking and non-blocking calls, so the
 * collective rules hold as for the blocking forms (same arguments on every
 * rank, same order). A failure during execution is reported by
 * sc_comm_get_async_error and by every later call on the communicator; the
 * stream is released anyway (never hangs), with undefined output;
 * sc_comm_abort releases every stream waiting on the communicator.
 * Device buffers only, of the calling thread's current device; the buffers
 * are the library's until the stream has passed the operation.
 * Errors at the call, checked in this order, nothing enqueued:
 * SC_ERR_INVALID_ARG (as the blocking forms: NULL comm, invalid dtype or op,
 * root, NULL buffer with a non-zero count, overflow); SC_ERR_UNSUPPORTED
 * (built without CUDA; no device visible; each said in the detail, for a
 * count of 0 too); SC_ERR_INVALID_ARG (a host buffer; buffers of another
 * device); comm's first failure's code; SC_ERR_NOMEM; SC_ERR_TIMEOUT (1024
 * stream calls already in flight on comm and none finished within
 * SC_TIMEOUT_MS); the device runtime's errors. A call that needs more
 * device or pinned memory than any earlier one on comm allocates it first,
 * which may wait for the stream's earlier work; once warm, calls allocate
 * nothing.
 * Collective over comm; any thread. */
sc_result_t sc_allreduce_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                   sc_stream_t stream);
/* sc_reduce_scatter ordered on stream; see sc_allreduce_on_stream. */
sc_result_t sc_reduce_scatter_on_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        sc_dtype_t dtype, sc_redop_t op, sc_comm_t *comm,
                                        sc_stream_t stream);
/* sc_allgather ordered on stream; see sc_allreduce_on_stream. */
sc_result_t sc_allgather_on_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   sc_dtype_t dtype, sc_comm_t *comm, sc_stream_t stream);
/* sc_broadcast ordered on stream (sendbuf used on the root only); see
 * sc_allreduce_on_stream. */
sc_result_t sc_broadcast_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                   sc_dtype_t dtype, int root, sc_comm_t *comm, sc_stream_t stream);
/* sc_reduce ordered on stream (recvbuf used on the root only); see
 * sc_allreduce_on_stream. */
sc_result_t sc_reduce_on_stream(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                                sc_redop_t op, int root, sc_comm_t *comm, sc_stream_t stream);
/* sc_alltoall ordered on stream; see sc_allreduce_on_stream. */
sc_result_t sc_alltoall_on_stream(const void *sendbuf, void *recvbuf, size_t count,
                                  sc_dtype_t dtype, sc_comm_t *comm, sc_stream_t stream);
/* sc_alltoallv ordered on stream (the count arrays are copied at the call);
 * see sc_allreduce_on_stream. */
sc_result_t sc_alltoallv_on_stream(const void *sendbuf, const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                   const size_t *rdispls, sc_dtype_t dtype, sc_comm_t *comm,
                                   sc_stream_t stream);
/* sc_gather ordered on stream (recvbuf used on the root only); see
 * sc_allreduce_on_stream. */
sc_result_t sc_gather_on_stream(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                                int root, sc_comm_t *comm, sc_stream_t stream);
/* sc_scatter ordered on stream (sendbuf used on the root only); see
 * sc_allreduce_on_stream. */
sc_result_t sc_scatter_on_stream(const void *sendbuf, void *recvbuf, size_t count, sc_dtype_t dtype,
                                 int root, sc_comm_t *comm, sc_stream_t stream);
/* sc_allgatherv ordered on stream (the count arrays are copied at the call);
 * see sc_allreduce_on_stream. */
sc_result_t sc_allgatherv_on_stream(const void *sendbuf, size_t sendcount, void *recvbuf,
                                    const size_t *recvcounts, const size_t *displs,
                                    sc_dtype_t dtype, sc_comm_t *comm, sc_stream_t stream);
/* sc_gtopk_allreduce ordered on stream: grad on the device, ef NULL or a
 * state not yet used with host gradients (it then keeps its residual on the
 * device). The step runs as a queued job of the communicator's progress
 * thread once the stream's earlier work is done. Errors at the call as
 * sc_allreduce_on_stream, and SC_ERR_INVALID_ARG for a non-float dtype, an
 * unknown method, n > UINT32_MAX, an ef for another n or dtype or bound to host
 * memory; SC_ERR_UNSUPPORTED with SC_GTOPK_ALGO=hitopk (its sub-communicators
 * cannot be made from the progress thread; under auto the stream form never
 * runs hitopk). Collective over comm; any thread; ef used by one call at a
 * time. */
sc_result_t sc_gtopk_allreduce_on_stream(void *grad, size_t n, sc_dtype_t dtype, size_t k,
                                         sc_select_t method, sc_ef_t *ef, sc_comm_t *comm,
                                         sc_stream_t stream);
/* sc_send ordered on stream: buf (device memory of the calling thread's
 * current device) is sent once the stream's earlier work is done, and the
 * stream's later work waits until the send has completed as the blocking
 * sc_send would (below 64 KiB: handed to the transport; above: the peer's
 * receive posted). Not collective: only the two ranks of the message call,
 * and the operation takes no collective sequence number, but it keeps its
 * place in comm's one queue, so a collective queued after it on this rank
 * starts after it (a receive whose message never comes delays the queue by
 * up to SC_TIMEOUT_MS). To the calling rank itself, its receive must be
 * posted another way first (sc_irecv): a send to itself waits for its
 * receive. Errors at the call, nothing enqueued: as sc_send's
 * argument checks (SC_ERR_INVALID_ARG; SC_ERR_UNSUPPORTED with SC_P2P=0),
 * then as sc_allreduce_on_stream's (SC_ERR_UNSUPPORTED built without CUDA or
 * with no device visible, for a count of 0 too; SC_ERR_INVALID_ARG for host
 * memory or another device's; comm's first failure's code; SC_ERR_NOMEM;
 * SC_ERR_TIMEOUT; the device runtime's errors). Inside
 * sc_group_start/sc_group_end the call only checks and queues; the outermost
 * sc_group_end enqueues the group's stream-form calls of one communicator on
 * their stream as one step that runs them together (any order of sends and
 * receives, as the blocking forms in a group), and returns without waiting
 * for them; those calls must all use one stream (SC_ERR_INVALID_ARG at the
 * call that names another), and sc_group_end reports an enqueueing failure.
 * A failure while it runs (SC_ERR_REMOTE, SC_ERR_MISMATCH, SC_ERR_TIMEOUT
 * ...) fails the communicator, reported by sc_comm_get_async_error; the
 * stream is released anyway. buf is the library's until the stream has
 * passed the operation. Any thread. */
sc_result_t sc_send_on_stream(const void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                              sc_comm_t *comm, sc_stream_t stream);
/* sc_recv ordered on stream: the receive is posted once the stream's earlier
 * work is done, and the stream's later work sees the message in buf (device
 * memory of the calling thread's current device). Not collective; rules,
 * errors and ownership as sc_send_on_stream's. Any thread. */
sc_result_t sc_recv_on_stream(void *buf, size_t count, sc_dtype_t dtype, int peer, int tag,
                              sc_comm_t *comm, sc_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SPARSECOLL_H */
