/* SPDX-License-Identifier: BSD-3-Clause */
/* Algorithm choice: the cheapest candidate under the communicator's
 * alpha-beta model (lib/tune/tune_model.c), or the one SC_ALGO / SC_BCAST_ALGO
 * forces. Choices are cached per (collective, bytes) and logged at INFO with
 * every candidate's estimate. Every rank computes the same choice: the model
 * is the same on every rank (the defaults of the links the transport's props
 * describe, alike on every rank, or rank 0's calibration broadcast). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/hitopk_plan.h"
#include "algorithms/sparse_registry.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/core/links.h"
#include "lib/tune/tune.h"

/* Every ordered pair, until no further pair could change the model: the
 * props are the same on every rank, so is the model. */
static sc_result_t sc_links_of(sc_comm_t *comm, sc_links_t *l) {
  sc_transport_t *tp = comm->tp;
  sc_links_init(l);
  if (!tp->ops->props)
    return SC_ERR(SC_ERR_INTERNAL, "transport %s describes no links (props)", tp->ops->name);
  for (int a = 0; a < comm->nranks && !sc_links_settled(l); a++)
    for (int b = 0; b < comm->nranks && !sc_links_settled(l); b++) {
      if (a == b) continue;
      sc_tp_props_t p;
      SC_CHECK(tp->ops->props(tp, a, b, &p));
      sc_links_add(l, &p);
    }
  return SC_SUCCESS;
}

/* The variable that forces coll's algorithm, and its forced candidate index (-1: auto or
 * no variable). Broadcast and reduce share SC_BCAST_ALGO's names. */
static const char *sc_forcing_var(const sc_comm_t *comm, sc_coll_t coll, int *forced) {
  int n;
  const sc_algo_entry_t *b;
  *forced = -1;
  switch (coll) {
  case SC_COLL_ALLREDUCE:
    *forced = comm->cfg.algo;
    return "SC_ALGO";
  case SC_COLL_REDUCE_SCATTER:
    *forced = comm->cfg.rs_algo;
    return "SC_RS_ALGO";
  case SC_COLL_ALLGATHER:
    *forced = comm->cfg.ag_algo;
    return "SC_AG_ALGO";
  case SC_COLL_BROADCAST:
  case SC_COLL_REDUCE:
    b = sc_algo_candidates(SC_COLL_BROADCAST, &n);
    if (comm->cfg.bcast_algo >= 0) *forced = sc_algo_find(coll, b[comm->cfg.bcast_algo].name);
    return "SC_BCAST_ALGO";
  case SC_COLL_ALLTOALL:
    *forced = comm->cfg.a2a_algo;
    return "SC_A2A_ALGO";
  case SC_COLL_ALLTOALLV:
    *forced = comm->cfg.a2av_algo;
    return "SC_A2AV_ALGO";
  case SC_COLL_GATHER:
  case SC_COLL_SCATTER:
    b = sc_algo_candidates(SC_COLL_GATHER, &n);
    if (comm->cfg.gather_algo >= 0) *forced = sc_algo_find(coll, b[comm->cfg.gather_algo].name);
    return "SC_GATHER_ALGO";
  case SC_COLL_ALLGATHERV:
    *forced = comm->cfg.agv_algo;
    return "SC_AGV_ALGO";
  default:
    return NULL;
  }
}

/* The most peers one rank may connect: the fewest any rank's descriptors
 * hold (lib/core/peers.c: its limit less a reserve, over what a peer takes);
 * and where a host's ranks connected to each other would not fit the least
 * shared-memory budget at full ring size, as many as it holds (shared memory
 * would shrink the rings to their floor and still hold P^2 of them a host:
 * 4.4 GiB after one call of each collective at 256 ranks on 24 GiB). 0: no
 * bound. */
static int sc_tune_peer_budget(const sc_comm_t *comm) {
  const sc_tune_state_t *t = &comm->tune;
  int budget = t->fd_peers < INT32_MAX ? t->fd_peers : 0;
  if (t->shm_pairs < INT32_MAX && t->local_max - 1 > t->shm_pairs) {
    const int pairs = t->shm_pairs > 1 ? t->shm_pairs : 1;
    if (budget == 0 || pairs < budget) budget = pairs;
  }
  return budget;
}

