/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messages, once warm, allocate nothing per message (run
 * under sc-run): ring shifts of 8 bytes, 88 (the largest inline payload)
 * and 256 KiB (a rendezvous), as a group with the send first, a group with
 * the receive first, and sc_isend + sc_irecv + sc_wait; 100 warm-up rounds,
 * then 300 counted. This program defines malloc, calloc, realloc and free,
 * which the library's calls resolve to (the executable comes first in the
 * symbol search), counts the calls any thread makes while a counted round
 * runs and passes them to glibc's own entry points. Every payload is
 * checked against a pattern computed from (sender, round, byte). The
 * library keeps spare blocks instead of freeing them, and a rank that runs
 * ahead of its successor leaves more messages unexpected there than the
 * warm-up did: a new peak costs a block each. So over shm and tcp more than
 * ROUNDS / 10 counted calls (one per message would be 300 or more) fail the
 * test, with the callers' addresses; over other transports (UCX allocates
 * on its own terms) the count is printed. Built with a sanitizer, which
 * owns malloc, only the payloads of a few rounds are checked. Usage: mr_p2p_alloc. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/sanitize.h"
#include "sparsecoll.h"

#define SANITIZED (SC_ASAN || SC_TSAN)

/* Under a sanitizer nothing is counted: a few rounds check the payloads. */
enum { WARM = SANITIZED ? 5 : 100, ROUNDS = SANITIZED ? 20 : 300, MOST = ROUNDS / 10, NWHERE = 8 };

static atomic_int counting;
static atomic_long counted;
static void *where[NWHERE];

#if !SANITIZED
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static void note(void *caller) {
  if (!atomic_load_explicit(&counting, memory_order_relaxed)) return;
  long k = atomic_fetch_add(&counted, 1);
  if (k < NWHERE) where[k] = caller;
}

void *malloc(size_t n) {
  note(__builtin_return_address(0));
  return __libc_malloc(n);
}

void *calloc(size_t n, size_t size) {
  note(__builtin_return_address(0));
  return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n) {
  note(__builtin_return_address(0));
  return __libc_realloc(p, n);
}

void free(void *p) {
  __libc_free(p);
}
#endif

static int rank, nranks, failures;

static uint8_t pattern(int src, int round, size_t j) {
  uint64_t x = (uint64_t)(src + 1) * 0x9E3779B97F4A7C15ull ^
               (uint64_t)(round + 3) * 0x94D049BB133111EBull ^ (uint64_t)j * 0x2545F4914F6CDD1Dull;
  return (uint8_t)(x >> 29);
}

typedef enum { GROUP_SEND_FIRST, GROUP_RECV_FIRST, NONBLOCKING, NFORMS } form_t;
static const char *const form_name[NFORMS] = {"group, send first", "group, receive first",
                                              "isend + irecv + wait"};

/* One ring shift; 0 or the failing call's result. */
static sc_result_t shift(sc_comm_t *comm, form_t form, const uint8_t *s, uint8_t *r, size_t n,
                         int tag) {
  const int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
  sc_result_t a = SC_SUCCESS, b = SC_SUCCESS, c;
  if (form == NONBLOCKING) {
    sc_request_t *rq = NULL, *sq = NULL;
    a = sc_irecv(r, n, SC_UINT8, from, tag, comm, &rq);
    b = sc_isend(s, n, SC_UINT8, to, tag, comm, &sq);
    if (rq && (c = sc_wait(&rq)) != SC_SUCCESS && a == SC_SUCCESS) a = c;
    if (sq && (c = sc_wait(&sq)) != SC_SUCCESS && b == SC_SUCCESS) b = c;
    return a != SC_SUCCESS ? a : b;
  }
  if ((c = sc_group_start()) != SC_SUCCESS) return c;
  if (form == GROUP_RECV_FIRST) a = sc_recv(r, n, SC_UINT8, from, tag, comm);
  b = sc_send(s, n, SC_UINT8, to, tag, comm);
  if (form == GROUP_SEND_FIRST) a = sc_recv(r, n, SC_UINT8, from, tag, comm);
  c = sc_group_end();
  return a != SC_SUCCESS ? a : b != SC_SUCCESS ? b : c;
}

