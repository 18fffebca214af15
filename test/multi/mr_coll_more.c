/* SPDX-License-Identifier: BSD-3-Clause */
/* The all-to-all, the uneven all-to-all, gather, scatter and the uneven
 * all-gather through the public API under sc-run (--device moves its data
 * with the library's device runtime table, as mr_device does), each result
 * against a reference every rank computes on its own: element k of the block
 * rank s sends rank d is a hash of (s, d, k, the call's number), an integer
 * that every dtype holds exactly, so a block that lands in the wrong place, a
 * stale buffer or a lost element shows. Every receive region is followed by
 * guard elements, and the gaps between uneven blocks hold a sentinel: both
 * must come back untouched; every input must come back unchanged.
 *
 * Modes (several may be given):
 *   (none)      every collective: dtypes, counts, placements, roots, forms,
 *               several requests in flight, a mixed sequence with the older
 *               collectives, argument errors on several ranks;
 *   --quick     a sample of dtypes and roots, no multi-MiB calls;
 *   --a2a-only  the all-to-all alone and sc_alltoall_algo against
 *               SC_A2A_ALGO (for each forced algorithm);
 *   --gather-only, --agv-only, --a2av-only  gather and scatter, the uneven
 *               all-gather, or the uneven all-to-all alone (for
 *               SC_GATHER_ALGO / SC_AGV_ALGO / SC_A2AV_ALGO);
 *   --device    the buffers in device memory (the stand-in of
 *               SC_DEVRT_STANDIN, or CUDA), the stream forms too;
 *   --mismatch more|fewer|zero  one uneven all-to-all where rank 0 sends
 *               the last rank 2 elements more (fewer; none) than that rank
 *               expects: see test_mismatch;
 *   --mismatch a2a|agv|root  calls that differ in a count or the root: see
 *               test_calls_differ. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kernels/devrt.h"
#include "test/multi/mr_common.h"

#define GUARD 64 /* elements after each receive region that must stay untouched */
#define MAXB  8  /* calls in flight at once */

enum { A2A, A2AV, GATHER, SCATTER, AGV, AR, BCAST };
enum { F_BLOCK, F_NB, F_STREAM };
static const char *const form_names[] = {"blocking", "non-blocking", "stream"};

static sc_comm_t *comm;
static int quick, device;
static int nforms = 2; /* the stream form needs device buffers */

/* ---- buffers ----
 * On the host every region is an allocation of its own, of its exact size,
 * so that a sanitizer sees an access past it. With --device the regions are
 * carved per batch of calls from two device arenas (send, receive), their
 * host images from two host arenas at the same offsets, uploaded before the
 * calls and downloaded after. */
static const sc_devrt_t *rt;
static void *stream, *event;
static size_t cap;
static unsigned char *hs, *hr, *ds, *dr;
static size_t s_used, r_used;

static void dev_wait(const char *what) {
  if (rt->event_record(event, stream) != SC_SUCCESS) {
    mr_fail("%s: event_record failed", what);
    return;
  }
  struct timespec t0, now, nap = {0, 20000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int done = 0;
    if (rt->event_query(event, &done) != SC_SUCCESS) {
      mr_fail("%s: event_query failed", what);
      return;
    }
    if (done) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec > 120) {
      mr_fail("%s: the stream did not pass within 120 s", what);
      exit(1);
    }
    nanosleep(&nap, NULL);
  }
}

static size_t take(size_t *used, size_t bytes) {
  size_t off = *used;
  *used += (bytes + 63) / 64 * 64;
  if (*used > cap) {
    fprintf(stderr, "rank %d: arena of %zu bytes too small\n", mr_rank, cap);
    exit(2);
  }
  return off;
}

/* A region of bytes: its host image (*img) and the address the call gets. */
static void *region(int send, size_t bytes, size_t *off, unsigned char **img) {
  if (!device) {
    *img = malloc(bytes ? bytes : 1);
    if (!*img) {
      fprintf(stderr, "rank %d: no memory for %zu bytes\n", mr_rank, bytes);
      exit(2);
    }
    return *img;
  }
  *off = take(send ? &s_used : &r_used, bytes);
  *img = (send ? hs : hr) + *off;
  return (send ? ds : dr) + *off;
}

/* ---- values ---- */

static unsigned salt; /* the call's number: the same on every rank */

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static int is_unsigned(sc_dtype_t dt) {
  return dt == SC_UINT8 || dt == SC_UINT32 || dt == SC_UINT64;
}

/* As many integers as the dtype holds exactly, so that a misplaced element
 * rarely matches by chance; the sentinel lies outside them. */
static uint64_t span(sc_dtype_t dt) {
  switch (dt) {
  case SC_INT8:
  case SC_UINT8:
    return 250;
  case SC_BFLOAT16:
    return 500;
  case SC_FLOAT16:
    return 4000;
  case SC_INT32:
  case SC_UINT32:
  case SC_FLOAT32:
    return (uint64_t)1 << 24;
  default:
    return (uint64_t)1 << 40;
  }
}

static double sentinel(sc_dtype_t dt) {
  switch (dt) {
  case SC_INT8:
    return -128;
  case SC_UINT8:
    return 255;
  case SC_BFLOAT16:
    return -512;
  case SC_FLOAT16:
    return -4096;
  case SC_UINT32:
    return 2147483648.0;
  case SC_INT32:
  case SC_FLOAT32:
    return -1073741824.0;
  case SC_UINT64:
    return 1125899906842624.0;
  default:
    return -1125899906842624.0;
  }
}

/* Element k of what rank src sends rank dst in the current call. */
static double val(int src, int dst, size_t k, sc_dtype_t dt) {
  uint64_t h = mix64((uint64_t)salt * 0x9e3779b97f4a7c15ULL + (uint64_t)(unsigned)src);
  h = mix64(h ^ ((uint64_t)(unsigned)dst << 40) ^ (uint64_t)k);
  uint64_t s = span(dt);
  double v = (double)(h % s);
  return is_unsigned(dt) ? v : v - (double)(s / 2);
}

static void fill_sentinel(void *buf, size_t n, sc_dtype_t dt) {
  double s = sentinel(dt);
  for (size_t i = 0; i < n; i++) mr_set(buf, i, dt, s);
}

static void fill_block(void *buf, size_t n, int src, int dst, sc_dtype_t dt) {
  for (size_t k = 0; k < n; k++) mr_set(buf, k, dt, val(src, dst, k, dt));
}

/* A deterministic generator every rank runs alike from a shared seed. */
static uint64_t rng_state;
static void rng_seed(uint64_t s) {
  rng_state = s;
}
static uint64_t rng(void) {
  rng_state += 0x9e3779b97f4a7c15ULL;
  return mix64(rng_state);
}

