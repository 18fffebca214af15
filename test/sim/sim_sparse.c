/* SPDX-License-Identifier: BSD-3-Clause */
/* The sparse all-reduce schedules (gTop-k butterfly, gTop-k tree, all-gather,
 * gTop-k hierarchical on random host maps, consecutive and round-robin)
 * run through the simulator, both send models, nranks 1..33, four dtypes,
 * against a reference written here from docs/ALGORITHMS.md: its own Merge
 * (dense presence arrays and a sort, nothing shared with the kernel), the same
 * merge tree replayed rank set by rank set, and for ALLGATHER the exact dense
 * sum. Also: every rank ends with identical bits; nranks = 2 GTOPK is the
 * exact top-k of the exact sum; the survival bits of every gTop-k schedule
 * (folded ranks, tree children and host members included) match the
 * reference's, which follows each rank's contribution through the merged
 * sets that carried it; malformed peer data (count above the
 * bound, index out of range, unsorted or repeated) fails with SC_ERR_REMOTE
 * naming the peer; and the merge kernel's own survival output.
 * Prints one line per failure and ends with "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/sparse.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/sparse_merge.h"
#include "lib/schedule/sparse_state.h"
#include "test/sim/simulator.h"

static int passed, failed;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (cond) {                                                                                    \
      passed++;                                                                                    \
    } else {                                                                                       \
      failed++;                                                                                    \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  uint64_t z = rng_state;
  z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdull;
  return z ^ (z >> 29);
}

/* ---- reference sets: values kept as doubles that are exactly the dtype's ---- */

typedef struct rset {
  uint32_t *idx;
  double *val;
  size_t n;
} rset_t;

static double round_to(sc_dtype_t t, double x) {
  switch (t) {
  case SC_FLOAT32:
    return (float)x;
  case SC_FLOAT16:
    return sc_half_to_float(sc_float_to_half((float)x));
  case SC_BFLOAT16:
    return sc_bfloat16_to_float(sc_float_to_bfloat16((float)x));
  default:
    return x;
  }
}

/* a + b as the dtype adds (fp16/bf16: in float32, rounded back). */
static double add_as(sc_dtype_t t, double a, double b) {
  if (t == SC_FLOAT64) return a + b;
  return round_to(t, (double)((float)a + (float)b));
}

static void put_val(sc_dtype_t t, void *v, size_t i, double x) {
  uint8_t *p = v;
  if (t == SC_FLOAT64) {
    memcpy(p + i * 8, &x, 8);
  } else if (t == SC_FLOAT32) {
    float f = (float)x;
    memcpy(p + i * 4, &f, 4);
  } else {
    uint16_t h = t == SC_FLOAT16 ? sc_float_to_half((float)x) : sc_float_to_bfloat16((float)x);
    memcpy(p + i * 2, &h, 2);
  }
}

static rset_t rset_alloc(size_t n) {
  rset_t s = {calloc(n + 1, 4), calloc(n + 1, 8), 0};
  return s;
}
static void rset_free(rset_t *s) {
  free(s->idx);
  free(s->val);
}

typedef struct ent {
  uint32_t idx;
  double val;
} ent_t;

static int by_mag_then_index(const void *x, const void *y) {
  const ent_t *a = x, *b = y;
  double ma = fabs(a->val), mb = fabs(b->val);
  if (ma != mb) return ma > mb ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}
