/* SPDX-License-Identifier: BSD-3-Clause */
/* The one-host cost model: every rank is a process and every message is CPU
 * work, so the host's cores are the only resource that matters. A discrete
 * event simulation with processor sharing replays all ranks' schedules: a
 * rank with work to do (a send to copy out, an arrived message to copy in and
 * reduce) is runnable; rank i runs on core i mod cores (where sc-run --bind
 * core, its default, and mpirun --bind-to core put it), and the ranks
 * runnable on one core share it equally. A message becomes available to its
 * receiver alpha after its sender finished it (the wake-up latency, which
 * costs no CPU).
 *
 * Why per core and not the host's cores shared by all runnable ranks: ranks
 * do not move to an idle core. Unbound, Linux keeps two ranks that talk to
 * each other on one core while the other idles (it wakes a receiver on its
 * sender's core); bound, they cannot move. At 4 ranks on 2 cores a tree's
 * two busy ranks (the inner nodes, 1 and 2) have a core each when bound
 * round robin, and the tree is then as fast as their work says. A pool of
 * cores shared by all predicts that fast tree for unbound ranks too, where
 * the two shared a core and the tree took 1.2-1.5x longer.
 *
 * Why not hops plus work divided over the cores: that treats all work as
 * perfectly parallel, so a schedule whose bytes pass through a chain of ranks
 * one after another (a tree's reduce then broadcast, with the ranks waiting
 * in between) looked as cheap as a ring that keeps every rank busy; on this
 * kind of host it measures 1.3-1.5x slower. Processor sharing sees both the
 * chain and the contention.
 *
 * What a message costs besides CPU depends on whether its receiver is still
 * polling (it polls for spin_s, SC_SPIN_US, then sleeps):
 * - polling, it notices the message alpha after the send, plus, with more
 *   ranks than cores, turn_s for each other rank sharing its core (yielding
 *   pollers take no CPU from ranks with work, but a rank sees its message
 *   only when its turn comes);
 * - asleep, it needs wake_s more to be woken and scheduled;
 * - from a sender on its own core, it sees it same_core_s later: the sender
 *   has to give the core up before the receiver can look, where one on the
 *   other core hands over without a switch. Measured at 4 ranks on 2 cores
 *   and 8 B: ring, whose neighbours sit on the other core when ranks are
 *   bound round robin, takes 12.5 us; with ranks bound in blocks (0 and 1
 *   on core 0), two of its four links stay on one core and it takes 17.5-19
 *   us, while Rabenseifner (half of its steps within a core either way)
 *   stays at 14-16 us. Without the term the model priced every link alike
 *   and put Rabenseifner ahead of ring at 32 KiB-1 MiB on 4 ranks, where
 *   ring was faster (by 13% at 32 KiB and 11% at 256 KiB, medians of two
 *   sets of runs four hours apart); fitted without it the defaults miss 3
 *   of 62 points, with it 1 (1.10).
 * A schedule whose ranks mostly wait on a few others (a tree: a chain of
 * hops, its leaves idle) pays these on every hop of its chain; one that keeps
 * every rank busy (Rabenseifner, ring) rarely does. Measured at 8 ranks on 2
 * cores the tree takes 1.6-1.8x recursive doubling's time at 8 B and
 * 1.1-1.3x Rabenseifner's at 1 MiB; without these terms the model picked
 * the tree for both. At 4 ranks, where pollers wait at most one other rank's
 * turn, the tree is the fastest at 64 KiB, and the model says so.
 *
 * Waiting is not free either, and what it costs was fitted to measurements
 * (tools/tune_fit.c): a polling rank yields its core between looks, but each
 * look is a system call and a context switch, so it takes poll_cpu of its
 * core from the ranks with work on that core (a seventh on shared memory);
 * a rank that slept pays wake_cpu_s of CPU to be woken (the context switch,
 * and on TCP the socket's wake-up). Both weigh on schedules
 * whose ranks wait a lot: a tree's idle leaves poll beside the ranks on its
 * critical path, while ring and Rabenseifner keep every rank busy. Over 62
 * measured (ranks, size) points on shared memory, the best fit without them
 * (and without single copy's own rate, below) chose an algorithm more than
 * 10% slower than the fastest at 7 points, worst 1.35x, and put large
 * messages at half their time; with them at 5 points, worst 1.27x, within
 * 10-15% of the times (4 points with the cache term below).
 *
 * Memory: a rank's step touches regions of its buffers (a message's source,
 * a receive's destination, a reduction's operands), and a region it touched
 * within its last reuse_b bytes of traffic is still in cache; any other costs
 * cold_s_per_b more per byte. This is what the pipelined tree gains at large
 * sizes: a chunk's partial sum, its second child's reduction and the final
 * value from above all land in the same chunk within a few chunks' time,
 * while ring's all-gather and Rabenseifner's second half write blocks
 * reduced a whole pass earlier. On shared memory at 8-64 MiB the tree
 * measured 3-13% faster than both, which the model without this term put
 * 1-4% behind them; smaller chunks help the tree most (4 ranks, 16 MiB:
 * 12.7 ms with 256 KiB chunks, 15.3 with 512 KiB, 18.1 with 2 MiB).
 * The replay is of an operation in a loop (a benchmark, training steps): a
 * region first touched in it was touched by the same operation just before,
 * so it is hot when one operation's traffic fits in reuse_b. Counted cold
 * instead, a 1 MiB all-reduce on 4 ranks (3-4 MB of traffic per rank, all
 * of it cached) paid memory prices on every first touch; Rabenseifner, whose
 * reductions read two such regions, came out 14% slower than it ran over
 * TCP and lost to the tree, which it beats by 15-25%.
 *
 * A shared-memory message of pull_min_b bytes or more is read by its
 * receiver (one copy, at pull_s_per_b), so its sender does no copying: a
 * tree's parent with two children copies twice in a row instead of sharing
 * the work with them. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/tune/tune.h"
#include "lib/tune/tune_heap.h"

typedef struct sc_host_rank {
  size_t step;
  double work;        /* CPU seconds left on the current step; < 0: not started */
  int waiting;        /* current step is a receive whose message has not arrived */
  double arrival;     /* when waiting with a known message: when it sees it */
  double since;       /* when waiting: since when (it polls until since + spin_s) */
  const double *cold; /* per step: CPU for its cold bytes (NULL: none) */
  double end;         /* runnable: its core's clock when the step's work is done */
  int polling;        /* waiting and still polling (counted in its core's load) */
  int pending;        /* on the list of ranks to move on at this instant */
} sc_host_rank_t;

