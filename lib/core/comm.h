/* SPDX-License-Identifier: BSD-3-Clause */
/* The communicator and request internals shared by the files of lib/core/ (and
 * read by lib/sparse/ and lib/fusion/ above it). */
#ifndef SC_COMM_H
#define SC_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "algorithms/registry.h"
#include "lib/base/dtype.h"
#include "lib/base/error.h"
#include "lib/base/yield.h"
#include "lib/schedule/sched.h"
#include "lib/schedule/sparse_state.h"
#include "lib/tune/tune.h"
#include "sparsecoll.h"
#include "transport/transport.h"

#define SC_HOSTNAME_LEN 64

/* What every rank publishes at bootstrap besides its transport address. A
 * rank's bootstrap record (lib/core/comm.c) is its transport's address blob
 * in the room the transport declares (sc_transport_ops_t.addr_max, rounded
 * up to 8 bytes), then this: one size for every rank of a job, which the
 * root checks (tcp: 200 bytes; every transport's SC_TP_ADDR_MAX, 936 bytes,
 * was most of the table each rank receives). */
typedef struct sc_peer_head {
  char hostname[SC_HOSTNAME_LEN];
  char boot_id[40];
  int32_t pid;
  int32_t rank;
  uint32_t caps;          /* SC_TP_CAP_* (transport/registry.h): what auto may use here */
  uint8_t watch_addr[24]; /* a parent in the watch tree: its listener; [1]: "will connect" */
  int32_t nofile;         /* its descriptor limit, raised (sc_fdlimit_soft) */
  int32_t fds_per_peer;   /* descriptors its transport takes per connected peer */
  uint64_t mem_bytes;     /* its host's memory, for the shared-memory budget */
  uint64_t shm_budget;    /* its SC_SHM_BUDGET_BYTES; 0: the default share of mem_bytes */
} sc_peer_head_t;

/* What a rank keeps of every rank's record after creation (lib/core/peers.c):
 * the transports copied their addresses at connect_all, and the records'
 * host names, a few distinct ones, are kept once each. */
typedef struct sc_peer {
  int32_t pid;
  uint32_t host; /* index into sc_comm_t's hosts */
  uint8_t watch_addr[24];
} sc_peer_t;

/* The arguments of a sparse all-reduce (lib/sparse/sparse.c). */
typedef struct sc_sparse_op {
  sc_sparse_io_t io;
  size_t k, dense_len;
  size_t *out_nnz;
  uint8_t *survived; /* per input entry: survived every merge; NULL: not wanted */
} sc_sparse_op_t;

/* One collective call as queued. */
typedef struct sc_op {
  sc_coll_t coll;
  const void *sendbuf;
  void *recvbuf;
  size_t count; /* per the collective's convention in algorithms.h */
  /* ALLTOALLV: sendcounts, sdispls, recvcounts, rdispls; ALLGATHERV: NULL, NULL,
   * recvcounts, rdispls; nranks entries each. The caller's arrays for a blocking call; a
   * copy the request owns for the queued forms (sc_op_v_own). NULL for the others. */
  const size_t *v[4];
  sc_dtype_t dtype;
  sc_redop_t op;
  int root;
  uint64_t seq;
  sc_sched_gen_t gen; /* internal callers may force a generator; NULL: the tuner chooses */
  /* Sparse operations (with gen set, count = k): the caller blocks until the
   * operation is done, so this may point into its stack frame. */
  const sc_sparse_op_t *sparse;
  int device; /* the buffers are device memory (lib/core/device.h's sc_buffers_classify) */
  /* A queued call whose work is not one schedule (lib/sparse/gtopk_stream.c's
   * stream form of gTop-k): the progress thread calls job(comm, op) in place
   * of a schedule, with its arguments in job_args. The job's own blocking
   * calls run inline on that thread, numbered from SC_JOB_SEQ_SPAN sequence
   * numbers the job reserved when it was queued, so that every rank numbers
   * them alike whatever else was queued meanwhile. */
  sc_result_t (*job)(struct sc_comm *comm, const struct sc_op *op);
  uint64_t job_args[6];
  /* A job that is no collective (a point-to-point stream form, lib/core/
   * p2p_api.c): one rank queues it alone, so it takes no sequence numbers
   * and must make no collective calls. */
  int local;
} sc_op_t;

