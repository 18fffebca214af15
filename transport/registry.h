/* SPDX-License-Identifier: BSD-3-Clause */
/* The one table of transports (transport/registry.c): per transport its
 * SC_TRANSPORT name, its vtable (NULL where this build lacks it), what
 * provides it, and its part in SC_TRANSPORT=auto. The SC_TRANSPORT parser,
 * communicator creation and sc-info read it, so a new transport needs its
 * folder, its Makefile.inc and one row (plus an id here).
 *
 * The auto verdict is a pure function of facts every rank holds identically
 * after the bootstrap exchange (each rank's capability bits, whether any
 * pair spans two hosts) plus the build and the request, so every rank picks
 * the same transport for every pair; a split verdict would leave ranks
 * waiting on transports their peers never opened. */
#ifndef SC_TRANSPORT_REGISTRY_H
#define SC_TRANSPORT_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

/* SC_TRANSPORT's choices: the table's rows, in this order. */
typedef enum sc_tp_id {
  SC_TP_AUTO = 0,
  SC_TP_TCP = 1,
  SC_TP_SHM = 2,
  SC_TP_UCX = 3,
  SC_TP_VERBS = 4,
  SC_TP_COUNT
} sc_tp_id_t;

/* What a transport is to SC_TRANSPORT=auto. */
typedef enum sc_tp_auto_role {
  SC_TP_AUTO_NEVER = 0, /* opt-in: only when SC_TRANSPORT names it */
  SC_TP_AUTO_MUX,       /* auto itself: the per-peer mux (transport/mux.c) */
  SC_TP_AUTO_MUXED,     /* carried by the mux, for the peers it suits */
  SC_TP_AUTO_SWITCH     /* replaces the mux when the ranks span hosts and every rank published
                           the row's auto_cap */
} sc_tp_auto_role_t;

/* Capability bits a rank publishes in its bootstrap record (the caps of
 * lib/core/comm.h's sc_peer_head_t), one per SWITCH row. */
#define SC_TP_CAP_UCX_RDMA 0x1u /* a UCP context here opens an RDMA transport (rc, ud, dc) */

/* Under auto, a rank whose SWITCH transport opened publishes that
 * transport's address after the mux's, at this fixed offset of the record's
 * address field (the mux blob is 176 bytes; the rest is the other's room).
 * One offset: the table holds at most one SWITCH row. */
#define SC_TP_AUTO_ALT_OFF 192
_Static_assert(SC_TP_AUTO_ALT_OFF < SC_TP_ADDR_MAX, "no room for a second address");

/* A SWITCH row's opener: open the transport beside the mux, its address
 * blob in `room` bytes of addr, where it can give what auto_cap promises.
 * SC_SUCCESS with *tp set: it can; SC_SUCCESS with *tp NULL: nothing here to
 * try (cheaply known); an error: it tried and cannot, the detail says why.
 * Only *tp is left open. */
typedef sc_result_t (*sc_tp_auto_open_fn)(const sc_tp_config_t *cfg, sc_transport_t **tp,
                                          void *addr, size_t room, size_t *addrlen);

typedef struct sc_tp_entry {
  sc_tp_id_t id;
  const char *name;              /* SC_TRANSPORT's value; also ops->name */
  const sc_transport_ops_t *ops; /* NULL: not built in */
  const char *package;           /* NULL: always built; else the Debian package configure
                                    looks for ... */
  const char *configure_opt;     /* ... and the option that insists on it */
  const char *help;              /* its note in SC_TRANSPORT's help text; NULL: none */
  sc_tp_auto_role_t auto_role;
  uint32_t auto_cap;            /* SWITCH: the SC_TP_CAP_* bit every rank must publish */
  const char *auto_when;        /* SWITCH: that condition in words ("every rank has ...") */
  sc_tp_auto_open_fn auto_open; /* SWITCH: NULL where not built in */
} sc_tp_entry_t;

/* Every row, indexed by sc_tp_id_t; *n = SC_TP_COUNT. */
const sc_tp_entry_t *sc_tp_registry(size_t *n);

/* The row of id, NULL outside [0, SC_TP_COUNT). */
const sc_tp_entry_t *sc_tp_by_id(int id);

/* The row named `name` (any case). SC_ERR_INVALID_ARG, naming every valid
 * name, for any other; var names the setting in the message. */
sc_result_t sc_tp_lookup(const char *var, const char *name, const sc_tp_entry_t **out);

/* SC_SUCCESS when e is built in; SC_ERR_UNSUPPORTED naming its package and
 * configure option otherwise. */
sc_result_t sc_tp_require(const char *var, const sc_tp_entry_t *e);

/* sc_tp_lookup, then sc_tp_require: what SC_TRANSPORT's parser does. */
sc_result_t sc_tp_select(const char *var, const char *name, const sc_tp_entry_t **out);

/* The SWITCH row, built in or not; NULL where the table has none. */
const sc_tp_entry_t *sc_tp_auto_switch(void);

/* The MUXED rows' names joined by '/' ("tcp/shm"), for log lines. */
void sc_tp_muxed_names(char *buf, size_t len);

/* The transport id to run, over the table rows[0..nrows). requested:
 * SC_TRANSPORT's id, returned as is unless it is SC_TP_AUTO; caps: nranks
 * capability words `stride` bytes apart; cross_host: some pair of ranks is on
 * two hosts. The mux's children are ours and serve one host best, so auto
 * takes a SWITCH row (built in) only across hosts and only when every rank
 * published its bit. Pure: the same inputs give the same id on every rank. */
int sc_tp_auto_choose(const sc_tp_entry_t *rows, size_t nrows, int requested, int nranks,
                      const void *caps, size_t stride, int cross_host);

#endif
