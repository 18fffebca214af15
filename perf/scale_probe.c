/* SPDX-License-Identifier: BSD-3-Clause */
/* One rank's cost of a communicator, for perf/scale.sh: the time of
 * communicator creation, of the first 8-byte and the first 1 MiB all-reduce
 * after it (float32 sum, checked), and what the rank holds at the end: peak
 * resident memory (VmHWM), resident shared memory (RssShmem: the rings and
 * boards it maps), descriptors (/proc/self/fd), each also right after
 * creation. Run under sc-run, every rank prints one JSON line:
 *   sc-run -n P sc_scale_probe
 * perf/compare/mpi_scale_probe.c prints the same line for Open MPI. Exit
 * status 1 when a result is wrong, 2 when a call fails. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "perf/proc_self.h"
#include "perf/scale_suite.h"
#include "sparsecoll.h"

#define SC_PROBE_BIG (1u << 20) /* bytes of the second all-reduce */

/* Shared memory this rank owns: the blocks allocated in its own segment, the
 * memfd it maps whole (peers' segments are mapped a header and one channel at
 * a time, and the rank's RssShmem counts only the pages it touched). -1 when
 * there is none or /proc/self/map_files cannot be read. */
static long owned_shm_kb(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[512];
  long kb = -1;
  while (fgets(line, sizeof(line), f)) {
    unsigned long lo, hi, off;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &off) != 4) continue;
    if (perms[3] != 's' || off != 0 || !strstr(line, "/memfd:scshm")) continue;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", lo, hi);
    struct stat st;
    if (stat(path, &st) != 0 || (unsigned long)st.st_size != hi - lo) continue;
    kb = (kb < 0 ? 0 : kb) + (long)(st.st_blocks / 2);
  }
  fclose(f);
  return kb;
}

static int check_sum(const float *out, size_t count, int nranks) {
  /* Small integers: exact in float whatever the order of the sum. */
  float ranksum = (float)nranks * (float)(nranks + 1) / 2;
  for (size_t i = 0; i < count; i++)
    if (out[i] != ranksum * (float)(i % 7 + 1)) return 0;
  return 1;
}

static int allreduce_timed(sc_comm_t *comm, size_t count, int rank, int nranks, double *secs) {
  float *in = malloc(count * sizeof(float)), *out = calloc(count, sizeof(float));
  if (!in || !out) {
    fprintf(stderr, "sc_scale_probe: out of memory for %zu floats\n", count);
    free(in);
    free(out);
    return 2;
  }
  for (size_t i = 0; i < count; i++) in[i] = (float)((rank + 1) * (int)(i % 7 + 1));
  double t0 = proc_now_s();
  sc_result_t r = sc_allreduce(in, out, count, SC_FLOAT32, SC_SUM, comm);
  *secs = proc_now_s() - t0;
  int st = 0;
  if (r != SC_SUCCESS) {
    fprintf(stderr, "sc_scale_probe: rank %d: sc_allreduce of %zu floats: %s\n", rank, count,
            sc_last_error());
    st = 2;
  } else if (!check_sum(out, count, nranks)) {
    fprintf(stderr, "sc_scale_probe: rank %d: wrong sum in the %zu-float all-reduce\n", rank,
            count);
    st = 1;
  }
  free(in);
  free(out);
  return st;
}

