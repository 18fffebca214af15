/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers of the shared-memory transport unit tests (test_shm.c,
 * test_shm_print.c): whole transports of several ranks in one process,
 * connected by one thread per rank, then driven round-robin from one. */
#ifndef SC_TEST_SHM_NODES_H
#define SC_TEST_SHM_NODES_H

#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "transport/transport.h"

#define MAXN 3

typedef struct node {
  sc_transport_t *tp;
  sc_tp_config_t cfg;
  sc_result_t res;
} node_t;

/* The transport the nodes are made of: shared memory unless a test sets
 * another (the mux, whose peers are then all shared memory's). */
extern const sc_transport_ops_t *ops;
extern node_t nodes[MAXN];
extern uint8_t addrs[MAXN][SC_TP_ADDR_MAX];
/* Under the mux, setup_n makes this rank (when >= 0) look like one on
 * another host, so that its pairs go over TCP. */
extern int remote_rank;
/* setup_n's ranks connect their pairs on first use (sc_tp_config_t's
 * connect_lazy), but eager_rank (when >= 0); 0 and -1 unless a test sets
 * them. */
extern int lazy_nodes, eager_rank;

/* n connected ranks in nodes[0..n); no file left in /dev/shm. */
void setup_n(int n);
void teardown_n(int n);
/* Drive every transport until the requests finish; returns the first error. */
sc_result_t drive(int n, sc_tp_req_t **reqs, int nreq);
void fill(uint8_t *p, size_t n, uint32_t salt);

#endif
