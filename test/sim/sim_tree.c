/* SPDX-License-Identifier: BSD-3-Clause */
/* The double binary tree all-reduce run through the simulator (both send
 * models) for nranks 1..64, awkward counts, many chunks, every dtype and op,
 * in place and out of place, against dense_check's reference; plus properties
 * read off the schedules: the two trees are NCCL's (checked against a
 * transcription of ncclGetBtree/ncclGetDtree), each rank forwards in only one
 * of them, the bytes and messages per rank, the pipelined critical path, and
 * identical bits on every rank and every run for rounding float inputs.
 * Prints one line per failure and ends with "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/algorithms.h"
#include "test/sim/dense_check.h"
#include "test/sim/sched_cost.h"
#include "test/sim/simulator.h"

static const dense_gen_t tree_gen = {"tree_allreduce", SC_COLL_ALLREDUCE,
                                     sc_tree_allreduce_schedule};

#define ONE_CHUNK ((size_t)1 << 40)

static uint64_t case_seed;

static void run(int p, size_t count, size_t chunk, sc_dtype_t dtype, sc_redop_t op,
                dense_place_t place, sc_sim_model_t model) {
  dense_case_t tc = {.gen = &tree_gen,
                     .nranks = p,
                     .count = count,
                     .chunk = chunk,
                     .dtype = dtype,
                     .op = op,
                     .place = place,
                     .model = model,
                     .seed = dense_mix(++case_seed)};
  dense_run_case(&tc);
}

static sc_result_t build(int p, int r, size_t count, size_t chunk, size_t es, int avg,
                         sc_sched_t *s) {
  sc_coll_args_t a = {.coll = SC_COLL_ALLREDUCE,
                      .nranks = p,
                      .rank = r,
                      .count = count,
                      .elem_size = es,
                      .chunk_elems = chunk,
                      .avg = avg};
  sc_sched_init(s);
  return sc_tree_allreduce_schedule(&a, s);
}

static int ceil_log2(int p) {
  int h = 0;
  while ((1 << h) < p) h++;
  return h;
}

/* ---- sweeps ------------------------------------------------------------ */

/* Placement and protocol: every P, awkward counts, chunk sizes from one
 * element to one chunk per half; int32 random sums make any misplaced or
 * double-counted element visible. Each (P, count, chunk) runs out of place
 * and in place, on opposite send models that swap from one chunk size to the
 * next, so every (P, count) sees all four combinations. 65537 elements on
 * a spread of P keeps the sweep inside its time budget. */
static void sweep_structure(void) {
  for (int p = 1; p <= 64; p++) {
    const size_t counts[] = {0, 1, (size_t)p - 1, (size_t)p + 1, 13, 1009, 65537};
    const int big_p = p <= 5 || p == 7 || p == 8 || p == 13 || p == 16 || p == 31 || p == 64;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
      const size_t n = counts[ci];
      if (ci == 2 && p <= 2) continue; /* P-1 is 0 or 1: already covered */
      if (ci > 3 && (n == (size_t)p - 1 || n == (size_t)p + 1)) continue;
      if (n == 65537 && !big_p) continue;
      const size_t chunks[] = {1, 3, 64, 1000, ONE_CHUNK};
      for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
        const size_t chunk = chunks[k], vol = (size_t)p * n;
        /* Tiny chunks only where the message count stays sane. */
        if (chunk == 1 && vol > 20000) continue;
        if (chunk == 3 && vol > 200000) continue;
        if (chunk == 1000 && n < 2000) continue;
        sc_sim_model_t m = k % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER;
        run(p, n, chunk, SC_INT32, SC_SUM, PLACE_OUT, m);
        run(p, n, chunk, SC_INT32, SC_SUM, PLACE_IN_SAME,
            m == SC_SIM_EAGER ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
      }
    }
  }
}

