/* SPDX-License-Identifier: BSD-3-Clause */
/* SC_TUNE=measure (and auto across hosts, or over UCX or verbs on one host:
 * sc_tune_measures): a short calibration at communicator creation. alpha from
 * dissemination barriers (ceil(log2 P) message rounds each), and across
 * hosts its split into the wire's latency and each message's CPU from a fan
 * (the barrier's ceil(log2 P) messages out and in per rank, posted at once);
 * beta from the steps of a ring all-gather (at most SC_CALIB_RING_STEPS of m
 * bytes), gamma from the local reduction kernel. Rank 0's fit is broadcast
 * so every rank chooses alike. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/registry.h"
#include "kernels/cpu/reduce.h"
#include "lib/base/clock.h"
#include "lib/base/log.h"
#include "lib/core/comm.h"
#include "lib/core/exec_device.h"
#include "lib/tune/tune.h"

static double sc_seconds(void) {
  return (double)sc_clock_ns() * 1e-9;
}

/* Steps of the ring the link rate is fitted from: a ring all-gather's steps
 * are all alike, so a fixed number of them measures a step as well as P - 1
 * do, and the calibration's time stays flat in P (at 64 ranks on 32
 * emulated hosts the whole all-gathers were most of the communicator's
 * creation). */
enum { SC_CALIB_RING_STEPS = 8 };

/* The longest run of one all-reduce candidate the calibration makes (as the
 * fit just made predicts it): the ring's 2 (P - 1) steps and the others'
 * log2 P grow with P, and past this a candidate keeps factor 1 instead of
 * lengthening every communicator's creation (the ring at 256 KiB is about
 * 60 ms at 1,024 ranks on a 10 Gbit/s network, seconds at 16,384). */
#define SC_CALIB_CANDIDATE_MAX_S 0.1

static int sc_calib_ring_steps(int p) {
  return p - 1 < SC_CALIB_RING_STEPS ? p - 1 : SC_CALIB_RING_STEPS;
}

/* The first min(P - 1, SC_CALIB_RING_STEPS) steps of the ring all-gather:
 * every rank passes a block of count bytes to its right neighbour per step,
 * forwarding what it received in the step before. The blocks land one after
 * the other in RECV (steps + 1 blocks; P blocks are allocated). */
static sc_result_t sc_calib_ring_steps_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  const int p = a->nranks, r = a->rank;
  const size_t n = a->count;
  const int steps = sc_calib_ring_steps(p);
  if (n == 0 || p < 2) return s->status;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  sc_sched_send(s, right, SC_BUF_SEND, 0, n);
  for (int h = 0; h < steps; h++) {
    sc_sched_recv(s, left, SC_BUF_RECV, (size_t)(h + 1) * n, n);
    if (h + 1 < steps) sc_sched_send(s, right, SC_BUF_RECV, (size_t)(h + 1) * n, n);
  }
  return s->status;
}

/* ceil(log2 P): a dissemination barrier's rounds, and the fan's width. */
static int sc_calib_rounds(int p) {
  int k = 0;
  while ((1L << k) < p) k++;
  return k;
}

/* The fan: ceil(log2 P) messages of count bytes out, to r + 2^j, and as many
 * in, from r - 2^j, all posted at once: the dissemination barrier's partners,
 * so that it connects no pair the barrier did not. Received blocks land one
 * after the other in RECV. */
static sc_result_t sc_calib_fan_schedule(const sc_coll_args_t *a, sc_sched_t *s) {
  const int p = a->nranks, r = a->rank, k = sc_calib_rounds(p);
  const size_t n = a->count;
  if (n == 0 || p < 2) return s->status;
  for (int j = 0; j < k; j++) sc_sched_send(s, (r + (1 << j)) % p, SC_BUF_SEND, 0, n);
  for (int j = 0; j < k; j++)
    sc_sched_recv(s, (r - (1 << j) % p + p) % p, SC_BUF_RECV, (size_t)j * n, n);
  return s->status;
}

static int sc_calib_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of n timings: one rep that lost its core for milliseconds (a
 * busy machine) moves a mean by a tenth of that, and the fit's link rate
 * with it (beta is the step less alpha); a median does not move. */
static double sc_calib_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof(*t), sc_calib_cmp);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Runs gen's schedule (count bytes a block from send into recv) once to warm
 * up, then reps times timed (t: reps entries), into *median seconds. */