/* The hierarchical uneven all-to-all's shape: several hosts of equal rank counts. */
static int sc_tune_a2av_hier_applies(const sc_comm_t *comm) {
  sc_coll_args_t a = {.coll = SC_COLL_ALLTOALLV,
                      .nranks = comm->nranks,
                      .rank = comm->rank,
                      .host_of = comm->tune.host_of};
  return sc_hier_alltoallv_applies(&a);
}

/* SC_A2AV_ALGO=hier where it runs as such (sc_hier_alltoallv_applies);
 * elsewhere its generator is the pairwise one and no counts are exchanged
 * (said once where there is a hierarchy). */
static int sc_tune_a2av_hier_fits(const sc_comm_t *comm) {
  const sc_tune_state_t *t = &comm->tune;
  if (comm->cfg.a2av_algo < 0 || comm->cfg.a2av_algo != sc_algo_hier_index(SC_COLL_ALLTOALLV))
    return 0;
  const int fits = sc_tune_a2av_hier_applies(comm);
  if (!fits && t->hier_ok && comm->rank == 0)
    SC_INFO(SC_SUBSYS_TUNE,
            "SC_A2AV_ALGO=hier on %d hosts of unequal rank counts: the uneven all-to-all runs "
            "the pairwise exchange",
            t->nhosts);
  return fits;
}

sc_result_t sc_tune_init(sc_comm_t *comm) {
  sc_tune_state_t *t = &comm->tune;
  sc_links_t l;
  SC_CHECK(sc_links_of(comm, &l));
  SC_CHECK(sc_locality_init(comm));
  sc_coll_args_t ha = {.coll = SC_COLL_ALLREDUCE, .nranks = comm->nranks, .host_of = t->host_of};
  t->hier_ok = sc_hier_useful(&ha);
  for (int coll = 0; coll < SC_COLL_COUNT_ && !t->hier_ok && comm->rank == 0; coll++) {
    int forced;
    const char *var = sc_forcing_var(comm, (sc_coll_t)coll, &forced);
    if (forced >= 0 && forced == sc_algo_hier_index((sc_coll_t)coll))
      SC_INFO(SC_SUBSYS_TUNE,
              "%s=hier on %d host%s of at most %d rank%s: no hierarchy, the cost model picks "
              "a flat %s instead",
              var, t->nhosts, t->nhosts == 1 ? "" : "s", comm->nranks / t->nhosts,
              comm->nranks / t->nhosts == 1 ? "" : "s", sc_coll_name((sc_coll_t)coll));
  }
  /* Only the one-host kinds read the cores, and there every rank counts the
   * same machine's. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int host_cores = comm->nranks > 1 ? (int)(cores > 0 ? cores : 1) : 0;
  sc_links_model(&l, host_cores, comm->cfg.spin_us, &t->model);
  t->model.peer_budget = sc_tune_peer_budget(comm);
  if (t->model.peer_budget > 0 && comm->nranks - 1 > t->model.peer_budget && comm->rank == 0)
    SC_INFO(SC_SUBSYS_TUNE,
            "connections: room for %d peers per rank (the descriptors of every rank hold %d; "
            "the least shared-memory budget holds %d pairs at full size, %d ranks on the "
            "fullest host): the algorithms that connect every pair (pairwise, linear, "
            "direct) are left out where another can run",
            t->model.peer_budget, (int)t->fd_peers, (int)t->shm_pairs, (int)t->local_max);
  /* The uneven all-to-all's two forms move the same blocks and differ in the
   * empty ones, which no rank's own counts tell for the whole job, and the
   * sparse form's count check is an all-reduce more: pairwise, unless its
   * connection to every peer does not fit (or SC_A2AV_ALGO says otherwise). */
  int nv;
  const sc_algo_entry_t *v = sc_algo_candidates(SC_COLL_ALLTOALLV, &nv);
  t->a2av_sparse = comm->cfg.a2av_algo >= 0
                       ? comm->cfg.a2av_algo == sc_algo_find(SC_COLL_ALLTOALLV, "sparse")
                       : comm->nranks > 1 && sc_tune_over_budget(&t->model, &v[0], comm->nranks);
  t->a2av_hier = sc_tune_a2av_hier_fits(comm);
  t->a2av_hier_auto =
      comm->cfg.a2av_algo < 0 && !t->a2av_sparse && t->hier_ok && sc_tune_a2av_hier_applies(comm);
  if (t->a2av_hier_auto) t->a2av_hier = -1;
  t->unfitted = l.other_host ? 0 : l.unfitted;
  if (t->hier_ok) {
    /* Several hosts, one with several ranks: price its pairs apart. */
    int a = 0, b = 0;
    while (a == b) {
      b++;
      for (a = 0; t->host_of[a] != t->host_of[b];) a++;
    }
    sc_tp_props_t p;
    sc_result_t r = comm->tp->ops->props(comm->tp, a, b, &p);
    if (r != SC_SUCCESS) {
      free(t->host_of);
      t->host_of = NULL;
      return r;
    }
    sc_links_local(&p, host_cores, &t->model);
  }
  SC_INFO(
      SC_SUBSYS_TUNE,
      "cost model: %s (of %d pairs read, %d on other hosts, %d same-host over a network stack, %d "
      "same-host through memory)%s",
      sc_tune_kind_name(sc_links_kind(&l)), l.npairs, l.other_host, l.host_net, l.host_mem,
      t->unfitted && comm->cfg.tuning == SC_TUNING_AUTO
          ? "; the transport's costs are not those its defaults were fitted to: SC_TUNE=auto "
            "calibrates"
          : "");
  pthread_mutex_init(&t->lock, NULL);
  return SC_SUCCESS;
}

