/* SPDX-License-Identifier: BSD-3-Clause */
/* The sparse all-reduce schedules (algorithms/sparse.h) through the real
 * executor and the simulator on the same inputs: each rank's output set
 * (count, indices, values) and survival mask must be identical bit for bit.
 * sim_sparse.c checks the simulator's results against an independent
 * reference, so equality here carries that check over to the executor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/sparse.h"
#include "kernels/cpu/reduce.h"
#include "test/sim/sim_executor.h"

static const struct {
  const char *name;
  sc_result_t (*gen)(const sc_coll_args_t *, sc_sched_t *);
  int gathers; /* the output holds nranks * k entries */
} sparse_gens[] = {{"sparse_gtopk", sc_sparse_gtopk_schedule, 0},
                   {"sparse_tree", sc_sparse_tree_schedule, 0},
                   {"sparse_allgather", sc_sparse_allgather_schedule, 1}};

typedef struct side {
  uint32_t *out_idx;
  void *out_val;
  uint8_t *survived;
  size_t nnz;
} side_t;

typedef struct rank_in {
  uint32_t *idx;
  void *val;
  size_t nnz;
} rank_in_t;

static void put_random(sc_dtype_t t, void *val, size_t i, int ties) {
  float f = ties ? (float)((int)(rnd() % 9) - 4) * 0.5f
                 : (float)((double)(int64_t)(rnd() % 2000001) - 1000000.0) / 7919.0f;
  uint16_t h;
  switch (t) {
  case SC_FLOAT16:
    h = sc_float_to_half(f);
    memcpy((uint8_t *)val + i * 2, &h, 2);
    break;
  case SC_BFLOAT16:
    h = sc_float_to_bfloat16(f);
    memcpy((uint8_t *)val + i * 2, &h, 2);
    break;
  case SC_FLOAT64: {
    double d = f;
    memcpy((uint8_t *)val + i * 8, &d, 8);
    break;
  }
  default:
    memcpy((uint8_t *)val + i * 4, &f, 4);
    break;
  }
}

/* Sorted unique indices below dense, at most k of them. */
static void random_set(rank_in_t *in, size_t k, size_t dense, sc_dtype_t t, int ties) {
  size_t want = k ? (size_t)(rnd() % (k + 1)) : 0;
  if (rnd() % 3 == 0) want = k;
  if (want > dense) want = dense;
  in->nnz = 0;
  for (size_t x = 0; x < dense && in->nnz < want; x++)
    if (rnd() % (dense - x) < want - in->nnz) {
      in->idx[in->nnz] = (uint32_t)x;
      put_random(t, in->val, in->nnz++, ties);
    }
}

