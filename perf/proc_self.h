/* SPDX-License-Identifier: BSD-3-Clause */
/* What Linux says about this process: CPU and wall clocks, /proc/self/status
 * fields, open descriptors. Header-only, for the probes of perf/ (the Open MPI
 * one is built with mpicc alone) and the tests that count what a rank holds. */
#ifndef SC_PERF_PROC_SELF_H
#define SC_PERF_PROC_SELF_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* CPU seconds of the whole process (every thread), user and system. */
static inline double proc_cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static inline double proc_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A "Key:   N kB" line of /proc/self/status; -1 when absent. */
static inline long proc_status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  size_t klen = strlen(key);
  long v = -1;
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      v = strtol(line + klen + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

/* Open descriptors, without the one opendir itself holds (-1: unreadable);
 * with list, each one's target on stderr. */
static inline long proc_count_fds(int list) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  long n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    n++;
    if (!list) continue;
    char path[300], target[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(path, target, sizeof(target) - 1);
    target[len > 0 ? len : 0] = '\0';
    fprintf(stderr, "fd %s -> %s\n", e->d_name, target);
  }
  closedir(d);
  return n - 1;
}

#endif
