/* SPDX-License-Identifier: BSD-3-Clause */
/* File descriptors: the process's limit raised once to what it may have, and
 * the words an error uses when a descriptor still cannot be had
 * (lib/base/fdlimit.c). */
#ifndef SC_BASE_FDLIMIT_H
#define SC_BASE_FDLIMIT_H

#include <stddef.h>
#include <stdint.h>

/* Raises RLIMIT_NOFILE's soft limit to its hard limit (at most the kernel's
 * fs.nr_open), once per process, as NCCL does: a communicator over TCP holds
 * descriptors per peer, and Linux's default soft limit of 1024 ends a job of
 * a few hundred ranks. Logged at INFO when it changes anything. Thread-safe. */
void sc_fdlimit_raise(void);
/* This process's soft RLIMIT_NOFILE (after sc_fdlimit_raise), capped at
 * INT32_MAX; INT32_MAX when unlimited or unreadable. */
int32_t sc_fdlimit_soft(void);

/* A communicator about to connect says how many descriptors it will hold
 * (what, for the message: "tcp, 511 peers x 2 sockets, twice (collectives and
 * point-to-point)"); the largest is what an error names. Thread-safe. */
void sc_fdlimit_note_need(long need, const char *what);

/* The explanation appended to an EMFILE/ENFILE error: the limit, the
 * descriptors this process holds, the need noted, and the fix. Returns out. */
const char *sc_fdlimit_explain(int err, char *out, size_t len);

#endif