int main(int argc, char **argv) {
  /* --list-fds: rank 0 names its descriptors on stderr at the end.
   * --suite: after the two all-reduces, the quick conformance suite
   * (perf/scale_suite.c), its time, and the descriptors after it. */
  int list = 0, suite = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--list-fds") == 0)
      list = 1;
    else if (strcmp(argv[i], "--suite") == 0)
      suite = 1;
    else {
      fprintf(stderr, "usage: sc_scale_probe [--list-fds] [--suite]\n");
      return 2;
    }
  }
  sc_comm_t *comm = NULL;
  double c0 = proc_cpu_s(), t0 = proc_now_s();
  sc_result_t r = sc_comm_init_env(&comm);
  double init_s = proc_now_s() - t0, init_cpu = proc_cpu_s() - c0;
  if (r != SC_SUCCESS) {
    fprintf(stderr, "sc_scale_probe: sc_comm_init_env: %s\n", sc_last_error());
    return 2;
  }
  long fds_init = proc_count_fds(0), shmem_init = proc_status_kb("RssShmem"),
       rss_init = proc_status_kb("VmRSS");
  int rank = 0, nranks = 0;
  if (sc_comm_rank(comm, &rank) != SC_SUCCESS || sc_comm_size(comm, &nranks) != SC_SUCCESS) {
    fprintf(stderr, "sc_scale_probe: rank or size: %s\n", sc_last_error());
    return 2;
  }
  double small_s = 0, big_s = 0, c1 = proc_cpu_s();
  int st = allreduce_timed(comm, 2, rank, nranks, &small_s);
  if (st == 0) st = allreduce_timed(comm, SC_PROBE_BIG / sizeof(float), rank, nranks, &big_s);
  double calls_cpu = proc_cpu_s() - c1;
  /* Peers the all-reduces connected (lazy) are counted before the communicator goes. */
  long fds = proc_count_fds(list && rank == 0), shmem = proc_status_kb("RssShmem"),
       hwm = proc_status_kb("VmHWM");
  long owned = owned_shm_kb();
  double suite_s = 0;
  long fds_suite = -1, owned_suite = -1;
  char what[1200] = "";
  if (suite && st == 0) {
    double t1 = proc_now_s();
    st = scale_suite_run(comm, rank, nranks, what, sizeof(what));
    suite_s = proc_now_s() - t1;
    fds_suite = proc_count_fds(0);
    owned_suite = owned_shm_kb();
    if (st != 0) fprintf(stderr, "sc_scale_probe: rank %d: suite: %s\n", rank, what);
  }
  const char *tp = getenv("SC_TRANSPORT"), *conn = getenv("SC_CONNECT");
  /* The schedules the two calls ran (the board's path on shm not told apart). */
  const char *algo_small = "?", *algo_big = "?";
  if (sc_allreduce_algo(comm, 2, SC_FLOAT32, &algo_small) != SC_SUCCESS ||
      sc_allreduce_algo(comm, SC_PROBE_BIG / sizeof(float), SC_FLOAT32, &algo_big) != SC_SUCCESS)
    algo_small = algo_big = "?";
  printf("{\"lib\":\"sc\",\"rank\":%d,\"nranks\":%d,\"transport\":\"%s\",\"connect\":\"%s\","
         "\"init_s\":%.6f,\"init_cpu_s\":%.6f,\"calls_cpu_s\":%.6f,\"ar8_s\":%.6f,\"ar1m_s\":%.6f,"
         "\"hwm_kb\":%ld,\"rss_init_kb\":%ld,"
         "\"shmem_init_kb\":%ld,\"shmem_kb\":%ld,\"shm_owned_kb\":%ld,\"fds_init\":%ld,\"fds\":%ld,"
         "\"algo8\":\"%s\",\"algo1m\":\"%s\",\"suite\":%d,\"suite_s\":%.6f,"
         "\"fds_suite\":%ld,\"shm_owned_suite_kb\":%ld,\"ok\":%d}\n",
         rank, nranks, tp ? tp : "auto", conn ? conn : "default", init_s, init_cpu, calls_cpu,
         small_s, big_s, hwm, rss_init, shmem_init, shmem, owned, fds_init, fds, algo_small,
         algo_big, suite, suite_s, fds_suite, owned_suite, st == 0);
  fflush(stdout);
  r = sc_comm_destroy(comm);
  if (r != SC_SUCCESS && st == 0) {
    fprintf(stderr, "sc_scale_probe: rank %d: sc_comm_destroy: %s\n", rank, sc_last_error());
    st = 2;
  }
  return st;
}