void sc_tune_fini(sc_comm_t *comm) {
  pthread_mutex_destroy(&comm->tune.lock);
  free(comm->tune.host_of);
  comm->tune.host_of = NULL;
}

/* The candidate the collective's SC_*_ALGO variable forces for coll, or -1. */
static int sc_forced_index(sc_comm_t *comm, sc_coll_t coll) {
  int forced;
  sc_forcing_var(comm, coll, &forced);
  /* hier without a hierarchy: the flat algorithm the model picks (logged
   * once by sc_tune_init). */
  if (forced >= 0 && forced == sc_algo_hier_index(coll) && !comm->tune.hier_ok) return -1;
  return forced;
}

void sc_tune_args_v(const sc_op_t *op, sc_coll_args_t *a) {
  a->sendcounts = op->v[0];
  a->sdispls = op->v[1];
  a->recvcounts = op->v[2];
  a->rdispls = op->v[3];
}

void sc_tune_fill_args(sc_comm_t *comm, sc_coll_t coll, size_t count, size_t es, int root, int avg,
                       sc_coll_args_t *a) {
  size_t chunk = comm->cfg.chunk_bytes / es;
  memset(a, 0, sizeof(*a));
  a->coll = coll;
  a->nranks = comm->nranks;
  a->rank = comm->rank;
  a->root = root;
  a->count = count;
  a->elem_size = es;
  a->chunk_elems = chunk ? chunk : 1;
  a->avg = avg;
  a->host_of = comm->tune.host_of;
}

/* The cache's key for the sparse all-reduce's choice (no collective has it). */
#define SC_TUNE_SPARSE_KEY 0xFE

/* The choices cache: one entry per slot, keyed by a collective (or
 * SC_TUNE_SPARSE_KEY), a size and an element size. On a hit fills *hit
 * (only an entry whose choice is want, when want >= 0); on a miss copies the
 * model a choice is made under into *model. */
static int sc_tune_cache_get(sc_tune_state_t *t, int key, size_t bytes, size_t es, int want,
                             sc_tune_entry_t *hit, sc_link_model_t *model) {
  pthread_mutex_lock(&t->lock);
  const sc_tune_entry_t *e = &t->cache[(bytes * 31 + (size_t)key) % SC_TUNE_CACHE];
  int found = e->valid && e->coll == key && e->bytes == bytes && e->elem_size == es &&
              (want < 0 || e->choice == want);
  if (found)
    *hit = *e;
  else
    *model = t->model;
  pthread_mutex_unlock(&t->lock);
  return found;
}

static void sc_tune_cache_put(sc_tune_state_t *t, int key, size_t bytes, size_t es, int choice,
                              int rail) {
  pthread_mutex_lock(&t->lock);
  t->cache[(bytes * 31 + (size_t)key) % SC_TUNE_CACHE] = (sc_tune_entry_t){.valid = 1,
                                                                           .coll = (uint8_t)key,
                                                                           .bytes = bytes,
                                                                           .elem_size = es,
                                                                           .choice = choice,
                                                                           .rail = rail};
  pthread_mutex_unlock(&t->lock);
}

