/* SPDX-License-Identifier: BSD-3-Clause */
/* One rank under sc-run for test/failure/verbs_rows.sh: creates a communicator
 * from the environment and prints what it got, so that the script can check
 * the code and the message of SC_TRANSPORT=verbs's device-absent and
 * bad-setting paths on every rank. On success it runs one all-reduce of the
 * ranks' numbers and checks the sum against n(n-1)/2.
 * Output: "RESULT rank R CODE_NAME: detail" or "RESULT rank R ok sum S". */
#include <stdio.h>
#include <stdlib.h>

#include "sparsecoll.h"

static const char *code_name(sc_result_t r) {
  switch (r) {
  case SC_ERR_UNSUPPORTED:
    return "SC_ERR_UNSUPPORTED";
  case SC_ERR_INVALID_ARG:
    return "SC_ERR_INVALID_ARG";
  case SC_ERR_TIMEOUT:
    return "SC_ERR_TIMEOUT";
  case SC_ERR_REMOTE:
    return "SC_ERR_REMOTE";
  default:
    return "SC_ERR_other";
  }
}

int main(void) {
  const char *r_env = getenv("SC_RANK");
  int rank = r_env ? atoi(r_env) : -1;
  sc_comm_t *comm = NULL;
  sc_result_t r = sc_comm_init_env(&comm);
  if (r != SC_SUCCESS) {
    printf("RESULT rank %d %s: %s\n", rank, code_name(r), sc_last_error());
    return 0;
  }
  int n = 0;
  sc_comm_size(comm, &n);
  long v = rank;
  r = sc_allreduce(&v, &v, 1, SC_INT64, SC_SUM, comm);
  if (r != SC_SUCCESS || v != (long)n * (n - 1) / 2) {
    printf("FAIL rank %d: all-reduce %s, sum %ld, want %ld\n", rank, sc_strerror(r), v,
           (long)n * (n - 1) / 2);
    return 1;
  }
  printf("RESULT rank %d ok sum %ld\n", rank, v);
  return sc_comm_destroy(comm) == SC_SUCCESS ? 0 : 1;
}