static sc_result_t sc_calib_time(sc_comm_t *comm, sc_sched_gen_t gen, const void *send, void *recv,
                                 size_t count, double *t, int reps, double *median) {
  sc_op_t op = {.coll = SC_COLL_ALLGATHER,
                .sendbuf = send,
                .recvbuf = recv,
                .count = count,
                .dtype = SC_UINT8,
                .op = SC_SUM,
                .gen = gen};
  SC_CHECK(sc_op_run_blocking(comm, &op));
  for (int i = 0; i < reps; i++) {
    double t0 = sc_seconds();
    SC_CHECK(sc_op_run_blocking(comm, &op));
    t[i] = sc_seconds() - t0;
  }
  *median = sc_calib_median(t, reps);
  return SC_SUCCESS;
}

/* fit = {alpha s, beta s/B, gamma s/B, host s/B, message CPU s} and the all-reduce
 * candidates' network factors (either NULL: kept) become comm's model; the
 * choices and the schedules cached under the old one are dropped. */
static void install(sc_comm_t *comm, const double *fit, const double *scale) {
  pthread_mutex_lock(&comm->tune.lock);
  if (fit) {
    comm->tune.model.alpha_s = fit[0];
    comm->tune.model.beta_s_per_b = fit[1];
    comm->tune.model.gamma_s_per_b = fit[2];
    comm->tune.model.host_s_per_b = fit[3];
    comm->tune.model.msg_cpu_s = fit[4];
    comm->tune.calibrated = 1;
  }
  if (scale)
    memcpy(comm->tune.model.allreduce_beta_scale, scale,
           sizeof(comm->tune.model.allreduce_beta_scale));
  memset(comm->tune.cache, 0, sizeof(comm->tune.cache));
  if (comm->tune.a2av_hier_auto) comm->tune.a2av_hier = -1;
  pthread_mutex_unlock(&comm->tune.lock);
  comm->ex.sched_key.valid = 0;
  sc_exec_device_model_changed(comm);
}

static void install_fit(sc_comm_t *comm, const double fit[5], const double *scale, const char *how,
                        const char *whose) {
  install(comm, fit, scale);
  SC_INFO(SC_SUBSYS_TUNE,
          "%s on %d ranks%s: alpha %.1f us, message CPU %.1f us, link %.3g GB/s, host %.3g GB/s, "
          "reduce %.3g GB/s",
          how, comm->nranks, whose, fit[0] * 1e6, fit[4] * 1e6, 1e-9 / fit[1], 1e-9 / fit[3],
          1e-9 / fit[2]);
}

/* The all-reduce candidates' network factors (sc_link_model_t's
 * allreduce_beta_scale) under the fit just installed. Each flat candidate
 * runs once to warm up, then twice timed, at 1-4 MiB (past tbf's or a
 * switch's burst, where the network's bytes outweigh its startups; less,
 * down to 256 KiB, on a slow network); its
 * efficiency is the faster run less the replay's time without bytes, over
 * the replay's bytes' time. The factor is that over the ring's: the fit was
 * made from ring steps, so what the ring misses is the fit's error, common
 * to all; only an algorithm slower than the ring's measure is charged more
 * (clamped to [1, 4]: a fast run on a noisy network never makes a
 * candidate cheaper than the replay says). A candidate whose run the fit
 * predicts longer than SC_CALIB_CANDIDATE_MAX_S is not run and keeps factor
 * 1 (all do when the ring is one of them). Rank 0's factors are broadcast:
 * every rank chooses alike. */