/* The regions one rank's steps touch, in its step order. Which are in cache
 * depends on that order alone, never on timing, so each rank's is worked out
 * once before the replay, in one table reused rank after rank. */
typedef struct sc_host_cache {
  uint64_t *key; /* regions touched: (buffer, offset) + 1, 0 = empty slot */
  double *last;  /* the clock at their last touch */
  size_t cap;    /* slots, a power of two */
  double clock;  /* bytes this rank's steps have touched so far */
  double per_op; /* bytes all of this rank's steps touch: one operation's traffic */
} sc_host_cache_t;

/* Whether a region (a buffer and an offset: schedules address a chunk the
 * same way each time) is still in cache: it was touched at most reuse_b
 * bytes of this rank's traffic ago. A region first touched here was last
 * touched by the same operation before it (training and benchmarks repeat
 * an all-reduce on the same buffers), at most one operation's traffic ago.
 * Records the touch. */
static int sc_host_touch_hot(const sc_link_model_t *m, sc_host_cache_t *r, int buf, size_t off) {
  uint64_t k = (((uint64_t)buf << 56) | (uint64_t)off) + 1;
  /* Offsets are multiples of a chunk: the product's low bits alone would
   * put them all in a few slots. */
  uint64_t hash = k * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(hash ^ (hash >> 32)) & (r->cap - 1);
  while (r->key[i] && r->key[i] != k) i = (i + 1) & (r->cap - 1);
  int hot = r->key[i] == k ? r->clock - r->last[i] <= m->reuse_b : r->per_op <= m->reuse_b;
  r->key[i] = k;
  r->last[i] = r->clock;
  return hot;
}

