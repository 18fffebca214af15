/* SPDX-License-Identifier: BSD-3-Clause */
/* The alpha-beta cost model behind algorithm choice. A prediction runs every
 * rank's schedule through a timing simulation: a message of b bytes leaves
 * when the sender's link is free, occupies it for b*beta, arrives alpha
 * later; a receive waits for the arrival and a reduction adds b*gamma
 * (between hosts each end also spends CPU on the message, msg_cpu_s). The
 * finishing time of the last rank is the prediction, so the critical path
 * (messages and bytes on it) falls out of each algorithm's own schedule and
 * crossovers are not constants in code. When every rank shares one host
 * (loopback), the cores are the resource instead of links: lib/tune/tune_host.c
 * replays the schedules with processor sharing, with the latency of a rank
 * noticing its message (its turn on a shared core, or a wake-up once it
 * stopped polling), what polling and waking cost in CPU, memory that fell
 * out of cache, and shared memory's single copy. */
#ifndef SC_TUNE_H
#define SC_TUNE_H

#include <stdint.h>

#include "algorithms/registry.h"
#include "algorithms/sparse_registry.h"

#define SC_TUNE_MAX_CANDIDATES 8

typedef struct sc_link_model {
  double alpha_s;        /* seconds per message */
  double beta_s_per_b;   /* seconds per byte on one link */
  double gamma_s_per_b;  /* seconds per byte reduced or copied */
  int host_cores;        /* > 0: all ranks share this many cores (one host) */
  double host_s_per_b;   /* seconds per byte moved, host-wide (loopback) */
  double host_s_per_msg; /* seconds of some core per message, host-wide */
  double pull_min_b;     /* > 0: messages of at least this many bytes are read by the
                            receiver alone (shm's single copy) at pull_s_per_b; smaller
                            ones, and all when 0, cost the sender and the receiver half
                            of host_s_per_b each */
  double pull_s_per_b;   /* seconds per byte of a single-copy read, on the receiver */
  double spin_s;         /* a rank waiting for a message polls this long before it
                            sleeps (one host) */
  double turn_s;         /* with more ranks than cores: each other rank's turn on a
                            core before a polling receiver notices its message */
  double same_core_s;    /* a message whose sender runs on its receiver's core reaches
                            it this much later (the sender must give the core up) */
  double wake_s;         /* a message for a rank that went to sleep reaches it this
                            much later (the wake-up and the wait for a core) */
  double wake_cpu_s;     /* CPU seconds such a wake-up costs the woken rank */
  double cold_s_per_b;   /* > 0: extra seconds per byte of a region not in cache, */
  double reuse_b;        /* i.e. not touched by the rank within its last reuse_b bytes */
  double poll_cpu;       /* the share of its core a polling rank takes from the ranks
                            with work there (0: none, 1: a full one) */
  /* The network model with a host map (sc_coll_args_t.host_of): messages between ranks of
   * one host take these instead of alpha and beta, on links of their own, while messages
   * between hosts share their host's one network link (0: the host map is ignored). */
  double local_alpha_s;
  double local_beta_s_per_b;
  /* The network model: CPU seconds a message between hosts costs its two
   * ends, half on the sender as it posts it (its next step starts that much
   * later) and half on the receiver as it takes it; alpha_s is then the wire
   * latency between the two. What makes P - 1 messages posted at once cost
   * more than log2 P in turn (pairwise against Bruck's all-to-all). Measured
   * by the calibration (sc_tune_fit_msg); 0: none. */
  double msg_cpu_s;
  /* Measured per all-reduce candidate (lib/core/calibrate.c, across hosts): the
   * factor its network time takes over the replay's, applied to beta when it
   * is priced (0: none measured, 1). A replay has every rank in step; on a
   * real network an algorithm whose partners change every step (recursive
   * halving and doubling) lets a rank that is ahead send into a host still
   * receiving the previous step, and loses link time the replay cannot see:
   * on the 1 Gbit/s bed, 8 hosts, Rabenseifner took 1.3-1.5x the ring's time
   * from 1 to 32 MiB, at 200 Mbit/s too, where the model put it ahead. */
  double allreduce_beta_scale[SC_TUNE_MAX_CANDIDATES];
  /* > 0: the most peers one rank may connect within the job's descriptor
   * limit; a candidate that connects every pair (sc_algo_entry_t.all_peers)
   * is not chosen when P - 1 is more, unless nothing else can run. 0: no
   * bound. */
  int peer_budget;
} sc_link_model_t;