static sc_result_t calib_allreduce_scales(sc_comm_t *comm) {
  int n;
  const sc_algo_entry_t *c = sc_algo_candidates(SC_COLL_ALLREDUCE, &n);
  if (n > SC_TUNE_MAX_CANDIDATES) n = SC_TUNE_MAX_CANDIDATES;
  const int ring = sc_algo_find(SC_COLL_ALLREDUCE, "ring");
  if (ring < 0 || ring >= n) return SC_SUCCESS;
  pthread_mutex_lock(&comm->tune.lock);
  sc_link_model_t m = comm->tune.model;
  pthread_mutex_unlock(&comm->tune.lock);
  const int p = comm->nranks;
  /* 1 MiB, or more up to 4 MiB where startups weigh more than a fifth of
   * the bytes (5 P (alpha + message CPU) / beta), unless the ring would take over 20 ms: on
   * a slow network (100 Mbit/s, 2 hosts) 1 MiB made the step 1.2 s at
   * creation; no less than 256 KiB, twice tbf's burst. */
  double want = 5.0 * p * (m.alpha_s + m.msg_cpu_s) / m.beta_s_per_b, ring_s;
  size_t bytes = (size_t)256 << 10;
  while (bytes < ((size_t)4 << 20) && (bytes < ((size_t)1 << 20) || (double)bytes < want)) {
    sc_coll_args_t a2;
    sc_tune_fill_args(comm, SC_COLL_ALLREDUCE, 2 * bytes / sizeof(float), sizeof(float), 0, 0, &a2);
    if (sc_tune_predict(&m, c[ring].gen, &a2, &ring_s) != SC_SUCCESS || ring_s > 20e-3) break;
    bytes *= 2;
  }
  size_t count = bytes / sizeof(float);
  float *buf = calloc(count, sizeof(float));
  if (!buf) return SC_ERR(SC_ERR_NOMEM, "calibration buffer of %zu bytes", bytes);
  double eff[SC_TUNE_MAX_CANDIDATES] = {0}, scale[SC_TUNE_MAX_CANDIDATES] = {0};
  double took[SC_TUNE_MAX_CANDIDATES] = {0}, model[SC_TUNE_MAX_CANDIDATES] = {0};
  sc_result_t r = SC_SUCCESS;
  for (int i = 0; i < n && r == SC_SUCCESS; i++) {
    if (c[i].hier) continue; /* its rails run the flat candidates */
    sc_coll_args_t a;
    sc_tune_fill_args(comm, SC_COLL_ALLREDUCE, count, sizeof(float), 0, 0, &a);
    sc_link_model_t m0 = m;
    m0.beta_s_per_b = 0;
    double pred, pred0;
    if (sc_tune_predict(&m, c[i].gen, &a, &pred) != SC_SUCCESS ||
        sc_tune_predict(&m0, c[i].gen, &a, &pred0) != SC_SUCCESS || !(pred > pred0) ||
        pred > SC_CALIB_CANDIDATE_MAX_S)
      continue;
    sc_op_t op = {.coll = SC_COLL_ALLREDUCE,
                  .sendbuf = buf,
                  .recvbuf = buf,
                  .count = count,
                  .dtype = SC_FLOAT32,
                  .op = SC_MAX, /* the buffer stays as it is */
                  .gen = c[i].gen};
    double best = INFINITY;
    for (int rep = 0; rep < 3 && r == SC_SUCCESS; rep++) {
      double t0 = sc_seconds();
      r = sc_op_run_blocking(comm, &op);
      double t = sc_seconds() - t0;
      if (rep > 0 && t < best) best = t;
    }
    took[i] = best;
    model[i] = pred;
    eff[i] = (best - pred0) / (pred - pred0);
  }
  free(buf);
  if (r != SC_SUCCESS) return r;
  char line[512];
  size_t used = 0;
  for (int i = 0; i < n && eff[ring] > 0; i++) {
    if (eff[i] <= 0) continue;
    double f = eff[i] / eff[ring];
    scale[i] = f < 1 ? 1 : f > 4 ? 4 : f;
    used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s %.2f (%.1f ms, model %.1f)",
                             used ? ", " : "", c[i].name, scale[i], took[i] * 1e3, model[i] * 1e3);
    if (used >= sizeof(line)) used = sizeof(line) - 1;
  }
  SC_CHECK(sc_broadcast(scale, scale, SC_TUNE_MAX_CANDIDATES, SC_FLOAT64, 0, comm));
  install(comm, NULL, scale);
  SC_INFO(SC_SUBSYS_TUNE,
          "all-reduce network factors over the ring's at %zu B (this rank's runs; rank 0's "
          "apply): %s",
          bytes, used ? line : "none");
  return SC_SUCCESS;
}