/* Extra CPU for the bytes of a step whose regions are cold (staging, where
 * a received operand lands before its reduction, is always hot). */
static double sc_host_cold(const sc_link_model_t *m, sc_host_cache_t *r, const sc_step_t *st,
                           size_t es) {
  double bytes = (double)st->count * (double)es, cold = 0;
  switch (st->kind) {
  case SC_STEP_SEND:
  case SC_STEP_RECV:
    cold = sc_host_touch_hot(m, r, st->buf, st->off) ? 0 : bytes;
    break;
  case SC_STEP_RECV_REDUCE:
  case SC_STEP_COPY:
    cold = sc_host_touch_hot(m, r, st->src_buf, st->src_off) ? 0 : bytes;
    if (st->buf != st->src_buf || st->off != st->src_off)
      cold += sc_host_touch_hot(m, r, st->buf, st->off) ? 0 : bytes;
    break;
  default:
    break;
  }
  r->clock += bytes;
  return cold * m->cold_s_per_b;
}

void sc_tune_host_cold(const sc_link_model_t *m, size_t es, const sc_step_t *steps, size_t n,
                       uint64_t *key, double *last, size_t cap, double *cold) {
  sc_host_cache_t c = {.key = key, .last = last, .cap = cap};
  memset(c.key, 0, c.cap * sizeof(uint64_t));
  for (size_t k = 0; k < n; k++) c.per_op += (double)steps[k].count * (double)es;
  for (size_t k = 0; k < n; k++) cold[k] = sc_host_cold(m, &c, &steps[k], es);
}

/* CPU seconds of one step on the rank that executes it. A message copied
 * twice (into the kernel or the ring, out of it) costs each side half; a
 * single-copy one costs its receiver the single copy. */
static double sc_host_step_work(const sc_link_model_t *m, const sc_tune_step_t *st, size_t es) {
  double bytes = (double)st->count * (double)es;
  int pulled = m->pull_min_b > 0 && bytes >= m->pull_min_b;
  double send = pulled ? 0.0 : 0.5 * bytes * m->host_s_per_b;
  double recv = pulled ? bytes * m->pull_s_per_b : 0.5 * bytes * m->host_s_per_b;
  switch (st->kind) {
  case SC_STEP_SEND:
    return 0.5 * m->host_s_per_msg + send;
  case SC_STEP_RECV:
    return 0.5 * m->host_s_per_msg + recv;
  case SC_STEP_RECV_REDUCE:
    return 0.5 * m->host_s_per_msg + recv + bytes * m->gamma_s_per_b;
  default:
    return bytes * m->gamma_s_per_b;
  }
}

/* Moves rank i to its next startable state at time now: starts the step's
 * work, or marks it waiting for a message not yet sent or not yet arrived. */
static void sc_host_begin_step(const sc_link_model_t *m, const sc_tune_step_t *steps, size_t nsteps,
                               size_t es, sc_tune_pairs_t *q, int i, sc_host_rank_t *r,
                               double now) {
  int was_waiting = r->waiting;
  r->waiting = 0;
  r->work = -1;
  if (r->step >= nsteps) return;
  const sc_tune_step_t *st = &steps[r->step];
  double wake_cpu = 0;
  if (st->kind == SC_STEP_RECV || st->kind == SC_STEP_RECV_REDUCE) {
    sc_arrivals_t *in = sc_tune_pairs_q(q, st->peer, i);
    if (!was_waiting) r->since = now;
    /* A receiver still polling sees the message at once; one that slept has
     * to be woken and scheduled. */
    double seen = INFINITY;
    int slept = 0; /* the message comes after the spin: the receiver is woken */
    if (in->len) {
      seen = in->t[in->head];
      slept = seen > r->since + m->spin_s;
      if (slept) seen += m->wake_s;
    }
    if (seen > now) {
      r->waiting = 1;
      r->arrival = seen;
      return;
    }
    in->head++;
    in->len--;
    if (slept) wake_cpu = m->wake_cpu_s;
  }
  r->work = sc_host_step_work(m, st, es) + wake_cpu + (r->cold ? r->cold[r->step] : 0.0);
}

