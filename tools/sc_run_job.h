/* SPDX-License-Identifier: BSD-3-Clause */
/* sc-run: what a job's ranks are given to find each other (rank 0's port,
 * the job's secret token), and how sc-run stops on an error of its own.
 * Needs only libc, like the rest of sc-run. */
#ifndef SC_RUN_JOB_H
#define SC_RUN_JOB_H

#define SC_RUN_NAME "sc-run"

/* Prints "sc-run: " and the message to stderr and exits 2 (sc-run's usage
 * and setup errors). */
void sc_run_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A port on the loopback address that rank 0 can bind a moment later; exits
 * through sc_run_die when none of 200 tries is free. */
int sc_run_free_port(void);

/* hex gets 64 hex digits of fresh randomness and a NUL (SC_AUTH_TOKEN);
 * exits through sc_run_die when the system has no randomness to give. */
void sc_run_make_token(char hex[65]);

#endif
