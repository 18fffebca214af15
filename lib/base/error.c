/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/error.h"
#include "lib/base/log.h"

static _Thread_local char sc_errbuf[SC_ERRMSG_MAX];

static const char *const sc_result_names[] = {
    [SC_SUCCESS] = "success",
    [SC_IN_PROGRESS] = "operation in progress",
    [SC_ERR_INVALID_ARG] = "invalid argument",
    [SC_ERR_NOMEM] = "out of memory",
    [SC_ERR_SYSTEM] = "system call failed",
    [SC_ERR_REMOTE] = "remote peer failed or sent a malformed message",
    [SC_ERR_TIMEOUT] = "timed out",
    [SC_ERR_MISMATCH] = "ranks called mismatched collectives",
    [SC_ERR_ABORTED] = "communicator aborted",
    [SC_ERR_UNSUPPORTED] = "unsupported in this build or on this machine",
    [SC_ERR_INTERNAL] = "internal error",
};

const char *sc_strerror(sc_result_t r) {
  if ((unsigned)r < sizeof(sc_result_names) / sizeof(sc_result_names[0]) && sc_result_names[r])
    return sc_result_names[r];
  return "unknown result code";
}

const char *sc_last_error(void) {
  return sc_errbuf;
}

sc_result_t sc_error_set(sc_result_t code, const char *file, int line, const char *fmt, ...) {
  char msg[SC_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  snprintf(sc_errbuf, sizeof(sc_errbuf), "%s: %s (%s:%d)", sc_strerror(code), msg, base, line);
  /* Argument errors are the caller's business; everything else is worth a line at INFO. */
  if (code != SC_ERR_INVALID_ARG) SC_INFO(SC_SUBSYS_ALL, "error: %s", sc_errbuf);
  return code;
}

void sc_error_get_detail(char *out, size_t len) {
  if (len == 0) return;
  snprintf(out, len, "%s", sc_errbuf);
}

void sc_error_set_detail(const char *detail) {
  snprintf(sc_errbuf, sizeof(sc_errbuf), "%s", detail ? detail : "");
}

void sc_errtext_set(char **slot, size_t len, const char *fmt, ...) {
  if (!*slot) *slot = malloc(len);
  if (!*slot) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(*slot, len, fmt, ap);
  va_end(ap);
}