#define SC_JOB_SEQ_SPAN 1024

struct sc_request {
  sc_op_t op;
  struct sc_request *next;
  /* futex word: 0 pending, 1 finished, 2 pending with a thread asleep on it
   * (only then does the completion make the futex wake call). */
  _Atomic uint32_t done;
  sc_result_t result;
  char errmsg[SC_ERRMSG_MAX];
  /* A stream form's request (lib/core/stream.c): its events and pool slot;
   * NULL for the others. ticket: the value its stream waits for, handed
   * out under comm->lock in queue order. */
  struct sc_stream_slot *stream;
  uint32_t ticket;
  /* A point-to-point call's communicator: sc_wait and sc_test drive its
   * lane meanwhile (lib/core/p2p_lane.c); NULL for the others. */
  struct sc_comm *p2p_comm;
  /* From a stack of spare blocks (lib/base/spares.h): op.c's requests of
   * collectives without v arrays, lib/core/p2p_pool.c's operations. */
  int spare;
};

/* Settings read once at creation. */
/* SC_TUNE's choices, in lib/base/config.c's order. */
enum { SC_TUNING_AUTO = 0, SC_TUNING_MODEL = 1, SC_TUNING_MEASURE = 2 };

/* Whether the communicator calibrates its cost model at creation
 * (lib/core/calibrate.c). auto measures where the ranks span hosts: the network's
 * speed is not something a transport's props can state (a tcp link may be
 * 1 or 100 Gbit/s; on the 1 Gbit/s bed the defaults' 1.5 GB/s made auto pick
 * recursive doubling at 64 KiB, 1.4-1.7x the best). On one host the fitted
 * defaults (lib/tune/tune_model.c) hold for the transports they were fitted to;
 * where some pair's props say its costs are not those (unfitted: UCX,
 * verbs), auto measures too. Every rank reads the same props and host map,
 * so all decide alike. */
static inline int sc_tune_measures(int tuning, int nhosts, int unfitted) {
  return tuning == SC_TUNING_MEASURE || (tuning == SC_TUNING_AUTO && (nhosts > 1 || unfitted));
}

typedef struct sc_comm_config {
  int timeout_ms;
  int boot_timeout_ms; /* SC_BOOTSTRAP_TIMEOUT_MS, SC_TIMEOUT_MS when unset or 0 */
  size_t chunk_bytes;
  size_t sockbuf_bytes;
  size_t board_bytes; /* SC_BOARD_BYTES: the board's posts at most (lib/core/board.c) */
  int algo;           /* SC_ALGO: index of an all-reduce candidate (registry), -1 auto */
  int bcast_algo;     /* SC_BCAST_ALGO: index of a broadcast candidate, -1 auto */
  int rs_algo;        /* SC_RS_ALGO: index of a reduce-scatter candidate, -1 auto */
  int ag_algo;        /* SC_AG_ALGO: index of an all-gather candidate, -1 auto */
  int a2a_algo;       /* SC_A2A_ALGO: index of an all-to-all candidate, -1 auto */
  int gather_algo;    /* SC_GATHER_ALGO: index of a gather (= scatter) candidate, -1 auto */
  int agv_algo;       /* SC_AGV_ALGO: index of an uneven all-gather candidate, -1 auto */
  int a2av_algo;      /* SC_A2AV_ALGO: index of an uneven all-to-all candidate, -1 auto */
  int gtopk_algo;     /* SC_GTOPK_ALGO: an sc_sparse_algo_t, -1 auto */
  int tuning;         /* SC_TUNE: SC_TUNING_AUTO, _MODEL or _MEASURE */
  int transport;      /* SC_TRANSPORT: an sc_tp_id_t (transport/registry.h) */
  int nsocks;         /* SC_NSOCKS */
  int connect_lazy;   /* SC_CONNECT=lazy */
  int spin_us;        /* SC_SPIN_US */
  int heartbeat_ms;   /* SC_HEARTBEAT_MS: liveness watch period, 0 auto, -1 off */
  int watch_fanout;   /* SC_WATCH_FANOUT: children per rank in the liveness watch's tree */
  /* SC_CHECK_MISMATCH: fingerprint every operation (lib/core/fingerprint.c) */
  int check_mismatch;
  int p2p;                /* SC_P2P: open the point-to-point lane (lib/core/p2p.c) */
  size_t p2p_unexp_bytes; /* SC_P2P_UNEXPECTED_BYTES: unmatched arrivals buffered at most */
  int p2p_read;           /* SC_P2P_READ: rendezvous sends offer their buffer for reading */
  char ifname[64];
} sc_comm_config_t;