/* Arithmetic: every dtype and op, in place and out, on a spread of P. */
static void sweep_dtypes_ops(void) {
  static const int ps[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 33, 64};
  static const sc_dtype_t dtypes[] = {SC_INT32,    SC_INT64,   SC_FLOAT16,
                                      SC_BFLOAT16, SC_FLOAT32, SC_FLOAT64};
  for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
    const int p = ps[pi];
    const size_t counts[] = {(size_t)p + 1, 1009};
    for (size_t di = 0; di < 6; di++)
      for (sc_redop_t op = SC_SUM; op <= SC_AVG; op++)
        for (size_t ci = 0; ci < 2; ci++)
          for (dense_place_t pl = PLACE_OUT; pl <= PLACE_IN_SAME; pl++)
            run(p, counts[ci], 7, dtypes[di], op, pl,
                (di + (size_t)op + ci + (size_t)pl) % 2 ? SC_SIM_RENDEZVOUS : SC_SIM_EAGER);
  }
}

/* Large messages cut into many chunks. */
static void sweep_large(void) {
  static const int ps[] = {2, 3, 5, 8, 13};
  const size_t big = ((size_t)1 << 20) + 7;
  for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
    const int p = ps[pi];
    run(p, big, 4093, SC_INT32, SC_SUM, PLACE_OUT, SC_SIM_RENDEZVOUS);
    run(p, big, 65536, SC_INT32, SC_SUM, PLACE_IN_SAME, SC_SIM_EAGER);
    run(p, big, 8191, SC_FLOAT32, SC_AVG, PLACE_IN_SAME, SC_SIM_RENDEZVOUS);
  }
}

/* ---- the trees, read off the schedules ---------------------------------- */

/* NCCL's ncclGetBtree, transcribed loop for loop: the reference the
 * generator's own construction is held against. */
static void nccl_btree(int nranks, int rank, int *up, int *d0, int *d1) {
  int bit;
  for (bit = 1; bit < nranks; bit <<= 1)
    if (bit & rank) break;
  if (rank == 0) {
    *up = -1;
    *d0 = -1;
    *d1 = nranks > 1 ? bit >> 1 : -1;
    return;
  }
  *up = (rank ^ bit) | (bit << 1);
  if (*up >= nranks) *up = rank ^ bit;
  int lowbit = bit >> 1;
  *d0 = lowbit == 0 ? -1 : rank - lowbit;
  *d1 = lowbit == 0 ? -1 : rank + lowbit;
  while (*d1 >= nranks) {
    *d1 = lowbit == 0 ? -1 : rank + lowbit;
    lowbit >>= 1;
  }
}

/* ncclGetDtree's second tree: mirror for even P, shift by one for odd P. */
static void nccl_tree(int p, int tree, int rank, int *up, int *d0, int *d1) {
  if (tree == 0) {
    nccl_btree(p, rank, up, d0, d1);
    return;
  }
  int *out[3] = {up, d0, d1};
  if (p % 2) {
    nccl_btree(p, (rank - 1 + p) % p, up, d0, d1);
    for (int i = 0; i < 3; i++) *out[i] = *out[i] < 0 ? -1 : (*out[i] + 1) % p;
  } else {
    nccl_btree(p, p - 1 - rank, up, d0, d1);
    for (int i = 0; i < 3; i++) *out[i] = *out[i] < 0 ? -1 : p - 1 - *out[i];
  }
}

/* A rank's role in one tree as its schedule shows it: children are the
 * peers it reduces from, the parent the one it receives finals from. */
typedef struct role {
  int parent, nchildren, child[2], nneighbours, ok;
} role_t;

static void add_unique(int *set, int *n, int cap, int v, int *ok) {
  for (int i = 0; i < *n; i++)
    if (set[i] == v) return;
  if (*n < cap)
    set[(*n)++] = v;
  else
    *ok = 0;
}

