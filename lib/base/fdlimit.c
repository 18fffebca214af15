/* SPDX-License-Identifier: BSD-3-Clause */
/* File descriptors (lib/base/fdlimit.h). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "lib/base/fdlimit.h"
#include "lib/base/log.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static long g_need;
static char g_need_what[160];

/* fs.nr_open: setrlimit refuses a limit above it (RLIM_INFINITY included). */
static rlim_t nr_open(void) {
  FILE *f = fopen("/proc/sys/fs/nr_open", "r");
  unsigned long long v = 0;
  if (f) {
    if (fscanf(f, "%llu", &v) != 1) v = 0;
    fclose(f);
  }
  return v ? (rlim_t)v : (rlim_t)1048576;
}

static void raise_once(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t want = rl.rlim_max;
  rlim_t cap = nr_open();
  if (want == RLIM_INFINITY || want > cap) want = cap;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= want) return;
  rlim_t was = rl.rlim_cur;
  rl.rlim_cur = want;
  if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
    SC_INFO(SC_SUBSYS_INIT, "descriptors: RLIMIT_NOFILE's soft limit raised from %llu to %llu",
            (unsigned long long)was, (unsigned long long)want);
  else
    SC_INFO(SC_SUBSYS_INIT, "descriptors: raising RLIMIT_NOFILE from %llu to %llu failed: %s",
            (unsigned long long)was, (unsigned long long)want, strerror(errno));
}

void sc_fdlimit_raise(void) {
  pthread_once(&g_once, raise_once);
}

int32_t sc_fdlimit_soft(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
      rl.rlim_cur > (rlim_t)INT32_MAX)
    return INT32_MAX;
  return (int32_t)rl.rlim_cur;
}

void sc_fdlimit_note_need(long need, const char *what) {
  pthread_mutex_lock(&g_lock);
  if (need > g_need) {
    g_need = need;
    snprintf(g_need_what, sizeof(g_need_what), "%s", what);
  }
  pthread_mutex_unlock(&g_lock);
}

static long open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  long n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

const char *sc_fdlimit_explain(int err, char *out, size_t len) {
  struct rlimit rl;
  char soft[32] = "?", hard[32] = "?";
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur == RLIM_INFINITY)
      snprintf(soft, sizeof soft, "unlimited");
    else
      snprintf(soft, sizeof soft, "%llu", (unsigned long long)rl.rlim_cur);
    if (rl.rlim_max == RLIM_INFINITY)
      snprintf(hard, sizeof hard, "unlimited");
    else
      snprintf(hard, sizeof hard, "%llu", (unsigned long long)rl.rlim_max);
  }
  pthread_mutex_lock(&g_lock);
  long need = g_need;
  char what[sizeof(g_need_what)];
  snprintf(what, sizeof what, "%s", g_need_what);
  pthread_mutex_unlock(&g_lock);
  /* At the limit the count itself cannot be had (it needs a descriptor). */
  long held = open_fds();
  char holds[64];
  if (held >= 0)
    snprintf(holds, sizeof holds, "holds %ld descriptors", held);
  else
    snprintf(holds, sizeof holds, "holds all it may");
  char needs[256] = "";
  if (need > 0)
    snprintf(needs, sizeof needs, "; a communicator here needs about %ld (%s)", need, what);
  if (err == ENFILE)
    snprintf(out, len, "the system's table of open files is full (fs.file-max); this process %s%s",
             holds, needs);
  else
    snprintf(out, len,
             "RLIMIT_NOFILE is %s (hard limit %s; the library raised the soft limit to the hard "
             "one at init) and this process %s%s: raise the hard limit "
             "(ulimit -Hn as root, LimitNOFILE= for a systemd unit, nofile in "
             "/etc/security/limits.conf), or run fewer ranks per communicator over tcp "
             "(SC_NSOCKS=1 halves its sockets)",
             soft, hard, holds, needs);
  return out;
}
