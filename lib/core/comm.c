/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicator life cycle: create from a unique id, destroy, abort. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "lib/base/config.h"
#include "lib/base/fdlimit.h"
#include "lib/base/log.h"
#include "lib/base/socket.h"
#include "lib/control/bootstrap.h"
#include "lib/control/watch.h"
#include "lib/core/board.h"
#include "lib/core/comm.h"
#include "lib/core/fingerprint.h"
#include "lib/core/p2p.h"
#include "lib/core/stream.h"
#include "transport/registry.h"

/* "auto" (-1) or the name of one of coll's registered algorithms. */
static sc_result_t sc_parse_algo(const char *var, sc_coll_t coll, int *out) {
  const char *names[SC_ALGO_MAX + 1] = {"auto"};
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  for (int i = 0; i < n && i < SC_ALGO_MAX; i++) names[i + 1] = c[i].name;
  int idx;
  SC_CHECK(sc_parse_choice(var, sc_config_get(var), names, n + 1, &idx));
  *out = idx - 1;
  return SC_SUCCESS;
}

sc_result_t sc_comm_boot_timeout(int *ms) {
  long op, boot;
  SC_CHECK(sc_config_long("SC_TIMEOUT_MS", 1, 24L * 3600 * 1000, &op));
  SC_CHECK(sc_config_long("SC_BOOTSTRAP_TIMEOUT_MS", 0, 24L * 3600 * 1000, &boot));
  *ms = (int)(boot ? boot : op);
  return SC_SUCCESS;
}

static sc_result_t sc_comm_read_config(sc_comm_config_t *cfg) {
  long v;
  SC_CHECK(sc_config_long("SC_TIMEOUT_MS", 1, 24L * 3600 * 1000, &v));
  cfg->timeout_ms = (int)v;
  SC_CHECK(sc_comm_boot_timeout(&cfg->boot_timeout_ms));
  SC_CHECK(sc_config_size("SC_CHUNK_BYTES", 64, (size_t)1 << 30, &cfg->chunk_bytes));
  SC_CHECK(sc_config_size("SC_SOCKBUF_BYTES", 0, (size_t)1 << 30, &cfg->sockbuf_bytes));
  SC_CHECK(sc_config_size("SC_BOARD_BYTES", 0, (size_t)1 << 20, &cfg->board_bytes));
  int idx;
  SC_CHECK(sc_parse_algo("SC_ALGO", SC_COLL_ALLREDUCE, &cfg->algo));
  static const char *const tunes[] = {"auto", "model", "measure"};
  SC_CHECK(sc_parse_choice("SC_TUNE", sc_config_get("SC_TUNE"), tunes, 3, &cfg->tuning));
  SC_CHECK(sc_parse_algo("SC_BCAST_ALGO", SC_COLL_BROADCAST, &cfg->bcast_algo));
  SC_CHECK(sc_parse_algo("SC_RS_ALGO", SC_COLL_REDUCE_SCATTER, &cfg->rs_algo));
  SC_CHECK(sc_parse_algo("SC_AG_ALGO", SC_COLL_ALLGATHER, &cfg->ag_algo));
  SC_CHECK(sc_parse_algo("SC_A2A_ALGO", SC_COLL_ALLTOALL, &cfg->a2a_algo));
  SC_CHECK(sc_parse_algo("SC_GATHER_ALGO", SC_COLL_GATHER, &cfg->gather_algo));
  SC_CHECK(sc_parse_algo("SC_AGV_ALGO", SC_COLL_ALLGATHERV, &cfg->agv_algo));
  SC_CHECK(sc_parse_algo("SC_A2AV_ALGO", SC_COLL_ALLTOALLV, &cfg->a2av_algo));
  /* auto, or a sparse algorithm the cost model may pick (algorithms/sparse_registry.h). */
  const char *gtopks[SC_SPARSE_ALGO_COUNT + 1] = {"auto"};
  int gtopk_algos[SC_SPARSE_ALGO_COUNT + 1] = {-1}, ngtopk = 1, nsparse;
  const sc_sparse_algo_entry_t *sparse = sc_sparse_algos(&nsparse);
  for (int i = 0; i < nsparse; i++)
    if (sparse[i].pick) {
      gtopks[ngtopk] = sparse[i].name;
      gtopk_algos[ngtopk++] = (int)sparse[i].algo;
    }
  SC_CHECK(sc_parse_choice("SC_GTOPK_ALGO", sc_config_get("SC_GTOPK_ALGO"), gtopks, ngtopk, &idx));
  cfg->gtopk_algo = gtopk_algos[idx];
  const sc_tp_entry_t *tp;
  SC_CHECK(sc_tp_select("SC_TRANSPORT", sc_config_get("SC_TRANSPORT"), &tp));
  cfg->transport = (int)tp->id;
  SC_CHECK(sc_config_long("SC_NSOCKS", 1, 64, &v));
  cfg->nsocks = (int)v;
  static const char *const connects[] = {"eager", "lazy"};
  SC_CHECK(sc_parse_choice("SC_CONNECT", sc_config_get("SC_CONNECT"), connects, 2, &idx));
  cfg->connect_lazy = idx;
  SC_CHECK(sc_config_long("SC_SPIN_US", 0, 1000000, &v));
  cfg->spin_us = (int)v;
  SC_CHECK(sc_config_long("SC_HEARTBEAT_MS", -1, 600000, &v));
  cfg->heartbeat_ms = (int)v;
  SC_CHECK(sc_config_long("SC_WATCH_FANOUT", 2, 64, &v));
  cfg->watch_fanout = (int)v;
  SC_CHECK(sc_config_long("SC_CHECK_MISMATCH", 0, 1, &v));
  cfg->check_mismatch = (int)v;
  SC_CHECK(sc_config_long("SC_P2P", 0, 1, &v));
  cfg->p2p = (int)v;
  SC_CHECK(sc_config_long("SC_P2P_READ", 0, 1, &v));
  cfg->p2p_read = (int)v;
  SC_CHECK(sc_config_size("SC_P2P_UNEXPECTED_BYTES", (size_t)128 << 10, (size_t)1 << 40,
                          &cfg->p2p_unexp_bytes));
  snprintf(cfg->ifname, sizeof(cfg->ifname), "%s", sc_config_get("SC_SOCKET_IFNAME"));
  return SC_SUCCESS;
}

