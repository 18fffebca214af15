/* SPDX-License-Identifier: BSD-3-Clause */
/* sc-run --label: a rank's output relayed line by line, each line prefixed
 * with "[rank] " and written whole, so that lines of different ranks never
 * interleave. Needs only libc, like the rest of sc-run. */
#ifndef SC_RUN_OUTPUT_H
#define SC_RUN_OUTPUT_H

#include <stddef.h>

#define SC_RUN_LINE_MAX 65536 /* longer lines are split, each piece labelled */

typedef struct sc_run_stream {
  int fd;     /* read end of the rank's pipe; -1 once closed */
  int out_fd; /* where labelled lines go: 1 or 2 */
  int rank;
  size_t used;
  char *buf; /* SC_RUN_LINE_MAX bytes: the line read so far */
} sc_run_stream_t;

/* Writes line (len bytes, a newline added when add_newline) to out_fd as one
 * labelled write; output that cannot be written (a closed pipe) is dropped. */
void sc_run_emit_labelled(int out_fd, int rank, const char *line, size_t len, int add_newline);

/* Reads what s's pipe has, at most max_reads times, and relays its whole
 * lines; returns 1 while the pipe is open, 0 once it is closed (at its end or
 * an error: what was left is relayed and s->fd set to -1). */
int sc_run_pump_stream(sc_run_stream_t *s, int rank, int max_reads);

#endif