/* From the calibration's rounds: round_s, one message out and one in per rank
 * (a dissemination barrier's round), and fan_s, k messages out and k in per
 * rank posted at once (k >= 2), the per-message CPU of the network model,
 * (fan_s - round_s) / (k - 1) within [0, round_s], into *msg_cpu_s and the
 * rest of a round, the wire latency, into *alpha_s. With k < 2 or no fan:
 * 0 and round_s. */
void sc_tune_fit_msg(double round_s, double fan_s, int k, double *alpha_s, double *msg_cpu_s);

/* Predicted seconds for the collective a describes (a->rank ignored) with
 * generator gen on the model. Returns SC_ERR_INTERNAL if the schedules
 * deadlock (a generator bug). */
sc_result_t sc_tune_predict(const sc_link_model_t *m, sc_sched_gen_t gen, const sc_coll_args_t *a,
                            double *seconds);
/* Above this many ranks, a candidate whose schedules rotate (sc_algo_entry_t.sym)
 * is priced on a window of ranks: one rank, or one host's where every host holds
 * the same number of consecutive ranks (the network model), or as many as cores
 * (one host). A ring's P schedules
 * of 2(P - 1) hops each made its full replay quadratic in P: 3.5 s at 1,024 ranks
 * per size seen, and beyond memory at 16,384. */
#define SC_TUNE_FULL_REPLAY_RANKS 64
/* Above this many, a rotating all-reduce that no window replays exactly (its
 * blocks differ in chunks) is priced on its even part. */
#define SC_TUNE_WINDOW_ALWAYS_RANKS 1024
/* The ranks sc_tune_predict_symmetric replays for a on m, for schedules of
 * symmetry sym (sc_algo_sym_t; a->nranks: all). */
int sc_tune_window(const sc_link_model_t *m, const sc_coll_args_t *a, int sym);
/* sc_tune_predict of a candidate whose schedules follow from rank 0's by
 * sym (sc_algo_sym_t: every peer shifted by r mod P, or XOR r). */
sc_result_t sc_tune_predict_symmetric(const sc_link_model_t *m, sc_sched_gen_t gen,
                                      const sc_coll_args_t *a, int sym, double *seconds);
/* What the timing simulations read of a step (16 bytes where sc_step_t
 * holds 32: a replay of 1,024 ranks keeps tens of thousands of steps, and
 * they were most of the cost model's memory). The buffers and offsets a
 * step touches matter only to the one-host model's cache term, which is
 * worked out from the whole step as it is kept (sc_tune_replay_t.cold). */
typedef struct sc_tune_step {
  size_t count;
  int32_t peer;
  uint8_t kind;  /* sc_step_kind_t */
  uint8_t flags; /* SC_SPF_* of the sparse steps */
} sc_tune_step_t;

/* The replayed ranks' schedules, end to end in one array: rank i's are
 * steps[first[i] .. first[i + 1]). With a model that prices cold memory
 * (host_cores > 0, cold_s_per_b > 0), cold[k] is step k's CPU for its cold
 * bytes. Kept from one prediction to the next (emptied, their capacity
 * kept), so that the candidates of one choice share one allocation: each
 * replay of P ranks allocating P schedules, which the C library handed back
 * to the system between candidates, made the allocations most of an 8-byte
 * choice at 4,096 ranks. Zero-initialise; free with sc_tune_replay_free. */
typedef struct sc_tune_replay {
  sc_tune_step_t *steps;
  double *cold; /* valid where with_cold */
  size_t nsteps, cap, cold_cap;
  int with_cold;
  size_t *first; /* w + 1 entries */
  int w, first_cap;
  /* The cache term's table of one rank's regions, reused rank after rank. */
  uint64_t *key;
  double *last;
  size_t key_cap;
} sc_tune_replay_t;
/* Rank i's steps in r, and how many. */
static inline const sc_tune_step_t *sc_tune_replay_steps(const sc_tune_replay_t *r, int i) {
  return r->steps + r->first[i];
}
static inline size_t sc_tune_replay_len(const sc_tune_replay_t *r, int i) {
  return r->first[i + 1] - r->first[i];
}
/* Empties r for a replay (keeping its capacity); with_cold: keep cold[]. */
void sc_tune_replay_reset(sc_tune_replay_t *r, int with_cold);
/* Appends the next rank's schedule (rank r->w), and with cold its cache
 * term under m for elements of es bytes. */
sc_result_t sc_tune_replay_add(sc_tune_replay_t *r, const sc_link_model_t *m, size_t es,
                               const sc_sched_t *s);
void sc_tune_replay_free(sc_tune_replay_t *r);