/* Block sizes at which sc_tune_a2av_hier compares the uniform all-to-all's
 * pairwise and hier schedules: 8 B to 2 MiB a block, 8x apart. */
#define SC_TUNE_A2AV_SIZES 7

int sc_tune_a2av_hier(sc_comm_t *comm) {
  sc_tune_state_t *t = &comm->tune;
  pthread_mutex_lock(&t->lock);
  int hier = t->a2av_hier;
  if (hier >= 0) {
    pthread_mutex_unlock(&t->lock);
    return hier;
  }
  const sc_link_model_t model = t->model;
  pthread_mutex_unlock(&t->lock);
  const int pw = sc_algo_find(SC_COLL_ALLTOALL, "pairwise");
  const int h = sc_algo_hier_index(SC_COLL_ALLTOALL);
  double pwe[SC_TUNE_A2AV_SIZES], he[SC_TUNE_A2AV_SIZES], lo, hi;
  int worst;
  size_t bytes = 8;
  for (int i = 0; i < SC_TUNE_A2AV_SIZES; i++, bytes *= 8) {
    sc_coll_args_t a;
    double est[SC_TUNE_MAX_CANDIDATES];
    int best, rail;
    sc_tune_fill_args(comm, SC_COLL_ALLTOALL, bytes, 1, 0, 0, &a);
    pwe[i] = he[i] = INFINITY;
    /* Both priced, or neither: a failed price leaves the pairwise form. */
    if (pw >= 0 && h >= 0 && sc_tune_best_rail(&model, &a, &best, est, &rail) == SC_SUCCESS) {
      pwe[i] = est[pw];
      he[i] = est[h];
    }
  }
  hier = sc_tune_a2av_hier_wins(pwe, he, SC_TUNE_A2AV_SIZES, &lo, &hi, &worst);
  if (comm->rank == 0 && isfinite(hi))
    SC_INFO(SC_SUBSYS_TUNE,
            "alltoallv on %d hosts of %d ranks: %s (the uniform all-to-all's hier over pairwise "
            "%.2f-%.2f from 8 B to %zu KiB a block, %.2f at %zu B; hier takes within %.2f at "
            "every size and less at one)",
            t->nhosts, comm->nranks / t->nhosts, hier ? "hier" : "pairwise", lo, hi,
            (bytes / 8) >> 10, hi, (size_t)8 << (3 * worst), SC_TUNE_A2AV_HIER_SLACK);
  else if (comm->rank == 0)
    SC_INFO(SC_SUBSYS_TUNE,
            "alltoallv on %d hosts of %d ranks: pairwise (the cost model prices no hier "
            "schedule here)",
            t->nhosts, comm->nranks / t->nhosts);
  pthread_mutex_lock(&t->lock);
  if (t->a2av_hier_auto) t->a2av_hier = hier;
  pthread_mutex_unlock(&t->lock);
  return hier;
}

