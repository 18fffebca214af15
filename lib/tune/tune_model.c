/* SPDX-License-Identifier: BSD-3-Clause */
/* Timing simulation of a collective's schedules under the alpha-beta model
 * (see lib/tune/tune.h). Runs once per (collective, size) a communicator sees; the
 * result is cached by the caller. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/tune/tune.h"
#include "lib/tune/tune_heap.h"

sc_result_t sc_arrivals_push(sc_arrivals_t *q, double t) {
  if (q->head + q->len == q->cap) {
    if (q->head > 0) {
      memmove(q->t, q->t + q->head, (size_t)q->len * sizeof(double));
      q->head = 0;
    } else {
      /* More messages than its receiver reads (a slice of the pool is full). */
      size_t ncap = q->cap ? 2 * (size_t)q->cap : 8;
      if (ncap > UINT32_MAX) return SC_ERR(SC_ERR_NOMEM, "cost model queue of %zu", ncap);
      double *n = realloc(q->pooled ? NULL : q->t, ncap * sizeof(double));
      if (!n) return SC_ERR(SC_ERR_NOMEM, "cost model queue of %zu", ncap);
      if (q->pooled) memcpy(n, q->t, (size_t)q->len * sizeof(double));
      q->t = n;
      q->cap = (uint32_t)ncap;
      q->pooled = 0;
    }
  }
  q->t[q->head + q->len++] = t;
  return SC_SUCCESS;
}

const char *sc_tune_kind_name(sc_tune_kind_t kind) {
  switch (kind) {
  case SC_TUNE_NET:
    return "network";
  case SC_TUNE_HOST_TCP:
    return "one host, tcp";
  case SC_TUNE_HOST_MEM:
    return "one host, shared memory";
  }
  return "?";
}

void sc_tune_default_model(sc_tune_kind_t kind, int host_cores, size_t single_copy_min,
                           sc_link_model_t *m) {
  memset(m, 0, sizeof(*m));
  m->gamma_s_per_b = 1.0 / 6.0e9;
  m->host_cores = host_cores;
  /* On one host (lib/tune/tune_host.c) the values below were fitted with
   * sc_tune_fit (perf/README.md) to sc_allreduce_perf -a compare on 3-8 ranks,
   * 8 B-64 MiB, three runs each, ranks bound to cores by sc-run, on the 2-core
   * development machine. SC_TUNE=measure refits alpha and the bandwidths on
   * the communicator. */
  if (kind == SC_TUNE_HOST_MEM) {
    /* Two copies through a ring cost 15.8 GB/s for both in cache, memory
     * out of cache 43% more per byte, one process_vm_readv 7.4 GB/s; a
     * message within one core reaches its receiver 2.4 us later than one
     * from the other core; a rank that slept costs a quarter of a
     * microsecond to wake, a polling one a seventh of its core; a chunk
     * stays in cache for 3.9 MB of a rank's traffic. Fitted to two sets of
     * runs four hours apart (the second 1.4-1.8x slower: this machine's
     * speed drifts), so that a pick holds in both. Ties between algorithms
     * are decided by the last digit, so these are sc_tune_fit's own, to
     * its four digits. */
    m->alpha_s = 0.7223e-6;
    m->beta_s_per_b = 6.311e-11;
    m->host_s_per_b = 6.311e-11;
    m->host_s_per_msg = 0.1856e-6;
    m->pull_min_b = (double)single_copy_min;
    m->pull_s_per_b = 1.357e-10;
    m->turn_s = 1.277e-6;
    m->wake_s = 5.812e-6;
    m->wake_cpu_s = 0.2621e-6;
    m->poll_cpu = 0.1506;
    m->cold_s_per_b = 2.695e-11;
    m->reuse_b = 3.9e6;
    m->same_core_s = 2.446e-6;
    return;
  }
  if (kind == SC_TUNE_HOST_TCP) {
    /* Loopback TCP: a message costs ~9 us of CPU between its two ends (the
     * system calls on both sides and the socket's wake-up), whether its
     * receiver slept or not; memory out of cache (a region not touched in
     * the last 3.9 MB of a rank's traffic) costs a sixth more per byte.
     * The all-reduce's candidates send about as many messages as each
     * other, so their picks are the same with anything from 0.4 to 12 us
     * per message; the all-to-all's are not (pairwise sends P - 1 messages
     * per rank, Bruck log2 P), and with 0.4 us, as the all-reduce's runs
     * alone had it, the model put pairwise at 50 us on 16 ranks where it
     * took 900 (Bruck: 424). The per-message terms were fitted to both
     * collectives' runs (3-8 ranks, and the all-to-all's on 4, 8 and 16),
     * the per-byte ones kept from the all-reduce's fit. same_core_s is not
     * fitted here (0): these pick within 10% of the fastest without it. */
    m->alpha_s = 2.369e-6;
    m->beta_s_per_b = 2.44e-10;
    m->host_s_per_b = 2.44e-10;
    m->host_s_per_msg = 9.322e-6;
    m->turn_s = 1.61e-6;
    m->wake_s = 3.154e-6;
    m->wake_cpu_s = 0.1151e-6;
    m->poll_cpu = 0.1285;
    m->cold_s_per_b = 4.379e-11;
    m->reuse_b = 3.905e6;
    return;
  }
  /* TCP between hosts, until SC_TUNE=measure says otherwise: one-way small
   * message ~40 us, ~1.5 GB/s per stream. */
  m->host_cores = 0;
  m->alpha_s = 40e-6;
  m->beta_s_per_b = 1.0 / 1.5e9;
  m->host_s_per_b = 1.0 / 1.5e9;
  m->host_s_per_msg = 15e-6;
}

