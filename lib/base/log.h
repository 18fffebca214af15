/* SPDX-License-Identifier: BSD-3-Clause */
/* One logging function with levels (SC_DEBUG=WARN|INFO|TRACE) and subsystems
 * (SC_DEBUG_SUBSYS=INIT,BOOT,NET,COLL,TUNE,ALL). Lines go to stderr prefixed
 * with host, pid and rank. */
#ifndef SC_LOG_H
#define SC_LOG_H

typedef enum sc_log_level {
  SC_LOG_NONE = 0,
  SC_LOG_WARN,
  SC_LOG_INFO,
  SC_LOG_TRACE
} sc_log_level_t;

typedef enum sc_log_subsys {
  SC_SUBSYS_INIT = 1u << 0,
  SC_SUBSYS_BOOT = 1u << 1,
  SC_SUBSYS_NET = 1u << 2,
  SC_SUBSYS_COLL = 1u << 3,
  SC_SUBSYS_TUNE = 1u << 4,
  SC_SUBSYS_SHM = 1u << 5,
  SC_SUBSYS_ALL = 0xffffu
} sc_log_subsys_t;

void sc_log(sc_log_level_t level, sc_log_subsys_t subsys, const char *file, int line,
            const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int sc_log_enabled(sc_log_level_t level, sc_log_subsys_t subsys);
/* on = 1 ... on = 0 (nested): this thread's INFO lines in between show only at
 * TRACE, for work that repeats what INFO already said (a second transport's
 * setup). */
void sc_log_repeating(int on);
/* Rank shown in this thread's log prefix (-1 = unknown). */
void sc_log_set_rank(int rank);

#define SC_WARN(subsys, ...) sc_log(SC_LOG_WARN, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#define SC_INFO(subsys, ...)                                                                       \
  do {                                                                                             \
    if (sc_log_enabled(SC_LOG_INFO, (subsys)))                                                     \
      sc_log(SC_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__);                              \
  } while (0)
#define SC_TRACE(subsys, ...)                                                                      \
  do {                                                                                             \
    if (sc_log_enabled(SC_LOG_TRACE, (subsys)))                                                    \
      sc_log(SC_LOG_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__);                             \
  } while (0)

#endif
