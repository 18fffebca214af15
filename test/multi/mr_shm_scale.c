/* SPDX-License-Identifier: BSD-3-Clause */
/* Many ranks over shared memory (run by sc-run; test/multi/shm_scale.sh):
 *
 *   mr_shm_scale COUNT: create the communicator (timed), all-reduce COUNT
 *   int32 elements (sum) checked against the closed form of every element,
 *   then print what this process holds, from the kernel's own accounts:
 *     rank R init_ms T rss_kb A shmem_kb B pss_kb C segs S fds F ok 1 seg_kb K
 *   segs: distinct shared-memory segments (memfd "scshm" inodes) mapped in
 *   /proc/self/maps, its own ones included; pss_kb: proportional set size
 *   (smaps_rollup), shared pages divided among the processes mapping them;
 *   seg_kb: memory allocated to this rank's own segments (the rings of the
 *   pairs connected into them, whether touched yet or not).
 *   The script sums and bounds them. Rank 0 then prints the host's shared
 *   memory (/proc/meminfo Shmem) while every rank still holds its segments:
 *     host_shmem_kb K */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "perf/proc_self.h"
#include "sparsecoll.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* The kB value of line `key` in a /proc file, -1 if absent. */
static long proc_kb(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t k = strlen(key);
  while (fgets(line, sizeof(line), f))
    if (!strncmp(line, key, k) && line[k] == ':') {
      v = atol(line + k + 1);
      break;
    }
  fclose(f);
  return v;
}

/* Distinct inodes of memfd "scshm" mappings; *own_kb: the memory the
 * kernel holds for this process's own segments (mapped whole, from offset
 * 0: a peer's is mapped as its header page and one channel), from the
 * file's allocated blocks. */
static int count_segments(long *own_kb) {
  FILE *f = fopen("/proc/self/maps", "r");
  *own_kb = 0;
  if (!f) return -1;
  unsigned long inodes[4096];
  int n = 0;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    if (!strstr(line, "memfd:scshm")) continue;
    unsigned long ino = 0, lo = 0, hi = 0, off = 0;
    if (sscanf(line, "%lx-%lx %*s %lx %*s %lu", &lo, &hi, &off, &ino) != 4) continue;
    if (off == 0 && hi - lo > 4096) {
      char path[96];
      struct stat st;
      snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", lo, hi);
      if (stat(path, &st) == 0) *own_kb += (long)(st.st_blocks / 2);
    }
    int seen = 0;
    for (int i = 0; i < n && !seen; i++) seen = inodes[i] == ino;
    if (!seen && n < 4096) inodes[n++] = ino;
  }
  fclose(f);
  return n;
}

int main(int argc, char **argv) {
  size_t count = argc > 1 ? (size_t)atol(argv[1]) : 1;
  double t0 = now_ms();
  sc_comm_t *comm = NULL;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "FAIL: init: %s\n", sc_last_error());
    return 1;
  }
  double init_ms = now_ms() - t0;
  int rank, n;
  sc_comm_rank(comm, &rank);
  sc_comm_size(comm, &n);
  int32_t *buf = malloc((count ? count : 1) * sizeof(int32_t));
  if (!buf) return 1;
  for (size_t i = 0; i < count; i++) buf[i] = (int32_t)((rank + 1) * (int)(i % 7 + 1));
  int ok = 1;
  if (sc_allreduce(buf, buf, count, SC_INT32, SC_SUM, comm) != SC_SUCCESS) {
    fprintf(stderr, "rank %d FAIL: all-reduce: %s\n", rank, sc_last_error());
    ok = 0;
  }
  /* Sum over r of (r + 1) * (i % 7 + 1). */
  long long tri = (long long)n * (n + 1) / 2;
  for (size_t i = 0; ok && i < count; i++)
    if (buf[i] != (int32_t)(tri * (long long)(i % 7 + 1))) {
      fprintf(stderr, "rank %d FAIL: element %zu is %d, want %lld\n", rank, i, (int)buf[i],
              tri * (long long)(i % 7 + 1));
      ok = 0;
    }
  long seg_kb = 0;
  int segs = count_segments(&seg_kb);
  printf(
      "rank %d init_ms %.1f rss_kb %ld shmem_kb %ld pss_kb %ld segs %d fds %d ok %d seg_kb %ld\n",
      rank, init_ms, proc_kb("/proc/self/status", "VmRSS"),
      proc_kb("/proc/self/status", "RssShmem"), proc_kb("/proc/self/smaps_rollup", "Pss"), segs,
      (int)proc_count_fds(0), ok, seg_kb);
  fflush(stdout);
  /* Every rank has measured before any leaves (a leaving peer's segment
   * goes from the others' accounts); then rank 0 reads the host's shared
   * memory, this job's segments included, before any rank leaves. */
  for (int round = 0; round < 2; round++) {
    float v = 1.0f;
    sc_result_t r = sc_allreduce(&v, &v, 1, SC_FLOAT32, SC_SUM, comm);
    if (r != SC_SUCCESS || v != (float)n) ok = 0;
    if (round == 0 && rank == 0) {
      printf("host_shmem_kb %ld\n", proc_kb("/proc/meminfo", "Shmem"));
      fflush(stdout);
    }
  }
  sc_comm_destroy(comm);
  free(buf);
  return ok ? 0 : 1;
}