_Static_assert(SC_TP_ADDR_MAX + sizeof(sc_peer_head_t) <= SC_BOOT_BLOB_MAX,
               "a bootstrap record larger than the root accepts");

/* The room of a rank's transport address in its bootstrap record: what the
 * transport declares, and under auto all of SC_TP_ADDR_MAX where a switch
 * transport is built in (its address follows the mux's). Every rank of a
 * job runs one setting, so every record has one size. */
static size_t sc_peer_room(const sc_comm_t *comm) {
  size_t room = comm->tpops->addr_max ? comm->tpops->addr_max : SC_TP_ADDR_MAX;
  const sc_tp_entry_t *sw = sc_tp_auto_switch();
  if (comm->cfg.transport == SC_TP_AUTO && sw && sw->auto_open) room = SC_TP_ADDR_MAX;
  return (room + 7) & ~(size_t)7;
}

/* Under auto, open the transport auto may switch to (the registry's SWITCH
 * row) beside the mux, where its opener finds what it needs, and publish its
 * address after the mux's (in tp_addr, SC_TP_ADDR_MAX bytes) and its
 * capability bit. */
static void sc_auto_probe(const sc_comm_t *comm, const sc_tp_config_t *tpc, uint8_t *tp_addr,
                          sc_peer_head_t *me, sc_transport_t **alt) {
  *alt = NULL;
  const sc_tp_entry_t *sw = sc_tp_auto_switch();
  if (comm->cfg.transport != SC_TP_AUTO || comm->nranks < 2 || !sw || !sw->auto_open) return;
  uint8_t *room = tp_addr + SC_TP_AUTO_ALT_OFF;
  size_t len = 0;
  sc_result_t r = sw->auto_open(tpc, alt, room, SC_TP_ADDR_MAX - SC_TP_AUTO_ALT_OFF, &len);
  if (r == SC_SUCCESS && *alt) {
    me->caps |= sw->auto_cap;
    return;
  }
  if (r != SC_SUCCESS) {
    char muxed[64];
    sc_tp_muxed_names(muxed, sizeof(muxed));
    SC_INFO(SC_SUBSYS_INIT, "SC_TRANSPORT=auto: no %s here: %s; this rank offers only %s", sw->name,
            sc_last_error(), muxed);
  }
  *alt = NULL;
  memset(room, 0, SC_TP_ADDR_MAX - SC_TP_AUTO_ALT_OFF);
}

