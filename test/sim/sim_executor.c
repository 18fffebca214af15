/* SPDX-License-Identifier: BSD-3-Clause */
/* The real executor (lib/core/executor.c) against the schedule simulator: every
 * algorithm of every collective in algorithms/registry.h, and the sparse
 * schedules, run on nranks 1..8 both ways on the same inputs, one thread
 * per rank over the loopback transport (test/loopback/). Each rank's
 * memory (input, output, both when in place) must be identical BIT FOR BIT
 * after the two runs; on inputs that are exact in any reduction order both
 * are also checked against dense_check.c's reference. Random inputs (not
 * exact) make any difference in reduction order between the two show.
 * Also checks the loopback transport's own contract: a message of the wrong
 * length fails both ends with SC_ERR_REMOTE naming the peer, and progress
 * waits no longer than asked.
 * Prints one line per failure and ends with "N passed, N failed". */
#include "test/sim/sim_executor.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/registry.h"
#include "kernels/cpu/reduce.h"
#include "test/loopback/loopback.h"
#include "test/sim/dense_check.h"

#define ONE_CHUNK ((size_t)1 << 40)

int passed, failed;
static uint64_t rng = 0x5eed;

uint64_t rnd(void) {
  rng = dense_mix(rng);
  return rng;
}

void fail_line(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  failed++;
}

/* ---- P communicators over one loopback fabric -------------------------- */

static int fabric_open(fabric_t *f, int p) {
  static uint8_t addrs[MAXP][SC_TP_ADDR_MAX];
  memset(f, 0, sizeof(*f));
  f->p = p;
  for (int r = 0; r < p; r++) {
    sc_comm_t *c = f->comm[r] = calloc(1, sizeof(sc_comm_t));
    if (!c) return -1;
    c->rank = r;
    c->nranks = p;
    c->cfg.timeout_ms = 30000;
    c->tpops = &sc_loopback_transport;
    sc_tp_config_t cfg = {.rank = r, .nranks = p, .timeout_ms = 1000};
    size_t len = 0;
    if (c->tpops->create(&cfg, &c->tp, addrs[r], &len) != SC_SUCCESS) return -1;
  }
  for (int r = 0; r < p; r++)
    if (f->comm[r]->tpops->connect_all(f->comm[r]->tp, addrs, SC_TP_ADDR_MAX) != SC_SUCCESS)
      return -1;
  return 0;
}

static void fabric_close(fabric_t *f) {
  for (int r = 0; r < f->p; r++) {
    sc_comm_t *c = f->comm[r];
    if (!c) continue;
    if (c->tp) {
      c->tpops->cancel_all(c->tp, SC_ERR_ABORTED);
      c->tpops->destroy(c->tp);
    }
    sc_exec_state_free(&c->ex);
    free(c);
  }
}

static void *rank_main(void *arg) {
  rank_run_t *rr = arg;
  sc_exec_args_t a = {.op = &rr->op, .sched = rr->sched, .elem_size = rr->es};
  rr->res = sc_sched_execute(rr->comm, &a);
  if (rr->res != SC_SUCCESS) snprintf(rr->err, sizeof(rr->err), "%s", sc_last_error());
  return NULL;
}

int exec_all(fabric_t *f, rank_run_t *rr, char *err, size_t errlen) {
  pthread_t th[MAXP];
  for (int r = 0; r < f->p; r++) rr[r].comm = f->comm[r];
  for (int r = 1; r < f->p; r++) pthread_create(&th[r], NULL, rank_main, &rr[r]);
  rank_main(&rr[0]);
  for (int r = 1; r < f->p; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < f->p; r++)
    if (rr[r].res != SC_SUCCESS) {
      snprintf(err, errlen, "executor rank %d: %s", r, rr[r].err);
      return -1;
    }
  return 0;
}

/* ---- dense ------------------------------------------------------------- */

typedef struct dense_mem {
  unsigned char *mem[2], *in, *out; /* mem: what to free; in/out: SEND, RECV */
  size_t len[2];                    /* bytes of mem[i] */
} dense_mem_t;

