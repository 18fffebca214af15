/* SPDX-License-Identifier: BSD-3-Clause */
/* Multi-rank test of the sparse collectives through the public API (run
 * under sc-run):
 *  - sc_sparse_allreduce, each algorithm and float dtype, inputs regenerated
 *    here for every rank from seeds, against a reference computed in this
 *    file (its own Merge and merge trees, the exact sum for ALLGATHER); the
 *    output's bits are compared with the reference and, through an
 *    all-gather of a hash, with every other rank;
 *  - argument checks (unsorted, out-of-range, nnz > k, bad dtype);
 *  - --ef: 20 error-feedback steps of sc_gtopk_allreduce, then a flush
 *    (zero gradient, k = n: everything selected, everything survives) that
 *    returns the sum of the residuals; for every element
 *    sum(residuals) + sum(applied updates) x nranks == sum of all gradients.
 * Gradient values are small integers (exact sums). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparsecoll.h"
#include "test/multi/mr_common.h"

static sc_comm_t *comm;

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Values are integers in [-16, 16] and at most 8 ranks add up, so every
 * sum is exact in every dtype (bf16 included): no rounding to model here;
 * the simulator test covers rounding inputs. */
static double round_to(sc_dtype_t t, double x) {
  (void)t;
  return x;
}

static double add_as(sc_dtype_t t, double a, double b) {
  (void)t;
  return a + b;
}

typedef struct rs {
  uint32_t *idx;
  double *val;
  size_t n;
} rs_t;

static rs_t rs_new(size_t cap) {
  rs_t s = {malloc((cap + 1) * 4), malloc((cap + 1) * 8), 0};
  return s;
}
static void rs_free(rs_t *s) {
  free(s->idx);
  free(s->val);
  s->idx = NULL;
  s->val = NULL;
}

/* Rank r's input in trial `seed`: up to k entries, integer values in
 * [-16, 16], so that magnitudes tie often. */
static rs_t gen(int r, uint64_t seed, size_t k, size_t dense, sc_dtype_t t) {
  uint64_t s = mix(seed * 1000003u + (uint64_t)r);
  size_t nnz = k ? (size_t)(mix(s) % (k + 1)) : 0;
  if (nnz > dense) nnz = dense;
  rs_t o = rs_new(nnz);
  size_t need = nnz;
  for (size_t x = 0; x < dense && need; x++) {
    s = mix(s);
    if (s % (dense - x) < need) {
      o.idx[o.n] = (uint32_t)x;
      o.val[o.n++] = round_to(t, (double)((int)(mix(s + 1) % 33) - 16));
      need--;
    }
  }
  return o;
}