/* ---- one call: its buffers, expected images and arrays ---- */

typedef struct tcase {
  char what[200];
  int coll, form;
  sc_dtype_t dt;
  size_t count; /* a block (all-to-all, gather, scatter) or the vector */
  int root;
  int inplace;
  size_t block;               /* elements per block of the receive region, for messages (0: none) */
  size_t soff, sn;            /* send region: arena offset, elements (sn 0: none of its own) */
  size_t roff, rn;            /* receive region, guard included (rn 0: none) */
  unsigned char *simg, *rimg; /* their host images */
  const void *sp;
  void *rp;
  size_t *v;     /* the v collectives' arrays as called: 4 x nranks */
  size_t *vpass; /* the copy the call gets, garbled and freed once it returns */
  unsigned char *want, *sent;
  sc_request_t *req;
  int posted;
} tcase_t;

static tcase_t cases[MAXB];
static int ncases;

static tcase_t *new_case(int coll, int form, sc_dtype_t dt) {
  if (ncases == MAXB) {
    fprintf(stderr, "rank %d: too many calls in one batch\n", mr_rank);
    exit(2);
  }
  tcase_t *c = &cases[ncases++];
  memset(c, 0, sizeof(*c));
  c->coll = coll;
  c->form = form;
  c->dt = dt;
  salt++;
  return c;
}

/* A receive region of n elements plus the guard, all sentinel, and its
 * expected image likewise: the setup writes the expected blocks. */
static unsigned char *recv_region(tcase_t *c, size_t n) {
  size_t es = sc_dtype_size(c->dt);
  c->rn = n + GUARD;
  c->rp = region(0, c->rn * es, &c->roff, &c->rimg);
  fill_sentinel(c->rimg, c->rn, c->dt);
  c->want = malloc(c->rn * es);
  fill_sentinel(c->want, c->rn, c->dt);
  return c->rimg;
}

/* A send region of n elements of its own (an input, which must come back
 * unchanged); the caller fills it, then calls sent_copy. */
static unsigned char *send_region(tcase_t *c, size_t n) {
  size_t es = sc_dtype_size(c->dt);
  c->sn = n;
  c->sp = region(1, n * es, &c->soff, &c->simg);
  fill_sentinel(c->simg, n, c->dt);
  return c->simg;
}

static void sent_copy(tcase_t *c) {
  size_t bytes = c->sn * sc_dtype_size(c->dt);
  c->sent = malloc(bytes ? bytes : 1);
  memcpy(c->sent, c->simg, bytes);
}

static unsigned char *at(unsigned char *base, size_t elems, sc_dtype_t dt) {
  return base + elems * sc_dtype_size(dt);
}

/* ---- setups ---- */

static void setup_alltoall(int form, sc_dtype_t dt, size_t count, int inplace) {
  tcase_t *c = new_case(A2A, form, dt);
  const int p = mr_nranks;
  c->count = count;
  c->inplace = inplace;
  c->block = count;
  snprintf(c->what, sizeof(c->what), "alltoall count=%zu %s %s %s", count, mr_dtype_names[dt],
           inplace ? "in-place" : "out-of-place", form_names[form]);
  unsigned char *r = recv_region(c, (size_t)p * count);
  for (int i = 0; i < p; i++) fill_block(at(c->want, (size_t)i * count, dt), count, i, mr_rank, dt);
  unsigned char *s = inplace ? r : send_region(c, (size_t)p * count);
  for (int j = 0; j < p; j++) fill_block(at(s, (size_t)j * count, dt), count, mr_rank, j, dt);
  if (inplace) {
    c->sp = c->rp;
  } else {
    sent_copy(c);
    if (count == 0) c->sp = c->rp = NULL; /* a zero count may pass NULL buffers */
  }
}

/* root's block lands at root*count on the root; off the root, recvbuf is
 * NULL or a region that must stay untouched. */
static void setup_gather(int form, sc_dtype_t dt, size_t count, int root, int inplace,
                         int null_off_root) {
  tcase_t *c = new_case(GATHER, form, dt);
  const int p = mr_nranks, me = mr_rank;
  c->count = count;
  c->root = root;
  c->inplace = inplace;
  c->block = count;
  snprintf(c->what, sizeof(c->what), "gather count=%zu %s root=%d %s%s %s", count,
           mr_dtype_names[dt], root, inplace ? "in-place" : "out-of-place",
           null_off_root ? " NULL-off-root" : "", form_names[form]);
  if (me == root) {
    unsigned char *r = recv_region(c, (size_t)p * count);
    for (int i = 0; i < p; i++) fill_block(at(c->want, (size_t)i * count, dt), count, i, root, dt);
    if (inplace) {
      fill_block(at(r, (size_t)root * count, dt), count, root, root, dt);
      c->sp = at(c->rp, (size_t)root * count, dt);
      return;
    }
  } else if (!null_off_root) {
    recv_region(c, (size_t)p * count);
  }
  fill_block(send_region(c, count), count, me, root, dt);
  sent_copy(c);
}

/* Every rank receives block rank of the root's; off the root, sendbuf is
 * NULL or an input that must come back unchanged. */
static void setup_scatter(int form, sc_dtype_t dt, size_t count, int root, int inplace,
                          int null_off_root) {
  tcase_t *c = new_case(SCATTER, form, dt);
  const int p = mr_nranks, me = mr_rank;
  c->count = count;
  c->root = root;
  c->inplace = inplace;
  c->block = count;
  snprintf(c->what, sizeof(c->what), "scatter count=%zu %s root=%d %s%s %s", count,
           mr_dtype_names[dt], root, inplace ? "in-place" : "out-of-place",
           null_off_root ? " NULL-off-root" : "", form_names[form]);
  if (me == root && inplace) {
    /* recvbuf == sendbuf + root*count: the whole input is the region, and
     * it must come back as it went. */
    unsigned char *r = recv_region(c, (size_t)p * count);
    for (int j = 0; j < p; j++) {
      fill_block(at(r, (size_t)j * count, dt), count, root, j, dt);
      fill_block(at(c->want, (size_t)j * count, dt), count, root, j, dt);
    }
    c->sp = c->rp;
    c->rp = at(c->rp, (size_t)root * count, dt);
    return;
  }
  recv_region(c, count);
  fill_block(c->want, count, root, me, dt);
  if (me == root) {
    unsigned char *s = send_region(c, (size_t)p * count);
    for (int j = 0; j < p; j++) fill_block(at(s, (size_t)j * count, dt), count, root, j, dt);
    sent_copy(c);
  } else if (!null_off_root) {
    fill_block(send_region(c, (size_t)p * count), (size_t)p * count, me, me, dt);
    sent_copy(c);
  }
}