void sc_tune_fit_msg(double round_s, double fan_s, int k, double *alpha_s, double *msg_cpu_s) {
  double msg = k >= 2 && fan_s > 0 ? (fan_s - round_s) / (k - 1) : 0.0;
  if (!(msg > 0)) msg = 0; /* also NaN */
  if (msg > round_s) msg = round_s;
  *msg_cpu_s = msg;
  *alpha_s = round_s - msg;
}

void sc_tune_host_waiting(int spins, int spin_us, sc_link_model_t *m) {
  m->spin_s = spins && spin_us > 0 ? spin_us * 1e-6 : 0;
}

typedef struct sc_rank_clock {
  size_t step;
  double now, local_free, local_in;
  int queued; /* in the ready heap */
} sc_rank_clock_t;

/* Bytes a step moves or computes on. A sparse set (count k, entries of
 * 4 + es bytes) is priced at its bound: its 8-byte count, k entries, and
 * with SC_SPF_MASK a byte per entry. A merge reads two sets. */
static double sc_tune_step_bytes(const sc_tune_step_t *st, size_t es, size_t k) {
  const double set = (double)k * (double)(4 + es);
  switch (st->kind) {
  case SC_STEP_SPARSE_SEND:
  case SC_STEP_SPARSE_RECV:
    return 8.0 + set + ((st->flags & SC_SPF_MASK) ? (double)k : 0.0);
  case SC_STEP_SPARSE_RECV_MERGE:
    return 8.0 + set;
  case SC_STEP_SPARSE_SUM:
    return set;
  default:
    return (double)st->count * (double)es;
  }
}

/* The ranks whose next step can run, earliest first: sc_ready_t. */

/* Queues rank i if its next step can run: a send or a local step at its
 * clock, a receive once its message is on the way (at the later of the two). */
static void sc_tune_offer(sc_rank_clock_t *rc, const sc_tune_replay_t *rp, sc_tune_pairs_t *q,
                          int i, sc_ready_t *heap, int *nheap) {
  sc_rank_clock_t *c = &rc[i];
  if (c->queued || c->step == sc_tune_replay_len(rp, i)) return;
  const sc_tune_step_t *st = &sc_tune_replay_steps(rp, i)[c->step];
  double key = c->now;
  if (sc_tune_step_is_recv(st)) {
    const sc_arrivals_t *in = sc_tune_pairs_q(q, st->peer, i);
    if (in->len == 0) return; /* offered again when the sender gets there */
    if (in->t[in->head] > key) key = in->t[in->head];
  }
  c->queued = 1;
  sc_ready_push(heap, nheap, (sc_ready_t){.key = key, .rank = i});
}

/* host_of NULL (or no local link in m): every rank has a network link of its
 * own. Else a message between ranks of one host uses the sender's and the
 * receiver's local links (local_alpha_s, local_beta_s_per_b), and one between
 * hosts the one network link of the sender's host out and of the receiver's
 * in: the ranks of a host share it. Steps run in the order of the times they
 * can start (a discrete-event replay), so a shared link serves its messages
 * first come, first served: replaying each rank until it blocks instead
 * booked a host's link for one rank's later message before its host-mate's
 * earlier one, and priced two rails sharing a link (hier) a third above
 * their critical path. A message between hosts also costs its sender and its
 * receiver half of msg_cpu_s each, on their clocks. */