/* count = 2, chunk 1: element 0 is tree 0's half, element 1 tree 1's. */
static void read_roles(int p, int r, role_t roles[2]) {
  sc_sched_t s;
  int ok = build(p, r, 2, 1, 4, 0, &s) == SC_SUCCESS && s.scratch_count == 0;
  for (int t = 0; t < 2; t++) {
    int nb[8], nnb = 0, parents[4], nparents = 0;
    role_t *ro = &roles[t];
    *ro = (role_t){.parent = -1, .ok = 1};
    for (size_t i = 0; i < s.nsteps; i++) {
      const sc_step_t *st = &s.steps[i];
      if (st->off != (size_t)t || st->kind == SC_STEP_COPY) continue;
      if (st->peer < 0 || st->peer >= p) {
        ro->ok = 0;
        continue;
      }
      add_unique(nb, &nnb, 8, st->peer, &ro->ok);
      if (st->kind == SC_STEP_RECV_REDUCE)
        add_unique(ro->child, &ro->nchildren, 2, st->peer, &ro->ok);
      if (st->kind == SC_STEP_RECV) add_unique(parents, &nparents, 4, st->peer, &ro->ok);
    }
    ro->ok = ro->ok && ok && nparents <= 1;
    ro->nneighbours = nnb;
    if (nparents) ro->parent = parents[0];
  }
  sc_sched_free(&s);
}

static int same_set(const int *a, int na, int x, int y) {
  int want = (x >= 0) + (y >= 0), found = 0;
  for (int i = 0; i < na; i++) found += a[i] == x || a[i] == y;
  return na == want && found == want;
}

/* Each tree is NCCL's, a rooted tree of depth <= ceil(log2 P) with at most
 * three neighbours per rank; a rank has children in one tree only (odd P:
 * except rank 0, one child in each, as in NCCL), and is a non-root inner
 * node in one tree only for every P. */
static void test_trees(void) {
  for (int p = 1; p <= 200; p++) {
    role_t *roles = calloc((size_t)p * 2, sizeof(*roles));
    if (!roles) abort();
    for (int r = 0; r < p; r++) read_roles(p, r, roles + 2 * r);
    int ok = 1, forwarding_ok = 1, inner_ok = 1;
    for (int t = 0; t < 2; t++) {
      int nroots = 0;
      for (int r = 0; r < p; r++) {
        const role_t *ro = &roles[2 * r + t];
        int up, d0, d1;
        nccl_tree(p, t, r, &up, &d0, &d1);
        if (!ro->ok || ro->nneighbours > 3 || ro->parent != up ||
            !same_set(ro->child, ro->nchildren, d0, d1))
          ok = 0;
        nroots += ro->parent < 0;
        for (int i = 0; i < ro->nchildren; i++)
          if (roles[2 * ro->child[i] + t].parent != r) ok = 0;
        /* Up to the root without a cycle. */
        int v = r, depth = 0;
        while (ok && roles[2 * v + t].parent >= 0 && depth <= p) {
          v = roles[2 * v + t].parent;
          depth++;
        }
        if (depth > ceil_log2(p)) ok = 0;
      }
      if (nroots != 1) ok = 0;
    }
    for (int r = 0; r < p; r++) {
      const role_t *a = &roles[2 * r], *b = &roles[2 * r + 1];
      int forwards = (a->nchildren > 0) + (b->nchildren > 0);
      if (forwards > 1 && !(p % 2 == 1 && r == 0 && a->nchildren == 1 && b->nchildren == 1))
        forwarding_ok = 0;
      if ((a->nchildren && a->parent >= 0) + (b->nchildren && b->parent >= 0) > 1) inner_ok = 0;
    }
    dense_expect(ok, "tree P=%d: schedules do not form NCCL's two trees of depth <= ceil(log2 P)",
                 p);
    dense_expect(forwarding_ok, "tree P=%d: a rank has children in both trees", p);
    dense_expect(inner_ok, "tree P=%d: a rank is an inner node of both trees", p);
    free(roles);
  }
}

/* ---- cost -------------------------------------------------------------- */

/* Each half goes up every edge of its tree once and down it once: a rank
 * sends its half to its parent and to each child, and receives as many;
 * one message per chunk. Per rank that is at most 3 halves of its forwarding
 * tree plus 1 of the other, about 2 * count; over all ranks 2(P-1) count. */