/* The bootstrap's limit: SC_BOOTSTRAP_TIMEOUT_MS, or SC_TIMEOUT_MS when that
 * is 0. Fails on a malformed setting. */
sc_result_t sc_comm_boot_timeout(int *ms);

/* State only the progress thread touches while it runs. */
/* What the schedule in sc_exec_state_t was built for: a training loop
 * repeats the same call, and rebuilding its schedule was a third of the
 * CPU time of a small all-reduce. */
typedef struct sc_sched_key {
  int valid; /* cleared whenever the cost model changes */
  int coll, root, avg, in_place;
  size_t count, elem_size;
} sc_sched_key_t;

/* Entries op's v arrays hold together: 4 or 2 arrays of nranks (0: the collective has none). */
static inline size_t sc_op_v_len(const sc_op_t *op, int nranks) {
  return !op->v[2] ? 0 : (size_t)nranks * (op->coll == SC_COLL_ALLTOALLV ? 4 : 2);
}

/* Copies op's v arrays to mem (sc_op_v_len entries) and points op at the copy. */
static inline void sc_op_v_own(sc_op_t *op, int nranks, size_t *mem) {
  for (int i = 0; i < 4; i++)
    if (op->v[i]) {
      memcpy(mem, op->v[i], (size_t)nranks * sizeof(size_t));
      op->v[i] = mem;
      mem += nranks;
    }
}

/* The key of op's dense schedule (valid), and whether a valid key is op's. */
static inline sc_sched_key_t sc_sched_key_of(const sc_op_t *op) {
  /* A v collective's schedule depends on its arrays: never reused. */
  return (sc_sched_key_t){.valid = !op->v[2],
                          .coll = (int)op->coll,
                          .in_place = op->sendbuf == op->recvbuf,
                          .root = op->root,
                          .avg = op->op == SC_AVG,
                          .count = op->count,
                          .elem_size = sc_dtype_size(op->dtype)};
}
static inline int sc_sched_key_matches(const sc_sched_key_t *k, const sc_sched_key_t *want) {
  return k->valid && want->valid && k->coll == want->coll && k->root == want->root &&
         k->avg == want->avg && k->in_place == want->in_place && k->count == want->count &&
         k->elem_size == want->elem_size;
}

