/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_alltoall_perf: nccl-tests' alltoall_perf for libsparsecoll, and with -v
 * the uneven all-to-all of mixture-of-experts dispatch (sc_alltoallv with the
 * count matrix of perf/a2a_matrix.h). Element k of rank r's block for rank j
 * holds rank r's input j * count + k (-v: its offset in r's send buffer), so
 * a block from the wrong rank, or for the wrong rank, is counted wrong. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/registry.h"
#include "perf/a2a_matrix.h"
#include "perf/perf_common.h"

static int uneven;
/* The benchmark's description; -v switches its algorithm variable and list. */
static perf_coll_t coll;
static uint64_t seed = A2A_SEED_DEFAULT;
static int skew = 1;

/* -v: the shares for the communicator's size, and the counts for one size. */
static struct {
  int nranks;
  uint64_t *share;
  uint64_t elems;
  size_t *count;
} mx;
/* This rank's arguments of sc_alltoallv for the current case. */
static size_t *scounts, *sdispls, *rcounts, *rdispls;

static void out_of_memory(void) {
  fprintf(stderr, "sc_alltoall_perf: out of memory for the count matrix\n");
  exit(3);
}

static void matrix_for(int nranks, uint64_t elems) {
  size_t cells = (size_t)nranks * (size_t)nranks;
  if (mx.nranks != nranks) {
    free(mx.share);
    free(mx.count);
    mx.share = malloc(cells * sizeof(*mx.share));
    mx.count = malloc(cells * sizeof(*mx.count));
    if (!mx.share || !mx.count) out_of_memory();
    if (a2a_shares(nranks, seed, skew, mx.share) != 0) {
      fprintf(stderr, "sc_alltoall_perf: -v supports up to %d ranks\n", A2A_MAX_RANKS);
      exit(2);
    }
    mx.nranks = nranks;
    mx.elems = UINT64_MAX;
  }
  if (elems > A2A_MAX_ELEMS) {
    fprintf(stderr, "sc_alltoall_perf: -v: %" PRIu64 " elements per rank is too many\n", elems);
    exit(2);
  }
  if (mx.elems != elems) a2a_counts(nranks, mx.share, elems, mx.count);
  mx.elems = elems;
}

static size_t cell(int from, int to) {
  return mx.count[(size_t)from * (size_t)mx.nranks + (size_t)to];
}

/* Where rank `from`'s block for rank `to` starts in its send buffer. */
static size_t send_offset(int from, int to) {
  size_t off = 0;
  for (int j = 0; j < to; j++) off += cell(from, j);
  return off;
}

static size_t received(int rank) {
  size_t n = 0;
  for (int i = 0; i < mx.nranks; i++) n += cell(i, rank);
  return n;
}

static void set_count(perf_case_t *c, size_t size) {
  size_t elems = size / c->elem_size;
  c->count = elems / (size_t)c->nranks; /* -v: the mean block */
  if (!uneven) {
    c->total = c->count * (size_t)c->nranks;
    return;
  }
  c->total = elems;
  matrix_for(c->nranks, elems);
  c->recv_bytes = received(c->rank) * c->elem_size;
}

static void place(perf_case_t *c) {
  c->recvbuf = c->recv_alloc;
  if (!uneven) {
    /* In place as nccl-tests: one buffer holds the blocks to send and receives. */
    c->sendbuf = c->in_place ? c->recv_alloc : c->send_alloc;
    return;
  }
  if (c->in_place) { /* sc_alltoallv has no in-place form */
    c->skip = 1;
    return;
  }
  c->sendbuf = c->send_alloc;
  int n = c->nranks;
  if (!scounts) {
    scounts = malloc(4 * (size_t)n * sizeof(size_t));
    if (!scounts) out_of_memory();
    sdispls = scounts + n;
    rcounts = sdispls + n;
    rdispls = rcounts + n;
  }
  size_t soff = 0, roff = 0;
  for (int j = 0; j < n; j++) {
    scounts[j] = cell(c->rank, j);
    sdispls[j] = soff;
    soff += scounts[j];
    rcounts[j] = cell(j, c->rank);
    rdispls[j] = roff;
    roff += rcounts[j];
  }
}

static sc_result_t run(const perf_case_t *c) {
  if (uneven)
    return sc_alltoallv(c->sendbuf, scounts, sdispls, c->recvbuf, rcounts, rdispls, c->dtype,
                        c->comm);
  return sc_alltoall(c->sendbuf, c->recvbuf, c->count, c->dtype, c->comm);
}

static void fill(const perf_case_t *c) {
  perf_poison(c->recvbuf, uneven ? c->recv_bytes : c->total * c->elem_size);
  for (size_t g = 0; g < c->total; g++) perf_store_input(c, c->sendbuf, g, c->rank, g);
}

static int64_t check(const perf_case_t *c) {
  int64_t wrong = 0;
  if (!uneven) {
    for (size_t g = 0; g < c->total; g++) {
      size_t from = g / c->count, k = g % c->count;
      wrong += !perf_is_input(c, c->recvbuf, g, (int)from, (size_t)c->rank * c->count + k);
    }
    return wrong;
  }
  for (int i = 0; i < c->nranks; i++) {
    size_t first = send_offset(i, c->rank);
    for (size_t k = 0; k < rcounts[i]; k++)
      wrong += !perf_is_input(c, c->recvbuf, rdispls[i] + k, i, first + k);
  }
  return wrong;
}

/* -v: no call names the uneven all-to-all's pick (n/a in the column). */
static sc_result_t auto_pick(const perf_case_t *c, const char **name) {
  if (uneven) return SC_ERR_UNSUPPORTED;
  return sc_alltoall_algo(c->comm, c->count, c->dtype, name);
}

