/* SPDX-License-Identifier: BSD-3-Clause */
/* Descriptors held at scale: every rank counts its open descriptors
 * (/proc/self/fd) right after init and after one all-reduce, and rank 0
 * prints both and fails when either exceeds the bound given as argv[1]. The
 * count is the process's own, read without the library's help.
 * Usage: mr_fdcount MAX_FDS (ranks from sc-run's environment). */
#include <stdio.h>
#include <stdlib.h>

#include "perf/proc_self.h"
#include "sparsecoll.h"

int main(int argc, char **argv) {
  int max_fds = argc > 1 ? atoi(argv[1]) : 32;
  sc_comm_t *comm;
  sc_result_t r = sc_comm_init_env(&comm);
  if (r != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s: %s\n", sc_strerror(r), sc_last_error());
    return 1;
  }
  int after_init = (int)proc_count_fds(0);
  int rank, n;
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &n);
  int64_t v = rank + 1;
  r = sc_allreduce(&v, &v, 1, SC_INT64, SC_SUM, comm);
  int after_op = (int)proc_count_fds(0);
  int ok = r == SC_SUCCESS && v == (int64_t)n * (n + 1) / 2;
  if (!ok)
    fprintf(stderr, "rank %d: allreduce gave %lld (%s)\n", rank, (long long)v, sc_last_error());
  if (rank == 0) {
    printf("rank 0 of %d: %d descriptors after init, %d after an all-reduce (bound %d)\n", n,
           after_init, after_op, max_fds);
    if (after_init < 3 || after_init > max_fds || after_op > max_fds) {
      fprintf(stderr, "rank 0: descriptors above the bound %d (or unreadable)\n", max_fds);
      ok = 0;
    }
  }
  sc_comm_destroy(comm);
  return ok ? 0 : 1;
}