static void test_cost(void) {
  const size_t es = 4;
  for (int p = 1; p <= 64; p++) {
    const size_t counts[] = {1, (size_t)p + 1, 1009, 65537, ((size_t)1 << 20) + 7};
    for (size_t ci = 0; ci < 5; ci++)
      for (size_t chunk = 1000; chunk <= 1000000; chunk *= 1000) {
        const size_t n = counts[ci], half[2] = {n - n / 2, n / 2};
        size_t total = 0;
        int ok = 1;
        for (int r = 0; r < p && ok; r++) {
          sc_sched_t s;
          sc_sched_cost_t c;
          ok = build(p, r, n, chunk, es, 0, &s) == SC_SUCCESS && s.scratch_count == 0;
          sc_sched_cost(&s, es, &c);
          size_t want_bytes = 0, want_msgs = 0;
          for (int t = 0; t < 2 && p > 1; t++) {
            int up, d0, d1;
            nccl_tree(p, t, r, &up, &d0, &d1);
            size_t links = (size_t)(up >= 0) + (size_t)(d0 >= 0) + (size_t)(d1 >= 0);
            want_bytes += links * half[t] * es;
            want_msgs += 2 * links * ((half[t] + chunk - 1) / chunk);
          }
          if (c.bytes_sent != want_bytes || c.bytes_recv != want_bytes || c.messages != want_msgs ||
              c.bytes_sent > (2 * n + 1) * es)
            ok = 0;
          total += c.bytes_sent;
          sc_sched_free(&s);
        }
        dense_expect(ok && total == 2 * (size_t)(p - 1) * n * es,
                     "tree cost P=%d count=%zu chunk=%zu: not each half once up and once down "
                     "every tree edge, one message per chunk",
                     p, n, chunk);
      }
  }
}

/* ---- critical path ----------------------------------------------------- */

/* Longest chain of dependent messages when sends cost nothing and a message
 * arrives one step after it is sent: the pipeline's depth. Steps run in
 * order per rank, receives wait for their message. -1 on a stall. */
static long critical_path(int p, const sc_sched_t *s) {
  size_t *pc = calloc((size_t)p, sizeof(*pc));
  long *clock = calloc((size_t)p, sizeof(*clock));
  /* Per ordered pair a queue of send times: sends on a link never outnumber
   * the sender's steps, so one array per pair of that size suffices. */
  long **q = calloc((size_t)p * (size_t)p, sizeof(*q));
  size_t *head = calloc((size_t)p * (size_t)p, sizeof(*head));
  size_t *tail = calloc((size_t)p * (size_t)p, sizeof(*tail));
  long depth = 0;
  if (!pc || !clock || !q || !head || !tail) abort();
  for (int r = 0; r < p; r++)
    for (int d = 0; d < p; d++)
      if (!(q[r * p + d] = malloc((s[r].nsteps + 1) * sizeof(long)))) abort();
  for (int progress = 1; progress;) {
    progress = 0;
    for (int r = 0; r < p; r++)
      while (pc[r] < s[r].nsteps) {
        const sc_step_t *st = &s[r].steps[pc[r]];
        if (st->kind == SC_STEP_SEND) {
          size_t link = (size_t)r * (size_t)p + (size_t)st->peer;
          q[link][tail[link]++] = clock[r];
        } else if (st->kind != SC_STEP_COPY) {
          size_t link = (size_t)st->peer * (size_t)p + (size_t)r;
          if (head[link] == tail[link]) break;
          long t = q[link][head[link]++] + 1;
          if (t > clock[r]) clock[r] = t;
        }
        pc[r]++;
        progress = 1;
      }
  }
  for (int r = 0; r < p; r++) {
    if (pc[r] < s[r].nsteps) depth = -1;
    if (depth >= 0 && clock[r] > depth) depth = clock[r];
  }
  for (int i = 0; i < p * p; i++) free(q[i]);
  free(q);
  free(head);
  free(tail);
  free(pc);
  free(clock);
  return depth;
}