/* Index of the candidate to use for (coll, count*es bytes). */
static sc_result_t sc_tune_choose(sc_comm_t *comm, sc_coll_t coll, size_t count, size_t es,
                                  const sc_op_t *op, int *choice, int *rail) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  int forced = sc_forced_index(comm, coll);
  const int hier = sc_algo_hier_index(coll);
  /* Only the all-reduce's rails have a choice of algorithm. */
  const int rails = coll == SC_COLL_ALLREDUCE;
  *rail = 0;
  /* A forced all-reduce hier still asks the model (cached) which algorithm its rails run. */
  if ((forced >= 0 && (forced != hier || !rails)) || n == 1 || comm->nranks == 1) {
    *choice = forced >= 0 ? forced : 0;
    return SC_SUCCESS;
  }
  if (coll == SC_COLL_ALLTOALLV) {
    *choice = sc_tune_a2av_sparse(comm) ? sc_algo_find(coll, "sparse")
              : sc_tune_a2av_hier(comm) ? hier
                                        : 0;
    return SC_SUCCESS;
  }
  const size_t bytes = count * es;
  sc_tune_entry_t hit;
  sc_link_model_t model;
  if (sc_tune_cache_get(&comm->tune, coll, bytes, es, forced, &hit, &model)) {
    *choice = hit.choice;
    *rail = hit.rail;
    return SC_SUCCESS;
  }

  double est[SC_TUNE_MAX_CANDIDATES];
  int best, best_rail = 0;
  sc_coll_args_t a;
  sc_tune_fill_args(comm, coll, count, es, 0, 0, &a);
  if (op) sc_tune_args_v(op, &a);
  /* The uneven all-gather past SC_TUNE_FULL_REPLAY_RANKS is priced on blocks
   * of the mean count, whose schedules rotate (replayed on a window): its own
   * counts take a replay of P (P - 1) steps per candidate, 40 MB and seconds
   * of every rank's time at 1,024 ranks, at each new size. */
  size_t *even = NULL;
  const int p = comm->nranks;
  if (coll == SC_COLL_ALLGATHERV && a.recvcounts && p > SC_TUNE_FULL_REPLAY_RANKS) {
    even = malloc(2 * (size_t)p * sizeof(size_t));
    if (!even) return SC_ERR(SC_ERR_NOMEM, "cost model blocks of %d ranks", p);
    size_t total = 0;
    for (int i = 0; i < p; i++) total += a.recvcounts[i];
    const size_t mean = (total + (size_t)p - 1) / (size_t)p;
    for (int i = 0; i < p; i++) {
      even[i] = mean;
      even[p + i] = (size_t)i * mean;
    }
    a.recvcounts = even;
    a.rdispls = even + p;
    a.count = mean * (size_t)p;
  }
  if (forced >= 0) {
    best = forced; /* hier: only the all-reduce's reaches here, for its rails */
    for (int i = 0; i < n; i++) est[i] = NAN;
    best_rail = sc_tune_hier_rail(&model, &a, NULL);
  } else {
    sc_result_t r = sc_tune_best_rail(&model, &a, &best, est, &best_rail);
    if (r != SC_SUCCESS) {
      free(even);
      return r;
    }
  }
  free(even);
  if (sc_log_enabled(SC_LOG_INFO, SC_SUBSYS_TUNE)) {
    char line[512];
    size_t used = 0;
    if (forced >= 0) used = (size_t)snprintf(line, sizeof(line), "forced by SC_ALGO");
    for (int i = 0; forced < 0 && i < n && used < sizeof(line); i++)
      used += (size_t)snprintf(
          line + used, sizeof(line) - used, "%s%s %.1f us%s", i ? ", " : "", c[i].name,
          est[i] * 1e6,
          sc_tune_over_budget(&model, &c[i], comm->nranks) ? " (over the connection budget)" : "");
    SC_INFO(SC_SUBSYS_TUNE, "%s of %zu B on %d ranks: %s -> %s%s%s", sc_coll_name(coll), bytes,
            comm->nranks, line, c[best].name, best == hier ? ", rails " : "",
            best == hier ? (rails ? c[best_rail].name : "ring") : "");
  }
  sc_tune_cache_put(&comm->tune, coll, bytes, es, best, best_rail);
  *choice = best;
  *rail = best_rail;
  return SC_SUCCESS;
}

sc_result_t sc_tune_build_schedule(sc_comm_t *comm, const sc_op_t *op, const uint64_t *mates,
                                   sc_sched_t *s) {
  size_t es = sc_dtype_size(op->dtype);
  sc_coll_args_t a;
  sc_tune_fill_args(comm, op->coll, op->count, es, op->root, op->op == SC_AVG, &a);
  sc_tune_args_v(op, &a);
  a.a2av_mates = mates;
  a.in_place = op->sendbuf && op->sendbuf == op->recvbuf;
  if (op->gen) return op->gen(&a, s);
  int n, choice;
  const sc_algo_entry_t *c = sc_algo_candidates(op->coll, &n);
  SC_CHECK(sc_tune_choose(comm, op->coll, op->count, es, op, &choice, &a.rail_algo));
  SC_TRACE(SC_SUBSYS_TUNE, "%s #%llu: %s", sc_coll_name(op->coll), (unsigned long long)op->seq,
           c[choice].name);
  return c[choice].gen(&a, s);
}

sc_result_t sc_tune_algo_name(sc_comm_t *comm, sc_coll_t coll, size_t count, sc_dtype_t dtype,
                              const char **name) {
  if (!comm || !name)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_%s_algo: NULL argument", sc_coll_name(coll));
  if (sc_dtype_size(dtype) == 0)
    return SC_ERR(SC_ERR_INVALID_ARG, "sc_%s_algo: invalid dtype %d", sc_coll_name(coll),
                  (int)dtype);
  SC_CHECK(sc_comm_check_usable(comm));
  int n, choice, rail;
  const sc_algo_entry_t *c = sc_algo_candidates(coll, &n);
  SC_CHECK(sc_tune_choose(comm, coll, count, sc_dtype_size(dtype), NULL, &choice, &rail));
  *name = c[choice].name;
  return SC_SUCCESS;
}

