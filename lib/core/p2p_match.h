/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point matching, free of transports and threads so that a unit
 * test can drive it (test/unit/test_p2p_match.c): the wire header of the p2p
 * lane's frames, and per peer the two FIFO lists MPI's matching needs.
 * Receives posted to a peer are kept in post order and messages that arrived
 * before any receive wanted them in arrival order; each side takes the first
 * entry of the other with its tag. Since a sender's frames to one peer
 * arrive in the order it sent them, first fit on both lists is what makes
 * messages of one (pair, tag) non-overtaking. */
#ifndef SC_P2P_MATCH_H
#define SC_P2P_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "sparsecoll.h"

/* Bytes of a frame's control header. Every frame is one transport message of
 * SC_P2P_FRAME_BYTES (a transport needs the exact length posted): the
 * header, then for an EAGER message of at most SC_P2P_INLINE_BYTES its
 * payload, so that a small message is one message each way. A payload
 * message of exactly the header's `bytes` follows a larger EAGER's frame and
 * a DATA frame (none when 0). */
#define SC_P2P_HDR_BYTES    40
#define SC_P2P_FRAME_BYTES  128
#define SC_P2P_INLINE_BYTES (SC_P2P_FRAME_BYTES - SC_P2P_HDR_BYTES)
#define SC_P2P_MAGIC        0x53435032u /* "SCP2" */

typedef enum sc_p2p_kind {
  SC_P2P_EAGER = 1, /* sender -> receiver, payload follows */
  SC_P2P_RTS,       /* sender -> receiver: a large message waits for a CTS */
  SC_P2P_CTS,       /* receiver -> sender: send message `id` now */
  SC_P2P_DROP,      /* receiver -> sender: message `id` was refused, complete it */
  SC_P2P_DATA,      /* sender -> receiver after a CTS, payload follows */
  SC_P2P_BYE,       /* the sender's communicator is being destroyed: no more frames */
  SC_P2P_FIN,       /* receiver -> sender: message `id`'s offered buffer was read */
  SC_P2P_REVOKE,    /* sender -> receiver: message `id` timed out, drop its RTS unread */
  SC_P2P_REVOKED    /* receiver -> sender: done (a FIN, CTS or DROP came first if matched) */
} sc_p2p_kind_t;

typedef struct sc_p2p_hdr {
  sc_p2p_kind_t kind;
  sc_dtype_t dtype;
  int tag;
  uint64_t count, bytes, id;
} sc_p2p_hdr_t;

void sc_p2p_hdr_encode(const sc_p2p_hdr_t *h, uint8_t out[SC_P2P_HDR_BYTES]);
/* An RTS frame may offer the sender's buffer for the receiver to read
 * (transport.h's rget): its address, after the header; 0 (the frame's
 * zeros) offers nothing. The receiver that reads it answers FIN, one that
 * cannot answers CTS as for any RTS. */
void sc_p2p_offer_put(uint8_t frame[SC_P2P_FRAME_BYTES], uint64_t addr);
uint64_t sc_p2p_offer_get(const uint8_t frame[SC_P2P_FRAME_BYTES]);
/* Decodes and checks a header from the network: magic, kind, dtype, tag >= 0,
 * bytes == count x dtype size for EAGER/RTS/DATA, an EAGER payload's bytes <=
 * max_bytes (the eager threshold: the receiver may have to buffer it; DATA
 * is held to its receive's size by the caller). SC_ERR_REMOTE naming peer on
 * anything else. */
sc_result_t sc_p2p_hdr_decode(const uint8_t in[SC_P2P_HDR_BYTES], int peer, uint64_t max_bytes,
                              sc_p2p_hdr_t *h);

/* An entry of a matching list: a posted receive or an unexpected message.
 * Owners embed it and find themselves again with the `owner` pointer. */
typedef struct sc_p2p_entry {
  struct sc_p2p_entry *next;
  int tag;
  sc_dtype_t dtype;
  uint64_t count;
  void *owner;
} sc_p2p_entry_t;

typedef struct sc_p2p_list {
  sc_p2p_entry_t *head, *tail;
} sc_p2p_list_t;

void sc_p2p_list_push(sc_p2p_list_t *l, sc_p2p_entry_t *e);
/* Removes and returns the first entry with tag, NULL when none. */
sc_p2p_entry_t *sc_p2p_list_take(sc_p2p_list_t *l, int tag);
/* Removes e if it is on l; 1 when it was. */
int sc_p2p_list_remove(sc_p2p_list_t *l, sc_p2p_entry_t *e);

/* 0 when a receive's (count, dtype) equal a message's; otherwise 1 and
 * SC_ERR_MISMATCH recorded, naming both sides (the receiving rank, the
 * sending peer, the tag, each side's count and dtype). */
int sc_p2p_mismatch(int rank, int peer, int tag, uint64_t recv_count, sc_dtype_t recv_dtype,
                    uint64_t send_count, sc_dtype_t send_dtype);

#endif