/* The auto verdict, from the exchanged table (identical on every rank): keep
 * the mux, or switch to the transport opened beside it. */
static sc_result_t sc_auto_decide(sc_comm_t *comm, const sc_peer_head_t *h0, size_t stride,
                                  sc_transport_t **alt, size_t *addr_off) {
  if (comm->cfg.transport != SC_TP_AUTO) return SC_SUCCESS; /* explicit: as created */
  int cross = 0;
  for (int i = 1; i < comm->nranks && !cross; i++) {
    const sc_peer_head_t *h = sc_peer_head_at(h0, stride, i);
    cross = strcmp(h->hostname, h0->hostname) != 0 || strcmp(h->boot_id, h0->boot_id) != 0;
  }
  size_t nrows;
  const sc_tp_entry_t *rows = sc_tp_registry(&nrows);
  const sc_tp_entry_t *sw = sc_tp_auto_switch();
  int pick = sc_tp_auto_choose(rows, nrows, SC_TP_AUTO, comm->nranks, &h0->caps, stride, cross);
  char muxed[64];
  sc_tp_muxed_names(muxed, sizeof(muxed));
  SC_INFO(SC_SUBSYS_INIT, "SC_TRANSPORT=auto chose %s (%s%s)",
          pick != SC_TP_AUTO ? sc_tp_by_id(pick)->name : muxed,
          pick == SC_TP_AUTO && cross && sw ? "not " : "",
          pick != SC_TP_AUTO ? sc_tp_by_id(pick)->auto_when
          : !cross           ? "every rank on one host"
          : sw               ? sw->auto_when
                             : "no transport to switch to");
  if (pick == SC_TP_AUTO || !*alt) {
    if (*alt) (*alt)->ops->destroy(*alt);
    *alt = NULL;
    return pick != SC_TP_AUTO ? SC_ERR(SC_ERR_INTERNAL, "auto chose %s without opening it",
                                       sc_tp_by_id(pick)->name)
                              : SC_SUCCESS;
  }
  comm->tpops->destroy(comm->tp);
  comm->tp = *alt;
  comm->tpops = (*alt)->ops;
  *alt = NULL;
  *addr_off = SC_TP_AUTO_ALT_OFF;
  return SC_SUCCESS;
}

static void sc_read_boot_id(char *out, size_t len) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  out[0] = '\0';
  if (!f) return;
  if (fgets(out, (int)len, f)) out[strcspn(out, "\n")] = '\0';
  fclose(f);
}

/* Frees everything but the struct itself (the abort tombstone). */
static void sc_comm_release_resources(sc_comm_t *comm) {
  /* First: the watch thread may wake the transport. */
  sc_watch_stop(comm->watch, !atomic_load(&comm->aborted));
  comm->watch = NULL;
  /* Before the collectives' transport: the lane's thread may be in the middle
   * of nothing but its own transport, yet its pending requests must fail now. */
  sc_p2p_stop(comm);
  if (comm->tp) {
    comm->tpops->cancel_all(comm->tp, SC_ERR_ABORTED);
    comm->tpops->destroy(comm->tp);
  }
  comm->tp = NULL;
  sc_exec_state_free(&comm->ex);
  sc_fp_free(comm);
  sc_comm_peers_free(comm);
}

void *sc_comm_ext(sc_comm_t *comm, sc_comm_ext_id_t id, void *(*create)(void),
                  void (*free_fn)(void *state)) {
  pthread_mutex_lock(&comm->lock);
  sc_comm_ext_t *e = &comm->ext[id];
  if (!e->state) {
    e->state = create();
    e->free_fn = free_fn;
  }
  void *state = e->state;
  pthread_mutex_unlock(&comm->lock);
  return state;
}

static void sc_comm_free(sc_comm_t *comm) {
  /* After the progress thread (the flag's writer), before the executor's
   * device memory is freed: a free synchronizes every stream, so none may
   * still wait on the flag then. */
  sc_stream_state_free(comm);
  sc_comm_release_resources(comm);
  sc_p2p_free(comm);
  sc_sym_free(comm->sym);
  for (int i = 0; i < SC_EXT_COUNT; i++)
    if (comm->ext[i].state) comm->ext[i].free_fn(comm->ext[i].state);
  if (comm->tune_ready) sc_tune_fini(comm);
  pthread_mutex_destroy(&comm->lock);
  pthread_cond_destroy(&comm->queue_cv);
  free(comm);
}