/* The pipeline: chunks of both halves advance together, so the last chunk
 * of a half arrives one hop per further chunk after the first, which takes
 * ceil(log2 P) hops up and as many down: depth = chunks per half +
 * 2 ceil(log2 P) - 1. A rank that waited for a chunk to come back down
 * before sending the next one up would make it chunks * 2 ceil(log2 P). */
static void test_depth(void) {
  static const int ps[] = {2, 3, 4, 5, 7, 8, 13, 16, 31, 33, 64};
  static const size_t counts[] = {1, 2, 1999, 100003, (size_t)1 << 20};
  const size_t chunk = 1000;
  for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++)
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
      const int p = ps[pi];
      const size_t n = counts[ci], chunks = (n - n / 2 + chunk - 1) / chunk;
      sc_sched_t *s = calloc((size_t)p, sizeof(*s));
      int ok = s != NULL;
      for (int r = 0; r < p && ok; r++) ok = build(p, r, n, chunk, 4, 0, &s[r]) == SC_SUCCESS;
      long depth = ok ? critical_path(p, s) : -1;
      long want = (long)chunks + 2 * ceil_log2(p) - 1;
      dense_expect(depth == want, "tree depth P=%d count=%zu chunk=%zu: %ld message hops, want %ld",
                   p, n, chunk, depth, want);
      for (int r = 0; r < p && s; r++) sc_sched_free(&s[r]);
      free(s);
    }
}

/* ---- identical bits ---------------------------------------------------- */

/* A float32 with random sign, mantissa and a spread of exponents, so the
 * sums round and the result depends on the reduction order. */
static float random_float(uint64_t h) {
  double m = (double)(h >> 11) * 0x1p-53 * 2.0 - 1.0;
  int e = (int)(h % 24) - 12;
  return (float)(m * (double)(1 << (e + 12)) / 4096.0);
}

/* The sum as the tree computes it: each node adds its children's subtree
 * sums to its own input in child order (float addition commutes, so only
 * the grouping matters). */
static float tree_sum(int p, int t, int v, const float *in, size_t count, size_t j) {
  int up, d[2];
  nccl_tree(p, t, v, &up, &d[0], &d[1]);
  float acc = in[(size_t)v * count + j];
  for (int i = 0; i < 2; i++)
    if (d[i] >= 0) acc = acc + tree_sum(p, t, d[i], in, count, j);
  return acc;
}

/* Random float32 sums: every rank ends with the same bits, equal to the
 * tree-ordered reference, and a second run (other send model, in place)
 * reproduces them. */