static int by_index(const void *x, const void *y) {
  const ent_t *a = x, *b = y;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Merge(A, B) straight from the definition, through a dense presence map. */
static rset_t ref_merge(sc_dtype_t t, size_t k, const rset_t *a, const rset_t *b, size_t dense) {
  double *va = calloc(dense, 8), *vb = calloc(dense, 8);
  uint8_t *in = calloc(dense, 1);
  for (size_t i = 0; i < a->n; i++) va[a->idx[i]] = a->val[i], in[a->idx[i]] |= 1;
  for (size_t i = 0; i < b->n; i++) vb[b->idx[i]] = b->val[i], in[b->idx[i]] |= 2;
  ent_t *e = malloc((a->n + b->n + 1) * sizeof(*e));
  size_t n = 0;
  for (size_t i = 0; i < dense; i++) {
    if (!in[i]) continue;
    double v = in[i] == 3 ? add_as(t, va[i], vb[i]) : in[i] == 1 ? va[i] : vb[i];
    e[n++] = (ent_t){(uint32_t)i, v};
  }
  qsort(e, n, sizeof(*e), by_mag_then_index);
  if (n > k) n = k;
  qsort(e, n, sizeof(*e), by_index);
  rset_t o = rset_alloc(n);
  for (size_t i = 0; i < n; i++) o.idx[i] = e[i].idx, o.val[i] = e[i].val;
  o.n = n;
  free(e);
  free(va);
  free(vb);
  free(in);
  return o;
}

static void replace(rset_t *dst, rset_t src) {
  rset_free(dst);
  *dst = src;
}

static int contains(const rset_t *s, uint32_t idx) {
  for (size_t i = 0; i < s->n; i++)
    if (s->idx[i] == idx) return 1;
  return 0;
}

/* Sticky survival of `owner`'s input entries against the group set g. */
static void ref_track(uint8_t *alive, const rset_t *input, const rset_t *g) {
  for (size_t j = 0; j < input->n; j++)
    if (alive[j] && !contains(g, input->idx[j])) alive[j] = 0;
}

static int pow2_floor(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

/* Survival in the reference: an entry of rank q lives while its index is in
 * every merged set that carried q's contribution. A tracker knows which
 * ranks' contributions each member (a rank, or a host in the hierarchy's
 * butterfly) carries: the ranks q with member[q] == that member. */
typedef struct tracker {
  uint8_t **alive;  /* per rank; NULL: no survival bits */
  const rset_t *in; /* per rank */
  int *member;      /* per rank */
  int n;            /* ranks */
} tracker_t;

static void track_member(const tracker_t *tr, int m, const rset_t *set) {
  if (!tr || !tr->alive) return;
  for (int q = 0; q < tr->n; q++)
    if (tr->member[q] == m) ref_track(tr->alive[q], &tr->in[q], set);
}

/* The butterfly's merge tree over p members' sets in[]; tr (may be NULL)
 * tracks the ranks behind each member. */
static rset_t ref_gtopk(sc_dtype_t t, size_t k, int p, const rset_t *in, size_t dense,
                        const tracker_t *tr) {
  rset_t *s = calloc((size_t)p, sizeof(*s));
  for (int r = 0; r < p; r++) {
    s[r] = rset_alloc(in[r].n);
    memcpy(s[r].idx, in[r].idx, in[r].n * 4);
    memcpy(s[r].val, in[r].val, in[r].n * 8);
    s[r].n = in[r].n;
  }
  const int pp = pow2_floor(p), rem = p - pp;
  for (int r = 0; r < rem; r++) {
    replace(&s[r], ref_merge(t, k, &s[r], &s[r + pp], dense));
    track_member(tr, r, &s[r]);
    track_member(tr, r + pp, &s[r]);
  }
  for (int bit = 1; bit < pp; bit <<= 1) {
    rset_t *ns = calloc((size_t)pp, sizeof(*ns));
    for (int r = 0; r < pp; r++) {
      int lo = r < (r ^ bit) ? r : r ^ bit, hi = lo ^ bit;
      ns[r] = ref_merge(t, k, &s[lo], &s[hi], dense);
    }
    for (int r = 0; r < pp; r++) replace(&s[r], ns[r]);
    free(ns);
    for (int r = 0; r < pp; r++) {
      track_member(tr, r, &s[r]);
      if (r < rem) track_member(tr, r + pp, &s[r]);
    }
  }
  rset_t out = s[0];
  for (int r = 1; r < p; r++) rset_free(&s[r]);
  free(s);
  return out;
}

/* The papers' tree over n members (ranks rank_of[0..n-1], ascending):
 * member r merges r + 2^b's set in round b. tr (may be NULL) tracks the
 * ranks; a merge hands the child's ranks to the parent. */
static rset_t ref_tree(sc_dtype_t t, size_t k, int n, const rset_t *in, size_t dense,
                       const int *rank_of, const tracker_t *tr) {
  rset_t *s = calloc((size_t)n, sizeof(*s));
  for (int r = 0; r < n; r++) {
    s[r] = rset_alloc(in[r].n);
    memcpy(s[r].idx, in[r].idx, in[r].n * 4);
    memcpy(s[r].val, in[r].val, in[r].n * 8);
    s[r].n = in[r].n;
  }
  for (int bit = 1; bit < n; bit <<= 1)
    for (int r = 0; r + bit < n; r += 2 * bit) {
      replace(&s[r], ref_merge(t, k, &s[r], &s[r + bit], dense));
      if (!tr) continue;
      for (int q = 0; q < tr->n; q++)
        if (tr->member[q] == rank_of[r + bit]) tr->member[q] = rank_of[r];
      track_member(tr, rank_of[r], &s[r]);
    }
  rset_t out = s[0];
  for (int r = 1; r < n; r++) rset_free(&s[r]);
  free(s);
  return out;
}

/* hier's merge tree: the tree over each host's inputs (ranks
 * ascending), then the butterfly over the hosts' results. */
static rset_t ref_hier(sc_dtype_t t, size_t k, int p, const rset_t *in, size_t dense,
                       const int *host_of, tracker_t *tr) {
  int nh = 0;
  for (int r = 0; r < p; r++)
    if (host_of[r] + 1 > nh) nh = host_of[r] + 1;
  rset_t *hs = calloc((size_t)nh, sizeof(*hs)), *mine = calloc((size_t)p, sizeof(*mine));
  int *ranks = calloc((size_t)p, sizeof(*ranks));
  for (int h = 0; h < nh; h++) {
    int n = 0;
    for (int r = 0; r < p; r++)
      if (host_of[r] == h) {
        ranks[n] = r;
        mine[n++] = in[r]; /* ref_tree copies them */
      }
    hs[h] = ref_tree(t, k, n, mine, dense, ranks, tr);
  }
  /* Among the hosts every rank travels with its host's set. */
  for (int q = 0; q < p; q++) tr->member[q] = host_of[q];
  rset_t out = ref_gtopk(t, k, nh, hs, dense, tr);
  for (int h = 0; h < nh; h++) rset_free(&hs[h]);
  free(hs);
  free(mine);
  free(ranks);
  return out;
}

/* Exact sum: dense accumulators in rank order (float32 for the 32- and
 * 16-bit types, rounded once at the end; double for float64). */
static rset_t ref_allgather(sc_dtype_t t, int p, const rset_t *in, size_t dense) {
  double *accd = calloc(dense, 8);
  float *accf = calloc(dense, 4);
  uint8_t *any = calloc(dense, 1);
  size_t total = 0;
  for (int r = 0; r < p; r++) {
    total += in[r].n;
    for (size_t i = 0; i < in[r].n; i++) {
      uint32_t x = in[r].idx[i];
      if (t == SC_FLOAT64)
        accd[x] = any[x] ? accd[x] + in[r].val[i] : in[r].val[i];
      else
        accf[x] = any[x] ? accf[x] + (float)in[r].val[i] : (float)in[r].val[i];
      any[x] = 1;
    }
  }
  rset_t o = rset_alloc(total);
  for (size_t x = 0; x < dense; x++)
    if (any[x]) {
      o.idx[o.n] = (uint32_t)x;
      o.val[o.n++] = t == SC_FLOAT64 ? accd[x] : round_to(t, accf[x]);
    }
  free(accd);
  free(accf);
  free(any);
  return o;
}

/* ---- one simulated run ---------------------------------------------------- */

typedef enum { ALG_GTOPK, ALG_TREE, ALG_ALLGATHER, ALG_HIER } alg_t;
static const char *const alg_names[] = {"gtopk", "tree", "allgather", "hier"};

/* ALG_HIER's host map for the run at hand (hosts numbered by lowest rank). */
static int g_host_of[64];

/* A host map for p ranks: consecutive blocks of 1-4 ranks, or ranks dealt
 * round-robin over 1-4 hosts. */
static void gen_hosts(int p) {
  if (rnd() % 2) {
    int h = -1, left = 0;
    for (int r = 0; r < p; r++) {
      if (left == 0) {
        h++;
        left = 1 + (int)(rnd() % 4);
      }
      g_host_of[r] = h;
      left--;
    }
  } else {
    int nh = 1 + (int)(rnd() % 4);
    for (int r = 0; r < p; r++) g_host_of[r] = r % nh;
  }
}

typedef struct rank_io {
  uint32_t *idx;
  void *val;
  size_t nnz;
  uint32_t *out_idx;
  void *out_val;
  size_t out_cap;
  sc_sched_t sched;
  sc_sparse_state_t st;
} rank_io_t;

static sc_result_t build(alg_t alg, int p, int r, size_t k, size_t w, sc_sched_t *s) {
  sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                      .nranks = p,
                      .rank = r,
                      .count = k,
                      .elem_size = w,
                      .chunk_elems = 1,
                      .host_of = alg == ALG_HIER ? g_host_of : NULL};
  sc_sched_init(s);
  return alg == ALG_GTOPK  ? sc_sparse_gtopk_schedule(&a, s)
         : alg == ALG_TREE ? sc_sparse_tree_schedule(&a, s)
         : alg == ALG_HIER ? sc_sparse_hier_schedule(&a, s)
                           : sc_sparse_allgather_schedule(&a, s);
}

/* Random inputs: nnz <= k, sorted unique indices < dense. ties: small
 * multiples of 1/4 (many equal magnitudes, exact sums); else random. */
static void gen_input(rset_t *in, size_t k, size_t dense, sc_dtype_t t, int ties) {
  size_t nnz = k ? (size_t)(rnd() % (k + 1)) : 0;
  if (rnd() % 4 == 0) nnz = k < dense ? k : dense;
  if (nnz > dense) nnz = dense;
  *in = rset_alloc(nnz);
  /* selection sampling keeps the indices sorted */
  size_t need = nnz;
  for (size_t x = 0; x < dense && need; x++)
    if (rnd() % (dense - x) < need) {
      in->idx[in->n] = (uint32_t)x;
      double v = ties ? (double)((int)(rnd() % 17) - 8) * 0.25
                      : ((double)(rnd() % 2000001) - 1000000.0) / 7919.0;
      in->val[in->n++] = round_to(t, v);
      need--;
    }
}

/* Runs alg on the given inputs; 0 on success with outputs in io. */
static int sim_run_k(alg_t alg, int p, const size_t *kr, size_t dense, sc_dtype_t t,
                     sc_sim_model_t model, rank_io_t *io, char *err, size_t errlen) {
  const size_t w = sc_dtype_size(t);
  sc_sim_rank_t *ranks = calloc((size_t)p, sizeof(*ranks));
  int rc = 0;
  for (int r = 0; r < p && !rc; r++) {
    const size_t k = kr[r];
    if (build(alg, p, r, k, w, &io[r].sched) != SC_SUCCESS) {
      snprintf(err, errlen, "rank %d: schedule failed: %s", r, sc_last_error());
      rc = -1;
      break;
    }
    sc_sparse_io_t sio = {io[r].idx,     io[r].val,     io[r].nnz, io[r].out_idx,
                          io[r].out_val, io[r].out_cap, 1};
    if (sc_sparse_state_prepare(&io[r].st, &io[r].sched, t, k, dense, &sio) != SC_SUCCESS) {
      snprintf(err, errlen, "rank %d: prepare failed: %s", r, sc_last_error());
      rc = -1;
    }
    ranks[r] = (sc_sim_rank_t){.sched = &io[r].sched, .sparse = &io[r].st};
  }
  sc_sim_config_t cfg = {.nranks = p, .dtype = t, .elem_size = w, .op = SC_SUM, .model = model};
  if (!rc) rc = sc_sim_run(&cfg, ranks, NULL, err, errlen);
  free(ranks);
  return rc;
}

static int sim_run(alg_t alg, int p, size_t k, size_t dense, sc_dtype_t t, sc_sim_model_t model,
                   rank_io_t *io, char *err, size_t errlen) {
  size_t *kr = calloc((size_t)p, sizeof(*kr));
  if (!kr) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (int r = 0; r < p; r++) kr[r] = k;
  int rc = sim_run_k(alg, p, kr, dense, t, model, io, err, errlen);
  free(kr);
  return rc;
}

static void io_free(rank_io_t *io, int p) {
  for (int r = 0; r < p; r++) {
    free(io[r].idx);
    free(io[r].val);
    free(io[r].out_idx);
    free(io[r].out_val);
    sc_sched_free(&io[r].sched);
    sc_sparse_state_free(&io[r].st);
  }
  free(io);
}

static rank_io_t *io_make(const rset_t *in, int p, size_t k, sc_dtype_t t, alg_t alg) {
  const size_t w = sc_dtype_size(t);
  rank_io_t *io = calloc((size_t)p, sizeof(*io));
  for (int r = 0; r < p; r++) {
    io[r].nnz = in[r].n;
    io[r].idx = malloc(in[r].n * 4 + 4);
    io[r].val = malloc(in[r].n * w + 8);
    memcpy(io[r].idx, in[r].idx, in[r].n * 4);
    for (size_t i = 0; i < in[r].n; i++) put_val(t, io[r].val, i, in[r].val[i]);
    io[r].out_cap = alg == ALG_ALLGATHER ? (size_t)p * k : k;
    io[r].out_idx = malloc(io[r].out_cap * 4 + 4);
    io[r].out_val = malloc(io[r].out_cap * w + 8);
  }
  return io;
}

static void run_case(alg_t alg, int p, size_t k, size_t dense, sc_dtype_t t, sc_sim_model_t model,
                     int ties) {
  const size_t w = sc_dtype_size(t);
  rset_t *in = calloc((size_t)p, sizeof(*in));
  for (int r = 0; r < p; r++) gen_input(&in[r], k, dense, t, ties);
  if (alg == ALG_HIER) gen_hosts(p);
  rank_io_t *io = io_make(in, p, k, t, alg);
  char err[1024];
  const char *tag = alg_names[alg];
  int rc = sim_run(alg, p, k, dense, t, model, io, err, sizeof(err));
  CHECK(rc == 0, "%s p=%d k=%zu n=%zu dtype=%d model=%d: %s", tag, p, k, dense, (int)t, (int)model,
        err);
  if (rc == 0) {
    uint8_t **alive = calloc((size_t)p, sizeof(*alive));
    for (int r = 0; r < p; r++) {
      alive[r] = malloc(in[r].n + 1);
      memset(alive[r], 1, in[r].n);
    }
    int *member = calloc((size_t)p, sizeof(*member)), *ident = calloc((size_t)p, sizeof(*ident));
    for (int r = 0; r < p; r++) member[r] = ident[r] = r;
    tracker_t tr = {alive, in, member, p};
    rset_t ref = alg == ALG_GTOPK  ? ref_gtopk(t, k, p, in, dense, &tr)
                 : alg == ALG_TREE ? ref_tree(t, k, p, in, dense, ident, &tr)
                 : alg == ALG_HIER ? ref_hier(t, k, p, in, dense, g_host_of, &tr)
                                   : ref_allgather(t, p, in, dense);
    free(member);
    free(ident);
    int same = 1, match = 1, surv = 1;
    for (int r = 0; r < p; r++) {
      const size_t n = io[r].st.sets[1].n;
      if (n != io[0].st.sets[1].n || memcmp(io[r].out_idx, io[0].out_idx, n * 4) ||
          memcmp(io[r].out_val, io[0].out_val, n * w))
        same = 0;
      if (n != ref.n) match = 0;
      for (size_t i = 0; match && i < n; i++)
        if (io[r].out_idx[i] != ref.idx[i] || sc_sparse_value(t, io[r].out_val, i) != ref.val[i])
          match = 0;
      if (alg != ALG_ALLGATHER && memcmp(io[r].st.alive, alive[r], in[r].n)) surv = 0;
      if (alg == ALG_ALLGATHER)
        for (size_t i = 0; i < in[r].n; i++) surv &= io[r].st.alive[i] == 1;
    }
    CHECK(same, "%s p=%d k=%zu dtype=%d model=%d: ranks differ", tag, p, k, (int)t, (int)model);
    CHECK(match,
          "%s p=%d k=%zu n=%zu dtype=%d model=%d ties=%d: result differs from the reference "
          "(%zu vs %zu entries)",
          tag, p, k, dense, (int)t, (int)model, ties, io[0].st.sets[1].n, ref.n);
    CHECK(surv, "%s p=%d k=%zu dtype=%d model=%d: survival bits differ from the reference", tag, p,
          k, (int)t, (int)model);
    rset_free(&ref);
    for (int r = 0; r < p; r++) free(alive[r]);
    free(alive);
  }
  io_free(io, p);
  for (int r = 0; r < p; r++) rset_free(&in[r]);
  free(in);
}

/* nranks = 2: one Merge of the two sets is the exact top-k of the exact sum. */
static void two_ranks_exact(void) {
  const size_t k = 40, dense = 300;
  for (int trial = 0; trial < 20; trial++) {
    rset_t in[2];
    for (int r = 0; r < 2; r++) gen_input(&in[r], k, dense, SC_FLOAT64, trial % 2);
    rank_io_t *io = io_make(in, 2, k, SC_FLOAT64, ALG_GTOPK);
    char err[512];
    int rc = sim_run(ALG_GTOPK, 2, k, dense, SC_FLOAT64, SC_SIM_EAGER, io, err, sizeof(err));
    CHECK(rc == 0, "p=2 exact: %s", err);
    double *sum = calloc(dense, 8);
    uint8_t *any = calloc(dense, 1);
    for (int r = 0; r < 2; r++)
      for (size_t i = 0; i < in[r].n; i++) sum[in[r].idx[i]] += in[r].val[i], any[in[r].idx[i]] = 1;
    ent_t *e = malloc(dense * sizeof(*e));
    size_t n = 0;
    for (size_t x = 0; x < dense; x++)
      if (any[x]) e[n++] = (ent_t){(uint32_t)x, sum[x]};
    qsort(e, n, sizeof(*e), by_mag_then_index);
    if (n > k) n = k;
    qsort(e, n, sizeof(*e), by_index);
    int ok = rc == 0 && io[0].st.sets[1].n == n;
    for (size_t i = 0; ok && i < n; i++)
      ok =
          io[0].out_idx[i] == e[i].idx && sc_sparse_value(SC_FLOAT64, io[0].out_val, i) == e[i].val;
    CHECK(ok, "p=2 GTOPK trial %d is not the exact top-k of the exact sum", trial);
    free(e);
    free(sum);
    free(any);
    io_free(io, 2);
    rset_free(&in[0]);
    rset_free(&in[1]);
  }
}

/* Rank 1 sends something malformed; rank 0 must fail naming it. The inputs
 * bypass the API's own checks, as a misbehaving peer would. */
static void malformed(void) {
  const size_t k = 4, dense = 16;
  struct {
    const char *what;
    uint32_t idx[6];
    size_t n;
    const char *expect;
  } cases[] = {
      {"count above the bound", {1, 2, 3, 4, 5, 6}, 6, "more than the bound"},
      {"index out of range", {1, 2, 16}, 3, "outside the dense length"},
      {"unsorted", {3, 2}, 2, "out of order or repeated"},
      {"repeated", {5, 5}, 2, "out of order or repeated"},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    for (int alg = 0; alg < 3; alg++) {
      rset_t in[2];
      in[0] = rset_alloc(1);
      in[0].idx[0] = 7;
      in[0].val[0] = 1.0;
      in[0].n = 1;
      in[1] = rset_alloc(cases[c].n);
      for (size_t i = 0; i < cases[c].n; i++) in[1].idx[i] = cases[c].idx[i], in[1].val[i] = 1.0;
      in[1].n = cases[c].n;
      /* Rank 1 runs with a k that fits what it sends (a peer that disagrees
       * about k); rank 0 bounds what it receives by its own k. */
      const size_t kr[2] = {k, cases[c].n > k ? cases[c].n : k};
      rank_io_t *io = io_make(in, 2, kr[1], SC_FLOAT32, (alg_t)alg);
      char err[1024];
      int rc = sim_run_k((alg_t)alg, 2, kr, dense, SC_FLOAT32, SC_SIM_EAGER, io, err, sizeof(err));
      CHECK(rc != 0 && strstr(err, "rank 1") && strstr(err, cases[c].expect),
            "%s, %s: expected a failure naming rank 1 (%s), got rc %d: %s", alg_names[alg],
            cases[c].what, cases[c].expect, rc, err);
      io_free(io, 2);
      rset_free(&in[0]);
      rset_free(&in[1]);
    }
  }
  /* The checks themselves return SC_ERR_REMOTE. */
  sc_sparse_state_t st = {.dense_len = 10};
  uint32_t bad[] = {1, 10};
  uint32_t unsorted[] = {4, 3};
  uint32_t good[] = {0, 9};
  CHECK(sc_sparse_check_count(&st, 3, 5, 4) == SC_ERR_REMOTE && strstr(sc_last_error(), "rank 3"),
        "count check: %s", sc_last_error());
  CHECK(sc_sparse_check_count(&st, 3, 4, 4) == SC_SUCCESS, "count == bound must pass");
  CHECK(sc_sparse_check_indices(&st, 2, bad, 2) == SC_ERR_REMOTE &&
            strstr(sc_last_error(), "rank 2"),
        "range check: %s", sc_last_error());
  CHECK(sc_sparse_check_indices(&st, 2, unsorted, 2) == SC_ERR_REMOTE, "order check");
  CHECK(sc_sparse_check_indices(&st, 2, good, 2) == SC_SUCCESS, "valid indices must pass");
}

/* The kernel on a hand-made case: ties toward the lower index, A + B for a
 * shared index, survival per side. */
static void merge_kernel(void) {
  uint32_t ai[] = {1, 3, 5, 7};
  float av[] = {2, -4, 1, 3};
  uint32_t bi[] = {2, 3, 6, 9};
  float bv[] = {-3, 1, 3, 0.5f};
  /* union: 1:2 2:-3 3:-3 5:1 6:3 7:3 9:0.5 -> top 4 by |v|: 2,3,6,7 (|3|, the
   * lowest indices among the four 3s), then... 1 (|2|) loses. */
  uint32_t oi[8];
  float ov[8];
  uint8_t sa[4], sb[4];
  uint32_t wi[8];
  float wv[8];
  uint64_t wk[8];
  uint8_t wsrc[8];
  sc_merge_work_t w = {wi, wv, wk, wsrc, 8};
  sc_spview_t a = {ai, av, 4}, b = {bi, bv, 4};
  size_t n = sc_sparse_merge(SC_FLOAT32, 4, a, b, oi, ov, sa, sb, &w);
  uint32_t want_i[] = {2, 3, 6, 7};
  float want_v[] = {-3, -3, 3, 3};
  uint8_t want_sa[] = {0, 1, 0, 1}, want_sb[] = {1, 1, 1, 0};
  CHECK(n == 4 && !memcmp(oi, want_i, sizeof(want_i)) && !memcmp(ov, want_v, sizeof(want_v)),
        "merge kernel: wrong output (n=%zu)", n);
  CHECK(!memcmp(sa, want_sa, 4) && !memcmp(sb, want_sb, 4), "merge kernel: wrong survival bits");
  n = sc_sparse_merge(SC_FLOAT32, 3, a, b, oi, ov, sa, sb, &w);
  CHECK(n == 3 && oi[0] == 2 && oi[1] == 3 && oi[2] == 6,
        "merge kernel k=3: ties toward lower index");
  n = sc_sparse_merge(SC_FLOAT32, 100, a, b, oi, ov, NULL, NULL, &w);
  CHECK(n == 7, "merge kernel: k above the union keeps everything (%zu)", n);
}

int main(void) {
  rng_state = 0x5eed;
  merge_kernel();
  malformed();
  two_ranks_exact();
  const sc_dtype_t dtypes[] = {SC_FLOAT32, SC_FLOAT64, SC_FLOAT16, SC_BFLOAT16};
  for (int p = 1; p <= 33; p++)
    for (int alg = 0; alg < 4; alg++)
      for (int d = 0; d < 4; d++)
        for (int model = 0; model < 2; model++) {
          /* Small k and dense length: many collisions, many drops. */
          size_t k = 1 + (size_t)(rnd() % 24), dense = k + (size_t)(rnd() % 200);
          run_case((alg_t)alg, p, k, dense, dtypes[d], (sc_sim_model_t)model, (int)(rnd() % 2));
        }
  /* A few edge shapes: k = 0, dense = k (everything collides). */
  for (int alg = 0; alg < 4; alg++) {
    run_case((alg_t)alg, 5, 0, 10, SC_FLOAT32, SC_SIM_RENDEZVOUS, 1);
    run_case((alg_t)alg, 6, 8, 8, SC_FLOAT32, SC_SIM_RENDEZVOUS, 1);
    run_case((alg_t)alg, 3, 1, 1, SC_FLOAT16, SC_SIM_EAGER, 0);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
