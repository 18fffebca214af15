/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI-free rendezvous. A bootstrap root service (a thread in the process that
 * called sc_get_unique_id, or in rank 0 for the environment path) collects one
 * fixed-size blob from every rank, and the whole table goes back down a
 * binomial tree. A rank's connection to the root carries its blob and an
 * ack, then closes; the root delivers the table, with every rank's listener
 * address, to its ceil(log2(nranks + 1)) children in the tree over
 * connections it opens to their listeners, and each rank passes it on to its
 * own children before sc_bootstrap_exchange returns; a failed job's reason
 * goes from the root to every rank. The root has a bounded number of
 * connections open at once (SC_BOOT_CONN_MAX), so it never holds one
 * descriptor per rank. Every connection presents the job secret first; a
 * wrong secret or garbage is dropped and logged, and the rendezvous goes on.
 * Everything is bounded by a timeout; the root's error names the ranks that
 * never checked in. */
#ifndef SC_BOOTSTRAP_H
#define SC_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/base/socket.h"
#include "sparsecoll.h"

/* Largest per-rank blob the root accepts (bounds what it allocates). */
#define SC_BOOT_BLOB_MAX 1024

/* Unique id <-> (root address, secret). decode rejects anything that is not an
 * id this library produced (SC_ERR_INVALID_ARG). */
sc_result_t sc_unique_id_encode(const sc_sockaddr_t *root, const uint8_t secret[SC_SECRET_LEN],
                                sc_unique_id_t *id);
sc_result_t sc_unique_id_decode(const sc_unique_id_t *id, sc_sockaddr_t *root,
                                uint8_t secret[SC_SECRET_LEN]);

/* Start the root service listening on `bind` (port 0: ephemeral). Returns the
 * address it is reachable at in *bound. The service runs on a detached thread
 * and ends when every rank got the table, or after timeout_ms. */
sc_result_t sc_bootstrap_root_start(const sc_sockaddr_t *bind, const uint8_t secret[SC_SECRET_LEN],
                                    int timeout_ms, sc_sockaddr_t *bound);
/* Waits up to max_ms for the root services of this process to end (to have
 * told every rank the job's outcome or given up). */
void sc_bootstrap_root_drain(int max_ms);

/* Check in with the root (retrying until it listens) and receive every rank's
 * blob: all = nranks * bloblen bytes, rank-major. Listens meanwhile on a free
 * port of the address its connection to the root leaves from, where the root
 * or this rank's parent in the tree delivers the table; a connection there
 * without the answer's header and the secret is dropped with a warning. Then
 * passes the table on to this rank's children (a child that cannot be
 * reached is logged, and its children served in its place; that is no error
 * of this rank's). Errors: SC_ERR_TIMEOUT (names the missing ranks when the
 * root could tell, else the rank the table comes through), SC_ERR_INVALID_ARG
 * (the root reported wrong nranks / duplicate rank), SC_ERR_REMOTE (garbage
 * from the root), SC_ERR_NOMEM. */
sc_result_t sc_bootstrap_exchange(const sc_sockaddr_t *root, const uint8_t secret[SC_SECRET_LEN],
                                  int rank, int nranks, const void *blob, size_t bloblen, void *all,
                                  int timeout_ms);

#endif