/* Each rank's schedule is built in `work`, then kept in `replay`. A
 * schedule of its own per rank started at 64 steps (2 KiB) however few it
 * held: 2 MiB of the process's peak at 1,024 ranks, for schedules of 10 to
 * 40 steps. Zero-initialise; free with sc_tune_scratch_free. */
typedef struct sc_tune_scratch {
  sc_sched_t work;
  sc_tune_replay_t replay;
} sc_tune_scratch_t;
void sc_tune_scratch_free(sc_tune_scratch_t *t);
/* sc_tune_predict_symmetric on t's schedules. */
sc_result_t sc_tune_predict_in(const sc_link_model_t *m, sc_sched_gen_t gen,
                               const sc_coll_args_t *a, int sym, sc_tune_scratch_t *t,
                               double *seconds);

/* Arrival times of the messages on one link, first in first out (both
 * timing simulations use one per ordered pair of ranks that exchange one).
 * 24 bytes: a replay of 1,024 ranks keeps tens of thousands. */
typedef struct sc_arrivals {
  double *t;
  uint32_t head, len, cap;
  int pooled; /* t is a slice of sc_tune_pairs_t.pool, sized to the receives */
} sc_arrivals_t;
sc_result_t sc_arrivals_push(sc_arrivals_t *q, double t);

/* lib/tune/tune_pairs.c: the queues of the pairs some receive step reads,
 * by receiver (first[j] .. first[j + 1] - 1: its senders, sorted, in from). */
typedef struct sc_tune_pairs {
  int p, w;   /* ranks, and the window of them replayed (p: all) */
  int by_xor; /* the window maps ranks by XOR (SC_SYM_XOR), not by a shift */
  size_t *first;
  int *from;
  sc_arrivals_t *q;     /* one per pair, in from's order */
  double *pool;         /* every queue's times: as many as its pair's receive steps */
  sc_arrivals_t unread; /* messages no receive step reads */
} sc_tune_pairs_t;
int sc_tune_step_is_recv(const sc_tune_step_t *st);
/* rp's w ranks: the ranks replayed (lib/tune/tune_pairs.c). */
sc_result_t sc_tune_pairs_build(sc_tune_pairs_t *t, int p, int by_xor, const sc_tune_replay_t *rp);
/* The pair of the window that carries from's messages to to. */
void sc_tune_pair_map(int p, int w, int by_xor, int *from, int *to);
/* The queue of the messages from rank from to rank to (O(log) of to's senders). */
sc_arrivals_t *sc_tune_pairs_q(sc_tune_pairs_t *t, int from, int to);
void sc_tune_pairs_free(sc_tune_pairs_t *t);

/* lib/tune/tune_host.c: the one-host model (host_cores > 0), processor sharing,
 * rank i on core i mod host_cores. scheds[0 .. w - 1]: the ranks replayed, all p
 * or a window (sc_tune_window: w and p multiples of host_cores; by_xor as in
 * sc_tune_pairs_t). */
/* The latency the other ranks' turns on a shared core add to each message
 * on p ranks (0 when every rank has a core). */
double sc_tune_host_turns(const sc_link_model_t *m, int p);
sc_result_t sc_tune_replay_host(const sc_link_model_t *m, int p, int by_xor, size_t es,
                                const sc_tune_replay_t *rp, double *seconds);
/* sc_tune_replay_host of scheds[0 .. w - 1] as they are. */
sc_result_t sc_tune_simulate_host(const sc_link_model_t *m, int p, int w, int by_xor, size_t es,
                                  const sc_sched_t *scheds, double *seconds);
/* The cache term of one rank's steps (n of them) into cold[0 .. n), with
 * key[] and last[] (cap slots, a power of two >= 4 n) as its table. */
void sc_tune_host_cold(const sc_link_model_t *m, size_t es, const sc_step_t *steps, size_t n,
                       uint64_t *key, double *last, size_t cap, double *cold);

/* The cheapest candidate algorithm for a->coll under m: its index in *best
 * and every candidate's estimate in est[] (INFINITY when it cannot run, or
 * when it is over the peer budget and another can run).
 * Pure: the same inputs give the same choice on every rank. */
sc_result_t sc_tune_best(const sc_link_model_t *m, const sc_coll_args_t *a, int *best, double *est);
/* Whether candidate c connects more peers on some rank of nranks than m's
 * peer_budget allows. */
int sc_tune_over_budget(const sc_link_model_t *m, const sc_algo_entry_t *c, int nranks);
/* sc_tune_best, and in *rail the flat all-reduce the chosen hier's rails run, as priced
 * there (sc_tune_hier_rail; 0 when the choice is not the all-reduce's hier). */