/* With more ranks than cores, a polling receiver notices a message only
 * when its turn on a core comes round, after the others sharing it. */
double sc_tune_host_turns(const sc_link_model_t *m, int p) {
  double cores = m->host_cores > 0 ? m->host_cores : 1;
  return p > cores ? ((double)p / cores - 1.0) * m->turn_s : 0.0;
}

/* The replay's state besides the ranks'. Each core keeps a virtual clock:
 * the CPU seconds a rank runnable on it has received so far (every rank
 * runnable on a core gets the same share), so a runnable rank's step ends
 * when its core's clock reaches the key it was given at its start, and only
 * the ranks whose state changes at an instant are visited there: the replay
 * is O(log P) per event, where visiting every rank at every instant made it
 * quadratic (0.4 s per candidate at 1,024 ranks). */
typedef struct sc_host_sim {
  int cores;
  double copies;     /* ranks each replayed rank stands for */
  double *vclock;    /* per core */
  int *nrun, *npoll; /* per core: replayed ranks runnable, polling */
  sc_ready_t *run;   /* per core, a heap of (end key, rank) of its runnable ranks */
  int run_cap, *nrun_heap;
  sc_ready_t *ev; /* (time, 2 rank + what): a message seen (0), a poller sleeps (1) */
  int nev, ev_cap;
  int *pending, npending; /* ranks to move on at this instant */
} sc_host_sim_t;

static sc_result_t sc_host_event(sc_host_sim_t *h, double t, int i, int what) {
  if (h->nev == h->ev_cap) {
    int cap = h->ev_cap ? 2 * h->ev_cap : 64;
    sc_ready_t *ev = realloc(h->ev, (size_t)cap * sizeof(*ev));
    if (!ev) return SC_ERR(SC_ERR_NOMEM, "host cost model events");
    h->ev = ev;
    h->ev_cap = cap;
  }
  sc_ready_push(h->ev, &h->nev, (sc_ready_t){.key = t, .rank = 2 * i + what});
  return SC_SUCCESS;
}

static void sc_host_wake(sc_host_sim_t *h, sc_host_rank_t *rk, int i) {
  if (rk[i].pending) return;
  rk[i].pending = 1;
  h->pending[h->npending++] = i;
}

/* Whether an event popped at its time still holds: the rank still waits for
 * that message, or still polls until then. */
static int sc_host_event_live(const sc_link_model_t *m, const sc_host_rank_t *r, sc_ready_t e) {
  if (!r->waiting) return 0;
  return e.rank % 2 ? r->polling && r->since + m->spin_s == e.key : r->arrival == e.key;
}

/* Moves rank i on at time now (sc_host_begin_step) and files what follows:
 * runnable on its core's heap, or waiting with the events of its wait. */