typedef struct sc_exec_state {
  sc_sched_t sched;
  sc_sched_key_t sched_key;
  void *scratch;
  size_t scratch_bytes;
  void *staging;
  size_t staging_bytes;
  sc_tp_req_t *sends; /* ring of outstanding sends */
  const uint8_t **send_lo;
  const uint8_t **send_hi;
  size_t send_cap, send_head, send_count;
  /* Lives here, not on a stack frame: after a failure the transport may still
   * hold it until cancel_all. */
  sc_tp_req_t recv_req;
  /* The next receive step, posted early (lib/core/executor.c's lookahead) into
   * pre_slot (recv_req or pre_req, whichever the current receive does not
   * hold): pre_step is its index, pre_in where it lands. */
  sc_tp_req_t pre_req;
  sc_tp_req_t *pre_slot;
  size_t pre_step;
  int pre_posted;
  uint8_t *pre_in;
  void *staging2;
  size_t staging2_bytes;
  uint64_t early_posts;      /* receives the lookahead posted since creation (tests read it) */
  sc_sparse_state_t *sparse; /* allocated by the first sparse operation */
  uint64_t bytes_sent;       /* posted by this rank since creation (sc_gtopk_perf reports it) */
  struct sc_devar *devar;    /* the device all-reduce's kernel path (lib/core/dev_allreduce.c) */
  struct sc_exec_dev *dev;   /* device buffers' stream, staging and pools (lib/core/exec_device.c);
                                NULL until the first operation on device memory */
  /* The board (lib/core/board.c): the bytes a post may hold (0: no board), the
   * last call's number, each rank's part of the current call, and how a
   * waiter gives its core up. */
  size_t board_max;
  size_t board_room; /* the transport's post size, whatever SC_BOARD_BYTES says (0: no board) */
  uint64_t board_seq;
  const void **board_parts;
  int board_shared_cores; /* more ranks than this host's CPUs */
  sc_yield_t board_yield;
  /* The print every request of the running schedule carries (transport.h's
   * sc_tp_req_t fp; all zero: none), and the number of its call, against
   * which a peer's print is read when they differ. */
  uint8_t fp[SC_TP_FP_LEN];
  uint64_t fp_seq;
  /* > 0: the running call is a v collective whose pairs' counts differ from
   * pair to pair: each message's print carries its own count (its bytes over
   * this element size), so that counts two ranks disagree on fail the
   * receive with SC_ERR_MISMATCH naming both. */
  size_t fp_count_es;
} sc_exec_state_t;

/* The call this rank is executing, as its liveness watch reports it in
 * every heartbeat (lib/core/comm_watch.c): a sequence lock, written only by
 * the thread that owns the transport, read by the watch thread. gen is odd
 * while a write is under way; fp holds the call's print (all zero: idle). */
typedef struct sc_op_now {
  _Atomic uint64_t gen;
  _Atomic uint64_t seq;
  _Atomic uint64_t fp[SC_TP_FP_LEN / 8];
} sc_op_now_t;

#define SC_TUNE_CACHE 64

typedef struct sc_tune_entry {
  uint8_t valid, coll;
  size_t bytes, elem_size;
  int choice;
  int rail; /* choice "hier": the all-reduce its rails run */
} sc_tune_entry_t;

/* Shared by the progress thread and callers (sc_allreduce_algo). */
typedef struct sc_tune_state {
  pthread_mutex_t lock;
  sc_link_model_t model;
  sc_tune_entry_t cache[SC_TUNE_CACHE];
  /* lib/core/locality.c: hosts from the transport's props, numbered by their lowest rank. */
  int *host_of; /* [nranks] */
  int nhosts, host_index, local_rank, local_size;
  int hier_ok;      /* the hierarchical all-reduce has a hierarchy (sc_hier_useful) */
  int calibrated;   /* the model's fit was measured on this communicator or its parent */
  int unfitted;     /* pairs of one host the defaults were not fitted to (sc_links_t) */
  int32_t fd_peers; /* the fewest peers any rank's descriptors hold (INT32_MAX: no bound) */
  /* Same-host pairs the least shared-memory budget of any rank holds at full
   * size (transport ops' pair_bytes; INT32_MAX: no such budget), and the most
   * ranks of one host (lib/core/peers.c). */
  int32_t shm_pairs, local_max;
  int a2av_sparse; /* the uneven all-to-all runs its sparse form (sc_tune_a2av_sparse) */
  /* The uneven all-to-all runs hier (its count exchange, lib/core/a2av_mates.c, runs
   * before each call's schedule): 1 or 0; -1 until the cost model decides
   * (sc_tune_a2av_hier). a2av_hier_auto: the model decides, again after it changes. */
  int a2av_hier, a2av_hier_auto;
} sc_tune_state_t;

