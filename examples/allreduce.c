/* SPDX-License-Identifier: BSD-3-Clause */
/* A sum all-reduce over the ranks that sc-run starts, checked against the sum
 * worked out here. Run it on any number of ranks:
 *   sc-run -n 2 ./allreduce
 * Build it against an installed libsparsecoll either with pkg-config,
 *   cc allreduce.c $(pkg-config --cflags --libs sparsecoll) -o allreduce
 * or with CMake through find_package(sparsecoll) (CMakeLists.txt beside it). */
#include <sparsecoll.h>
#include <stdio.h>

#define N 4096

static int fail(const char *what, sc_result_t r) {
  fprintf(stderr, "allreduce: %s: %s: %s\n", what, sc_strerror(r), sc_last_error());
  return 1;
}

int main(void) {
  /* The header this program was compiled with and the library it runs with
   * must be the same release. */
  int want_version = SC_VERSION_MAJOR * 10000 + SC_VERSION_MINOR * 100 + SC_VERSION_PATCH;
  if (sc_get_version() != want_version) {
    fprintf(stderr, "allreduce: compiled against %d.%d.%d, running with version %d\n",
            SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH, sc_get_version());
    return 1;
  }
  sc_comm_t *comm;
  sc_result_t r = sc_comm_init_env(&comm);
  if (r != SC_SUCCESS) return fail("sc_comm_init_env", r);
  int rank = 0, size = 0;
  if ((r = sc_comm_rank(comm, &rank)) != SC_SUCCESS ||
      (r = sc_comm_size(comm, &size)) != SC_SUCCESS)
    return fail("sc_comm_rank/size", r);

  /* Rank q contributes q + i at element i: the sum over the ranks is
   * size * (size - 1) / 2 + size * i, exact in float for these sizes. */
  static float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)(rank + i);
  r = sc_allreduce(x, x, N, SC_FLOAT32, SC_SUM, comm);
  if (r != SC_SUCCESS) return fail("sc_allreduce", r);
  int wrong = 0;
  for (int i = 0; i < N; i++) {
    float want = (float)(size * (size - 1) / 2 + size * i);
    if (x[i] != want && wrong++ < 3)
      fprintf(stderr, "allreduce: x[%d] = %g, want %g\n", i, x[i], want);
  }
  r = sc_comm_destroy(comm);
  if (r != SC_SUCCESS) return fail("sc_comm_destroy", r);
  if (wrong) {
    fprintf(stderr, "allreduce: rank %d of %d: %d of %d elements wrong\n", rank, size, wrong, N);
    return 1;
  }
  printf("allreduce: rank %d of %d: %d elements correct (libsparsecoll %d.%d.%d)\n", rank, size, N,
         SC_VERSION_MAJOR, SC_VERSION_MINOR, SC_VERSION_PATCH);
  return 0;
}