static const perf_opt_t opts[] = {
    {"uneven", 'v', 0,
     "  -v, --uneven          sc_alltoallv with a count per pair, as MoE dispatch: each\n"
     "                        rank sends size bytes, split over the ranks by Zipf-law\n"
     "                        popularity (--skew) jittered per rank (perf/a2a_matrix.h);\n"
     "                        every rank derives the same matrix (printed without a\n"
     "                        communicator by: sc_alltoall_perf --counts P [--seed N]\n"
     "                        [--skew S] ELEMS...); no in-place form; -a then sets\n"
     "                        SC_A2AV_ALGO (pairwise sparse hier, or compare; auto's\n"
     "                        pick is not shown)\n"},
    {"seed", 0, 1, "      --seed N          -v: the matrix's seed (default 1)\n"},
    {"skew", 0, 1,
     "      --skew 0|1|2      -v: Zipf exponent of the ranks' popularity; 0 leaves\n"
     "                        only the jitter (default 1)\n"},
    {NULL, 0, 0, NULL},
};

static const char *parse_opt(int index, const char *arg) {
  char *end = NULL;
  switch (index) {
  case 0:
    uneven = 1;
    coll.algo_env = "SC_A2AV_ALGO";
    coll.compare_algos = perf_registry_algos(SC_COLL_ALLTOALLV);
    return NULL;
  case 1:
    seed = strtoull(arg, &end, 0);
    return *arg && !*end && *arg != '-' ? NULL : "expected a non-negative integer";
  default:
    skew = (int)strtol(arg, &end, 10);
    return *arg && !*end && skew >= 0 && skew <= A2A_MAX_SKEW ? NULL : "expected 0, 1 or 2";
  }
}

static void describe(FILE *f, int json, int nranks) {
  if (!uneven) return;
  matrix_for(nranks, mx.nranks == nranks ? mx.elems : 0);
  /* What each rank receives against the mean, at the shares (sizes round). */
  uint64_t most = 0;
  for (int j = 0; j < nranks; j++) {
    uint64_t col = 0;
    for (int i = 0; i < nranks; i++) col += mx.share[(size_t)i * nranks + j];
    if (col > most) most = col;
  }
  double imbalance = (double)most / (double)A2A_SHARE_ONE;
  if (json) {
    fprintf(f,
            ",\n  \"uneven\": {\"seed\": %" PRIu64 ", \"skew\": %d, \"recv_max_over_mean\": %.4f, "
            "\"shares\": [",
            seed, skew, imbalance);
    for (int i = 0; i < nranks; i++) {
      fprintf(f, "%s[", i ? ", " : "");
      for (int j = 0; j < nranks; j++)
        fprintf(f, "%s%.6f", j ? ", " : "",
                (double)mx.share[(size_t)i * nranks + j] / (double)A2A_SHARE_ONE);
      fprintf(f, "]");
    }
    fprintf(f, "]}");
    return;
  }
  fprintf(f,
          "# sc_alltoallv: size = each rank's send buffer, count = its mean block; seed %" PRIu64
          ", skew %d;\n# most loaded receiver gets %.2fx the mean\n",
          seed, skew, imbalance);
  if (nranks > 16) return;
  fprintf(f, "# share of rank i's buffer for rank j, per mille (row i):\n");
  for (int i = 0; i < nranks; i++) {
    fprintf(f, "#  %2d:", i);
    for (int j = 0; j < nranks; j++)
      fprintf(f, " %4.0f", 1000.0 * (double)mx.share[(size_t)i * nranks + j] / A2A_SHARE_ONE);
    fprintf(f, "\n");
  }
}

/* sc_alltoall_perf --counts P [--seed N] [--skew S] ELEMS...: the -v matrix
 * for P ranks, one line per ELEMS (row after row), without a communicator;
 * the tests compare it with the peers' copies of the arithmetic. */
static int print_counts(int argc, char **argv) {
  int nranks = atoi(argv[2]);
  if (nranks < 1) {
    fprintf(stderr, "sc_alltoall_perf --counts P [--seed N] [--skew S] ELEMS...\n");
    return 2;
  }
  int a = 3;
  for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
    int bad = strcmp(argv[a], "--seed") == 0   ? parse_opt(1, argv[a + 1]) != NULL
              : strcmp(argv[a], "--skew") == 0 ? parse_opt(2, argv[a + 1]) != NULL
                                               : 1;
    if (bad) {
      fprintf(stderr, "sc_alltoall_perf --counts: bad option '%s'\n", argv[a]);
      return 2;
    }
  }
  for (; a < argc; a++) {
    matrix_for(nranks, strtoull(argv[a], NULL, 10));
    printf("%" PRIu64 ":", mx.elems);
    for (size_t k = 0; k < (size_t)nranks * (size_t)nranks; k++) printf(" %zu", mx.count[k]);
    printf("\n");
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--counts") == 0) return print_counts(argc, argv);
  coll = (perf_coll_t){
      .binary = "sc_alltoall_perf",
      .name = "alltoall",
      .algo_env = "SC_A2A_ALGO",
      .blocks_per_rank = 1,
      .compare_algos = perf_registry_algos(SC_COLL_ALLTOALL),
      .auto_pick = auto_pick,
      .busbw = PERF_BUSBW_GATHER,
      .place = place,
      .run = run,
      .fill = fill,
      .check = check,
      .set_count = set_count,
      .opts = opts,
      .parse_opt = parse_opt,
      .size_help = "The size column is one rank's send buffer (nranks blocks), count the\n"
                   "elements of one block, the call's count (-v: the mean block).\n",
      .describe = describe,
  };
  return perf_main(&coll, argc, argv);
}