/* State that a layer above lib/core (lib/compress) keeps per communicator:
 * one slot per feature, made on first use (sc_comm_ext) and freed with the
 * communicator by the destructor its maker gave. */
typedef enum sc_comm_ext_id { SC_EXT_HALFWIRE, SC_EXT_HITOPK, SC_EXT_COUNT } sc_comm_ext_id_t;
typedef struct sc_comm_ext {
  void *state;
  void (*free_fn)(void *state);
} sc_comm_ext_t;

/* After sc_comm_abort only this struct remains (a tombstone that answers
 * SC_ERR_ABORTED) until sc_comm_destroy releases it. */
struct sc_comm {
  int rank, nranks;
  sc_comm_config_t cfg;
  const sc_transport_ops_t *tpops;
  sc_transport_t *tp;
  sc_peer_t *peers;               /* [nranks] (lib/core/peers.c) */
  char (*hosts)[SC_HOSTNAME_LEN]; /* the distinct host names of peers' records */

  pthread_mutex_t lock; /* queue, state flags, error */
  pthread_cond_t queue_cv;
  sc_request_t *qhead, *qtail;
  uint64_t next_seq;
  int thread_started;
  pthread_t thread;
  _Atomic int stopping; /* written under lock; atomic for sc_comm_check_usable's look */
  int busy;             /* an operation is executing (progress thread or a blocking caller) */
  _Atomic int aborted;
  _Atomic int error; /* sc_result_t of the first failure */
  char errmsg[SC_ERRMSG_MAX];
  /* The recorded error is SC_CHECK_MISMATCH's verdict, which every rank
   * reaches from the same prints: the liveness watch does not relay it. */
  int error_shared;

  sc_op_now_t now;
  /* The calibration's calls (lib/core/calibrate.c) reuse the numbers of the
   * application's next calls: the watch is not shown them, so that a report
   * of one is never compared with a report of the other. */
  int calibrating;

  struct sc_watch *watch; /* liveness watch (lib/control/watch.c), NULL when off */

  sc_exec_state_t ex;
  struct sc_fp_state *fp; /* SC_CHECK_MISMATCH exchange; progress thread only */
  sc_tune_state_t tune;
  int tune_ready;

  /* The stream forms' pinned flag and pools (lib/core/stream.c), created by the
   * first stream call under lock; stream_tickets: the last ticket handed out. */
  struct sc_stream_state *stream;
  struct sc_sym *sym; /* the symmetric collectives' scratch (lib/core/sym.c) */
  sc_comm_ext_t ext[SC_EXT_COUNT];
  uint32_t stream_tickets;

  /* Point-to-point (lib/core/p2p.c): its own lane and thread; NULL with SC_P2P=0. */
  struct sc_p2p *p2p;
};

/* lib/core/op.c */
sc_result_t sc_op_submit(sc_comm_t *comm, const sc_op_t *op, sc_request_t **req);
/* Queue a request the caller allocated (its op is numbered here, and a stream
 * form's request gets its ticket) unless the communicator refuses. */
sc_result_t sc_op_enqueue(sc_comm_t *comm, sc_request_t *req);
void sc_request_complete(sc_request_t *req, sc_result_t res);
static inline int sc_request_done(const sc_request_t *req) {
  return atomic_load_explicit(&req->done, memory_order_acquire) == 1;
}
sc_result_t sc_comm_check_usable(sc_comm_t *comm);
/* SC_SUCCESS unless the communicator was aborted or failed: then the error,
 * worded as a refusal at submission is, with the call's number
 * ("<coll> #N (count C, DTYPE) not started: ..."). */
sc_result_t sc_op_check_runnable(sc_comm_t *comm, const sc_op_t *op);
/* Blocking form: runs op on the calling thread when nothing is queued or
 * executing (no thread hand-off on the latency path), else queues and waits. */