/* Descriptors a connected peer takes: SC_NSOCKS sockets where tcp may carry
 * the pair (tcp, and auto's peers on other hosts), a pidfd or an endpoint
 * otherwise. */
static int sc_comm_fds_per_peer(const sc_comm_config_t *cfg) {
  const int tcp = cfg->transport == SC_TP_TCP || cfg->transport == SC_TP_AUTO;
  return tcp && cfg->nsocks > 0 ? cfg->nsocks : 1;
}

/* What an out-of-descriptors error names: a tcp-connected communicator
 * holds its sockets per peer for the collectives, as many again for the
 * point-to-point lane (SC_P2P), and one liveness connection; other
 * transports a few per peer at most. Under SC_CONNECT=lazy that is the most
 * it holds: only the peers its calls use are connected. */
static void sc_comm_note_fd_need(const sc_comm_t *comm) {
  const long peers = comm->nranks - 1;
  const int lanes = comm->cfg.p2p ? 2 : 1;
  const int per = sc_comm_fds_per_peer(&comm->cfg);
  char what[200];
  snprintf(what, sizeof what, "%s, %s%ld peers x %d socket%s%s, and the liveness watch",
           sc_tp_by_id(comm->cfg.transport)->name,
           comm->cfg.connect_lazy ? "at most (SC_CONNECT=lazy connects the peers used) " : "",
           peers, per, per == 1 ? "" : "s",
           lanes == 2 ? ", twice (collectives and point-to-point)" : "");
  sc_fdlimit_note_need(peers * per * lanes + peers + 16, what);
}

sc_result_t sc_comm_create(sc_comm_t **out, int nranks, int rank, const sc_unique_id_t *id) {
  return sc_comm_create_child(out, nranks, rank, id, NULL);
}