/* A random finite value of dtype t (not exact under reordering). */
static void random_elem(sc_dtype_t t, unsigned char *out) {
  uint64_t h = rnd();
  float f = (float)((double)(int64_t)(h % 2000001) - 1000000.0) / 997.0f;
  uint16_t x;
  switch (t) {
  case SC_FLOAT32:
    memcpy(out, &f, 4);
    break;
  case SC_FLOAT16:
    x = sc_float_to_half(f / 64.0f);
    memcpy(out, &x, 2);
    break;
  case SC_BFLOAT16:
    x = sc_float_to_bfloat16(f);
    memcpy(out, &x, 2);
    break;
  case SC_FLOAT64: {
    double d = (double)f * 1.0000001;
    memcpy(out, &d, 8);
    break;
  }
  default:
    memcpy(out, &h, sc_dtype_size(t));
    break;
  }
}

static int alloc_rank(const dense_case_t *tc, int r, dense_mem_t *m) {
  const size_t es = sc_dtype_size(tc->dtype), n = tc->count;
  size_t in_c, out_c;
  dense_io_counts(tc, r, &in_c, &out_c);
  memset(m, 0, sizeof(*m));
  if (tc->place != PLACE_OUT && in_c && out_c) {
    size_t big = in_c > out_c ? in_c : out_c;
    m->len[0] = big * es;
    if (!(m->mem[0] = malloc(m->len[0]))) return -1;
    memset(m->mem[0], 0xa5, m->len[0]);
    m->in = m->out = m->mem[0];
    if (tc->place == PLACE_IN_RANK && tc->gen->coll == SC_COLL_REDUCE_SCATTER)
      m->out = m->mem[0] + (size_t)r * n * es;
    if (tc->place == PLACE_IN_RANK && tc->gen->coll == SC_COLL_ALLGATHER)
      m->in = m->mem[0] + (size_t)r * n * es;
  } else {
    m->len[0] = in_c * es;
    m->len[1] = out_c * es;
    if (in_c && !(m->in = m->mem[0] = malloc(m->len[0]))) return -1;
    if (out_c && !(m->out = m->mem[1] = malloc(m->len[1]))) return -1;
    if (out_c) memset(m->out, 0xa5, m->len[1]);
  }
  return 0;
}

typedef struct dense_run {
  dense_case_t tc;
  int exact; /* inputs from dense_check (reference known) or random */
} dense_run_t;

static int dense_case(fabric_t *f, const dense_run_t *dr) {
  const dense_case_t *tc = &dr->tc;
  const int p = tc->nranks;
  const size_t es = sc_dtype_size(tc->dtype);
  sc_sched_t sched[MAXP];
  dense_mem_t sim[MAXP], ex[MAXP];
  sc_sim_rank_t sr[MAXP];
  rank_run_t rr[MAXP];
  char err[1024] = "";
  int ok = 1;
  memset(sim, 0, sizeof(sim));
  memset(ex, 0, sizeof(ex));
  memset(rr, 0, sizeof(rr));
  for (int r = 0; r < p; r++) sc_sched_init(&sched[r]);
  for (int r = 0; r < p && ok; r++) {
    sc_coll_args_t a = {.coll = tc->gen->coll,
                        .nranks = p,
                        .rank = r,
                        .root = tc->root,
                        .count = tc->count,
                        .elem_size = es,
                        .chunk_elems = tc->chunk,
                        .avg = tc->op == SC_AVG};
    if (tc->gen->fn(&a, &sched[r]) != SC_SUCCESS) {
      snprintf(err, sizeof(err), "rank %d: generator: %s", r, sc_last_error());
      ok = 0;
      break;
    }
    if (alloc_rank(tc, r, &sim[r]) || alloc_rank(tc, r, &ex[r])) {
      snprintf(err, sizeof(err), "out of memory");
      ok = 0;
      break;
    }
    size_t in_c, out_c;
    dense_io_counts(tc, r, &in_c, &out_c);
    for (size_t j = 0; j < in_c; j++) {
      if (dr->exact)
        dense_input(tc, r, j, sim[r].in + j * es);
      else
        random_elem(tc->dtype, sim[r].in + j * es);
    }
    if (in_c) memcpy(ex[r].in, sim[r].in, in_c * es);
    sr[r] = (sc_sim_rank_t){.sched = &sched[r],
                            .send = sim[r].in,
                            .send_count = in_c,
                            .recv = sim[r].out,
                            .recv_count = out_c};
    rr[r].sched = &sched[r];
    rr[r].es = es;
    rr[r].op = (sc_op_t){.coll = tc->gen->coll,
                         .sendbuf = ex[r].in,
                         .recvbuf = ex[r].out,
                         .count = tc->count,
                         .dtype = tc->dtype,
                         .op = tc->op,
                         .root = tc->root};
  }
  sc_sim_config_t cfg = {
      .nranks = p, .dtype = tc->dtype, .elem_size = es, .op = tc->op, .model = tc->model};
  if (ok && sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) != 0) ok = 0;
  if (ok && exec_all(f, rr, err, sizeof(err)) != 0) ok = 0;
  /* Every byte of every rank's buffers: stray writes show too. */
  for (int r = 0; r < p && ok; r++)
    for (int b = 0; b < 2 && ok; b++)
      if (sim[r].len[b] && memcmp(sim[r].mem[b], ex[r].mem[b], sim[r].len[b]) != 0) {
        size_t i = 0;
        while (sim[r].mem[b][i] == ex[r].mem[b][i]) i++;
        snprintf(err, sizeof(err), "rank %d: executor and simulator differ at byte %zu of %s", r, i,
                 b                        ? "RECV"
                 : tc->place != PLACE_OUT ? "the in-place buffer"
                                          : "SEND");
        ok = 0;
      }
  if (!ok)
    fail_line("%s P=%d count=%zu chunk=%zu root=%d dtype=%d op=%d place=%d %s: %s", tc->gen->name,
              p, tc->count, tc->chunk, tc->root, tc->dtype, tc->op, tc->place,
              dr->exact ? "exact" : "random", err);
  if (ok && dr->exact) {
    unsigned char *want = dense_expected(tc);
    for (int r = 0; r < p && ok && want; r++)
      if (dense_check_output(tc, r, sim[r].out, want) != 0 ||
          dense_check_output(tc, r, ex[r].out, want) != 0)
        ok = 0;
    if (!want) ok = 0;
    if (!ok) failed++;
    free(want);
  }
  if (ok) passed++;
  for (int r = 0; r < p; r++) {
    for (int b = 0; b < 2; b++) free(sim[r].mem[b]), free(ex[r].mem[b]);
    sc_sched_free(&sched[r]);
  }
  return ok ? 0 : -1;
}