static sc_result_t sc_tune_simulate(const sc_link_model_t *m, int p, int by_xor, size_t es,
                                    size_t k, const int *host_of, const sc_tune_replay_t *rp,
                                    double *seconds) {
  const int w = rp->w;
  sc_tune_pairs_t pairs, *q = &pairs;
  sc_result_t r = sc_tune_pairs_build(q, p, by_xor, rp);
  if (r != SC_SUCCESS) return r;
  sc_rank_clock_t *rc = calloc((size_t)p, sizeof(*rc));
  double *nic = calloc(2 * (size_t)p, sizeof(double)); /* out [0, p), in [p, 2p) */
  sc_ready_t *heap = calloc((size_t)p, sizeof(*heap));
  int nheap = 0, finished = 0;
  if (!rc || !nic || !heap) {
    r = SC_ERR(SC_ERR_NOMEM, "cost model state for %d ranks", p);
    goto done;
  }
  if (m->local_beta_s_per_b <= 0) host_of = NULL;
  for (int i = 0; i < w; i++) {
    finished += sc_tune_replay_len(rp, i) == 0;
    sc_tune_offer(rc, rp, q, i, heap, &nheap);
  }
  while (nheap > 0 && r == SC_SUCCESS) {
    const int i = sc_ready_pop(heap, &nheap).rank;
    sc_rank_clock_t *c = &rc[i];
    c->queued = 0;
    const sc_tune_step_t *st = &sc_tune_replay_steps(rp, i)[c->step];
    const int hi = host_of ? host_of[i] : i;
    double bytes = sc_tune_step_bytes(st, es, k);
    const int local = host_of && st->peer >= 0 && host_of[st->peer] == host_of[i];
    const double beta = local ? m->local_beta_s_per_b : m->beta_s_per_b;
    const double half_msg = local ? 0.0 : 0.5 * m->msg_cpu_s;
    if (st->kind == SC_STEP_SEND || st->kind == SC_STEP_SPARSE_SEND) {
      double *link = local ? &c->local_free : &nic[hi];
      c->now += half_msg; /* posting it: the rank's next step waits */
      double start = c->now > *link ? c->now : *link;
      *link = start + bytes * beta;
      r = sc_arrivals_push(sc_tune_pairs_q(q, i, st->peer),
                           *link + (local ? m->local_alpha_s : m->alpha_s));
      if (r != SC_SUCCESS) break;
      /* Its reader (in a window, maybe this rank: offered below, at its next step). */
      if (st->peer % w != i) sc_tune_offer(rc, rp, q, st->peer % w, heap, &nheap);
    } else if (sc_tune_step_is_recv(st)) {
      sc_arrivals_t *in = sc_tune_pairs_q(q, st->peer, i);
      double arrival = in->t[in->head++];
      in->len--;
      /* Two senders to one rank (or host) share its incoming link. */
      double *ingress_free = local ? &c->local_in : &nic[(size_t)p + (size_t)hi];
      double t = c->now > arrival ? c->now : arrival;
      double ingress = *ingress_free + bytes * beta;
      if (ingress > t) t = ingress;
      *ingress_free = t;
      t += half_msg;
      if (st->kind == SC_STEP_RECV_REDUCE) t += bytes * m->gamma_s_per_b;
      if (st->kind == SC_STEP_SPARSE_RECV_MERGE) t += 2 * bytes * m->gamma_s_per_b;
      c->now = t;
    } else {
      c->now += bytes * m->gamma_s_per_b;
    }
    if (++c->step == sc_tune_replay_len(rp, i)) finished++;
    sc_tune_offer(rc, rp, q, i, heap, &nheap);
  }
  if (r == SC_SUCCESS && finished < w)
    r = SC_ERR(SC_ERR_INTERNAL, "cost model: the schedules of %d ranks deadlock", p);
  if (r == SC_SUCCESS) {
    double t = 0;
    for (int i = 0; i < w; i++) t = rc[i].now > t ? rc[i].now : t;
    *seconds = t;
  }
done:
  sc_tune_pairs_free(q);
  free(rc);
  free(nic);
  free(heap);
  return r;
}

static int sc_tune_pow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

/* An uneven all-gather whose blocks are equal and in rank order: its ranks'
 * schedules are then shifts of each other. */
static int sc_tune_even_blocks(const sc_coll_args_t *a) {
  if (!a->recvcounts || !a->rdispls) return 0;
  for (int i = 0; i < a->nranks; i++)
    if (a->recvcounts[i] != a->recvcounts[0] || a->rdispls[i] != (size_t)i * a->recvcounts[0])
      return 0;
  return 1;
}

