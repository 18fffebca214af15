/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers of the TCP transport unit tests (test_tcp.c, test_tcp_stripe.c):
 * several transport instances in one process over loopback, driven by
 * threads, exchanging patterned messages that carry prints and are checked
 * byte for byte. */
#ifndef SC_TEST_TCP_NODES_H
#define SC_TEST_TCP_NODES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/error.h"
#include "transport/transport.h"

#define MAXN     4
#define MAXSIZES 32
#define NMSG     400
/* Connection setup's bound: setup takes milliseconds; the bound only ends a
 * broken one, and must hold on a loaded machine under ASan too. */
#define NODES_SETUP_MS 30000

extern const sc_transport_ops_t *ops;
extern uint8_t secret[SC_SECRET_LEN];
/* Configuration of the nodes the next create_nodes makes (reset_cfg before each test). */
extern int cfg_nsocks[MAXN];
extern int cfg_spin_us;
extern int cfg_lazy; /* SC_CONNECT=lazy for the nodes */
extern const size_t sizes[5];
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

typedef struct node {
  pthread_t tid;
  sc_transport_t *tp;
  int rank, nranks;
  uint8_t *addrs; /* shared table, nranks * SC_TP_ADDR_MAX */
  sc_result_t res;
  char err[SC_ERRMSG_MAX];
  int seq_base;
  int nmsgs;
  const size_t *sizes; /* exchange_main: every size to every peer */
  size_t nsizes;
} node_t;

typedef struct many_cfg {
  int nmsgs;
  size_t (*len)(int seq);
  int window; /* receives posted at a time per peer; 0: all at once */
} many_cfg_t;
extern many_cfg_t many_cfg;

void set_nsocks(int n);
int reset_cfg(void **state);
/* Random job secret (group setup). */
int tcp_test_setup(void **state);
/* host: where the route hint points, so that the nodes advertise it. */
void create_nodes_on(node_t *nodes, int n, uint8_t *addrs, int timeout_ms, const char *host);
void create_nodes(node_t *nodes, int n, uint8_t *addrs, int timeout_ms);
void *connect_main(void *arg);
void connect_nodes(node_t *nodes, int n);
void destroy_nodes(node_t *nodes, int n);
void pattern(uint8_t *buf, size_t len, int src, int dst, int seq);
/* The print of message seq from src to dst, as its send carries it (never all
 * zero) and as its receive posts it: the same, except every third receive,
 * which posts none and so checks none. */
void msg_print(uint8_t fp[SC_TP_FP_LEN], int src, int dst, int seq, int receiving);
int check_pattern(const uint8_t *buf, size_t len, int src, int dst, int seq);
sc_result_t drive(sc_transport_t *tp, sc_tp_req_t *reqs, int nreq, int timeout_ms, char *err,
                  size_t errlen);
void *exchange_main(void *arg);
void run_threads(node_t *nodes, int n, void *(*fn)(void *));
/* n nodes, every size in sz (NULL: sizes) to every peer, checked. */
void exchange(int n, const size_t *sz, size_t nsz);
size_t msg_len(int seq);
size_t msg_len_striped(int seq);
void *many_main(void *arg);
void many(int n, int nmsgs, size_t (*len)(int), int window);
sc_result_t recv_until_error(node_t *nodes, sc_tp_req_t *rr);

#endif