sc_result_t sc_comm_create_child(sc_comm_t **out, int nranks, int rank, const sc_unique_id_t *id,
                                 const sc_comm_t *parent) {
  sc_sockaddr_t root;
  uint8_t secret[SC_SECRET_LEN];
  SC_CHECK(sc_unique_id_decode(id, &root, secret));
  sc_comm_t *comm = calloc(1, sizeof(*comm));
  if (!comm) return SC_ERR(SC_ERR_NOMEM, "communicator");
  pthread_mutex_init(&comm->lock, NULL);
  pthread_cond_init(&comm->queue_cv, NULL);
  comm->rank = rank;
  comm->nranks = nranks;
  comm->tpops = &sc_tcp_transport;
  sc_log_set_rank(rank);
  sc_result_t r;
  sc_transport_t *alt = NULL; /* auto's switch transport, opened beside the mux */
  size_t addr_off = 0;        /* of the chosen transport's blob in each record */
  uint8_t *all = NULL;        /* the exchanged records */
  SC_CHECK_GOTO(sc_comm_read_config(&comm->cfg), r, fail);
  comm->tpops = sc_tp_by_id(comm->cfg.transport)->ops;
  sc_fdlimit_raise();
  sc_comm_note_fd_need(comm);

  sc_tp_config_t tpc;
  memset(&tpc, 0, sizeof(tpc));
  tpc.rank = rank;
  tpc.nranks = nranks;
  memcpy(tpc.secret, secret, SC_SECRET_LEN);
  snprintf(tpc.ifname, sizeof(tpc.ifname), "%s", comm->cfg.ifname);
  tpc.route_hint = &root.sa;
  tpc.sockbuf_bytes = comm->cfg.sockbuf_bytes;
  tpc.timeout_ms = comm->cfg.timeout_ms;
  tpc.nsocks = comm->cfg.nsocks;
  tpc.connect_lazy = comm->cfg.connect_lazy;
  tpc.spin_us = comm->cfg.spin_us;

  /* This rank's transport address (create may write SC_TP_ADDR_MAX bytes)
   * and its record head; its record sends room bytes of the address. */
  uint8_t tp_addr[SC_TP_ADDR_MAX];
  sc_peer_head_t me;
  memset(tp_addr, 0, sizeof(tp_addr));
  memset(&me, 0, sizeof(me));
  const size_t room = sc_peer_room(comm), stride = room + sizeof(me);
  size_t addrlen = sizeof(tp_addr);
  SC_CHECK_GOTO(comm->tpops->create(&tpc, &comm->tp, tp_addr, &addrlen), r, fail);
  if (addrlen > room) {
    r = SC_ERR(SC_ERR_INTERNAL,
               "transport %s wrote a %zu-byte address, more than the %zu it declares",
               comm->tpops->name, addrlen, room);
    goto fail;
  }
  if (addrlen <= SC_TP_AUTO_ALT_OFF) sc_auto_probe(comm, &tpc, tp_addr, &me, &alt);
  if (gethostname(me.hostname, sizeof(me.hostname)) != 0)
    snprintf(me.hostname, sizeof(me.hostname), "?");
  me.hostname[sizeof(me.hostname) - 1] = '\0';
  sc_read_boot_id(me.boot_id, sizeof(me.boot_id));
  me.pid = (int32_t)getpid();
  me.rank = rank;
  me.nofile = sc_fdlimit_soft();
  me.fds_per_peer = sc_comm_fds_per_peer(&comm->cfg);
  me.mem_bytes = sc_tp_host_mem_bytes();
  size_t shm_budget = 0;
  SC_CHECK_GOTO(sc_config_size("SC_SHM_BUDGET_BYTES", 0, SC_SHM_BUDGET_MAX, &shm_budget), r, fail);
  me.shm_budget = shm_budget;

  /* Every rank's record, until the transports have copied their addresses
   * and the kept table is made of it; and SC_TP_ADDR_MAX zero bytes after
   * it: a transport may read its whole room or its stride from the last
   * record's address (auto's switch transport from SC_TP_AUTO_ALT_OFF in). */
  all = calloc((size_t)nranks * stride + SC_TP_ADDR_MAX, 1);
  if (!all) {
    r = SC_ERR(SC_ERR_NOMEM, "peer records of %d ranks", nranks);
    goto fail;
  }
  sc_watch_hooks_t hooks;
  sc_comm_watch_hooks(comm, &hooks);
  SC_CHECK_GOTO(sc_watch_create(&hooks, comm->cfg.ifname, &root, comm->cfg.heartbeat_ms, secret,
                                &comm->watch, me.watch_addr),
                r, fail);
  SC_INFO(SC_SUBSYS_INIT, "rank %d of %d: bootstrapping", rank, nranks);
  uint8_t rec[SC_TP_ADDR_MAX + sizeof(sc_peer_head_t)];
  memcpy(rec, tp_addr, room);
  memcpy(rec + room, &me, sizeof(me));
  SC_CHECK_GOTO(sc_bootstrap_exchange(&root, secret, rank, nranks, rec, stride, all,
                                      comm->cfg.boot_timeout_ms),
                r, fail);
  const sc_peer_head_t *heads = (const sc_peer_head_t *)(all + room);
  for (int i = 0; i < nranks; i++) {
    sc_peer_head_t *h = (sc_peer_head_t *)sc_peer_head_at(heads, stride, i);
    h->hostname[sizeof(h->hostname) - 1] = '\0';
    h->boot_id[sizeof(h->boot_id) - 1] = '\0';
  }
  SC_CHECK_GOTO(sc_auto_decide(comm, heads, stride, &alt, &addr_off), r, fail);
  SC_CHECK_GOTO(sc_comm_peers_keep(comm, heads, stride), r, fail);
  SC_CHECK_GOTO(comm->tpops->connect_all(comm->tp, all + addr_off, stride), r, fail);
  free(all);
  all = NULL;
  SC_CHECK_GOTO(sc_watch_start(comm->watch), r, fail);
  sc_sched_init(&comm->ex.sched);
  SC_CHECK_GOTO(sc_board_init(comm), r, fail);
  SC_CHECK_GOTO(sc_tune_init(comm), r, fail);
  comm->tune_ready = 1;
  /* On this thread, over the collectives' transport, before the progress
   * thread owns it. */
  SC_CHECK_GOTO(sc_p2p_create(comm, &tpc), r, fail);
  SC_CHECK_GOTO(sc_progress_start(comm), r, fail);
  const int measure = sc_tune_measures(comm->cfg.tuning, comm->tune.nhosts, comm->tune.unfitted);
  if (measure && parent && parent->tune.calibrated) {
    sc_tune_inherit(comm, parent);
  } else if (measure) {
    r = sc_tune_calibrate(comm);
    if (r != SC_SUCCESS) {
      sc_progress_stop(comm);
      goto fail;
    }
  }
  SC_INFO(SC_SUBSYS_INIT, "rank %d of %d ready (transport %s, chunk %zu B, timeout %d ms)", rank,
          nranks, comm->tpops->name, comm->cfg.chunk_bytes, comm->cfg.timeout_ms);
  *out = comm;
  return SC_SUCCESS;
fail:
  free(all);
  if (alt) alt->ops->destroy(alt);
  sc_comm_free(comm);
  return r;
}