static sc_result_t sc_host_move_on(const sc_link_model_t *m, sc_host_sim_t *h,
                                   const sc_tune_replay_t *rp, size_t es, sc_tune_pairs_t *q,
                                   sc_host_rank_t *rk, int i, double now) {
  const sc_tune_step_t *steps = sc_tune_replay_steps(rp, i);
  const size_t nsteps = sc_tune_replay_len(rp, i);
  sc_host_rank_t *r = &rk[i];
  const int c = i % h->cores, was_waiting = r->waiting;
  const double arrival = was_waiting ? r->arrival : INFINITY;
  sc_host_begin_step(m, steps, nsteps, es, q, i, r, now);
  if (r->waiting) {
    if (!was_waiting && m->spin_s > 0) {
      r->polling = 1;
      h->npoll[c]++;
      SC_CHECK(sc_host_event(h, r->since + m->spin_s, i, 1));
    }
    if (r->arrival != arrival && r->arrival < INFINITY)
      SC_CHECK(sc_host_event(h, r->arrival, i, 0));
    return SC_SUCCESS;
  }
  if (r->polling) {
    r->polling = 0;
    h->npoll[c]--;
  }
  if (r->step >= nsteps) return SC_SUCCESS;
  r->end = h->vclock[c] + r->work;
  h->nrun[c]++;
  sc_ready_push(h->run + (size_t)c * (size_t)h->run_cap, &h->nrun_heap[c],
                (sc_ready_t){.key = r->end, .rank = i});
  return SC_SUCCESS;
}

sc_result_t sc_tune_simulate_host(const sc_link_model_t *m, int p, int w, int by_xor, size_t es,
                                  const sc_sched_t *scheds, double *seconds) {
  sc_tune_replay_t rp = {0};
  sc_tune_replay_reset(&rp, m->cold_s_per_b > 0);
  sc_result_t res = SC_SUCCESS;
  for (int i = 0; i < w && res == SC_SUCCESS; i++) res = sc_tune_replay_add(&rp, m, es, &scheds[i]);
  if (res == SC_SUCCESS) res = sc_tune_replay_host(m, p, by_xor, es, &rp, seconds);
  sc_tune_replay_free(&rp);
  return res;
}

