/* SPDX-License-Identifier: BSD-3-Clause */
/* Open MPI's MPI_Allreduce timed the way perf/compare/allreduce_compare.sh
 * times every library: float32 sum, out of place, one checked operation per
 * size, then warm-up, a barrier and the timed iterations; the figure is the
 * slowest rank's average. Built and run by that script (not by the normal
 * build, which must not depend on MPI):
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun -np P ./mpi_allreduce SIZE:ITERS:WARMUP ...
 * Rank 0 prints one line per size: "SIZE TIME_US", or "SIZE fail WHY". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  size_t maxbytes = 0;
  for (int a = 1; a < argc; a++) {
    size_t s = strtoull(argv[a], NULL, 10);
    if (s > maxbytes) maxbytes = s;
  }
  size_t maxcount = maxbytes / sizeof(float) + 1;
  float *in = malloc(maxcount * sizeof(float)), *out = malloc(maxcount * sizeof(float));
  if (!in || !out) {
    fprintf(stderr, "mpi_allreduce: out of memory for %zu bytes\n", maxbytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int status = 0;
  for (int a = 1; a < argc; a++) {
    size_t size = 0;
    long iters = 0, warmup = 0;
    if (sscanf(argv[a], "%zu:%ld:%ld", &size, &iters, &warmup) != 3 || iters < 1 || warmup < 0) {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: bad SIZE:ITERS:WARMUP '%s'\n", argv[a]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int count = (int)(size / sizeof(float));
    /* Small integers: the sum is exact in float whatever the order. */
    for (int i = 0; i < count; i++) in[i] = (float)((rank + 1) * (i % 7 + 1));
    memset(out, 0, (size_t)count * sizeof(float));
    MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = 0;
    float ranksum = (float)nranks * (float)(nranks + 1) / 2;
    for (int i = 0; i < count; i++) wrong += out[i] != ranksum * (float)(i % 7 + 1);
    long allwrong = 0;
    MPI_Reduce(&wrong, &allwrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    for (long i = 0; i < warmup; i++)
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / (double)iters, slowest = 0;
    MPI_Reduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      if (allwrong) {
        printf("%zu fail %ld wrong elements\n", size, allwrong);
        status = 1;
      } else {
        printf("%zu %.3f\n", size, slowest);
      }
      fflush(stdout);
    }
  }
  free(in);
  free(out);
  MPI_Finalize();
  return status;
}