static void sparse_case(fabric_t *f, int alg, size_t k, size_t dense, sc_dtype_t t, int ties,
                        sc_sim_model_t model) {
  const int p = f->p;
  const size_t w = sc_dtype_size(t), cap = sparse_gens[alg].gathers ? (size_t)p * k : k;
  sc_sched_t sched[MAXP];
  sc_sparse_state_t st[MAXP];
  sc_sparse_op_t spo[MAXP];
  rank_in_t in[MAXP];
  side_t sim[MAXP], ex[MAXP];
  sc_sim_rank_t sr[MAXP];
  rank_run_t rr[MAXP];
  char err[1024] = "";
  int ok = 1;
  memset(st, 0, sizeof(st));
  memset(rr, 0, sizeof(rr));
  memset(in, 0, sizeof(in));
  memset(sim, 0, sizeof(sim));
  memset(ex, 0, sizeof(ex));
  for (int r = 0; r < p; r++) {
    sc_sched_init(&sched[r]);
    in[r].idx = malloc(k * 4 + 4);
    in[r].val = malloc(k * w + 8);
    side_t *sd[2] = {&sim[r], &ex[r]};
    for (int i = 0; i < 2; i++) {
      sd[i]->out_idx = malloc(cap * 4 + 4);
      sd[i]->out_val = malloc(cap * w + 8);
      sd[i]->survived = calloc(k + 1, 1);
      if (!sd[i]->out_idx || !sd[i]->out_val || !sd[i]->survived) ok = 0;
    }
    if (!in[r].idx || !in[r].val) ok = 0;
  }
  for (int r = 0; r < p && ok; r++) {
    random_set(&in[r], k, dense, t, ties);
    sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                        .nranks = p,
                        .rank = r,
                        .count = k,
                        .elem_size = w,
                        .chunk_elems = 1};
    if (sparse_gens[alg].gen(&a, &sched[r]) != SC_SUCCESS) {
      snprintf(err, sizeof(err), "rank %d: generator: %s", r, sc_last_error());
      ok = 0;
      break;
    }
    sc_sparse_io_t io = {in[r].idx, in[r].val, in[r].nnz, sim[r].out_idx, sim[r].out_val, cap, 1};
    if (sc_sparse_state_prepare(&st[r], &sched[r], t, k, dense, &io) != SC_SUCCESS) {
      snprintf(err, sizeof(err), "rank %d: prepare: %s", r, sc_last_error());
      ok = 0;
      break;
    }
    sr[r] = (sc_sim_rank_t){.sched = &sched[r], .sparse = &st[r]};
    io.out_idx = ex[r].out_idx;
    io.out_val = ex[r].out_val;
    spo[r] = (sc_sparse_op_t){
        .io = io, .k = k, .dense_len = dense, .out_nnz = &ex[r].nnz, .survived = ex[r].survived};
    rr[r].sched = &sched[r];
    rr[r].es = w;
    rr[r].op = (sc_op_t){
        .coll = SC_COLL_ALLREDUCE, .count = k, .dtype = t, .op = SC_SUM, .sparse = &spo[r]};
  }
  sc_sim_config_t cfg = {.nranks = p, .dtype = t, .elem_size = w, .op = SC_SUM, .model = model};
  if (ok && sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) != 0) ok = 0;
  if (ok && exec_all(f, rr, err, sizeof(err)) != 0) ok = 0;
  for (int r = 0; r < p && ok; r++) {
    sim[r].nnz = st[r].sets[1].n;
    memcpy(sim[r].survived, st[r].alive, in[r].nnz);
    if (sim[r].nnz != ex[r].nnz)
      snprintf(err, sizeof(err), "rank %d: %zu output entries from the executor, %zu simulated", r,
               ex[r].nnz, sim[r].nnz),
          ok = 0;
    else if (memcmp(sim[r].out_idx, ex[r].out_idx, sim[r].nnz * 4) ||
             memcmp(sim[r].out_val, ex[r].out_val, sim[r].nnz * w))
      snprintf(err, sizeof(err), "rank %d: output sets differ", r), ok = 0;
    else if (memcmp(sim[r].survived, ex[r].survived, in[r].nnz))
      snprintf(err, sizeof(err), "rank %d: survival masks differ", r), ok = 0;
  }
  if (ok)
    passed++;
  else
    fail_line("%s P=%d k=%zu dense=%zu dtype=%d ties=%d %s: %s", sparse_gens[alg].name, p, k, dense,
              t, ties, model == SC_SIM_EAGER ? "eager" : "rendezvous", err);
  for (int r = 0; r < p; r++) {
    free(in[r].idx);
    free(in[r].val);
    side_t *sd[2] = {&sim[r], &ex[r]};
    for (int i = 0; i < 2; i++) {
      free(sd[i]->out_idx);
      free(sd[i]->out_val);
      free(sd[i]->survived);
    }
    sc_sparse_state_free(&st[r]);
    sc_sched_free(&sched[r]);
  }
}

void sweep_sparse(fabric_t *f, int p) {
  static const sc_dtype_t dtypes[] = {SC_FLOAT32, SC_FLOAT16, SC_BFLOAT16, SC_FLOAT64};
  static int combo;
  (void)p;
  for (int alg = 0; alg < 3; alg++) {
    const size_t ks[] = {0, 1, 5, 37, 1000};
    for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++)
      for (int rep = 0; rep < 2; rep++, combo++) {
        const size_t k = ks[ki];
        const size_t dense = rep ? 3 * k + 7 : 50 * k + 1;
        sparse_case(f, alg, k, dense, dtypes[combo % 4], combo % 3 == 0,
                    combo % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
      }
  }
}