/* Blocks at displacements in a random order with random gaps; a zero
 * block's displacement is anywhere in the region. Returns the extent. */
static size_t place_blocks(const size_t *counts, size_t *displs) {
  const int p = mr_nranks;
  int order[64];
  for (int i = 0; i < p; i++) order[i] = i;
  for (int i = p - 1; i > 0; i--) {
    int j = (int)(rng() % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  size_t end = rng() % 3;
  for (int t = 0; t < p; t++) {
    displs[order[t]] = end;
    end += counts[order[t]] + rng() % 5;
  }
  for (int i = 0; i < p; i++)
    if (!counts[i]) displs[i] = rng() % (end + 1);
  return end;
}

/* matrix[i*p + j]: what rank i sends rank j. */
static void setup_alltoallv(int form, sc_dtype_t dt, const size_t *matrix, const char *pattern) {
  tcase_t *c = new_case(A2AV, form, dt);
  const int p = mr_nranks, me = mr_rank;
  c->v = malloc(4 * (size_t)p * sizeof(size_t));
  size_t *sc = c->v, *sd = sc + p, *rc = sd + p, *rd = rc + p;
  for (int j = 0; j < p; j++) {
    sc[j] = matrix[(size_t)me * p + j];
    rc[j] = matrix[(size_t)j * p + me];
  }
  /* The layout is this rank's own: other ranks need only the counts. */
  uint64_t keep = rng_state;
  rng_seed(mix64(salt) ^ (uint64_t)me);
  size_t send_end = place_blocks(sc, sd), recv_end = place_blocks(rc, rd);
  rng_state = keep;
  size_t sent = 0, received = 0;
  for (int i = 0; i < p; i++) {
    sent += sc[i];
    received += rc[i];
  }
  snprintf(c->what, sizeof(c->what), "alltoallv %s (sends %zu, receives %zu) %s %s", pattern, sent,
           received, mr_dtype_names[dt], form_names[form]);
  recv_region(c, recv_end);
  for (int i = 0; i < p; i++) fill_block(at(c->want, rd[i], dt), rc[i], i, me, dt);
  unsigned char *s = send_region(c, send_end);
  for (int j = 0; j < p; j++) fill_block(at(s, sd[j], dt), sc[j], me, j, dt);
  sent_copy(c);
  if (!sent) c->sp = NULL;
  if (!received) c->rp = NULL;
  c->vpass = malloc(4 * (size_t)p * sizeof(size_t));
  memcpy(c->vpass, c->v, 4 * (size_t)p * sizeof(size_t));
}

/* counts and displs the same on every rank. */
static void setup_allgatherv(int form, sc_dtype_t dt, const size_t *counts, const size_t *displs,
                             int inplace, const char *pattern) {
  tcase_t *c = new_case(AGV, form, dt);
  const int p = mr_nranks, me = mr_rank;
  c->inplace = inplace;
  c->count = counts[me];
  c->v = malloc(4 * (size_t)p * sizeof(size_t));
  size_t *rc = c->v + 2 * p, *rd = rc + p;
  memset(c->v, 0, 2 * (size_t)p * sizeof(size_t));
  memcpy(rc, counts, (size_t)p * sizeof(size_t));
  memcpy(rd, displs, (size_t)p * sizeof(size_t));
  size_t end = 0, total = 0;
  for (int i = 0; i < p; i++) {
    total += counts[i];
    if (counts[i] && displs[i] + counts[i] > end) end = displs[i] + counts[i];
  }
  snprintf(c->what, sizeof(c->what), "allgatherv %s (%zu elements, this rank %zu) %s %s %s",
           pattern, total, counts[me], mr_dtype_names[dt], inplace ? "in-place" : "out-of-place",
           form_names[form]);
  unsigned char *r = recv_region(c, end);
  for (int i = 0; i < p; i++) fill_block(at(c->want, displs[i], dt), counts[i], i, p, dt);
  if (inplace) {
    fill_block(at(r, displs[me], dt), counts[me], me, p, dt);
    c->sp = at(c->rp, displs[me], dt);
  } else {
    fill_block(send_region(c, counts[me]), counts[me], me, p, dt);
    sent_copy(c);
    if (!counts[me]) c->sp = NULL;
  }
  c->vpass = malloc(4 * (size_t)p * sizeof(size_t));
  memcpy(c->vpass, c->v, 4 * (size_t)p * sizeof(size_t));
}

/* The older collectives, for the mixed sequences: mr_common's inputs, whose
 * sums every dtype holds. */
static void setup_allreduce(int form, sc_dtype_t dt, size_t count) {
  tcase_t *c = new_case(AR, form, dt);
  c->count = count;
  snprintf(c->what, sizeof(c->what), "allreduce count=%zu %s sum %s", count, mr_dtype_names[dt],
           form_names[form]);
  recv_region(c, count);
  for (size_t i = 0; i < count; i++)
    mr_set(c->want, i, dt, mr_expected(i + salt, dt, SC_SUM, mr_nranks));
  mr_fill(send_region(c, count), count, mr_rank, salt, dt, SC_SUM);
  sent_copy(c);
}

static void setup_broadcast(int form, sc_dtype_t dt, size_t count, int root) {
  tcase_t *c = new_case(BCAST, form, dt);
  c->count = count;
  c->root = root;
  snprintf(c->what, sizeof(c->what), "broadcast count=%zu %s root=%d %s", count, mr_dtype_names[dt],
           root, form_names[form]);
  recv_region(c, count);
  fill_block(c->want, count, root, mr_nranks + 1, dt);
  if (mr_rank == root) {
    fill_block(send_region(c, count), count, root, mr_nranks + 1, dt);
    sent_copy(c);
  }
}

/* ---- running a batch ---- */

static sc_result_t post(tcase_t *c) {
  const int f = c->form;
  sc_request_t **q = &c->req;
  const void *s = c->sp;
  void *r = c->rp;
  const size_t n = c->count;
  const sc_dtype_t dt = c->dt;
  const int p = mr_nranks;
  const size_t *v = c->vpass;
  switch (c->coll) {
  case A2A:
    return f == F_BLOCK ? sc_alltoall(s, r, n, dt, comm)
           : f == F_NB  ? sc_ialltoall(s, r, n, dt, comm, q)
                        : sc_alltoall_on_stream(s, r, n, dt, comm, stream);
  case A2AV:
    return f == F_BLOCK ? sc_alltoallv(s, v, v + p, r, v + 2 * p, v + 3 * p, dt, comm)
           : f == F_NB
               ? sc_ialltoallv(s, v, v + p, r, v + 2 * p, v + 3 * p, dt, comm, q)
               : sc_alltoallv_on_stream(s, v, v + p, r, v + 2 * p, v + 3 * p, dt, comm, stream);
  case GATHER:
    return f == F_BLOCK ? sc_gather(s, r, n, dt, c->root, comm)
           : f == F_NB  ? sc_igather(s, r, n, dt, c->root, comm, q)
                        : sc_gather_on_stream(s, r, n, dt, c->root, comm, stream);
  case SCATTER:
    return f == F_BLOCK ? sc_scatter(s, r, n, dt, c->root, comm)
           : f == F_NB  ? sc_iscatter(s, r, n, dt, c->root, comm, q)
                        : sc_scatter_on_stream(s, r, n, dt, c->root, comm, stream);
  case AGV:
    return f == F_BLOCK ? sc_allgatherv(s, n, r, v + 2 * p, v + 3 * p, dt, comm)
           : f == F_NB  ? sc_iallgatherv(s, n, r, v + 2 * p, v + 3 * p, dt, comm, q)
                        : sc_allgatherv_on_stream(s, n, r, v + 2 * p, v + 3 * p, dt, comm, stream);
  case AR:
    return f == F_BLOCK ? sc_allreduce(s, r, n, dt, SC_SUM, comm)
           : f == F_NB  ? sc_iallreduce(s, r, n, dt, SC_SUM, comm, q)
                        : sc_allreduce_on_stream(s, r, n, dt, SC_SUM, comm, stream);
  default:
    return f == F_BLOCK ? sc_broadcast(s, r, n, dt, c->root, comm)
           : f == F_NB  ? sc_ibroadcast(s, r, n, dt, c->root, comm, q)
                        : sc_broadcast_on_stream(s, r, n, dt, c->root, comm, stream);
  }
}

static void compare(const tcase_t *c, const char *region, const unsigned char *got,
                    const unsigned char *want, size_t n, size_t block) {
  const size_t es = sc_dtype_size(c->dt);
  mr_checks++;
  if (!memcmp(got, want, n * es)) return;
  int shown = 0;
  for (size_t i = 0; i < n && shown < 3; i++) {
    if (!memcmp(got + i * es, want + i * es, es)) continue;
    char where[64] = "";
    if (block && i < block * (size_t)mr_nranks)
      snprintf(where, sizeof(where), " (block %zu, element %zu)", i / block, i % block);
    mr_fail("%s: %s element %zu%s is %.17g, expected %.17g", c->what, region, i, where,
            mr_get(got, i, c->dt), mr_get(want, i, c->dt));
    shown++;
  }
}

/* Posts every call of the batch (the stream and non-blocking ones all in
 * flight at once), completes them, and checks every region. */
static void run_batch(void) {
  const int p = mr_nranks;
  if (device) {
    for (int i = 0; i < ncases; i++) {
      tcase_t *c = &cases[i];
      size_t es = sc_dtype_size(c->dt);
      if (c->rn) rt->memcpy_async(dr + c->roff, c->rimg, c->rn * es, stream);
      if (c->sn) rt->memcpy_async(ds + c->soff, c->simg, c->sn * es, stream);
    }
    dev_wait("upload");
  }
  for (int i = 0; i < ncases; i++) {
    tcase_t *c = &cases[i];
    sc_result_t r = post(c);
    mr_checks++;
    if (r != SC_SUCCESS) {
      mr_fail("%s: %s: %s", c->what, sc_strerror(r), sc_last_error());
      continue;
    }
    c->posted = 1;
    if (c->vpass) {
      /* The library copied the arrays: the caller may reuse them at once. */
      memset(c->vpass, 0xa5, 4 * (size_t)p * sizeof(size_t));
      free(c->vpass);
      c->vpass = NULL;
    }
  }
  /* Requests completed in the opposite order of their posts, every other
   * one by polling. */
  for (int i = ncases - 1; i >= 0; i--) {
    tcase_t *c = &cases[i];
    if (!c->posted || c->form != F_NB) continue;
    sc_result_t r = SC_IN_PROGRESS;
    if (i & 1) {
      int done = 0;
      struct timespec nap = {0, 50000};
      while ((r = sc_test(&c->req, &done)) == SC_IN_PROGRESS && !done) nanosleep(&nap, NULL);
      if (!done || c->req) mr_fail("%s: sc_test returned %s without done", c->what, sc_strerror(r));
    } else {
      r = sc_wait(&c->req);
    }
    mr_checks++;
    if (r != SC_SUCCESS) {
      mr_fail("%s: wait: %s: %s", c->what, sc_strerror(r), sc_last_error());
      c->posted = 0;
    }
  }
  if (device) {
    for (int i = 0; i < ncases; i++) {
      tcase_t *c = &cases[i];
      size_t es = sc_dtype_size(c->dt);
      if (c->rn) rt->memcpy_async(c->rimg, dr + c->roff, c->rn * es, stream);
      if (c->sn) rt->memcpy_async(c->simg, ds + c->soff, c->sn * es, stream);
    }
    dev_wait("download");
    sc_result_t err = SC_ERR_INTERNAL;
    MR_OK(sc_comm_get_async_error(comm, &err));
    if (err != SC_SUCCESS) mr_fail("%s: async error %s", cases[0].what, sc_strerror(err));
  }
  for (int i = 0; i < ncases; i++) {
    tcase_t *c = &cases[i];
    if (c->posted) {
      if (c->rn) compare(c, "recvbuf", c->rimg, c->want, c->rn, c->block);
      if (c->sent) compare(c, "sendbuf", c->simg, c->sent, c->sn, 0);
    }
    if (!device) {
      free(c->rimg);
      free(c->simg);
    }
    free(c->want);
    free(c->sent);
    free(c->v);
    free(c->vpass);
  }
  ncases = 0;
  s_used = r_used = 0;
}

/* ---- the tests ---- */

static const sc_dtype_t sample[] = {SC_UINT8, SC_FLOAT16, SC_BFLOAT16, SC_INT32, SC_FLOAT64};

static int dtype_count(void) {
  return quick ? (int)(sizeof(sample) / sizeof(sample[0])) : SC_FLOAT64 + 1;
}
static sc_dtype_t dtype_at(int i) {
  return quick ? sample[i] : (sc_dtype_t)i;
}

/* Whether the ranks span several hosts with several ranks on one. */
static int hierarchy(void) {
  int nhosts = 0;
  MR_OK(sc_comm_local(comm, NULL, NULL, NULL, &nhosts));
  return nhosts > 1 && nhosts < mr_nranks;
}

/* sc_alltoall_algo: one of the three names, the same on every rank, the
 * forced one under SC_A2A_ALGO; a forced hier with no hierarchy reports
 * the flat algorithm that runs. */
static void test_alltoall_algo(void) {
  static const char *const names[] = {"pairwise", "bruck", "hier"};
  const char *want = getenv("SC_A2A_ALGO");
  const size_t counts[] = {0, 1, 1000, (size_t)1 << 18};
  for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
    for (int d = 0; d < 2; d++) {
      const sc_dtype_t dt = d ? SC_FLOAT32 : SC_INT8;
      const char *got = NULL;
      MR_OK(sc_alltoall_algo(comm, counts[ci], dt, &got));
      int32_t idx = -1;
      for (int i = 0; i < 3; i++)
        if (got && !strcmp(got, names[i])) idx = i;
      mr_checks++;
      if (idx < 0) {
        mr_fail("sc_alltoall_algo(%zu, %s) = %s, none of the all-to-all's algorithms", counts[ci],
                mr_dtype_names[dt], got ? got : "(null)");
      } else if (want && !strcasecmp(want, "hier")) {
        if ((idx == 2) != hierarchy())
          mr_fail("sc_alltoall_algo(%zu, %s) = %s under SC_A2A_ALGO=hier (hierarchy: %s)",
                  counts[ci], mr_dtype_names[dt], got, hierarchy() ? "yes" : "no");
      } else if (want && strcasecmp(want, "auto") && strcasecmp(want, got)) {
        mr_fail("sc_alltoall_algo(%zu, %s) = %s under SC_A2A_ALGO=%s", counts[ci],
                mr_dtype_names[dt], got, want);
      }
      int32_t all[64];
      MR_OK(sc_allgather(&idx, all, 1, SC_INT32, comm));
      for (int r = 0; r < mr_nranks; r++)
        if (all[r] != idx)
          mr_fail("sc_alltoall_algo(%zu, %s): rank %d says %s, rank %d %s", counts[ci],
                  mr_dtype_names[dt], mr_rank, got, r, all[r] >= 0 ? names[all[r]] : "?");
    }
  }
}

static void test_alltoall(void) {
  const size_t counts[] = {0, 1, 3, 7, 1000};
  const int nc = (int)(sizeof(counts) / sizeof(counts[0]));
  for (int d = 0; d < dtype_count(); d++)
    for (int ci = 0; ci < nc; ci++)
      for (int inplace = 0; inplace < 2; inplace++) {
        setup_alltoall(F_BLOCK, dtype_at(d), counts[ci], inplace);
        run_batch();
      }
  /* Four in flight at once, of different sizes and placements. */
  for (int f = F_NB; f < nforms; f++)
    for (int d = 0; d < dtype_count(); d += f == F_NB ? 1 : 3) {
      for (int k = 0; k < 4; k++) setup_alltoall(f, dtype_at(d), counts[1 + (k + d) % 4], k & 1);
      run_batch();
    }
  if (!quick && mr_nranks <= 4) {
    /* Several MiB: many chunks per block. */
    const size_t big = ((size_t)1 << 20) / (size_t)mr_nranks;
    setup_alltoall(F_BLOCK, SC_FLOAT32, big, 0);
    run_batch();
    setup_alltoall(nforms - 1, SC_FLOAT32, big + 3, 1);
    run_batch();
  }
}

/* What every rank sends every other, from a seed every rank shares. */
typedef enum {
  PAT_RANDOM,
  PAT_ZERO_ROW_COL,
  PAT_ONE_RECEIVER,
  PAT_ZEROS,
  PAT_LARGE,
  PAT_BIG
} pat_t;
static const char *const pat_names[] = {
    "random", "zero-row-and-column", "one-receiver", "all-zeros", "large", "multi-MiB"};

static size_t *make_matrix(pat_t pat, uint64_t seed) {
  const int p = mr_nranks;
  size_t *m = malloc((size_t)p * (size_t)p * sizeof(size_t));
  rng_seed(seed);
  const int t = (int)(seed % (uint64_t)p);
  for (int i = 0; i < p; i++)
    for (int j = 0; j < p; j++) {
      uint64_t x = rng();
      size_t *e = &m[(size_t)i * p + j];
      switch (pat) {
      case PAT_RANDOM:
      case PAT_ZERO_ROW_COL:
        *e = x % 4 == 0 ? 0 : (size_t)(x >> 8) % 9 + 1;
        break;
      case PAT_ONE_RECEIVER:
        *e = j == t ? (size_t)(x >> 8) % 50 + 1 : 0;
        break;
      case PAT_ZEROS:
        *e = 0;
        break;
      case PAT_LARGE:
        *e = x % 5 == 0 ? 0 : (size_t)(x >> 8) % 3000;
        break;
      case PAT_BIG:
        *e = ((size_t)1 << 20) / ((size_t)p * (size_t)p) + (size_t)(x >> 8) % 97;
        break;
      }
    }
  if (pat == PAT_ZERO_ROW_COL) {
    /* One rank sends nothing, another (the same one on one or two ranks)
     * receives nothing. */
    const int u = (t + 1) % p;
    for (int k = 0; k < p; k++) m[(size_t)t * p + k] = m[(size_t)k * p + u] = 0;
  }
  return m;
}

static void alltoallv_case(int form, sc_dtype_t dt, pat_t pat, uint64_t seed) {
  size_t *m = make_matrix(pat, seed);
  setup_alltoallv(form, dt, m, pat_names[pat]);
  free(m);
}

static void test_alltoallv(void) {
  const pat_t pats[] = {PAT_RANDOM, PAT_ZERO_ROW_COL, PAT_ONE_RECEIVER, PAT_ZEROS, PAT_LARGE};
  const int np = (int)(sizeof(pats) / sizeof(pats[0]));
  for (int i = 0; i < np; i++) {
    for (int s = 0; s < (quick ? 1 : 3); s++) {
      alltoallv_case(F_BLOCK, (sc_dtype_t)((i * 3 + s) % (SC_FLOAT64 + 1)), pats[i],
                     (uint64_t)(100 * i + s));
      run_batch();
    }
  }
  for (int d = 0; d < dtype_count(); d++) {
    alltoallv_case(F_BLOCK, dtype_at(d), PAT_RANDOM, 7000 + (uint64_t)d);
    run_batch();
  }
  /* Every pattern in flight at once; the arrays are garbled as each call returns. */
  for (int f = F_NB; f < nforms; f++) {
    for (int i = 0; i < np; i++)
      alltoallv_case(f, (sc_dtype_t)((i * 7 + f) % (SC_FLOAT64 + 1)), pats[i], 500 + (uint64_t)i);
    alltoallv_case(f, SC_FLOAT16, PAT_RANDOM, 600 + (uint64_t)f);
    run_batch();
  }
  if (!quick && mr_nranks <= 4) {
    alltoallv_case(F_BLOCK, SC_FLOAT32, PAT_BIG, 42);
    run_batch();
  }
}

static void test_gather_scatter(void) {
  const size_t counts[] = {0, 1, 7, 1000};
  const int nc = (int)(sizeof(counts) / sizeof(counts[0])), p = mr_nranks;
  for (int root = 0; root < p; root++) {
    if (quick && root != 0 && root != p - 1 && root != p / 2) continue;
    for (int ci = 0; ci < nc; ci++)
      for (int inplace = 0; inplace < 2; inplace++) {
        const sc_dtype_t dt = (sc_dtype_t)((root * 7 + ci * 3 + inplace) % (SC_FLOAT64 + 1));
        const int null_off_root = (root + ci + inplace) & 1;
        setup_gather(F_BLOCK, dt, counts[ci], root, inplace, null_off_root);
        setup_scatter(F_BLOCK, dt, counts[ci], root, inplace, !null_off_root);
        run_batch();
      }
  }
  for (int d = 0; d < dtype_count(); d++) {
    setup_gather(F_BLOCK, dtype_at(d), 7, p - 1, d & 1, 1);
    setup_scatter(F_BLOCK, dtype_at(d), 7, p - 1, !(d & 1), 1);
    run_batch();
  }
  /* Gathers and scatters to different roots in flight at once. */
  for (int f = F_NB; f < nforms; f++) {
    for (int k = 0; k < 4; k++) {
      const int root = (k * 3 + f) % p;
      setup_gather(f, dtype_at((k + f) % dtype_count()), counts[1 + k % 3], root, k & 1, k & 2);
      setup_scatter(f, dtype_at((k + 2) % dtype_count()), counts[1 + (k + 1) % 3], root, !(k & 1),
                    !(k & 2));
    }
    run_batch();
  }
  if (!quick && p <= 4) {
    const size_t big = ((size_t)1 << 20) / (size_t)p + 5;
    setup_gather(F_BLOCK, SC_FLOAT32, big, p / 2, 1, 1);
    run_batch();
    setup_scatter(F_BLOCK, SC_FLOAT32, big, p - 1, 0, 1);
    run_batch();
  }
}

/* counts[i] from the seed (zeros included), displacements in a random
 * order with gaps: the same on every rank. */
static void agv_layout(uint64_t seed, size_t maxc, int zeros_but_one, size_t *counts,
                       size_t *displs) {
  const int p = mr_nranks;
  rng_seed(seed);
  for (int i = 0; i < p; i++) {
    uint64_t x = rng();
    counts[i] = x % 4 == 0 ? 0 : (size_t)(x >> 8) % maxc + 1;
    if (zeros_but_one) counts[i] = i == (int)(seed % (uint64_t)p) ? (size_t)(x >> 8) % maxc + 1 : 0;
  }
  place_blocks(counts, displs);
}

static void allgatherv_case(int form, sc_dtype_t dt, uint64_t seed, size_t maxc, int zeros_but_one,
                            int inplace) {
  size_t counts[64], displs[64];
  agv_layout(seed, maxc, zeros_but_one, counts, displs);
  char pattern[64];
  snprintf(pattern, sizeof(pattern), "seed %llu%s", (unsigned long long)seed,
           zeros_but_one ? " one-sender" : "");
  setup_allgatherv(form, dt, counts, displs, inplace, pattern);
}

static void test_allgatherv(void) {
  for (int s = 0; s < (quick ? 4 : 12); s++) {
    const size_t maxc = s % 3 == 2 ? 2000 : 9;
    allgatherv_case(F_BLOCK, (sc_dtype_t)((s * 3) % (SC_FLOAT64 + 1)), 300 + (uint64_t)s, maxc,
                    s % 4 == 3, s & 1);
    run_batch();
  }
  for (int d = 0; d < dtype_count(); d++) {
    allgatherv_case(F_BLOCK, dtype_at(d), 900 + (uint64_t)d, 20, 0, d & 1);
    run_batch();
  }
  /* Every rank sending nothing, in both placements. */
  for (int inplace = 0; inplace < 2; inplace++) {
    size_t zero[64] = {0}, displs[64];
    for (int i = 0; i < mr_nranks; i++) displs[i] = (size_t)i * 3;
    setup_allgatherv(F_BLOCK, SC_INT64, zero, displs, inplace, "all-zeros");
    run_batch();
  }
  for (int f = F_NB; f < nforms; f++) {
    for (int k = 0; k < 6; k++)
      allgatherv_case(f, dtype_at((k + f) % dtype_count()), 700 + (uint64_t)k, k == 2 ? 1500 : 12,
                      k == 4, k & 1);
    run_batch();
  }
  if (!quick && mr_nranks <= 4) {
    allgatherv_case(F_BLOCK, SC_FLOAT32, 77, ((size_t)1 << 20) / (size_t)mr_nranks, 0, 1);
    run_batch();
  }
}

/* The new collectives among the older ones, one after the other, then all
 * in flight at once: their places in the one queue must hold. */
static void test_mixed(void) {
  const int p = mr_nranks;
  for (int f = F_BLOCK; f < nforms; f++) {
    setup_allreduce(f, SC_INT32, 1000);
    setup_alltoall(f, SC_FLOAT16, 33, f & 1);
    setup_gather(f, SC_BFLOAT16, 17, p - 1, 1, 1);
    setup_allreduce(f, SC_FLOAT32, 5);
    setup_scatter(f, SC_INT64, 9, p / 2, 0, 1);
    alltoallv_case(f, SC_UINT8, PAT_RANDOM, 3131 + (uint64_t)f);
    allgatherv_case(f, SC_FLOAT64, 4141 + (uint64_t)f, 30, 0, 1);
    setup_broadcast(f, SC_INT8, 100, 0);
    run_batch();
  }
  MR_OK(sc_barrier(comm));
}

static void expect_invalid(sc_result_t r, const char *what, const char *detail) {
  mr_checks++;
  if (r != SC_ERR_INVALID_ARG)
    mr_fail("%s: got %s, want invalid argument", what, sc_strerror(r));
  else if (!strstr(sc_last_error(), detail))
    mr_fail("%s: detail \"%s\" lacks \"%s\"", what, sc_last_error(), detail);
}

/* Refused on the calling rank before anything is sent: the communicator
 * goes on. */
static void test_bad_arguments(void) {
  const int p = mr_nranks;
  float x[64] = {0}, y[64];
  size_t counts[64], displs[64];
  for (int i = 0; i < p; i++) {
    counts[i] = 1;
    displs[i] = (size_t)i;
  }
  char want[96];
  snprintf(want, sizeof(want), "root %d outside [0, %d)", p, p);
  expect_invalid(sc_gather(x, y, 1, SC_FLOAT32, p, comm), "gather root = nranks", want);
  expect_invalid(sc_iscatter(x, y, 1, SC_FLOAT32, p, comm, &(sc_request_t *){NULL}),
                 "iscatter root = nranks", want);
  snprintf(want, sizeof(want), "sendcount 2 differs from recvcounts[%d] = 1", mr_rank);
  expect_invalid(sc_allgatherv(x, 2, y, counts, displs, SC_FLOAT32, comm), "allgatherv sendcount",
                 want);
  expect_invalid(sc_alltoallv(y, counts, displs, y, counts, displs, SC_FLOAT32, comm),
                 "alltoallv in place", "has no in-place form");
  MR_OK(sc_barrier(comm));
  sc_result_t err = SC_ERR_INTERNAL;
  MR_OK(sc_comm_get_async_error(comm, &err));
  if (err != SC_SUCCESS) mr_fail("async error %s after argument errors", sc_strerror(err));
}

/* An uneven all-to-all whose counts disagree on one pair: rank 0 sends the
 * last rank 2 elements more (fewer; none of the 3) than the last rank
 * expects from it, every other pair agrees. Under SC_A2AV_ALGO=sparse
 * (without SC_CHECK_MISMATCH) the count check must fail every rank with
 * SC_ERR_MISMATCH, the pair's ranks naming it. With SC_CHECK_MISMATCH=1 both ranks of the pair
 * must fail with SC_ERR_MISMATCH naming the pair, and the others must fail
 * too (the pair's data never comes). Without it the receiving rank must fail
 * (the other ranks may fail or not); nobody may hang or write past its
 * receive blocks. Each rank prints what it got, and must then destroy its
 * communicator cleanly. */
/* The first failure stays the communicator's: the call's own, unless the
 * liveness watch told of another rank's failure first (a rank that failed
 * in the cascade: its peer left after its own failure, while this rank's
 * progress thread had not recorded the call's yet). */
static void first_failure_stays(const char *role, sc_result_t res) {
  if (res == SC_SUCCESS) return;
  sc_result_t err = SC_SUCCESS;
  MR_OK(sc_comm_get_async_error(comm, &err));
  sc_result_t again = sc_barrier(comm);
  const int watch_first = err == SC_ERR_REMOTE && strstr(sc_last_error(), "liveness watch");
  if ((err != res && !watch_first) || again != err)
    mr_fail("%s: after %s, sc_comm_get_async_error says %s and a barrier %s (%s)", role,
            sc_strerror(res), sc_strerror(err), sc_strerror(again), sc_last_error());
}

static void test_mismatch(const char *how) {
  const int p = mr_nranks, me = mr_rank, a = 0, b = p - 1;
  const int more = !strcmp(how, "more"), zero = !strcmp(how, "zero");
  const char *chk = getenv("SC_CHECK_MISMATCH"), *v = getenv("SC_A2AV_ALGO");
  const int checked = chk && !strcmp(chk, "1");
  /* The sparse form's count check: every rank fails, the pair's ranks name it. */
  const int counted = !checked && v && !strcmp(v, "sparse");
  if (p < 2) {
    printf("rank %d: one rank has no pair to disagree\n", me);
    return;
  }
  size_t sc[64], sd[64], rc[64], rd[64];
  for (int j = 0; j < p; j++) {
    sc[j] = rc[j] = 3;
    sd[j] = rd[j] = (size_t)j * 3;
  }
  /* Rank 0's block last in every receive region, so that an overrun runs
   * into the guard. */
  rd[a] = (size_t)(p - 1) * 3;
  rd[p - 1] = (size_t)a * 3;
  if (me == a) sc[b] = more ? 5 : zero ? 0 : 1;
  const size_t send_end = sd[p - 1] + sc[p - 1], recv_end = (size_t)p * 3;
  int32_t *s = malloc(send_end * sizeof(int32_t)), *r = malloc((recv_end + GUARD) * 4);
  for (size_t i = 0; i < send_end; i++) s[i] = (int32_t)(1000 * me + (int)i);
  for (size_t i = 0; i < recv_end + GUARD; i++) r[i] = -7;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  sc_result_t res = sc_alltoallv(s, sc, sd, r, rc, rd, SC_INT32, comm);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  const char *role = me == b ? "receiving rank" : me == a ? "sending rank" : "bystander";
  printf("rank %d (%s): alltoallv, %s, %s: %s after %.2f s: %s\n", me, role,
         more   ? "2 elements more"
         : zero ? "none of 3"
                : "2 elements fewer",
         checked ? "SC_CHECK_MISMATCH=1" : "no SC_CHECK_MISMATCH", sc_strerror(res), secs,
         res != SC_SUCCESS ? sc_last_error() : "");
  fflush(stdout);
  mr_checks++;
  const int in_pair = me == a || me == b;
  if (counted || (checked && in_pair)) {
    /* SC_ERR_MISMATCH saying a pair disagrees; the pair's own ranks name it,
     * in either order. */
    char ab[64], ba[64];
    snprintf(ab, sizeof(ab), "(rank %d, rank %d)", a, b);
    snprintf(ba, sizeof(ba), "(rank %d, rank %d)", b, a);
    const char *msg = sc_last_error();
    if (res != SC_ERR_MISMATCH)
      mr_fail("%s: %s, want SC_ERR_MISMATCH%s", role, sc_strerror(res),
              counted ? " on every rank (the count check)" : "");
    else if (!strstr(msg, "disagree") || (in_pair && !strstr(msg, ab) && !strstr(msg, ba)))
      mr_fail("%s: the detail \"%s\" does not say that the pair %s disagrees", role, msg, ab);
  } else if (me == b && res == SC_SUCCESS) {
    mr_fail("the receiving rank's alltoallv succeeded with counts that disagree");
  } else if (checked && res == SC_SUCCESS) {
    mr_fail("a bystander's alltoallv succeeded though the pair's data never moved");
  }
  for (size_t i = recv_end; i < recv_end + GUARD; i++)
    if (r[i] != -7) {
      mr_fail("%s: alltoallv wrote past its receive blocks (element %zu = %d)", role, i, r[i]);
      break;
    }
  first_failure_stays(role, res);
  free(s);
  free(r);
}

/* Ranks that call different collectives (an all-to-all of another count on
 * the last rank, uneven all-gather counts rank 0 alone disagrees with, a
 * gather whose root the last rank names differently) all fail with
 * SC_ERR_MISMATCH where SC_CHECK_MISMATCH=1 compares the calls first.
 * Without it a rank that receives a message of the other call must fail
 * (the last rank, rank 0, rank 0: the root the others send to, which waits
 * for a block that goes elsewhere, until the liveness watch compares the
 * calls); the others may end either way. Nobody may hang or write past its
 * receive region. */
static void test_calls_differ(const char *how) {
  const int p = mr_nranks, me = mr_rank, last = p - 1;
  const char *chk = getenv("SC_CHECK_MISMATCH");
  const int checked = chk && !strcmp(chk, "1");
  if (p < 2) {
    printf("rank %d: one rank cannot disagree\n", me);
    return;
  }
  int32_t in[64 * 8], out[64 * 8 + GUARD];
  for (int i = 0; i < 64 * 8; i++) in[i] = 1000 * me + i;
  for (int i = 0; i < 64 * 8 + GUARD; i++) out[i] = -7;
  size_t extent = 0, counts[64], displs[64];
  int must_fail = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  sc_result_t res;
  if (!strcmp(how, "a2a")) {
    const size_t n = me == last ? 4 : 3;
    extent = (size_t)p * n;
    must_fail = me == last;
    res = sc_alltoall(in, out, n, SC_INT32, comm);
  } else if (!strcmp(how, "agv")) {
    for (int i = 0; i < p; i++) {
      counts[i] = me == 0 && i == 1 ? 5 : 3;
      displs[i] = extent;
      extent += counts[i];
    }
    must_fail = me == 0;
    res = sc_allgatherv(in, counts[me], out, counts, displs, SC_INT32, comm);
  } else {
    const int root = me == last ? 1 : 0;
    extent = me == root ? (size_t)p * 3 : 0;
    must_fail = me == 0;
    res = sc_gather(in, me == root ? out : NULL, 3, SC_INT32, root, comm);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("rank %d: calls differ (%s), %s: %s after %.2f s: %s\n", me, how,
         checked ? "SC_CHECK_MISMATCH=1" : "no SC_CHECK_MISMATCH", sc_strerror(res), secs,
         res != SC_SUCCESS ? sc_last_error() : "");
  fflush(stdout);
  mr_checks++;
  if (checked && res != SC_ERR_MISMATCH)
    mr_fail("calls differ (%s): %s, want SC_ERR_MISMATCH on every rank", how, sc_strerror(res));
  else if (must_fail && res == SC_SUCCESS)
    mr_fail("calls differ (%s): this rank's call succeeded", how);
  for (size_t i = extent; i < extent + GUARD; i++)
    if (out[i] != -7) {
      mr_fail("calls differ (%s): wrote past the receive region (element %zu = %d)", how, i,
              out[i]);
      break;
    }
  first_failure_stays(how, res);
}

static int arg(int argc, char **argv, const char *name) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], name)) return i;
  return 0;
}

