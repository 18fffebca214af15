/* SPDX-License-Identifier: BSD-3-Clause */
/* "After an error the process can create a new communicator and go on
 * working, with nothing leaked" (run under sc-run, n=3, any SC_TRANSPORT).
 * Ranks meet through sc_get_unique_id + sc_comm_init_rank, the id passed in a
 * file of DIR. Phase 1: a checked all-reduce, then
 *   exit:  rank 2 leaves; the survivors' next all-reduce fails (SC_ERR_REMOTE)
 *          and they destroy the communicator;
 *   abort: every rank aborts its communicator (twice) and destroys it.
 * Phase 2: the remaining ranks create a new communicator from a new unique id
 * and run a checked all-reduce. Open descriptors, threads and memfd or
 * /dev/shm mappings before the first communicator and after the last is
 * destroyed must be equal.
 * Usage: fail_recover DIR exit|abort [bound_seconds] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/failure/fail_common.h"

#define COUNT 100000

static int rank;

static int share_id(const char *dir, int phase, sc_unique_id_t *id) {
  char path[512], tmp[520];
  snprintf(path, sizeof(path), "%s/id%d", dir, phase);
  if (rank == 0) {
    if (sc_get_unique_id(id) != SC_SUCCESS) {
      fprintf(stderr, "FAIL: sc_get_unique_id: %s\n", sc_last_error());
      return 0;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
      perror("writing the unique id");
      return 0;
    }
    return 1;
  }
  double end = fail_now() + 20;
  while (fail_now() < end) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t got = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (got == 1) return 1;
    }
    usleep(10 * 1000);
  }
  fprintf(stderr, "rank %d FAIL: no unique id in %s\n", rank, path);
  return 0;
}

/* Rank r contributes (r + 1) * (i % 7 + 1); checked against the closed form. */
static int checked_allreduce(sc_comm_t *comm, int nranks, int32_t *buf) {
  for (size_t i = 0; i < COUNT; i++) buf[i] = (rank + 1) * (int32_t)(i % 7 + 1);
  if (sc_allreduce(buf, buf, COUNT, SC_INT32, SC_SUM, comm) != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: all-reduce: %s\n", rank, sc_last_error());
    return 0;
  }
  int32_t ranks_sum = nranks * (nranks + 1) / 2;
  for (size_t i = 0; i < COUNT; i++)
    if (buf[i] != ranks_sum * (int32_t)(i % 7 + 1)) {
      fprintf(stderr, "rank %d FAIL: element %zu is %d, want %d\n", rank, i, buf[i],
              ranks_sum * (int32_t)(i % 7 + 1));
      return 0;
    }
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[2], "exit") && strcmp(argv[2], "abort"))) {
    fprintf(stderr, "usage: fail_recover DIR exit|abort [bound_s]\n");
    return 2;
  }
  const char *dir = argv[1];
  int leave = !strcmp(argv[2], "exit");
  double bound = argc > 3 ? atof(argv[3]) : 5.0;
  const char *r = getenv("SC_RANK");
  rank = r ? atoi(r) : 0;
  const int n = 3;
  fail_res_t before, after;
  fail_res_count(&before);
  int32_t *buf = malloc(COUNT * sizeof(int32_t));
  int ok = 1;

  sc_unique_id_t id;
  sc_comm_t *comm;
  if (!share_id(dir, 1, &id)) return 1;
  if (sc_comm_init_rank(&comm, n, id, rank) != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: init 1: %s\n", rank, sc_last_error());
    return 1;
  }
  if (!checked_allreduce(comm, n, buf)) return 1;
  int n2 = n;
  if (leave) {
    if (rank == n - 1) _exit(0);
    n2 = n - 1;
    double t0 = fail_now();
    sc_result_t res = SC_SUCCESS;
    for (int i = 0; i < 20 && res == SC_SUCCESS; i++)
      res = sc_allreduce(buf, buf, COUNT, SC_INT32, SC_SUM, comm);
    /* The call itself saw the peer leave (allreduce #1), or the liveness
     * watch had reported it first and the call was refused (not numbered). */
    const char *kw[] = {"allreduce ", "count 100000, int32", "rank 2 (", NULL};
    ok &= fail_expect(rank, "peer left", res, SC_ERR_REMOTE, fail_now() - t0, bound,
                      sc_last_error(), kw);
  } else {
    sc_comm_abort(comm);
    sc_comm_abort(comm);
  }
  if (sc_comm_destroy(comm) != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: destroy 1: %s\n", rank, sc_last_error());
    ok = 0;
  }

  if (!share_id(dir, 2, &id)) return 1;
  if (sc_comm_init_rank(&comm, n2, id, rank) != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: init 2: %s\n", rank, sc_last_error());
    return 1;
  }
  ok &= checked_allreduce(comm, n2, buf);
  /* The counts must see a live communicator, or equality below proves nothing. */
  fail_res_t during;
  fail_res_count(&during);
  const char *tp = getenv("SC_TRANSPORT");
  if (during.fds <= before.fds || during.threads <= before.threads ||
      (tp && !strcmp(tp, "shm") && during.shm_maps <= before.shm_maps)) {
    fprintf(stderr, "rank %d FAIL: a live communicator shows %d fds, %d threads, %d shm maps\n",
            rank, during.fds, during.threads, during.shm_maps);
    ok = 0;
  }
  ok &= sc_comm_destroy(comm) == SC_SUCCESS;
  free(buf);

  /* The root service thread of rank 0's id ends once every rank has the table. */
  double end = fail_now() + 5;
  do {
    fail_res_count(&after);
    if (after.fds == before.fds && after.threads == before.threads &&
        after.shm_maps == before.shm_maps)
      break;
    usleep(20 * 1000);
  } while (fail_now() < end);
  printf("rank %d: before: %d fds, %d threads, %d shm maps; live: %d, %d, %d; after: %d, %d, %d\n",
         rank, before.fds, before.threads, before.shm_maps, during.fds, during.threads,
         during.shm_maps, after.fds, after.threads, after.shm_maps);
  if (after.fds != before.fds || after.threads != before.threads ||
      after.shm_maps != before.shm_maps) {
    fprintf(stderr, "rank %d FAIL: leaked resources\n", rank);
    ok = 0;
  }
  return ok ? 0 : 1;
}