static const sc_dtype_t dtypes[] = {SC_FLOAT32, SC_INT32, SC_FLOAT16, SC_BFLOAT16};
static const sc_redop_t redops[] = {SC_SUM, SC_MAX, SC_AVG};

static int reduces(sc_coll_t c) {
  return c == SC_COLL_ALLREDUCE || c == SC_COLL_REDUCE_SCATTER || c == SC_COLL_REDUCE;
}

/* Every registered algorithm, every count and placement; dtype, op, chunk,
 * root and send model rotate so each (algorithm, P, count) sees several. */
static void sweep_dense(fabric_t *f, int p) {
  static dense_gen_t gens[64];
  int ng = 0;
  /* The collectives of dense_check.h's conventions; the all-to-alls, gather,
   * scatter and uneven all-gather run through the executor in
   * test/multi/coll_more.sh, on every transport. */
  for (int c = 0; c <= SC_COLL_BARRIER; c++) {
    int n;
    const sc_algo_entry_t *e = sc_algo_candidates((sc_coll_t)c, &n);
    for (int i = 0; i < n && ng < 64; i++)
      gens[ng++] = (dense_gen_t){e[i].name, (sc_coll_t)c, e[i].gen};
  }
  static int combo;
  for (int g = 0; g < ng; g++) {
    const dense_gen_t *gen = &gens[g];
    const size_t counts[] = {0, 1, 2, 7, 13, (size_t)p + 1, (size_t)3 * p + 1, 1009, 4099};
    const int ncounts =
        gen->coll == SC_COLL_BARRIER ? 1 : (int)(sizeof(counts) / sizeof(counts[0]));
    const int nplaces =
        gen->coll == SC_COLL_REDUCE_SCATTER || gen->coll == SC_COLL_ALLGATHER ? 3 : 2;
    for (int ci = 0; ci < ncounts; ci++)
      for (int rep = 0; rep < 3; rep++, combo++) {
        const size_t chunks[] = {ONE_CHUNK, 3, 64, 1000};
        dense_run_t dr = {.tc = {.gen = gen,
                                 .nranks = p,
                                 .root = (combo / 3) % p,
                                 .count = counts[ci],
                                 .chunk = chunks[combo % 4],
                                 .dtype = dtypes[combo % 4],
                                 .op = reduces(gen->coll) ? redops[(combo / 4) % 3] : SC_SUM,
                                 .place = (dense_place_t)(rep % nplaces),
                                 .model = (combo / 2) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER,
                                 .seed = dense_mix((uint64_t)combo)},
                          .exact = rep != 2};
        dense_case(f, &dr);
      }
  }
  /* Multi-MiB: pipelined in chunks, as the library runs large operations. */
  if (p == 3 || p == 8)
    for (int g = 0; g < ng; g++) {
      if (gens[g].coll == SC_COLL_BARRIER) continue;
      const size_t big = gens[g].coll == SC_COLL_REDUCE_SCATTER || gens[g].coll == SC_COLL_ALLGATHER
                             ? ((size_t)3 << 17) + 5
                             : ((size_t)3 << 19) + 7; /* 6 MiB of float32 */
      dense_run_t dr = {.tc = {.gen = &gens[g],
                               .nranks = p,
                               .root = p - 1,
                               .count = big,
                               .chunk = 65536 + 3,
                               .dtype = SC_FLOAT32,
                               .op = reduces(gens[g].coll) ? SC_SUM : SC_SUM,
                               .place = g % 2 ? PLACE_IN_SAME : PLACE_OUT,
                               .model = SC_SIM_EAGER,
                               .seed = dense_mix((uint64_t)g + 99)},
                        .exact = g % 2};
      dense_case(f, &dr);
    }
}