int main(int argc, char **argv) {
  quick = arg(argc, argv, "--quick") != 0;
  device = arg(argc, argv, "--device") != 0;
  const int a2a_only = arg(argc, argv, "--a2a-only") != 0;
  const int gather_only = arg(argc, argv, "--gather-only") != 0;
  const int agv_only = arg(argc, argv, "--agv-only") != 0;
  const int a2av_only = arg(argc, argv, "--a2av-only") != 0;
  const int mm = arg(argc, argv, "--mismatch");
  const char *how = mm && mm + 1 < argc ? argv[mm + 1] : NULL;
  if (mm && (!how || (strcmp(how, "more") && strcmp(how, "fewer") && strcmp(how, "zero") &&
                      strcmp(how, "a2a") && strcmp(how, "agv") && strcmp(how, "root")))) {
    fprintf(stderr,
            "usage: %s [--quick] [--device] [--a2a-only] [--gather-only] [--agv-only] "
            "[--a2av-only] | --mismatch more|fewer|zero|a2a|agv|root\n",
            argv[0]);
    return 2;
  }
  if (device) {
    rt = sc_devrt();
    if (!rt) {
      printf("skipped: no device runtime (SC_DEVRT_STANDIN names no loadable stand-in, and no "
             "GPU)\n");
      return 77;
    }
    nforms = 3;
  }
  MR_OK(sc_comm_init_env(&comm));
  if (!comm) {
    fprintf(stderr, "sc_comm_init_env failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &mr_rank);
  sc_comm_size(comm, &mr_nranks);
  if (mr_nranks > 64) {
    fprintf(stderr, "at most 64 ranks\n");
    return 2;
  }
  if (mm) {
    if (!strcmp(how, "more") || !strcmp(how, "fewer") || !strcmp(how, "zero"))
      test_mismatch(how);
    else
      test_calls_differ(how);
    sc_result_t r = sc_comm_destroy(comm);
    mr_checks++;
    if (r != SC_SUCCESS) mr_fail("sc_comm_destroy after the mismatch: %s", sc_strerror(r));
    printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
    return mr_failures ? 1 : 0;
  }
  if (device) {
    /* The multi-MiB calls plus gaps, guards and alignment. */
    cap = ((size_t)5 << 20) + (size_t)MAXB * 2 * (GUARD * 8 + 64) + 4096 * (size_t)mr_nranks * 8;
    hs = malloc(cap);
    hr = malloc(cap);
    void *a = NULL, *b = NULL;
    if (!hs || !hr || rt->malloc_device(&a, cap) != SC_SUCCESS ||
        rt->malloc_device(&b, cap) != SC_SUCCESS || rt->stream_create(&stream) != SC_SUCCESS ||
        rt->event_create(&event) != SC_SUCCESS) {
      fprintf(stderr, "rank %d: device setup failed\n", mr_rank);
      return 1;
    }
    ds = a;
    dr = b;
  }
  const int all = !a2a_only && !gather_only && !agv_only && !a2av_only;
  if (all) test_bad_arguments();
  if (all || a2a_only) {
    test_alltoall_algo();
    test_alltoall();
  }
  if (all || a2av_only) test_alltoallv();
  if (all || gather_only) test_gather_scatter();
  if (all || agv_only) test_allgatherv();
  if (all) test_mixed();
  MR_OK(sc_barrier(comm));
  MR_OK(sc_comm_destroy(comm));
  if (device) {
    rt->free_device(ds);
    rt->free_device(dr);
    rt->event_destroy(event);
    rt->stream_destroy(stream);
  }
  free(hs);
  free(hr);
  printf("rank %d of %d: %ld checks, %ld failures\n", mr_rank, mr_nranks, mr_checks, mr_failures);
  return mr_failures ? 1 : 0;
}
