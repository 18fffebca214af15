/* SPDX-License-Identifier: BSD-3-Clause */
/* Soak test (run under sc-run, 4 ranks): N mixed operations (all-reduce,
 * reduce-scatter, all-gather, broadcast, reduce, barrier; blocking and not, in
 * place and not) over communicators that force each all-reduce and broadcast
 * algorithm plus a 2-rank split, with random sizes (0, odd, up to -m
 * elements), dtypes, ops and roots drawn from a seed every rank shares. Every
 * result is checked against a reference each rank computes from the seeded
 * inputs of all ranks, with guard elements past every output. Resource use
 * must be flat between the end of the warm-up (every collective once at the
 * largest size on every communicator, then a tenth of the operations) and
 * the end: open fds equal, anonymous resident memory within SOAK_RSS_SLACK_KB
 * (allocator fragmentation may grow it a little; a leak per operation would
 * not fit); and fds back to their count once the sub-communicators are
 * destroyed.
 * Usage: soak [-n OPS] [-s SEED] [-m MAXCOUNT] [-v progress] [-k keep the
 * communicators at exit, for leak diagnosis] */
#include <dirent.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/sanitize.h"
#include "test/multi/mr_common.h"

#define GUARD             16
#define SOAK_RSS_SLACK_KB 4096L

/* Under ASan/TSan freed memory sits in a quarantine, so resident memory grows
 * with the number of operations whatever the library does; there
 * LeakSanitizer (and valgrind, tools/sanitize.sh) look for leaks instead. */
#define SOAK_RSS_CHECK (!SC_ASAN && !SC_TSAN)

enum { C_ALLREDUCE, C_REDUCE_SCATTER, C_ALLGATHER, C_BROADCAST, C_REDUCE, C_BARRIER, C_NKINDS };
static const char *const kind_names[] = {"allreduce", "reduce_scatter", "allgather",
                                         "broadcast", "reduce",         "barrier"};

typedef struct scomm {
  sc_comm_t *comm;
  char name[48];
  int rank, size;
} scomm_t;

typedef struct opdesc {
  long idx;
  int comm, kind, inplace, nonblocking, root;
  sc_dtype_t dt;
  sc_redop_t op;
  size_t count; /* per-rank block for reduce_scatter / allgather */
} opdesc_t;

static uint64_t seed = 1;
static size_t max_count = (size_t)1 << 17;