/* ---- the transport's own contract ------------------------------------ */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void transport_contract(void) {
  fabric_t f;
  if (fabric_open(&f, 2) != 0) {
    fail_line("loopback: fabric of 2");
    fabric_close(&f);
    return;
  }
  const sc_transport_ops_t *ops = &sc_loopback_transport;
  sc_transport_t *t0 = f.comm[0]->tp, *t1 = f.comm[1]->tp;
  int prog = 1;
  int64_t t = now_ms();
  sc_result_t res = ops->progress(t0, 50, &prog);
  int64_t waited = now_ms() - t;
  if (res != SC_SUCCESS || prog || waited < 40 || waited > 2000)
    fail_line("loopback: idle progress(50 ms) returned %d, progressed %d after %lld ms", res, prog,
              (long long)waited);
  else
    passed++;
  sc_tp_props_t pr;
  if (ops->props(t1, 0, 1, &pr) != SC_SUCCESS || pr.kind != SC_TP_KIND_INPROC ||
      pr.locality != SC_TP_SAME_PROCESS || ops->props(t1, 1, 1, &pr) == SC_SUCCESS)
    fail_line("loopback: props");
  else
    passed++;
  /* Wrong length: 8 bytes sent, 4 expected. */
  uint64_t x = 42;
  uint32_t y = 0;
  sc_tp_req_t s = {0}, r = {0};
  if (ops->isend(t0, 1, &x, sizeof(x), &s) != SC_SUCCESS ||
      ops->irecv(t1, 0, &y, sizeof(y), &r) != SC_SUCCESS) {
    fail_line("loopback: posting failed: %s", sc_last_error());
  } else {
    sc_result_t r1 = ops->progress(t1, 100, &prog);
    char msg[256];
    snprintf(msg, sizeof(msg), "%s", sc_last_error());
    sc_result_t r0 = ops->progress(t0, 100, &prog);
    if (r1 != SC_ERR_REMOTE || r0 != SC_ERR_REMOTE || r.state != SC_TP_REQ_ERROR ||
        s.state != SC_TP_REQ_ERROR || !strstr(msg, "rank 0"))
      fail_line("loopback: wrong length gave %d/%d (%s)", r1, r0, msg);
    else
      passed++;
    /* Later requests between the pair fail at once. */
    sc_tp_req_t again = {0};
    if (ops->isend(t0, 1, &x, sizeof(x), &again) != SC_ERR_REMOTE ||
        ops->irecv(t1, 0, &y, sizeof(y), &again) != SC_ERR_REMOTE)
      fail_line("loopback: a request after the failure was accepted");
    else
      passed++;
  }
  /* wake makes a blocked progress return early. */
  ops->wake(t0);
  t = now_ms();
  ops->progress(t0, 5000, &prog);
  if (now_ms() - t > 1000)
    fail_line("loopback: progress after wake waited %lld ms", (long long)(now_ms() - t));
  else
    passed++;
  fabric_close(&f);
}

int main(void) {
  transport_contract();
  for (int p = 1; p <= MAXP; p++) {
    fabric_t f;
    if (fabric_open(&f, p) != 0) {
      fail_line("P=%d: loopback fabric: %s", p, sc_last_error());
      fabric_close(&f);
      continue;
    }
    sweep_dense(&f, p);
    sweep_sparse(&f, p);
    fabric_close(&f);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