sc_result_t sc_op_run_blocking(sc_comm_t *comm, const sc_op_t *op);
/* Runs a queued job (op->job) on the thread that owns the transport. */
sc_result_t sc_op_run_job(sc_comm_t *comm, const sc_op_t *op);

/* lib/core/progress.c */
sc_result_t sc_progress_start(sc_comm_t *comm);
/* Stop the thread: drain the queue (destroy) or fail it (abort). */
void sc_progress_stop(sc_comm_t *comm);
void sc_comm_record_error(sc_comm_t *comm, sc_result_t res);
/* The same for SC_CHECK_MISMATCH's verdict (error_shared). */
void sc_comm_record_verdict(sc_comm_t *comm, sc_result_t res);
/* The same for any error, SC_ERR_INVALID_ARG included: for work no caller
 * waits for (a stream form's queued call), whose failure only the
 * communicator can report. */
void sc_comm_fail(sc_comm_t *comm, sc_result_t res);
/* Execute one operation (or fail it at once when aborted / in error). The
 * caller must own the transport (comm->busy). */
sc_result_t sc_op_run(sc_comm_t *comm, const sc_op_t *op);

/* After the liveness watch (lib/control/watch.c) reported a peer's failure, an
 * operation still moving data may finish; one idle this long fails (the
 * executor and the board). */
#define SC_EXEC_NOTICE_GRACE_MS 200

/* lib/core/executor.c: run one schedule over the communicator's transport. */
typedef struct sc_exec_args {
  const sc_op_t *op;
  const sc_sched_t *sched;
  size_t elem_size;
  /* The print every message carries (SC_TP_FP_LEN bytes, lib/core/fingerprint.h's
   * sc_fp_msg_encode of op); NULL: none, the messages are not checked. */
  const uint8_t *fp;
} sc_exec_args_t;
sc_result_t sc_sched_execute(sc_comm_t *comm, const sc_exec_args_t *a);
/* lib/core/comm.c: slot id's state, made by create (free_fn frees it with
 * the communicator) unless it exists; NULL when create failed. Thread-safe. */
void *sc_comm_ext(sc_comm_t *comm, sc_comm_ext_id_t id, void *(*create)(void),
                  void (*free_fn)(void *state));
/* lib/core/peers.c: keeps of the exchanged records (nranks of them) what is
 * used after creation: comm->peers and comm->hosts (replacing any it had). */
/* head: rank 0's record head; rank i's is stride bytes after rank i - 1's. */
sc_result_t sc_comm_peers_keep(sc_comm_t *comm, const sc_peer_head_t *head, size_t stride);
/* Rank i's record head in the exchanged table: head is rank 0's, the
 * records stride bytes apart. */
static inline const sc_peer_head_t *sc_peer_head_at(const sc_peer_head_t *head, size_t stride,
                                                    int i) {
  return (const sc_peer_head_t *)((const uint8_t *)head + (size_t)i * stride);
}
void sc_comm_peers_free(sc_comm_t *comm);
/* Rank r's host name from its record; "?" before the records are kept. */
static inline const char *sc_comm_host(const sc_comm_t *comm, int r) {
  return comm->peers && r >= 0 && r < comm->nranks ? comm->hosts[comm->peers[r].host] : "?";
}
/* lib/core/sym.c: frees the symmetric collectives' scratch. */
struct sc_sym;
void sc_sym_free(struct sc_sym *s);
void sc_exec_state_free(sc_exec_state_t *ex);

/* lib/core/select.c: choose the algorithm and build the schedule for op. */
/* lib/core/locality.c: fills comm->tune's host map (after connect_all). */
sc_result_t sc_locality_init(sc_comm_t *comm);
/* The cost model of the transport's links; fails when the transport
 * cannot describe them. */
sc_result_t sc_tune_init(sc_comm_t *comm);
void sc_tune_fini(sc_comm_t *comm);
/* SC_TUNE=measure: fit alpha/beta/gamma on the communicator, rank 0's fit
 * broadcast to all (lib/core/calibrate.c). */
