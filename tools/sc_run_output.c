/* SPDX-License-Identifier: BSD-3-Clause */
/* sc-run --label: relaying the ranks' output (sc_run_output.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/sc_run_output.h"

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return; /* e.g. EPIPE after `| head`: drop the output, keep managing the ranks */
    }
    p += w;
    n -= (size_t)w;
  }
}

/* One write per line so that lines from different ranks never interleave. */
void sc_run_emit_labelled(int out_fd, int rank, const char *line, size_t len, int add_newline) {
  static char out[SC_RUN_LINE_MAX + 32];
  int pre = snprintf(out, sizeof(out), "[%d] ", rank);
  memcpy(out + pre, line, len);
  size_t total = (size_t)pre + len;
  if (add_newline) out[total++] = '\n';
  write_all(out_fd, out, total);
}

/* Reads what is available, at most max_reads times so that a rank that
 * writes without pause cannot starve the reaping and the deadlines; returns 0
 * at EOF or error (stream closed). */
int sc_run_pump_stream(sc_run_stream_t *s, int rank, int max_reads) {
  for (int reads = 0;; reads++) {
    if (reads == max_reads) return 1;
    if (s->used == SC_RUN_LINE_MAX) {
      sc_run_emit_labelled(s->out_fd, rank, s->buf, s->used, 1);
      s->used = 0;
    }
    ssize_t n = read(s->fd, s->buf + s->used, SC_RUN_LINE_MAX - s->used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
    if (n <= 0) break;
    size_t start = 0, end = s->used + (size_t)n;
    for (size_t i = s->used; i < end; i++) {
      if (s->buf[i] != '\n') continue;
      sc_run_emit_labelled(s->out_fd, rank, s->buf + start, i + 1 - start, 0);
      start = i + 1;
    }
    memmove(s->buf, s->buf + start, end - start);
    s->used = end - start;
  }
  if (s->used) sc_run_emit_labelled(s->out_fd, rank, s->buf, s->used, 1);
  s->used = 0;
  close(s->fd);
  s->fd = -1;
  return 0;
}