typedef struct ent {
  uint32_t idx;
  double v;
} ent_t;
static int cmp_mag(const void *x, const void *y) {
  const ent_t *a = x, *b = y;
  double ma = fabs(a->v), mb = fabs(b->v);
  if (ma != mb) return ma > mb ? -1 : 1;
  return (a->idx > b->idx) - (a->idx < b->idx);
}
static int cmp_idx(const void *x, const void *y) {
  const ent_t *a = x, *b = y;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Merge(A, B) by a sorted walk and a full sort for the top-k. */
static rs_t merge(sc_dtype_t t, size_t k, const rs_t *a, const rs_t *b) {
  ent_t *e = malloc((a->n + b->n + 1) * sizeof(*e));
  size_t n = 0, i = 0, j = 0;
  while (i < a->n || j < b->n) {
    if (j == b->n || (i < a->n && a->idx[i] < b->idx[j]))
      e[n++] = (ent_t){a->idx[i], a->val[i]}, i++;
    else if (i == a->n || b->idx[j] < a->idx[i])
      e[n++] = (ent_t){b->idx[j], b->val[j]}, j++;
    else
      e[n++] = (ent_t){a->idx[i], add_as(t, a->val[i], b->val[j])}, i++, j++;
  }
  qsort(e, n, sizeof(*e), cmp_mag);
  if (n > k) n = k;
  qsort(e, n, sizeof(*e), cmp_idx);
  rs_t o = rs_new(n);
  for (size_t m = 0; m < n; m++) o.idx[m] = e[m].idx, o.val[m] = e[m].v;
  o.n = n;
  free(e);
  return o;
}

static void take(rs_t *dst, rs_t src) {
  rs_free(dst);
  *dst = src;
}

/* Every rank's host index (sc_comm_local, all-gathered): hier's layout. */
static int *g_host_of;

static rs_t reference(sc_sparse_algo_t algo, sc_dtype_t t, size_t k, size_t dense, int p, rs_t *in);

/* hier's merge tree: the tree over each host's inputs (ranks
 * ascending), then the butterfly over the hosts' results. */
static rs_t reference_hier(sc_dtype_t t, size_t k, size_t dense, int p, rs_t *in) {
  int nh = 0;
  for (int r = 0; r < p; r++)
    if (g_host_of[r] + 1 > nh) nh = g_host_of[r] + 1;
  rs_t *hs = calloc((size_t)nh, sizeof(*hs)), *mine = calloc((size_t)p, sizeof(*mine));
  for (int h = 0; h < nh; h++) {
    int n = 0;
    for (int r = 0; r < p; r++)
      if (g_host_of[r] == h) mine[n++] = in[r]; /* reference copies them */
    hs[h] = reference(SC_SPARSE_GTOPK_TREE, t, k, dense, n, mine);
  }
  rs_t o = reference(SC_SPARSE_GTOPK, t, k, dense, nh, hs);
  for (int h = 0; h < nh; h++) rs_free(&hs[h]);
  free(hs);
  free(mine);
  return o;
}

static rs_t reference(sc_sparse_algo_t algo, sc_dtype_t t, size_t k, size_t dense, int p,
                      rs_t *in) {
  if (algo == SC_SPARSE_ALLGATHER) {
    float *af = calloc(dense, 4);
    double *ad = calloc(dense, 8);
    uint8_t *any = calloc(dense, 1);
    size_t total = 0;
    for (int r = 0; r < p; r++)
      for (size_t i = 0; i < in[r].n; i++, total++) {
        uint32_t x = in[r].idx[i];
        if (t == SC_FLOAT64)
          ad[x] = any[x] ? ad[x] + in[r].val[i] : in[r].val[i];
        else
          af[x] = any[x] ? af[x] + (float)in[r].val[i] : (float)in[r].val[i];
        any[x] = 1;
      }
    rs_t o = rs_new(total);
    for (size_t x = 0; x < dense; x++)
      if (any[x])
        o.idx[o.n] = (uint32_t)x, o.val[o.n++] = t == SC_FLOAT64 ? ad[x] : round_to(t, af[x]);
    free(af);
    free(ad);
    free(any);
    return o;
  }
  if (algo == SC_SPARSE_GTOPK_HIER) return reference_hier(t, k, dense, p, in);
  rs_t *s = calloc((size_t)p, sizeof(*s));
  for (int r = 0; r < p; r++) {
    s[r] = rs_new(in[r].n);
    memcpy(s[r].idx, in[r].idx, in[r].n * 4);
    memcpy(s[r].val, in[r].val, in[r].n * 8);
    s[r].n = in[r].n;
  }
  if (algo == SC_SPARSE_GTOPK_TREE) {
    for (int bit = 1; bit < p; bit <<= 1)
      for (int r = 0; r + bit < p; r += 2 * bit) take(&s[r], merge(t, k, &s[r], &s[r + bit]));
  } else {
    int pp = 1;
    while (pp * 2 <= p) pp *= 2;
    for (int r = 0; r + pp < p; r++) take(&s[r], merge(t, k, &s[r], &s[r + pp]));
    for (int bit = 1; bit < pp; bit <<= 1)
      for (int r = 0; r < pp; r++)
        if (!(r & bit)) {
          rs_t m = merge(t, k, &s[r], &s[r | bit]);
          rs_t c = rs_new(m.n);
          memcpy(c.idx, m.idx, m.n * 4);
          memcpy(c.val, m.val, m.n * 8);
          c.n = m.n;
          take(&s[r], m);
          take(&s[r | bit], c);
        }
  }
  rs_t o = s[0];
  for (int r = 1; r < p; r++) rs_free(&s[r]);
  free(s);
  return o;
}

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* The algorithm's name as the library spells it (sc_sparse_algo_name). */
static const char *algo_name(sc_sparse_algo_t algo) {
  const char *nm = "?";
  (void)sc_sparse_algo_name(algo, &nm);
  return nm;
}

static void one_case(sc_sparse_algo_t algo, sc_dtype_t t, size_t k, size_t dense, uint64_t seed) {
  const int p = mr_nranks;
  const size_t w = sc_dtype_size(t);
  rs_t *in = malloc((size_t)p * sizeof(*in));
  for (int r = 0; r < p; r++) in[r] = gen(r, seed, k, dense, t);
  rs_t ref = reference(algo, t, k, dense, p, in);
  const rs_t *mine = &in[mr_rank];
  void *val = malloc(mine->n * w + 8);
  for (size_t i = 0; i < mine->n; i++) mr_set(val, i, t, mine->val[i]);
  const size_t cap = algo == SC_SPARSE_ALLGATHER ? (size_t)p * k : k;
  uint32_t *oi = malloc(cap * 4 + 4);
  void *ov = malloc(cap * w + 8);
  void *want = malloc(ref.n * w + 8);
  for (size_t i = 0; i < ref.n; i++) mr_set(want, i, t, ref.val[i]);
  size_t on = (size_t)-1;
  MR_OK(sc_sparse_allreduce(mine->idx, val, mine->n, dense, k, t, algo, oi, ov, &on, comm));
  mr_checks++;
  if (on != ref.n || memcmp(oi, ref.idx, on * 4) || memcmp(ov, want, on * w))
    mr_fail("%s %s k=%zu dense=%zu seed=%llu: %zu entries, reference %zu, or different bits",
            algo_name(algo), mr_dtype_names[t], k, dense, (unsigned long long)seed, on, ref.n);
  /* Identical bits everywhere, checked directly as well. */
  uint64_t h = on == (size_t)-1 ? 0 : hash_bytes(oi, on * 4, hash_bytes(ov, on * w, on));
  uint64_t *all = malloc((size_t)p * 8);
  MR_OK(sc_allgather(&h, all, 1, SC_UINT64, comm));
  for (int r = 0; r < p; r++)
    if (all[r] != h) mr_fail("%s: rank %d's result differs from mine", algo_name(algo), r);
  free(all);
  free(want);
  free(oi);
  free(ov);
  free(val);
  rs_free(&ref);
  for (int r = 0; r < p; r++) rs_free(&in[r]);
  free(in);
}

static void expect_invalid(sc_result_t r, const char *what) {
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG)
    mr_fail("%s: got %s, expected SC_ERR_INVALID_ARG (%s)", what, sc_strerror(r), sc_last_error());
}