static void test_bits(void) {
  static const int ps[] = {2, 3, 5, 7, 8, 13, 16, 31, 64};
  const size_t n = 10007, chunk = 97;
  for (size_t pi = 0; pi < sizeof(ps) / sizeof(ps[0]); pi++) {
    const int p = ps[pi];
    float *in = malloc((size_t)p * n * sizeof(float));
    float *out[2] = {malloc((size_t)p * n * sizeof(float)), malloc((size_t)p * n * sizeof(float))};
    sc_sched_t *s = calloc((size_t)p, sizeof(*s));
    sc_sim_rank_t *sr = calloc((size_t)p, sizeof(*sr));
    char err[1024];
    int ok = in && out[0] && out[1] && s && sr;
    for (size_t i = 0; ok && i < (size_t)p * n; i++) in[i] = random_float(dense_mix(i + 77));
    for (int r = 0; r < p && ok; r++) ok = build(p, r, n, chunk, 4, 0, &s[r]) == SC_SUCCESS;
    for (int run_i = 0; run_i < 2 && ok; run_i++) {
      const int in_place = run_i == 1;
      if (in_place) memcpy(out[1], in, (size_t)p * n * sizeof(float));
      for (int r = 0; r < p; r++) {
        float *send = (in_place ? out[1] : in) + (size_t)r * n;
        sr[r] = (sc_sim_rank_t){.sched = &s[r],
                                .send = send,
                                .send_count = n,
                                .recv = out[run_i] + (size_t)r * n,
                                .recv_count = n};
      }
      sc_sim_config_t cfg = {.nranks = p,
                             .dtype = SC_FLOAT32,
                             .elem_size = 4,
                             .op = SC_SUM,
                             .model = in_place ? SC_SIM_EAGER : SC_SIM_RENDEZVOUS};
      if (sc_sim_run(&cfg, sr, NULL, err, sizeof(err)) != 0) {
        printf("FAIL tree bits P=%d run %d: %s\n", p, run_i, err);
        ok = 0;
      }
    }
    int same = ok, exact = ok;
    for (int r = 1; r < p && same; r++)
      same = memcmp(out[0], out[0] + (size_t)r * n, n * sizeof(float)) == 0;
    same = same && memcmp(out[0], out[1], (size_t)p * n * sizeof(float)) == 0;
    for (size_t j = 0; j < n && exact; j++) {
      int t = j < n - n / 2 ? 0 : 1, root = t == 0 ? 0 : p % 2 ? 1 : p - 1;
      float want = tree_sum(p, t, root, in, n, j);
      exact = memcmp(&want, &out[0][j], sizeof(float)) == 0;
    }
    dense_expect(same, "tree bits P=%d: ranks or runs differ in their float32 results", p);
    dense_expect(exact, "tree bits P=%d: result is not the tree-ordered sum", p);
    for (int r = 0; r < p && s; r++) sc_sched_free(&s[r]);
    free(s);
    free(sr);
    free(in);
    free(out[0]);
    free(out[1]);
  }
}

/* ---- arguments --------------------------------------------------------- */

static void test_args(void) {
  const sc_coll_args_t good = {.coll = SC_COLL_ALLREDUCE,
                               .nranks = 4,
                               .rank = 1,
                               .count = 10,
                               .elem_size = 4,
                               .chunk_elems = 3};
  sc_coll_args_t bad[3] = {good, good, good};
  bad[0].nranks = 0;
  bad[1].rank = 4;
  bad[2].chunk_elems = 0;
  sc_sched_t s;
  sc_sched_init(&s);
  for (int i = 0; i < 3; i++) {
    sc_sched_reset(&s);
    dense_expect(sc_tree_allreduce_schedule(&bad[i], &s) == SC_ERR_INVALID_ARG,
                 "tree accepts bad argument set %d", i);
  }
  sc_coll_args_t avg = good;
  avg.avg = 1;
  sc_sched_reset(&s);
  int ok = sc_tree_allreduce_schedule(&avg, &s) == SC_SUCCESS;
  dense_expect(ok && s.avg_buf == SC_BUF_RECV && s.avg_off == 0 && s.avg_count == 10,
               "tree avg: output region not marked");
  avg.count = 0;
  sc_sched_reset(&s);
  ok = sc_tree_allreduce_schedule(&avg, &s) == SC_SUCCESS;
  dense_expect(ok && s.nsteps == 0, "tree count 0: steps emitted");
  sc_sched_free(&s);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
  static const struct {
    const char *name;
    void (*fn)(void);
  } parts[] = {{"args", test_args},
               {"trees", test_trees},
               {"cost", test_cost},
               {"depth", test_depth},
               {"bits", test_bits},
               {"structure", sweep_structure},
               {"dtypes_ops", sweep_dtypes_ops},
               {"large", sweep_large}};
  setvbuf(stdout, NULL, _IOLBF, 0);
  double t0 = now();
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    int before = dense_passed + dense_failed;
    double t = now();
    parts[i].fn();
    fprintf(stderr, "%-12s %6d cases %6.2f s\n", parts[i].name,
            dense_passed + dense_failed - before, now() - t);
  }
  fprintf(stderr, "total %.2f s\n", now() - t0);
  printf("%d passed, %d failed\n", dense_passed, dense_failed);
  return dense_failed ? 1 : 0;
}