sc_result_t sc_tune_calibrate(sc_comm_t *comm) {
  int p = comm->nranks;
  if (p < 2) return SC_SUCCESS;
  /* The calibration's collectives are invisible to the application: the fit
   * is of the algorithms' messages, not of the fingerprint exchange's (the
   * same calls on every rank: nothing to check), and its first call is
   * numbered as without them (errors and fingerprints name calls by number;
   * reusing the numbers is safe: each collective completed on every rank,
   * and the transports match messages by counters of their own; the
   * liveness watch is not shown them, see comm->calibrating). */
  const int check = comm->cfg.check_mismatch;
  const uint64_t first_seq = comm->next_seq;
  comm->cfg.check_mismatch = 0;
  comm->calibrating = 1;
  enum { reps = 10 };
  double t[reps];
  /* Below shm's single-copy size: the fit is of host_s_per_b (two copies). */
  const size_t m = 64 * 1024;
  double fit[5] = {0, 0, 0, 0, 0};
  void *buf = malloc(m * (size_t)p);
  float *x = malloc(m * sizeof(float)), *y = malloc(m * sizeof(float));
  sc_result_t r = SC_SUCCESS;
  if (!buf || !x || !y) {
    r = SC_ERR(SC_ERR_NOMEM, "calibration buffers");
    goto done;
  }
  for (size_t i = 0; i < m; i++) x[i] = y[i] = (float)i;
  for (int i = 0; i < 3 && r == SC_SUCCESS; i++) r = sc_barrier(comm);
  for (int i = 0; i < reps && r == SC_SUCCESS; i++) {
    double t0 = sc_seconds();
    r = sc_barrier(comm);
    t[i] = sc_seconds() - t0;
  }
  if (r != SC_SUCCESS) goto done;
  double alpha = sc_calib_median(t, reps) / sc_calib_rounds(p), ring;
  /* The ring's send is m bytes apart from buf (P blocks of m bytes), which
   * its steps fill from the second block on. */
  SC_CHECK_GOTO(sc_calib_time(comm, sc_calib_ring_steps_schedule, x, buf, m, t, reps, &ring), r,
                done);
  double step = ring / sc_calib_ring_steps(p);
  double beta = (step - alpha) / (double)m;
  double t0 = sc_seconds();
  for (int i = 0; i < reps; i++) sc_reduce_kernel(SC_FLOAT32, SC_SUM, x, x, y, m);
  double gamma = (sc_seconds() - t0) / reps / (double)(m * sizeof(float));
  if (r != SC_SUCCESS) goto done;
  /* On one host (lib/tune/tune_host.c) a barrier round is the wake-up latency,
   * the other ranks' turns on a shared core and every rank's per-message CPU
   * shared over the cores; an all-gather step is every rank's message CPU
   * and copy shared likewise. */
  int cores = comm->tune.model.host_cores;
  double host = beta;
  if (cores > 0) {
    double share = p > cores ? (double)p / cores : 1.0;
    double msg = comm->tune.model.host_s_per_msg;
    double fixed = share * msg + sc_tune_host_turns(&comm->tune.model, p);
    alpha = alpha - fixed > 1e-6 ? alpha - fixed : 1e-6;
    host = ((step - alpha) / share - msg) / (double)m;
  }
  fit[0] = alpha;
  fit[1] = beta > 1e-12 ? beta : 1e-12; /* a noisy fit must not make bytes free */
  fit[2] = gamma;
  fit[3] = host > 1e-12 ? host : 1e-12;
  /* Across hosts: the round's split into the wire and each message's CPU,
   * which a round of one message each cannot tell apart. */
  if (cores <= 0 && sc_calib_rounds(p) >= 2) {
    double fan;
    SC_CHECK_GOTO(sc_calib_time(comm, sc_calib_fan_schedule, x, buf, 1, t, reps, &fan), r, done);
    sc_tune_fit_msg(alpha, fan, sc_calib_rounds(p), &fit[0], &fit[4]);
  }
  SC_CHECK_GOTO(sc_broadcast(fit, fit, 5, SC_FLOAT64, 0, comm), r, done);
  install_fit(comm, fit, NULL, "calibrated", " (rank 0's fit)");
  /* Only across hosts: on one host the replay (lib/tune/tune_host.c) is fitted. */
  if (comm->tune.model.host_cores <= 0) r = calib_allreduce_scales(comm);
done:
  free(buf);
  free(x);
  free(y);
  comm->cfg.check_mismatch = check;
  comm->calibrating = 0;
  pthread_mutex_lock(&comm->lock);
  comm->next_seq = first_seq;
  pthread_mutex_unlock(&comm->lock);
  return r;
}

void sc_tune_inherit(sc_comm_t *comm, const sc_comm_t *parent) {
  sc_comm_t *pc = (sc_comm_t *)parent; /* its lock only */
  pthread_mutex_lock(&pc->tune.lock);
  double fit[5] = {pc->tune.model.alpha_s, pc->tune.model.beta_s_per_b,
                   pc->tune.model.gamma_s_per_b, pc->tune.model.host_s_per_b,
                   pc->tune.model.msg_cpu_s};
  double scale[SC_TUNE_MAX_CANDIDATES];
  memcpy(scale, pc->tune.model.allreduce_beta_scale, sizeof(scale));
  pthread_mutex_unlock(&pc->tune.lock);
  install_fit(comm, fit, scale, "inherited the parent's calibrated fit", "");
}