sc_result_t sc_tune_replay_host(const sc_link_model_t *m, int p, int by_xor, size_t es,
                                const sc_tune_replay_t *rp, double *seconds) {
  const int w = rp->w;
  sc_tune_pairs_t pairs, *q = &pairs;
  sc_result_t res = sc_tune_pairs_build(q, p, by_xor, rp);
  if (res != SC_SUCCESS) return res;
  sc_host_sim_t h = {.cores = m->host_cores > 0 ? m->host_cores : 1};
  /* A window rank stands for the p / w ranks its schedule maps onto, all on
   * its core (w and p are multiples of the cores), in the same state. */
  h.copies = (double)p / (double)w;
  h.run_cap = w / h.cores + 1;
  sc_host_rank_t *rk = calloc((size_t)w, sizeof(*rk));
  h.vclock = calloc((size_t)h.cores, sizeof(double));
  h.nrun = calloc((size_t)h.cores, sizeof(int));
  h.npoll = calloc((size_t)h.cores, sizeof(int));
  h.nrun_heap = calloc((size_t)h.cores, sizeof(int));
  h.run = calloc((size_t)h.cores * (size_t)h.run_cap, sizeof(sc_ready_t));
  h.pending = calloc((size_t)w, sizeof(int));
  double *speed = calloc((size_t)h.cores, sizeof(*speed));
  if (!rk || !h.vclock || !h.nrun || !h.npoll || !h.nrun_heap || !h.run || !h.pending || !speed) {
    res = SC_ERR(SC_ERR_NOMEM, "host cost model state for %d ranks", p);
    goto done;
  }
  if (m->cold_s_per_b > 0 && !rp->with_cold) {
    res = SC_ERR(SC_ERR_INTERNAL, "host cost model: schedules kept without their cache term");
    goto done;
  }
  for (int i = 0; i < w && m->cold_s_per_b > 0 && rp->cold; i++)
    rk[i].cold = rp->cold + rp->first[i];
  double now = 0;
  const double alpha = m->alpha_s + sc_tune_host_turns(m, p);
  int unfinished = 0;
  for (int i = 0; i < w; i++) {
    rk[i].work = -1;
    if (sc_tune_replay_len(rp, i)) unfinished++;
    sc_host_wake(&h, rk, i);
  }
  for (;;) {
    /* Move on the ranks whose state changed: a step ended, a message was sent
     * to a waiting rank (its arrival is now known) or is seen now. */
    for (int k = 0; k < h.npending && res == SC_SUCCESS; k++) {
      const int i = h.pending[k];
      rk[i].pending = 0;
      if (rk[i].step < sc_tune_replay_len(rp, i) && rk[i].work < 0)
        res = sc_host_move_on(m, &h, rp, es, q, rk, i, now);
    }
    h.npending = 0;
    if (res != SC_SUCCESS || !unfinished) break;
    /* The next instant a waiting rank's state changes: it sees its message,
     * or it stops polling and sleeps (which frees the share it took). */
    while (h.nev > 0 && !sc_host_event_live(m, &rk[h.ev[0].rank / 2], h.ev[0]))
      sc_ready_pop(h.ev, &h.nev);
    double next_event = h.nev > 0 ? h.ev[0].key : INFINITY;
    int runnable = 0;
    double dt = INFINITY;
    for (int c = 0; c < h.cores; c++) {
      runnable += h.nrun[c];
      double load = h.copies * ((double)h.nrun[c] + m->poll_cpu * (double)h.npoll[c]);
      speed[c] = load > 1.0 ? 1.0 / load : 1.0;
      if (h.nrun[c]) {
        double d = (h.run[(size_t)c * (size_t)h.run_cap].key - h.vclock[c]) / speed[c];
        if (d < dt) dt = d;
      }
    }
    if (!runnable && next_event == INFINITY) {
      res = SC_ERR(SC_ERR_INTERNAL, "host cost model: the schedules of %d ranks deadlock", p);
      break;
    }
    /* Land exactly on the event so a receive sees its message as arrived. */
    if (next_event <= now + dt) {
      dt = next_event - now;
      now = next_event;
    } else {
      now += dt;
    }
    /* End the steps that ran out of work; an ended send delivers. */
    for (int c = 0; c < h.cores; c++) {
      h.vclock[c] += dt * speed[c];
      sc_ready_t *heap = h.run + (size_t)c * (size_t)h.run_cap;
      while (h.nrun_heap[c] > 0 && heap[0].key - h.vclock[c] <= 1e-15) {
        const int i = sc_ready_pop(heap, &h.nrun_heap[c]).rank;
        const sc_tune_step_t *st = &sc_tune_replay_steps(rp, i)[rk[i].step];
        h.nrun[c]--;
        if (st->kind == SC_STEP_SEND) {
          double lat = alpha + (i % h.cores == st->peer % h.cores ? m->same_core_s : 0.0);
          res = sc_arrivals_push(sc_tune_pairs_q(q, i, st->peer), now + lat);
          if (res != SC_SUCCESS) goto done;
          /* Its reader: the replayed rank standing for the receiver. */
          if (rk[st->peer % w].waiting) sc_host_wake(&h, rk, st->peer % w);
        }
        if (++rk[i].step >= sc_tune_replay_len(rp, i)) unfinished--;
        rk[i].work = -1;
        sc_host_wake(&h, rk, i);
      }
    }
    /* The waits that end or change now. */
    while (h.nev > 0 && h.ev[0].key <= now) {
      sc_ready_t e = sc_ready_pop(h.ev, &h.nev);
      sc_host_rank_t *r = &rk[e.rank / 2];
      if (!sc_host_event_live(m, r, e)) continue;
      if (e.rank % 2) {
        r->polling = 0;
        h.npoll[e.rank / 2 % h.cores]--;
      } else {
        sc_host_wake(&h, rk, e.rank / 2);
      }
    }
  }
  if (res == SC_SUCCESS) *seconds = now;
done:
  sc_tune_pairs_free(q);
  free(rk);
  free(h.vclock);
  free(h.nrun);
  free(h.npoll);
  free(h.nrun_heap);
  free(h.run);
  free(h.pending);
  free(h.ev);
  free(speed);
  return res;
}