sc_result_t sc_allreduce_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype, const char **name) {
  return sc_tune_algo_name(comm, SC_COLL_ALLREDUCE, count, dtype, name);
}

sc_result_t sc_reduce_scatter_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype,
                                   const char **name) {
  return sc_tune_algo_name(comm, SC_COLL_REDUCE_SCATTER, count, dtype, name);
}

sc_result_t sc_allgather_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype, const char **name) {
  return sc_tune_algo_name(comm, SC_COLL_ALLGATHER, count, dtype, name);
}

sc_result_t sc_alltoall_algo(sc_comm_t *comm, size_t count, sc_dtype_t dtype, const char **name) {
  return sc_tune_algo_name(comm, SC_COLL_ALLTOALL, count, dtype, name);
}

sc_result_t sc_tune_gtopk_algo(sc_comm_t *comm, size_t k, size_t es, sc_sparse_algo_t *algo) {
  return sc_tune_gtopk_algo_n(comm, 0, k, es, algo);
}

/* The cache's key for the choice with hitopk among the candidates: n travels
 * in the element size (es < 16). */
#define SC_TUNE_HITOPK_KEY 0xFD

sc_result_t sc_tune_gtopk_algo_n(sc_comm_t *comm, size_t n, size_t k, size_t es,
                                 sc_sparse_algo_t *algo) {
  *algo = SC_SPARSE_GTOPK;
  SC_CHECK(sc_comm_check_usable(comm));
  if (comm->cfg.gtopk_algo >= 0) {
    *algo = (sc_sparse_algo_t)comm->cfg.gtopk_algo;
    return SC_SUCCESS;
  }
  /* One host: the butterfly, whose every rank merges in parallel on its own
   * core (the host model replays no sparse steps). */
  if (comm->nranks < 2 || comm->tune.nhosts < 2) return SC_SUCCESS;
  int L = 0;
  const int hi = n > 0 &&
                 sc_hitopk_layout_ok(comm->tune.host_of, comm->nranks, comm->tune.nhosts, &L) &&
                 L > 1;
  const int key = hi ? SC_TUNE_HITOPK_KEY : SC_TUNE_SPARSE_KEY;
  const size_t kes = hi ? es + 16 * n : es;
  sc_tune_entry_t hit;
  sc_link_model_t model;
  if (sc_tune_cache_get(&comm->tune, key, k, kes, -1, &hit, &model)) {
    *algo = (sc_sparse_algo_t)hit.choice;
    return SC_SUCCESS;
  }
  if (model.host_cores > 0) return SC_SUCCESS;
  sc_coll_args_t a;
  sc_tune_fill_args(comm, SC_COLL_ALLREDUCE, k, es, 0, 0, &a);
  double est[SC_SPARSE_ALGO_COUNT];
  *algo = (sc_sparse_algo_t)sc_tune_best_sparse(&model, &a, est);
  if (hi) {
    est[SC_SPARSE_HITOPK] = sc_tune_hitopk_seconds(&model, comm->tune.nhosts, L, n, k, es);
    if (est[SC_SPARSE_HITOPK] < est[*algo]) *algo = SC_SPARSE_HITOPK;
  }
  char ests[160] = "";
  size_t used = 0;
  int nrows;
  const sc_sparse_algo_entry_t *c = sc_sparse_algos(&nrows);
  for (int i = 0; i < nrows && used < sizeof(ests); i++)
    if (c[i].pick && !isinf(est[c[i].algo]))
      used += (size_t)snprintf(ests + used, sizeof(ests) - used, "%s %.1f us, ", c[i].name,
                               est[c[i].algo] * 1e6);
  SC_INFO(SC_SUBSYS_TUNE, "sparse all-reduce of k = %zu (n = %zu) on %d ranks, %d hosts: %s-> %s",
          k, n, comm->nranks, comm->tune.nhosts, ests, sc_sparse_algo_label(*algo));
  sc_tune_cache_put(&comm->tune, key, k, kes, (int)*algo, 0);
  return SC_SUCCESS;
}
