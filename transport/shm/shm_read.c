/* SPDX-License-Identifier: BSD-3-Clause */
/* Reads of a peer's memory by single copy (process_vm_readv): the
 * receiver's side of a single-copy record (shm.c) and the point-to-point
 * lane's read of an offered buffer (transport.h's rget). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "lib/base/error.h"
#include "transport/shm/shm_internal.h"

/* A sender that cancels (or withdraws an offered buffer) sets `closed`
 * before it may reuse the buffer, so a read that overlapped the reuse sees
 * the flag when it looks afterwards. */
sc_result_t sc_shm_cma_copy(sc_shm_transport_t *tp, sc_shm_peer_t *p, uint8_t *buf, size_t len,
                            uint64_t at, int offered) {
  if (sc_shm_chan_closed(p)) return sc_shm_peer_fail(tp, p, SC_SHM_CLOSED_TEXT);
  size_t done = 0;
  while (done < len) {
    struct iovec l = {.iov_base = buf + done, .iov_len = len - done};
    struct iovec rm = {.iov_base = (void *)(uintptr_t)(at + done), .iov_len = len - done};
    ssize_t n = process_vm_readv(p->pid, &l, 1, &rm, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ESRCH) return sc_shm_peer_fail(tp, p, "exited");
    if (n <= 0 && sc_shm_chan_closed(p)) return sc_shm_peer_fail(tp, p, SC_SHM_CLOSED_TEXT);
    if (n <= 0 && offered) return SC_ERR_UNSUPPORTED;
    if (n <= 0)
      return sc_shm_peer_fail(tp, p, "could not be read at %#llx (%zu bytes): %s",
                              (unsigned long long)(at + done), len - done,
                              n < 0 ? strerror(errno) : "no progress");
    done += (size_t)n;
  }
  if (sc_shm_chan_closed(p)) return sc_shm_peer_fail(tp, p, SC_SHM_CLOSED_TEXT);
  return SC_SUCCESS;
}

/* The pair must be set up: the offer came over its ring. */
sc_result_t sc_shm_rget(sc_transport_t *base, int peer, void *buf, uint64_t at, size_t len) {
  sc_shm_transport_t *tp = sc_shm_of(base);
  sc_shm_peer_t *p = sc_shm_other(tp, peer);
  if (!p || !buf) return SC_ERR(SC_ERR_INVALID_ARG, "shm rget: bad arguments (peer %d)", peer);
  if (p->dead) return SC_ERR(SC_ERR_REMOTE, "%s", sc_shm_peer_err(p));
  if (!p->local || !p->ready || __atomic_load_n(&p->rx.ctl->cma_ok, __ATOMIC_ACQUIRE) != 1)
    return SC_ERR_UNSUPPORTED;
  return sc_shm_cma_copy(tp, p, buf, len, at, 1);
}

int sc_shm_peer_reads(sc_transport_t *base, int peer) {
  const sc_shm_peer_t *p = sc_shm_other(sc_shm_of(base), peer);
  return p && p->local && p->ready && !p->dead &&
         __atomic_load_n(&p->tx.ctl->cma_ok, __ATOMIC_ACQUIRE) == 1;
}