/* The callers' addresses as library+offset (addr2line -e LIB OFFSET names them). */
static void print_callers(long n) {
  for (long k = 0; k < n && k < NWHERE; k++) {
    Dl_info info;
    if (dladdr(where[k], &info) && info.dli_fname)
      fprintf(stderr, "rank %d:   allocation %ld from %s+%#lx (after %s)\n", rank, k + 1,
              info.dli_fname, (unsigned long)((uintptr_t)where[k] - (uintptr_t)info.dli_fbase),
              info.dli_sname ? info.dli_sname : "?");
    else
      fprintf(stderr, "rank %d:   allocation %ld from %p\n", rank, k + 1, where[k]);
  }
}

static void run_case(sc_comm_t *comm, form_t form, size_t n, int strict) {
  const int from = (rank - 1 + nranks) % nranks;
  const int tag = 7 + (int)form;
  uint8_t *s = malloc(n ? n : 1), *r = malloc(n ? n : 1);
  if (!s || !r) {
    fprintf(stderr, "rank %d FAIL: no memory for %zu bytes\n", rank, n);
    failures++;
    free(s);
    free(r);
    return;
  }
  long bad_byte = -1, bad_round = -1;
  sc_result_t res = SC_SUCCESS;
  for (int round = 0; round < WARM + ROUNDS && res == SC_SUCCESS && bad_round < 0; round++) {
    for (size_t j = 0; j < n; j++) s[j] = pattern(rank, round, j);
    memset(r, 0xA5, n);
    if (round == WARM) {
      atomic_store(&counted, 0);
      atomic_store(&counting, 1);
    }
    res = shift(comm, form, s, r, n, tag);
    for (size_t j = 0; j < n && res == SC_SUCCESS; j++)
      if (r[j] != pattern(from, round, j)) {
        bad_byte = (long)j;
        bad_round = round;
        break;
      }
  }
  atomic_store(&counting, 0);
  const long allocs = atomic_load(&counted);
  if (res != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: %s, %zu bytes: %s: %s\n", rank, form_name[form], n,
            sc_strerror(res), sc_last_error());
    failures++;
  } else if (bad_round >= 0) {
    fprintf(stderr, "rank %d FAIL: %s, %zu bytes: round %ld byte %ld from rank %d is %u, want %u\n",
            rank, form_name[form], n, bad_round, bad_byte, from, r[bad_byte],
            pattern(from, (int)bad_round, (size_t)bad_byte));
    failures++;
  } else if (SANITIZED) {
    printf("rank %d: %s, %zu bytes: payloads right (allocations not counted under a sanitizer)\n",
           rank, form_name[form], n);
  } else if (allocs > MOST && strict) {
    fprintf(stderr, "rank %d FAIL: %s, %zu bytes: %ld allocations in %d rounds (at most %d)\n",
            rank, form_name[form], n, allocs, ROUNDS, MOST);
    print_callers(allocs);
    failures++;
  } else {
    printf("rank %d: %s, %zu bytes: %ld allocations in %d rounds\n", rank, form_name[form], n,
           allocs, ROUNDS);
  }
  free(s);
  free(r);
}

int main(void) {
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "FAIL: init: %s\n", sc_last_error());
    return 1;
  }
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &nranks);
  const char *tp = getenv("SC_TRANSPORT");
  const int strict = !tp || !strcmp(tp, "shm") || !strcmp(tp, "tcp") || !strcmp(tp, "auto");
  static const size_t sizes[] = {8, 88, 256 << 10};
  for (int f = 0; f < NFORMS; f++)
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
      run_case(comm, (form_t)f, sizes[k], strict);
  if (sc_comm_destroy(comm) != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: destroy: %s\n", rank, sc_last_error());
    failures++;
  }
  if (failures) return 1;
  printf("rank %d: OK\n", rank);
  return 0;
}