static void bad_arguments(void) {
  uint32_t oi[8];
  float ov[8], v[3] = {1, 2, 3};
  size_t on;
  uint32_t unsorted[] = {3, 1, 5}, dup[] = {1, 1, 5}, big[] = {1, 2, 10}, ok[] = {1, 2, 5};
  expect_invalid(
      sc_sparse_allreduce(unsorted, v, 3, 10, 4, SC_FLOAT32, SC_SPARSE_GTOPK, oi, ov, &on, comm),
      "unsorted indices");
  expect_invalid(
      sc_sparse_allreduce(dup, v, 3, 10, 4, SC_FLOAT32, SC_SPARSE_GTOPK, oi, ov, &on, comm),
      "repeated index");
  expect_invalid(
      sc_sparse_allreduce(big, v, 3, 10, 4, SC_FLOAT32, SC_SPARSE_GTOPK, oi, ov, &on, comm),
      "index >= dense_len");
  expect_invalid(
      sc_sparse_allreduce(ok, v, 3, 10, 2, SC_FLOAT32, SC_SPARSE_GTOPK, oi, ov, &on, comm),
      "nnz > k");
  expect_invalid(sc_sparse_allreduce(ok, v, 3, 10, 4, SC_INT32, SC_SPARSE_GTOPK, oi, ov, &on, comm),
                 "int32 values");
  expect_invalid(
      sc_sparse_allreduce(ok, v, 3, 10, 4, SC_FLOAT32, (sc_sparse_algo_t)7, oi, ov, &on, comm),
      "bad algorithm");
  expect_invalid(
      sc_sparse_allreduce(ok, v, 3, 10, 4, SC_FLOAT32, SC_SPARSE_HITOPK, oi, ov, &on, comm),
      "hitopk (sc_gtopk_allreduce's only)");
  sc_ef_t *ef = NULL;
  expect_invalid(sc_ef_create(10, SC_INT8, &ef), "sc_ef_create int8");
  MR_OK(sc_ef_create(10, SC_FLOAT32, &ef));
  float g[12] = {0};
  expect_invalid(sc_gtopk_allreduce(g, 12, SC_FLOAT32, 2, SC_SELECT_EXACT, ef, comm),
                 "sc_gtopk_allreduce with an ef of another size");
  MR_OK(sc_ef_destroy(ef));
}

