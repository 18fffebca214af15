/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/base/config.h"
#include "lib/base/log.h"

static pthread_once_t sc_log_once = PTHREAD_ONCE_INIT;
static sc_log_level_t sc_log_level = SC_LOG_WARN;
static unsigned sc_log_mask = SC_SUBSYS_ALL;
static char sc_log_host[64];
static _Thread_local int sc_log_rank = -1;

static const struct {
  const char *name;
  unsigned bit;
} sc_subsys_names[] = {
    {"INIT", SC_SUBSYS_INIT}, {"BOOT", SC_SUBSYS_BOOT}, {"NET", SC_SUBSYS_NET},
    {"COLL", SC_SUBSYS_COLL}, {"TUNE", SC_SUBSYS_TUNE}, {"SHM", SC_SUBSYS_SHM},
    {"ALL", SC_SUBSYS_ALL},
};

static void sc_log_init(void) {
  const char *lvl = sc_config_get("SC_DEBUG");
  if (lvl) {
    if (!strcasecmp(lvl, "NONE"))
      sc_log_level = SC_LOG_NONE;
    else if (!strcasecmp(lvl, "INFO"))
      sc_log_level = SC_LOG_INFO;
    else if (!strcasecmp(lvl, "TRACE"))
      sc_log_level = SC_LOG_TRACE;
    else
      sc_log_level = SC_LOG_WARN;
  }
  const char *sub = sc_config_get("SC_DEBUG_SUBSYS");
  if (sub && *sub) {
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s", sub);
    unsigned mask = 0;
    char *save = NULL;
    for (char *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
      for (size_t i = 0; i < sizeof(sc_subsys_names) / sizeof(sc_subsys_names[0]); i++)
        if (!strcasecmp(tok, sc_subsys_names[i].name)) mask |= sc_subsys_names[i].bit;
    if (mask) sc_log_mask = mask;
  }
  if (gethostname(sc_log_host, sizeof(sc_log_host)) != 0)
    snprintf(sc_log_host, sizeof(sc_log_host), "?");
  sc_log_host[sizeof(sc_log_host) - 1] = '\0';
}

/* > 0 while this thread does something a second time (lib/core/p2p.c's
 * lane repeats the transport's setup): its INFO lines are shown at TRACE. */
static _Thread_local int sc_log_repeat;

void sc_log_repeating(int on) {
  sc_log_repeat += on ? 1 : -1;
}

int sc_log_enabled(sc_log_level_t level, sc_log_subsys_t subsys) {
  pthread_once(&sc_log_once, sc_log_init);
  if (level == SC_LOG_INFO && sc_log_repeat > 0) level = SC_LOG_TRACE;
  return level <= sc_log_level && (sc_log_mask & (unsigned)subsys);
}

void sc_log_set_rank(int rank) {
  sc_log_rank = rank;
}

void sc_log(sc_log_level_t level, sc_log_subsys_t subsys, const char *file, int line,
            const char *fmt, ...) {
  if (!sc_log_enabled(level, subsys)) return;
  static const char *const lvlname[] = {"", "WARN", "INFO", "TRACE"};
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  struct timeval tv;
  gettimeofday(&tv, NULL);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  /* One write per line, so that the lines of threads and of the ranks
   * sharing a pipe or file do not interleave: an unbuffered stderr does not
   * promise it (glibc 2.37 and later write a long fprintf to it in pieces of
   * 128 bytes; on an H200 machine the ranks' lines came out cut into each
   * other). */
  char out[sizeof(msg) + 256];
  int n = snprintf(out, sizeof(out), "%s:%d:%d [%ld.%06ld] SC %s %s:%d %s\n", sc_log_host,
                   (int)getpid(), sc_log_rank, (long)tv.tv_sec, (long)tv.tv_usec, lvlname[level],
                   base, line, msg);
  if (n < 0) return;
  size_t len = (size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1;
  if ((size_t)n >= sizeof(out)) out[len - 1] = '\n';
  fflush(stderr); /* what the program printed to stderr itself comes first */
  for (size_t done = 0; done < len;) {
    ssize_t w = write(STDERR_FILENO, out + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += (size_t)w;
  }
}