sc_result_t sc_tune_calibrate(sc_comm_t *comm);
/* A split's communicator takes its parent's measured fit instead (the same
 * links; every rank's parent holds the same fit, so all agree). */
void sc_tune_inherit(sc_comm_t *comm, const sc_comm_t *parent);
/* mates: the uneven all-to-all's host-mates' counts for its hier form (NULL: none made). */
sc_result_t sc_tune_build_schedule(sc_comm_t *comm, const sc_op_t *op, const uint64_t *mates,
                                   sc_sched_t *s);
/* Whether the uneven all-to-all runs its sparse form (SC_A2AV_ALGO's choice,
 * else only where pairwise's connections to every peer would not fit the
 * job's descriptor limit): then its counts are checked first
 * (sc_fp_check_counts). Decided at creation; the same on every rank. */
static inline int sc_tune_a2av_sparse(const sc_comm_t *comm) {
  return comm->tune.a2av_sparse;
}
/* Whether the uneven all-to-all runs its hierarchical form: SC_A2AV_ALGO=hier
 * where it applies; unforced, on several hosts of equal rank counts, more
 * than one each, where the cost model prices the uniform all-to-all's hier
 * schedule within SC_TUNE_A2AV_HIER_SLACK of pairwise at every block size
 * and faster at one (sc_tune_a2av_hier_wins), decided at the first call
 * that asks and after each change of the model. The same on every rank. */
int sc_tune_a2av_hier(sc_comm_t *comm);
/* The name of the algorithm coll runs on comm for count elements of dtype (per rank's block
 * for the reduce-scatter and all-gather): the forced one, else the cost model's (cached).
 * Behind sc_allreduce_algo, sc_reduce_scatter_algo and sc_allgather_algo. */
sc_result_t sc_tune_algo_name(sc_comm_t *comm, sc_coll_t coll, size_t count, sc_dtype_t dtype,
                              const char **name);
/* The sparse all-reduce sc_gtopk_allreduce runs for k entries of es bytes:
 * SC_GTOPK_ALGO's, else the cost model's pick across hosts
 * (sc_tune_best_sparse, cached), else the butterfly. The same on every rank. */
sc_result_t sc_tune_gtopk_algo(sc_comm_t *comm, size_t k, size_t es, sc_sparse_algo_t *algo);
/* As sc_tune_gtopk_algo, for a gradient of n elements: hitopk is a candidate
 * too (sc_tune_hitopk_seconds) where every host holds the same number of
 * ranks, more than one (n = 0: as sc_tune_gtopk_algo). */
sc_result_t sc_tune_gtopk_algo_n(sc_comm_t *comm, size_t n, size_t k, size_t es,
                                 sc_sparse_algo_t *algo);
/* The generator arguments of (coll, count elements of es bytes) on comm. */
/* Points a's count arrays into a v collective's op->v (nothing for the others, or v NULL). */
void sc_tune_args_v(const sc_op_t *op, sc_coll_args_t *a);
void sc_tune_fill_args(sc_comm_t *comm, sc_coll_t coll, size_t count, size_t es, int root, int avg,
                       sc_coll_args_t *a);

/* lib/core/comm.c */
sc_result_t sc_comm_create(sc_comm_t **out, int nranks, int rank, const sc_unique_id_t *id);
/* The same for sc_comm_split: parent (non-NULL) lends its calibrated fit. */
sc_result_t sc_comm_create_child(sc_comm_t **out, int nranks, int rank, const sc_unique_id_t *id,
                                 const sc_comm_t *parent);
/* lib/core/comm_watch.c: what the liveness watch may do to this communicator. */
struct sc_watch_hooks;
void sc_comm_watch_hooks(sc_comm_t *comm, struct sc_watch_hooks *h);
/* lib/core/comm_env.c */
sc_result_t sc_secret_from_token(const char *token, uint8_t secret[SC_SECRET_LEN]);

#endif