int sc_tune_window(const sc_link_model_t *m, const sc_coll_args_t *a, int sym) {
  const int p = a->nranks;
  if (p <= SC_TUNE_FULL_REPLAY_RANKS || sym == SC_SYM_NONE) return p;
  if (a->coll == SC_COLL_ALLGATHERV && !sc_tune_even_blocks(a)) return p;
  /* An all-reduce's P blocks: with fewer elements than ranks some are empty and
   * the ranks' schedules differ (and are short: the whole replay is cheap). */
  if (a->coll == SC_COLL_ALLREDUCE && a->count < (size_t)p) return p;
  /* Blocks of base and base + 1 elements: the same number of chunks each, or
   * the ranks' messages differ in number. Under XOR the ranks' blocks are
   * not a shift of each other: only even ones. */
  const size_t base = a->count / (size_t)p, chunk = a->chunk_elems ? a->chunk_elems : 1;
  if (a->coll == SC_COLL_ALLREDUCE && a->count % (size_t)p &&
      (base % chunk == 0 || sym == SC_SYM_XOR))
    return p;
  /* XOR by a multiple of w maps ranks onto ranks only on powers of two. */
  const int by_xor = sym == SC_SYM_XOR;
  if (by_xor && !sc_tune_pow2(p)) return p;
  /* One host: rank r runs on core r mod cores, so only a shift by a multiple
   * of the cores maps every rank onto a rank of its own core. Not an XOR: the
   * cache term keys a rank's regions by offset, and recursive halving's ranks
   * keep blocks at offsets that do not map onto each other (the window was up
   * to 15% off the full replay). */
  if (m->host_cores > 0) return p % m->host_cores || by_xor ? p : m->host_cores;
  if (!a->host_of || m->local_beta_s_per_b <= 0) return 1;
  /* Hosts sharing a link serve their ranks' messages in an order that an
   * XOR of the ranks does not keep (Rabenseifner's window was 5% off). */
  if (by_xor) return p;
  int l = 1;
  while (l < p && a->host_of[l] == a->host_of[0]) l++;
  if (p % l) return p;
  for (int r = 0; r < p; r++)
    if (a->host_of[r] != r / l) return p;
  return l;
}

void sc_tune_scratch_free(sc_tune_scratch_t *t) {
  sc_sched_free(&t->work);
  sc_tune_replay_free(&t->replay);
  *t = (sc_tune_scratch_t){0};
}

/* The first w ranks' schedules replayed (w < p: a window, sc_tune_window). */
static sc_result_t sc_tune_predict_w(const sc_link_model_t *m, sc_sched_gen_t gen,
                                     const sc_coll_args_t *a, int w, int by_xor,
                                     sc_tune_scratch_t *t, double *seconds) {
  int p = a->nranks;
  sc_tune_replay_t *rp = &t->replay;
  sc_tune_replay_reset(rp, m->host_cores > 0 && m->cold_s_per_b > 0);
  sc_result_t r = SC_SUCCESS;
  for (int i = 0; i < w && r == SC_SUCCESS; i++) {
    sc_coll_args_t ai = *a;
    ai.rank = i;
    sc_sched_reset(&t->work);
    r = gen(&ai, &t->work);
    if (r == SC_SUCCESS) r = t->work.status;
    if (r == SC_SUCCESS) r = sc_tune_replay_add(rp, m, a->elem_size, &t->work);
  }
  if (r == SC_SUCCESS)
    r = m->host_cores > 0
            ? sc_tune_replay_host(m, p, by_xor, a->elem_size, rp, seconds)
            : sc_tune_simulate(m, p, by_xor, a->elem_size, a->count, a->host_of, rp, seconds);
  return r;
}

sc_result_t sc_tune_predict(const sc_link_model_t *m, sc_sched_gen_t gen, const sc_coll_args_t *a,
                            double *seconds) {
  sc_tune_scratch_t t = {0};
  sc_result_t r = sc_tune_predict_w(m, gen, a, a->nranks, 0, &t, seconds);
  sc_tune_scratch_free(&t);
  return r;
}

sc_result_t sc_tune_predict_in(const sc_link_model_t *m, sc_sched_gen_t gen,
                               const sc_coll_args_t *a, int sym, sc_tune_scratch_t *t,
                               double *seconds) {
  const int w = sc_tune_window(m, a, sym), by_xor = sym == SC_SYM_XOR;
  if (w < a->nranks || a->nranks <= SC_TUNE_WINDOW_ALWAYS_RANKS || a->coll != SC_COLL_ALLREDUCE ||
      a->count < (size_t)a->nranks)
    return sc_tune_predict_w(m, gen, a, w, by_xor, t, seconds);
  /* An all-reduce whose larger blocks take one more chunk: priced on blocks
   * of the smaller size (one chunk of one element per larger block left out),
   * as a full replay would be beyond reach. */
  sc_coll_args_t even = *a;
  even.count = a->count / (size_t)a->nranks * (size_t)a->nranks;
  return sc_tune_predict_w(m, gen, &even, sc_tune_window(m, &even, sym), by_xor, t, seconds);
}

sc_result_t sc_tune_predict_symmetric(const sc_link_model_t *m, sc_sched_gen_t gen,
                                      const sc_coll_args_t *a, int sym, double *seconds) {
  sc_tune_scratch_t t = {0};
  sc_result_t r = sc_tune_predict_in(m, gen, a, sym, &t, seconds);
  sc_tune_scratch_free(&t);
  return r;
}