static void sparse_cases(void) {
  const sc_dtype_t dts[] = {SC_FLOAT32, SC_FLOAT64, SC_FLOAT16, SC_BFLOAT16};
  const size_t ks[] = {1, 7, 64, 1000};
  uint64_t seed = 1;
  int host;
  MR_OK(sc_comm_local(comm, NULL, NULL, &host, NULL));
  g_host_of = malloc((size_t)mr_nranks * sizeof(int));
  MR_OK(sc_allgather(&host, g_host_of, 1, SC_INT32, comm));
  for (int a = 0; a < 4; a++)
    for (int d = 0; d < 4; d++)
      for (int ki = 0; ki < 4; ki++) {
        const size_t k = ks[ki];
        one_case((sc_sparse_algo_t)a, dts[d], k, 3 * k + 5, seed++);
        one_case((sc_sparse_algo_t)a, dts[d], k, 50 * k + 1, seed++);
      }
  free(g_host_of);
  g_host_of = NULL;
}

/* Rank r's gradient at step s: small integers, some steps sparse-ish. */
static double grad_value(int r, int s, size_t i) {
  uint64_t z = mix(((uint64_t)s << 40) ^ ((uint64_t)r << 32) ^ i);
  return (double)((int)(z % 17) - 8);
}

/* Any selection method keeps the invariant; MSTopK's band fill takes
 * exactly k local entries of these tie-heavy integers. */
static void error_feedback(sc_dtype_t t, sc_select_t method) {
  const int p = mr_nranks, steps = 20;
  const size_t n = 96, k = 9;
  const size_t w = sc_dtype_size(t);
  sc_ef_t *ef = NULL;
  MR_OK(sc_ef_create(n, t, &ef));
  void *g = malloc(n * w);
  double *applied = calloc(n, 8), *fed = calloc(n, 8);
  int skipped = 0;
  for (int s = 0; s < steps && !skipped; s++) {
    for (size_t i = 0; i < n; i++) {
      mr_set(g, i, t, grad_value(mr_rank, s, i));
      for (int r = 0; r < p; r++) fed[i] += grad_value(r, s, i);
    }
    sc_result_t r = sc_gtopk_allreduce(g, n, t, k, method, ef, comm);
    if (r == SC_ERR_UNSUPPORTED) {
      printf("rank %d: SKIP error feedback: %s\n", mr_rank, sc_last_error());
      skipped = 1;
      break;
    }
    mr_checks++;
    if (r != SC_SUCCESS) {
      mr_fail("sc_gtopk_allreduce step %d: %s: %s", s, sc_strerror(r), sc_last_error());
      break;
    }
    size_t nz = 0;
    for (size_t i = 0; i < n; i++) {
      double v = mr_get(g, i, t);
      applied[i] += v;
      nz += v != 0;
    }
    mr_checks++;
    if (nz > k) mr_fail("step %d: %zu non-zero updates, more than k = %zu", s, nz, k);
  }
  if (!skipped) {
    /* Flush: zero gradient and k = n select the whole residual; with every
     * entry kept by every merge the result is the sum of all residuals. */
    memset(g, 0, n * w);
    MR_OK(sc_gtopk_allreduce(g, n, t, n, method, ef, comm));
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
      double residuals = mr_get(g, i, t) * p, total = residuals + applied[i] * p;
      double err = fabs(total - fed[i]);
      if (err > worst) worst = err;
    }
    /* Exact up to the /P of the average (exact for P = 1, 2, 4). */
    const double tol = (p & (p - 1)) ? 1e-3 * steps : 0.0;
    mr_checks++;
    if (worst > tol)
      mr_fail("error feedback %s (select %d): residuals + applied x P differs from the fed "
              "gradients by %g",
              mr_dtype_names[t], (int)method, worst);
    else if (mr_rank == 0)
      printf("error feedback %s (select %d) on %d ranks: invariant holds (max deviation %g)\n",
             mr_dtype_names[t], (int)method, p, worst);
  }
  MR_OK(sc_ef_destroy(ef));
  free(g);
  free(applied);
  free(fed);
}

int main(int argc, char **argv) {
  int ef_only = argc > 1 && !strcmp(argv[1], "--ef");
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  if (ef_only) {
    error_feedback(SC_FLOAT32, SC_SELECT_EXACT);
    error_feedback(SC_FLOAT64, SC_SELECT_EXACT);
    error_feedback(SC_FLOAT32, SC_SELECT_MSTOPK);
    error_feedback(SC_FLOAT64, SC_SELECT_MSTOPK);
  } else {
    bad_arguments();
    sparse_cases();
  }
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