sc_result_t sc_comm_init_rank(sc_comm_t **comm, int nranks, sc_unique_id_t id, int rank) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_init_rank: comm is NULL");
  *comm = NULL;
  if (nranks < 1 || nranks > SC_RANKS_MAX)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_init_rank: nranks %d outside [1, %d]", nranks,
                  SC_RANKS_MAX);
  if (rank < 0 || rank >= nranks)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_init_rank: rank %d outside [0, %d)", rank, nranks);
  sc_result_t r = sc_comm_create(comm, nranks, rank, &id);
  /* When this process made the id, the root lives here: let it tell the
   * other ranks why before the application exits (see sc_comm_init_env). */
  if (r != SC_SUCCESS) sc_bootstrap_root_drain(1000);
  return r;
}

sc_result_t sc_get_unique_id(sc_unique_id_t *id) {
  if (!id) return SC_ERR(SC_ERR_INVALID_ARG, "sc_get_unique_id: id is NULL");
  sc_comm_config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  SC_CHECK(sc_comm_read_config(&cfg));
  uint8_t secret[SC_SECRET_LEN];
  SC_CHECK(sc_random_bytes(secret, sizeof(secret)));
  sc_sockaddr_t bind, bound;
  SC_CHECK(sc_socket_pick_addr(cfg.ifname, NULL, &bind));
  SC_CHECK(sc_bootstrap_root_start(&bind, secret, cfg.boot_timeout_ms, &bound));
  return sc_unique_id_encode(&bound, secret, id);
}

sc_result_t sc_comm_destroy(sc_comm_t *comm) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_destroy: comm is NULL");
  /* Finishes what was queued (each op bounded by the timeout), then frees. */
  sc_progress_stop(comm);
  sc_comm_free(comm);
  return SC_SUCCESS;
}

sc_result_t sc_comm_abort(sc_comm_t *comm) {
  if (!comm) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_abort: comm is NULL");
  pthread_mutex_lock(&comm->lock);
  int already = atomic_exchange(&comm->aborted, 1);
  if (!already && atomic_load(&comm->error) == SC_SUCCESS) {
    snprintf(comm->errmsg, sizeof(comm->errmsg), "rank %d: the communicator was aborted",
             comm->rank);
  }
  pthread_cond_broadcast(&comm->queue_cv);
  pthread_mutex_unlock(&comm->lock);
  if (already) return SC_SUCCESS;
  /* Streams waiting on this communicator go on at once, before the queue is
   * failed: their results are undefined, sc_comm_get_async_error says why. */
  sc_stream_release_all(comm);
  if (comm->thread_started && comm->tp) comm->tpops->wake(comm->tp);
  sc_progress_stop(comm);
  /* Queued requests were failed by the progress thread; only the handle
   * remains so that other threads' and later calls answer SC_ERR_ABORTED. */
  sc_comm_release_resources(comm);
  return SC_SUCCESS;
}

sc_result_t sc_comm_rank(const sc_comm_t *comm, int *rank) {
  if (!comm || !rank) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_rank: NULL argument");
  *rank = comm->rank;
  return SC_SUCCESS;
}

sc_result_t sc_comm_size(const sc_comm_t *comm, int *size) {
  if (!comm || !size) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_size: NULL argument");
  *size = comm->nranks;
  return SC_SUCCESS;
}

sc_result_t sc_comm_get_async_error(sc_comm_t *comm, sc_result_t *err) {
  if (!comm || !err) return SC_ERR(SC_ERR_INVALID_ARG, "sc_comm_get_async_error: NULL argument");
  if (atomic_load(&comm->aborted))
    *err = SC_ERR_ABORTED;
  else
    *err = (sc_result_t)atomic_load(&comm->error);
  return SC_SUCCESS;
}
