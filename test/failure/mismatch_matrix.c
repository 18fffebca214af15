/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks that call different (collective, count) pairs, with the default
 * settings: no SC_CHECK_MISMATCH (run under sc-run; public API only).
 * Usage: mismatch_matrix [--bound S] [--abort S] [--peer-unnamed] CASE...
 *   CASE: "all", every unordered pair of the 16 calls below (the five
 *         collectives with a count in three classes, and the barrier);
 *         pair i puts rank 1 on its second call for even i and rank 0 for
 *         odd i, so that the watch's hub (rank 0) is on either side;
 *     or  "A/B[@R+R...]": the ranks listed (default: rank 1) call B, the
 *         others A. A call is COLL[:COUNT], COLL one of allreduce,
 *         reduce_scatter, allgather, broadcast, reduce, barrier; COUNT
 *         board (4 float32: the shared-memory board takes it), chunk
 *         (16384: 64 KiB), many (1048576: 4 MiB) or a number of elements
 *         (the collective's own count: recvcount, sendcount). Roots are 0.
 * Each case runs on a fresh communicator split from the world one, after a
 * matched all-reduce that must be exact. Every rank must fail its call with
 * SC_ERR_MISMATCH within --bound seconds (2), with a message that names both
 * calls (each call's collective and count); sc_comm_get_async_error must
 * report it, and the next call must fail at once with it. A rank whose
 * result needs no byte from a rank that made the other call (a reduce's
 * ranks but the root; a broadcast's ranks that made rank 0's call) may see
 * its call succeed: then its result must be right, sc_comm_get_async_error
 * must turn SC_ERR_MISMATCH within the bound, and the next call fail with a
 * message naming both. A call still running --abort seconds (bound + 3)
 * after the case began is ended by sc_comm_abort from a watchdog thread, so
 * that one missed mismatch costs seconds, not SC_TIMEOUT_MS, and the other
 * cases still run. Each rank prints one line per case, "case K (A | B
 * @RANKS) rank R: OK ..." or "... rank R: FAIL ...", with the text
 * sc_last_error gave (a rank whose call completed unheard adds a "note"
 * line: what a next call gave), then "rank R: N cases, F failed"; it exits 1
 * when a case failed. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sparsecoll.h"

enum { C_ALLREDUCE, C_REDUCE_SCATTER, C_ALLGATHER, C_BROADCAST, C_REDUCE, C_BARRIER, NCOLL };
/* As sc_fp_describe and the board spell them. */
static const char *const coll_names[NCOLL] = {"allreduce", "reduce_scatter", "allgather",
                                              "broadcast", "reduce",         "barrier"};
static const struct {
  const char *name;
  size_t count;
} classes[] = {{"board", 4}, {"chunk", 16384}, {"many", 1048576}};
#define NCLASS (sizeof(classes) / sizeof(classes[0]))

typedef struct call {
  int coll;
  size_t count; /* 0 for the barrier */
} call_t;

typedef struct mcase {
  call_t a, b;
  uint64_t odd; /* ranks calling b */
} mcase_t;

static int g_rank, g_nranks;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the watchdog: sc_comm_abort on a case that outlives its limit ---- */

static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static sc_comm_t *wd_comm;
static double wd_deadline;
static int wd_fired, wd_quit;

static void *watchdog(void *arg) {
  (void)arg;
  struct timespec tick = {0, 20 * 1000000L};
  for (;;) {
    pthread_mutex_lock(&wd_lock);
    if (wd_quit) {
      pthread_mutex_unlock(&wd_lock);
      return NULL;
    }
    if (wd_comm && now_s() > wd_deadline) {
      sc_comm_abort(wd_comm);
      wd_comm = NULL;
      wd_fired = 1;
    }
    pthread_mutex_unlock(&wd_lock);
    nanosleep(&tick, NULL);
  }
}

static void wd_arm(sc_comm_t *comm, double deadline) {
  pthread_mutex_lock(&wd_lock);
  wd_comm = comm;
  wd_deadline = deadline;
  wd_fired = 0;
  pthread_mutex_unlock(&wd_lock);
}

static int wd_disarm(void) {
  pthread_mutex_lock(&wd_lock);
  wd_comm = NULL;
  int fired = wd_fired;
  pthread_mutex_unlock(&wd_lock);
  return fired;
}

/* ---- cases ---- */

static int parse_call(const char *s, call_t *c) {
  char name[32];
  const char *colon = strchr(s, ':');
  size_t n = colon ? (size_t)(colon - s) : strlen(s);
  if (n >= sizeof(name)) return -1;
  memcpy(name, s, n);
  name[n] = '\0';
  c->coll = -1;
  for (int i = 0; i < NCOLL; i++)
    if (!strcmp(name, coll_names[i])) c->coll = i;
  if (c->coll < 0) return -1;
  c->count = 0;
  if (c->coll == C_BARRIER) return colon ? -1 : 0;
  if (!colon) return -1;
  for (size_t i = 0; i < NCLASS; i++)
    if (!strcmp(colon + 1, classes[i].name)) c->count = classes[i].count;
  if (!c->count) {
    char *end;
    unsigned long long v = strtoull(colon + 1, &end, 10);
    if (*end || end == colon + 1) return -1;
    c->count = (size_t)v;
  }
  return 0;
}

static int parse_case(const char *s, mcase_t *mc) {
  char a[64], b[64];
  const char *slash = strchr(s, '/');
  if (!slash || (size_t)(slash - s) >= sizeof(a)) return -1;
  memcpy(a, s, (size_t)(slash - s));
  a[slash - s] = '\0';
  const char *at = strchr(slash, '@');
  size_t bl = at ? (size_t)(at - slash - 1) : strlen(slash + 1);
  if (bl >= sizeof(b)) return -1;
  memcpy(b, slash + 1, bl);
  b[bl] = '\0';
  if (parse_call(a, &mc->a) || parse_call(b, &mc->b)) return -1;
  mc->odd = 0;
  if (!at) {
    mc->odd = 1u << 1;
    return 0;
  }
  for (const char *p = at + 1; *p;) {
    char *end;
    long r = strtol(p, &end, 10);
    if (end == p || r < 0 || r >= 64) return -1;
    mc->odd |= (uint64_t)1 << r;
    p = *end == '+' ? end + 1 : end;
    if (*end && *end != '+') return -1;
  }
  return 0;
}

/* Every unordered pair of distinct calls. */
static int all_pairs(mcase_t *out, int max) {
  call_t calls[NCOLL * NCLASS];
  int n = 0, k = 0;
  for (int c = 0; c < NCOLL; c++) {
    if (c == C_BARRIER) {
      calls[n++] = (call_t){c, 0};
      continue;
    }
    for (size_t i = 0; i < NCLASS; i++) calls[n++] = (call_t){c, classes[i].count};
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n && k < max; j++) {
      out[k] = (mcase_t){calls[i], calls[j], (uint64_t)1 << (k % 2 ? 0 : 1)};
      k++;
    }
  return k;
}

static const char *call_str(const call_t *c, char *out, size_t len) {
  if (c->coll == C_BARRIER)
    snprintf(out, len, "barrier");
  else
    snprintf(out, len, "%s %zu", coll_names[c->coll], c->count);
  return out;
}

/* Elements of float32 a call's buffers need on this communicator. */
static size_t call_elems(const call_t *c, int nranks) {
  int wide = c->coll == C_REDUCE_SCATTER || c->coll == C_ALLGATHER;
  return c->count * (wide ? (size_t)nranks : 1);
}

static sc_result_t run_call(const call_t *c, float *send, float *recv, sc_comm_t *comm) {
  switch (c->coll) {
  case C_ALLREDUCE:
    return sc_allreduce(send, recv, c->count, SC_FLOAT32, SC_SUM, comm);
  case C_REDUCE_SCATTER:
    return sc_reduce_scatter(send, recv, c->count, SC_FLOAT32, SC_SUM, comm);
  case C_ALLGATHER:
    return sc_allgather(send, recv, c->count, SC_FLOAT32, comm);
  case C_BROADCAST:
    return sc_broadcast(send, recv, c->count, SC_FLOAT32, 0, comm);
  case C_REDUCE:
    return sc_reduce(send, recv, c->count, SC_FLOAT32, SC_SUM, 0, comm);
  default:
    return sc_barrier(comm);
  }
}

/* msg names call c: its collective's name as a word, then (but for the
 * barrier, whose count is no argument) an optional " #SEQ" and
 * " (count N" closed by ',' or ')'. */
static int names_call(const char *msg, const call_t *c) {
  const char *name = coll_names[c->coll];
  size_t nl = strlen(name);
  for (const char *p = strstr(msg, name); p; p = strstr(p + 1, name)) {
    char before = p == msg ? ' ' : p[-1], after = p[nl];
    if (before == '_' || (before >= 'a' && before <= 'z') || after == '_' ||
        (after >= 'a' && after <= 'z'))
      continue;
    if (c->coll == C_BARRIER) return 1;
    const char *q = p + nl;
    if (q[0] == ' ' && q[1] == '#') {
      q += 2;
      while (*q >= '0' && *q <= '9') q++;
    }
    char want[48];
    int wl = snprintf(want, sizeof(want), " (count %zu", c->count);
    if (!strncmp(q, want, (size_t)wl) && (q[wl] == ',' || q[wl] == ')')) return 1;
  }
  return 0;
}

/* This rank's call may complete, with correct results, only where no byte
 * of its result comes from a rank that made the other call (roots are 0):
 * a reduce's other ranks only contribute, and a broadcast's data all comes
 * from rank 0, so a rank that made the same broadcast as rank 0 (rank 0
 * included) may get all of it. Every other call needs a contribution of
 * every rank: completing it would be a wrong result, not a late report. */
static int may_complete(const mcase_t *mc, const call_t *mine, int rank) {
  const call_t *root = mc->odd & 1 ? &mc->b : &mc->a;
  return (mine->coll == C_REDUCE && rank != 0) || (mine->coll == C_BROADCAST && mine == root);
}

/* A completed call's result against its reference: a broadcast's recv holds
 * rank 0's send (every element 1); a reduce's other ranks have none. */
static int result_holds(const call_t *mine, const float *recv, char *why, size_t len) {
  if (mine->coll != C_BROADCAST) return 1;
  for (size_t i = 0; i < mine->count; i++)
    if (recv[i] != 1.0f) {
      snprintf(why, len, "its broadcast completed with element %zu = %g, want 1", i, recv[i]);
      return 0;
    }
  return 1;
}

/* Set by --peer-unnamed: a transport whose messages carry a part of the
 * print only (UCX's tag: a 16-bit hash) lets the rank that meets another
 * call's message name its own call alone, and say that the peer "called
 * another operation" (lib/core/fingerprint.c); the hub's comparison and the
 * board still name both. */
static int g_peer_unnamed;

static int names_both(const char *msg, const mcase_t *mc) {
  int a = names_call(msg, &mc->a), b = names_call(msg, &mc->b);
  if (a && b) return 1;
  return g_peer_unnamed && (a || b) && strstr(msg, "called another operation") != NULL;
}

/* A matched all-reduce first: exact, and the mismatched call is not the
 * communicator's first. */
static int warm_up(sc_comm_t *comm, char *why, size_t len) {
  float v[4];
  for (int i = 0; i < 4; i++) v[i] = (float)(g_rank + i);
  sc_result_t r = sc_allreduce(v, v, 4, SC_FLOAT32, SC_SUM, comm);
  for (int i = 0; i < 4 && r == SC_SUCCESS; i++)
    if (v[i] != (float)(g_nranks * (g_nranks - 1) / 2 + g_nranks * i)) {
      snprintf(why, len, "matched warm-up all-reduce: element %d = %g", i, v[i]);
      return 0;
    }
  if (r != SC_SUCCESS)
    snprintf(why, len, "matched warm-up all-reduce: %s: %s", sc_strerror(r), sc_last_error());
  return r == SC_SUCCESS;
}

/* One case on a fresh communicator; prints this rank's line; 1 when it holds. */
static int run_case(int k, const mcase_t *mc, sc_comm_t *world, float *send, float *recv,
                    double bound, double abort_after) {
  char sa[48], sb[48], label[160], odd[96] = "";
  for (int r = 0; r < g_nranks && r < 64; r++)
    if (mc->odd >> r & 1)
      snprintf(odd + strlen(odd), sizeof(odd) - strlen(odd), "%s%d", odd[0] ? "+" : "", r);
  snprintf(label, sizeof(label), "case %d (%s | %s @%s) rank %d", k,
           call_str(&mc->a, sa, sizeof(sa)), call_str(&mc->b, sb, sizeof(sb)), odd, g_rank);
  sc_comm_t *comm = NULL;
  if (sc_comm_split(world, 0, g_rank, &comm) != SC_SUCCESS) {
    printf("%s: FAIL split: %s\n", label, sc_last_error());
    return -1; /* the world communicator is gone: no further case can run */
  }
  char why[1200] = "";
  int ok = warm_up(comm, why, sizeof(why));
  const call_t *mine = mc->odd >> g_rank & 1 ? &mc->b : &mc->a;
  sc_result_t r = SC_SUCCESS, async = SC_SUCCESS, again = SC_SUCCESS;
  double dt = 0, dt_again = 0;
  int completed = 0, unheard = 0;
  char msg[1024] = "";
  if (ok) {
    /* Not rank 0's value: a broadcast that completes must have written it. */
    if (mine->coll == C_BROADCAST)
      for (size_t i = 0; i < mine->count; i++) recv[i] = -7.0f;
    double t0 = now_s();
    wd_arm(comm, t0 + abort_after);
    r = run_call(mine, send, recv, comm);
    dt = now_s() - t0;
    int fired = wd_disarm();
    snprintf(msg, sizeof(msg), "%s", r == SC_SUCCESS ? "" : sc_last_error());
    if (r == SC_SUCCESS && may_complete(mc, mine, g_rank)) {
      /* Its part may end before a peer reads a byte of it, or without a byte
       * from a rank that called the other call: it learns of the mismatch
       * from the communicator, within the same bound. */
      completed = 1;
      result_holds(mine, recv, why, sizeof(why));
      struct timespec tick = {0, 5 * 1000000L};
      sc_comm_get_async_error(comm, &async);
      while (async == SC_SUCCESS && now_s() - t0 < bound) {
        nanosleep(&tick, NULL);
        sc_comm_get_async_error(comm, &async);
      }
      dt = now_s() - t0;
    }
    /* No further call on a communicator that has not failed: it would be
     * traffic the peers could report instead of the mismatched call. */
    if (r == SC_ERR_MISMATCH || (completed && async == SC_ERR_MISMATCH)) {
      sc_comm_get_async_error(comm, &async);
      double t1 = now_s();
      again = sc_barrier(comm);
      dt_again = now_s() - t1;
      if (completed) snprintf(msg, sizeof(msg), "%s", again == SC_SUCCESS ? "" : sc_last_error());
    }
    if (why[0]) {
      /* a completed call's wrong result says it all */
    } else if (completed && async != SC_ERR_MISMATCH) {
      unheard = 1;
      snprintf(why, sizeof(why),
               "its call succeeded, and the communicator reported %s %.3f s after it began, want "
               "SC_ERR_MISMATCH",
               sc_strerror(async), dt);
    } else if (!completed && r != SC_ERR_MISMATCH)
      snprintf(why, sizeof(why), "got %s in %.3f s%s, want SC_ERR_MISMATCH", sc_strerror(r), dt,
               fired ? " (ended by the watchdog's sc_comm_abort)" : "");
    else if (dt > bound)
      snprintf(why, sizeof(why), "SC_ERR_MISMATCH after %.3f s, bound %.1f s", dt, bound);
    else if (async != SC_ERR_MISMATCH)
      snprintf(why, sizeof(why), "sc_comm_get_async_error: %s", sc_strerror(async));
    else if (again != SC_ERR_MISMATCH || dt_again > bound / 2)
      snprintf(why, sizeof(why), "the next call: %s after %.3f s", sc_strerror(again), dt_again);
    else if (!names_both(msg, mc))
      snprintf(why, sizeof(why), "the %s does not name both calls (%s, %s)",
               completed ? "next call's message" : "message", sa, sb);
    ok = why[0] == '\0';
  }
  if (ok)
    printf("%s: OK mismatch in %.3f s%s: %s\n", label, dt,
           completed ? " (its call completed; told by the communicator)" : "", msg);
  else
    printf("%s: FAIL %s: %s\n", label, why, msg);
  fflush(stdout);
  /* Every rank has its result before any rank leaves the communicator: a
   * departure must not be what a slower peer reports. */
  sc_result_t w = sc_barrier(world);
  if (w != SC_SUCCESS) {
    printf("%s: FAIL world barrier: %s: %s\n", label, sc_strerror(w), sc_last_error());
    return -1;
  }
  if (unheard) {
    /* The case failed already: what a next call makes of it, once every
     * rank has its result, says where the mismatch went (a message left
     * unread, or nothing at all). */
    wd_arm(comm, now_s() + abort_after);
    again = sc_barrier(comm);
    wd_disarm();
    printf("%s: note: a next call then gave %s: %s\n", label, sc_strerror(again),
           again == SC_SUCCESS ? "" : sc_last_error());
  }
  sc_comm_destroy(comm);
  return ok;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  double bound = 2.0, abort_after = -1;
  enum { MAXCASES = 512 };
  static mcase_t cases[MAXCASES];
  int ncases = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--bound") && i + 1 < argc) {
      bound = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--peer-unnamed")) {
      g_peer_unnamed = 1;
    } else if (!strcmp(argv[i], "--abort") && i + 1 < argc) {
      abort_after = atof(argv[++i]);
    } else if (!strcmp(argv[i], "all")) {
      ncases += all_pairs(cases + ncases, MAXCASES - ncases);
    } else if (ncases < MAXCASES && parse_case(argv[i], &cases[ncases]) == 0) {
      ncases++;
    } else {
      fprintf(stderr, "mismatch_matrix: bad case \"%s\"\n", argv[i]);
      return 2;
    }
  }
  if (abort_after < 0) abort_after = bound + 3.0;
  sc_comm_t *world;
  if (sc_comm_init_env(&world) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(world, &g_rank);
  sc_comm_size(world, &g_nranks);
  size_t elems = 4;
  for (int k = 0; k < ncases; k++) {
    size_t a = call_elems(&cases[k].a, g_nranks), b = call_elems(&cases[k].b, g_nranks);
    if (a > elems) elems = a;
    if (b > elems) elems = b;
  }
  /* Touched once here, so that no case pays for first-touch page faults. */
  float *send = malloc(elems * sizeof(float)), *recv = malloc(elems * sizeof(float));
  if (!send || !recv) {
    fprintf(stderr, "rank %d: no memory for %zu elements\n", g_rank, elems);
    return 1;
  }
  for (size_t i = 0; i < elems; i++) send[i] = recv[i] = 1.0f;
  pthread_t wd;
  if (pthread_create(&wd, NULL, watchdog, NULL) != 0) {
    fprintf(stderr, "rank %d: no watchdog thread\n", g_rank);
    return 1;
  }
  int failed = 0, k = 0;
  for (; k < ncases; k++) {
    int r = run_case(k, &cases[k], world, send, recv, bound, abort_after);
    if (r != 1) failed++;
    if (r < 0) break;
  }
  printf("rank %d: %d cases, %d failed%s\n", g_rank, ncases, failed,
         k < ncases ? " (the world communicator failed: the rest did not run)" : "");
  pthread_mutex_lock(&wd_lock);
  wd_quit = 1;
  pthread_mutex_unlock(&wd_lock);
  pthread_join(wd, NULL);
  sc_comm_destroy(world);
  free(send);
  free(recv);
  return failed ? 1 : 0;
}
