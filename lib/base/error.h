/* SPDX-License-Identifier: BSD-3-Clause */
/* Errors: every function returns sc_result_t; the place where an error starts
 * records a thread-local detail (what, where, which peer) with SC_ERR, and
 * callers propagate with SC_CHECK. */
#ifndef SC_ERROR_H
#define SC_ERROR_H

#include "sparsecoll.h"

#define SC_ERRMSG_MAX 1024

/* Records the detail for this thread and returns code, so that
 * `return SC_ERR(SC_ERR_REMOTE, "peer %d closed", p);` reads naturally. */
sc_result_t sc_error_set(sc_result_t code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define SC_ERR(code, ...) sc_error_set((code), __FILE__, __LINE__, __VA_ARGS__)

/* Copy the current thread's detail in/out (to hand an error across threads,
 * e.g. from the progress thread to the thread that waits on a request). */
void sc_error_get_detail(char *out, size_t len);
void sc_error_set_detail(const char *detail);

/* A failed peer's reason, kept by the transports and the point-to-point lane:
 * allocated (len bytes) when first set, since every rank keeps an entry per
 * rank of the job and few ever fail. sc_errtext reads one back, with a fixed
 * text when there was no memory for it. Free *slot with free(). */
void sc_errtext_set(char **slot, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline const char *sc_errtext(const char *text) {
  return text ? text : "failed (no memory for the error text)";
}

#define SC_CHECK(call)                                                                             \
  do {                                                                                             \
    sc_result_t sc_check_res_ = (call);                                                            \
    if (sc_check_res_ != SC_SUCCESS) return sc_check_res_;                                         \
  } while (0)

/* Jump to a cleanup label with res set. */
#define SC_CHECK_GOTO(call, res, label)                                                            \
  do {                                                                                             \
    (res) = (call);                                                                                \
    if ((res) != SC_SUCCESS) goto label;                                                           \
  } while (0)

#endif
