/* SPDX-License-Identifier: BSD-3-Clause */
/* For test/tools/bind_test.sh: after sc_comm_init_env (which starts the
 * progress thread) and one all-reduce, prints "RANK CPUS THREADS SAME":
 * the main thread's Cpus_allowed_list, how many threads the process has,
 * and 1 if every one of them (the progress thread included) has the same
 * list. Read from /proc/self/task/TID/status, the kernel's own view. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "sparsecoll.h"

static int cpus_of(const char *status, char *out, size_t len) {
  FILE *f = fopen(status, "r");
  char line[1024];
  int found = 0;
  while (f && fgets(line, sizeof(line), f))
    if (!strncmp(line, "Cpus_allowed_list:", 18)) {
      const char *v = line + 18;
      while (*v == ' ' || *v == '\t') v++;
      snprintf(out, len, "%s", v);
      out[strcspn(out, "\n")] = '\0';
      found = 1;
    }
  if (f) fclose(f);
  return found ? 0 : -1;
}

int main(void) {
  sc_comm_t *comm;
  if (sc_comm_init_env(&comm) != SC_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", sc_last_error());
    return 1;
  }
  int rank;
  sc_comm_rank(comm, &rank);
  double v = 1;
  if (sc_allreduce(&v, &v, 1, SC_FLOAT64, SC_SUM, comm) != SC_SUCCESS) {
    fprintf(stderr, "allreduce failed: %s\n", sc_last_error());
    return 1;
  }
  char mine[512], other[512], path[300];
  if (cpus_of("/proc/self/status", mine, sizeof(mine)) != 0) return 1;
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  int threads = 0, same = 1;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "/proc/self/task/%.200s/status", e->d_name);
    if (cpus_of(path, other, sizeof(other)) != 0) continue;
    threads++;
    if (strcmp(other, mine)) same = 0;
  }
  if (d) closedir(d);
  printf("%d %s %d %d\n", rank, mine, threads, same);
  sc_comm_destroy(comm);
  return 0;
}
