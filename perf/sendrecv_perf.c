/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_sendrecv_perf: nccl-tests' sendrecv_perf for libsparsecoll's
 * point-to-point calls. Every rank sends its buffer to rank + 1 and receives
 * rank - 1's (modulo P; one rank sends to itself), in one
 * sc_group_start/sc_group_end by default (-a group), or as sc_irecv and
 * sc_isend completed by sc_wait (-a isend); -a compare times both side by
 * side. Element i of rank r's buffer holds rank r's input i, so a message
 * from the wrong rank, or a part of one that is missing or shifted, is
 * counted wrong. busbw = algbw, as nccl-tests: each rank's link carries
 * size bytes each way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_common.h"

#define WAY_ENV "SC_SENDRECV_PERF_WAY"

enum { WAY_GROUP, WAY_ISEND };

static const char *const ways[] = {"group", "isend", NULL};

/* NULL and "auto" are the default, the group. */
static int way_of(const char *algo) {
  if (!algo || !*algo || strcmp(algo, "auto") == 0 || strcmp(algo, "group") == 0) return WAY_GROUP;
  if (strcmp(algo, "isend") == 0) return WAY_ISEND;
  return -1;
}

static void place(perf_case_t *c) {
  if (way_of(c->algo) < 0) { /* the same on every rank, before any message */
    fprintf(stderr, "sc_sendrecv_perf: -a %s: expected group, isend or compare\n", c->algo);
    exit(2);
  }
  /* Sending from and receiving into one buffer at once has no defined
   * result: no in-place form (nccl-tests passes the one buffer as both). */
  if (c->in_place) {
    c->skip = 1;
    return;
  }
  c->sendbuf = c->send_alloc;
  c->recvbuf = c->recv_alloc;
}

static sc_result_t run(const perf_case_t *c) {
  int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;
  if (way_of(c->algo) == WAY_ISEND) {
    sc_request_t *rreq = NULL, *sreq = NULL;
    sc_result_t r = sc_irecv(c->recvbuf, c->count, c->dtype, prev, 0, c->comm, &rreq);
    if (r != SC_SUCCESS) return r;
    r = sc_isend(c->sendbuf, c->count, c->dtype, next, 0, c->comm, &sreq);
    if (r != SC_SUCCESS) {
      sc_wait(&rreq); /* cannot complete without its message; the wait is bounded */
      return r;
    }
    sc_result_t rs = sc_wait(&sreq);
    r = sc_wait(&rreq);
    return rs != SC_SUCCESS ? rs : r;
  }
  sc_group_start();
  sc_result_t rs = sc_send(c->sendbuf, c->count, c->dtype, next, 0, c->comm);
  sc_result_t rr = sc_recv(c->recvbuf, c->count, c->dtype, prev, 0, c->comm);
  sc_result_t r = sc_group_end();
  return rs != SC_SUCCESS ? rs : rr != SC_SUCCESS ? rr : r;
}

static void fill(const perf_case_t *c) {
  perf_poison(c->recvbuf, c->total * c->elem_size);
  for (size_t i = 0; i < c->total; i++) perf_store_input(c, c->sendbuf, i, c->rank, i);
}

/* The reference is the sender's input, recomputed here, not its buffer. */
static int64_t check(const perf_case_t *c) {
  int prev = (c->rank + c->nranks - 1) % c->nranks;
  int64_t wrong = 0;
  for (size_t i = 0; i < c->total; i++) wrong += !perf_is_input(c, c->recvbuf, i, prev, i);
  return wrong;
}

/* auto is the default way: the group. */
static sc_result_t auto_pick(const perf_case_t *c, const char **name) {
  (void)c;
  *name = ways[WAY_GROUP];
  return SC_SUCCESS;
}

int main(int argc, char **argv) {
  const perf_coll_t coll = {
      .binary = "sc_sendrecv_perf",
      .name = "sendrecv",
      .timed = "sc_send and sc_recv",
      .algo_env = WAY_ENV,
      .algo_help =
          "  -a, --algo WAY        how each rank sends and receives (sets " WAY_ENV ",\n"
          "                        which this program reads, not the library):\n"
          "                        group (default; auto names it too): sc_send and sc_recv\n"
          "                        in one sc_group_start/sc_group_end; isend: sc_irecv,\n"
          "                        sc_isend, then sc_wait on both\n",
      .compare_algos = ways,
      .auto_pick = auto_pick,
      .host_only = 1, /* the point-to-point calls take no device pointers */
      .busbw = PERF_BUSBW_ONE,
      .place = place,
      .run = run,
      .fill = fill,
      .check = check,
      .size_help = "The size column is what each rank sends to rank + 1 (and receives from\n"
                   "rank - 1), count its elements; no in-place form (those columns read n/a).\n",
  };
  return perf_main(&coll, argc, argv);
}
