/* SPDX-License-Identifier: BSD-3-Clause */
/* Open MPI's MPI_Alltoall (with -v MPI_Alltoallv and the count matrix of
 * sc_alltoall_perf -v, from the same header; with --sendrecv MPI_Sendrecv to
 * rank + 1 from rank - 1, as sc_sendrecv_perf) timed the way
 * perf/compare/alltoall_compare.sh times every library: uint8 elements, so
 * that every size splits into P blocks down to P bytes; SIZE is the bytes of
 * one rank's send buffer (--sendrecv: the whole message); out of place; one
 * checked operation per size, then warm-up, a barrier and the timed
 * iterations; the figure is the slowest rank's average. Built and run by
 * that script (not by the normal build, which must not depend on MPI):
 *   mpicc -O2 -I TOP -o mpi_alltoall mpi_alltoall.c     (TOP: the source tree)
 *   mpirun -np P ./mpi_alltoall [-v [--seed N] [--skew S] | --sendrecv] SIZE:ITERS:WARMUP ...
 * Rank 0 prints one line per size: "SIZE TIME_US", or "SIZE fail WHY". */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/a2a_matrix.h"

/* What rank `from` puts at offset g of its send buffer: any value the
 * receiver can recompute, different between ranks and offsets. */
static unsigned char value(int from, size_t g) {
  return (unsigned char)(((size_t)from * 131u + g * 7u + 1u) % 251u);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int uneven = 0, sendrecv = 0, skew = 1, a = 1;
  uint64_t seed = A2A_SEED_DEFAULT;
  for (; a < argc && argv[a][0] == '-'; a++) {
    if (strcmp(argv[a], "-v") == 0) {
      uneven = 1;
    } else if (strcmp(argv[a], "--sendrecv") == 0) {
      sendrecv = 1;
    } else if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc) {
      seed = strtoull(argv[++a], NULL, 0);
    } else if (strcmp(argv[a], "--skew") == 0 && a + 1 < argc) {
      skew = atoi(argv[++a]);
    } else {
      if (rank == 0) fprintf(stderr, "mpi_alltoall: unknown option '%s'\n", argv[a]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (uneven && sendrecv) {
    if (rank == 0) fprintf(stderr, "mpi_alltoall: -v and --sendrecv exclude each other\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  size_t n = (size_t)nranks, maxbytes = 0;
  for (int k = a; k < argc; k++) {
    size_t s = strtoull(argv[k], NULL, 10);
    if (s > maxbytes) maxbytes = s;
  }
  uint64_t *share = malloc(n * n * sizeof(*share));
  size_t *count = malloc(n * n * sizeof(*count));
  int *sc = malloc(4 * n * sizeof(int)), *sd = sc + n, *rc = sd + n, *rd = rc + n;
  if (!share || !count || !sc || a2a_shares(nranks, seed, skew, share) != 0) {
    fprintf(stderr, "mpi_alltoall: no count matrix for %d ranks, skew %d\n", nranks, skew);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  /* The most any rank receives: P x SIZE at worst. */
  size_t recvmax = maxbytes;
  if (uneven) {
    a2a_counts(nranks, share, maxbytes, count);
    for (size_t j = 0; j < n; j++) {
      size_t col = 0;
      for (size_t i = 0; i < n; i++) col += count[i * n + j];
      if (col > recvmax) recvmax = col;
    }
    recvmax += 2 * n; /* a smaller size rounds each cell by less than one element either way */
  }
  unsigned char *in = malloc(maxbytes + 1), *out = malloc(recvmax + 1);
  if (!in || !out || maxbytes > INT_MAX) {
    fprintf(stderr, "mpi_alltoall: cannot allocate %zu + %zu bytes\n", maxbytes, recvmax);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int status = 0;
  for (; a < argc; a++) {
    size_t size = 0;
    long iters = 0, warmup = 0;
    if (sscanf(argv[a], "%zu:%ld:%ld", &size, &iters, &warmup) != 3 || iters < 1 || warmup < 0) {
      if (rank == 0) fprintf(stderr, "mpi_alltoall: bad SIZE:ITERS:WARMUP '%s'\n", argv[a]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t block = size / n, sent = uneven || sendrecv ? size : block * n, recvd = sent;
    if (uneven) {
      a2a_counts(nranks, share, size, count);
      size_t so = 0, ro = 0;
      for (size_t j = 0; j < n; j++) {
        sc[j] = (int)count[(size_t)rank * n + j];
        sd[j] = (int)so;
        so += (size_t)sc[j];
        rc[j] = (int)count[j * n + (size_t)rank];
        rd[j] = (int)ro;
        ro += (size_t)rc[j];
      }
      recvd = ro;
    }
    for (size_t g = 0; g < sent; g++) in[g] = value(rank, g);
    memset(out, 0, recvd);
#define A2A_CALL()                                                                                 \
  (sendrecv ? MPI_Sendrecv(in, (int)size, MPI_UNSIGNED_CHAR, next, 0, out, (int)size,              \
                           MPI_UNSIGNED_CHAR, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE)          \
   : uneven ? MPI_Alltoallv(in, sc, sd, MPI_UNSIGNED_CHAR, out, rc, rd, MPI_UNSIGNED_CHAR,         \
                            MPI_COMM_WORLD)                                                        \
            : MPI_Alltoall(in, (int)block, MPI_UNSIGNED_CHAR, out, (int)block, MPI_UNSIGNED_CHAR,  \
                           MPI_COMM_WORLD))
    A2A_CALL();
    long wrong = 0;
    for (size_t k = 0; sendrecv && k < size; k++) wrong += out[k] != value(prev, k);
    for (size_t i = 0; !sendrecv && i < n; i++) {
      size_t from_off = 0, len = block, at = i * block;
      if (uneven) {
        for (size_t j = 0; j < (size_t)rank; j++) from_off += count[i * n + j];
        len = (size_t)rc[i];
        at = (size_t)rd[i];
      } else {
        from_off = (size_t)rank * block;
      }
      for (size_t k = 0; k < len; k++) wrong += out[at + k] != value((int)i, from_off + k);
    }
    long allwrong = 0;
    MPI_Reduce(&wrong, &allwrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    for (long i = 0; i < warmup; i++) A2A_CALL();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) A2A_CALL();
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
  free(share);
  free(count);
  free(sc);
  MPI_Finalize();
  return status;
}
