/* SPDX-License-Identifier: BSD-3-Clause */
/* perf/scale_probe.c's line for Open MPI: MPI_Init's time, the first 8-byte
 * and 1 MiB MPI_Allreduce after it (float32 sum, checked), peak resident
 * memory, resident shared memory and descriptors, each also right after
 * MPI_Init. Built and run by perf/scale.sh (not by the normal build, which
 * must not depend on MPI):
 *   mpicc -O2 -I TOP -o mpi_scale_probe mpi_scale_probe.c (TOP: the source tree)
 *   mpirun --oversubscribe -np P ./mpi_scale_probe
 * Every rank prints one JSON line; exit status 1 when a result is wrong. */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "perf/proc_self.h"

/* Shared memory this rank owns: the blocks allocated in its own vader
 * segment (/dev/shm/vader_segment.HOST.JOB.RANK on one host; peers' are
 * mapped too); -1 when there is none. */
static long owned_shm_kb(int rank) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[512], suffix[32];
  snprintf(suffix, sizeof(suffix), ".%d", rank);
  long kb = -1;
  while (fgets(line, sizeof(line), f)) {
    char *path = strstr(line, "/dev/shm/vader_segment.");
    if (!path) continue;
    path[strcspn(path, "\n")] = '\0';
    size_t n = strlen(path), sl = strlen(suffix);
    if (n < sl || strcmp(path + n - sl, suffix) != 0) continue;
    struct stat st;
    if (stat(path, &st) == 0) kb = (long)(st.st_blocks / 2);
    break;
  }
  fclose(f);
  return kb;
}

static int allreduce_timed(int count, int rank, int nranks, double *secs) {
  float *in = malloc((size_t)count * sizeof(float)), *out = calloc((size_t)count, sizeof(float));
  if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int i = 0; i < count; i++) in[i] = (float)((rank + 1) * (i % 7 + 1));
  double t0 = proc_now_s();
  MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  *secs = proc_now_s() - t0;
  float ranksum = (float)nranks * (float)(nranks + 1) / 2;
  int ok = 1;
  for (int i = 0; i < count; i++) ok &= out[i] == ranksum * (float)(i % 7 + 1);
  free(in);
  free(out);
  return ok;
}

int main(int argc, char **argv) {
  double c0 = proc_cpu_s(), t0 = proc_now_s();
  MPI_Init(&argc, &argv);
  double init_s = proc_now_s() - t0, init_cpu = proc_cpu_s() - c0;
  long fds_init = proc_count_fds(0), shmem_init = proc_status_kb("RssShmem"),
       rss_init = proc_status_kb("VmRSS");
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  double small_s = 0, big_s = 0, c1 = proc_cpu_s();
  int ok = allreduce_timed(2, rank, nranks, &small_s);
  ok &= allreduce_timed((1 << 20) / (int)sizeof(float), rank, nranks, &big_s);
  double calls_cpu = proc_cpu_s() - c1;
  long fds = proc_count_fds(0), shmem = proc_status_kb("RssShmem"), hwm = proc_status_kb("VmHWM");
  long owned = owned_shm_kb(rank);
  const char *btl = getenv("OMPI_MCA_btl");
  printf("{\"lib\":\"mpi\",\"rank\":%d,\"nranks\":%d,\"transport\":\"%s\",\"connect\":\"mpi\","
         "\"init_s\":%.6f,\"init_cpu_s\":%.6f,\"calls_cpu_s\":%.6f,\"ar8_s\":%.6f,\"ar1m_s\":%.6f,"
         "\"hwm_kb\":%ld,\"rss_init_kb\":%ld,"
         "\"shmem_init_kb\":%ld,\"shmem_kb\":%ld,\"shm_owned_kb\":%ld,\"fds_init\":%ld,\"fds\":%ld,"
         "\"ok\":%d}\n",
         rank, nranks, btl ? btl : "default", init_s, init_cpu, calls_cpu, small_s, big_s, hwm,
         rss_init, shmem_init, shmem, owned, fds_init, fds, ok);
  fflush(stdout);
  MPI_Finalize();
  return ok ? 0 : 1;
}
