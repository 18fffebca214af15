/* SPDX-License-Identifier: BSD-3-Clause */
/* sc_comm_init_env from each launcher's variables (the script sets them):
 * all-reduce of the ranks checks that every process got its own rank. */
#include <stdio.h>

#include "sparsecoll.h"

int main(void) {
  sc_comm_t *comm;
  sc_result_t r = sc_comm_init_env(&comm);
  if (r != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s: %s\n", sc_strerror(r), sc_last_error());
    return 1;
  }
  int rank, n;
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &n);
  int64_t v = rank + 1;
  r = sc_allreduce(&v, &v, 1, SC_INT64, SC_SUM, comm);
  int ok = r == SC_SUCCESS && v == (int64_t)n * (n + 1) / 2;
  if (!ok)
    fprintf(stderr, "rank %d: allreduce gave %lld (%s)\n", rank, (long long)v, sc_last_error());
  sc_comm_destroy(comm);
  return ok ? 0 : 1;
}