sc_result_t sc_tune_best_rail(const sc_link_model_t *m, const sc_coll_args_t *a, int *best,
                              double *est, int *rail);
/* "hier" (of every collective that has one) is a candidate only where sc_hier_useful(a)
 * (several hosts, one holding several ranks) and the model has a host map
 * (local_beta_s_per_b > 0). The all-reduce's rails run the flat all-reduce this returns (a
 * candidate index): the one with which the whole hierarchical schedule replays fastest,
 * each priced with its own network factor; *est (may be NULL) is that time (INFINITY, and
 * the ring, without a host map). The reduce-scatter's and all-gather's rails are always
 * rings. */
int sc_tune_hier_rail(const sc_link_model_t *m, const sc_coll_args_t *a, double *est);
/* How much slower than pairwise the hierarchical uneven all-to-all may be
 * priced at one block size and still be chosen. */
#define SC_TUNE_A2AV_HIER_SLACK 1.10
/* Whether the uneven all-to-all runs its hierarchical form, from the uniform
 * all-to-all's estimates of its pairwise and hier schedules at n block sizes
 * (pairwise[i], hier[i]): one call's counts are known to its own rank only,
 * so the choice cannot follow them and is made for every size at once. Hier
 * where it is faster at some size and within SC_TUNE_A2AV_HIER_SLACK of
 * pairwise at every one (none infinite). *lo and *hi: the least and the
 * largest ratio hier / pairwise (INFINITY where either is infinite), *worst
 * the first size of the largest (0 when n is 0). Pure. */
int sc_tune_a2av_hier_wins(const double *pairwise, const double *hier, int n, double *lo,
                           double *hi, int *worst);
/* The sparse all-reduce (a->count = k, a->elem_size the value's bytes) on
 * a network model (host_cores 0) with a host map: of the sparse registry's
 * rows the cost model may pick (algorithms/sparse_registry.h; a hier row only
 * where sc_hier_useful(a)), the one the replay finishes first (every set
 * priced at k entries), each row's exchanges slowed by its allreduce_twin's
 * measured factor (the butterflies', gtopk's and hier's among the hosts, by
 * recursive doubling's). est[] indexed by sc_sparse_algo_t (INFINITY: not a
 * candidate). */
int sc_tune_best_sparse(const sc_link_model_t *m, const sc_coll_args_t *a,
                        double est[SC_SPARSE_ALGO_COUNT]);
/* HiTopKComm's time (sc_gtopk_allreduce's "hitopk") for a gradient of n
 * elements of es bytes, k selected, on nhosts hosts of local_size ranks:
 * the ring reduce-scatter and all-gather of ceil(n/L)-element shards inside
 * each host (local links, reduction at gamma), and the ring all-gathers of
 * the L shards' sets among the hosts sharing each host's network link.
 * INFINITY on the one-host model (host_cores > 0). Pure. */
double sc_tune_hitopk_seconds(const sc_link_model_t *m, int nhosts, int local_size, size_t n,
                              size_t k, size_t es);
/* Candidate names in the order of sc_tune_best's indices (all-reduce:
 * ring, tree, rd, rabenseifner, hier). */
const char *sc_tune_candidate_name(sc_coll_t coll, int index);

/* Which fitted defaults apply. lib/tune/ knows no transport: lib/core/select.c
 * picks the kind from what the transport says of every pair of ranks. */
typedef enum sc_tune_kind {
  SC_TUNE_NET = 0,  /* some pair on different hosts: links of a network */
  SC_TUNE_HOST_TCP, /* one host, some pair through the network stack (loopback TCP) */
  SC_TUNE_HOST_MEM  /* one host, every pair through memory (shared or in-process) */
} sc_tune_kind_t;

const char *sc_tune_kind_name(sc_tune_kind_t kind);

/* Default model of a kind, on one host of host_cores cores (the host
 * kinds; > 0 once there are two ranks) or on several hosts (SC_TUNE_NET,
 * host_cores 0). single_copy_min: SC_TUNE_HOST_MEM messages of at least
 * this many bytes are read by the receiver alone (0: none are). */
void sc_tune_default_model(sc_tune_kind_t kind, int host_cores, size_t single_copy_min,
                           sc_link_model_t *m);
/* How ranks on m's host wait: they poll SC_SPIN_US (spin_us) before
 * sleeping when spins, else they sleep at once. */
void sc_tune_host_waiting(int spins, int spin_us, sc_link_model_t *m);

#endif