static uint64_t mix(uint64_t x) { /* splitmix64 finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return mix(a ^ mix(b ^ mix(c ^ mix(d))));
}

static int is_unsigned(sc_dtype_t dt) {
  return dt == SC_UINT8 || dt == SC_UINT32 || dt == SC_UINT64;
}

static int is_int(sc_dtype_t dt) {
  return dt <= SC_UINT64;
}

/* Small integers, so every result is exact in every dtype (int8 and fp16 too):
 * |sum| <= 4*8*4 for float AVG (inputs scaled by the size so the mean is an
 * integer), |prod| <= 2^4. */
static double input(const opdesc_t *o, int r, size_t i, int n) {
  uint64_t h = hash4(seed, (uint64_t)o->idx, (uint64_t)r, i);
  if (o->op == SC_PROD) {
    unsigned s = (unsigned)(h % 4);
    return s == 0 ? 2.0 : (s == 1 && !is_unsigned(o->dt)) ? -1.0 : 1.0;
  }
  long v = (long)(h % 17);
  if (!is_unsigned(o->dt)) v -= 8;
  if (o->op == SC_AVG && !is_int(o->dt)) v *= n;
  return (double)v;
}

static double reduced(const opdesc_t *o, size_t i, int n) {
  double acc = input(o, 0, i, n);
  for (int r = 1; r < n; r++) {
    double v = input(o, r, i, n);
    if (o->op == SC_SUM || o->op == SC_AVG)
      acc += v;
    else if (o->op == SC_PROD)
      acc *= v;
    else if (o->op == SC_MIN)
      acc = v < acc ? v : acc;
    else
      acc = v > acc ? v : acc;
  }
  if (o->op == SC_AVG) acc = is_int(o->dt) ? trunc(acc / n) : acc / n;
  return acc;
}

static double sentinel(sc_dtype_t dt) {
  return is_unsigned(dt) ? 200.0 : -100.0;
}

static void fill_const(void *buf, size_t n, sc_dtype_t dt, double v) {
  for (size_t i = 0; i < n; i++) mr_set(buf, i, dt, v);
}

static void describe(const opdesc_t *o, const scomm_t *c, char *out, size_t len) {
  snprintf(out, len, "op %ld on %s: %s count=%zu %s %s root=%d %s%s", o->idx, c->name,
           kind_names[o->kind], o->count, mr_dtype_names[o->dt], mr_op_names[o->op], o->root,
           o->inplace ? "in-place" : "out-of-place", o->nonblocking ? " non-blocking" : "");
}

/* Shared by every rank: the same stream of operations. */
static void draw(long idx, int ncomms, const scomm_t *comms, opdesc_t *o) {
  uint64_t s = hash4(seed, (uint64_t)idx, 0x50a6ull, 0);
#define NEXT() (s = mix(s))
  memset(o, 0, sizeof(*o));
  o->idx = idx;
  o->comm = (int)(NEXT() % (uint64_t)ncomms);
  int n = comms[o->comm].size;
  unsigned k = (unsigned)(NEXT() % 100);
  o->kind = k < 35   ? C_ALLREDUCE
            : k < 50 ? C_REDUCE_SCATTER
            : k < 65 ? C_ALLGATHER
            : k < 77 ? C_BROADCAST
            : k < 92 ? C_REDUCE
                     : C_BARRIER;
  o->dt = (sc_dtype_t)(NEXT() % 10);
  o->op = (sc_redop_t)(NEXT() % 5);
  o->inplace = (int)(NEXT() % 2);
  o->nonblocking = NEXT() % 10 < 3;
  o->root = (int)(NEXT() % (uint64_t)n);
  unsigned p = (unsigned)(NEXT() % 100);
  size_t c = p < 6    ? 0
             : p < 36 ? (1 + NEXT() % 127) | 1 /* small and odd */
             : p < 76 ? 1 + NEXT() % 8192
                      : 1 + NEXT() % max_count;
  if (c > max_count) c = max_count; /* the buffers hold max_count elements (+ guard) */
  if (o->kind == C_REDUCE_SCATTER || o->kind == C_ALLGATHER) c /= (size_t)n;
  o->count = c;
#undef NEXT
}

static unsigned char *sbuf, *rbuf;

/* Returns the number of wrong elements (0: all good). */
static long check(const char *what, const void *buf, size_t from, size_t n, sc_dtype_t dt,
                  double (*want)(const opdesc_t *, size_t, void *), const opdesc_t *o, void *ctx) {
  long bad = 0;
  for (size_t i = 0; i < n; i++) {
    double got = mr_get(buf, from + i, dt), exp = want(o, i, ctx);
    if (got != exp && bad++ < 3)
      fprintf(stderr, "rank %d FAIL: %s: element %zu is %g, expected %g\n", mr_rank, what, i, got,
              exp);
  }
  return bad;
}

typedef struct ctx {
  int n;
  size_t base, block;
} ctx_t;

static double want_reduced(const opdesc_t *o, size_t i, void *p) {
  ctx_t *c = p;
  return reduced(o, c->base + i, c->n);
}

static double want_root(const opdesc_t *o, size_t i, void *p) {
  return input(o, o->root, i, ((ctx_t *)p)->n);
}

static double want_gathered(const opdesc_t *o, size_t j, void *p) {
  ctx_t *c = p;
  return input(o, (int)(j / c->block), j % c->block, c->n);
}

static double want_sentinel(const opdesc_t *o, size_t i, void *p) {
  (void)i;
  (void)p;
  return sentinel(o->dt);
}

static sc_result_t finish(sc_result_t r, sc_request_t **req) {
  if (r != SC_SUCCESS || !req) return r;
  return sc_wait(req);
}

/* Runs one operation and checks it; returns the number of failures. */
static long run_op(const opdesc_t *o, scomm_t *sc) {
  char what[192];
  describe(o, sc, what, sizeof(what));
  int me = sc->rank, n = sc->size;
  sc_comm_t *comm = sc->comm;
  sc_dtype_t dt = o->dt;
  size_t esz = sc_dtype_size(dt), cnt = o->count;
  sc_request_t *rq = NULL, **req = o->nonblocking ? &rq : NULL;
  ctx_t c = {.n = n};
  long bad = 0;
  sc_result_t r = SC_SUCCESS;
  switch (o->kind) {
  case C_ALLREDUCE: {
    fill_const(rbuf, cnt + GUARD, dt, sentinel(dt));
    void *in = o->inplace ? (void *)rbuf : (void *)sbuf;
    for (size_t i = 0; i < cnt; i++) mr_set(in, i, dt, input(o, me, i, n));
    r = req ? finish(sc_iallreduce(in, rbuf, cnt, dt, o->op, comm, req), req)
            : sc_allreduce(in, rbuf, cnt, dt, o->op, comm);
    if (r == SC_SUCCESS) bad += check(what, rbuf, 0, cnt, dt, want_reduced, o, &c);
    bad += check(what, rbuf, cnt, GUARD, dt, want_sentinel, o, &c);
    break;
  }
  case C_REDUCE_SCATTER: {
    size_t total = cnt * (size_t)n;
    fill_const(sbuf, total + GUARD, dt, sentinel(dt));
    fill_const(rbuf, cnt + GUARD, dt, sentinel(dt));
    for (size_t i = 0; i < total; i++) mr_set(sbuf, i, dt, input(o, me, i, n));
    /* In place: NCCL's convention, this rank's block of the send buffer. */
    void *out = o->inplace ? (void *)(sbuf + (size_t)me * cnt * esz) : (void *)rbuf;
    r = req ? finish(sc_ireduce_scatter(sbuf, out, cnt, dt, o->op, comm, req), req)
            : sc_reduce_scatter(sbuf, out, cnt, dt, o->op, comm);
    c.base = (size_t)me * cnt;
    if (r == SC_SUCCESS) bad += check(what, out, 0, cnt, dt, want_reduced, o, &c);
    if (o->inplace)
      bad += check(what, sbuf, total, GUARD, dt, want_sentinel, o, &c);
    else
      bad += check(what, rbuf, cnt, GUARD, dt, want_sentinel, o, &c);
    break;
  }
  case C_ALLGATHER: {
    size_t total = cnt * (size_t)n;
    fill_const(rbuf, total + GUARD, dt, sentinel(dt));
    void *in = o->inplace ? (void *)(rbuf + (size_t)me * cnt * esz) : (void *)sbuf;
    for (size_t i = 0; i < cnt; i++) mr_set(in, i, dt, input(o, me, i, n));
    r = req ? finish(sc_iallgather(in, rbuf, cnt, dt, comm, req), req)
            : sc_allgather(in, rbuf, cnt, dt, comm);
    c.block = cnt ? cnt : 1;
    if (r == SC_SUCCESS) bad += check(what, rbuf, 0, total, dt, want_gathered, o, &c);
    bad += check(what, rbuf, total, GUARD, dt, want_sentinel, o, &c);
    break;
  }
  case C_BROADCAST: {
    fill_const(rbuf, cnt + GUARD, dt, sentinel(dt));
    void *in = o->inplace ? (void *)rbuf : (void *)sbuf;
    if (me == o->root)
      for (size_t i = 0; i < cnt; i++) mr_set(in, i, dt, input(o, me, i, n));
    const void *send = me == o->root ? in : NULL;
    r = req ? finish(sc_ibroadcast(send, rbuf, cnt, dt, o->root, comm, req), req)
            : sc_broadcast(send, rbuf, cnt, dt, o->root, comm);
    if (r == SC_SUCCESS) bad += check(what, rbuf, 0, cnt, dt, want_root, o, &c);
    bad += check(what, rbuf, cnt, GUARD, dt, want_sentinel, o, &c);
    break;
  }
  case C_REDUCE: {
    fill_const(rbuf, cnt + GUARD, dt, sentinel(dt));
    void *in = o->inplace ? (void *)rbuf : (void *)sbuf;
    for (size_t i = 0; i < cnt; i++) mr_set(in, i, dt, input(o, me, i, n));
    r = req ? finish(sc_ireduce(in, rbuf, cnt, dt, o->op, o->root, comm, req), req)
            : sc_reduce(in, rbuf, cnt, dt, o->op, o->root, comm);
    if (r == SC_SUCCESS && me == o->root)
      bad += check(what, rbuf, 0, cnt, dt, want_reduced, o, &c);
    else if (r == SC_SUCCESS && !o->inplace) /* recvbuf is not used off the root */
      bad += check(what, rbuf, 0, cnt, dt, want_sentinel, o, &c);
    bad += check(what, rbuf, cnt, GUARD, dt, want_sentinel, o, &c);
    break;
  }
  default:
    r = req ? finish(sc_ibarrier(comm, req), req) : sc_barrier(comm);
    break;
  }
  if (r != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: %s -> %s: %s\n", mr_rank, what, sc_strerror(r), sc_last_error());
    bad++;
  }
  if (rq) {
    fprintf(stderr, "rank %d FAIL: %s: sc_wait left the request set\n", mr_rank, what);
    bad++;
  }
  return bad ? 1 : 0;
}

/* Resident kB (/proc/self/statm); field 2: all, field 3: file/shared-backed
 * (the shm transport's rings among them). */
static long statm_kb(int field) {
  FILE *f = fopen("/proc/self/statm", "r");
  long v[3] = {0, 0, 0};
  if (!f) return -1;
  int ok = fscanf(f, "%ld %ld %ld", &v[0], &v[1], &v[2]) == 3;
  fclose(f);
  return ok ? v[field - 1] * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

static long rss_kb(void) {
  return statm_kb(2);
}

/* What the RSS check uses: resident minus shared. Shared pages grow on their
 * own the first time a code path runs (library text paged in) or a ring page
 * of the shm transport is first touched, bounded by the mappings; a leak
 * shows in anonymous memory. */
static long anon_kb(void) {
  return statm_kb(2) - statm_kb(3);
}

static long fd_count(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  long n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

/* Bytes malloc has handed out and not got back, over all arenas: tells a leak
 * (this grows) from fragmentation or caching in the allocator (only RSS grows). */
static long heap_kb(void) {
  struct mallinfo2 mi = mallinfo2();
  return (long)((mi.uordblks + mi.hblkhd) / 1024);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define SOAK_OK(call)                                                                              \
  do {                                                                                             \
    sc_result_t r_ = (call);                                                                       \
    if (r_ != SC_SUCCESS) {                                                                        \
      fprintf(stderr, "rank %d: %s -> %s: %s\n", mr_rank, #call, sc_strerror(r_),                  \
              sc_last_error());                                                                    \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  long nops = 2000;
  setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines through sc-run's pipe as they come */
  int verbose = 0, keep = 0, opt;
  while ((opt = getopt(argc, argv, "n:s:m:vk")) != -1) {
    if (opt == 'n')
      nops = strtol(optarg, NULL, 10);
    else if (opt == 's')
      seed = strtoull(optarg, NULL, 10);
    else if (opt == 'm')
      max_count = strtoull(optarg, NULL, 10);
    else if (opt == 'v')
      verbose = 1;
    else if (opt == 'k')
      keep = 1;
    else {
      fprintf(stderr, "usage: %s [-n OPS] [-s SEED] [-m MAXCOUNT] [-v] [-k]\n", argv[0]);
      return 2;
    }
  }
  if (nops < 1 || max_count < 1 || max_count > ((size_t)1 << 24)) {
    fprintf(stderr, "soak: bad -n or -m\n");
    return 2;
  }
  sc_comm_t *world;
  SOAK_OK(sc_comm_init_env(&world));
  SOAK_OK(sc_comm_rank(world, &mr_rank));
  SOAK_OK(sc_comm_size(world, &mr_nranks));
  long fds_world = fd_count();

  /* One communicator per forced all-reduce algorithm (each with a broadcast
   * algorithm in turn), SC_ALGO being read when a communicator is made; and a
   * split into two halves with the ranks reversed. */
  static const char *const algos[] = {"auto", "ring", "tree", "rd", "rabenseifner"};
  static const char *const bcasts[] = {"auto", "chain", "binomial"};
  enum { NALGO = 5 };
  scomm_t comms[NALGO + 1];
  int ncomms = 0;
  for (int a = 0; a < NALGO; a++) {
    setenv("SC_ALGO", algos[a], 1);
    setenv("SC_BCAST_ALGO", bcasts[a % 3], 1);
    scomm_t *c = &comms[ncomms++];
    SOAK_OK(sc_comm_split(world, 0, mr_rank, &c->comm));
    snprintf(c->name, sizeof(c->name), "%s/%s", algos[a], bcasts[a % 3]);
  }
  unsetenv("SC_ALGO");
  unsetenv("SC_BCAST_ALGO");
  if (mr_nranks >= 4) {
    scomm_t *c = &comms[ncomms++];
    SOAK_OK(sc_comm_split(world, mr_rank % 2, -mr_rank, &c->comm));
    snprintf(c->name, sizeof(c->name), "half%d-reversed", mr_rank % 2);
  }
  for (int i = 0; i < ncomms; i++) {
    SOAK_OK(sc_comm_rank(comms[i].comm, &comms[i].rank));
    SOAK_OK(sc_comm_size(comms[i].comm, &comms[i].size));
  }

  size_t bytes = (max_count + GUARD) * 8;
  sbuf = malloc(bytes);
  rbuf = malloc(bytes);
  if (!sbuf || !rbuf) {
    fprintf(stderr, "rank %d: out of memory\n", mr_rank);
    return 1;
  }
  /* Touch every page now, so that the first large operation after the
   * warm-up does not look like growth. */
  memset(sbuf, 0, bytes);
  memset(rbuf, 0, bytes);

  /* Warm-up, part 1: every collective at the largest size in the widest dtype
   * on every communicator, in every placement, so that buffers the library
   * keeps for reuse reach their final size before memory is measured. */
  long failures = 0;
  for (int ci = 0; ci < ncomms; ci++)
    for (int kind = C_ALLREDUCE; kind < C_BARRIER; kind++)
      for (int v = 0; v < 4; v++) {
        opdesc_t o = {.idx = -1 - v,
                      .comm = ci,
                      .kind = kind,
                      .inplace = v & 1,
                      .nonblocking = v >> 1,
                      .dt = SC_FLOAT64,
                      .op = SC_SUM,
                      .root = v % comms[ci].size,
                      .count = max_count};
        if (kind == C_REDUCE_SCATTER || kind == C_ALLGATHER) o.count /= (size_t)comms[ci].size;
        failures += run_op(&o, &comms[ci]);
      }
  /* Part 2: the first tenth of the random stream (at least 100 operations). */
  long warmup = nops / 10 < 100 ? (nops < 100 ? nops / 2 : 100) : nops / 10;
  long rss0 = 0, all0 = 0, fds0 = 0;
  long kinds[C_NKINDS] = {0};
  double t0 = now_s(), tw = t0;
  for (long i = 0; i < nops; i++) {
    if (i == warmup) {
      SOAK_OK(sc_barrier(world));
      rss0 = anon_kb();
      all0 = rss_kb();
      fds0 = fd_count();
      tw = now_s();
    }
    opdesc_t o;
    draw(i, ncomms, comms, &o);
    failures += run_op(&o, &comms[o.comm]);
    kinds[o.kind]++;
    if (verbose && mr_rank == 0 && (i + 1) % 1000 == 0)
      printf("soak: %ld ops, %.1f s, RSS %ld kB (shared %ld kB), heap in use %ld kB, %ld fds\n",
             i + 1, now_s() - t0, rss_kb(), statm_kb(3), heap_kb(), fd_count());
  }
  SOAK_OK(sc_barrier(world));
  double t1 = now_s();
  long rss1 = anon_kb(), all1 = rss_kb(), fds1 = fd_count();
  /* -k: keep them, so that valgrind --show-leak-kinds=all shows what they hold. */
  if (keep) return failures ? 1 : 0;
  for (int i = 0; i < ncomms; i++) SOAK_OK(sc_comm_destroy(comms[i].comm));
  long fds_end = fd_count();

  if (fds1 != fds0) {
    fprintf(stderr, "rank %d FAIL: %ld open fds after warm-up, %ld at the end\n", mr_rank, fds0,
            fds1);
    failures++;
  }
  if (SOAK_RSS_CHECK && rss1 - rss0 > SOAK_RSS_SLACK_KB) {
    fprintf(stderr, "rank %d FAIL: anonymous RSS grew from %ld kB to %ld kB (slack %ld kB)\n",
            mr_rank, rss0, rss1, SOAK_RSS_SLACK_KB);
    failures++;
  }
  if (fds_end != fds_world) {
    fprintf(stderr,
            "rank %d FAIL: %ld open fds with the world communicator alone, %ld after destroying "
            "the others\n",
            mr_rank, fds_world, fds_end);
    failures++;
  }
  /* Rank 0 reports the worst of every rank. */
  int64_t mine[3] = {failures, rss1 - rss0, fds1 - fds0}, worst[3];
  SOAK_OK(sc_allreduce(mine, worst, 3, SC_INT64, SC_MAX, world));
  int64_t total_fail = 0, f = failures;
  SOAK_OK(sc_allreduce(&f, &total_fail, 1, SC_INT64, SC_SUM, world));
  if (mr_rank == 0) {
    printf("soak: %ld ops (%ld allreduce, %ld reduce_scatter, %ld allgather, %ld broadcast, %ld "
           "reduce, %ld barrier) on %d ranks over %d communicators, seed %llu, max count %zu\n",
           nops, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4], kinds[5], mr_nranks, ncomms,
           (unsigned long long)seed, max_count);
    printf("soak: %.1f s (%.1f s after the warm-up); rank 0 after warm-up -> end: RSS %ld -> %ld "
           "kB, anonymous RSS %ld -> %ld kB, fds %ld -> %ld; worst rank: anonymous RSS %+lld "
           "kB%s, fds %+lld; %lld failures\n",
           t1 - t0, t1 - tw, all0, all1, rss0, rss1, fds0, fds1, (long long)worst[1],
           SOAK_RSS_CHECK ? "" : " (not checked: sanitizer build)", (long long)worst[2],
           (long long)total_fail);
  }
  SOAK_OK(sc_comm_destroy(world));
  free(sbuf);
  free(rbuf);
  return total_fail ? 1 : 0;
}
